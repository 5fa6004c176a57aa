//! Where a release's inputs come from, decided once: the upstream programs
//! (downloaded, read from `--from DIR`, the fixtures, or built from source),
//! the images kubeadm pulls and their pins, and the installer image's shell
//! from Debian. `dist` turns its input flags into one [`Inputs`] before any
//! long step, and reads every input through it; a new kind of input is a
//! variant here and an entry in `pkg/`, not a change to `dist`.

pub mod from_dir;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::fetch::{self, debian, Origin, OriginArgs, Upstream};
use crate::source::Go;
use crate::spec::{Arch, Content, Images, Spec, KUBERNETES};
use crate::{sbom, stage};

/// The input flags `dist` takes: where the programs and the images come
/// from.
#[derive(clap::Args, Debug)]
pub struct InputArgs {
    #[command(flatten)]
    pub origin: OriginArgs,
    /// Use offline test inputs instead of the upstream release: Debian's
    /// real kubectl and CNI plugins, and recorder stand-ins (labelled as such
    /// in every package description) for kubelet, kubeadm and crictl.
    /// Written to target/fixtures/VERSION on first use, as `cargo xtask fixtures`
    /// does. For trials and tests on hosts without internet.
    #[arg(long, conflicts_with_all = ["from", "mirror"])]
    pub fixtures: bool,
    /// Build kubelet, kubeadm, kubectl, crictl and the CNI plugins from
    /// their Go modules (pkg/source.toml, every module verified by the
    /// committed go.sum) instead of downloading them, as `cargo xtask
    /// source` does; cached in the home directory. Needs Go.
    #[arg(long, conflicts_with_all = ["from", "mirror", "fixtures"])]
    pub source: bool,
}

/// Where the upstream programs come from.
pub enum ProgramsFrom {
    /// Downloaded (each source's official URL or a mirror) or read from a
    /// `--from` directory.
    Fetched(Origin),
    /// The offline test inputs, a `--from` directory written on first use.
    Fixtures(PathBuf),
    /// Built from their Go modules by `go` into a `--from` directory.
    Source { dir: PathBuf, go: Go },
}

/// Where the images of `pkg/images.toml` come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ImagesFrom {
    /// An OCI layout: `DIR/images` of `--from DIR` or of the fixtures.
    Layout(PathBuf),
    /// A registry (their own or `--image-mirror`), through the download
    /// cache's layout.
    Registry,
    /// Built from source with the programs, into their `--from`
    /// directory's layout, with pins of their own.
    Source,
}

/// Every input of one run, resolved from the flags.
pub struct Inputs {
    pub programs: ProgramsFrom,
    /// `None` when no format asked for the images.
    pub images: Option<ImagesFrom>,
    /// Only the images a worker runs (`dist --worker-images`).
    worker_images: bool,
    /// Whether the installer image's shell is needed.
    pub installer_base: bool,
    /// The registry flags and the download cache.
    origin: OriginArgs,
}

/// The inputs of a run, on disk and verified.
pub struct Ready {
    /// Where the upstream files were read from, as the SBOMs name it.
    pub origin: Origin,
    /// Each architecture's verified upstream files.
    pub upstreams: BTreeMap<Arch, Upstream>,
    /// The images' pins: pkg/images.toml (or `--image-pins`), or those of
    /// the images built from source.
    pub image_pins: Images,
    /// The OCI layout the images are staged from, when they are asked for.
    pub images_layout: Option<PathBuf>,
    /// In a run without the host architecture, the host's programs of the
    /// same versions where they are at hand: the `--from` directory's own
    /// files of the host, verified like the others, or (from source) the
    /// builds kubedist's cache holds, `(source, program) → path`. They write
    /// the shell completions, which the foreign programs would write under
    /// qemu-user, seconds a program; what they print does not depend on
    /// the architecture (t-dist compares an arm64 kubectl's under qemu-user
    /// with amd64's).
    host_files: Option<Upstream>,
    host_builds: BTreeMap<(String, String), PathBuf>,
}

