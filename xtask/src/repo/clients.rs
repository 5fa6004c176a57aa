//! What a client host needs, at the top of the repository: the public key
//! (armoured for dnf, a binary keyring for apt's `signed-by=`) and ready
//! source snippets pointing at `--base-url`.

use std::path::Path;

use anyhow::Result;

use super::files::FILE_MODE;
use super::Settings;
use crate::keys::Signers;

/// Where the snippets tell apt hosts to install `kubedist.gpg`.
pub const APT_KEYRING: &str = "/etc/apt/keyrings/kubedist.gpg";

/// Writes `kubedist.asc` and `kubedist.gpg`, every signing key in each;
/// says so when they change (hosts must get the new keyring before the
/// key they hold stops signing).
pub fn write_public_key(repo: &Path, key: &Signers) -> Result<()> {
    let binary = key.public_binary()?;
    let keyring = repo.join("kubedist.gpg");
    if let Ok(old) = std::fs::read(&keyring) {
        if old != binary {
            eprintln!(
                "note: the signing key changed to {}: install the new kubedist.gpg / kubedist.asc on every client",
                key.describe()
            );
        }
    }
    crate::util::write_bytes_atomic(
        &repo.join("kubedist.asc"),
        key.public_armored()?.as_bytes(),
        FILE_MODE,
    )?;
    crate::util::write_bytes_atomic(&keyring, &binary, FILE_MODE)
}

/// Where a client finds the trees and the key.
pub struct Urls {
    /// The apt repository (`pool/`, `dists/`).
    pub apt: String,
    /// The directory holding one dnf repository per architecture.
    pub yum: String,
    /// The directory holding `kubedist.asc`.
    pub key: String,
}

impl Urls {
    /// The flat layout: everything at `--base-url`.
    pub fn flat(settings: &Settings) -> Urls {
        Urls {
            apt: settings.base_url.clone(),
            yum: settings.base_url.clone(),
            key: settings.base_url.clone(),
        }
    }

    /// A minor channel: `<base>/vX.Y/deb`, `<base>/vX.Y/rpm`, its key in `<base>/vX.Y`.
    pub fn channel(settings: &Settings, channel: &str) -> Urls {
        let dir = format!("{}/{channel}", settings.base_url);
        Urls {
            apt: format!("{dir}/deb"),
            yum: format!("{dir}/rpm"),
            key: dir,
        }
    }
}

/// Writes `kubedist.list`, `kubedist.sources` (apt) and `kubedist.repo`
/// (dnf/yum) for the trees the repository holds.
pub fn write_snippets(
    repo: &Path,
    settings: &Settings,
    urls: &Urls,
    apt: bool,
    yum: bool,
) -> Result<()> {
    if apt {
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.list"),
            apt_list(settings, urls).as_bytes(),
            FILE_MODE,
        )?;
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.sources"),
            apt_sources(settings, urls).as_bytes(),
            FILE_MODE,
        )?;
    }
    if yum {
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.repo"),
            yum_repo(urls).as_bytes(),
            FILE_MODE,
        )?;
    }
    Ok(())
}

fn apt_list(s: &Settings, urls: &Urls) -> String {
    format!(
        "# /etc/apt/sources.list.d/kubedist.list; the key: cp kubedist.gpg {APT_KEYRING}\n\
         deb [signed-by={APT_KEYRING}] {} {} {}\n",
        urls.apt, s.suite, s.component
    )
}

fn apt_sources(s: &Settings, urls: &Urls) -> String {
    format!(
        "# /etc/apt/sources.list.d/kubedist.sources; the key: cp kubedist.gpg {APT_KEYRING}\n\
         Types: deb\nURIs: {}\nSuites: {}\nComponents: {}\nSigned-By: {APT_KEYRING}\n",
        urls.apt, s.suite, s.component
    )
}

/// dnf and yum check every package's signature under `gpgcheck=1`;
/// zypper (libzypp) checks a package's own signature only with
/// `pkg_gpgcheck=1` once the repository metadata is signed, and would
/// otherwise install an unsigned rpm that signed metadata lists. dnf
/// ignores the option.
fn yum_repo(urls: &Urls) -> String {
    format!(
        "# /etc/yum.repos.d/kubedist.repo\n\
         [kubedist]\nname=kubedist: Kubernetes node components\nbaseurl={}/$basearch\n\
         enabled=1\ngpgcheck=1\nrepo_gpgcheck=1\npkg_gpgcheck=1\ngpgkey={}/kubedist.asc\n",
        urls.yum, urls.key
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            suite: "stable".into(),
            component: "main".into(),
            base_url: "https://mirror.example/kubedist".into(),
            valid_days: None,
            timestamp: 0,
        }
    }

    #[test]
    fn snippets_point_at_the_base_url_and_the_key() {
        let s = settings();
        let u = Urls::flat(&s);
        assert!(apt_list(&s, &u).ends_with(
            "deb [signed-by=/etc/apt/keyrings/kubedist.gpg] https://mirror.example/kubedist stable main\n"
        ));
        assert!(
            apt_sources(&s, &u).contains("URIs: https://mirror.example/kubedist\nSuites: stable\n")
        );
        let repo = yum_repo(&u);
        for line in [
            "baseurl=https://mirror.example/kubedist/$basearch\n",
            "gpgcheck=1\n",
            "repo_gpgcheck=1\n",
            "pkg_gpgcheck=1\n",
            "gpgkey=https://mirror.example/kubedist/kubedist.asc\n",
        ] {
            assert!(repo.contains(line), "{line} missing from:\n{repo}");
        }
    }

    #[test]
    fn a_minor_channel_points_inside_itself() {
        let s = settings();
        let u = Urls::channel(&s, "v1.35");
        assert!(apt_sources(&s, &u).contains("URIs: https://mirror.example/kubedist/v1.35/deb\n"));
        let repo = yum_repo(&u);
        assert!(
            repo.contains("baseurl=https://mirror.example/kubedist/v1.35/rpm/$basearch\n"),
            "{repo}"
        );
        assert!(
            repo.contains("gpgkey=https://mirror.example/kubedist/v1.35/kubedist.asc\n"),
            "{repo}"
        );
    }
}
