//! The fixed hash functions of signature format version 1. Changing anything here changes
//! stored signatures and band keys: that is a new format version, never an edit.

use super::params::MAX_K;

/// Signature format version these functions define.
pub const FORMAT_VERSION: u32 = 1;

/// MurmurHash3 x64_128 seed for shingles ("mnhs").
pub const SHINGLE_SEED: u32 = 0x6D6E_6873;
/// MurmurHash3 x64_128 seed for band keys ("lshb").
pub const BAND_SEED: u32 = 0x6C73_6862;
/// SplitMix64 starting state for the slot permutations ("pgminhas").
pub const PERMUTATION_SEED: u64 = 0x7067_6D69_6E68_6173;

/// The 64-bit hash of one shingle: the first half (h1) of MurmurHash3 x64_128 of its UTF-8
/// bytes.
#[inline]
pub fn shingle_hash(bytes: &[u8]) -> u64 {
    mur3::murmurhash3_x64_128(bytes, SHINGLE_SEED).0
}

/// The first half (h1) of MurmurHash3 x64_128 of `bytes` with the band seed.
#[inline]
pub fn band_hash(bytes: &[u8]) -> u64 {
    mur3::murmurhash3_x64_128(bytes, BAND_SEED).0
}

const fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE5_E9B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (state, z ^ (z >> 31))
}

/// Slot permutation multipliers and offsets: slot `i` maps a shingle hash `x` to
/// `(A[i] * x + B[i]) mod 2^64 >> 32`. Drawn from one SplitMix64 stream: `A[i]` is draw `2i`
/// with the low bit set, `B[i]` is draw `2i + 1`.
pub struct Permutations {
    pub a: [u64; MAX_K],
    pub b: [u64; MAX_K],
}

const fn permutations() -> Permutations {
    let mut p = Permutations {
        a: [0; MAX_K],
        b: [0; MAX_K],
    };
    let mut state = PERMUTATION_SEED;
    let mut i = 0;
    while i < MAX_K {
        let (s, a) = splitmix64(state);
        let (s, b) = splitmix64(s);
        state = s;
        p.a[i] = a | 1;
        p.b[i] = b;
        i += 1;
    }
    p
}

/// Computed at compile time: no start-up cost and no global state.
pub static PERMUTATIONS: Permutations = permutations();

/// Slot value of shingle hash `x` under permutation `(a, b)`.
#[inline(always)]
pub fn permute(a: u64, b: u64, x: u64) -> u64 {
    a.wrapping_mul(x).wrapping_add(b) >> 32
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

    /// Values an independent implementation of the README's description (Python, PyPI `mmh3`
    /// and a hand-written SplitMix64) produced; they must never change.
    #[test]
    fn known_values_are_pinned() {
        assert_eq!(PERMUTATIONS.a[0] & 1, 1);
        assert_eq!(splitmix64(0).1, 0xD5A9_A293_8991_EEBA);
        let pinned = [
            (shingle_hash(b"hello"), 0xE468_172E_D57F_6D76),
            (PERMUTATIONS.a[0], 0x1A7C_1AD8_2583_EB19),
            (PERMUTATIONS.b[0], 0x47E4_7CDC_AC55_606F),
            (PERMUTATIONS.a[MAX_K - 1], 0x47C9_4821_1B67_DE37),
        ];
        for (got, want) in pinned {
            assert_eq!(got, want, "{got:#018x}");
        }
    }
}
