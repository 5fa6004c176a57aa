//! The declarative description of what we ship, read from `pkg/`:
//! `release.toml` (pinned upstream versions and where their files live),
//! `families.toml` (what differs between deb and rpm hosts), `sysext.toml`
//! (the systemd-sysext image) and one `<package>.toml` per package. Everything else builds on these types; this
//! module reads and validates, and never touches the network or the output.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::version::Version;

/// Everything in `pkg/`, validated.
#[derive(Debug)]
pub struct Spec {
    /// The repository root; `src` paths of files are relative to it.
    pub root: PathBuf,
    pub release: Release,
    pub families: Families,
    /// Sorted by name.
    pub packages: Vec<Package>,
    pub sysext: Sysext,
    pub oci: Oci,
    pub images: Images,
}

/// `pkg/images.toml`: the images kubeadm pulls for the pinned release.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Images {
    /// The Kubernetes version they are for: the release's.
    pub kubernetes: String,
    #[serde(rename = "image")]
    pub images: Vec<Image>,
}

/// One image kubeadm pulls.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Image {
    /// `registry/path:tag`, as kubeadm names it.
    pub reference: String,
    /// Whether a worker node needs it (a control-plane node needs all).
    pub worker: bool,
    /// `sha256:<hex>` of the image index the tag names.
    pub index: Option<String>,
    /// Where `index` was taken from.
    pub record: Option<String>,
    /// Why there is no `index`.
    pub unrecorded: Option<String>,
}

impl Images {
    /// A file in `pkg/images.toml`'s format (`--image-pins`), checked as
    /// it is.
    pub fn load(path: &Path, release: &Release) -> Result<Images> {
        let images: Images = read_toml(path)?;
        validate_images(&images, release).with_context(|| path.display().to_string())?;
        Ok(images)
    }

    /// The images a worker node runs (`worker = true`): what `dist
    /// --worker-images` bundles.
    pub fn for_workers(&self) -> Images {
        Images {
            kubernetes: self.kubernetes.clone(),
            images: self.images.iter().filter(|i| i.worker).cloned().collect(),
        }
    }
}

impl Image {
    /// The reference without its tag: `registry.k8s.io/pause`.
    pub fn repository(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map_or(self.reference.as_str(), |(name, _)| name)
    }

    /// The last path element: `pause`.
    pub fn short_name(&self) -> &str {
        let repository = self.repository();
        repository.rsplit('/').next().unwrap_or(repository)
    }
}

/// `pkg/oci.toml`: the installer image.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Oci {
    /// The image's name without its tag.
    pub repository: String,
    /// The scripts of `/kubedist/` (`entrypoint.sh` among them), relative
    /// to the repository root.
    pub scripts: Vec<String>,
    /// Run examples shipped next to the image (`@IMAGE@` filled in).
    pub examples: Vec<String>,
    pub base: OciBase,
}

/// The Debian package the image's shell comes from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OciBase {
    pub package: String,
    /// The static binary inside the package (`bin/busybox`).
    pub binary: String,
    /// Its copyright file inside the package.
    pub copyright: String,
    pub licence: String,
    /// Where its source is.
    pub source: String,
}

/// `pkg/sysext.toml`: the systemd-sysext images made from the packages,
/// the node's and the container runtime's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sysext {
    /// The family whose staging the images are made of.
    pub family: Family,
    /// The hosts that may merge them (`--sysext-os` overrides), as
    /// `SysextOs::parse` reads it.
    pub os: String,
    /// os-release IDs whose hosts set SYSEXT_LEVEL: `ID:VALUE` pins that
    /// field for them, VERSION_ID for every other.
    #[serde(default)]
    pub sysext_level_ids: Vec<String>,
    /// Our architecture names (Go's) → systemd's.
    pub arch: BTreeMap<String, String>,
    /// The node's image: every package but the runtime's.
    pub node: SysextImage,
    /// The container runtime's image: the `runtime = true` packages.
    pub runtime: SysextImage,
}

/// One sysext image of `pkg/sysext.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SysextImage {
    /// The extension's name: `extension-release.<name>`, `<name>.raw`.
    pub name: String,
    /// Package path prefix → where the image puts it instead.
    #[serde(default, rename = "move")]
    pub moves: BTreeMap<String, String>,
    /// Files only the image carries.
    #[serde(default)]
    pub files: Vec<FileEntry>,
}

impl Sysext {
    /// systemd's name of `arch` (`ARCHITECTURE=`, the image name).
    pub fn arch_name(&self, arch: Arch) -> Result<&str> {
        self.arch
            .get(arch.go_name())
            .map(String::as_str)
            .with_context(|| format!("pkg/sysext.toml: no [arch] name for {arch}"))
    }
}

/// The architecture names systemd knows (`systemd-analyze architectures`,
/// systemd 252): an `ARCHITECTURE=` outside this list matches no host.
pub const SYSTEMD_ARCHITECTURES: &[&str] = &[
    "alpha",
    "arc",
    "arc-be",
    "arm",
    "arm-be",
    "arm64",
    "arm64-be",
    "cris",
    "ia64",
    "loongarch64",
    "m68k",
    "mips",
    "mips-le",
    "mips64",
    "mips64-le",
    "parisc",
    "parisc64",
    "ppc",
    "ppc-le",
    "ppc64",
    "ppc64-le",
    "riscv32",
    "riscv64",
    "s390",
    "s390x",
    "sh",
    "sh64",
    "sparc",
    "sparc64",
    "tilegx",
    "x86",
    "x86-64",
];

/// Which hosts may merge a sysext image: the `ID=` of its extension-release
/// file and, unless it is `_any`, the version field systemd compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SysextOs {
    /// `ID=_any`: every OS (systemd ≥ 252).
    Any,
    /// `ID=<id>` and `<field>=<value>`, field `SYSEXT_LEVEL` or `VERSION_ID`.
    Id {
        id: String,
        field: String,
        value: String,
    },
}

