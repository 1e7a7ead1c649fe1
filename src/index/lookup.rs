//! A lookup of one text in an index: the rows at or above a threshold, most similar first.
//! Candidates come from the band rows sharing a band key with the text, filtered by their band
//! sketches; their texts are read straight through the indexes (`scan`) where the placement
//! allows, or through statements prepared once per backend, and verified with exact Jaccard
//! here, or on the workers of a Citus table.

use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use crate::core::jaccard::ShingleSet;
use crate::core::sketch::{equal_bits, min_equal_bits, LOOKUP_SKETCH_MISS_PROBABILITY};
use crate::pg::backend::interrupts;

use super::access::Index;
use super::band::band_entry;
use super::key::Id;
use super::owner::{as_owner, relation_owner};
use super::prepared::{with_prepared, with_prepared_args};
use super::scan::RowIndex;
use super::spi::{for_each_spi_row, for_each_text_row};

/// What one lookup did, step by step (`minhash_explain` shows it).
#[derive(Default)]
pub(super) struct Trace {
    /// The band keys probed: one per band, none for a text without shingles.
    pub(super) keys: usize,
    /// The band table's index read directly (the first of them), or None for its SQL query, as
    /// the owner; how many it reads.
    pub(super) band_index: Option<pg_sys::Oid>,
    pub(super) band_indexes: usize,
    /// The band rows sharing a key with the text (other than the excluded row's).
    pub(super) band_rows: usize,
    /// The sketch bits a band row must share with the text's to be verified (of at most 128).
    pub(super) min_bits: usize,
    /// The band rows that passed, and their distinct ids: the candidates verified.
    pub(super) passed: usize,
    pub(super) candidates: usize,
    /// Where the candidates' texts were read: the table's unique index directly, or None
    /// for its SQL query; whether on the workers of a Citus table.
    pub(super) row_index: Option<pg_sys::Oid>,
    pub(super) remote: bool,
    /// The rows at or above the threshold.
    pub(super) found: usize,
    /// Time spent finding the candidates, and verifying them.
    pub(super) finding: Duration,
    pub(super) verifying: Duration,
}

/// The rows at least `threshold` similar to `doc`, most similar first (ties by id), leaving
/// out `exclude_id`. A row sharing a band key with `doc` is fetched and verified only if its
/// band sketch agrees with `doc`'s in enough bits (`core::sketch`): that drops a row at or
/// above the threshold with probability at most [`LOOKUP_SKETCH_MISS_PROBABILITY`].
pub(super) fn similar(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    threshold: f64,
    exclude_id: Option<&Id>,
) -> Vec<(Id, f64)> {
    traced(
        cfg,
        client,
        doc,
        threshold,
        exclude_id,
        &mut Trace::default(),
    )
}

