//! The managed band-key index: the catalog, band tables and query functions are hand-written
//! SQL in `sql/index.sql`; this module adds the Rust pieces they call, among them the one
//! trigger function that keeps every band table exact (`sync`).

use pgrx::prelude::*;
use pgrx::{AnyElement, PgSqlErrorCode};

use crate::core::bands::band_keys;
use crate::core::components::try_components;
use crate::core::dedup::{Corpus, Search};
use crate::core::params::{candidate_probability, check_k, Banding, ClusterMode, Shingling};
use crate::core::signature::EMPTY_SLOT;
use crate::core::sketch::{band_sketch, BandSketch};
use crate::pg::error::{raise, OrRaise};
use crate::pg::ids::{type_name, Ids};
use crate::pg::names::{regclass_name, Regclass};
use crate::sql::dedup::{by_rank, keyed_clusters, keyed_pairs};
use crate::sql::{array_arg, interrupts, SIGNER};

/// Rows read per SPI round trip while loading a table.
const FETCH_ROWS: i32 = 10_000;

mod catalog;
mod citus;
mod claim;
mod extension;
mod flag;
mod key;
mod owner;
mod progress;
mod restore;
mod scan;
mod similar;
mod sync;
#[cfg(any(test, feature = "pg_test"))]
mod tests;
mod text;

/// The schema of the extension's internal functions (see sql/index.sql).
#[pg_schema]
mod minhash_internal {}

pgrx::extension_sql_file!("../../sql/index.sql", name = "managed_index", finalize);

/// The band keys and band sketch (`core::sketch`) of one text under an index's settings, as
/// the band table stores them; None for a text without shingles, which is not indexed: its
/// signature is all 0xFFFFFFFF, which a text with shingles has only with probability 2^-32k.
/// Both what the sync triggers store and what a lookup searches for come from here.
fn band_entry(
    doc: &str,
    k: usize,
    shingling: Shingling,
    banding: Banding,
) -> Option<(Vec<i64>, BandSketch)> {
    let signature = SIGNER.with_borrow_mut(|s| s.signature(doc, k, shingling, &mut interrupts));
    if signature.iter().all(|&v| v == EMPTY_SLOT) {
        return None;
    }
    let keys = band_keys(&signature, banding)
        .into_iter()
        .map(|key| key as i64)
        .collect();
    Some((keys, band_sketch(&signature)))
}

/// What the band table holds for one text (see [`band_entry`]): its `bands` band keys, then
/// its band sketch as two int8; NULL if it is not indexed. One array rather than a set of rows:
/// returning it costs less than returning rows one by one, and the band-row SQL unnests it.
#[pg_extern(immutable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_band_values(
    doc: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
) -> Option<Vec<i64>> {
    let (k, shingling, banding) = index_params(k, ngram, unit, bands, rows_per_band);
    let (mut values, sketch) = band_entry(doc, k, shingling, banding)?;
    values.extend(sketch.map(|w| w as i64));
    Some(values)
}

/// The band rows of one text, `(key, sketch1, sketch2)`, one per band ([`band_entry`]); none
/// if it is not indexed. The band-row SQL of a Citus table calls it in `FROM`, where Citus
/// runs it on the shards (see `_minhash_band_rows_sql` in sql/index.sql).
#[pg_extern(immutable, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_band_rows(
    doc: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
) -> TableIterator<'static, (name!(key, i64), name!(sketch1, i64), name!(sketch2, i64))> {
    let (k, shingling, banding) = index_params(k, ngram, unit, bands, rows_per_band);
    let (keys, sketch) = band_entry(doc, k, shingling, banding).unwrap_or_default();
    let [s1, s2] = sketch.map(|w| w as i64);
    TableIterator::new(keys.into_iter().map(move |key| (key, s1, s2)))
}

/// Internal to the PL/pgSQL functions: a threshold argument (see [`check_threshold`]), or
/// `fallback` if it is NULL.
#[pg_extern(immutable, parallel_safe, schema = "minhash_internal")]
fn _minhash_threshold(threshold: Option<f64>, fallback: Option<f64>) -> Option<f64> {
    threshold.map(check_threshold).or(fallback)
}

/// Internal to the PL/pgSQL searches of an index: a query's threshold argument (NULL: the
/// index's `index_threshold`), with a NOTICE if it is below the index's (see
/// [`notice_low_threshold`]) for an index of `bands` bands of `rows_per_band` rows.
#[pg_extern(immutable, parallel_safe, schema = "minhash_internal")]
fn _minhash_query_threshold(
    threshold: Option<f64>,
    index_threshold: f64,
    bands: i32,
    rows_per_band: i32,
) -> f64 {
    let threshold = checked_threshold(threshold, index_threshold);
    let banding = Banding {
        bands: bands as usize,
        rows: rows_per_band as usize,
    };
    notice_low_threshold(threshold, index_threshold, banding);
    threshold
}

