//! The systemd-sysext images, `<name>-v<version>-<arch>.raw`: squashfs
//! file systems that systemd-sysext merges over the host's read-only /usr.
//! Two per architecture (`pkg/sysext.toml`): the node's
//! (`kubernetes-v1.34.2-x86-64.raw`, Kubernetes' version) and the container
//! runtime's (`kubedist-containerd-v2.4.2-x86-64.raw`, containerd's), each
//! made of its packages; the node's:
//!
//! ```text
//! usr/bin/{kubelet,kubelet-wrapper,kubeadm,kubectl,crictl}
//! usr/lib/systemd/system/kubelet.service, kubelet.service.d/10-kubeadm.conf
//! usr/lib/kubedist/cni/bin/*      the CNI plugins, moved out of /opt/cni/bin
//! ...                             the image's own files (pkg/sysext.toml)
//! usr/lib/tmpfiles.d/<name>.conf  the packages' directories, created at boot
//! usr/lib/extension-release.d/extension-release.<name>
//! usr/lib/kubedist/sysext-files/<name>.sha256  the digests of its binaries and units
//! ```
//!
//! Each is made of one family's package staging (`StagedSysext::family`):
//! the files packages carry for systemd hosts, less those under /etc (an
//! extension never merges /etc; admins write there themselves), moved where
//! the image's settings say. Everything must then lie under /usr: an image
//! with /opt would make the host's whole /opt read-only while merged.
//!
//! Written by the `backhand` crate, sorted, every inode root-owned with
//! mtime SOURCE_DATE_EPOCH (the image's root directory keeps 0: the crate
//! has no setter for it, and a host never sees that directory), no xattrs,
//! duplicate files stored once: the same input gives the same bytes. The
//! compressor options are not written: squashfs readers need none, and the
//! crate's gzip options record is a byte short of the format's (unsquashfs
//! 4.5 rejects it).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use backhand::compression::{CompressionOptions, Compressor, Gzip, Zstd};
use backhand::{FilesystemCompressor, FilesystemWriter, NodeHeader};

use super::codec::{Codec, Kind};
use super::{
    About, Artifacts, Families, Format, FormatCodecs, Input, Options, Run, Staging, Written,
};
use crate::archive::{add_parent_dirs, Item};
use crate::spec::Family;
use crate::stage::{StagedArch, StagedDir, StagedSysext};

/// The format's name in `--formats` and `--compression`.
pub const NAME: &str = "sysext";

pub struct Sysext;

static ABOUT: About = About {
    name: NAME,
    summary: "the systemd-sysext image, for Flatcar, Fedora CoreOS and other hosts \
              with a read-only /usr",
    codecs: Some(FormatCodecs {
        // mksquashfs's default: every kernel's squashfs reads it.
        default: Codec::new(Kind::Gz, 9),
        fast: Codec::new(Kind::Gz, 1),
        help: "gz:1-9 (default gz:9; every kernel), zstd:1-19 (kernels with SQUASHFS_ZSTD)",
    }),
    codec_of: NAME,
    artifacts: Artifacts::SysextImages,
    families: Families::OfTheSysextImage,
    staging: Staging::SysextImage,
    // backhand compresses on one thread.
    single_threaded: true,
    carries_images: false,
};

impl Format for Sysext {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        let (staged, sysext) = input.sysext()?;
        write(staged, sysext, run.options, run.out_dir)
    }
    fn check_codec(&self, codec: Codec) -> Result<()> {
        if codec.long {
            bail!(
                "--compression sysext={codec}: squashfs compresses each block of the image \
                 on its own (128 KiB): a longer window finds nothing more (drop +long)"
            );
        }
        if codec.kind == Kind::Xz {
            bail!(
                "--compression sysext=xz: not available: the squashfs writer's xz links a \
                 second liblzma, which cannot share a program with the debs' (use gz or zstd)"
            );
        }
        Ok(())
    }
}

