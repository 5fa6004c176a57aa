//! `cargo xtask test`: the one command that runs every test.
//!
//! 1. installs what the suites need when it is missing and we are root
//!    (`ci/install-deps`), so a fresh machine needs no other step;
//! 2. `cargo test --workspace`, and beside it (cargo's tests leave a CPU
//!    idle much of their time) the releases, one after the other: the
//!    fixture inputs of every architecture and two releases built from
//!    them, N-1 and N (same inputs, package revision bumped), with the real
//!    `dist`, and the releases built from source that the suites on source
//!    builds read;
//! 3. runs every `ci/t-*.sh` suite against them (real dpkg/apt, rpm/dnf,
//!    OpenRC, runit, the tarball installer, systemd-sysext, linters, and
//!    systemd, OpenRC and runit booted as PID 1), each in clean roots, as
//!    many at once as the machine has CPUs (one suite alone leaves a CPU
//!    idle much of its time), the longest first, each output line tagged
//!    with its suite's name;
//! 4. prints how long each step took (every step before the suites as well
//!    as each suite: docs/testing.md keeps the budget per phase), each
//!    failed test again with the line naming its cause (a log cut to its
//!    end still shows them), and one closing line for the suites:
//!    `suites: N passed, N failed`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::spec::Spec;

/// Tools the suites run; `ci/install-deps` installs them.
const TOOLS: &[&str] = &[
    "mmdebstrap",
    "piuparts",
    "dpkg-deb",
    "rpm",
    "rpmbuild",
    "dnf",
    "zypper",
    "createrepo_c",
    "lintian",
    "rpmlint",
    "shellcheck",
    "systemd-analyze",
    "systemd-nspawn",
    "nsenter",
    "apt-ftparchive",
    "busybox",
    "qemu-aarch64-static",
    "qemu-riscv64-static",
    "qemu-system-aarch64",
    "qemu-system-x86_64",
    "ssh",
    "ssh-keygen",
    "powerpc64le-linux-gnu-gcc",
    "s390x-linux-gnu-gcc",
    "riscv64-linux-gnu-gcc",
    "pkg-config",
    "unshare",
    "unsquashfs",
    "systemd-dissect",
    "jq",
    "skopeo",
    "umoci",
    "podman",
    "runc",
    "containerd",
    "ctr",
    "docker-registry",
    "curl",
    "openssl",
    "cargo-fuzz",
];

/// The SOURCE_DATE_EPOCH of test builds: any fixed value will do.
const TEST_EPOCH: &str = "1700000000";

#[derive(clap::Args)]
pub struct Args {
    /// Run only the suites whose name contains one of these (e.g. `deb`,
    /// `openrc`), and with SUITE:CASE only that suite's tests whose name
    /// contains CASE (e.g. `deb:upgrade`); `cargo` selects cargo's own tests.
    #[arg(value_name = "SUITE[:CASE]")]
    only: Vec<String>,
    /// Never run ci/install-deps, even as root with tools missing.
    #[arg(long)]
    no_install: bool,
    /// How many suites run at once [default: the machine's CPUs]; 1 runs
    /// them one after the other, their output untagged.
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
}