impl Ready {
    /// The programs of `arch` for `stage`: its upstream files, and the
    /// static builds the packages hold (kubelet-wrapper), built now; what
    /// each build links in is added to `origins`, for the SBOMs.
    pub fn programs(
        &self,
        spec: &Spec,
        arch: Arch,
        origins: &mut Vec<sbom::Origin>,
    ) -> Result<ArchPrograms<'_>> {
        let mut built = BTreeMap::new();
        for name in build_names(spec) {
            eprintln!("==> {arch}: building {name}");
            let program = crate::build::static_binary(&spec.root, &name, &name, arch)?;
            origins.push(sbom::origins::built(&name, &program, arch)?);
            built.insert(name.clone(), program.path);
        }
        Ok(ArchPrograms {
            arch,
            upstream: &self.upstreams[&arch],
            built,
            host: self.host().or(self.host_files.as_ref()),
            host_builds: &self.host_builds,
        })
    }

    /// The host architecture's upstream files, when the run fetched them.
    pub fn host(&self) -> Option<&Upstream> {
        Arch::host().ok().and_then(|arch| self.upstreams.get(&arch))
    }
}

/// Where the images of `pkg/images.toml` would come from, or why they
/// cannot: `--image-mirror`, else built from source with `--source`, else
/// `DIR/images` of `--from DIR` or of the fixtures, else their own registry.
pub fn images_from(spec: &Spec, args: &InputArgs) -> Result<ImagesFrom, String> {
    let k8s_version = spec.kubernetes_version();
    if spec.images.kubernetes != k8s_version {
        return Err(spec.images_unknown(k8s_version));
    }
    if args.origin.image_mirror.is_some() {
        return Ok(ImagesFrom::Registry);
    }
    if args.source {
        return Ok(ImagesFrom::Source);
    }
    let dir = match (&args.origin.from, args.fixtures) {
        (Some(dir), _) => dir.clone(),
        (None, true) => crate::fixtures::default_dir(spec),
        (None, false) => return Ok(ImagesFrom::Registry),
    };
    let layout = dir.join(from_dir::IMAGES);
    if args.origin.from.is_some() && !layout.join(crate::layout::INDEX).is_file() {
        return Err(format!("{}: no OCI layout there", layout.display()));
    }
    Ok(ImagesFrom::Layout(layout))
}

impl Inputs {
    /// Resolves the flags for `arches`, with the images (`images`, from
    /// [`images_from`]; only a worker's with `worker_images`) and the
    /// installer image's shell as the formats need them, and checks the
    /// tools each input needs: nothing is fetched or built yet.
    pub fn resolve(
        spec: &Spec,
        args: &InputArgs,
        arches: &[Arch],
        images: Option<ImagesFrom>,
        worker_images: bool,
        installer_base: bool,
    ) -> Result<Inputs> {
        let programs = if args.fixtures {
            ProgramsFrom::Fixtures(crate::fixtures::default_dir(spec))
        } else if args.source {
            ProgramsFrom::Source {
                dir: crate::source::default_dir(&spec.root),
                go: Go::from_env(&spec.root)?,
            }
        } else {
            ProgramsFrom::Fetched(args.origin.origin()?)
        };
        if images == Some(ImagesFrom::Registry) && !crate::util::on_path("skopeo") {
            bail!(
                "the images bundle pulls the images with skopeo, which is not installed \
                 (apt-get install skopeo), or leave the images bundle out of --formats"
            );
        }
        // Debian's packages are downloaded and unpacked with apt and dpkg.
        if args.fixtures || installer_base {
            let missing: Vec<&str> = ["dpkg", "dpkg-deb", "apt-get"]
                .into_iter()
                .filter(|t| !crate::util::on_path(t))
                .collect();
            if !missing.is_empty() {
                bail!(
                    "dist needs {} on PATH{}",
                    missing.join(", "),
                    if args.fixtures {
                        " (--fixtures takes Debian's binaries: run it on Debian or Ubuntu, or \
                         use --from DIR)"
                    } else {
                        " (the installer image's shell is Debian's busybox-static: build \
                         --formats oci on Debian or Ubuntu, or leave oci out of --formats)"
                    }
                );
            }
        }
        // The Rust targets of the static builds, added with rustup when
        // missing.
        crate::build::ensure_targets(arches)?;
        Ok(Inputs {
            programs,
            images,
            worker_images,
            installer_base,
            origin: args.origin.clone(),
        })
    }

