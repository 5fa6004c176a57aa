//! `cargo xtask dist`: fetch → build → stage → emit for each architecture,
//! then SHA256SUMS and a summary.
//!
//! Atomic output: everything is built in a temp directory beside the output
//! directory, and artifacts are moved into place only once all of them were
//! written. A failed run leaves the output directory as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cache::Cache;
use crate::emit::codec::Codecs;
use crate::emit::{self, Families, Format, Input, Job, Options, Staging};
use crate::fetch::{self, Origin, OriginArgs, Upstream};
use crate::keys::RepoKey;
use crate::spec::{Arch, Content, Family, Spec, SysextOs, KUBERNETES};
use crate::stage::{self, Staged, StagedArch, StagedOci};
use crate::{provenance, sbom};

/// Build every artifact of every format (emit::FORMATS) plus SHA256SUMS.
///
/// For each architecture: verify the upstream binaries (download or --from),
/// build kubelet-wrapper static for it, stage one tree per package and
/// family, and write the artifacts from those trees. Output goes to
/// target/dist/<kubernetes version>/ unless --out says otherwise; files
/// there are replaced only when the whole run succeeded.
///
/// Timestamps come from SOURCE_DATE_EPOCH, or else from the time of the
/// checkout's HEAD commit: the same inputs give byte-identical artifacts.
#[derive(clap::Args, Debug)]
#[command(after_long_help = after_long_help())]
pub struct Args {
    /// Architectures to build, comma-separated: amd64, arm64, ppc64le, s390x
    /// (deb and rpm spellings such as x86_64 are accepted too).
    /// Default: this host's architecture.
    #[arg(long, value_name = "ARCH[,ARCH...]", value_delimiter = ',')]
    pub arch: Vec<Arch>,
    /// Artifacts to write, comma-separated (default: every format).
    #[arg(
        long,
        value_name = "FORMAT[,FORMAT...]",
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(
            emit::FORMATS.iter().map(|f| clap::builder::PossibleValue::new(f.about().name).help(f.about().summary))
        ),
    )]
    pub formats: Vec<String>,
    /// Which hosts may merge the sysext image, instead of pkg/sysext.toml's
    /// `os`: `_any`, or ID:VERSION as os-release has them: flatcar:1.0
    /// (Flatcar's SYSEXT_LEVEL), fedora:40 (VERSION_ID).
    #[arg(long, value_name = "ID:VERSION")]
    pub sysext_os: Option<String>,
    /// Package this Kubernetes version instead of the one pinned in
    /// pkg/release.toml (X.Y.Z or X.Y.Z-rc.N; its binaries must be fetchable
    /// and verifiable like the pinned ones).
    #[arg(long, value_name = "X.Y.Z")]
    pub version: Option<String>,
    /// Package revision (deb revision, rpm release) instead of the one in
    /// pkg/release.toml.
    #[arg(long, value_name = "N")]
    pub revision: Option<u32>,
    #[command(flatten)]
    pub origin: OriginArgs,
    /// Use offline test inputs instead of the upstream release: Debian's
    /// real kubectl and CNI plugins, and recorder stand-ins (labelled as such
    /// in every package description) for kubelet, kubeadm and crictl.
    /// Written to target/fixtures on first use, as `cargo xtask fixtures`
    /// does. For trials and tests on hosts without internet.
    #[arg(long, conflicts_with_all = ["from", "mirror"])]
    pub fixtures: bool,
    /// Build kubelet, kubeadm, kubectl, crictl and the CNI plugins from
    /// their Go modules (pkg/source.toml, every module verified by the
    /// committed go.sum) instead of downloading them, as `cargo xtask
    /// source` does; cached in the home directory. Needs Go.
    #[arg(long, conflicts_with_all = ["from", "mirror", "fixtures"])]
    pub source: bool,
    /// Output directory. Default: target/dist/<kubernetes version>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Quick, larger compression for trial builds: the preset `fast`,
    /// which --compression can amend.
    #[arg(long, long_help = format!(
        "Quick, larger compression for trial builds: the preset `fast` ({}), which \
         --compression can amend.",
        Codecs::fast()
    ))]
    pub fast: bool,
    /// Codec and level per format, comma-separated FORMAT=CODEC[:LEVEL]
    /// items on top of the default (or of a leading preset, `default` or
    /// `fast`).
    #[arg(long, value_name = "SPEC", long_help = format!(
        "Codec and level per format, comma-separated FORMAT=CODEC[:LEVEL][+long] items on top \
         of the default {} (or of a leading preset, `default` or `fast`).",
        Codecs::defaults()
    ))]
    pub compression: Option<String>,
    /// Build every artifact again, neither reading nor filling the
    /// artifact cache.
    #[arg(long)]
    pub no_cache: bool,
    /// The artifact cache. Default: target/artifact-cache.
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache_dir: Option<PathBuf>,
    /// Artifacts written at the same time. Default: the number of CPUs.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Sign SHA256SUMS, of the output directory and inside each tarball,
    /// with the OpenPGP secret key in FILE (as `cargo xtask repo --key`):
    /// a detached armoured SHA256SUMS.asc beside it, made at
    /// SOURCE_DATE_EPOCH. A protected key's passphrase comes from
    /// KUBEDIST_KEY_PASSPHRASE. `install.sh --verify-key` checks it.
    #[arg(long, value_name = "FILE", conflicts_with = "sign_gpg_key")]
    pub sign: Option<PathBuf>,
    /// As --sign, with the secret key gpg's agent holds for KEYID (gpg's
    /// signatures carry gpg's clock, not SOURCE_DATE_EPOCH).
    #[arg(long, value_name = "KEYID")]
    pub sign_gpg_key: Option<String>,
    /// The tarball and the installer image carry their architecture's
    /// images bundle (images/kubedist-images-<version>-<arch>.oci.tar):
    /// one file holds everything an air-gapped node needs, and install.sh
    /// installs and imports the bundle after the node software.
    #[arg(long)]
    pub carry_images: bool,
}