pub fn run(root: &Path, args: &Args) -> Result<()> {
    // The epoch goes to dist and the suites, never to a cargo that compiles:
    // the C build scripts run again whenever it changes (xtask/launch), and
    // cargo's own tests would then rebuild what `cargo xtask` just built.
    std::env::remove_var("SOURCE_DATE_EPOCH");
    let selected = |name: &str| {
        args.only.is_empty()
            || args
                .only
                .iter()
                .any(|o| name.contains(o.split(':').next().unwrap_or(o)))
    };
    // The cases asked for in a suite (`deb:upgrade`), for lib.sh's kd_test.
    let cases = |suite: &str| -> String {
        args.only
            .iter()
            .filter_map(|o| o.split_once(':'))
            .filter(|(s, _)| suite.contains(s))
            .map(|(_, case)| case)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mut suites: Vec<PathBuf> = std::fs::read_dir(root.join("ci"))
        .context("reading ci/")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("t-") && n.ends_with(".sh"))
        })
        .filter(|p| selected(&suite_name(p)))
        .collect();
    suites.sort();
    let wanted = |names: &[&str]| {
        suites
            .iter()
            .any(|s| names.contains(&suite_name(s).as_str()))
    };
    let (cargo_tests, need_source, need_older) = (
        selected("cargo"),
        wanted(ON_SOURCE_BUILDS),
        wanted(ON_OLDER_RELEASE),
    );

    // Two chains of steps before the suites, at once: cargo's tests, which
    // leave a CPU idle much of their time, then the base roots of
    // `BASES_BESIDE_RELEASES`, mostly downloads; and the releases, one after
    // the other (each dist keeps both CPUs busy while it compresses).
    let bases: Vec<&PathBuf> = suites
        .iter()
        .filter(|s| BASES_BESIDE_RELEASES.contains(&suite_name(s).as_str()))
        .collect();
    let steps = Steps::new((cargo_tests || !bases.is_empty()) && !suites.is_empty());

    let mut missing: Vec<_> = TOOLS.iter().filter(|t| !crate::util::on_path(t)).collect();
    // The SBOM checkers live in a virtual environment of the checkout's
    // (ci/install-deps makes it; ci/lib.sh puts it on the suites' PATH).
    if !root.join("target/ci-tools/sbom/bin/pyspdxtools").is_file() {
        missing.push(&"pyspdxtools");
    }
    if !missing.is_empty() {
        if !args.no_install && crate::util::is_root() {
            eprintln!("missing test tools {missing:?}: installing them");
            steps.run(
                "",
                "ci/install-deps",
                Command::new("sh").arg(root.join("ci/install-deps")),
            )?;
        } else if ci {
            bail!("missing tools {missing:?}: run `sudo ci/install-deps`");
        } else {
            eprintln!("warning: missing tools {missing:?}; suites needing them will be skipped (sudo ci/install-deps installs them)");
        }
    }

    // The suites run this binary directly where they signal a step (cargo
    // would take the signal instead).
    let xtask = std::env::current_exe().context("locating the xtask binary")?;
    let spec = Spec::load(root)?;
    let (tested, releases) = std::thread::scope(|scope| {
        let tested = scope.spawn(|| -> Result<()> {
            if cargo_tests {
                // At a lower priority: the suites wait for the releases,
                // whose first step took 155 s beside cargo's compile in CI
                // against 65 s alone, and cargo's tests end first anyway.
                steps.run(
                    "cargo",
                    "cargo test --workspace",
                    Command::new("nice")
                        .args(["-n", "10"])
                        .arg(crate::util::cargo())
                        .args(["test", "--workspace"])
                        .current_dir(root),
                )?;
            }
            for suite in &bases {
                steps.run(
                    "bases",
                    &format!("the {} suite's base roots", suite_name(suite)),
                    Command::new("nice")
                        .args(["-n", "10", "sh"])
                        .arg(suite)
                        .arg("--bases")
                        .current_dir(root),
                )?;
            }
            Ok(())
        });
        let releases = (|| -> Result<Option<_>> {
            if suites.is_empty() {
                return Ok(None);
            }
            // Every architecture's fixtures first: a suite's `dist
            // --fixtures` then never rewrites the directory another suite
            // is reading.
            let every_arch = crate::spec::Arch::ALL.map(|a| a.go_name()).join(",");
            steps.run(
                RELEASES,
                "cargo xtask fixtures (every architecture)",
                Command::new(&xtask)
                    .arg("fixtures")
                    .arg(crate::fixtures::default_dir(&spec))
                    .args(["--arch", &every_arch])
                    .env("SOURCE_DATE_EPOCH", TEST_EPOCH),
            )?;
            let from_fixtures = build_releases(root, &xtask, Inputs::Fixtures, &steps)?;
            let from_source = match need_source {
                true => Some(build_releases(root, &xtask, Inputs::Source, &steps)?),
                false => None,
            };
            let older = match need_older {
                true => Some(build_older_release(&spec, &xtask, &steps)?),
                false => None,
            };
            Ok(Some((from_fixtures, from_source, older)))
        })();
        (joined(tested), releases)
    });
    tested?;
    let Some(((prev, cur), from_source, older)) = releases? else {
        steps.print();
        return Ok(());
    };
    let runs: Vec<SuiteRun> = suites
        .iter()
        .map(|path| {
            let name = suite_name(path);
            let (prev, cur) = match &from_source {
                Some((prev, cur)) if ON_SOURCE_BUILDS.contains(&name.as_str()) => (prev, cur),
                _ => (&prev, &cur),
            };
            let mut command = Command::new("sh");
            if let Some(older) = older
                .as_ref()
                .filter(|_| ON_OLDER_RELEASE.contains(&name.as_str()))
            {
                command.env("KD_DIST_OLDER", older);
            }
            command
                .arg(path)
                .current_dir(root)
                .env("KD_DIST_PREV", prev)
                .env("KD_DIST", cur)
                .env("KD_ONLY", cases(&name))
                .env("KD_XTASK", &xtask)
                .env("SOURCE_DATE_EPOCH", TEST_EPOCH);
            SuiteRun { name, command }
        })
        .collect();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, runs.len());
    let suites_started = Instant::now();
    let mut outcomes = run_suites(runs, jobs)?;
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));
    let passed: u32 = outcomes.iter().map(|o| o.passed).sum();
    let failed: u32 = outcomes.iter().map(|o| o.failed).sum();
    let report: Vec<String> = outcomes
        .iter()
        .map(|o| {
            format!(
                "  {:<12} {:>3} passed {:>3} failed  {:>5.0} s",
                o.name, o.passed, o.failed, o.seconds
            )
        })
        .collect();
    steps.print();
    println!(
        "\nsuite results ({:.0} s in all):\n{}",
        suites_started.elapsed().as_secs_f64(),
        report.join("\n")
    );
    print_failures(&outcomes);
    println!("suites: {passed} passed, {failed} failed");
    if failed > 0 {
        bail!("{failed} test(s) failed");
    }
    Ok(())
}

