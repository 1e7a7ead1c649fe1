//! Signature format 1 against the reference vectors in `tests/format/vectors.tsv`, which
//! `tests/format/reference.py` computes from the contract (`docs/contract.md`) with PyPI's
//! `mmh3`; CI runs that script with `--check`, so the contract, the vectors and this code agree.

use super::bands::band_keys;
use super::hash::murmur3_x86_32;
use super::params::{Banding, Shingling};
use super::signature::signature;
use super::sketch::band_sketch;

const VECTORS: &str = include_str!("../../tests/format/vectors.tsv");

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn list<T: std::str::FromStr>(s: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    s.split(',').map(|v| v.parse().expect("integer")).collect()
}

#[test]
fn code_matches_reference_vectors() {
    let mut counts = [0; 4];
    for line in VECTORS.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "murmur3_x86_32" => {
                let want: u32 = f[3].parse().unwrap();
                assert_eq!(
                    murmur3_x86_32(&hex(f[2]), f[1].parse().unwrap()),
                    want,
                    "{line}"
                );
                counts[0] += 1;
            }
            "minhash" => {
                let text = String::from_utf8(hex(f[4])).unwrap();
                let shingling = Shingling::new(f[2].parse().unwrap(), f[3]).unwrap();
                let want: Vec<u32> = list(f[5]);
                assert_eq!(
                    signature(&text, f[1].parse().unwrap(), shingling),
                    want,
                    "{text:?} {line:.60}"
                );
                counts[1] += 1;
            }
            "lsh_bands" => {
                let sig: Vec<u32> = list(f[3]);
                let banding = Banding::new(
                    sig.len(),
                    f[1].parse().unwrap(),
                    Some(f[2].parse().unwrap()),
                )
                .unwrap();
                assert_eq!(band_keys(&sig, banding), list::<u64>(f[4]), "{line:.60}");
                counts[2] += 1;
            }
            "band_sketch" => {
                let sig: Vec<u32> = list(f[1]);
                let want: [u64; 2] = [f[2].parse().unwrap(), f[3].parse().unwrap()];
                assert_eq!(band_sketch(&sig), want, "{line:.60}");
                counts[3] += 1;
            }
            other => panic!("unknown vector kind {other}"),
        }
    }
    // every murmur3 length 0..=64 for two seeds; 15 texts in 4 shapes plus k = 1024; 45 band
    // sets; 30 band sketches
    assert_eq!(counts, [130, 61, 45, 30]);
}
