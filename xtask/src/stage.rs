//! Staging: one tree per (package, family) with every file at its resolved
//! destination, its content final (templates filled in), its mode explicit
//! and its mtime fixed, plus everything else an artifact holds (maintainer
//! scripts, the licence, the tarball's installer). Stage is the only reader
//! of `pkg/`, `units/`, `env-defaults/`, `installer/` and `LICENSE`; the
//! emitters build every format from what it returns and nothing else, so the
//! formats cannot drift apart.
//!
//! Layout: `<work>/<arch>/<family>/<package>/<init>/<dest>`, where `<init>`
//! is `any`, `systemd`, `openrc` or `runit`: a package may ship one dest for
//! two init systems, and the tarball carries both. The sysext image's own
//! files (`pkg/sysext.toml`) go to `<work>/<arch>/sysext/<dest>`.

pub mod images;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

use crate::digest::{copy_hashing, sha256_bytes};
use serde::Serialize;

use crate::spec::{
    Arch, ConfigStyle, Content, Dep, Family, FileEntry, Init, Package, ScriptNeed, Shell, Spec,
    SysextImage, SysextOs,
};

/// Where the programs a package holds come from, for one architecture: the
/// upstream files, the static builds and how to run them here.
pub trait Programs {
    /// `(file name, path)` for `upstream = "<source>/<member>"`.
    fn upstream(&self, source: &str, member: &str) -> Result<Vec<(String, PathBuf)>>;
    /// The binary built for `build = "<name>"`.
    fn built(&self, name: &str) -> Result<PathBuf>;
    /// Whether `<source>/<name>` is a recorder stand-in, not the real program.
    fn is_standin(&self, source: &str, name: &str) -> bool;
    /// What built `source` from its Go module (`source version toolchain`),
    /// when it was built from source.
    fn built_from_source(&self, source: &str) -> Option<String> {
        let _ = source;
        None
    }
    /// How to run the program `<source>/<member>` on this host to have it
    /// write its completions: the command line before its own arguments
    /// (the host architecture's build of the same version when the run
    /// builds that architecture too or kubedist's source cache holds it,
    /// else this architecture's binary under qemu-user), or why it cannot
    /// run here.
    fn runnable(&self, source: &str, member: &str) -> std::result::Result<Vec<PathBuf>, String> {
        let _ = (source, member);
        Err("no program can run for this build".into())
    }
}

