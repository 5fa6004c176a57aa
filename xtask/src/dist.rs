//! `cargo xtask dist`: the command line and the plan (what to build, from
//! which inputs, with which options, all checked in the first second), then
//! the run: stage (`staging.rs`), write the artifacts (`jobs.rs`), publish
//! them (`publish.rs`).
//!
//! Atomic output: everything is built in a temp directory beside the output
//! directory, and artifacts are moved into place only once all of them were
//! written. A failed run leaves the output directory as it was.

mod jobs;
mod publish;
mod staging;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cache::Cache;
use crate::emit::codec::Codecs;
use crate::emit::{self, Families, Format, Options, Staging};
use crate::inputs::{self, Inputs};
use crate::keys::RepoKey;
use crate::spec::{Arch, Family, Spec, SysextOs};

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
    /// Architectures to build, comma-separated: amd64, arm64, ppc64le,
    /// riscv64 (with --source: upstream publishes no riscv64 Kubernetes),
    /// s390x (deb and rpm spellings such as x86_64 are accepted too).
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
    pub inputs: inputs::InputArgs,
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
    /// The images bundle holds only the images a worker node runs
    /// (pkg/images.toml's `worker = true`: kube-proxy, CoreDNS, pause), as
    /// kubedist-images-<version>-<arch>-worker.oci.tar: smaller, and with
    /// --source the control plane's images are not built. A control-plane
    /// node needs the whole bundle.
    #[arg(long)]
    pub worker_images: bool,
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
  cargo xtask dist --formats tar,images --worker-images  # for workers: no control-plane images

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
built again, and so is its SBOM; the bytes are the same.",
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
    let (staged, oci, origins) = staging::stage_all(&plan, work.path())?;
    let jobs = jobs::jobs(&plan, &staged, oci.as_ref());
    let built = jobs::write_artifacts(&plan, args.jobs, &jobs, &origins, work.path())?;
    publish::publish(&plan, &built, &jobs, &origins)?;
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
    /// Where the programs, the images and the installer's shell come from.
    inputs: Inputs,
    out_dir: PathBuf,
    options: Options,
    /// The artifact cache, unless --no-cache (or it cannot be opened).
    cache: Option<Cache>,
}

/// Reads the options, applies --version and --revision and checks
/// everything that can be checked in the first second: the inputs resolved
/// (`Inputs::resolve`, the static builds' Rust targets included), the
/// output and cache directories, the signing key.
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
    let arches = Arch::list_or_host(&args.arch)?;
    // The formats asked for, in the registry's order; all by default, but
    // the images bundle only when there are images to bundle.
    let images_from = inputs::images_from(&spec, &args.inputs);
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
    if args.worker_images && images.is_none() {
        bail!(
            "--worker-images: no images bundle in this run (--formats {} or --carry-images)",
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
    if !crate::util::on_path("cargo") {
        bail!("dist needs cargo on PATH");
    }
    let inputs = Inputs::resolve(
        &spec,
        &args.inputs,
        &arches,
        images,
        args.worker_images,
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
        inputs,
        out_dir,
        options,
        cache,
    })
}

/// The name of the format that bundles the images, from the registry.
fn images_format() -> &'static str {
    emit::FORMATS
        .iter()
        .find(|f| f.about().staging == Staging::Images)
        .map_or("?", |f| f.about().name)
}

/// Whether one of `formats` needs `kind` staged.
fn stages(formats: &[&dyn Format], kind: Staging) -> bool {
    formats.iter().any(|f| f.about().staging == kind)
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
    if args.inputs.origin.image_pins.is_some() {
        spec.images = args.inputs.origin.images(&spec)?;
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
