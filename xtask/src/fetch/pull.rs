//! The images of `pkg/images.toml`, pulled from their registry (or an
//! `--image-mirror` serving the same repository paths) into an OCI image
//! layout under the cache, `<cache>/images/`, which `dist` stages the images
//! bundle from.
//!
//! The registry protocol is spoken by `skopeo`, the tool operators use for
//! it (`inspect --raw` for the index a tag names, `copy --preserve-digests`
//! of one architecture's manifest by digest into a `dir:`), rather than by
//! a client of our own: it follows registry.k8s.io's redirects, token
//! authentication and retries, and adds nothing to the xtask's compile.
//! Every byte is checked here all the same: the index against the pin (a
//! tag that now names another index is refused), each architecture's
//! manifest against the index's digest, its config's architecture against
//! the one asked for, every blob against its digest and size. Everything is
//! downloaded into a scratch directory first and moved into the cache only
//! when all of it checked out; a failure leaves the cache as it was. A
//! manifest whose blobs are all in the cache is not downloaded again.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::digest::sha256_bytes;
use crate::fetch::lock::Lock;
use crate::spec::{Arch, Image};
use crate::stage::images::{blob_descriptors, entry_for};

/// Where the images come from and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// `http://HOST[:PORT]` or `https://HOST[:PORT]` standing in for each
    /// image's own registry.
    pub mirror: Option<String>,
    /// A CA certificate the mirror's TLS certificate is checked against.
    pub ca: Option<PathBuf>,
}

/// The layout of `cache` holding `images` for `arches`, pulled where it
/// does not yet; returns its path. With the release's `lock`, each
/// architecture's manifest is checked against its `[manifests]` entry, and
/// recorded where there is none.
pub fn ensure(
    images: &[Image],
    arches: &[Arch],
    registry: &Registry,
    cache: &Path,
    lock: Option<&mut Lock>,
) -> Result<PathBuf> {
    let layout = cache.join("images");
    let blobs = layout.join(crate::layout::BLOBS);
    std::fs::create_dir_all(&blobs).with_context(|| format!("creating {}", blobs.display()))?;
    // A killed fetch's scratch directory goes with the next one.
    for entry in std::fs::read_dir(&layout).with_context(|| layout.display().to_string())? {
        let path = entry?.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".fetch-"))
        {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing {}", path.display()))?;
        }
    }
    let scratch = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(&layout)
        .with_context(|| format!("creating a scratch directory in {}", layout.display()))?;
    let certs = match &registry.ca {
        Some(ca) => {
            let dir = scratch.path().join("certs");
            std::fs::create_dir(&dir)?;
            std::fs::copy(ca, dir.join("ca.crt"))
                .with_context(|| format!("reading --image-ca {}", ca.display()))?;
            Some(dir)
        }
        None => None,
    };
    let pull = Pull {
        registry,
        certs: certs.as_deref(),
        scratch: scratch.path(),
        blobs: &blobs,
    };
    // Every image checked before the cache changes.
    let mut listed = Vec::new();
    let mut fetched = Vec::new();
    // Manifests the lock does not name yet, recorded once all is in place.
    let mut unrecorded = Vec::new();
    for image in images {
        let pulled = pull.image(image, arches)?;
        for (arch, digest) in pulled.manifests {
            match lock
                .as_deref()
                .map(|l| (l.path(), l.manifest(&image.reference, arch)))
            {
                Some((path, Some(pinned))) if pinned != digest => bail!(
                    "{} ({arch}): the index names the manifest {digest}, but {} pins {pinned}; \
                     refusing (delete that entry to take the new one on purpose)",
                    image.reference,
                    path.display()
                ),
                Some((_, None)) => unrecorded.push((&image.reference, arch, digest)),
                _ => {}
            }
        }
        listed.push(json!({
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": pulled.index,
            "size": std::fs::metadata(pull.blob_in_scratch(&pulled.index))?.len(),
            "annotations": { "org.opencontainers.image.ref.name": image.reference },
        }));
        fetched.extend(pulled.found);
    }
    for digest in fetched {
        let hex = digest.trim_start_matches("sha256:");
        let from = pull.blob_in_scratch(&digest);
        if from.is_file() {
            std::fs::rename(&from, blobs.join(hex))
                .with_context(|| format!("moving {} into {}", from.display(), blobs.display()))?;
        }
    }
    crate::util::write_bytes_atomic(
        &layout.join(crate::layout::OCI_LAYOUT),
        crate::layout::OCI_LAYOUT_BYTES,
        0o644,
    )?;
    let index = json!({ "schemaVersion": 2, "manifests": listed });
    crate::util::write_bytes_atomic(
        &layout.join(crate::layout::INDEX),
        &serde_json::to_vec(&index)?,
        0o644,
    )?;
    if let Some(lock) = lock {
        for (reference, arch, digest) in unrecorded {
            lock.insert_manifest(reference, arch, &digest);
        }
        lock.save()?;
    }
    Ok(layout)
}

