//! The `minhash_flag_duplicate` trigger: one row checked against an indexed table, like an
//! exclusion constraint checks it (write first, then check with a dirty snapshot, wait for
//! writers in progress), once per inserted or updated row.

use std::ffi::{CStr, CString};
use std::num::NonZeroUsize;
use std::rc::Rc;

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgLogLevel, PgOid, PgSqlErrorCode};

use crate::core::jaccard::JaccardProbe;
use crate::core::params::{check_threshold, float8_text};
use crate::core::sketch::{equal_bits, min_equal_bits, BandSketch, LOOKUP_SKETCH_MISS_PROBABILITY};
use crate::pg::backend::interrupts;
use crate::pg::compat;
use crate::pg::error::{raise, OrRaise};
use crate::pg::names::{regclass_name, relation_name};
use crate::pg::tuple::column;

use super::band_table::{claim_band_rows, claim_shard_band_rows, withdraw_claim};
use super::firing::Firing;
use crate::index::def::band::{band_entry, BandFormat};
use crate::index::def::catalog::refuse_newer_index;
use crate::index::def::extension::Extension;
use crate::index::def::restore::{
    has_sync_trigger, is_function, is_member_function, triggers, SYNC_FUNCTION,
};
use crate::index::def::row_id::{tuple_id, Id, KeyType};
use crate::index::def::text_source::{utf8, TextReader, COLUMNS_HINT};
use crate::index::def::trigger::{claim_trigger_name, trigger_args};
use crate::index::read::access_plan::{Index, Indexes};
use crate::index::read::lookup;
use crate::index::run::owner::as_owner;
use crate::index::run::prepared::with_prepared_args;
use crate::index::run::spi::for_each_spi_row;

/// A row that conflicts with the row a flag trigger checks: its id, its similarity, and
/// whether the transaction's snapshot sees it.
struct Conflict {
    id: Id,
    similarity: f64,
    in_snapshot: bool,
}

/// The rows at or above `threshold` similar to `doc` (band entry `entry`), other than the
/// rows with the ids `own`, as a constraint sees them: every row committed or written by
/// this transaction, whenever it committed. The trigger's own band rows were written
/// first (a claim, see `claim`); where a candidate's fate depends on a transaction still
/// in progress, this waits for that transaction to end and looks again, as PostgreSQL
/// checks an exclusion constraint. Two writers of near-duplicates that wait for each other
/// are a deadlock, which PostgreSQL resolves by failing one of them (40P01).
fn conflicts(
    cfg: &Index,
    doc: &str,
    (keys, sketch): &(Vec<i64>, BandSketch),
    threshold: f64,
    own: &[Option<Id>],
) -> Checked {
    let missing = || -> ! {
        raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the minhash index of {} lacks the indexes a duplicate check reads",
                regclass_name(cfg.def.tbl)
            ),
            Some(format!(
                "The band table needs {} and the table a unique index on the id alone (each \
                 partition of a partitioned table an index whose first column is the id: \
                 CREATE INDEX ON table (id)); drop the index with minhash_index_drop() and \
                 create it again.",
                match cfg.def.format {
                    BandFormat::PerBand => "its (key, id) index".to_owned(),
                    BandFormat::PerRow => format!(
                        "its B-trees on key1 to key{}",
                        cfg.def.settings.banding.bands
                    ),
                }
            )),
        )
    };
    let band_index = cfg.placement.band_index().unwrap_or_else(|| missing());
    // (the table's index on the id, or one led by the id on each partition)
    let row_indexes = cfg
        .placement
        .check_row_indexes()
        .unwrap_or_else(|| missing());
    let min_bits = min_equal_bits(
        cfg.def.settings.k,
        threshold,
        LOOKUP_SKETCH_MISS_PROBABILITY,
    );
    let mut exact = JaccardProbe::new(doc, cfg.def.settings.shingling, &mut interrupts);
    // a writer found done with its check once (see `checking::wait_for`)
    let mut done_checking = None;
    loop {
        // candidates: (id, a transaction in progress that writes one of its band rows)
        let mut candidates: Vec<(Id, Option<pg_sys::TransactionId>)> = Vec::new();
        let other = |id: &Id| !own.iter().any(|o| o.as_ref() == Some(id));
        band_index.scan_dirty(keys, other, |id, row_sketch, writer| {
            if equal_bits(*sketch, row_sketch, cfg.def.settings.k) >= min_bits {
                candidates.push((id, writer));
            }
        });
        if candidates.is_empty() {
            return Checked::Done(Vec::new());
        }
        candidates
            .sort_unstable_by(|(a, wa), (b, wb)| a.cmp(b).then(wa.is_none().cmp(&wb.is_none())));
        candidates.dedup_by(|(a, _), (b, _)| a == b);
        let ids: Vec<Id> = candidates.iter().map(|(id, _)| id.clone()).collect();
        // every version of each candidate row: (id, at or above the threshold, state)
        let mut versions = Vec::new();
        for row_index in row_indexes {
            row_index.fetch_dirty(&cfg.def.text, &ids, |id, text, state| {
                let similarity = exact.jaccard(text, &mut interrupts);
                versions.push((id.clone(), similarity, state));
            });
        }
        // A row whose band rows a transaction in progress is writing: its text decides,
        // once that transaction has written it (a claim comes before its row).
        let undecided = candidates.iter().find_map(|(id, writer)| {
            let writer = (*writer)?;
            let mut written = versions
                .iter()
                .filter(|(v, _, s)| v == id && s.writer == Some(writer) && s.inserting)
                .peekable();
            let pending = written.peek().is_none();
            (pending || written.any(|(_, similarity, _)| *similarity >= threshold))
                .then_some(writer)
        });
        // a matching row that a transaction in progress inserts, updates or deletes
        let undecided = undecided.or_else(|| {
            versions
                .iter()
                .find(|(_, similarity, state)| *similarity >= threshold && state.writer.is_some())
                .and_then(|(_, _, state)| state.writer)
        });
        if let Some(writer) = undecided {
            match checking::wait_for(writer, &mut done_checking) {
                Some(checker) => return Checked::YieldTo(checker),
                None => continue,
            }
        }
        return Checked::Done(
            versions
                .into_iter()
                .filter(|(_, similarity, _)| *similarity >= threshold)
                .map(|(id, similarity, state)| Conflict {
                    id,
                    similarity,
                    in_snapshot: state.in_snapshot,
                })
                .collect(),
        );
    }
}

