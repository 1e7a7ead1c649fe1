//! "What is similar to this text?": `minhash_similar`. It runs once per query, so everything
//! here is in Rust and reuses per-backend state: the catalog row is cached, the candidates and
//! their texts are read straight through the indexes (`scan`), or, where that would not see
//! what SQL sees, through statements prepared once per backend; no PL/pgSQL or SQL function
//! runs in between.

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgSqlErrorCode};

use crate::core::jaccard::ShingleSet;
use crate::core::sketch::{equal_bits, min_equal_bits, LOOKUP_SKETCH_MISS_PROBABILITY};
use crate::pg::error::raise;
use crate::pg::names::{qualified, qualified_name, quote_ident_str, Regclass};
use crate::sql::interrupts;

use super::catalog::{with_prepared, IndexConfig};

use super::owner::{as_owner, relation_owner};
use super::scan::{BandIndex, RowIndex};
use super::{band_entry, checked_threshold, for_each_row};

impl IndexConfig {
    /// The two queries of a lookup, each with one int8[] parameter: `(id, sketch1, sketch2)`
    /// of the band rows with one of the keys `$1`, read from the band table's `(key, id)
    /// INCLUDE (sketch1, sketch2)` index alone (an index-only scan), for when that index cannot
    /// be read directly (see `scan`); then `(id, text)` of the rows with the ids `$1`, through
    /// the table's unique index on the id.
    pub(super) fn lookup_sql(
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
    /// above the threshold with probability at most [`LOOKUP_SKETCH_MISS_PROBABILITY`].
    pub(super) fn similar(
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
        let min_bits = min_equal_bits(self.k, threshold, LOOKUP_SKETCH_MISS_PROBABILITY);
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