/// What a chain's thread returned, or an error if it panicked.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a chain of steps panicked")))
}

/// The suites, longest first as measured (docs/testing.md, "Time"): they
/// start in this order, so that a long one does not start last and run
/// alone. A suite not named here starts after these.
const LONGEST_FIRST: &[&str] = &[
    "cluster", "tarball", "dist", "repo", "source", "boot", "deb", "fuzz", "oci", "sysext",
    "zypper", "images", "lint", "rpm", "openrc", "runit", "systemd",
];

/// A suite to run: its name (`deb` for ci/t-deb.sh) and its command.
struct SuiteRun {
    name: String,
    command: Command,
}

/// How a suite ended.
struct Outcome {
    name: String,
    passed: u32,
    failed: u32,
    seconds: f64,
    failures: Vec<Failure>,
}

/// Each failed test again, at the end of the output (where a log cut to
/// its last lines still shows it): its heading, the first line that names
/// a cause and the last lines of its log.
fn print_failures(outcomes: &[Outcome]) {
    let failures: Vec<(&str, &Failure)> = outcomes
        .iter()
        .flat_map(|o| o.failures.iter().map(|f| (o.name.as_str(), f)))
        .collect();
    if failures.is_empty() {
        return;
    }
    println!("\nfailed tests (the first line naming a cause, then the last lines of each log):");
    for (suite, failure) in failures {
        println!("  {suite:>8} | {}", failure.heading);
        for line in failure.gist() {
            println!("  {suite:>8} |     {line}");
        }
    }
}

/// Runs `runs`, `jobs` at a time, longest first; with more than one at a
/// time each line a suite prints is tagged with its name.
fn run_suites(mut runs: Vec<SuiteRun>, jobs: usize) -> Result<Vec<Outcome>> {
    let rank = |name: &str| {
        LONGEST_FIRST
            .iter()
            .position(|s| *s == name)
            .unwrap_or(LONGEST_FIRST.len())
    };
    runs.sort_by_key(|r| rank(&r.name));
    let tagged = jobs > 1;
    let queue = Mutex::new(runs.into_iter());
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                // (The queue's lock is let go before the suite runs.)
                let next = queue.lock().expect("queue").next();
                let Some(run) = next else { break };
                let outcome = run_suite(run, tagged);
                outcomes.lock().expect("outcomes").push(outcome);
            });
        }
    });
    outcomes
        .into_inner()
        .expect("outcomes")
        .into_iter()
        .collect()
}

