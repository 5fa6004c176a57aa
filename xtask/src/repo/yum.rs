//! The dnf/yum repositories: one per architecture, `REPO/<arch>/` with the
//! signed rpms and `repodata/` (repomd.xml, primary, filelists, other, and
//! the detached armoured `repomd.xml.asc` that `repo_gpgcheck=1` checks).
//! Clients use `baseurl=<base>/$basearch`.
//!
//! Packages are signed with the repository key (keys.rs) and the signature
//! put into the rpm's signature header with the `rpm` crate.
//! The repodata is written by `createrepo_c`: the only Rust implementation
//! we found (createrepo_rs) is a young single-author 0.1 crate that
//! brings its own SQLite; createrepo_c is the implementation Fedora and
//! RHEL build their repositories with, and Debian packages it
//! (createrepo-c). We pass it fixed timestamps, so its output is
//! reproducible too.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rpm::{Package, PackageMetadata};

use super::files;
use super::state::State;
use super::Settings;
use crate::keys::{RepoKey, Signers};

/// Top-level directories that are never rpm architectures.
const NOT_ARCH_DIRS: &[&str] = &["pool", "dists", super::sysext::DIR];

pub struct YumArch {
    pub arch: String,
    pub packages: usize,
}

/// An rpm to be added, and where.
struct Planned {
    source: PathBuf,
    dest: PathBuf,
}

/// True when `repo` already holds a dnf repository.
pub fn exists(repo: &Path) -> Result<bool> {
    Ok(!arch_dirs(repo)?.is_empty())
}

/// Refuses what `publish` would refuse of `new_rpms`, writing nothing.
pub fn check(repo: &Path, new_rpms: &[PathBuf]) -> Result<()> {
    if !plan(repo, new_rpms)?.is_empty() || exists(repo)? {
        require_createrepo()?;
    }
    Ok(())
}

/// Adds `new_rpms` (signed) to their architecture's directory, re-signs
/// rpms signed by another key, then rebuilds and signs every repodata.
pub fn publish(
    repo: &Path,
    new_rpms: &[PathBuf],
    signers: &Signers,
    settings: &Settings,
    state: &mut State,
) -> Result<Vec<YumArch>> {
    // The rpms carry one signature, the primary key's (rpm's header has
    // room for one); the metadata is signed by every key.
    let key = signers.primary();
    let planned = plan(repo, new_rpms)?;
    let arches = {
        let mut a = arch_dirs(repo)?;
        a.extend(
            planned
                .iter()
                .filter_map(|p| p.dest.parent().and_then(|d| d.file_name()))
                .map(|n| n.to_string_lossy().into_owned()),
        );
        a
    };
    if arches.is_empty() {
        return Ok(Vec::new());
    }
    require_createrepo()?;
    for p in &planned {
        files::create_dir(p.dest.parent().context("rpm destination has no parent")?)?;
        write_signed(&p.source, &p.dest, key, settings.timestamp)?;
    }

    let ours = crate::util::hex(key.signing_fingerprint().as_bytes()).to_ascii_lowercase();
    let mut summary = Vec::new();
    for arch in &arches {
        let dir = repo.join(arch);
        let rpms = files::find_files(&dir, ".rpm")?;
        for rpm in &rpms {
            // The state's record of who signed it: an rpm signed at an
            // earlier run is not read again.
            if !state.rpm(rpm)?.1.contains(&ours) {
                // Signed by an earlier key (or not at all): clients that
                // trust only the current key would refuse it.
                eprintln!("re-signing {} with {}", rpm.display(), key.fingerprint());
                write_signed(rpm, rpm, key, settings.timestamp)?;
            }
        }
        write_repodata(&dir, signers, settings)?;
        summary.push(YumArch {
            arch: arch.clone(),
            packages: rpms.len(),
        });
    }
    Ok(summary)
}

