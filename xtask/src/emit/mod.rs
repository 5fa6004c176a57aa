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
pub mod oci;
pub mod rpm;
pub mod sysext;
pub mod tarball;

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::stage::Staged;

/// Who the packages name as their maintainer/packager. A placeholder until
/// the project has a real list; lintian and rpmlint accept it.
pub const MAINTAINER: &str = "kubedist maintainers <kubedist@lists.example.org>";

/// One entry of an archive or image the emitter builds itself (the tarball,
/// the sysext image, the installer image's layers), by its path inside it.
enum Item {
    Dir(u32),
    Bytes(Vec<u8>, u32),
    File { path: PathBuf, size: u64, mode: u32 },
    Symlink(String),
}

/// Adds the directories above every path of `items` (`a/b/c` → `a`, `a/b`)
/// that it does not hold yet, mode 0755. Paths are relative, without a
/// trailing `/`, so that a directory sorts before what it holds.
fn add_parent_dirs(items: &mut BTreeMap<String, Item>) {
    let parents: Vec<String> = items
        .keys()
        .flat_map(|k| {
            let parts: Vec<&str> = k.split('/').collect();
            (1..parts.len()).map(move |n| parts[..n].join("/"))
        })
        .collect();
    for dir in parents {
        items.entry(dir).or_insert(Item::Dir(0o755));
    }
}

/// Appends `item` to a tar stream as `path`: root-owned by number, mtime
/// `mtime`, nothing else (no names, no extended headers), so that the same
/// items give the same bytes.
fn append_tar<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    item: &Item,
    mtime: u64,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    let result = match item {
        Item::Dir(mode) => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(*mode);
            header.set_size(0);
            tar.append_data(&mut header, format!("{path}/"), io::empty())
        }
        Item::Bytes(data, mode) => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            header.set_size(data.len() as u64);
            tar.append_data(&mut header, path, data.as_slice())
        }
        Item::File {
            path: src,
            size,
            mode,
        } => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            header.set_size(*size);
            let file = fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
            // take(): a file that grew since staging must not corrupt the
            // archive; a shorter one fails in append_data.
            tar.append_data(&mut header, path, file.take(*size))
        }
        Item::Symlink(target) => {
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            tar.append_link(&mut header, path, target)
        }
    };
    result.with_context(|| format!("adding {path}"))
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
