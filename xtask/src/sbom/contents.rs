//! What an artifact holds: every regular file with its digests and, for Go
//! programs, their build information. Read back from the finished artifact
//! (`read`), not from the staging, the SBOM says what a host unpacks,
//! whatever the format adds on the way (a deb's copyright file, an rpm's
//! licence). The writers of debs, rpms, tarballs, sysext images and the
//! installer image give the same list from what they held before
//! compressing (`Held::new`, `of_items`, `of_tar`), with no decode;
//! tests of `emit` hold both lists equal for each. The images bundle is read
//! back: its layers come compressed, and listing their files is the decode.

use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha1::Digest as _;

use super::gobuild::{self, GoBuild};
use crate::archive::Item;

/// One regular file of an artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// Its path as the artifact names it, from the root: `/usr/bin/kubelet`;
    /// in an image, under its layer's blob: `/blobs/sha256/<digest>/usr/bin/x`.
    pub path: String,
    pub sha1: String,
    pub sha256: String,
    pub go: Option<GoBuild>,
}

impl Held {
    /// The file `bytes`, at `path` in its artifact.
    pub fn new(path: String, bytes: &[u8]) -> Held {
        Held {
            path,
            sha1: crate::util::hex(&sha1::Sha1::digest(bytes)),
            sha256: crate::digest::sha256_bytes(bytes),
            go: gobuild::read(bytes),
        }
    }
}

/// The regular files of the artifact `path`, sorted by path.
pub fn read(path: &Path) -> Result<Vec<Held>> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut files = if name.ends_with(".deb") {
        deb(path)
    } else if name.ends_with(".rpm") {
        rpm(path)
    } else if name.ends_with(".raw") {
        squashfs(path)
    } else if name.ends_with(".oci.tar") {
        image(path)
    } else if let Some(codec) = tar_codec(&name) {
        let file = open(path)?;
        tar(decoder(codec, file)?, "")
    } else {
        bail!("{}: not an artifact kubedist writes", path.display())
    }
    .with_context(|| format!("reading {}", path.display()))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn open(path: &Path) -> Result<BufReader<fs::File>> {
    Ok(BufReader::new(
        fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
    ))
}

/// The codec of a tar stream named `name` (`.tar.gz`, `data.tar.xz`, ...).
fn tar_codec(name: &str) -> Option<&'static str> {
    ["gz", "xz", "zst"]
        .into_iter()
        .find(|ext| name.ends_with(&format!(".tar.{ext}")))
}

fn decoder<'a>(codec: &str, r: impl Read + 'a) -> Result<Box<dyn Read + 'a>> {
    Ok(match codec {
        "gz" => Box::new(flate2::read::MultiGzDecoder::new(r)),
        "xz" => Box::new(xz2::read::XzDecoder::new(r)),
        "zst" => Box::new(zstd::stream::read::Decoder::new(r)?),
        other => bail!("unknown codec {other}"),
    })
}

/// The regular files among an archive's entries, each `(its path from the
/// root, the entry)`: a file entry read from its staged path as the writer
/// read it, its first `size` bytes.
pub fn of_items<'a>(items: impl IntoIterator<Item = (String, &'a Item)>) -> Result<Vec<Held>> {
    let mut out = Vec::new();
    for (path, item) in items {
        match item {
            Item::Bytes(bytes, _) => out.push(Held::new(path, bytes)),
            Item::File {
                path: src, size, ..
            } => {
                let mut bytes = Vec::new();
                fs::File::open(src)
                    .and_then(|file| file.take(*size).read_to_end(&mut bytes))
                    .with_context(|| format!("reading {}", src.display()))?;
                out.push(Held::new(path, &bytes));
            }
            Item::Dir(_) | Item::Symlink(_) => {}
        }
    }
    Ok(out)
}

/// The regular files of an uncompressed tar, `tar_bytes`, from its root.
pub fn of_tar(tar_bytes: &[u8]) -> Result<Vec<Held>> {
    tar(tar_bytes, "")
}

/// The regular files of a tar stream, each path prefixed by `prefix`.
fn tar(r: impl Read, prefix: &str) -> Result<Vec<Held>> {
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(r);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path()?.to_string_lossy().into_owned();
        let path = format!("{prefix}/{}", path.trim_start_matches("./"));
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        out.push(Held::new(path, &bytes));
    }
    Ok(out)
}

fn deb(path: &Path) -> Result<Vec<Held>> {
    let mut ar = ar::Archive::new(open(path)?);
    while let Some(member) = ar.next_entry() {
        let member = member?;
        let name = String::from_utf8_lossy(member.header().identifier()).into_owned();
        if let Some(codec) = name.strip_prefix("data").and_then(tar_codec) {
            return tar(decoder(codec, member)?, "");
        }
    }
    bail!("no data.tar member")
}

fn rpm(path: &Path) -> Result<Vec<Held>> {
    let mut package = rpm::Package::open(path)?;
    // The crate reads the payload's codec from its magic, and xz only with
    // its own liblzma, which cannot share this program with the debs'
    // (emit::codec): an xz payload is decoded here, and the crate then
    // reads the archive as it is.
    if package.payload.starts_with(b"\xfd7zXZ\0") {
        let mut archive = Vec::new();
        decoder("xz", package.payload.as_slice())?
            .read_to_end(&mut archive)
            .context("decoding the xz payload")?;
        package.payload = archive;
    }
    of_rpm(&package)
}

/// The regular files of an rpm's payload, as the `rpm` crate reads it.
fn of_rpm(package: &rpm::Package) -> Result<Vec<Held>> {
    let mut out = Vec::new();
    for file in package.files()? {
        let file = file?;
        if file.metadata.mode().file_type() != rpm::FileType::Regular {
            continue;
        }
        let name = file.metadata.path().to_string_lossy().into_owned();
        out.push(Held::new(name, file.content().unwrap_or_default()));
    }
    Ok(out)
}

fn squashfs(path: &Path) -> Result<Vec<Held>> {
    let fs = backhand::FilesystemReader::from_reader(open(path)?)?;
    let mut out = Vec::new();
    for node in fs.files() {
        let backhand::InnerNode::File(inner) = &node.inner else {
            continue;
        };
        let mut bytes = Vec::new();
        fs.file(inner).reader().read_to_end(&mut bytes)?;
        out.push(Held::new(
            node.fullpath.to_string_lossy().into_owned(),
            &bytes,
        ));
    }
    Ok(out)
}

/// The installer image: the files of every gzip'd layer blob of the layout
/// in the archive, each under its layer's blob path.
fn image(path: &Path) -> Result<Vec<Held>> {
    let mut out = Vec::new();
    let mut outer = tar::Archive::new(open(path)?);
    for entry in outer.entries()? {
        let entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        let Some(digest) = name
            .trim_start_matches("./")
            .strip_prefix(crate::layout::BLOBS)
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            continue;
        };
        let digest = digest.to_string();
        let mut blob = io::BufReader::new(entry);
        // Layers are gzip'd tars; the configs and manifests are JSON.
        if blob.fill_buf()?.starts_with(&[0x1f, 0x8b]) {
            let prefix = format!("/{}", crate::layout::blob(&digest));
            out.extend(tar(flate2::read::GzDecoder::new(blob), &prefix)?);
        }
    }
    Ok(out)
}