/// The examples, and each format's codecs (from `emit::FORMATS`).
fn after_long_help() -> String {
    let mut help = String::from(
        "\
Examples:
  cargo xtask dist                                  # this host's architecture, official URLs
  cargo xtask dist --arch amd64,arm64 --formats deb,rpm
  cargo xtask dist --from /srv/kubedist-inputs --out /srv/dist
  cargo xtask dist --compression deb=zstd:19,tar=gz:6  # debs for dpkg >= 1.21.18 only
  cargo xtask dist --formats sysext --sysext-os flatcar:1.0  # Flatcar only
  SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --revision 2
  cargo xtask dist --sign /root/release-signing.asc   # SHA256SUMS.asc, checked by install.sh --verify-key
  cargo xtask dist --carry-images                  # the tarball carries the images kubeadm pulls

Compression (see docs/performance.md for times and sizes):
",
    );
    for format in emit::FORMATS {
        match &format.about().codecs {
            Some(codecs) => {
                help.push_str(&format!("  {:<6}  {}\n", format.about().name, codecs.help))
            }
            None => help.push_str(&format!(
                "  {:<6}  the codec of {}\n",
                format.about().name,
                format.about().codec_of
            )),
        }
    }
    help.push_str(
        "
An artifact whose inputs, codec and level did not change since an earlier run
is copied from the artifact cache (target/artifact-cache) instead of being
built again; the bytes are the same.",
    );
    help
}

