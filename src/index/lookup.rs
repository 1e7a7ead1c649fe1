//! One text looked up in one indexed table: `minhash_similar` and the `minhash_flag_duplicate`
//! trigger. Both run once per query or inserted row, so everything here is in Rust and reuses
//! per-backend state: the catalog row is cached, the candidates and their texts are read
//! straight through the indexes (`scan`), or, where that would not see what SQL sees, through
//! statements prepared once per backend; no PL/pgSQL or SQL function runs in between.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::num::NonZeroUsize;
use std::rc::Rc;

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::heap_tuple::PgHeapTuple;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::{PgBuiltInOids, PgLogLevel, PgOid, PgSqlErrorCode};

use crate::core::jaccard::ShingleSet;
use crate::core::params::{Banding, Shingling};
use crate::core::sketch::{equal_bits, min_equal_bits, BandSketch, SKETCH_MISS_PROBABILITY};
use crate::sql::error::raise;
use crate::sql::interrupts;

use super::compat;
use super::extension::Extension;
use super::owner::{as_owner, relation_owner};
use super::restore::has_sync_trigger;
use super::scan::{attnum, BandIndex, RowIndex};
use super::sync::{claim_band_rows, withdraw_claim};
use super::{band_entry, checked_threshold, float8_text, for_each_row, index_params, spi_failed};

/// Prepared statements kept per backend: the catalog query and the two lookup queries of each
/// indexed table in use, in practice.
const MAX_PREPARED: usize = 64;

thread_local! {
    /// Statements planned once per backend, by query text: a lookup or a flagged insert then
    /// costs no parsing or planning. PostgreSQL re-plans a kept plan by itself when a table it
    /// reads changes; a renamed table or column changes the text, so it gets a new statement.
    static PREPARED: RefCell<HashMap<String, OwnedPreparedStatement>> = RefCell::new(HashMap::new());

    /// Catalog rows read in this backend, by table. An entry is dropped when PostgreSQL
    /// invalidates the relcache entry of its table or band table: DDL on either (the index
    /// functions create and drop the table's triggers) and every change to its catalog row
    /// (the `minhash_indexes_changed` trigger) does that, in this backend at the end of the
    /// command and in the others before their next lock on either table or their next
    /// transaction, as for PostgreSQL's own caches.
    static CONFIGS: RefCell<HashMap<pg_sys::Oid, Rc<IndexConfig>>> = RefCell::new(HashMap::new());

    /// Relations whose relcache entries were invalidated since [`CONFIGS`] was last pruned
    /// (`None`: all of them). The callback only records them: it may run in the middle of
    /// anything, including while `CONFIGS` is borrowed.
    static INVALIDATED: RefCell<Option<Vec<pg_sys::Oid>>> = const { RefCell::new(Some(Vec::new())) };

    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Invalidations remembered one by one; beyond this many, the whole cache is dropped.
const MAX_INVALIDATED: usize = 256;

/// Relcache invalidation callback: remembers `relid` (InvalidOid: every relation).
unsafe extern "C-unwind" fn relcache_invalidated(_: pg_sys::Datum, relid: pg_sys::Oid) {
    INVALIDATED.with(|pending| {
        // never borrowed while PostgreSQL code runs, so this cannot fail; if it ever did,
        // forgetting everything is always safe
        let Ok(mut pending) = pending.try_borrow_mut() else {
            return;
        };
        match pending.as_mut() {
            Some(relids) if relid != pg_sys::InvalidOid && relids.len() < MAX_INVALIDATED => {
                relids.push(relid)
            }
            _ => *pending = None,
        }
    });
}

/// Trigger function on `minhash_indexes`, `AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW` and
/// `AFTER TRUNCATE`: invalidates the relcache entry of each table whose catalog row changed (of
/// every table on TRUNCATE), so that every backend drops its cached copy (see [`CONFIGS`]).
// (created in schema minhash_internal by sql/index.sql)
#[pg_trigger(sql = false)]
fn _minhash_catalog_changed<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, std::convert::Infallible> {
    let data = trigger.trigger_data();
    // only on the catalog of the extension whose function this is
    // SAFETY: a trigger's relation is open while it fires; catalog lookups by OID.
    let on_catalog = unsafe {
        let rel = data.tg_relation;
        Extension::of_function(trigger.trigger().tgfoid).schema == (*(*rel).rd_rel).relnamespace
            && pgrx::name_data_to_str(&(*(*rel).rd_rel).relname) == "minhash_indexes"
    };
    if !on_catalog {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "_minhash_catalog_changed() fires only on the minhash_indexes catalog",
            None,
        );
    }
    if data.tg_event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_TRUNCATE {
        // SAFETY: queues an invalidation of every relcache entry; no arguments.
        unsafe { pg_sys::CacheInvalidateRelcacheAll() };
        return Ok(None);
    }
    // SAFETY: a row trigger's relation is open and its descriptor valid while it fires.
    let (catalog, tupdesc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let (tbl_attno, _, _) = column(tupdesc, catalog, "tbl", "");
    for tuple in [data.tg_trigtuple, data.tg_newtuple] {
        if tuple.is_null() {
            continue;
        }
        let mut is_null = false;
        // SAFETY: `tuple` is this event's old or new row, described by `tupdesc`; `tbl` is a
        // regclass, an OID datum.
        let tbl = unsafe {
            pg_sys::Oid::from_datum(
                pg_sys::heap_getattr(tuple, tbl_attno as i32, tupdesc, &mut is_null),
                is_null,
            )
        };
        // a dropped table has no relcache entry left to invalidate
        if let Some(tbl) = tbl.filter(|&t| qualified(t).is_some()) {
            // SAFETY: the relation exists (checked just above, under the catalog's lock).
            unsafe { pg_sys::CacheInvalidateRelcacheByRelid(tbl) };
        }
    }
    Ok(None)
}

/// The cached catalog row of `tbl`, after dropping the invalidated entries.
fn cached_config(tbl: pg_sys::Oid) -> Option<Rc<IndexConfig>> {
    if !CALLBACK_REGISTERED.replace(true) {
        // SAFETY: registered once per backend; the callback neither errors nor allocates in
        // PostgreSQL memory.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(
                Some(relcache_invalidated),
                pg_sys::Datum::from(0),
            )
        };
    }
    let pending = INVALIDATED.with_borrow_mut(|p| p.replace(Vec::new()));
    CONFIGS.with_borrow_mut(|configs| {
        match pending {
            None => configs.clear(),
            Some(relids) if !relids.is_empty() => configs
                .retain(|_, cfg| !relids.contains(&cfg.tbl) && !relids.contains(&cfg.band_table)),
            Some(_) => {}
        }
        configs.get(&tbl).cloned()
    })
}

