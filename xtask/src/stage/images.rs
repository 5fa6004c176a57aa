//! The images kubeadm pulls, staged for one architecture from an OCI image
//! layout (`--from DIR`'s `DIR/images/`, which `cargo xtask fixtures`
//! writes): each reference of `pkg/images.toml` looked up by its
//! `org.opencontainers.image.ref.name`, its image index narrowed to the
//! architecture's manifest, and every blob that manifest names checked
//! against its digest and size. What is staged is blobs by digest, exactly
//! as the layout holds them: the manifest digest a runtime records is the
//! one the registry serves.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::spec::{Arch, Image};

/// One image, for one architecture.
#[derive(Debug, Clone, Serialize)]
pub struct StagedImage {
    /// `registry.k8s.io/pause:3.10.1`.
    pub reference: String,
    /// Whether a worker node needs it.
    pub worker: bool,
    /// The architecture's manifest: its descriptor's media type, digest
    /// (`sha256:<hex>`) and size.
    pub manifest: Blob,
    /// Its config and layers.
    pub blobs: Vec<Blob>,
}

/// A content-addressed blob, checked.
#[derive(Debug, Clone, Serialize)]
pub struct Blob {
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    pub size: u64,
    /// Where it is read from (not part of what it is: the cache keys an
    /// artifact by its input's digests).
    #[serde(skip)]
    pub path: PathBuf,
}

/// Where a layout keeps a digest's blob.
fn blob_path(layout: &Path, digest: &str) -> Result<PathBuf> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .with_context(|| format!("{digest:?} is not a sha256 digest"))?;
    Ok(layout.join(crate::layout::blob(hex)))
}

/// The blob a descriptor names, checked against its digest and size.
fn checked(layout: &Path, descriptor: &Value) -> Result<Blob> {
    let digest = descriptor["digest"]
        .as_str()
        .context("a descriptor without a digest")?;
    let size = descriptor["size"]
        .as_u64()
        .context("a descriptor without a size")?;
    let path = blob_path(layout, digest)?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let actual = format!("sha256:{}", crate::digest::sha256_bytes(&bytes));
    if actual != digest || bytes.len() as u64 != size {
        bail!(
            "{}: is {actual} ({} bytes), but is named {digest} ({size} bytes)",
            path.display(),
            bytes.len()
        );
    }
    Ok(Blob {
        media_type: descriptor["mediaType"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        digest: digest.to_string(),
        size,
        path,
    })
}

fn json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", path.display()))
}

/// The entry of an image index for `arch` on Linux.
pub fn entry_for(index: &Value, arch: Arch) -> Option<&Value> {
    index["manifests"]
        .as_array()?
        .iter()
        .find(|e| e["platform"]["os"] == "linux" && e["platform"]["architecture"] == arch.go_name())
}

/// The descriptors of an image manifest's blobs: its config, then its
/// layers.
pub fn blob_descriptors(manifest: &Value) -> Vec<&Value> {
    std::iter::once(&manifest["config"])
        .chain(manifest["layers"].as_array().into_iter().flatten())
        .collect()
}

