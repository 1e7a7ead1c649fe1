//! Text normalization: Unicode lowercase, whitespace runs folded to one space, trimmed.

/// Writes the normalized form of `text` into `out` (cleared first), so callers can reuse one
/// buffer across documents.
///
/// Lowercasing is Rust's `str::to_lowercase`: the Unicode default full case mapping, including
/// the context-dependent final sigma. Whitespace is Unicode `White_Space`. Lowercasing a word on
/// its own gives the same result as lowercasing the whole text, because whitespace is neither
/// cased nor case-ignorable and so ends every final-sigma context.
pub fn normalize_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        if word.is_ascii() {
            out.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.push_str(&word.to_lowercase());
        }
    }
}

/// The normalized form of `text`.
pub fn normalize(text: &str) -> String {
    let mut out = String::new();
    normalize_into(text, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn folds_case_and_whitespace() {
        let cases = [
            ("", ""),
            ("   \t\n ", ""),
            ("Hello  World", "hello world"),
            ("  Leading and trailing\t", "leading and trailing"),
            ("a\u{00A0}\u{2003}\u{3000}b", "a b"),
            ("line\r\nbreak", "line break"),
            ("ÀÉÎ Õü", "àéî õü"),
            ("東京 タワー", "東京 タワー"),
            // full mapping: one code point may lower to two
            ("İ", "i\u{0307}"),
            // final sigma is context-dependent, per word
            ("ΟΔΟΣ ΣΑ", "οδο\u{03C2} \u{03C3}α"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(input), expected, "normalize({input:?})");
        }
    }
}
