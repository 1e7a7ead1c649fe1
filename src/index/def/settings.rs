//! An index's settings as the catalog and the SQL functions pass them: checked, as one value,
//! and the threshold of a query against the index's own.

use pgrx::PgSqlErrorCode;

use crate::core::params::{
    candidate_probability, check_k, check_threshold, float8_text, Banding, Shingling,
};
use crate::pg::error::{raise, OrRaise};

use crate::index::run::row::Row;

/// The settings of an index that decide its band rows, checked: the signature length, the
/// shingling and the banding (the catalog's `k`, `ngram`, `unit`, `bands` and `rows_per_band`).
/// One value: what signs a text for an index takes it whole.
#[derive(Clone, Copy, Debug)]
pub(in crate::index) struct IndexSettings {
    pub(in crate::index) k: usize,
    pub(in crate::index) shingling: Shingling,
    pub(in crate::index) banding: Banding,
}

impl IndexSettings {
    /// The settings of the catalog's columns (22023 for a value out of range).
    pub(in crate::index) fn checked(
        k: i32,
        ngram: i32,
        unit: &str,
        bands: i32,
        rows_per_band: i32,
    ) -> IndexSettings {
        let k = check_k(k).or_raise();
        let shingling = Shingling::new(ngram, unit).or_raise();
        IndexSettings {
            k,
            shingling,
            banding: Banding::new(k, bands, Some(rows_per_band)).or_raise(),
        }
    }

    /// The settings in a `minhash_internal.index_settings` row, checked as [`Self::checked`]
    /// checks the catalog's columns (22004 for a NULL field).
    pub(in crate::index) fn of_row(row: &Row) -> IndexSettings {
        let (Some(k), Some(ngram), Some(unit), Some(bands), Some(rows_per_band)) = (
            row.int(c"k"),
            row.int(c"ngram"),
            row.text(c"unit"),
            row.int(c"bands"),
            row.int(c"rows_per_band"),
        ) else {
            raise(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "index settings must not have NULL fields",
                None,
            )
        };
        IndexSettings::checked(k, ngram, &unit, bands, rows_per_band)
    }
}

/// A threshold argument, NULL meaning `fallback` (the index's own).
pub(in crate::index) fn checked_threshold(threshold: Option<f64>, fallback: f64) -> f64 {
    threshold.map_or(fallback, |t| check_threshold(t).or_raise())
}

/// The threshold of a query of an index with threshold `index_threshold` and bands `banding`:
/// its `threshold` argument, NULL meaning the index's, with a NOTICE if it is below the index's
/// (see [`notice_low_threshold`]).
pub(in crate::index) fn query_threshold(
    threshold: Option<f64>,
    index_threshold: f64,
    banding: Banding,
) -> f64 {
    let threshold = checked_threshold(threshold, index_threshold);
    notice_low_threshold(threshold, index_threshold, banding);
    threshold
}

/// Reports in a NOTICE that a query's `threshold` is below its index's own, and how often a
/// pair of exactly that similarity shares a band key with these bands (`lsh_probability`): the
/// index was sized for its own threshold, and below it recall falls.
pub(in crate::index) fn notice_low_threshold(threshold: f64, cfg_threshold: f64, banding: Banding) {
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
