//! The air-gapped tarball, `kubedist-<k8s version>-linux-<arch>.tar.gz`
//! (`.tar.xz` or `.tar.zst` with `--compression tar=xz|zstd`):
//!
//! ```text
//! kubedist-<ver>-linux-<arch>/
//!   install.sh                  the installer (installer/install.sh)
//!   MANIFEST                    family init kind mode package path, tab-separated, sorted
//!   SHA256SUMS                  `sha256  relative/path` of every other file
//!   SHA256SUMS.asc              with `dist --sign`: its detached signature
//!   payload/<family>/<path>     the content of each file entry (of a path
//!                               with one file per init system, each at
//!                               payload/<family>.<init>/<path>)
//!   images/kubedist-images-<ver>-<arch>.oci.tar
//!                               with `dist --carry-images`: the images
//!                               bundle, installed and imported after the rest
//! ```
//!
//! It holds both families' files (the installer picks one per host), the
//! OpenRC and runit files the packages leave out, and config files as kind
//! `config` (the installer never overwrites an edited one). A file whose dest
//! and content are the same for deb and rpm is stored once, as family `any`.
//!
//! gzip by default, not xz or zstd: every air-gapped host can unpack it,
//! busybox included; it is written by `super::codec`'s parallel gzip (one
//! member, as pigz writes). Root-owned with numeric ids only, no xattrs, every mtime
//! SOURCE_DATE_EPOCH, entries sorted: the same inputs give the same bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::codec::{self, Codec, Kind};
use super::{carried, Carried};
use super::{
    About, Artifacts, Families, Format, FormatCodecs, Input, Options, Run, Staging, Written,
};
use crate::archive::{add_parent_dirs, append_tar, Item};
use crate::spec::Arch;
use crate::stage::{Staged, StagedArch, StagedFile};
use crate::util::hex;

/// The format's name in `--formats` and `--compression`.
pub const NAME: &str = "tar";

pub struct Tarball;

static ABOUT: About = About {
    name: NAME,
    summary: "the air-gapped tarball per architecture, with install.sh",
    codecs: Some(FormatCodecs {
        // Every air-gapped host unpacks gzip, busybox included.
        default: Codec::new(Kind::Gz, 9),
        fast: Codec::new(Kind::Gz, 1),
        help: "gz:1-9 (default gz:9; every host), xz:0-9 (.tar.xz), zstd:1-19 (.tar.zst); \
               +long after xz (busybox's unxz too) or zstd (GNU tar >= 1.31)",
    }),
    codec_of: NAME,
    artifacts: Artifacts::Arch,
    families: Families::All,
    staging: Staging::Packages,
    single_threaded: false,
    carries_images: true,
};

impl Format for Tarball {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        let arch = input.arch()?;
        let carried = carried(arch, run)?;
        write(
            arch,
            carried.as_ref(),
            run.k8s_version,
            run.options,
            run.out_dir,
        )
    }
}

/// The tarball's file name for a Kubernetes version, architecture and codec.
pub fn file_name(k8s_version: &str, arch: Arch, codec: Codec) -> String {
    format!("{}.tar.{}", top_dir(k8s_version, arch), codec.ext())
}

pub(super) fn top_dir(k8s_version: &str, arch: Arch) -> String {
    format!("kubedist-{k8s_version}-linux-{arch}")
}

/// One MANIFEST line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Line {
    family: &'static str,
    init: &'static str,
    kind: &'static str,
    mode: u32,
    package: String,
    path: String,
}

impl Line {
    fn render(&self) -> String {
        format!(
            "{}\t{}\t{}\t{:04o}\t{}\t{}\n",
            self.family, self.init, self.kind, self.mode, self.package, self.path
        )
    }

    /// Where the line's content is: `payload/<family>/<path>`, or, when
    /// the MANIFEST has the path for the family under several init systems
    /// (`shared`), each one's at `payload/<family>.<init>/<path>`.
    /// install.sh's `payload_of` follows the same rule.
    fn payload(&self, shared: &BTreeSet<(&str, &str)>) -> String {
        let dir = match shared.contains(&(self.family, self.path.as_str())) {
            true => format!("{}.{}", self.family, self.init),
            false => self.family.to_string(),
        };
        format!("payload/{dir}/{}", self.path.trim_start_matches('/'))
    }
}

