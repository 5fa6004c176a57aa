//! The artifact writers: `deb` (cargo-deb as a library, its data archive
//! from `debpack`), `rpm` (the `rpm` crate), `tarball` (tar + a codec) and
//! `sysext` (a squashfs image, the `backhand` crate), with the codecs of
//! `codec`. Each is a job `write(staged, options, out)`:
//! it reads only what `crate::stage` returned (and the staged files it
//! names), never `pkg/` or the repository, and writes one file through a
//! temp file and a rename.

pub mod codec;
pub mod deb;
pub mod debpack;
pub mod rpm;
pub mod sysext;
pub mod tarball;

use std::path::PathBuf;

use crate::stage::Staged;

/// Who the packages name as their maintainer/packager. A placeholder until
/// the project has a real list; lintian and rpmlint accept it.
pub const MAINTAINER: &str = "kubedist maintainers <kubedist@lists.example.org>";

/// One entry of an archive or image the emitter builds itself (the tarball,
/// the sysext image), by its path inside it.
enum Item {
    Dir,
    Bytes(Vec<u8>, u32),
    File { path: PathBuf, size: u64, mode: u32 },
}

/// What every job is given besides its staged input: the choices of this
/// run, never a file to read.
#[derive(Clone)]
pub struct Options {
    /// The project's home (Cargo.toml's `workspace.package.repository`).
    pub homepage: String,
    /// SOURCE_DATE_EPOCH: every timestamp in every artifact.
    pub epoch: u64,
    /// The codec and level of each format.
    pub codecs: codec::Codecs,
    /// Threads each artifact's encoder may use (the output does not depend
    /// on it).
    pub threads: u32,
    /// `dist --sign`: the key that signs the tarball's SHA256SUMS
    /// (`SHA256SUMS.asc` beside it, made at `epoch`).
    pub signer: Option<std::sync::Arc<crate::keys::RepoKey>>,
}

/// The detached, armoured signature of a `SHA256SUMS` file, beside it.
pub const SUMS_SIGNATURE: &str = "SHA256SUMS.asc";

/// One line of both formats' changelogs.
pub fn changelog_line(pkg: &Staged) -> String {
    format!(
        "{} {} packaged by kubedist (package revision {}).",
        pkg.version_from,
        pkg.upstream_version.replace('~', "-"),
        pkg.revision
    )
}

#[cfg(test)]
mod tests;
