//! `.deb` through cargo-deb used as a library.
//!
//! cargo-deb is manifest-driven: its `BuildEnvironment`/`PackageConfig` can
//! only be made from a Cargo.toml. So each package gets a throwaway crate
//! (empty lib.rs, empty `[workspace]` so that cargo does not look for an
//! enclosing one) whose `[package.metadata.deb]` lists the staged files as
//! assets; after `from_manifest` the public fields are set to what cargo-deb
//! cannot know (version verbatim with its revision, architecture, timestamp,
//! dependencies). cargo-deb writes the control archive; the data archive,
//! with the codec of `--compression`, comes from `super::debpack`.
//!
//! cargo-deb writes no `md5sums` control member, which `dpkg --verify` and
//! debsums need. It has no hook for extra control files, so the finished .deb
//! is rewritten: the small control archive is unpacked and packed again with
//! md5sums added, the data archive is copied byte for byte. The digests are
//! taken from the data archive itself, so they describe exactly what dpkg
//! unpacks, whatever cargo-deb did to the inputs on the way.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use cargo_deb::config::{BuildOptions, ExtendedDescription};
use cargo_deb::listener::Listener;
use cargo_deb::BuildEnvironment;
use md5::{Digest, Md5};

use super::{Meta, ScriptValues, MAINTAINER};
use crate::fetch::digest::hex;
use crate::spec::{ConfigStyle, FamilyConf};
use crate::stage::Staged;

/// Where a `config = true` file's pristine default lives in a deb.
pub const SEED_DIR: &str = "/usr/share/kubedist/seed";

