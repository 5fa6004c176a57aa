//! Builds this workspace's static binaries (kubelet-wrapper, the test
//! stand-in) for a target architecture.
//!
//! Reproducible: the workspace root and `$CARGO_HOME` are remapped in every
//! path the compiler embeds, so that two checkouts in different directories
//! produce byte-identical binaries.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::spec::Arch;

/// The target directory of static builds, apart from the host build's so that
/// a static build never waits for (or invalidates) the xtask's own.
pub fn target_dir(root: &Path) -> PathBuf {
    root.join("target/static")
}

/// Builds binary `bin` of workspace package `package` as a static musl
/// executable for `arch`, reproducibly (paths remapped), and returns its path.
pub fn static_binary(root: &Path, package: &str, bin: &str, arch: Arch) -> Result<PathBuf> {
    let target = arch.musl_target();
    let sh = Shell::new().context("starting a shell for cargo")?;
    sh.change_dir(root);
    require_target(&sh, target)?;

    let target_dir = target_dir(root);
    let flags = remap_flags(root, &cargo_home()?);
    eprintln!("build: {package} ({bin}) for {arch} ({target})");
    // CARGO_ENCODED_RUSTFLAGS (0x1f-separated) keeps paths with spaces intact;
    // RUSTFLAGS from the caller's environment would make the output depend on
    // it, so it is dropped.
    cmd!(
        sh,
        "cargo build --release -p {package} --bin {bin} --target {target} --target-dir {target_dir}"
    )
    .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
    .env_remove("RUSTFLAGS")
    .run()
    .with_context(|| format!("building {bin} for {target}"))?;

    let out = target_dir.join(target).join("release").join(bin);
    if !out.is_file() {
        bail!("cargo build succeeded but {} does not exist", out.display());
    }
    Ok(out)
}

/// Fails with the exact command to run when the Rust target is missing.
fn require_target(sh: &Shell, target: &str) -> Result<()> {
    let installed = cmd!(sh, "rustup target list --installed")
        .quiet()
        .read()
        .context("running `rustup target list --installed` (static builds need rustup)")?;
    if !installed.lines().any(|l| l.trim() == target) {
        bail!("Rust target {target} is not installed: run `rustup target add {target}`");
    }
    Ok(())
}

/// `$CARGO_HOME`, or cargo's default `~/.cargo`.
fn cargo_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cargo"))
}

/// Rustc flags that replace the checkout and cargo-home prefixes in embedded
/// paths (panic locations, debug info) with fixed ones.
fn remap_flags(root: &Path, cargo_home: &Path) -> Vec<String> {
    vec![
        format!("--remap-path-prefix={}=/kubedist", root.display()),
        format!("--remap-path-prefix={}=/cargo", cargo_home.display()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remap_flags_name_both_prefixes() {
        let flags = remap_flags(Path::new("/src/a b"), Path::new("/home/u/.cargo"));
        assert_eq!(
            flags,
            [
                "--remap-path-prefix=/src/a b=/kubedist",
                "--remap-path-prefix=/home/u/.cargo=/cargo"
            ]
        );
    }

    #[test]
    fn a_missing_target_names_the_rustup_command() {
        let sh = Shell::new().unwrap();
        let err = require_target(&sh, "riscv32-nonexistent-none").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Rust target riscv32-nonexistent-none is not installed: \
             run `rustup target add riscv32-nonexistent-none`"
        );
    }

    /// Copies the checkout (without target/) elsewhere and builds there: the
    /// binaries must be byte-identical to the ones built here.
    #[test]
    #[ignore = "copies the checkout and builds four static binaries (about a minute)"]
    fn builds_from_two_checkouts_are_identical() {
        let root = crate::repo_root();
        let copy = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(&root).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            let st = std::process::Command::new("cp")
                .arg("-a")
                .arg(&path)
                .arg(copy.path())
                .status()
                .unwrap();
            assert!(st.success(), "cp -a {}", path.display());
        }
        for arch in [Arch::Amd64, Arch::Arm64] {
            for (package, bin) in [
                ("kubelet-wrapper", "kubelet-wrapper"),
                ("kubedist-standin", "kubedist-standin"),
            ] {
                let here = static_binary(&root, package, bin, arch).unwrap();
                let there = static_binary(copy.path(), package, bin, arch).unwrap();
                assert!(
                    std::fs::read(&here).unwrap() == std::fs::read(&there).unwrap(),
                    "{bin} for {arch} differs between {} and {}",
                    here.display(),
                    there.display()
                );
            }
        }
    }
}
