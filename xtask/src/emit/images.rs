//! The images bundle, `kubedist-images-<X.Y.Z>-<arch>.oci.tar`: every image
//! kubeadm pulls for the release (`pkg/images.toml`), this architecture's,
//! in one OCI image layout as a tar. `index.json` lists each image's
//! manifest under its full reference, both as
//! `org.opencontainers.image.ref.name` and as `io.containerd.image.name`,
//! so that `ctr images import` and `skopeo copy oci-archive:FILE:REF` store
//! it under the name kubeadm asks the runtime for. The blobs are the bytes
//! staged, by digest: the runtime records the digests the registry serves.
//!
//! `dist --worker-images` bundles only the images a worker runs
//! (`worker = true`), as `kubedist-images-<X.Y.Z>-<arch>-worker.oci.tar`.
//!
//! With `dist --carry-images` the tarball and the installer image carry
//! the same bytes as `images/<this file>` (`super::carried`); `install.sh`
//! installs and imports it after the node software.
//!
//! Not compressed again: the layers are gzip'd already, a second codec
//! saves almost nothing, and every runtime's import reads a plain tar.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::{tarball, About, Artifacts, Families, Format, Input, Run, Staging, Written};
use crate::archive::{write_tar, Item};
use crate::spec::Arch;
use crate::stage::images::StagedImage;
use crate::stage::StagedArch;

/// The format's name in `--formats`.
pub const NAME: &str = "images";

pub struct Images;

static ABOUT: About = About {
    name: NAME,
    summary: "the images kubeadm pulls (pkg/images.toml) for one architecture, in one OCI \
              archive that containerd and containers-storage import under the names \
              kubeadm uses: for air-gapped nodes",
    codecs: None,
    // It compresses nothing (its layers come compressed); it follows the
    // tarball's setting only so that the option has one place.
    codec_of: tarball::NAME,
    artifacts: Artifacts::Arch,
    families: Families::None,
    staging: Staging::Images,
    single_threaded: false,
    carries_images: false,
};

impl Format for Images {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        let arch = input.arch()?;
        let out = run.out_dir.join(bundle_name(arch, run.k8s_version)?);
        write_bundle(arch, run.options.epoch, &out)?;
        Ok(out.into())
    }
}

/// The images staged for `arch`'s bundle.
fn staged_images(arch: &StagedArch) -> Result<&[StagedImage]> {
    arch.images
        .as_deref()
        .with_context(|| format!("images bundle: no images staged for {}", arch.arch))
}

/// The file name of `arch`'s bundle: a worker's when it holds only images
/// a worker runs.
pub(super) fn bundle_name(arch: &StagedArch, k8s_version: &str) -> Result<String> {
    let images = staged_images(arch)?;
    let workers_only = !images.is_empty() && images.iter().all(|i| i.worker);
    Ok(file_name(k8s_version, arch.arch, workers_only))
}

/// Writes the bundle of `arch` to `out`.
pub(super) fn write_bundle(arch: &StagedArch, epoch: u64, out: &Path) -> Result<()> {
    let images = staged_images(arch)?;
    let mut items: BTreeMap<String, Item> = BTreeMap::new();
    let mut listed = Vec::new();
    for image in images {
        for blob in std::iter::once(&image.manifest).chain(&image.blobs) {
            let hex = blob.digest.trim_start_matches("sha256:");
            items.insert(
                crate::layout::blob(hex),
                Item::File {
                    path: blob.path.clone(),
                    size: blob.size,
                    mode: 0o644,
                },
            );
        }
        listed.push(json!({
            "mediaType": image.manifest.media_type,
            "digest": image.manifest.digest,
            "size": image.manifest.size,
            "platform": { "architecture": arch.arch.go_name(), "os": "linux" },
            "annotations": {
                "org.opencontainers.image.ref.name": image.reference,
                "io.containerd.image.name": image.reference,
            },
        }));
    }
    let index = json!({ "schemaVersion": 2, "manifests": listed });
    items.insert(
        crate::layout::OCI_LAYOUT.into(),
        Item::Bytes(crate::layout::OCI_LAYOUT_BYTES.to_vec(), 0o644),
    );
    items.insert(
        crate::layout::INDEX.into(),
        Item::Bytes(serde_json::to_vec(&index)?, 0o644),
    );
    write_tar(out, items, epoch)
}

/// The bundle's file name: `kubedist-images-<X.Y.Z>-<arch>.oci.tar`, or
/// `...-<arch>-worker.oci.tar` for one of only the images a worker runs
/// (`dist --worker-images`), which a control-plane node cannot use.
pub fn file_name(k8s_version: &str, arch: Arch, workers_only: bool) -> String {
    let role = if workers_only { "-worker" } else { "" };
    format!(
        "kubedist-images-{k8s_version}-{}{role}.oci.tar",
        arch.go_name()
    )
}
