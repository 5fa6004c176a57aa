//! The ExecStart= word splitter and `$VAR` expansion on arbitrary bytes: no
//! panic, and quoting the words it produces and splitting again gives them
//! back.
#![no_main]

use kubelet_wrapper::split::{expand_word, quote, split};
use libfuzzer_sys::fuzz_target;

/// The words of `value`, collected.
fn words_of(value: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    split(value, |w| out.push(w.to_vec()));
    out
}

fuzz_target!(|data: &[u8]| {
    let words = words_of(data);
    assert_eq!(words_of(&quote(&words)), words);
    // As an ExecStart= word (which is text), with the input itself as every
    // variable's value.
    let Ok(word) = std::str::from_utf8(data) else {
        return;
    };
    let mut expanded = Vec::new();
    expand_word(word, |_| Some(data), |w| expanded.push(w.to_vec()));
    if word.starts_with('$') && !word.starts_with("${") && !word.starts_with("$$") {
        assert!(expanded.is_empty() || expanded == words);
    } else {
        assert_eq!(expanded.len(), 1);
    }
});
