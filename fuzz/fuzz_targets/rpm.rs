//! An rpm's headers as `repo --from` reads them, through the rpm crate.
//! It must refuse bad input with an error: never panic, hang or run out of
//! memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xtask::fuzz::rpm(data));
