//! The packages and sysext images of one dist output directory, checked
//! against its SHA256SUMS before anything is published.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::files::Digests;

#[derive(Debug, Default)]
pub struct DistPackages {
    pub debs: Vec<PathBuf>,
    pub rpms: Vec<PathBuf>,
    /// systemd-sysext images.
    pub raws: Vec<PathBuf>,
    /// The sha256 of each file above.
    pub sha256: BTreeMap<PathBuf, String>,
}

/// Keeps one file per name in `paths`, which are bound for one tree (a
/// channel's pool, the sysext directory): a name given twice must be the same
/// bytes (kept once), else the run is refused before anything is written.
pub fn one_per_name(paths: &mut Vec<PathBuf>, sha256: &BTreeMap<PathBuf, String>) -> Result<()> {
    let mut seen: BTreeMap<String, &PathBuf> = BTreeMap::new();
    let mut kept = Vec::new();
    for path in paths.iter() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match seen.get(&name) {
            Some(first) if sha256.get(*first) != sha256.get(path) => bail!(
                "{} and {}: two different files named {name} in one run; refusing both",
                first.display(),
                path.display()
            ),
            Some(_) => {}
            None => {
                seen.insert(name, path);
                kept.push(path.clone());
            }
        }
    }
    *paths = kept;
    Ok(())
}

/// `path` is a regular file (a symlink to one counts): a FIFO or a device
/// named like a package would block or never end a read.
fn regular(path: &Path) -> Result<()> {
    let meta = fs::metadata(path).with_context(|| format!("{}: cannot stat", path.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file; refusing it", path.display());
    }
    Ok(())
}

/// Lists the `.deb`, `.rpm` and `.raw` files of `dir`, with their sha256;
/// each, and the SBOM beside it when there is one, must be a regular file
/// listed in `dir/SHA256SUMS` and match it (a truncated copy must not be
/// published).
pub fn read_dist_dir(dir: &Path) -> Result<DistPackages> {
    let sums_path = dir.join("SHA256SUMS");
    if sums_path.exists() {
        regular(&sums_path)?;
    }
    let sums_text = fs::read_to_string(&sums_path).with_context(|| {
        format!(
            "{}: cannot read (is {} a dist output directory?)",
            sums_path.display(),
            dir.display()
        )
    })?;
    let sums = parse_sha256sums(&sums_text).with_context(|| format!("{}", sums_path.display()))?;

    let mut packages = DistPackages::default();
    let entries = fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("{}: cannot list", dir.display()))?
            .path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let is_package = |n: &str| [".deb", ".rpm", ".raw"].iter().any(|e| n.ends_with(e));
        let list = if name.ends_with(".deb") {
            &mut packages.debs
        } else if name.ends_with(".rpm") {
            &mut packages.rpms
        } else if name.ends_with(".raw") {
            &mut packages.raws
        } else if name.strip_suffix(".spdx.json").is_some_and(is_package) {
            // A package's SBOM: checked here, published beside it.
            check_listed(&path, name, &sums, &sums_path)?;
            continue;
        } else {
            continue;
        };
        let actual = check_listed(&path, name, &sums, &sums_path)?;
        list.push(path.clone());
        packages.sha256.insert(path, actual);
    }
    if packages.debs.is_empty() && packages.rpms.is_empty() && packages.raws.is_empty() {
        bail!("{}: no .deb, .rpm or .raw files", dir.display());
    }
    packages.debs.sort();
    packages.rpms.sort();
    packages.raws.sort();
    Ok(packages)
}

/// The sha256 of `path` (named `name` in `sums`, read from `sums_path`),
/// a regular file that SHA256SUMS lists with that digest.
fn check_listed(
    path: &Path,
    name: &str,
    sums: &BTreeMap<String, String>,
    sums_path: &Path,
) -> Result<String> {
    let Some(expected) = sums.get(name) else {
        bail!("{}: not listed in {}", path.display(), sums_path.display());
    };
    regular(path)?;
    let actual = Digests::of_file(path)?.sha256;
    if &actual != expected {
        bail!(
            "{}: sha256 {actual} does not match {} ({expected})",
            path.display(),
            sums_path.display()
        );
    }
    Ok(actual)
}

