//! Property tests of the core contract.

use proptest::prelude::*;

use super::jaccard::{jaccard, ShingleSet};
use super::normalize::normalize;
use super::params::Shingling;
use super::shingle::distinct_shingles;
use super::signature::{estimate_similarity, signature};

fn shingling() -> impl Strategy<Value = Shingling> {
    prop_oneof![
        (1..=8i32).prop_map(|n| Shingling::new(n, "char").unwrap()),
        (1..=4i32).prop_map(|n| Shingling::new(n, "word").unwrap()),
    ]
}

/// Short texts mixing ASCII, accents, CJK, Greek sigma and assorted whitespace.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("a"),
            Just("B"),
            Just("c"),
            Just(" "),
            Just("\t"),
            Just("\u{00A0}"),
            Just("É"),
            Just("ß"),
            Just("Σ"),
            Just("İ"),
            Just("日"),
            Just("本"),
            Just("\n"),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn normalization_is_idempotent(s in any::<String>()) {
        let once = normalize(&s);
        prop_assert_eq!(normalize(&once), once.clone());
        prop_assert!(!once.starts_with(' ') && !once.ends_with(' ') && !once.contains("  "));
    }

    #[test]
    fn ascii_fast_path_matches_the_general_rule(s in "[ -~\t\n\x0B\x0C\r\x1C-\x1F]{0,200}") {
        let general: Vec<String> = s.split_whitespace().map(str::to_lowercase).collect();
        prop_assert_eq!(normalize(&s), general.join(" "));
    }

    #[test]
    fn jaccard_is_symmetric_and_bounded(a in text(), b in text(), sh in shingling()) {
        let ab = jaccard(&a, &b, sh);
        prop_assert_eq!(ab, jaccard(&b, &a, sh));
        prop_assert!((0.0..=1.0).contains(&ab));
        prop_assert_eq!(jaccard(&a, &a, sh), 1.0);
    }

    #[test]
    fn word_order_does_not_change_unigrams(words in proptest::collection::vec("[a-z]{1,6}", 1..20)) {
        let mut reversed = words.clone();
        reversed.reverse();
        let unigrams = Shingling::new(1, "word").unwrap();
        prop_assert_eq!(jaccard(&words.join(" "), &reversed.join("  "), unigrams), 1.0);
        prop_assert_eq!(
            signature(&words.join(" "), 32, unigrams),
            signature(&reversed.join("\n"), 32, unigrams)
        );
    }

    #[test]
    fn signatures_are_deterministic(s in text(), sh in shingling(), k in 1usize..200) {
        let first = signature(&s, k, sh);
        prop_assert_eq!(first.len(), k);
        prop_assert_eq!(&first, &signature(&s, k, sh));
        prop_assert_eq!(&first, &signature(&normalize(&s), k, sh));
        prop_assert_eq!(estimate_similarity(&first, &first), 1.0);
    }

    #[test]
    fn shingles_are_sorted_and_distinct(s in text(), sh in shingling()) {
        let norm = normalize(&s);
        let set = distinct_shingles(&norm, sh);
        prop_assert!(set.windows(2).all(|w| w[0] < w[1]));
        prop_assert_eq!(set.is_empty(), norm.is_empty());
        let sorted = ShingleSet::try_new(&s, sh, &mut || {}).unwrap().try_into_sorted(&mut || {});
        let sorted = sorted.unwrap();
        prop_assert_eq!(sorted.iter().collect::<Vec<_>>(), set);
    }
}