    /// The images the run bundles: all of `spec`'s, or a worker's.
    fn bundled(&self, spec: &Spec) -> Images {
        if self.worker_images {
            spec.images.for_workers()
        } else {
            spec.images.clone()
        }
    }

    /// Whether the images were built here, from source.
    pub fn images_built_here(&self) -> bool {
        self.images == Some(ImagesFrom::Source)
    }

    /// Where the programs come from, in the provenance's words.
    pub fn provenance(&self) -> String {
        match &self.programs {
            ProgramsFrom::Source { go, .. } => format!(
                "built from source: the Go modules of pkg/source.toml, verified by its \
                 go.sum files, with {}",
                go.version
            ),
            ProgramsFrom::Fetched(Origin::Official) => "official".to_string(),
            ProgramsFrom::Fetched(Origin::Mirror(url)) => format!("mirror {url}"),
            // The fixtures are a --from directory: the same inputs, the same
            // statement.
            ProgramsFrom::Fetched(Origin::Dir(_)) | ProgramsFrom::Fixtures(_) => {
                "a directory (--from, --fixtures)".to_string()
            }
        }
    }

    /// Every input of `arches` on disk and verified: the fixtures written
    /// or the programs built when they come from there, each
    /// architecture's upstream files, the image list checked against this
    /// host's kubeadm, and the images. `work` is scratch space.
    pub fn ensure(&self, spec: &Spec, arches: &[Arch], work: &Path) -> Result<Ready> {
        // Checked against this host's kubeadm as a whole (below), staged
        // as the run bundles them.
        let mut image_pins = self.bundled(spec);
        let origin = match &self.programs {
            ProgramsFrom::Fetched(origin) => origin.clone(),
            ProgramsFrom::Fixtures(dir) => Origin::Dir(crate::fixtures::ensure(spec, dir, arches)?),
            ProgramsFrom::Source { dir, go } => {
                let images = self.images_built_here().then_some(&image_pins);
                eprintln!(
                    "==> the upstream programs{}, built from their Go modules",
                    if images.is_some() { " and images" } else { "" }
                );
                let extras = crate::source::Extras { images };
                crate::source::write_inputs(spec, go, arches, extras, dir)?;
                if images.is_some() {
                    image_pins = Images::load(&dir.join(from_dir::IMAGE_PINS), &spec.release)?;
                }
                Origin::Dir(dir.clone())
            }
        };
        let cache = self.origin.cache(spec);
        // Every architecture's upstream files first: the host architecture's
        // programs write the completions of all of them.
        let mut upstreams = BTreeMap::new();
        for &arch in arches {
            eprintln!("==> {arch}: upstream files");
            upstreams.insert(arch, fetch::ensure(spec, arch, &origin, &cache)?);
        }
        let (mut host_files, mut host_builds) = (None, BTreeMap::new());
        if let Some(host) = Arch::host().ok().filter(|host| !arches.contains(host)) {
            // Nothing is built or downloaded for them.
            let at_hand = match (&self.programs, &origin) {
                (ProgramsFrom::Source { go, .. }, _) => {
                    host_builds = crate::source::cached_programs(spec, go, host)?;
                    (!host_builds.is_empty()).then(|| "builds in kubedist's source cache".into())
                }
                (_, Origin::Dir(dir)) => {
                    host_files = fetch::ensure(spec, host, &origin, &cache).ok();
                    host_files
                        .as_ref()
                        .map(|_| format!("files in {}", dir.display()))
                }
                _ => None,
            };
            match at_hand {
                Some(what) => {
                    eprintln!("==> shell completions: written by this host's ({host}) {what}")
                }
                None => eprintln!(
                    "==> shell completions: no {host} program of these versions at hand: \
                     each architecture's write them under qemu-user"
                ),
            }
        }
        let mut ready = Ready {
            origin,
            upstreams,
            image_pins,
            images_layout: None,
            host_files,
            host_builds,
        };
        if self.images.is_some() {
            check_image_list(spec, ready.host(), work)?;
        }
        ready.images_layout = match (&self.images, &self.programs) {
            (Some(ImagesFrom::Layout(layout)), _) => Some(layout.clone()),
            (Some(ImagesFrom::Source), ProgramsFrom::Source { dir, .. }) => {
                Some(dir.join(from_dir::IMAGES))
            }
            (Some(ImagesFrom::Source), _) => bail!("images from source need --source"),
            (Some(ImagesFrom::Registry), _) => {
                eprintln!("==> the images of pkg/images.toml");
                Some(fetch::ensure_images(
                    spec,
                    &self.origin,
                    &ready.image_pins,
                    arches,
                    &cache,
                )?)
            }
            (None, _) => None,
        };
        Ok(ready)
    }
}

