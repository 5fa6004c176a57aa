//! The repository's record of the package files it serves,
//! `REPO/.kubedist-repo-state.json`, so that adding a release reads only
//! the new files: per `.deb`, `.rpm` and sysext image (by path below REPO),
//! its size and modification time when recorded and what later runs need
//! of it: a deb's control paragraph and digests (the Packages index, the
//! closure gate), an rpm's dependency data (the closure gate) and who
//! signed it, an image's extension-release data and sha256 (SHA256SUMS).
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
use serde::{Deserialize, Serialize};

use super::closure::{self, Pkg};
use super::debfile::{self, Control};
use super::files::{self, Digests};
use super::image::{read_image, Image};
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
    /// Per channel of the minor layout: what it was last published with.
    #[serde(default)]
    published: BTreeMap<String, String>,
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
    Raw {
        image: Image,
        sha256: String,
    },
}

/// The kinds of file the state records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deb,
    Rpm,
    Raw,
}

impl What {
    fn kind(&self) -> Kind {
        match self {
            What::Deb { .. } => Kind::Deb,
            What::Rpm { .. } => Kind::Rpm,
            What::Raw { .. } => Kind::Raw,
        }
    }
}

pub struct State {
    root: PathBuf,
    files: BTreeMap<String, Record>,
    published: BTreeMap<String, String>,
    /// Package files read this run (the records could not answer).
    pub reads: usize,
}

impl State {
    /// The state of the repository `root` (which need not exist yet).
    pub fn load(root: &Path) -> Result<State> {
        let path = root.join(FILE);
        let saved = match fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
            Ok(bytes) => match serde_json::from_slice::<Saved>(&bytes) {
                Ok(saved) if saved.format == FORMAT => Some(saved),
                _ => {
                    eprintln!(
                        "note: {}: unreadable or of another format; rebuilding it from the package files",
                        path.display()
                    );
                    None
                }
            },
        };
        let (files, published) = saved.map(|s| (s.files, s.published)).unwrap_or_default();
        Ok(State {
            root: root.to_path_buf(),
            files,
            published,
            reads: 0,
        })
    }

    /// A `.deb`'s control paragraph and digests.
    pub fn deb(&mut self, path: &Path) -> Result<(Control, Digests)> {
        match self.get(path, Kind::Deb)? {
            What::Deb { digests, control } => Ok((control, digests)),
            _ => unreachable!("get returns the kind asked for"),
        }
    }

    /// An rpm's dependency data and the fingerprints of its signers.
    pub fn rpm(&mut self, path: &Path) -> Result<(Pkg, Vec<String>)> {
        match self.get(path, Kind::Rpm)? {
            What::Rpm { pkg, signers } => Ok((pkg, signers)),
            _ => unreachable!("get returns the kind asked for"),
        }
    }

    /// A sysext image's extension-release data and its sha256.
    pub fn raw(&mut self, path: &Path) -> Result<(Image, String)> {
        match self.get(path, Kind::Raw)? {
            What::Raw { image, sha256 } => Ok((image, sha256)),
            _ => unreachable!("get returns the kind asked for"),
        }
    }

    /// What the channel was last published with (see `set_published`).
    pub fn published(&self, channel: &str) -> Option<String> {
        self.published.get(channel).cloned()
    }

    /// Records what `channel` was published with: its key, settings and
    /// file count; `None` forgets it.
    pub fn set_published(&mut self, channel: &str, what: Option<String>) {
        match what {
            Some(what) => self.published.insert(channel.to_string(), what),
            None => self.published.remove(channel),
        };
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
    fn get(&mut self, path: &Path, kind: Kind) -> Result<What> {
        let stamp = stamp(path)?;
        let key = path
            .strip_prefix(&self.root)
            .ok()
            .and_then(Path::to_str)
            .map(String::from);
        if let Some(record) = key.as_ref().and_then(|k| self.files.get(k)) {
            if (record.size, record.mtime) == stamp && record.what.kind() == kind {
                return Ok(record.what.clone());
            }
        }
        self.reads += 1;
        let what = match kind {
            Kind::Deb => What::Deb {
                control: debfile::read_control(path)?,
                digests: Digests::of_file(path)?,
            },
            Kind::Rpm => {
                let meta = super::rpmfile::read(path)?;
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
            Kind::Raw => What::Raw {
                image: read_image(path)?,
                sha256: Digests::of_file(path)?.sha256,
            },
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
            published: std::mem::take(&mut self.published),
        };
        let json = serde_json::to_vec(&saved).context("serialising the repository state")?;
        (self.files, self.published) = (saved.files, saved.published);
        crate::util::write_bytes_atomic(&self.root.join(FILE), &json, files::FILE_MODE)
    }
}

/// A file's size and modification time.
fn stamp(path: &Path) -> Result<(u64, (i64, i64))> {
    let meta = fs::metadata(path).with_context(|| format!("{}: cannot stat", path.display()))?;
    Ok((meta.len(), (meta.mtime(), meta.mtime_nsec())))
}
