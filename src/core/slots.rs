//! Counting the equal slots of two sketches that keep the low bits of each signature slot side
//! by side: a byte per slot ([`SketchForm::Bytes`]) or four bits ([`SketchForm::Nibbles`]).
//! The whole-table search (`dedup`) compares every pair of a crowded bucket this way, and the
//! fine sketch of the sketch store (`fine`) every row a lookup sweeps.
//!
//! Three kernels give the same counts: 8 bytes at a time in a general register (SWAR, any
//! CPU), 32 with AVX2, 64 with AVX-512 BW ([`Kernel::detect`] picks the widest the CPU has).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// How a sketch holds each slot of its signature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SketchForm {
    /// The slot's low byte: slot `i` is byte `i`.
    #[default]
    Bytes,
    /// The slot's low 4 bits: slot `2i` in the low half of byte `i`, `2i + 1` in its high half.
    Nibbles,
}

impl SketchForm {
    /// Bytes of a sketch of `k` slots.
    pub fn len(self, k: usize) -> usize {
        match self {
            SketchForm::Bytes => k,
            SketchForm::Nibbles => k.div_ceil(2),
        }
    }

    /// Slots of this form in 8 bytes.
    fn per_word(self) -> u32 {
        match self {
            SketchForm::Bytes => 8,
            SketchForm::Nibbles => 16,
        }
    }

    /// The slots that are 0 in `x`, 8 bytes of the XOR of two sketches: their equal slots.
    #[inline]
    fn zero_slots(self, x: u64) -> u32 {
        match self {
            SketchForm::Bytes => zero_bytes(x),
            SketchForm::Nibbles => zero_nibbles(x),
        }
    }
}

/// The bytes of `x` that are 0.
#[inline]
pub fn zero_bytes(x: u64) -> u32 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    // bit 7 of each byte of `nonzero` is set where any bit of the byte is: the low 7 bits
    // carry into it (at most 0x7F + 0x7F, no carry out of the byte), bit 7 is ORed in
    let nonzero = ((x & LOW7).wrapping_add(LOW7)) | x;
    (!nonzero & !LOW7).count_ones()
}

/// The 4-bit halves of the bytes of `x` that are 0.
#[inline]
pub fn zero_nibbles(x: u64) -> u32 {
    // bit 0 of each nibble of `y` is set where any bit of the nibble is (only bit 0 is read:
    // what shifts in from the next nibble lands in bits 1-3)
    let y = x | (x >> 1) | (x >> 2) | (x >> 3);
    16 - (y & 0x1111_1111_1111_1111).count_ones()
}

/// The 32 bytes of `x` (the XOR of two sketches' bytes) that are 0.
///
/// # Safety
/// The CPU must have AVX2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub fn zero_bytes_avx2(x: __m256i) -> u32 {
    (_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, _mm256_setzero_si256())) as u32).count_ones()
}

/// The 64 4-bit halves of the 32 bytes of `x` that are 0.
///
/// # Safety
/// The CPU must have AVX2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub fn zero_nibbles_avx2(x: __m256i) -> u32 {
    let zero = _mm256_setzero_si256();
    let low = _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
    let high = _mm256_and_si256(x, _mm256_set1_epi8(0xF0u8 as i8));
    let lows = _mm256_movemask_epi8(_mm256_cmpeq_epi8(low, zero)) as u32;
    let highs = _mm256_movemask_epi8(_mm256_cmpeq_epi8(high, zero)) as u32;
    ((u64::from(lows) << 32) | u64::from(highs)).count_ones()
}

/// The instructions a comparison runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernel {
    /// 8 bytes at a time in a general register, on any CPU.
    #[default]
    Swar,
    /// 32 bytes at a time; only where the CPU has AVX2 and POPCNT.
    Avx2,
    /// 64 bytes at a time; only where the CPU has AVX-512 F and BW.
    Avx512,
}

impl Kernel {
    /// The widest kernel this CPU runs.
    pub fn detect() -> Kernel {
        Kernel::available().last().copied().unwrap_or_default()
    }

