//! The native tools a packager would script, over the same trees as dist:
//! `dpkg-deb --build`, `rpmbuild -bb` from a generated spec, and
//! `tar | gzip` (or xz, zstd), with the same codecs and levels.
//!
//! The trees are unpacked from dist's own artifacts (`dpkg-deb -R`,
//! `rpm2cpio | cpio`, `tar -x`), so both sides pack the same files with the
//! same metadata; only the packing is timed, one tool after another as a
//! script runs them.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{self, Sample};
use crate::emit;
use crate::emit::codec::{Codec, Codecs, Kind};

/// The native tools' results per format: `(time, output bytes, count)`.
#[derive(Default)]
pub struct Native {
    pub deb: (Sample, u64, usize),
    pub rpm: (Sample, u64, usize),
    pub tar: (Sample, u64, usize),
    /// `tar | pigz` instead of `tar | gzip`, when pigz is installed and the
    /// tarball is gzip: for reference, not in the total.
    pub tar_pigz: Option<(Sample, u64)>,
}

impl Native {
    pub fn total(&self) -> (Sample, u64) {
        (
            self.deb.0 + self.rpm.0 + self.tar.0,
            self.deb.1 + self.rpm.1 + self.tar.1,
        )
    }
}

/// Unpacks every artifact of `dist` under `work` and packs it again with the
/// native tools, timing the packing.
pub fn run(dist: &Path, work: &Path, codecs: &Codecs, epoch: u64, logs: &Path) -> Result<Native> {
    for tool in ["dpkg-deb", "rpmbuild", "rpm2cpio", "cpio", "rpm", "tar"] {
        if !crate::util::on_path(tool) {
            bail!("{tool} is not installed: apt-get install dpkg-dev rpm cpio tar");
        }
    }
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let out = work.join("out");
    fs::create_dir(&out).with_context(|| format!("creating {}", out.display()))?;
    let log = logs.join("native.log");
    let mut native = Native::default();
    let names = super::artifacts(dist)?;
    for (path, name) in &names {
        if name.ends_with(".deb") {
            let tree = work.join(name.trim_end_matches(".deb"));
            measure::quiet(
                Command::new("dpkg-deb").arg("-R").arg(path).arg(&tree),
                &log,
            )?;
            let dest = out.join(name);
            let s = measure::run(
                Command::new("dpkg-deb")
                    .args([
                        "--root-owner-group",
                        "-Z",
                        dpkg_name(codecs.of(emit::deb::NAME))?,
                    ])
                    .arg(format!("-z{}", codecs.of(emit::deb::NAME).level))
                    .arg("--build")
                    .arg(&tree)
                    .arg(&dest)
                    .env("SOURCE_DATE_EPOCH", epoch.to_string()),
                &log,
            )?;
            add(&mut native.deb, s, &dest)?;
        } else if name.ends_with(".rpm") {
            let s = rpmbuild(
                path,
                &work.join(name.trim_end_matches(".rpm")),
                &out,
                codecs.of(emit::rpm::NAME),
                epoch,
                &log,
            )?;
            let built = fs::read_dir(out.join("rpms"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "rpm"))
                .with_context(|| {
                    format!("rpmbuild wrote no rpm for {name}; see {}", log.display())
                })?;
            let dest = out.join(name);
            fs::rename(&built, &dest).with_context(|| format!("moving {}", built.display()))?;
            add(&mut native.rpm, s, &dest)?;
        } else if let Some(ext) = [".tar.gz", ".tar.xz", ".tar.zst"]
            .into_iter()
            .find(|e| name.ends_with(e))
        {
            let tree = work.join("tarball");
            fs::create_dir_all(&tree).with_context(|| format!("creating {}", tree.display()))?;
            measure::quiet(
                Command::new("tar")
                    .arg("-xf")
                    .arg(path)
                    .arg("-C")
                    .arg(&tree),
                &log,
            )?;
            let top = name.trim_end_matches(ext);
            let dest = out.join(name);
            let pack = |compressor: &str, dest: &Path| -> Result<Sample> {
                let script = format!(
                    "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{epoch} \
                     --format=gnu -C '{}' -cf - '{top}' | {compressor} > '{}'",
                    tree.display(),
                    dest.display()
                );
                measure::run(Command::new("sh").args(["-c", &script]), &log)
            };
            let s = pack(
                &tar_compressor(codecs.of(emit::tarball::NAME), "gzip"),
                &dest,
            )?;
            add(&mut native.tar, s, &dest)?;
            if codecs.of(emit::tarball::NAME).kind == Kind::Gz && crate::util::on_path("pigz") {
                let alt = work.join("pigz.tar.gz");
                let s = pack(
                    &tar_compressor(codecs.of(emit::tarball::NAME), "pigz"),
                    &alt,
                )?;
                native.tar_pigz = Some((s, size(&alt)?));
            }
        }
    }
    Ok(native)
}

fn add(slot: &mut (Sample, u64, usize), s: Sample, file: &Path) -> Result<()> {
    slot.0 = slot.0 + s;
    slot.1 += size(file)?;
    slot.2 += 1;
    Ok(())
}

fn size(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len())
}

fn dpkg_name(codec: Codec) -> Result<&'static str> {
    Ok(match codec.kind {
        Kind::Xz => "xz",
        Kind::Zstd => "zstd",
        Kind::Gz => "gzip",
    })
}

/// The shell compressor of the tarball: `gzip -9 -n` (or `pigz`), `xz -T0`,
/// `zstd -T0`.
fn tar_compressor(codec: Codec, gzip: &str) -> String {
    match codec.kind {
        Kind::Gz => format!("{gzip} -{} -n", codec.level),
        Kind::Xz => format!("xz -T0 -{}", codec.level),
        Kind::Zstd => format!("zstd -q -T0 -{}", codec.level),
    }
}