/// Writes the tarball of one architecture from each package's deb and rpm
/// staging and the installer (and the images bundle it carries), and
/// returns its path and files.
pub fn write(
    staged: &StagedArch,
    carried: Option<&Carried>,
    k8s_version: &str,
    meta: &Options,
    out_dir: &Path,
) -> Result<Written> {
    let arch = staged.arch;
    let out = out_dir.join(file_name(k8s_version, arch, meta.codecs.of(NAME)));
    let mut items: BTreeMap<String, Item> = contents(staged, carried, meta)?
        .into_iter()
        .map(|e| (e.path, e.item))
        .collect();
    add_parent_dirs(&mut items);

    let top = top_dir(k8s_version, arch);
    crate::util::write_atomic(&out, 0o644, |file| {
        let size = items.values().map(Item::size).sum();
        let encoder = codec::encoder(
            meta.codecs.of(NAME),
            meta.threads,
            size,
            BufWriter::new(file),
        )
        .context("starting the compressor")?;
        let mut tar = tar::Builder::new(encoder);
        append_tar(&mut tar, &top, &Item::Dir(0o755), meta.epoch)?;
        for (key, item) in &items {
            append_tar(&mut tar, &format!("{top}/{key}"), item, meta.epoch)?;
        }
        let encoder = tar.into_inner().context("finishing the tar stream")?;
        let mut buf = encoder
            .finish()
            .context("finishing the compressed stream")?;
        buf.flush().context("writing the tarball")?;
        Ok(())
    })
    .with_context(|| format!("writing {}", out.display()))?;
    let held = crate::sbom::contents::of_items(
        items
            .iter()
            .map(|(key, item)| (format!("/{top}/{key}"), item)),
    )?;
    Ok(Written {
        path: out,
        held: Some(held),
    })
}

/// One file of the tarball's top directory (the installer image carries the
/// same files).
pub(super) struct Entry {
    /// Relative to the top directory: `install.sh`, `payload/any/usr/bin/kubectl`.
    pub path: String,
    pub item: Item,
    /// The package a payload file belongs to; `None` for the installer's own
    /// files (install.sh, MANIFEST, SHA256SUMS).
    pub package: Option<String>,
}

