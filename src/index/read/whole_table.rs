//! Whole-table searches of an index: `minhash_duplicates` and `minhash_clusters` of a table,
//! thin SQL functions (src/index/sql/search.sql) over the four functions here, one body for the
//! bigint and the typed forms. The index is resolved once ([`Index::of_rows`]), the rows are
//! read with the caller's rights through a cursor, batch by batch, into a `core::dedup::Corpus`,
//! whose pairs stream back one per call.

use std::ffi::c_char;

use pgrx::prelude::*;
use pgrx::{AnyElement, PgOid, PgSqlErrorCode};

use crate::core::dedup::{Corpus, Search};
use crate::core::params::ClusterMode;
use crate::pg::backend::{bound_search, interrupts, search_threads};
use crate::pg::error::{raise, OrRaise};
use crate::pg::ids::{by_rank, keyed_clusters, keyed_pairs, Ids};
use crate::pg::names::{
    equality_operator, qualified_name, qualified_type_name, quote_ident_str, quote_literal,
    regclass_name, type_name, Regclass,
};

use super::access_plan::Index;
use crate::index::def::catalog::IndexDef;
use crate::index::def::extension::older_sql_objects;
use crate::index::def::settings::query_threshold;
use crate::index::def::text_source::TextSource;
use crate::index::run::spi::{for_each_text_row, spi_failed};
use crate::index::run::{owner, progress};

/// Rows read per SPI round trip while loading a table.
const FETCH_ROWS: i32 = 10_000;

/// The names of the searches, in their messages and progress reports (`run::progress`).
const DUPLICATES: &str = "minhash_duplicates";
const CLUSTERS: &str = "minhash_clusters";

/// Internal to `minhash_duplicates(tbl, ...)`: every verified pair among the rows of `tbl`'s
/// index (see [`Request::plan`]), ordered by `(id_a, id_b)`. The pairs are made one per call
/// (`core::dedup::Pairs`), never held all at once.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
fn _minhash_search_pairs(
    tbl: Option<Regclass>,
    threshold: Option<f64>,
    tenant: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(similarity, f64))> {
    let plan = Request::duplicates(tbl, threshold, tenant).plan(IdsAs::Bigint, fcinfo);
    TableIterator::new(plan.corpus().duplicates(interrupts).or_raise())
}

/// Internal to the typed `minhash_duplicates(tbl, id_type, ...)`: as [`_minhash_search_pairs`],
/// the ids in the type of the `id_type` witness, the id column's.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
fn _minhash_search_keyed_pairs(
    tbl: Option<Regclass>,
    id_type: Option<AnyElement>,
    threshold: Option<f64>,
    tenant: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(id_a, AnyElement),
        name!(id_b, AnyElement),
        name!(similarity, f64),
    ),
> {
    let _ = id_type;
    let id_type = witness_type(fcinfo);
    let plan = Request::duplicates(tbl, threshold, tenant).plan(IdsAs::Typed(id_type), fcinfo);
    let (corpus, ids) = plan.keyed_corpus(id_type);
    keyed_pairs(corpus, ids)
}

/// Internal to `minhash_clusters(tbl, ...)`: the clusters in `mode` (see
/// `core::params::ClusterMode`) of the verified pairs among the rows of `tbl`'s index, as
/// `(id, cluster_id)` ordered by cluster then id. In mode 'representative' the rows come in
/// the greedy order: by `priority`, then by id.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
fn _minhash_search_clusters(
    tbl: Option<Regclass>,
    threshold: Option<f64>,
    mode: Option<&str>,
    priority: Option<&str>,
    tenant: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, i64), name!(cluster_id, i64))> {
    let request = Request::clusters(tbl, threshold, mode, priority, tenant);
    let plan = request.plan(IdsAs::Bigint, fcinfo);
    let mode = plan.mode;
    TableIterator::new(plan.corpus().clusters_in(mode, &mut interrupts).or_raise())
}

/// Internal to the typed `minhash_clusters(tbl, id_type, ...)`: as
/// [`_minhash_search_clusters`], the ids in the type of the `id_type` witness, the id column's.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
#[allow(clippy::too_many_arguments)] // (the SQL function's arguments)
fn _minhash_search_keyed_clusters(
    tbl: Option<Regclass>,
    id_type: Option<AnyElement>,
    threshold: Option<f64>,
    mode: Option<&str>,
    priority: Option<&str>,
    tenant: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, AnyElement), name!(cluster_id, AnyElement))> {
    let _ = id_type;
    let id_type = witness_type(fcinfo);
    let request = Request::clusters(tbl, threshold, mode, priority, tenant);
    let plan = request.plan(IdsAs::Typed(id_type), fcinfo);
    let mode = plan.mode;
    let (corpus, ids) = plan.keyed_corpus(id_type);
    keyed_clusters(corpus, ids, mode)
}