/// A `regclass` argument, taken as the table's OID without opening the table.
#[derive(Clone, Copy)]
pub(crate) struct Regclass(pub(crate) pg_sys::Oid);

impl FromDatum for Regclass {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        // SAFETY: a regclass datum is an OID datum.
        (!is_null)
            .then(|| Regclass(unsafe { pg_sys::Oid::from_datum(datum, false) }.expect("not NULL")))
    }
}

// SAFETY: a regclass argument is unboxed from its OID datum.
unsafe impl<'fcx> ArgAbi<'fcx> for Regclass {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: PostgreSQL passes a regclass datum, as the SQL signature says.
        unsafe { arg.unbox_arg_using_from_datum() }.expect("a non-NULL regclass")
    }
}

// SAFETY: the SQL type is regclass, an OID.
unsafe impl SqlTranslatable for Regclass {
    const TYPE_IDENT: &'static str = <pgrx::PgRelation as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <pgrx::PgRelation as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <pgrx::PgRelation as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        <pgrx::PgRelation as SqlTranslatable>::RETURN_SQL;
}

/// What a lookup or the insert sync trigger needs of a table's `minhash_indexes` row, and how a
/// lookup reads the band table.
pub(super) struct IndexConfig {
    tbl: pg_sys::Oid,
    pub(super) id_column: String,
    pub(super) text_column: String,
    pub(super) band_table: pg_sys::Oid,
    pub(super) k: usize,
    pub(super) shingling: Shingling,
    pub(super) banding: Banding,
    threshold: f64,
    /// The band table's index a lookup reads directly, if it has one.
    band_index: Option<BandIndex>,
    /// The table's unique index on the id, through which a lookup reads texts directly.
    row_index: Option<RowIndex>,
    /// The lookup's two SQL queries (see [`IndexConfig::lookup_sql`]).
    sql: [String; 2],
}

