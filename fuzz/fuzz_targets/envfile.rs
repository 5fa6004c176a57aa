//! The EnvironmentFile= parser on arbitrary bytes: it must never panic, and
//! whatever it accepts must survive serialize → parse unchanged.
#![no_main]

use kubelet_wrapper::envfile::{dedup, parse, parse_bytes, serialize};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(assignments) = parse_bytes(data) else {
        return;
    };
    let vars = dedup(assignments);
    // Keys as parsed can hold '=', whitespace or '#'; only names that a file
    // can carry verbatim round-trip.
    let vars: Vec<_> = vars
        .iter()
        .filter(|a| kubelet_wrapper::envfile::is_valid_name(&a.key))
        .map(|a| (a.key.as_str(), a.value.as_str()))
        .collect();
    let text = serialize(vars.iter().copied());
    let again = parse(&text).expect("serialized text parses");
    let again: Vec<_> = again
        .iter()
        .map(|a| (a.key.as_str(), a.value.as_str()))
        .collect();
    assert_eq!(vars, again);
});
