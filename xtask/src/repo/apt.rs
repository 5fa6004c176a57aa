//! The apt repository: `pool/` holds every `.deb` ever added; `dists/<suite>/`
//! is rebuilt from the pool on each run (Packages per architecture,
//! Release with the digests of every index, InRelease and Release.gpg) and
//! swapped in whole. Layout as in Debian's archive (deb(5), and the
//! repository format described on the Debian wiki), with each index also
//! under `by-hash/SHA256/<digest>` (`Acquire-By-Hash: yes`): apt fetches
//! indices by the digest InRelease names, and the indices of the Release
//! a run replaces are kept there, so a client that read InRelease just
//! before a publish (or a mirror mid-sync) still gets the indices it names.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::debfile::{self, Control};
use super::files::{self, Digests};
use super::state::State;
use super::Settings;
use crate::keys::Signers;

/// Fields the repository computes; a package's own values are dropped.
const COMPUTED_FIELDS: &[&str] = &["Filename", "Size", "MD5sum", "SHA1", "SHA256", "SHA512"];

pub struct AptSummary {
    pub packages: usize,
    pub architectures: Vec<String>,
}

/// A `.deb` in the pool, as its Packages stanza needs it.
struct PoolEntry {
    control: Control,
    /// Path relative to the repository root, with `/`.
    filename: String,
    digests: Digests,
}

impl PoolEntry {
    fn field(&self, name: &str) -> &str {
        self.control.get(name).unwrap_or_default()
    }
}

/// True when `repo` already holds an apt tree.
pub fn exists(repo: &Path) -> bool {
    repo.join("pool").is_dir()
}

/// Refuses what `publish` would refuse of `new_debs`, writing nothing.
pub fn check(repo: &Path, new_debs: &[PathBuf], component: &str, state: &mut State) -> Result<()> {
    for deb in new_debs {
        plan_pool_file(repo, deb, component, state)?;
    }
    Ok(())
}

/// Adds `new_debs` to the pool, then rebuilds and re-signs `dists/<suite>`.
/// Returns `None` when there is no `.deb` at all.
pub fn publish(
    repo: &Path,
    new_debs: &[PathBuf],
    key: &Signers,
    settings: &Settings,
    state: &mut State,
) -> Result<Option<AptSummary>> {
    // Every new file is checked before the first one is copied.
    let mut planned = Vec::new();
    for deb in new_debs {
        if let Some(dest) = plan_pool_file(repo, deb, &settings.component, state)? {
            planned.push((deb, dest));
        }
    }
    for (deb, dest) in planned {
        files::create_dir(dest.parent().context("pool path has no parent")?)?;
        files::copy_atomic(deb, &dest, files::FILE_MODE)?;
        // Its SBOM beside it, when dist made one (checked with the deb by
        // incoming::read_dist_dir): it names the deb's digest, which the
        // signed Packages index gives too.
        let sbom = crate::sbom::path_of(deb);
        if sbom.is_file() {
            files::copy_atomic(&sbom, &crate::sbom::path_of(&dest), files::FILE_MODE)?;
        }
    }
    let entries = read_pool(repo, state)?;
    if entries.is_empty() {
        return Ok(None);
    }
    check_unique(&entries)?;

    let architectures = architectures(&entries);
    let dists = repo.join("dists");
    files::create_dir(&dists)?;
    let target = dists.join(&settings.suite);
    let carried = by_hash_of_release(&target)?;
    let staged = files::staging_dir(&target)?;
    if let Err(e) = write_suite(&staged, &entries, &architectures, key, settings) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(e);
    }
    files::swap_metadata(&staged, &target, &["InRelease", "Release.gpg"], &carried)?;
    Ok(Some(AptSummary {
        packages: entries.len(),
        architectures,
    }))
}

/// Debian's pool layout: `pool/<component>/<prefix>/<source>/`, the prefix
/// being the first letter, or four for `lib*`.
fn pool_dir(component: &str, control: &Control) -> String {
    let package = control.get("Package").unwrap_or_default();
    // `Source: name (version)` when the source version differs.
    let source = control
        .get("Source")
        .and_then(|s| s.split_whitespace().next())
        .filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
        })
        .unwrap_or(package);
    let prefix = if source.starts_with("lib") && source.len() > 3 {
        &source[..4]
    } else {
        &source[..1]
    };
    format!("pool/{component}/{prefix}/{source}")
}

