//! dist's publishing: the artifacts moved into the output directory once
//! all of them were written, the provenance, SHA256SUMS and its signature,
//! the cache pruned, the summary.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::jobs::Built;
use super::Plan;
use crate::emit::{self, Job, Options};
use crate::{provenance, sbom};

/// Moves the artifacts into the output directory (only now that all of
/// them were written), writes SHA256SUMS, prunes the cache and prints the
/// summary.
pub(super) fn publish(
    plan: &Plan,
    written: &[Built],
    jobs: &[Job],
    origins: &[sbom::Origin],
) -> Result<()> {
    let out_dir = &plan.out_dir;
    if !out_dir.is_dir() {
        // Readable by a web server whatever the umask (an existing
        // directory keeps the mode its owner gave it).
        fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
        crate::util::set_mode(out_dir, 0o755)?;
    }
    let mut names = Vec::new();
    let mut known = BTreeMap::new();
    // What formats put beside their artifacts (the installer image's
    // layout directory and run examples), before the artifacts are moved.
    for (job, built) in jobs.iter().zip(written) {
        names.extend(
            job.format
                .publish_beside(&job.input, &built.path, out_dir)?,
        );
    }
    for built in written {
        for path in [&built.path, &built.sbom] {
            let name = path.file_name().context("artifact without a name")?;
            let dest = out_dir.join(name);
            fs::rename(path, &dest)
                .with_context(|| format!("moving {} to {}", path.display(), dest.display()))?;
            names.push(name.to_string_lossy().into_owned());
        }
        let name = built.path.file_name().unwrap_or_default().to_string_lossy();
        known.insert(name.into_owned(), built.sha256.clone());
    }
    let summary = write_sums(out_dir, &known, |subjects| {
        let params = provenance::Parameters {
            version: plan.k8s_version.clone(),
            revision: plan.spec.release.revision,
            arches: plan.arches.iter().map(|a| a.to_string()).collect(),
            formats: plan
                .formats
                .iter()
                .map(|f| f.about().name.to_string())
                .collect(),
            compression: plan.options.codecs.to_string(),
            epoch: plan.options.epoch,
            origin: plan.inputs.provenance(),
            repository: plan.options.homepage.clone(),
        };
        let name = provenance::file_name(&plan.k8s_version, plan.spec.release.revision);
        // An earlier run's statement of the same release is replaced, not
        // a subject.
        let subjects: Vec<(String, String)> = subjects
            .iter()
            .filter(|(n, _)| *n != name)
            .cloned()
            .collect();
        let statement = provenance::statement(&plan.spec.root, &params, &subjects, origins)?;
        Ok((name, statement))
    })?;
    sign_sums(out_dir, &plan.options)?;
    if let Some(cache) = &plan.cache {
        // Room for a few runs like this one.
        let size: u64 = summary.iter().map(|r| r.1).sum();
        let keys: Vec<String> = written.iter().flat_map(|b| b.cache_keys.clone()).collect();
        if let Err(e) = cache.prune(&keys, (4 * size).max(1 << 30)) {
            eprintln!("warning: artifact cache: {e:#}");
        }
    }
    names.push(provenance::file_name(
        &plan.k8s_version,
        plan.spec.release.revision,
    ));
    names.sort();
    print_summary(out_dir, &names, &summary);
    let cached = written.iter().filter(|b| b.cached).count();
    if cached > 0 {
        eprintln!(
            "==> {cached} of {} artifacts unchanged, copied from the artifact cache",
            written.len()
        );
    }
    Ok(())
}