/// Runs one suite, relaying its output line by line as it comes, and reads
/// its closing line.
fn run_suite(mut run: SuiteRun, tagged: bool) -> Result<Outcome> {
    let name = run.name;
    eprintln!("==> {name}");
    let started = Instant::now();
    let tag = tag(&name, tagged);
    let (status, closing) = relayed(&mut run.command, &tag, &format!("ci/t-{name}.sh"))?;
    let (passed, failed) = match (closing.counts, status.success()) {
        (Some((p, f)), true) => (p, f),
        // A suite that died without its closing line, or exited non-zero
        // with none failed, counts as one failure: never as a pass.
        (Some((p, f)), false) => (p, f.max(1)),
        (None, ok) => (0, if ok { 0 } else { 1 }),
    };
    let seconds = started.elapsed().as_secs_f64();
    if tagged {
        eprintln!(
            "<== {name}: {passed} passed, {failed} failed ({seconds:.0} s{})",
            disk_free()
        );
    }
    Ok(Outcome {
        name,
        passed,
        failed,
        seconds,
        failures: closing.failures,
    })
}

/// ", N GiB free" of the disk the suites work on, for a run that fails on
/// ENOSPC to say when its disk ran short; nothing when it cannot be read.
fn disk_free() -> String {
    match rustix::fs::statvfs(crate::util::repo_root().join("target")) {
        Ok(fs) => {
            let bytes = fs.f_bavail as f64 * fs.f_frsize as f64;
            format!(", {:.1} GiB free", bytes / f64::from(1u32 << 30))
        }
        Err(_) => String::new(),
    }
}

/// What each line of `name`'s output starts with: its name, when others
/// run at the same time, else nothing.
fn tag(name: &str, tagged: bool) -> String {
    match tagged {
        true => format!("{name:>8} | "),
        false => String::new(),
    }
}

/// Runs `command` (`what`), its output relayed line by line after `tag`,
/// and returns how it ended and what its standard output said of it.
fn relayed(
    command: &mut Command,
    tag: &str,
    what: &str,
) -> Result<(std::process::ExitStatus, Closing)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let closing = std::thread::scope(|scope| {
        let relay_stderr = scope.spawn(|| relay(stderr, tag, Stream::Stderr));
        let closing = relay(stdout, tag, Stream::Stdout);
        let _ = relay_stderr.join();
        closing
    });
    let status = child
        .wait()
        .with_context(|| format!("waiting for {what}"))?;
    Ok((status, closing))
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Copies `from` line by line to our `to`, each line after `tag` (one
/// write a line, so lines of suites running at once never mix), and
/// returns what the lines said of how it ended. A line that cannot be
/// written (a full disk under a log file) is dropped and counted, never a
/// panic: the suite goes on and its count is still read.
fn relay(from: Option<impl Read>, tag: &str, to: Stream) -> Closing {
    let mut closing = Closing::default();
    let Some(from) = from else { return closing };
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    let mut unwritten: Option<(u64, std::io::Error)> = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n');
        closing.see(text);
        let written = match to {
            Stream::Stdout => writeln!(std::io::stdout().lock(), "{tag}{text}"),
            Stream::Stderr => writeln!(std::io::stderr().lock(), "{tag}{text}"),
        };
        if let Err(e) = written {
            let (count, _) = unwritten.get_or_insert((0, e));
            *count += 1;
        }
    }
    if let Some((count, e)) = unwritten {
        let _ = writeln!(
            std::io::stderr().lock(),
            "{tag}{count} lines of this output could not be written: {e}"
        );
    }
    closing
}

/// The steps before the suites: commands whose output is relayed line by
/// line (tagged with their chain's name when chains run at once), and when
/// each began and ended, in the order they ended.
struct Steps {
    tagged: bool,
    ran: Mutex<Vec<(String, Instant, Instant)>>,
}

