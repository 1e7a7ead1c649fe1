//! MinHash signatures: slot `i` is the minimum over a document's shingles of
//! `permute(A[i], B[i], shingle_hash(shingle))`, a 32-bit value.

use super::hash::{permute, shingle_hash, PERMUTATIONS};
use super::normalize::normalize_into;
use super::params::{Shingling, MAX_K};
use super::shingle::for_each_shingle;

/// Slots updated together: one block of minimums, multipliers and offsets stays in registers
/// while a batch of shingle hashes streams past.
const BLOCK: usize = 32;
/// Shingle hashes buffered before the slot kernel runs (and interrupts are checked).
const BATCH: usize = 1024;

/// Value of every slot of a document with no shingles.
pub const EMPTY_SLOT: u32 = u32::MAX;

/// Reusable buffers for computing signatures; keep one per thread to avoid reallocating.
#[derive(Default)]
pub struct Signer {
    norm: String,
    hashes: Vec<u64>,
    mins: Vec<u64>,
}

impl Signer {
    /// The `k`-slot signature of `doc`. `check_interrupts` is called between batches of
    /// shingles so a long document can be cancelled; it may unwind.
    pub fn signature(
        &mut self,
        doc: &str,
        k: usize,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Vec<u32> {
        assert!((1..=MAX_K).contains(&k), "k out of range");
        normalize_into(doc, &mut self.norm);
        let padded = k.div_ceil(BLOCK) * BLOCK;
        self.mins.clear();
        self.mins.resize(padded, u64::from(EMPTY_SLOT));
        self.hashes.clear();
        let (norm, hashes, mins) = (&self.norm, &mut self.hashes, &mut self.mins);
        let bytes = norm.as_bytes();
        for_each_shingle(norm, shingling, |(s, e)| {
            hashes.push(shingle_hash(&bytes[s..e]));
            if hashes.len() == BATCH {
                update_mins(mins, hashes);
                hashes.clear();
                check_interrupts();
            }
        });
        update_mins(mins, hashes);
        mins[..k].iter().map(|&m| m as u32).collect()
    }
}

/// The `k`-slot signature of `doc`, with fresh buffers and no interrupt checks.
pub fn signature(doc: &str, k: usize, shingling: Shingling) -> Vec<u32> {
    Signer::default().signature(doc, k, shingling, &mut || {})
}

/// Fraction of slots on which two equal-length signatures agree: the estimate of Jaccard.
pub fn estimate_similarity(a: &[u32], b: &[u32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len() as f64
}

/// Folds `hashes` into `mins` (whose length is a multiple of `BLOCK`), using the widest vector
/// instructions this CPU has. Every path computes the same integers.
fn update_mins(mins: &mut [u64], hashes: &[u64]) {
    if hashes.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512dq") {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { update_mins_avx512(mins, hashes) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { update_mins_avx2(mins, hashes) };
        }
    }
    update_mins_portable(mins, hashes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
fn update_mins_avx512(mins: &mut [u64], hashes: &[u64]) {
    update_mins_portable(mins, hashes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn update_mins_avx2(mins: &mut [u64], hashes: &[u64]) {
    update_mins_portable(mins, hashes)
}

#[inline(always)]
fn update_mins_portable(mins: &mut [u64], hashes: &[u64]) {
    let blocks = mins.chunks_exact_mut(BLOCK);
    let a_blocks = PERMUTATIONS.a.chunks_exact(BLOCK);
    let b_blocks = PERMUTATIONS.b.chunks_exact(BLOCK);
    for ((block, a), b) in blocks.zip(a_blocks).zip(b_blocks) {
        let a: &[u64; BLOCK] = a.try_into().expect("block size");
        let b: &[u64; BLOCK] = b.try_into().expect("block size");
        let mut m: [u64; BLOCK] = (&*block).try_into().expect("block size");
        for &x in hashes {
            for j in 0..BLOCK {
                m[j] = m[j].min(permute(a[j], b[j], x));
            }
        }
        block.copy_from_slice(&m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::params::Shingling;

    fn sig(doc: &str, k: usize) -> Vec<u32> {
        signature(doc, k, Shingling::new(5, "char").unwrap())
    }

    #[test]
    fn empty_documents_have_all_max_slots() {
        assert_eq!(sig("", 7), vec![EMPTY_SLOT; 7]);
        assert_eq!(sig(" \t\u{3000} ", 3), vec![EMPTY_SLOT; 3]);
    }

    #[test]
    fn slots_do_not_depend_on_k() {
        let long = sig("the quick brown fox jumps over the lazy dog", 1024);
        for k in [1, 31, 32, 33, 128, 1000] {
            assert_eq!(
                sig("the quick brown fox jumps over the lazy dog", k),
                long[..k]
            );
        }
    }

    #[test]
    fn kernel_matches_the_definition() {
        let doc = "Near-duplicate detection with MinHash, ünïcödé and 日本語 too";
        let sh = Shingling::new(3, "char").unwrap();
        let norm = crate::core::normalize::normalize(doc);
        let mut expected = vec![EMPTY_SLOT; 100];
        for_each_shingle(&norm, sh, |(s, e)| {
            let x = shingle_hash(&norm.as_bytes()[s..e]);
            for (i, slot) in expected.iter_mut().enumerate() {
                *slot = (*slot).min(permute(PERMUTATIONS.a[i], PERMUTATIONS.b[i], x) as u32);
            }
        });
        assert_eq!(signature(doc, 100, sh), expected);
        let mut fallback = vec![u64::from(EMPTY_SLOT); 128];
        let mut hashes = Vec::new();
        for_each_shingle(&norm, sh, |(s, e)| {
            hashes.push(shingle_hash(&norm.as_bytes()[s..e]))
        });
        update_mins_portable(&mut fallback, &hashes);
        let fallback: Vec<u32> = fallback[..100].iter().map(|&m| m as u32).collect();
        assert_eq!(fallback, expected);
    }

    #[test]
    fn normalization_and_repeats_do_not_matter() {
        assert_eq!(sig("Hello   World", 64), sig("hello world", 64));
        assert_eq!(sig("abcabcabcabc", 64), sig("abcabcabc", 64));
    }

    #[test]
    fn interrupts_are_checked_on_long_documents() {
        let doc = "x".repeat(10 * BATCH);
        let mut calls = 0;
        Signer::default().signature(&doc, 8, Shingling::new(5, "char").unwrap(), &mut || {
            calls += 1
        });
        assert!(calls >= 9, "{calls}");
    }

    #[test]
    fn known_signatures_are_pinned() {
        // Format version 1, cross-checked against an independent Python implementation.
        let pinned = [
            (
                "hello world",
                [2395959086, 702608519, 1118344929, 429847971],
            ),
            ("", [u32::MAX; 4]),
            ("Ünïcödé 日本語", [5432745, 442124298, 113565943, 293097549]),
            (
                "Who was the first king of Poland",
                [230523310, 156342859, 68697027, 410213689],
            ),
        ];
        for (doc, want) in pinned {
            assert_eq!(sig(doc, 4), want, "{doc:?}");
        }
    }

    #[test]
    fn estimate_counts_equal_slots() {
        assert_eq!(estimate_similarity(&[1, 2, 3, 4], &[1, 2, 3, 4]), 1.0);
        assert_eq!(estimate_similarity(&[1, 2, 3, 4], &[1, 0, 3, 0]), 0.5);
    }
}