/// What a flag trigger's check came to.
enum Checked {
    /// The conflicting rows, every one of them decided.
    Done(Vec<Conflict>),
    /// A transaction that checks a row of its own against ours at the same moment, and goes
    /// first: take the claim back, wait for that check to end, and start again.
    YieldTo(pg_sys::TransactionId),
}

/// Who waits for whom when two flag triggers check possibly conflicting rows at once. Each
/// holds a lock on its "checking" tag (its database and top-level transaction id) from its
/// claim until its check is done. A check that meets another transaction's claim it cannot
/// decide on waits for that transaction's end if it is done checking (as an exclusion
/// constraint waits); if it is checking too, the older transaction waits for the younger's
/// check to end, and the younger takes its claim back and waits for the older's check, then
/// starts over (as PostgreSQL's speculative insertions do, `execIndexing.c`). So two writers of
/// near-duplicates never wait for each other, and neither commits without seeing the other.
mod checking {
    use pgrx::pg_sys;

    /// `locktag_field4` of the checking tags: apart from the advisory locks of SQL (1 and 2).
    const CHECKING: u16 = 0x6d68;

    fn tag(xid: pg_sys::TransactionId) -> pg_sys::LOCKTAG {
        pg_sys::LOCKTAG {
            // SAFETY: the database of this backend, set at connection.
            locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
            locktag_field2: xid.into_inner(),
            locktag_field3: 0,
            locktag_field4: CHECKING,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        }
    }

    /// This transaction's top-level id (assigned now if need be: its claim writes anyway).
    pub(super) fn me() -> pg_sys::TransactionId {
        // SAFETY: inside a transaction.
        unsafe { pg_sys::GetTopTransactionId() }
    }

    /// Starts this transaction's check: its tag, exclusively, until [`end`].
    pub(super) fn begin() {
        // SAFETY: a transaction-level lock on a tag of our own.
        unsafe {
            pg_sys::LockAcquire(&tag(me()), pg_sys::ExclusiveLock as i32, false, false);
        }
    }

    /// Ends this transaction's check.
    pub(super) fn end() {
        // SAFETY: the lock `begin` took.
        unsafe {
            pg_sys::LockRelease(&tag(me()), pg_sys::ExclusiveLock as i32, false);
        }
    }

    /// Waits until the check of transaction `xid` (top-level) is over.
    pub(super) fn wait_check(xid: pg_sys::TransactionId) {
        // SAFETY: a share lock on another transaction's tag, taken and given back.
        unsafe {
            pg_sys::LockAcquire(&tag(xid), pg_sys::ShareLock as i32, false, false);
            pg_sys::LockRelease(&tag(xid), pg_sys::ShareLock as i32, false);
        }
    }

    /// Waits for `writer` (a transaction in progress whose claim or row a check cannot decide
    /// on yet) as described above; `Some(checker)` when this check must yield to it instead.
    /// A writer not checking now may also have yielded to this check, its claim taken back
    /// since it was read: the first time, the caller looks again (`done_checking` remembers
    /// it); the second time, the writer is done checking and this waits for its end.
    pub(super) fn wait_for(
        writer: pg_sys::TransactionId,
        done_checking: &mut Option<pg_sys::TransactionId>,
    ) -> Option<pg_sys::TransactionId> {
        // SAFETY: lock calls on tags and transactions; the transaction id of a row written
        // by a transaction in progress (a subtransaction's maps to its top level).
        unsafe {
            let other = pg_sys::SubTransGetTopmostTransaction(writer);
            let tag = tag(other);
            let free = pg_sys::LockAcquire(&tag, pg_sys::ShareLock as i32, false, true)
                != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL;
            if free {
                pg_sys::LockRelease(&tag, pg_sys::ShareLock as i32, false);
                if done_checking.replace(other) != Some(other) {
                    return None;
                }
                pg_sys::XactLockTableWait(
                    writer,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    pg_sys::XLTW_Oper::XLTW_None,
                );
                return None;
            }
            if pg_sys::TransactionIdPrecedes(me(), other) {
                wait_check(other);
                return None;
            }
            Some(other)
        }
    }
}

/// What the trigger was created with: `(column, threshold, mode)`.
enum FlagMode {
    /// Set this column (attribute number, type, typmod) of the new row to the original's id.
    Flag(usize, pg_sys::Oid, i32),
    /// Refuse near-duplicates.
    Reject,
}

