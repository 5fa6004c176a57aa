//! `pkg/upstream.lock`: the sha256 of every upstream file a network fetch has
//! verified, keyed by source, version, architecture and path. Once a digest
//! is recorded, a download that hashes differently is refused even if its
//! published checksum agrees: a compromised release server or mirror can
//! replace a file and its checksum together, but not the lock in our tree.
//!
//! ```toml
//! [sources.kubernetes."1.34.2".amd64]
//! "v1.34.2/bin/linux/amd64/kubelet" = "<sha256>"
//!
//! [unrecorded.kubernetes."1.34.2".s390x]
//! "v1.34.2/bin/linux/s390x/kubelet" = "<why no digest is pinned yet>"
//!
//! [records]
//! "kubernetes 1.34.2" = "<the published records the pins were taken from>"
//!
//! [manifests."registry.k8s.io/pause:3.10.1"]
//! amd64 = "sha256:<the manifest the pinned index names for amd64>"
//! ```
//!
//! Images are pinned by their index in `pkg/images.toml`; `[manifests]`
//! holds the manifest each architecture gets, the digest a node's runtime
//! shows for the imported image. The index names them, so they are recorded
//! by the first fetch that verified the index, and a later index that names
//! another is refused until the entry is deleted on purpose.
//!
//! The lock is committed with the release it pins: its digests are taken
//! from published records of the same files, not from a first download, so
//! that the first real fetch is checked against a pin. A file no record
//! could be found for is `unrecorded`, with the reason; the first verified
//! download pins it and drops the remark.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::spec::Arch;

const HEADER: &str = "\
# sha256 of every upstream file of pkg/release.toml, for every architecture:
# [sources.<source>.\"<version>\".<arch>] maps each path to its digest, taken
# from the published records [records] names; a download that differs is
# refused. A file without a record is [unrecorded], with the reason, until a
# verified download pins it. `cargo xtask fetch` adds what it verifies; to
# re-pin a file on purpose, delete its line and fetch again. [manifests]:
# for each image of pkg/images.toml, the manifest its pinned index names for
# each architecture, recorded by the first fetch that verified the index.
";

/// path → sha256 (or, unrecorded, the reason)
type Paths = BTreeMap<String, String>;
/// source → version → arch → paths
type Sources = BTreeMap<String, BTreeMap<String, BTreeMap<String, Paths>>>;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    #[serde(default)]
    sources: Sources,
    /// Files no published record was found for, with the reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    unrecorded: Sources,
    /// `"<source> <version>"` → where its pins were taken from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    records: BTreeMap<String, String>,
    /// image reference → arch → the digest of its manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    manifests: BTreeMap<String, BTreeMap<String, String>>,
}

/// The lock as read from disk, plus what this run added.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    file: LockFile,
    changed: bool,
}

/// One file's place in the lock.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    pub source: &'a str,
    pub version: &'a str,
    pub arch: Arch,
    pub path: &'a str,
}

impl Lock {
    /// Reads the lock; a missing file is an empty lock.
    pub fn load(path: &Path) -> Result<Lock> {
        let file = match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LockFile::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        for (source, versions) in &file.unrecorded {
            for (version, arches) in versions {
                for arch in arches.keys() {
                    arch.parse::<Arch>().with_context(|| {
                        format!("{}: [unrecorded.{source}.\"{version}\"]", path.display())
                    })?;
                }
            }
        }
        for (source, versions) in &file.sources {
            for (version, arches) in versions {
                for (arch, paths) in arches {
                    arch.parse::<Arch>().with_context(|| {
                        format!("{}: [sources.{source}.\"{version}\"]", path.display())
                    })?;
                    for (p, sha) in paths {
                        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                            bail!(
                                "{}: {p:?} is not pinned to a sha256 (64 hex digits)",
                                path.display()
                            );
                        }
                    }
                }
            }
        }
        for (reference, arches) in &file.manifests {
            for (arch, digest) in arches {
                arch.parse::<Arch>()
                    .with_context(|| format!("{}: [manifests.{reference:?}]", path.display()))?;
                let hex = digest.strip_prefix("sha256:").unwrap_or("");
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    bail!(
                        "{}: [manifests.{reference:?}] {arch} is not sha256:<64 hex digits>",
                        path.display()
                    );
                }
            }
        }
        Ok(Lock {
            path: path.to_path_buf(),
            file,
            changed: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pinned sha256 of a file, if any.
    pub fn get(&self, key: Key) -> Option<&str> {
        entry(&self.file.sources, key)
    }

    /// Why the file has no pin, when the lock says so.
    pub fn unrecorded(&self, key: Key) -> Option<&str> {
        entry(&self.file.unrecorded, key)
    }

    /// Pins a file that had no entry yet; its remark, if any, goes.
    pub fn insert(&mut self, key: Key, sha256: &str) {
        if let Some(paths) = self
            .file
            .unrecorded
            .get_mut(key.source)
            .and_then(|v| v.get_mut(key.version))
            .and_then(|a| a.get_mut(key.arch.go_name()))
        {
            if paths.remove(key.path).is_some() {
                self.changed = true;
            }
        }
        let paths = paths_mut(&mut self.file.sources, key);
        if paths.get(key.path).map(String::as_str) != Some(sha256) {
            paths.insert(key.path.to_string(), sha256.to_string());
            self.changed = true;
        }
    }

    /// Says why a file that has no pin has none yet.
    pub fn insert_unrecorded(&mut self, key: Key, reason: &str) {
        if self.get(key).is_some() || self.unrecorded(key) == Some(reason) {
            return;
        }
        paths_mut(&mut self.file.unrecorded, key).insert(key.path.to_string(), reason.to_string());
        self.changed = true;
    }

    /// Says where the pins of `what` (`"<source> <version>"`, `"images
    /// <version>"`) come from, or why there are none; a record kept stays.
    pub fn insert_record(&mut self, what: &str, text: &str) {
        if !self.file.records.contains_key(what) {
            self.file.records.insert(what.to_string(), text.to_string());
            self.changed = true;
        }
    }

    /// The digest of the manifest `reference` gives `arch`, once recorded.
    pub fn manifest(&self, reference: &str, arch: Arch) -> Option<&str> {
        self.file
            .manifests
            .get(reference)?
            .get(arch.go_name())
            .map(String::as_str)
    }

    /// Records the manifest `reference` gives `arch`.
    pub fn insert_manifest(&mut self, reference: &str, arch: Arch, digest: &str) {
        let arches = self
            .file
            .manifests
            .entry(reference.to_string())
            .or_default();
        if arches.get(arch.go_name()).map(String::as_str) != Some(digest) {
            arches.insert(arch.go_name().to_string(), digest.to_string());
            self.changed = true;
        }
    }

    /// The published records the pins of `what` (`"<source> <version>"`)
    /// were taken from, or why there are none.
    #[cfg(test)]
    pub fn record(&self, what: &str) -> Option<&str> {
        self.file.records.get(what).map(String::as_str)
    }

    /// Writes the lock back if this run pinned anything new.
    pub fn save(&self) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        crate::util::write_bytes_atomic(&self.path, self.text()?.as_bytes(), 0o644)
    }

    /// The lock as `save` writes it.
    pub fn text(&self) -> Result<String> {
        let mut file = LockFile {
            sources: self.file.sources.clone(),
            unrecorded: self.file.unrecorded.clone(),
            records: self.file.records.clone(),
            manifests: self.file.manifests.clone(),
        };
        // No empty table is left where the last remark of one went.
        for versions in file.unrecorded.values_mut() {
            for arches in versions.values_mut() {
                arches.retain(|_, paths| !paths.is_empty());
            }
            versions.retain(|_, arches| !arches.is_empty());
        }
        file.unrecorded.retain(|_, versions| !versions.is_empty());
        let body = toml::to_string(&file)
            .with_context(|| format!("serialising {}", self.path.display()))?;
        Ok(format!("{HEADER}\n{body}"))
    }
}

