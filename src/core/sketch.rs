//! Signature sketches: a few bits per slot, compared before the exact Jaccard check so that a
//! candidate that merely collided in one band is dropped without fetching its text.
//!
//! Both sketches here rest on the same count. Two signatures of sets with Jaccard similarity J
//! have each slot equal with probability J, independently across slots (the MinHash model every
//! LSH bound relies on). A sketch value derived from a slot is equal whenever the slot is, so
//! the number of equal sketch values is at least a binomial count; a pair at or above the
//! threshold shows fewer than [`binomial_lower_quantile`] equal values only with the stated
//! probability, and the filters keep everything at or above it.

use super::hash::splitmix64;

/// Probability, per row at or above the threshold, that a lookup's sketch filter (of
/// `minhash_similar` and the duplicate trigger) drops it: far below what the banding itself
/// misses at the threshold (1% by default, see `lsh_params`).
pub const LOOKUP_SKETCH_MISS_PROBABILITY: f64 = 1e-6;
/// The same per pair of a whole-table search (`minhash_duplicates`, `minhash_clusters`), which
/// looks at many more pairs than a lookup at rows.
pub const SEARCH_SKETCH_MISS_PROBABILITY: f64 = 1e-9;

/// Bits in a band sketch: one per slot of the first 128 slots.
pub const BAND_SKETCH_BITS: usize = 128;

/// One bit from each of the first [`BAND_SKETCH_BITS`] slots, stored beside every band key.
pub type BandSketch = [u64; 2];

/// The largest `m` with `P[Binomial(n, p) < m] <= miss`: a count of successes that a
/// Binomial(n, p) variable falls short of at most with probability `miss`.
pub fn binomial_lower_quantile(n: usize, p: f64, miss: f64) -> usize {
    if p >= 1.0 {
        return n;
    }
    let q = 1.0 - p;
    // log C(n, m) built up incrementally; cdf = P[X <= m - 1]
    let mut log_choose = 0.0f64;
    let mut cdf = 0.0f64;
    for m in 0..=n {
        if m > 0 {
            log_choose += ((n - m + 1) as f64).ln() - (m as f64).ln();
        }
        let pmf = (log_choose + m as f64 * p.ln() + (n - m) as f64 * q.ln()).exp();
        if cdf + pmf > miss {
            return m;
        }
        cdf += pmf;
    }
    n
}

/// The band sketch of a signature: bit `i` is the low bit of a 64-bit mix of slot `i`'s value
/// and `i`. Equal slots give equal bits; two different values give equal bits with probability
/// 1/2, independently of every other slot, as far as the mix is a random function (the same
/// assumption the band keys' hash makes).
pub fn band_sketch(signature: &[u32]) -> BandSketch {
    let mut sketch = [0u64; 2];
    for (i, &v) in signature.iter().take(BAND_SKETCH_BITS).enumerate() {
        let bit = splitmix64(((i as u64) << 32) | u64::from(v)).1 & 1;
        sketch[i / 64] |= bit << (i % 64);
    }
    sketch
}

/// How many of the first `min(k, 128)` bits two band sketches of k-slot signatures share.
pub fn equal_bits(a: BandSketch, b: BandSketch, k: usize) -> usize {
    let slots = k.min(BAND_SKETCH_BITS);
    let differing: u32 = (0..2)
        .map(|w| {
            let used = slots.saturating_sub(w * 64).min(64);
            let mask = if used == 64 {
                u64::MAX
            } else {
                (1u64 << used) - 1
            };
            ((a[w] ^ b[w]) & mask).count_ones()
        })
        .sum();
    slots - differing as usize
}