pub fn run(spec: &Spec, args: &Args) -> Result<()> {
    let started = Instant::now();
    // cargo-deb runs `cargo metadata` on each throwaway crate and clears old
    // .debs from that crate's target directory: keep that directory inside
    // the crate (in our work directory), never a shared one. No other thread
    // runs yet.
    std::env::remove_var("CARGO_TARGET_DIR");
    std::env::remove_var("CARGO_BUILD_TARGET_DIR");
    let plan = plan(spec, args)?;
    let parent = plan
        .out_dir
        .parent()
        .with_context(|| format!("--out {}: has no parent directory", plan.out_dir.display()))?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let work = tempfile::Builder::new()
        .prefix(".kubedist-dist-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a work directory in {}", parent.display()))?;

    // Everything that can fail on bad inputs runs before any compression.
    let (staged, oci, origins) = stage_all(&plan, args, work.path())?;
    let jobs = jobs(&plan, &staged, oci.as_ref());
    let built = write_artifacts(&plan, args, &jobs, &origins, work.path())?;
    publish(&plan, args, &built, &jobs, &origins)?;
    eprintln!("==> done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// What one run of dist does, decided before any long step.
struct Plan {
    spec: Spec,
    k8s_version: String,
    arches: Vec<Arch>,
    formats: Vec<&'static dyn Format>,
    /// The families to stage: those of the packages asked for, both for
    /// the tarball, and the sysext image's.
    families: Vec<Family>,
    /// Which hosts may merge the sysext image, when it is asked for.
    sysext_os: Option<SysextOs>,
    /// Where the images bundle is staged from, when it is asked for.
    images: Option<ImagesFrom>,
    out_dir: PathBuf,
    options: Options,
    /// The artifact cache, unless --no-cache (or it cannot be opened).
    cache: Option<Cache>,
}

/// Reads the options, applies --version and --revision and checks
/// everything that can be checked in the first second (`preflight`).
fn plan(spec: &Spec, args: &Args) -> Result<Plan> {
    let spec = with_overrides(spec, args)?;
    let base = if args.fast {
        Codecs::fast()
    } else {
        Codecs::defaults()
    };
    let codecs = Codecs::parse(args.compression.as_deref().unwrap_or(""), base)?;
    let k8s_version = spec.kubernetes_version().to_string();
    let epoch = crate::util::source_date_epoch(&spec.root)?;
    let arches = fetch::arches_or_host(&args.arch)?;
    // The formats asked for, in the registry's order; all by default, but
    // the images bundle only when there are images to bundle.
    let images_from = images_from(&spec, args, &k8s_version);
    let mut formats: Vec<&'static dyn Format> = emit::FORMATS
        .iter()
        .copied()
        .filter(|f| args.formats.is_empty() || args.formats.iter().any(|n| n == f.about().name))
        .collect();
    if args.carry_images && !formats.iter().any(|f| f.about().carries_images) {
        let carriers: Vec<&str> = emit::FORMATS
            .iter()
            .filter(|f| f.about().carries_images)
            .map(|f| f.about().name)
            .collect();
        bail!(
            "--carry-images: only {} carry the images bundle, and --formats has none of them",
            carriers.join(" and ")
        );
    }
    let images = match (
        stages(&formats, Staging::Images) || args.carry_images,
        images_from,
    ) {
        (false, _) => None,
        (true, Err(why)) if args.carry_images => bail!("--carry-images: {why}"),
        (true, Ok(layout)) => Some(layout),
        (true, Err(why)) if args.formats.is_empty() => {
            eprintln!("note: no images bundle: {why}");
            formats.retain(|f| f.about().staging != Staging::Images);
            None
        }
        (true, Err(why)) => bail!("--formats {}: {why}", images_format()),
    };
    if matches!(images, Some(ImagesFrom::Registry)) && !crate::util::on_path("skopeo") {
        bail!(
            "the images bundle pulls the images with skopeo, which is not installed \
             (apt-get install skopeo), or leave {} out of --formats",
            images_format()
        );
    }
    let sysext = stages(&formats, Staging::SysextImage);
    let families = Family::ALL
        .into_iter()
        .filter(|&family| {
            formats.iter().any(|f| match f.about().families {
                Families::Own(own) => own == family,
                Families::All => true,
                Families::OfTheSysextImage => spec.sysext.family == family,
                Families::None => false,
            })
        })
        .collect();
    // A sysext image no host could merge is refused now, in one line.
    let sysext_os = match (sysext, &args.sysext_os) {
        (false, Some(_)) => bail!("--sysext-os: only for a format that writes a sysext image"),
        (false, None) => None,
        (true, os) => {
            let text = os.as_deref().unwrap_or(&spec.sysext.os);
            let what = if os.is_some() {
                "--sysext-os"
            } else {
                "pkg/sysext.toml: os"
            };
            Some(SysextOs::parse(text, &spec.sysext.sysext_level_ids).context(what)?)
        }
    };
    preflight(
        &arches,
        args.fixtures,
        stages(&formats, Staging::InstallerImage),
    )?;
    let out_dir = match &args.out {
        Some(dir) => {
            std::path::absolute(dir).with_context(|| format!("--out {}", dir.display()))?
        }
        None => spec.root.join("target/dist").join(&k8s_version),
    };
    let cache = if args.no_cache {
        None
    } else {
        let dir = match &args.cache_dir {
            Some(d) => {
                std::path::absolute(d).with_context(|| format!("--cache-dir {}", d.display()))?
            }
            None => spec.root.join("target/artifact-cache"),
        };
        match Cache::open(&dir) {
            Ok(cache) => Some(cache),
            Err(e) => {
                eprintln!("warning: artifact cache: {e:#}; building every artifact");
                None
            }
        }
    };
    let signer = match (&args.sign, &args.sign_gpg_key) {
        (Some(path), _) => Some(RepoKey::load(
            path,
            std::env::var(crate::keys::PASSPHRASE_ENV).ok(),
        )?),
        (None, Some(id)) => Some(RepoKey::from_gpg(id)?),
        (None, None) => None,
    };
    if let Some(key) = &signer {
        for warning in key.check_validity(std::time::SystemTime::now())? {
            eprintln!("warning: {warning}");
        }
    }
    let options = Options {
        homepage: workspace_package(&spec.root, "repository")?,
        license: workspace_package(&spec.root, "license")?,
        epoch,
        codecs,
        // Set once the number of jobs is known (`write_artifacts`).
        threads: 1,
        signer: signer.map(std::sync::Arc::new),
        carry_images: args.carry_images,
    };
    Ok(Plan {
        spec,
        k8s_version,
        arches,
        formats,
        families,
        sysext_os,
        images,
        out_dir,
        options,
        cache,
    })
}

/// Refuses an image list that is not what this host's kubeadm says it
/// pulls (`kubeadm config images list`), when there is a real kubeadm for
/// this host's architecture among the inputs.
fn check_image_list(
    spec: &Spec,
    k8s_version: &str,
    host: Option<&fetch::Upstream>,
    work: &Path,
) -> Result<()> {
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

/// The name of the format that bundles the images, from the registry.
fn images_format() -> &'static str {
    emit::FORMATS
        .iter()
        .find(|f| f.about().staging == Staging::Images)
        .map_or("?", |f| f.about().name)
}

/// Where the images of `pkg/images.toml` come from: `--image-mirror`,
/// else built from source with `--source`, else `DIR/images` of `--from
/// DIR` or of the fixtures, else their own registry.
enum ImagesFrom {
    /// An OCI layout.
    Layout(PathBuf),
    /// A registry, through the cache's layout.
    Registry,
    /// Built from source with the programs, into their `--from`
    /// directory's layout, with pins of their own.
    Source,
}

/// Where the images of `pkg/images.toml` come from; else why they cannot.
fn images_from(spec: &Spec, args: &Args, k8s_version: &str) -> Result<ImagesFrom, String> {
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
        (None, true) => crate::fixtures::default_dir(&spec.root),
        (None, false) => return Ok(ImagesFrom::Registry),
    };
    let layout = dir.join(crate::fixtures::images::DIR);
    if args.origin.from.is_some() && !layout.join("index.json").is_file() {
        return Err(format!("{}: no OCI layout there", layout.display()));
    }
    Ok(ImagesFrom::Layout(layout))
}