/// Trigger function for `BEFORE INSERT OR UPDATE ... FOR EACH ROW`, with arguments `(column,
/// threshold, mode)`: in `'flag'` mode (the default) `column` of the new row gets the id of the
/// original, the row with the smallest id among the other rows at or above `threshold`
/// (NULL, `'null'` or `''`: the index's), or NULL (an INSERT that matches no row keeps the
/// value it gives, so restored rows keep their flags); in `'reject'` mode such a row is refused
/// with SQLSTATE 23505. An UPDATE is checked again only when it changes the text (byte for
/// byte), so a flag set or cleared by hand stays as it is; a row is never compared with itself,
/// under its old id or its new one. A fourth argument names the index to check against by its
/// band table, for a table with several indexes.
#[pg_trigger]
fn minhash_flag_duplicate<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, std::convert::Infallible> {
    let data = trigger.trigger_data();
    let op = row_event(data);
    // (a trigger on a partitioned table fires on the partition a row goes to, as a clone; on
    // a shard of a Citus table, the sync trigger there describes the index)
    let firing = Firing::of(trigger);
    let checked = Spi::connect(|client| check(&firing, client, data, op));
    let new = trigger
        .new()
        .expect("INSERT and UPDATE row triggers have a new row")
        .into_owned();
    // an UPDATE that leaves the text alone leaves the row alone
    let Some(checked) = checked else {
        return Ok(Some(new));
    };
    match checked.mode {
        FlagMode::Reject => {
            reject(&firing, &checked);
            Ok(Some(new))
        }
        // an INSERT that matches no row keeps the value it gives (a restored row, its flag)
        FlagMode::Flag(..)
            if checked.conflicts.is_empty() && op != pg_sys::TRIGGER_EVENT_UPDATE =>
        {
            Ok(Some(new))
        }
        FlagMode::Flag(attno, typid, typmod) => {
            let mut new = new;
            let datum = original(checked.conflicts.iter())
                .map(|(id, _)| checked.key.convert(&id, typid, typmod));
            let attno = NonZeroUsize::new(attno).expect("attribute numbers start at 1");
            // SAFETY: `datum` was made by the input function of the column's own type.
            unsafe { new.set_by_index_unchecked(attno, datum) };
            Ok(Some(new))
        }
    }
}

/// The operation (INSERT or UPDATE) of a firing `BEFORE INSERT OR UPDATE ... FOR EACH ROW`;
/// 39P01 for any other.
fn row_event(data: &pg_sys::TriggerData) -> u32 {
    let event = data.tg_event;
    let op = event & pg_sys::TRIGGER_EVENT_OPMASK;
    require_row_events(
        event & pg_sys::TRIGGER_EVENT_TIMINGMASK == pg_sys::TRIGGER_EVENT_BEFORE,
        event & pg_sys::TRIGGER_EVENT_ROW != 0,
        op == pg_sys::TRIGGER_EVENT_INSERT || op == pg_sys::TRIGGER_EVENT_UPDATE,
    );
    op
}

/// Raises 39P01 unless the trigger fires `before` the row is written, for each `row`, on
/// INSERT or UPDATE only (`insert_or_update`).
fn require_row_events(before: bool, row: bool, insert_or_update: bool) {
    if !(before && row && insert_or_update) {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "minhash_flag_duplicate() must be fired BEFORE INSERT OR UPDATE FOR EACH ROW",
            None,
        );
    }
}

/// The mode argument: Reject, or None for 'flag' (its column is resolved against the index);
/// 22023 for another, 0A000 for 'reject' on a shard of a Citus table.
fn requested_mode(firing: &Firing<'_>, args: &[String]) -> Option<FlagMode> {
    let mode = match args.get(2).map_or("flag", String::as_str) {
        "flag" => None,
        "reject" => Some(FlagMode::Reject),
        other => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("minhash_flag_duplicate() mode must be 'flag' or 'reject', not '{other}'"),
            None,
        ),
    };
    if firing.shard.is_some() && matches!(mode, Some(FlagMode::Reject)) {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "minhash_flag_duplicate() cannot reject near-duplicates in Citus table {}",
                regclass_name(firing.table)
            ),
            Some(
                "Rows of different shards are written on different nodes, which no lock \
                 spans: use mode 'flag' there (docs/citus.md)."
                    .into(),
            ),
        );
    }
    mode
}

/// A duplicate trigger's arguments, checked against the relation it fires on and the index it
/// reads.
struct Settings {
    cfg: Rc<Index>,
    /// Reads the text of a row of the relation.
    text: TextReader,
    mode: FlagMode,
    threshold: f64,
}

/// The arguments of duplicate trigger `firing`, checked against its relation and its index:
/// the one place where they are, as each row is checked (`op`, the row's `TRIGGER_EVENT_INSERT`
/// or `TRIGGER_EVENT_UPDATE`) and as the trigger is made (`op` None, see
/// [`_minhash_flag_created`]), so both raise the same errors. Only a row checks the firing
/// order (`check_fires_last`): other triggers are made, renamed and dropped after this one, and
/// one may fire only on a path a workload never takes (an `UPDATE OF` columns it never sets).
/// None if the table has no index: at a row, one whose catalog row a data-only restore has not
/// loaded yet (see [`chosen_index`]); as the trigger is made, one made later, which its first
/// row is checked against (the arguments that do not name what the index reads are checked
/// now).
fn settings(firing: &Firing<'_>, client: &SpiClient<'_>, op: Option<u32>) -> Option<Settings> {
    let (fired_on, tupdesc) = (firing.rel, firing.tupdesc);
    let args = firing.args();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let mode = requested_mode(firing, &args);
    let indexes = firing.indexes(client);
    if op.is_none() && indexes.is_empty() {
        if mode.is_none() {
            flag_column(firing, arg(0), &[]);
        }
        threshold_arg(arg(1));
        return None;
    }
    let cfg = chosen_index(firing, client, indexes, arg(3).filter(|a| !a.is_empty()))?;
    // SAFETY: the trigger's relation and its descriptor; the indexed table was locked by
    // `find`.
    let text = unsafe { cfg.def.text.reader(fired_on, tupdesc) };
    // the columns the check reads: no trigger may change them after it
    let read: Vec<usize> = std::iter::once(cfg.def.id_column.as_str())
        .chain(cfg.def.tenant.as_ref().map(|t| t.column.as_str()))
        .chain(cfg.def.text.columns())
        .map(|name| column(tupdesc, fired_on, name, COLUMNS_HINT).0)
        .collect();
    if let Some(op) = op {
        // SAFETY: the trigger's relation and the trigger.
        unsafe { check_fires_last(firing.relation, firing.trigger, op, &read) };
    }
    // SAFETY: the descriptor of the trigger's relation.
    unsafe { refuse_stored_generated(tupdesc, fired_on, &read) };
    // (checked at every firing, whether or not the row is compared)
    let mode = mode.unwrap_or_else(|| flag_column(firing, arg(0), &read));
    let threshold = threshold_arg(arg(1)).unwrap_or(cfg.def.threshold);
    Some(Settings {
        cfg,
        text,
        mode,
        threshold,
    })
}