/// `sha256sum` output: `<hex>  <name>` or `<hex> *<name>` per line.
pub fn parse_sha256sums(text: &str) -> Result<BTreeMap<String, String>> {
    let mut sums = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = line.split_once(' ').and_then(|(hash, rest)| {
            let name = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*'))?;
            let valid = hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit());
            valid.then(|| (name.to_string(), hash.to_ascii_lowercase()))
        });
        let Some((name, hash)) = parsed else {
            bail!("line {}: expected `<sha256>  <file>`", n + 1);
        };
        // Entries may name files in subdirectories; we look up by file name.
        let base = name.rsplit('/').next().unwrap_or(&name).to_string();
        sums.insert(base, hash);
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn both_sha256sum_styles_parse() {
        let text = format!("{H}  kubelet_1.0-1_amd64.deb\n{H} *rpm/kubelet-1.0-1.x86_64.rpm\n\n");
        let sums = parse_sha256sums(&text).unwrap();
        assert_eq!(sums["kubelet_1.0-1_amd64.deb"], H);
        assert_eq!(sums["kubelet-1.0-1.x86_64.rpm"], H);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse_sha256sums(&format!("{H}  a\nnot a sum\n")).unwrap_err();
        assert_eq!(err.to_string(), "line 2: expected `<sha256>  <file>`");
    }

    #[test]
    fn a_corrupt_package_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a_1_amd64.deb"), b"abc").unwrap();
        fs::write(
            tmp.path().join("SHA256SUMS"),
            format!("{H}  a_1_amd64.deb\n"),
        )
        .unwrap();
        assert_eq!(read_dist_dir(tmp.path()).unwrap().debs.len(), 1);
        fs::write(tmp.path().join("a_1_amd64.deb"), b"abd").unwrap();
        let err = read_dist_dir(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("does not match"), "{err}");
    }

    /// A dist directory holding `name` with `bytes`.
    fn dist(top: &Path, dir: &str, name: &str, bytes: &[u8]) -> PathBuf {
        let dir = top.join(dir);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join(name), bytes).unwrap();
        let sha = crate::digest::sha256_bytes(bytes);
        fs::write(dir.join("SHA256SUMS"), format!("{sha}  {name}\n")).unwrap();
        dir
    }

    #[test]
    fn one_name_twice_in_one_run_must_be_the_same_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let read = |dirs: &[PathBuf]| -> Result<Vec<PathBuf>> {
            let (mut all, mut sha256) = (Vec::new(), BTreeMap::new());
            for d in dirs {
                let found = read_dist_dir(d)?;
                all.extend(found.debs);
                sha256.extend(found.sha256);
            }
            one_per_name(&mut all, &sha256)?;
            Ok(all)
        };
        let a = dist(tmp.path(), "a", "k_1_amd64.deb", b"one");
        let same = dist(tmp.path(), "same", "k_1_amd64.deb", b"one");
        let other = dist(tmp.path(), "other", "k_1_amd64.deb", b"two");
        assert_eq!(read(&[a.clone(), same]).unwrap().len(), 1);
        let err = read(&[a, other]).unwrap_err().to_string();
        assert!(
            err.contains("two different files named k_1_amd64.deb"),
            "{err}"
        );
    }

    #[test]
    fn a_fifo_or_a_device_named_like_a_package_is_refused_without_reading_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = dist(tmp.path(), "d", "k_1_amd64.deb", b"one");
        fs::remove_file(dir.join("k_1_amd64.deb")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("k_1_amd64.deb"))
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_dist_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        fs::remove_file(dir.join("k_1_amd64.deb")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("k_1_amd64.deb")).unwrap();
        let err = read_dist_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
