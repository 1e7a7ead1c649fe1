//! Cutting a normalized text into shingles.
//!
//! Every shingle is a substring of the normalized text (a word window is its words joined by
//! the single spaces normalization left between them), so shingles are passed around as byte
//! spans into that text: nothing is allocated per shingle.

use std::iter::once;

use super::params::{Shingling, Unit};

/// A shingle as `start..end` byte offsets into the normalized text.
pub type Span = (usize, usize);

/// Calls `f` with the span of every shingle window of `norm`, in text order (repeats included).
///
/// `norm` must be normalized. An empty text has no shingles; a non-empty text shorter than one
/// window has one shingle, the whole text.
pub fn for_each_shingle(norm: &str, shingling: Shingling, mut f: impl FnMut(Span)) {
    if norm.is_empty() {
        return;
    }
    let n = shingling.ngram;
    let mut any = false;
    let mut emit = |span| {
        any = true;
        f(span)
    };
    match shingling.unit {
        Unit::Char if norm.is_ascii() => {
            for start in 0..norm.len().saturating_sub(n - 1) {
                emit((start, start + n));
            }
        }
        Unit::Char => {
            let bounds = norm.char_indices().map(|(i, _)| i).chain(once(norm.len()));
            for span in bounds.clone().zip(bounds.skip(n)) {
                emit(span);
            }
        }
        Unit::Word => {
            let spaces = || norm.match_indices(' ').map(|(i, _)| i);
            let starts = once(0).chain(spaces().map(|i| i + 1));
            let ends = spaces().chain(once(norm.len()));
            for span in starts.zip(ends.skip(n - 1)) {
                emit(span);
            }
        }
    }
    if !any {
        f((0, norm.len()));
    }
}

/// When the shingles of `norm` are exactly its n-byte windows — character n-grams of ASCII text
/// (`ascii` as [`normalize_into`](super::normalize::normalize_into) returned it) longer than one
/// window — their number; the fast paths hash those windows directly.
pub fn byte_windows(norm: &str, ascii: bool, shingling: Shingling) -> Option<usize> {
    let n = shingling.ngram;
    (shingling.unit == Unit::Char && ascii && norm.len() > n).then(|| norm.len() - n + 1)
}

/// The distinct shingles of `norm`, sorted by code point (UTF-8 byte order): the definition
/// [`ShingleSet::try_into_sorted`](super::jaccard::ShingleSet::try_into_sorted) is tested
/// against.
#[cfg(test)]
pub fn distinct_shingles(norm: &str, shingling: Shingling) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_shingle(norm, shingling, |(s, e)| out.push(&norm[s..e]));
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::normalize::normalize;

    fn shingles(text: &str, ngram: i32, unit: &str) -> Vec<String> {
        let norm = normalize(text);
        let sh = Shingling::new(ngram, unit).unwrap();
        distinct_shingles(&norm, sh)
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn char_windows() {
        assert_eq!(shingles("abcd", 2, "char"), ["ab", "bc", "cd"]);
        assert_eq!(shingles("abab", 2, "char"), ["ab", "ba"]);
        assert_eq!(shingles("ab", 2, "char"), ["ab"]);
        assert_eq!(shingles("ab", 5, "char"), ["ab"]);
        assert_eq!(shingles("", 5, "char"), Vec::<String>::new());
        assert_eq!(shingles("  ", 1, "char"), Vec::<String>::new());
        assert_eq!(shingles("A  b", 3, "char"), ["a b"]);
    }

    #[test]
    fn char_windows_count_code_points() {
        assert_eq!(
            shingles("日本語です", 2, "char"),
            ["です", "日本", "本語", "語で"]
        );
        assert_eq!(shingles("Café", 3, "char"), ["afé", "caf"]);
        assert_eq!(shingles("éé", 3, "char"), ["éé"]);
    }

    #[test]
    fn word_windows() {
        let w = |t, n| shingles(t, n, "word");
        assert_eq!(w("the cat the cat", 1), ["cat", "the"]);
        assert_eq!(w("a b c d", 2), ["a b", "b c", "c d"]);
        assert_eq!(w("a b c", 3), ["a b c"]);
        assert_eq!(w("a b", 3), ["a b"]);
        assert_eq!(w("solo", 2), ["solo"]);
        assert_eq!(w("", 2), Vec::<String>::new());
        assert_eq!(w(" Über\u{3000}ALLES  ", 2), ["über alles"]);
    }
}