/// The library entry points of 0.2.0's `_minhash_cluster_mode` and `_minhash_query_threshold`,
/// which its PL/pgSQL searches called before the searches were Rust (see
/// `extension::older_sql_objects`).
#[pg_extern(sql = false)]
fn _minhash_cluster_mode() {
    older_sql_objects()
}

#[pg_extern(sql = false)]
fn _minhash_query_threshold() {
    older_sql_objects()
}

/// The type of a typed search's `id_type` witness argument (its second), NULL as it may be.
fn witness_type(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo has the call expression; the
    // argument is declared anyelement, so its type is known.
    unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1) }
}

/// How a search returns ids: as bigint (integer keys only), or in the id column's own type.
#[derive(Clone, Copy)]
enum IdsAs {
    Bigint,
    Typed(pg_sys::Oid),
}

/// The arguments of a whole-table search, as its SQL function got them.
struct Request<'a> {
    /// The SQL function, named in messages and in progress reports.
    what: &'static str,
    tbl: Option<Regclass>,
    threshold: Option<f64>,
    tenant: Option<&'a str>,
    /// Of `minhash_clusters`: its mode and priority arguments.
    clusters: Option<(Option<&'a str>, Option<&'a str>)>,
}

/// A whole-table search resolved: the query of the rows it reads, and how it searches them.
struct Plan {
    what: &'static str,
    rows_query: String,
    search: Search,
    mode: ClusterMode,
}

impl<'a> Request<'a> {
    fn duplicates(
        tbl: Option<Regclass>,
        threshold: Option<f64>,
        tenant: Option<&'a str>,
    ) -> Request<'a> {
        Request {
            what: DUPLICATES,
            tbl,
            threshold,
            tenant,
            clusters: None,
        }
    }

    fn clusters(
        tbl: Option<Regclass>,
        threshold: Option<f64>,
        mode: Option<&'a str>,
        priority: Option<&'a str>,
        tenant: Option<&'a str>,
    ) -> Request<'a> {
        Request {
            what: CLUSTERS,
            tbl,
            threshold,
            tenant,
            clusters: Some((mode, priority)),
        }
    }

    /// Resolves the index of `tbl` once, and checks the arguments against it, in this order:
    /// the table (22004 for NULL, 42704 for one without an index), the mode and priority, the
    /// id type (see [`check_id_type`]), the threshold (NULL: the index's, with a NOTICE below
    /// it), the tenant (see [`tenant_filter`]).
    fn plan(self, ids: IdsAs, fcinfo: pg_sys::FunctionCallInfo) -> Plan {
        let Some(Regclass(tbl)) = self.tbl else {
            raise(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "tbl must not be NULL",
                None,
            );
        };
        // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo names the function.
        let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
        let cfg = Spi::connect(|client| Index::of_rows(client, fn_oid, tbl));
        let def = &cfg.def;
        let (mode, order) = match self.clusters {
            None => (ClusterMode::Connected, None),
            Some((mode, priority)) => cluster_mode(mode, priority),
        };
        check_id_type(def, self.what, ids);
        let threshold = query_threshold(self.threshold, def.threshold, def.settings.banding);
        let tenant = tenant_filter(def, self.tenant);
        Plan {
            what: self.what,
            rows_query: rows_sql(def, ids, order, &tenant),
            search: Search {
                k: def.settings.k,
                shingling: def.settings.shingling,
                banding: def.settings.banding,
                threshold,
                threads: search_threads(),
            },
            mode,
        }
    }
}

impl Plan {
    /// The rows read into a [`Corpus`], ids as bigint.
    fn corpus(self) -> Corpus {
        load_corpus(&self.rows_query, self.search, self.what)
    }

    /// The rows read into a [`Corpus`] whose ids are their ranks, and the ids, of type
    /// `id_type`.
    fn keyed_corpus(self, id_type: pg_sys::Oid) -> (Corpus, Ids) {
        load_keyed_corpus(id_type, &self.rows_query, self.search, self.what)
    }
}

/// The mode of `minhash_clusters` and, in mode 'representative', the order its rows are read
/// in: `Some(priority)` (the caller's ORDER BY list, NULL for none), then by id. 22004 for a
/// NULL mode, 22023 for an unknown one and for a priority in a mode other than
/// 'representative', which alone has an order.
fn cluster_mode<'a>(
    mode: Option<&str>,
    priority: Option<&'a str>,
) -> (ClusterMode, Option<Option<&'a str>>) {
    let Some(mode) = mode else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "mode must not be NULL",
            None,
        );
    };
    let mode = ClusterMode::parse(mode).or_raise();
    if mode != ClusterMode::Representative {
        if priority.is_some() {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "priority is only allowed with mode 'representative'",
                Some(
                    "Connected clusters have no kept row to choose; pass mode => 'representative'."
                        .into(),
                ),
            );
        }
        return (mode, None);
    }
    (mode, Some(priority))
}

