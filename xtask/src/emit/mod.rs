//! The artifact formats. Each is one module implementing [`Format`], listed
//! once in [`FORMATS`]: `deb` (cargo-deb as a library, its data archive from
//! `debpack`), `rpm` (the `rpm` crate), `tarball` (tar + a codec), `sysext`
//! (a squashfs image, the `backhand` crate), `oci` (the installer
//! image) and `images` (the images kubeadm pulls, for air-gapped nodes),
//! with the codecs of `codec`. `dist` turns the list into jobs
//! without naming a format; `--formats`, `--compression` and their help come
//! from it. A format is data ([`About`]) and `write(input, run)`, which
//! reads only what `crate::stage` returned (and the staged files it names),
//! never `pkg/` or the repository, and writes one file through a temp file
//! and a rename.

pub mod codec;
pub mod deb;
pub mod debpack;
pub mod images;
pub mod oci;
pub mod rpm;
pub mod sysext;
pub mod tarball;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::spec::Family;
use crate::stage::{Staged, StagedArch, StagedOci, StagedSysext};

/// Every format, in the order `--formats` and `--compression` list them:
/// the only list of formats.
pub static FORMATS: &[&dyn Format] = &[
    &deb::Deb,
    &rpm::Rpm,
    &tarball::Tarball,
    &sysext::Sysext,
    &oci::Oci,
    &images::Images,
];

/// An artifact format: what it is ([`About`], data) and how it writes one
/// artifact from its staged input.
pub trait Format: Sync {
    /// Its name, codecs, inputs and needs.
    fn about(&self) -> &'static About;
    /// Writes the artifact of `input` and returns its path, with the files
    /// it holds where the format knows them as it writes.
    fn write(&self, input: &Input, run: &Run) -> Result<Written>;
    /// Refuses a codec its writer cannot use, in one line.
    fn check_codec(&self, _codec: codec::Codec) -> Result<()> {
        Ok(())
    }
    /// Puts what it serves beside its artifact into the output directory,
    /// once every artifact was built, and returns their names.
    fn publish_beside(
        &self,
        _input: &Input,
        _artifact: &Path,
        _out_dir: &Path,
    ) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// What a format is.
pub struct About {
    /// Its name in `--formats` and `--compression`.
    pub name: &'static str,
    /// What it writes, for `--help`.
    pub summary: &'static str,
    /// Its codec settings; `None` for a format that compresses with another
    /// format's codec (`codec_of`).
    pub codecs: Option<FormatCodecs>,
    /// The format whose `--compression` setting it uses.
    pub codec_of: &'static str,
    /// What one artifact is made of.
    pub artifacts: Artifacts,
    /// Whose staged trees it reads.
    pub families: Families,
    /// What it needs staged besides the packages' trees.
    pub staging: Staging,
    /// Its writer compresses on one thread whatever the codec (such jobs
    /// start first; see [`one_thread`]).
    pub single_threaded: bool,
    /// With `dist --carry-images`, its artifact carries the images bundle
    /// of its architecture ([`carried`]).
    pub carries_images: bool,
}

/// Whether `format`'s artifacts are compressed on one thread with `codecs`:
/// its writer's way, or a long window, which the multithreaded encoders
/// would cut.
pub fn one_thread(format: &dyn Format, codecs: &codec::Codecs) -> bool {
    let about = format.about();
    about.single_threaded || codecs.of(about.codec_of).long
}

/// An artifact a format wrote.
pub struct Written {
    pub path: PathBuf,
    /// Its regular files as the writer held them before compressing, which
    /// its SBOM lists with no decode (`None`: the SBOM reads them back from
    /// the artifact, as for the images bundle).
    pub held: Option<Vec<crate::sbom::contents::Held>>,
}

impl From<PathBuf> for Written {
    fn from(path: PathBuf) -> Written {
        Written { path, held: None }
    }
}

/// What a run gives every job besides its input.
pub struct Run<'a> {
    pub k8s_version: &'a str,
    pub options: &'a Options,
    /// What the staged files came from, for an SBOM a format carries
    /// inside its artifact.
    pub origins: &'a [crate::sbom::Origin],
    /// Scratch space.
    pub work: &'a Path,
    /// Where the artifact goes.
    pub out_dir: &'a Path,
}

/// A format's codec settings.
pub struct FormatCodecs {
    pub default: codec::Codec,
    pub fast: codec::Codec,
    /// The codecs it takes and who can read them, one line for `--help`.
    pub help: &'static str,
}

/// What one artifact of a format is made of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Artifacts {
    /// One package of one family: an artifact per package and architecture.
    Package(Family),
    /// Everything staged for one architecture.
    Arch,
    /// Each sysext image staged for one architecture.
    SysextImages,
    /// Every architecture, with the installer image's own input.
    Image,
}

/// Whose staged trees a format reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Families {
    /// One family's packages.
    Own(Family),
    /// Every family's (the tarball and the installer image hold both).
    All,
    /// The family `pkg/sysext.toml` stages the sysext image from.
    OfTheSysextImage,
    /// None: the images bundle holds no package's files.
    None,
}

/// What a format needs staged besides the packages' trees.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Staging {
    Packages,
    /// The sysext image's own files and settings (`--sysext-os`).
    SysextImage,
    /// The installer image's shell per architecture and its own scripts.
    InstallerImage,
    /// The images kubeadm pulls (`pkg/images.toml`), per architecture.
    Images,
}

