//! Keeping a band table exact: `_minhash_sync`, the one trigger function behind the sync triggers:
//! the four `AFTER ... FOR EACH STATEMENT` triggers `minhash_index_create` puts on an indexed table
//! (`minhash_sync_insert`, `_update`, `_delete` and `_truncate`), and on every table of its
//! partition tree if it is partitioned: a statement on the partitioned table fires only its
//! triggers, whose transition tables hold every row it routed to a partition (and both
//! versions of a row it moved to another partition), and a statement on a partition fires only
//! the partition's.
//! The same function serves the row trigger beside them, `"~minhash_sync_claim"`, which claims
//! an updated text's band rows at once where a duplicate check does not ([`claim_update`]).
//!
//! It trusts nothing about how it was fired. The firing table (or the root of its partition
//! tree) must have a catalog row (it keeps the band table of each index of the table), the
//! trigger must be one of ours by name and fire on the event its name says, and the statement's
//! rows come only from the transition tables in the trigger data; otherwise it refuses with
//! 39P01, except that an INSERT into a table without a catalog row does nothing (a data-only
//! restore loads some tables before the catalog; see `restore`). The band table must still be the plain table `minhash_index_create` made, owned by
//! the table's owner (55000 and 42501 otherwise). Then, as the table's owner inside a
//! security-restricted operation (`owner`), it adds the band rows of new rows with one prepared
//! `INSERT` per batch and deletes those of old rows with one prepared `DELETE` per batch, both
//! through SPI: the executor writes the heap and the indexes. (Writing them directly, as COPY
//! does, was measured at about 1.2 times the speed of this on bulk inserts, too little to pay
//! for the executor internals it needed, which change between PostgreSQL versions.)
//!
//! An `UPDATE` leaves the band rows of a row alone when its id and the bytes of its text stay
//! the same. A `TRUNCATE` of the indexed table empties the band table; one of a partition
//! deletes the band rows whose id is no longer in the table.

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::ffi::{c_int, CStr};

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgMemoryContexts, PgOid, PgSqlErrorCode};

use crate::core::capacity;
use crate::core::sketch::BandSketch;
use crate::pg::compat;
use crate::pg::error::raise;

use super::band::{band_entry, band_row, BandRow};
use super::catalog::with_prepared;
use super::claim;
use super::extension::Extension;
use super::key::{Id, KeyType};
use super::prepared::{self, Access};
use super::spi::for_each_text_row;
use super::text::{utf8, TextReader};
use crate::pg::names::{qualified_name, quote_ident_str, regclass_name, relation_name};

use super::catalog::{indexed_table, refuse_newer_index, IndexConfig};
use super::citus::{self, Shard};
use super::owner::{as_owner, relation_owner};
use super::restore::{self, only_load_trigger};
use super::trigger::trigger_args;

/// Band rows gathered before one `INSERT` writes them.
const INSERT_BATCH: usize = 10_000;

/// Band rows `(id, key)` gathered before one `DELETE` removes them.
const DELETE_BATCH: usize = 10_000;

/// The band table's columns, in order, as `minhash_index_create` makes them.
const BAND_COLUMNS: [&str; 4] = ["id", "key", "sketch1", "sketch2"];

/// What fired the trigger.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Event {
    Insert,
    Update,
    Delete,
    Truncate,
}

impl Event {
    /// The name of the trigger of ours that fires on this event.
    fn trigger_name(self) -> &'static str {
        match self {
            Event::Insert => "minhash_sync_insert",
            Event::Update => "minhash_sync_update",
            Event::Delete => "minhash_sync_delete",
            Event::Truncate => "minhash_sync_truncate",
        }
    }

    /// Whether trigger `name` is one of ours as Citus names its copy on a shard
    /// (`<trigger>_<shard id>`): the name and the shard id.
    fn citus_copy(name: &str) -> Option<(&str, &str)> {
        let (ours, suffix) = name.rsplit_once('_')?;
        let events = [Event::Insert, Event::Update, Event::Delete, Event::Truncate];
        (!suffix.is_empty()
            && suffix.bytes().all(|b| b.is_ascii_digit())
            && events.iter().any(|e| e.trigger_name() == ours))
        .then_some((name, suffix))
    }
}