/// For each architecture: the verified upstream files, the static builds,
/// every package staged for each family under `work` and the images; the
/// installer image's own part when it is asked for; and what the artifacts'
/// files come from, for their SBOMs.
fn stage_all(
    plan: &Plan,
    args: &Args,
    work: &Path,
) -> Result<(Vec<StagedArch>, Option<StagedOci>, Vec<sbom::Origin>)> {
    let spec = &plan.spec;
    // The images' pins: pkg/images.toml (or --image-pins), or those of the
    // images built from source.
    let mut image_pins = spec.images.clone();
    let origin = if args.fixtures {
        let dir = crate::fixtures::default_dir(&spec.root);
        Origin::Dir(crate::fixtures::ensure(spec, &dir, &plan.arches)?)
    } else if args.source {
        let dir = crate::source::default_dir(&spec.root);
        let images = matches!(plan.images, Some(ImagesFrom::Source)).then_some(&spec.images);
        eprintln!(
            "==> the upstream programs{}, built from their Go modules",
            if images.is_some() { " and images" } else { "" }
        );
        let go = crate::source::Go::from_env()?;
        let extras = crate::source::Extras {
            images,
            runtime: false,
        };
        crate::source::write_inputs(spec, &go, &plan.arches, extras, &dir)?;
        if images.is_some() {
            image_pins =
                crate::spec::Images::load(&dir.join(crate::source::images::PINS), &spec.release)?;
        }
        Origin::Dir(dir)
    } else {
        args.origin.origin()?
    };
    let cache = args.origin.cache(spec);
    let installer = stage::installer(spec)?;
    // Every architecture's upstream files first: the host architecture's
    // programs write the completions of all of them.
    let mut upstreams = BTreeMap::new();
    for &arch in &plan.arches {
        eprintln!("==> {arch}: upstream files");
        upstreams.insert(arch, fetch::ensure(spec, arch, &origin, &cache)?);
    }
    let host = fetch::host_arch().ok().and_then(|a| upstreams.get(&a));
    if plan.images.is_some() {
        check_image_list(spec, &plan.k8s_version, host, work)?;
    }
    let images_layout = match &plan.images {
        Some(ImagesFrom::Layout(layout)) => Some(layout.clone()),
        Some(ImagesFrom::Source) => {
            Some(crate::source::default_dir(&spec.root).join(crate::fixtures::images::DIR))
        }
        Some(ImagesFrom::Registry) => {
            eprintln!("==> the images of pkg/images.toml");
            Some(fetch::ensure_images(
                spec,
                &args.origin,
                &spec.images,
                &plan.arches,
                &cache,
            )?)
        }
        None => None,
    };
    let mut origins = Vec::new();
    for upstream in upstreams.values() {
        origins.extend(sbom::origins::upstream(spec, upstream, &origin)?);
    }
    let mut staged = Vec::new();
    for &arch in &plan.arches {
        let upstream = &upstreams[&arch];
        let mut built = BTreeMap::new();
        for name in build_names(spec) {
            eprintln!("==> {arch}: building {name}");
            let program = crate::build::static_binary(&spec.root, &name, &name, arch)?;
            origins.push(sbom::origins::built(&name, &program, arch)?);
            built.insert(name.clone(), program.path);
        }
        let sources = ArchSources {
            arch,
            upstream,
            built,
            host,
        };
        let stage_dir = work.join("stage");
        let mut packages = Vec::new();
        if !plan.families.is_empty() {
            eprintln!("==> {arch}: staging {} packages", spec.packages.len());
        }
        // (With no family asked for, each package stages nothing.)
        for package in &spec.packages {
            packages.push(stage::stage_package(
                spec,
                package,
                arch,
                &plan.families,
                &sources,
                plan.options.epoch,
                &stage_dir,
            )?);
        }
        let sysext = match &plan.sysext_os {
            Some(os) => {
                let version = format!("{}-{}", plan.k8s_version, spec.release.revision);
                Some(stage::stage_sysext(
                    spec,
                    arch,
                    os,
                    &version,
                    plan.options.epoch,
                    &stage_dir,
                )?)
            }
            None => None,
        };
        let oci_base = if stages(&plan.formats, Staging::InstallerImage) {
            let base = oci_base(spec, arch, plan.options.epoch, &stage_dir)?;
            origins.push(sbom::origins::debian(
                &base,
                spec.families.deb.arch_name(arch)?,
            ));
            Some(base)
        } else {
            None
        };
        let images = match &images_layout {
            Some(layout) => {
                eprintln!("==> {arch}: images ({})", layout.display());
                let images = stage::images::stage(layout, &image_pins.images, arch)
                    .with_context(|| format!("the images bundle for {arch}"))?;
                let built_here = matches!(plan.images, Some(ImagesFrom::Source));
                origins.extend(
                    images
                        .iter()
                        .map(|i| sbom::origins::image(i, arch, built_here)),
                );
                Some(images)
            }
            None => None,
        };
        staged.push(StagedArch {
            arch,
            packages,
            installer: installer.clone(),
            sysext,
            oci_base,
            images,
        });
    }
    let oci = if stages(&plan.formats, Staging::InstallerImage) {
        let tag = format!("{}-{}", plan.k8s_version, spec.release.revision);
        Some(stage::stage_oci(spec, &tag)?)
    } else {
        None
    };
    Ok((staged, oci, origins))
}

/// The installer image's shell for `arch`: Debian's package of
/// `pkg/oci.toml` through apt (which verifies it against the signed
/// archive), cached in target/debian-debs like the fixtures' packages.
fn oci_base(spec: &Spec, arch: Arch, epoch: u64, stage_dir: &Path) -> Result<stage::StagedOciBase> {
    use crate::fixtures::debian;
    let base = &spec.oci.base;
    let debarch = spec.families.deb.arch_name(arch)?;
    eprintln!("==> {arch}: {} for the installer image", base.package);
    debian::require_arch(debarch, crate::util::is_root())?;
    let deb = debian::download(
        &base.package,
        debarch,
        &spec.root.join("target/debian-debs"),
    )?;
    let member = |rel: &str| -> Result<Vec<u8>> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        debian::files_in(&deb.path, dir)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, data)| data)
            .with_context(|| format!("{}: has no {rel} (pkg/oci.toml)", deb.path.display()))
    };
    stage::stage_oci_base(
        spec,
        arch,
        &deb.version,
        &member(&base.binary)?,
        &member(&base.copyright)?,
        epoch,
        stage_dir,
    )
}