impl SysextOs {
    /// Reads `_any` or `ID:VALUE` (`flatcar:1.0`, `fedora:40`). VALUE is the
    /// SYSEXT_LEVEL for the IDs in `level_ids`, else the VERSION_ID. What no
    /// host could match is refused: os-release(5) allows only lower-case
    /// letters, digits, `.`, `_` and `-` in both, and systemd refuses an
    /// image with an ID but no version for every host that has one.
    pub fn parse(text: &str, level_ids: &[String]) -> Result<SysextOs> {
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        };
        if text == "_any" {
            return Ok(SysextOs::Any);
        }
        let Some((id, value)) = text.split_once(':') else {
            bail!(
                "sysext OS {text:?}: give ID:VERSION (flatcar:1.0, fedora:40) or _any; \
                 systemd refuses an ID without a version on every host that has one"
            );
        };
        if id == "_any" {
            bail!("sysext OS {text:?}: _any matches every OS and takes no version");
        }
        if !plain(id) || !plain(value) {
            bail!(
                "sysext OS {text:?}: no host can match it: os-release IDs and versions \
                 are lower-case letters, digits, '.', '_' and '-' (e.g. fedora:40)"
            );
        }
        let field = if level_ids.iter().any(|l| l == id) {
            "SYSEXT_LEVEL"
        } else {
            "VERSION_ID"
        };
        Ok(SysextOs::Id {
            id: id.to_string(),
            field: field.to_string(),
            value: value.to_string(),
        })
    }

    /// The extension-release lines: `ID=...` and the version field.
    pub fn release_lines(&self) -> String {
        match self {
            SysextOs::Any => "ID=_any\n".to_string(),
            SysextOs::Id { id, field, value } => format!("ID={id}\n{field}={value}\n"),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// Package revision (deb) / release (rpm).
    pub revision: u32,
    /// The Kubernetes releases the default channels carry: the newest
    /// patch of each of the newest three minors, the pin among them
    /// (`cargo xtask bump` keeps it).
    pub supported: Vec<String>,
    /// The newest pre-release of the minor after the pin, for its
    /// pre-release channel, until that minor's first release.
    pub prerelease: Option<String>,
    pub sources: BTreeMap<String, Source>,
}

/// The `[sources.*]` entry whose version names a release.
pub const KUBERNETES: &str = "kubernetes";

impl Release {
    /// The `[sources.kubernetes]` entry, or why there is none.
    pub fn kubernetes(&self) -> Result<&Source> {
        self.sources.get(KUBERNETES).with_context(no_kubernetes)
    }

    fn kubernetes_mut(&mut self) -> Result<&mut Source> {
        self.sources.get_mut(KUBERNETES).with_context(no_kubernetes)
    }
}

fn no_kubernetes() -> String {
    format!("pkg/release.toml: no [sources.{KUBERNETES}] entry")
}

/// One upstream project and the files of it we package.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub version: String,
    /// Where the official files live; FILE.sha256 sits beside each.
    pub base: String,
    /// Paths under `base`, with `{version}` and `{arch}` placeholders.
    pub files: Vec<String>,
    /// Upstream's copyright notice, for the packages' copyright files.
    pub copyright: String,
    /// A list of checksums (`hex  name` lines) under `base` that upstream
    /// publishes instead of a checksum file beside each file
    /// (`v{version}/runc.sha256sum`).
    #[serde(default)]
    pub sums: Option<String>,
    /// The directory of the release archive the programs are in (`bin` in
    /// containerd's), for the archives fixtures and source builds make.
    #[serde(default)]
    pub archive_dir: Option<String>,
    /// The architectures upstream publishes no files of: built from source
    /// only (`dist --source`), and nothing of them in the lock.
    #[serde(default)]
    pub unpublished: Vec<String>,
}

impl Source {
    /// Whether upstream publishes this source's files for `arch`.
    pub fn published(&self, arch: Arch) -> bool {
        !self
            .unpublished
            .iter()
            .any(|a| a.parse::<Arch>().ok() == Some(arch))
    }

    /// `template` (a path of `files` or `sums`) for one build.
    pub fn fill(&self, template: &str, arch: Arch) -> String {
        template
            .replace("{version}", &self.version)
            .replace("{arch}", arch.go_name())
    }

    /// The path of `program` inside the source's release archive.
    pub fn member_path(&self, program: &str) -> String {
        match &self.archive_dir {
            Some(dir) => format!("{dir}/{program}"),
            None => program.to_string(),
        }
    }

    /// The relative paths of this source's files for one build.
    pub fn paths(&self, arch: Arch) -> Vec<String> {
        self.files.iter().map(|f| self.fill(f, arch)).collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Families {
    pub deb: FamilyConf,
    pub rpm: FamilyConf,
    pub detect: Detect,
}

/// How a host's family is recognised when nobody names it (families.toml's
/// `[detect]`): the paths kubelet-wrapper (its build reads them) and
/// install.sh (staging fills them in) look at.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detect {
    /// A file only deb hosts have.
    pub deb_marker: String,
    /// A directory rpm hosts have.
    pub rpm_marker_dir: String,
}

impl Families {
    pub fn get(&self, family: Family) -> &FamilyConf {
        match family {
            Family::Deb => &self.deb,
            Family::Rpm => &self.rpm,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyConf {
    /// The file holding KUBELET_EXTRA_ARGS.
    pub env_file: String,
    /// Where vendor systemd units go.
    pub unitdir: String,
    pub config: ConfigStyle,
    /// Directories every host of the family has before our packages: no
    /// package lists or declares them (see families.toml).
    pub host_dirs: Vec<String>,
    /// Our architecture names (Go's) → this family's.
    pub arch: BTreeMap<String, String>,
    /// Where each shell's completion file for a command goes, with `{name}`
    /// for the command's name (the family's vendor directories).
    pub completions: BTreeMap<Shell, String>,
    /// The packages the host's own distribution supplies: a dependency on
    /// one of them is met outside our repository (`repo`'s closure gate).
    pub distribution: Vec<String>,
    /// Maintainer script name → what a package must have (any of) to get it.
    pub scripts: BTreeMap<String, Vec<ScriptNeed>>,
}

/// Something a package has that a maintainer script handles (families.toml's
/// `[*.scripts]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptNeed {
    /// Directories of its own (`[[dirs]]`).
    Dirs,
    /// Admin-editable files shipped as seeds.
    Seeds,
    /// systemd units it enables (`systemd_units`).
    Units,
    /// Any file under the family's unitdir: units or drop-ins.
    UnitFiles,
}

impl Families {
    /// pkg/families.toml of the tree at `root`, alone.
    pub fn load(root: &Path) -> Result<Families> {
        read_toml(&root.join("pkg/families.toml"))
    }
}

impl FamilyConf {
    pub fn arch_name(&self, arch: Arch) -> Result<&str> {
        self.arch
            .get(arch.go_name())
            .map(String::as_str)
            .with_context(|| format!("pkg/families.toml: no name for architecture {arch}"))
    }
}

/// How an admin-editable file (`config = true`) is shipped; see families.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigStyle {
    Seed,
    Noreplace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Deb,
    Rpm,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::Deb, Family::Rpm];
    pub fn name(self) -> &'static str {
        match self {
            Family::Deb => "deb",
            Family::Rpm => "rpm",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A CPU architecture, by its Go/Kubernetes name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    Amd64,
    Arm64,
    Ppc64le,
    Riscv64,
    S390x,
}

impl Arch {
    pub const ALL: [Arch; 5] = [
        Arch::Amd64,
        Arch::Arm64,
        Arch::Ppc64le,
        Arch::Riscv64,
        Arch::S390x,
    ];

    /// The architecture of the machine we run on.
    pub fn host() -> Result<Arch> {
        Ok(match std::env::consts::ARCH {
            "x86_64" => Arch::Amd64,
            "aarch64" => Arch::Arm64,
            "powerpc64" if cfg!(target_endian = "little") => Arch::Ppc64le,
            "riscv64" => Arch::Riscv64,
            "s390x" => Arch::S390x,
            other => {
                bail!("this host's architecture {other:?} has no Kubernetes build; pass --arch")
            }
        })
    }

    /// The architectures an `--arch` list names, sorted, or the host's.
    pub fn list_or_host(arches: &[Arch]) -> Result<Vec<Arch>> {
        if arches.is_empty() {
            return Ok(vec![Arch::host()?]);
        }
        let mut out = arches.to_vec();
        out.sort();
        out.dedup();
        Ok(out)
    }

    pub fn go_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::Ppc64le => "ppc64le",
            Arch::Riscv64 => "riscv64",
            Arch::S390x => "s390x",
        }
    }

