//! The fine sketch: four bits from each of 128 MinHash slots, 64 bytes per row, which a lookup
//! compares with every row's at memory speed where the band keys cannot find what it asks (the
//! `k` most similar rows, a threshold below the index's).
//!
//! Slot `i` of a 128-slot signature gives the four top bits of a 64-bit mix of its value and
//! `i` (b-bit minwise hashing, Li and König). Two texts with Jaccard similarity J have each slot
//! equal with probability J; two different slot values give equal nibbles with probability
//! 1/16, as far as the mix is a random function. So the number of equal nibbles is
//! Binomial(128, J + (1 - J) / 16), independently across slots, and a row at or above a bar
//! shows fewer than [`min_equal_slots`] equal nibbles only with the stated probability.
//!
//! Why 128 x 4 bits: of the layouts of 512 bits (256 x 2, 170 x 3, 128 x 4, 102 x 5, 85 x 6,
//! 64 x 8), it lets through the fewest rows of similarity 0.05-0.1 at a bar of 0.2 and 0.3
//! (the rows a `k` lookup on real text verifies in vain) while keeping a row at the bar with
//! probability 0.999 (docs/internals.md, "The sketch store").

use super::capacity::reserve;
use super::hash::splitmix64;
use super::sketch::binomial_lower_quantile;
use super::slots::zero_nibbles;
#[cfg(target_arch = "x86_64")]
use super::slots::zero_nibbles_avx2;

/// Signature slots a fine sketch is made of.
pub const FINE_SLOTS: usize = 128;
/// Bits kept of each slot.
pub const FINE_BITS: usize = 4;
/// Bytes of a fine sketch: slot `2i` in the low nibble of byte `i`, slot `2i + 1` in its high.
pub const FINE_BYTES: usize = FINE_SLOTS * FINE_BITS / 8;

/// A fine sketch, as stored.
pub type FineSketch = [u8; FINE_BYTES];

/// Per row at or above a lookup's bar, the probability that its fine sketch shows too few
/// equal nibbles and it is not verified: a scan's recall at any bar is at least 0.999.
pub const FINE_MISS_PROBABILITY: f64 = 1e-3;

/// The fine sketch of a signature of [`FINE_SLOTS`] slots (or fewer: the missing slots' nibbles
/// are 0 in every sketch, and equal).
pub fn fine_sketch(signature: &[u32]) -> FineSketch {
    let mut sketch = [0u8; FINE_BYTES];
    for (i, &v) in signature.iter().take(FINE_SLOTS).enumerate() {
        let nibble = (splitmix64(((i as u64) << 32) | u64::from(v)).1 >> 60) as u8;
        sketch[i / 2] |= nibble << (4 * (i % 2));
    }
    sketch
}

/// How many slots two fine sketches agree in (equal nibbles), of [`FINE_SLOTS`].
pub fn equal_slots(a: &FineSketch, b: &FineSketch) -> u32 {
    let mut equal = 0;
    for (wa, wb) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        equal += zero_nibbles(
            u64::from_le_bytes(wa.try_into().expect("8 bytes"))
                ^ u64::from_le_bytes(wb.try_into().expect("8 bytes")),
        );
    }
    equal
}

/// The equal slots of `probe` and each of the packed sketches `sketches` (a whole number of
/// [`FINE_BYTES`]), into `counts` (one per sketch). With AVX2 and POPCNT, 32 bytes at a time.
pub fn equal_slots_each(probe: &FineSketch, sketches: &[u8], counts: &mut Vec<u8>) {
    counts.clear();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: AVX2 and POPCNT are available (checked just above).
            unsafe { equal_slots_avx2(probe, sketches, counts) };
            return;
        }
    }
    counts.extend(
        sketches
            .chunks_exact(FINE_BYTES)
            .map(|s| equal_slots(probe, s.try_into().expect("a whole sketch")) as u8),
    );
}

/// Sketches ahead of the one compared whose memory [`equal_slots_each`] asks for.
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 8;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
fn equal_slots_avx2(probe: &FineSketch, sketches: &[u8], counts: &mut Vec<u8>) {
    use std::arch::x86_64::*;
    // SAFETY: the loads read the 64 bytes of the probe and of each whole sketch in `sketches`.
    unsafe {
        let p0 = _mm256_loadu_si256(probe.as_ptr().cast());
        let p1 = _mm256_loadu_si256(probe.as_ptr().add(32).cast());
        reserve(
            counts,
            sketches.len() / FINE_BYTES,
            "the sketch counts of a page",
        )
        .unwrap_or_else(|e| e.fail());
        let base = sketches.as_ptr();
        for (i, s) in sketches.chunks_exact(FINE_BYTES).enumerate() {
            // (the sketches of a page stream from memory: ask for them ahead; a prefetch past
            // the end reads nothing)
            _mm_prefetch::<_MM_HINT_T0>(
                base.wrapping_add((i + PREFETCH_AHEAD) * FINE_BYTES).cast(),
            );
            let x0 = _mm256_xor_si256(_mm256_loadu_si256(s.as_ptr().cast()), p0);
            let x1 = _mm256_xor_si256(_mm256_loadu_si256(s.as_ptr().add(32).cast()), p1);
            // the nibbles that are 0 after XOR: equal slots
            counts.push((zero_nibbles_avx2(x0) + zero_nibbles_avx2(x1)) as u8);
        }
    }
}

