//! `cargo xtask fixtures DIR`: writes an offline `--from` directory for
//! trials and tests, laid out like the official downloads for the versions
//! of `pkg/release.toml`. What Debian ships is real (kubectl from
//! `kubernetes-client`, the CNI plugins from `containernetworking-plugins`);
//! kubelet, kubeadm and crictl, which Debian does not ship, are the
//! `kubedist-standin` recorder, listed in `DIR/STANDINS`, and so is kubectl
//! on an architecture Debian builds no `kubernetes-client` for (ppc64le,
//! riscv64).
pub mod standin_images;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::build;
use crate::digest::sha256_bytes;
use crate::fetch::{debian, is_archive};
use crate::inputs::from_dir;
use crate::spec::{Arch, Spec};

/// Write an offline `--from` directory: Debian's real kubectl and CNI
/// plugins, recorder stand-ins for kubelet, kubeadm and crictl.
///
/// DIR is laid out like the official downloads (DIR/<source>/<path> for
/// every path of pkg/release.toml, each with a .sha256 beside it), plus
/// DIR/STANDINS and DIR/README. DIR is written as a whole (built beside it,
/// then renamed), and the same inputs give the same bytes (archive mtimes
/// from SOURCE_DATE_EPOCH, else 0).
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask fixtures /tmp/kd-fixtures --arch amd64,arm64
  cargo xtask dist --from /tmp/kd-fixtures --arch amd64

Other architectures need Debian's packages of theirs (added as root when
missing), e.g. on an amd64 host:
  dpkg --add-architecture arm64 && apt-get update")]
pub struct Args {
    /// The directory to write. An existing fixtures directory there is
    /// replaced; any other existing, non-empty directory is refused.
    pub dir: PathBuf,
    /// Architectures, comma-separated: amd64, arm64, ppc64le, riscv64, s390x
    /// (Debian's real binaries, where it builds them). Default: this
    /// host's architecture.
    #[arg(long, value_name = "ARCH[,ARCH...]", value_delimiter = ',')]
    pub arch: Vec<Arch>,
    /// Where downloaded Debian packages are kept.
    /// Default: target/debian-debs in the repository.
    #[arg(long, value_name = "DIR")]
    pub debs: Option<PathBuf>,
}

/// The inputs that are recorder stand-ins, one `<source>/<member>` a line.
pub const STANDINS: [&str; 6] = [
    "kubernetes/kubelet",
    "kubernetes/kubeadm",
    "cri-tools/crictl",
    "containerd/bin/containerd",
    "containerd/bin/containerd-shim-runc-v2",
    "containerd/bin/ctr",
];

pub fn run(spec: &Spec, args: &Args) -> Result<()> {
    let arches = Arch::list_or_host(&args.arch)?;
    let debs = args
        .debs
        .clone()
        .unwrap_or_else(|| spec.root.join("target/debian-debs"));
    let _held = lock_beside(&args.dir)?;
    write(spec, &args.dir, &arches, &debs)?;
    println!("fixtures: wrote {}", args.dir.display());
    Ok(())
}

/// The fixtures directory of `--fixtures`: `target/fixtures/VERSION` of the
/// checkout, one a release (`dist --version` relabels the fixtures, and a
/// run for another release must not take this one's away).
pub fn default_dir(spec: &Spec) -> PathBuf {
    spec.root
        .join("target/fixtures")
        .join(spec.kubernetes_version())
}