/// Trigger function of the sync triggers of an indexed table (see the module documentation).
// (created in schema minhash_internal by sql/index.sql)
#[pg_trigger(sql = false)]
fn _minhash_sync<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    let data = trigger.trigger_data();
    if data.tg_event & pg_sys::TRIGGER_EVENT_ROW != 0 {
        return Ok(claim_update(trigger));
    }
    // SAFETY: a trigger's relation is open while it fires.
    let fired_on = unsafe { (*data.tg_relation).rd_id };
    // (of a shard of a Citus table, that table; see `citus`)
    let shard = Shard::of(fired_on, &relation_name(fired_on));
    // (of a partition, the partitioned table the index is on, and its owner's: the index and
    // its band table are that owner's)
    let (tbl, owner) = match shard {
        Some(shard) => (shard.table, relation_owner(shard.table)),
        // SAFETY: as above.
        None => unsafe { indexed_table(data.tg_relation) },
    };
    let event = fired_by(data, trigger.trigger(), shard).unwrap_or_else(|| {
        // (a shard Citus is still making, of a table indexed before it became a Citus table)
        if let Some((name, shard_id)) = trigger.name().ok().and_then(Event::citus_copy) {
            let relname = relation_name(fired_on);
            let table = relname
                .strip_suffix(&format!("_{shard_id}"))
                .unwrap_or(&relname);
            citus::refuse_index_before_citus(table, name);
        }
        not_ours(trigger.name().unwrap_or("?"), fired_on)
    });
    let fn_oid = trigger.trigger().tgfoid;
    let indexes = Spi::connect(|client| match shard {
        Some(_) => IndexConfig::of_trigger(client, fn_oid, tbl, &trigger_args(trigger.trigger())),
        None => IndexConfig::of_table(client, fn_oid, tbl),
    });
    if indexes.is_empty() {
        if let Some(shard) = shard {
            // (Citus copied a trigger made without the arguments its shards need)
            citus::refuse_index_before_citus(
                &relation_name(shard.table),
                trigger.name().unwrap_or("?"),
            );
        }
        // (our trigger fired: the index exists, maybe not in this transaction's snapshot)
        refuse_newer_index(tbl);
        // A data-only restore may load a table before the catalog row of its index; the band
        // rows come from the dump then (see `restore`).
        if event == Event::Insert {
            return Ok(None);
        }
        no_index(fired_on);
    }
    as_owner(owner, || {
        // SAFETY: each band table is opened and locked as a DELETE or INSERT would, checked,
        // and closed again by `BandTable`; the transition tables are those of this trigger
        // event.
        unsafe {
            let ext = Extension::of_function(fn_oid);
            for cfg in indexes.iter() {
                let band = match shard {
                    Some(shard) => BandTable::open_shard(cfg, shard, owner, ext),
                    None => BandTable::open(cfg, cfg.band_table, tbl, owner, ext),
                };
                // (on a Citus shard, rows are written on the workers a statement runs on)
                let followed =
                    shard.is_none() && event != Event::Truncate && followed_sync(cfg.band_table);
                match event {
                    _ if followed => {
                        reconcile(data, cfg, &band, event);
                        band.close();
                    }
                    Event::Insert => {
                        insert_band_rows(data, cfg, &band, data.tg_newtable, None);
                        band.close();
                    }
                    Event::Delete => {
                        delete_band_rows(data, cfg, &band, data.tg_oldtable, None);
                        band.close();
                    }
                    Event::Update => {
                        let pairs = Some((data.tg_oldtable, data.tg_newtable));
                        delete_band_rows(data, cfg, &band, data.tg_oldtable, pairs);
                        insert_band_rows(data, cfg, &band, data.tg_newtable, pairs);
                        band.close();
                    }
                    // (TRUNCATE refuses a table this session has open)
                    Event::Truncate if fired_on == tbl || shard.is_some() => {
                        band.close_and_truncate()
                    }
                    Event::Truncate => {
                        band.delete_missing(cfg);
                        band.close();
                    }
                }
            }
        }
    });
    Ok(None)
}

/// The name of the row trigger beside the sync triggers: `BEFORE UPDATE ... FOR EACH ROW`,
/// named to fire after every BEFORE trigger with an ASCII name, so that it sees the row as it
/// will be stored.
pub(super) const CLAIM_TRIGGER: &str = "~minhash_sync_claim";

/// The claim trigger (see [`CLAIM_TRIGGER`]): for a table whose duplicate check
/// (`minhash_flag_duplicate`) fires on INSERT but not on every UPDATE, an UPDATE that changes a
/// row's text claims the new text's band rows at once, as a check would (see `claim`), so that
/// a concurrent writer's check finds the row under its new text and waits for this
/// transaction, rather than missing it until the statement's sync. Does nothing otherwise (and
/// on a shard of a Citus table, where checks make no claims); the sync trigger of the
/// statement then writes the row's band rows as usual.
fn claim_update<'a>(trigger: &'a PgTrigger<'a>) -> Option<PgHeapTuple<'a, AllocatedByPostgres>> {
    let data = trigger.trigger_data();
    let flags = data.tg_event;
    let new = trigger.new();
    // SAFETY: a trigger's name is a C string.
    let name = unsafe { CStr::from_ptr(trigger.trigger().tgname) };
    let claim_name = claim_trigger_name(name.to_bytes());
    if flags & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_BEFORE
        || flags & pg_sys::TRIGGER_EVENT_OPMASK != pg_sys::TRIGGER_EVENT_UPDATE
        || claim_name.is_none()
    {
        // SAFETY: a trigger's relation is open while it fires.
        not_ours(&name.to_string_lossy(), unsafe {
            (*data.tg_relation).rd_id
        });
    }
    let fn_oid = trigger.trigger().tgfoid;
    // SAFETY: a row trigger's relation is open while it fires.
    let unchecked = unsafe { unchecked_updates(data.tg_relation, fn_oid) };
    if claim_name == Some(ClaimName::ShardCopy) || !unchecked {
        return new;
    }
    // SAFETY: as above.
    let (fired_on, tupdesc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    // SAFETY: as above.
    let (tbl, owner) = unsafe { indexed_table(data.tg_relation) };
    let indexes = Spi::connect(|client| IndexConfig::of_table(client, fn_oid, tbl));
    if indexes.is_empty() {
        refuse_newer_index(tbl);
        no_index(fired_on);
    }
    let ext = Extension::of_function(fn_oid);
    for cfg in indexes.iter() {
        // SAFETY: the trigger's relation and its descriptor.
        let text = unsafe { cfg.text.reader(fired_on, tupdesc) };
        // SAFETY: an UPDATE row trigger's old (tg_trigtuple) and new (tg_newtuple) rows are
        // rows of the relation, described by its descriptor.
        let (doc, old_doc) = cfg.text.evaluating(owner, || unsafe {
            (
                text.tuple_text(data.tg_newtuple),
                text.tuple_text(data.tg_trigtuple),
            )
        });
        if doc == old_doc {
            continue;
        }
        let (id_attno, id_type) = cfg.id_attribute(tupdesc, fired_on);
        // SAFETY: the attribute number and type come from the row's descriptor.
        let id = unsafe { id_attribute(data.tg_newtuple, tupdesc, id_attno, id_type, cfg.key) };
        let entry = doc.and_then(|doc| band_entry(utf8(doc), cfg.k, cfg.shingling, cfg.banding));
        if let (Some(id), Some((keys, sketch))) = (id, entry) {
            as_owner(owner, || {
                claim_band_rows(cfg, (tbl, owner, ext), &id, &keys, sketch)
            });
        }
    }
    new
}

/// How a trigger is named [`CLAIM_TRIGGER`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimName {
    /// Exactly.
    Table,
    /// As Citus names its copy on a shard: `<name>_<shard id>`.
    ShardCopy,
}