/// The whole input of one artifact.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// One package of one family and architecture.
    Package(&'a Staged),
    /// Everything staged for one architecture.
    Arch(&'a StagedArch),
    /// One sysext image of one architecture, with everything staged for it.
    Sysext(&'a StagedArch, &'a StagedSysext),
    /// Every architecture, and the installer image's own input.
    Image(&'a [StagedArch], &'a StagedOci),
}

impl<'a> Input<'a> {
    pub fn package(&self) -> Result<&'a Staged> {
        match self {
            Input::Package(p) => Ok(p),
            _ => anyhow::bail!("a package format was given another input"),
        }
    }
    pub fn arch(&self) -> Result<&'a StagedArch> {
        match self {
            Input::Arch(a) => Ok(a),
            _ => anyhow::bail!("a per-architecture format was given another input"),
        }
    }
    pub fn sysext(&self) -> Result<(&'a StagedArch, &'a StagedSysext)> {
        match self {
            Input::Sysext(a, s) => Ok((a, s)),
            _ => anyhow::bail!("the sysext format was given another input"),
        }
    }
    pub fn image(&self) -> Result<(&'a [StagedArch], &'a StagedOci)> {
        match self {
            Input::Image(a, o) => Ok((a, o)),
            _ => anyhow::bail!("the installer image was given another input"),
        }
    }
}

/// One artifact to write: the format that writes it and its whole input.
pub struct Job<'a> {
    pub format: &'static dyn Format,
    pub input: Input<'a>,
}

/// The jobs of `format`: one per artifact its staged input makes.
pub fn jobs<'a>(
    format: &'static dyn Format,
    arches: &'a [StagedArch],
    image: Option<&'a StagedOci>,
) -> Vec<Job<'a>> {
    let job = |input| Job { format, input };
    match format.about().artifacts {
        Artifacts::Package(family) => arches
            .iter()
            .flat_map(|arch| &arch.packages)
            .filter_map(|p| p.all().find(|s| s.family == family))
            .map(|staged| job(Input::Package(staged)))
            .collect(),
        Artifacts::Arch => arches.iter().map(|a| job(Input::Arch(a))).collect(),
        Artifacts::SysextImages => arches
            .iter()
            .flat_map(|a| a.sysext.iter().map(move |s| job(Input::Sysext(a, s))))
            .collect(),
        Artifacts::Image => image
            .map(|image| job(Input::Image(arches, image)))
            .into_iter()
            .collect(),
    }
}

/// Who the packages name as their maintainer/packager. A placeholder until
/// the project has a real list; lintian and rpmlint accept it.
pub const MAINTAINER: &str = "kubedist maintainers <kubedist@lists.example.org>";

/// What every job is given besides its staged input: the choices of this
/// run, never a file to read.
#[derive(Clone)]
pub struct Options {
    /// The project's home (Cargo.toml's `workspace.package.repository`).
    pub homepage: String,
    /// The packages' licence, an SPDX identifier (Cargo.toml's
    /// `workspace.package.license`).
    pub license: String,
    /// SOURCE_DATE_EPOCH: every timestamp in every artifact.
    pub epoch: u64,
    /// The codec and level of each format.
    pub codecs: codec::Codecs,
    /// Threads each artifact's encoder may use (the output does not depend
    /// on it).
    pub threads: u32,
    /// `dist --sign`: the key that signs the tarball's SHA256SUMS
    /// (`SHA256SUMS.asc` beside it, made at `epoch`).
    pub signer: Option<std::sync::Arc<crate::keys::RepoKey>>,
    /// `dist --carry-images`: the tarball and the installer image carry
    /// their architecture's images bundle.
    pub carry_images: bool,
}

/// The bundle as the tarball and the installer image carry it (`dist
/// --carry-images`): the same bytes as the bundle artifact, written in the
/// run's scratch space and removed when this is dropped.
pub struct Carried {
    _dir: tempfile::TempDir,
    /// Its file name, `kubedist-images-<X.Y.Z>-<arch>[-worker].oci.tar`.
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
}

/// The bundle `arch`'s tarball and installer image carry, when the run
/// says they carry one.
pub fn carried(arch: &StagedArch, run: &Run) -> Result<Option<Carried>> {
    if !run.options.carry_images {
        return Ok(None);
    }
    let dir = tempfile::tempdir_in(run.work)
        .with_context(|| format!("creating a directory in {}", run.work.display()))?;
    let name = images::bundle_name(arch, run.k8s_version)?;
    let path = dir.path().join(&name);
    images::write_bundle(arch, run.options.epoch, &path)?;
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    Ok(Some(Carried {
        sha256: crate::digest::sha256_file(&path)?,
        _dir: dir,
        name,
        path,
        size,
    }))
}

/// The detached, armoured signature of a `SHA256SUMS` file, beside it.
pub const SUMS_SIGNATURE: &str = "SHA256SUMS.asc";

/// One line of both formats' changelogs.
pub fn changelog_line(pkg: &Staged) -> String {
    format!(
        "{} {} packaged by kubedist (package revision {}).",
        pkg.version_from,
        pkg.upstream_version.replace('~', "-"),
        pkg.revision
    )
}

#[cfg(test)]
mod tests;