impl IndexConfig {
    /// The catalog row of `tbl` (see [`IndexConfig::find`]); 42704 if the table has none
    /// (40001 if it has one that this transaction's snapshot predates, see
    /// [`refuse_newer_index`]).
    pub(super) fn get(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
    ) -> Rc<IndexConfig> {
        Self::find(client, fn_oid, tbl).unwrap_or_else(|| {
            // SAFETY: the relation is opened with a lock (or not found) and closed again; its
            // trigger descriptor is read while it is open.
            unsafe {
                let rel = pg_sys::try_table_open(tbl, pg_sys::AccessShareLock as i32);
                if !rel.is_null() {
                    let ext = Extension::of_function(fn_oid);
                    let indexed = has_sync_trigger((*rel).trigdesc, ext);
                    pg_sys::table_close(rel, pg_sys::NoLock as i32);
                    if indexed {
                        refuse_newer_index(tbl);
                    }
                }
            }
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                format!("table {} has no minhash index", regclass_name(tbl)),
                Some("Create one with minhash_index_create(table, id_column, text_column).".into()),
            )
        })
    }

    /// The catalog row of `tbl` (see [`IndexConfig::read`]), from this backend's cache when
    /// nothing has changed since it was read.
    pub(super) fn find(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
    ) -> Option<Rc<IndexConfig>> {
        if let Some(cfg) = cached_config(tbl) {
            // Lock what the lookup reads, as its first read would; that brings in every
            // invalidation committed meanwhile (a dropped index, a changed row), and the entry
            // is used only if it survives them. The locks then keep the band table's indexes
            // from being dropped until the transaction ends.
            // SAFETY: locks by OID; a relation dropped meanwhile is simply not found below.
            unsafe {
                pg_sys::LockRelationOid(cfg.tbl, pg_sys::AccessShareLock as i32);
                pg_sys::LockRelationOid(cfg.band_table, pg_sys::AccessShareLock as i32);
            }
            if let Some(cfg) = cached_config(tbl) {
                return Some(cfg);
            }
        }
        // The table first: minhash_index_drop takes it before it drops the band table, so the
        // band table read next cannot go away before this transaction ends.
        // SAFETY: a lock by OID, as above.
        unsafe { pg_sys::LockRelationOid(tbl, pg_sys::AccessShareLock as i32) };
        let cfg = Rc::new(IndexConfig::read(client, fn_oid, tbl)?);
        // SAFETY: as above (an OID no relation has any more is locked harmlessly).
        unsafe { pg_sys::LockRelationOid(cfg.band_table, pg_sys::AccessShareLock as i32) };
        CONFIGS.with_borrow_mut(|configs| configs.insert(tbl, Rc::clone(&cfg)));
        Some(cfg)
    }

    /// The catalog row of `tbl`, read through the catalog of the extension whose function
    /// `fn_oid` is running, if it has one.
    fn read(client: &SpiClient<'_>, fn_oid: pg_sys::Oid, tbl: pg_sys::Oid) -> Option<IndexConfig> {
        let schema = Extension::of_function(fn_oid).quoted_schema();
        let sql = format!(
            "SELECT i.id_column::pg_catalog.text, i.text_column::pg_catalog.text,
                    i.band_table::pg_catalog.oid, i.k, i.ngram, i.unit, i.threshold, i.bands,
                    i.rows_per_band, i.xmax::pg_catalog.text::pg_catalog.int8
             FROM {schema}.minhash_indexes i WHERE i.tbl OPERATOR(pg_catalog.=) $1"
        );
        let row = with_prepared(client, &sql, PgBuiltInOids::OIDOID, tbl.into(), |table| {
            if table.is_empty() {
                return Ok(None);
            }
            let row = table.first();
            let text = |i| row.get::<String>(i).map(|v| v.expect("NOT NULL column"));
            let int = |i| row.get::<i32>(i).map(|v| v.expect("NOT NULL column"));
            Ok(Some((
                (text(1)?, text(2)?),
                row.get::<pg_sys::Oid>(3)?.expect("NOT NULL column"),
                (int(4)?, int(5)?, text(6)?),
                row.get::<f64>(7)?.expect("NOT NULL column"),
                (int(8)?, int(9)?),
                row.get::<i64>(10)?.expect("a row's xmax is never NULL"),
            )))
        });
        let ((id_column, text_column), band_table, (k, ngram, unit), threshold, banding, xmax) =
            row?;
        // A row deleted since the snapshot was taken that names a band table dropped since: the
        // index was dropped (and maybe created again) while the statement waited for its lock.
        // SAFETY: a syscache lookup (always current, unlike the snapshot that read the row) and
        // a commit log lookup of a transaction id that a row carries.
        unsafe {
            let xmax = pg_sys::TransactionId::from_inner(xmax as u32);
            if pg_sys::get_rel_name(band_table).is_null()
                && xmax != pg_sys::InvalidTransactionId
                && pg_sys::TransactionIdDidCommit(xmax)
            {
                concurrent_index_change(tbl);
            }
        }
        let (k, shingling, banding) = index_params(k, ngram, &unit, banding.0, banding.1);
        Some(IndexConfig {
            tbl,
            sql: Self::lookup_sql(tbl, band_table, &id_column, &text_column),
            band_index: BandIndex::find(band_table),
            row_index: RowIndex::find(tbl, &id_column, &text_column),
            id_column,
            text_column,
            band_table,
            k,
            shingling,
            banding,
            threshold,
        })
    }

    /// Raises 42501 unless the current user may read the id and text columns of the table
    /// (table-level SELECT, or SELECT on both columns), as a query of them would.
    fn check_readable(&self) {
        if !self.may_select(&[&self.id_column, &self.text_column]) {
            raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for table {}", regclass_name(self.tbl)),
                Some(format!(
                    "A lookup reads the columns \"{}\" and \"{}\".",
                    self.id_column, self.text_column
                )),
            );
        }
    }

    /// Whether the current user may be told which row an error is about: SELECT on the id
    /// column and no row-level security hiding rows, as PostgreSQL decides whether a unique
    /// violation's DETAIL may show the key.
    fn may_see_ids(&self) -> bool {
        // SAFETY: a row-level security check by OID.
        let rls = unsafe { pg_sys::check_enable_rls(self.tbl, pg_sys::InvalidOid, true) };
        rls != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
            && self.may_select(&[&self.id_column])
    }

    /// Whether the current user may SELECT `columns` of the table: table-level SELECT, or
    /// SELECT on each of them.
    fn may_select(&self, columns: &[&str]) -> bool {
        let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
        // SAFETY: privilege checks by OID and attribute number.
        unsafe {
            let user = pg_sys::GetUserId();
            pg_sys::pg_class_aclcheck(self.tbl, user, select) == pg_sys::AclResult::ACLCHECK_OK
                || columns.iter().all(|name| {
                    let attno = attnum(self.tbl, name);
                    attno > 0
                        && pg_sys::pg_attribute_aclcheck(self.tbl, attno, user, select)
                            == pg_sys::AclResult::ACLCHECK_OK
                })
        }
    }

    /// The two queries of a lookup, each with one int8[] parameter: `(id, sketch1, sketch2)`
    /// of the band rows with one of the keys `$1`, read from the band table's `(key, id)
    /// INCLUDE (sketch1, sketch2)` index alone (an index-only scan), for when that index cannot
    /// be read directly (see `scan`); then `(id, text)` of the rows with the ids `$1`, through
    /// the table's unique index on the id.
    fn lookup_sql(
        tbl: pg_sys::Oid,
        band_table: pg_sys::Oid,
        id_column: &str,
        text_column: &str,
    ) -> [String; 2] {
        let (id, text) = (quote_ident_str(id_column), quote_ident_str(text_column));
        [
            format!(
                "SELECT b.id, b.sketch1, b.sketch2 FROM {bands} b
                 WHERE b.key OPERATOR(pg_catalog.=) ANY ($1)",
                bands = qualified_name(band_table),
            ),
            format!(
                "SELECT t.{id}::pg_catalog.int8, t.{text}::pg_catalog.text FROM {tbl} t
                 WHERE t.{id} OPERATOR(pg_catalog.=) ANY ($1)",
                tbl = qualified_name(tbl),
            ),
        ]
    }

    /// The rows at least `threshold` similar to `doc`, most similar first (ties by id), leaving
    /// out `exclude_id`. A row sharing a band key with `doc` is fetched and verified only if its
    /// band sketch agrees with `doc`'s in enough bits (`core::sketch`): that drops a row at or
    /// above the threshold with probability at most [`SKETCH_MISS_PROBABILITY`].
    fn similar(
        &self,
        client: &SpiClient<'_>,
        doc: &str,
        threshold: f64,
        exclude_id: Option<i64>,
    ) -> Vec<(i64, f64)> {
        // no shingles, no band keys: nothing is a candidate (such texts are not indexed)
        let Some((keys, sketch)) = band_entry(doc, self.k, self.shingling, self.banding) else {
            return Vec::new();
        };
        let min_bits = min_equal_bits(self.k, threshold, SKETCH_MISS_PROBABILITY);
        let [bands_sql, rows_sql] = &self.sql;
        let array = PgBuiltInOids::INT8ARRAYOID;
        let mut ids = Vec::new();
        let mut keep = |id: i64, row_sketch: [u64; 2]| {
            if Some(id) != exclude_id && equal_bits(sketch, row_sketch, self.k) >= min_bits {
                ids.push(id);
            }
        };
        // The band table is private to the table's owner: read it directly (the caller's
        // right to see the results was checked by the caller of `similar`), or through SQL as
        // the owner.
        match self.band_index.filter(BandIndex::usable) {
            Some(index) => index.scan(&keys, keep),
            None => as_owner(relation_owner(self.tbl), || {
                with_prepared(client, bands_sql, array, keys.into(), |table| {
                    for row in table {
                        if let (Some(id), Some(s1), Some(s2)) =
                            (row.get::<i64>(1)?, row.get::<i64>(2)?, row.get::<i64>(3)?)
                        {
                            keep(id, [s1 as u64, s2 as u64]);
                        }
                    }
                    Ok(())
                })
            }),
        }
        if ids.is_empty() {
            return Vec::new();
        }
        ids.sort_unstable();
        ids.dedup();
        let query_set = ShingleSet::new(doc, self.shingling, &mut interrupts);
        let mut candidate = ShingleSet::default();
        let mut found = Vec::new();
        let verify = |id: i64, text: &str| {
            candidate.rebuild(text, self.shingling, &mut interrupts);
            let similarity = candidate.jaccard(&query_set);
            if similarity >= threshold {
                found.push((id, similarity));
            }
        };
        match self.row_index.filter(RowIndex::readable) {
            Some(index) => index.fetch(&ids, verify),
            None => with_prepared(client, rows_sql, array, ids.into(), |table| {
                for_each_row(table, verify)
            }),
        }
        found.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found
    }
}