    /// The GNU triple of Debian's (cross) compilers for this architecture:
    /// `aarch64-linux-gnu` of `aarch64-linux-gnu-gcc`.
    pub fn gnu_triple(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64-linux-gnu",
            Arch::Arm64 => "aarch64-linux-gnu",
            Arch::Ppc64le => "powerpc64le-linux-gnu",
            Arch::Riscv64 => "riscv64-linux-gnu",
            Arch::S390x => "s390x-linux-gnu",
        }
    }

    /// The Rust target that builds our static binaries for this
    /// architecture: musl where Rust ships a prebuilt standard library for
    /// it. ppc64le, riscv64 and s390x have none in stable Rust to use
    /// (rustup lists 1.95's powerpc64le-unknown-linux-musl and
    /// riscv64gc-unknown-linux-musl, but their rust-std fail to download:
    /// "component download failed", a 404;
    /// s390x-unknown-linux-musl is tier 3, built only by a nightly
    /// `-Zbuild-std` against a musl libc for the target), so there glibc
    /// is linked in statically (`+crt-static`), by Debian's cross gcc.
    pub fn static_target(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64-unknown-linux-musl",
            Arch::Arm64 => "aarch64-unknown-linux-musl",
            Arch::Ppc64le => "powerpc64le-unknown-linux-gnu",
            Arch::Riscv64 => "riscv64gc-unknown-linux-gnu",
            Arch::S390x => "s390x-unknown-linux-gnu",
        }
    }

    /// The cross linker of a glibc static target and the Debian packages
    /// that provide it (and the target's `libc.a`); None where Rust links
    /// the musl target itself.
    pub fn cross_linker(self) -> Option<(&'static str, &'static str)> {
        match self {
            Arch::Amd64 | Arch::Arm64 => None,
            Arch::Ppc64le => Some((
                "powerpc64le-linux-gnu-gcc",
                "gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross",
            )),
            Arch::Riscv64 => Some((
                "riscv64-linux-gnu-gcc",
                "gcc-riscv64-linux-gnu libc6-dev-riscv64-cross",
            )),
            Arch::S390x => Some((
                "s390x-linux-gnu-gcc",
                "gcc-s390x-linux-gnu libc6-dev-s390x-cross",
            )),
        }
    }

    /// qemu-user's emulator of this architecture, called by name (binfmt
    /// may not be set up).
    pub fn qemu_user(self) -> &'static str {
        match self {
            Arch::Amd64 => "qemu-x86_64-static",
            Arch::Arm64 => "qemu-aarch64-static",
            Arch::Ppc64le => "qemu-ppc64le-static",
            Arch::Riscv64 => "qemu-riscv64-static",
            Arch::S390x => "qemu-s390x-static",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.go_name())
    }
}

impl std::str::FromStr for Arch {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        // Accept the deb and rpm spellings too: operators type what they know.
        Ok(match s {
            "amd64" | "x86_64" => Arch::Amd64,
            "arm64" | "aarch64" => Arch::Arm64,
            "ppc64le" | "ppc64el" => Arch::Ppc64le,
            "riscv64" => Arch::Riscv64,
            "s390x" => Arch::S390x,
            _ => bail!("unknown architecture {s:?} (known: amd64, arm64, ppc64le, riscv64, s390x)"),
        })
    }
}

/// A shell whose completions a command can write (`NAME completion SHELL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
            Shell::Fish => "fish",
        }
    }
}

impl fmt::Display for Shell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which init system a file is for; files without one are for every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    Systemd,
    Openrc,
    Runit,
}

impl Init {
    pub fn name(self) -> &'static str {
        match self {
            Init::Systemd => "systemd",
            Init::Openrc => "openrc",
            Init::Runit => "runit",
        }
    }
}

/// One `pkg/<name>.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub name: String,
    /// The `[sources.*]` entry whose version this package carries.
    pub version_from: String,
    pub summary: String,
    pub description: String,
    /// Dependencies for both families, as `name`, or `name OP version`.
    #[serde(default)]
    pub depends: Vec<Dep>,
    #[serde(default)]
    pub recommends: Vec<Dep>,
    /// systemd units (shipped among `files`) to enable on install.
    #[serde(default)]
    pub systemd_units: Vec<String>,
    #[serde(default)]
    pub deb: FamilyOverride,
    #[serde(default)]
    pub rpm: FamilyOverride,
    #[serde(default)]
    pub files: Vec<FileEntry>,
    #[serde(default)]
    pub dirs: Vec<DirEntry>,
    /// The architectures whose xz streams of this package (a deb's data,
    /// an rpm's payload) put xz's branch filter for the architecture's code
    /// ahead of LZMA2: where the package is one large program, the filter
    /// pays (docs/performance.md, "Branch filters").
    #[serde(default)]
    pub xz_branch_filter: Vec<String>,
    /// Part of the container runtime: never a dependency of the node's
    /// packages; the tarball's install.sh installs it only when asked
    /// (`--runtime`), and the Kubernetes sysext image leaves it out.
    #[serde(default)]
    pub runtime: bool,
    /// Virtual packages it provides, in both families.
    #[serde(default)]
    pub provides: Vec<Dep>,
    /// Packages it cannot be installed beside, in both families.
    #[serde(default)]
    pub conflicts: Vec<Dep>,
}

/// xz's branch/call/jump filter: it rewrites the relative addresses of one
/// architecture's call and jump instructions as absolute ones ahead of
/// LZMA2, so that calls to the same function look alike. Every reader of
/// xz decodes the x86 one (liblzma has had it since 4.999.9beta, 2009:
/// every dpkg that reads xz, rpm ≥ 4.7, GNU tar through xz).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BranchFilter {
    X86,
}

impl BranchFilter {
    /// The filter for `arch`'s code, or why there is none a package may use.
    pub fn for_arch(arch: Arch) -> std::result::Result<BranchFilter, &'static str> {
        match arch {
            Arch::Amd64 => Ok(BranchFilter::X86),
            Arch::Arm64 => Err(
                "xz's ARM64 filter needs liblzma >= 5.4.0 to decode: the dpkg of Ubuntu 22.04 \
                 and the rpm of RHEL 9 (liblzma 5.2.5) cannot read it (Debian 12's dpkg, 5.4.1, can), \
                 and the xz2 crate that writes dist's xz streams has no encoder for it",
            ),
            Arch::Ppc64le => {
                Err("xz's PowerPC filter is for big-endian code; ppc64le has none")
            }
            Arch::Riscv64 => Err(
                "xz's RISC-V filter needs liblzma >= 5.6.0 to decode, newer than the dpkg and rpm \
                 of every supported distribution but the newest, and the xz2 crate has no encoder for it",
            ),
            Arch::S390x => Err("xz has no branch filter for s390x code"),
        }
    }
}

impl Package {
    /// The branch filter of this package's xz streams for `arch`, if any.
    pub fn xz_filter(&self, arch: Arch) -> Option<BranchFilter> {
        self.xz_branch_filter
            .iter()
            .any(|a| a.parse::<Arch>().ok() == Some(arch))
            .then(|| BranchFilter::for_arch(arch).ok())
            .flatten()
    }
}

/// What one family adds to a package.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyOverride {
    #[serde(default)]
    pub depends: Vec<Dep>,
    #[serde(default)]
    pub recommends: Vec<Dep>,
    /// deb only: the packages whose files it may overwrite (with
    /// `conflicts`, what lets apt swap them on an explicit install). rpm has
    /// none: its Obsoletes would replace them on a plain upgrade.
    #[serde(default)]
    pub replaces: Vec<Dep>,
}

