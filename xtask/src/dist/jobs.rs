//! dist's jobs: one per artifact, ordered and run through `schedule`, each
//! written by its format or copied from the artifact cache, with its SBOM.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};

use super::Plan;
use crate::emit::{self, Families, Input, Job, Options};
use crate::stage::{Staged, StagedArch, StagedOci};
use crate::{sbom, schedule};

/// The jobs of the formats asked for, in the order they should start.
pub(super) fn jobs<'a>(
    plan: &Plan,
    staged: &'a [StagedArch],
    oci: Option<&'a StagedOci>,
) -> Vec<Job<'a>> {
    let mut jobs: Vec<Job> = plan
        .formats
        .iter()
        .flat_map(|format| emit::jobs(*format, staged, oci))
        .collect();
    jobs.sort_by_key(|j| {
        schedule::start_order(emit::one_thread(j.format, &plan.options.codecs), size(j))
    });
    jobs
}

/// Writes every job's artifact into `work/artifacts` (or copies it from the
/// artifact cache), several at a time, each with its SBOM.
/// `requested`: `--jobs`, the number written at once.
pub(super) fn write_artifacts(
    plan: &Plan,
    requested: Option<usize>,
    jobs: &[Job],
    origins: &[sbom::Origin],
    work: &Path,
) -> Result<Vec<Built>> {
    let built_dir = work.join("artifacts");
    fs::create_dir(&built_dir).with_context(|| format!("creating {}", built_dir.display()))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (workers, threads) = schedule::workers(cpus, jobs.len(), requested);
    let options = Options {
        threads,
        ..plan.options.clone()
    };
    eprintln!(
        "==> writing {} artifacts ({workers} at a time, {threads} encoder threads each; {})",
        jobs.len(),
        options.codecs
    );
    let done = AtomicUsize::new(0);
    schedule::run(jobs, workers, &|job| {
        let started = Instant::now();
        let built = write_artifact(plan, &options, job, origins, &built_dir, work)
            .with_context(|| label(job))?;
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        eprintln!(
            "    [{n}/{}] {} ({:.1} s{})",
            jobs.len(),
            built.path.file_name().unwrap_or_default().to_string_lossy(),
            started.elapsed().as_secs_f64(),
            if built.cached { ", cached" } else { "" }
        );
        Ok(built)
    })
}

/// What the SBOM of `job`'s artifact `path` says it is.
fn subject(plan: &Plan, job: &Job, path: &Path) -> sbom::Subject {
    let file_name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let release = format!("{}-{}", plan.k8s_version, plan.spec.release.revision);
    let (name, version, purl) = match &job.input {
        emit::Input::Package(pkg) => (
            pkg.name.clone(),
            pkg.version.clone(),
            format!(
                "pkg:{}/kubedist/{}@{}?arch={}",
                pkg.family, pkg.name, pkg.version, pkg.arch_name
            ),
        ),
        emit::Input::Arch(staged) => (
            file_name.clone(),
            release.clone(),
            format!(
                "pkg:generic/kubedist/{file_name}@{release}?arch={}",
                staged.arch
            ),
        ),
        emit::Input::Sysext(staged, image) => (
            file_name.clone(),
            image.version.clone(),
            format!(
                "pkg:generic/kubedist/{file_name}@{}?arch={}",
                image.version, staged.arch
            ),
        ),
        emit::Input::Image(_, oci) => {
            let name = oci.repository.rsplit('/').next().unwrap_or(&oci.repository);
            (
                name.to_string(),
                oci.tag.clone(),
                format!(
                    "pkg:oci/{name}?repository_url={}&tag={}",
                    oci.repository, oci.tag
                ),
            )
        }
    };
    sbom::Subject {
        name,
        version,
        purl,
        licence: plan.options.license.clone(),
    }
}

