//! Writes an offline `--from` directory for trials and tests.
use crate::spec::Spec;
use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_spec: &Spec, _args: &Args) -> Result<()> {
    anyhow::bail!("not yet implemented")
}