/// A file of a package. Exactly one of `upstream`, `src`, `build` says where
/// its content comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// `<source>/<file>`: a verified upstream file, or a member of an
    /// upstream archive; `<source>/*` is every member (then `dest` ends in `/`).
    pub upstream: Option<String>,
    /// A path in this repository.
    pub src: Option<String>,
    /// A binary of this workspace, built static for the target architecture.
    pub build: Option<String>,
    /// Absolute path on the host; may use `{unitdir}` and `{env_file}`.
    pub dest: String,
    pub mode: Mode,
    /// Admin-editable: never overwritten once edited (see `ConfigStyle`).
    #[serde(default)]
    pub config: bool,
    /// Replace `@ENV_FILE@`, `@FAMILY@` and `@VERSION@` in the content.
    #[serde(default)]
    pub template: bool,
    /// Only for hosts running this init system.
    pub init: Option<Init>,
    /// Shells the program (one `upstream` binary) writes
    /// completions for with `NAME completion SHELL`; stage runs it and ships
    /// what it prints in the family's `completions` directories.
    #[serde(default)]
    pub completions: Vec<Shell>,
}

/// Where a file's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content<'a> {
    Upstream { source: &'a str, member: &'a str },
    Repo(&'a str),
    Build(&'a str),
}

impl FileEntry {
    pub fn content(&self) -> Content<'_> {
        match (&self.upstream, &self.src, &self.build) {
            (Some(u), None, None) => {
                let (source, member) = u.split_once('/').unwrap_or((u, ""));
                Content::Upstream { source, member }
            }
            (None, Some(s), None) => Content::Repo(s),
            (None, None, Some(b)) => Content::Build(b),
            // `Spec::load` has rejected every other combination.
            _ => unreachable!("validated in Spec::load"),
        }
    }

    /// `dest` for one family.
    pub fn dest_for(&self, family: &FamilyConf) -> String {
        expand_dest(&self.dest, family)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirEntry {
    pub path: String,
    pub mode: Mode,
}

fn expand_dest(dest: &str, family: &FamilyConf) -> String {
    dest.replace("{unitdir}", &family.unitdir)
        .replace("{env_file}", &family.env_file)
}

/// A file mode, written as an octal string ("0755") in `pkg/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode(pub u32);

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match u32::from_str_radix(&s, 8) {
            Ok(m) if s.len() == 4 && m <= 0o7777 => Ok(Mode(m)),
            _ => Err(serde::de::Error::custom(format!(
                "mode {s:?} is not a four-digit octal mode like \"0644\""
            ))),
        }
    }
}

/// A dependency: `name` or `name OP version`, OP one of `>= <= = > <`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dep {
    pub name: String,
    pub constraint: Option<(String, String)>,
}

impl Dep {
    /// `iptables (>= 1.4.21)`
    pub fn deb(&self) -> String {
        match &self.constraint {
            None => self.name.clone(),
            Some((op, v)) => {
                // dpkg spells strict comparisons << and >>.
                let op = match op.as_str() {
                    "<" => "<<",
                    ">" => ">>",
                    o => o,
                };
                format!("{} ({op} {v})", self.name)
            }
        }
    }

    /// `iptables >= 1.4.21`
    pub fn rpm(&self) -> String {
        match &self.constraint {
            None => self.name.clone(),
            Some((op, v)) => format!("{} {op} {v}", self.name),
        }
    }
}

