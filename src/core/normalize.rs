//! Text normalization: Unicode lowercase, whitespace runs folded to one space, trimmed.

use super::capacity::{reserve, reserve_str, CapacityError};

/// Non-ASCII text is checked for interrupts every this many bytes (the ASCII paths run at
/// gigabytes a second, so a whole text of up to 1 GB stays within a second).
const CHECK_EVERY: usize = 1 << 20;

/// Writes the normalized form of `text` into `out` (cleared first), so callers can reuse one
/// buffer across documents. `out` is grown fallibly.
///
/// Lowercasing is Rust's `str::to_lowercase`: the Unicode default full case mapping, including
/// the context-dependent final sigma. Whitespace is Unicode `White_Space`. Lowercasing a word on
/// its own gives the same result as lowercasing the whole text, because whitespace is neither
/// cased nor case-ignorable and so ends every final-sigma context.
///
/// Returns whether the normalized text is ASCII, which callers use to cut it into character
/// n-grams by bytes without checking it again.
pub fn normalize_into(
    text: &str,
    out: &mut String,
    check_interrupts: &mut dyn FnMut(),
) -> Result<bool, CapacityError> {
    if normalize_ascii_into(text.as_bytes(), out)? {
        return Ok(true);
    }
    out.clear();
    reserve_str(out, text.len(), "the normalized text")?;
    let mut next_check = CHECK_EVERY;
    for word in text.split_whitespace() {
        // a word lowercases to at most 3/2 of its bytes (see the test), plus the space
        reserve_str(out, word.len() + word.len() / 2 + 1, "the normalized text")?;
        if !out.is_empty() {
            out.push(' ');
        }
        if word.is_ascii() {
            out.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            push_lowercase(word, out);
        }
        if out.len() >= next_check {
            check_interrupts();
            next_check = out.len() + CHECK_EVERY;
        }
    }
    Ok(out.is_ascii())
}

/// Appends `word.to_lowercase()` to `out` without the copy of the word `to_lowercase`
/// allocates: character by character, with the capital sigma decided as `to_lowercase` decides
/// it.
fn push_lowercase(word: &str, out: &mut String) {
    for (i, c) in word.char_indices() {
        if c == 'Σ' {
            out.push(if is_final_sigma(word, i) { 'ς' } else { 'σ' });
        } else {
            out.extend(c.to_lowercase());
        }
    }
}

/// Whether the capital sigma at byte `i` of `word` lowercases to the final form: Unicode's
/// Final_Sigma condition as `str::to_lowercase` applies it (a cased letter before it and none
/// after it, case-ignorable characters skipped on both sides).
fn is_final_sigma(word: &str, i: usize) -> bool {
    cased_after_ignorables(word[..i].chars().rev())
        && !cased_after_ignorables(word[i + 'Σ'.len_utf8()..].chars())
}

/// Whether the first character of `chars` that is not case-ignorable is cased. The standard
/// library keeps those two properties private, but `to_lowercase` of a sigma after `c` shows
/// them: "A{c}Σ" ends in ς when `c` is case-ignorable or cased, and "1{c}Σ" when `c` is cased
/// and not case-ignorable ('A' is cased, '1' is not, and neither is case-ignorable).
fn cased_after_ignorables(chars: impl Iterator<Item = char>) -> bool {
    let final_after = |before: char, c: char| {
        let mut buf = [0u8; 12];
        let a = before.encode_utf8(&mut buf).len();
        let b = c.encode_utf8(&mut buf[a..]).len();
        let s = 'Σ'.encode_utf8(&mut buf[a + b..]).len();
        let probe = std::str::from_utf8(&buf[..a + b + s]).expect("UTF-8 just written");
        probe.to_lowercase().ends_with('ς')
    };
    for c in chars {
        if final_after('1', c) {
            return true;
        }
        if !final_after('A', c) {
            return false;
        }
    }
    false
}

/// The same for ASCII text (most text), 64 bytes at a time: a bitmask of the chunk's whitespace
/// finds the bytes to drop (whitespace after whitespace, or leading), and the kept bytes are
/// mapped (lowercase, whitespace to space). With AVX-512 VBMI2 the kept bytes of a chunk are
/// packed by one compress instruction, and the same pass checks that the text is ASCII;
/// elsewhere the text is checked first and the kept runs are copied by a loop the compiler
/// vectorizes. Every path gives the same bytes. Returns false, with `out` empty, when `text` is
/// not ASCII.
fn normalize_ascii_into(text: &[u8], out: &mut String) -> Result<bool, CapacityError> {
    let mut bytes = std::mem::take(out).into_bytes();
    bytes.clear();
    // the paths below reserve the same, which then allocates nothing
    let reserved = reserve(&mut bytes, text.len() + 64, "the normalized text");
    let ascii = reserved.is_ok() && normalize_ascii_fastest(text, &mut bytes);
    if !ascii {
        bytes.clear();
    }
    // SAFETY: `bytes` is empty or was checked to be ASCII above, so it is UTF-8.
    *out = unsafe { String::from_utf8_unchecked(bytes) };
    reserved.map(|()| ascii)
}