/// The fewest equal slots a row of similarity `bar` or more shows, except with probability at
/// most `miss`.
pub fn min_equal_slots(bar: f64, miss: f64) -> u32 {
    let bar = bar.clamp(0.0, 1.0);
    let p = bar + (1.0 - bar) / (1u32 << FINE_BITS) as f64;
    binomial_lower_quantile(FINE_SLOTS, p, miss) as u32
}

/// The rows of a scan of every row's fine sketch that may reach a lookup's bar, as `(equal
/// slots, row)`: every row offered with at least [`Shortlist::floor`] equal slots. The floor
/// starts at the count the lookup's floor needs and rises as rows come, so that about `cap`
/// rows are kept (a `k` lookup verifies the most agreeing rows first, and rarely more than a
/// few hundred); where the bar it reaches after verifying them allows rows below the floor,
/// a second scan takes those ([`Shortlist::below`]).
pub struct Shortlist<T> {
    cap: Option<usize>,
    floor: u32,
    /// Rows with this many equal slots or more are not offered (an earlier sweep took them).
    below: u32,
    rows: Vec<(u8, T)>,
    /// Rows kept per count of equal slots.
    counts: [usize; FINE_SLOTS + 1],
}

impl<T: Copy> Shortlist<T> {
    /// A shortlist of rows with at least `floor` equal slots, keeping about `cap` of the most
    /// agreeing (all of them without a cap).
    pub fn new(floor: u32, cap: Option<usize>) -> Shortlist<T> {
        Shortlist {
            cap,
            floor,
            below: FINE_SLOTS as u32 + 1,
            rows: Vec::new(),
            counts: [0; FINE_SLOTS + 1],
        }
    }

    /// The same, of the rows with fewer than `below` equal slots only (those left after a
    /// sweep that kept the rest).
    pub fn below(self, below: u32) -> Shortlist<T> {
        Shortlist { below, ..self }
    }

    /// The fewest equal slots of a row kept: every row offered with at least as many is kept.
    pub fn floor(&self) -> u32 {
        self.floor
    }

    /// Offers the rows `rows[i]` with `counts[i]` equal slots (a [`super::capacity::CapacityError`] through
    /// its handler where memory runs out: a shortlist without a cap grows with the table).
    pub fn offer(&mut self, counts: &[u8], rows: impl Fn(usize) -> T) {
        reserve(
            &mut self.rows,
            counts.len(),
            "the rows of a sketch store's sweep",
        )
        .unwrap_or_else(|e| e.fail());
        let (floor, below) = (self.floor, self.below);
        for (i, &count) in counts.iter().enumerate() {
            if (floor..below).contains(&u32::from(count)) {
                self.rows.push((count, rows(i)));
                self.counts[usize::from(count)] += 1;
            }
        }
        if let Some(cap) = self.cap {
            if self.rows.len() >= 2 * cap {
                self.raise(cap);
            }
        }
    }

    /// Raises the floor to the highest count that keeps at least `cap` rows.
    fn raise(&mut self, cap: usize) {
        let mut kept = 0;
        let mut floor = self.floor;
        for count in (self.floor as usize..=FINE_SLOTS).rev() {
            kept += self.counts[count];
            if kept >= cap {
                floor = count as u32;
                break;
            }
        }
        if floor > self.floor {
            for count in self.floor as usize..floor as usize {
                self.counts[count] = 0;
            }
            self.rows.retain(|&(count, _)| u32::from(count) >= floor);
            self.floor = floor;
        }
    }