/// Whether trigger name `name` is that of the claim trigger, and how.
pub(super) fn claim_trigger_name(name: &[u8]) -> Option<ClaimName> {
    let rest = name.strip_prefix(CLAIM_TRIGGER.as_bytes())?;
    match rest.strip_prefix(b"_") {
        None if rest.is_empty() => Some(ClaimName::Table),
        Some(id) if !id.is_empty() && id.iter().all(u8::is_ascii_digit) => {
            Some(ClaimName::ShardCopy)
        }
        _ => None,
    }
}

/// Whether `rel` has an enabled duplicate check of the extension that owns `sync_fn` which
/// fires on INSERT but not on every UPDATE (it does not fire on UPDATE, fires only on UPDATE OF
/// some columns, or has a WHEN condition): an UPDATE it does not check makes no claim then.
///
/// # Safety
/// `rel` is an open relation.
unsafe fn unchecked_updates(rel: pg_sys::Relation, sync_fn: pg_sys::Oid) -> bool {
    let mut ext = None;
    // SAFETY: per the contract.
    unsafe { restore::triggers((*rel).trigdesc) }
        .iter()
        .any(|t| {
            let kind = u32::from(t.tgtype as u16);
            let checks_inserts = kind & pg_sys::TRIGGER_TYPE_ROW != 0
                && kind & pg_sys::TRIGGER_TYPE_BEFORE != 0
                && kind & pg_sys::TRIGGER_TYPE_INSERT != 0;
            let every_update =
                kind & pg_sys::TRIGGER_TYPE_UPDATE != 0 && t.tgnattr == 0 && t.tgqual.is_null();
            t.tgenabled as u8 != pg_sys::TRIGGER_DISABLED
                && checks_inserts
                && !every_update
                && restore::is_function(
                    t,
                    FLAG_FUNCTION,
                    *ext.get_or_insert_with(|| Extension::of_function(sync_fn)),
                )
        })
}

/// The duplicate check's trigger function.
const FLAG_FUNCTION: &str = "minhash_flag_duplicate";

/// The id attribute, as the band table stores it (`key`), NULL as None.
///
/// # Safety
/// `attno` is an attribute of type `typid` of `tupdesc`, which describes `tuple`; `key` is the
/// index's.
pub(super) unsafe fn id_attribute(
    tuple: *mut pg_sys::HeapTupleData,
    tupdesc: pg_sys::TupleDesc,
    attno: usize,
    typid: pg_sys::Oid,
    key: KeyType,
) -> Option<Id> {
    let mut is_null = false;
    // SAFETY: per the contract.
    unsafe {
        let datum = pg_sys::heap_getattr(tuple, attno as i32, tupdesc, &mut is_null);
        (!is_null).then(|| key.id(datum, typid))
    }
}

/// Of one band table in this transaction: how many times a sync trigger wrote it, and that
/// count as each trigger depth's last sync left it.
#[derive(Default)]
struct Firings {
    count: u64,
    last_at_depth: HashMap<i32, u64>,
}

thread_local! {
    /// The [`Firings`] of each band table, of the transaction with this top-level id.
    static FIRINGS: RefCell<(pg_sys::TransactionId, HashMap<pg_sys::Oid, Firings>)> =
        RefCell::new((pg_sys::InvalidTransactionId, HashMap::new()));
}

/// Whether another sync trigger wrote band table `band` since the last sync at this trigger
/// depth (or ever in this transaction, if there was none): a nested statement (run by a trigger
/// of the statement whose sync this is, between its writes and its sync), or another
/// data-modifying part of the same query (a writable CTE), whose sync fired first. Then the
/// statement's transition tables need not describe the rows as the table holds them now, nor
/// the band rows as the band table holds them, and this sync [`reconcile`]s. Records this
/// firing.
fn followed_sync(band: pg_sys::Oid) -> bool {
    let depth = claim::trigger_depth();
    // SAFETY: reads the transaction's state. (InvalidTransactionId while it has written
    // nothing: no sync before it wrote anything either, and the counts start again with its
    // first write.)
    let xact = unsafe { pg_sys::GetTopTransactionIdIfAny() };
    FIRINGS.with_borrow_mut(|(owner, firings)| {
        if *owner != xact {
            *owner = xact;
            firings.clear();
        }
        let Firings {
            count,
            last_at_depth,
        } = firings.entry(band).or_default();
        let followed = last_at_depth.get(&depth).copied().unwrap_or(0) != *count;
        *count += 1;
        last_at_depth.insert(depth, *count);
        followed
    })
}

