//! Deterministic archives, written in one place for every writer that
//! makes one: tar streams of [`Item`]s (the tarball, the sysext image's
//! tree, the installer image's layers, the OCI archives, the repository's
//! synthetic packages), gzip'd tars laid out as upstream's release tarballs (the
//! fixtures, the bench's payload), and `ar` (a .deb's container: debpack's
//! and the synthetic packages'). Every entry is root-owned by number with
//! one mtime and nothing else, so the same entries give the same bytes.
//! (debpack's data archive keeps its own header rules: dpkg's.)

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// One entry of an archive or image the emitter builds itself (the tarball,
/// the sysext image, the installer image's layers), by its path inside it.
pub enum Item {
    Dir(u32),
    Bytes(Vec<u8>, u32),
    File { path: PathBuf, size: u64, mode: u32 },
    Symlink(String),
}

impl Item {
    /// The bytes of content it holds (a file's or a buffer's).
    pub fn size(&self) -> u64 {
        match self {
            Item::Bytes(bytes, _) => bytes.len() as u64,
            Item::File { size, .. } => *size,
            Item::Dir(_) | Item::Symlink(_) => 0,
        }
    }
}

/// Adds the directories above every path of `items` (`a/b/c` → `a`, `a/b`)
/// that it does not hold yet, mode 0755. Paths are relative, without a
/// trailing `/`, so that a directory sorts before what it holds.
pub fn add_parent_dirs(items: &mut BTreeMap<String, Item>) {
    let parents: Vec<String> = items
        .keys()
        .flat_map(|k| {
            let parts: Vec<&str> = k.split('/').collect();
            (1..parts.len()).map(move |n| parts[..n].join("/"))
        })
        .collect();
    for dir in parents {
        items.entry(dir).or_insert(Item::Dir(0o755));
    }
}

/// Appends `item` to a tar stream as `path`: root-owned by number, mtime
/// `mtime`, nothing else (no names, no extended headers), so that the same
/// items give the same bytes.
/// Writes `items` (their parent directories added) as an uncompressed tar
/// at `path`, through a temporary file and a rename, every entry with
/// `mtime`: the OCI archives' container.
pub fn write_tar(path: &Path, mut items: BTreeMap<String, Item>, mtime: u64) -> Result<()> {
    add_parent_dirs(&mut items);
    crate::util::write_atomic(path, 0o644, |file| {
        let mut tar = tar::Builder::new(io::BufWriter::new(file));
        for (name, item) in &items {
            append_tar(&mut tar, name, item, mtime)?;
        }
        let mut file = tar.into_inner().context("finishing the tar stream")?;
        file.flush().context("writing the tar stream")?;
        Ok(())
    })
    .with_context(|| format!("writing {}", path.display()))
}

pub fn append_tar<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    item: &Item,
    mtime: u64,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    let result = match item {
        Item::Dir(mode) => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(*mode);
            header.set_size(0);
            tar.append_data(&mut header, format!("{path}/"), io::empty())
        }
        Item::Bytes(data, mode) => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            header.set_size(data.len() as u64);
            tar.append_data(&mut header, path, data.as_slice())
        }
        Item::File {
            path: src,
            size,
            mode,
        } => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            header.set_size(*size);
            let file = fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
            // take(): a file that grew since staging must not corrupt the
            // archive; a shorter one fails in append_data.
            tar.append_data(&mut header, path, file.take(*size))
        }
        Item::Symlink(target) => {
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            tar.append_link(&mut header, path, target)
        }
    };
    result.with_context(|| format!("adding {path}"))
}

/// A gzip'd tar laid out as upstream's release tarballs are: `members` in
/// the order given, names stored verbatim (the tar crate's path setters
/// drop the leading `./` that upstream's CNI tarball has on every member),
/// root-owned, mode 0755, one mtime; optionally led by a `./` entry.
pub fn release_tgz(
    members: &[(String, &[u8])],
    dot_dir: bool,
    mtime: u64,
    level: flate2::Compression,
) -> Result<Vec<u8>> {
    let gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), level);
    let mut tar = tar::Builder::new(gz);
    if dot_dir {
        let h = verbatim_header("./", tar::EntryType::Directory, 0, mtime)?;
        tar.append(&h, io::empty()).context("writing a tar entry")?;
    }
    for (name, data) in members {
        let h = verbatim_header(name, tar::EntryType::Regular, data.len() as u64, mtime)?;
        tar.append(&h, *data)
            .with_context(|| format!("adding {name} to a tarball"))?;
    }
    let gz = tar.into_inner().context("finishing a tarball")?;
    gz.finish().context("finishing a tarball")
}

/// A tar header whose name is stored as given.
fn verbatim_header(name: &str, kind: tar::EntryType, size: u64, mtime: u64) -> Result<tar::Header> {
    let mut h = tar::Header::new_gnu();
    let field = &mut h.as_old_mut().name;
    if name.len() >= field.len() {
        bail!(
            "tar member name {name:?} is longer than {} bytes",
            field.len() - 1
        );
    }
    field[..name.len()].copy_from_slice(name.as_bytes());
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o755);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h.set_cksum();
    Ok(h)
}

/// An `ar` archive of `members` as dpkg-deb writes a .deb's: mode 0100644,
/// root-owned, `mtime`.
pub fn ar<W: Write>(members: &[(&str, &[u8])], mtime: u64, out: W) -> io::Result<W> {
    let mut ar = ar::Builder::new(out);
    for (name, bytes) in members {
        let mut header = ar::Header::new(name.as_bytes().to_vec(), bytes.len() as u64);
        header.set_mode(0o100644);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        ar.append(&header, *bytes)?;
    }
    ar.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_tarball_keeps_its_names_and_is_reproducible() {
        let members = [
            ("./bridge".to_string(), &b"b"[..]),
            ("./loopback".to_string(), &b"l"[..]),
        ];
        let data = release_tgz(
            &members,
            true,
            1_700_000_000,
            flate2::Compression::default(),
        )
        .unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(data.as_slice()));
        let mut seen = Vec::new();
        for e in archive.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            seen.push((
                String::from_utf8_lossy(&e.path_bytes()).into_owned(),
                h.mode().unwrap(),
                h.uid().unwrap(),
                h.mtime().unwrap(),
            ));
        }
        assert_eq!(
            seen,
            [
                ("./".to_string(), 0o755, 0, 1_700_000_000),
                ("./bridge".to_string(), 0o755, 0, 1_700_000_000),
                ("./loopback".to_string(), 0o755, 0, 1_700_000_000),
            ]
        );
        assert_eq!(
            data,
            release_tgz(
                &members,
                true,
                1_700_000_000,
                flate2::Compression::default()
            )
            .unwrap()
        );
    }
}