/// The installer image's shell for `arch`, Debian's package of
/// `pkg/oci.toml` through apt (which verifies it against the signed
/// archive), cached in target/debian-debs like the fixtures' packages.
pub struct InstallerBase {
    /// The package's version.
    pub version: String,
    /// The shell binary.
    pub binary: Vec<u8>,
    /// The package's copyright file.
    pub copyright: Vec<u8>,
}

/// Downloads [`InstallerBase`] for `arch`.
pub fn installer_base(spec: &Spec, arch: Arch) -> Result<InstallerBase> {
    let base = &spec.oci.base;
    let debarch = spec.families.deb.arch_name(arch)?;
    eprintln!("==> {arch}: {} for the installer image", base.package);
    debian::require_arch(debarch, crate::util::is_root())?;
    let deb = debian::download(
        &base.package,
        debarch,
        &spec.root.join("target/debian-debs"),
    )?;
    let find = |rel: &str| -> Result<Option<Vec<u8>>> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        Ok(debian::files_in(&deb.path, dir)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, data)| data))
    };
    // Debian 13's packages (riscv64's release) ship /bin's files under
    // /usr/bin: the merged /usr.
    let member = |rel: &str| -> Result<Vec<u8>> {
        match find(rel)? {
            Some(data) => Ok(data),
            None => find(&format!("usr/{rel}"))?
                .with_context(|| format!("{}: has no {rel} (pkg/oci.toml)", deb.path.display())),
        }
    };
    Ok(InstallerBase {
        binary: member(&base.binary)?,
        copyright: member(&base.copyright)?,
        version: deb.version,
    })
}

