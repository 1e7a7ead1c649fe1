//! MinHash signatures: slot `i` is the minimum over a document's shingles of
//! `permute(XOR[i], MUL[i], shingle_hash(shingle))`, a 32-bit value.

use super::capacity::CapacityError;
use super::hash::{permute, shingle_hash, window_hashes, PERMUTATIONS};
use super::normalize::normalize_into;
use super::params::{Shingling, MAX_K};
use super::shingle::{byte_windows, for_each_shingle};

/// Signatures are computed in multiples of this many slots (one 512-bit vector of u32).
const LANES: usize = 16;
/// Shingle hashes buffered before the slot kernel runs (and interrupts are checked).
const BATCH: usize = 1024;

/// Value of every slot of a document with no shingles.
pub const EMPTY_SLOT: u32 = u32::MAX;

/// Reusable buffers for computing signatures; keep one per thread to avoid reallocating.
#[derive(Default)]
pub struct Signer {
    norm: String,
    hashes: Vec<u32>,
    mins: Vec<u32>,
}

impl Signer {
    /// The `k`-slot signature of `doc`. `check_interrupts` is called between batches of
    /// shingles so a long document can be cancelled; it may unwind. The only allocation that
    /// grows with the document is the normalized text, and it is made fallibly.
    pub fn try_signature(
        &mut self,
        doc: &str,
        k: usize,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<Vec<u32>, CapacityError> {
        self.sign(doc, k, shingling, check_interrupts)
            .map(<[u32]>::to_vec)
    }

    /// [`Signer::try_signature`] into the signer's own buffer, valid until its next call: no
    /// allocation per document.
    pub fn sign(
        &mut self,
        doc: &str,
        k: usize,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<&[u32], CapacityError> {
        assert!((1..=MAX_K).contains(&k), "k out of range");
        let ascii = normalize_into(doc, &mut self.norm, check_interrupts)?;
        let padded = k.div_ceil(LANES) * LANES;
        self.mins.clear();
        self.mins.resize(padded, EMPTY_SLOT);
        self.hashes.clear();
        let (norm, hashes, mins) = (&self.norm, &mut self.hashes, &mut self.mins);
        let bytes = norm.as_bytes();
        let n = shingling.ngram;
        if let Some(windows) = byte_windows(norm, ascii, shingling) {
            // The common case as one tight loop: every n-byte window, a batch at a time (the
            // same windows for_each_shingle yields).
            for first in (0..windows).step_by(BATCH) {
                let last = (first + BATCH).min(windows);
                hashes.clear();
                window_hashes(bytes, n, first..last, hashes);
                update_mins(mins, hashes);
                check_interrupts();
            }
        } else {
            for_each_shingle(norm, shingling, |(s, e)| {
                hashes.push(shingle_hash(&bytes[s..e]));
                if hashes.len() == BATCH {
                    update_mins(mins, hashes);
                    hashes.clear();
                    check_interrupts();
                }
            });
            update_mins(mins, hashes);
        }
        Ok(&self.mins[..k])
    }

    /// [`Signer::try_signature`], reporting an error through [`CapacityError::fail`].
    pub fn signature(
        &mut self,
        doc: &str,
        k: usize,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Vec<u32> {
        self.try_signature(doc, k, shingling, check_interrupts)
            .unwrap_or_else(|e| e.fail())
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

/// Folds `hashes` into `mins` (whose length is a multiple of `LANES`), with the widest vector
/// instructions this CPU has. Every path computes the same integers.
fn update_mins(mins: &mut [u32], hashes: &[u32]) {
    if hashes.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports the feature the function is compiled for.
            return unsafe { update_mins_avx512(mins, hashes) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { update_mins_avx2(mins, hashes) };
        }
    }
    update_mins_blocked::<32>(mins, hashes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn update_mins_avx512(mins: &mut [u32], hashes: &[u32]) {
    update_mins_blocked::<64>(mins, hashes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn update_mins_avx2(mins: &mut [u32], hashes: &[u32]) {
    update_mins_blocked::<32>(mins, hashes)
}

/// Blocks of `N` slots (the minimums, XOR and MUL constants of a block stay in registers while
/// the batch streams past), then any remainder in blocks of `LANES`.
#[inline(always)]
fn update_mins_blocked<const N: usize>(mins: &mut [u32], hashes: &[u32]) {
    let full = mins.len() / N * N;
    let (head, tail) = mins.split_at_mut(full);
    for (i, block) in head.chunks_exact_mut(N).enumerate() {
        update_block::<N>(block, i * N, hashes);
    }
    for (i, block) in tail.chunks_exact_mut(LANES).enumerate() {
        update_block::<LANES>(block, full + i * LANES, hashes);
    }
}

#[inline(always)]
fn update_block<const N: usize>(mins: &mut [u32], first_slot: usize, hashes: &[u32]) {
    let xor: &[u32; N] = PERMUTATIONS.xor[first_slot..first_slot + N]
        .try_into()
        .expect("N slots");
    let mul: &[u32; N] = PERMUTATIONS.mul[first_slot..first_slot + N]
        .try_into()
        .expect("N slots");
    let mut m: [u32; N] = (&*mins).try_into().expect("N slots");
    for &x in hashes {
        for j in 0..N {
            m[j] = m[j].min(permute(xor[j], mul[j], x));
        }
    }
    mins.copy_from_slice(&m);
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
        for k in [1, 15, 16, 17, 63, 64, 65, 128, 1000] {
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
        let mut expected = vec![EMPTY_SLOT; 1024];
        for_each_shingle(&norm, sh, |(s, e)| {
            let x = shingle_hash(&norm.as_bytes()[s..e]);
            for (i, slot) in expected.iter_mut().enumerate() {
                *slot = (*slot).min(permute(PERMUTATIONS.xor[i], PERMUTATIONS.mul[i], x));
            }
        });
        for k in [1, 16, 100, 128, 200, 1024] {
            assert_eq!(signature(doc, k, sh), expected[..k], "k = {k}");
        }
        // every kernel this machine can run gives the same integers
        let mut hashes = Vec::new();
        for_each_shingle(&norm, sh, |(s, e)| {
            hashes.push(shingle_hash(&norm.as_bytes()[s..e]))
        });
        let run = |kernel: &dyn Fn(&mut [u32], &[u32])| {
            let mut mins = vec![EMPTY_SLOT; 1024];
            kernel(&mut mins, &hashes);
            mins
        };
        assert_eq!(run(&update_mins_blocked::<32>), expected);
        assert_eq!(run(&update_mins_blocked::<16>), expected);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the feature was checked.
                assert_eq!(run(&|m, h| unsafe { update_mins_avx512(m, h) }), expected);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the feature was checked.
                assert_eq!(run(&|m, h| unsafe { update_mins_avx2(m, h) }), expected);
            }
        }
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
    fn estimate_counts_equal_slots() {
        assert_eq!(estimate_similarity(&[1, 2, 3, 4], &[1, 2, 3, 4]), 1.0);
        assert_eq!(estimate_similarity(&[1, 2, 3, 4], &[1, 0, 3, 0]), 0.5);
    }
}
