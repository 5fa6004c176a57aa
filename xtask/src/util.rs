//! The small helpers every module uses, each written once: files and trees
//! written whole or not at all (one temp-name rule), hex, SOURCE_DATE_EPOCH
//! and RFC 2822 dates. It imports nothing from the crate: every other module
//! sits above it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

/// Opens (creating, with `mode`) the lock file `path` and takes its
/// exclusive lock, held until the file is dropped: waiting for its holder
/// when `wait`, else failing at once (`WouldBlock`).
pub fn lock_file(path: &Path, mode: u32, wait: bool) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .open(path)?;
    use rustix::fs::FlockOperation::{LockExclusive, NonBlockingLockExclusive};
    rustix::fs::flock(
        &file,
        if wait {
            LockExclusive
        } else {
            NonBlockingLockExclusive
        },
    )?;
    Ok(file)
}

/// The temp name of `path`: `.NAME.tmp-PID-N` beside it. Hidden, so a
/// listing of `*.deb`, `*.rpm` or `*.tar.gz` never picks one up; the same
/// directory, so the final rename is atomic; unique per process and call,
/// so concurrent writers never share one.
pub fn temp_path(path: &Path) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(path.with_file_name(format!(
        ".{}.tmp-{}-{n}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Whether `name` is one [`temp_path`] makes: a file or staging directory
/// a run was writing, never a finished one.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// A file being written under its temp name; removed when dropped unless
/// renamed into place with [`TempFile::persist`].
pub struct TempFile {
    path: PathBuf,
    kept: bool,
}

impl TempFile {
    /// A new, empty temp file for `dest` with `mode` (never an existing file
    /// or a link: it is created exclusively).
    pub fn create(dest: &Path, mode: u32) -> Result<(TempFile, File)> {
        let path = temp_path(dest)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let temp = TempFile { path, kept: false };
        // The umask may have narrowed the mode at creation.
        set_mode(&temp.path, mode)?;
        Ok((temp, file))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file to `dest` (the same directory: atomic).
    pub fn persist(mut self, dest: &Path) -> Result<()> {
        fs::rename(&self.path, dest)
            .with_context(|| format!("renaming {} to {}", self.path.display(), dest.display()))?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Writes `path` whole or not at all: `fill` writes a fresh temp file
/// beside it, which is synced, given `mode` and renamed over `path`. On an
/// error the temp file is removed and `path` is as it was. Missing parent
/// directories are created.
pub fn write_atomic(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let (temp, mut file) = TempFile::create(path, mode)?;
    fill(&mut file)?;
    file.flush()
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", temp.path().display()))?;
    temp.persist(path)
}

/// [`write_atomic`] of `bytes`.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_atomic(path, mode, |f| {
        f.write_all(bytes)
            .with_context(|| format!("writing {}", path.display()))
    })
}

/// Puts the finished tree `staged` in the place of the directory `target`
/// (same filesystem) in one step, and removes the old tree: see
/// [`exchange_dir`].
pub fn replace_dir(staged: &Path, target: &Path) -> Result<()> {
    if exchange_dir(staged, target)? {
        fs::remove_dir_all(staged)
            .with_context(|| format!("removing the replaced tree {}", staged.display()))?;
    }
    Ok(())
}

/// Puts the finished tree `staged` in the place of the directory `target`
/// (same filesystem) in one step: an atomic exchange when `target` exists
/// (readers see the old tree or the new one, never a mix), a rename
/// otherwise. Returns whether the old tree is now at `staged`.
pub fn exchange_dir(staged: &Path, target: &Path) -> Result<bool> {
    if fs::symlink_metadata(target).is_err() {
        fs::rename(staged, target)
            .with_context(|| format!("renaming {} to {}", staged.display(), target.display()))?;
        return Ok(false);
    }
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, staged, CWD, target, RenameFlags::EXCHANGE) {
        Ok(()) => {}
        // Filesystems without RENAME_EXCHANGE: three renames, a short
        // window in which `target` is missing (never a mix).
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            let old = temp_path(target)?;
            fs::rename(target, &old)
                .and_then(|()| fs::rename(staged, target))
                .and_then(|()| fs::rename(&old, staged))
                .with_context(|| format!("replacing {}", target.display()))?;
        }
        Err(rustix::io::Errno::BUSY) => bail!(
            "{}: cannot be replaced as a whole: it is a mount point (use a directory inside it)",
            target.display()
        ),
        Err(e) => bail!(
            "replacing {} with {}: {e}",
            target.display(),
            staged.display()
        ),
    }
    Ok(true)
}

pub fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The time every artifact records: `SOURCE_DATE_EPOCH`, or else the time of
/// the checkout's HEAD commit (the same in every checkout of that commit).
/// Never "now": that would make every build differ.
pub fn source_date_epoch(root: &Path) -> Result<u64> {
    if let Some(epoch) = source_date_epoch_var()? {
        return Ok(epoch);
    }
    let output = std::process::Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(root)
        .output();
    let committed = match output {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().parse().ok(),
        _ => None,
    };
    committed.with_context(|| {
        format!(
            "SOURCE_DATE_EPOCH is not set and {} has no git commit to take the time from: set SOURCE_DATE_EPOCH",
            root.display()
        )
    })
}

/// `SOURCE_DATE_EPOCH` if it is set. A repository's publication date uses
/// it with "now" as the fallback (a Release file's `Valid-Until` counts from
/// it, so an old commit's time would publish an expired repository).
pub fn source_date_epoch_var() -> Result<Option<u64>> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .with_context(|| format!("SOURCE_DATE_EPOCH={v:?} is not a number of seconds")),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(e).context("SOURCE_DATE_EPOCH"),
    }
}