impl Steps {
    fn new(tagged: bool) -> Steps {
        Steps {
            tagged,
            ran: Mutex::new(Vec::new()),
        }
    }

    /// Runs `command` as step `what` of chain `chain` (none: the steps
    /// before the chains), recording its wall time; an error unless it
    /// succeeds.
    fn run(&self, chain: &str, what: &str, command: &mut Command) -> Result<()> {
        let tag = tag(chain, self.tagged && !chain.is_empty());
        eprintln!("{tag}==> {what}");
        let started = Instant::now();
        let relayed = relayed(command, &tag, what);
        self.ran
            .lock()
            .expect("steps")
            .push((what.to_string(), started, Instant::now()));
        let (status, _) = relayed?;
        if !status.success() {
            bail!("{what} failed ({status})");
        }
        Ok(())
    }

    fn print(&self) {
        let ran = self.ran.lock().expect("steps");
        let (Some(first), Some(last)) = (
            ran.iter().map(|(_, began, _)| began).min(),
            ran.iter().map(|(_, _, ended)| ended).max(),
        ) else {
            return;
        };
        let seconds = |began: &Instant, ended: &Instant| (*ended - *began).as_secs_f64();
        let total: f64 = ran.iter().map(|(_, b, e)| seconds(b, e)).sum();
        println!(
            "\nsteps before the suites ({:.0} s; one after another, {total:.0} s):",
            seconds(first, last)
        );
        for (name, began, ended) in ran.iter() {
            println!("  {name:<58} {:>5.0} s", seconds(began, ended));
        }
    }
}

/// The suites whose base roots (mmdebstrap's, cached in the home
/// directory) are made beside the releases' builds, after cargo's tests
/// (`ci/t-SUITE.sh --bases`): the longest lane's, which made them itself
/// before, about 800 s of a cold run (docs/testing.md). Warm, the step
/// finds them all made.
const BASES_BESIDE_RELEASES: &[&str] = &["cluster"];

/// The chain of steps that builds the releases the suites read.
const RELEASES: &str = "releases";

/// The suites that run on releases built from source (`dist --source`),
/// the real programs' packages: their cases need no recorder (cluster runs
/// kubeadm, the kubelet and the control plane for real; source checks what
/// `dist --source` made of them). The others
/// run on the fixtures, whose stand-ins record how they were started, or
/// (repo) test a repository's mechanics, which the packages' size only
/// slows (the repo suite took 550 s on the real programs' packages).
const ON_SOURCE_BUILDS: &[&str] = &["cluster", "rpm", "source", "zypper"];

/// The suites that also get the release of the minor before the pin, built
/// from source (`KD_DIST_OLDER`): cluster installs it and upgrades the
/// cluster to the pin; source checks what it holds.
const ON_OLDER_RELEASE: &[&str] = &["cluster", "source"];

/// What the cluster's nodes install from a release: the apt and dnf
/// channels, the tarball, the sysext and installer images, the bundle.
const CLUSTER_FORMATS: &str = "deb,rpm,tar,sysext,oci,images";

/// The debs of the releases from source that are compressed quickly: zstd,
/// which every node's dpkg reads (Debian 12 and 13; dpkg >= 1.21.18). The
/// `fast` preset's xz -1 took 16 times the CPU of zstd -3 on the kubelet
/// (11.1 s against 0.7 s, 15.4 MB against 18.4), and 10 times to read it
/// back (1.27 s against 0.13).
/// The release the cluster upgrades to across the minor, and t-deb's on
/// the fixtures, carry the default codecs.
const QUICK_DEBS: &str = "deb=zstd:3";

/// The cluster's VM workers of another architecture that join at the
/// release before the pin (t-cluster.sh): each installs the tarball and
/// bundle of its architecture of that release, and of the pin's when
/// `KD_UPGRADE_VMS` has it upgraded with the cluster (not in CI's run:
/// docs/testing.md). (v4, riscv64, joins the upgraded cluster from the
/// current release's `SOURCE_ONLY_ARCH` build.)
const FOREIGN_WORKERS: &[ForeignWorker] = &[ForeignWorker {
    vm: "v3",
    arch: "arm64",
}];
/// What a foreign worker installs: the tarball and a worker's images
/// bundle (none of the control plane's images are built for it).
const FOREIGN_WORKER_DIST: &[&str] = &["--formats", "tar,images", "--worker-images"];

