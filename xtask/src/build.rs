//! Builds this workspace's static binaries (kubelet-wrapper, the test
//! stand-in) for a target architecture, and says which crates each links.
//!
//! Reproducible: the workspace root and `$CARGO_HOME` are remapped in every
//! path the compiler embeds, so that two checkouts in different directories
//! produce byte-identical binaries.
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::spec::Arch;

/// The target directory of static builds, apart from the host build's so that
/// a static build never waits for (or invalidates) the xtask's own.
pub fn target_dir(root: &Path) -> PathBuf {
    root.join("target/static")
}

/// A static program built here.
#[derive(Debug, Clone)]
pub struct Built {
    pub path: PathBuf,
    /// Its package's version.
    pub version: String,
    /// The packages compiled into it, `(name, version)`, sorted; the
    /// program's own package left out.
    pub linked: Vec<(String, String)>,
}

/// Builds binary `bin` of workspace package `package` as a static
/// executable for `arch` (`Arch::static_target`), reproducibly (paths
/// remapped), with `$CARGO_HOME` (or `~/.cargo`) and the static target
/// directory.
pub fn static_binary(root: &Path, package: &str, bin: &str, arch: Arch) -> Result<Built> {
    static_binary_in(root, &target_dir(root), &cargo_home()?, package, bin, arch)
}

/// `static_binary` with the target directory and cargo home given.
pub fn static_binary_in(
    root: &Path,
    target_dir: &Path,
    cargo_home: &Path,
    package: &str,
    bin: &str,
    arch: Arch,
) -> Result<Built> {
    let target = arch.static_target();
    let sh = Shell::new().context("starting a shell for cargo")?;
    require_target(&sh, target)?;

    let mut flags = remap_flags(root, cargo_home);
    let mut build = Command::new("cargo");
    build
        .args([
            "build",
            "--release",
            "--locked",
            "--message-format=json-render-diagnostics",
        ])
        .args([
            "-p",
            package,
            "--bin",
            bin,
            "--target",
            target,
            "--target-dir",
        ])
        .arg(target_dir)
        .current_dir(root)
        .env("CARGO_HOME", cargo_home);
    if let Some((linker, _)) = arch.cross_linker() {
        // A glibc target: static only when asked, linked by the cross gcc.
        flags.push("-Ctarget-feature=+crt-static".into());
        let var = format!(
            "CARGO_TARGET_{}_LINKER",
            target.to_uppercase().replace('-', "_")
        );
        build.env(var, linker);
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = build.spawn().context("running cargo build")?;
    // cargo's progress and diagnostics go on to our stderr as they come;
    // its first error line is kept for the one-line failure.
    let stderr = child.stderr.take().context("cargo's stderr")?;
    let progress = std::thread::spawn(move || {
        let mut first_error = None;
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            eprintln!("{line}");
            if first_error.is_none() && line.starts_with("error") {
                first_error = Some(line);
            }
        }
        first_error
    });
    let mut messages = String::new();
    child
        .stdout
        .take()
        .context("cargo's stdout")?
        .read_to_string(&mut messages)
        .context("reading cargo's messages")?;
    let status = child.wait().context("waiting for cargo build")?;
    let first_error = progress.join().unwrap_or(None);
    if !status.success() {
        bail!(
            "{}",
            build_failure(bin, target, cargo_home, first_error.as_deref())
        );
    }

    let out = target_dir.join(target).join("release").join(bin);
    if !out.is_file() {
        bail!("cargo build succeeded but {} does not exist", out.display());
    }
    let mut linked = linked_crates(&messages, &target_dir.join(target))?;
    let own = linked
        .iter()
        .position(|(name, _)| name == package)
        .with_context(|| format!("cargo build: no message for package {package}"))?;
    let (_, version) = linked.remove(own);
    Ok(Built {
        path: out,
        version,
        linked,
    })
}

/// One line for a failed build; one that could not download a crate names
/// it and the command that fetches every crate of Cargo.lock.
fn build_failure(bin: &str, target: &str, cargo_home: &Path, first_error: Option<&str>) -> String {
    let error = first_error
        .unwrap_or("cargo build failed")
        .trim_start_matches("error: ");
    if error.contains("download") || error.contains("--offline") || error.contains("failed to get")
    {
        format!(
            "building {bin} for {target}: {error}: the crates of Cargo.lock are not all in {} \
             and cannot be downloaded here: run `cargo fetch --locked` where crates.io is \
             reachable (or point CARGO_HOME at a filled one)",
            cargo_home.display()
        )
    } else {
        format!("building {bin} for {target}: {error}")
    }
}

