//! Statistical accuracy of signatures and band keys against exact Jaccard, on generated set
//! pairs with known similarity. Fixed seeds make every run identical; the tolerances are stated
//! next to each assertion and are several standard errors wide, so they hold for any sound hash
//! family and fail for a biased or correlated one.

use super::bands::band_keys;
use super::jaccard::jaccard;
use super::params::{candidate_probability, Banding, Shingling};
use super::signature::{estimate_similarity, Signer};
use super::testing::Rng;

/// Two documents of unique word tokens with `common` shared words and `union` words in all, so
/// their word-unigram Jaccard is exactly `common / union`.
fn set_pair(rng: &mut Rng, common: usize, union: usize) -> (String, String) {
    let token = |rng: &mut Rng| format!("w{:x}", rng.next_u64());
    let shared: Vec<String> = (0..common).map(|_| token(rng)).collect();
    let (mut a, mut b) = (shared.clone(), shared);
    for i in 0..union - common {
        if i % 2 == 0 {
            a.push(token(rng))
        } else {
            b.push(token(rng))
        }
    }
    (a.join(" "), b.join(" "))
}

fn unigrams() -> Shingling {
    Shingling::new(1, "word").unwrap()
}

#[test]
fn estimate_is_unbiased_with_binomial_variance() {
    const PAIRS: usize = 4000;
    const K: usize = 128;
    let mut rng = Rng(20261121);
    let mut signer = Signer::default();
    let (mut sum_err, mut sum_sq_err, mut sum_var) = (0.0, 0.0, 0.0);
    for _ in 0..PAIRS {
        let union = 50 + rng.below(350) as usize;
        let common = rng.below(union as u64 + 1) as usize;
        let (a, b) = set_pair(&mut rng, common, union);
        let j = jaccard(&a, &b, unigrams());
        assert_eq!(
            j,
            common as f64 / union as f64,
            "generated pairs have known Jaccard"
        );
        let sa = signer.signature(&a, K, unigrams(), &mut || {});
        let sb = signer.signature(&b, K, unigrams(), &mut || {});
        let err = estimate_similarity(&sa, &sb) - j;
        sum_err += err;
        sum_sq_err += err * err;
        sum_var += j * (1.0 - j) / K as f64;
    }
    let mean_err = sum_err / PAIRS as f64;
    let observed_var = sum_sq_err / PAIRS as f64 - mean_err * mean_err;
    let expected_var = sum_var / PAIRS as f64;
    // Standard error of the mean error is sqrt(expected_var / PAIRS) ~ 0.0006 here: 0.005 is
    // about eight of them.
    assert!(mean_err.abs() < 0.005, "mean error {mean_err}");
    // The variance of a mean of 4000 squared errors is about 2.5% of its value; 20% is eight
    // standard errors, while correlated slots or a skewed hash would shift it well past that.
    let ratio = observed_var / expected_var;
    assert!(
        (0.8..=1.2).contains(&ratio),
        "variance ratio {ratio} ({observed_var} vs {expected_var})"
    );
}

#[test]
fn band_collisions_follow_the_s_curve() {
    const PAIRS: usize = 2000;
    // (similarity numerator out of 200 words, bands, rows): candidate probabilities 0.13..0.64
    let cases = [
        (100, 16, 4),
        (120, 8, 8),
        (140, 10, 10),
        (80, 32, 4),
        (180, 4, 16),
    ];
    let mut rng = Rng(42);
    let mut signer = Signer::default();
    for (common, b, r) in cases {
        let s = common as f64 / 200.0;
        let banding = Banding::new(b * r, b as i32, Some(r as i32)).unwrap();
        let mut hits = 0;
        for _ in 0..PAIRS {
            let (x, y) = set_pair(&mut rng, common, 200);
            let kx = band_keys(
                &signer.signature(&x, b * r, unigrams(), &mut || {}),
                banding,
            );
            let ky = band_keys(
                &signer.signature(&y, b * r, unigrams(), &mut || {}),
                banding,
            );
            if kx.iter().zip(&ky).any(|(p, q)| p == q) {
                hits += 1;
            }
        }
        let p = candidate_probability(s, b, r);
        let observed = hits as f64 / PAIRS as f64;
        let se = (p * (1.0 - p) / PAIRS as f64).sqrt();
        assert!(
            (observed - p).abs() <= 4.0 * se,
            "s={s} b={b} r={r}: observed {observed}, expected {p} +- {}",
            4.0 * se
        );
    }
}
