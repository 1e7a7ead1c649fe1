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
use std::cmp::Ordering;
use std::collections::HashMap;
use std::convert::Infallible;
use std::ffi::{c_int, CStr};

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::{PgMemoryContexts, PgSqlErrorCode};

use crate::core::capacity;
use crate::core::sketch::BandSketch;
use crate::pg::error::raise;
use crate::pg::names::{regclass_name, relation_name};

use super::band_table::{
    claim_band_rows, BandTable, Change, Changes, Claims, DELETE_BATCH, INSERT_BATCH,
};
use super::claim;
use super::firing::Firing;
use crate::index::def::band::band_entry;
use crate::index::def::catalog::refuse_newer_index;
use crate::index::def::citus::{self, Shard};
use crate::index::def::extension::Extension;
use crate::index::def::restore;
use crate::index::def::row_id::{tuple_id, Id, KeyType};
use crate::index::def::text_source::{utf8, TextReader};
use crate::index::def::trigger::{claim_trigger_name, ClaimName};
use crate::index::read::access_plan::Index;
use crate::index::run::owner::as_owner;
use crate::index::run::prepared::with_prepared;
use crate::index::run::spi::for_each_text_row;

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
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_trigger(sql = false)]
fn _minhash_sync<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    let data = trigger.trigger_data();
    if data.tg_event & pg_sys::TRIGGER_EVENT_ROW != 0 {
        return Ok(claim_update(trigger));
    }
    let firing = Firing::of(trigger);
    let (fired_on, shard, tbl, owner) = (firing.rel, firing.shard, firing.table, firing.owner);
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
    let indexes = Spi::connect(|client| firing.indexes(client));
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
            let ext = firing.ext();
            for cfg in indexes.iter() {
                let band = match shard {
                    Some(shard) => BandTable::open_shard(cfg, shard, owner, ext),
                    None => BandTable::open(cfg, cfg.def.band_table, tbl, owner, ext),
                };
                // (on a Citus shard, rows are written on the workers a statement runs on)
                let reconciles = shard.is_none()
                    && event != Event::Truncate
                    && must_reconcile(cfg.def.band_table, event);
                match event {
                    _ if reconciles => {
                        reconcile(data, cfg, &band, event);
                        band.close();
                    }
                    Event::Insert => {
                        insert_band_rows(data, cfg, &band);
                        band.close();
                    }
                    Event::Delete => {
                        delete_band_rows(data, cfg, &band);
                        band.close();
                    }
                    Event::Update => {
                        update_band_rows(data, cfg, &band);
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

/// The claim trigger (see `trigger::CLAIM_TRIGGER`): for a table whose duplicate check
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
    let firing = Firing::of(trigger);
    if firing.shard.is_some() {
        return new;
    }
    let (fired_on, tupdesc, tbl, owner) = (firing.rel, firing.tupdesc, firing.table, firing.owner);
    let indexes = Spi::connect(|client| firing.indexes(client));
    if indexes.is_empty() {
        refuse_newer_index(tbl);
        no_index(fired_on);
    }
    let ext = firing.ext();
    for cfg in indexes.iter() {
        // SAFETY: the trigger's relation and its descriptor.
        let text = unsafe { cfg.def.text.reader(fired_on, tupdesc) };
        // SAFETY: an UPDATE row trigger's old (tg_trigtuple) and new (tg_newtuple) rows are
        // rows of the relation, described by its descriptor.
        let (doc, old_doc) = cfg.def.text.evaluating(owner, || unsafe {
            (
                text.tuple_text(data.tg_newtuple),
                text.tuple_text(data.tg_trigtuple),
            )
        });
        if doc == old_doc {
            continue;
        }
        let (id_attno, id_type) = cfg.def.id_attribute(tupdesc, fired_on);
        // SAFETY: the attribute number and type come from the row's descriptor.
        let id = unsafe { tuple_id(data.tg_newtuple, tupdesc, id_attno, id_type, cfg.def.key) };
        let entry = doc.and_then(|doc| band_entry(utf8(doc), &cfg.def.settings));
        if let (Some(id), Some((keys, sketch))) = (id, entry) {
            as_owner(owner, || {
                claim_band_rows(cfg, (tbl, owner, ext), &id, (&keys, sketch), true)
            });
        }
    }
    new
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

/// Of one band table in this transaction: the query whose sync trigger wrote it last (its
/// [`claim::running_query`]), and whether a sync of that query added band rows. The default, the
/// first command with nothing added, tells a sync what no sync would.
#[derive(Clone, Copy, Default)]
struct LastSync {
    query: pg_sys::CommandId,
    added: bool,
}

thread_local! {
    /// The [`LastSync`] of each band table, of the transaction with this top-level id.
    static LAST_SYNC: RefCell<(pg_sys::TransactionId, HashMap<pg_sys::Oid, LastSync>)> =
        RefCell::new((pg_sys::InvalidTransactionId, HashMap::new()));
}

/// Whether this sync of `event` on band table `band` must [`reconcile`] rather than replay its
/// transition tables as a delta (see [`after_last_sync`]). Records this firing: one hash
/// lookup.
fn must_reconcile(band: pg_sys::Oid, event: Event) -> bool {
    // SAFETY: reads the transaction's state. (InvalidTransactionId while it has written
    // nothing: no sync before it wrote anything had rows to sync either.)
    let xact = unsafe { pg_sys::GetTopTransactionIdIfAny() };
    let query = claim::running_query();
    LAST_SYNC.with_borrow_mut(|(owner, last)| {
        if *owner != xact {
            *owner = xact;
            last.clear();
        }
        let slot = last.entry(band).or_default();
        let (reconcile, next) = match query {
            Some(query) => after_last_sync(*slot, query, event),
            // (no query to place it in: it reconciles, and so does every sync of a query
            // started before now that follows it)
            None => {
                // SAFETY: reads the transaction's command counter.
                let now = unsafe { pg_sys::GetCurrentCommandId(false) };
                let query = slot.query.max(now);
                (true, LastSync { query, added: true })
            }
        };
        *slot = next;
        reconcile
    })
}

/// Whether a sync of `event` of the query `query` must reconcile, given the last sync of the
/// band table in the transaction, and what it leaves as the last sync.
///
/// Replaying a statement's transition tables as a delta is exact when the band rows of its ids
/// are those of the rows as they were before it wrote them. All parts of a query write their
/// rows before the first of its syncs fires, and the syncs fire in an order the plan picks (a
/// CTE that a LIMIT leaves unfinished is run to completion after the query's main part, so its
/// sync comes last). The parts delete and update only rows that were there before the query
/// (a query does not see the rows it wrote), so replaying the query's deltas is exact if every
/// delete of band rows comes before every add of band rows of the same id. So a sync
/// reconciles when
/// - a sync of a query started after this one came first: a nested statement (run by a
///   trigger or a function of this query) wrote the table between this query's writes and its
///   sync, or
/// - it deletes band rows (DELETE, UPDATE) and an earlier sync of the same query added some.
///
/// The first sync of a query, and one that only adds band rows after the deletes of its query,
/// replay the delta.
fn after_last_sync(last: LastSync, query: pg_sys::CommandId, event: Event) -> (bool, LastSync) {
    let adds = matches!(event, Event::Insert | Event::Update);
    let deletes = matches!(event, Event::Delete | Event::Update);
    match last.query.cmp(&query) {
        Ordering::Greater => (
            true,
            LastSync {
                added: true,
                ..last
            },
        ),
        Ordering::Equal => {
            let reconcile = last.added && deletes;
            let added = last.added || adds || reconcile;
            (reconcile, LastSync { query, added })
        }
        Ordering::Less => (false, LastSync { query, added: adds }),
    }
}

/// Makes the band rows of every id the statement touched (the ids of its transition rows) those
/// of the rows with that id the table holds now: the band rows of the rows the table holds are
/// written, then the claims of those ids are released, and their other band rows under the keys
/// of every text the statement saw for them or the table holds now are deleted (`Changes`:
/// no text is ever absent from the band table meanwhile). The result does not
/// depend on the order in which the syncs of one query fire, nor on what nested statements did
/// before them.
///
/// # Safety
/// As for [`insert_band_rows`]; the transition tables are this trigger event's.
unsafe fn reconcile(data: &pg_sys::TriggerData, cfg: &Index, band: &BandTable, event: Event) {
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
            for_each_row(data, cfg, table, |row| {
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
    let mut rows: Vec<(Id, Vec<i64>, BandSketch)> = Vec::new();
    for chunk in ids.chunks(INSERT_BATCH) {
        pg_sys::check_for_interrupts!();
        let (arg, arg_type) = cfg.def.key.array_arg(chunk);
        Spi::connect(|client| {
            with_prepared(client, &cfg.sql[1], arg_type, arg, |table| {
                for_each_text_row(table, |id, text| {
                    // SAFETY: the query selects the id as the band table stores it.
                    let id = unsafe { cfg.def.key.id(id, pg_sys::INT8OID) };
                    if let Some((keys, sketch)) = band_entry(text, &cfg.def.settings) {
                        room(&mut rows, 1);
                        rows.push((id, keys, sketch));
                    }
                })
            })
        });
    }
    for (id, keys, _) in &rows {
        room(&mut seen, keys.len());
        seen.extend(keys.iter().map(|&key| (id.clone(), key)));
    }
    seen.sort_unstable();
    seen.dedup();
    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // (ids, seen and rows are sorted by id: one change per id, from a walk over the three)
    let (mut seen, mut rows) = (seen.into_iter().peekable(), rows.into_iter().peekable());
    let mut changes = Changes::new(band, Claims::ReleaseAll);
    for id in ids {
        let mut change = Change {
            id,
            tenant: None,
            old: Vec::new(),
            new: Vec::new(),
        };
        while let Some((_, key)) = seen.next_if(|(seen, _)| *seen == change.id) {
            change.old.push(key);
        }
        while let Some((_, keys, sketch)) = rows.next_if(|(row, _, _)| *row == change.id) {
            change.new.push((keys, sketch));
        }
        changes.push(change);
    }
    changes.apply();
    if event != Event::Delete {
        claim::release_statement(band.rel, event == Event::Update);
    }
}

/// Raises 23502 for a row with a text and a NULL id: the band table's id column is NOT NULL,
/// as an INSERT into it would say.
fn null_id(cfg: &Index, band: &BandTable) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        format!(
            "null value in column \"id\" of relation \"{}\" violates not-null constraint",
            relation_name(cfg.def.band_table)
        ),
        Some(format!(
            "Rows of {} with a text need an id.",
            regclass_name(band.tbl)
        )),
    )
}

/// Raises 23502 for a row of a table distributed by a tenant without one (Citus refuses such
/// rows before they get here).
fn null_tenant(cfg: &Index, band: &BandTable) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        format!(
            "null value in column \"tenant\" of relation \"{}\" violates not-null constraint",
            relation_name(cfg.def.band_table)
        ),
        Some(format!(
            "Rows of {} with a text need a value in the column it is distributed by.",
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

/// One row of a transition table: its id (and of a table distributed by a tenant, its tenant)
/// and text, if it has a text.
struct Row<'t> {
    id: Option<Id>,
    tenant: Option<Id>,
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
    /// Of a table distributed by a tenant: the tenant column's attribute number and type.
    tenant: Option<(c_int, KeyType)>,
    text: TextReader,
}

impl TransitionRows {
    /// # Safety
    /// `tables` are transition tables of this trigger event, of the trigger's relation.
    unsafe fn open(
        data: &pg_sys::TriggerData,
        cfg: &Index,
        tables: [*mut pg_sys::Tuplestorestate; 2],
    ) -> TransitionRows {
        // SAFETY: per the contract; a read pointer of our own for each table, as each scan of
        // a transition table in SQL takes one.
        unsafe {
            let tupdesc = (*data.tg_relation).rd_att;
            let tbl = (*data.tg_relation).rd_id;
            let text = cfg.def.text.reader(tbl, tupdesc);
            let (id_attno, id_type) = cfg.def.id_attribute(tupdesc, tbl);
            let tenant = (cfg.def.tenant.as_ref())
                .map(|tenant| (tenant.attribute(tupdesc, tbl) as c_int, tenant.key));
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
                key: cfg.def.key,
                tenant,
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
            // (Citus gives no row of a distributed table a NULL in the column it is
            // distributed by; the band table's tenant column is NOT NULL)
            let tenant = self.tenant.and_then(|(attno, key)| {
                let tenant = pg_sys::slot_getattr(slot, attno, &mut is_null);
                (!is_null).then(|| key.id(tenant, key.oid))
            });
            let text = self.text.slot_text(slot);
            pg_sys::MemoryContextSwitchTo(outer);
            Row { id, tenant, text }
        }
    }

    fn close(self) {
        for slot in self.slots.into_iter().filter(|s| !s.is_null()) {
            // SAFETY: made in `open`, dropped once.
            unsafe { pg_sys::ExecDropSingleTupleTableSlot(slot) };
        }
    }
}

/// The band keys and sketch of a row's text (see [`band_entry`]).
fn row_entry(row: &Row<'_>, cfg: &Index) -> Option<(Vec<i64>, BandSketch)> {
    band_entry(utf8(row.text?), &cfg.def.settings)
}

/// Calls `f` with each row of `table`.
///
/// # Safety
/// `table` is a transition table of this trigger event.
unsafe fn for_each_row(
    data: &pg_sys::TriggerData,
    cfg: &Index,
    table: *mut pg_sys::Tuplestorestate,
    mut f: impl FnMut(&Row<'_>),
) {
    // SAFETY: per the contract.
    let mut rows = unsafe { TransitionRows::open(data, cfg, [table, std::ptr::null_mut()]) };
    while rows.advance() {
        f(&rows.row(0));
    }
    rows.close();
}

/// How the claims on `band` are handled: an id's claim is kept if it holds exactly the row's
/// band rows (see `claim`).
fn claims_of(band: &BandTable) -> Claims {
    // SAFETY: the band table (or its shard beside a shard of a Citus table) is open.
    if claim::any(unsafe { (*band.rel).rd_id }) {
        Claims::Take
    } else {
        Claims::None
    }
}

/// The band entry of a new row, which is written (23502 for one with a text and no id, or of a
/// table distributed by a tenant, no tenant), if it has a text with shingles.
fn new_entry(row: &Row<'_>, cfg: &Index, band: &BandTable) -> Option<(Vec<i64>, BandSketch)> {
    let entry = row_entry(row, cfg)?;
    if row.id.is_none() {
        null_id(cfg, band);
    }
    if cfg.def.tenant.is_some() && row.tenant.is_none() {
        null_tenant(cfg, band);
    }
    Some(entry)
}

/// The keys of the band rows of an old row (none for a row without an id, or of a table
/// distributed by a tenant, without the tenant it needs).
fn old_keys(row: &Row<'_>, cfg: &Index) -> Vec<i64> {
    match row_entry(row, cfg) {
        Some((keys, _))
            if row.id.is_some() && (cfg.def.tenant.is_none() || row.tenant.is_some()) =>
        {
            keys
        }
        _ => Vec::new(),
    }
}

/// Adds the band rows of the rows of the INSERT's transition table (keeping the claims that
/// hold them already), then releases the statement's other claims.
///
/// # Safety
/// The transition table is this trigger event's.
unsafe fn insert_band_rows(data: &pg_sys::TriggerData, cfg: &Index, band: &BandTable) {
    let claims = claims_of(band);
    let mut changes = Changes::new(band, claims);
    // SAFETY: per the contract.
    unsafe {
        for_each_row(data, cfg, data.tg_newtable, |row| {
            if let (Some(entry), Some(id)) = (new_entry(row, cfg, band), &row.id) {
                changes.push(Change {
                    id: id.clone(),
                    tenant: row.tenant.clone(),
                    old: Vec::new(),
                    new: vec![entry],
                });
            }
        });
    }
    changes.apply();
    if claims == Claims::Take {
        claim::release_statement(band.rel, false);
    }
}

/// Replaces the band rows of the rows an UPDATE changed (their id or the bytes of their text)
/// with those of their new versions (see `Changes` for the order), then releases the
/// statement's other claims. The old and new band rows of one id go in one batch: a row whose
/// id stays is one change; the rows whose id changed are gathered by id first (an id one row
/// leaves may be the id another row takes).
///
/// # Safety
/// The transition tables are this trigger event's.
unsafe fn update_band_rows(data: &pg_sys::TriggerData, cfg: &Index, band: &BandTable) {
    let claims = claims_of(band);
    let mut changes = Changes::new(band, claims);
    let mut moved: HashMap<(Id, Option<Id>), Change> = HashMap::new();
    // SAFETY: per the contract.
    let mut rows = unsafe { TransitionRows::open(data, cfg, [data.tg_oldtable, data.tg_newtable]) };
    while rows.advance() {
        let (old, new) = (rows.row(0), rows.row(1));
        if old.id == new.id && old.text == new.text {
            continue;
        }
        let (old_keys, entry) = (old_keys(&old, cfg), new_entry(&new, cfg, band));
        match (&old.id, &new.id) {
            (Some(id), Some(new_id)) if id == new_id && old.tenant == new.tenant => {
                changes.push(Change {
                    id: id.clone(),
                    tenant: new.tenant.clone(),
                    old: old_keys,
                    new: entry.into_iter().collect(),
                });
            }
            _ => {
                if let (Some(id), false) = (&old.id, old_keys.is_empty()) {
                    moved_change(&mut moved, id, &old.tenant)
                        .old
                        .extend(old_keys);
                }
                if let (Some(id), Some(entry)) = (&new.id, entry) {
                    moved_change(&mut moved, id, &new.tenant).new.push(entry);
                }
            }
        }
    }
    rows.close();
    let mut moved: Vec<Change> = moved.into_values().collect();
    moved.sort_unstable_by(|a, b| (&a.id, &a.tenant).cmp(&(&b.id, &b.tenant)));
    for change in moved {
        changes.push(change);
    }
    changes.apply();
    if claims == Claims::Take {
        claim::release_statement(band.rel, true);
    }
}

/// The change of `id` (of `tenant`) among those of rows whose id changed.
fn moved_change<'m>(
    moved: &'m mut HashMap<(Id, Option<Id>), Change>,
    id: &Id,
    tenant: &Option<Id>,
) -> &'m mut Change {
    capacity::reserve_map(moved, 1, "the rows a statement touched").unwrap_or_else(|e| e.fail());
    moved
        .entry((id.clone(), tenant.clone()))
        .or_insert_with(|| Change {
            id: id.clone(),
            tenant: tenant.clone(),
            old: Vec::new(),
            new: Vec::new(),
        })
}

/// Removes the band rows of the rows of the DELETE's transition table.
///
/// # Safety
/// The transition table is this trigger event's.
unsafe fn delete_band_rows(data: &pg_sys::TriggerData, cfg: &Index, band: &BandTable) {
    let (mut ids, mut keys, mut tenants) = (Vec::new(), Vec::new(), Vec::new());
    // SAFETY: per the contract.
    unsafe {
        for_each_row(data, cfg, data.tg_oldtable, |row| {
            let (Some(id), row_keys) = (&row.id, old_keys(row, cfg)) else {
                return;
            };
            for key in row_keys {
                ids.push(id.clone());
                keys.push(key);
                tenants.extend(row.tenant.clone());
            }
            if ids.len() >= DELETE_BATCH {
                band.delete((&mut ids, &mut keys, &mut tenants), &[]);
            }
        });
    }
    band.delete((&mut ids, &mut keys, &mut tenants), &[]);
}