/// The flag column of 'flag' mode, `name`: a column of the trigger's relation (42703) that the
/// check does not read (`read`, attribute numbers; 22023).
fn flag_column(firing: &Firing<'_>, name: Option<&str>, read: &[usize]) -> FlagMode {
    let name = name.unwrap_or("");
    let (attno, typid, typmod) = column(firing.tupdesc, firing.rel, name, FLAG_HINT);
    if read.contains(&attno) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "minhash_flag_duplicate() cannot write the original's id into column \"{name}\", \
                 which the minhash index of {} reads",
                regclass_name(firing.table)
            ),
            Some(FLAG_HINT.into()),
        );
    }
    FlagMode::Flag(attno, typid, typmod)
}

/// The threshold argument `arg`, if it gives one (NULL, `'null'` or `''` do not): parsed as
/// `'...'::float8` would (22P02) and checked (`check_threshold`).
fn threshold_arg(arg: Option<&str>) -> Option<f64> {
    arg.filter(|t| !(t.is_empty() || t.eq_ignore_ascii_case("null")))
        .map(|t| check_threshold(float8_in(t)).or_raise())
}

/// What a check found for the new row.
struct Check {
    id_column: String,
    key: KeyType,
    mode: FlagMode,
    threshold: f64,
    conflicts: Vec<Conflict>,
    /// Whether the current user may be told the original's id (see `IndexDef::may_see_ids`).
    may_see_ids: bool,
}

/// The original among `rows`: the matching row with the smallest id, and its similarity.
fn original<'c>(rows: impl Iterator<Item = &'c Conflict>) -> Option<(Id, f64)> {
    rows.min_by_key(|c| &c.id)
        .map(|c| (c.id.clone(), c.similarity))
}

/// Checks the new row of `firing` (fired by `data`, of operation `op`) against its index; None
/// for an UPDATE that leaves the text alone, and for a table whose catalog row a data-only
/// restore has not loaded yet.
fn check(
    firing: &Firing<'_>,
    client: &SpiClient<'_>,
    data: &pg_sys::TriggerData,
    op: u32,
) -> Option<Check> {
    let tupdesc = firing.tupdesc;
    let update = op == pg_sys::TRIGGER_EVENT_UPDATE;
    // SAFETY: INSERT row triggers get the new row as tg_trigtuple, UPDATE ones as tg_newtuple.
    let tuple = if update {
        data.tg_newtuple
    } else {
        data.tg_trigtuple
    };
    let Settings {
        cfg,
        text,
        mode,
        threshold,
    } = settings(firing, client, Some(op))?;
    // SAFETY: the new row (and an UPDATE's old row) are rows of the relation, described by
    // its descriptor.
    let (doc, old_doc) = cfg.def.text.evaluating(firing.owner, || unsafe {
        let old = update.then(|| text.tuple_text(data.tg_trigtuple));
        (text.tuple_text(tuple), old)
    });
    if update && old_doc == Some(doc) {
        return None;
    }
    let (id_attno, id_type) = cfg.def.id_attribute(tupdesc, firing.rel);
    // SAFETY: the attribute numbers and types come from this tuple's descriptor; an UPDATE's
    // old row (tg_trigtuple) has the same descriptor.
    let (doc, own_ids) = unsafe {
        let id = |tuple| tuple_id(tuple, tupdesc, id_attno, id_type, cfg.def.key);
        let old_id = update.then(|| id(data.tg_trigtuple)).flatten();
        (doc.map(utf8), [id(tuple), old_id])
    };
    // (of a table distributed by a tenant, the new row's: the check is within it)
    let tenant = cfg.def.tenant.as_ref().and_then(|tenant| {
        let attno = tenant.attribute(tupdesc, firing.rel);
        // SAFETY: the attribute is of the tenant's type (checked), in this tuple's descriptor.
        unsafe { tuple_id(tuple, tupdesc, attno, tenant.key.oid, tenant.key) }
    });
    let entry = doc.and_then(|doc| band_entry(doc, &cfg.def.settings));
    let conflicts = match (doc, &entry) {
        (Some(doc), Some(entry)) => {
            let own = (own_ids, tenant.as_ref(), update);
            find_conflicts(firing, client, &cfg, doc, entry, threshold, own)
        }
        _ => Vec::new(),
    };
    Some(Check {
        id_column: cfg.def.id_column.clone(),
        key: cfg.def.key,
        mode,
        threshold,
        conflicts,
        may_see_ids: cfg.def.may_see_ids(),
    })
}

