//! `cargo xtask dist`: fetch → stage → emit, then SHA256SUMS.
use crate::spec::Spec;
use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_spec: &Spec, _args: &Args) -> Result<()> {
    anyhow::bail!("not yet implemented")
}
