//! The `.deb` container: `debian-binary`, `control.tar.xz` (cargo-deb's
//! control archive, plus `md5sums`) and `data.tar.<codec>`, written in one
//! pass: each file is read once, and its MD5 (for `md5sums`) and its SBOM
//! entry are taken from the bytes that go into the data archive.
//!
//! cargo-deb writes no `md5sums` control member (`dpkg --verify` and debsums
//! need it) and has no hook for extra control files: its finished control
//! tar is read back here and written again with `./md5sums` after
//! `./control`, where dpkg-deb puts it. That detour is this module's only
//! one, and the control archive is compressed once, afterwards.
//!
//! cargo-deb compresses only with xz at level 6 (or 1) or gzip through
//! zopfli, so the data archive is written here, with any codec of
//! `super::codec`. Its layout is cargo-deb's: `./`-prefixed names, parent
//! directories (0755) before their first file, root-owned, every mtime
//! SOURCE_DATE_EPOCH, and cargo-deb's order (non-executables first, then by
//! extension and path), which keeps similar files together for the codec.
//! One difference: the host's own directories (`host_dirs` of
//! pkg/families.toml: /usr, /usr/bin, /opt, …) get no entry, so that dpkg
//! never counts the package among their owners.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};

use cargo_deb::listener::Listener;
use cargo_deb::{BuildEnvironment, CDResult, CargoDebError, PackageConfig};

use super::codec::{self, Codec};
use crate::sbom::contents::Held;

/// Writes the .deb of `deb` to `out` (named `out_path`): its control archive
/// from cargo-deb plus `md5sums`, its data archive from `assets` (`(source,
/// dest, mode)`), without entries for `host_dirs`, compressed with `codec`
/// on `threads` threads. Returns the data archive's regular files.
#[allow(clippy::too_many_arguments)]
pub fn write(
    config: &BuildEnvironment,
    deb: &PackageConfig,
    assets: &[(PathBuf, String, u32)],
    host_dirs: &[String],
    codec: Codec,
    threads: u32,
    epoch: u64,
    out: &mut fs::File,
    out_path: &Path,
    listener: &dyn Listener,
) -> CDResult<Vec<Held>> {
    let mut control =
        cargo_deb::deb::control::ControlArchiveBuilder::new(Vec::new(), epoch, listener);
    control.generate_archive(config, deb)?;
    let control = control.finish()?;

    let mut size = 0;
    for (path, _, _) in assets {
        size += fs::metadata(path)
            .map_err(|e| CargoDebError::IoFile("can't read", e, path.clone()))?
            .len();
    }
    let encoder = codec::encoder(codec, threads, size, Vec::new())?;
    let (mut md5s, mut held) = (Vec::new(), Vec::new());
    let data = data_tar(assets, host_dirs, epoch, encoder, &mut md5s, &mut held)?.finish()?;

    let control = with_md5sums(&control, md5s)
        .map_err(|e| CargoDebError::IoFile("can't add md5sums", e, out_path.into()))?;
    // Small: one thread, xz -9 (what lintian expects of a control archive).
    let control = codec::xz_small(9, &control).map_err(|e| {
        CargoDebError::IoFile("can't compress the control archive", e, out_path.into())
    })?;

    let data_name = format!("data.tar.{}", codec.ext());
    let members: [(&str, &[u8]); 3] = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", &control),
        (&data_name, &data),
    ];
    crate::archive::ar(&members, epoch, io::BufWriter::new(out))
        .and_then(|mut w| w.flush())
        .map_err(|e| CargoDebError::IoFile("can't write the .deb", e, out_path.into()))?;
    Ok(held)
}

/// `control` (an uncompressed tar) with `./md5sums` after `./control`:
/// `md5  path` for each of `md5s`, sorted by path, conffiles left out (dpkg
/// tracks those in its status database, as dh_md5sums does).
fn with_md5sums(control: &[u8], mut md5s: Vec<(String, String)>) -> io::Result<Vec<u8>> {
    let mut entries = Vec::new();
    for entry in tar::Archive::new(control).entries()? {
        let mut entry = entry?;
        let header = entry.header().clone();
        let path = entry.path_bytes().into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data)?;
        entries.push((header, path, data));
    }
    let conffiles: Vec<String> = entries
        .iter()
        .find(|(_, path, _)| path == b"./conffiles")
        .map(|(_, _, data)| {
            String::from_utf8_lossy(data)
                .lines()
                .map(|l| l.trim_start_matches('/').to_string())
                .collect()
        })
        .unwrap_or_default();
    md5s.retain(|(path, _)| !conffiles.contains(path));
    md5s.sort();
    let md5sums: String = md5s
        .iter()
        .map(|(path, md5)| format!("{md5}  {path}\n"))
        .collect();

    let mut rebuilt = tar::Builder::new(Vec::new());
    for (header, path, data) in &entries {
        rebuilt.append(header, data.as_slice())?;
        if path == b"./control" {
            let mut md5 = header.clone();
            // Written by hand: set_path() would drop the "./" every other
            // member name has.
            let name = &mut md5.as_old_mut().name;
            name.fill(0);
            name[..b"./md5sums".len()].copy_from_slice(b"./md5sums");
            md5.set_size(md5sums.len() as u64);
            md5.set_mode(0o644);
            md5.set_cksum();
            rebuilt.append(&md5, md5sums.as_bytes())?;
        }
    }
    rebuilt.into_inner()
}