    /// Every kernel this CPU runs, narrowest first.
    pub fn available() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Swar];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt") {
                kernels.push(Kernel::Avx2);
            }
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                kernels.push(Kernel::Avx512);
            }
        }
        kernels
    }

    /// The equal slots of sketches `a` and `b` in `form` (over the shorter's length). A
    /// kernel must come from [`Kernel::detect`] or [`Kernel::available`].
    #[inline]
    pub fn equal(self, form: SketchForm, a: &[u8], b: &[u8]) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `detect` and `available` give this kernel only where the CPU has AVX2
            // and POPCNT.
            Kernel::Avx2 => unsafe { equal_avx2(form, a, b) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above, AVX-512 F and BW.
            Kernel::Avx512 => unsafe { equal_avx512(form, a, b) },
            _ => equal_swar(form, a, b),
        }
    }

    /// Appends to `out` the positions `first + n` of the sketches `rows` (of `probe.len()`
    /// bytes each, side by side, in `form`) that agree with `probe` on at least `min_matches`
    /// slots.
    pub fn agreeing(
        self,
        form: SketchForm,
        probe: &[u8],
        rows: &[u8],
        min_matches: usize,
        first: usize,
        out: &mut Vec<u32>,
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `equal`.
            Kernel::Avx2 => unsafe { agreeing_avx2(form, probe, rows, min_matches, first, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `equal`.
            Kernel::Avx512 => unsafe {
                agreeing_avx512(form, probe, rows, min_matches, first, out)
            },
            _ => agreeing_with(
                |a, b| equal_swar(form, a, b),
                probe,
                rows,
                min_matches,
                first,
                out,
            ),
        }
    }
}

/// [`Kernel::agreeing`] with the count `equal`, inlined into each kernel's loop.
#[inline(always)]
fn agreeing_with(
    equal: impl Fn(&[u8], &[u8]) -> usize,
    probe: &[u8],
    rows: &[u8],
    min_matches: usize,
    first: usize,
    out: &mut Vec<u32>,
) {
    if probe.is_empty() {
        return;
    }
    for (n, row) in rows.chunks_exact(probe.len()).enumerate() {
        if equal(probe, row) >= min_matches {
            out.push((first + n) as u32);
        }
    }
}