/// One job's artifact, written or copied from the artifact cache, and its
/// SBOM beside it.
fn write_artifact(
    plan: &Plan,
    options: &Options,
    job: &Job,
    origins: &[sbom::Origin],
    built_dir: &Path,
    work: &Path,
) -> Result<Built> {
    let key = match &plan.cache {
        Some(cache) => Some(cache.key(&describe(job, &plan.k8s_version, options, origins)?)),
        None => None,
    };
    let hit = match (&plan.cache, &key) {
        (Some(cache), Some(key)) => cache.fetch(key, built_dir)?,
        _ => None,
    };
    let (path, sha256, held, cached) = match hit {
        Some(hit) => (hit.path, hit.sha256, None, true),
        None => {
            let run = emit::Run {
                k8s_version: &plan.k8s_version,
                options,
                origins,
                work,
                out_dir: built_dir,
            };
            let written = job.format.write(&job.input, &run)?;
            let path = written.path;
            let sha256 = match (&plan.cache, &key) {
                (Some(cache), Some(key)) => cache.store(key, &path)?,
                _ => crate::digest::sha256_file(&path)?,
            };
            (path, sha256, written.held, false)
        }
    };
    let sbom = sbom::path_of(&path);
    let subject = subject(plan, job, &path);
    // The SBOM lists the files the format put in (as the writer held them;
    // the images bundle's read back from its layers): for
    // an artifact the cache had, the document the cache kept with it, under
    // a key of its own (what the SBOM says of the artifact's files, its
    // subject and their origins, changes no byte of the artifact: an
    // origin's URL).
    let sbom_key = match (&plan.cache, &key) {
        (Some(cache), Some(key)) => Some(cache.key(&sbom_inputs(key, &subject, origins)?)),
        _ => None,
    };
    let kept = match (&plan.cache, &sbom_key) {
        (Some(cache), Some(sbom_key)) => cache.fetch(sbom_key, built_dir)?,
        _ => None,
    };
    if kept.is_none() {
        let doc = sbom::document(&path, &sha256, held, &subject, origins, plan.options.epoch)
            .with_context(|| format!("the SBOM of {}", path.display()))?;
        crate::util::write_bytes_atomic(&sbom, &doc, 0o644)?;
        if let (Some(cache), Some(sbom_key)) = (&plan.cache, &sbom_key) {
            cache.store(sbom_key, &sbom)?;
        }
    }
    Ok(Built {
        path,
        sha256,
        sbom,
        cache_keys: key.into_iter().chain(sbom_key).collect(),
        cached,
    })
}

/// What an artifact's SBOM depends on besides the artifact's own bytes
/// (`artifact_key`, its cache key): what the document says the artifact is
/// and where its files came from.
fn sbom_inputs(
    artifact_key: &str,
    subject: &sbom::Subject,
    origins: &[sbom::Origin],
) -> Result<String> {
    Ok(format!(
        "the SBOM of {artifact_key}\n{}\n{}\n{}\n{}\n{}\n",
        subject.name,
        subject.version,
        subject.purl,
        subject.licence,
        serde_json::to_string(origins)?
    ))
}

/// The payload a job compresses, in bytes, for scheduling.
fn size(job: &Job) -> u64 {
    let files = |s: &Staged| s.package_files().map(|f| f.size).sum::<u64>();
    match (job.input, job.format.about().families) {
        (Input::Package(p), _) => files(p),
        // One family's files of its packages.
        (Input::Sysext(arch, image), _) => arch
            .packages
            .iter()
            .filter_map(|p| p.rpm.as_ref().or(p.deb.as_ref()))
            .filter(|p| p.runtime == image.runtime)
            .map(files)
            .sum(),
        (Input::Arch(arch), Families::None) => arch
            .images
            .iter()
            .flatten()
            .flat_map(|i| &i.blobs)
            .map(|b| b.size)
            .sum(),
        (Input::Arch(arch), _) => tarball_size(arch),
        (Input::Image(arches, _), _) => arches.iter().map(tarball_size).sum(),
    }
}

/// What a job's errors name.
fn label(job: &Job) -> String {
    match job.input {
        Input::Package(p) => format!("{} {} ({})", p.family, p.name, p.arch),
        Input::Arch(arch) => format!("{} ({})", job.format.about().name, arch.arch),
        Input::Sysext(arch, image) => {
            format!("{} {} ({})", job.format.about().name, image.name, arch.arch)
        }
        Input::Image(..) => job.format.about().name.to_string(),
    }
}

