//! The served sysext directory, `REPO/sysext/`, as systemd-sysupdate reads
//! it (sysupdate.d(5), `Type=url-file`):
//!
//! ```text
//! REPO/sysext/<name>-v<X.Y.Z>-<arch>.raw   every image ever added
//! REPO/sysext/<name>-v<X.Y.Z>-<arch>.spdx.json
//!                                          its SBOM, when dist made one
//! REPO/sysext/SHA256SUMS                   `sha256  file` of every image
//!                                          and SBOM (sysupdate takes only
//!                                          the lines its pattern matches)
//! REPO/sysext/SHA256SUMS.gpg               its detached signature (Verify=yes)
//! REPO/sysext/<name>-v<X.Y>.conf           one transfer file per minor channel
//! ```
//!
//! A host installs one transfer file as `/etc/sysupdate.<name>.d/<name>.conf`
//! and runs `systemd-sysupdate -C <name> update`: it fetches the newest
//! patch release of its channel into /opt/extensions/<name>/ and points
//! /etc/extensions/<name>.raw at it.
//!
//! Each image is read before it is published: its one extension-release
//! file names the extension and the architecture, and the file name must
//! be `<name>-v<version>-<arch>.raw` with those, or hosts could never merge
//! it (systemd-sysext looks for extension-release.<the name hosts give it>).
//! The directory is built beside its final place and swapped in whole, so a
//! client never sees SHA256SUMS and its signature from two different runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::files::{self, Digests};
use super::image::{file_name, read_image, Image};
use super::state::State;
use super::Settings;
use crate::keys::RepoKey;
use crate::version::Version;

/// Where the images go, below the repository root.
pub const DIR: &str = "sysext";

pub struct SysextSummary {
    pub images: usize,
    /// The transfer files, `<name>-v<X.Y>.conf`.
    pub channels: Vec<String>,
}

/// Refuses what `publish` would refuse of `new_images`, writing nothing.
pub fn check(repo: &Path, new_images: &[PathBuf], state: &mut State) -> Result<()> {
    plan(&repo.join(DIR), new_images, state, false).map(|_| ())
}

/// The images to serve, by file name: those served already (from the
/// state's records) and `new_images`, each checked against them.
type Planned = BTreeMap<String, (PathBuf, Image, String)>;

pub fn publish(
    repo: &Path,
    new_images: &[PathBuf],
    key: &RepoKey,
    settings: &Settings,
    state: &mut State,
) -> Result<Option<SysextSummary>> {
    let target = repo.join(DIR);
    let images = plan(&target, new_images, state, true)?;
    if images.is_empty() {
        return Ok(None);
    }
    publish_planned(&target, images, key, settings)
}

/// The notes on what is left out or replaced are said once (`say`), by the
/// run that publishes.
fn plan(target: &Path, new_images: &[PathBuf], state: &mut State, say: bool) -> Result<Planned> {
    let note = |text: String| {
        if say {
            eprintln!("{text}");
        }
    };
    // Served images from the state's records: not read nor hashed again.
    let mut images = Planned::new();
    for path in files::find_files(target, ".raw")? {
        let (image, sha256) = state.raw(&path)?;
        images.insert(file_name(&path)?, (path, image, sha256));
    }
    // Every new image is read and checked before anything is written.
    for path in new_images {
        let image = read_image(path)?;
        let name = file_name(path)?;
        if Version::parse(&image.version).is_ok_and(|v| v.is_prerelease()) {
            // systemd-sysupdate takes `1.38.0-beta.0` for newer than
            // `1.38.0` (it reads what follows a `-` as more) and matches no
            // version with a `~` (systemd#28906): no channel could take a
            // node from the pre-release to the release.
            note(format!(
                "note: leaving out {}: a pre-release, and systemd-sysupdate would order it \
                 after its release; the pre-release channels serve debs and rpms only",
                path.display()
            ));
            continue;
        }
        let sha256 = Digests::of_file(path)?.sha256;
        if let Some((_, old, old_sha256)) = images.get(&name) {
            if *old_sha256 == sha256 {
                continue;
            }
            if image.revision == old.revision {
                bail!(
                    "{}: {DIR}/{name} is already published with different content for the same \
                     revision {}; publish a rebuilt image under a new --revision",
                    path.display(),
                    image.revision
                );
            }
            if image.revision < old.revision {
                note(format!(
                    "note: keeping {DIR}/{name} (revision {}) over {} (revision {})",
                    old.revision,
                    path.display(),
                    image.revision
                ));
                continue;
            }
            note(format!(
                "note: {DIR}/{name}: revision {} replaces revision {}; hosts that already run \
                 {} keep theirs (sysupdate compares the versions in file names, not revisions)",
                image.revision, old.revision, image.version
            ));
        }
        images.insert(name, (path.clone(), image, sha256));
    }
    Ok(images)
}