/// `name_version_arch.deb`, without an epoch (as dpkg-name writes it).
fn canonical_name(control: &Control) -> String {
    let version = control.get("Version").unwrap_or_default();
    let version = version.split_once(':').map_or(version, |(_, v)| v);
    format!(
        "{}_{}_{}.deb",
        control.get("Package").unwrap_or_default(),
        version,
        control.get("Architecture").unwrap_or_default()
    )
}

/// Where `deb` goes in the pool; `None` when it is there already. A file
/// already there must be identical: replacing it would break every client
/// that has the old index.
fn plan_pool_file(
    repo: &Path,
    deb: &Path,
    component: &str,
    state: &mut State,
) -> Result<Option<PathBuf>> {
    let control = debfile::read_control(deb)?;
    let name = canonical_name(&control);
    if deb.file_name().and_then(|n| n.to_str()) != Some(name.as_str()) {
        bail!(
            "{}: its control data make it {name}; refusing a file whose name says otherwise",
            deb.display()
        );
    }
    let dest = repo.join(pool_dir(component, &control)).join(name);
    if !dest.exists() {
        return Ok(Some(dest));
    }
    if state.deb(&dest)?.1.sha256 != Digests::of_file(deb)?.sha256 {
        bail!(
            "{}: {} is already in the repository with different content; publish a rebuilt package under a new version (revision)",
            deb.display(),
            dest.strip_prefix(repo).unwrap_or(&dest).display()
        );
    }
    Ok(None)
}

/// Every `.deb` in the pool.
pub fn pool_files(repo: &Path) -> Result<Vec<PathBuf>> {
    files::find_files(&repo.join("pool"), ".deb")
}

/// Every `.deb` in the pool, from the state's records where they still
/// match the files.
fn read_pool(repo: &Path, state: &mut State) -> Result<Vec<PoolEntry>> {
    let mut entries = Vec::new();
    for path in files::find_files(&repo.join("pool"), ".deb")? {
        let (control, digests) = state.deb(&path)?;
        let filename = path
            .strip_prefix(repo)
            .with_context(|| format!("{}: outside the repository", path.display()))?
            .to_str()
            .with_context(|| format!("{}: file name is not UTF-8", path.display()))?
            .to_string();
        entries.push(PoolEntry {
            control,
            filename,
            digests,
        });
    }
    // Stable order: the index is the same whatever order files were added in.
    entries.sort_by(|a, b| {
        (a.field("Package"), a.field("Architecture"), &a.filename).cmp(&(
            b.field("Package"),
            b.field("Architecture"),
            &b.filename,
        ))
    });
    Ok(entries)
}

/// One package version per architecture: two files claiming the same one
/// would make apt's choice arbitrary.
fn check_unique(entries: &[PoolEntry]) -> Result<()> {
    let mut seen: BTreeMap<(&str, &str, &str), &str> = BTreeMap::new();
    for e in entries {
        let id = (
            e.field("Package"),
            e.field("Version"),
            e.field("Architecture"),
        );
        if let Some(other) = seen.insert(id, &e.filename) {
            bail!(
                "{} and {} are both {} {} for {}: remove one",
                other,
                e.filename,
                id.0,
                id.1,
                id.2
            );
        }
    }
    Ok(())
}

/// The architectures the indices cover; `all` packages go into each.
fn architectures(entries: &[PoolEntry]) -> Vec<String> {
    let arches: BTreeSet<&str> = entries
        .iter()
        .map(|e| e.field("Architecture"))
        .filter(|a| *a != "all")
        .collect();
    if arches.is_empty() {
        return vec!["all".into()];
    }
    arches.into_iter().map(String::from).collect()
}