/// A threshold argument, NULL meaning `fallback` (the index's own).
fn checked_threshold(threshold: Option<f64>, fallback: f64) -> f64 {
    threshold.map_or(fallback, check_threshold)
}

/// Reports in a NOTICE that a query's `threshold` is below its index's own, and how often a
/// pair of exactly that similarity shares a band key with these bands (`lsh_probability`): the
/// index was sized for its own threshold, and below it recall falls.
fn notice_low_threshold(threshold: f64, cfg_threshold: f64, banding: Banding) {
    if threshold >= cfg_threshold {
        return;
    }
    let recall = candidate_probability(threshold, banding.bands, banding.rows);
    let message = format!(
        "threshold {} is below the index's {}: a pair of similarity {} is found with \
         probability {:.3} (lsh_probability({}, {}, {}))",
        float8_text(threshold),
        float8_text(cfg_threshold),
        float8_text(threshold),
        recall,
        float8_text(threshold),
        banding.bands,
        banding.rows
    );
    pgrx::pg_sys::panic::ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        message,
        "pg_minhash",
    )
    .set_hint(
        "Pairs above the index's threshold are found as before. For full recall at the lower \
             threshold, create the index with that threshold.",
    )
    .report(pgrx::PgLogLevel::NOTICE);
}

/// A threshold must lie in (0, 1] (22023).
pub(crate) fn check_threshold(t: f64) -> f64 {
    if !(t > 0.0 && t <= 1.0) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "threshold must be greater than 0 and at most 1, got {}",
                float8_text(t)
            ),
            None,
        );
    }
    t
}

/// A float8 as PostgreSQL prints it (`1e+20`, `Infinity`, `NaN`).
fn float8_text(v: f64) -> String {
    // SAFETY: float8out takes any float8.
    let text: &std::ffi::CStr = unsafe {
        pgrx::direct_function_call(pg_sys::float8out, &[v.into_datum()]).expect("not NULL")
    };
    text.to_string_lossy().into_owned()
}

/// Connected components of the graph with edges `id_a[i] -- id_b[i]`: every node of a component
/// of two or more nodes, with the smallest id of its component, ordered by cluster then id.
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_components(
    id_a: Array<'_, i64>,
    id_b: Array<'_, i64>,
) -> TableIterator<'static, (name!(id, i64), name!(cluster_id, i64))> {
    let (id_a, id_b) = (array_arg(id_a, "id_a"), array_arg(id_b, "id_b"));
    if id_a.len() != id_b.len() {
        raise(
            pgrx::PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "id_a and id_b have different lengths {} and {}",
                id_a.len(),
                id_b.len()
            ),
            None,
        );
    }
    TableIterator::new(try_components(id_a.into_iter().zip(id_b), &mut interrupts).or_raise())
}

/// Reads the `(id bigint, text)` rows `rows_query` returns into a [`Corpus`] for the search
/// of the index parameters given.
#[allow(clippy::too_many_arguments)]
fn load_corpus(
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
) -> Corpus {
    let mut corpus = Corpus::new(index_search(
        k,
        ngram,
        unit,
        bands,
        rows_per_band,
        threshold,
    ));
    for_each_batch(rows_query, |table| {
        for_each_text_row(table, |id, text| {
            // SAFETY: the rows query selects the id as int8, not NULL here.
            let id = unsafe { i64::from_datum(id, false) }.expect("not NULL");
            corpus.add(id, text, &mut interrupts).or_raise()
        })
    });
    corpus
}

/// Reads the `(id, text)` rows `rows_query` returns, ids of type `id_type`, into a [`Corpus`]
/// whose ids are their ranks, and the ids (see `pg::ids`). The ids are copied into the
/// current memory context, the caller's multi-call context.
#[allow(clippy::too_many_arguments)]
fn load_keyed_corpus(
    id_type: pg_sys::Oid,
    rows_query: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
    threshold: f64,
) -> (Corpus, Ids) {
    let mut corpus = Corpus::new(index_search(
        k,
        ngram,
        unit,
        bands,
        rows_per_band,
        threshold,
    ));
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
        for_each_text_row(table, |id, text| {
            let position = ids.push(id);
            corpus.add(position, text, &mut interrupts).or_raise();
        })
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
fn for_each_batch(
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
    }
}

