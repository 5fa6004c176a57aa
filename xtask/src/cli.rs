//! The command line of `cargo xtask`: parsed here, nothing else; each
//! subcommand lives in its own module (see ARCHITECTURE.md).

use anyhow::Result;

use crate::{bench, bump, dist, fetch, fixtures, repo, source, spec, test, util};
use clap::{Parser, Subcommand};

/// Build, test and publish the kubedist packages.
#[derive(Parser)]
#[command(name = "cargo xtask", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure dist against the native tools and the codec floor, a
    /// no-change re-run, kubelet-wrapper's start-up and reproducibility.
    Bench(bench::Args),
    /// Move the tree to another Kubernetes release: its modules pinned, its
    /// programs built from source, the images its kubeadm lists, the pin
    /// and the supported minors.
    Bump(bump::Args),
    /// Build every artifact of every format plus SHA256SUMS.
    Dist(dist::Args),
    /// Download and verify the upstream binaries into the cache (or, with
    /// --images, the images kubeadm pulls).
    Fetch(fetch::Args),
    /// Write an offline `--from` directory: Debian's real kubectl and CNI
    /// plugins, recorder stand-ins for the rest.
    Fixtures(fixtures::Args),
    /// Turn dist output into signed apt and yum/dnf repositories.
    Repo(repo::Args),
    /// Build the upstream programs from their Go modules into a `--from`
    /// directory (or, with --lock, pin their modules).
    Source(source::Args),
    /// Run the whole test suite: cargo tests, then the real install tests.
    Test(test::Args),
}

/// Runs the command line; exits non-zero with one `error:` line on failure.
pub fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        // One line an operator can act on; the chain says which file and why.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let root = util::repo_root();
    match cli.cmd {
        Cmd::Bench(args) => bench::run(&spec::Spec::load(&root)?, &args),
        Cmd::Bump(args) => bump::run(&root, &args),
        Cmd::Dist(args) => dist::run(&spec::Spec::load(&root)?, &args),
        Cmd::Fetch(args) => fetch::run(&spec::Spec::load(&root)?, &args),
        Cmd::Fixtures(args) => fixtures::run(&spec::Spec::load(&root)?, &args),
        Cmd::Repo(args) => repo::run(&root, &args),
        Cmd::Source(args) => source::run(&spec::Spec::load(&root)?, &args),
        Cmd::Test(args) => test::run(&root, &args),
    }
}
