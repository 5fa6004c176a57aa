//! The images bundle of air-gapped nodes: its size per architecture, how
//! long `dist` takes to write it, and how long `kubedist-images` takes to
//! import it into a containerd of its own, the first time and again (when
//! everything is present).
//!
//! The images are the release's, pinned in `pkg/images.toml`, when the fetch
//! cache holds every one of them (`cargo xtask fetch --images` on a
//! connected host); else the fixtures' stand-ins, and the report says so.
//! Without the release's images, a bundle of the release's size is measured
//! too: the stand-ins, each with a layer of the size published for the
//! release's images ([`PUBLISHED_TOTAL`]), which compresses 3.5:1, about as
//! those images do, so that containerd unpacks about as much.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

use super::measure::{self, Sample};
use super::EPOCH;
use crate::spec::{Arch, Spec};

/// The architectures whose bundles are measured (the import: this host's).
pub const ARCHES: [Arch; 2] = [Arch::Amd64, Arch::Arm64];

/// Sizes published elsewhere, printed beside the measured ones: `(what,
/// size, where it was published)`. The release's images are only measured
/// here when the fetch cache holds them; these say what to expect.
pub const PUBLISHED: &[(&str, &str, &str)] = &[
    (
        "the seven images kubeadm 1.34 pulls (control plane v1.34.9, etcd 3.6.5-0, CoreDNS \
         v1.12.1, pause 3.10.1), amd64: their compressed layers, as containerd counts them",
        "138.9 MB (22.4 + 22.9 + 27.1 + 22.8 + 26 + 17.4 + 0.32)",
        "`crictl images` on a containerd node, in github.com/uidz3r0/kubernetes-foundations-operations, \
         week7-cluster-operations/W7D1/README.md",
    ),
    (
        "k3s v1.21.0 air-gap images (its own set: CoreDNS, Traefik, metrics-server, \
         local-path-provisioner, klipper, pause), amd64: .tar / .tar.gz / .tar.zst",
        "358 / 112 / 86.3 MB",
        "github.com/k3s-io/k3s/issues/2941",
    ),
    (
        "rke2-images.linux-amd64.tar.zst, k0s-airgap-bundle",
        "no published size found",
        "",
    ),
];

pub struct Images {
    /// Where the images came from, for the report.
    pub source: Source,
    pub bundles: Vec<Bundle>,
    /// The import of this host's bundle, or why it was not measured.
    pub import: std::result::Result<Import, String>,
    /// With the stand-ins: this host's bundle at the release's size, and
    /// its import.
    pub sized: Option<(Bundle, std::result::Result<Import, String>)>,
}

/// The compressed size of the release's images for amd64, as published
/// (the first row of [`PUBLISHED`]), in bytes.
pub const PUBLISHED_TOTAL: u64 = 138_900_000;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The pinned release, from the fetch cache.
    Release,
    /// The fixtures' stand-ins.
    StandIns,
}

pub struct Bundle {
    pub arch: Arch,
    pub images: usize,
    pub bytes: u64,
    /// `dist --formats images` for this architecture, no artifact cache.
    pub dist: Sample,
}

pub struct Import {
    pub arch: Arch,
    /// Into an empty containerd.
    pub first: Sample,
    /// Again, everything present.
    pub again: Sample,
}

pub fn run(spec: &Spec, exe: &Path, work: &Path, logs: &Path, host: Arch) -> Result<Images> {
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let source = if release_cached(spec) {
        Source::Release
    } else {
        Source::StandIns
    };
    let mut bundles = Vec::new();
    let mut host_bundle = None;
    for arch in ARCHES {
        let out = work.join(format!("dist-{arch}"));
        let inputs: &[&OsStr] = match source {
            Source::Release => &[],
            Source::StandIns => &[OsStr::new("--fixtures")],
        };
        let (measured, name) = bundle(spec, exe, arch, inputs, &out, logs, &arch.to_string())?;
        bundles.push(measured);
        if arch == host {
            host_bundle = Some((out, name));
        }
    }
    let import = match host_bundle {
        None => Err(format!("no bundle for this host's architecture ({host})")),
        Some((out, name)) => timed_import(spec, &out, &name, work, logs, host, "")?,
    };
    let sized = match source {
        Source::Release => None,
        Source::StandIns => Some(sized(spec, exe, work, logs, host)?),
    };
    Ok(Images {
        source,
        bundles,
        import,
        sized,
    })
}