/// Makes the band rows of every id the statement touched (the ids of its transition rows) those
/// of the rows with that id the table holds now: the claims of those ids are released, their
/// band rows under the keys of every text the statement saw for them or the table holds now are
/// deleted, and the band rows of the rows the table holds are written. The result does not
/// depend on the order in which the syncs of one query fire, nor on what nested statements did
/// before them.
///
/// # Safety
/// As for [`insert_band_rows`]; the transition tables are this trigger event's.
unsafe fn reconcile(data: &pg_sys::TriggerData, cfg: &IndexConfig, band: &BandTable, event: Event) {
    // (each with whether it holds new rows)
    let tables = match event {
        Event::Insert => vec![(data.tg_newtable, true)],
        Event::Delete => vec![(data.tg_oldtable, false)],
        Event::Update => vec![(data.tg_oldtable, false), (data.tg_newtable, true)],
        Event::Truncate => return,
    };
    // (id, key) of every band row the statement's texts give, and the ids
    let mut seen: Vec<(Id, i64)> = Vec::new();
    let mut ids: Vec<Id> = Vec::new();
    for (table, new) in tables {
        // SAFETY: per the contract.
        unsafe {
            for_each_changed_row(data, cfg, table, None, 0, |row| {
                let Some(id) = &row.id else {
                    if new && row_entry(row, cfg).is_some() {
                        null_id(cfg, band);
                    }
                    return;
                };
                room(&mut ids, 1);
                ids.push(id.clone());
                if let Some((keys, _)) = row_entry(row, cfg) {
                    room(&mut seen, keys.len());
                    seen.extend(keys.into_iter().map(|key| (id.clone(), key)));
                }
            });
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let mut rows: Vec<BandRow> = Vec::new();
    for chunk in ids.chunks(INSERT_BATCH) {
        pg_sys::check_for_interrupts!();
        let (arg, arg_type) = cfg.key.array_arg(chunk);
        Spi::connect(|client| {
            with_prepared(client, &cfg.sql[1], arg_type, arg, |table| {
                for_each_text_row(table, |id, text| {
                    // SAFETY: the query selects the id as the band table stores it.
                    let id = unsafe { cfg.key.id(id, pg_sys::INT8OID) };
                    if let Some((keys, sketch)) =
                        band_entry(text, cfg.k, cfg.shingling, cfg.banding)
                    {
                        room(&mut rows, keys.len());
                        rows.extend(keys.into_iter().map(|key| band_row(&id, key, sketch)));
                    }
                })
            })
        });
    }
    for id in &ids {
        claim::release_all(band.rel, id);
    }
    room(&mut seen, rows.len());
    seen.extend(rows.iter().map(|(id, key, _)| (id.clone(), *key)));
    seen.sort_unstable();
    seen.dedup();
    let (mut delete_ids, mut delete_keys) = (Vec::new(), Vec::new());
    for (id, key) in seen {
        delete_ids.push(id);
        delete_keys.push(key);
        if delete_ids.len() >= DELETE_BATCH {
            band.delete(&mut delete_ids, &mut delete_keys);
        }
    }
    band.delete(&mut delete_ids, &mut delete_keys);
    let mut writer = band.writer(false);
    for row in rows {
        writer.push(row);
    }
    writer.close();
}

/// Raises 23502 for a row with a text and a NULL id: the band table's id column is NOT NULL,
/// as an INSERT into it would say.
fn null_id(cfg: &IndexConfig, band: &BandTable) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        format!(
            "null value in column \"id\" of relation \"{}\" violates not-null constraint",
            relation_name(cfg.band_table)
        ),
        Some(format!(
            "Rows of {} with a text need an id.",
            regclass_name(band.tbl)
        )),
    )
}

/// Makes room for `n` more elements in `v` (53200 if memory runs out, rather than an abort).
fn room<T>(v: &mut Vec<T>, n: usize) {
    capacity::reserve(v, n, "the rows a statement touched").unwrap_or_else(|e| e.fail());
}

const ONLY_OURS_HINT: &str =
    "Only the triggers minhash_index_create() makes may call _minhash_sync().";

/// Raises 39P01: `_minhash_sync` was fired on `rel` by trigger `name`, which is not one of ours.
fn not_ours(name: &str, rel: pg_sys::Oid) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        format!(
            "_minhash_sync() was fired by trigger \"{name}\" on {}, which is not a minhash sync \
             trigger",
            regclass_name(rel)
        ),
        Some(ONLY_OURS_HINT.into()),
    )
}

/// Raises 39P01: `_minhash_sync` was fired on `rel`, whose table has no minhash index.
fn no_index(rel: pg_sys::Oid) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        format!(
            "_minhash_sync() was fired on {}, which has no minhash index",
            regclass_name(rel)
        ),
        Some(ONLY_OURS_HINT.into()),
    )
}

