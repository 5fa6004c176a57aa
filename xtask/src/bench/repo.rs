//! `cargo xtask repo` at scale: a year of releases and more (4 patch
//! releases per minor, 4 architectures, 5 packages × deb + rpm each, small
//! generated payloads: `repo::synth`) added one at a time, and the time of
//! each add measured against the number of releases already there, in both
//! layouts. The last add is also timed without the repository's state file
//! (a repository written before it existed, or one whose state was lost):
//! every published package read again, the cost the state saves.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::measure::{self, Sample};
use crate::repo::synth;

pub struct Scale {
    /// Packages per release.
    pub per_release: usize,
    /// The add of release k (k = 1..=N), per layout, to a repository of k-1.
    pub flat: Vec<Sample>,
    pub minor: Vec<Sample>,
    /// Release N+1 added to the N-release flat repository without its state.
    pub flat_no_state: Sample,
}

/// Adds `releases` generated releases to an empty repository per layout,
/// timing each add.
pub fn run(exe: &Path, releases: usize, epoch: u64, work: &Path, logs: &Path) -> Result<Scale> {
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work)?;
    let key = work.join("test.key");
    let arches: Vec<usize> = (0..synth::ARCHES.len()).collect();
    let release_dir = work.join("release");
    // Release k: minor 20 + (k-1)/4, patch (k-1)%4.
    let make = |k: usize| {
        let k = u32::try_from(k - 1).expect("few releases");
        synth::release(&release_dir, 20 + k / 4, k % 4, &arches, epoch)
    };
    let repo = |repo: &Path, layout: &str, key_arg: &str, log: &str| -> Result<Sample> {
        let mut cmd = Command::new(exe);
        cmd.args(["repo", "--channels", layout, "--from"])
            .arg(&release_dir)
            .arg("--out")
            .arg(repo)
            .arg(key_arg)
            .arg(&key)
            .env("SOURCE_DATE_EPOCH", epoch.to_string());
        measure::run(&mut cmd, &logs.join(log))
    };
    // The key, and a first run that is not timed (page cache, binaries).
    make(1)?;
    repo(
        &work.join("warm-up"),
        "flat",
        "--generate-test-key",
        "repo-warm-up.log",
    )?;
    let per_release = fs::read_dir(&release_dir)?.count() - 1;

    let (flat_dir, minor_dir) = (work.join("flat"), work.join("minor"));
    let (mut flat, mut minor) = (Vec::new(), Vec::new());
    for k in 1..=releases {
        make(k)?;
        let f = repo(&flat_dir, "flat", "--key", "repo-flat.log")?;
        let m = repo(&minor_dir, "minor", "--key", "repo-minor.log")?;
        if k == 1 || k % 10 == 0 || k == releases {
            eprintln!(
                "    release {k}: flat {:.2} s, minor {:.2} s (load {:.2})",
                f.wall,
                m.wall,
                measure::load()
            );
        }
        flat.push(f);
        minor.push(m);
    }
    make(releases + 1)?;
    fs::remove_file(flat_dir.join(crate::repo::STATE_FILE))?;
    let flat_no_state = repo(&flat_dir, "flat", "--key", "repo-flat.log")?;
    eprintln!(
        "    release {} without the state file: flat {:.2} s",
        releases + 1,
        flat_no_state.wall
    );
    Ok(Scale {
        per_release,
        flat,
        minor,
        flat_no_state,
    })
}
