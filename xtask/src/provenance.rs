//! How a release was built: one in-toto statement (SLSA provenance v1)
//! beside the artifacts, `kubedist-<version>-<revision>.intoto.json`,
//! listed in SHA256SUMS and so covered by `--sign`.
//!
//! Its subjects are every other file SHA256SUMS lists, with their
//! digests; its materials every input (the upstream downloads, the Debian
//! package of the installer image's shell), the source tree's commit and
//! `Cargo.lock`'s digest; its parameters what decides the bytes (the
//! version, revision, architectures, formats, codecs, `SOURCE_DATE_EPOCH`)
//! and the toolchain. No clock, host name or path goes in: the same inputs
//! give the same statement.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::sbom::Origin;

/// What decides the bytes of a release, as `dist` was asked for it.
pub struct Parameters {
    pub version: String,
    pub revision: u32,
    pub arches: Vec<String>,
    pub formats: Vec<String>,
    pub compression: String,
    pub epoch: u64,
    /// Where the upstream files came from: `official`, `mirror URL`, or a
    /// directory (`--from`, `--fixtures`).
    pub origin: String,
    /// The project's repository (Cargo.toml's `workspace.package.repository`).
    pub repository: String,
}

/// The statement's file name.
pub fn file_name(version: &str, revision: u32) -> String {
    format!("kubedist-{version}-{revision}.intoto.json")
}

/// The statement for the files `subjects` (`(name, sha256)`).
pub fn statement(
    root: &Path,
    params: &Parameters,
    subjects: &[(String, String)],
    origins: &[Origin],
) -> Result<Vec<u8>> {
    let mut materials: Vec<Value> = Vec::new();
    if let Some((commit, clean)) = git_head(root) {
        materials.push(json!({
            "name": "source",
            "uri": format!("git+{}@{commit}", params.repository),
            "digest": { "gitCommit": commit },
            "annotations": { "workingTree": if clean { "clean" } else { "modified" } },
        }));
    }
    let lock = root.join("Cargo.lock");
    materials.push(json!({
        "name": "Cargo.lock",
        "digest": { "sha256": crate::digest::sha256_file(&lock)? },
    }));
    // Every input from outside; the programs built here come from the
    // source above. Those of a --from directory have no URL: their digest
    // names them.
    let mut seen = std::collections::BTreeSet::new();
    for o in origins
        .iter()
        .filter(|o| o.supplier != crate::sbom::SUPPLIER)
    {
        if seen.insert((&o.name, &o.sha256)) {
            let mut m = json!({
                "name": o.name,
                "digest": { "sha256": o.sha256 },
                "annotations": { "purl": o.purl, "how": o.comment },
            });
            if let Some(url) = &o.url {
                m["uri"] = json!(url);
            }
            materials.push(m);
        }
    }
    let statement = json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subjects
            .iter()
            .map(|(name, sha)| json!({ "name": name, "digest": { "sha256": sha } }))
            .collect::<Vec<_>>(),
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://kubedist.invalid/provenance/dist/v1",
                "externalParameters": {
                    "version": params.version,
                    "revision": params.revision,
                    "architectures": params.arches,
                    "formats": params.formats,
                    "compression": params.compression,
                    "SOURCE_DATE_EPOCH": params.epoch,
                    "upstream": params.origin,
                },
                "internalParameters": { "toolchain": toolchain(root) },
                "resolvedDependencies": materials,
            },
            "runDetails": {
                "builder": { "id": format!("{}/xtask/dist", params.repository) },
                "metadata": {},
            },
        },
    });
    let mut bytes = serde_json::to_vec_pretty(&statement).context("writing the provenance")?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The checkout's commit and whether its working tree matches it, when it
/// is a git checkout.
fn git_head(root: &Path) -> Option<(String, bool)> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let status = git(&["status", "--porcelain", "--untracked-files=no"])?;
    Some((commit, status.is_empty()))
}

/// `rustc --version` and `cargo --version`, as the builds ran them.
fn toolchain(root: &Path) -> Value {
    let version = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .current_dir(root)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    json!({ "rustc": version("rustc"), "cargo": version(&crate::util::cargo()) })
}
