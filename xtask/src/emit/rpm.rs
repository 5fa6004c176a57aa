//! `.rpm`: the header and signature through the `rpm` crate's
//! `PackageBuilder`, the payload streamed here (`with_payload` says why).
//!
//! Payload: `--compression rpm=…`, compressed once, by dist's encoders:
//! zstd reaches rpm >= 4.14 (RHEL/CentOS 8, Fedora 27, SLES 15, openSUSE
//! 15), with `+long` a window of up to 128 MiB, which every such rpm
//! decodes (libzstd's default limit); RHEL 7's rpm 4.11 does not. xz
//! reaches every rpm since 4.7 (RHEL 6), with `+long` a dictionary of up
//! to 64 MiB: rpm's xz decoder allows 100 MiB. An xz payload takes the
//! package's x86 branch filter, as a deb's does; every liblzma decodes it.
//! gz reaches every rpm.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use rpm::{
    BuildConfig, CompressionWithLevel, Dependency, FileOptions, Header, HeaderEntry, IndexData,
    IndexTag, Package, PackageBuilder, RpmFormat, Scriptlet, SignatureHeaderBuilder, Timestamp,
};

use crate::sbom::contents::Held;

use super::codec::{Codec, Kind};
use super::{
    About, Artifacts, Families, Format, FormatCodecs, Input, Options, Run, Staging, Written,
    MAINTAINER,
};
use crate::spec::{ConfigStyle, Dep, Family};
use crate::stage::Staged;

/// The format's name in `--formats` and `--compression`.
pub const NAME: &str = "rpm";

pub struct Rpm;

static ABOUT: About = About {
    name: NAME,
    summary: "one .rpm per package, for dnf, yum and zypper",
    codecs: Some(FormatCodecs {
        // Fedora's and RHEL's codec; with the long window a middle level
        // is smaller than zstd:19 without it, in a fraction of the time
        // (docs/performance.md, "Long windows"); level 12 from the table
        // on the programs built from source ("The real programs").
        default: Codec::long(Kind::Zstd, 12),
        fast: Codec::new(Kind::Zstd, 3),
        help: "zstd:1-19 (default zstd:12+long; rpm >= 4.14), xz:0-9 (rpm >= 4.7), gz:1-9 \
               (every rpm); +long after zstd or xz: a window the size of the payload (zstd up \
               to 128 MiB, xz up to 64 MiB), on one thread",
    }),
    codec_of: NAME,
    artifacts: Artifacts::Package(Family::Rpm),
    families: Families::Own(Family::Rpm),
    staging: Staging::Packages,
    // dist's encoders compress the payload (`with_payload`).
    single_threaded: false,
    carries_images: false,
};

impl Format for Rpm {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        write(input.package()?, run.options, run.out_dir)
    }
}