/// Everything the artifact's bytes depend on besides the program that
/// writes it: the format, its codec and level, the options, and the staged
/// input (its files by digest, never by scratch path); for the installer
/// image, which carries its own SBOM, also what its files came from. The
/// cache key is the hash of this and of the program.
fn describe(
    job: &Job,
    k8s_version: &str,
    options: &Options,
    origins: &[sbom::Origin],
) -> Result<String> {
    let format = job.format.about().name;
    let codec = options.codecs.of(job.format.about().codec_of);
    let input = match job.input {
        Input::Package(p) => serde_json::to_string(p)?,
        Input::Arch(arch) => serde_json::to_string(arch)?,
        Input::Sysext(arch, image) => serde_json::to_string(&(arch, image))?,
        Input::Image(arches, oci) => serde_json::to_string(&(arches, oci, origins))?,
    };
    // The signing key's fingerprint: a tarball signed by another key (or
    // by none) is another artifact.
    let signer = options
        .signer
        .as_ref()
        .map_or(String::new(), |k| k.fingerprint());
    // Only a run that carries the bundle says so: other keys stay as they were.
    let carry = if options.carry_images {
        "carries the images bundle\n"
    } else {
        ""
    };
    Ok(format!(
        "{format}\n{codec}\n{}\n{} {}\n{k8s_version}\n{signer}\n{carry}{input}\n",
        options.epoch, options.homepage, options.license
    ))
}

/// The payload of one architecture's tarball, in bytes.
fn tarball_size(arch: &StagedArch) -> u64 {
    arch.packages
        .iter()
        .flat_map(|p| p.all())
        .flat_map(|s| &s.files)
        .map(|f| f.size)
        .sum()
}

/// An artifact written by a job: where, its SHA-256, its SBOM, and whether
/// it came from the artifact cache.
pub(super) struct Built {
    pub path: PathBuf,
    pub sha256: String,
    /// `<artifact>.spdx.json`, beside it.
    pub sbom: PathBuf,
    /// Its artifact cache entries (the artifact's and its SBOM's), kept
    /// when the cache is pruned.
    pub cache_keys: Vec<String>,
    pub cached: bool,
}

#[cfg(test)]
mod tests {
    use super::sbom_inputs;
    use crate::sbom::{Origin, Subject};

    /// A kept SBOM is used only for what it says: another subject or an
    /// origin that changed no byte of the artifact (its URL) is another
    /// document.
    #[test]
    fn a_kept_sbom_is_keyed_by_its_subject_and_origins() {
        let subject = || Subject {
            name: "kubelet".into(),
            version: "1.37.2-1".into(),
            purl: "pkg:deb/kubedist/kubelet@1.37.2-1?arch=amd64".into(),
            licence: "Apache-2.0".into(),
        };
        let origin = |url: &str| Origin {
            name: "kubelet".into(),
            version: "1.37.2".into(),
            supplier: "Organization: Kubernetes".into(),
            url: Some(url.into()),
            purl: "pkg:golang/k8s.io/kubernetes@v1.37.2".into(),
            sha256: "0".repeat(64),
            yields: vec![("kubelet".into(), "0".repeat(64))],
            comment: String::new(),
            linked: Vec::new(),
            blobs: Vec::new(),
        };
        let inputs =
            |subject: &Subject, url: &str| sbom_inputs("key", subject, &[origin(url)]).unwrap();
        let first = inputs(&subject(), "https://dl.k8s.io/a");
        assert_eq!(first, inputs(&subject(), "https://dl.k8s.io/a"));
        assert_ne!(first, inputs(&subject(), "https://mirror.example/a"));
        let renamed = Subject {
            purl: "pkg:deb/kubedist/kubelet@1.37.2-1?arch=arm64".into(),
            ..subject()
        };
        assert_ne!(first, inputs(&renamed, "https://dl.k8s.io/a"));
        assert_ne!(
            first,
            sbom_inputs("another key", &subject(), &[origin("https://dl.k8s.io/a")]).unwrap()
        );
    }
}