struct ForeignWorker {
    vm: &'static str,
    arch: &'static str,
}

impl ForeignWorker {
    /// Whether this run's cluster boots it: every VM unless `KD_VMS`
    /// names some.
    fn booted(&self) -> bool {
        self.named_in("KD_VMS").unwrap_or(true)
    }

    /// Whether this run's cluster upgrades it: `KD_UPGRADE_VMS` names it.
    fn upgraded(&self) -> bool {
        self.booted() && self.named_in("KD_UPGRADE_VMS").unwrap_or(false)
    }

    /// Whether the VM list in the environment variable VAR (t-cluster.sh
    /// reads it too) names it; None when VAR is unset or empty, as the
    /// suite's `${VAR:-...}` reads it (`KD_VMS=` boots every VM there).
    fn named_in(&self, var: &str) -> Option<bool> {
        let vms = std::env::var(var).ok().filter(|vms| !vms.is_empty())?;
        Some(vms.split_whitespace().any(|v| v == self.vm))
    }
}

/// The architecture only a build from source serves (upstream publishes
/// no Kubernetes for it): the current release from source is built for it
/// too, every format, into its subdirectory ARCH (t-source checks it, and
/// the cluster's v4 installs its tarball and bundle).
const SOURCE_ONLY_ARCH: &str = "riscv64";

/// Builds from source the cluster's formats of the supported release
/// before the pin (pkg/release.toml's `supported`) for amd64, and into its
/// subdirectory ARCH those of each booted `FOREIGN_WORKERS`; returns its
/// output directory.
fn build_older_release(spec: &Spec, xtask: &Path, steps: &Steps) -> Result<PathBuf> {
    let supported = &spec.release.supported;
    // Spec::load checked: the pin is the newest of `supported`.
    let version = supported
        .len()
        .checked_sub(2)
        .map(|i| supported[i].clone())
        .context("pkg/release.toml: `supported` has no release before the pin")?;
    let out = spec.root.join("target/ci-dist/source/older");
    // The runtime's sysext image at the default codec: it is the same image
    // as release prev's (one name and revision in the repository), and
    // must be the same bytes.
    let compression = format!(
        "{QUICK_DEBS},sysext={}",
        crate::emit::codec::Codecs::defaults().of("sysext")
    );
    let args = [
        "--source",
        "--fast",
        "--compression",
        &compression,
        "--version",
        &version,
    ];
    let what = format!("--source --version {version} (the minor before the pin)");
    dist(
        xtask,
        steps,
        &what,
        &[&args[..], &["--formats", CLUSTER_FORMATS]].concat(),
        "amd64",
        &out,
    )?;
    dist_foreign_workers(xtask, steps, &what, &args, &out, ForeignWorker::booted)?;
    Ok(out)
}

/// The formats each of `FOREIGN_WORKERS` that `needs` installs, of the
/// release that `dist ARGS` (`what`) built into OUT, into OUT/ARCH: after
/// that dist, which empties its OUT.
fn dist_foreign_workers(
    xtask: &Path,
    steps: &Steps,
    what: &str,
    args: &[&str],
    out: &Path,
    needs: fn(&ForeignWorker) -> bool,
) -> Result<()> {
    for worker in FOREIGN_WORKERS.iter().filter(|w| needs(w)) {
        let arch = worker.arch;
        dist(
            xtask,
            steps,
            &format!("{what}, {arch} {}", FOREIGN_WORKER_DIST.join(" ")),
            &[args, FOREIGN_WORKER_DIST].concat(),
            arch,
            &out.join(arch),
        )?;
    }
    Ok(())
}

