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
    Descriptor, DescriptorBuilder, Digest, ImageConfiguration, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Platform,
};
use serde::Serialize;

use crate::digest::sha256_bytes;

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

/// An image: its configuration and a manifest over `layers` (with
/// `annotations`) added to `blobs`. Returns the manifest's descriptor, with
/// `platform`, and the configuration's.
pub fn add_image(
    blobs: &mut Blobs,
    config: &ImageConfiguration,
    layers: Vec<Descriptor>,
    annotations: HashMap<String, String>,
    platform: Platform,
) -> Result<(Descriptor, Descriptor)> {
    let config = blobs.add(MediaType::ImageConfig, canonical_json(config)?)?;
    let mut manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config.clone())
        .layers(layers);
    if !annotations.is_empty() {
        manifest = manifest.annotations(annotations);
    }
    let mut descriptor = blobs.add(
        MediaType::ImageManifest,
        canonical_json(&manifest.build()?)?,
    )?;
    descriptor.set_platform(Some(platform));
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
    std::fs::create_dir_all(dir.join("blobs/sha256"))?;
    put("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    for (hex, data) in &blobs.0 {
        put(&format!("blobs/sha256/{hex}"), data)?;
    }
    put("index.json", &canonical_json(&index)?)
}