/// The index a check of `firing` reads: the one whose band table is named `name` (42704 if
/// there is none), or without a name the table's default index (`Index::default_of`). None
/// for a table a data-only restore loads before its catalog row: its rows stay as they were
/// dumped, as in a full restore.
fn chosen_index(
    firing: &Firing<'_>,
    client: &SpiClient<'_>,
    indexes: Indexes,
    name: Option<&str>,
) -> Option<Rc<Index>> {
    let tbl = firing.table;
    // SAFETY: the trigger descriptor of the open relation.
    let synced = || unsafe { has_sync_trigger((*firing.relation).trigdesc, firing.ext()) };
    Some(match (&indexes[..], name) {
        ([], _) if synced() => {
            // (or, under REPEATABLE READ and SERIALIZABLE, one created after the snapshot)
            refuse_newer_index(tbl);
            return None;
        }
        ([], _) => Index::get(client, firing.fn_oid, tbl),
        // the index named by its band table (in the table's schema)
        (_, Some(name)) => indexes
            .iter()
            .find(|c| relation_name(c.def.band_table) == name)
            .cloned()
            .unwrap_or_else(|| {
                raise(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    format!(
                        "table {} has no minhash index with band table \"{name}\"",
                        regclass_name(tbl)
                    ),
                    Some(INDEX_HINT.into()),
                )
            }),
        (_, None) => Index::default_of(&indexes).expect("not empty"),
    })
}

/// The rows at or above `threshold` similar to `doc` (band entry `entry`) other than the rows
/// `own_ids` (the new row's id and an UPDATE's old one). Like a constraint, the check sees
/// every row, whoever writes: it writes the row's band rows first (a claim) and then checks
/// them against every row committed or in progress, as the table's owner (see `conflicts`).
/// On a shard of a Citus table: a lookup of every shard, of the rows committed when it runs
/// and those this transaction wrote on this node (docs/citus.md); of a
/// table distributed by a tenant, of the shard of the row's tenant `tenant` only, its rows
/// only, after an INSERT's claim (not an `update`'s) as on one node (docs/citus.md).
fn find_conflicts(
    firing: &Firing<'_>,
    client: &SpiClient<'_>,
    cfg: &Index,
    doc: &str,
    entry: &(Vec<i64>, BandSketch),
    threshold: f64,
    (own_ids, tenant, update): ([Option<Id>; 2], Option<&Id>, bool),
) -> Vec<Conflict> {
    let own_ids = &own_ids;
    let owner = firing.owner;
    if let Some(shard) = firing.shard {
        return as_owner(owner, || match tenant {
            Some(tenant) => {
                // (an INSERT's band rows first, as on one node: the checks of the statement's
                // later rows, on this shard, see it. Not an UPDATE's: the band table's unique
                // B-tree, its replica identity, holds the row's band rows of its old text
                // until the statement's sync.)
                if let Some(id) = own_ids[0].as_ref().filter(|_| !update) {
                    let place = (shard, owner, firing.ext());
                    claim_shard_band_rows(cfg, place, (id, tenant), &entry.0, entry.1);
                }
                lookup::similar(cfg, client, doc, threshold, (None, Some(tenant)))
            }
            None => lookup::similar(cfg, client, doc, threshold, (None, None)),
        })
        .into_iter()
        .filter(|(id, _)| !own_ids.iter().flatten().any(|own| own == id))
        .map(|(id, similarity)| Conflict {
            id,
            similarity,
            in_snapshot: true,
        })
        .collect();
    }
    as_owner(owner, || {
        let rel = (firing.table, owner, firing.ext());
        loop {
            checking::begin();
            if let Some(id) = &own_ids[0] {
                claim_band_rows(cfg, rel, id, (&entry.0, entry.1), update);
            }
            match conflicts(cfg, doc, entry, threshold, own_ids) {
                Checked::Done(conflicts) => {
                    checking::end();
                    break conflicts;
                }
                Checked::YieldTo(other) => {
                    if let Some(id) = &own_ids[0] {
                        withdraw_claim(cfg, rel, id);
                    }
                    checking::end();
                    checking::wait_check(other);
                }
            }
        }
    })
}

/// Refuses the new row of `firing` if `checked` found an original: 23505, or 40001 under
/// REPEATABLE READ and SERIALIZABLE if every match was committed after the snapshot.
fn reject(firing: &Firing<'_>, checked: &Check) {
    let (tbl, conflicts) = (firing.table, &checked.conflicts);
    // a row the transaction's snapshot sees is a plain violation; one committed since
    // (REPEATABLE READ, SERIALIZABLE) is a serialization failure, as for a unique key
    let seen = original(conflicts.iter().filter(|c| c.in_snapshot));
    // SAFETY: reads the transaction's isolation level.
    let snapshot_xact = unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32;
    if seen.is_none() && snapshot_xact && !conflicts.is_empty() {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            "could not serialize access due to a concurrent near-duplicate",
            "pg_minhash",
        )
        .set_detail(format!(
            "A near-duplicate row of {} was committed after this transaction's snapshot was \
             taken.",
            regclass_name(tbl)
        ))
        .set_hint("The transaction might succeed if retried.")
        .report(PgLogLevel::ERROR);
    }
    let Some((id, similarity)) = seen.or_else(|| original(conflicts.iter())) else {
        return;
    };
    let report = ErrorReport::new(
        PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
        format!(
            "row is a near-duplicate of an existing row of {}",
            regclass_name(tbl)
        ),
        "pg_minhash",
    );
    // the row it matched only for those who may see it
    let report = if checked.may_see_ids {
        report.set_detail(format!(
            "Row with {} = {} has similarity {similarity:.4} (threshold {}).",
            checked.id_column,
            checked.key.text(&id),
            float8_text(checked.threshold)
        ))
    } else {
        report
    };
    // SAFETY: the trigger's relation and trigger are valid while it fires.
    unsafe { name_constraint(firing.relation, firing.trigger) };
    report.report(PgLogLevel::ERROR);
}

