//! What a client host needs, at the top of the repository: the public key
//! (armoured for dnf, a binary keyring for apt's `signed-by=`) and ready
//! source snippets pointing at `--base-url`.

use std::path::Path;

use anyhow::Result;

use super::files::FILE_MODE;
use super::Settings;
use crate::keys::RepoKey;

/// Where the snippets tell apt hosts to install `kubedist.gpg`.
pub const APT_KEYRING: &str = "/etc/apt/keyrings/kubedist.gpg";

/// Writes `kubedist.asc` and `kubedist.gpg`; says so when they change
/// (hosts holding the old key must get the new one).
pub fn write_public_key(repo: &Path, key: &RepoKey) -> Result<()> {
    let binary = key.public_binary()?;
    let keyring = repo.join("kubedist.gpg");
    if let Ok(old) = std::fs::read(&keyring) {
        if old != binary {
            eprintln!(
                "note: the signing key changed to {}: install the new kubedist.gpg / kubedist.asc on every client",
                key.fingerprint()
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

/// Writes `kubedist.list`, `kubedist.sources` (apt) and `kubedist.repo`
/// (dnf/yum) for the trees the repository holds.
pub fn write_snippets(repo: &Path, settings: &Settings, apt: bool, yum: bool) -> Result<()> {
    if apt {
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.list"),
            apt_list(settings).as_bytes(),
            FILE_MODE,
        )?;
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.sources"),
            apt_sources(settings).as_bytes(),
            FILE_MODE,
        )?;
    }
    if yum {
        crate::util::write_bytes_atomic(
            &repo.join("kubedist.repo"),
            yum_repo(settings).as_bytes(),
            FILE_MODE,
        )?;
    }
    Ok(())
}

fn apt_list(s: &Settings) -> String {
    format!(
        "# /etc/apt/sources.list.d/kubedist.list; the key: cp kubedist.gpg {APT_KEYRING}\n\
         deb [signed-by={APT_KEYRING}] {} {} {}\n",
        s.base_url, s.suite, s.component
    )
}

fn apt_sources(s: &Settings) -> String {
    format!(
        "# /etc/apt/sources.list.d/kubedist.sources; the key: cp kubedist.gpg {APT_KEYRING}\n\
         Types: deb\nURIs: {}\nSuites: {}\nComponents: {}\nSigned-By: {APT_KEYRING}\n",
        s.base_url, s.suite, s.component
    )
}

/// dnf and yum check every package's signature under `gpgcheck=1`;
/// zypper (libzypp) checks a package's own signature only with
/// `pkg_gpgcheck=1` once the repository metadata is signed, and would
/// otherwise install an unsigned rpm that signed metadata lists. dnf
/// ignores the option.
fn yum_repo(s: &Settings) -> String {
    format!(
        "# /etc/yum.repos.d/kubedist.repo\n\
         [kubedist]\nname=kubedist: Kubernetes node components\nbaseurl={0}/$basearch\n\
         enabled=1\ngpgcheck=1\nrepo_gpgcheck=1\npkg_gpgcheck=1\ngpgkey={0}/kubedist.asc\n",
        s.base_url
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
        assert!(apt_list(&s).ends_with(
            "deb [signed-by=/etc/apt/keyrings/kubedist.gpg] https://mirror.example/kubedist stable main\n"
        ));
        assert!(apt_sources(&s).contains("URIs: https://mirror.example/kubedist\nSuites: stable\n"));
        let repo = yum_repo(&s);
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
}