/// `cargo xtask dist ARGS --arch ARCH --out OUT` (`xtask`: this program)
/// with the tests' epoch, into an emptied OUT (dist adds to its output
/// directory; a format left out must not linger from an earlier run).
fn dist(
    xtask: &Path,
    steps: &Steps,
    what: &str,
    args: &[&str],
    arch: &str,
    out: &Path,
) -> Result<()> {
    match std::fs::remove_dir_all(out) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", out.display()));
        }
        _ => {}
    }
    steps.run(
        RELEASES,
        &format!("cargo xtask dist {what}"),
        Command::new(xtask)
            .arg("dist")
            .args(args)
            .args(["--arch", arch, "--out"])
            .arg(out)
            .env("SOURCE_DATE_EPOCH", TEST_EPOCH),
    )
}

/// What the releases of the suites are built from.
#[derive(Clone, Copy)]
enum Inputs {
    Fixtures,
    Source,
}

/// Builds releases N-1 and N for amd64 from `inputs` with the real `dist`,
/// and returns their output directories.
fn build_releases(
    root: &Path,
    xtask: &Path,
    inputs: Inputs,
    steps: &Steps,
) -> Result<(PathBuf, PathBuf)> {
    let (flag, work) = match inputs {
        Inputs::Fixtures => ("--fixtures", root.join("target/ci-dist")),
        Inputs::Source => ("--source", root.join("target/ci-dist/source")),
    };
    let (mut outs, mut args, mut cur_codecs) = (Vec::new(), Vec::new(), Vec::new());
    for (label, revision) in [("prev", "1"), ("cur", "2")] {
        let out = work.join(label);
        // What the suites on source builds read: rpm and zypper both
        // releases' rpms; cluster the packages and sysext image of both
        // (its repository's channel at the first revision, then the next)
        // and all its formats of the current one. The first release at the
        // default codecs, so that rpm, zypper and the cluster's dnf and apt
        // read what users get; the current one compressed quickly (its
        // tarball, images and bundle are large, and t-dist checks the
        // codecs on the fixtures). The fixtures' releases have every format.
        let (codecs, formats): (&[&str], &[&str]) = match (inputs, label) {
            (Inputs::Fixtures, _) => (&[], &[]),
            (Inputs::Source, "prev") => (&[], &["--formats", "deb,rpm,sysext"]),
            (Inputs::Source, _) => (
                &["--fast", "--compression", QUICK_DEBS],
                &["--formats", CLUSTER_FORMATS],
            ),
        };
        let what = format!("{flag} (release {label}, revision {revision})");
        cur_codecs = [&[flag, "--revision", revision], codecs].concat();
        args = [&cur_codecs[..], formats].concat();
        dist(xtask, steps, &what, &args, "amd64", &out)?;
        outs.push(out);
    }
    let cur = outs.pop().expect("two releases");
    let prev = outs.pop().expect("two releases");
    if let Inputs::Source = inputs {
        // cur's arguments, after cur's dist: each dist empties its OUT,
        // and ARCH/ is inside it.
        let arch = SOURCE_ONLY_ARCH;
        let what = format!("{flag} (release cur, {arch})");
        dist(xtask, steps, &what, &args, arch, &cur.join(arch))?;
        // What the foreign workers upgrade to.
        let what = format!("{flag} (release cur)");
        dist_foreign_workers(
            xtask,
            steps,
            &what,
            &cur_codecs,
            &cur,
            ForeignWorker::upgraded,
        )?;
    }
    Ok((prev, cur))
}

fn suite_name(path: &Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    stem.trim_start_matches("t-").to_string()
}

/// What a suite's output said of how it ended: its last closing line
/// `N passed, N failed`, and each failed test (ci/lib.sh's `kd_test`
/// prints `FAIL` and the last lines of the test's log, indented).
#[derive(Default)]
struct Closing {
    counts: Option<(u32, u32)>,
    failures: Vec<Failure>,
    /// The last line began or continued a failed test's lines.
    in_failure: bool,
}

