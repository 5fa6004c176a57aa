//! "A new upstream tag to a signed channel": `cargo xtask bump` on a copy
//! of the tree (`bump::copy_tree`, so the checkout stays as it is), then
//! `dist --source` of that version for this machine's architecture and
//! `repo --channels minor` of it with a key of its own, each timed in this
//! process on the copy. The command's own steps are bump's that run no go
//! command; the rest is Go's work (modules, compiles) and packaging.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use crate::spec::{Arch, Spec};

/// What a run measured, seconds.
pub struct Release {
    pub version: String,
    /// Whether Go's build cache and the program cache started empty.
    pub cold: bool,
    /// bump's steps, with whether each runs a go command.
    pub bump: Vec<(&'static str, f64, bool)>,
    pub dist: f64,
    pub repo: f64,
}

impl Release {
    pub fn total(&self) -> f64 {
        self.bump.iter().map(|(_, s, _)| s).sum::<f64>() + self.dist + self.repo
    }

    /// bump's steps that run no go command.
    pub fn own(&self) -> f64 {
        self.bump
            .iter()
            .filter(|(_, _, go)| !go)
            .map(|(_, s, _)| s)
            .sum()
    }
}

/// The steps of `bump` that are Go's work (modules, builds).
const GO_STEPS: &[&str] = &[
    "pin the release's modules",
    "build kubeadm from source",
    "pin the images' other modules",
    "follow cri-tools",
];

/// The command lines of `dist` and `repo`, parsed as `cargo xtask` does.
#[derive(Parser)]
struct Dist {
    #[command(flatten)]
    args: crate::dist::Args,
}

#[derive(Parser)]
struct Repo {
    #[command(flatten)]
    args: crate::repo::Args,
}

/// `words`, then each flag with its path.
fn argv(words: &[&str], paths: &[(&str, &Path)]) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
    for (flag, path) in paths {
        out.push(flag.into());
        out.push(path.as_os_str().to_owned());
    }
    out
}

/// `cold`: Go's build cache and kubedist's program cache empty (the module
/// cache kept), as for a tag nothing was built from yet.
pub fn run(root: &Path, wanted: &str, arch: Arch, work: &Path, cold: bool) -> Result<Release> {
    let _ = std::fs::remove_dir_all(work);
    if cold {
        // Read by every go command and `source::Go` this process starts
        // from here on.
        std::env::set_var("GOCACHE", work.join("go-build"));
        std::env::set_var("KUBEDIST_SOURCE_CACHE", work.join("programs"));
    }
    let tree = work.join("tree");
    crate::bump::copy_tree(root, &tree)?;
    eprintln!(
        "bench: bump {wanted} on a copy of the tree ({})",
        tree.display()
    );
    let moved = crate::bump::bump(&tree, wanted)?;
    let version = moved.version.to_string();
    let bump = moved
        .steps
        .0
        .iter()
        .map(|&(name, s)| (name, s, GO_STEPS.contains(&name)))
        .collect();

    let out = work.join("dist");
    let dist = Dist::try_parse_from(argv(
        &[
            "dist",
            "--source",
            "--version",
            &version,
            "--arch",
            arch.go_name(),
            "--formats",
            "deb,rpm,sysext",
        ],
        &[("--out", &out)],
    ))
    .context("dist's arguments")?;
    eprintln!("bench: dist --source --version {version}");
    let started = Instant::now();
    crate::dist::run(&Spec::load(&tree)?, &dist.args)?;
    let dist_seconds = started.elapsed().as_secs_f64();

    let key = work.join("repo-key.asc");
    crate::keys::RepoKey::generate_test_key(&key)?;
    let repo = Repo::try_parse_from(argv(
        &["repo", "--channels", "minor"],
        &[
            ("--from", &out),
            ("--out", &work.join("repo")),
            ("--key", &key),
        ],
    ))
    .context("repo's arguments")?;
    eprintln!("bench: repo --channels minor");
    let started = Instant::now();
    crate::repo::run(&tree, &repo.args)?;
    let repo_seconds = started.elapsed().as_secs_f64();
    Ok(Release {
        version,
        cold,
        bump,
        dist: dist_seconds,
        repo: repo_seconds,
    })
}
