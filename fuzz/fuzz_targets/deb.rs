//! A .deb as `repo --from` reads it: control member, control file, relations.
//! It must refuse bad input with an error: never panic, hang or run out of
//! memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xtask::fuzz::deb(data));
