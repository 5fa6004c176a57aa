//! The repository's record of the package files it serves,
//! `REPO/.kubedist-repo-state.json`, so that adding a release reads only
//! the new files: per `.deb` and `.rpm` (by path below REPO), its size and
//! modification time when recorded and what later runs need of it: a deb's
//! control paragraph and digests (the Packages index, the closure gate), an
//! rpm's dependency data (the closure gate) and who signed it.
//!
//! A record is used only while its file's size and modification time still
//! match, the test createrepo_c's `--update` makes; any other file is read
//! afresh and its record replaced, so a changed file is never published
//! with stale digests. A missing state file (a repository written before
//! there was one) or an unreadable one is rebuilt from the files. It is
//! written after the metadata: a run that fails midway leaves the records
//! of the files it did not finish unwritten, and the next run reads them.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rpm::PackageMetadata;
use serde::{Deserialize, Serialize};

use super::closure::{self, Pkg};
use super::debfile::{self, Control};
use super::files::{self, Digests};
use crate::spec::Family;

/// The state file, below the repository root (a dot file: never served as
/// a package, never listed as an architecture).
pub const FILE: &str = ".kubedist-repo-state.json";

/// Bumped when a record's meaning changes: an older state is rebuilt.
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Saved {
    format: u32,
    files: BTreeMap<String, Record>,
}

#[derive(Clone, Serialize, Deserialize)]
struct Record {
    size: u64,
    /// Seconds and nanoseconds.
    mtime: (i64, i64),
    #[serde(flatten)]
    what: What,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum What {
    Deb {
        digests: Digests,
        control: Control,
    },
    Rpm {
        pkg: Pkg,
        /// Fingerprints of the keys whose signatures it carries, lowercase hex.
        signers: Vec<String>,
    },
}

pub struct State {
    root: PathBuf,
    files: BTreeMap<String, Record>,
    /// Package files read this run (the records could not answer).
    pub reads: usize,
}

impl State {
    /// The state of the repository `root` (which need not exist yet).
    pub fn load(root: &Path) -> Result<State> {
        let path = root.join(FILE);
        let files = match fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
            Ok(bytes) => match serde_json::from_slice::<Saved>(&bytes) {
                Ok(saved) if saved.format == FORMAT => saved.files,
                _ => {
                    eprintln!(
                        "note: {}: unreadable or of another format; rebuilding it from the package files",
                        path.display()
                    );
                    BTreeMap::new()
                }
            },
        };
        Ok(State {
            root: root.to_path_buf(),
            files,
            reads: 0,
        })
    }

    /// A `.deb`'s control paragraph and digests.
    pub fn deb(&mut self, path: &Path) -> Result<(Control, Digests)> {
        match self.get(path, Family::Deb)? {
            What::Deb { digests, control } => Ok((control, digests)),
            What::Rpm { .. } => unreachable!("get returns the family asked for"),
        }
    }

    /// An rpm's dependency data and the fingerprints of its signers.
    pub fn rpm(&mut self, path: &Path) -> Result<(Pkg, Vec<String>)> {
        match self.get(path, Family::Rpm)? {
            What::Rpm { pkg, signers } => Ok((pkg, signers)),
            What::Deb { .. } => unreachable!("get returns the family asked for"),
        }
    }

    /// What the closure gate needs of a package file.
    pub fn pkg(&mut self, family: Family, path: &Path) -> Result<Pkg> {
        match family {
            Family::Deb => closure::deb_pkg(path, &self.deb(path)?.0),
            Family::Rpm => Ok(self.rpm(path)?.0),
        }
    }

    /// The record of `path` when it still matches the file, else the file
    /// read (and recorded when it lies in the repository).
    fn get(&mut self, path: &Path, family: Family) -> Result<What> {
        let stamp = stamp(path)?;
        let key = path
            .strip_prefix(&self.root)
            .ok()
            .and_then(Path::to_str)
            .map(String::from);
        if let Some(record) = key.as_ref().and_then(|k| self.files.get(k)) {
            let same_family = matches!(
                (&record.what, family),
                (What::Deb { .. }, Family::Deb) | (What::Rpm { .. }, Family::Rpm)
            );
            if (record.size, record.mtime) == stamp && same_family {
                return Ok(record.what.clone());
            }
        }
        self.reads += 1;
        let what = match family {
            Family::Deb => What::Deb {
                control: debfile::read_control(path)?,
                digests: Digests::of_file(path)?,
            },
            Family::Rpm => {
                let meta = PackageMetadata::open(path)
                    .with_context(|| format!("{}: not a readable rpm", path.display()))?;
                let signers = meta
                    .signatures()
                    .with_context(|| format!("{}: unreadable signature header", path.display()))?
                    .iter()
                    .filter_map(|s| s.fingerprint().map(|f| f.to_ascii_lowercase()))
                    .collect();
                What::Rpm {
                    pkg: closure::rpm_pkg(path, &meta)?,
                    signers,
                }
            }
        };
        // A file that changed while it was read is not recorded.
        if let Some(key) = key.filter(|_| stamp == self::stamp(path).unwrap_or_default()) {
            let record = Record {
                size: stamp.0,
                mtime: stamp.1,
                what: what.clone(),
            };
            self.files.insert(key, record);
        }
        Ok(what)
    }

    /// Writes the records of the files still there unchanged.
    pub fn save(&mut self) -> Result<()> {
        let root = self.root.clone();
        self.files
            .retain(|key, r| stamp(&root.join(key)).is_ok_and(|s| s == (r.size, r.mtime)));
        let saved = Saved {
            format: FORMAT,
            files: std::mem::take(&mut self.files),
        };
        let json = serde_json::to_vec(&saved).context("serialising the repository state")?;
        self.files = saved.files;
        crate::util::write_bytes_atomic(&self.root.join(FILE), &json, files::FILE_MODE)
    }
}

/// A file's size and modification time.
fn stamp(path: &Path) -> Result<(u64, (i64, i64))> {
    let meta = fs::metadata(path).with_context(|| format!("{}: cannot stat", path.display()))?;
    Ok((meta.len(), (meta.mtime(), meta.mtime_nsec())))
}
