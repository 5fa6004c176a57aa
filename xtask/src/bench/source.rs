//! The source builds (`cargo xtask source`) against plain `go build` of the
//! same packages with the same flags and environment, both from Go's warm
//! caches and kubedist's program cache empty: what remains is kubedist's
//! own work (`go mod download` and `go mod verify`, the copy of the pins,
//! the rename into its cache); and kubedist's build again, from its own
//! program cache, as every later run is. With `--cold`, also each version
//! of `--cold-versions` for amd64 and arm64 from an empty Go build cache
//! (the module cache kept: downloads depend on the network, not on
//! kubedist) and an empty program cache: minutes each.
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::source::{self, Go, Recipes};
use crate::spec::{Arch, Spec};

/// One source of the release, built both ways.
pub struct Row {
    pub what: String,
    /// Best wall time of kubedist's build, seconds.
    pub kubedist: f64,
    /// Best wall time of plain `go build`, seconds.
    pub floor: f64,
    /// Best wall time of kubedist's build again, from its program cache.
    pub cached: f64,
}

pub struct SourceBuilds {
    /// `go env GOVERSION`.
    pub go: String,
    pub runs: usize,
    pub rows: Vec<Row>,
    /// Cold builds: what, and seconds.
    pub cold: Vec<(String, f64)>,
}

/// Every source of `spec`'s release built for `arch` from an empty Go
/// build cache and an empty program cache, once: seconds per source.
pub fn cold(spec: &Spec, work: &Path, arch: Arch) -> Result<Vec<(String, f64)>> {
    let recipes = Recipes::load(&spec.root)?;
    let mut go = Go::from_env(&spec.root)?;
    let mut out = Vec::new();
    for (name, release) in &spec.release.sources {
        let recipe = recipes.get(name)?;
        let version = &release.version;
        let dir = work.join(format!("cold-{name}-{version}-{arch}"));
        let _ = std::fs::remove_dir_all(&dir);
        go.cache = dir.join("programs");
        go.env = vec![("GOCACHE".to_string(), dir.join("go-build"))];
        eprintln!("bench: {name} v{version} {arch}: cold build");
        let started = Instant::now();
        source::build_pinned(
            &go,
            &spec.root,
            name,
            recipe,
            version,
            &[arch],
            &recipe.packages,
        )?;
        let seconds = started.elapsed().as_secs_f64();
        eprintln!("bench: {name} v{version} {arch}: {seconds:.0} s");
        out.push((format!("{name} v{version} {arch}"), seconds));
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(out)
}

pub fn run(spec: &Spec, work: &Path, arch: Arch, runs: usize) -> Result<SourceBuilds> {
    let recipes = Recipes::load(&spec.root)?;
    let mut go = Go::from_env(&spec.root)?;
    let _ = std::fs::remove_dir_all(work);
    let mut rows = Vec::new();
    for (name, release) in &spec.release.sources {
        let recipe = recipes.get(name)?;
        let version = &release.version;
        let pins = source::pins_dir(&spec.root, name, version);
        // kubedist's build of this source, as `dist --source` runs it, into
        // `go`'s program cache.
        let build = |go: &Go| {
            source::build_pinned(
                go,
                &spec.root,
                name,
                recipe,
                version,
                &[arch],
                &recipe.packages,
            )
        };
        eprintln!("bench: {name} v{version} {arch}: warming Go's caches");
        go.cache = work.join("warm");
        build(&go)?;
        let (mut kubedist, mut floor, mut cached) = (f64::MAX, f64::MAX, f64::MAX);
        for i in 0..runs {
            go.cache = work.join(format!("kubedist-{i}"));
            let started = Instant::now();
            build(&go)?;
            kubedist = kubedist.min(started.elapsed().as_secs_f64());
            let started = Instant::now();
            build(&go)?;
            cached = cached.min(started.elapsed().as_secs_f64());

            let dir = work.join(format!("go-build-{i}-{name}"));
            std::fs::create_dir_all(&dir)?;
            for file in ["go.mod", "go.sum"] {
                std::fs::copy(pins.join(file), dir.join(file))
                    .with_context(|| format!("copying {}", pins.join(file).display()))?;
            }
            let sysroot = source::sysroot(&go, &spec.root, name, recipe, version, arch)?;
            let mut plain = recipe.go_build(
                &go,
                &dir,
                version,
                arch,
                &recipe.packages,
                sysroot.as_deref(),
                &dir.join("out"),
            )?;
            let started = Instant::now();
            let status = plain.status().context("running go build")?;
            if !status.success() {
                bail!("plain go build of {name} v{version} failed ({status})");
            }
            floor = floor.min(started.elapsed().as_secs_f64());
        }
        rows.push(Row {
            what: format!(
                "{name} v{version} {arch} ({} programs)",
                recipe.packages.len()
            ),
            kubedist,
            floor,
            cached,
        });
    }
    Ok(SourceBuilds {
        go: go.version,
        runs,
        rows,
        cold: Vec::new(),
    })
}
