//! The sysext image against `mksquashfs`: dist writing the image (the time
//! its job reports, and the whole `dist --formats sysext` run), and
//! mksquashfs packing the same tree, unpacked from dist's image with
//! `unsquashfs`, at the same codec and level with the flags that make its
//! output reproducible: on every CPU, and on one as dist's writer runs.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{self, Sample};
use crate::emit;
use crate::emit::codec::{Codecs, Kind};

pub struct Sysext {
    /// Seconds dist's job took to write the image (its progress line).
    pub emit: f64,
    /// The whole `dist --formats sysext` run: staging, checks, the image.
    pub dist: Sample,
    pub size: u64,
    /// mksquashfs on every CPU, and with `-processors 1`: time and size.
    pub mksquashfs: (Sample, u64),
    pub mksquashfs_one: (Sample, u64),
}

/// `dist` runs `dist --formats sysext --no-cache` into the directory it is
/// given and returns its time; the image named `image_name` (the node's:
/// the run writes the runtime's too) is then unpacked and packed again with
/// mksquashfs under `work`.
pub fn run(
    dist: &dyn Fn(&Path, &str) -> Result<Sample>,
    image_name: &str,
    codecs: &Codecs,
    epoch: u64,
    work: &Path,
    logs: &Path,
) -> Result<Sysext> {
    for tool in ["mksquashfs", "unsquashfs"] {
        if !crate::util::on_path(tool) {
            bail!("{tool} is not installed: apt-get install squashfs-tools (or --no-native)");
        }
    }
    let _ = fs::remove_dir_all(work);
    let out = work.join("dist");
    let log = "dist-sysext.log";
    let sample = dist(&out, log)?;
    let text = fs::read_to_string(logs.join(log))
        .with_context(|| format!("reading {}", logs.join(log).display()))?;
    let (image, emit) = job_time(&text, &format!("{image_name}-v"), ".raw")
        .with_context(|| format!("no image in {}", logs.join(log).display()))?;
    let image = out.join(image);
    let size = fs::metadata(&image)
        .with_context(|| format!("reading {}", image.display()))?
        .len();

    let tree = work.join("tree");
    let log = logs.join("mksquashfs.log");
    measure::run(
        Command::new("unsquashfs")
            .args(["-q", "-n", "-d"])
            .arg(&tree)
            .arg(&image),
        &log,
    )?;
    let codec = codecs.of(emit::sysext::NAME);
    let comp = match codec.kind {
        Kind::Gz => "gzip",
        Kind::Zstd => "zstd",
        Kind::Xz => "xz",
    };
    let pack = |name: &str, processors: Option<&str>| -> Result<(Sample, u64)> {
        let dest = work.join(name);
        let mut cmd = Command::new("mksquashfs");
        cmd.arg(&tree)
            .arg(&dest)
            .args([
                "-noappend",
                "-no-progress",
                "-quiet",
                "-all-root",
                "-comp",
                comp,
            ])
            .args(["-Xcompression-level", &codec.level.to_string()])
            .args([
                "-mkfs-time",
                &epoch.to_string(),
                "-all-time",
                &epoch.to_string(),
            ])
            // mksquashfs refuses -mkfs-time with SOURCE_DATE_EPOCH set.
            .env_remove("SOURCE_DATE_EPOCH");
        if let Some(n) = processors {
            cmd.args(["-processors", n]);
        }
        let s = measure::run(&mut cmd, &log)?;
        let size = fs::metadata(&dest)
            .with_context(|| format!("reading {}", dest.display()))?
            .len();
        Ok((s, size))
    };
    let mksquashfs = pack("all.raw", None)?;
    let mksquashfs_one = pack("one.raw", Some("1"))?;
    let _ = fs::remove_dir_all(&tree);
    Ok(Sysext {
        emit,
        dist: sample,
        size,
        mksquashfs,
        mksquashfs_one,
    })
}

/// `(file name, seconds)` of the job whose artifact ends in `ext`, from
/// dist's progress line `    [1/1] NAME (9.8 s)`.
fn job_time(log: &str, prefix: &str, ext: &str) -> Option<(String, f64)> {
    log.lines().find_map(|l| {
        let rest = l.trim().strip_prefix('[')?.split_once("] ")?.1;
        let (name, time) = rest.split_once(" (")?;
        let secs = time.split_once(" s")?.0.parse().ok()?;
        (name.starts_with(prefix) && name.ends_with(ext)).then(|| (name.to_string(), secs))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_job_time_is_read_from_the_progress_line() {
        let log = "==> writing 2 artifacts\n    [1/2] kubedist-containerd-v2.4.2-x86-64.raw (3.1 s)\n    \
                   [2/2] kubernetes-v1.34.2-x86-64.raw (9.8 s)\n";
        assert_eq!(
            super::job_time(log, "kubernetes-v", ".raw"),
            Some(("kubernetes-v1.34.2-x86-64.raw".into(), 9.8))
        );
        assert_eq!(super::job_time(log, "kubernetes-v", ".deb"), None);
    }
}
