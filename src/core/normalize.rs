//! Text normalization: Unicode lowercase, whitespace runs folded to one space, trimmed.

/// Writes the normalized form of `text` into `out` (cleared first), so callers can reuse one
/// buffer across documents.
///
/// Lowercasing is Rust's `str::to_lowercase`: the Unicode default full case mapping, including
/// the context-dependent final sigma. Whitespace is Unicode `White_Space`. Lowercasing a word on
/// its own gives the same result as lowercasing the whole text, because whitespace is neither
/// cased nor case-ignorable and so ends every final-sigma context.
pub fn normalize_into(text: &str, out: &mut String) {
    if text.is_ascii() {
        return normalize_ascii_into(text.as_bytes(), out);
    }
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

/// The same for ASCII text (most text), 64 bytes at a time: a bitmask of the chunk's whitespace
/// finds the bytes to drop (whitespace after whitespace, or leading), and the kept runs are
/// mapped (lowercase, whitespace to space) by a loop the compiler vectorizes. Compiled for the
/// widest vectors the CPU has; every path gives the same bytes.
fn normalize_ascii_into(text: &[u8], out: &mut String) {
    let mut bytes = std::mem::take(out).into_bytes();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { normalize_ascii_avx512(text, &mut bytes) };
        } else if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            unsafe { normalize_ascii_avx2(text, &mut bytes) };
        } else {
            normalize_ascii_chunks(text, &mut bytes);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    normalize_ascii_chunks(text, &mut bytes);
    *out = String::from_utf8(bytes).expect("lowercased ASCII is UTF-8");
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn normalize_ascii_avx512(text: &[u8], out: &mut Vec<u8>) {
    normalize_ascii_chunks(text, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn normalize_ascii_avx2(text: &[u8], out: &mut Vec<u8>) {
    normalize_ascii_chunks(text, out)
}

/// The ASCII members of Unicode White_Space: \t \n \x0B \x0C \r and space.
#[inline(always)]
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

#[inline(always)]
fn fold_ascii(b: u8) -> u8 {
    if is_ascii_space(b) {
        b' '
    } else {
        b.to_ascii_lowercase()
    }
}

#[inline(always)]
fn normalize_ascii_chunks(text: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(text.len());
    let mut previous_space = 1u64; // drops leading whitespace
    for chunk in text.chunks(64) {
        let mut space = 0u64;
        for (i, &b) in chunk.iter().enumerate() {
            space |= u64::from(is_ascii_space(b)) << i;
        }
        let mut drop = space & ((space << 1) | previous_space);
        let mut start = 0;
        while drop != 0 {
            let i = drop.trailing_zeros() as usize;
            out.extend(chunk[start..i].iter().map(|&b| fold_ascii(b)));
            start = i + 1;
            drop &= drop - 1;
        }
        out.extend(chunk[start..].iter().map(|&b| fold_ascii(b)));
        previous_space = (space >> (chunk.len() - 1)) & 1;
    }
    if out.last() == Some(&b' ') {
        out.pop();
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
            ("\x0B\x0Cform\x0Bfeed\x1F", "form feed\x1F"),
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