/// The artifacts of `dir`, `(name, size, sha256)`, also written to
/// `dir/SHA256SUMS` (`sha256sum -c` format), with the release's provenance:
/// `provenance(subjects)` gives its name and bytes, made from every other
/// file's `(name, sha256)`. Digests in `known` (by name) are not computed
/// again.
fn write_sums(
    dir: &Path,
    known: &BTreeMap<String, String>,
    provenance: impl FnOnce(&[(String, String)]) -> Result<(String, Vec<u8>)>,
) -> Result<Vec<(String, u64, String)>> {
    let mut rows = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.ends_with(".oci")
            && path.join(crate::layout::OCI_LAYOUT).is_file()
            && !name.starts_with('.')
        {
            // An image layout: each of its files, as `sha256sum -c` reads them.
            rows.extend(layout_sums(&path, &name)?);
            continue;
        }
        let artifact = [
            ".deb",
            ".rpm",
            ".tar.gz",
            ".tar.xz",
            ".tar.zst",
            ".raw",
            ".oci.tar",
            ".yaml",
            ".spdx.json",
            ".intoto.json",
        ]
        .iter()
        .any(|ext| name.ends_with(ext));
        if !artifact || name.starts_with('.') {
            continue;
        }
        let size = entry
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        let sha = match known.get(&name) {
            Some(sha) => sha.clone(),
            None => crate::digest::sha256_file(&path)?,
        };
        rows.push((name, size, sha));
    }
    rows.sort();
    let subjects: Vec<(String, String)> = rows
        .iter()
        .map(|(n, _, s)| (n.clone(), s.clone()))
        .collect();
    let (name, statement) = provenance(&subjects)?;
    rows.retain(|(n, _, _)| *n != name);
    crate::util::write_bytes_atomic(&dir.join(&name), &statement, 0o644)?;
    rows.push((
        name,
        statement.len() as u64,
        crate::digest::sha256_bytes(&statement),
    ));
    rows.sort();
    let text: String = rows.iter().map(|(n, _, s)| format!("{s}  {n}\n")).collect();
    let path = dir.join("SHA256SUMS");
    crate::util::write_bytes_atomic(&path, text.as_bytes(), 0o644)?;
    Ok(rows)
}

/// `(dir/relative path, size, sha256)` of every file of the image layout
/// `path`; blobs are named by their digest, which is checked on the way.
fn layout_sums(path: &Path, dir: &str) -> Result<Vec<(String, u64, String)>> {
    let mut rows = Vec::new();
    for rel in [
        crate::layout::OCI_LAYOUT,
        crate::layout::INDEX,
        "manifest.json",
    ] {
        let file = path.join(rel);
        if file.is_file() {
            let size = fs::metadata(&file)
                .with_context(|| file.display().to_string())?
                .len();
            rows.push((
                format!("{dir}/{rel}"),
                size,
                crate::digest::sha256_file(&file)?,
            ));
        }
    }
    let blobs = path.join(crate::layout::BLOBS);
    for entry in fs::read_dir(&blobs).with_context(|| format!("reading {}", blobs.display()))? {
        let entry = entry.with_context(|| format!("reading {}", blobs.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file = entry.path();
        let sha = crate::digest::sha256_file(&file)?;
        if sha != name {
            bail!("{}: its content does not match its name", file.display());
        }
        let size = entry
            .metadata()
            .with_context(|| file.display().to_string())?
            .len();
        rows.push((format!("{dir}/{}", crate::layout::blob(&name)), size, sha));
    }
    Ok(rows)
}

/// `dist --sign`: `dir/SHA256SUMS.asc`, the detached signature of
/// `dir/SHA256SUMS`. Unsigned, an earlier run's signature is removed: it
/// would not match.
fn sign_sums(dir: &Path, options: &Options) -> Result<()> {
    let path = dir.join(emit::SUMS_SIGNATURE);
    let Some(key) = &options.signer else {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        };
    };
    let sums = dir.join("SHA256SUMS");
    let data = fs::read(&sums).with_context(|| format!("reading {}", sums.display()))?;
    let signature = key.detached_armored(&data, options.epoch)?;
    crate::util::write_bytes_atomic(&path, signature.as_bytes(), 0o644)?;
    eprintln!(
        "==> signed SHA256SUMS ({}) with {} ({})",
        emit::SUMS_SIGNATURE,
        key.fingerprint(),
        key.user_id()
    );
    Ok(())
}

fn print_summary(out_dir: &Path, written: &[String], rows: &[(String, u64, String)]) {
    println!("{}:", out_dir.display());
    // A directory's files (the image layout) make one line: its size.
    let mut lines: Vec<(String, u64, String)> = Vec::new();
    for (name, size, sha) in rows {
        match name.split_once('/') {
            Some((dir, _)) => match lines.iter_mut().find(|l| l.0 == format!("{dir}/")) {
                Some(line) => line.1 += size,
                None => lines.push((format!("{dir}/"), *size, "(directory)".to_string())),
            },
            None => lines.push((name.clone(), *size, sha.clone())),
        }
    }
    let width = lines.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let is_new = |name: &str| written.iter().any(|w| name.trim_end_matches('/') == w);
    for (name, size, sha) in &lines {
        let mark = if is_new(name) { ' ' } else { '*' };
        println!("{mark} {name:<width$}  {:>9}  {sha}", human(*size));
    }
    if lines.iter().any(|r| !is_new(&r.0)) {
        println!("(* from an earlier run, still listed in SHA256SUMS)");
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(2048), "2.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
    }
}