fn write_suite(
    dir: &Path,
    entries: &[PoolEntry],
    architectures: &[String],
    key: &Signers,
    settings: &Settings,
) -> Result<()> {
    let mut indices = Vec::new();
    for arch in architectures {
        let rel_dir = format!("{}/binary-{arch}", settings.component);
        files::create_dir(&dir.join(&rel_dir))?;
        let packages = packages_index(entries.iter().filter(|e| {
            let a = e.field("Architecture");
            a == arch || a == "all"
        }));
        for (name, data) in [
            ("Packages", packages.clone().into_bytes()),
            ("Packages.gz", gzip(packages.as_bytes())?),
            ("Packages.xz", xz(packages.as_bytes())?),
        ] {
            let rel = format!("{rel_dir}/{name}");
            crate::util::write_bytes_atomic(&dir.join(&rel), &data, files::FILE_MODE)?;
            let digests = Digests::of_bytes(&data);
            let by_hash = dir.join(by_hash_path(&rel, &digests.sha256));
            files::create_dir(by_hash.parent().context("by-hash path has no parent")?)?;
            std::fs::hard_link(dir.join(&rel), &by_hash)
                .with_context(|| format!("{}: cannot link", by_hash.display()))?;
            indices.push((rel, digests));
        }
    }
    let release = release_file(settings, architectures, &indices);
    crate::util::write_bytes_atomic(&dir.join("Release"), release.as_bytes(), files::FILE_MODE)?;
    let detached = key.detached_armored(release.as_bytes(), settings.timestamp)?;
    crate::util::write_bytes_atomic(
        &dir.join("Release.gpg"),
        detached.as_bytes(),
        files::FILE_MODE,
    )?;
    let inline = key.clearsign(&release, settings.timestamp)?;
    crate::util::write_bytes_atomic(&dir.join("InRelease"), inline.as_bytes(), files::FILE_MODE)
}

/// Where an index is kept by its digest: `DIR/by-hash/SHA256/HEX` beside
/// `DIR/NAME`.
fn by_hash_path(rel: &str, sha256: &str) -> String {
    match rel.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/by-hash/SHA256/{sha256}"),
        None => format!("by-hash/SHA256/{sha256}"),
    }
}

/// The by-hash paths of the indices the Release in `suite_dir` lists (none
/// when there is no Release yet).
pub fn by_hash_of_release(suite_dir: &Path) -> Result<Vec<String>> {
    let path = suite_dir.join("Release");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let release = std::fs::read_to_string(&path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let mut paths = Vec::new();
    let mut in_sha256 = false;
    for line in release.lines() {
        if !line.starts_with(' ') {
            in_sha256 = line == "SHA256:";
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let (true, [sha256, _size, rel]) = (in_sha256, &words[..]) {
            paths.push(by_hash_path(rel, sha256));
        }
    }
    Ok(paths)
}

/// The stanzas, separated by blank lines: the package's control fields,
/// then where the file is and its digests, Description last (as in
/// Debian's own indices).
fn packages_index<'a>(entries: impl Iterator<Item = &'a PoolEntry>) -> String {
    let mut out = String::new();
    for e in entries {
        if !out.is_empty() {
            out.push('\n');
        }
        let fields = e
            .control
            .fields
            .iter()
            .filter(|(n, _)| !COMPUTED_FIELDS.iter().any(|c| c.eq_ignore_ascii_case(n)));
        let mut description = None;
        for (name, value) in fields {
            if name.eq_ignore_ascii_case("Description") {
                description = Some(value);
                continue;
            }
            out.push_str(&format!("{name}: {value}\n"));
        }
        out.push_str(&format!(
            "Filename: {}\nSize: {}\nMD5sum: {}\nSHA256: {}\n",
            e.filename,
            e.digests.size,
            e.digests.md5(),
            e.digests.sha256
        ));
        if let Some(d) = description {
            out.push_str(&format!("Description: {d}\n"));
        }
    }
    out
}

fn release_file(
    settings: &Settings,
    architectures: &[String],
    indices: &[(String, Digests)],
) -> String {
    let mut out = String::new();
    out.push_str("Origin: kubedist\nLabel: kubedist\n");
    out.push_str(&format!("Suite: {0}\nCodename: {0}\n", settings.suite));
    out.push_str(&format!(
        "Date: {}\n",
        crate::util::rfc2822(settings.timestamp)
    ));
    if let Some(days) = settings.valid_days {
        out.push_str(&format!(
            "Valid-Until: {}\n",
            crate::util::rfc2822(settings.timestamp + u64::from(days) * 86_400)
        ));
    }
    out.push_str(&format!("Architectures: {}\n", architectures.join(" ")));
    out.push_str(&format!("Components: {}\n", settings.component));
    out.push_str("Description: Kubernetes node components packaged by kubedist\n");
    out.push_str("Acquire-By-Hash: yes\n");
    out.push_str("MD5Sum:\n");
    for (path, d) in indices {
        out.push_str(&format!(" {} {:>16} {path}\n", d.md5(), d.size));
    }
    out.push_str("SHA256:\n");
    for (path, d) in indices {
        out.push_str(&format!(" {} {:>16} {path}\n", d.sha256, d.size));
    }
    out
}

/// gzip with no name and mtime 0 in the header: reproducible.
fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    enc.write_all(data)?;
    Ok(enc.finish()?)
}