/// rpm's payload macro: zstd and xz on every CPU (`T0`), gzip single-threaded.
fn payload_macro(codec: Codec) -> String {
    match codec.kind {
        Kind::Zstd => format!("w{}T0.zstdio", codec.level),
        Kind::Xz => format!("w{}T0.xzdio", codec.level),
        Kind::Gz => format!("w{}.gzdio", codec.level),
    }
}

/// Unpacks `rpm` into `tree`, writes a spec that installs that tree with the
/// same metadata, and times `rpmbuild -bb` on it (output in `out/rpms`).
fn rpmbuild(
    rpm: &Path,
    tree: &Path,
    out: &Path,
    codec: Codec,
    epoch: u64,
    log: &Path,
) -> Result<Sample> {
    let root = unpack_rpm(rpm, tree, log)?;
    let q = |fmt: &str| -> Result<String> { query(rpm, &["--qf", fmt]) };
    let tags = q("%{NAME}\n%{VERSION}\n%{RELEASE}\n%{SUMMARY}\n%{LICENSE}\n%{URL}\n%{VENDOR}\n%{PACKAGER}\n%{ARCH}\n")?;
    let t: Vec<&str> = tags.lines().collect();
    if t.len() < 9 {
        bail!("{}: rpm -q printed too little", rpm.display());
    }
    let mut spec = String::new();
    for (tag, value) in [
        "Name", "Version", "Release", "Summary", "License", "URL", "Vendor", "Packager",
    ]
    .iter()
    .zip(&t)
    {
        if *value != "(none)" {
            writeln!(spec, "{tag}: {value}")?;
        }
    }
    // Dependencies as the original lists them; none generated.
    writeln!(spec, "AutoReqProv: no")?;
    for (tag, flag) in [("Requires", "--requires"), ("Recommends", "--recommends")] {
        for dep in query(rpm, &[flag])?.lines() {
            if !dep.starts_with("rpmlib(") && !dep.starts_with('/') && !dep.is_empty() {
                writeln!(spec, "{tag}: {dep}")?;
            }
        }
    }
    // Bodies go in verbatim: `%` would start a macro.
    let verbatim = |s: String| s.replace('%', "%%");
    writeln!(spec, "%description\n{}", verbatim(q("%{DESCRIPTION}")?))?;
    writeln!(
        spec,
        "%install\ncp -a '{}/.' %{{buildroot}}/",
        root.display()
    )?;
    for (section, tag) in [("post", "POSTIN"), ("preun", "PREUN"), ("postun", "POSTUN")] {
        let body = q(&format!("%{{{tag}}}"))?;
        if body != "(none)" {
            writeln!(spec, "%{section}\n{}", verbatim(body))?;
        }
    }
    writeln!(spec, "%files")?;
    let files = q("[%{FILEMODES:octal}\t%{FILEFLAGS}\t%{FILENAMES}\n]")?;
    for line in files.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(mode), Some(flags), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let mode = u32::from_str_radix(mode, 8).unwrap_or(0o100644);
        let flags: u32 = flags.parse().unwrap_or(0);
        let perms = format!("%attr({:04o},root,root)", mode & 0o7777);
        if mode & 0o170000 == 0o040000 {
            writeln!(spec, "%dir {perms} {path}")?;
        } else if flags & 1 != 0 {
            let noreplace = if flags & 16 != 0 { "(noreplace)" } else { "" };
            writeln!(spec, "{perms} %config{noreplace} {path}")?;
        } else {
            writeln!(spec, "{perms} {path}")?;
        }
    }
    let spec_path = tree.join("package.spec");
    fs::write(&spec_path, spec).with_context(|| format!("writing {}", spec_path.display()))?;

    let top = tree.join("rpmbuild");
    measure::run(
        Command::new("rpmbuild")
            .arg("-bb")
            .arg("--nodeps")
            .arg("--quiet")
            .args(["--target", t[8]])
            .arg("--define")
            .arg(format!("_topdir {}", top.display()))
            .arg("--define")
            .arg(format!("_rpmdir {}", out.join("rpms").display()))
            .args(["--define", "_build_name_fmt %%{NAME}.rpm"])
            .arg("--define")
            .arg(format!("_binary_payload {}", payload_macro(codec)))
            // What the artifacts are: no stripping, no debug packages, no
            // build-id links, no other post-install processing.
            .args(["--define", "debug_package %{nil}"])
            .args(["--define", "__os_install_post %{nil}"])
            .args(["--define", "__arch_install_post %{nil}"])
            .args(["--define", "_build_id_links none"])
            .args(["--define", "use_source_date_epoch_as_buildtime 1"])
            .args(["--define", "clamp_mtime_to_source_date_epoch 1"])
            .arg(&spec_path)
            .env("SOURCE_DATE_EPOCH", epoch.to_string()),
        log,
    )
}

/// `rpm`'s files, unpacked with rpm2cpio into `tree/root`, which it returns.
pub fn unpack_rpm(rpm: &Path, tree: &Path, log: &Path) -> Result<PathBuf> {
    let root = tree.join("root");
    fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let cpio = format!("rpm2cpio '{}' | cpio -idm --quiet", rpm.display());
    measure::quiet(
        Command::new("sh").args(["-c", &cpio]).current_dir(&root),
        log,
    )?;
    Ok(root)
}

/// `rpm -qp ARGS RPM`'s output.
pub fn query(rpm: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("rpm")
        .arg("-qp")
        .args(args)
        .arg(rpm)
        .output()
        .context("running rpm -qp")?;
    if !out.status.success() {
        bail!(
            "rpm -qp {args:?} {}: {}",
            rpm.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