/// The image's file name, `<name>-v<X.Y.Z>-<arch>.raw`.
pub fn file_name(sysext: &StagedSysext) -> String {
    format!(
        "{}-v{}-{}.raw",
        sysext.name, sysext.upstream_version, sysext.arch_name
    )
}

/// Writes one sysext image of one architecture and returns its path and
/// files.
pub fn write(
    staged: &StagedArch,
    sysext: &StagedSysext,
    options: &Options,
    out_dir: &Path,
) -> Result<Written> {
    let out = out_dir.join(file_name(sysext));
    let items = items(staged, sysext)?;

    let mut fs = FilesystemWriter::default();
    fs.set_time(u32::try_from(options.epoch).context("SOURCE_DATE_EPOCH after 2106")?);
    fs.set_only_root_id();
    fs.set_root_mode(0o755);
    fs.set_compressor(compressor(options)?);
    fs.set_emit_compression_options(false);
    let header = |mode: u32| NodeHeader {
        permissions: mode as u16,
        uid: 0,
        gid: 0,
        mtime: options.epoch as u32,
    };
    // A BTreeMap: parents sort before their children, as the writer needs.
    for (path, item) in &items {
        let added = match item {
            Item::Dir(mode) => fs.push_dir(path, header(*mode)),
            Item::Symlink(target) => fs.push_symlink(target, path, header(0o777)),
            Item::Bytes(data, mode) => {
                fs.push_file(std::io::Cursor::new(data), path, header(*mode))
            }
            Item::File {
                path: src,
                size,
                mode,
            } => {
                let file =
                    fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
                // take(): a staged file that grew since staging must not
                // change the image.
                fs.push_file(file.take(*size), path, header(*mode))
            }
        };
        added.with_context(|| format!("adding /{path} to the image"))?;
    }
    crate::util::write_atomic(&out, 0o644, |file| {
        let mut writer = BufWriter::new(file);
        fs.write(&mut writer)
            .context("writing the squashfs image")?;
        writer.flush().context("writing the squashfs image")?;
        Ok(())
    })
    .with_context(|| format!("writing {}", out.display()))?;
    let held = crate::sbom::contents::of_items(
        items.iter().map(|(path, item)| (format!("/{path}"), item)),
    )?;
    Ok(Written {
        path: out,
        held: Some(held),
    })
}

fn compressor(options: &Options) -> Result<FilesystemCompressor> {
    let codec = options.codecs.of(NAME);
    let (id, opts) = match codec.kind {
        Kind::Gz => (
            Compressor::Gzip,
            CompressionOptions::Gzip(Gzip {
                compression_level: codec.level,
                window_size: 15,
                strategies: 0,
            }),
        ),
        Kind::Zstd => (
            Compressor::Zstd,
            CompressionOptions::Zstd(Zstd {
                compression_level: codec.level,
            }),
        ),
        Kind::Xz => bail!("sysext: xz is not available (use gz or zstd)"),
    };
    FilesystemCompressor::new(id, Some(opts)).with_context(|| format!("sysext compressor {codec}"))
}