/// Decides where each new rpm goes and refuses conflicts before anything
/// is written: a file already present must hold the same package.
fn plan(repo: &Path, new_rpms: &[PathBuf]) -> Result<Vec<Planned>> {
    let mut metas = Vec::new();
    for path in new_rpms {
        let meta = super::rpmfile::read(path)?;
        let arch = meta
            .get_arch()
            .with_context(|| format!("{}: no architecture", path.display()))?
            .to_string();
        let name =
            file_name(&meta).with_context(|| format!("{}: incomplete header", path.display()))?;
        if path.file_name().and_then(|n| n.to_str()) != Some(name.as_str()) {
            bail!(
                "{}: its header makes it {name}; refusing a file whose name says otherwise",
                path.display()
            );
        }
        metas.push((path, arch, name));
    }
    // noarch packages go into every architecture's repository.
    let mut all_arches = arch_dirs(repo)?;
    all_arches.extend(metas.iter().map(|m| m.1.clone()).filter(|a| a != "noarch"));

    let mut planned = Vec::new();
    for (path, arch, name) in metas {
        let targets: Vec<&String> = if arch == "noarch" {
            all_arches.iter().collect()
        } else {
            vec![&arch]
        };
        if targets.is_empty() {
            bail!(
                "{}: a noarch rpm needs at least one architecture's repository to go in",
                path.display()
            );
        }
        for target in targets {
            if !target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                bail!("{}: unexpected architecture {target:?}", path.display());
            }
            let dest = repo.join(target).join(&name);
            if dest.exists() {
                if content_digest(&dest)? != content_digest(path)? {
                    bail!(
                        "{}: {target}/{name} is already in the repository with different content; publish a rebuilt package under a new version (release)",
                        path.display()
                    );
                }
                continue;
            }
            planned.push(Planned {
                source: path.clone(),
                dest,
            });
        }
    }
    Ok(planned)
}

/// `name-version-release.arch.rpm`, the name dnf and rpm users expect.
fn file_name(meta: &PackageMetadata) -> Result<String> {
    let name = meta.get_name()?;
    let valid = |s: &str| !s.is_empty() && !s.contains(['/', ' ']) && !s.starts_with('.');
    let parts = [
        name,
        meta.get_version()?,
        meta.get_release()?,
        meta.get_arch()?,
    ];
    if !parts.iter().all(|p| valid(p)) {
        bail!("name, version, release or arch is not usable in a file name: {parts:?}");
    }
    Ok(format!(
        "{}-{}-{}.{}.rpm",
        parts[0], parts[1], parts[2], parts[3]
    ))
}

/// A digest of the package without its signatures: the same package
/// signed by two keys (or unsigned) has the same content digest.
fn content_digest(path: &Path) -> Result<String> {
    let pkg =
        Package::open(path).with_context(|| format!("{}: not a readable rpm", path.display()))?;
    let mut hasher = crate::digest::Hasher::new(crate::digest::Algo::Sha256);
    hasher.update(
        &pkg.header_bytes()
            .with_context(|| format!("{}: header", path.display()))?,
    );
    hasher.update(&pkg.payload);
    Ok(hasher.finish().sha256)
}

/// Writes `source` signed to `dest` (they may be the same file),
/// atomically, with the mtime createrepo_c will record. The signature is
/// rpm's v4 header signature: a detached OpenPGP signature of the header,
/// which covers the payload through the header's payload digest.
fn write_signed(source: &Path, dest: &Path, key: &RepoKey, timestamp: u64) -> Result<()> {
    let mut pkg = Package::open(source)
        .with_context(|| format!("{}: not a readable rpm", source.display()))?;
    let header = pkg
        .header_bytes()
        .with_context(|| format!("{}: header", source.display()))?;
    let signature = key
        .detached_binary(&header, timestamp)
        .with_context(|| format!("{}: signing failed", source.display()))?;
    pkg.apply_signature(signature)
        .with_context(|| format!("{}: cannot add the signature", source.display()))?;
    // Its SBOM beside it, naming the signed file (read before the rpm is
    // replaced: a re-signed rpm's SBOM is the one beside it).
    let sbom = crate::sbom::path_of(source);
    let doc = if sbom.is_file() {
        Some(fs::read(&sbom).with_context(|| format!("reading {}", sbom.display()))?)
    } else {
        None
    };
    crate::util::write_atomic(dest, files::FILE_MODE, |f| {
        pkg.write(f)
            .with_context(|| format!("{}: cannot write", dest.display()))
    })?;
    if let Some(doc) = doc {
        let signed = crate::sbom::for_signed(&doc, &crate::digest::sha256_file(dest)?)
            .with_context(|| sbom.display().to_string())?;
        crate::util::write_bytes_atomic(&crate::sbom::path_of(dest), &signed, files::FILE_MODE)?;
    }
    files::set_mtime(dest, timestamp)
}