/// `dir` as a fixtures directory holding at least `arches`: kept when it
/// already does, else (re)written for those and the arches it had. Runs at
/// once (the test suites') take turns on a lock beside `dir`, so that a
/// writer sees, and keeps, the architectures another one added.
pub fn ensure(spec: &Spec, dir: &Path, arches: &[Arch]) -> Result<PathBuf> {
    let _held = lock_beside(dir)?;
    // Complete for an arch when every file of pkg/release.toml is there
    // (`ensure` of fetch verifies their checksums afterwards).
    let has = |arch: &Arch| {
        dir.join(from_dir::STANDINS).is_file()
            && spec.release.sources.iter().all(|(name, source)| {
                source
                    .paths(*arch)
                    .iter()
                    .all(|path| dir.join(name).join(path).is_file())
            })
            && standin_images::has(spec, dir, *arch)
    };
    // ... and its stand-ins are the current build of kubedist-standin: a
    // change to the stand-in reaches the next build without a manual clean.
    let current = |arch: &Arch| -> Result<bool> {
        if !has(arch) {
            return Ok(false);
        }
        let built =
            build::static_binary(&spec.root, "kubedist-standin", "kubedist-standin", *arch)?.path;
        let standin = std::fs::read(&built).with_context(|| built.display().to_string())?;
        for (name, source) in &spec.release.sources {
            for path in source.paths(*arch) {
                let file_name = path.rsplit('/').next().unwrap_or(&path);
                if !matches!(fixture_for(name, file_name), Some(Fixture::Standin)) {
                    continue;
                }
                let file = dir.join(name).join(&path);
                if std::fs::read(&file).with_context(|| file.display().to_string())? != standin {
                    eprintln!(
                        "fixtures: {arch}: {} is not the current kubedist-standin; writing the fixtures again",
                        file.display()
                    );
                    return Ok(false);
                }
            }
        }
        Ok(true)
    };
    let mut stale = false;
    for arch in arches {
        stale |= !current(arch)?;
    }
    if stale {
        let mut all: Vec<Arch> = Arch::ALL.into_iter().filter(has).collect();
        all.extend_from_slice(arches);
        all.sort();
        all.dedup();
        write(spec, dir, &all, &spec.root.join("target/debian-debs"))?;
    }
    Ok(dir.to_path_buf())
}

/// The lock of the fixtures directory `dir`, `DIR.lock` beside it, taken
/// (after its holder lets go) and held until dropped.
fn lock_beside(dir: &Path) -> Result<std::fs::File> {
    let dir = std::path::absolute(dir).with_context(|| dir.display().to_string())?;
    let name = dir
        .file_name()
        .with_context(|| format!("{}: not a directory name", dir.display()))?;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let lock = parent.join(format!("{}.lock", name.to_string_lossy()));
    crate::util::lock_file(&lock, 0o644, true)
        .with_context(|| format!("{}: cannot take the lock", lock.display()))
}

/// Writes the fixtures directory `dir` for `arches`.
pub fn write(spec: &Spec, dir: &Path, arches: &[Arch], debs: &Path) -> Result<()> {
    let dir = std::path::absolute(dir).with_context(|| dir.display().to_string())?;
    refuse_foreign(&dir)?;
    let epoch = crate::util::source_date_epoch(&spec.root)?;
    let name = dir
        .file_name()
        .with_context(|| format!("{}: not a directory name", dir.display()))?
        .to_string_lossy()
        .into_owned();
    let parent = dir.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let temp = TempTree(crate::util::temp_path(&parent.join(&name))?);
    mkdir(&temp.0)?;

    let mut notes = Vec::new();
    let mut arch_standins = Vec::new();
    let mut image_standins = Vec::new();
    for &arch in arches {
        let written = write_arch(spec, &temp.0, arch, debs, epoch)?;
        notes.extend(written.notes);
        arch_standins.extend(written.standins.into_iter().map(|s| (s, arch)));
        let standin =
            build::static_binary(&spec.root, "kubedist-standin", "kubedist-standin", arch)?.path;
        let bytes = std::fs::read(&standin).with_context(|| standin.display().to_string())?;
        image_standins.push((arch, bytes));
    }
    eprintln!(
        "fixtures: {} stand-in images in {}/",
        spec.images.images.len(),
        from_dir::IMAGES
    );
    standin_images::write(spec, &temp.0, &image_standins, epoch)?;
    notes.push(format!(
        "{}/: STAND-IN images, kubedist-standin under the name of every image of pkg/images.toml (label {}), one OCI layout",
        from_dir::IMAGES,
        standin_images::TEST_BUILD_LABEL
    ));
    put(
        &temp.0,
        from_dir::STANDINS,
        standins_file(&arch_standins).as_bytes(),
        0o644,
    )?;
    put(
        &temp.0,
        from_dir::README,
        readme(arches, &notes).as_bytes(),
        0o644,
    )?;
    crate::util::replace_dir(&temp.0, &dir)
}

/// What went into one architecture's files.
struct Written {
    /// One README line per file.
    notes: Vec<String>,
    /// `<source>/<member>` stand-ins of this architecture only, beyond
    /// [`STANDINS`].
    standins: Vec<String>,
}