/// Under REPEATABLE READ and SERIALIZABLE: raises 40001, for a transaction that writes `tbl`
/// but whose snapshot predates the index it finds now (created, or dropped and created again,
/// while the transaction waited for the lock): what that snapshot shows of the catalog and
/// the band table is not what the band table holds, as for a row changed after the snapshot.
/// Returns under READ COMMITTED, where each statement's snapshot follows its locks.
pub(super) fn refuse_newer_index(tbl: pg_sys::Oid) {
    // SAFETY: reads the transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        concurrent_index_change(tbl);
    }
}

/// Raises 40001: the index of `tbl` that the statement's snapshot shows was dropped (or
/// dropped and created again) after that snapshot was taken, while the statement waited for
/// its lock. Trying again sees the index as it is now.
fn concurrent_index_change(tbl: pg_sys::Oid) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        format!(
            "could not serialize access due to a concurrent change of the minhash index of {}",
            regclass_name(tbl)
        ),
        "pg_minhash",
    )
    .set_hint("The transaction might succeed if retried.")
    .report(PgLogLevel::ERROR);
    unreachable!("ERROR reports do not return")
}

/// A row that conflicts with the row a flag trigger checks: its id, its similarity, and
/// whether the transaction's snapshot sees it.
struct Conflict {
    id: i64,
    similarity: f64,
    in_snapshot: bool,
}

