//! A dist directory's SHA256SUMS as `repo --from` parses it.
//! It must refuse bad input with an error: never panic, hang or run out of
//! memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xtask::fuzz::sha256sums(data));
