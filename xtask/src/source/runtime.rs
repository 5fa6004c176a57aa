//! The container runtime of the booted test nodes, built from source:
//! containerd 2.x and runc at the versions of `pkg/runtime.toml`, by the
//! recipes of pkg/source.toml, into `DIR/runtime/<arch>/` of a `--from`
//! directory. kubedist does not package it; the cluster tests install it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use super::{build_pinned, Go, Recipes};
use crate::spec::Arch;

/// `pkg/runtime.toml`: recipe → version.
pub fn versions(root: &Path) -> Result<BTreeMap<String, String>> {
    let path = root.join("pkg/runtime.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| path.display().to_string())
}

/// Builds every program of the runtime for `arches` into
/// `dir/runtime/<arch>/`.
pub fn write(root: &Path, go: &Go, arches: &[Arch], dir: &Path) -> Result<()> {
    let recipes = Recipes::load(root)?;
    for (name, version) in versions(root)? {
        let recipe = recipes.get(&name)?;
        let built = build_pinned(go, root, &name, recipe, &version, arches, &recipe.packages)?;
        for (arch, programs) in built {
            for (program, path) in programs {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                let dest = dir
                    .join(crate::inputs::from_dir::RUNTIME)
                    .join(arch.go_name())
                    .join(&program);
                crate::util::write_bytes_atomic(&dest, &bytes, 0o755)?;
            }
        }
    }
    Ok(())
}
