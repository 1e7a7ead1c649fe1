//! The fixed hash functions of signature format version 1. Changing anything here changes
//! stored signatures and band keys: that is a new format version, never an edit.

use super::params::MAX_K;

/// Signature format version these functions define.
pub const FORMAT_VERSION: u32 = 1;

/// MurmurHash3 x86_32 seed for shingles ("mnhs").
pub const SHINGLE_SEED: u32 = 0x6D6E_6873;
/// MurmurHash3 x64_128 seed for band keys ("lshb").
pub const BAND_SEED: u32 = 0x6C73_6862;
/// SplitMix64 starting state for the slot permutations ("pgminhas").
pub const PERMUTATION_SEED: u64 = 0x7067_6D69_6E68_6173;

/// The 32-bit hash of one shingle: MurmurHash3 x86_32 of its UTF-8 bytes.
#[inline(always)]
pub fn shingle_hash(bytes: &[u8]) -> u32 {
    murmur3_x86_32(bytes, SHINGLE_SEED)
}

/// Appends `shingle_hash(&bytes[i..i + n])` for every window start `i` in `starts` (each window
/// must lie inside `bytes`): the hashes of consecutive n-byte windows, which is every shingle of
/// an ASCII text cut into character n-grams. With AVX-512 VBMI, sixteen windows are hashed at
/// once (one lane each); elsewhere one at a time. Every path gives the same integers.
pub fn window_hashes(bytes: &[u8], n: usize, starts: std::ops::Range<usize>, out: &mut Vec<u32>) {
    assert!(n >= 1 && (starts.is_empty() || starts.end - 1 + n <= bytes.len()));
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512vbmi")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { window_hashes_avx512(bytes, n, starts, out) };
        }
    }
    window_hashes_scalar(bytes, n, starts, out)
}

fn window_hashes_scalar(
    bytes: &[u8],
    n: usize,
    starts: std::ops::Range<usize>,
    out: &mut Vec<u32>,
) {
    out.extend(starts.map(|i| shingle_hash(&bytes[i..i + n])));
}

/// MurmurHash3 x86_32 in sixteen lanes. For lane `j`, the 4-byte block `b` of window `i + j`
/// is bytes `i + j + 4b ..` of the text: one (masked, so never out of bounds) load of the bytes
/// from `i + 4b` and one byte permutation put each lane's four bytes in place.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn window_hashes_avx512(
    bytes: &[u8],
    n: usize,
    starts: std::ops::Range<usize>,
    out: &mut Vec<u32>,
) {
    use super::simd::load_64;
    use std::arch::x86_64::*;

    /// Lane `j`, byte `t` takes byte `j + t` of the loaded bytes.
    const SPREAD: [u8; 64] = {
        let mut idx = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            idx[i] = (i / 4 + i % 4) as u8;
            i += 1;
        }
        idx
    };
    // The bytes of window i + j are bytes[i + j .. i + j + n]: the 4-byte block b of the
    // sixteen windows from i is bytes i + 4b .. i + 4b + 19.
    let load = |at: usize| load_64(bytes, at).0;
    // SAFETY: `SPREAD` is 64 readable bytes.
    let spread = unsafe { _mm512_loadu_si512(SPREAD.as_ptr().cast()) };
    let (c1, c2) = (
        _mm512_set1_epi32(0xCC9E_2D51_u32 as i32),
        _mm512_set1_epi32(0x1B87_3593),
    );
    let mix =
        |k: __m512i| _mm512_mullo_epi32(_mm512_rol_epi32::<15>(_mm512_mullo_epi32(k, c1)), c2);
    let blocks = n / 4;
    let tail = n % 4;
    // byte t of each lane's dword is kept when t < tail
    let tail_mask: __mmask64 = 0x1111_1111_1111_1111 * ((1 << tail) - 1);
    // Block b of the sixteen windows: from the bytes loaded at i while they reach (short
    // shingles need one load per sixteen windows), else from its own load.
    let block = |i: usize, first: __m512i, b: usize, keep: __mmask64| {
        if 4 * b + 19 <= 64 {
            let spread_b = _mm512_add_epi8(spread, _mm512_set1_epi8(4 * b as i8));
            _mm512_maskz_permutexvar_epi8(keep, spread_b, first)
        } else {
            _mm512_maskz_permutexvar_epi8(keep, spread, load(i + 4 * b))
        }
    };
    out.reserve(starts.len() + 16);
    let mut i = starts.start;
    while i < starts.end {
        let first = load(i);
        let mut h = _mm512_set1_epi32(SHINGLE_SEED as i32);
        for b in 0..blocks {
            h = _mm512_xor_si512(h, mix(block(i, first, b, !0)));
            h = _mm512_rol_epi32::<13>(h);
            h = _mm512_add_epi32(
                _mm512_add_epi32(h, _mm512_slli_epi32::<2>(h)),
                _mm512_set1_epi32(0xE654_6B64_u32 as i32),
            );
        }
        if tail > 0 {
            h = _mm512_xor_si512(h, mix(block(i, first, blocks, tail_mask)));
        }
        h = _mm512_xor_si512(h, _mm512_set1_epi32(n as i32));
        h = _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h));
        h = _mm512_mullo_epi32(h, _mm512_set1_epi32(0x85EB_CA6B_u32 as i32));
        h = _mm512_xor_si512(h, _mm512_srli_epi32::<13>(h));
        h = _mm512_mullo_epi32(h, _mm512_set1_epi32(0xC2B2_AE35_u32 as i32));
        h = _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h));
        let count = (starts.end - i).min(16);
        // SAFETY: `reserve` left room for every window's hash plus 16, so the 16 lanes fit
        // after the current length; the first `count` of them are this group's hashes.
        unsafe {
            _mm512_storeu_si512(out.as_mut_ptr().add(out.len()).cast(), h);
            out.set_len(out.len() + count);
        }
        i += 16;
    }
}

