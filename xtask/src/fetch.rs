//! Upstream inputs: download, verify, cache (or read from `--from DIR`).
//! INTERFACE STUB: the signatures below are the contract used by `dist`.
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::spec::{Arch, Spec};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_spec: &Spec, _args: &Args) -> Result<()> {
    anyhow::bail!("not yet implemented")
}

/// Where upstream files come from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Each source's official `base` URL.
    Official,
    /// A mirror: files at `<url>/<source>/<path>`.
    Mirror(String),
    /// An offline directory: files at `<dir>/<source>/<path>`.
    Dir(PathBuf),
}

/// The verified upstream files for one architecture.
pub struct Upstream {}

/// Makes sure every upstream file of `spec` for `arch` is present and
/// verified (downloading into `cache` what is missing), and returns them.
pub fn ensure(_spec: &Spec, _arch: Arch, _origin: &Origin, _cache: &Path) -> Result<Upstream> {
    todo!()
}

impl Upstream {
    /// The content for `upstream = "<source>/<member>"`: `(file name, path of
    /// the verified content)`. A member is a file's base name or a regular
    /// file inside one of the source's archives; `*` is every member of the
    /// source's archives, sorted by name.
    pub fn resolve(&self, _source: &str, _member: &str) -> Result<Vec<(String, PathBuf)>> {
        todo!()
    }

    /// `<source>/<member>` names that are recorder stand-ins, not the real
    /// program (listed in the `--from` directory's STANDINS file).
    pub fn standins(&self) -> &[String] {
        todo!()
    }
}