impl IndexConfig {
    /// The rows at or above `threshold` similar to `doc` (band entry `entry`), other than the
    /// rows with the ids `own`, as a constraint sees them: every row committed or written by
    /// this transaction, whenever it committed. The trigger's own band rows were written
    /// first (a claim, see `claim`); where a candidate's fate depends on a transaction still
    /// in progress, this waits for that transaction to end and looks again, as PostgreSQL
    /// checks an exclusion constraint. Two writers of near-duplicates that wait for each other
    /// are a deadlock, which PostgreSQL resolves by failing one of them (40P01).
    fn conflicts(
        &self,
        doc: &str,
        (keys, sketch): &(Vec<i64>, BandSketch),
        threshold: f64,
        own: &[Option<i64>],
    ) -> Checked {
        let missing = || -> ! {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "the minhash index of {} lacks the indexes a duplicate check reads",
                    regclass_name(self.tbl)
                ),
                Some(
                    "The band table needs its (key, id) index and the table a unique index on \
                     the id alone; drop the index with minhash_index_drop() and create it again."
                        .into(),
                ),
            )
        };
        let band_index = self.band_index.unwrap_or_else(|| missing());
        let row_index = self.row_index.unwrap_or_else(|| missing());
        let min_bits = min_equal_bits(self.k, threshold, SKETCH_MISS_PROBABILITY);
        let query_set = ShingleSet::new(doc, self.shingling, &mut interrupts);
        let mut candidate = ShingleSet::default();
        // a writer found done with its check once (see `checking::wait_for`)
        let mut done_checking = None;
        loop {
            // candidates: (id, a transaction in progress that writes one of its band rows)
            let mut candidates: Vec<(i64, Option<pg_sys::TransactionId>)> = Vec::new();
            let other = |id| !own.contains(&Some(id));
            band_index.scan_dirty(keys, other, |id, row_sketch, writer| {
                if equal_bits(*sketch, row_sketch, self.k) >= min_bits {
                    candidates.push((id, writer));
                }
            });
            if candidates.is_empty() {
                return Checked::Done(Vec::new());
            }
            candidates.sort_unstable_by_key(|&(id, writer)| (id, writer.is_none()));
            candidates.dedup_by_key(|&mut (id, _)| id);
            let ids: Vec<i64> = candidates.iter().map(|&(id, _)| id).collect();
            // every version of each candidate row: (id, at or above the threshold, state)
            let mut versions = Vec::new();
            row_index.fetch_dirty(&ids, |id, text, state| {
                candidate.rebuild(text, self.shingling, &mut interrupts);
                let similarity = candidate.jaccard(&query_set);
                versions.push((id, similarity, state));
            });
            // A row whose band rows a transaction in progress is writing: its text decides,
            // once that transaction has written it (a claim comes before its row).
            let undecided = candidates.iter().find_map(|&(id, writer)| {
                let writer = writer?;
                let mut written = versions
                    .iter()
                    .filter(|(v, _, s)| *v == id && s.writer == Some(writer) && s.inserting)
                    .peekable();
                let pending = written.peek().is_none();
                (pending || written.any(|(_, similarity, _)| *similarity >= threshold))
                    .then_some(writer)
            });
            // a matching row that a transaction in progress inserts, updates or deletes
            let undecided = undecided.or_else(|| {
                versions
                    .iter()
                    .find(|(_, similarity, state)| {
                        *similarity >= threshold && state.writer.is_some()
                    })
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

/// Runs the statement `sql` with its one parameter (of type `param_type`) and hands the result
/// to `read`. The statement is prepared on first use and kept for the backend.
fn with_prepared<T>(
    client: &SpiClient<'_>,
    sql: &str,
    param_type: PgBuiltInOids,
    param: pgrx::datum::DatumWithOid<'_>,
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> T {
    // taken out of the cache while it runs, so a nested lookup cannot find it borrowed
    let kept = PREPARED.with_borrow_mut(|cache| cache.remove(sql));
    let run = || -> pgrx::spi::Result<(OwnedPreparedStatement, T)> {
        let statement = match kept {
            Some(statement) => statement,
            None => client.prepare(sql, &[PgOid::BuiltIn(param_type)])?.keep(),
        };
        let result = read(client.select(&statement, None, &[param])?)?;
        Ok((statement, result))
    };
    let (statement, result) = run().unwrap_or_else(|e| spi_failed(e));
    PREPARED.with_borrow_mut(|cache| {
        if cache.len() >= MAX_PREPARED {
            cache.clear();
        }
        cache.insert(sql.to_owned(), statement);
    });
    result
}

/// A table's name for messages: schema-qualified, quoted as needed, like the other functions'
/// messages print a regclass (they run with `search_path = pg_catalog`). `None` if the table no
/// longer exists.
fn qualified(rel: pg_sys::Oid) -> Option<String> {
    // SAFETY: both lookups return NULL (checked) or a palloc'd C string.
    unsafe {
        let name = pg_sys::get_rel_name(rel);
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(rel));
        (!name.is_null() && !schema.is_null()).then(|| {
            CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name))
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// [`qualified`], or the OID as a number (as `regclass` prints one) for a dropped table.
pub(super) fn regclass_name(tbl: pg_sys::Oid) -> String {
    qualified(tbl).unwrap_or_else(|| tbl.to_u32().to_string())
}

/// [`qualified`] for a table a query reads; 42P01 if it no longer exists.
pub(super) fn qualified_name(rel: pg_sys::Oid) -> String {
    qualified(rel).unwrap_or_else(|| {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("relation with OID {} does not exist", rel.to_u32()),
            Some(
                "The minhash index refers to a dropped table; drop it with minhash_index_drop()."
                    .into(),
            ),
        )
    })
}

fn quote_ident(ident: &CStr) -> String {
    // SAFETY: quote_identifier returns its argument or a palloc'd quoted copy.
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(ident.as_ptr())) }
        .to_string_lossy()
        .into_owned()
}

fn quote_ident_str(ident: &str) -> String {
    quote_ident(&CString::new(ident).expect("identifiers have no NUL"))
}

/// The rows of `tbl` whose text is at least `threshold` similar to `doc` (default: the index's
/// threshold), most similar first, at most `max_results` of them (default: all).
#[pg_extern(stable, parallel_safe)]
fn minhash_similar(
    tbl: Option<Regclass>,
    doc: Option<&str>,
    threshold: default!(Option<f64>, "NULL"),
    max_results: default!(Option<i32>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, i64), name!(similarity, f64))> {
    let Some(Regclass(tbl)) = tbl else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "tbl must not be NULL",
            None,
        );
    };
    // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo names the function.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let found = Spi::connect(|client| {
        let cfg = IndexConfig::get(client, fn_oid, tbl);
        cfg.check_readable();
        let threshold = checked_threshold(threshold, cfg.threshold);
        if let Some(max) = max_results.filter(|&m| m < 1) {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("max_results must be at least 1, got {max}"),
                None,
            );
        }
        let mut found = doc.map_or_else(Vec::new, |doc| cfg.similar(client, doc, threshold, None));
        if let Some(max) = max_results {
            found.truncate(max as usize);
        }
        found
    });
    TableIterator::new(found)
}