/// The widest path this CPU has; false when `text` is not ASCII.
fn normalize_ascii_fastest(text: &[u8], out: &mut Vec<u8>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512vbmi2")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { normalize_ascii_avx512(text, out) };
        }
    }
    if !text.is_ascii() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            unsafe { normalize_ascii_avx2(text, out) };
            return true;
        }
    }
    normalize_ascii_chunks(text, out);
    true
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
fn normalize_ascii_avx512(text: &[u8], out: &mut Vec<u8>) -> bool {
    use super::simd::load_64;
    use std::arch::x86_64::*;
    out.clear();
    // each chunk stores 64 bytes at the end of the output, of which the kept ones count
    out.reserve(text.len() + 64);
    let mut previous_space = 1u64; // drops leading whitespace
    for at in (0..text.len()).step_by(64) {
        let (b, valid) = load_64(text, at);
        if _mm512_movepi8_mask(b) != 0 {
            return false;
        }
        let in_range = |low: u8, count: u8| {
            _mm512_cmplt_epu8_mask(
                _mm512_sub_epi8(b, _mm512_set1_epi8(low as i8)),
                _mm512_set1_epi8(count as i8),
            )
        };
        let space =
            (in_range(b'\t', 5) | _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(b' ' as i8))) & valid;
        let upper = in_range(b'A', 26);
        let lowered = _mm512_mask_blend_epi8(upper, b, _mm512_or_si512(b, _mm512_set1_epi8(0x20)));
        let folded = _mm512_mask_blend_epi8(space, lowered, _mm512_set1_epi8(b' ' as i8));
        let drop = space & ((space << 1) | previous_space);
        let keep = valid & !drop;
        let packed = _mm512_maskz_compress_epi8(keep, folded);
        // SAFETY: `reserve` left at least 64 bytes of capacity after the current length (the
        // output never outgrows the input), and the first `keep.count_ones()` of them are
        // initialized by this store.
        unsafe {
            _mm512_storeu_si512(out.as_mut_ptr().add(out.len()).cast(), packed);
            out.set_len(out.len() + keep.count_ones() as usize);
        }
        // only the last chunk is short, and nothing follows it
        previous_space = space >> 63;
    }
    if out.last() == Some(&b' ') {
        out.pop();
    }
    true
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

/// `text` must be ASCII.
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
#[cfg(test)]
pub fn normalize(text: &str) -> String {
    let mut out = String::new();
    normalize_into(text, &mut out, &mut || {}).expect("a test text fits");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_paths_notice_any_other_byte() {
        for at in [0, 1, 63, 64, 65, 200] {
            let mut text = "Ab ".repeat(80);
            text.insert(at, 'é');
            let mut out = String::from("stale");
            assert!(
                !normalize_ascii_into(text.as_bytes(), &mut out).unwrap(),
                "at {at}"
            );
            assert_eq!(out, "");
            assert!(!normalize_into(&text, &mut out, &mut || {}).unwrap());
            assert_eq!(
                out,
                text.to_lowercase()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }

    #[test]
    fn every_ascii_path_gives_the_same_bytes() {
        let alphabet = b"aZ \t\n\r\x0B\x0C.Q  \x1F~";
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for len in (0..200).chain([511, 512, 513, 4096]) {
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut want = Vec::new();
            normalize_ascii_chunks(&text, &mut want);
            let words: Vec<String> = std::str::from_utf8(&text)
                .unwrap()
                .split_whitespace()
                .map(str::to_lowercase)
                .collect();
            assert_eq!(want, words.join(" ").into_bytes(), "len {len}");
            #[cfg(target_arch = "x86_64")]
            {
                let mut got = vec![b'x'; 3];
                if std::arch::is_x86_feature_detected!("avx512vbmi2") {
                    // SAFETY: the features were checked.
                    assert!(unsafe { normalize_ascii_avx512(&text, &mut got) });
                    assert_eq!(got, want, "len {len}");
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: as above.
                    unsafe { normalize_ascii_avx2(&text, &mut got) };
                    assert_eq!(got, want, "len {len}");
                }
            }
        }
    }

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

    #[test]
    fn lowercase_grows_a_character_by_at_most_half() {
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let lower: usize = c.to_lowercase().map(char::len_utf8).sum();
            assert!(lower <= c.len_utf8() * 3 / 2, "{c:?}");
        }
    }

    /// The capital sigma among letters, digits and case-ignorable characters of every kind
    /// (apostrophe and full stop, a combining mark, a modifier letter, a format character,
    /// U+0345 which is both cased and case-ignorable, a titlecase letter).
    #[test]
    fn words_lowercase_as_to_lowercase_does() {
        let parts = [
            "Σ", "A", "a", "1", "'", ".", "\u{301}", "\u{2C6}", "\u{AD}", "\u{345}", "ῼ", "日",
            "İ", "ΑΣ", "ß",
        ];
        let mut rng = crate::core::testing::Rng(5);
        for _ in 0..20_000 {
            let len = 1 + rng.below(8) as usize;
            let word: String = (0..len)
                .map(|_| parts[rng.below(parts.len() as u64) as usize])
                .collect();
            let mut got = String::new();
            push_lowercase(&word, &mut got);
            assert_eq!(got, word.to_lowercase(), "{word:?}");
        }
    }

    #[test]
    fn long_non_ascii_texts_are_checked_for_interrupts() {
        // 3 * CHECK_EVERY - 1 bytes out: a check after each CHECK_EVERY of them
        let text = "é ".repeat(CHECK_EVERY);
        let mut calls = 0;
        normalize_into(&text, &mut String::new(), &mut || calls += 1).unwrap();
        assert_eq!(calls, 2);
    }
}