/// The packages compiled into a program, itself included, from its
/// build's own messages: each unit built for the target (its files under
/// `target_out`) other than build scripts. Build scripts, procedural
/// macros and their dependencies run on the build host (their files lie
/// outside `target_out`) and link nothing into the program.
///
/// Why the build's messages and not `cargo metadata`: metadata needs every
/// package of Cargo.lock on disk, for every platform and every member's
/// dev-dependencies, so on a fresh machine it wanted crates no build had
/// downloaded (and, offline, failed). The build downloads exactly what it
/// compiles, and its messages name exactly that, cached units included.
fn linked_crates(messages: &str, target_out: &Path) -> Result<Vec<(String, String)>> {
    let mut linked = std::collections::BTreeSet::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let kinds = message["target"]["kind"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if kinds.iter().any(|k| k == "custom-build") {
            continue;
        }
        let for_target = message["filenames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .any(|f| Path::new(f).starts_with(target_out));
        if !for_target {
            continue;
        }
        let id = message["package_id"]
            .as_str()
            .context("cargo build: a compiler-artifact message without package_id")?;
        linked.insert(parse_package_id(id)?);
    }
    Ok(linked.into_iter().collect())
}

/// `(name, version)` of a cargo package ID spec:
/// `registry+https://…#serde_json@1.0.1`, or `path+file:///…/foo#0.1.0`
/// where the name is the URL's last segment.
fn parse_package_id(id: &str) -> Result<(String, String)> {
    let (url, fragment) = id
        .split_once('#')
        .with_context(|| format!("cargo build: package id {id:?} has no '#'"))?;
    let (name, version) = match fragment.split_once('@') {
        Some((name, version)) => (name.to_string(), version.to_string()),
        None => (
            url.trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(url)
                .to_string(),
            fragment.to_string(),
        ),
    };
    Ok((name, version))
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

    #[test]
    fn package_ids_of_both_spellings() {
        assert_eq!(
            parse_package_id(
                "registry+https://github.com/rust-lang/crates.io-index#serde_json@1.0.154"
            )
            .unwrap(),
            ("serde_json".into(), "1.0.154".into())
        );
        assert_eq!(
            parse_package_id("path+file:///src/kubedist/wrapper#kubelet-wrapper@0.1.0").unwrap(),
            ("kubelet-wrapper".into(), "0.1.0".into())
        );
        assert_eq!(
            parse_package_id("path+file:///src/kubedist/standin#0.2.0").unwrap(),
            ("standin".into(), "0.2.0".into())
        );
    }

    #[test]
    fn only_units_built_for_the_target_are_linked() {
        let out = "/t/x86_64-unknown-linux-musl";
        let messages = [
            // A library for the target: linked.
            r#"{"reason":"compiler-artifact","package_id":"registry+https://x#libc@0.2.1","target":{"kind":["lib"]},"filenames":["/t/x86_64-unknown-linux-musl/release/deps/liblibc.rlib"],"fresh":true}"#,
            // A build script, and a library only it uses (host): not linked.
            r#"{"reason":"compiler-artifact","package_id":"registry+https://x#libc@0.2.1","target":{"kind":["custom-build"]},"filenames":["/t/release/build/libc/build-script-build"]}"#,
            r#"{"reason":"compiler-artifact","package_id":"registry+https://x#toml@1.0.0","target":{"kind":["lib"]},"filenames":["/t/release/deps/libtoml.rlib"]}"#,
            // A procedural macro runs in the compiler (host): not linked.
            r#"{"reason":"compiler-artifact","package_id":"registry+https://x#serde_derive@1.0.0","target":{"kind":["proc-macro"]},"filenames":["/t/release/deps/libserde_derive.so"]}"#,
            r#"{"reason":"build-script-executed","package_id":"registry+https://x#libc@0.2.1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/standin#kubedist-standin@0.1.0","target":{"kind":["bin"]},"filenames":["/t/x86_64-unknown-linux-musl/release/kubedist-standin"]}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            linked_crates(&messages, Path::new(out)).unwrap(),
            [
                ("kubedist-standin".to_string(), "0.1.0".to_string()),
                ("libc".into(), "0.2.1".into())
            ]
        );
    }

    #[test]
    fn a_crate_that_cannot_be_downloaded_is_one_line_with_the_fix() {
        let line = build_failure(
            "kubelet-wrapper",
            "x86_64-unknown-linux-musl",
            Path::new("/home/u/.cargo"),
            Some("error: failed to download `chacha20 v0.10.2`"),
        );
        assert_eq!(
            line,
            "building kubelet-wrapper for x86_64-unknown-linux-musl: failed to download \
             `chacha20 v0.10.2`: the crates of Cargo.lock are not all in /home/u/.cargo and \
             cannot be downloaded here: run `cargo fetch --locked` where crates.io is \
             reachable (or point CARGO_HOME at a filled one)"
        );
    }

    /// The regression of a fresh machine: with a cargo home that holds
    /// only what this build downloads, the crates of the program are still
    /// listed (the SBOM's list once ran `cargo metadata --offline`, which
    /// wanted every package of Cargo.lock on disk and failed there). Needs
    /// crates.io, as any first build does.
    #[test]
    fn a_fresh_cargo_home_lists_the_crates_it_downloaded() {
        let root = crate::util::repo_root();
        let home = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        let built = static_binary_in(
            &root,
            target.path(),
            home.path(),
            "kubedist-standin",
            "kubedist-standin",
            Arch::Amd64,
        )
        .unwrap();
        let names: Vec<&str> = built.linked.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"serde_json"), "{names:?}");
        // Every crate named is one the build downloaded, at Cargo.lock's version.
        let lock: toml::Table =
            toml::from_str(&std::fs::read_to_string(root.join("Cargo.lock")).unwrap()).unwrap();
        for (name, version) in &built.linked {
            let locked = lock["package"].as_array().unwrap().iter().any(|p| {
                p["name"].as_str() == Some(name) && p["version"].as_str() == Some(version)
            });
            assert!(locked, "{name} {version} is not in Cargo.lock");
            let downloaded = std::fs::read_dir(home.path().join("registry/cache"))
                .unwrap()
                .flatten()
                .any(|index| {
                    index
                        .path()
                        .join(format!("{name}-{version}.crate"))
                        .is_file()
                });
            assert!(
                downloaded,
                "{name} {version} was not downloaded into the fresh CARGO_HOME"
            );
        }
        let own = lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str() == Some("kubedist-standin"));
        assert_eq!(
            own.and_then(|p| p["version"].as_str()),
            Some(built.version.as_str())
        );
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
                let here = static_binary(&root, package, bin, arch).unwrap().path;
                let there = static_binary(copy.path(), package, bin, arch).unwrap().path;
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
