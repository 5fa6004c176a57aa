//! A run publishes as one transaction. The next tree is built beside the
//! published one, as `.NAME.kubedist-next` in REPO_DIR's parent, from hard
//! links to every file of the published tree (so it costs only what the
//! run changes: every writer in `repo/` replaces a file by a new one,
//! never in place), and is exchanged with REPO_DIR in one atomic rename.
//!
//! A reader sees the old tree or the new one, never a mix: a web server
//! resolves each request's path in one of them, and a reader that has
//! entered REPO_DIR (an `rsync REPO_DIR/ …` walking it) stays in the tree
//! it entered, which is kept, as `.NAME.kubedist-prev`, until the next run.
//! A run killed at any point leaves the published tree whole; the next run
//! removes what the killed one left and starts again. The lock
//! `.NAME.kubedist-lock` beside it keeps two runs apart.

use std::fs::{self, File};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::files;

/// The lock file of repositories made before runs were transactions: a
/// stale one inside the tree is not carried over.
const OLD_LOCK_FILE: &str = ".kubedist-repo.lock";

pub struct Transaction {
    /// REPO_DIR, resolved: the directory readers use.
    target: PathBuf,
    /// The tree this run writes.
    next: PathBuf,
    /// Where the tree this run replaces is kept for readers still in it.
    prev: PathBuf,
    lock: PathBuf,
    _held: File,
    committed: bool,
}

impl Transaction {
    /// Locks the repository `out` and lays out the next tree: a copy of the
    /// published one in hard links, or an empty directory for a new
    /// repository.
    pub fn begin(out: &Path) -> Result<Transaction> {
        let target = resolve(out)?;
        let sibling = |what: &str| -> Result<PathBuf> {
            let name = target
                .file_name()
                .with_context(|| format!("{}: not a directory name", target.display()))?;
            Ok(target.with_file_name(format!(".{}.kubedist-{what}", name.to_string_lossy())))
        };
        let lock = sibling("lock")?;
        let held = files::lock(&lock)?;
        let next = sibling("next")?;
        let transaction = Transaction {
            prev: sibling("prev")?,
            target,
            next,
            lock,
            _held: held,
            committed: false,
        };
        // Left by a run that was killed before its switch: never published.
        remove_tree(&transaction.next)?;
        match fs::symlink_metadata(&transaction.target) {
            Ok(meta) if meta.is_dir() => link_tree(&transaction.target, &transaction.next)?,
            Ok(_) => bail!("{}: not a directory", transaction.target.display()),
            Err(_) => files::create_dir(&transaction.next)?,
        }
        Ok(transaction)
    }

    /// The tree this run writes.
    pub fn dir(&self) -> &Path {
        &self.next
    }

    /// REPO_DIR, resolved.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Makes the next tree the published one, in one step.
    pub fn commit(mut self) -> Result<()> {
        // Every file was synced as it was written; the directory entries
        // reach the disk before the switch that makes them visible.
        let dir = File::open(&self.next)
            .with_context(|| format!("{}: cannot open", self.next.display()))?;
        rustix::fs::syncfs(&dir)
            .with_context(|| format!("{}: cannot sync", self.next.display()))?;
        let replaced = crate::util::exchange_dir(&self.next, &self.target)?;
        // Published: what follows only keeps the replaced tree for readers
        // still in it, and a failure there is no failure of the run.
        self.committed = true;
        if replaced {
            let kept = remove_tree(&self.prev).and_then(|()| {
                fs::rename(&self.next, &self.prev).with_context(|| {
                    format!(
                        "renaming {} to {}",
                        self.next.display(),
                        self.prev.display()
                    )
                })
            });
            if let Err(e) = kept {
                eprintln!("warning: the replaced tree was not kept for readers in it: {e:#}");
            }
        }
        Ok(())
    }
}

impl Drop for Transaction {
    /// A run that ends without its switch leaves the repository as it was:
    /// its next tree is removed, and so is the lock of a repository that
    /// does not exist.
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.next);
            if fs::symlink_metadata(&self.target).is_err() {
                let _ = fs::remove_file(&self.lock);
            }
        }
    }
}