/// The checked signature length, shingling and banding of an index's catalog settings.
fn index_params(
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
) -> (usize, Shingling, Banding) {
    let k = check_k(k).or_raise();
    let shingling = Shingling::new(ngram, unit).or_raise();
    (
        k,
        shingling,
        Banding::new(k, bands, Some(rows_per_band)).or_raise(),
    )
}

/// Calls `f` with `table` positioned on each of its rows in turn.
fn for_each_spi_row(
    mut table: pgrx::spi::SpiTupleTable<'_>,
    mut f: impl FnMut(&pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<()>,
) -> pgrx::spi::Result<()> {
    let rows = table.len();
    if rows == 0 {
        return Ok(());
    }
    table = table.first();
    for _ in 0..rows {
        f(&table)?;
        table.next();
    }
    Ok(())
}

/// Calls `f(id, text)` for each row of an SPI result of `(id, text)` rows, skipping rows where
/// either is NULL. Both are borrowed from the SPI memory context, not copied.
fn for_each_text_row(
    table: pgrx::spi::SpiTupleTable<'_>,
    mut f: impl FnMut(pg_sys::Datum, &str),
) -> pgrx::spi::Result<()> {
    for_each_spi_row(table, |row| {
        if let (Some(id), Some(text)) = (row.get_datum_by_ordinal(1)?, row.get_datum_by_ordinal(2)?)
        {
            // SAFETY: column 2 is a text datum (the queries cast it), not NULL, in the SPI
            // memory context, which outlives this call.
            let text = unsafe { <&str as FromDatum>::from_datum(text, false) };
            f(id, text.expect("not NULL"));
        }
        Ok(())
    })
}

fn spi_failed(e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("reading the indexed table through SPI failed: {e}"),
        None,
    )
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
    let corpus = load_corpus(rows_query, k, ngram, unit, bands, rows_per_band, threshold);
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
    let corpus = load_corpus(rows_query, k, ngram, unit, bands, rows_per_band, threshold);
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
    let (corpus, ids) = load_keyed_corpus(
        witness_type(fcinfo),
        rows_query,
        k,
        ngram,
        unit,
        bands,
        rows_per_band,
        threshold,
    );
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
    let (corpus, ids) = load_keyed_corpus(
        witness_type(fcinfo),
        rows_query,
        k,
        ngram,
        unit,
        bands,
        rows_per_band,
        threshold,
    );
    keyed_clusters(corpus, ids, mode)
}

/// Internal to `minhash_index_create`: records that the band table `band` of `tbl` goes with
/// `tbl` (dropping the table drops it, as it drops the table's indexes) and with the extension
/// (`DROP EXTENSION` refuses while it exists, and `DROP EXTENSION ... CASCADE` drops it). The
/// caller must have the privileges of the owner of both, which must be one role (42501), and
/// `band` must be an ordinary table (42809): it acts on nothing the caller could not drop.
#[pg_extern(volatile, strict, parallel_unsafe, schema = "minhash_internal")]
fn _minhash_link_band_table(tbl: Regclass, band: Regclass) {
    let (tbl, band) = (tbl.0, band.0);
    let owner = owner::check_owner(tbl);
    if owner::relation_owner(band) != owner {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{} does not belong to the owner of {}",
                regclass_name(band),
                regclass_name(tbl)
            ),
            None,
        );
    }
    // SAFETY: catalog lookups and dependency records of existing objects (the owner checks
    // above found both relations); the extension is the one whose script or function runs.
    unsafe {
        if pg_sys::get_rel_relkind(band) != pg_sys::RELKIND_RELATION as std::ffi::c_char {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("{} is not an ordinary table", regclass_name(band)),
                None,
            );
        }
        let extension = pg_sys::get_extension_oid(c"pg_minhash".as_ptr(), false);
        let address = |class: u32, object: pg_sys::Oid| pg_sys::ObjectAddress {
            classId: pg_sys::Oid::from(class),
            objectId: object,
            objectSubId: 0,
        };
        // (not for a Citus table: Citus takes a table dropped through an automatic dependency
        // for a partition whose shards went with its parent's, and would leave the band
        // table's shards behind; the minhash_ddl_dropped event trigger drops the band table
        // with its own DROP TABLE instead, after which Citus drops its shards)
        let citus = citus::is_citus_table(tbl);
        let band = address(pg_sys::RelationRelationId.into(), band);
        if !citus {
            pg_sys::recordDependencyOn(
                &band,
                &address(pg_sys::RelationRelationId.into(), tbl),
                pg_sys::DependencyType::DEPENDENCY_AUTO,
            );
        }
        pg_sys::recordDependencyOn(
            &band,
            &address(pg_sys::ExtensionRelationId.into(), extension),
            pg_sys::DependencyType::DEPENDENCY_NORMAL,
        );
    }
}