/// The fewest equal band-sketch bits a pair of k-slot signatures with similarity `threshold` or
/// more shows, except with probability at most `miss`. Each bit is equal with probability
/// J + (1 - J) / 2 >= threshold + (1 - threshold) / 2. Being a candidate (one band of slots all
/// equal) only makes more bits equal.
pub fn min_equal_bits(k: usize, threshold: f64, miss: f64) -> usize {
    let slots = k.min(BAND_SKETCH_BITS);
    binomial_lower_quantile(slots, threshold + (1.0 - threshold) / 2.0, miss)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::params::Shingling;
    use crate::core::signature::Signer;
    use crate::core::testing::Rng;

    /// The quantile against a direct sum of binomial terms.
    #[test]
    fn quantile_is_the_binomial_quantile() {
        assert_eq!(binomial_lower_quantile(128, 1.0, 1e-9), 128);
        assert_eq!(binomial_lower_quantile(128, 0.01, 1e-9), 0);
        let cdf_below = |n: usize, p: f64, m: usize| -> f64 {
            (0..m)
                .map(|i| {
                    let c: f64 = (0..i).map(|j| (n - j) as f64 / (j + 1) as f64).product();
                    c * p.powi(i as i32) * (1.0 - p).powi((n - i) as i32)
                })
                .sum()
        };
        for (n, p, miss) in [(128, 0.8, 1e-9), (128, 0.9, 1e-6), (64, 0.75, 1e-6)] {
            let m = binomial_lower_quantile(n, p, miss);
            assert!(cdf_below(n, p, m) <= miss, "{n} {p} {miss}: {m}");
            assert!(cdf_below(n, p, m + 1) > miss, "{n} {p} {miss}: {m}");
        }
    }

    #[test]
    fn equal_bits_counts_only_the_slots_there_are() {
        let ones = [u64::MAX, u64::MAX];
        assert_eq!(equal_bits(ones, ones, 128), 128);
        assert_eq!(equal_bits(ones, [0, 0], 128), 0);
        assert_eq!(equal_bits(ones, [0, 0], 1024), 0);
        // 16 slots: bits 16.. are never set, and do not count
        assert_eq!(equal_bits([0, 0], [0, u64::MAX], 16), 16);
        assert_eq!(equal_bits([0, 0], [1 << 15, 0], 16), 15);
        assert_eq!(equal_bits([0, 0], [0, 1 << 3], 70), 69);
        let sig: Vec<u32> = (0..16).collect();
        assert_eq!(band_sketch(&sig)[0] >> 16, 0);
        assert_eq!(band_sketch(&sig)[1], 0);
    }

    /// Pairs of word documents: at a loose miss rate (5%) the filter drops no more pairs just
    /// above the threshold than the bound says, and at the lookups' rate it drops nearly all
    /// unrelated pairs.
    #[test]
    fn filter_keeps_similar_pairs_and_drops_unrelated_ones() {
        let mut rng = Rng(11);
        let words: Vec<String> = (0..400).map(|_| rng.word(5)).collect();
        let mut signer = Signer::default();
        let shingling = Shingling::new(5, "char").unwrap();
        let mut sketch_of =
            |doc: &str| band_sketch(&signer.signature(doc, 128, shingling, &mut || {}));
        let loose = min_equal_bits(128, 0.8, 0.05);
        let strict = min_equal_bits(128, 0.8, 1e-6);
        let (mut near, mut near_dropped, mut far_kept) = (0, 0, 0);
        let trials = 4000;
        for _ in 0..trials {
            let doc: Vec<&str> = (0..60)
                .map(|_| words[rng.below(400) as usize].as_str())
                .collect();
            let mut edited = doc.clone();
            for _ in 0..2 + rng.below(5) {
                edited[rng.below(60) as usize] = "zzzzz";
            }
            let other: Vec<&str> = (0..60)
                .map(|_| words[rng.below(400) as usize].as_str())
                .collect();
            let (a, b, c) = (doc.join(" "), edited.join(" "), other.join(" "));
            let (sa, sb, sc) = (sketch_of(&a), sketch_of(&b), sketch_of(&c));
            let j = crate::core::jaccard::jaccard(&a, &b, shingling);
            if (0.8..0.85).contains(&j) {
                near += 1;
                near_dropped += usize::from(equal_bits(sa, sb, 128) < loose);
            }
            far_kept += usize::from(equal_bits(sa, sc, 128) >= strict);
        }
        assert!(near >= 400, "{near} pairs in [0.8, 0.85)");
        // at most 5% expected (fewer, as these are above 0.8); 8% is three standard deviations
        assert!(
            near_dropped * 100 <= near * 8,
            "dropped {near_dropped} of {near}"
        );
        assert!(
            far_kept * 100 <= trials,
            "kept {far_kept} of {trials} unrelated pairs"
        );
    }
}
