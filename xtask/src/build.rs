//! Builds this workspace's static binaries (kubelet-wrapper, the test
//! stand-in) for a target architecture.
//! INTERFACE STUB: the signature below is the contract used by `dist`.
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::spec::Arch;

/// Builds binary `bin` of workspace package `package` as a static musl
/// executable for `arch`, reproducibly (paths remapped), and returns its path.
pub fn static_binary(_root: &Path, _package: &str, _bin: &str, _arch: Arch) -> Result<PathBuf> {
    todo!()
}