fn xz(data: &[u8]) -> Result<Vec<u8>> {
    Ok(crate::emit::codec::xz_small(6, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(control: &str, filename: &str) -> PoolEntry {
        PoolEntry {
            control: Control::parse(control).unwrap(),
            filename: filename.into(),
            digests: Digests::of_bytes(filename.as_bytes()),
        }
    }

    #[test]
    fn pool_paths_follow_debian() {
        let c =
            Control::parse("Package: kubelet\nVersion: 1:1.31.2-1\nArchitecture: amd64\n").unwrap();
        assert_eq!(pool_dir("main", &c), "pool/main/k/kubelet");
        assert_eq!(canonical_name(&c), "kubelet_1.31.2-1_amd64.deb");
        let lib = Control::parse(
            "Package: libfoo1\nSource: libfoo (2.0-1)\nVersion: 2.0-1+b1\nArchitecture: arm64\n",
        )
        .unwrap();
        assert_eq!(pool_dir("main", &lib), "pool/main/libf/libfoo");
    }

    #[test]
    fn stanza_lists_file_and_digests_before_the_description() {
        let e = entry(
            "Package: kubectl\nVersion: 1.31.2-1\nArchitecture: amd64\nDescription: cli\n long\nSHA256: bogus\nMaintainer: k <k@x>\n",
            "pool/main/k/kubectl/kubectl_1.31.2-1_amd64.deb",
        );
        let text = packages_index([&e].into_iter());
        let expected = format!(
            "Package: kubectl\nVersion: 1.31.2-1\nArchitecture: amd64\nMaintainer: k <k@x>\n\
             Filename: pool/main/k/kubectl/kubectl_1.31.2-1_amd64.deb\nSize: {}\nMD5sum: {}\nSHA256: {}\n\
             Description: cli\n long\n",
            e.digests.size, e.digests.md5(), e.digests.sha256
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn duplicate_versions_are_refused() {
        let c = "Package: kubelet\nVersion: 1-1\nArchitecture: amd64\n";
        let err = check_unique(&[entry(c, "pool/a.deb"), entry(c, "pool/b.deb")]).unwrap_err();
        assert!(
            err.to_string().contains("are both kubelet 1-1 for amd64"),
            "{err}"
        );
    }

    #[test]
    fn release_lists_every_index() {
        let settings = Settings {
            suite: "stable".into(),
            component: "main".into(),
            base_url: "file:///srv/kubedist".into(),
            valid_days: Some(7),
            timestamp: 1_700_000_000,
        };
        let idx = vec![(
            "main/binary-amd64/Packages".to_string(),
            Digests::of_bytes(b"x"),
        )];
        let text = release_file(&settings, &["amd64".into()], &idx);
        assert!(
            text.contains("Date: Tue, 14 Nov 2023 22:13:20 +0000\n"),
            "{text}"
        );
        assert!(
            text.contains("Valid-Until: Tue, 21 Nov 2023 22:13:20 +0000\n"),
            "{text}"
        );
        assert!(
            text.contains("Architectures: amd64\nComponents: main\n"),
            "{text}"
        );
        let sha = Digests::of_bytes(b"x").sha256;
        assert!(
            text.contains(&format!(
                "SHA256:\n {sha}                1 main/binary-amd64/Packages\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn compressed_indices_are_reproducible() {
        assert_eq!(
            gzip(b"Package: a\n").unwrap(),
            gzip(b"Package: a\n").unwrap()
        );
        assert_eq!(xz(b"Package: a\n").unwrap(), xz(b"Package: a\n").unwrap());
    }
}