/// Raises 55000 unless trigger `me` fires after every other BEFORE ROW trigger of `rel` for
/// event `op` that could change the row (PostgreSQL fires them in the order of their names), so
/// that the check sees the row as it will be stored, as an exclusion constraint does. Other
/// duplicate triggers that come later are let through when they write a column that is not in
/// `read` (the attribute numbers of the columns this check reads).
///
/// # Safety
/// `rel` is the firing relation and `me` the firing trigger.
unsafe fn check_fires_last(rel: pg_sys::Relation, me: &pg_sys::Trigger, op: u32, read: &[usize]) {
    let event = if op == pg_sys::TRIGGER_EVENT_INSERT {
        pg_sys::TRIGGER_TYPE_INSERT
    } else {
        pg_sys::TRIGGER_TYPE_UPDATE
    };
    let rejects = |args: &[String]| args.get(2).map(String::as_str) == Some("reject");
    // SAFETY: per the contract: the relation's trigger descriptor, sorted by name as
    // PostgreSQL fires them; each trigger's name and arguments are C strings.
    unsafe {
        let desc = (*rel).trigdesc;
        if desc.is_null() {
            return;
        }
        let triggers = std::slice::from_raw_parts((*desc).triggers, (*desc).numtriggers as usize);
        let Some(mine) = triggers.iter().position(|t| t.tgoid == me.tgoid) else {
            return;
        };
        let tupdesc = (*rel).rd_att;
        let later = triggers[mine + 1..].iter().find(|t| {
            let kind = u32::from(t.tgtype as u16);
            let fires = t.tgenabled as u8 != pg_sys::TRIGGER_DISABLED
                && kind & pg_sys::TRIGGER_TYPE_ROW != 0
                && kind & pg_sys::TRIGGER_TYPE_BEFORE != 0
                && kind & event != 0;
            let harmless = t.tgfoid == me.tgfoid && {
                let args = trigger_args(t);
                rejects(&args)
                    || compat::attributes(tupdesc)
                        .iter()
                        .position(|a| {
                            !a.attisdropped
                                && Some(pgrx::name_data_to_str(&a.attname))
                                    == args.first().map(String::as_str)
                        })
                        .is_none_or(|i| !read.contains(&(i + 1)))
            };
            // (the claim trigger beside the sync triggers changes no row)
            let claim = claim_trigger_name(CStr::from_ptr(t.tgname).to_bytes()).is_some()
                && is_function(t, SYNC_FUNCTION, Extension::of_function(me.tgfoid));
            fires && !harmless && !claim
        });
        if let Some(later) = later {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "trigger \"{}\" fires after minhash_flag_duplicate() trigger \"{}\" on {}",
                    CStr::from_ptr(later.tgname).to_string_lossy(),
                    CStr::from_ptr(me.tgname).to_string_lossy(),
                    regclass_name((*rel).rd_id)
                ),
                Some(
                    "The duplicate check must see the row as it will be stored: BEFORE triggers \
                     fire in the order of their names, so give the duplicate trigger a name \
                     that sorts after the others."
                        .into(),
                ),
            );
        }
    }
}

/// Raises 0A000 if one of the columns the check reads (attribute numbers `read` of `tupdesc`,
/// the descriptor of relation `rel`) is a stored generated column: PostgreSQL computes those
/// after the BEFORE triggers, so the check would see the row without its value.
///
/// # Safety
/// `tupdesc` is a valid tuple descriptor whose attributes include `read`.
unsafe fn refuse_stored_generated(tupdesc: pg_sys::TupleDesc, rel: pg_sys::Oid, read: &[usize]) {
    // SAFETY: per the contract.
    let attributes = unsafe { compat::attributes(tupdesc) };
    for &attno in read {
        let attribute = &attributes[attno - 1];
        if attribute.attgenerated == b's' as std::ffi::c_char {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "minhash_flag_duplicate() cannot check column \"{}\" of {}: it is a stored \
                     generated column",
                    pgrx::name_data_to_str(&attribute.attname),
                    regclass_name(rel)
                ),
                Some(
                    "PostgreSQL computes stored generated columns after the BEFORE triggers that \
                     check a row. Index the generating expression instead: \
                     minhash_index_create(..., text_expression => '...')."
                        .into(),
                ),
            );
        }
    }
}

/// The schema, table and constraint names a 23505 from the reject trigger carries, as a unique
/// violation carries them (`errtableconstraint`); the constraint is the trigger.
struct ConstraintNames {
    schema: *mut std::ffi::c_char,
    table: *mut std::ffi::c_char,
    constraint: *mut std::ffi::c_char,
}

/// Makes the unique violation about to be raised carry the names of `rel` and `trigger`
/// (see [`ConstraintNames`]): pgrx raises an error after the Rust code has returned, and
/// PostgreSQL lets an error context callback add fields to it.
///
/// # Safety
/// Only right before raising the error; `rel` and `trigger` are those of the firing trigger.
unsafe fn name_constraint(rel: pg_sys::Relation, trigger: &pg_sys::Trigger) {
    // SAFETY: the names and the callback entry are copied into the error-surviving
    // transaction context; the entry is left on the stack because the error is raised next,
    // and PostgreSQL resets the stack when it catches the error.
    unsafe {
        let context = pg_sys::CurTransactionContext;
        let names = pg_sys::MemoryContextAlloc(context, std::mem::size_of::<ConstraintNames>())
            .cast::<ConstraintNames>();
        names.write(ConstraintNames {
            schema: pg_sys::MemoryContextStrdup(
                context,
                pg_sys::get_namespace_name((*(*rel).rd_rel).relnamespace),
            ),
            table: pg_sys::MemoryContextStrdup(context, (*(*rel).rd_rel).relname.data.as_ptr()),
            constraint: pg_sys::MemoryContextStrdup(context, trigger.tgname),
        });
        let entry = pg_sys::MemoryContextAlloc(
            context,
            std::mem::size_of::<pg_sys::ErrorContextCallback>(),
        )
        .cast::<pg_sys::ErrorContextCallback>();
        entry.write(pg_sys::ErrorContextCallback {
            previous: pg_sys::error_context_stack,
            callback: Some(add_constraint_names),
            arg: names.cast(),
        });
        pg_sys::error_context_stack = entry;
    }
}