/// `out` as an absolute path with its links resolved (its parent's, when
/// it does not exist yet), so that the exchange replaces the real directory.
fn resolve(out: &Path) -> Result<PathBuf> {
    if fs::symlink_metadata(out).is_ok() {
        return out
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve", out.display()));
    }
    let name = out
        .file_name()
        .with_context(|| format!("{}: not a directory name", out.display()))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    files::create_dir(parent)?;
    Ok(parent
        .canonicalize()
        .with_context(|| format!("{}: cannot resolve", parent.display()))?
        .join(name))
}

fn remove_tree(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(_) => fs::remove_dir_all(dir)
            .with_context(|| format!("{}: cannot remove what a killed run left", dir.display())),
        Err(_) => Ok(()),
    }
}

/// Recreates the tree `from` at `to`: directories with their modes, files
/// as hard links, symbolic links as they are.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    let mode = fs::metadata(from)
        .with_context(|| format!("{}: cannot stat", from.display()))?
        .permissions()
        .mode();
    fs::DirBuilder::new()
        .mode(mode & 0o7777)
        .create(to)
        .with_context(|| format!("{}: cannot create directory", to.display()))?;
    crate::util::set_mode(to, mode & 0o7777)?;
    let entries = fs::read_dir(from).with_context(|| format!("{}: cannot list", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list", from.display()))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        if crate::util::is_temp_name(&name_str) || name_str == OLD_LOCK_FILE {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        let kind = entry
            .file_type()
            .with_context(|| format!("{}: cannot stat", src.display()))?;
        if kind.is_dir() {
            link_tree(&src, &dst)?;
        } else if kind.is_file() {
            fs::hard_link(&src, &dst).with_context(|| {
                format!(
                    "{}: cannot link to {} (the repository's parent must be on its filesystem)",
                    src.display(),
                    dst.display()
                )
            })?;
        } else if kind.is_symlink() {
            let link = fs::read_link(&src)
                .with_context(|| format!("{}: cannot read link", src.display()))?;
            std::os::unix::fs::symlink(&link, &dst)
                .with_context(|| format!("{}: cannot create link", dst.display()))?;
        } else {
            bail!("{}: not a file, directory or link", src.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    out.push((rel, fs::read(&path).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_published_tree_changes_only_at_commit_and_stays_whole_for_a_reader_in_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        fs::create_dir_all(repo.join("dists")).unwrap();
        fs::write(repo.join("dists/InRelease"), "old").unwrap();
        fs::write(repo.join("pool.deb"), "deb").unwrap();
        let before = listing(&repo);
        // A reader that entered the tree before the switch.
        let entered = File::open(&repo).unwrap();

        let run = Transaction::begin(&repo).unwrap();
        crate::util::write_bytes_atomic(&run.dir().join("dists/InRelease"), b"new", 0o644).unwrap();
        assert_eq!(listing(&repo), before, "visible before the switch");
        run.commit().unwrap();

        assert_eq!(fs::read(repo.join("dists/InRelease")).unwrap(), b"new");
        assert_eq!(fs::read(repo.join("pool.deb")).unwrap(), b"deb");
        let fd = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&entered)
        );
        let old = fs::read_link(fd).unwrap();
        assert_eq!(listing(&old), before, "the tree a reader entered");
    }

    #[test]
    fn a_run_that_ends_without_commit_leaves_nothing_and_a_killed_one_is_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        {
            let run = Transaction::begin(&repo).unwrap();
            fs::write(run.dir().join("x"), "x").unwrap();
        }
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0, "no trace");

        fs::create_dir(&repo).unwrap();
        fs::write(repo.join("a"), "a").unwrap();
        // What a run killed before its switch leaves.
        let stale = tmp.path().join(".repo.kubedist-next");
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join("half"), "h").unwrap();
        let run = Transaction::begin(&repo).unwrap();
        assert_eq!(listing(run.dir()), listing(&repo));
        run.commit().unwrap();
        assert!(!stale.exists());
        assert_eq!(listing(&repo), vec![("a".to_string(), b"a".to_vec())]);
    }

    #[test]
    fn two_runs_at_once_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let _first = Transaction::begin(&repo).unwrap();
        let err = Transaction::begin(&repo).err().unwrap().to_string();
        assert!(err.contains("another"), "{err}");
    }
}
