//! The ExecStart= word splitter and `$VAR` expansion on arbitrary text: no
//! panic, and quoting the words it produces and splitting again gives them
//! back.
#![no_main]

use kubelet_wrapper::split::{expand_word, quote, split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &str| {
    let words = split(data);
    assert_eq!(split(&quote(&words)), words);
    // As an ExecStart= word, with the input itself as every variable's value.
    let expanded = expand_word(data, |_| Some(data));
    if data.starts_with('$') && !data.starts_with("${") && !data.starts_with("$$") {
        assert!(expanded.is_empty() || expanded == words);
    } else {
        assert_eq!(expanded.len(), 1);
    }
});
