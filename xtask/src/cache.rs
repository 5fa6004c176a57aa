//! The artifact cache of `cargo xtask dist`: an artifact whose inputs did not
//! change is copied from here instead of being compressed again, and its
//! SBOM instead of being read back from it (an entry of its own, whose key
//! adds what the document says of the artifact: `dist::jobs`).
//!
//! Content-addressed: an entry's key is the SHA-256 of everything that could
//! change the artifact's bytes: this xtask program itself (its version and
//! the bytes of its executable, so any change to the code or its libraries
//! misses) and what the caller describes: the format, its codec and level,
//! SOURCE_DATE_EPOCH, and the staged input (metadata, scripts and content
//! digests; stage reads every file an artifact holds, so nothing else can
//! change one). Thread counts are not in it: they do not change a byte.
//!
//! Layout: `<dir>/<key>/<artifact name>` and `<dir>/<key>/sha256` (one
//! `sha256sum` line naming the artifact). Entries are written into a temp
//! directory and renamed into place, so a reader never sees half an entry; a
//! hit is copied out and its SHA-256 checked on the way, and a damaged entry
//! is dropped and rebuilt. After a run, the least recently used entries
//! beyond a size budget are removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::digest::{copy_hashing, sha256_file};
use crate::util::hex;

pub struct Cache {
    dir: PathBuf,
    /// Digest of the program.
    base: Vec<u8>,
}

/// An artifact copied out of the cache: where it is now and its SHA-256.
pub struct Hit {
    pub path: PathBuf,
    pub sha256: String,
}

impl Cache {
    /// The cache in `dir`.
    pub fn open(dir: &Path) -> Result<Cache> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut h = Sha256::new();
        h.update(concat!("kubedist xtask ", env!("CARGO_PKG_VERSION"), "\n"));
        let exe = std::env::current_exe().context("finding the xtask executable")?;
        h.update(crate::digest::sha256_file(&exe)?);
        Ok(Cache {
            dir: dir.to_path_buf(),
            base: h.finalize().to_vec(),
        })
    }

    /// The key of an artifact described by `parts`.
    pub fn key(&self, parts: &str) -> String {
        let mut h = Sha256::new();
        h.update(&self.base);
        h.update(parts.as_bytes());
        hex(&h.finalize())
    }

    /// Copies the artifact of entry `key` into `out_dir`, or `None` when
    /// there is no such entry (or a damaged one, which is removed).
    pub fn fetch(&self, key: &str, out_dir: &Path) -> Result<Option<Hit>> {
        let entry = self.dir.join(key);
        let Ok(line) = fs::read_to_string(entry.join("sha256")) else {
            return Ok(None);
        };
        let name = match line.trim_end().split_once("  ") {
            Some((_, n)) if !n.contains('/') && !n.starts_with('.') => n,
            _ => {
                let _ = fs::remove_dir_all(&entry);
                return Ok(None);
            }
        };
        let expected = &line[..64.min(line.len())];
        let src = entry.join(name);
        let dest = out_dir.join(name);
        let mut sha = String::new();
        let copied = crate::util::write_atomic(&dest, 0o644, |out| {
            let mut input =
                fs::File::open(&src).with_context(|| format!("reading {}", src.display()))?;
            sha = copy_hashing(&mut input, &src, out, &dest)?.0;
            Ok(())
        });
        match copied {
            Ok(()) if sha == expected => {
                // Recently used: kept longest by `prune`.
                touch(&entry.join("sha256"));
                Ok(Some(Hit {
                    path: dest,
                    sha256: sha,
                }))
            }
            other => {
                let _ = fs::remove_file(&dest);
                if other.is_ok() {
                    eprintln!("    cache: {} is damaged; rebuilding", entry.display());
                    let _ = fs::remove_dir_all(&entry);
                }
                Ok(None)
            }
        }
    }

    /// Records the artifact at `path` under `key` and returns its SHA-256.
    /// Only reading the artifact can fail; a cache that cannot be written
    /// is warned about.
    pub fn store(&self, key: &str, path: &Path) -> Result<String> {
        let sha = sha256_file(path)?;
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?;
        let entry = self.dir.join(key);
        if entry.exists() {
            return Ok(sha);
        }
        let tmp = crate::util::temp_path(&entry)?;
        let result = (|| {
            fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            let copy = tmp.join(name);
            // A hard link costs nothing; the digest check on every hit guards
            // against the output file being changed in place later.
            if fs::hard_link(path, &copy).is_err() {
                fs::copy(path, &copy)
                    .with_context(|| format!("copying {} to {}", path.display(), copy.display()))?;
            }
            fs::write(
                tmp.join("sha256"),
                format!("{sha}  {}\n", name.to_string_lossy()),
            )
            .with_context(|| format!("writing {}", tmp.display()))?;
            fs::rename(&tmp, &entry)
                .with_context(|| format!("renaming {} to {}", tmp.display(), entry.display()))
        })();
        if let Err(e) = result {
            let _ = fs::remove_dir_all(&tmp);
            // Another run may have stored the same entry meanwhile; any other
            // failure only costs the next run a rebuild.
            if !entry.exists() {
                eprintln!("warning: artifact cache: {e:#}");
            }
        }
        Ok(sha)
    }

    /// Removes the least recently used entries, never one of `keep`, until
    /// the cache holds at most `budget` bytes.
    pub fn prune(&self, keep: &[String], budget: u64) -> Result<()> {
        let mut entries = Vec::new();
        let mut total = 0u64;
        let list =
            fs::read_dir(&self.dir).with_context(|| format!("reading {}", self.dir.display()))?;
        for e in list.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !e.path().is_dir() {
                continue;
            }
            let mut size = 0;
            for f in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                size += f.metadata().map_or(0, |m| m.len());
            }
            let used = fs::metadata(e.path().join("sha256"))
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            total += size;
            entries.push((used, size, name));
        }
        entries.sort();
        for (_, size, name) in entries {
            if total <= budget {
                break;
            }
            if keep.contains(&name) {
                continue;
            }
            let path = self.dir.join(&name);
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
            total -= size;
        }
        Ok(())
    }
}