impl std::str::FromStr for Dep {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let valid_name = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-._".contains(c))
        };
        match words.as_slice() {
            [name] if valid_name(name) => Ok(Dep {
                name: name.to_string(),
                constraint: None,
            }),
            [name, op, version] if valid_name(name) && [">=", "<=", "=", ">", "<"].contains(op) => {
                Ok(Dep {
                    name: name.to_string(),
                    constraint: Some((op.to_string(), version.to_string())),
                })
            }
            _ => Err(format!(
                "dependency {s:?} is not `name` or `name OP version` (OP: >= <= = > <)"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Dep {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Every dependency of a package is another of our packages or a
/// distribution package its family declares (families.toml's
/// `distribution`): what `repo`'s closure gate accepts, checked here first.
fn check_dependencies_declared(packages: &[Package], families: &Families) -> Result<()> {
    for family in Family::ALL {
        let declared = &families.get(family).distribution;
        for package in packages {
            let over = match family {
                Family::Deb => &package.deb,
                Family::Rpm => &package.rpm,
            };
            for dep in package.depends.iter().chain(&over.depends) {
                let ours = packages.iter().any(|p| p.name == dep.name);
                if !ours && !declared.contains(&dep.name) {
                    bail!(
                        "pkg/{}.toml: {} depends on {:?}, which is none of our packages and not in pkg/families.toml's [{}] distribution list",
                        package.name,
                        family.name(),
                        dep.name,
                        family.name()
                    );
                }
            }
            // The container runtime is installed only on request
            // (docs/packages.md): nothing pulls it in.
            let wanted = package.depends.iter().chain(&over.depends);
            let wanted = wanted.chain(&package.recommends).chain(&over.recommends);
            for dep in wanted {
                if packages.iter().any(|p| p.name == dep.name && p.runtime) {
                    bail!(
                        "pkg/{}.toml: {} depends on {:?}, the container runtime, which is installed only on request",
                        package.name,
                        family.name(),
                        dep.name
                    );
                }
            }
        }
    }
    Ok(())
}

impl Spec {
    /// Reads and validates everything under `root/pkg`.
    pub fn load(root: &Path) -> Result<Spec> {
        let pkg = root.join("pkg");
        let release: Release = read_toml(&pkg.join("release.toml"))?;
        for (name, source) in &release.sources {
            Version::parse(&source.version)
                .with_context(|| format!("pkg/release.toml: [sources.{name}] version"))?;
            for arch in &source.unpublished {
                arch.parse::<Arch>()
                    .with_context(|| format!("pkg/release.toml: [sources.{name}] unpublished"))?;
            }
        }
        let families: Families = read_toml(&pkg.join("families.toml"))?;
        for (name, fam) in [("deb", &families.deb), ("rpm", &families.rpm)] {
            for arch in Arch::ALL {
                fam.arch_name(arch)
                    .with_context(|| format!("[{name}.arch]"))?;
            }
        }

        let mut packages = Vec::new();
        let mut entries: Vec<_> = std::fs::read_dir(&pkg)
            .with_context(|| format!("reading {}", pkg.display()))?
            .collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let fname = entry.file_name().to_string_lossy().into_owned();
            if !fname.ends_with(".toml") || NOT_PACKAGES.contains(&fname.as_str()) {
                continue;
            }
            let package: Package = read_toml(&path)?;
            validate_package(&package, &release, &families, root)
                .with_context(|| rel(root, &path))?;
            packages.push(package);
        }
        if packages.is_empty() {
            bail!("{}: no package descriptions (*.toml)", pkg.display());
        }
        packages.sort_by(|a, b| a.name.cmp(&b.name));
        check_dependencies_declared(&packages, &families)?;
        // One version names the runtime's sysext image.
        let mut runtime_sources: Vec<_> = packages.iter().filter(|p| p.runtime).collect();
        runtime_sources.dedup_by(|a, b| a.version_from == b.version_from);
        if let [a, b, ..] = runtime_sources.as_slice() {
            bail!(
                "{}: packages {} and {}: the runtime's packages take their version from \
                 two sources ({} and {}); its sysext image has one version",
                pkg.display(),
                a.name,
                b.name,
                a.version_from,
                b.version_from
            );
        }
        let sysext_path = pkg.join("sysext.toml");
        let sysext: Sysext = read_toml(&sysext_path)?;
        validate_sysext(&sysext, &families, root).with_context(|| rel(root, &sysext_path))?;
        let oci_path = pkg.join("oci.toml");
        let oci: Oci = read_toml(&oci_path)?;
        validate_oci(&oci, root).with_context(|| rel(root, &oci_path))?;
        let images_path = pkg.join("images.toml");
        let images: Images = read_toml(&images_path)?;
        validate_images(&images, &release).with_context(|| rel(root, &images_path))?;
        validate_window(&release, root).context("pkg/release.toml")?;
        Ok(Spec {
            root: root.to_path_buf(),
            release,
            families,
            packages,
            sysext,
            oci,
            images,
        })
    }

    pub fn source(&self, name: &str) -> &Source {
        // Every `version_from` and `upstream` was checked against the sources.
        &self.release.sources[name]
    }

    /// The version the runtime's packages take, `X.Y.Z` (its sysext
    /// image's); `None` when no package is the runtime's.
    pub fn runtime_version(&self) -> Option<&str> {
        let package = self.packages.iter().find(|p| p.runtime)?;
        Some(&self.source(&package.version_from).version)
    }

    /// The sysext images of a release of `kubernetes`, each with whether it
    /// is the runtime's and its version: the node's named with
    /// `kubernetes`, the runtime's with the runtime's (none without a
    /// runtime package).
    pub fn sysext_images<'a>(
        &'a self,
        kubernetes: &'a str,
    ) -> Vec<((&'a SysextImage, bool), &'a str)> {
        let mut out = vec![((&self.sysext.node, false), kubernetes)];
        if let Some(runtime) = self.runtime_version() {
            out.push(((&self.sysext.runtime, true), runtime));
        }
        out
    }

    /// The Kubernetes source of the release (`Spec::load` checked that
    /// there is one: pkg/images.toml names its version).
    pub fn kubernetes(&self) -> &Source {
        self.source(KUBERNETES)
    }

    /// The Kubernetes version of the release (`1.37.2`).
    pub fn kubernetes_version(&self) -> &str {
        &self.kubernetes().version
    }

    /// The package version as both formats spell it: `X.Y.Z-R`, with an
    /// upstream pre-release's `-` turned into `~` so that it sorts before the
    /// release (`1.35.0~rc.1-1` < `1.35.0-1`).
    pub fn package_version(&self, package: &Package) -> String {
        format!(
            "{}-{}",
            crate::version::package_spelling(&self.source(&package.version_from).version),
            self.release.revision
        )
    }
}

impl Spec {
    /// The spec reloaded, with `version` as the Kubernetes version
    /// (`--version`).
    pub fn with_kubernetes_version(&self, version: &str) -> Result<Spec> {
        Version::parse(version).context("--version")?;
        let mut spec = Spec::load(&self.root)?;
        spec.release.kubernetes_mut()?.version = version.to_string();
        // Another version's images, where they are known; else the pin's
        // stay, and whatever needs the images says they are not known.
        let images = older_images(&self.root, version);
        if images.is_file() {
            spec.images = Images::load(&images, &spec.release)?;
        }
        Ok(spec)
    }

    /// Why there are no images for `version`, and for which versions there
    /// are.
    pub fn images_unknown(&self, version: &str) -> String {
        let known = self
            .image_versions()
            .map_or_else(|e| format!("{e:#}"), |v| v.join(", "));
        format!(
            "which images kubeadm {version} pulls is not known here (pkg/images.toml and \
             pkg/images/ list them for {known})"
        )
    }

    /// The Kubernetes versions whose images are known: the pin's
    /// (pkg/images.toml) and one more per pkg/images/vX.Y.Z.toml, sorted.
    pub fn image_versions(&self) -> Result<Vec<String>> {
        let mut out = vec![Spec::load(&self.root)?.images.kubernetes];
        let dir = self.root.join("pkg/images");
        for entry in std::fs::read_dir(&dir).with_context(|| rel(&self.root, &dir))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            match name.strip_prefix('v').and_then(|n| n.strip_suffix(".toml")) {
                Some(v) if Version::is_valid(v) => out.push(v.to_string()),
                _ => bail!("pkg/images/{name}: not a vX.Y.Z.toml"),
            }
        }
        out.sort_by_key(|v| Version::parse(v).ok());
        out.dedup();
        Ok(out)
    }
}

/// `pkg/images/vVERSION.toml`: the images kubeadm VERSION pulls, for a
/// version other than the pin (`dist --version`).
fn older_images(root: &Path, version: &str) -> PathBuf {
    root.join("pkg/images").join(format!("v{version}.toml"))
}

/// The files of `pkg/` that describe no package.
const NOT_PACKAGES: &[&str] = &[
    "release.toml",
    "families.toml",
    "sysext.toml",
    "oci.toml",
    "images.toml",
    "source.toml",
    "source-images.toml",
];

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        // toml's message names the key and shows the line; prefix the file.
        anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end())
    })
}

fn validate_package(
    p: &Package,
    release: &Release,
    families: &Families,
    root: &Path,
) -> Result<()> {
    if !release.sources.contains_key(&p.version_from) {
        bail!(
            "version_from = {:?} names no [sources.*] entry of pkg/release.toml",
            p.version_from
        );
    }
    if !p.rpm.replaces.is_empty() {
        bail!("[rpm] replaces: rpm has no Replaces (its Obsoletes would replace the package on a plain upgrade); use conflicts");
    }
    let mut dests = std::collections::BTreeSet::new();
    for (i, f) in p.files.iter().enumerate() {
        let at = format!("files[{i}] (dest {:?})", f.dest);
        let set = [&f.upstream, &f.src, &f.build]
            .iter()
            .filter(|o| o.is_some())
            .count();
        if set != 1 {
            bail!("{at}: exactly one of `upstream`, `src`, `build` must be set");
        }
        for family in Family::ALL {
            let dest = f.dest_for(families.get(family));
            if !dest.starts_with('/') || dest.contains('{') {
                bail!("{at}: `dest` must be an absolute path ({family}: {dest:?})");
            }
            if dest.split('/').any(|c| c == ".." || c == ".") {
                bail!("{at}: `dest` must not contain . or .. components");
            }
            if f.config && !dest.starts_with("/etc/") {
                bail!("{at}: `config = true` is only for files under /etc");
            }
        }
        match f.content() {
            Content::Upstream { source, member } => {
                if !release.sources.contains_key(source) {
                    bail!(
                        "{at}: upstream = {:?} names no [sources.*] entry",
                        f.upstream
                    );
                }
                if member.is_empty() {
                    bail!("{at}: upstream must be `<source>/<file>` or `<source>/*`");
                }
                if (member == "*") != f.dest.ends_with('/') {
                    bail!("{at}: `<source>/*` goes with a `dest` ending in `/`, and only then");
                }
            }
            Content::Repo(src) => {
                if !root.join(src).is_file() {
                    bail!("{at}: src = {src:?} does not exist in the repository");
                }
            }
            Content::Build(_) => {}
        }
        if !f.completions.is_empty() {
            let binary = matches!(f.content(), Content::Upstream { member, .. } if member != "*");
            if !binary || f.mode.0 & 0o111 == 0 || f.template || f.config {
                bail!("{at}: `completions` only for one executable upstream program");
            }
            for shell in &f.completions {
                for family in Family::ALL {
                    if !families
                        .get(family)
                        .completions
                        .get(shell)
                        .is_some_and(|d| d.contains("{name}"))
                    {
                        bail!(
                            "{at}: completions: pkg/families.toml has no [{family}.completions] \
                             {shell} path with {{name}}"
                        );
                    }
                }
            }
        }
        if !dests.insert((f.dest.clone(), f.init)) {
            bail!("{at}: two files have the same dest");
        }
    }
    for d in &p.dirs {
        for family in Family::ALL {
            if families.get(family).host_dirs.contains(&d.path) {
                bail!(
                    "dirs: {} is a directory every {family} host has (host_dirs in pkg/families.toml); \
                     list only directories this package creates alone",
                    d.path
                );
            }
        }
    }
    for name in &p.xz_branch_filter {
        let arch: Arch = name
            .parse()
            .map_err(|_| anyhow::anyhow!("xz_branch_filter: {name:?} is no architecture"))?;
        BranchFilter::for_arch(arch)
            .map_err(|why| anyhow::anyhow!("xz_branch_filter: {name}: {why}"))?;
    }
    for unit in &p.systemd_units {
        if !p
            .files
            .iter()
            .any(|f| f.dest.ends_with(&format!("/{unit}")))
        {
            bail!("systemd_units: {unit:?} is not among this package's files");
        }
    }
    Ok(())
}

