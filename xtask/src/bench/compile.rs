//! What a newcomer waits for before the first artifact: a cold compile of
//! the xtask, and a fresh clone to its first artifacts with the README's
//! first command for two architectures (`cargo xtask dist --fixtures --arch
//! amd64,arm64`).
//!
//! Both run in a `git clone` of this checkout's HEAD (uncommitted changes
//! are not in it) with an empty `target/`. Crates come from cargo's local
//! registry cache, as on any machine that has built once; Debian's fixture
//! packages are downloaded again.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::measure::{self, Sample};

pub struct Compile {
    /// `cargo build -p xtask` from an empty target/.
    pub cold: Sample,
    /// Then `cargo xtask dist --fixtures --arch amd64,arm64`: static
    /// builds, fixtures and every artifact (the xtask is already built).
    pub first_dist: Sample,
}

/// The architectures of the first dist.
pub const FIRST_ARCHES: &str = "amd64,arm64";

pub fn run(root: &Path, work: &Path, logs: &Path) -> Result<Compile> {
    let clone = work.join("clone");
    let _ = fs::remove_dir_all(&clone);
    measure::run(
        Command::new("git")
            .args(["clone", "--quiet", "--no-hardlinks"])
            .arg(root)
            .arg(&clone),
        &logs.join("clone.log"),
    )
    .context("cloning the checkout")?;
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(crate::util::cargo());
        cmd.args(args)
            .current_dir(&clone)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("SOURCE_DATE_EPOCH");
        cmd
    };
    eprintln!("    cold compile of the xtask in {}", clone.display());
    let cold = measure::run(
        &mut cargo(&["build", "-p", "xtask"]),
        &logs.join("compile-cold.log"),
    )?;
    eprintln!(
        "    cold compile: {:.1} s wall, {:.1} s CPU",
        cold.wall, cold.cpu
    );
    let first_dist = measure::run(
        &mut cargo(&["xtask", "dist", "--fixtures", "--arch", FIRST_ARCHES]),
        &logs.join("first-dist.log"),
    )?;
    eprintln!(
        "    first dist: {:.1} s wall, {:.1} s CPU",
        first_dist.wall, first_dist.cpu
    );
    let _ = fs::remove_dir_all(&clone);
    Ok(Compile { cold, first_dist })
}
