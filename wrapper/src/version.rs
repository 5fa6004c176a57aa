//! `KUBELET_VERSION` → which kubelet binary to run.
//!
//! The air-gapped tarball can install several kubelets side by side as
//! `/opt/kubernetes/vX.Y.Z/bin/kubelet`; the packages install
//! `/usr/bin/kubelet`, the default.

use std::path::{Path, PathBuf};

use crate::{rooted, Error};

pub const DEFAULT_KUBELET: &str = "/usr/bin/kubelet";
pub const VERSIONS_DIR: &str = "/opt/kubernetes";

/// Normalises a `KUBELET_VERSION` value: `""` → `None` (use the default),
/// `1.30.2` or `v1.30.2` → `Some("v1.30.2")`. The value becomes a directory
/// name, so only `[A-Za-z0-9._+-]` is allowed and never `..`.
pub fn normalize(raw: &str) -> Result<Option<String>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let version = if raw.starts_with('v') {
        raw.to_string()
    } else {
        format!("v{raw}")
    };
    let rest = &version[1..];
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
    if rest.is_empty()
        || !rest.starts_with(|c: char| c.is_ascii_digit())
        || !rest.chars().all(allowed)
        || rest.contains("..")
    {
        return Err(format!(
            "KUBELET_VERSION={raw:?} is not a version like v1.30.2"
        ));
    }
    Ok(Some(version))
}

/// Where the kubelet of `version` lives, under `root`.
pub fn kubelet_path(root: &Path, version: Option<&str>) -> PathBuf {
    match version {
        Some(v) => rooted(root, Path::new(&format!("{VERSIONS_DIR}/{v}/bin/kubelet"))),
        None => rooted(root, Path::new(DEFAULT_KUBELET)),
    }
}

/// The versions installed side by side under `root`, sorted.
pub fn installed(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(rooted(root, Path::new(VERSIONS_DIR))) else {
        return Vec::new();
    };
    let mut versions: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|v| kubelet_path(root, Some(v)).is_file())
        .collect();
    versions.sort();
    versions
}

/// Fails with one line naming the path (and, for a pinned version, what is
/// installed) unless the kubelet to run is a file. `source` says what chose
/// the version, e.g. `KUBELET_VERSION=v1.30.2 (ENV_FILE:3)`.
pub fn check_installed(
    root: &Path,
    kubelet: &Path,
    version: Option<&str>,
    source: &str,
) -> Result<(), Error> {
    if kubelet.is_file() {
        return Ok(());
    }
    Err(Error::input(match version {
        None => format!(
            "kubelet not found: {} does not exist (install the kubelet package, or set KUBELET_VERSION to a version under {VERSIONS_DIR})",
            kubelet.display()
        ),
        Some(_) => {
            let installed = installed(root);
            let list = if installed.is_empty() {
                "none".to_string()
            } else {
                installed.join(", ")
            };
            format!(
                "{source} is not installed: {} does not exist; installed under {VERSIONS_DIR}: {list}",
                kubelet.display()
            )
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_accepts_with_or_without_v() {
        assert_eq!(normalize("v1.30.2"), Ok(Some("v1.30.2".into())));
        assert_eq!(normalize("1.30.2"), Ok(Some("v1.30.2".into())));
        assert_eq!(normalize(" 1.31.0-rc.1 "), Ok(Some("v1.31.0-rc.1".into())));
        assert_eq!(normalize(""), Ok(None));
        assert_eq!(normalize("  "), Ok(None));
    }

    #[test]
    fn normalize_refuses_paths_and_junk() {
        for bad in [
            "v",
            "../1.30",
            "v1/../../etc",
            "1.30/2",
            "v1..2",
            "latest",
            "v1.30 2",
            "v.1",
        ] {
            assert!(normalize(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths_under_root() {
        assert_eq!(
            kubelet_path(Path::new("/"), Some("v1.30.2")),
            Path::new("/opt/kubernetes/v1.30.2/bin/kubelet")
        );
        assert_eq!(
            kubelet_path(Path::new("/r"), None),
            Path::new("/r/usr/bin/kubelet")
        );
    }
}
