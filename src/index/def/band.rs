//! What the band table holds for one row: its band keys and band sketch (`core::sketch`)
//! under an index's settings, as band rows, and the two formats a band table stores them in.

use crate::core::bands::band_keys;
use crate::core::capacity::CapacityError;
use crate::core::parallel;
use crate::core::params::Banding;
use crate::core::signature::Signer;
use crate::core::signature::EMPTY_SLOT;
use crate::core::sketch::{band_sketch, BandSketch};
use crate::pg::backend::{build_threads, interrupts, SIGNER};
use crate::pg::error::OrRaise;

use super::row_id::Id;
use super::settings::IndexSettings;

/// The band keys and band sketch (`core::sketch`) of one text under an index's `settings`, as
/// the band table stores them; None for a text without shingles, which is not indexed: its
/// signature is all 0xFFFFFFFF, which a text with shingles has only with probability 2^-32k.
/// Both what the sync triggers store and what a lookup searches for come from here.
pub(in crate::index) fn band_entry(
    doc: &str,
    settings: &IndexSettings,
) -> Option<(Vec<i64>, BandSketch)> {
    let IndexSettings {
        k,
        shingling,
        banding,
    } = *settings;
    let signature = SIGNER.with_borrow_mut(|s| s.signature(doc, k, shingling, &mut interrupts));
    band_entry_of(&signature, banding)
}

/// Rows signed by one task of [`band_values_batch`].
const BATCH_TASK: usize = 256;

/// The band values ([`band_values`]) of each of `docs`, in order, None for a NULL text or one
/// that is not indexed, as [`band_entry`] computes them: signed on the build's threads
/// (`build_threads`: 1 + `max_parallel_maintenance_workers`, [`BATCH_TASK`] texts to a task),
/// the calling thread checking for interrupts. The threads only read `docs`.
pub(in crate::index) fn band_values_batch(
    docs: &[Option<&str>],
    settings: &IndexSettings,
) -> Vec<Option<Vec<i64>>> {
    let IndexSettings {
        k,
        shingling,
        banding,
    } = *settings;
    let values = parallel::run(
        build_threads(),
        docs.len().div_ceil(BATCH_TASK),
        &mut interrupts,
        &mut |_| {},
        Signer::default,
        |signer, task, check| {
            let mut values = Vec::new();
            for doc in docs[task * BATCH_TASK..].iter().take(BATCH_TASK) {
                values.push(match doc {
                    None => None,
                    Some(doc) => band_entry_of(signer.sign(doc, k, shingling, check)?, banding)
                        .map(band_values),
                });
            }
            Ok::<_, CapacityError>(values)
        },
    )
    .or_raise();
    values.into_iter().flatten().collect()
}

/// A text's band entry as one array (what `_minhash_band_values` returns): its band keys, then
/// its band sketch as two int8.
pub(in crate::index) fn band_values((mut values, sketch): (Vec<i64>, BandSketch)) -> Vec<i64> {
    values.extend(sketch.map(|w| w as i64));
    values
}

/// [`band_entry`] of a text whose signature is `signature`. Pure Rust: the threads of a build
/// call it.
fn band_entry_of(signature: &[u32], banding: Banding) -> Option<(Vec<i64>, BandSketch)> {
    if signature.iter().all(|&v| v == EMPTY_SLOT) {
        return None;
    }
    let keys = band_keys(signature, banding)
        .into_iter()
        .map(|key| key as i64)
        .collect();
    Some((keys, band_sketch(signature)))
}

/// One band row: `(id, key, [sketch1, sketch2])`.
pub(in crate::index) type BandRow = (Id, i64, [i64; 2]);

/// The band row of key `key` of the row with id `id` and band sketch `sketch`.
pub(in crate::index) fn band_row(id: &Id, key: i64, sketch: BandSketch) -> BandRow {
    (id.clone(), key, sketch.map(|w| w as i64))
}

/// How a band table stores the band rows of a row (docs/contract.md): the catalog's `format`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::index) enum BandFormat {
    /// Format 1: a row per row and band, `(id, key, sketch1, sketch2)`, and one B-tree
    /// `(key, id) INCLUDE (sketch1, sketch2)`.
    PerBand,
    /// Format 2: a row per row, `(id, sketch1, sketch2, key1, ..., key<bands>)`, a B-tree on
    /// `id` and one on each `key<i>`.
    PerRow,
}

impl BandFormat {
    /// The format the catalog's `format` value names, if any.
    pub(super) fn of_catalog(format: i32) -> Option<BandFormat> {
        match format {
            1 => Some(BandFormat::PerBand),
            2 => Some(BandFormat::PerRow),
            _ => None,
        }
    }

    /// The band table's columns, in order, of an index of `bands` bands (as
    /// `_minhash_band_value_columns` in src/index/sql/build.sql lists them after `id`).
    pub(in crate::index) fn columns(self, bands: usize) -> Vec<String> {
        match self {
            BandFormat::PerBand => ["id", "key", "sketch1", "sketch2"]
                .map(String::from)
                .to_vec(),
            BandFormat::PerRow => ["id", "sketch1", "sketch2"]
                .map(String::from)
                .into_iter()
                .chain((1..=bands).map(|i| format!("key{i}")))
                .collect(),
        }
    }

    /// The column holding band `band`'s key (0-based), and of format 2 the key column whose
    /// B-tree finds a row by its first band.
    pub(in crate::index) fn key_column(self, band: usize) -> String {
        match self {
            BandFormat::PerBand => "key".into(),
            BandFormat::PerRow => format!("key{}", band + 1),
        }
    }
}