/// The two queries `minhash_similar` and `minhash_flag_duplicate` prepare for `tbl` (see
/// `IndexConfig::lookup_sql`), named `bands` and `rows`; shown so their plans can be checked.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_lookup_sql(
    tbl: Regclass,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(step, String), name!(query, String))> {
    // SAFETY: as in minhash_similar.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let [bands, rows] = Spi::connect(|client| IndexConfig::get(client, fn_oid, tbl.0).sql.clone());
    TableIterator::new([("bands".to_owned(), bands), ("rows".to_owned(), rows)])
}

/// The indexes a lookup of `tbl` by the current user would read directly now (see `scan`), by
/// name: the band index for candidates and the table's unique index for their texts; NULL for a
/// step that would run its SQL query instead. Shown so tests can tell.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_direct_reads(
    tbl: Regclass,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(band_index, Option<String>),
        name!(row_index, Option<String>),
    ),
> {
    // SAFETY: as in minhash_similar.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let cfg = Spi::connect(|client| IndexConfig::get(client, fn_oid, tbl.0));
    let band = cfg.band_index.filter(BandIndex::usable);
    let rows = cfg.row_index.filter(RowIndex::readable);
    TableIterator::once((
        band.and_then(|index| qualified(index.oid())),
        rows.and_then(|index| qualified(index.oid())),
    ))
}