/// Every entry of the image: the packages' files, the image's own, the
/// generated extension-release and tmpfiles.d files, and their directories.
fn items(staged: &StagedArch, sysext: &StagedSysext) -> Result<BTreeMap<String, Item>> {
    let mut items = BTreeMap::new();
    let mut add = |dest: &str, item: Item, digest: &str| -> Result<()> {
        if !dest.starts_with("/usr/") {
            bail!(
                "sysext: {dest} is outside /usr: an extension merges /usr only, and one \
                 with /opt makes the host's /opt read-only (move it in pkg/sysext.toml)"
            );
        }
        let key = dest.trim_start_matches('/').to_string();
        if let Some((_, earlier)) = items.get(&key) {
            if earlier != digest {
                bail!("sysext: two different files would be {dest}");
            }
        }
        items.insert(key, (item, digest.to_string()));
        Ok(())
    };
    let mut dirs: Vec<&StagedDir> = Vec::new();
    for package in &staged.packages {
        let pkg = match sysext.family {
            Family::Deb => package.deb.as_ref(),
            Family::Rpm => package.rpm.as_ref(),
        }
        .with_context(|| format!("sysext: the packages were not staged for {}", sysext.family))?;
        // The container runtime is an image of its own.
        if pkg.runtime != sysext.runtime {
            continue;
        }
        for file in pkg.package_files() {
            // An extension never merges /etc: what stays there is left out.
            let path = sysext.image_path(&file.dest);
            if path.starts_with("/etc/") {
                continue;
            }
            let item = Item::File {
                path: file.path.clone(),
                size: file.size,
                mode: file.mode,
            };
            add(&path, item, &file.sha256)?;
        }
        dirs.extend(&pkg.dirs);
    }
    for file in &sysext.files {
        let item = Item::File {
            path: file.path.clone(),
            size: file.size,
            mode: file.mode,
        };
        add(&file.dest, item, &file.sha256)?;
    }
    let tmpfiles = tmpfiles(&sysext.name, &dirs);
    let digest = crate::digest::sha256_bytes(tmpfiles.as_bytes());
    add(
        &format!("/usr/lib/tmpfiles.d/{}.conf", sysext.name),
        Item::Bytes(tmpfiles.into_bytes(), 0o644),
        &digest,
    )?;
    let release = extension_release(sysext);
    let digest = crate::digest::sha256_bytes(release.as_bytes());
    add(
        &format!(
            "/usr/lib/extension-release.d/extension-release.{}",
            sysext.name
        ),
        Item::Bytes(release.into_bytes(), 0o644),
        &digest,
    )?;

    // What the CNI copier checks the merged /usr against: of two extensions
    // shipping a path, systemd-sysext lets the one whose name sorts later
    // win, so a binary or unit of ours that differs once merged is another
    // extension's.
    let shipped: String = items
        .iter()
        .filter(|(k, _)| k.starts_with("usr/bin/") || k.starts_with("usr/lib/systemd/system/"))
        .map(|(k, (_, digest))| format!("{digest}  {k}\n"))
        .collect();
    let digest = crate::digest::sha256_bytes(shipped.as_bytes());
    items.insert(
        format!("{}/{}.sha256", SHIPPED.trim_start_matches('/'), sysext.name),
        (Item::Bytes(shipped.into_bytes(), 0o644), digest),
    );

    let mut items: BTreeMap<String, Item> = items.into_iter().map(|(k, (i, _))| (k, i)).collect();
    add_parent_dirs(&mut items);
    Ok(items)
}

/// Where each image lists the digests of its binaries and units, as
/// `<name>.sha256` in `sha256sum -c` format relative to `/`.
pub const SHIPPED: &str = "/usr/lib/kubedist/sysext-files";

/// `usr/lib/extension-release.d/extension-release.<name>`: which hosts may
/// merge the image (ID=, and SYSEXT_LEVEL= or VERSION_ID=), on which
/// architecture, as the system's extension only, with a manager reload
/// after merging (systemd ≥ 255) so that the kubelet's units are seen.
pub fn extension_release(sysext: &StagedSysext) -> String {
    format!(
        "{}ARCHITECTURE={}\nSYSEXT_VERSION_ID={}\nSYSEXT_SCOPE=system\nEXTENSION_RELOAD_MANAGER=1\n",
        sysext.os.release_lines(),
        sysext.arch_name,
        sysext.version
    )
}

/// `usr/lib/tmpfiles.d/<name>.conf`: the directories the packages create,
/// made by systemd-tmpfiles at boot (systemd-sysext.service merges before
/// systemd-tmpfiles-setup.service runs).
fn tmpfiles(name: &str, dirs: &[&StagedDir]) -> String {
    let mut lines: Vec<String> = dirs
        .iter()
        .map(|d| format!("d {} {:04o} root root -\n", d.path, d.mode))
        .collect();
    lines.sort();
    lines.dedup();
    format!(
        "# The directories of the packages of the {name} system extension, made at boot.\n{}",
        lines.concat()
    )
}