/// A file's value in one of the lock's tables.
fn entry<'a>(table: &'a Sources, key: Key) -> Option<&'a str> {
    table
        .get(key.source)?
        .get(key.version)?
        .get(key.arch.go_name())?
        .get(key.path)
        .map(String::as_str)
}

/// The paths of `key`'s source, version and architecture in one of the
/// lock's tables, made where missing.
fn paths_mut<'a>(table: &'a mut Sources, key: Key) -> &'a mut Paths {
    table
        .entry(key.source.to_string())
        .or_default()
        .entry(key.version.to_string())
        .or_default()
        .entry(key.arch.go_name().to_string())
        .or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    const B: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn key(path: &str) -> Key<'_> {
        Key {
            source: "kubernetes",
            version: "1.34.2",
            arch: Arch::Amd64,
            path,
        }
    }

    #[test]
    fn round_trips_sorted_and_only_writes_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upstream.lock");
        let mut lock = Lock::load(&path).unwrap();
        lock.save().unwrap();
        assert!(!path.exists(), "an unchanged lock is not written");

        lock.insert(key("v1.34.2/bin/linux/amd64/kubelet"), A);
        lock.insert(key("v1.34.2/bin/linux/amd64/kubeadm"), B);
        lock.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# sha256 of every upstream file"),
            "{text}"
        );
        let kubeadm = text.find("kubeadm").unwrap();
        let kubelet = text.find("kubelet\"").unwrap();
        assert!(kubeadm < kubelet, "entries are sorted:\n{text}");
        assert!(
            text.contains("[sources.kubernetes.\"1.34.2\".amd64]"),
            "{text}"
        );

        let again = Lock::load(&path).unwrap();
        assert_eq!(again.get(key("v1.34.2/bin/linux/amd64/kubelet")), Some(A));
        assert_eq!(again.get(key("v1.34.2/bin/linux/amd64/kubectl")), None);
    }

    #[test]
    fn a_verified_download_replaces_the_remark_of_an_unrecorded_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upstream.lock");
        std::fs::write(
            &path,
            "[unrecorded.kubernetes.\"1.34.2\".amd64]\n\"k\" = \"no record\"\n\n\
             [records]\n\"kubernetes 1.34.2\" = \"a list\"\n",
        )
        .unwrap();
        let mut lock = Lock::load(&path).unwrap();
        assert_eq!(lock.unrecorded(key("k")), Some("no record"));
        lock.insert(key("k"), A);
        lock.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("[unrecorded."), "{text}");
        assert!(
            text.contains("\"kubernetes 1.34.2\" = \"a list\""),
            "{text}"
        );
        let again = Lock::load(&path).unwrap();
        assert_eq!(again.get(key("k")), Some(A));
        assert_eq!(again.unrecorded(key("k")), None);
    }

    #[test]
    fn a_malformed_lock_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upstream.lock");
        std::fs::write(
            &path,
            "[sources.kubernetes.\"1.0\".amd64]\n\"v1.0/kubelet\" = \"abc\"\n",
        )
        .unwrap();
        let err = format!("{:#}", Lock::load(&path).unwrap_err());
        assert!(
            err.contains("upstream.lock") && err.contains("v1.0/kubelet"),
            "{err}"
        );

        std::fs::write(&path, "[sources.kubernetes.\"1.0\".sparc]\n").unwrap();
        let err = format!("{:#}", Lock::load(&path).unwrap_err());
        assert!(
            err.contains("upstream.lock") && err.contains("sparc"),
            "{err}"
        );
    }
}
