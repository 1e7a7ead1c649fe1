//! LSH band keys.
//!
//! Key of band `i` = `(i << 54) | (band_hash(le32(i) ++ le32(slot values of band i)) >> 10)`.
//! The band index in the top 10 bits means keys of different bands can never be equal; the
//! remaining 54 bits hash the band's contents, so equal bands always give equal keys.

use super::hash::band_hash;
use super::params::Banding;

const INDEX_SHIFT: u32 = 54;

/// The `banding.bands` keys of a signature, band 0 first; uses the first `bands * rows` slots.
pub fn band_keys(signature: &[u32], banding: Banding) -> Vec<u64> {
    let Banding { bands, rows } = banding;
    debug_assert!(bands * rows <= signature.len());
    let mut bytes = Vec::with_capacity(4 * (rows + 1));
    signature
        .chunks_exact(rows)
        .take(bands)
        .enumerate()
        .map(|(i, band)| {
            bytes.clear();
            bytes.extend_from_slice(&(i as u32).to_le_bytes());
            for v in band {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            ((i as u64) << INDEX_SHIFT) | (band_hash(&bytes) >> (64 - INDEX_SHIFT))
        })
        .collect()
}

/// The band a key belongs to.
pub fn band_of_key(key: u64) -> usize {
    (key >> INDEX_SHIFT) as usize
}

/// The keys of band `band`: one range, also as int8 values (a band's top bits are fixed, the
/// sign bit among them), as a B-tree on the keys orders them.
pub fn keys_of_band(band: usize) -> std::ops::RangeInclusive<u64> {
    let first = (band as u64) << INDEX_SHIFT;
    first..=first | ((1u64 << INDEX_SHIFT) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bands_give_equal_keys_and_bands_never_collide() {
        let sig: Vec<u32> = vec![7; 64];
        let keys = band_keys(&sig, Banding::new(64, 16, None).unwrap());
        assert_eq!(keys.len(), 16);
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(band_of_key(key), i);
        }
        let mut distinct = keys.clone();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            16,
            "identical bands at different positions differ"
        );

        let mut other = sig.clone();
        other[5] = 8; // band 1 of 4-row bands
        let other_keys = band_keys(&other, Banding::new(64, 16, None).unwrap());
        let same: Vec<bool> = keys.iter().zip(&other_keys).map(|(a, b)| a == b).collect();
        assert!(!same[1]);
        assert_eq!(same.iter().filter(|s| **s).count(), 15);
    }

    /// Every key of a band lies in its range, as u64 and as int8 alike, and no other band's.
    #[test]
    fn keys_of_band_hold_the_band_alone() {
        let sig: Vec<u32> = (0..1024u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let keys = band_keys(&sig, Banding::new(1024, 1024, Some(1)).unwrap());
        for band in [0, 1, 511, 512, 1023] {
            let range = keys_of_band(band);
            let (low, high) = (*range.start() as i64, *range.end() as i64);
            for (b, &key) in keys.iter().enumerate() {
                assert_eq!(range.contains(&key), b == band);
                assert_eq!((low..=high).contains(&(key as i64)), b == band);
            }
        }
    }

    #[test]
    fn explicit_rows_use_a_prefix() {
        let sig: Vec<u32> = (0..100).collect();
        let keys = band_keys(&sig, Banding::new(100, 3, Some(30)).unwrap());
        assert_eq!(
            keys,
            band_keys(&sig[..90], Banding::new(90, 3, None).unwrap())
        );
        assert_eq!(band_of_key(keys[2]), 2);
    }

    #[test]
    fn highest_band_index_fits() {
        let sig = vec![1u32; 1024];
        let keys = band_keys(&sig, Banding::new(1024, 1024, None).unwrap());
        assert_eq!(band_of_key(keys[1023]), 1023);
    }
}
