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
use crate::core::sketch::{equal_bits, min_equal_bits};
use crate::sql::error::raise;
use crate::sql::interrupts;

use super::owner::{as_owner, relation_owner};
use super::restore::has_sync_trigger;
use super::scan::{attnum, BandIndex, RowIndex};
use super::{band_entry, checked_threshold, float8_text, for_each_row, index_params, spi_failed};

/// Probability, per row at or above the threshold, that a lookup's sketch filter drops it: far
/// below what the banding itself misses at the threshold (1% by default, see `lsh_params`).
const SKETCH_MISS_PROBABILITY: f64 = 1e-6;

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
#[pg_trigger]
fn _minhash_catalog_changed<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, std::convert::Infallible> {
    let data = trigger.trigger_data();
    // only on the catalog of the extension whose function this is
    // SAFETY: a trigger's relation is open while it fires; catalog lookups by OID.
    let on_catalog = unsafe {
        let rel = data.tg_relation;
        pg_sys::get_func_namespace(trigger.trigger().tgfoid) == (*(*rel).rd_rel).relnamespace
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
    /// The catalog row of `tbl` (see [`IndexConfig::find`]); 42704 if the table has none.
    pub(super) fn get(
        client: &SpiClient<'_>,
        fn_oid: pg_sys::Oid,
        tbl: pg_sys::Oid,
    ) -> Rc<IndexConfig> {
        Self::find(client, fn_oid, tbl).unwrap_or_else(|| {
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
        let cfg = Rc::new(IndexConfig::read(client, fn_oid, tbl)?);
        CONFIGS.with_borrow_mut(|configs| configs.insert(tbl, Rc::clone(&cfg)));
        Some(cfg)
    }

    /// The catalog row of `tbl`, read through the catalog of the extension whose function
    /// `fn_oid` is running, if it has one.
    fn read(client: &SpiClient<'_>, fn_oid: pg_sys::Oid, tbl: pg_sys::Oid) -> Option<IndexConfig> {
        // SAFETY: the OID of the function running now, whose pg_proc row exists.
        let schema = unsafe { pg_sys::get_namespace_name(pg_sys::get_func_namespace(fn_oid)) };
        // SAFETY: get_namespace_name returns a palloc'd C string for an existing schema.
        let schema = quote_ident(unsafe { CStr::from_ptr(schema) });
        let sql = format!(
            "SELECT i.id_column::pg_catalog.text, i.text_column::pg_catalog.text,
                    i.band_table::pg_catalog.oid, i.k, i.ngram, i.unit, i.threshold, i.bands,
                    i.rows_per_band
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
            )))
        });
        let ((id_column, text_column), band_table, (k, ngram, unit), threshold, banding) = row?;
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
#[pg_extern(stable, strict, parallel_safe)]
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
#[pg_extern(stable, strict, parallel_safe)]
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
                has_sync_trigger(
                    (*data.tg_relation).trigdesc,
                    pg_sys::get_func_namespace(fn_oid),
                )
            } =>
            {
                return None
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
        // Like a constraint, the trigger sees every row, whoever writes: it reads as the
        // table's owner (see `owner`). The original is the matching row with the smallest id.
        let best = doc.and_then(|doc| {
            as_owner(owner, || {
                cfg.similar(client, doc, threshold, None)
                    .into_iter()
                    .filter(|(id, _)| !own_ids.contains(&Some(*id)))
                    .min_by_key(|&(id, _)| id)
            })
        });
        Some((
            cfg.id_column.clone(),
            mode,
            threshold,
            best,
            cfg.may_see_ids(),
        ))
    });
    let new = trigger
        .new()
        .expect("INSERT and UPDATE row triggers have a new row")
        .into_owned();
    // an UPDATE that leaves the text alone leaves the row alone
    let Some((id_column, mode, threshold, best, may_see)) = checked else {
        return Ok(Some(new));
    };
    match mode {
        FlagMode::Reject => {
            if let Some((id, similarity)) = best {
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
                report.report(PgLogLevel::ERROR);
            }
            Ok(Some(new))
        }
        // an INSERT that matches no row keeps the value it gives (a restored row, its flag)
        FlagMode::Flag(..) if best.is_none() && !update => Ok(Some(new)),
        FlagMode::Flag(attno, typid, typmod) => {
            let mut new = new;
            let datum = best.map(|(id, _)| id_datum(id, typid, typmod));
            let attno = NonZeroUsize::new(attno).expect("attribute numbers start at 1");
            // SAFETY: `datum` was made by the input function of the column's own type.
            unsafe { new.set_by_index_unchecked(attno, datum) };
            Ok(Some(new))
        }
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
        // SAFETY: tgargs holds tgnargs C strings.
        .map(|i| {
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
    let attributes = unsafe { (*tupdesc).attrs.as_slice((*tupdesc).natts as usize) };
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