/// A package staged for one family and architecture. Serialised (without
/// the scratch paths) it is the artifact cache's description of the package:
/// every field is part of what an emitter writes.
#[derive(Debug, Serialize)]
pub struct Staged {
    pub name: String,
    pub family: Family,
    pub arch: Arch,
    /// This family's name of the architecture (`amd64`, `x86_64`, ...).
    pub arch_name: String,
    /// How this family ships `config = true` files (pkg/families.toml).
    pub config_style: ConfigStyle,
    /// Where this family's vendor systemd units go.
    pub unitdir: String,
    /// Directories every host of the family has: no package lists them.
    pub host_dirs: Vec<String>,
    /// Upstream version with `-` turned into `~` (rpm's Version).
    pub upstream_version: String,
    /// Package revision (rpm's Release).
    pub revision: u32,
    /// `X.Y.Z-R`, as both formats spell it.
    pub version: String,
    /// The `[sources.*]` entry the version comes from, its `base` URL and
    /// copyright notice.
    pub version_from: String,
    pub upstream_url: String,
    pub copyright: String,
    /// `(dest, copyright)` of the files from other sources (runc beside
    /// containerd).
    pub other_copyrights: Vec<(String, String)>,
    pub summary: String,
    /// The package's description, plus the stand-in paragraph of test builds.
    pub description: String,
    /// Both families' dependencies plus this family's own.
    pub depends: Vec<Dep>,
    pub recommends: Vec<Dep>,
    /// Part of the container runtime (spec's `runtime`).
    pub runtime: bool,
    pub provides: Vec<Dep>,
    pub conflicts: Vec<Dep>,
    /// deb only (spec's `[deb] replaces`).
    pub replaces: Vec<Dep>,
    pub systemd_units: Vec<String>,
    /// Sorted by (dest, init).
    pub files: Vec<StagedFile>,
    /// Sorted by path.
    pub dirs: Vec<StagedDir>,
    /// The shell completion directories the package's completion files are
    /// in, with their parents up to a host directory (sorted). They belong
    /// to the shells' packages, which may be absent: an rpm owns them too,
    /// or erasing it would leave them behind (dpkg tracks directories by
    /// itself).
    pub completion_dirs: Vec<String>,
    /// Maintainer scripts, rendered from `pkg/scripts/<family>-<name>`
    /// (deb: postinst, postrm, prerm; rpm: post, postun, preun).
    pub scripts: Vec<Script>,
    /// The project's LICENSE (rpm's `%license`).
    pub license: String,
    /// The branch filter of this package's xz streams on its architecture
    /// (the package's `xz_branch_filter`).
    pub xz_filter: Option<crate::spec::BranchFilter>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Script {
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StagedFile {
    /// Absolute path on the host.
    pub dest: String,
    /// Where the staged content is (scratch: not part of the description).
    #[serde(skip)]
    pub path: PathBuf,
    pub mode: u32,
    /// Admin-editable (`config = true`).
    pub config: bool,
    pub init: Option<Init>,
    pub sha256: String,
    pub size: u64,
}

impl StagedFile {
    /// Whether deb and rpm packages carry this file (the tarball carries all).
    pub fn in_packages(&self) -> bool {
        matches!(self.init, None | Some(Init::Systemd))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedDir {
    pub path: String,
    pub mode: u32,
}

impl Staged {
    /// The files deb and rpm packages carry.
    pub fn package_files(&self) -> impl Iterator<Item = &StagedFile> {
        self.files.iter().filter(|f| f.in_packages())
    }

    /// The `config = true` files a deb ships as seeds (`path:mode` words of
    /// the maintainer scripts): empty unless the family's style is `seed`.
    pub fn seeds(&self) -> Vec<&StagedFile> {
        if self.config_style != ConfigStyle::Seed {
            return Vec::new();
        }
        self.package_files().filter(|f| f.config).collect()
    }
}

/// One package staged for each family dist writes: the deb staging feeds
/// .debs and the tarball's deb half, the rpm staging .rpms and its rpm half.
#[derive(Debug, Serialize)]
pub struct StagedPackage {
    pub deb: Option<Staged>,
    pub rpm: Option<Staged>,
}

impl StagedPackage {
    pub fn all(&self) -> impl Iterator<Item = &Staged> {
        self.deb.iter().chain(&self.rpm)
    }
}

/// Everything one architecture's artifacts are made of.
#[derive(Debug, Serialize)]
pub struct StagedArch {
    pub arch: Arch,
    pub packages: Vec<StagedPackage>,
    /// installer/install.sh, for the tarball.
    pub installer: Vec<u8>,
    /// What each sysext image adds to the packages, when dist writes them.
    pub sysext: Vec<StagedSysext>,
    /// The installer image's shell for this architecture, when dist writes
    /// the image.
    pub oci_base: Option<StagedOciBase>,
    /// The images kubeadm pulls, this architecture's, when dist bundles
    /// them.
    pub images: Option<Vec<images::StagedImage>>,
}

/// The installer image's own part (`pkg/oci.toml`), the same for every
/// architecture.
#[derive(Debug, Serialize)]
pub struct StagedOci {
    /// `<repository>:<tag>` is the image's name.
    pub repository: String,
    /// `X.Y.Z-R`, the packages' version as a tag spells it (no `~`).
    pub tag: String,
    /// `(file name, text)` of each script of `/kubedist/`.
    pub scripts: Vec<(String, String)>,
    /// `(file name, text)` of each run example, the image's name filled in.
    pub examples: Vec<(String, String)>,
}

/// The shell of the installer image for one architecture: a Debian
/// package's static binary and its copyright file.
#[derive(Debug, Serialize)]
pub struct StagedOciBase {
    pub package: String,
    /// The Debian version of the package.
    pub version: String,
    pub licence: String,
    pub source: String,
    pub binary: StagedFile,
    pub copyright: StagedFile,
}

/// A sysext image's own part (`pkg/sysext.toml`): how it lays out the
/// packages' staging and the files only it has.
#[derive(Debug, Serialize)]
pub struct StagedSysext {
    /// `extension-release.<name>`, `<name>-v<upstream_version>-<arch>.raw`.
    pub name: String,
    /// Made of the runtime's packages, else of every other.
    pub runtime: bool,
    /// Whose package staging the image is made of.
    pub family: Family,
    /// Which hosts may merge it.
    pub os: SysextOs,
    /// systemd's name of the architecture (`x86-64`).
    pub arch_name: String,
    /// Its packages' upstream version, `X.Y.Z` (Kubernetes' for the node's
    /// image, containerd's for the runtime's).
    pub upstream_version: String,
    /// `SYSEXT_VERSION_ID`: its packages' version, `X.Y.Z-R`.
    pub version: String,
    /// `(package path prefix, where the image puts it instead)`.
    pub moves: Vec<(String, String)>,
    /// Sorted by dest.
    pub files: Vec<StagedFile>,
}

impl StagedSysext {
    /// Where the image puts a package's `dest`.
    pub fn image_path(&self, dest: &str) -> String {
        for (from, to) in &self.moves {
            if let Some(rest) = dest.strip_prefix(from.as_str()) {
                return format!("{to}{rest}");
            }
        }
        dest.to_string()
    }
}

/// Stages a sysext image's own files for `arch` under `work`, and the
/// settings it is written with. `os` is `pkg/sysext.toml`'s `os` or dist's
/// `--sysext-os`, already read; `upstream_version` its packages' `X.Y.Z`.
pub fn stage_sysext(
    spec: &Spec,
    (x, runtime): (&SysextImage, bool),
    arch: Arch,
    os: &SysextOs,
    upstream_version: &str,
    epoch: u64,
    work: &Path,
) -> Result<StagedSysext> {
    let family = spec.sysext.family;
    let version = format!("{upstream_version}-{}", spec.release.revision);
    let fam = spec.families.get(family);
    let root = work.join(arch.go_name()).join("sysext").join(&x.name);
    let mut files = Vec::new();
    for entry in &x.files {
        let Content::Repo(src) = entry.content() else {
            bail!("pkg/sysext.toml: {}: only `src` files", entry.dest);
        };
        let source = spec.root.join(src);
        let dest = entry.dest_for(fam);
        check_path(&dest).with_context(|| format!("pkg/sysext.toml: file {dest}"))?;
        let staged = root.join(dest.trim_start_matches('/'));
        let (sha256, size) = if entry.template {
            let text = fs::read_to_string(&source)
                .with_context(|| format!("{}: not a UTF-8 text file", source.display()))?;
            let text = fill_template(&source, &text, &fam.env_file, family, &version)?;
            write_file(&staged, text.as_bytes(), entry.mode.0, epoch)?
        } else {
            copy_file(&source, &staged, entry.mode.0, epoch)?
        };
        files.push(StagedFile {
            dest,
            path: staged,
            mode: entry.mode.0,
            config: false,
            init: None,
            sha256,
            size,
        });
    }
    files.sort_by(|a, b| a.dest.cmp(&b.dest));
    // The longest prefix first: the most specific move wins.
    let mut moves: Vec<(String, String)> = x
        .moves
        .iter()
        .map(|(a, b)| (a.clone(), b.clone()))
        .collect();
    moves.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    Ok(StagedSysext {
        name: x.name.clone(),
        runtime,
        family,
        os: os.clone(),
        arch_name: spec.sysext.arch_name(arch)?.to_string(),
        upstream_version: upstream_version.to_string(),
        version,
        moves,
        files,
    })
}

/// The installer image's entrypoint and run examples (`pkg/oci.toml`) for
/// the release `tag`.
pub fn stage_oci(spec: &Spec, tag: &str) -> Result<StagedOci> {
    let x = &spec.oci;
    let read = |rel: &str| read_text(&spec.root.join(rel));
    let image = format!("{}:{tag}", x.repository);
    let base_name = |rel: &str| -> Result<String> {
        Ok(Path::new(rel)
            .file_name()
            .with_context(|| format!("pkg/oci.toml: {rel}: no file name"))?
            .to_string_lossy()
            .into_owned())
    };
    let mut scripts = Vec::new();
    for rel in &x.scripts {
        scripts.push((base_name(rel)?, read(rel)?));
    }
    let mut examples = Vec::new();
    for rel in &x.examples {
        let base = base_name(rel)?;
        let text = fill(
            &spec.root.join(rel),
            &read(rel)?,
            &[
                ("IMAGE", &image),
                ("REPOSITORY", &x.repository),
                ("TAG", tag),
            ],
        )?;
        examples.push((format!("kubedist-installer-{tag}-{base}"), text));
    }
    Ok(StagedOci {
        repository: x.repository.clone(),
        tag: tag.to_string(),
        scripts,
        examples,
    })
}

/// The installer image's shell for `arch`, from the Debian package of
/// `pkg/oci.toml` (`version`, and the two files taken out of it).
pub fn stage_oci_base(
    spec: &Spec,
    arch: Arch,
    version: &str,
    binary: &[u8],
    copyright: &[u8],
    epoch: u64,
    work: &Path,
) -> Result<StagedOciBase> {
    let base = &spec.oci.base;
    let root = work.join(arch.go_name()).join("oci");
    let file = |dest: &str, data: &[u8], mode: u32| -> Result<StagedFile> {
        let path = root.join(dest);
        let (sha256, size) = write_file(&path, data, mode, epoch)?;
        Ok(StagedFile {
            dest: format!("/{dest}"),
            path,
            mode,
            config: false,
            init: None,
            sha256,
            size,
        })
    };
    Ok(StagedOciBase {
        package: base.package.clone(),
        version: version.to_string(),
        licence: base.licence.clone(),
        source: base.source.clone(),
        binary: file(&base.binary, binary, 0o755)?,
        copyright: file(&base.copyright, copyright, 0o644)?,
    })
}

/// installer/install.sh with its placeholders filled in: the family facts
/// of pkg/families.toml (env files, the `[detect]` markers), the container
/// runtime's packages and what they conflict with, and
/// pkg/scripts/kernel-apply, which the kubelet package's scripts take too.
pub fn installer(spec: &Spec) -> Result<Vec<u8>> {
    let path = spec.root.join("installer/install.sh");
    let kernel_apply = read_text(&spec.root.join("pkg/scripts/kernel-apply"))?;
    let families = &spec.families;
    let release = format!("{}-{}", spec.kubernetes_version(), spec.release.revision);
    // Sorted, each once, one line of words.
    let words = |names: BTreeSet<&str>| names.into_iter().collect::<Vec<_>>().join(" ");
    let runtime = || spec.packages.iter().filter(|p| p.runtime);
    let runtime_packages = words(runtime().map(|p| p.name.as_str()).collect());
    let runtime_conflicts = words(
        runtime()
            .flat_map(|p| &p.conflicts)
            .map(|d| d.name.as_str())
            .collect(),
    );
    let values = [
        ("RELEASE", release.as_str()),
        ("DEB_ENV_FILE", families.deb.env_file.as_str()),
        ("RPM_ENV_FILE", &families.rpm.env_file),
        ("DEB_MARKER", &families.detect.deb_marker),
        ("RPM_MARKER_DIR", &families.detect.rpm_marker_dir),
        ("RUNTIME_PACKAGES", &runtime_packages),
        ("RUNTIME_CONFLICTS", &runtime_conflicts),
        // On a line of its own: the function's closing line ends it.
        ("KERNEL_APPLY", kernel_apply.trim_end_matches('\n')),
    ];
    Ok(fill(&path, &read_text(&path)?, &values)?.into_bytes())
}

/// Stages `package` for each of `families` under `work`. The families'
/// trees share (hard-link) identical content instead of copying it twice.
pub fn stage_package(
    spec: &Spec,
    package: &Package,
    arch: Arch,
    families: &[Family],
    programs: &dyn Programs,
    epoch: u64,
    work: &Path,
) -> Result<StagedPackage> {
    let mut shared = Shared::default();
    let mut completions = Completions::new();
    let license = {
        let path = spec.root.join("LICENSE");
        fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?
    };
    let mut staged = StagedPackage {
        deb: None,
        rpm: None,
    };
    for &family in families {
        let one = stage_one(
            spec,
            package,
            arch,
            family,
            programs,
            epoch,
            work,
            &mut shared,
            &mut completions,
            &license,
        )
        .with_context(|| format!("staging {} ({family}, {arch})", package.name))?;
        match family {
            Family::Deb => staged.deb = Some(one),
            Family::Rpm => staged.rpm = Some(one),
        }
    }
    Ok(staged)
}

/// Staged content already written, by (source path, mode): identical
/// non-template content is linked, not copied again.
#[derive(Default)]
struct Shared(BTreeMap<(PathBuf, u32), (PathBuf, String, u64)>);

impl Shared {
    /// `source` staged at `staged` with `mode`: a link to its first staged
    /// copy, or that copy. Returns its sha256 and size.
    fn stage(
        &mut self,
        source: &Path,
        mode: u32,
        staged: &Path,
        epoch: u64,
    ) -> Result<(String, u64)> {
        let key = (source.to_path_buf(), mode);
        if let Some((first, sha, size)) = self.0.get(&key) {
            link_file(first, staged)?;
            return Ok((sha.clone(), *size));
        }
        let (sha, size) = copy_file(source, staged, mode, epoch)?;
        self.0
            .insert(key, (staged.to_path_buf(), sha.clone(), size));
        Ok((sha, size))
    }
}

#[allow(clippy::too_many_arguments)]
fn stage_one(
    spec: &Spec,
    package: &Package,
    arch: Arch,
    family: Family,
    programs: &dyn Programs,
    epoch: u64,
    work: &Path,
    shared: &mut Shared,
    completions: &mut Completions,
    license: &str,
) -> Result<Staged> {
    let fam = spec.families.get(family);
    let version = spec.package_version(package);
    let root = work
        .join(arch.go_name())
        .join(family.name())
        .join(&package.name);
    let mut files = Vec::new();
    let mut standins = Vec::new();
    let mut completed = Completed::default();
    let mut other_copyrights = Vec::new();
    for entry in &package.files {
        let init_dir = root.join(entry.init.map_or("any", Init::name));
        let other_source = match entry.content() {
            Content::Upstream { source, .. } if source != package.version_from => Some(source),
            _ => None,
        };
        for (dest, source, standin) in contents(spec, entry, &entry.dest_for(fam), programs)? {
            if let Some(other) = other_source {
                other_copyrights.push((dest.clone(), spec.source(other).copyright.clone()));
            }
            check_path(&dest).with_context(|| format!("file {dest}"))?;
            let staged = init_dir.join(dest.trim_start_matches('/'));
            let (sha256, size) = if entry.template {
                let text = fs::read_to_string(&source)
                    .with_context(|| format!("{}: not a UTF-8 text file", source.display()))?;
                let text = fill_template(&source, &text, &fam.env_file, family, &version)?;
                write_file(&staged, text.as_bytes(), entry.mode.0, epoch)?
            } else {
                shared.stage(&source, entry.mode.0, &staged, epoch)?
            };
            if standin {
                standins.push(dest.clone());
            }
            files.push(StagedFile {
                dest,
                path: staged,
                mode: entry.mode.0,
                config: entry.config,
                init: entry.init,
                sha256,
                size,
            });
        }
        completed.stage(entry, fam, programs, completions, &root.join("any"), epoch)?;
    }
    files.append(&mut completed.files);
    files.sort_by(|a, b| (&a.dest, a.init).cmp(&(&b.dest, b.init)));
    if let Some(w) = files
        .windows(2)
        .find(|w| w[0].dest == w[1].dest && w[0].in_packages() && w[1].in_packages())
    {
        bail!("two files of the package have the dest {}", w[0].dest);
    }

    let dirs = stage_dirs(package, &root.join("any"), epoch)?;

    let over = match family {
        Family::Deb => &package.deb,
        Family::Rpm => &package.rpm,
    };
    standins.sort();
    let mut staged = Staged {
        name: package.name.clone(),
        family,
        arch,
        arch_name: fam.arch_name(arch)?.to_string(),
        config_style: fam.config,
        unitdir: fam.unitdir.clone(),
        host_dirs: fam.host_dirs.clone(),
        upstream_version: crate::version::package_spelling(
            &spec.source(&package.version_from).version,
        ),
        revision: spec.release.revision,
        version,
        version_from: package.version_from.clone(),
        upstream_url: spec.source(&package.version_from).base.clone(),
        copyright: spec.source(&package.version_from).copyright.clone(),
        other_copyrights,
        summary: package.summary.clone(),
        description: describe(
            package,
            &standins,
            &completed.missing,
            programs.built_from_source(&package.version_from).as_deref(),
        ),
        depends: package
            .depends
            .iter()
            .chain(&over.depends)
            .cloned()
            .collect(),
        recommends: package
            .recommends
            .iter()
            .chain(&over.recommends)
            .cloned()
            .collect(),
        runtime: package.runtime,
        provides: package.provides.clone(),
        conflicts: package.conflicts.clone(),
        replaces: over.replaces.clone(),
        systemd_units: package.systemd_units.clone(),
        files,
        dirs,
        completion_dirs: completed.dirs.into_iter().collect(),
        scripts: Vec::new(),
        license: license.to_string(),
        xz_filter: package.xz_filter(arch),
    };
    staged.scripts = scripts(spec, &staged)?;
    Ok(staged)
}

/// The directories `package` owns, created under `any` with their modes.
fn stage_dirs(package: &Package, any: &Path, epoch: u64) -> Result<Vec<StagedDir>> {
    let mut dirs = Vec::new();
    for d in &package.dirs {
        check_path(&d.path).with_context(|| format!("dir {}", d.path))?;
        let staged = any.join(d.path.trim_start_matches('/'));
        fs::create_dir_all(&staged).with_context(|| format!("creating {}", staged.display()))?;
        set_mode_and_time(&staged, d.mode.0, epoch)?;
        dirs.push(StagedDir {
            path: d.path.clone(),
            mode: d.mode.0,
        });
    }
    dirs.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(dirs)
}

/// The shell completions a package's programs wrote.
#[derive(Default)]
struct Completed {
    files: Vec<StagedFile>,
    /// The directories they need that no host has.
    dirs: std::collections::BTreeSet<String>,
    /// `shell: why` of each completion a program could not write.
    missing: Vec<String>,
}

impl Completed {
    /// Stages the completions of `entry`'s program (an upstream file with
    /// `completions`) under `any`.
    fn stage(
        &mut self,
        entry: &crate::spec::FileEntry,
        fam: &crate::spec::FamilyConf,
        programs: &dyn Programs,
        completions: &mut Completions,
        any: &Path,
        epoch: u64,
    ) -> Result<()> {
        let (false, Content::Upstream { source, member }) =
            (entry.completions.is_empty(), entry.content())
        else {
            return Ok(());
        };
        let dest = entry.dest_for(fam);
        let command = dest.rsplit('/').next().unwrap_or(&dest).to_string();
        for &shell in &entry.completions {
            let text = match completions.get(programs, source, member, &command, shell)? {
                Ok(text) => text,
                Err(why) => {
                    self.missing.push(format!("{shell}: {why}"));
                    continue;
                }
            };
            let dest = fam.completions[&shell].replace("{name}", &command);
            check_path(&dest).with_context(|| format!("completion file {dest}"))?;
            let staged = any.join(dest.trim_start_matches('/'));
            let (sha256, size) = write_file(&staged, text, 0o644, epoch)?;
            let mut dir = Path::new(&dest).parent();
            while let Some(d) = dir.and_then(Path::to_str) {
                if d == "/" || fam.host_dirs.iter().any(|h| h == d) {
                    break;
                }
                self.dirs.insert(d.to_string());
                dir = Path::new(d).parent();
            }
            self.files.push(StagedFile {
                dest,
                path: staged,
                mode: 0o644,
                config: false,
                init: None,
                sha256,
                size,
            });
        }
        Ok(())
    }
}

/// The maintainer scripts of `pkg`, each `pkg/scripts/<family>-<name>` with
/// its `@NAME@` values filled in. Which scripts a package gets is its
/// family's convention, `[<family>.scripts]` in pkg/families.toml: each
/// script with what a package must have, any of, to get it.
fn scripts(spec: &Spec, pkg: &Staged) -> Result<Vec<Script>> {
    let under_unitdir = pkg.package_files().any(|f| {
        f.dest
            .starts_with(&format!("{}/", pkg.unitdir.trim_end_matches('/')))
    });
    let has = |need: ScriptNeed| match need {
        ScriptNeed::Dirs => !pkg.dirs.is_empty(),
        ScriptNeed::Seeds => !pkg.seeds().is_empty(),
        ScriptNeed::Units => !pkg.systemd_units.is_empty(),
        ScriptNeed::UnitFiles => under_unitdir,
    };
    let names: Vec<&String> = spec
        .families
        .get(pkg.family)
        .scripts
        .iter()
        .filter(|(_, needs)| needs.iter().any(|&need| has(need)))
        .map(|(name, _)| name)
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let dirs = pkg
        .dirs
        .iter()
        .map(|d| format!("{}:{:04o}", d.path, d.mode))
        .collect::<Vec<_>>()
        .join(" ");
    let seeds = pkg
        .seeds()
        .iter()
        .map(|f| format!("{}:{:04o}", f.dest, f.mode))
        .collect::<Vec<_>>()
        .join(" ");
    let units = pkg.systemd_units.join(" ");
    // The runtime's units start on install (the kubelet's wait for kubeadm).
    let start = if pkg.runtime {
        units.clone()
    } else {
        String::new()
    };
    let reload = if under_unitdir { "yes" } else { "no" };
    // The kernel prerequisites the package ships, applied at once on a
    // running host by pkg/scripts/kernel-apply (included only then).
    let shipped = |dir: &str| {
        pkg.package_files()
            .find(|f| f.dest.starts_with(dir))
            .map_or(String::new(), |f| f.dest.clone())
    };
    let modules = shipped("/usr/lib/modules-load.d/");
    let sysctl = shipped("/usr/lib/sysctl.d/");
    let kernel_apply = if modules.is_empty() && sysctl.is_empty() {
        String::new()
    } else {
        read_text(&spec.root.join("pkg/scripts/kernel-apply"))?
    };
    let values = [
        ("PACKAGE", pkg.name.as_str()),
        ("DIRS", &dirs),
        ("SEEDS", &seeds),
        ("UNITS", &units),
        ("START", &start),
        ("RELOAD", reload),
        ("KERNEL_MODULES", &modules),
        ("KERNEL_SYSCTL", &sysctl),
        ("KERNEL_APPLY", &kernel_apply),
    ];
    names
        .into_iter()
        .map(|name| {
            let path = spec
                .root
                .join("pkg/scripts")
                .join(format!("{}-{name}", pkg.family));
            Ok(Script {
                name: name.clone(),
                text: fill(&path, &read_text(&path)?, &values)?,
            })
        })
        .collect()
}

/// `(dest, content path, is a stand-in)` for each file an entry stands for.
fn contents(
    spec: &Spec,
    entry: &FileEntry,
    dest: &str,
    programs: &dyn Programs,
) -> Result<Vec<(String, PathBuf, bool)>> {
    Ok(match entry.content() {
        Content::Upstream { source, member } => {
            let found = programs.upstream(source, member)?;
            if member == "*" {
                found
                    .into_iter()
                    .map(|(name, path)| {
                        let standin = programs.is_standin(source, &name);
                        (format!("{dest}{name}"), path, standin)
                    })
                    .collect()
            } else {
                match found.as_slice() {
                    [(name, path)] => {
                        vec![(
                            dest.to_string(),
                            path.clone(),
                            programs.is_standin(source, name),
                        )]
                    }
                    _ => bail!(
                        "upstream {source}/{member}: expected one file, found {}",
                        found.len()
                    ),
                }
            }
        }
        Content::Repo(src) => vec![(dest.to_string(), spec.root.join(src), false)],
        Content::Build(name) => vec![(dest.to_string(), programs.built(name)?, false)],
    })
}

/// What each program printed for `NAME completion SHELL`, or why it gives
/// none, asked once per package for both families.
struct Completions {
    done: BTreeMap<(String, String, Shell), std::result::Result<Vec<u8>, String>>,
}

impl Completions {
    fn new() -> Completions {
        Completions {
            done: BTreeMap::new(),
        }
    }

    fn get(
        &mut self,
        programs: &dyn Programs,
        source: &str,
        member: &str,
        command: &str,
        shell: Shell,
    ) -> Result<std::result::Result<&[u8], String>> {
        let key = (source.to_string(), member.to_string(), shell);
        if !self.done.contains_key(&key) {
            let got = match programs.runnable(source, member) {
                Ok(argv) => generate(&argv, command, shell)?,
                Err(why) => Err(why),
            };
            self.done.insert(key.clone(), got);
        }
        Ok(self.done[&key].as_deref().map_err(Clone::clone))
    }
}

/// Runs `ARGV completion SHELL` twice in a clean environment (`LC_ALL=C`,
/// an empty temporary `HOME` and working directory, no `KUBECONFIG`) and
/// returns what it printed. A program that fails or prints nothing (a
/// stand-in) gives none, and the reason; two runs that differ are an error:
/// the packages would not be reproducible.
fn generate(
    argv: &[PathBuf],
    command: &str,
    shell: Shell,
) -> Result<std::result::Result<Vec<u8>, String>> {
    let asked = format!("`{command} completion {shell}`");
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let home = tempfile::tempdir().context("creating a temporary HOME")?;
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .args(["completion", shell.name()])
            .env_clear()
            .env("LC_ALL", "C")
            .env("HOME", home.path())
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .current_dir(home.path())
            .stdin(std::process::Stdio::null())
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => return Ok(Err(format!("{asked} could not run ({e})"))),
        };
        if !out.status.success() {
            return Ok(Err(format!("{asked} failed ({})", out.status)));
        }
        if out.stdout.is_empty() {
            return Ok(Err(format!("{asked} printed nothing")));
        }
        outputs.push(out.stdout);
    }
    if outputs[0] != outputs[1] {
        bail!("{asked} printed different completions on two runs: they would not be reproducible");
    }
    Ok(Ok(outputs.swap_remove(0)))
}

/// The description, plus a paragraph naming the stand-ins of a test build,
/// one naming the shell completions the package lacks, and why, and one
/// saying what built its programs from source (`source version toolchain`).
fn describe(
    package: &Package,
    standins: &[String],
    no_completions: &[String],
    from_source: Option<&str>,
) -> String {
    let mut text = package.description.trim_end().to_string();
    if !no_completions.is_empty() {
        text.push_str(&format!(
            "\n\nThis build has no shell completions for {}.",
            no_completions.join("; ")
        ));
    }
    if let Some(line) = from_source {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [source, version, toolchain, ..] = words[..] {
            text.push_str(&format!(
                "\n\nBuilt from source by kubedist: {source} {version} from its Go modules, \
                 each verified against a pinned go.sum, with {toolchain}."
            ));
        }
    }
    if !standins.is_empty() {
        let names: Vec<&str> = standins
            .iter()
            .map(|d| d.rsplit('/').next().unwrap_or(d))
            .collect();
        text.push_str(&format!(
            "\n\nTEST BUILD, not for production: {} {} a recorder stand-in \
             (kubedist-standin) that logs its arguments, not the real program.",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" }
        ));
    }
    text
}

/// A text file whole, with an error naming it.
fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// A `template = true` file's text: `@ENV_FILE@`, `@FAMILY@` and `@VERSION@`
/// filled in.
fn fill_template(
    file: &Path,
    text: &str,
    env_file: &str,
    family: Family,
    version: &str,
) -> Result<String> {
    fill(
        file,
        text,
        &[
            ("ENV_FILE", env_file),
            ("FAMILY", family.name()),
            ("VERSION", version),
        ],
    )
}

/// `text`, read from `file`, with each `@KEY@` of `values` replaced by its
/// value in one pass (a value is never scanned again); any other `@NAME@`
/// (NAME: A-Z and _) is a mistake in the file. Every placeholder the
/// project's files hold is filled here.
pub fn fill(file: &Path, text: &str, values: &[(&str, &str)]) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, name, after)) = next_placeholder(rest) {
        let Some((_, value)) = values.iter().find(|(key, _)| *key == name) else {
            let known: Vec<String> = values.iter().map(|(key, _)| format!("@{key}@")).collect();
            bail!(
                "{}: unknown placeholder @{name}@ (known: {})",
                file.display(),
                known.join(", ")
            );
        };
        out.push_str(before);
        out.push_str(value);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The first `@NAME@` in `text` (NAME: A-Z and _) as (the text before it,
/// NAME, the text after it).
fn next_placeholder(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(at) = text[from..].find('@') {
        let start = from + at;
        let after = &text[start + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(after.len());
        if len > 0 && after[len..].starts_with('@') {
            return Some((&text[..start], &after[..len], &after[len + 1..]));
        }
        from = start + 1;
    }
    None
}

/// The first `@NAME@` (NAME: A-Z and _) in `text`.
#[cfg(test)]
pub fn leftover_placeholder(text: &str) -> Option<&str> {
    next_placeholder(text).map(|(_, name, _)| name)
}

/// Paths end up in maintainer scripts and archive manifests: keep them to
/// characters that need no quoting anywhere.
pub(crate) fn check_path(path: &str) -> Result<()> {
    let ok = path.starts_with('/')
        && path.len() > 1
        && !path.ends_with('/')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-@".contains(c))
        && !path
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..");
    if !ok {
        bail!("{path:?} is not a plain absolute path (letters, digits and / . _ + - @ only)");
    }
    Ok(())
}

// The staged tree is scratch space in dist's fresh work directory, removed
// whole when a run fails: files are written in place, never synced.

/// Writes `data` to a new file `path`.
fn write_file(path: &Path, data: &[u8], mode: u32, epoch: u64) -> Result<(String, u64)> {
    create_parent(path)?;
    fs::write(path, data).with_context(|| format!("writing {}", path.display()))?;
    set_mode_and_time(path, mode, epoch)?;
    Ok((sha256_bytes(data), data.len() as u64))
}

/// Copies `src` to a new file `dest`, hashing on the way.
fn copy_file(src: &Path, dest: &Path, mode: u32, epoch: u64) -> Result<(String, u64)> {
    let mut input = fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
    create_parent(dest)?;
    let mut output =
        fs::File::create(dest).with_context(|| format!("creating {}", dest.display()))?;
    let (sha256, size) = copy_hashing(&mut input, src, &mut output, dest)?;
    drop(output);
    set_mode_and_time(dest, mode, epoch)?;
    Ok((sha256, size))
}

fn link_file(first: &Path, dest: &Path) -> Result<()> {
    create_parent(dest)?;
    fs::hard_link(first, dest)
        .or_else(|_| fs::copy(first, dest).map(drop))
        .with_context(|| format!("linking {} to {}", first.display(), dest.display()))
}

fn create_parent(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn set_mode_and_time(path: &Path, mode: u32, epoch: u64) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(epoch);
    let file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    file.set_times(fs::FileTimes::new().set_modified(time).set_accessed(time))
        .with_context(|| format!("setting the mtime of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_known_placeholders_and_reject_others() {
        let file = Path::new("units/x.conf");
        let out = fill_template(
            file,
            "a=@ENV_FILE@ f=@FAMILY@ v=@VERSION@ mail@host",
            "/etc/default/kubelet",
            Family::Deb,
            "1.2.3-1",
        )
        .unwrap();
        assert_eq!(out, "a=/etc/default/kubelet f=deb v=1.2.3-1 mail@host");
        let err = fill_template(file, "x=@ENVFILE@", "/e", Family::Rpm, "1").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("units/x.conf: unknown placeholder @ENVFILE@"),
            "{err}"
        );
        // A value is put in as it is, never read for placeholders again.
        let out = fill(file, "@A@ @B@", &[("A", "@B@"), ("B", "b")]).unwrap();
        assert_eq!(out, "@B@ b");
    }

    #[test]
    fn placeholders_are_found_only_in_full() {
        assert_eq!(leftover_placeholder("@A_B@"), Some("A_B"));
        assert_eq!(leftover_placeholder("user@example.org @ x@"), None);
        assert_eq!(leftover_placeholder("@@X@"), Some("X"));
    }

    /// A program that answers `completion SHELL` by `body` (sh).
    fn program(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn completions_come_from_the_program_in_a_clean_environment() {
        let tmp = tempfile::tempdir().unwrap();
        // What the environment held, printed as the completion: a clean one.
        let real = program(
            tmp.path(),
            "real",
            r##"[ "$1" = completion ] || exit 3
[ "$HOME" = "$PWD" ] && [ -z "$(ls -A "$HOME")" ] || exit 4
echo "# $2 LC_ALL=$LC_ALL KUBECONFIG=${KUBECONFIG-unset} USER=${USER-unset}""##,
        );
        let got = generate(&[real], "real", Shell::Zsh).unwrap().unwrap();
        let got = String::from_utf8(got).unwrap();
        assert_eq!(got, "# zsh LC_ALL=C KUBECONFIG=unset USER=unset\n");

        let silent = program(tmp.path(), "standin", "exit 0");
        let why = generate(&[silent], "kubeadm", Shell::Bash)
            .unwrap()
            .unwrap_err();
        assert_eq!(why, "`kubeadm completion bash` printed nothing");
        let failing = program(tmp.path(), "old", "echo unsupported >&2; exit 1");
        let why = generate(&[failing], "kubectl", Shell::Fish)
            .unwrap()
            .unwrap_err();
        assert!(why.contains("`kubectl completion fish` failed"), "{why}");
        // A program under an emulator: the emulator comes first.
        let sh = PathBuf::from("/bin/sh");
        let script = program(tmp.path(), "script", "echo \"# $2\"");
        let got = generate(&[sh, script], "x", Shell::Bash).unwrap().unwrap();
        assert_eq!(got, b"# bash\n");
    }

    #[test]
    fn completions_that_differ_between_runs_are_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let varying = program(tmp.path(), "varying", "echo \"$$\"");
        let err = generate(&[varying], "kubectl", Shell::Bash).unwrap_err();
        assert!(err.to_string().contains("not be reproducible"), "{err}");
    }

    #[test]
    fn paths_are_plain() {
        assert!(check_path("/opt/cni/bin/host-local").is_ok());
        assert!(check_path("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf").is_ok());
        for bad in ["relative", "/a b", "/a/../b", "/a//b", "/a/", "/a*", "/"] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }
}
