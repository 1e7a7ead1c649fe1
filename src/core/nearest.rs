//! What a lookup keeps of the rows it verifies, and when the band keys alone are enough.
//!
//! A lookup asks either for every row at or above a threshold (the floor), or for the `k` most
//! similar rows at or above it. [`Ranked`] keeps those, and tells the least similarity a row
//! still needs to be kept (its bar): the floor, or once `k` rows are kept the k-th best
//! similarity. [`keys_suffice`] says whether the band keys find a row at that bar with the
//! recall the index was built for; where they do not, a lookup reads the sketch of every row
//! (`index::lookup`), and [`max_differing_bits`] says which rows it must verify.

use super::params::{candidate_probability, Banding, DEFAULT_MIN_RECALL};
use super::sketch::{min_equal_bits, BAND_SKETCH_BITS};

/// Per row at or above the bar, the probability that a lookup reading every row's sketch
/// skips it: the scan misses a row only through its sketch, so its recall is at least
/// `1 - SCAN_SKETCH_MISS_PROBABILITY` at every threshold, what the band keys promise at the
/// index's own threshold ([`DEFAULT_MIN_RECALL`]). A row well above the bar is missed far
/// less often; each halving of this probability verifies about twice the rows on texts that
/// share boilerplate, most of them far below the bar.
pub const SCAN_SKETCH_MISS_PROBABILITY: f64 = 1e-2;

/// The lowest threshold whose rows a lookup without `k` finds with full recall by reading
/// every row's sketch; below it, only the band keys are read (and a NOTICE tells the recall).
pub const LOWEST_SCANNED_THRESHOLD: f64 = 0.5;

/// Whether the band keys alone find a row of similarity `bar` with at least the recall the
/// index was built for at its own threshold ([`DEFAULT_MIN_RECALL`]).
pub fn keys_suffice(bar: f64, banding: Banding) -> bool {
    candidate_probability(bar, banding.bands, banding.rows) >= DEFAULT_MIN_RECALL
}

/// The most band-sketch bits (of `min(k, 128)`) in which a row of similarity `bar` or more
/// differs from the text, except with probability [`SCAN_SKETCH_MISS_PROBABILITY`].
pub fn max_differing_bits(k: usize, bar: f64) -> usize {
    k.min(BAND_SKETCH_BITS) - min_equal_bits(k, bar, SCAN_SKETCH_MISS_PROBABILITY)
}

/// The rows a lookup keeps, most similar first (ties by id): every row offered at or above
/// the floor, or only the `k` most similar of them.
pub struct Ranked<T> {
    k: Option<usize>,
    floor: f64,
    /// Sorted, most similar first; with `k`, at most `k` long.
    rows: Vec<(T, f64)>,
}

impl<T: Ord> Ranked<T> {
    pub fn new(k: Option<usize>, floor: f64) -> Ranked<T> {
        Ranked {
            k,
            floor,
            rows: Vec::new(),
        }
    }

    /// The least similarity a row needs to be kept now.
    pub fn bar(&self) -> f64 {
        match self.k {
            Some(k) if self.rows.len() >= k => self.rows[k - 1].1.max(self.floor),
            _ => self.floor,
        }
    }

    /// The most rows kept, if limited (a `k` lookup's).
    pub fn k(&self) -> Option<usize> {
        self.k
    }

    /// Whether the bar may rise as rows are offered (a `k` lookup's).
    pub fn bar_may_rise(&self) -> bool {
        self.k.is_some()
    }

    /// Keeps `(id, similarity)` if it reaches the bar (with `k`, it may push out the k-th).
    pub fn offer(&mut self, id: T, similarity: f64) {
        if similarity < self.bar() {
            return;
        }
        let at = self
            .rows
            .partition_point(|(i, s)| *s > similarity || (*s == similarity && *i < id));
        if self.k.is_some_and(|k| at >= k) {
            return;
        }
        self.rows.insert(at, (id, similarity));
        if let Some(k) = self.k {
            self.rows.truncate(k);
        }
    }

    /// How many rows are kept.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows kept, most similar first, ties by id.
    pub fn into_rows(self) -> Vec<(T, f64)> {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testing::Rng;

    /// Against sorting everything offered: the same rows, in the same order.
    #[test]
    fn ranked_keeps_what_a_full_sort_keeps() {
        let mut rng = Rng(5);
        for k in [None, Some(1), Some(3), Some(10)] {
            for floor in [0.0, 0.3] {
                let mut ranked = Ranked::new(k, floor);
                let mut all = Vec::new();
                for id in 0..200u32 {
                    // few distinct values, so that there are ties
                    let s = rng.below(11) as f64 / 10.0;
                    ranked.offer(id, s);
                    all.push((id, s));
                }
                all.retain(|&(_, s)| s >= floor);
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                if let Some(k) = k {
                    all.truncate(k);
                }
                assert_eq!(ranked.into_rows(), all, "k {k:?}, floor {floor}");
            }
        }
    }

    #[test]
    fn bar_is_the_floor_until_k_rows_are_kept() {
        let mut ranked = Ranked::new(Some(2), 0.1);
        assert_eq!(ranked.bar(), 0.1);
        ranked.offer(1, 0.5);
        assert_eq!(ranked.bar(), 0.1);
        ranked.offer(2, 0.7);
        assert_eq!(ranked.bar(), 0.5);
        ranked.offer(3, 0.4);
        assert_eq!(ranked.len(), 2);
        ranked.offer(4, 0.9);
        assert_eq!(ranked.bar(), 0.7);
        assert_eq!(ranked.into_rows(), vec![(4, 0.9), (2, 0.7)]);
    }

    /// At the default banding of 0.8 (16 bands of 6 rows), the keys suffice at 0.8 and not at
    /// 0.7; the scan's bit bound keeps a row at the bar with at least its stated probability.
    #[test]
    fn keys_suffice_at_the_index_threshold_only() {
        let banding = Banding::new(128, 16, Some(6)).unwrap();
        assert!(keys_suffice(0.8, banding));
        assert!(!keys_suffice(0.7, banding));
        assert_eq!(max_differing_bits(128, 1.0), 0);
        let d = max_differing_bits(128, 0.5);
        // each bit differs with probability (1 - 0.5) / 2: mean 32, sd 4.9
        assert!((40..=50).contains(&d), "{d}");
        assert_eq!(
            max_differing_bits(16, 0.0),
            16 - min_equal_bits(16, 0.0, SCAN_SKETCH_MISS_PROBABILITY)
        );
    }
}
