//! Upstream release archives (`.tgz`, `.tar.gz`): each verified archive is
//! extracted once into `<cache>/extracted/<sha256>/`, keyed by its digest so
//! that a changed archive can never reuse another's files.
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Whether a file name is one of the archive kinds we unpack.
pub fn is_archive(name: &str) -> bool {
    name.ends_with(".tgz") || name.ends_with(".tar.gz")
}

/// Extracts `archive` (whose sha256 is `sha256`) under `cache/extracted/`
/// unless that was done before, and returns its regular files as
/// `(name inside the archive, path)`, sorted by name.
pub fn extract(archive: &Path, sha256: &str, cache: &Path) -> Result<Vec<(String, PathBuf)>> {
    let parent = cache.join("extracted");
    let dest = parent.join(sha256);
    if !dest.is_dir() {
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        // Extract beside the final place, then rename: an interrupted run
        // leaves no half-extracted tree under the digest's name.
        let temp = TempDir(crate::util::temp_path(&parent.join(sha256))?);
        std::fs::create_dir(&temp.0).with_context(|| format!("creating {}", temp.0.display()))?;
        unpack(archive, &temp.0).with_context(|| archive.display().to_string())?;
        match std::fs::rename(&temp.0, &dest) {
            Ok(()) => std::mem::forget(temp),
            // Another run extracted the same archive meanwhile: same content.
            Err(_) if dest.is_dir() => {}
            Err(e) => {
                return Err(e).with_context(|| format!("renaming {} into place", temp.0.display()))
            }
        }
    }
    let mut members = Vec::new();
    list_files(&dest, &dest, &mut members)?;
    members.sort();
    Ok(members)
}

/// Removes a half-written extraction directory when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Unpacks the regular files and directories of a gzip'd tar into `dest`.
/// Links and special files are skipped: release archives hold plain
/// programs, and a link could point anywhere. A member with an absolute path
/// or `..` is refused outright rather than skipped: such an archive is not a
/// release we should package at all.
pub fn unpack(archive: &Path, dest: &Path) -> Result<()> {
    let file = std::fs::File::open(archive).context("opening the archive")?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for entry in tar.entries().context("reading the archive")? {
        let mut entry = entry.context("reading the archive")?;
        let raw = entry.path().context("reading a member name")?.into_owned();
        let rel = safe_relative(&raw)?;
        let kind = entry.header().entry_type();
        if rel.as_os_str().is_empty() {
            continue; // "./" itself
        }
        let target = dest.join(&rel);
        if kind.is_dir() {
            std::fs::create_dir_all(&target)
                .with_context(|| format!("creating {}", target.display()))?;
        } else if kind.is_file() {
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let executable = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
            write_member(&mut entry, &target, if executable { 0o755 } else { 0o644 })
                .with_context(|| format!("member {}", raw.display()))?;
        }
    }
    Ok(())
}

/// A member's path with `.` dropped; absolute paths and `..` are refused.
fn safe_relative(raw: &Path) -> Result<PathBuf> {
    let mut rel = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) | Component::ParentDir => bail!(
                "member {:?} escapes the extraction directory (absolute path or ..)",
                raw.display().to_string()
            ),
        }
    }
    Ok(rel)
}

fn write_member(entry: &mut impl Read, target: &Path, mode: u32) -> Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(target)
        .with_context(|| format!("creating {}", target.display()))?;
    std::io::copy(entry, &mut out).with_context(|| format!("writing {}", target.display()))?;
    std::fs::set_permissions(target, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", target.display()))
}

fn list_files(top: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .with_context(|| format!("reading {}", path.display()))?;
        if kind.is_dir() {
            list_files(top, &path, out)?;
        } else if kind.is_file() {
            let name = path
                .strip_prefix(top)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            out.push((name, path));
        }
    }
    Ok(())
}
