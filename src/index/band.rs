//! What the band table holds for one row: its band keys and band sketch (`core::sketch`)
//! under an index's settings, as band rows.

use crate::core::bands::band_keys;
use crate::core::params::{Banding, Shingling};
use crate::core::signature::EMPTY_SLOT;
use crate::core::sketch::{band_sketch, BandSketch};
use crate::pg::backend::{interrupts, SIGNER};

use super::key::Id;

/// The band keys and band sketch (`core::sketch`) of one text under an index's settings, as
/// the band table stores them; None for a text without shingles, which is not indexed: its
/// signature is all 0xFFFFFFFF, which a text with shingles has only with probability 2^-32k.
/// Both what the sync triggers store and what a lookup searches for come from here.
pub(super) fn band_entry(
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

/// One band row: `(id, key, [sketch1, sketch2])`.
pub(super) type BandRow = (Id, i64, [i64; 2]);

/// The band row of key `key` of the row with id `id` and band sketch `sketch`.
pub(super) fn band_row(id: &Id, key: i64, sketch: BandSketch) -> BandRow {
    (id.clone(), key, sketch.map(|w| w as i64))
}
