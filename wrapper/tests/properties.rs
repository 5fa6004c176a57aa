//! Property tests: the parser reads back what the writer writes, and the
//! word splitter reads back what the quoter writes.

use std::collections::BTreeMap;

use kubelet_wrapper::envfile::{dedup, parse, parse_bytes, serialize};
use kubelet_wrapper::split::{expand_word, quote, split};
use proptest::prelude::*;

/// The words of `value`, collected.
fn words_of(value: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    split(value, |w| out.push(w.to_vec()));
    out
}

fn bytes_of(words: &[String]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Any text a value can hold: no NUL, no Unicode noncharacter (systemd
/// refuses both). Biased towards the characters the parser treats specially.
fn value() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        ' ', '\t', '\n', '\r', '"', '\'', '\\', '$', '`', '#', ';', '=', 'a', 'é', '€', '😀',
    ]);
    let any = any::<char>().prop_filter("no NUL or noncharacter", |c| {
        let u = *c as u32;
        u != 0 && !(0xFDD0..=0xFDEF).contains(&u) && u & 0xFFFE != 0xFFFE
    });
    prop::collection::vec(prop_oneof![3 => special, 1 => any], 0..40)
        .prop_map(|cs| cs.into_iter().collect())
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn serialize_then_parse_is_identity(vars in prop::collection::btree_map(name(), value(), 0..8)) {
        let text = serialize(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let parsed: BTreeMap<String, String> = dedup(parse(&text).unwrap())
            .into_iter()
            .map(|a| (a.key, a.value))
            .collect();
        prop_assert_eq!(parsed, vars);
    }

    #[test]
    fn split_of_quote_is_identity(words in prop::collection::vec(value(), 0..8)) {
        prop_assert_eq!(words_of(&quote(&words)), bytes_of(&words));
    }

    #[test]
    fn split_of_quote_is_identity_for_any_bytes(
        words in prop::collection::vec(prop::collection::vec(1u8.., 0..20), 0..8)
    ) {
        prop_assert_eq!(words_of(&quote(&words)), words);
    }

    #[test]
    fn lone_variable_expands_to_the_split_value(v in value()) {
        let mut expanded = Vec::new();
        expand_word("$X", |n| (n == "X").then_some(v.as_bytes()), |w| expanded.push(w.to_vec()));
        prop_assert_eq!(expanded, words_of(v.as_bytes()));
    }

    #[test]
    fn parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_bytes(&bytes);
    }

    #[test]
    fn later_assignments_win(a in value(), b in value()) {
        let text = format!("{}{}", serialize([("K", a.as_str())]), serialize([("K", b.as_str())]));
        let parsed = dedup(parse(&text).unwrap());
        prop_assert_eq!(parsed.len(), 1);
        prop_assert_eq!(&parsed[0].value, &b);
    }
}