/// Writes `<name>-<version>.<rpmarch>.rpm` into `out_dir` and returns its
/// path and the files of its payload.
pub fn write(pkg: &Staged, meta: &Options, out_dir: &Path) -> Result<Written> {
    let arch = pkg.arch_name.as_str();
    let out = out_dir.join(format!("{}-{}.{arch}.rpm", pkg.name, pkg.version));
    let epoch =
        u32::try_from(meta.epoch).context("SOURCE_DATE_EPOCH does not fit rpm's 32-bit times")?;
    let codec = meta.codecs.of(NAME).with_filter(pkg.xz_filter);
    // `with_payload` writes the archive and compresses it, once.
    // rpmbuild's names, and the rpmlib feature it requires of the payload
    // (gzip's is every rpm's).
    let (compressor, payload_feature) = match codec.kind {
        Kind::Zstd => ("zstd", Some(("PayloadIsZstd", "5.4.18-1"))),
        Kind::Xz => ("xz", Some(("PayloadIsXz", "5.2-1"))),
        Kind::Gz => ("gzip", None),
    };
    let mut b = PackageBuilder::new(
        &pkg.name,
        &pkg.upstream_version,
        &meta.license,
        arch,
        &pkg.summary,
    );
    // First: every later call reads the config (file mtimes, build time).
    b.using_config(
        BuildConfig::v4()
            .compression(CompressionWithLevel::None)
            .source_date(epoch),
    );
    b.release(pkg.revision.to_string())
        .description(wrap(&pkg.description, 79))
        .url(&meta.homepage)
        .vendor("kubedist")
        .packager(MAINTAINER)
        // Deprecated in Fedora, still read by SUSE tools and rpmlint.
        .group("System/Management")
        // A fixed name: the real host's would make every build differ.
        .build_host("kubedist.invalid")
        .add_changelog_entry(
            format!("{MAINTAINER} - {}", pkg.version),
            format!("- {}", super::changelog_line(pkg)),
            epoch,
        );

    let time = Timestamp(epoch);
    // The crate lays out the header from the files' metadata; their bytes
    // go into the payload here (`with_payload`), so the crate gets none but
    // those it reads itself.
    let mut contents = BTreeMap::new();
    for f in pkg.package_files() {
        let mode = u16::try_from(f.mode).context("file mode")?;
        let mut opts = FileOptions::new(&f.dest)
            .permissions(mode)
            .user("root")
            .group("root")
            .modified_at(time);
        if f.config {
            match pkg.config_style {
                ConfigStyle::Noreplace => opts = opts.config().noreplace(),
                ConfigStyle::Seed => {
                    bail!("pkg/families.toml: rpm has no `seed` config style (use noreplace)")
                }
            }
        }
        // sysusers.d files: the crate derives user() and group()
        // provides from their text.
        let seen_by_crate = if f.dest.starts_with("/usr/lib/sysusers.d/") {
            fs::read(&f.path).with_context(|| format!("reading {}", f.path.display()))?
        } else {
            Vec::new()
        };
        b.with_file_contents(seen_by_crate, opts)
            .with_context(|| format!("adding {} ({})", f.dest, f.path.display()))?;
        contents.insert(
            f.dest.clone(),
            Content::File {
                path: &f.path,
                size: f.size,
            },
        );
    }
    for dir in owned_dirs(pkg) {
        b.with_dir_entry(
            FileOptions::dir(&dir.0)
                .permissions(dir.1)
                .user("root")
                .group("root")
                .modified_at(time),
        )
        .with_context(|| format!("adding directory {}", dir.0))?;
    }
    let license = format!("/usr/share/licenses/{}/LICENSE", pkg.name);
    b.with_file_contents(
        Vec::new(),
        FileOptions::new(&license)
            .permissions(0o644)
            .modified_at(time)
            .license(),
    )?;
    contents.insert(license, Content::Bytes(pkg.license.as_bytes()));

    for dep in &pkg.depends {
        b.requires(dependency(dep)?);
    }
    if let Some((feature, version)) = payload_feature {
        // The crate requires PayloadIsZstd only of a payload it compressed
        // itself (and sorts the requirements: the header is the same).
        b.requires(Dependency::rpmlib(feature, version));
    }
    for dep in &pkg.recommends {
        b.recommends(dependency(dep)?);
    }
    for dep in &pkg.provides {
        b.provides(dependency(dep)?);
    }
    for dep in &pkg.conflicts {
        b.conflicts(dependency(dep)?);
    }

    for script in &pkg.scripts {
        let scriptlet = Scriptlet::new(script.text.as_str());
        match script.name.as_str() {
            "post" => b.post_install_script(scriptlet),
            "postun" => b.post_uninstall_script(scriptlet),
            "preun" => b.pre_uninstall_script(scriptlet),
            other => bail!("{}: no rpm scriptlet is called {other}", pkg.name),
        };
    }

    let package = b
        .build()
        .with_context(|| format!("building {}", out.display()))?;
    let (package, held) = with_payload(package, &contents, compressor, codec, meta.threads)
        .with_context(|| format!("building {}", out.display()))?;
    crate::util::write_atomic(&out, 0o644, |file| {
        package
            .write(file)
            .with_context(|| format!("writing {}", out.display()))
    })?;
    Ok(Written {
        path: out,
        held: Some(held),
    })
}