/// The data archive of `assets` written into `dest`, with an entry for
/// every parent directory of an asset except `host_dirs`; the MD5 of each
/// file is pushed to `md5s` as `(path without "./", hex)`, the file itself
/// to `held`.
fn data_tar<W: Write>(
    assets: &[(PathBuf, String, u32)],
    host_dirs: &[String],
    epoch: u64,
    dest: W,
    md5s: &mut Vec<(String, String)>,
    held: &mut Vec<Held>,
) -> CDResult<W> {
    let host_dirs: BTreeSet<&Path> = host_dirs
        .iter()
        .map(|d| Path::new(d.trim_start_matches('/')))
        .collect();
    let mut order: Vec<&(PathBuf, String, u32)> = assets.iter().collect();
    // cargo-deb's sort_assets_by_type (no asset here is a shared library or
    // was processed by cargo-deb).
    order.sort_by(|a, b| {
        let key = |x: &&(PathBuf, String, u32)| {
            let rel = Path::new(x.1.trim_start_matches('/'));
            (
                x.2 & 0o111 != 0,
                rel.extension().map(|e| e.to_os_string()),
                rel.to_path_buf(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut tar = tar::Builder::new(dest);
    let mut added: BTreeSet<PathBuf> = BTreeSet::new();
    for (src, dest, mode) in order {
        let rel = Path::new(dest.trim_start_matches('/'));
        let parents: Vec<&Path> = rel
            .ancestors()
            .skip(1)
            .take_while(|d| !added.contains(*d))
            .filter(|d| !d.as_os_str().is_empty() && !host_dirs.contains(*d))
            .collect();
        for dir in parents.into_iter().rev() {
            let mut h = header(&mut tar, dir, true)
                .map_err(|e| CargoDebError::IoFile("can't add a directory", e, dir.into()))?;
            h.set_mtime(epoch);
            h.set_size(0);
            h.set_mode(0o755);
            h.set_entry_type(tar::EntryType::Directory);
            h.set_cksum();
            tar.append(&h, io::empty())
                .map_err(|e| CargoDebError::IoFile("can't add a directory", e, dir.into()))?;
            added.insert(dir.to_path_buf());
        }
        let bytes = fs::read(src)
            .map_err(|e| CargoDebError::IoFile("can't read an asset", e, src.clone()))?;
        let mut h = header(&mut tar, rel, false)
            .map_err(|e| CargoDebError::IoFile("can't add a file", e, rel.into()))?;
        h.set_mtime(epoch);
        h.set_mode(*mode);
        h.set_size(bytes.len() as u64);
        h.set_cksum();
        tar.append(&h, bytes.as_slice())
            .map_err(|e| CargoDebError::IoFile("can't add a file", e, src.clone()))?;
        md5s.push((
            rel.to_string_lossy().into_owned(),
            crate::util::hex(&Md5::digest(&bytes)),
        ));
        held.push(Held::new(dest.clone(), &bytes));
    }
    tar.into_inner().map_err(|e| {
        CargoDebError::IoFile(
            "can't finish the data archive",
            e,
            PathBuf::from("data.tar"),
        )
    })
}

/// A header named `./<path>` (directories with a trailing `/`), as cargo-deb
/// writes them: the old header while the name fits, else a GNU header behind
/// a `././@LongLink` entry holding the full name.
fn header<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &Path,
    is_dir: bool,
) -> io::Result<tar::Header> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let slash = is_dir && !bytes.ends_with(b"/");
    let mut h = if bytes.len() < 98 {
        tar::Header::new_old()
    } else {
        tar::Header::new_gnu()
    };
    let field = &mut h.as_old_mut().name;
    field[..2].copy_from_slice(b"./");
    let n = bytes.len().min(98);
    field[2..2 + n].copy_from_slice(&bytes[..n]);
    // Room for the NUL, and for the slash first when one is needed.
    let fits = 98 - n >= if slash { 2 } else { 1 };
    if fits && slash {
        field[2 + n] = b'/';
    }
    if !fits {
        let mut name = b"./".to_vec();
        name.extend_from_slice(bytes);
        if slash {
            name.push(b'/');
        }
        let mut long = tar::Header::new_gnu();
        const LONG_LINK: &[u8] = b"././@LongLink\0";
        long.as_old_mut().name[..LONG_LINK.len()].copy_from_slice(LONG_LINK);
        long.set_mode(0o644);
        long.set_uid(0);
        long.set_gid(0);
        long.set_mtime(0);
        name.push(0);
        long.set_size(name.len() as u64);
        long.set_entry_type(tar::EntryType::new(b'L'));
        long.set_cksum();
        tar.append(&long, name.as_slice())?;
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_directories_get_no_entry() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("content");
        fs::write(&src, b"x").unwrap();
        let assets = [
            (src.clone(), "/opt/cni/bin/bridge".to_string(), 0o755),
            (
                src,
                "/usr/share/doc/kubernetes-cni/copyright".to_string(),
                0o644,
            ),
        ];
        let host_dirs = ["/opt", "/usr", "/usr/share", "/usr/share/doc"].map(String::from);
        let (mut md5s, mut held) = (Vec::new(), Vec::new());
        let tar = data_tar(&assets, &host_dirs, 0, Vec::new(), &mut md5s, &mut held).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| String::from_utf8(e.unwrap().path_bytes().into_owned()).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "./usr/share/doc/kubernetes-cni/",
                "./usr/share/doc/kubernetes-cni/copyright",
                "./opt/cni/",
                "./opt/cni/bin/",
                "./opt/cni/bin/bridge",
            ]
        );
        assert_eq!(md5s.len(), 2);
        assert_eq!(held.len(), 2);
    }
}