impl Closing {
    fn see(&mut self, line: &str) {
        self.counts = parse_counts(line).or(self.counts);
        if line.starts_with("FAIL ") {
            // (The log's path is in the suite's output above.)
            let heading = line.split("; last lines of ").next().unwrap_or(line);
            self.failures.push(Failure {
                heading: heading.to_string(),
                lines: Vec::new(),
            });
            self.in_failure = true;
            return;
        }
        match (self.in_failure, line.strip_prefix(FAILURE_INDENT)) {
            (true, Some(logged)) => {
                let failure = self.failures.last_mut().expect("a FAIL line began it");
                failure.lines.push(logged.to_string());
            }
            _ => self.in_failure = false,
        }
    }
}

/// How kd_test indents the log lines it prints under a `FAIL` line.
const FAILURE_INDENT: &str = "    ";

/// A failed test: its `FAIL` line and the log lines printed under it.
struct Failure {
    heading: String,
    lines: Vec<String>,
}

impl Failure {
    /// The words that mark the line saying why a test failed.
    const CAUSES: &'static [&'static str] = &["assertion failed", "error", "FATAL", "timed out"];
    /// How many of the log's last lines the gist keeps.
    const LAST: usize = 4;

    /// The first line naming a cause, unless it is among the last lines,
    /// then the last lines.
    fn gist(&self) -> Vec<&str> {
        let last = self.lines.len().saturating_sub(Self::LAST);
        let cause = self
            .lines
            .iter()
            .position(|l| Self::CAUSES.iter().any(|c| l.contains(c)))
            .filter(|&i| i < last);
        let mut gist: Vec<&str> = cause.map(|i| self.lines[i].as_str()).into_iter().collect();
        if cause.is_some_and(|i| i + 1 < last) {
            gist.push("…");
        }
        gist.extend(self.lines[last..].iter().map(String::as_str));
        gist
    }
}

/// Parses a closing line `N passed, N failed`.
fn parse_counts(line: &str) -> Option<(u32, u32)> {
    let (p, rest) = line.trim().split_once(" passed, ")?;
    let f = rest.strip_suffix(" failed")?;
    Some((p.parse().ok()?, f.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{parse_counts, suite_name, Closing, LONGEST_FIRST};

    #[test]
    fn closing_lines_parse() {
        assert_eq!(parse_counts("12 passed, 0 failed"), Some((12, 0)));
        assert_eq!(parse_counts("  3 passed, 2 failed "), Some((3, 2)));
        assert_eq!(parse_counts("ok   t-deb::install (3 s)"), None);
        assert_eq!(parse_counts("x passed, 1 failed"), None);
    }

    /// A failed test's cause and last lines are kept; a passed test and
    /// lines after the failed one's are not.
    #[test]
    fn failed_tests_keep_their_cause_and_last_lines() {
        let output = "ok   t-x::first (1 s)
FAIL t-x::second (61 s); last lines of /w/t-x.second.log:
    starting
    assertion failed: 'note:' in /w/tmp/out:
      | one
      | two
      | three
      | four
      | five
ok   t-x::third (2 s)
    an indented line of the suite's own
FAIL t-x::fourth (1 s); last lines of /w/t-x.fourth.log:
    Error from server (NotFound)
3 passed, 2 failed";
        let mut closing = Closing::default();
        output.lines().for_each(|l| closing.see(l));
        assert_eq!(closing.counts, Some((3, 2)));
        let seen: Vec<(&str, Vec<&str>)> = closing
            .failures
            .iter()
            .map(|f| (f.heading.as_str(), f.gist()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "FAIL t-x::second (61 s)",
                    vec![
                        "assertion failed: 'note:' in /w/tmp/out:",
                        "…",
                        "  | two",
                        "  | three",
                        "  | four",
                        "  | five"
                    ]
                ),
                (
                    "FAIL t-x::fourth (1 s)",
                    vec!["Error from server (NotFound)"]
                ),
            ]
        );
    }

    /// Every suite has its place in the order they start in, and only those.
    #[test]
    fn longest_first_names_every_suite_once() {
        let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci");
        let mut suites: Vec<String> = std::fs::read_dir(&ci)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.starts_with("t-") && n.ends_with(".sh")
            })
            .map(|p| suite_name(&p))
            .collect();
        suites.sort();
        let mut named: Vec<String> = LONGEST_FIRST.iter().map(|s| s.to_string()).collect();
        named.sort();
        assert_eq!(named, suites);
    }
}