/// Writes `<name>_<version>_<debarch>.deb` into `out_dir`, using `work` as
/// scratch space, and returns its path.
pub fn write(
    pkg: &Staged,
    fam: &FamilyConf,
    meta: &Meta,
    work: &Path,
    out_dir: &Path,
) -> Result<PathBuf> {
    let arch = fam.arch_name(pkg.arch)?;
    let out = out_dir.join(format!("{}_{}_{arch}.deb", pkg.name, pkg.version));
    let crate_dir = work.join(format!("deb-{}-{}", pkg.name, pkg.arch));
    fs::create_dir_all(crate_dir.join("scripts"))
        .with_context(|| format!("creating {}", crate_dir.display()))?;

    let docs = crate_dir.join("doc");
    fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    let copyright = docs.join("copyright");
    fs::write(&copyright, copyright_text(pkg, meta))
        .with_context(|| format!("writing {}", copyright.display()))?;
    let changelog = docs.join("changelog.Debian.gz");
    fs::write(&changelog, changelog_gz(pkg, meta)?)
        .with_context(|| format!("writing {}", changelog.display()))?;

    // (source, dest, mode) of every file in the data archive.
    let mut assets: Vec<(PathBuf, String, u32)> = Vec::new();
    let mut seeds = Vec::new();
    for f in pkg.package_files() {
        let dest = match (f.config, fam.config) {
            (true, ConfigStyle::Seed) => {
                seeds.push(format!("{}:{:04o}", f.dest, f.mode));
                format!("{SEED_DIR}{}", f.dest)
            }
            // Files under /etc become dpkg conffiles (cargo-deb does that).
            _ => f.dest.clone(),
        };
        assets.push((f.path.clone(), dest, f.mode));
    }
    let doc_dir = format!("/usr/share/doc/{}", pkg.name);
    // cargo-deb also resolves a copyright of its own at this path, which
    // would win over an asset; the manifest's `license-file` names ours, so
    // both are the same text (copied line by line: it already carries the
    // machine-readable header).
    assets.push((copyright, format!("{doc_dir}/copyright"), 0o644));
    assets.push((changelog, format!("{doc_dir}/changelog.Debian.gz"), 0o644));
    assets.sort_by(|a, b| a.1.cmp(&b.1));

    let values = ScriptValues::new(pkg, &fam.unitdir);
    let seeds = seeds.join(" ");
    let has_scripts = values.needed() || !seeds.is_empty();
    if has_scripts {
        let fill = [
            ("PACKAGE", pkg.name.clone()),
            ("DIRS", values.dirs.clone()),
            ("SEEDS", seeds.clone()),
            ("UNITS", values.units.clone()),
            ("RELOAD", values.reload.to_string()),
        ];
        let mut scripts = vec!["postinst", "postrm"];
        if !values.units.is_empty() {
            scripts.push("prerm");
        }
        for name in scripts {
            let text = meta.script(&format!("deb-{name}"), &fill)?;
            let path = crate_dir.join("scripts").join(name);
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }

    let manifest = crate_dir.join("Cargo.toml");
    fs::write(&manifest, manifest_text(pkg, meta, &assets, has_scripts)?)
        .with_context(|| format!("writing {}", manifest.display()))?;
    fs::write(crate_dir.join("lib.rs"), "").context("writing lib.rs")?;

    let listener = Collect::default();
    let unsigned = crate_dir.join("unsigned.deb");
    if let Err(e) = build(
        pkg,
        arch,
        meta,
        &assets,
        &fam.host_dirs,
        &manifest,
        &unsigned,
        &listener,
    ) {
        let warnings = listener
            .warnings
            .lock()
            .map(|w| w.join("; "))
            .unwrap_or_default();
        bail!(
            "cargo-deb failed on {}: {}{}",
            manifest.display(),
            e.to_string().trim_end(),
            if warnings.is_empty() {
                String::new()
            } else {
                format!(" (warnings: {warnings})")
            }
        );
    }

    super::write_atomic(&out, |file| add_md5sums(&unsigned, meta.epoch, file))
        .with_context(|| format!("adding md5sums to {}", out.display()))?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn build(
    pkg: &Staged,
    arch: &str,
    meta: &Meta,
    assets: &[(PathBuf, String, u32)],
    host_dirs: &[String],
    manifest: &Path,
    out: &Path,
    listener: &Collect,
) -> cargo_deb::CDResult<()> {
    let (config, mut debs) = BuildEnvironment::from_manifest(
        BuildOptions {
            manifest_path: Some(manifest),
            ..BuildOptions::default()
        },
        listener,
    )?;
    let mut deb = debs.pop().ok_or("cargo-deb found no package")?;
    deb.deb_version = pkg.version.clone();
    deb.architecture = arch.to_string();
    deb.default_timestamp = meta.epoch;
    // Explicit, never `$auto`: dpkg-shlibdeps has nothing to say about static
    // Go binaries, and the dependencies are part of the package's contract.
    let list = |deps: &[crate::spec::Dep]| {
        (!deps.is_empty()).then(|| deps.iter().map(|d| d.deb()).collect::<Vec<_>>().join(", "))
    };
    deb.resolved_depends = list(&pkg.depends);
    deb.recommends = list(&pkg.recommends);
    deb.extended_description = ExtendedDescription::String(pkg.description.clone());
    deb.resolve_assets(listener)?;
    deb.sort_assets_by_type();
    let codec = meta.codecs.deb;
    super::debpack::write(
        &config,
        &deb,
        assets,
        host_dirs,
        codec,
        meta.threads,
        meta.epoch,
        out,
        listener,
    )
}

/// The throwaway crate's Cargo.toml.
fn manifest_text(
    pkg: &Staged,
    meta: &Meta,
    assets: &[(PathBuf, String, u32)],
    scripts: bool,
) -> Result<String> {
    use toml::Value;
    let mut list = Vec::new();
    for (src, dest, mode) in assets {
        let src = src
            .to_str()
            .with_context(|| format!("{}: not a UTF-8 path", src.display()))?;
        // cargo-deb treats sources as glob patterns.
        if src.contains(['*', '?', '[', ']', '{', '}']) {
            bail!("{src}: the work directory's path must not contain glob characters");
        }
        list.push(Value::Array(vec![
            src.into(),
            dest.as_str().into(),
            format!("{mode:o}").into(),
        ]));
    }
    let mut deb = toml::Table::new();
    deb.insert("name".into(), pkg.name.as_str().into());
    deb.insert("maintainer".into(), MAINTAINER.into());
    deb.insert("section".into(), "admin".into());
    deb.insert("priority".into(), "optional".into());
    deb.insert("assets".into(), Value::Array(list));
    deb.insert("license-file".into(), "doc/copyright".into());
    if scripts {
        deb.insert("maintainer-scripts".into(), "scripts".into());
    }
    let mut package = toml::Table::new();
    package.insert("name".into(), "kubedist-staged".into());
    package.insert("version".into(), "0.0.0".into());
    package.insert("edition".into(), "2021".into());
    package.insert("license".into(), "Apache-2.0".into());
    package.insert("description".into(), pkg.summary.as_str().into());
    package.insert("homepage".into(), meta.homepage.as_str().into());
    package.insert("publish".into(), false.into());
    let mut metadata = toml::Table::new();
    metadata.insert("deb".into(), deb.into());
    package.insert("metadata".into(), metadata.into());
    let mut lib = toml::Table::new();
    lib.insert("path".into(), "lib.rs".into());
    let mut doc = toml::Table::new();
    doc.insert("package".into(), package.into());
    doc.insert("lib".into(), lib.into());
    doc.insert("workspace".into(), toml::Table::new().into());
    toml::to_string(&doc).context("rendering the throwaway Cargo.toml")
}

/// `/usr/share/doc/<pkg>/copyright` in Debian's machine-readable format. The
/// license text itself is in /usr/share/common-licenses on every Debian host.
fn copyright_text(pkg: &Staged, meta: &Meta) -> String {
    format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: {up}
Source: {source}
Comment: Upstream release binaries, packaged by kubedist ({home}).

Files: *
Copyright: {copyright}
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the \"License\");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
     http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an \"AS IS\" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in \"/usr/share/common-licenses/Apache-2.0\".
",
        up = pkg.version_from,
        source = pkg.upstream_url,
        copyright = pkg.copyright,
        home = meta.homepage,
    )
}

/// A one-entry Debian changelog, gzipped reproducibly (no name, no mtime,
/// maximum compression as lintian expects).
fn changelog_gz(pkg: &Staged, meta: &Meta) -> Result<Vec<u8>> {
    let text = format!(
        "{name} ({version}) stable; urgency=medium\n\n  * {line}\n\n -- {MAINTAINER}  {date}\n",
        name = pkg.name,
        version = pkg.version,
        line = super::changelog_line(pkg),
        date = super::rfc2822(meta.epoch),
    );
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    gz.write_all(text.as_bytes())?;
    Ok(gz.finish()?)
}

/// The `md5sums` control member of a data archive (`data.tar.<ext>`):
/// `md5  path` for every regular file, sorted by path, conffiles left out
/// (dpkg tracks those in the status database, as dh_md5sums does).
fn md5sums_of_data(name: &str, data: &[u8], conffiles: &[String]) -> Result<String> {
    let mut lines = Vec::new();
    let mut archive = tar::Archive::new(decompress(name, data)?);
    for entry in archive
        .entries()
        .with_context(|| format!("reading {name}"))?
    {
        let mut entry = entry.with_context(|| format!("reading {name}"))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = String::from_utf8(entry.path_bytes().into_owned())
            .with_context(|| format!("{name}: a member name is not UTF-8"))?;
        let path = path
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_string();
        if conffiles.iter().any(|c| c.trim_start_matches('/') == path) {
            continue;
        }
        let mut hasher = Md5::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = entry
                .read(&mut buf)
                .with_context(|| format!("reading {name}: {path}"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        lines.push((path, hex(&hasher.finalize())));
    }
    lines.sort();
    Ok(lines
        .iter()
        .map(|(path, md5)| format!("{md5}  {path}\n"))
        .collect())
}

/// A reader of the tar inside `name` (`*.tar.xz`, `*.tar.zst`, `*.tar.gz` or
/// `*.tar`).
fn decompress<'a>(name: &str, data: &'a [u8]) -> Result<Box<dyn Read + 'a>> {
    Ok(match name.rsplit_once(".tar") {
        Some((_, ".xz")) => Box::new(xz2::read::XzDecoder::new(data)),
        Some((_, ".zst")) => Box::new(zstd::stream::read::Decoder::new(data)?),
        Some((_, ".gz")) => Box::new(flate2::read::GzDecoder::new(data)),
        Some((_, "")) => Box::new(data),
        _ => bail!("{name}: unsupported compression"),
    })
}

/// `control` compressed the way the archive `name` is.
fn compress(name: &str, control: &[u8]) -> Result<Vec<u8>> {
    Ok(match name.rsplit_once(".tar") {
        Some((_, ".xz")) => {
            let mut xz = xz2::write::XzEncoder::new(Vec::new(), 9);
            xz.write_all(control)?;
            xz.finish()?
        }
        Some((_, ".gz")) => {
            let mut gz = flate2::GzBuilder::new()
                .mtime(0)
                .write(Vec::new(), flate2::Compression::best());
            gz.write_all(control)?;
            gz.finish()?
        }
        Some((_, "")) => control.to_vec(),
        _ => bail!("{name}: unsupported compression"),
    })
}

/// Copies the .deb at `unsigned` to `out` with `md5sums` added to its control
/// archive (right after `control`, where dpkg-deb puts it).
fn add_md5sums(unsigned: &Path, epoch: u64, out: &mut fs::File) -> Result<()> {
    let input =
        fs::File::open(unsigned).with_context(|| format!("reading {}", unsigned.display()))?;
    let mut ar_in = ar::Archive::new(input);
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    while let Some(entry) = ar_in.next_entry() {
        let mut entry = entry.with_context(|| format!("reading {}", unsigned.display()))?;
        let name = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data)?;
        members.push((name, data));
    }
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    if names.len() != 3
        || names[0] != "debian-binary"
        || !names[1].starts_with("control.tar")
        || !names[2].starts_with("data.tar")
    {
        bail!("{}: unexpected members {names:?}", unsigned.display());
    }
    let control_name = members[1].0.clone();

    let mut control_tar = Vec::new();
    decompress(&control_name, &members[1].1)?
        .read_to_end(&mut control_tar)
        .with_context(|| format!("unpacking {control_name}"))?;
    let mut entries = Vec::new();
    let mut archive = tar::Archive::new(control_tar.as_slice());
    for entry in archive.entries().context("reading control.tar")? {
        let mut entry = entry.context("reading control.tar")?;
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
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let md5sums = md5sums_of_data(&members[2].0, &members[2].1, &conffiles)
        .with_context(|| format!("{}", unsigned.display()))?;

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
    let control_tar = rebuilt.into_inner().context("packing control.tar")?;
    members[1].1 = compress(&control_name, &control_tar)
        .with_context(|| format!("compressing {control_name}"))?;

    let mut ar_out = ar::Builder::new(out);
    for (name, data) in &members {
        let mut header = ar::Header::new(name.as_bytes().to_vec(), data.len() as u64);
        // What dpkg-deb and cargo-deb write.
        header.set_mode(0o100644);
        header.set_mtime(epoch);
        header.set_uid(0);
        header.set_gid(0);
        ar_out.append(&header, data.as_slice())?;
    }
    Ok(())
}

/// Keeps cargo-deb's warnings (shown only if the build fails) and drops its
/// progress chatter.
#[derive(Default)]
struct Collect {
    warnings: Mutex<Vec<String>>,
}

impl Listener for Collect {
    fn warning(&self, s: String) {
        if let Ok(mut w) = self.warnings.lock() {
            w.push(s);
        }
    }
    fn info(&self, _s: String) {}
    fn progress(&self, _operation: &str, _detail: String) {}
    fn generated_archive(&self, _path: &Path) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data archive with a file, a directory, a symlink and a conffile.
    fn data_tar() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, body: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            if kind == tar::EntryType::Symlink {
                h.set_link_name("kubelet").unwrap();
            }
            b.append_data(&mut h, path, body).unwrap();
        };
        add("./usr/", tar::EntryType::Directory, b"");
        add(
            "./usr/share/doc/kubelet/copyright",
            tar::EntryType::Regular,
            b"shipped\n",
        );
        add("./usr/bin/kubelet", tar::EntryType::Regular, b"binary");
        add("./usr/bin/k", tar::EntryType::Symlink, b"");
        add("./etc/kubelet.conf", tar::EntryType::Regular, b"conf");
        b.into_inner().unwrap()
    }

    fn md5_hex(data: &[u8]) -> String {
        hex(&Md5::digest(data))
    }

    #[test]
    fn md5sums_describe_the_bytes_in_the_data_archive() {
        let tar = data_tar();
        let conffiles = vec!["/etc/kubelet.conf".to_string()];
        let expected = format!(
            "{}  usr/bin/kubelet\n{}  usr/share/doc/kubelet/copyright\n",
            md5_hex(b"binary"),
            md5_hex(b"shipped\n")
        );
        let xz = compress("data.tar.xz", &tar).unwrap();
        assert_eq!(
            md5sums_of_data("data.tar.xz", &xz, &conffiles).unwrap(),
            expected
        );
        let gz = compress("data.tar.gz", &tar).unwrap();
        assert_eq!(
            md5sums_of_data("data.tar.gz", &gz, &conffiles).unwrap(),
            expected
        );
        assert!(md5sums_of_data("data.tar.lz", &tar, &conffiles).is_err());
    }
}