/// MurmurHash3 x86_32, written here rather than called from `mur3` because it runs once per
/// shingle and must inline into the shingle loop (a call costs more than a 5-byte hash). The
/// format 1 reference vectors (`tests/format`) check it against PyPI's `mmh3` on every length
/// 0..=64, for two seeds.
#[inline(always)]
pub(crate) fn murmur3_x86_32(bytes: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xCC9E_2D51;
    const C2: u32 = 0x1B87_3593;
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut blocks = bytes.chunks_exact(4);
    for block in &mut blocks {
        let k = u32::from_le_bytes(block.try_into().expect("4 bytes"));
        h = (h ^ mix(k))
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xE654_6B64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .rev()
            .fold(0u32, |k, &b| (k << 8) | u32::from(b));
        h ^= mix(k);
    }
    h ^= bytes.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// The first half (h1) of MurmurHash3 x64_128 of `bytes` with the band seed.
#[inline]
pub fn band_hash(bytes: &[u8]) -> u64 {
    mur3::murmurhash3_x64_128(bytes, BAND_SEED).0
}

/// One step of SplitMix64 (Steele, Lea and Flood, 2014; the constants of Vigna's reference
/// `splitmix64.c`): returns the next state and the output drawn at it.
pub const fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (state, z ^ (z >> 31))
}

/// The slot permutations: slot `i` maps a shingle hash `x` to `(x ^ XOR[i]) * MUL[i] mod 2^32`,
/// a bijection of the 32-bit values (`MUL[i]` is odd), so each slot orders the shingles by an
/// independent-looking permutation at the cost of one 32-bit multiply. Drawn from one SplitMix64
/// stream: `XOR[i]` is the low 32 bits of draw `2i`, `MUL[i]` the low 32 bits of draw `2i + 1`
/// with the lowest bit set.
pub struct Permutations {
    pub xor: [u32; MAX_K],
    pub mul: [u32; MAX_K],
}

const fn permutations() -> Permutations {
    let mut p = Permutations {
        xor: [0; MAX_K],
        mul: [0; MAX_K],
    };
    let mut state = PERMUTATION_SEED;
    let mut i = 0;
    while i < MAX_K {
        let (s, x) = splitmix64(state);
        let (s, m) = splitmix64(s);
        state = s;
        p.xor[i] = x as u32;
        p.mul[i] = m as u32 | 1;
        i += 1;
    }
    p
}

/// Computed at compile time: no start-up cost and no global state.
pub static PERMUTATIONS: Permutations = permutations();

/// Slot value of shingle hash `x` under the permutation `(xor, mul)`.
#[inline(always)]
pub fn permute(xor: u32, mul: u32, x: u32) -> u32 {
    (x ^ xor).wrapping_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// `mur3` is the implementation we call; the `murmur3` crate is the long-standing reference.
    /// They must agree on every length (tail handling differs per length mod 16).
    #[test]
    fn mur3_matches_reference_murmur3() {
        let data: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in 0..data.len() {
            let bytes = &data[..len];
            let reference =
                murmur3::murmur3_x64_128(&mut Cursor::new(bytes), SHINGLE_SEED).unwrap();
            let (h1, h2) = mur3::murmurhash3_x64_128(bytes, SHINGLE_SEED);
            assert_eq!(
                reference,
                (u128::from(h2) << 64) | u128::from(h1),
                "length {len}"
            );
        }
    }

    #[test]
    fn window_hashes_match_shingle_hash() {
        let text: Vec<u8> = (0..300u32)
            .map(|i| b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8)
            .collect();
        for n in 1..=70 {
            for (from, to) in [
                (0, text.len() - n + 1),
                (3, 20),
                (7, 7),
                (250, text.len() - n + 1),
            ] {
                let want: Vec<u32> = (from..to).map(|i| shingle_hash(&text[i..i + n])).collect();
                let mut got = vec![1];
                window_hashes(&text[..], n, from..to, &mut got);
                assert_eq!(got[1..], want[..], "n = {n}, {from}..{to}");
                let mut scalar = Vec::new();
                window_hashes_scalar(&text, n, from..to, &mut scalar);
                assert_eq!(scalar, want);
            }
        }
    }

    /// Standard SplitMix64 (`splitmix64.c`'s first output from state 0) and the start of the
    /// permutation table; `format_vectors` checks whole signatures.
    #[test]
    fn known_values_are_pinned() {
        assert!(PERMUTATIONS.mul.iter().all(|m| m & 1 == 1));
        assert_eq!(splitmix64(0).1, 0xE220_A839_7B1D_CDAF);
        let pinned = [
            (shingle_hash(b"hello"), 0x1403_3EC1),
            (PERMUTATIONS.xor[0], 0x1A85_777E),
            (PERMUTATIONS.mul[0], 0xAFCB_3F65),
            (PERMUTATIONS.mul[MAX_K - 1], 0xF1E3_BEC1),
        ];
        for (got, want) in pinned {
            assert_eq!(got, want, "{got:#010x}");
        }
    }
}
