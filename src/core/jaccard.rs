//! Exact Jaccard similarity of two documents' shingle sets.

use super::hash::shingle_hash;
use super::normalize::normalize;
use super::params::Shingling;
use super::shingle::{for_each_shingle, Span};

/// A document's distinct shingles, ordered by (hash, bytes) so two sets intersect in one merge.
/// Ordering by hash first makes the sort cheap; comparing bytes keeps the result exact even if
/// two different shingles share a hash.
pub struct ShingleSet {
    norm: String,
    items: Vec<(u32, Span)>,
}

impl ShingleSet {
    pub fn new(doc: &str, shingling: Shingling, check_interrupts: &mut dyn FnMut()) -> ShingleSet {
        let norm = normalize(doc);
        let mut items = Vec::new();
        let bytes = norm.as_bytes();
        for_each_shingle(&norm, shingling, |(s, e)| {
            items.push((shingle_hash(&bytes[s..e]), (s, e)));
            if items.len() % (1 << 16) == 0 {
                check_interrupts();
            }
        });
        let text = |&(s, e): &Span| &bytes[s..e];
        items.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| text(&x.1).cmp(text(&y.1))));
        items.dedup_by(|x, y| x.0 == y.0 && text(&x.1) == text(&y.1));
        ShingleSet { norm, items }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn key(&self, i: usize) -> (u32, &[u8]) {
        let (h, (s, e)) = self.items[i];
        (h, &self.norm.as_bytes()[s..e])
    }

    /// Number of shingles in both sets.
    pub fn intersection(&self, other: &ShingleSet) -> usize {
        let (mut i, mut j, mut common) = (0, 0, 0);
        while i < self.len() && j < other.len() {
            match self.key(i).cmp(&other.key(j)) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        common
    }

    /// |A ∩ B| / |A ∪ B|; two empty sets are identical (1).
    pub fn jaccard(&self, other: &ShingleSet) -> f64 {
        let common = self.intersection(other);
        let union = self.len() + other.len() - common;
        if union == 0 {
            1.0
        } else {
            common as f64 / union as f64
        }
    }
}

/// Exact Jaccard similarity of the shingle sets of two documents.
pub fn jaccard(a: &str, b: &str, shingling: Shingling) -> f64 {
    let mut none = || {};
    ShingleSet::new(a, shingling, &mut none).jaccard(&ShingleSet::new(b, shingling, &mut none))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: i32) -> Shingling {
        Shingling::new(n, "word").unwrap()
    }

    #[test]
    fn exact_values() {
        let chars = Shingling::new(5, "char").unwrap();
        assert_eq!(jaccard("", "", chars), 1.0);
        assert_eq!(jaccard("", "x", chars), 0.0);
        assert_eq!(jaccard("x", "", chars), 0.0);
        assert_eq!(jaccard("Same text", "same   TEXT", chars), 1.0);
        assert_eq!(
            jaccard(
                "Who was the first king of Poland",
                "Who was the first ruler of Poland",
                words(1)
            ),
            0.75
        );
        // bigrams: {a b, b c, c d} vs {a b, b c, c e}: 2 / 4
        assert_eq!(jaccard("a b c d", "a b c e", words(2)), 0.5);
        // char 2-grams: {ab, bc} vs {bc, cd}: 1 / 3
        assert_eq!(
            jaccard("abc", "bcd", Shingling::new(2, "char").unwrap()),
            1.0 / 3.0
        );
    }
}