/// `pkg/oci.toml`: a name every registry and `podman load` accept (with a
/// registry host, so that it loads as written), files that exist.
fn validate_oci(x: &Oci, root: &Path) -> Result<()> {
    let name_ok = x.repository.contains('/')
        && x.repository.split('/').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        });
    if !name_ok {
        bail!(
            "repository = {:?}: HOST/PATH in lower-case letters, digits, '.', '_', '-'",
            x.repository
        );
    }
    if !x.scripts.iter().any(|s| s.ends_with("/entrypoint.sh")) {
        bail!("scripts: no entrypoint.sh among them");
    }
    for file in x.scripts.iter().chain(&x.examples) {
        if !root.join(file).is_file() {
            bail!("{file}: no such file in the repository");
        }
    }
    Ok(())
}

/// `pkg/images.toml`: for the pinned release; full references, each once;
/// every image pinned to an index digest or saying why not.
/// `supported` and `prerelease`: releases (the pin among them) of distinct
/// minors, newest last, at most three, and a pre-release of a minor after
/// them; each with its images known (pkg/images.toml is the pin's).
fn validate_window(release: &Release, root: &Path) -> Result<()> {
    let pin = Version::parse(&release.kubernetes()?.version)?;
    let supported = release
        .supported
        .iter()
        .map(|v| Version::parse(v).with_context(|| format!("supported: {v}")))
        .collect::<Result<Vec<_>>>()?;
    if supported.last() != Some(&pin) {
        bail!(
            "supported = {:?}: the pin, {pin}, must be its newest",
            release.supported
        );
    }
    if supported.len() > 3 {
        bail!(
            "supported = {:?}: the newest three minors, no more",
            release.supported
        );
    }
    for pair in supported.windows(2) {
        if pair[0].minor_key() >= pair[1].minor_key() {
            bail!(
                "supported = {:?}: one release per minor, oldest first",
                release.supported
            );
        }
    }
    if supported.iter().any(Version::is_prerelease) {
        bail!(
            "supported = {:?}: a pre-release goes in `prerelease`",
            release.supported
        );
    }
    let newest = supported.last().map(Version::minor_key);
    if let Some(pre) = &release.prerelease {
        let version = Version::parse(pre).context("prerelease")?;
        if !version.is_prerelease() || Some(version.minor_key()) <= newest {
            bail!("prerelease = {pre:?}: an alpha, beta or rc of a minor after {pin}");
        }
    }
    for version in release.supported.iter().chain(&release.prerelease) {
        if *version != pin.to_string() && !older_images(root, version).is_file() {
            bail!(
                "{version}: pkg/images/v{version}.toml is missing (`cargo xtask bump {version}` \
                 writes it)"
            );
        }
    }
    Ok(())
}

fn validate_images(x: &Images, release: &Release) -> Result<()> {
    let kubernetes = &release.kubernetes()?.version;
    if kubernetes != &x.kubernetes {
        bail!(
            "kubernetes = {:?}, but pkg/release.toml pins kubernetes {kubernetes}",
            x.kubernetes
        );
    }
    let mut seen = BTreeSet::new();
    for image in &x.images {
        let r = &image.reference;
        let (name, tag) = r.rsplit_once(':').unwrap_or((r, ""));
        let name_ok = name.contains('/')
            && name.split('/').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            });
        if !name_ok || tag.is_empty() || tag.contains('/') {
            bail!("reference = {r:?}: REGISTRY/PATH:TAG, the full name kubeadm uses");
        }
        if !seen.insert(r.as_str()) {
            bail!("reference = {r:?}: listed twice");
        }
        match (&image.index, &image.unrecorded) {
            (Some(index), None) => {
                let hex = index.strip_prefix("sha256:").unwrap_or("");
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    bail!("{r}: index = {index:?} is not sha256:<64 hex digits>");
                }
                if image.record.is_none() {
                    bail!("{r}: index without a record of where it was taken from");
                }
            }
            (None, Some(_)) => {}
            _ => bail!("{r}: give either index (with record) or unrecorded (the reason)"),
        }
    }
    Ok(())
}

/// `pkg/sysext.toml`: names that a host can match, every path of the image
/// under /usr (the only tree an extension merges without making the host's
/// copy read-only), every architecture named as systemd names it.
fn validate_sysext(x: &Sysext, families: &Families, root: &Path) -> Result<()> {
    SysextOs::parse(&x.os, &x.sysext_level_ids).context("os")?;
    for arch in Arch::ALL {
        let name = x.arch_name(arch)?;
        if !SYSTEMD_ARCHITECTURES.contains(&name) {
            bail!(
                "[arch] {arch} = {name:?}: not an architecture systemd knows, so no host \
                 would merge the image (x86-64, arm64, ppc64-le, s390x, ...)"
            );
        }
    }
    if x.node.name == x.runtime.name {
        bail!("[node] and [runtime]: two images named {:?}", x.node.name);
    }
    for (image, table) in [(&x.node, "node"), (&x.runtime, "runtime")] {
        validate_sysext_image(image, families.get(x.family), root)
            .with_context(|| format!("[{table}]"))?;
    }
    Ok(())
}