/// Whether one of `formats` needs `kind` staged.
fn stages(formats: &[&dyn Format], kind: Staging) -> bool {
    formats.iter().any(|f| f.about().staging == kind)
}

/// The jobs of the formats asked for, in the order they should start.
fn jobs<'a>(plan: &Plan, staged: &'a [StagedArch], oci: Option<&'a StagedOci>) -> Vec<Job<'a>> {
    let mut jobs: Vec<Job> = plan
        .formats
        .iter()
        .flat_map(|format| emit::jobs(*format, staged, oci))
        .collect();
    jobs.sort_by_key(|j| start_order(emit::one_thread(j.format, &plan.options.codecs), size(j)));
    jobs
}

/// Writes every job's artifact into `work/artifacts` (or copies it from the
/// artifact cache), several at a time, each with its SBOM.
fn write_artifacts(
    plan: &Plan,
    args: &Args,
    jobs: &[Job],
    origins: &[sbom::Origin],
    work: &Path,
) -> Result<Vec<Built>> {
    let built_dir = work.join("artifacts");
    fs::create_dir(&built_dir).with_context(|| format!("creating {}", built_dir.display()))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (workers, threads) = schedule(cpus, jobs.len(), args.jobs);
    let options = Options {
        threads,
        ..plan.options.clone()
    };
    eprintln!(
        "==> writing {} artifacts ({workers} at a time, {threads} encoder threads each; {})",
        jobs.len(),
        options.codecs
    );
    run_jobs(jobs, workers, &|job| {
        let (path, sha256, cache_key, cached) =
            write_artifact(plan, &options, job, origins, &built_dir, work)?;
        let sha256 = match sha256 {
            Some(sha) => sha,
            None => crate::digest::sha256_file(&path)?,
        };
        let sbom = sbom::path_of(&path);
        let doc = sbom::document(
            &path,
            &sha256,
            &subject(plan, job, &path),
            origins,
            plan.options.epoch,
        )
        .with_context(|| format!("the SBOM of {}", path.display()))?;
        crate::util::write_bytes_atomic(&sbom, &doc, 0o644)?;
        Ok(Built {
            path,
            sha256,
            sbom,
            cache_key,
            cached,
        })
    })
}

/// What the SBOM of `job`'s artifact `path` says it is.
fn subject(plan: &Plan, job: &Job, path: &Path) -> sbom::Subject {
    let file_name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let release = format!("{}-{}", plan.k8s_version, plan.spec.release.revision);
    let (name, version, purl) = match &job.input {
        emit::Input::Package(pkg) => (
            pkg.name.clone(),
            pkg.version.clone(),
            format!(
                "pkg:{}/kubedist/{}@{}?arch={}",
                pkg.family, pkg.name, pkg.version, pkg.arch_name
            ),
        ),
        emit::Input::Arch(staged) => (
            file_name.clone(),
            release.clone(),
            format!(
                "pkg:generic/kubedist/{file_name}@{release}?arch={}",
                staged.arch
            ),
        ),
        emit::Input::Image(_, oci) => {
            let name = oci.repository.rsplit('/').next().unwrap_or(&oci.repository);
            (
                name.to_string(),
                oci.tag.clone(),
                format!(
                    "pkg:oci/{name}?repository_url={}&tag={}",
                    oci.repository, oci.tag
                ),
            )
        }
    };
    sbom::Subject {
        name,
        version,
        purl,
        licence: plan.options.license.clone(),
    }
}

/// One job's artifact, written or copied from the artifact cache: `(path,
/// SHA-256 when known, cache key, whether it was cached)`.
fn write_artifact(
    plan: &Plan,
    options: &Options,
    job: &Job,
    origins: &[sbom::Origin],
    built_dir: &Path,
    work: &Path,
) -> Result<(PathBuf, Option<String>, Option<String>, bool)> {
    let key = match &plan.cache {
        Some(cache) => Some(cache.key(&describe(job, &plan.k8s_version, options, origins)?)),
        None => None,
    };
    if let (Some(cache), Some(key)) = (&plan.cache, &key) {
        if let Some(hit) = cache.fetch(key, built_dir)? {
            return Ok((hit.path, Some(hit.sha256), Some(key.clone()), true));
        }
    }
    let run = emit::Run {
        k8s_version: &plan.k8s_version,
        options,
        origins,
        work,
        out_dir: built_dir,
    };
    let path = job.format.write(&job.input, &run)?;
    let sha256 = match (&plan.cache, &key) {
        (Some(cache), Some(key)) => Some(cache.store(key, &path)?),
        _ => None,
    };
    Ok((path, sha256, key, false))
}

