//! An OCI image layout as `dist --from` stages its images (xtask/src/fuzz.rs).
//! It must refuse bad input with an error: never panic, hang or run out of
//! memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xtask::fuzz::images_layout(data));