/// Builds `dir/repodata` beside the old one, signs `repomd.xml`, swaps it in.
fn write_repodata(dir: &Path, key: &Signers, settings: &Settings) -> Result<()> {
    let target = dir.join("repodata");
    let carried = repodata_files(&target)?;
    let staging = files::staging_dir(&target)?;
    let result = (|| -> Result<()> {
        let sh = xshell::Shell::new()?;
        let revision = settings.timestamp.to_string();
        // --no-database: dnf reads the XML; the SQLite files are neither
        // needed nor reproducible.
        // With metadata already there, --update takes each rpm whose size
        // and mtime are unchanged from it instead of reading the rpm: the
        // same entries, so the same bytes as a full run (tested).
        let update: &[&str] = if target.join("repomd.xml").is_file() {
            &["--update", "--update-md-path"]
        } else {
            &[]
        };
        let old = update.first().map(|_| dir);
        xshell::cmd!(
            sh,
            "createrepo_c --quiet --error-exit-val --no-database --revision {revision} --set-timestamp-to-revision {update...} {old...} --outputdir {staging} {dir}"
        )
        .quiet()
        .run()
        .with_context(|| format!("{}: createrepo_c failed", dir.display()))?;
        let repodata = staging.join("repodata");
        let repomd = fs::read(repodata.join("repomd.xml"))
            .with_context(|| format!("{}: createrepo_c wrote no repomd.xml", repodata.display()))?;
        let signature = key.detached_armored(&repomd, settings.timestamp)?;
        crate::util::write_bytes_atomic(
            &repodata.join("repomd.xml.asc"),
            signature.as_bytes(),
            files::FILE_MODE,
        )?;
        files::swap_metadata(
            &repodata,
            &target,
            &["repomd.xml", "repomd.xml.asc"],
            &carried,
        )
    })();
    let cleanup = fs::remove_dir_all(&staging);
    result?;
    cleanup.with_context(|| format!("{}: cannot remove", staging.display()))
}

/// The files under `repodata/` that `repodata/repomd.xml` names (none
/// when there is none).
pub fn repodata_files(repodata: &Path) -> Result<Vec<String>> {
    let path = repodata.join("repomd.xml");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let repomd =
        fs::read_to_string(&path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(repomd
        .split(r#"<location href="repodata/"#)
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect())
}

fn require_createrepo() -> Result<()> {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("createrepo_c").is_file()));
    if !found {
        bail!("createrepo_c not found on PATH: install it (Debian: apt-get install createrepo-c; Fedora/RHEL: dnf install createrepo_c)");
    }
    Ok(())
}

/// The architecture directories already in `repo`: top-level directories
/// holding rpms or repodata.
/// Every rpm in every architecture's directory.
pub fn all_rpms(repo: &Path) -> Result<Vec<PathBuf>> {
    let mut rpms = Vec::new();
    for arch in arch_dirs(repo)? {
        rpms.extend(files::find_files(&repo.join(arch), ".rpm")?);
    }
    Ok(rpms)
}

fn arch_dirs(repo: &Path) -> Result<BTreeSet<String>> {
    let mut arches = BTreeSet::new();
    let Ok(entries) = fs::read_dir(repo) else {
        return Ok(arches);
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list", repo.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.')
            || NOT_ARCH_DIRS.contains(&name.as_str())
            || super::channels::is_channel_name(&name)
            || !entry.path().is_dir()
        {
            continue;
        }
        if entry.path().join("repodata").is_dir()
            || !files::find_files(&entry.path(), ".rpm")?.is_empty()
        {
            arches.insert(name);
        }
    }
    Ok(arches)
}