/// Moves the artifacts into the output directory (only now that all of
/// them were written), writes SHA256SUMS, prunes the cache and prints the
/// summary.
fn publish(
    plan: &Plan,
    args: &Args,
    written: &[Built],
    jobs: &[Job],
    origins: &[sbom::Origin],
) -> Result<()> {
    let out_dir = &plan.out_dir;
    if !out_dir.is_dir() {
        // Readable by a web server whatever the umask (an existing
        // directory keeps the mode its owner gave it).
        fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
        crate::util::set_mode(out_dir, 0o755)?;
    }
    let mut names = Vec::new();
    let mut known = BTreeMap::new();
    // What formats put beside their artifacts (the installer image's
    // layout directory and run examples), before the artifacts are moved.
    for (job, built) in jobs.iter().zip(written) {
        names.extend(
            job.format
                .publish_beside(&job.input, &built.path, out_dir)?,
        );
    }
    for built in written {
        for path in [&built.path, &built.sbom] {
            let name = path.file_name().context("artifact without a name")?;
            let dest = out_dir.join(name);
            fs::rename(path, &dest)
                .with_context(|| format!("moving {} to {}", path.display(), dest.display()))?;
            names.push(name.to_string_lossy().into_owned());
        }
        let name = built.path.file_name().unwrap_or_default().to_string_lossy();
        known.insert(name.into_owned(), built.sha256.clone());
    }
    let summary = write_sums(out_dir, &known, |subjects| {
        let params = provenance::Parameters {
            version: plan.k8s_version.clone(),
            revision: plan.spec.release.revision,
            arches: plan.arches.iter().map(|a| a.to_string()).collect(),
            formats: plan
                .formats
                .iter()
                .map(|f| f.about().name.to_string())
                .collect(),
            compression: plan.options.codecs.to_string(),
            epoch: plan.options.epoch,
            origin: match args.origin.origin()? {
                _ if args.source => format!(
                    "built from source: the Go modules of pkg/source.toml, verified by its \
                     go.sum files, with {}",
                    crate::source::Go::from_env()?.version
                ),
                Origin::Official if !args.fixtures => "official".to_string(),
                Origin::Mirror(url) if !args.fixtures => format!("mirror {url}"),
                // --fixtures is a --from directory: the same inputs, the
                // same statement.
                _ => "a directory (--from, --fixtures)".to_string(),
            },
            repository: plan.options.homepage.clone(),
        };
        let name = provenance::file_name(&plan.k8s_version, plan.spec.release.revision);
        // An earlier run's statement of the same release is replaced, not
        // a subject.
        let subjects: Vec<(String, String)> = subjects
            .iter()
            .filter(|(n, _)| *n != name)
            .cloned()
            .collect();
        let statement = provenance::statement(&plan.spec.root, &params, &subjects, origins)?;
        Ok((name, statement))
    })?;
    sign_sums(out_dir, &plan.options)?;
    if let Some(cache) = &plan.cache {
        // Room for a few runs like this one.
        let size: u64 = summary.iter().map(|r| r.1).sum();
        let keys: Vec<String> = written.iter().filter_map(|b| b.cache_key.clone()).collect();
        if let Err(e) = cache.prune(&keys, (4 * size).max(1 << 30)) {
            eprintln!("warning: artifact cache: {e:#}");
        }
    }
    names.push(provenance::file_name(
        &plan.k8s_version,
        plan.spec.release.revision,
    ));
    names.sort();
    print_summary(out_dir, &names, &summary);
    let cached = written.iter().filter(|b| b.cached).count();
    if cached > 0 {
        eprintln!(
            "==> {cached} of {} artifacts unchanged, copied from the artifact cache",
            written.len()
        );
    }
    Ok(())
}

/// A reloaded spec with --version and --revision applied.
fn with_overrides(spec: &Spec, args: &Args) -> Result<Spec> {
    let mut spec = match &args.version {
        Some(v) => spec.with_kubernetes_version(v)?,
        None => Spec::load(&spec.root)?,
    };
    if let Some(r) = args.revision {
        if r == 0 {
            bail!("--revision 0: revisions start at 1");
        }
        spec.release.revision = r;
    }
    if args.origin.image_pins.is_some() {
        spec.images = args.origin.images(&spec)?;
    }
    Ok(spec)
}

/// `workspace.package.KEY` of the root Cargo.toml.
fn workspace_package(root: &Path, key: &str) -> Result<String> {
    let path = root.join("Cargo.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let doc = text
        .parse::<toml::Table>()
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
    doc.get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get(key))
        .and_then(|r| r.as_str())
        .map(str::to_string)
        .with_context(|| format!("{}: no workspace.package.{key}", path.display()))
}

/// The `build = "<name>"` binaries the packages need.
/// Everything dist can check in its first second, checked before any long
/// step (fixtures, downloads, builds, compression): the Rust targets of the
/// static binaries (added with rustup when missing) and the tools it calls.
/// The output directory is checked when the work directory is made in it,
/// also before any long step.
fn preflight(arches: &[Arch], fixtures: bool, oci: bool) -> Result<()> {
    let mut tools = vec!["cargo"];
    if fixtures || oci {
        // Debian's real binaries, downloaded and unpacked (fixtures/debian.rs).
        tools.extend(["dpkg", "dpkg-deb", "apt-get"]);
    }
    let missing: Vec<&str> = tools
        .into_iter()
        .filter(|t| !crate::util::on_path(t))
        .collect();
    if !missing.is_empty() {
        bail!(
            "dist needs {} on PATH{}",
            missing.join(", "),
            if fixtures {
                " (--fixtures takes Debian's binaries: run it on Debian or Ubuntu, or use --from DIR)"
            } else if oci {
                " (the installer image's shell is Debian's busybox-static: build --formats oci \
                 on Debian or Ubuntu, or leave oci out of --formats)"
            } else {
                ""
            }
        );
    }
    crate::build::ensure_targets(arches)
}

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

/// The inputs of one architecture.
struct ArchSources<'a> {
    arch: Arch,
    upstream: &'a Upstream,
    built: BTreeMap<String, PathBuf>,
    /// The host architecture's upstream files, when this run builds it.
    host: Option<&'a Upstream>,
}

