//! Upstream inputs: download, verify, cache (or read from `--from DIR`).
use crate::spec::Spec;
use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_spec: &Spec, _args: &Args) -> Result<()> {
    anyhow::bail!("not yet implemented")
}