fn touch(path: &Path) {
    if let Ok(f) = fs::OpenOptions::new().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_gives_the_same_bytes_and_a_damaged_entry_is_rebuilt() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(&tmp.path().join("cache")).unwrap();
        let key = cache.key("deb\nxz:6\nsomething");
        assert_ne!(key, cache.key("deb\nxz:7\nsomething"));

        let built = tmp.path().join("built");
        fs::create_dir(&built).unwrap();
        let art = built.join("a.deb");
        fs::write(&art, b"artifact bytes").unwrap();
        let out = tmp.path().join("out");
        fs::create_dir(&out).unwrap();
        assert!(cache.fetch(&key, &out).unwrap().is_none());
        let sha = cache.store(&key, &art).unwrap();
        let hit = cache.fetch(&key, &out).unwrap().unwrap();
        assert_eq!(hit.path, out.join("a.deb"));
        assert_eq!(hit.sha256, sha);
        assert_eq!(fs::read(&hit.path).unwrap(), b"artifact bytes");

        // Changed in place through the hard link: the entry no longer
        // matches its digest, so it is dropped.
        fs::write(&art, b"changed").unwrap();
        fs::remove_file(&hit.path).unwrap();
        assert!(cache.fetch(&key, &out).unwrap().is_none());
        assert!(!tmp.path().join("cache").join(&key).exists());
    }

    #[test]
    fn prune_keeps_the_budget_and_the_entries_in_use() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::open(&tmp.path().join("cache")).unwrap();
        let mut keys = Vec::new();
        for i in 0..4 {
            let art = tmp.path().join(format!("a{i}.rpm"));
            fs::write(&art, vec![0u8; 1000]).unwrap();
            let key = cache.key(&i.to_string());
            cache.store(&key, &art).unwrap();
            keys.push(key);
        }
        cache.prune(&keys[..1], 2200).unwrap();
        let left: Vec<bool> = keys
            .iter()
            .map(|k| tmp.path().join("cache").join(k).exists())
            .collect();
        assert!(left[0], "in use");
        assert_eq!(left.iter().filter(|x| **x).count(), 2, "{left:?}");
    }
}
