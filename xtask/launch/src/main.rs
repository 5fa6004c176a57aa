//! What `cargo xtask` runs: builds the xtask, then runs it with the caller's
//! arguments and environment.
//!
//! Why a launcher: the `cc` crate tells cargo to re-run every C build script
//! (zstd, liblzma, ring) when `SOURCE_DATE_EPOCH` changes, since gcc reads it
//! for `__DATE__`. Operators set a new epoch for each release, and each new
//! value would recompile half the xtask (minutes on a small machine). The
//! xtask reads the epoch at run time, so the cargo that builds it never needs
//! to see it: this crate has no dependencies (building it reads nothing from
//! the environment), builds the xtask with the variable removed, and then
//! `exec`s it with the environment the caller gave.
//!
//! The variables `cargo run` sets for this launcher (`CARGO_MANIFEST_DIR`,
//! `CARGO_PKG_*`, ...) describe the launcher, not the caller, and are removed
//! for both: build scripts such as ring's rerun when `CARGO_MANIFEST_DIR`
//! changes, so every cargo the xtask starts (`cargo test`, static builds)
//! would otherwise rebuild what the last one built.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

fn main() -> ExitCode {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_run) {
            std::env::remove_var(&name);
        }
    }
    match build_xtask() {
        Ok(xtask) => {
            let err = Command::new(&xtask)
                .args(std::env::args_os().skip(1))
                .exec();
            eprintln!("error: starting {}: {err}", xtask.display());
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `cargo build -p xtask` without SOURCE_DATE_EPOCH and returns the
/// path of the binary it reports.
fn build_xtask() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let mut child = Command::new(&cargo)
        .args([
            "build",
            "--package",
            "xtask",
            "--message-format=json-render-diagnostics",
        ])
        .args(["--manifest-path", manifest])
        .env_remove("SOURCE_DATE_EPOCH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", cargo.to_string_lossy()))?;

    // cargo's own lines go on to stderr as they come, so a long first build
    // shows its progress; a build that compiled nothing stays silent.
    let stderr = child.stderr.take().expect("stderr is piped");
    let relay = std::thread::spawn(move || {
        let mut compiled = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let status = line.trim_start();
            compiled |= status.starts_with("Compiling");
            if status.starts_with("Finished") && !compiled {
                continue;
            }
            eprintln!("{line}");
        }
    });
    let mut messages = String::new();
    child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut messages)
        .map_err(|e| format!("reading cargo's output: {e}"))?;
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    let _ = relay.join();
    if !status.success() {
        return Err(format!("building the xtask failed ({status})"));
    }
    messages
        .lines()
        .rev()
        .find_map(xtask_executable)
        .ok_or_else(|| "cargo built the xtask but reported no executable for it".to_string())
}

/// Whether `name` is one of the variables `cargo run` sets to describe the
/// package it runs (`CARGO` itself, the path of cargo, is kept).
fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
        )
}

/// The `executable` of cargo's JSON message for the xtask binary, if `line`
/// is that message. A hand-made scan instead of a JSON parser: this crate
/// stays free of dependencies.
fn xtask_executable(line: &str) -> Option<PathBuf> {
    if !line.contains(r#""reason":"compiler-artifact""#)
        || !line.contains(r#""kind":["bin"]"#)
        || !line.contains(r#""name":"xtask""#)
    {
        return None;
    }
    let start = line.find(r#""executable":""#)? + r#""executable":""#.len();
    let mut path = String::new();
    let mut chars = line[start..].chars();
    loop {
        match chars.next()? {
            '"' => return Some(PathBuf::from(path)),
            '\\' => path.push(chars.next()?),
            c => path.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{set_by_cargo_run, xtask_executable};

    #[test]
    fn removes_only_what_cargo_run_describes_the_launcher_with() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_BIN_NAME",
        ] {
            assert!(set_by_cargo_run(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "SOURCE_DATE_EPOCH",
            "PATH",
        ] {
            assert!(!set_by_cargo_run(name), "{name}");
        }
    }

    #[test]
    fn finds_the_xtask_binary_in_cargo_messages() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/xtask#0.1.0","target":{"kind":["bin"],"crate_types":["bin"],"name":"xtask","src_path":"/w/xtask/src/main.rs"},"filenames":["/w/target/debug/xtask"],"executable":"/w/tar\"get/debug/xtask","fresh":true}"#;
        assert_eq!(
            xtask_executable(line),
            Some("/w/tar\"get/debug/xtask".into())
        );
    }

    #[test]
    fn ignores_libraries_build_scripts_and_other_binaries() {
        for line in [
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"xtask"},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"kubelet-wrapper"},"executable":"/w/target/debug/kubelet-wrapper"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ] {
            assert_eq!(xtask_executable(line), None, "{line}");
        }
    }
}