/// The import of `out/name`, or why it cannot be measured here.
fn timed_import(
    spec: &Spec,
    out: &Path,
    name: &str,
    work: &Path,
    logs: &Path,
    arch: Arch,
    label: &str,
) -> Result<std::result::Result<Import, String>> {
    Ok(match import_tools() {
        Err(why) => Err(why),
        Ok(()) => Ok(import(
            &spec.root,
            out,
            name,
            &work.join(format!("containerd{label}")),
            logs,
            arch,
            label,
        )?),
    })
}

/// This host's bundle of stand-ins padded to the release's size, written
/// by `dist --from` a copy of the fixtures whose images are those, and its
/// import.
fn sized(
    spec: &Spec,
    exe: &Path,
    work: &Path,
    logs: &Path,
    host: Arch,
) -> Result<(Bundle, std::result::Result<Import, String>)> {
    let fixtures = crate::fixtures::ensure(spec, &crate::fixtures::default_dir(spec), &[host])?;
    let from = work.join("sized-inputs");
    fs::create_dir_all(&from).with_context(|| format!("creating {}", from.display()))?;
    for entry in
        fs::read_dir(&fixtures).with_context(|| format!("reading {}", fixtures.display()))?
    {
        let entry = entry?;
        if entry.file_name() != crate::inputs::from_dir::IMAGES {
            std::os::unix::fs::symlink(entry.path(), from.join(entry.file_name()))?;
        }
    }
    // One layer per image, together the published size once compressed:
    // a pseudo-random stream of four symbols, which gzip -9 takes to 2/7
    // (measured), about as the release's images compress (89 MB of
    // kube-apiserver unpacked, 27 MB compressed; etcd 195 MB and 23 MB).
    let per_image = PUBLISHED_TOTAL / spec.images.images.len() as u64;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let pad: Vec<u8> = (0..per_image * 7 / 2)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b"0123"[(state & 3) as usize]
        })
        .collect();
    crate::fixtures::standin_images::write(spec, &from, &[(host, pad)], EPOCH)?;
    let out = work.join("sized");
    let inputs = [OsStr::new("--from"), from.as_os_str()];
    let (measured, name) = bundle(spec, exe, host, &inputs, &out, logs, "sized")?;
    let import = timed_import(spec, &out, &name, work, logs, host, "-sized")?;
    Ok((measured, import))
}

/// `dist --formats images` for `arch` from `inputs` (`--fixtures`,
/// `--from DIR`, or none: the fetch cache) into `out`, timed: the bundle
/// and its file name.
fn bundle(
    spec: &Spec,
    exe: &Path,
    arch: Arch,
    inputs: &[&OsStr],
    out: &Path,
    logs: &Path,
    label: &str,
) -> Result<(Bundle, String)> {
    let dist = measure::run(
        Command::new(exe)
            .args(["dist", "--formats", "images", "--no-cache", "--arch"])
            .arg(arch.go_name())
            .args(inputs)
            .arg("--out")
            .arg(out)
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string()),
        &logs.join(format!("images-dist-{label}.log")),
    )?;
    let name = crate::emit::images::file_name(&spec.images.kubernetes, arch, false);
    let path = out.join(&name);
    let bytes = fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    eprintln!(
        "    {name} ({label}): {:.1} MiB, {:.1} s wall",
        bytes as f64 / f64::from(1u32 << 20),
        dist.wall
    );
    let bundle = Bundle {
        arch,
        images: spec.images.images.len(),
        bytes,
        dist,
    };
    Ok((bundle, name))
}