fn write_arch(spec: &Spec, top: &Path, arch: Arch, debs: &Path, epoch: u64) -> Result<Written> {
    let debarch = spec.families.deb.arch_name(arch)?;
    debian::require_arch(debarch, crate::util::is_root())?;
    eprintln!("fixtures: {arch}: Debian packages");
    // Debian builds kubernetes-client for some architectures only (bookworm:
    // none for ppc64el; trixie, riscv64's release: none at all); where it
    // has none, kubectl is a stand-in too.
    let client = match debian::candidate("kubernetes-client", debarch)? {
        Some(_) => Some(debian::download("kubernetes-client", debarch, debs)?),
        None => {
            eprintln!("fixtures: {arch}: Debian has no kubernetes-client for {debarch}; kubectl is a stand-in");
            None
        }
    };
    let plugins = debian::download("containernetworking-plugins", debarch, debs)?;
    eprintln!("fixtures: {arch}: kubedist-standin (static)");
    let standin_path =
        build::static_binary(&spec.root, "kubedist-standin", "kubedist-standin", arch)?.path;
    let standin = std::fs::read(&standin_path)
        .with_context(|| format!("reading {}", standin_path.display()))?;

    let mut notes = Vec::new();
    let mut standins = Vec::new();
    for (source_name, source) in &spec.release.sources {
        for path in source.paths(arch) {
            let file_name = path.rsplit('/').next().unwrap_or(&path);
            let rel = format!("{source_name}/{path}");
            let (bytes, mode, note) = match fixture_for(source_name, file_name) {
                Some(Fixture::DebianKubectl) if client.is_none() => {
                    standins.push(format!("{source_name}/{file_name}"));
                    let note = format!(
                        "STAND-IN: kubedist-standin (Debian builds no kubernetes-client for {debarch})"
                    );
                    (standin.clone(), 0o755, note)
                }
                Some(Fixture::DebianKubectl) => {
                    let client = client.as_ref().context("kubernetes-client")?;
                    let bin = only(debian::files_in(&client.path, "usr/bin")?, "kubectl")
                        .with_context(|| client.path.display().to_string())?;
                    let note = format!(
                        "REAL: kubectl of Debian's kubernetes-client {}",
                        client.version
                    );
                    (bin, 0o755, note)
                }
                Some(Fixture::Standin) => {
                    // A file named by its architecture (runc's) is a
                    // stand-in of that architecture only.
                    let member = format!("{source_name}/{file_name}");
                    if !STANDINS.contains(&member.as_str()) {
                        standins.push(member);
                    }
                    (
                        standin.clone(),
                        0o755,
                        "STAND-IN: kubedist-standin".to_string(),
                    )
                }
                Some(Fixture::CniTarball) => {
                    let files = debian::files_in(&plugins.path, "usr/lib/cni")?;
                    if files.is_empty() {
                        bail!("{}: no files in /usr/lib/cni", plugins.path.display());
                    }
                    let members: Vec<(String, &[u8])> = files
                        .iter()
                        .map(|(n, d)| (format!("./{n}"), d.as_slice()))
                        .collect();
                    let note = format!(
                        "REAL: /usr/lib/cni/* of Debian's containernetworking-plugins {}, repacked flat",
                        plugins.version
                    );
                    (release_tgz(&members, true, epoch)?, 0o644, note)
                }
                Some(Fixture::StandinTarball(programs)) => {
                    let members: Vec<(String, &[u8])> = programs
                        .iter()
                        .map(|p| (source.member_path(p), standin.as_slice()))
                        .collect();
                    let note = format!("STAND-IN: kubedist-standin as {}", programs.join(", "));
                    (release_tgz(&members, false, epoch)?, 0o644, note)
                }
                None => {
                    bail!("pkg/release.toml lists {rel}, which fixtures do not know how to make")
                }
            };
            eprintln!("fixtures: {arch}: {rel} ({note})");
            put(top, &rel, &bytes, mode)?;
            let sum = format!("{}  {file_name}\n", sha256_bytes(&bytes));
            put(top, &format!("{rel}.sha256"), sum.as_bytes(), 0o644)?;
            notes.push(format!("  {rel}\n      {note}"));
        }
    }
    Ok(Written { notes, standins })
}