/// The event of a trigger firing that is one of ours: an `AFTER ... FOR EACH STATEMENT`
/// trigger named for its event (on a shard of a Citus table, as Citus names its copy there:
/// with the shard's id appended), with exactly the transition tables that event needs.
fn fired_by(
    data: &pg_sys::TriggerData,
    trigger: &pg_sys::Trigger,
    shard: Option<Shard>,
) -> Option<Event> {
    let flags = data.tg_event;
    if flags & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_AFTER
        || flags & pg_sys::TRIGGER_EVENT_ROW != 0
    {
        return None;
    }
    let (old, new) = (!data.tg_oldtable.is_null(), !data.tg_newtable.is_null());
    let event = match (flags & pg_sys::TRIGGER_EVENT_OPMASK, old, new) {
        (pg_sys::TRIGGER_EVENT_INSERT, false, true) => Event::Insert,
        (pg_sys::TRIGGER_EVENT_UPDATE, true, true) => Event::Update,
        (pg_sys::TRIGGER_EVENT_DELETE, true, false) => Event::Delete,
        (pg_sys::TRIGGER_EVENT_TRUNCATE, false, false) => Event::Truncate,
        _ => return None,
    };
    // SAFETY: a trigger's name is a C string.
    let name = unsafe { CStr::from_ptr(trigger.tgname) }.to_bytes();
    let expected = match shard {
        Some(shard) => format!("{}_{}", event.trigger_name(), shard.id),
        None => event.trigger_name().to_owned(),
    };
    (name == expected.as_bytes()).then_some(event)
}

/// One row of a transition table: its id and text, if it has a text.
struct Row<'t> {
    id: Option<Id>,
    text: Option<&'t [u8]>,
}

/// Reads a transition table (and, for an UPDATE, its partner of the same length) row by row.
struct TransitionRows {
    tables: [*mut pg_sys::Tuplestorestate; 2],
    /// Detoasted texts of the current row, freed at each `advance`.
    memory: PgMemoryContexts,
    slots: [*mut pg_sys::TupleTableSlot; 2],
    id_attno: c_int,
    id_type: pg_sys::Oid,
    key: KeyType,
    text: TextReader,
}

impl TransitionRows {
    /// # Safety
    /// `tables` are transition tables of this trigger event, of the trigger's relation.
    unsafe fn open(
        data: &pg_sys::TriggerData,
        cfg: &IndexConfig,
        tables: [*mut pg_sys::Tuplestorestate; 2],
    ) -> TransitionRows {
        // SAFETY: per the contract; a read pointer of our own for each table, as each scan of
        // a transition table in SQL takes one.
        unsafe {
            let tupdesc = (*data.tg_relation).rd_att;
            let tbl = (*data.tg_relation).rd_id;
            let text = cfg.text.reader(tbl, tupdesc);
            let (id_attno, id_type) = cfg.id_attribute(tupdesc, tbl);
            let slots = tables.map(|rows| {
                if rows.is_null() {
                    return std::ptr::null_mut();
                }
                let pointer =
                    pg_sys::tuplestore_alloc_read_pointer(rows, pg_sys::EXEC_FLAG_REWIND as c_int);
                pg_sys::tuplestore_select_read_pointer(rows, pointer);
                pg_sys::tuplestore_rescan(rows);
                pg_sys::MakeSingleTupleTableSlot(tupdesc, &pg_sys::TTSOpsMinimalTuple)
            });
            TransitionRows {
                tables,
                memory: PgMemoryContexts::new("pg_minhash sync rows"),
                slots,
                id_attno: id_attno as c_int,
                id_type,
                key: cfg.key,
                text,
            }
        }
    }

    /// Moves to the next row of each table; false at the end.
    fn advance(&mut self) -> bool {
        pg_sys::check_for_interrupts!();
        // SAFETY: nothing read from the previous rows outlives this call (`row` borrows self).
        unsafe { self.memory.reset() };
        let mut more = false;
        for (rows, slot) in self.tables.iter().zip(self.slots) {
            if !rows.is_null() {
                // SAFETY: the slot was made for this table's tuples.
                more = unsafe { pg_sys::tuplestore_gettupleslot(*rows, true, false, slot) };
            }
        }
        more
    }

    /// The current row of table `which`. Its text lives until the next `advance`.
    fn row(&self, which: usize) -> Row<'_> {
        let slot = self.slots[which];
        let mut is_null = false;
        // SAFETY: the slot holds a row of the trigger's relation; the attribute numbers and
        // the id's type come from its descriptor; text and varchar share one representation.
        unsafe {
            let outer = pg_sys::MemoryContextSwitchTo(self.memory.value());
            let id = pg_sys::slot_getattr(slot, self.id_attno, &mut is_null);
            let id = (!is_null).then(|| self.key.id(id, self.id_type));
            let text = self.text.slot_text(slot);
            pg_sys::MemoryContextSwitchTo(outer);
            Row { id, text }
        }
    }

    /// Whether the current rows of the two tables (an UPDATE's old and new row) have the same
    /// id and the same text, byte for byte.
    fn unchanged(&self) -> bool {
        let (old, new) = (self.row(0), self.row(1));
        old.id == new.id && old.text == new.text
    }

    fn close(self) {
        for slot in self.slots.into_iter().filter(|s| !s.is_null()) {
            // SAFETY: made in `open`, dropped once.
            unsafe { pg_sys::ExecDropSingleTupleTableSlot(slot) };
        }
    }
}

/// The band keys and sketch of a row's text (see [`band_entry`]).
fn row_entry(row: &Row<'_>, cfg: &IndexConfig) -> Option<(Vec<i64>, BandSketch)> {
    band_entry(utf8(row.text?), cfg.k, cfg.shingling, cfg.banding)
}

