//! `cargo xtask repo`: signed apt and yum/dnf repositories from dist output.
use std::path::Path;

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_root: &Path, _args: &Args) -> Result<()> {
    anyhow::bail!("not yet implemented")
}