/// `Tue, 14 Nov 2023 22:13:20 +0000`: RFC 2822, as Debian changelogs want
/// and apt reads in Release files.
pub fn rfc2822(epoch: u64) -> String {
    let secs = i64::try_from(epoch).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format("%a, %d %b %Y %H:%M:%S +0000")
        .to_string()
}

// Where the xtask runs.

/// `SOURCE_DATE_EPOCH` as RFC 3339 in UTC (`2023-11-14T22:13:20Z`).
pub fn rfc3339(epoch: u64) -> Result<String> {
    let secs = i64::try_from(epoch)
        .map_err(|_| anyhow::anyhow!("SOURCE_DATE_EPOCH {epoch}: too large"))?;
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .ok_or_else(|| anyhow::anyhow!("SOURCE_DATE_EPOCH {epoch}: out of range"))
}

/// The workspace root: the xtask always works on the checkout it was built from.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo that runs us (`CARGO`), else the one on PATH.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Whether `tool` is an executable file in one of PATH's directories.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// This user's cache of kubedist, kept across checkouts:
/// `$XDG_CACHE_HOME/kubedist`, else `~/.cache/kubedist`.
pub fn user_cache_dir() -> Result<PathBuf> {
    Ok(match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) => PathBuf::from(dir).join("kubedist"),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?)
            .join(".cache/kubedist"),
    })
}

/// Whether we run as root (the uid of /proc/self is ours; no libc call).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_render_like_debian_changelogs() {
        assert_eq!(rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc2822(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 +0000");
        assert_eq!(rfc2822(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    #[test]
    fn hex_is_lower_case() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }

    #[test]
    fn temp_names_are_hidden_unique_and_beside() {
        let a = temp_path(Path::new("/out/kubelet_1_amd64.deb")).unwrap();
        let b = temp_path(Path::new("/out/kubelet_1_amd64.deb")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/out")));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".kubelet_1_amd64.deb.tmp-"), "{name}");
        assert!(is_temp_name(name));
        assert!(!is_temp_name("kubelet_1_amd64.deb") && !is_temp_name(".kubedist-repo-state.json"));
    }

    #[test]
    fn a_failed_write_leaves_nothing_and_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_bytes_atomic(&path, b"old", 0o600).unwrap();
        let err = write_atomic(&path, 0o644, |f| {
            f.write_all(b"half")?;
            bail!("disk full")
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn replace_dir_swaps_a_tree_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("repo");
        let staged = dir.path().join("staged");
        fs::create_dir(&target).unwrap();
        write_bytes_atomic(&target.join("old"), b"1", 0o644).unwrap();
        fs::create_dir(&staged).unwrap();
        write_bytes_atomic(&staged.join("new"), b"2", 0o644).unwrap();
        replace_dir(&staged, &target).unwrap();
        assert!(!staged.exists());
        assert!(!target.join("old").exists());
        assert_eq!(fs::read(target.join("new")).unwrap(), b"2");
    }
}