impl stage::Sources for ArchSources<'_> {
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
        if let Some(path) = self.host.and_then(one) {
            return Ok(vec![path]);
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

/// The payload a job compresses, in bytes, for scheduling.
fn size(job: &Job) -> u64 {
    let files = |s: &Staged| s.package_files().map(|f| f.size).sum::<u64>();
    match (job.input, job.format.about().families) {
        (Input::Package(p), _) => files(p),
        // One family's files: about half the tarball.
        (Input::Arch(arch), Families::Own(_) | Families::OfTheSysextImage) => arch
            .packages
            .iter()
            .filter_map(|p| p.rpm.as_ref().or(p.deb.as_ref()))
            .map(files)
            .sum(),
        (Input::Arch(arch), Families::All) => tarball_size(arch),
        (Input::Arch(arch), Families::None) => arch
            .images
            .iter()
            .flatten()
            .flat_map(|i| &i.blobs)
            .map(|b| b.size)
            .sum(),
        (Input::Image(arches, _), _) => arches.iter().map(tarball_size).sum(),
    }
}

/// What a job's errors name.
fn label(job: &Job) -> String {
    match job.input {
        Input::Package(p) => format!("{} {} ({})", p.family, p.name, p.arch),
        Input::Arch(arch) => format!("{} ({})", job.format.about().name, arch.arch),
        Input::Image(..) => job.format.about().name.to_string(),
    }
}

/// Everything the artifact's bytes depend on besides the program that
/// writes it: the format, its codec and level, the options, and the staged
/// input (its files by digest, never by scratch path); for the installer
/// image, which carries its own SBOM, also what its files came from. The
/// cache key is the hash of this and of the program.
fn describe(
    job: &Job,
    k8s_version: &str,
    options: &Options,
    origins: &[sbom::Origin],
) -> Result<String> {
    let format = job.format.about().name;
    let codec = options.codecs.of(job.format.about().codec_of);
    let input = match job.input {
        Input::Package(p) => serde_json::to_string(p)?,
        Input::Arch(arch) => serde_json::to_string(arch)?,
        Input::Image(arches, oci) => serde_json::to_string(&(arches, oci, origins))?,
    };
    // The signing key's fingerprint: a tarball signed by another key (or
    // by none) is another artifact.
    let signer = options
        .signer
        .as_ref()
        .map_or(String::new(), |k| k.fingerprint());
    // Only a run that carries the bundle says so: other keys stay as they were.
    let carry = if options.carry_images {
        "carries the images bundle\n"
    } else {
        ""
    };
    Ok(format!(
        "{format}\n{codec}\n{}\n{} {}\n{k8s_version}\n{signer}\n{carry}{input}\n",
        options.epoch, options.homepage, options.license
    ))
}

/// The payload of one architecture's tarball, in bytes.
fn tarball_size(arch: &StagedArch) -> u64 {
    arch.packages
        .iter()
        .flat_map(|p| p.all())
        .flat_map(|s| &s.files)
        .map(|f| f.size)
        .sum()
}

/// The order artifacts start in: single-threaded ones first, so that the
/// last to finish are multithreaded and keep every CPU busy to the end; then
/// biggest first, so that the long ones start early and small ones fill in.
pub fn start_order(single_threaded: bool, size: u64) -> impl Ord {
    (std::cmp::Reverse(single_threaded), std::cmp::Reverse(size))
}

/// How many of `jobs` artifacts to write at once (`requested`, else one per
/// CPU) and how many threads each encoder gets: its share of the CPUs, and at
/// least two where there are two CPUs, so that while one artifact is in a
/// serial phase (reading, framing, digests) another's encoder can use the
/// idle CPU. Thread counts change no byte of the output (see emit::codec).
pub fn schedule(cpus: usize, jobs: usize, requested: Option<usize>) -> (usize, u32) {
    let cpus = cpus.max(1);
    let workers = requested.unwrap_or(cpus).clamp(1, jobs.max(1));
    let threads = (cpus / workers).max(cpus.min(2));
    (workers, threads as u32)
}

/// Runs `jobs` on `workers` threads and returns what each wrote, in the
/// order of `jobs`; after the first failure no new job starts, and that
/// failure is returned.
fn run_jobs<'a>(
    jobs: &'a [Job<'a>],
    workers: usize,
    work: &(dyn Fn(&Job) -> Result<Built> + Sync),
) -> Result<Vec<Built>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Result<Built>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                if failed.load(Ordering::SeqCst) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { return };
                let started = Instant::now();
                let result = work(job).with_context(|| label(job));
                let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                match &result {
                    Ok(built) => eprintln!(
                        "    [{n}/{}] {} ({:.1} s{})",
                        jobs.len(),
                        built.path.file_name().unwrap_or_default().to_string_lossy(),
                        started.elapsed().as_secs_f64(),
                        if built.cached { ", cached" } else { "" }
                    ),
                    Err(_) => failed.store(true, Ordering::SeqCst),
                }
                if let Ok(mut r) = results.lock() {
                    r.push((i, result));
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("an artifact writer panicked"))?;
    if results.len() < jobs.len() && !failed.load(Ordering::SeqCst) {
        bail!("an artifact writer panicked");
    }
    // In the order of `jobs`, whichever finished first.
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// An artifact written by a job: where, its SHA-256, its SBOM, and whether
/// it came from the artifact cache.
struct Built {
    path: PathBuf,
    sha256: String,
    /// `<artifact>.spdx.json`, beside it.
    sbom: PathBuf,
    /// Its artifact cache entry, kept when the cache is pruned.
    cache_key: Option<String>,
    cached: bool,
}