/// Checks the type of the index's id column for the function `what`: the bigint forms take
/// smallint, integer and bigint keys, a typed form the key's own type (42804 otherwise, with a
/// hint naming the call that fits). A witness of a numeric type is passed by name: in second
/// place it would be taken for the threshold (the bigint form's float8 wins the overload
/// resolution).
fn check_id_type(def: &IndexDef, what: &str, ids: IdsAs) {
    // (types named as the other functions' messages name them, with search_path pg_catalog)
    owner::with_safe_search_path(|| {
        let key_type = type_name(def.id_type);
        let (message, tail) = match ids {
            IdsAs::Bigint if !def.key.integer => (
                format!(
                    "id column \"{}\" of table {} is of type {key_type}, not smallint, integer \
                     or bigint",
                    def.id_column,
                    regclass_name(def.tbl)
                ),
                format!(" for ids of type {key_type}"),
            ),
            IdsAs::Typed(given) if given != def.id_type => (
                format!(
                    "id_type is {}, but id column \"{}\" of table {} is of type {key_type}",
                    type_name(given),
                    def.id_column,
                    regclass_name(def.tbl)
                ),
                String::new(),
            ),
            _ => return,
        };
        // SAFETY: a syscache lookup by type OID.
        let numeric = unsafe { pg_sys::TypeCategory(def.id_type) } == b'N' as c_char;
        raise(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            message,
            Some(format!(
                "Call {what}({}, {}NULL::{key_type}){tail}.",
                quote_literal(&regclass_name(def.tbl)),
                if numeric { "id_type => " } else { "" }
            )),
        );
    })
}

/// The condition ` AND d.<tenant column> <equality> '<tenant>'::<its type>` that keeps the
/// rows of tenant `tenant` (text, read as a cast to the column's type would, without its type
/// modifier, and compared by the equality of the type's default B-tree operator class, as the
/// lookups compare it); '' for a NULL tenant; 22023 for a table not distributed by a tenant.
fn tenant_filter(def: &IndexDef, tenant: Option<&str>) -> String {
    let Some(tenant) = tenant else {
        return String::new();
    };
    let column = def.tenant_column("");
    format!(
        " AND d.{} {} {}::{}",
        quote_ident_str(&column.column),
        equality_operator(column.key.oid),
        quote_literal(tenant),
        qualified_type_name(PgOid::from(column.key.oid))
    )
}

/// The query a whole-table search reads the table through: (id, text) of every row with a
/// text, the id as bigint or (typed) in its own type, of the rows `tenant` (a
/// [`tenant_filter`]) keeps. The rows are searched in memory (`core::dedup`) rather than by
/// joining the band table with itself: signing the text again costs less than reading `bands`
/// band rows per row, and gives the same keys. Of a Citus table the query runs through Citus,
/// which streams the rows of every shard to this backend (of one tenant, from its one shard):
/// the search is the one-node search, with no band rows moved between workers
/// (docs/citus.md). With `order` (mode 'representative'), the rows come in its greedy order:
/// by the priority (the caller's ORDER BY list over the table's columns, part of the caller's
/// query, run with the caller's rights), then by id.
fn rows_sql(def: &IndexDef, ids: IdsAs, order: Option<Option<&str>>, tenant: &str) -> String {
    let id = quote_ident_str(&def.id_column);
    let cast = match ids {
        IdsAs::Bigint => "::pg_catalog.int8",
        IdsAs::Typed(_) => "",
    };
    let tbl = qualified_name(def.tbl);
    let text = def.text.caller_sql(def.band_table, "d");
    let rows = match def.text {
        TextSource::Column(_) => format!(
            "SELECT d.{id}{cast}, {text}::pg_catalog.text FROM {tbl} d
             WHERE {text} IS NOT NULL{tenant}"
        ),
        // (OFFSET 0: the expression is computed once per row)
        TextSource::Expression(_) => format!(
            "SELECT d.{id}{cast}, x.text FROM {tbl} d
             CROSS JOIN LATERAL (SELECT {text} AS text OFFSET 0) x
             WHERE x.text IS NOT NULL{tenant}"
        ),
    };
    match order {
        None => rows,
        // (a line break ends a comment the priority may end with)
        Some(priority) => format!(
            "{rows} ORDER BY {} d.{id}",
            priority.map_or(String::new(), |p| format!("{p}\n,"))
        ),
    }
}

/// An empty [`Corpus`] for `search`, whose progress is reported as `what`'s.
fn corpus_reported(search: Search, what: &'static str) -> Corpus {
    progress::search_started(what);
    let mut corpus = Corpus::new(search);
    bound_search(&mut corpus);
    corpus.report_progress(progress::bands_searched);
    corpus
}

