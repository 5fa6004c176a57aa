//! kubelet-wrapper: see README.md, or run `kubelet-wrapper --wrapper-help`.
//!
//! The wrapper lives for a fraction of a millisecond between two `execve`s,
//! so its start-up is kept to what it needs (docs/performance.md): C's
//! `main` instead of Rust's runtime set-up (a signal stack, SIGSEGV and
//! SIGPIPE handlers, a check of fds 0-2: signal dispositions pass to the
//! kubelet as the supervisor set them, as with a direct start), and an arena
//! allocator.
#![cfg_attr(not(test), no_main)]

mod arena;

#[cfg(not(test))]
use std::ffi::{c_char, c_int, CStr, OsStr, OsString};
#[cfg(not(test))]
use std::os::unix::ffi::OsStrExt;

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: arena::Arena = arena::Arena::new();

/// The program's entry, called by the C runtime.
///
/// # Safety
/// `argv` holds `argc` NUL-terminated strings, as the C runtime passes them.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let args: Vec<OsString> = (1..usize::try_from(argc).unwrap_or(0))
        .map(|i| unsafe { CStr::from_ptr(*argv.add(i)) })
        .map(|arg| OsStr::from_bytes(arg.to_bytes()).to_os_string())
        .collect();
    match kubelet_wrapper::run(&args) {
        Ok(code) => code,
        Err(e) => {
            kubelet_wrapper::log(&e.to_string());
            e.code()
        }
    }
}
