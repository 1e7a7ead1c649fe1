//! Argument ranges, their validation, and the LSH candidate-probability maths.

use std::fmt;

/// Largest signature length `minhash` computes.
pub const MAX_K: usize = 1024;
/// Largest character n-gram.
pub const MAX_CHAR_NGRAM: usize = 64;
/// Largest word n-gram.
pub const MAX_WORD_NGRAM: usize = 16;
/// Largest number of bands: the band index is stored in the top 10 bits of a band key.
pub const MAX_BANDS: usize = 1024;

/// A rejected argument: maps to SQLSTATE 22023 (invalid_parameter_value) in the SQL layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub message: String,
    pub hint: Option<String>,
}

impl ParamError {
    fn new(message: impl Into<String>) -> Self {
        ParamError {
            message: message.into(),
            hint: None,
        }
    }

    fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParamError {}

/// What one shingle is a window of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Char,
    Word,
}

impl Unit {
    pub fn parse(unit: &str) -> Result<Unit, ParamError> {
        match unit {
            "char" => Ok(Unit::Char),
            "word" => Ok(Unit::Word),
            other => Err(ParamError::new(format!(
                "unit must be 'char' or 'word', not '{}'",
                other.escape_default()
            ))),
        }
    }

    fn max_ngram(self) -> usize {
        match self {
            Unit::Char => MAX_CHAR_NGRAM,
            Unit::Word => MAX_WORD_NGRAM,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Char => "char",
            Unit::Word => "word",
        }
    }
}

/// How the near-duplicates of a table are grouped into clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterMode {
    /// The connected components of the near-duplicate pairs, each named by its smallest id.
    /// Pairs chain: a~b and b~c put a and c together however unlike they are.
    Connected,
    /// Keep-one groups: in priority order, a row not yet in a group is kept and every row not
    /// yet in a group at the threshold or above to it joins its group, named by the kept row.
    Representative,
}

impl ClusterMode {
    pub fn parse(mode: &str) -> Result<ClusterMode, ParamError> {
        match mode {
            "connected" => Ok(ClusterMode::Connected),
            "representative" => Ok(ClusterMode::Representative),
            other => Err(ParamError::new(format!(
                "mode must be 'connected' or 'representative', not '{}'",
                other.escape_default()
            ))),
        }
    }
}

/// How a document is cut into shingles: a validated (ngram, unit) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shingling {
    pub ngram: usize,
    pub unit: Unit,
}

impl Shingling {
    pub fn new(ngram: i32, unit: &str) -> Result<Shingling, ParamError> {
        let unit = Unit::parse(unit)?;
        let max = unit.max_ngram();
        match usize::try_from(ngram) {
            Ok(n) if (1..=max).contains(&n) => Ok(Shingling { ngram: n, unit }),
            _ => Err(ParamError::new(format!(
                "ngram must be between 1 and {max} for unit '{}', got {ngram}",
                unit.name()
            ))),
        }
    }
}

/// Checks the signature length `k` (1..=1024).
pub fn check_k(k: i32) -> Result<usize, ParamError> {
    match usize::try_from(k) {
        Ok(k) if (1..=MAX_K).contains(&k) => Ok(k),
        _ => Err(ParamError::new(format!(
            "k must be between 1 and {MAX_K}, got {k}"
        ))),
    }
}

/// Checks a similarity threshold: greater than 0 and at most 1.
pub fn check_threshold(threshold: f64) -> Result<f64, ParamError> {
    if threshold > 0.0 && threshold <= 1.0 {
        Ok(threshold)
    } else {
        Err(ParamError::new(format!(
            "threshold must be greater than 0 and at most 1, got {}",
            float8_text(threshold)
        )))
    }
}