/// Where a regular file's bytes come from, by its path in the package.
enum Content<'a> {
    File { path: &'a Path, size: u64 },
    Bytes(&'a [u8]),
}

impl Content<'_> {
    fn size(&self) -> u64 {
        match self {
            Content::File { size, .. } => *size,
            Content::Bytes(bytes) => bytes.len() as u64,
        }
    }

    fn read(&self) -> Result<Vec<u8>> {
        match self {
            Content::Bytes(bytes) => Ok(bytes.to_vec()),
            Content::File { path, size } => {
                let bytes =
                    fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                if bytes.len() as u64 != *size {
                    bail!("{} changed since it was staged", path.display());
                }
                Ok(bytes)
            }
        }
    }
}

/// `package`, built by the crate with its files empty, with the payload
/// its header describes: the cpio archive of `contents`, compressed once
/// as `codec` says, and the header's file sizes, file digests, payload
/// digests and compressor made to match. Also returns the regular files
/// the payload holds, for the SBOM.
///
/// Why not the crate's own payload: it takes only a level (no long window,
/// one thread, a flush after every file: in libzstd's multithreaded mode
/// each flush ends a job), and it holds the whole archive in memory and
/// hashes it six times, four for a v6 package's digests that a v4 header
/// never carries (docs/performance.md). The archive is written here in
/// one pass, the crate's layout kept: rpm's "newc" cpio, entries in the
/// header's order, `./`-prefixed names, inode numbers and modes from the
/// header. The header is rebuilt through the crate (`Header::from_entries`,
/// the path its builder takes); the rpmlib requirement of a zstd or xz
/// payload went through the builder (`write`). The signature header is
/// then computed anew as the builder computes it.
fn with_payload(
    mut package: Package,
    contents: &BTreeMap<String, Content>,
    compressor: &str,
    codec: Codec,
    threads: u32,
) -> Result<(Package, Vec<Held>)> {
    let header = &package.metadata.header;
    let strings = |tag: IndexTag| -> Result<Vec<String>> {
        match header.entry(tag)? {
            IndexData::StringArray(v) => Ok(v),
            other => bail!("rpm header: {tag:?} is {other:?}"),
        }
    };
    let ints = |tag: IndexTag| -> Result<Vec<u32>> {
        match header.entry(tag)? {
            IndexData::Int32(v) => Ok(v),
            IndexData::Int16(v) => Ok(v.into_iter().map(u32::from).collect()),
            other => bail!("rpm header: {tag:?} is {other:?}"),
        }
    };
    let (dirs, bases) = (
        strings(IndexTag::RPMTAG_DIRNAMES)?,
        strings(IndexTag::RPMTAG_BASENAMES)?,
    );
    let dir_of = ints(IndexTag::RPMTAG_DIRINDEXES)?;
    let (modes, inodes) = (
        ints(IndexTag::RPMTAG_FILEMODES)?,
        ints(IndexTag::RPMTAG_FILEINODES)?,
    );
    let (mtimes, rdevs) = (
        ints(IndexTag::RPMTAG_FILEMTIMES)?,
        ints(IndexTag::RPMTAG_FILERDEVS)?,
    );
    let paths: Vec<String> = bases
        .iter()
        .zip(&dir_of)
        .map(|(base, &dir)| {
            Ok(format!(
                "{}{base}",
                dirs.get(dir as usize)
                    .context("rpm header: a file's directory index")?
            ))
        })
        .collect::<Result<_>>()?;
    // Names in the archive: rpm's `./`-prefixed paths.
    let names: Vec<String> = paths.iter().map(|p| format!(".{p}")).collect();
    let regular = |i: usize| modes[i] & 0o170000 == 0o100000;
    let sizes: Vec<u64> = (0..paths.len())
        .map(|i| match regular(i) {
            true => contents
                .get(&paths[i])
                .map(Content::size)
                .context("rpm header: a file it was not given"),
            false => Ok(0),
        })
        .collect::<Result<_>>()?;
    let total: u64 = sizes.iter().sum();
    let size = u32::try_from(total)
        .context("over 4 GiB of files: rpm's large-file payload is not written here")?;

    let entry_len = |name: &str, size: u64| {
        cpio::padded(cpio::HEADER + name.len() + 1) as u64 + cpio::padded(size as usize) as u64
    };
    let archive_len: u64 = names
        .iter()
        .zip(&sizes)
        .map(|(name, &s)| entry_len(name, s))
        .sum::<u64>()
        + entry_len(cpio::TRAILER, 0);
    let mut archive = Hashing {
        inner: super::codec::encoder(codec, threads, archive_len, Vec::new())?,
        hasher: crate::digest::Hasher::new(crate::digest::Algo::Sha256),
    };
    let (mut held, mut digests) = (Vec::new(), Vec::with_capacity(paths.len()));
    for (i, path) in paths.iter().enumerate() {
        let entry = cpio::Entry {
            ino: inodes[i],
            mode: modes[i],
            mtime: mtimes[i],
            rdev: rdevs[i],
            size: sizes[i] as u32,
        };
        entry.write_header(&mut archive, &names[i])?;
        if !regular(i) {
            digests.push(String::new());
            continue;
        }
        let bytes = contents[path].read()?;
        archive.write_all(&bytes)?;
        archive.write_all(cpio::padding(bytes.len()))?;
        let file = Held::new(path.clone(), &bytes);
        digests.push(file.sha256.clone());
        held.push(file);
    }
    cpio::Entry::TRAILER.write_header(&mut archive, cpio::TRAILER)?;
    let raw_digest = archive.hasher.finish();
    if raw_digest.size != archive_len {
        bail!(
            "the rpm archive is {} bytes, not the {archive_len} laid out",
            raw_digest.size
        );
    }
    let payload = archive.inner.finish()?;
    let digest = crate::digest::sha256_bytes(&payload);

    let entries = header
        .get_all_entries()?
        .into_iter()
        .filter(|(tag, _)| *tag != IndexTag::RPMTAG_HEADERIMMUTABLE as u32)
        .map(|(tag, data)| {
            let is = |t: IndexTag| tag == t as u32;
            let data = match tag {
                _ if is(IndexTag::RPMTAG_SIZE) => IndexData::Int32(vec![size]),
                _ if is(IndexTag::RPMTAG_FILESIZES) => {
                    IndexData::Int32(sizes.iter().map(|&s| s as u32).collect())
                }
                _ if is(IndexTag::RPMTAG_FILEDIGESTS) => IndexData::StringArray(digests.clone()),
                _ if is(IndexTag::RPMTAG_PAYLOADFLAGS) => {
                    IndexData::StringTag(codec.level.to_string())
                }
                _ if is(IndexTag::RPMTAG_PAYLOADSHA256) => {
                    IndexData::StringArray(vec![digest.clone()])
                }
                _ if is(IndexTag::RPMTAG_PAYLOADSHA256ALT) => {
                    IndexData::StringArray(vec![raw_digest.sha256.clone()])
                }
                _ => data,
            };
            HeaderEntry::new(tag, data)
        })
        .chain([HeaderEntry::new(
            IndexTag::RPMTAG_PAYLOADCOMPRESSOR as u32,
            IndexData::StringTag(compressor.to_string()),
        )]);
    package.metadata.header = Header::from_entries(entries, IndexTag::RPMTAG_HEADERIMMUTABLE);
    let header_bytes = package.metadata.header_bytes()?;
    package.metadata.signature = SignatureHeaderBuilder::new()
        .format(RpmFormat::V4)
        .reserved_space(Some(SignatureHeaderBuilder::DEFAULT_RESERVED_SPACE))
        .set_content_length((header_bytes.len() + payload.len()) as u64)
        .calculate_digests(&header_bytes)
        .build()?;
    package.payload = payload;
    Ok((package, held))
}