/// Adds a batch of rows read to `corpus`, and reports the rows read so far.
fn add_batch(corpus: &mut Corpus, rows: &[(i64, &str)], read: &mut usize) {
    corpus.add_rows(rows, &mut interrupts).or_raise();
    *read += rows.len();
    progress::rows_read(*read);
}

/// Reads the `(id bigint, text)` rows `rows_query` returns into a [`Corpus`] for `search`,
/// reported as `what`.
fn load_corpus(rows_query: &str, search: Search, what: &'static str) -> Corpus {
    let mut corpus = corpus_reported(search, what);
    let mut read = 0;
    for_each_batch(rows_query, |table| {
        let mut rows: Vec<(i64, &str)> = Vec::new();
        for_each_text_row(table, |id, text| {
            // SAFETY: the rows query selects the id as int8, not NULL here.
            let id = unsafe { i64::from_datum(id, false) }.expect("not NULL");
            rows.push((id, text));
        })?;
        // (the texts are the batch's, valid until its SPI session ends, after this call)
        add_batch(&mut corpus, &rows, &mut read);
        Ok(())
    });
    corpus
}

/// Reads the `(id, text)` rows `rows_query` returns, ids of type `id_type`, into a [`Corpus`]
/// whose ids are their ranks, and the ids (see `pg::ids`). The ids are copied into the
/// current memory context, the caller's multi-call context.
fn load_keyed_corpus(
    id_type: pg_sys::Oid,
    rows_query: &str,
    search: Search,
    what: &'static str,
) -> (Corpus, Ids) {
    let mut corpus = corpus_reported(search, what);
    let mut read = 0;
    // SAFETY: reading the backend's current memory context, before SPI switches it.
    let context = unsafe { pg_sys::CurrentMemoryContext };
    let mut ids: Option<Ids> = None;
    for_each_batch(rows_query, |table| {
        if table.is_empty() {
            return Ok(());
        }
        let ids = match &mut ids {
            Some(ids) => ids,
            None => ids.insert(Ids::new(id_type, id_collation(&table, id_type)?, context)),
        };
        let mut rows: Vec<(i64, &str)> = Vec::new();
        for_each_text_row(table, |id, text| rows.push((ids.push(id), text)))?;
        add_batch(&mut corpus, &rows, &mut read);
        Ok(())
    });
    let mut ids = ids.unwrap_or_else(|| Ids::new(id_type, pg_sys::InvalidOid, context));
    by_rank(&mut corpus, &mut ids);
    (corpus, ids)
}

/// The collation of the id column of a batch of rows (not empty), which must be of type
/// `id_type`.
fn id_collation(
    table: &pgrx::spi::SpiTupleTable<'_>,
    id_type: pg_sys::Oid,
) -> pgrx::spi::Result<pg_sys::Oid> {
    let found = table.column_type_oid(1)?.value();
    if found != id_type {
        raise(
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!(
                "the ids read are of type {}, not {}",
                type_name(found),
                type_name(id_type)
            ),
            None,
        );
    }
    // SAFETY: SPI_tuptable is the batch `table` holds, just fetched; its descriptor has the
    // query's two columns.
    Ok(unsafe { crate::pg::compat::attributes((*pg_sys::SPI_tuptable).tupdesc)[0].attcollation })
}

/// Runs `rows_query` (as the caller) through a cursor and calls `f` with each batch of rows.
/// Each batch is fetched in its own SPI session, so PostgreSQL's copy of the rows is freed
/// batch by batch.
pub(in crate::index) fn for_each_batch(
    rows_query: &str,
    mut f: impl FnMut(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<()>,
) {
    // (the query names everything it reads as the extension's SQL does, whatever the
    // caller's search path)
    let mut cursor_name = owner::with_safe_search_path(|| {
        Spi::connect(|client| {
            client
                .try_open_cursor(rows_query, &[])
                .map(|cursor| cursor.detach_into_name())
        })
    })
    .unwrap_or_else(|e| spi_failed(e));
    loop {
        let (fetched, name) = Spi::connect(|client| -> pgrx::spi::Result<(usize, String)> {
            let mut cursor = client.find_cursor(&cursor_name)?;
            let table = cursor.fetch(FETCH_ROWS.into())?;
            let fetched = table.len();
            f(table)?;
            // keep the cursor open for the next session; the last one closes it
            Ok((
                fetched,
                if fetched > 0 {
                    cursor.detach_into_name()
                } else {
                    String::new()
                },
            ))
        })
        .unwrap_or_else(|e| spi_failed(e));
        if fetched == 0 {
            break;
        }
        cursor_name = name;
    }
}