/// [`Kernel::equal`] 8 bytes at a time; the last bytes are padded with zeros in both, which
/// are equal and not counted.
#[inline]
fn equal_swar(form: SketchForm, a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (words_a, words_b) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let (rest_a, rest_b) = (words_a.remainder(), words_b.remainder());
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
    let mut count: u32 = words_a
        .zip(words_b)
        .map(|(p, q)| form.zero_slots(word(p) ^ word(q)))
        .sum();
    if !rest_a.is_empty() {
        let (mut p, mut q) = ([0u8; 8], [0u8; 8]);
        p[..rest_a.len()].copy_from_slice(rest_a);
        q[..rest_b.len()].copy_from_slice(rest_b);
        let padding = form.per_word() / 8 * (8 - rest_a.len() as u32);
        count += form.zero_slots(word(&p) ^ word(&q)) - padding;
    }
    count as usize
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn equal_avx2(form: SketchForm, a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut count = 0;
    let mut at = 0;
    while at + 32 <= n {
        // SAFETY: the 32 bytes from `at` are inside both `a` and `b` (`at + 32 <= n`).
        let x = unsafe {
            _mm256_xor_si256(
                _mm256_loadu_si256(a.as_ptr().add(at).cast()),
                _mm256_loadu_si256(b.as_ptr().add(at).cast()),
            )
        };
        count += match form {
            SketchForm::Bytes => zero_bytes_avx2(x),
            SketchForm::Nibbles => zero_nibbles_avx2(x),
        } as usize;
        at += 32;
    }
    count + equal_swar(form, &a[at..n], &b[at..n])
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
fn agreeing_avx2(
    form: SketchForm,
    probe: &[u8],
    rows: &[u8],
    min_matches: usize,
    first: usize,
    out: &mut Vec<u32>,
) {
    let len = probe.len();
    if !len.is_multiple_of(32) || len > 32 * PROBE_VECTORS {
        agreeing_with(
            // (a closure inherits the function's target features)
            |a, b| equal_avx2(form, a, b),
            probe,
            rows,
            min_matches,
            first,
            out,
        );
        return;
    }
    // a sketch of whole vectors: the probe's stay in registers, each row's are loaded once
    let vectors = len / 32;
    let mut held = [_mm256_setzero_si256(); PROBE_VECTORS];
    for (v, vector) in held.iter_mut().take(vectors).enumerate() {
        // SAFETY: the 32 bytes from `32 * v` are inside `probe` (`v < len / 32`).
        *vector = unsafe { _mm256_loadu_si256(probe.as_ptr().add(32 * v).cast()) };
    }
    let held = &held[..vectors];
    for (n, row) in rows.chunks_exact(len).enumerate() {
        let mut count = 0;
        for (v, &p) in held.iter().enumerate() {
            // SAFETY: as above, inside `row`, which has `len` bytes.
            let x = _mm256_xor_si256(p, unsafe {
                _mm256_loadu_si256(row.as_ptr().add(32 * v).cast())
            });
            count += match form {
                SketchForm::Bytes => zero_bytes_avx2(x),
                SketchForm::Nibbles => zero_nibbles_avx2(x),
            };
        }
        if count as usize >= min_matches {
            out.push((first + n) as u32);
        }
    }
}

/// The most 32-byte vectors of a probe [`agreeing_avx2`] holds in registers: a sketch of 128
/// one-byte slots.
#[cfg(target_arch = "x86_64")]
const PROBE_VECTORS: usize = 4;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn equal_avx512(form: SketchForm, a: &[u8], b: &[u8]) -> usize {
    use super::simd::load_64;
    let (low, high, zero) = (
        _mm512_set1_epi8(0x0F),
        _mm512_set1_epi8(0xF0u8 as i8),
        _mm512_setzero_si512(),
    );
    let mut count = 0;
    for at in (0..a.len().min(b.len())).step_by(64) {
        let ((x, valid), (y, _)) = (load_64(a, at), load_64(b, at));
        count += match form {
            SketchForm::Bytes => _mm512_mask_cmpeq_epi8_mask(valid, x, y).count_ones(),
            SketchForm::Nibbles => {
                let differ = _mm512_xor_si512(x, y);
                let lows = _mm512_mask_cmpeq_epi8_mask(valid, _mm512_and_si512(differ, low), zero);
                let highs =
                    _mm512_mask_cmpeq_epi8_mask(valid, _mm512_and_si512(differ, high), zero);
                lows.count_ones() + highs.count_ones()
            }
        } as usize;
    }
    count
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn agreeing_avx512(
    form: SketchForm,
    probe: &[u8],
    rows: &[u8],
    min_matches: usize,
    first: usize,
    out: &mut Vec<u32>,
) {
    agreeing_with(
        // (a closure inherits the function's target features)
        |a, b| equal_avx512(form, a, b),
        probe,
        rows,
        min_matches,
        first,
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testing::Rng;

    /// Equal slots counted one byte at a time.
    fn reference(form: SketchForm, a: &[u8], b: &[u8]) -> usize {
        a.iter()
            .zip(b)
            .map(|(p, q)| match form {
                SketchForm::Bytes => usize::from(p == q),
                SketchForm::Nibbles => {
                    usize::from(p & 15 == q & 15) + usize::from(p >> 4 == q >> 4)
                }
            })
            .sum()
    }

    #[test]
    fn slots_are_counted_alike_on_every_kernel() {
        let mut rng = Rng(17);
        for len in (0..200).chain([256, 257, 511]) {
            let a: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            // about half the nibbles equal, and bytes equal but for one bit at either end
            let b: Vec<u8> = a
                .iter()
                .map(|&x| match rng.below(6) {
                    0 | 1 => x,
                    2 => x ^ 0x10,
                    3 => x ^ 0x01,
                    4 => x ^ 0x80,
                    _ => !x,
                })
                .collect();
            for form in [SketchForm::Bytes, SketchForm::Nibbles] {
                let expected = reference(form, &a, &b);
                for kernel in Kernel::available() {
                    assert_eq!(
                        kernel.equal(form, &a, &b),
                        expected,
                        "{kernel:?} {form:?} {len}"
                    );
                    assert_eq!(
                        kernel.equal(form, &a, &a),
                        len * form.per_word() as usize / 8,
                        "{kernel:?} {form:?} {len}"
                    );
                }
            }
        }
        assert!(Kernel::available().contains(&Kernel::detect()));
    }

    #[test]
    fn agreeing_rows_are_found_alike_on_every_kernel() {
        let mut rng = Rng(5);
        for (form, len) in [
            (SketchForm::Bytes, 128),
            (SketchForm::Nibbles, 64),
            (SketchForm::Bytes, 37),
        ] {
            let probe: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            // 300 rows, each a copy of the probe with a random share of its bytes changed
            let rows: Vec<u8> = (0..300)
                .flat_map(|_| {
                    let keep = rng.below(100);
                    probe
                        .iter()
                        .map(|&x| {
                            if rng.below(100) < keep {
                                x
                            } else {
                                rng.below(256) as u8
                            }
                        })
                        .collect::<Vec<u8>>()
                })
                .collect();
            for min in [0, len / 3, len / 2, len] {
                let expected: Vec<u32> = rows
                    .chunks_exact(len)
                    .enumerate()
                    .filter(|(_, row)| reference(form, &probe, row) >= min)
                    .map(|(n, _)| (n + 7) as u32)
                    .collect();
                for kernel in Kernel::available() {
                    let mut out = vec![];
                    kernel.agreeing(form, &probe, &rows, min, 7, &mut out);
                    assert_eq!(out, expected, "{kernel:?} {form:?} {min}");
                }
            }
        }
    }

    #[test]
    fn zero_slots_of_words() {
        assert_eq!(zero_bytes(0), 8);
        assert_eq!(zero_bytes(u64::MAX), 0);
        assert_eq!(zero_bytes(0x0100_0000_0000_0080), 6);
        assert_eq!(zero_nibbles(0), 16);
        assert_eq!(zero_nibbles(0x1000_0000_0000_0008), 14);
        assert_eq!(zero_nibbles(0xF0F0_F0F0_F0F0_F0F0), 8);
    }
}