fn publish_planned(
    target: &Path,
    images: Planned,
    key: &RepoKey,
    settings: &Settings,
) -> Result<Option<SysextSummary>> {
    let staging = files::staging_dir(target)?;
    let result = (|| -> Result<SysextSummary> {
        let mut sums = String::new();
        let mut channels = BTreeSet::new();
        for (name, (source, image, sha256)) in &images {
            let dest = staging.join(name);
            // Images already served are linked, not copied again; new ones
            // are copied (never linked to a dist output).
            let served = source.starts_with(target);
            let place = |source: &Path, dest: &Path| -> Result<()> {
                if !served || fs::hard_link(source, dest).is_err() {
                    files::copy_atomic(source, dest, files::FILE_MODE)?;
                }
                Ok(())
            };
            place(source, &dest)?;
            sums.push_str(&format!("{sha256}  {name}\n"));
            // Its SBOM beside it (checked with the image by
            // incoming::read_dist_dir, or served with it before, under
            // either name).
            let sbom = [served_sbom(source), crate::sbom::path_of(source)]
                .into_iter()
                .find(|p| p.is_file());
            if let Some(sbom) = sbom {
                let served_sbom = served_sbom(&dest);
                place(&sbom, &served_sbom)?;
                sums.push_str(&format!(
                    "{}  {}\n",
                    Digests::of_file(&served_sbom)?.sha256,
                    file_name(&served_sbom)?
                ));
            }
            channels.insert((image.name.clone(), image.minor().to_string()));
        }
        crate::util::write_bytes_atomic(
            &staging.join("SHA256SUMS"),
            sums.as_bytes(),
            files::FILE_MODE,
        )?;
        let signature = key.detached_binary(sums.as_bytes(), settings.timestamp)?;
        crate::util::write_bytes_atomic(
            &staging.join("SHA256SUMS.gpg"),
            &signature,
            files::FILE_MODE,
        )?;
        let mut names = Vec::new();
        for (name, minor) in &channels {
            let file = format!("{name}-v{minor}.conf");
            let text = transfer(name, minor, &settings.base_url);
            crate::util::write_bytes_atomic(
                &staging.join(&file),
                text.as_bytes(),
                files::FILE_MODE,
            )?;
            names.push(file);
        }
        crate::util::replace_dir(&staging, target)?;
        Ok(SysextSummary {
            images: images.len(),
            channels: names,
        })
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result.map(Some)
}

/// The name an image's SBOM is served under, `<name>-v<X.Y.Z>-<arch>.spdx.json`,
/// not dist's `<image>.raw.spdx.json`: systemd-sysupdate 257 takes every
/// SHA256SUMS line that *starts* with a match of its MatchPattern (later
/// versions also anchor the end), so an SBOM named after the whole image
/// is fetched and linked as the image itself.
fn served_sbom(image: &Path) -> PathBuf {
    image.with_extension("spdx.json")
}

/// The sysupdate transfer file of one minor channel: every patch release
/// of `<name>-v<minor>.*` from the served directory, verified against the
/// signed SHA256SUMS, kept as up to three versions in
/// /opt/extensions/<name> (not merged: /etc/extensions holds only the
/// link), the current one linked as /etc/extensions/<name>.raw: the name
/// the image's extension-release file matches.
pub fn transfer(name: &str, minor: &str, base_url: &str) -> String {
    format!(
        "# systemd-sysupdate: the {name} system extension, channel v{minor} (every patch\n\
         # release of {minor}). Install as /etc/sysupdate.{name}.d/{name}.conf,\n\
         # the repository's key in /etc/systemd/import-pubring.gpg, then run\n\
         # `systemd-sysupdate -C {name} update` and `systemd-sysext refresh`.\n\
         # A new minor is a new channel: replace this file with the next one.\n\
         [Transfer]\n\
         Verify=yes\n\
         \n\
         [Source]\n\
         Type=url-file\n\
         Path={base_url}/{DIR}/\n\
         MatchPattern={name}-v{minor}.@v-%a.raw\n\
         \n\
         [Target]\n\
         Type=regular-file\n\
         Path=/opt/extensions/{name}\n\
         MatchPattern={name}-v{minor}.@v-%a.raw\n\
         Mode=0644\n\
         InstancesMax=3\n\
         CurrentSymlink=/etc/extensions/{name}.raw\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transfer_file_matches_the_channel_and_links_the_release_name() {
        let text = transfer("kubernetes", "1.34", "https://mirror.example/kubedist");
        for line in [
            "Verify=yes",
            "Path=https://mirror.example/kubedist/sysext/",
            "MatchPattern=kubernetes-v1.34.@v-%a.raw",
            "Path=/opt/extensions/kubernetes",
            "InstancesMax=3",
            "CurrentSymlink=/etc/extensions/kubernetes.raw",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }

    /// A squashfs image holding only an extension-release file.
    fn image(dir: &Path, file: &str, release_name: &str, release: &str) -> PathBuf {
        use backhand::compression::Compressor;
        use backhand::{FilesystemCompressor, FilesystemWriter, NodeHeader};
        let mut fs = FilesystemWriter::default();
        // The crate's default, xz, is not built in.
        fs.set_compressor(FilesystemCompressor::new(Compressor::Gzip, None).unwrap());
        fs.set_emit_compression_options(false);
        let header = |permissions| NodeHeader {
            permissions,
            ..NodeHeader::default()
        };
        for d in ["usr", "usr/lib", "usr/lib/extension-release.d"] {
            fs.push_dir(d, header(0o755)).unwrap();
        }
        let release_path = format!("usr/lib/extension-release.d/extension-release.{release_name}");
        fs.push_file(
            std::io::Cursor::new(release.as_bytes()),
            release_path,
            header(0o644),
        )
        .unwrap();
        let path = dir.join(file);
        fs.write(fs::File::create(&path).unwrap()).unwrap();
        path
    }

    #[test]
    fn images_are_read_and_their_names_checked_against_their_release_file() {
        let tmp = tempfile::tempdir().unwrap();
        let release = "ID=_any\nARCHITECTURE=x86-64\nSYSEXT_VERSION_ID=1.34.2-3\n";
        let good = image(
            tmp.path(),
            "kubernetes-v1.34.2-x86-64.raw",
            "kubernetes",
            release,
        );
        assert_eq!(
            read_image(&good).unwrap(),
            Image {
                name: "kubernetes".into(),
                version: "1.34.2".into(),
                revision: 3,
            }
        );
        for (file, release_name, says) in [
            (
                "k8s-v1.34.2-x86-64.raw",
                "kubernetes",
                "must be named kubernetes-v<X.Y.Z>-x86-64.raw",
            ),
            (
                "kubernetes-v1.34.2-arm64.raw",
                "kubernetes",
                "must be named",
            ),
            (
                "kubernetes-v1.34.2-x86-64.raw",
                "k8s",
                "must be named k8s-v",
            ),
        ] {
            let dir = tmp.path().join(format!("{file}-{release_name}"));
            fs::create_dir(&dir).unwrap();
            let path = image(&dir, file, release_name, release);
            let err = format!("{:#}", read_image(&path).unwrap_err());
            assert!(err.contains(says), "{file}: {err}");
        }
    }

    #[test]
    fn minors_are_the_first_two_numbers() {
        let image = |version: &str| Image {
            name: "kubernetes".into(),
            version: version.into(),
            revision: 1,
        };
        assert_eq!(image("1.34.2").minor(), "1.34");
        assert_eq!(image("1.35.0-rc.1").minor(), "1.35");
    }
}