fn validate_sysext_image(x: &SysextImage, fam: &FamilyConf, root: &Path) -> Result<()> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !plain(&x.name) || x.name.starts_with('.') {
        bail!(
            "name = {:?}: letters, digits, '.', '_' and '-' only",
            x.name
        );
    }
    let under_usr = |p: &str| p.starts_with("/usr/") && !p.split('/').any(|c| c == "..");
    for (from, to) in &x.moves {
        if !from.starts_with('/') || !under_usr(to) || from.ends_with('/') != to.ends_with('/') {
            bail!("[move] {from:?} = {to:?}: move an absolute path to one under /usr/ (both directories ending in '/', or both files)");
        }
    }
    for (i, f) in x.files.iter().enumerate() {
        let at = format!("files[{i}] (dest {:?})", f.dest);
        let (Some(src), None, None) = (&f.src, &f.upstream, &f.build) else {
            bail!("{at}: the image's own files come from the repository (`src` only)");
        };
        if !root.join(src).is_file() {
            bail!("{at}: src = {src:?} does not exist in the repository");
        }
        if !under_usr(&f.dest_for(fam)) || f.config || f.init.is_some() || f.dest.ends_with('/') {
            bail!("{at}: an image file is a plain file under /usr/ (no config, no init)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .into()
    }

    #[test]
    fn a_branch_filter_is_taken_only_where_every_reader_decodes_it() {
        let spec = Spec::load(&repo_root()).unwrap();
        let mut kubelet: Package = read_toml(&spec.root.join("pkg/kubelet.toml")).unwrap();
        let check = |p: &Package| {
            validate_package(p, &spec.release, &spec.families, &spec.root)
                .map_err(|e| format!("{e:#}"))
        };
        for (arches, says) in [
            (vec!["amd64"], None),
            (vec!["x86_64"], None),
            (vec!["arm64"], Some("Ubuntu 22.04")),
            (vec!["ppc64le"], Some("big-endian")),
            (vec!["s390x"], Some("no branch filter for s390x")),
            (vec!["i386"], Some("\"i386\" is no architecture")),
        ] {
            kubelet.xz_branch_filter = arches.iter().map(|a| a.to_string()).collect();
            match (check(&kubelet), says) {
                (Ok(()), None) => {
                    assert_eq!(kubelet.xz_filter(Arch::Amd64), Some(BranchFilter::X86));
                    assert_eq!(kubelet.xz_filter(Arch::Arm64), None);
                }
                (Err(e), Some(says)) => assert!(e.contains(says), "{arches:?}: {e}"),
                (got, _) => panic!("{arches:?}: {got:?}"),
            }
        }
    }

    /// A worker's bundle (`dist --worker-images`) must hold every image a
    /// worker may run: kube-proxy, the pods' sandbox and CoreDNS (kubeadm's
    /// Deployment selects no node role), in every release's list.
    #[test]
    fn every_known_image_list_gives_a_worker_kube_proxy_coredns_and_pause() {
        let spec = Spec::load(&repo_root()).unwrap();
        let versions = spec.image_versions().unwrap();
        assert!(versions.len() > 1, "{versions:?}");
        for version in versions {
            let images = spec.with_kubernetes_version(&version).unwrap().images;
            let mut workers: Vec<&str> = images
                .images
                .iter()
                .filter(|i| i.worker)
                .map(Image::short_name)
                .collect();
            workers.sort_unstable();
            assert_eq!(workers, ["coredns", "kube-proxy", "pause"], "{version}");
            let names = |list: &Images| -> Vec<String> {
                list.images.iter().map(|i| i.reference.clone()).collect()
            };
            let for_workers = images.for_workers();
            assert_eq!(for_workers.kubernetes, images.kubernetes);
            assert_eq!(for_workers.images.len(), 3, "{:?}", names(&for_workers));
            assert!(names(&images).len() > 3, "{version}: {:?}", names(&images));
        }
    }

    #[test]
    fn images_are_full_references_for_the_release_each_pinned_or_saying_why_not() {
        let spec = Spec::load(&repo_root()).unwrap();
        let image = |reference: &str, index: Option<&str>, record: Option<&str>| Image {
            reference: reference.into(),
            worker: true,
            index: index.map(Into::into),
            record: record.map(Into::into),
            unrecorded: None,
        };
        let pin = Some("sha256:278fb9dbcca9518083ad1e11276933a2e96f23de604a3a08cc3c80002767d24c");
        let check = |images: Vec<Image>, kubernetes: &str| {
            validate_images(
                &Images {
                    kubernetes: kubernetes.into(),
                    images,
                },
                &spec.release,
            )
            .map_err(|e| format!("{e:#}"))
        };
        let good = image("registry.k8s.io/pause:3.10.1", pin, Some("a record"));
        assert!(check(vec![good.clone()], &spec.images.kubernetes).is_ok());
        for (images, kubernetes, says) in [
            (
                vec![good.clone()],
                "1.0.0",
                "pkg/release.toml pins kubernetes",
            ),
            (
                vec![image("pause:3.10.1", pin, Some("r"))],
                "",
                "REGISTRY/PATH:TAG",
            ),
            (
                vec![image("registry.k8s.io/pause", pin, Some("r"))],
                "",
                "REGISTRY/PATH:TAG",
            ),
            (vec![good.clone(), good.clone()], "", "listed twice"),
            (
                vec![image(
                    "registry.k8s.io/pause:3.10.1",
                    Some("sha256:abc"),
                    Some("r"),
                )],
                "",
                "64 hex",
            ),
            (
                vec![image("registry.k8s.io/pause:3.10.1", pin, None)],
                "",
                "without a record",
            ),
            (
                vec![image("registry.k8s.io/pause:3.10.1", None, None)],
                "",
                "either index",
            ),
        ] {
            let kubernetes = if kubernetes.is_empty() {
                spec.images.kubernetes.as_str()
            } else {
                kubernetes
            };
            let err = check(images, kubernetes).unwrap_err();
            assert!(err.contains(says), "{says}: {err}");
        }
    }

    #[test]
    fn the_repository_spec_loads() {
        let spec = Spec::load(&repo_root()).unwrap();
        let names: Vec<_> = spec.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cri-tools",
                "kubeadm",
                "kubectl",
                "kubedist-containerd",
                "kubelet",
                "kubernetes-cni"
            ]
        );
        let runtime: Vec<_> = spec
            .packages
            .iter()
            .filter(|p| p.runtime)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(runtime, ["kubedist-containerd"]);
    }

    #[test]
    fn the_supported_window_is_three_minors_the_pin_newest_and_a_later_pre_release() {
        let spec = Spec::load(&repo_root()).unwrap();
        let refused = |supported: &[&str], prerelease: Option<&str>| {
            let mut release = Release {
                revision: spec.release.revision,
                supported: supported.iter().map(|v| v.to_string()).collect(),
                prerelease: prerelease.map(str::to_string),
                sources: spec.release.sources.clone(),
            };
            release.sources.get_mut(KUBERNETES).unwrap().version = "1.37.2".into();
            validate_window(&release, &repo_root())
                .err()
                .map(|e| format!("{e:#}"))
        };
        assert_eq!(refused(&["1.35.4", "1.36.3", "1.37.2"], None), None);
        let cases: [(&[&str], Option<&str>, &str); 6] = [
            (&["1.36.3"], None, "the pin, 1.37.2, must be its newest"),
            (
                &["1.37.2", "1.36.3"],
                None,
                "the pin, 1.37.2, must be its newest",
            ),
            (&["1.34.2", "1.35.4", "1.36.3", "1.37.2"], None, "no more"),
            (
                &["1.36.1", "1.36.3", "1.37.2"],
                None,
                "one release per minor",
            ),
            (
                &["1.37.2"],
                Some("1.37.3-rc.0"),
                "an alpha, beta or rc of a minor after",
            ),
            (
                &["1.33.6", "1.37.2"],
                None,
                "pkg/images/v1.33.6.toml is missing",
            ),
        ];
        for (supported, prerelease, says) in cases {
            let err = refused(supported, prerelease).unwrap_or_default();
            assert!(err.contains(says), "{supported:?} {prerelease:?}: {err:?}");
        }
    }

    #[test]
    fn nothing_depends_on_the_runtime() {
        let mut spec = Spec::load(&repo_root()).unwrap();
        let kubelet = spec
            .packages
            .iter_mut()
            .find(|p| p.name == "kubelet")
            .unwrap();
        kubelet
            .rpm
            .recommends
            .push("kubedist-containerd".parse().unwrap());
        let err = check_dependencies_declared(&spec.packages, &spec.families)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the container runtime, which is installed only on request"),
            "{err}"
        );
    }

    #[test]
    fn the_runtime_takes_one_version_and_its_image_a_name_of_its_own() {
        // A second runtime package whose version is runc's: the runtime's
        // sysext image could not be named.
        let dir = broken_root(
            "kubedist-runc.toml",
            "name = \"kubedist-runc\"\nversion_from = \"runc\"\nsummary = \"s\"\ndescription = \"d\"\nruntime = true\n\n[[files]]\nupstream = \"runc/runc.{arch}\"\ndest = \"/usr/libexec/runc\"\nmode = \"0755\"\n",
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("packages kubedist-containerd and kubedist-runc")
                && err.contains("two sources (containerd and runc)"),
            "{err}"
        );
        let real = std::fs::read_to_string(repo_root().join("pkg/sysext.toml")).unwrap();
        let dir = broken_root(
            "sysext.toml",
            &real.replace("name = \"kubedist-containerd\"", "name = \"kubernetes\""),
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("sysext.toml") && err.contains("two images named \"kubernetes\""),
            "{err}"
        );
        let spec = Spec::load(&repo_root()).unwrap();
        assert_eq!(
            spec.runtime_version(),
            Some(spec.source("containerd").version.as_str())
        );
    }

    #[test]
    fn replaces_is_for_debs_only() {
        let text = |table: &str| {
            format!(
                "name = \"x\"\nversion_from = \"kubernetes\"\nsummary = \"s\"\ndescription = \"d\"\n[{table}]\nreplaces = [\"y\"]\n"
            )
        };
        let spec = Spec::load(&repo_root()).unwrap();
        for (table, ok) in [("deb", true), ("rpm", false)] {
            let p: Package = toml::from_str(&text(table)).unwrap();
            let r = validate_package(&p, &spec.release, &spec.families, &repo_root());
            assert_eq!(r.is_ok(), ok, "{table}: {r:?}");
        }
    }

    #[test]
    fn dependencies_render_per_format() {
        let d: Dep = "iptables >= 1.4.21".parse().unwrap();
        assert_eq!(d.deb(), "iptables (>= 1.4.21)");
        assert_eq!(d.rpm(), "iptables >= 1.4.21");
        let d: Dep = "foo < 2".parse().unwrap();
        assert_eq!(d.deb(), "foo (<< 2)");
        assert!("iptables >=".parse::<Dep>().is_err());
        assert!("ip tables".parse::<Dep>().is_err());
    }

    #[test]
    fn pre_releases_sort_before_releases() {
        let mut spec = Spec::load(&repo_root()).unwrap();
        spec.release.sources.get_mut("kubernetes").unwrap().version = "1.35.0-rc.1".into();
        let kubelet = spec.packages.iter().find(|p| p.name == "kubelet").unwrap();
        assert_eq!(
            spec.package_version(kubelet),
            format!("1.35.0~rc.1-{}", spec.release.revision)
        );
    }

    /// A copy of pkg/ with one file replaced, for the error tests.
    fn broken_root(file: &str, content: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        for e in std::fs::read_dir(repo_root().join("pkg")).unwrap() {
            let e = e.unwrap();
            if e.path().extension().is_some_and(|x| x == "toml") {
                std::fs::copy(e.path(), pkg.join(e.file_name())).unwrap();
            }
        }
        for shared in ["units", "env-defaults", "installer"] {
            std::os::unix::fs::symlink(repo_root().join(shared), dir.path().join(shared)).unwrap();
        }
        std::fs::write(pkg.join(file), content).unwrap();
        dir
    }

    #[test]
    fn malformed_package_names_file_and_key() {
        let dir = broken_root(
            "kubectl.toml",
            "name = \"kubectl\"\nversion_from = \"kubernetes\"\nsummary = \"s\"\ndescription = \"d\"\n\n[[files]]\nupstream = \"kubernetes/kubectl\"\ndest = \"/usr/bin/kubectl\"\nmode = \"755\"\n",
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(err.contains("kubectl.toml"), "{err}");
        assert!(err.contains("mode"), "{err}");
        assert!(err.contains("line 9"), "{err}");

        let dir = broken_root(
            "kubectl.toml",
            "name = \"kubectl\"\nversion_from = \"kubernetes\"\nsumary = \"s\"\ndescription = \"d\"\n",
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("kubectl.toml") && err.contains("sumary"),
            "{err}"
        );
    }

    #[test]
    fn an_undeclared_distribution_dependency_is_named() {
        let toml = std::fs::read_to_string(repo_root().join("pkg/families.toml")).unwrap();
        let without = toml.replacen("\"conntrack-tools\", ", "", 1);
        assert_ne!(toml, without);
        let dir = broken_root("families.toml", &without);
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert_eq!(
            err,
            "pkg/kubeadm.toml: rpm depends on \"conntrack-tools\", which is none of our packages and not in pkg/families.toml's [rpm] distribution list"
        );
    }

    #[test]
    fn completions_only_for_an_upstream_program_and_known_shell_paths() {
        let toml = std::fs::read_to_string(repo_root().join("pkg/kubelet.toml")).unwrap();
        let on_unit = toml.replacen(
            "dest = \"{unitdir}/kubelet.service\"\n",
            "dest = \"{unitdir}/kubelet.service\"\ncompletions = [\"bash\"]\n",
            1,
        );
        assert_ne!(on_unit, toml);
        let dir = broken_root("kubelet.toml", &on_unit);
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("kubelet.toml") && err.contains("`completions` only for"),
            "{err}"
        );
        let unknown = toml.replacen(
            "dest = \"/usr/bin/kubelet\"\nmode = \"0755\"\n",
            "dest = \"/usr/bin/kubelet\"\nmode = \"0755\"\ncompletions = [\"tcsh\"]\n",
            1,
        );
        assert_ne!(unknown, toml);
        let dir = broken_root("kubelet.toml", &unknown);
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(err.contains("tcsh"), "{err}");
    }

    #[test]
    fn a_host_directory_is_no_package_directory() {
        let toml = std::fs::read_to_string(repo_root().join("pkg/kubernetes-cni.toml")).unwrap();
        let dir = broken_root(
            "kubernetes-cni.toml",
            &format!("{toml}\n[[dirs]]\npath = \"/opt\"\nmode = \"0755\"\n"),
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("kubernetes-cni.toml")
                && err.contains("/opt is a directory every deb host has"),
            "{err}"
        );
    }

    #[test]
    fn a_sysext_architecture_no_host_has_is_refused() {
        let real = std::fs::read_to_string(repo_root().join("pkg/sysext.toml")).unwrap();
        assert!(real.contains("amd64 = \"x86-64\""));
        let dir = broken_root(
            "sysext.toml",
            &real.replace("amd64 = \"x86-64\"", "amd64 = \"x86_64\""),
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("sysext.toml")
                && err.contains("\"x86_64\": not an architecture systemd knows"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");

        let dir = broken_root(
            "sysext.toml",
            &real.replace("os = \"_any\"", "os = \"Flatcar\""),
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("sysext.toml") && err.contains("Flatcar"),
            "{err}"
        );
    }

    #[test]
    fn unknown_source_is_named() {
        let dir = broken_root(
            "kubectl.toml",
            "name = \"kubectl\"\nversion_from = \"kubernetes\"\nsummary = \"s\"\ndescription = \"d\"\n\n[[files]]\nupstream = \"kubernets/kubectl\"\ndest = \"/usr/bin/kubectl\"\nmode = \"0755\"\n",
        );
        let err = format!("{:#}", Spec::load(dir.path()).unwrap_err());
        assert!(
            err.contains("kubectl.toml") && err.contains("kubernets"),
            "{err}"
        );
    }
}