    /// The rows kept, most agreeing first (in the order offered within one count).
    pub fn into_sorted(self) -> Vec<(u8, T)> {
        let mut rows = self.rows;
        // (stable: within one count, the scan's order)
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::params::Shingling;
    use crate::core::signature::Signer;
    use crate::core::testing::Rng;

    #[test]
    fn equal_slots_counts_nibbles() {
        let a = [0u8; FINE_BYTES];
        let mut b = a;
        assert_eq!(equal_slots(&a, &b), 128);
        b[0] = 0x10;
        assert_eq!(equal_slots(&a, &b), 127);
        b[0] = 0x11;
        b[63] = 0x80;
        assert_eq!(equal_slots(&a, &b), 125);
        let all: Vec<u8> = (0..=255u8).collect();
        // every byte value against 0: equal nibbles = zero nibbles
        for &v in &all {
            let mut s = [0u8; FINE_BYTES];
            s[5] = v;
            let zeros = u32::from(v & 0x0f == 0) + u32::from(v & 0xf0 == 0);
            assert_eq!(equal_slots(&a, &s), 126 + zeros, "{v:#x}");
        }
    }

    /// The AVX2 path (where the machine has it) and the portable one agree on random sketches.
    #[test]
    fn each_agrees_with_one_by_one() {
        let mut rng = Rng(3);
        let mut probe = [0u8; FINE_BYTES];
        probe.iter_mut().for_each(|b| *b = rng.below(256) as u8);
        let mut packed = Vec::new();
        for n in 0..300 {
            for (i, &p) in probe.iter().enumerate() {
                // rows agreeing with the probe in more and more bytes
                packed.push(if (i * 7 + n) % 300 < n {
                    p
                } else {
                    rng.below(256) as u8
                });
            }
        }
        let mut counts = Vec::new();
        equal_slots_each(&probe, &packed, &mut counts);
        assert_eq!(counts.len(), 300);
        for (s, &c) in packed.chunks_exact(FINE_BYTES).zip(&counts) {
            assert_eq!(u32::from(c), equal_slots(&probe, s.try_into().unwrap()));
        }
    }

    #[test]
    fn min_equal_slots_is_monotone_and_bounded() {
        assert_eq!(min_equal_slots(1.0, 1e-3), 128);
        let mut last = 0;
        for bar in [0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 0.95] {
            let m = min_equal_slots(bar, FINE_MISS_PROBABILITY);
            assert!(m >= last, "{bar}: {m} < {last}");
            last = m;
        }
        // each slot equal with probability 0.2 + 0.8 / 16 = 0.25: mean 32, sd 4.9
        assert_eq!(min_equal_slots(0.2, 1e-3), 18);
        assert_eq!(min_equal_slots(0.3, 1e-3), 28);
    }

    /// On pairs of word documents, the sketch keeps pairs at the bar with the stated
    /// probability (loosened to 5% for a test of 4,000 pairs) and lets through few unrelated
    /// ones.
    #[test]
    fn sketch_keeps_pairs_at_the_bar() {
        let mut rng = Rng(17);
        let words: Vec<String> = (0..500).map(|_| rng.word(5)).collect();
        let mut signer = Signer::default();
        let shingling = Shingling::new(5, "char").unwrap();
        let mut sketch_of =
            |doc: &str| fine_sketch(&signer.signature(doc, FINE_SLOTS, shingling, &mut || {}));
        let (mut near, mut near_dropped, mut far_kept) = (0, 0, 0);
        let loose = min_equal_slots(0.3, 0.05);
        let strict = min_equal_slots(0.3, FINE_MISS_PROBABILITY);
        let trials = 3000;
        for _ in 0..trials {
            let doc: Vec<&str> = (0..40)
                .map(|_| words[rng.below(500) as usize].as_str())
                .collect();
            let mut edited = doc.clone();
            for _ in 0..14 + rng.below(6) {
                edited[rng.below(40) as usize] = words[rng.below(500) as usize].as_str();
            }
            let other: Vec<&str> = (0..40)
                .map(|_| words[rng.below(500) as usize].as_str())
                .collect();
            let (a, b, c) = (doc.join(" "), edited.join(" "), other.join(" "));
            let (sa, sb, sc) = (sketch_of(&a), sketch_of(&b), sketch_of(&c));
            let j = crate::core::jaccard::jaccard(&a, &b, shingling);
            if (0.3..0.4).contains(&j) {
                near += 1;
                near_dropped += usize::from(equal_slots(&sa, &sb) < loose);
            }
            far_kept += usize::from(equal_slots(&sa, &sc) >= strict);
        }
        assert!(near >= 300, "{near} pairs in [0.3, 0.4)");
        assert!(
            near_dropped * 100 <= near * 8,
            "dropped {near_dropped} of {near}"
        );
        assert!(far_kept * 1000 <= trials, "kept {far_kept} of {trials}");
    }

    /// The shortlist keeps every row at or above its floor, and at least `cap` rows once that
    /// many were offered.
    #[test]
    fn shortlist_keeps_the_most_agreeing() {
        let mut rng = Rng(9);
        let counts: Vec<u8> = (0..10_000).map(|_| rng.below(40) as u8).collect();
        let mut list = Shortlist::new(5, Some(100));
        for chunk in 0..100 {
            let part = &counts[chunk * 100..chunk * 100 + 100];
            list.offer(part, |i| chunk * 100 + i);
        }
        let floor = list.floor();
        assert!(floor > 5);
        let rows = list.into_sorted();
        assert!(rows.len() >= 100);
        let expected = counts.iter().filter(|&&c| u32::from(c) >= floor).count();
        assert_eq!(rows.len(), expected);
        assert!(rows.windows(2).all(|w| w[0].0 >= w[1].0));
        for (count, row) in rows {
            assert_eq!(counts[row], count);
        }
        let mut band: Shortlist<usize> = Shortlist::new(20, None).below(30);
        band.offer(&counts, |i| i);
        assert_eq!(
            band.into_sorted().len(),
            counts.iter().filter(|&&c| (20..30).contains(&c)).count()
        );
        let mut all: Shortlist<usize> = Shortlist::new(30, None);
        all.offer(&counts, |i| i);
        assert_eq!(all.floor(), 30);
        assert_eq!(
            all.into_sorted().len(),
            counts.iter().filter(|&&c| c >= 30).count()
        );
    }
}
