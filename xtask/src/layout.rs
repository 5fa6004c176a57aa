//! The pieces of an OCI image layout that kubedist writes itself (the
//! installer image, the images built from source): content-addressed
//! blobs and canonical JSON. The types are `oci-spec`'s; the layout is
//! three small files and blobs, written here because the crate that writes
//! layouts (`ocidir`) stamps layers with the current time. JSON goes
//! through `serde_json::Value`, whose maps are sorted, because oci-spec's
//! maps are `HashMap`s: the same value, the same bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use anyhow::Result;
use std::collections::HashMap;

use oci_spec::image::{
    Config, Descriptor, DescriptorBuilder, Digest, History, ImageConfigurationBuilder,
    ImageIndexBuilder, ImageManifestBuilder, MediaType, Os, PlatformBuilder, RootFsBuilder,
};
use serde::Serialize;

use crate::digest::sha256_bytes;

/// The file that marks a directory as an OCI image layout, and its bytes.
pub const OCI_LAYOUT: &str = "oci-layout";
pub const OCI_LAYOUT_BYTES: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;
/// The layout's index of images.
pub const INDEX: &str = "index.json";
/// Where blobs live, each named by its hex SHA-256.
pub const BLOBS: &str = "blobs/sha256";

/// The path of the blob `hex` in a layout.
pub fn blob(hex: &str) -> String {
    format!("{BLOBS}/{hex}")
}

/// Content-addressed blobs by hex SHA-256; a blob two images share is
/// stored once.
#[derive(Default)]
pub struct Blobs(pub BTreeMap<String, Vec<u8>>);

impl Blobs {
    /// Adds `data` and returns its descriptor.
    pub fn add(&mut self, media_type: MediaType, data: Vec<u8>) -> Result<Descriptor> {
        let hex = sha256_bytes(&data);
        let descriptor = DescriptorBuilder::default()
            .media_type(media_type)
            .size(data.len() as u64)
            .digest(Digest::from_str(&format!("sha256:{hex}"))?)
            .build()?;
        self.0.insert(hex, data);
        Ok(descriptor)
    }
}

/// An image built here: what its configuration and manifest hold besides
/// the fields every image kubedist writes has the same way (linux, the
/// platform's arm64 variant `v8`, a rootfs of `layers`).
pub struct Image {
    /// The Go name of its architecture.
    pub goarch: String,
    /// RFC 3339, from SOURCE_DATE_EPOCH.
    pub created: String,
    /// Entrypoint, environment, user, labels.
    pub config: Config,
    /// The layers' descriptors, and their uncompressed digests
    /// (`sha256:…`), in order.
    pub layers: Vec<Descriptor>,
    pub diff_ids: Vec<String>,
    /// One entry per layer.
    pub history: Vec<History>,
    /// The manifest's annotations (none: the field is left out).
    pub annotations: HashMap<String, String>,
}

/// Adds `image`'s configuration and its manifest to `blobs`. Returns the
/// manifest's descriptor, with its platform, and the configuration's.
pub fn add_image(blobs: &mut Blobs, image: Image) -> Result<(Descriptor, Descriptor)> {
    let arch = oci_spec::image::Arch::from(image.goarch.as_str());
    let mut platform = PlatformBuilder::default()
        .architecture(arch.clone())
        .os(Os::Linux);
    let mut config = ImageConfigurationBuilder::default()
        .created(image.created)
        .architecture(arch)
        .os(Os::Linux);
    if image.goarch == "arm64" {
        platform = platform.variant("v8");
        config = config.variant("v8");
    }
    let config = config
        .config(image.config)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(image.diff_ids)
                .build()?,
        )
        .history(image.history)
        .build()?;
    let config = blobs.add(MediaType::ImageConfig, canonical_json(&config)?)?;
    let mut manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config.clone())
        .layers(image.layers);
    if !image.annotations.is_empty() {
        manifest = manifest.annotations(image.annotations);
    }
    let mut descriptor = blobs.add(
        MediaType::ImageManifest,
        canonical_json(&manifest.build()?)?,
    )?;
    descriptor.set_platform(Some(platform.build()?));
    Ok((descriptor, config))
}

/// The hex digest a descriptor names.
pub fn hex_of(descriptor: &Descriptor) -> String {
    descriptor.digest().digest().to_string()
}

/// Compact JSON with every map's keys sorted: the same value, the same bytes.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let value = serde_json::to_value(value)?;
    Ok(serde_json::to_vec(&value)?)
}

/// Writes the layout directory `dir` (which must not hold another
/// layout): `oci-layout`, `index.json` listing `listed`, and `blobs`.
pub fn write_dir(dir: &Path, listed: Vec<Descriptor>, blobs: Blobs) -> Result<()> {
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .manifests(listed)
        .build()?;
    let put =
        |rel: &str, bytes: &[u8]| crate::util::write_bytes_atomic(&dir.join(rel), bytes, 0o644);
    std::fs::create_dir_all(dir.join(BLOBS))?;
    put(OCI_LAYOUT, OCI_LAYOUT_BYTES)?;
    for (hex, data) in &blobs.0 {
        put(&blob(hex), data)?;
    }
    put(INDEX, &canonical_json(&index)?)
}