/// Every file of the tarball's top directory, sorted by path (directories
/// are not listed): the installer's files, the payload and the images
/// bundle it carries, as `images/<its name>`.
pub(super) fn contents(
    staged: &StagedArch,
    carried: Option<&Carried>,
    meta: &Options,
) -> Result<Vec<Entry>> {
    let mut lines = Vec::new();
    let mut files: Vec<(Line, &StagedFile)> = Vec::new();
    for package in &staged.packages {
        let (Some(deb), Some(rpm)) = (&package.deb, &package.rpm) else {
            bail!("tarball: every package must be staged for both families");
        };
        for (family, file) in merge_files(deb, rpm) {
            let line = Line {
                family,
                init: file.init.map_or("any", |i| i.name()),
                kind: if file.config { "config" } else { "file" },
                mode: file.mode,
                package: deb.name.clone(),
                path: file.dest.clone(),
            };
            lines.push(line.clone());
            files.push((line, file));
        }
        for (family, dir) in merge_dirs(deb, rpm) {
            lines.push(Line {
                family,
                init: "any",
                kind: "dir",
                mode: dir.mode,
                package: deb.name.clone(),
                path: dir.path.clone(),
            });
        }
    }
    // The (family, path) pairs the MANIFEST has under several init systems.
    let mut inits: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for (line, _) in &files {
        inits
            .entry((line.family, line.path.as_str()))
            .or_default()
            .insert(line.init);
    }
    let shared: BTreeSet<(&str, &str)> = inits
        .into_iter()
        .filter(|(_, i)| i.len() > 1)
        .map(|(k, _)| k)
        .collect();
    // payload path -> (content, sha256, size, package, mode)
    let mut payload: BTreeMap<String, (PathBuf, String, u64, String, u32)> = BTreeMap::new();
    for (line, file) in &files {
        let key = line.payload(&shared);
        if let Some((_, sha, _, _, _)) = payload.get(&key) {
            if *sha != file.sha256 {
                bail!("tarball: two different files would be {key}");
            }
        }
        payload.insert(
            key,
            (
                file.path.clone(),
                file.sha256.clone(),
                file.size,
                line.package.clone(),
                line.mode,
            ),
        );
    }
    lines.sort();
    lines.dedup();
    let manifest: String = lines.iter().map(Line::render).collect();

    let installer = staged.installer.clone();

    let mut sums: BTreeMap<String, String> = BTreeMap::new();
    sums.insert("install.sh".into(), hex(&Sha256::digest(&installer)));
    sums.insert("MANIFEST".into(), hex(&Sha256::digest(manifest.as_bytes())));
    for (key, (_, sha, _, _, _)) in &payload {
        sums.insert(key.clone(), sha.clone());
    }
    if let Some(bundle) = carried {
        sums.insert(carried_path(bundle), bundle.sha256.clone());
    }
    let sha256sums: String = sums.iter().map(|(p, s)| format!("{s}  {p}\n")).collect();

    let own = |path: &str, item| Entry {
        path: path.into(),
        item,
        package: None,
    };
    let mut entries = Vec::new();
    if let Some(key) = &meta.signer {
        let signature = key.detached_armored(sha256sums.as_bytes(), meta.epoch)?;
        entries.push(own(
            super::SUMS_SIGNATURE,
            Item::Bytes(signature.into_bytes(), 0o644),
        ));
    }
    entries.push(own("install.sh", Item::Bytes(installer, 0o755)));
    entries.push(own("MANIFEST", Item::Bytes(manifest.into_bytes(), 0o644)));
    entries.push(own(
        "SHA256SUMS",
        Item::Bytes(sha256sums.into_bytes(), 0o644),
    ));
    for (key, (path, _, size, package, mode)) in payload {
        // Payload modes are the MANIFEST's: the installer sets them anyway,
        // and a plain `tar -x` gives the same result.
        entries.push(Entry {
            path: key,
            item: Item::File { path, size, mode },
            package: Some(package),
        });
    }
    if let Some(bundle) = carried {
        entries.push(Entry {
            path: carried_path(bundle),
            item: Item::File {
                path: bundle.path.clone(),
                size: bundle.size,
                mode: 0o644,
            },
            package: None,
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

/// The directory of the tarball that holds the images bundle it carries;
/// install.sh looks there.
pub(super) const CARRIED_DIR: &str = "images/";

fn carried_path(bundle: &Carried) -> String {
    format!("{CARRIED_DIR}{}", bundle.name)
}

/// Files of a package for the tarball: `any` where deb and rpm agree on
/// dest, init, mode, kind and content; otherwise one entry per family.
fn merge_files<'a>(deb: &'a Staged, rpm: &'a Staged) -> Vec<(&'static str, &'a StagedFile)> {
    let same = |a: &StagedFile, b: &StagedFile| {
        a.dest == b.dest
            && a.init == b.init
            && a.mode == b.mode
            && a.config == b.config
            && a.sha256 == b.sha256
    };
    let mut out = Vec::new();
    for d in &deb.files {
        if rpm.files.iter().any(|r| same(d, r)) {
            out.push(("any", d));
        } else {
            out.push(("deb", d));
        }
    }
    for r in &rpm.files {
        if !deb.files.iter().any(|d| same(d, r)) {
            out.push(("rpm", r));
        }
    }
    out
}

fn merge_dirs<'a>(
    deb: &'a Staged,
    rpm: &'a Staged,
) -> Vec<(&'static str, &'a crate::stage::StagedDir)> {
    let mut out = Vec::new();
    for d in &deb.dirs {
        out.push((if rpm.dirs.contains(d) { "any" } else { "deb" }, d));
    }
    for r in &rpm.dirs {
        if !deb.dirs.contains(r) {
            out.push(("rpm", r));
        }
    }
    out
}