/// Error context callback of [`name_constraint`]: adds the names to a unique violation.
#[pg_guard]
unsafe extern "C-unwind" fn add_constraint_names(arg: *mut std::ffi::c_void) {
    // SAFETY: `arg` is the `ConstraintNames` of `name_constraint`; the fields are set on the
    // error being raised.
    unsafe {
        if pg_sys::geterrcode() != PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION as i32 {
            return;
        }
        let names = &*arg.cast::<ConstraintNames>();
        pg_sys::err_generic_string(pg_sys::PG_DIAG_SCHEMA_NAME as i32, names.schema);
        pg_sys::err_generic_string(pg_sys::PG_DIAG_TABLE_NAME as i32, names.table);
        pg_sys::err_generic_string(pg_sys::PG_DIAG_CONSTRAINT_NAME as i32, names.constraint);
    }
}

/// The duplicate trigger's function, one of the extension's (see [`is_member_function`]).
const FLAG_FUNCTION: &str = "minhash_flag_duplicate";

/// Event trigger function of `minhash_flag_created` (`ddl_command_end` of CREATE TRIGGER,
/// CREATE TABLE and ALTER TABLE): each duplicate trigger the command made is checked as its
/// rows will be ([`settings`]), so that a bad argument fails the command with the error its
/// first row would get. The triggers made: those of CREATE [OR REPLACE] TRIGGER, with their
/// clones on the partitions of a partitioned table; the clones CREATE TABLE ... PARTITION OF
/// makes; on ALTER TABLE ... ATTACH PARTITION, every duplicate trigger of the partition and its
/// partitions, clone or not (from now on it checks against the index of the new root).
/// Triggers of other functions are left alone: ours is told by its OID, a function of this
/// extension (a role cannot make a function a member of it).
// (created in schema minhash_internal by src/index/sql/ddl.sql)
#[pg_extern(sql = false)]
fn _minhash_flag_created(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: the call's own `fcinfo`, its `flinfo` set by the function manager; a context
    // node's tag is read only when there is one.
    let (called_as_event_trigger, fn_oid) = unsafe {
        let context = (*fcinfo).context;
        (
            !context.is_null() && pgrx::is_a(context, pg_sys::NodeTag::T_EventTriggerData),
            (*(*fcinfo).flinfo).fn_oid,
        )
    };
    if !called_as_event_trigger {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "_minhash_flag_created() must be fired as an event trigger",
            None,
        );
    }
    let ext = Extension::of_function(fn_oid);
    let made = Spi::connect(|client| made_triggers(client, ext));
    for (trigger, rel) in made {
        pgrx::check_for_interrupts!();
        check_created(rel, trigger);
    }
}

/// The duplicate triggers of `ext` the DDL command that fires the event trigger made (see
/// [`_minhash_flag_created`]): `(trigger, relation)`. Most commands make none, and cost one
/// query (kept prepared).
fn made_triggers(client: &SpiClient<'_>, ext: Extension) -> Vec<(pg_sys::Oid, pg_sys::Oid)> {
    let ours = |function| is_member_function(function, FLAG_FUNCTION, ext);
    // (triggers made; tables whose partition trees' triggers were)
    let (mut triggers, mut tables) = (Vec::new(), Vec::new());
    let commands = "SELECT c.classid, c.objid, c.command_tag, c.command, t.tgfoid
         FROM pg_catalog.pg_event_trigger_ddl_commands() c
         LEFT JOIN pg_catalog.pg_trigger t
             ON c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass
            AND t.oid OPERATOR(pg_catalog.=) c.objid";
    with_prepared_args(client, commands, &[], &[], |table| {
        for_each_spi_row(table, |row| {
            let (class, object) = (row.get::<pg_sys::Oid>(1)?, row.get::<pg_sys::Oid>(2)?);
            let tag = row.get::<String>(3)?;
            let function = row.get::<pg_sys::Oid>(5)?;
            match (class, object, tag.as_deref()) {
                (Some(pg_sys::TriggerRelationId), Some(trigger), _)
                    if function.is_some_and(ours) =>
                {
                    triggers.push(trigger);
                }
                // (a partition made with its clones)
                (Some(pg_sys::RelationRelationId), Some(table), Some("CREATE TABLE"))
                    if is_partition(table) =>
                {
                    tables.push(table);
                }
                (_, _, Some("ALTER TABLE")) => {
                    if let Some(command) = row.get_datum_by_ordinal(4)? {
                        // SAFETY: a pg_ddl_command of pg_event_trigger_ddl_commands(), read in
                        // the event trigger that called it.
                        tables.extend(unsafe { attached(command) });
                    }
                }
                _ => {}
            }
            Ok(())
        })
    });
    if triggers.is_empty() && tables.is_empty() {
        return Vec::new();
    }
    let made = "WITH RECURSIVE made(oid) AS (
             SELECT t.oid FROM pg_catalog.pg_trigger t
             WHERE t.oid OPERATOR(pg_catalog.=) ANY ($1)
                OR t.tgrelid OPERATOR(pg_catalog.=) ANY (ARRAY(
                       SELECT p.relid::pg_catalog.oid
                       FROM pg_catalog.unnest($2) r(oid),
                            pg_catalog.pg_partition_tree(r.oid::pg_catalog.regclass) p))
           UNION
             SELECT t.oid FROM made m JOIN pg_catalog.pg_trigger t
                 ON t.tgparentid OPERATOR(pg_catalog.=) m.oid)
         SELECT t.oid, t.tgrelid, t.tgfoid
         FROM made m JOIN pg_catalog.pg_trigger t ON t.oid OPERATOR(pg_catalog.=) m.oid
         ORDER BY t.oid";
    let oids = PgOid::BuiltIn(PgBuiltInOids::OIDARRAYOID);
    with_prepared_args(
        client,
        made,
        &[oids, oids],
        &[triggers.into(), tables.into()],
        |table| {
            let mut rows = Vec::new();
            for_each_spi_row(table, |row| {
                if let (Some(trigger), Some(rel), Some(function)) =
                    (row.get(1)?, row.get(2)?, row.get(3)?)
                {
                    if ours(function) {
                        rows.push((trigger, rel));
                    }
                }
                Ok(())
            })?;
            Ok(rows)
        },
    )
}