/// What a file of the release is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fixture {
    DebianKubectl,
    Standin,
    CniTarball,
    /// A release archive of these programs, each kubedist-standin.
    StandinTarball(&'static [&'static str]),
}

/// A release-style tgz of `members` at the fixtures' epoch.
fn release_tgz(members: &[(String, &[u8])], dot_dir: bool, epoch: u64) -> Result<Vec<u8>> {
    crate::archive::release_tgz(members, dot_dir, epoch, flate2::Compression::default())
}

fn fixture_for(source: &str, file_name: &str) -> Option<Fixture> {
    Some(match (source, file_name) {
        ("kubernetes", "kubectl") => Fixture::DebianKubectl,
        ("kubernetes", "kubelet" | "kubeadm") => Fixture::Standin,
        ("cni-plugins", f) if is_archive(f) => Fixture::CniTarball,
        ("cri-tools", f) if f.starts_with("crictl-") && is_archive(f) => {
            Fixture::StandinTarball(&["crictl"])
        }
        ("containerd", f) if is_archive(f) => {
            Fixture::StandinTarball(&["containerd", "containerd-shim-runc-v2", "ctr"])
        }
        ("runc", f) if f.starts_with("runc.") => Fixture::Standin,
        _ => return None,
    })
}

fn only(files: Vec<(String, Vec<u8>)>, name: &str) -> Result<Vec<u8>> {
    files
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d)
        .with_context(|| format!("no {name} in the package"))
}

/// STANDINS: every architecture's stand-ins, then those of some
/// architectures only (`<source>/<member> ARCH...`).
fn standins_file(arch_standins: &[(String, Arch)]) -> String {
    let mut s = String::from(
        "# Inputs of this directory that are kubedist-standin, a recorder that\n\
         # logs how it was started; not the real program. Architectures after\n\
         # a name: a stand-in for those only.\n",
    );
    for name in STANDINS {
        s.push_str(name);
        s.push('\n');
    }
    let mut names: Vec<&String> = arch_standins.iter().map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    for name in names {
        s.push_str(name);
        for (_, arch) in arch_standins.iter().filter(|(n, _)| n == name) {
            s.push(' ');
            s.push_str(arch.go_name());
        }
        s.push('\n');
    }
    s
}

fn readme(arches: &[Arch], notes: &[String]) -> String {
    let arches: Vec<&str> = arches.iter().map(|a| a.go_name()).collect();
    format!(
        "kubedist fixtures ({arches}): an offline input directory for\n\
         `cargo xtask fetch --from` and `cargo xtask dist --from`, written by\n\
         `cargo xtask fixtures`. This is NOT an upstream Kubernetes release.\n\
         \n\
         The paths carry the versions of pkg/release.toml; the programs inside\n\
         are what each line below says. REAL ones come from Debian's archive.\n\
         STAND-INs are kubedist-standin, a recorder that writes its argv and\n\
         environment to $STANDIN_RECORD_DIR/<name>.json and says so when asked\n\
         for its version; they are listed in STANDINS. Every file has a .sha256\n\
         beside it.\n\
         \n\
         {}\n",
        notes.join("\n"),
        arches = arches.join(", ")
    )
}

/// Refuses to replace anything but an earlier fixtures directory.
fn refuse_foreign(dir: &Path) -> Result<()> {
    let Ok(mut entries) = std::fs::read_dir(dir) else {
        if dir.exists() {
            bail!("{} exists and is not a directory", dir.display());
        }
        return Ok(());
    };
    let empty = entries.next().is_none();
    let ours = dir.join(from_dir::STANDINS).is_file() && dir.join(from_dir::README).is_file();
    if !empty && !ours {
        bail!(
            "{} exists and is not a fixtures directory; remove it or pick another",
            dir.display()
        );
    }
    Ok(())
}

/// A directory being built; removed when dropped unless renamed into place.
struct TempTree(PathBuf);

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir(path).with_context(|| format!("creating {}", path.display()))?;
    crate::util::set_mode(path, 0o755)
}

/// Writes `top/rel` with `mode`, creating its directories 0755.
fn put(top: &Path, rel: &str, bytes: &[u8], mode: u32) -> Result<()> {
    let path = top.join(rel);
    let mut dir = top.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        dir.push(part);
        if !dir.is_dir() {
            mkdir(&dir)?;
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    crate::util::set_mode(&path, mode)
}

#[cfg(test)]
mod tests;
