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
use crate::version::Version;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// One apt suite and one dnf tree per architecture for all releases.
    Flat,
    /// One apt and one dnf repository per Kubernetes minor, vX.Y/deb and vX.Y/rpm.
    Minor,
}

/// The packages carrying the Kubernetes version.
const KUBERNETES_PACKAGES: &[&str] = &["kubelet", "kubeadm", "kubectl"];

/// What a pre-release's channel adds to its minor's name.
const PRERELEASE: &str = "-prerelease";

/// The channel of a Kubernetes version: `v1.34`, or `v1.38-prerelease` for
/// an alpha, beta or rc of 1.38, which never goes into the stable channel
/// a plain `apt upgrade` or `dnf upgrade` follows.
pub fn channel_of(version: &Version) -> String {
    let suffix = if version.is_prerelease() {
        PRERELEASE
    } else {
        ""
    };
    format!("v{}{suffix}", version.minor())
}

/// The Kubernetes versions of a dist output's kubelet, kubeadm and kubectl
/// packages, read from the packages.
fn kubernetes_versions(
    dir: &Path,
    debs: &[PathBuf],
    rpms: &[PathBuf],
) -> Result<BTreeSet<Version>> {
    let mut versions = BTreeSet::new();
    for pkg in closure::read_all(crate::spec::Family::Deb, debs)?
        .into_iter()
        .chain(closure::read_all(crate::spec::Family::Rpm, rpms)?)
    {
        if !KUBERNETES_PACKAGES.contains(&pkg.name.as_str()) {
            continue;
        }
        // [epoch:]upstream-revision, the upstream spelled for packages.
        let version = pkg
            .version
            .split_once(':')
            .map_or(pkg.version.as_str(), |(_, v)| v);
        let upstream = version.rsplit_once('-').map_or(version, |(u, _)| u);
        let version = Version::parse(&upstream.replacen('~', "-", 1)).with_context(|| {
            format!(
                "{}: {} {}: not a Kubernetes version",
                dir.display(),
                pkg.name,
                pkg.version
            )
        })?;
        versions.insert(version);
    }
    Ok(versions)
}

/// `v1.34` for a dist output whose kubelet/kubeadm/kubectl are 1.34.x,
/// `v1.38-prerelease` for one of a 1.38 pre-release.
pub fn minor_of(dir: &Path, debs: &[PathBuf], rpms: &[PathBuf]) -> Result<String> {
    let channels: BTreeSet<String> = kubernetes_versions(dir, debs, rpms)?
        .iter()
        .map(channel_of)
        .collect();
    match channels.len() {
        1 => Ok(channels.into_iter().next().expect("one")),
        0 => bail!(
            "{}: no kubelet, kubeadm or kubectl package: cannot tell which minor channel it belongs to",
            dir.display()
        ),
        _ => bail!(
            "{}: packages of several channels ({}): give one dist output per release",
            dir.display(),
            channels.into_iter().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Refuses a pre-release in the flat layout, whose one suite every host
/// of the repository upgrades from.
pub fn refuse_prerelease_in_flat(dir: &Path, debs: &[PathBuf], rpms: &[PathBuf]) -> Result<()> {
    if let Some(v) = kubernetes_versions(dir, debs, rpms)?
        .iter()
        .find(|v| v.is_prerelease())
    {
        bail!(
            "{}: Kubernetes {v} is a pre-release: it goes into a channel of its own, \
             {} (--channels minor), never into the one every host upgrades from",
            dir.display(),
            channel_of(v)
        );
    }
    Ok(())
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

/// `v1.34` or `v1.38-prerelease`: a channel directory's name.
pub fn is_channel_name(name: &str) -> bool {
    let name = name.strip_suffix(PRERELEASE).unwrap_or(name);
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

/// Numeric order: v1.9 before v1.10, a minor's pre-release channel after
/// its stable one.
pub fn sort(channels: &mut [String]) {
    channels.sort_by_key(|c| {
        let pre = c.ends_with(PRERELEASE);
        let c = c.strip_suffix(PRERELEASE).unwrap_or(c);
        let (a, b) = c[1..].split_once('.').unwrap_or(("0", "0"));
        (
            a.parse::<u64>().unwrap_or(0),
            b.parse::<u64>().unwrap_or(0),
            pre,
        )
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
        assert!(is_channel_name("v1.38-prerelease"));
        assert!(!is_channel_name("v1.38-beta"));
        let mut c: Vec<String> = ["v1.38-prerelease", "v1.10", "v1.9", "v1.38", "v1.34"]
            .map(String::from)
            .to_vec();
        sort(&mut c);
        assert_eq!(c, ["v1.9", "v1.10", "v1.34", "v1.38", "v1.38-prerelease"]);
    }

    #[test]
    fn pre_releases_have_a_channel_of_their_own() {
        let v = |s: &str| channel_of(&Version::parse(s).unwrap());
        assert_eq!(v("1.37.2"), "v1.37");
        assert_eq!(v("1.38.0-beta.0"), "v1.38-prerelease");
        assert_eq!(v("1.38.0-rc.1"), "v1.38-prerelease");
        assert_eq!(v("1.38.0"), "v1.38");
    }
}