/// A writer that hashes what goes through it.
struct Hashing<W> {
    inner: W,
    hasher: crate::digest::Hasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// rpm's payload archive: cpio's "newc" format (070701), which rpm writes
/// for packages whose files are each under 4 GiB: a 110-byte header of
/// 8-digit hex fields, the NUL-terminated name, the data, each padded to 4
/// bytes; a `TRAILER!!!` entry ends it.
mod cpio {
    use std::io::{self, Write};

    pub const HEADER: usize = 110;
    pub const TRAILER: &str = "TRAILER!!!";

    /// `len` rounded up to a multiple of 4.
    pub fn padded(len: usize) -> usize {
        len.next_multiple_of(4)
    }

    /// The NULs after `len` bytes up to the next multiple of 4.
    pub fn padding(len: usize) -> &'static [u8] {
        &[0; 4][..padded(len) - len]
    }

    pub struct Entry {
        pub ino: u32,
        pub mode: u32,
        pub mtime: u32,
        pub rdev: u32,
        pub size: u32,
    }

    impl Entry {
        pub const TRAILER: Entry = Entry {
            ino: 0,
            mode: 0,
            mtime: 0,
            rdev: 0,
            size: 0,
        };

        /// The entry's header and name, padded: its data comes next.
        /// Owner and group are 0 (rpm takes them from its header's names),
        /// one link, device 0:0.
        pub fn write_header(&self, w: &mut impl Write, name: &str) -> io::Result<()> {
            let fields = [
                self.ino,
                self.mode,
                0,
                0,
                1,
                self.mtime,
                self.size,
                0,
                0,
                self.rdev >> 8,
                self.rdev & 0xff,
                name.len() as u32 + 1,
                0,
            ];
            let mut header = String::with_capacity(padded(HEADER + name.len() + 1));
            header.push_str("070701");
            for field in fields {
                header.push_str(&format!("{field:08x}"));
            }
            header.push_str(name);
            header.push('\0');
            let len = header.len();
            w.write_all(header.as_bytes())?;
            w.write_all(padding(len))
        }
    }
}