/// What the trigger was created with: `(column, threshold, mode)`.
enum FlagMode {
    /// Set this column (attribute number, type) of the new row to the original's id.
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
/// under its old id or its new one.
#[pg_trigger]
fn minhash_flag_duplicate<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, std::convert::Infallible> {
    let data = trigger.trigger_data();
    let event = data.tg_event;
    let before = event & pg_sys::TRIGGER_EVENT_TIMINGMASK == pg_sys::TRIGGER_EVENT_BEFORE;
    let row = event & pg_sys::TRIGGER_EVENT_ROW != 0;
    let op = event & pg_sys::TRIGGER_EVENT_OPMASK;
    let update = op == pg_sys::TRIGGER_EVENT_UPDATE;
    if !(before && row && (op == pg_sys::TRIGGER_EVENT_INSERT || update)) {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "minhash_flag_duplicate() must be fired BEFORE INSERT OR UPDATE FOR EACH ROW",
            None,
        );
    }
    let args = trigger_args(trigger.trigger());
    let arg = |i: usize| args.get(i).map(String::as_str);
    // SAFETY: a row trigger's relation is open and its descriptor valid while it fires.
    let (tbl, tupdesc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let mode = match arg(2).unwrap_or("flag") {
        "flag" => None,
        "reject" => Some(FlagMode::Reject),
        other => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("minhash_flag_duplicate() mode must be 'flag' or 'reject', not '{other}'"),
            None,
        ),
    };
    // SAFETY: INSERT row triggers get the new row as tg_trigtuple, UPDATE ones as tg_newtuple.
    let tuple = if update {
        data.tg_newtuple
    } else {
        data.tg_trigtuple
    };
    // SAFETY: a row trigger's relation is open while it fires.
    let owner = unsafe { (*(*data.tg_relation).rd_rel).relowner };
    let checked = Spi::connect(|client| {
        let fn_oid = trigger.trigger().tgfoid;
        let cfg = match IndexConfig::find(client, fn_oid, tbl) {
            Some(cfg) => cfg,
            // A data-only restore may load an indexed table before its catalog row: its rows
            // stay as they were dumped, as in a full restore.
            // SAFETY: the trigger descriptor of the open relation; the function running now.
            None if unsafe {
                has_sync_trigger((*data.tg_relation).trigdesc, Extension::of_function(fn_oid))
            } =>
            {
                // (or, under REPEATABLE READ and SERIALIZABLE, one created after the snapshot)
                refuse_newer_index(tbl);
                return None;
            }
            None => IndexConfig::get(client, fn_oid, tbl),
        };
        let (text_attno, _, _) = column(tupdesc, tbl, &cfg.text_column, COLUMNS_HINT);
        // SAFETY: an UPDATE row trigger has both rows, described by `tupdesc`.
        if update && unsafe { same_bytes(data, tupdesc, text_attno) } {
            return None;
        }
        let mode = mode.unwrap_or_else(|| {
            let (attno, typid, typmod) = column(tupdesc, tbl, arg(0).unwrap_or(""), FLAG_HINT);
            FlagMode::Flag(attno, typid, typmod)
        });
        let threshold = arg(1)
            .filter(|t| !(t.is_empty() || t.eq_ignore_ascii_case("null")))
            .map(float8_in);
        let threshold = checked_threshold(threshold, cfg.threshold);
        let (id_attno, id_type, _) = column(tupdesc, tbl, &cfg.id_column, COLUMNS_HINT);
        // SAFETY: the attribute numbers and types come from this tuple's descriptor; an
        // UPDATE's old row (tg_trigtuple) has the same descriptor.
        let (doc, own_ids) = unsafe {
            let old_id = update
                .then(|| id_attribute(data.tg_trigtuple, tupdesc, id_attno, id_type))
                .flatten();
            (
                text_attribute(tuple, tupdesc, text_attno),
                [id_attribute(tuple, tupdesc, id_attno, id_type), old_id],
            )
        };
        // Like a constraint, the trigger sees every row, whoever writes: it writes the row's
        // band rows first and then checks them against every row committed or in progress, as
        // the table's owner (see `conflicts`).
        let entry = doc.and_then(|doc| band_entry(doc, cfg.k, cfg.shingling, cfg.banding));
        let conflicts = match (doc, &entry) {
            (Some(doc), Some(entry)) => as_owner(owner, || {
                let rel = (tbl, owner, Extension::of_function(fn_oid));
                loop {
                    checking::begin();
                    if let Some(id) = own_ids[0] {
                        claim_band_rows(&cfg, rel, id, &entry.0, entry.1);
                    }
                    let checked = cfg.conflicts(doc, entry, threshold, &own_ids);
                    match checked {
                        Checked::Done(conflicts) => {
                            checking::end();
                            break conflicts;
                        }
                        Checked::YieldTo(other) => {
                            if let Some(id) = own_ids[0] {
                                withdraw_claim(&cfg, rel, id);
                            }
                            checking::end();
                            checking::wait_check(other);
                        }
                    }
                }
            }),
            _ => Vec::new(),
        };
        Some((
            cfg.id_column.clone(),
            mode,
            threshold,
            conflicts,
            cfg.may_see_ids(),
        ))
    });
    let new = trigger
        .new()
        .expect("INSERT and UPDATE row triggers have a new row")
        .into_owned();
    // an UPDATE that leaves the text alone leaves the row alone
    let Some((id_column, mode, threshold, conflicts, may_see)) = checked else {
        return Ok(Some(new));
    };
    // The original is the matching row with the smallest id.
    let original = |rows: &mut dyn Iterator<Item = &Conflict>| {
        rows.min_by_key(|c| c.id).map(|c| (c.id, c.similarity))
    };
    match mode {
        FlagMode::Reject => {
            // a row the transaction's snapshot sees is a plain violation; one committed since
            // (REPEATABLE READ, SERIALIZABLE) is a serialization failure, as for a unique key
            let seen = original(&mut conflicts.iter().filter(|c| c.in_snapshot));
            // SAFETY: reads the transaction's isolation level.
            let snapshot_xact =
                unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32;
            if seen.is_none() && snapshot_xact && !conflicts.is_empty() {
                ErrorReport::new(
                    PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                    "could not serialize access due to a concurrent near-duplicate",
                    "pg_minhash",
                )
                .set_detail(format!(
                    "A near-duplicate row of {} was committed after this transaction's \
                     snapshot was taken.",
                    regclass_name(tbl)
                ))
                .set_hint("The transaction might succeed if retried.")
                .report(PgLogLevel::ERROR);
            }
            if let Some((id, similarity)) = seen.or_else(|| original(&mut conflicts.iter())) {
                let report = ErrorReport::new(
                    PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                    format!(
                        "row is a near-duplicate of an existing row of {}",
                        regclass_name(tbl)
                    ),
                    "pg_minhash",
                );
                // the row it matched only for those who may see it
                let report = if may_see {
                    report.set_detail(format!(
                        "Row with {id_column} = {id} has similarity {similarity:.4} \
                         (threshold {}).",
                        float8_text(threshold)
                    ))
                } else {
                    report
                };
                // SAFETY: the trigger's relation and trigger are valid while it fires.
                unsafe { name_constraint(data.tg_relation, trigger.trigger()) };
                report.report(PgLogLevel::ERROR);
            }
            Ok(Some(new))
        }
        // an INSERT that matches no row keeps the value it gives (a restored row, its flag)
        FlagMode::Flag(..) if conflicts.is_empty() && !update => Ok(Some(new)),
        FlagMode::Flag(attno, typid, typmod) => {
            let mut new = new;
            let datum = original(&mut conflicts.iter()).map(|(id, _)| id_datum(id, typid, typmod));
            let attno = NonZeroUsize::new(attno).expect("attribute numbers start at 1");
            // SAFETY: `datum` was made by the input function of the column's own type.
            unsafe { new.set_by_index_unchecked(attno, datum) };
            Ok(Some(new))
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

const FLAG_HINT: &str =
    "The first trigger argument names the column that receives the duplicate's id.";
pub(super) const COLUMNS_HINT: &str =
    "A column of the minhash index was dropped or renamed; drop the index with minhash_index_drop().";

/// Whether an UPDATE's old and new row have the same bytes (or both NULL) in attribute `attno`.
///
/// # Safety
/// `data` is an UPDATE row trigger's data; `attno` is a varlena attribute of `tupdesc`, which
/// describes both rows.
unsafe fn same_bytes(data: &pg_sys::TriggerData, tupdesc: pg_sys::TupleDesc, attno: usize) -> bool {
    let bytes = |tuple: *mut pg_sys::HeapTupleData| {
        let mut is_null = false;
        // SAFETY: per the contract.
        unsafe {
            let datum = pg_sys::heap_getattr(tuple, attno as i32, tupdesc, &mut is_null);
            (!is_null).then(|| varlena_bytes(datum))
        }
    };
    bytes(data.tg_trigtuple) == bytes(data.tg_newtuple)
}

/// The bytes of a varlena datum (text, varchar), detoasted into the current memory context if
/// need be.
///
/// # Safety
/// `datum` is a non-NULL varlena datum; the bytes live as long as it and that context.
pub(super) unsafe fn varlena_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: per the contract.
    unsafe {
        let value = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        pgrx::varlena::varlena_to_byte_slice(value)
    }
}

/// The trigger's arguments as given to CREATE TRIGGER.
fn trigger_args(trigger: &pg_sys::Trigger) -> Vec<String> {
    (0..trigger.tgnargs as usize)
        .map(|i| {
            // SAFETY: tgargs holds tgnargs C strings.
            unsafe { CStr::from_ptr(*trigger.tgargs.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// `(attribute number, type, typmod)` of the live column `name`; 42703 naming the table if
/// there is none.
pub(super) fn column(
    tupdesc: pg_sys::TupleDesc,
    tbl: pg_sys::Oid,
    name: &str,
    hint: &str,
) -> (usize, pg_sys::Oid, i32) {
    // SAFETY: a valid descriptor of `natts` attributes.
    let attributes = unsafe { compat::attributes(tupdesc) };
    attributes
        .iter()
        .enumerate()
        .find(|(_, a)| !a.attisdropped && pgrx::name_data_to_str(&a.attname) == name)
        .map(|(i, a)| (i + 1, a.atttypid, a.atttypmod))
        .unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" of table {} does not exist",
                    regclass_name(tbl)
                ),
                Some(hint.into()),
            )
        })
}

/// A text or varchar attribute, NULL as None.
///
/// # Safety
/// `attno` is a text or varchar attribute of `tupdesc`, which describes `tuple`.
unsafe fn text_attribute<'t>(
    tuple: *mut pg_sys::HeapTupleData,
    tupdesc: pg_sys::TupleDesc,
    attno: usize,
) -> Option<&'t str> {
    let mut is_null = false;
    // SAFETY: per the contract; text and varchar share one representation.
    unsafe {
        let datum = pg_sys::heap_getattr(tuple, attno as i32, tupdesc, &mut is_null);
        <&str as FromDatum>::from_datum(datum, is_null)
    }
}

/// A smallint, integer or bigint attribute as i64, NULL as None.
///
/// # Safety
/// `attno` is an attribute of type `typid` of `tupdesc`, which describes `tuple`.
unsafe fn id_attribute(
    tuple: *mut pg_sys::HeapTupleData,
    tupdesc: pg_sys::TupleDesc,
    attno: usize,
    typid: pg_sys::Oid,
) -> Option<i64> {
    let mut is_null = false;
    // SAFETY: per the contract.
    let datum = unsafe { pg_sys::heap_getattr(tuple, attno as i32, tupdesc, &mut is_null) };
    if is_null {
        return None;
    }
    // SAFETY: the datum has the type matched.
    unsafe {
        match typid {
            pg_sys::INT2OID => i16::from_datum(datum, false).map(i64::from),
            pg_sys::INT4OID => i32::from_datum(datum, false).map(i64::from),
            _ => i64::from_datum(datum, false),
        }
    }
}

/// A trigger's threshold argument, parsed as `'...'::float8` would (22P02 if it is not a number).
fn float8_in(text: &str) -> f64 {
    let text = CString::new(text).expect("trigger arguments have no NUL");
    // SAFETY: float8in takes a C string.
    unsafe { pgrx::direct_function_call(pg_sys::float8in, &[text.as_c_str().into_datum()]) }
        .expect("float8in returns a number")
}

/// The id `id` as a value of the flag column's type, through that type's input function: an
/// integer column of any width, numeric, text, or a domain over one (with its checks).
fn id_datum(id: i64, typid: pg_sys::Oid, typmod: i32) -> pg_sys::Datum {
    if typid == pg_sys::INT8OID {
        return id.into();
    }
    let text = CString::new(id.to_string()).expect("digits");
    let (mut input, mut ioparam) = (pg_sys::Oid::INVALID, pg_sys::Oid::INVALID);
    // SAFETY: the type exists (it is a column's); the input function takes a C string.
    unsafe {
        pg_sys::getTypeInputInfo(typid, &mut input, &mut ioparam);
        pg_sys::OidInputFunctionCall(input, text.as_ptr() as *mut _, ioparam, typmod)
    }
}
