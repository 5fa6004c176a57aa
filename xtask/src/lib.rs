//! `cargo xtask`: the kubedist workflow, as a library the binary
//! (`main.rs`), the tests and the fuzz targets (`fuzz/`) share. Each
//! subcommand lives in its own module (see ARCHITECTURE.md); `cli` parses
//! the command line, `fuzz` is what the fuzz targets run.

mod archive;
mod bench;
mod build;
mod bump;
mod cache;
mod digest;
mod dist;
mod emit;
mod fetch;
mod fixtures;
mod inputs;
mod keys;
mod layout;
mod provenance;
mod repo;
mod sbom;
mod schedule;
mod source;
mod spec;
mod stage;
mod test;
mod util;
mod version;

pub mod cli;
pub mod fuzz;

#[cfg(test)]
mod tidy;