/// Every image of `images`, for `arch`, from the OCI layout `layout`.
pub fn stage(layout: &Path, images: &[Image], arch: Arch) -> Result<Vec<StagedImage>> {
    let index = json(&layout.join(crate::layout::INDEX))?;
    let listed = index["manifests"].as_array().cloned().unwrap_or_default();
    let mut staged = Vec::new();
    for image in images {
        let reference = &image.reference;
        let top = listed
            .iter()
            .find(|d| d["annotations"]["org.opencontainers.image.ref.name"] == reference.as_str())
            .with_context(|| format!("{}: has no image {reference}", layout.display()))?;
        let top_blob = checked(layout, top).with_context(|| reference.clone())?;
        if let Some(pin) = image.index.as_ref().filter(|pin| **pin != top_blob.digest) {
            bail!(
                "{}: {reference} is {}, but its pin is {pin}",
                layout.display(),
                top_blob.digest
            );
        }
        let content = json(&top_blob.path)?;
        let manifest = if content["manifests"].is_array() {
            let entry = entry_for(&content, arch)
                .with_context(|| format!("{reference}: its index has no linux/{arch} image"))?;
            checked(layout, entry).with_context(|| reference.clone())?
        } else {
            top_blob
        };
        let body = json(&manifest.path)?;
        let blobs = blob_descriptors(&body)
            .into_iter()
            .map(|d| checked(layout, d).with_context(|| reference.clone()))
            .collect::<Result<Vec<_>>>()?;
        let config_json = json(&blobs[0].path)?;
        if config_json["architecture"] != arch.go_name() {
            bail!(
                "{reference}: the manifest for {arch} names an image for {}",
                config_json["architecture"]
            );
        }
        staged.push(StagedImage {
            reference: reference.clone(),
            worker: image.worker,
            manifest,
            blobs,
        });
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    /// A layout of stand-in images for amd64 and arm64, as the fixtures
    /// write it, with a small program in place of kubedist-standin.
    fn layout(dir: &Path) -> (Spec, PathBuf) {
        let spec = Spec::load(&crate::util::repo_root()).unwrap();
        let standins = [
            (Arch::Amd64, b"amd64 program".to_vec()),
            (Arch::Arm64, b"arm64 program".to_vec()),
        ];
        crate::fixtures::standin_images::write(&spec, dir, &standins, 1_700_000_000).unwrap();
        (spec, dir.join(crate::inputs::from_dir::IMAGES))
    }

    #[test]
    fn every_image_is_staged_for_its_architecture_with_checked_blobs() {
        let tmp = tempfile::tempdir().unwrap();
        let (spec, layout) = layout(tmp.path());
        let staged = stage(&layout, &spec.images.images, Arch::Arm64).unwrap();
        assert_eq!(staged.len(), spec.images.images.len());
        for (image, want) in staged.iter().zip(&spec.images.images) {
            assert_eq!(image.reference, want.reference);
            let manifest: Value =
                serde_json::from_slice(&std::fs::read(&image.manifest.path).unwrap()).unwrap();
            let config: Value =
                serde_json::from_slice(&std::fs::read(&image.blobs[0].path).unwrap()).unwrap();
            assert_eq!(config["architecture"], "arm64");
            assert_eq!(
                manifest["layers"][0]["digest"],
                image.blobs[1].digest.as_str()
            );
        }
        // An architecture the layout has no image for is named.
        let err = format!(
            "{:#}",
            stage(&layout, &spec.images.images, Arch::S390x).unwrap_err()
        );
        assert!(err.contains("no linux/s390x image"), "{err}");
    }

    #[test]
    fn a_blob_that_is_not_its_digest_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (spec, layout) = layout(tmp.path());
        let staged = stage(&layout, &spec.images.images, Arch::Amd64).unwrap();
        let layer = &staged[0].blobs[1].path;
        let mut bytes = std::fs::read(layer).unwrap();
        bytes[10] ^= 1;
        std::fs::write(layer, bytes).unwrap();
        let err = format!(
            "{:#}",
            stage(&layout, &spec.images.images, Arch::Amd64).unwrap_err()
        );
        assert!(
            err.contains(&layer.display().to_string()) && err.contains("but is named"),
            "{err}"
        );
    }

    /// A pinned index is the one staged, or nothing is: a layout of other
    /// builds under the same names is refused, naming both digests.
    #[test]
    fn an_index_that_is_not_its_pin_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (spec, layout) = layout(tmp.path());
        let mut images = spec.images.images.clone();
        let pin = format!("sha256:{}", "0".repeat(64));
        images[0].index = Some(pin.clone());
        let err = format!("{:#}", stage(&layout, &images, Arch::Amd64).unwrap_err());
        assert!(
            err.contains(&format!("{} is sha256:", images[0].reference))
                && err.ends_with(&format!("but its pin is {pin}")),
            "{err}"
        );
    }

    #[test]
    fn the_fixtures_layout_is_the_same_bytes_twice() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        layout(a.path());
        layout(b.path());
        let index = |d: &Path| std::fs::read(d.join("images/index.json")).unwrap();
        assert_eq!(index(a.path()), index(b.path()));
    }
}
