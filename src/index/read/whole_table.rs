//! Whole-table searches of an index's settings, internal to the PL/pgSQL `minhash_duplicates`
//! and `minhash_clusters` of a table: the rows are read through a cursor, batch by batch,
//! into a `core::dedup::Corpus`, whose pairs stream back one per call.

use pgrx::prelude::*;
use pgrx::{AnyElement, PgSqlErrorCode};

use crate::core::dedup::{Corpus, Search};
use crate::core::params::ClusterMode;
use crate::pg::backend::{bound_search, interrupts, search_threads};
use crate::pg::error::{raise, OrRaise};
use crate::pg::ids::{by_rank, keyed_clusters, keyed_pairs, Ids};
use crate::pg::names::{equality_operator, type_name};

use crate::index::def::settings::index_params;
use crate::index::run::spi::{for_each_text_row, spi_failed};
use crate::index::run::{owner, progress};

/// Rows read per SPI round trip while loading a table.
const FETCH_ROWS: i32 = 10_000;

/// `OPERATOR(schema.=)`, the equality of the default B-tree operator class of type `typ`
/// (`names::equality_operator`): what the whole-table searches of one tenant compare the
/// tenant column with (`_minhash_tenant_filter`), as the lookups do.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_equality_operator(typ: pg_sys::Oid) -> String {
    equality_operator(typ)
}

/// Internal to `minhash_duplicates`: every verified pair among the `(id bigint, text)` rows of
/// `rows_query` (run with the caller's rights), ordered by `(id_a, id_b)`. The pairs are made
/// one per call (`core::dedup::Pairs`), never held all at once.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
#[allow(clippy::too_many_arguments)]
fn _minhash_search_pairs(
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(similarity, f64))> {
    let search = index_search(k, ngram, unit, bands, rows_per_band, threshold);
    let corpus = load_corpus(rows_query, search, DUPLICATES);
    TableIterator::new(corpus.duplicates(interrupts).or_raise())
}

/// Internal to `minhash_clusters`: the clusters in `mode` (see `core::params::ClusterMode`)
/// of the verified pairs among the rows of `rows_query`, as `(id, cluster_id)` ordered by
/// cluster then id. In mode 'representative' the rows come in the greedy order.
#[pg_extern(stable, strict, parallel_safe, schema = "minhash_internal")]
#[allow(clippy::too_many_arguments)]
fn _minhash_search_clusters(
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
    mode: &str,
) -> TableIterator<'static, (name!(id, i64), name!(cluster_id, i64))> {
    let mode = ClusterMode::parse(mode).or_raise();
    let search = index_search(k, ngram, unit, bands, rows_per_band, threshold);
    let corpus = load_corpus(rows_query, search, CLUSTERS);
    TableIterator::new(corpus.clusters_in(mode, &mut interrupts).or_raise())
}

/// Internal to `minhash_clusters`: checks its `mode` and `priority` arguments (22023 for an
/// unknown mode, and for a priority in a mode other than 'representative', which alone has
/// an order) and says whether the rows are to be read in the greedy order.
#[pg_extern(immutable, parallel_safe, schema = "minhash_internal")]
fn _minhash_cluster_mode(mode: Option<&str>, priority: Option<&str>) -> bool {
    let Some(mode) = mode else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "mode must not be NULL",
            None,
        );
    };
    let mode = ClusterMode::parse(mode).or_raise();
    if priority.is_some() && mode != ClusterMode::Representative {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "priority is only allowed with mode 'representative'",
            Some(
                "Connected clusters have no kept row to choose; pass mode => 'representative'."
                    .into(),
            ),
        );
    }
    mode == ClusterMode::Representative
}

/// The type of a typed search's `id_type` witness argument (its first), NULL as it may be.
fn witness_type(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo has the call expression.
    unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 0) }
}

/// Internal to the typed `minhash_duplicates(tbl, id_type, ...)`: as `_minhash_search_pairs`
/// for rows whose ids are of `id_type`'s type, returned in it.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
#[allow(clippy::too_many_arguments)]
fn _minhash_search_keyed_pairs(
    id_type: Option<AnyElement>,
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
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
    let search = index_search(k, ngram, unit, bands, rows_per_band, threshold);
    let (corpus, ids) = load_keyed_corpus(witness_type(fcinfo), rows_query, search, DUPLICATES);
    keyed_pairs(corpus, ids)
}

/// Internal to the typed `minhash_clusters(tbl, id_type, ...)`: as `_minhash_search_clusters`
/// for rows whose ids are of `id_type`'s type, returned in it.
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
#[allow(clippy::too_many_arguments)]
fn _minhash_search_keyed_clusters(
    id_type: Option<AnyElement>,
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
    mode: &str,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, AnyElement), name!(cluster_id, AnyElement))> {
    let _ = id_type;
    let mode = ClusterMode::parse(mode).or_raise();
    let search = index_search(k, ngram, unit, bands, rows_per_band, threshold);
    let (corpus, ids) = load_keyed_corpus(witness_type(fcinfo), rows_query, search, CLUSTERS);
    keyed_clusters(corpus, ids, mode)
}

/// The names the searches report progress under (`run::progress`).
const DUPLICATES: &str = "minhash_duplicates";
const CLUSTERS: &str = "minhash_clusters";

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

/// The search of an index's catalog settings at `threshold`.
fn index_search(
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
) -> Search {
    let (k, shingling, banding) = index_params(k, ngram, unit, bands, rows_per_band);
    Search {
        k,
        shingling,
        banding,
        threshold,
        threads: search_threads(),
    }
}
