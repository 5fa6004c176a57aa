//! File operations with the guarantees a published tree needs: every file
//! appears whole (temp file + rename), directories are swapped in with one
//! rename, modes are explicit.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, Result};

pub const FILE_MODE: u32 = 0o644;
pub const DIR_MODE: u32 = 0o755;

pub use crate::digest::Digests;

/// `mkdir -p` with mode 0755 for the directories it creates.
pub fn create_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .with_context(|| format!("{}: cannot create directory", dir.display()))
}

/// Copies `src` to `dst` atomically, with `mode`.
pub fn copy_atomic(src: &Path, dst: &Path, mode: u32) -> Result<()> {
    let mut input = File::open(src).with_context(|| format!("{}: cannot open", src.display()))?;
    crate::util::write_atomic(dst, mode, |out| {
        io::copy(&mut input, out)
            .map(drop)
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))
    })
}

/// Sets a file's modification time (createrepo_c records it in the
/// metadata; a fixed one keeps the metadata reproducible).
pub fn set_mtime(path: &Path, secs: u64) -> Result<()> {
    let file = File::options()
        .write(true)
        .open(path)
        .with_context(|| format!("{}: cannot open", path.display()))?;
    file.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .with_context(|| format!("{}: cannot set modification time", path.display()))
}

/// A fresh, empty staging directory beside `target` (same filesystem, so
/// it can be renamed into place).
pub fn staging_dir(target: &Path) -> Result<PathBuf> {
    let staging = crate::util::temp_path(target)?;
    if staging.exists() {
        // Left behind by a run that was killed; never published.
        fs::remove_dir_all(&staging).with_context(|| {
            format!(
                "{}: cannot remove stale staging directory",
                staging.display()
            )
        })?;
    }
    create_dir(&staging)?;
    Ok(staging)
}

/// Holds an exclusive lock on `path` until dropped; fails at once when
/// another run holds it.
pub fn lock(path: &Path) -> Result<File> {
    crate::util::lock_file(path, FILE_MODE, false).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => anyhow::anyhow!(
            "{}: another `cargo xtask repo` is writing this repository",
            path.display()
        ),
        _ => anyhow::Error::new(e).context(format!("{}: cannot open lock file", path.display())),
    })
}

/// Puts the metadata tree `staged` in the place of `target` and removes
/// `staged`. The files `carried` (paths relative to `target`: what its
/// signed top file names) are kept in the new tree, so a client that read
/// that top file (InRelease, repomd.xml) just before the switch still finds
/// them; one generation is kept, as each run carries only what the replaced
/// top file names. Metadata whose `signed` files are the published ones,
/// byte for byte (a run that changes nothing), leaves `target` as it is.
pub fn swap_metadata(
    staged: &Path,
    target: &Path,
    signed: &[&str],
    carried: &[String],
) -> Result<()> {
    let swapped = carry_over(target, staged, carried).and_then(|()| {
        if same_files(staged, target, signed) {
            fs::remove_dir_all(staged)
                .with_context(|| format!("{}: cannot remove", staged.display()))
        } else {
            crate::util::replace_dir(staged, target)
        }
    });
    if swapped.is_err() {
        let _ = fs::remove_dir_all(staged);
    }
    swapped
}

/// Hard-links each of `rel_paths` that `old` has and `new` has not from
/// `old` into `new`.
fn carry_over(old: &Path, new: &Path, rel_paths: &[String]) -> Result<()> {
    for rel in rel_paths {
        let (from, to) = (old.join(rel), new.join(rel));
        if rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
            || !from.is_file()
            || fs::symlink_metadata(&to).is_ok()
        {
            continue;
        }
        create_dir(to.parent().context("carried file has no parent")?)?;
        fs::hard_link(&from, &to)
            .with_context(|| format!("{}: cannot link to {}", from.display(), to.display()))?;
    }
    Ok(())
}

/// Whether `a` and `b` both hold each of `names`, with the same bytes.
fn same_files(a: &Path, b: &Path, names: &[&str]) -> bool {
    names.iter().all(
        |name| match (fs::read(a.join(name)), fs::read(b.join(name))) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
    )
}

/// Files under `dir` (recursively) whose name ends with `suffix`, sorted.
/// A missing `dir` holds none.
pub fn find_files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    if dir.exists() {
        walk(dir, suffix, &mut found)?;
    }
    found.sort();
    Ok(found)
}

fn walk(dir: &Path, suffix: &str, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue; // staging and temp files of this or an interrupted run
        }
        let kind = entry
            .file_type()
            .with_context(|| format!("{}: cannot stat", path.display()))?;
        if kind.is_dir() {
            walk(&path, suffix, found)?;
        } else if kind.is_file() && name.ends_with(suffix) {
            found.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("lock");
        let _held = lock(&path).unwrap();
        let err = lock(&path).unwrap_err().to_string();
        assert!(err.contains("another"), "{err}");
    }
}