/// One image, checked.
struct Pulled {
    /// The digest of its index.
    index: String,
    /// Every digest now in the scratch directory.
    found: Vec<String>,
    /// The manifest the index names for each architecture.
    manifests: Vec<(Arch, String)>,
}

struct Pull<'a> {
    registry: &'a Registry,
    certs: Option<&'a Path>,
    scratch: &'a Path,
    /// The cache's blobs.
    blobs: &'a Path,
}

impl Pull<'_> {
    /// `docker://HOST/PATH` of an image, at the mirror when there is one.
    fn location(&self, image: &Image) -> Result<String> {
        let repository = image.repository();
        Ok(match &self.registry.mirror {
            Some(url) => {
                let host = url
                    .strip_prefix("https://")
                    .or_else(|| url.strip_prefix("http://"))
                    .with_context(|| format!("--image-mirror {url}: not http:// or https://"))?;
                let path = repository.split_once('/').map_or(repository, |(_, p)| p);
                format!("docker://{}/{path}", host.trim_end_matches('/'))
            }
            None => format!("docker://{repository}"),
        })
    }

    /// `skopeo <subcommand>` with the TLS settings of the mirror.
    fn skopeo(&self, subcommand: &str) -> Command {
        let prefix = if subcommand == "copy" { "src-" } else { "" };
        let mut cmd = Command::new("skopeo");
        cmd.arg(subcommand);
        let plain = self
            .registry
            .mirror
            .as_deref()
            .is_some_and(|u| u.starts_with("http://"));
        if plain {
            cmd.arg(format!("--{prefix}tls-verify=false"));
        }
        if let Some(dir) = self.certs {
            cmd.arg(format!("--{prefix}cert-dir")).arg(dir);
        }
        cmd
    }

    fn blob_in_scratch(&self, digest: &str) -> PathBuf {
        self.scratch.join(digest.trim_start_matches("sha256:"))
    }

    /// The index `image`'s tag names, checked against its pin, and each
    /// architecture's manifest with its blobs, checked.
    fn image(&self, image: &Image, arches: &[Arch]) -> Result<Pulled> {
        let reference = &image.reference;
        let tag = reference.rsplit_once(':').map_or("", |(_, t)| t);
        let at = format!("{}:{tag}", self.location(image)?);
        // A pinned index in the cache is that index: the registry is not
        // asked again, so a second fetch downloads nothing.
        let cached_index = image.index.as_ref().and_then(|pin| {
            let bytes = std::fs::read(self.blobs.join(pin.trim_start_matches("sha256:"))).ok()?;
            (format!("sha256:{}", sha256_bytes(&bytes)) == *pin).then_some(bytes)
        });
        let index_bytes = match cached_index {
            Some(bytes) => bytes,
            None => self.index(image, &at)?,
        };
        let index_digest = format!("sha256:{}", sha256_bytes(&index_bytes));
        let index: Value = serde_json::from_slice(&index_bytes)
            .with_context(|| format!("{reference}: the registry's index is not JSON"))?;
        std::fs::write(self.blob_in_scratch(&index_digest), &index_bytes)?;
        let mut found = vec![index_digest.clone()];
        let mut named = Vec::new();
        for &arch in arches {
            let entry = entry_for(&index, arch)
                .with_context(|| format!("{reference}: the index names no linux/{arch} image"))?;
            let digest = entry["digest"]
                .as_str()
                .with_context(|| format!("{reference}: an index entry without a digest"))?;
            found.extend(self.manifest(image, &at, digest, arch)?);
            named.push((arch, digest.to_string()));
        }
        Ok(Pulled {
            index: index_digest,
            found,
            manifests: named,
        })
    }

    /// The index the tag `at` names, from the registry, checked against
    /// `image`'s pin.
    fn index(&self, image: &Image, at: &str) -> Result<Vec<u8>> {
        let reference = &image.reference;
        eprintln!("fetch: {reference} ({at})");
        let out = self
            .skopeo("inspect")
            .args(["--raw", "--retry-times", "2"])
            .arg(at)
            .output()
            .context("running skopeo (Debian's skopeo package)")?;
        if !out.status.success() {
            bail!("{reference}: {}", first_line(&out.stderr));
        }
        let index_bytes = out.stdout;
        let index_digest = format!("sha256:{}", sha256_bytes(&index_bytes));
        match (&image.index, &image.unrecorded) {
            (Some(pin), _) if *pin != index_digest => bail!(
                "{reference}: the registry's tag names {index_digest}, but it is pinned to {pin}; \
                 refusing an image that changed"
            ),
            (Some(_), _) => {}
            (None, why) => eprintln!(
                "note: {reference} has no pinned index ({}); it names {index_digest}",
                why.as_deref().unwrap_or("no record")
            ),
        }
        Ok(index_bytes)
    }

    /// One architecture's manifest `digest` and its blobs: from the cache
    /// when all are there, else pulled into the scratch directory; checked.
    fn manifest(&self, image: &Image, at: &str, digest: &str, arch: Arch) -> Result<Vec<String>> {
        let reference = &image.reference;
        let cached = |d: &str| self.blobs.join(d.trim_start_matches("sha256:"));
        if let Ok(bytes) = std::fs::read(cached(digest)) {
            if let Ok(blobs) = blobs_of(&bytes) {
                if blobs.iter().all(|(d, _)| cached(d).is_file()) {
                    eprintln!("fetch: {reference} ({arch}): cached");
                    return Ok(Vec::new());
                }
            }
        }
        let dir = self
            .scratch
            .join(format!("pull-{}", digest.trim_start_matches("sha256:")));
        let repository = at.rsplit_once(':').map_or(at, |(r, _)| r);
        let out = self
            .skopeo("copy")
            .args(["--quiet", "--preserve-digests", "--retry-times", "2"])
            .arg(format!("{repository}@{digest}"))
            .arg(format!("dir:{}", dir.display()))
            .output()
            .context("running skopeo (Debian's skopeo package)")?;
        if !out.status.success() {
            bail!("{reference} ({arch}): {}", first_line(&out.stderr));
        }
        let manifest = std::fs::read(dir.join("manifest.json"))
            .with_context(|| format!("{reference} ({arch}): skopeo wrote no manifest"))?;
        let actual = format!("sha256:{}", sha256_bytes(&manifest));
        if actual != digest {
            bail!("{reference} ({arch}): the manifest is {actual}, but the index names {digest}");
        }
        let blobs = blobs_of(&manifest).with_context(|| format!("{reference} ({arch})"))?;
        let mut found = vec![digest.to_string()];
        for (i, (blob, size)) in blobs.iter().enumerate() {
            let hex = blob.trim_start_matches("sha256:");
            let path = dir.join(hex);
            let bytes = std::fs::read(&path)
                .with_context(|| format!("{reference} ({arch}): {blob} was not downloaded"))?;
            let actual = format!("sha256:{}", sha256_bytes(&bytes));
            if actual != *blob || bytes.len() as u64 != *size {
                bail!("{reference} ({arch}): a blob named {blob} ({size} bytes) is {actual} ({} bytes)", bytes.len());
            }
            if i == 0 {
                let config: Value = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{reference} ({arch}): the config is not JSON"))?;
                if config["architecture"] != arch.go_name() {
                    bail!(
                        "{reference}: the index's manifest for {arch} is an image for {}",
                        config["architecture"]
                    );
                }
            }
            std::fs::rename(&path, self.blob_in_scratch(blob))?;
            found.push(blob.clone());
        }
        std::fs::write(self.blob_in_scratch(digest), &manifest)?;
        Ok(found)
    }
}