/// Refuses an image list that is not what this host's kubeadm says it
/// pulls (`kubeadm config images list`), when there is a real kubeadm for
/// this host's architecture among the inputs.
fn check_image_list(spec: &Spec, host: Option<&Upstream>, work: &Path) -> Result<()> {
    let k8s_version = spec.kubernetes_version();
    let Some(upstream) = host else {
        eprintln!("note: no kubeadm for this host's architecture: the image list is not checked against it");
        return Ok(());
    };
    if upstream
        .standins()
        .iter()
        .any(|s| s == "kubernetes/kubeadm")
    {
        eprintln!(
            "note: kubeadm is a stand-in here: pkg/images.toml is not checked against \
             `kubeadm config images list`"
        );
        return Ok(());
    }
    let (_, path) = upstream
        .resolve(KUBERNETES, "kubeadm")?
        .into_iter()
        .next()
        .context("no kubeadm among the inputs")?;
    // The cached input is not executable: a copy of it is.
    let kubeadm = work.join("kubeadm");
    fs::copy(&path, &kubeadm).with_context(|| format!("copying {}", path.display()))?;
    crate::util::set_mode(&kubeadm, 0o755)?;
    let out = std::process::Command::new(&kubeadm)
        .args("config images list --kubernetes-version".split(' '))
        .arg(format!("v{k8s_version}"))
        .output()
        .with_context(|| format!("running {} config images list", path.display()))?;
    if !out.status.success() {
        bail!(
            "{}: `kubeadm config images list` failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let says: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let listed: BTreeSet<String> = spec
        .images
        .images
        .iter()
        .map(|i| i.reference.clone())
        .collect();
    if says != listed {
        let missing: Vec<&String> = says.difference(&listed).collect();
        let extra: Vec<&String> = listed.difference(&says).collect();
        bail!(
            "pkg/images.toml is not what kubeadm {k8s_version} pulls (`kubeadm config images \
             list`): it lacks {missing:?} and has {extra:?} besides"
        );
    }
    eprintln!("==> the image list is what kubeadm {k8s_version} pulls");
    Ok(())
}

/// The `build = "<name>"` binaries the packages need.
fn build_names(spec: &Spec) -> Vec<String> {
    let mut names: Vec<String> = spec
        .packages
        .iter()
        .flat_map(|p| &p.files)
        .filter_map(|f| match f.content() {
            Content::Build(name) => Some(name.to_string()),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The programs of one architecture, for `stage`.
pub struct ArchPrograms<'a> {
    arch: Arch,
    upstream: &'a Upstream,
    built: BTreeMap<String, PathBuf>,
    /// The host architecture's upstream files, when this run builds it or
    /// they are at hand ([`Ready`]).
    host: Option<&'a Upstream>,
    /// The host's programs from the source cache ([`Ready`]).
    host_builds: &'a BTreeMap<(String, String), PathBuf>,
}

impl stage::Programs for ArchPrograms<'_> {
    fn upstream(&self, source: &str, member: &str) -> Result<Vec<(String, PathBuf)>> {
        self.upstream.resolve(source, member)
    }
    fn built(&self, name: &str) -> Result<PathBuf> {
        self.built
            .get(name)
            .cloned()
            .with_context(|| format!("{name} was not built"))
    }
    fn is_standin(&self, source: &str, name: &str) -> bool {
        let full = format!("{source}/{name}");
        self.upstream.standins().contains(&full)
    }
    fn built_from_source(&self, source: &str) -> Option<String> {
        self.upstream.built_from_source(source).map(str::to_string)
    }
    fn runnable(&self, source: &str, member: &str) -> Result<Vec<PathBuf>, String> {
        let one = |up: &Upstream| match up.resolve(source, member).as_deref() {
            Ok([(_, path)]) => Some(path.clone()),
            _ => None,
        };
        // The host's program stands for this one when both are the real
        // program (or both stand-ins, which print nothing).
        let standin = |up: &Upstream| up.standins().contains(&format!("{source}/{member}"));
        let host = self
            .host
            .filter(|&host| standin(host) == standin(self.upstream));
        if let Some(path) = host.and_then(one) {
            return Ok(vec![path]);
        }
        let program = member.rsplit('/').next().unwrap_or(member);
        if let Some(path) = self
            .host_builds
            .get(&(source.to_string(), program.to_string()))
        {
            return Ok(vec![path.clone()]);
        }
        let qemu = self.arch.qemu_user();
        match one(self.upstream) {
            Some(path) if crate::util::on_path(qemu) => Ok(vec![PathBuf::from(qemu), path]),
            _ => Err(format!(
                "{member} of {} cannot run on the build host, which has no {qemu}",
                self.arch
            )),
        }
    }
}
