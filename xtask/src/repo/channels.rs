//! `--channels`: the repository's layout. `flat` (the default) is one apt
//! suite and one dnf tree per architecture for every release; `minor`
//! mirrors upstream's pkgs.k8s.io, one channel per Kubernetes minor:
//!
//! ```text
//! REPO/v1.34/deb/pool/..., deb/dists/<suite>/...   the minor's apt repository
//! REPO/v1.34/rpm/<rpmarch>/*.rpm + repodata/       its dnf/yum repositories
//! REPO/v1.34/kubedist.{asc,gpg,list,sources,repo}  key and snippets for it
//! ```
//!
//! Every path inside a channel is relative to the channel (the apt pool
//! lives under `deb/`, never `../pool`), so rsync, apt-mirror or reposync
//! copy one channel as it is. A dist output goes into the channel of the
//! Kubernetes version its kubelet, kubeadm and kubectl carry; its
//! kubernetes-cni and cri-tools go along with them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::closure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// One apt suite and one dnf tree per architecture for all releases.
    Flat,
    /// One apt and one dnf repository per Kubernetes minor, vX.Y/deb and vX.Y/rpm.
    Minor,
}

/// The packages carrying the Kubernetes version.
const KUBERNETES_PACKAGES: &[&str] = &["kubelet", "kubeadm", "kubectl"];

/// `v1.34` for a dist output whose kubelet/kubeadm/kubectl are 1.34.x.
pub fn minor_of(dir: &Path, debs: &[PathBuf], rpms: &[PathBuf]) -> Result<String> {
    let mut minors = BTreeSet::new();
    for pkg in closure::read_all(crate::spec::Family::Deb, debs)?
        .into_iter()
        .chain(closure::read_all(crate::spec::Family::Rpm, rpms)?)
    {
        if !KUBERNETES_PACKAGES.contains(&pkg.name.as_str()) {
            continue;
        }
        let version = pkg
            .version
            .split_once(':')
            .map_or(pkg.version.as_str(), |(_, v)| v);
        let mut parts = version.split(['.', '-', '~']);
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            bail!(
                "{}: {} {}: not a Kubernetes version",
                dir.display(),
                pkg.name,
                pkg.version
            );
        };
        if !(is_number(major) && is_number(minor)) {
            bail!(
                "{}: {} {}: not a Kubernetes version",
                dir.display(),
                pkg.name,
                pkg.version
            );
        }
        minors.insert(format!("v{major}.{minor}"));
    }
    match minors.len() {
        1 => Ok(minors.into_iter().next().expect("one")),
        0 => bail!(
            "{}: no kubelet, kubeadm or kubectl package: cannot tell which minor channel it belongs to",
            dir.display()
        ),
        _ => bail!(
            "{}: packages of several Kubernetes minors ({}): give one dist output per release",
            dir.display(),
            minors.into_iter().collect::<Vec<_>>().join(", ")
        ),
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

/// `v1.34`: a channel directory's name.
pub fn is_channel_name(name: &str) -> bool {
    name.strip_prefix('v')
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(a, b)| is_number(a) && is_number(b))
}

/// The channels `repo` already holds, sorted by version.
pub fn existing(repo: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(repo) else {
        return Ok(found);
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list", repo.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_channel_name(&name) && entry.path().is_dir() {
            found.push(name);
        }
    }
    sort(&mut found);
    Ok(found)
}

/// Numeric order: v1.9 before v1.10.
pub fn sort(channels: &mut [String]) {
    channels.sort_by_key(|c| {
        let (a, b) = c[1..].split_once('.').unwrap_or(("0", "0"));
        (a.parse::<u64>().unwrap_or(0), b.parse::<u64>().unwrap_or(0))
    });
}

/// The apt tree of a channel.
pub fn deb_root(repo: &Path, channel: &str) -> PathBuf {
    repo.join(channel).join("deb")
}

/// The dnf/yum trees of a channel.
pub fn rpm_root(repo: &Path, channel: &str) -> PathBuf {
    repo.join(channel).join("rpm")
}

/// A repository of one layout cannot take a run of the other: the trees
/// would be half of each.
pub fn refuse_other_layout(repo: &Path, layout: Layout, flat_exists: bool) -> Result<()> {
    let minor = existing(repo)?;
    match layout {
        Layout::Flat if !minor.is_empty() => bail!(
            "{}: holds minor channels ({}); run with --channels minor",
            repo.display(),
            minor.join(" ")
        ),
        Layout::Minor if flat_exists => bail!(
            "{}: holds a flat repository (pool/, dists/, <arch>/); run with --channels flat, or publish the minor channels into a new directory",
            repo.display()
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names_and_order() {
        assert!(is_channel_name("v1.34"));
        assert!(!is_channel_name("v1"));
        assert!(!is_channel_name("x86_64"));
        assert!(!is_channel_name("v1.x"));
        let mut c = vec!["v1.10".to_string(), "v1.9".to_string(), "v1.34".to_string()];
        sort(&mut c);
        assert_eq!(c, ["v1.9", "v1.10", "v1.34"]);
    }
}