/// `(digest, size)` of a manifest's config and layers, the config first.
fn blobs_of(manifest: &[u8]) -> Result<Vec<(String, u64)>> {
    let manifest: Value = serde_json::from_slice(manifest).context("the manifest is not JSON")?;
    blob_descriptors(&manifest)
        .into_iter()
        .map(|d| {
            Ok((
                d["digest"]
                    .as_str()
                    .context("a descriptor without a digest")?
                    .to_string(),
                d["size"].as_u64().context("a descriptor without a size")?,
            ))
        })
        .collect()
}

/// The last line of a tool's error output, for a one-line message.
fn first_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("failed");
    // skopeo prefixes its log lines: time="..." level=fatal msg="..."
    line.split_once("msg=\"")
        .map_or(line, |(_, m)| m.trim_end_matches('"'))
        .replace("\\\"", "\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(reference: &str) -> Image {
        Image {
            reference: reference.into(),
            worker: true,
            index: None,
            record: None,
            unrecorded: Some("test".into()),
        }
    }

    #[test]
    fn each_architectures_manifest_is_recorded_in_the_lock_and_then_checked() {
        let spec = crate::spec::Spec::load(&crate::util::repo_root()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let arches = [Arch::Amd64, Arch::Arm64];
        let standins: Vec<(Arch, Vec<u8>)> = arches
            .iter()
            .map(|&a| (a, format!("{a} program").into_bytes()))
            .collect();
        crate::fixtures::standin_images::write(&spec, tmp.path(), &standins, 1_700_000_000)
            .unwrap();
        // The fixtures' layout as the cache, each image pinned to its index
        // there: nothing is pulled.
        let blob = |digest: &str| -> Value {
            let hex = digest.trim_start_matches("sha256:");
            serde_json::from_slice(
                &std::fs::read(tmp.path().join("images/blobs/sha256").join(hex)).unwrap(),
            )
            .unwrap()
        };
        let listed: Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("images/index.json")).unwrap())
                .unwrap();
        let images: Vec<Image> = spec
            .images
            .images
            .iter()
            .map(|i| {
                let entry = listed["manifests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| {
                        m["annotations"]["org.opencontainers.image.ref.name"]
                            == i.reference.as_str()
                    })
                    .unwrap();
                Image {
                    index: Some(entry["digest"].as_str().unwrap().to_string()),
                    unrecorded: None,
                    ..i.clone()
                }
            })
            .collect();
        let lock_path = tmp.path().join("upstream.lock");
        let mut lock = Lock::load(&lock_path).unwrap();
        ensure(
            &images,
            &arches,
            &Registry::default(),
            tmp.path(),
            Some(&mut lock),
        )
        .unwrap();

        let saved = Lock::load(&lock_path).unwrap();
        for image in &images {
            let index = blob(image.index.as_deref().unwrap());
            for arch in arches {
                let named = entry_for(&index, arch).unwrap()["digest"].as_str();
                assert_eq!(
                    saved.manifest(&image.reference, arch),
                    named,
                    "{}",
                    image.reference
                );
            }
        }

        // A lock that pins another manifest refuses the index that names this one.
        let pause = images
            .iter()
            .find(|i| i.reference.contains("/pause:"))
            .unwrap();
        let recorded = saved
            .manifest(&pause.reference, Arch::Amd64)
            .unwrap()
            .to_string();
        let other = format!("sha256:{}", "0".repeat(64));
        let text = std::fs::read_to_string(&lock_path).unwrap();
        std::fs::write(&lock_path, text.replace(&recorded, &other)).unwrap();
        let mut lock = Lock::load(&lock_path).unwrap();
        let err = ensure(
            &images,
            &arches,
            &Registry::default(),
            tmp.path(),
            Some(&mut lock),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains(&format!(
                "{} (amd64): the index names the manifest {recorded}, but {} pins {other}",
                pause.reference,
                lock_path.display()
            )),
            "{err:#}"
        );
    }

    #[test]
    fn a_mirror_serves_the_same_repository_paths() {
        let pull = |mirror: Option<&str>| Pull {
            registry: Box::leak(Box::new(Registry {
                mirror: mirror.map(Into::into),
                ca: None,
            })),
            certs: None,
            scratch: Path::new("/nonexistent"),
            blobs: Path::new("/nonexistent"),
        };
        let coredns = image("registry.k8s.io/coredns/coredns:v1.12.1");
        assert_eq!(
            pull(None).location(&coredns).unwrap(),
            "docker://registry.k8s.io/coredns/coredns"
        );
        assert_eq!(
            pull(Some("http://127.0.0.1:5000"))
                .location(&coredns)
                .unwrap(),
            "docker://127.0.0.1:5000/coredns/coredns"
        );
        assert!(pull(Some("ftp://x")).location(&coredns).is_err());
        let args = |p: &Pull, sub: &str| -> Vec<String> {
            p.skopeo(sub)
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let plain = pull(Some("http://127.0.0.1:5000"));
        assert_eq!(args(&plain, "copy"), ["copy", "--src-tls-verify=false"]);
        assert_eq!(args(&plain, "inspect"), ["inspect", "--tls-verify=false"]);
        assert_eq!(
            args(&pull(Some("https://r.example")), "inspect"),
            ["inspect"]
        );
    }

    #[test]
    fn skopeo_errors_become_one_line() {
        let stderr = br#"Getting image source signatures
time="2026-01-01T00:00:00Z" level=fatal msg="reading manifest \"v1.34.2\": manifest unknown"
"#;
        assert_eq!(
            first_line(stderr),
            r#"reading manifest "v1.34.2": manifest unknown"#
        );
        assert_eq!(first_line(b""), "failed");
    }
}