/// The artifacts of `dir`, `(name, size, sha256)`, also written to
/// `dir/SHA256SUMS` (`sha256sum -c` format), with the release's provenance:
/// `provenance(subjects)` gives its name and bytes, made from every other
/// file's `(name, sha256)`. Digests in `known` (by name) are not computed
/// again.
fn write_sums(
    dir: &Path,
    known: &BTreeMap<String, String>,
    provenance: impl FnOnce(&[(String, String)]) -> Result<(String, Vec<u8>)>,
) -> Result<Vec<(String, u64, String)>> {
    let mut rows = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.ends_with(".oci") && path.join("oci-layout").is_file() && !name.starts_with('.') {
            // An image layout: each of its files, as `sha256sum -c` reads them.
            rows.extend(layout_sums(&path, &name)?);
            continue;
        }
        let artifact = [
            ".deb",
            ".rpm",
            ".tar.gz",
            ".tar.xz",
            ".tar.zst",
            ".raw",
            ".oci.tar",
            ".yaml",
            ".spdx.json",
            ".intoto.json",
        ]
        .iter()
        .any(|ext| name.ends_with(ext));
        if !artifact || name.starts_with('.') {
            continue;
        }
        let size = entry
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        let sha = match known.get(&name) {
            Some(sha) => sha.clone(),
            None => crate::digest::sha256_file(&path)?,
        };
        rows.push((name, size, sha));
    }
    rows.sort();
    let subjects: Vec<(String, String)> = rows
        .iter()
        .map(|(n, _, s)| (n.clone(), s.clone()))
        .collect();
    let (name, statement) = provenance(&subjects)?;
    rows.retain(|(n, _, _)| *n != name);
    crate::util::write_bytes_atomic(&dir.join(&name), &statement, 0o644)?;
    rows.push((
        name,
        statement.len() as u64,
        crate::digest::sha256_bytes(&statement),
    ));
    rows.sort();
    let text: String = rows.iter().map(|(n, _, s)| format!("{s}  {n}\n")).collect();
    let path = dir.join("SHA256SUMS");
    crate::util::write_bytes_atomic(&path, text.as_bytes(), 0o644)?;
    Ok(rows)
}

/// `(dir/relative path, size, sha256)` of every file of the image layout
/// `path`; blobs are named by their digest, which is checked on the way.
fn layout_sums(path: &Path, dir: &str) -> Result<Vec<(String, u64, String)>> {
    let mut rows = Vec::new();
    for rel in ["oci-layout", "index.json", "manifest.json"] {
        let file = path.join(rel);
        if file.is_file() {
            let size = fs::metadata(&file)
                .with_context(|| file.display().to_string())?
                .len();
            rows.push((
                format!("{dir}/{rel}"),
                size,
                crate::digest::sha256_file(&file)?,
            ));
        }
    }
    let blobs = path.join("blobs/sha256");
    for entry in fs::read_dir(&blobs).with_context(|| format!("reading {}", blobs.display()))? {
        let entry = entry.with_context(|| format!("reading {}", blobs.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file = entry.path();
        let sha = crate::digest::sha256_file(&file)?;
        if sha != name {
            bail!("{}: its content does not match its name", file.display());
        }
        let size = entry
            .metadata()
            .with_context(|| file.display().to_string())?
            .len();
        rows.push((format!("{dir}/blobs/sha256/{name}"), size, sha));
    }
    Ok(rows)
}

/// `dist --sign`: `dir/SHA256SUMS.asc`, the detached signature of
/// `dir/SHA256SUMS`. Unsigned, an earlier run's signature is removed: it
/// would not match.
fn sign_sums(dir: &Path, options: &Options) -> Result<()> {
    let path = dir.join(emit::SUMS_SIGNATURE);
    let Some(key) = &options.signer else {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        };
    };
    let sums = dir.join("SHA256SUMS");
    let data = fs::read(&sums).with_context(|| format!("reading {}", sums.display()))?;
    let signature = key.detached_armored(&data, options.epoch)?;
    crate::util::write_bytes_atomic(&path, signature.as_bytes(), 0o644)?;
    eprintln!(
        "==> signed SHA256SUMS ({}) with {} ({})",
        emit::SUMS_SIGNATURE,
        key.fingerprint(),
        key.user_id()
    );
    Ok(())
}

fn print_summary(out_dir: &Path, written: &[String], rows: &[(String, u64, String)]) {
    println!("{}:", out_dir.display());
    // A directory's files (the image layout) make one line: its size.
    let mut lines: Vec<(String, u64, String)> = Vec::new();
    for (name, size, sha) in rows {
        match name.split_once('/') {
            Some((dir, _)) => match lines.iter_mut().find(|l| l.0 == format!("{dir}/")) {
                Some(line) => line.1 += size,
                None => lines.push((format!("{dir}/"), *size, "(directory)".to_string())),
            },
            None => lines.push((name.clone(), *size, sha.clone())),
        }
    }
    let width = lines.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let is_new = |name: &str| written.iter().any(|w| name.trim_end_matches('/') == w);
    for (name, size, sha) in &lines {
        let mark = if is_new(name) { ' ' } else { '*' };
        println!("{mark} {name:<width$}  {:>9}  {sha}", human(*size));
    }
    if lines.iter().any(|r| !is_new(&r.0)) {
        println!("(* from an earlier run, still listed in SHA256SUMS)");
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(2048), "2.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
    }
}
