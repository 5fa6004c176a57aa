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

/// Builds binary `bin` of workspace package `package` as a static
/// executable for `arch` (`Arch::static_target`), reproducibly (paths
/// remapped), and returns its path.
pub fn static_binary(root: &Path, package: &str, bin: &str, arch: Arch) -> Result<PathBuf> {
    let target = arch.static_target();
    let sh = Shell::new().context("starting a shell for cargo")?;
    sh.change_dir(root);
    require_target(&sh, target)?;

    let target_dir = target_dir(root);
    let mut flags = remap_flags(root, &cargo_home()?);
    let mut build = cmd!(
        sh,
        "cargo build --release -p {package} --bin {bin} --target {target} --target-dir {target_dir}"
    );
    if let Some((linker, _)) = arch.cross_linker() {
        // A glibc target: static only when asked, linked by the cross gcc.
        flags.push("-Ctarget-feature=+crt-static".into());
        let var = format!(
            "CARGO_TARGET_{}_LINKER",
            target.to_uppercase().replace('-', "_")
        );
        build = build.env(var, linker);
    }
    eprintln!("build: {package} ({bin}) for {arch} ({target})");
    // CARGO_ENCODED_RUSTFLAGS (0x1f-separated) keeps paths with spaces intact;
    // RUSTFLAGS from the caller's environment would make the output depend on
    // it, so it is dropped.
    build
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
        .env_remove("RUSTFLAGS")
        // Compilers never need the epoch, and cargo would rebuild C build
        // scripts whenever it changes (see xtask/launch).
        .env_remove("SOURCE_DATE_EPOCH")
        .run()
        .with_context(|| format!("building {bin} for {target}"))?;

    let out = target_dir.join(target).join("release").join(bin);
    if !out.is_file() {
        bail!("cargo build succeeded but {} does not exist", out.display());
    }
    Ok(out)
}

/// Makes sure the static targets of `arches` and their cross linkers are
/// installed, adding missing targets with `rustup target add` (a fresh
/// toolchain has only the host's).
/// dist calls it before any long step: a machine that cannot build the static
/// binaries fails in its first second, with the command that fixes it.
pub fn ensure_targets(arches: &[Arch]) -> Result<()> {
    for arch in arches {
        if let Some((linker, packages)) = arch.cross_linker() {
            if !crate::util::on_path(linker) {
                bail!("static builds for {arch} are linked by {linker}, which is not on PATH: install it (Debian: apt-get install {packages})");
            }
        }
    }
    let targets: Vec<&str> = arches.iter().map(|a| a.static_target()).collect();
    ensure_targets_with("rustup", &targets)
}

fn ensure_targets_with(rustup: &str, targets: &[&str]) -> Result<()> {
    let sh = Shell::new().context("starting a shell for rustup")?;
    let wanted = targets.join(" ");
    let installed = cmd!(sh, "{rustup} target list --installed")
        .quiet()
        .ignore_stderr()
        .read()
        .with_context(|| {
            format!("static builds need the Rust targets {wanted}, added with rustup, which did not run: install rustup, then `rustup target add {wanted}`")
        })?;
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| !installed.lines().any(|l| l.trim() == *t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let missing_list = missing.join(" ");
    eprintln!(
        "build: adding Rust target(s) {missing_list} with rustup (for the static kubelet-wrapper)"
    );
    let out = std::process::Command::new(rustup)
        .args(["target", "add"])
        .args(&missing)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running `{rustup} target add {missing_list}`"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .trim();
        bail!(
            "Rust target(s) {missing_list} missing and `rustup target add {missing_list}` failed ({why}): run it once rustup can reach its server"
        );
    }
    Ok(())
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

    /// A stand-in for rustup: `target list --installed` prints the host
    /// target only; `target add` appends its arguments to a log and exits
    /// with `add_status`, saying why on stderr.
    fn fake_rustup(dir: &Path, add_status: i32) -> PathBuf {
        let path = dir.join("rustup");
        let log = dir.join("added");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n\
                 case \"$1 $2\" in\n\
                 'target list') echo x86_64-unknown-linux-gnu ;;\n\
                 'target add') shift 2; echo \"$*\" >>'{}'; \
                 [ {add_status} = 0 ] || echo 'error: could not download file from the dist server' >&2; exit {add_status} ;;\n\
                 esac\n",
                log.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn missing_targets_are_added_with_rustup() {
        let dir = tempfile::tempdir().unwrap();
        let rustup = fake_rustup(dir.path(), 0);
        let targets = [
            "x86_64-unknown-linux-gnu",
            "aarch64-unknown-linux-musl",
            "s390x-unknown-linux-musl",
        ];
        ensure_targets_with(rustup.to_str().unwrap(), &targets).unwrap();
        let added = std::fs::read_to_string(dir.path().join("added")).unwrap();
        assert_eq!(
            added,
            "aarch64-unknown-linux-musl s390x-unknown-linux-musl\n"
        );
    }

    #[test]
    fn a_target_rustup_cannot_add_fails_at_once_with_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let rustup = fake_rustup(dir.path(), 1);
        let err = ensure_targets_with(rustup.to_str().unwrap(), &["aarch64-unknown-linux-musl"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "Rust target(s) aarch64-unknown-linux-musl missing and `rustup target add \
             aarch64-unknown-linux-musl` failed (error: could not download file from the dist \
             server): run it once rustup can reach its server"
        );
    }

    #[test]
    fn no_rustup_is_one_line_naming_what_to_run() {
        let err = ensure_targets_with("/nonexistent/rustup", &["aarch64-unknown-linux-musl"])
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("static builds need the Rust targets aarch64-unknown-linux-musl"),
            "{text}"
        );
        assert!(
            text.contains("`rustup target add aarch64-unknown-linux-musl`"),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }

    /// Copies the checkout (without target/) elsewhere and builds there: the
    /// binaries must be byte-identical to the ones built here.
    #[test]
    #[ignore = "copies the checkout and builds four static binaries (about a minute)"]
    fn builds_from_two_checkouts_are_identical() {
        let root = crate::util::repo_root();
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