/// The directories the package owns, `(path, mode)`: its declared `dirs`, its
/// license directory, the drop-in directories of systemd units
/// (`<unitdir>/<unit>.d`), which exist only for our units, and the shell
/// completion directories it puts files in (shared with the shells'
/// packages, which may not be installed). Never directories every host has
/// such as /usr/bin or /etc: the filesystem package owns those.
fn owned_dirs(pkg: &Staged) -> Vec<(String, u16)> {
    let mut dirs: Vec<(String, u16)> = pkg
        .dirs
        .iter()
        .map(|d| (d.path.clone(), d.mode as u16))
        .collect();
    dirs.push((format!("/usr/share/licenses/{}", pkg.name), 0o755));
    dirs.extend(pkg.completion_dirs.iter().map(|d| (d.clone(), 0o755)));
    let unitdir = pkg.unitdir.trim_end_matches('/');
    for f in pkg.package_files() {
        if let Some(parent) = Path::new(&f.dest).parent().and_then(Path::to_str) {
            let in_unitdir = Path::new(parent).parent() == Some(Path::new(unitdir));
            if in_unitdir && parent.ends_with(".d") {
                dirs.push((parent.to_string(), 0o755));
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `text` with every line longer than `width` broken at spaces: rpm shows
/// %description verbatim (no reflow as in a deb's control file), and
/// rpmlint wants it to fit a terminal.
fn wrap(text: &str, width: usize) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut cur = String::new();
        for word in line.split(' ') {
            if !cur.is_empty() && cur.len() + 1 + word.len() > width {
                out.push(std::mem::take(&mut cur));
            } else if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        out.push(cur);
    }
    out.join("\n")
}

fn dependency(dep: &Dep) -> Result<Dependency> {
    Ok(match &dep.constraint {
        None => Dependency::any(&dep.name),
        Some((op, v)) => match op.as_str() {
            ">=" => Dependency::greater_eq(&dep.name, v),
            "<=" => Dependency::less_eq(&dep.name, v),
            "=" => Dependency::eq(&dep.name, v),
            ">" => Dependency::greater(&dep.name, v),
            "<" => Dependency::less(&dep.name, v),
            other => bail!("dependency {}: unknown operator {other}", dep.rpm()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_wrap_at_word_boundaries() {
        let text = "First paragraph.\n\nTEST BUILD, not for production: kubelet is a recorder stand-in (kubedist-standin) that logs its arguments.";
        let wrapped = wrap(text, 79);
        assert!(wrapped.lines().all(|l| l.len() <= 79), "{wrapped}");
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert!(wrapped.starts_with("First paragraph.\n\nTEST BUILD"));
        assert_eq!(wrap("short", 79), "short");
    }
}
