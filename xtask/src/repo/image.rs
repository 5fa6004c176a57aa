//! What a systemd-sysext image says about itself: its one extension-release
//! file, read from the squashfs image, and the file name it must have. A
//! leaf: the served directory (sysext.rs) and the repository's state
//! (state.rs) both read images through it.

use std::fs;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};
use backhand::{FilesystemReader, InnerNode};

/// Where an extension's release file lives in its image.
const RELEASE_DIR: &str = "/usr/lib/extension-release.d/";

/// What an image says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Image {
    /// The extension's name (`extension-release.<name>`).
    pub name: String,
    /// The version in the file name, `X.Y.Z` (Kubernetes' or containerd's).
    pub version: String,
    /// `SYSEXT_VERSION_ID`'s package revision, the `R` of `X.Y.Z-R`.
    pub revision: u32,
}

impl Image {
    /// The minor channel, `X.Y`.
    pub fn minor(&self) -> &str {
        match self.version.match_indices('.').nth(1) {
            Some((i, _)) => &self.version[..i],
            None => &self.version,
        }
    }
}

/// Adds `new_images` to `REPO/sysext/`, then rewrites and re-signs its
/// SHA256SUMS and transfer files. Returns `None` when there is no image at
/// all.
/// The file name of `path`, as text.
pub fn file_name(path: &Path) -> Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .with_context(|| format!("{}: not a usable file name", path.display()))
}

/// Reads an image's extension-release file and checks the image's file
/// name against it: `<name>-v<X.Y.Z>-<ARCHITECTURE>.raw`.
pub fn read_image(path: &Path) -> Result<Image> {
    let (name, release) = extension_release(path)?;
    let field = |key: &str| {
        release
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim_matches('"').to_string())
    };
    let arch = field("ARCHITECTURE").with_context(|| {
        format!(
            "{}: extension-release.{name} has no ARCHITECTURE=",
            path.display()
        )
    })?;
    let file = file_name(path)?;
    let version = file
        .strip_prefix(&format!("{name}-v"))
        .and_then(|rest| rest.strip_suffix(&format!("-{arch}.raw")))
        .filter(|v| v.split('.').count() >= 3)
        .with_context(|| {
            format!(
                "{}: an image with extension-release.{name} and ARCHITECTURE={arch} must be \
                 named {name}-v<X.Y.Z>-{arch}.raw",
                path.display()
            )
        })?
        .to_string();
    let revision = field("SYSEXT_VERSION_ID")
        .and_then(|v| v.strip_prefix(&format!("{version}-"))?.parse().ok())
        .with_context(|| {
            format!(
                "{}: extension-release.{name} has no SYSEXT_VERSION_ID={version}-<revision>",
                path.display()
            )
        })?;
    Ok(Image {
        name,
        version,
        revision,
    })
}

/// `(name, text)` of the one extension-release file of a squashfs image.
fn extension_release(path: &Path) -> Result<(String, String)> {
    let file = fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let fs = FilesystemReader::from_reader(BufReader::new(file))
        .with_context(|| format!("{}: not a squashfs image", path.display()))?;
    let mut found = Vec::new();
    for node in fs.files() {
        let full = node.fullpath.to_string_lossy();
        let Some(name) = full
            .strip_prefix(RELEASE_DIR)
            .and_then(|n| n.strip_prefix("extension-release."))
        else {
            continue;
        };
        let InnerNode::File(inner) = &node.inner else {
            continue;
        };
        let mut text = String::new();
        fs.file(inner)
            .reader()
            .read_to_string(&mut text)
            .with_context(|| format!("{}: reading {full}", path.display()))?;
        found.push((name.to_string(), text));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => bail!(
            "{}: {n} extension-release files in {RELEASE_DIR}; a system extension has one",
            path.display()
        ),
    }
}
