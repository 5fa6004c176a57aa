//! The artifact writers: `deb` (cargo-deb as a library, its data archive
//! from `debpack`), `rpm` (the `rpm` crate) and `tarball` (tar + gzip), with
//! the codecs of `codec`. Each reads only staged trees (`crate::stage`) and
//! writes one file through a temp file and a rename.

pub mod codec;
pub mod deb;
pub mod debpack;
pub mod rpm;
pub mod tarball;

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::stage::Staged;

/// Who the packages name as their maintainer/packager. A placeholder until
/// the project has a real list; lintian and rpmlint accept it.
pub const MAINTAINER: &str = "kubedist maintainers <kubedist@lists.example.org>";

/// What every artifact shares beyond the staged trees.
pub struct Meta {
    /// The project's home (Cargo.toml's `workspace.package.repository`).
    pub homepage: String,
    /// SOURCE_DATE_EPOCH: every timestamp in every artifact.
    pub epoch: u64,
    /// The codec and level of each format.
    pub codecs: codec::Codecs,
    /// Threads each artifact's encoder may use (the output does not depend
    /// on it).
    pub threads: u32,
    /// The repository root (LICENSE, pkg/scripts/, installer/).
    pub root: PathBuf,
}

impl Meta {
    pub fn license_text(&self) -> Result<Vec<u8>> {
        let path = self.root.join("LICENSE");
        fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// `pkg/scripts/<name>` with its `@NAME@` values filled in.
    pub fn script(&self, name: &str, values: &[(&str, String)]) -> Result<String> {
        let path = self.root.join("pkg/scripts").join(name);
        let mut text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        for (key, value) in values {
            text = text.replace(&format!("@{key}@"), value);
        }
        if let Some(left) = crate::stage::leftover_placeholder(&text) {
            bail!("{}: placeholder @{left}@ has no value", path.display());
        }
        Ok(text)
    }
}

/// What the maintainer scripts of a package work on, as the space-separated
/// `path:mode` words of pkg/scripts/.
pub struct ScriptValues {
    pub dirs: String,
    pub units: String,
    /// "yes" when the package ships systemd units or drop-ins.
    pub reload: &'static str,
}

impl ScriptValues {
    pub fn new(pkg: &Staged, unitdir: &str) -> ScriptValues {
        let under_unitdir = pkg.package_files().any(|f| {
            f.dest
                .starts_with(&format!("{}/", unitdir.trim_end_matches('/')))
        });
        ScriptValues {
            dirs: pkg
                .dirs
                .iter()
                .map(|d| format!("{}:{:04o}", d.path, d.mode))
                .collect::<Vec<_>>()
                .join(" "),
            units: pkg.systemd_units.join(" "),
            reload: if under_unitdir { "yes" } else { "no" },
        }
    }

    pub fn needed(&self) -> bool {
        !self.dirs.is_empty() || !self.units.is_empty() || self.reload == "yes"
    }
}

/// One line of both formats' changelogs.
pub fn changelog_line(pkg: &Staged) -> String {
    format!(
        "{} {} packaged by kubedist (package revision {}).",
        pkg.version_from,
        pkg.upstream_version.replace('~', "-"),
        pkg.revision
    )
}