/// A float as PostgreSQL's `float8out` prints it (shortest round-trip digits; exponent form
/// below 1e-4 and from 1e15, as `1e+20`, `1.5e-05`; `Infinity`, `NaN`), so that a message
/// quotes the value as the user wrote it in SQL.
pub fn float8_text(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    if (-4..15).contains(&exponent) {
        return format!("{v}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// The banding of a signature of `len` slots: `bands` bands of `rows` slots each, using the
/// first `bands * rows` slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Banding {
    pub bands: usize,
    pub rows: usize,
}

impl Banding {
    /// `rows = None` means `len / bands`, which must divide evenly.
    pub fn new(len: usize, bands: i32, rows: Option<i32>) -> Result<Banding, ParamError> {
        let b = match usize::try_from(bands) {
            Ok(b) if (1..=MAX_BANDS).contains(&b) => b,
            _ => {
                return Err(ParamError::new(format!(
                    "b must be between 1 and {MAX_BANDS}, got {bands}"
                )))
            }
        };
        let r = match rows {
            None => {
                if !len.is_multiple_of(b) {
                    return Err(ParamError::new(format!(
                        "signature length {len} is not divisible by b = {b}"
                    ))
                    .with_hint("pass r explicitly to use only the first b * r slots"));
                }
                len / b
            }
            Some(r) => match usize::try_from(r) {
                Ok(r) if r >= 1 => r,
                _ => return Err(ParamError::new(format!("r must be at least 1, got {r}"))),
            },
        };
        if r == 0 || b * r > len {
            return Err(ParamError::new(format!(
                "b * r = {} exceeds the signature length {len}",
                b * r
            )));
        }
        Ok(Banding { bands: b, rows: r })
    }
}

/// Chance that a pair of Jaccard similarity `s` shares at least one of `b` bands of `r` rows:
/// `1 - (1 - s^r)^b`, computed without cancellation for small `s^r`.
pub fn candidate_probability(s: f64, b: usize, r: usize) -> f64 {
    let band_match = s.powi(r as i32);
    if band_match >= 1.0 {
        return 1.0;
    }
    -(b as f64 * (-band_match).ln_1p()).exp_m1()
}

/// Validated `lsh_probability` arguments.
pub fn lsh_probability(s: f64, b: i32, r: i32) -> Result<f64, ParamError> {
    if !(0.0..=1.0).contains(&s) {
        return Err(ParamError::new(format!(
            "similarity must be between 0 and 1, got {s}"
        )));
    }
    if b < 1 {
        return Err(ParamError::new(format!("b must be at least 1, got {b}")));
    }
    if r < 1 {
        return Err(ParamError::new(format!("r must be at least 1, got {r}")));
    }
    Ok(candidate_probability(s, b as usize, r as usize))
}

/// One row of `lsh_params`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LshChoice {
    pub bands: usize,
    pub rows: usize,
    /// Candidate probability of a pair exactly at the threshold.
    pub recall_at_threshold: f64,
    /// Integral of the candidate probability over similarities below the threshold.
    pub false_positive_area: f64,
    /// Integral of the miss probability over similarities at or above the threshold.
    pub false_negative_area: f64,
}

/// Composite Simpson's rule on `[lo, hi]`; the integrands here are smooth polynomials.
fn integrate(lo: f64, hi: f64, f: impl Fn(f64) -> f64) -> f64 {
    const INTERVALS: usize = 256;
    if hi <= lo {
        return 0.0;
    }
    let h = (hi - lo) / INTERVALS as f64;
    let inner: f64 = (1..INTERVALS)
        .map(|i| f(lo + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (f(lo) + f(hi) + inner) * h / 3.0
}

/// Every (bands, rows) with `bands * rows <= k` whose candidate probability at `threshold` is at
/// least `min_recall`, best first: fewest false positives (smallest area under the candidate
/// curve below the threshold), then fewest false negatives, then fewer slots used.
pub fn lsh_params(threshold: f64, k: i32, min_recall: f64) -> Result<Vec<LshChoice>, ParamError> {
    let threshold = check_threshold(threshold)?;
    if !(0.0..=1.0).contains(&min_recall) {
        return Err(ParamError::new(format!(
            "min_recall must be between 0 and 1, got {min_recall}"
        )));
    }
    let k = check_k(k)?;
    let mut choices = Vec::new();
    for b in 1..=k {
        for r in 1..=k / b {
            let recall = candidate_probability(threshold, b, r);
            if recall < min_recall {
                continue;
            }
            choices.push(LshChoice {
                bands: b,
                rows: r,
                recall_at_threshold: recall,
                false_positive_area: integrate(0.0, threshold, |s| candidate_probability(s, b, r)),
                false_negative_area: integrate(threshold, 1.0, |s| {
                    1.0 - candidate_probability(s, b, r)
                }),
            });
        }
    }
    choices.sort_by(|x, y| {
        x.false_positive_area
            .total_cmp(&y.false_positive_area)
            .then(x.false_negative_area.total_cmp(&y.false_negative_area))
            .then((x.bands * x.rows).cmp(&(y.bands * y.rows)))
            .then(x.bands.cmp(&y.bands))
    });
    Ok(choices)
}

/// The recall at the threshold the banding chosen for a search without one must reach.
pub const DEFAULT_MIN_RECALL: f64 = 0.99;

/// The banding a search uses when none is given: the best of [`lsh_params`] at
/// [`DEFAULT_MIN_RECALL`], as `minhash_index_create` chooses it.
pub fn default_banding(threshold: f64, k: i32) -> Result<Banding, ParamError> {
    match lsh_params(threshold, k, DEFAULT_MIN_RECALL)?.first() {
        Some(best) => Ok(Banding {
            bands: best.bands,
            rows: best.rows,
        }),
        None => Err(ParamError::new(format!(
            "no banding of {k} slots reaches {DEFAULT_MIN_RECALL} recall at threshold {threshold}"
        ))
        .with_hint("Use a larger k.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_modes_and_default_banding() {
        assert_eq!(ClusterMode::parse("connected"), Ok(ClusterMode::Connected));
        assert_eq!(
            ClusterMode::parse("representative"),
            Ok(ClusterMode::Representative)
        );
        assert_eq!(
            ClusterMode::parse("Connected").unwrap_err().message,
            "mode must be 'connected' or 'representative', not 'Connected'"
        );
        let best = lsh_params(0.8, 128, DEFAULT_MIN_RECALL).unwrap()[0];
        assert_eq!(
            default_banding(0.8, 128),
            Ok(Banding {
                bands: best.bands,
                rows: best.rows
            })
        );
        let none = default_banding(1e-9, 1).unwrap_err();
        assert_eq!(
            none.message,
            "no banding of 1 slots reaches 0.99 recall at threshold 0.000000001"
        );
        assert!(default_banding(0.8, 0).is_err());
    }

    #[test]
    fn shingling_ranges() {
        assert_eq!(
            Shingling::new(5, "char").unwrap(),
            Shingling {
                ngram: 5,
                unit: Unit::Char
            }
        );
        assert!(Shingling::new(64, "char").is_ok());
        assert!(Shingling::new(16, "word").is_ok());
        for (n, unit) in [(0, "char"), (65, "char"), (17, "word"), (-1, "word")] {
            let err = Shingling::new(n, unit).unwrap_err();
            assert!(
                err.message.starts_with("ngram must be between 1 and"),
                "{err}"
            );
        }
        assert_eq!(
            Shingling::new(5, "byte").unwrap_err().message,
            "unit must be 'char' or 'word', not 'byte'"
        );
    }

    #[test]
    fn banding_rules() {
        assert_eq!(
            Banding::new(128, 32, None).unwrap(),
            Banding { bands: 32, rows: 4 }
        );
        assert_eq!(
            Banding::new(128, 20, Some(6)).unwrap(),
            Banding { bands: 20, rows: 6 }
        );
        assert_eq!(
            Banding::new(128, 128, Some(1)).unwrap(),
            Banding {
                bands: 128,
                rows: 1
            }
        );
        let err = Banding::new(128, 20, None).unwrap_err();
        assert_eq!(
            err.message,
            "signature length 128 is not divisible by b = 20"
        );
        assert!(err.hint.is_some());
        assert_eq!(
            Banding::new(128, 20, Some(7)).unwrap_err().message,
            "b * r = 140 exceeds the signature length 128"
        );
        assert!(Banding::new(128, 0, None).is_err());
        assert!(Banding::new(2048, 1025, Some(1)).is_err());
        assert!(Banding::new(128, 4, Some(0)).is_err());
        assert!(Banding::new(0, 1, None).is_err());
    }

    #[test]
    fn probability_values() {
        assert_eq!(candidate_probability(0.0, 10, 3), 0.0);
        assert_eq!(candidate_probability(1.0, 10, 3), 1.0);
        let direct = 1.0 - (1.0 - 0.5f64.powi(4)).powi(32);
        assert!((candidate_probability(0.5, 32, 4) - direct).abs() < 1e-15);
        // tiny s^r: the naive formula would round to 0
        assert!(candidate_probability(1e-9, 2, 2) > 1.9e-18);
        assert!(lsh_probability(1.5, 1, 1).is_err());
        assert!(lsh_probability(f64::NAN, 1, 1).is_err());
        assert!(lsh_probability(0.5, 0, 1).is_err());
        assert!(lsh_probability(0.5, 1, 0).is_err());
    }

    #[test]
    fn params_are_ranked_and_filtered() {
        let choices = lsh_params(0.8, 128, 0.99).unwrap();
        assert!(!choices.is_empty());
        for c in &choices {
            assert!(c.bands * c.rows <= 128);
            assert!(c.recall_at_threshold >= 0.99);
        }
        for pair in choices.windows(2) {
            assert!(pair[0].false_positive_area <= pair[1].false_positive_area);
        }
        // b = 128, r = 1 is always admissible and has the most false positives of r = 1 curves
        assert!(choices.iter().any(|c| c.bands == 128 && c.rows == 1));
        // the Simpson integral of 1 - (1 - s)^1 over [0, t] is exactly t^2 / 2
        let one = &lsh_params(0.5, 1, 0.0).unwrap()[0];
        assert!((one.false_positive_area - 0.125).abs() < 1e-12);
        assert!((one.false_negative_area - 0.125).abs() < 1e-12);
        assert!(lsh_params(0.0, 128, 0.99).is_err());
        assert!(lsh_params(0.8, 0, 0.99).is_err());
        assert!(lsh_params(0.8, 128, 1.5).is_err());
    }

    #[test]
    fn thresholds_are_checked_and_quoted_as_postgresql_prints_them() {
        assert_eq!(check_threshold(0.8).unwrap(), 0.8);
        assert_eq!(check_threshold(1.0).unwrap(), 1.0);
        for (bad, text) in [
            (0.0, "0"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (1e20, "1e+20"),
            (f64::INFINITY, "Infinity"),
            (f64::NAN, "NaN"),
        ] {
            let e = check_threshold(bad).unwrap_err();
            assert_eq!(
                e.message,
                format!("threshold must be greater than 0 and at most 1, got {text}")
            );
        }
        // (outputs of SELECT x::float8 in PostgreSQL 15)
        for (v, text) in [
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (123456789012345.6, "123456789012345.6"),
            (1e15, "1e+15"),
            (-2.5e-300, "-2.5e-300"),
            (f64::NEG_INFINITY, "-Infinity"),
            (-0.0, "-0"),
        ] {
            assert_eq!(float8_text(v), text);
        }
    }
}