/// Whether relation `rel` is a partition.
fn is_partition(rel: pg_sys::Oid) -> bool {
    // SAFETY: a syscache read; false for a relation that is not there.
    unsafe { pg_sys::get_rel_relispartition(rel) }
}

/// The partitions ALTER TABLE command `command` attached.
///
/// # Safety
/// `command` is a `pg_ddl_command` datum of `pg_event_trigger_ddl_commands()`, read in the event
/// trigger that called it.
unsafe fn attached(command: pg_sys::Datum) -> Vec<pg_sys::Oid> {
    // SAFETY: per the contract, a collected command; an ALTER TABLE's carries its subcommands,
    // each with its parse tree and the object it made or changed (an attached partition's
    // address is the partition); an ATTACH PARTITION's tree is an AlterTableCmd whose `def`
    // is a PartitionCmd naming the partition.
    unsafe {
        let command = command.cast_mut_ptr::<pg_sys::CollectedCommand>();
        if (*command).type_ != pg_sys::CollectedCommandType::SCT_AlterTable {
            return Vec::new();
        }
        pgrx::PgList::<pg_sys::CollectedATSubcmd>::from_pg((*command).d.alterTable.subcmds)
            .iter_ptr()
            .filter(|&sub| {
                let tree = (*sub).parsetree;
                pgrx::is_a(tree, pg_sys::NodeTag::T_AlterTableCmd)
                    && (*tree.cast::<pg_sys::AlterTableCmd>()).subtype
                        == pg_sys::AlterTableType::AT_AttachPartition
            })
            .filter_map(|sub| {
                // (PostgreSQL 15 records no address for an ATTACH PARTITION: the partition
                // is then the one the command names, which it has just locked)
                let address = (*sub).address.objectId;
                if address != pg_sys::InvalidOid {
                    return Some(address);
                }
                let partition = (*(*(*sub).parsetree.cast::<pg_sys::AlterTableCmd>())
                    .def
                    .cast::<pg_sys::PartitionCmd>())
                .name;
                let oid = pg_sys::RangeVarGetRelidExtended(
                    partition,
                    pg_sys::NoLock as i32,
                    pg_sys::RVROption::RVR_MISSING_OK,
                    None,
                    std::ptr::null_mut(),
                );
                (oid != pg_sys::InvalidOid).then_some(oid)
            })
            .collect()
    }
}

/// Checks duplicate trigger `tgoid` of relation `rel`, just made, as its rows will be checked
/// ([`settings`]): the events it fires on first, as [`row_event`] checks a firing's.
fn check_created(rel: pg_sys::Oid, tgoid: pg_sys::Oid) {
    // SAFETY: the relation is opened (the command that made the trigger locked it) and closed
    // again; the trigger, one of its descriptor's, is read while it is open.
    unsafe {
        let relation = pg_sys::relation_open(rel, pg_sys::AccessShareLock as i32);
        if let Some(trigger) = triggers((*relation).trigdesc)
            .iter()
            .find(|t| t.tgoid == tgoid)
        {
            let kind = u32::from(trigger.tgtype as u16);
            let on = |event| kind & event != 0;
            let others = pg_sys::TRIGGER_TYPE_DELETE | pg_sys::TRIGGER_TYPE_TRUNCATE;
            require_row_events(
                kind & pg_sys::TRIGGER_TYPE_TIMING_MASK == pg_sys::TRIGGER_TYPE_BEFORE,
                on(pg_sys::TRIGGER_TYPE_ROW),
                !on(others),
            );
            let firing = Firing::on(relation, trigger);
            Spi::connect(|client| {
                settings(&firing, client, None);
            });
        }
        pg_sys::relation_close(relation, pg_sys::NoLock as i32);
    }
}

const INDEX_HINT: &str = "The fourth trigger argument names the index by its band table.";

const FLAG_HINT: &str =
    "The first trigger argument names the column that receives the duplicate's id.";

/// A trigger's threshold argument, parsed as `'...'::float8` would (22P02 if it is not a number).
fn float8_in(text: &str) -> f64 {
    let text = CString::new(text).expect("trigger arguments have no NUL");
    // SAFETY: float8in takes a C string.
    unsafe { pgrx::direct_function_call(pg_sys::float8in, &[text.as_c_str().into_datum()]) }
        .expect("float8in returns a number")
}