/// Calls `f` with each row of `table`; for an UPDATE (`pairs` = (old, new)), with the old
/// (`side` 0) or new (`side` 1) row of each pair whose id or text changed.
///
/// # Safety
/// `table` and `pairs` are transition tables of this trigger event.
unsafe fn for_each_changed_row(
    data: &pg_sys::TriggerData,
    cfg: &IndexConfig,
    table: *mut pg_sys::Tuplestorestate,
    pairs: Option<(*mut pg_sys::Tuplestorestate, *mut pg_sys::Tuplestorestate)>,
    side: usize,
    mut f: impl FnMut(&Row<'_>),
) {
    let tables = pairs.map_or([table, std::ptr::null_mut()], |(old, new)| [old, new]);
    // SAFETY: per the contract.
    let mut rows = unsafe { TransitionRows::open(data, cfg, tables) };
    while rows.advance() {
        if pairs.is_some() && rows.unchanged() {
            continue;
        }
        f(&rows.row(side));
    }
    rows.close();
}

/// Adds the band rows of the rows of `new` (for an UPDATE, `pairs` = (old, new), only of the
/// rows whose id or text changed).
///
/// # Safety
/// `new` and `pairs` are transition tables of this trigger event.
unsafe fn insert_band_rows(
    data: &pg_sys::TriggerData,
    cfg: &IndexConfig,
    band: &BandTable,
    new: *mut pg_sys::Tuplestorestate,
    pairs: Option<(*mut pg_sys::Tuplestorestate, *mut pg_sys::Tuplestorestate)>,
) {
    let mut writer = band.writer(false);
    let side = usize::from(pairs.is_some());
    let claimed = claim::any(cfg.band_table);
    let mut rows = Vec::new();
    // SAFETY: per the contract.
    unsafe {
        for_each_changed_row(data, cfg, new, pairs, side, |row| {
            let Some((keys, sketch)) = row_entry(row, cfg) else {
                return;
            };
            let Some(id) = &row.id else {
                null_id(cfg, band);
            };
            rows.clear();
            rows.extend(keys.into_iter().map(|key| band_row(id, key, sketch)));
            // a flag trigger may have written them already (see `claim`)
            if claimed {
                if pairs.is_none() && claim::take(band.rel, id, &mut rows) {
                    return;
                }
                claim::release(band.rel, id);
            }
            for row in rows.drain(..) {
                writer.push(row);
            }
        });
    }
    writer.close();
    if claimed {
        claim::release_statement(band.rel);
    }
}

/// Writes the band rows of the row with id `id` and band entry `(keys, sketch)` of `tbl` (owned
/// by `owner`, indexed by extension `ext`) now, as a claim (see `claim`): for
/// `minhash_flag_duplicate`, before it checks the row. As the table's owner.
pub(super) fn claim_band_rows(
    cfg: &IndexConfig,
    (tbl, owner, ext): (pg_sys::Oid, pg_sys::Oid, Extension),
    id: &Id,
    keys: &[i64],
    sketch: BandSketch,
) {
    // SAFETY: the band table is opened, checked and closed by `BandTable`, as for the sync.
    unsafe {
        let band = BandTable::open(cfg, cfg.band_table, tbl, owner, ext);
        let mut writer = band.writer(true);
        for &key in keys {
            writer.push(band_row(id, key, sketch));
        }
        let tids = writer.close();
        claim::record(band.rel, id, tids);
        band.close();
    }
}

/// Removes the band rows of the rows of `old` (for an UPDATE, `pairs` = (old, new), only of the
/// rows whose id or text changed).
///
/// # Safety
/// `old` and `pairs` are transition tables of this trigger event.
unsafe fn delete_band_rows(
    data: &pg_sys::TriggerData,
    cfg: &IndexConfig,
    band: &BandTable,
    old: *mut pg_sys::Tuplestorestate,
    pairs: Option<(*mut pg_sys::Tuplestorestate, *mut pg_sys::Tuplestorestate)>,
) {
    let (mut ids, mut keys) = (Vec::new(), Vec::new());
    // SAFETY: per the contract.
    unsafe {
        for_each_changed_row(data, cfg, old, pairs, 0, |row| {
            let (Some(id), Some((row_keys, _))) = (&row.id, row_entry(row, cfg)) else {
                return;
            };
            for key in row_keys {
                ids.push(id.clone());
                keys.push(key);
            }
            if ids.len() >= DELETE_BATCH {
                band.delete(&mut ids, &mut keys);
            }
        });
    }
    band.delete(&mut ids, &mut keys);
}

/// Takes back the claim `claim_band_rows` made for the row with id `id` of `tbl`: its band rows
/// are deleted (see `claim`).
pub(super) fn withdraw_claim(
    cfg: &IndexConfig,
    (tbl, owner, ext): (pg_sys::Oid, pg_sys::Oid, Extension),
    id: &Id,
) {
    // SAFETY: as for `claim_band_rows`.
    unsafe {
        let band = BandTable::open(cfg, cfg.band_table, tbl, owner, ext);
        claim::release(band.rel, id);
        band.close();
    }
}

/// An indexed table's band table, open and locked for writing.
struct BandTable {
    tbl: pg_sys::Oid,
    rel: pg_sys::Relation,
    /// The type of its id column.
    key: KeyType,
}

impl BandTable {
    /// Opens the band table of `cfg` with RowExclusiveLock, as an INSERT or DELETE would, and
    /// refuses it unless it is the plain table `minhash_index_create` made, owned by `owner`,
    /// with no trigger but its load trigger of extension `ext` (see the module
    /// documentation).
    ///
    /// # Safety
    /// Within a transaction; the relation stays open until `close` or the transaction's end.
    unsafe fn open(
        cfg: &IndexConfig,
        band: pg_sys::Oid,
        tbl: pg_sys::Oid,
        owner: pg_sys::Oid,
        ext: Extension,
    ) -> BandTable {
        let altered = |why: &str| -> ! {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "the band table of {} is not the plain table minhash_index_create() made",
                    regclass_name(tbl)
                ),
                Some(format!(
                    "It {why}. Undo that, or drop the index with minhash_index_drop() and \
                     create it again."
                )),
            )
        };
        // SAFETY: opening by OID; NULL if the relation is gone. The relation's cached catalog
        // data is read while it is open.
        unsafe {
            let rel = pg_sys::try_table_open(band, pg_sys::RowExclusiveLock as c_int);
            if rel.is_null() {
                // (the catalog row this transaction's snapshot shows was dropped since)
                refuse_newer_index(tbl);
                raise(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                    format!("the band table of {} does not exist", regclass_name(tbl)),
                    Some("Drop the index with minhash_index_drop() and create it again.".into()),
                );
            }
            let class = &*(*rel).rd_rel;
            let desc = (*rel).rd_att;
            let columns = compat::attributes(desc);
            if class.relowner != owner {
                raise(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!(
                        "the band table of {} does not belong to the table's owner",
                        regclass_name(tbl)
                    ),
                    Some("Drop the index with minhash_index_drop() and create it again.".into()),
                );
            }
            if class.relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
                || class.relam != pg_sys::HEAP_TABLE_AM_OID
                || class.relispartition
                || class.relhassubclass
            {
                altered("is no longer a plain heap table");
            }
            if !only_load_trigger((*rel).trigdesc, ext) {
                altered("has triggers");
            }
            if !(*rel).rd_rules.is_null() {
                altered("has rules");
            }
            if class.relrowsecurity {
                altered("has row-level security");
            }
            if !(*desc).constr.is_null() && (*(*desc).constr).num_check != 0 {
                altered("has CHECK constraints");
            }
            // (a dropped column stays in the descriptor)
            let live: Vec<_> = columns.iter().filter(|a| !a.attisdropped).collect();
            // (the id in its key type, bigint for integer keys)
            let same_columns = live.len() == BAND_COLUMNS.len()
                && live.iter().zip(BAND_COLUMNS).all(|(a, name)| {
                    a.atttypid
                        == if name == "id" {
                            cfg.key.oid
                        } else {
                            pg_sys::INT8OID
                        }
                        && a.attidentity == 0
                        && a.attgenerated == 0
                        && pgrx::name_data_to_str(&a.attname) == name
                });
            if !same_columns {
                altered("has other columns than (id, key, sketch1, sketch2) of their types");
            }
            BandTable {
                tbl,
                rel,
                key: cfg.key,
            }
        }
    }

    /// The shard of the band table of `cfg` beside `shard` of its table (see `citus`), opened
    /// and checked as [`BandTable::open`] does.
    ///
    /// # Safety
    /// As for [`BandTable::open`].
    unsafe fn open_shard(
        cfg: &IndexConfig,
        shard: Shard,
        owner: pg_sys::Oid,
        ext: Extension,
    ) -> BandTable {
        let band = shard.beside(cfg.band_table).unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "the band table {} has no shard beside shard {} of {} on this node",
                    regclass_name(cfg.band_table),
                    shard.id,
                    regclass_name(shard.table)
                ),
                Some(
                    "The band table must stay co-located with its table; drop the index with \
                     minhash_index_drop() and create it again."
                        .into(),
                ),
            )
        });
        // SAFETY: per the contract.
        unsafe { BandTable::open(cfg, band, shard.table, owner, ext) }
    }

    /// A writer of new band rows; `tids`: it returns where the rows went.
    fn writer(&self, tids: bool) -> BandWriter {
        BandWriter::new(self.rel, self.key, tids)
    }

    /// Deletes the band rows `(ids[i], keys[i])` and empties both vectors.
    fn delete(&self, ids: &mut Vec<Id>, keys: &mut Vec<i64>) {
        if ids.is_empty() {
            return;
        }
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        let (id_array, id_array_type) = self.key.array_arg(ids);
        // (the statement is kept by its text, which names the id type)
        let sql = format!(
            "DELETE FROM {band} b
             USING ROWS FROM (pg_catalog.unnest($1::{id_array}), pg_catalog.unnest($2)) AS o(id, key)
             WHERE b.key OPERATOR(pg_catalog.=) o.key AND b.id OPERATOR(pg_catalog.=) o.id",
            id_array = type_name_qualified(id_array_type),
        );
        ids.clear();
        let args = [id_array, std::mem::take(keys).into()];
        let types = [id_array_type, PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID)];
        run_prepared(&sql, &types, &args);
    }

    /// Deletes the band rows whose id no row of the indexed table has (after a partition of
    /// it was emptied): one anti-join of the band table with the table's ids.
    fn delete_missing(&self, cfg: &IndexConfig) {
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        let sql = format!(
            "DELETE FROM {band} b WHERE NOT EXISTS (SELECT FROM {tbl} t
                 WHERE t.{id} OPERATOR(pg_catalog.=) b.id)",
            tbl = qualified_name(cfg.tbl),
            id = quote_ident_str(&cfg.id_column),
        );
        Spi::connect_mut(|client| client.update(&sql, None, &[]).map(drop))
            .unwrap_or_else(|e| spi_write_failed(e));
    }

    /// Empties the band table (closing it first).
    fn close_and_truncate(self) {
        // SAFETY: the relation is open.
        let band = qualified_name(unsafe { (*self.rel).rd_id });
        self.close();
        Spi::connect_mut(|client| {
            client
                .update(&format!("TRUNCATE {band}"), None, &[])
                .map(drop)
        })
        .unwrap_or_else(|e| spi_write_failed(e));
    }

    fn close(self) {
        // SAFETY: opened in `open`; the lock is kept until the transaction ends.
        unsafe { pg_sys::table_close(self.rel, pg_sys::NoLock as c_int) };
    }
}

