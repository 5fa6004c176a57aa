//! `.rpm` through the `rpm` crate's `PackageBuilder`.
//!
//! Payload: `--compression rpm=…`, compressed once, by dist's encoders
//! (`compress`): zstd reaches rpm >= 4.14 (RHEL/CentOS 8, Fedora 27,
//! SLES 15, openSUSE 15), with `+long` a window of up to 128 MiB, which
//! every such rpm decodes (libzstd's default limit); RHEL 7's rpm 4.11
//! does not. xz reaches every rpm since 4.7 (RHEL 6), with `+long` a
//! dictionary of up to 64 MiB: rpm's xz decoder allows 100 MiB. An xz
//! payload takes the package's x86 branch filter, as a deb's does; every
//! liblzma decodes it. gz reaches every rpm.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rpm::{
    BuildConfig, CompressionWithLevel, Dependency, FileOptions, Header, HeaderEntry, IndexData,
    IndexTag, Package, PackageBuilder, RpmFormat, Scriptlet, SignatureHeaderBuilder, Timestamp,
};

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
    // dist's encoders compress the payload (`compress`).
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
    // The crate writes the archive as it is; `compress` compresses it once.
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
        b.with_file(&f.path, opts)
            .with_context(|| format!("adding {} ({})", f.dest, f.path.display()))?;
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
    b.with_file_contents(
        pkg.license.as_bytes().to_vec(),
        FileOptions::new(format!("/usr/share/licenses/{}/LICENSE", pkg.name))
            .permissions(0o644)
            .modified_at(time)
            .license(),
    )?;

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
    // The archive as the crate wrote it, before its compression.
    let held = crate::sbom::contents::of_rpm(&package)
        .with_context(|| format!("reading the archive of {}", out.display()))?;
    let package = compress(package, compressor, codec, meta.threads)
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

/// `package`, built with its archive uncompressed, with the archive
/// compressed as `codec` says, `compressor` named in its header.
///
/// The rpm crate compresses the payload itself and takes only a level: no
/// long window, one thread, and a flush after every file (in libzstd's
/// multithreaded mode each flush ends a job). So the crate writes the
/// archive as it is and dist's encoders compress it, once. The header is
/// rebuilt through the crate (`Header::from_entries`, the path its builder
/// takes) with every entry the crate wrote, the level and the payload's
/// digest changed and the compressor's name added; the rpmlib requirement
/// of a zstd or xz payload went through the builder (`write`). The
/// signature header is then computed anew as the builder computes it.
fn compress(
    mut package: Package,
    compressor: &str,
    codec: Codec,
    threads: u32,
) -> Result<Package, rpm::Error> {
    let payload = super::codec::compress(codec, threads, &package.payload)?;
    let digest = crate::digest::sha256_bytes(&payload);
    let entries = package
        .metadata
        .header
        .get_all_entries()?
        .into_iter()
        .filter(|(tag, _)| *tag != IndexTag::RPMTAG_HEADERIMMUTABLE as u32)
        .map(|(tag, data)| {
            let data = match tag {
                t if t == IndexTag::RPMTAG_PAYLOADFLAGS as u32 => {
                    IndexData::StringTag(codec.level.to_string())
                }
                t if t == IndexTag::RPMTAG_PAYLOADSHA256 as u32 => {
                    IndexData::StringArray(vec![digest.clone()])
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
    let header = package.metadata.header_bytes()?;
    package.metadata.signature = SignatureHeaderBuilder::new()
        .format(RpmFormat::V4)
        .reserved_space(Some(SignatureHeaderBuilder::DEFAULT_RESERVED_SPACE))
        .set_content_length((header.len() + payload.len()) as u64)
        .calculate_digests(&header)
        .build()?;
    package.payload = payload;
    Ok(package)
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