/// Whether the fetch cache lists every image of `pkg/images.toml`.
fn release_cached(spec: &Spec) -> bool {
    let index = crate::fetch::default_cache(&spec.root).join("images/index.json");
    let Ok(text) = fs::read_to_string(index) else {
        return false;
    };
    spec.images
        .images
        .iter()
        .all(|image| text.contains(&format!("\"{}\"", image.reference)))
}

/// Why the import cannot be measured here, if it cannot.
fn import_tools() -> std::result::Result<(), String> {
    for tool in ["containerd", "ctr", "unshare"] {
        if !crate::util::on_path(tool) {
            return Err(format!(
                "{tool} is not installed (apt-get install containerd)"
            ));
        }
    }
    if !crate::util::is_root() {
        return Err("containerd needs root".into());
    }
    Ok(())
}

/// `kubedist-images` into a containerd of its own (its root, state and
/// socket under `dir`, its mounts in a namespace of its own), twice.
fn import(
    root: &Path,
    out: &Path,
    name: &str,
    dir: &Path,
    logs: &Path,
    arch: Arch,
    label: &str,
) -> Result<Import> {
    let images = dir.join("images");
    fs::create_dir_all(&images).with_context(|| format!("creating {}", images.display()))?;
    fs::hard_link(out.join(name), images.join(name))
        .or_else(|_| fs::copy(out.join(name), images.join(name)).map(drop))
        .with_context(|| format!("placing {name} in {}", images.display()))?;
    let sums = fs::read_to_string(out.join("SHA256SUMS"))?;
    let line = sums
        .lines()
        .find(|l| l.ends_with(&format!("  {name}")))
        .with_context(|| format!("{name} is not in {}/SHA256SUMS", out.display()))?;
    fs::write(images.join("SHA256SUMS"), format!("{line}\n"))?;

    let daemon = Containerd::start(dir, logs, label)?;
    let step = || {
        let mut cmd = Command::new(root.join("installer/images/kubedist-images"));
        cmd.arg("--dir")
            .arg(&images)
            .args(["--runtime", "containerd", "--containerd-address"])
            .arg(&daemon.socket)
            .arg("--containerd-config")
            .arg(&daemon.config);
        cmd
    };
    let first_log = logs.join(format!("images-import-first{label}.log"));
    let first = measure::run(&mut step(), &first_log)?;
    // A timing of an import that imported nothing would mislead.
    let imported = fs::read_to_string(&first_log)?
        .lines()
        .filter(|l| l.contains(": imported (sha256:"))
        .count();
    if imported == 0 {
        bail!(
            "kubedist-images imported no image into an empty containerd (see {})",
            first_log.display()
        );
    }
    let again = measure::run(
        &mut step(),
        &logs.join(format!("images-import-again{label}.log")),
    )?;
    eprintln!(
        "    import into containerd: {:.1} s; again: {:.1} s",
        first.wall, again.wall
    );
    drop(daemon);
    let _ = fs::remove_dir_all(dir);
    Ok(Import { arch, first, again })
}

/// A containerd of the bench's own, stopped when dropped.
struct Containerd {
    child: Child,
    socket: PathBuf,
    config: PathBuf,
}

impl Containerd {
    fn start(dir: &Path, logs: &Path, label: &str) -> Result<Containerd> {
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{}\"\nstate = \"{}\"\n[grpc]\n  address = \"{}\"\n",
                dir.join("root").display(),
                dir.join("state").display(),
                socket.display()
            ),
        )?;
        let log_path = logs.join(format!("images-containerd{label}.log"));
        let log = fs::File::create(&log_path)?;
        // Its snapshot mounts stay in a mount namespace of its own.
        let child = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "containerd",
                "--config",
            ])
            .arg(&config)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting containerd")?;
        let daemon = Containerd {
            child,
            socket,
            config,
        };
        for _ in 0..100 {
            let up = Command::new("ctr")
                .arg("--address")
                .arg(&daemon.socket)
                .arg("version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if up {
                return Ok(daemon);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        bail!(
            "containerd did not start in 10 s (see {})",
            log_path.display()
        )
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