/// Runs the data-modifying statement `sql`, prepared on first use and kept for the backend
/// (`prepared`).
fn run_prepared(sql: &str, types: &[PgOid], args: &[pgrx::datum::DatumWithOid<'_>]) {
    run_prepared_with(sql, types, args, |_| Ok(()));
}

/// [`run_prepared`], calling `result` with what the statement returned.
fn run_prepared_with(
    sql: &str,
    types: &[PgOid],
    args: &[pgrx::datum::DatumWithOid<'_>],
    result: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<()>,
) {
    Spi::connect(|client| prepared::run(client, sql, Access::Write, types, args, result))
        .unwrap_or_else(|e| spi_write_failed(e));
}

fn spi_write_failed(e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("writing the band table through SPI failed: {e}"),
        None,
    )
}

/// Band rows on their way into an open band table: one prepared `INSERT ... SELECT unnest(...)`
/// per `INSERT_BATCH` rows, run through SPI as the caller runs it (as the table's owner). The
/// executor writes the heap and every index and checks what the band table asks of a row; the
/// band table's load trigger keeps the rows (`restore::sync_writes`).
struct BandWriter {
    band: pg_sys::Oid,
    key: KeyType,
    /// The INSERT, with `RETURNING ctid` when the TIDs are wanted.
    sql: String,
    ids: Vec<Id>,
    columns: [Vec<i64>; 3],
    /// Where the rows went, if asked for (`claim_band_rows`).
    tids: Option<Vec<pg_sys::ItemPointerData>>,
}

impl BandWriter {
    /// A writer into `band`, open and checked (`BandTable::open`), whose ids are of type
    /// `key`; `tids`: `close` returns where the rows went (`RETURNING ctid`).
    fn new(band: pg_sys::Relation, key: KeyType, tids: bool) -> BandWriter {
        // SAFETY: the relation is open.
        let band = unsafe { (*band).rd_id };
        // SAFETY: a catalog lookup of the array type of an existing type.
        let id_array = type_name_qualified(PgOid::from(unsafe { pg_sys::get_array_type(key.oid) }));
        // (the statement is kept by its text, which names the id type)
        let sql = format!(
            "INSERT INTO {} (id, key, sketch1, sketch2)
             SELECT pg_catalog.unnest($1::{id_array}), pg_catalog.unnest($2),
                    pg_catalog.unnest($3), pg_catalog.unnest($4){}",
            qualified_name(band),
            if tids { " RETURNING ctid" } else { "" }
        );
        BandWriter {
            band,
            key,
            sql,
            ids: Vec::new(),
            columns: Default::default(),
            tids: tids.then(Vec::new),
        }
    }

    /// Queues one band row.
    fn push(&mut self, (id, key, sketch): BandRow) {
        self.ids.push(id);
        for (column, value) in self.columns.iter_mut().zip([key, sketch[0], sketch[1]]) {
            column.push(value);
        }
        if self.ids.len() >= INSERT_BATCH {
            self.flush();
        }
    }

    /// Inserts the queued rows with one execution of the prepared INSERT.
    fn flush(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let (ids, id_array_type) = self.key.array_arg(&std::mem::take(&mut self.ids));
        let [b, c, d] = std::mem::take(&mut self.columns);
        let args = [ids, b.into(), c.into(), d.into()];
        let int8_array = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
        let types = [id_array_type, int8_array, int8_array, int8_array];
        let tids = &mut self.tids;
        restore::sync_writes(self.band, || {
            run_prepared_with(&self.sql, &types, &args, |mut table| {
                let Some(tids) = tids else {
                    return Ok(());
                };
                let rows = table.len();
                table = table.first();
                for _ in 0..rows {
                    if let Some(tid) = table.get_datum_by_ordinal(1)? {
                        // SAFETY: a tid datum points to an ItemPointerData.
                        tids.push(unsafe { *tid.cast_mut_ptr::<pg_sys::ItemPointerData>() });
                    }
                    table.next();
                }
                Ok(())
            })
        });
    }

    /// Inserts what is queued; returns where the rows went, if asked for.
    fn close(mut self) -> Vec<pg_sys::ItemPointerData> {
        self.flush();
        self.tids.unwrap_or_default()
    }
}

/// A type's schema-qualified name, as SQL writes it.
fn type_name_qualified(typid: PgOid) -> String {
    // SAFETY: format_type_be_qualified takes any OID and returns a palloc'd C string.
    unsafe { CStr::from_ptr(pg_sys::format_type_be_qualified(typid.value())) }
        .to_string_lossy()
        .into_owned()
}