/// [`similar`], recording what it did in `trace`.
pub(super) fn traced(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    threshold: f64,
    exclude_id: Option<&Id>,
    trace: &mut Trace,
) -> Vec<(Id, f64)> {
    let start = Instant::now();
    // no shingles, no band keys: nothing is a candidate (such texts are not indexed)
    let Some((keys, sketch)) = band_entry(doc, cfg.def.k, cfg.def.shingling, cfg.def.banding)
    else {
        return Vec::new();
    };
    let min_bits = min_equal_bits(cfg.def.k, threshold, LOOKUP_SKETCH_MISS_PROBABILITY);
    let [bands_sql, rows_sql] = &cfg.sql;
    let mut ids = Vec::new();
    let (mut band_rows, mut passed) = (0, 0);
    let mut keep = |id: Id, row_sketch: [u64; 2]| {
        if Some(&id) == exclude_id {
            return;
        }
        band_rows += 1;
        if equal_bits(sketch, row_sketch, cfg.def.k) >= min_bits {
            passed += 1;
            ids.push(id);
        }
    };
    let band_index = cfg.placement.band_index().filter(|index| index.usable());
    let probed = keys.len();
    // The band table is private to the table's owner: read it directly (the caller's
    // right to see the results was checked by the caller of `similar`), or through SQL as
    // the owner.
    match band_index {
        Some(index) => index.scan(&keys, &mut keep),
        None => as_owner(relation_owner(cfg.def.tbl), || {
            let keys_type = PgOid::BuiltIn(PgBuiltInOids::INT8ARRAYOID);
            with_prepared(client, bands_sql, keys_type, keys.into(), |table| {
                for_each_spi_row(table, |row| {
                    if let (Some(id), Some(s1), Some(s2)) = (
                        cfg.def.key.spi_id(row, 1)?,
                        row.get::<i64>(2)?,
                        row.get::<i64>(3)?,
                    ) {
                        keep(id, [s1 as u64, s2 as u64]);
                    }
                    Ok(())
                })
            })
        }),
    }
    ids.sort_unstable();
    ids.dedup();
    let remote = cfg.placement.verifies_remotely();
    *trace = Trace {
        keys: probed,
        band_index: band_index.map(|index| index.oid()),
        band_indexes: band_index.map_or(0, |index| index.count()),
        band_rows,
        min_bits,
        passed,
        candidates: ids.len(),
        remote,
        finding: start.elapsed(),
        ..Trace::default()
    };
    if ids.is_empty() {
        return Vec::new();
    }
    let start = Instant::now();
    let mut found = Vec::new();
    if remote {
        // (verified where the rows are: only ids and similarities come back)
        let (arg, arg_type) = cfg.def.key.array_arg(&ids);
        let types = [arg_type, PgOid::BuiltIn(PgBuiltInOids::TEXTOID)];
        with_prepared_args(client, rows_sql, &types, &[arg, doc.into()], |table| {
            for_each_spi_row(table, |row| {
                let (id, similarity) = (cfg.def.key.spi_id(row, 1)?, row.get::<f64>(2)?);
                if let (Some(id), Some(s)) = (id, similarity.filter(|&s| s >= threshold)) {
                    found.push((id, s));
                }
                Ok(())
            })
        });
    } else {
        trace.row_index = verify_here(cfg, client, doc, threshold, &ids, &mut found);
    }
    found.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    trace.found = found.len();
    trace.verifying = start.elapsed();
    found
}

/// Verifies the candidates `ids` of a lookup of `doc` in this backend, adding those at
/// least `threshold` similar to `found`: their texts are read through the table's unique
/// index (returned), or its SQL query.
fn verify_here(
    cfg: &Index,
    client: &SpiClient<'_>,
    doc: &str,
    threshold: f64,
    ids: &[Id],
    found: &mut Vec<(Id, f64)>,
) -> Option<pg_sys::Oid> {
    let rows_sql = &cfg.sql[1];
    let query_set = ShingleSet::new(doc, cfg.def.shingling, &mut interrupts);
    let mut candidate = ShingleSet::default();
    let mut verify = |id: &Id, text: &str| {
        candidate.rebuild(text, cfg.def.shingling, &mut interrupts);
        let similarity = candidate.jaccard(&query_set);
        if similarity >= threshold {
            found.push((id.clone(), similarity));
        }
    };
    match cfg.placement.row_index().filter(RowIndex::readable) {
        Some(index) => {
            cfg.def.text.evaluating(relation_owner(cfg.def.tbl), || {
                index.fetch(&cfg.def.text, ids, verify)
            });
            Some(index.oid())
        }
        None => {
            let (arg, arg_type) = cfg.def.key.array_arg(ids);
            with_prepared(client, rows_sql, arg_type, arg, |table| {
                for_each_text_row(table, |id, text| {
                    // SAFETY: the query selects the id as the band table stores it.
                    verify(&unsafe { cfg.def.key.id(id, pg_sys::INT8OID) }, text)
                })
            });
            None
        }
    }
}
