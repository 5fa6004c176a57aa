//! The installer image, `kubedist-installer-<X.Y.Z-R>.oci.tar`: an OCI image
//! layout (`oci-layout`, `index.json`, `blobs/sha256/…`) as one tar, with a
//! docker `manifest.json` beside it so that `podman load`, `docker load` and
//! `skopeo copy oci-archive:` all read the same file. Several architectures
//! make an image index; `index.json` names it with a full reference
//! (`localhost/kubedist/installer:<tag>`), which podman and containerd keep
//! as written. `dist` also unpacks it into a layout directory for `skopeo
//! copy --all oci:DIR`.
//!
//! Inside each image:
//!
//! ```text
//! /bin/busybox, /bin/sh -> busybox   the shell (Debian's busybox-static)
//! /kubedist/bundle/                  the tarball's top directory: install.sh,
//!                                    MANIFEST, SHA256SUMS, payload/ (and
//!                                    images/ with `dist --carry-images`)
//! /kubedist/entrypoint.sh            verifies, stages on the host, runs install.sh
//! /kubedist/in-host.sh               what it runs in the host's namespaces
//! /kubedist/release                  the tarball's directory name
//! /kubedist/sbom.spdx.json           the SBOM of every file above
//! ```
//!
//! Layers, in order: the shell; one per package whose version is not the
//! release's (the CNI plugins, crictl); the images bundle it carries, if
//! any; the release's own files; the SBOM.
//! The first ones carry mtime 0, so that releases with the same shell and
//! plugins share those layers byte for byte; the last two carry
//! SOURCE_DATE_EPOCH.
//!
//! In the layout directory, each image's SBOM is also attached to it the
//! OCI 1.1 way: an artifact manifest (`artifactType:
//! application/spdx+json`) whose `subject` is the image's manifest, listed
//! in `index.json` beside the image, so that a tool that follows referrers
//! (`oras discover`, `oras cp -r`) finds it. The SBOM cannot name the digest
//! of the image it sits in; the referrer's `subject` does. The archive lists
//! the image alone: `podman load` and `skopeo copy oci-archive:FILE` refuse
//! an archive whose `index.json` lists more than one manifest (measured with
//! podman 4.3 and skopeo 1.9; current containers/image still does).
//!
//! The types are `oci-spec`'s. The layout itself is written here: it is three
//! small files and content-addressed blobs, and the crate that writes layouts
//! (`ocidir`) stamps layers with the current time, cannot write an archive,
//! and would bring OpenSSL into the build. JSON is serialised through
//! `serde_json::Value`, whose maps are sorted, because oci-spec's maps are
//! `HashMap`s.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Context, Result};
use oci_spec::image::{
    ConfigBuilder, Descriptor, History, HistoryBuilder, ImageIndex, ImageIndexBuilder,
    ImageManifest, ImageManifestBuilder, MediaType,
};
use serde::Serialize;

use super::codec::{self, Codec, Kind};
use super::tarball::{self, Entry};
use super::{About, Artifacts, Families, Format, Input, Options, Run, Staging, Written};
use crate::archive::{add_parent_dirs, append_tar, write_tar, Item};
use crate::digest::sha256_bytes;
use crate::layout::{canonical_json, hex_of, Blobs};
use crate::sbom::{self, contents::Held, Origin};
use crate::stage::{StagedArch, StagedOci, StagedOciBase};

/// The format's name in `--formats`.
pub const NAME: &str = "oci";

pub struct Oci;

static ABOUT: About = About {
    name: NAME,
    summary: "the installer image: an OCI archive that podman and docker load, and its \
              layout directory, every architecture in one index; its shell is Debian's \
              busybox-static, so it is built on Debian or Ubuntu",
    codecs: None,
    // Its layers are tarballs: gzip-compressed as `--compression tar` says.
    codec_of: tarball::NAME,
    artifacts: Artifacts::Image,
    families: Families::All,
    staging: Staging::InstallerImage,
    single_threaded: false,
    carries_images: true,
};

impl Format for Oci {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        let (arches, image) = input.image()?;
        write(arches, image, run)
    }
    /// The image's layout directory (`skopeo copy --all oci:DIR`), unpacked
    /// from the archive, and its run examples.
    fn publish_beside(&self, input: &Input, archive: &Path, out_dir: &Path) -> Result<Vec<String>> {
        let (_, image) = input.image()?;
        let name = layout_dir_name(&image.tag);
        let layout = out_dir.join(&name);
        let temp = crate::util::temp_path(&layout)?;
        let unpacked = unpack(archive, &temp).and_then(|()| attach_sboms(&temp));
        let replaced = unpacked.and_then(|()| crate::util::replace_dir(&temp, &layout));
        if let Err(e) = replaced {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(e.context(format!("writing {}", layout.display())));
        }
        let mut names = vec![name];
        for (example, text) in &image.examples {
            crate::util::write_bytes_atomic(&out_dir.join(example), text.as_bytes(), 0o644)?;
            names.push(example.clone());
        }
        Ok(names)
    }
}

/// The installer image's layout directory in the output directory.
fn layout_dir_name(tag: &str) -> String {
    format!("kubedist-installer-{tag}.oci")
}

/// Unpacks the installer image's archive into the new directory `dir`: it
/// holds regular files and directories only, at relative paths.
fn unpack(archive: &Path, dir: &Path) -> Result<()> {
    let file =
        std::fs::File::open(archive).with_context(|| format!("reading {}", archive.display()))?;
    std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::util::set_mode(dir, 0o755)?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    for entry in tar
        .entries()
        .with_context(|| archive.display().to_string())?
    {
        let mut entry = entry.with_context(|| archive.display().to_string())?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            bail!("{}: unexpected entry type {kind:?}", archive.display());
        }
        // unpack_in refuses paths that leave `dir`.
        if !entry
            .unpack_in(dir)
            .with_context(|| format!("unpacking {} into {}", archive.display(), dir.display()))?
        {
            bail!("{}: an entry leaves the archive", archive.display());
        }
    }
    Ok(())
}

/// The archive's file name for an image tag.
pub fn file_name(tag: &str) -> String {
    format!("kubedist-installer-{tag}.oci.tar")
}

/// Where the tarball's top directory is in the image.
const BUNDLE: &str = "kubedist/bundle";

/// `org.opencontainers.image.ref.name`: the name the layout gives its image.
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Where each image holds its SBOM.
const SBOM: &str = "kubedist/sbom.spdx.json";

/// SPDX JSON's media type, the SBOM referrer's `artifactType`.
const SPDX_JSON: &str = "application/spdx+json";

/// Writes the installer image of `arches` and returns its path and the
/// files of its layers, each under its layer's blob path.
pub fn write(arches: &[StagedArch], oci: &StagedOci, run: &Run) -> Result<Written> {
    let options = run.options;
    let out = run.out_dir.join(file_name(&oci.tag));
    let reference = format!("{}:{}", oci.repository, oci.tag);
    let mut blobs = Blobs::default();
    let mut images = Vec::new();
    for arch in arches {
        images.push(image(arch, oci, run, &mut blobs)?);
    }
    let mut top = match images.as_slice() {
        [one] => one.manifest.clone(),
        _ => {
            let index = ImageIndexBuilder::default()
                .schema_version(2u32)
                .media_type(MediaType::ImageIndex)
                .manifests(
                    images
                        .iter()
                        .map(|i| i.manifest.clone())
                        .collect::<Vec<_>>(),
                )
                .build()?;
            blobs.add(MediaType::ImageIndex, canonical_json(&index)?)?
        }
    };
    top.set_platform(None);
    top.set_annotations(Some(HashMap::from([
        (REF_NAME.to_string(), reference.clone()),
        ("io.containerd.image.name".to_string(), reference.clone()),
    ])));
    let index_json = canonical_json(
        &ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![top])
            .build()?,
    )?;
    // docker load reads this; one entry per architecture, the reference on
    // the only one, or `<reference>-<arch>` on each when there are several.
    let docker: Vec<DockerEntry> = images
        .iter()
        .map(|i| DockerEntry {
            config: crate::layout::blob(&i.config),
            repo_tags: vec![if images.len() == 1 {
                reference.clone()
            } else {
                format!("{reference}-{}", i.arch)
            }],
            layers: i.layers.iter().map(|l| crate::layout::blob(l)).collect(),
        })
        .collect();

    let mut items: BTreeMap<String, Item> = BTreeMap::new();
    items.insert(
        crate::layout::OCI_LAYOUT.into(),
        Item::Bytes(crate::layout::OCI_LAYOUT_BYTES.to_vec(), 0o644),
    );
    items.insert(crate::layout::INDEX.into(), Item::Bytes(index_json, 0o644));
    items.insert(
        "manifest.json".into(),
        Item::Bytes(canonical_json(&docker)?, 0o644),
    );
    for (hex, data) in blobs.0 {
        items.insert(crate::layout::blob(&hex), Item::Bytes(data, 0o644));
    }
    write_tar(&out, items, options.epoch)?;
    // Each layer once, as the archive holds each blob once.
    let layers: BTreeMap<&str, &[Held]> = images
        .iter()
        .flat_map(|i| i.layers.iter().zip(&i.layer_files))
        .map(|(hex, files)| (hex.as_str(), files.as_slice()))
        .collect();
    let held = layers
        .into_iter()
        .flat_map(|(hex, files)| {
            let blob = crate::layout::blob(hex);
            files.iter().map(move |f| Held {
                path: format!("/{blob}{}", f.path),
                ..f.clone()
            })
        })
        .collect();
    Ok(Written {
        path: out,
        held: Some(held),
    })
}

/// One architecture's image: its manifest's descriptor (with its platform)
/// and the hex digests of its config and layers.
struct Image {
    arch: String,
    manifest: Descriptor,
    config: String,
    layers: Vec<String>,
    /// The files of each layer, from its root.
    layer_files: Vec<Vec<Held>>,
}

/// The image of one architecture, its blobs added to `blobs`.
fn image(arch: &StagedArch, oci: &StagedOci, run: &Run, blobs: &mut Blobs) -> Result<Image> {
    let (k8s_version, options) = (run.k8s_version, run.options);
    let goarch = arch.arch.go_name();
    let base = arch
        .oci_base
        .as_ref()
        .with_context(|| format!("installer image: no shell staged for {goarch}"))?;
    let carried = super::carried(arch, run)?;
    let entries = tarball::contents(arch, carried.as_ref(), options)?;
    let sha256sums = entries
        .iter()
        .find_map(|e| match (&e.item, e.path.as_str()) {
            (Item::Bytes(data, _), "SHA256SUMS") => Some(sha256_bytes(data)),
            _ => None,
        })
        .context("installer image: the tarball has no SHA256SUMS")?;
    let mut layers = vec![shell_layer(base)];
    layers.extend(release_layers(arch, oci, entries, k8s_version, options));
    let created = crate::util::rfc3339(options.epoch)?;
    let mut written = Layers::default();
    write_layers(&mut written, layers, &created, options, blobs)?;
    let sbom = image_sbom(
        written.layer_files.concat(),
        oci,
        goarch,
        options,
        run.origins,
    )?;
    let sbom_layer = Layer {
        items: BTreeMap::from([(SBOM.to_string(), Item::Bytes(sbom, 0o644))]),
        mtime: options.epoch,
        comment: "the SBOM of the layers below".to_string(),
    };
    write_layers(&mut written, vec![sbom_layer], &created, options, blobs)?;
    let Layers {
        descriptors: layer_descriptors,
        diff_ids,
        history,
        layer_files,
        ..
    } = written;
    let config = ImageConfig {
        goarch,
        oci,
        base,
        k8s_version,
        sha256sums,
        created,
        homepage: &options.homepage,
        license: &options.license,
    };
    let (manifest, config_descriptor) =
        config.manifest(layer_descriptors.clone(), diff_ids, history, blobs)?;
    Ok(Image {
        arch: goarch.to_string(),
        manifest,
        config: hex_of(&config_descriptor),
        layers: layer_descriptors.iter().map(hex_of).collect(),
        layer_files,
    })
}

/// The SPDX document of one architecture's image, from the files of its
/// layers: what `/kubedist/sbom.spdx.json` holds and the referrer carries.
fn image_sbom(
    mut files: Vec<Held>,
    oci: &StagedOci,
    goarch: &str,
    options: &Options,
    origins: &[Origin],
) -> Result<Vec<u8>> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let name = oci.repository.rsplit('/').next().unwrap_or(&oci.repository);
    let subject = sbom::Subject {
        name: name.to_string(),
        version: oci.tag.clone(),
        purl: format!(
            "pkg:oci/{name}?arch={goarch}&repository_url={}&tag={}",
            oci.repository, oci.tag
        ),
        licence: options.license.clone(),
    };
    let document = format!("kubedist-installer-{}-{goarch}", oci.tag);
    sbom::document_of(&files, &document, None, &subject, origins, options.epoch)
}

/// Attaches each image of the layout directory `layout` to the SBOM in its
/// last layer (`referrer`): the referrers' blobs are added and `index.json`
/// lists them after the image.
fn attach_sboms(layout: &Path) -> Result<()> {
    let blob = |d: &Descriptor| layout.join(crate::layout::blob(&hex_of(d)));
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    let index_path = layout.join(crate::layout::INDEX);
    let index: ImageIndex = serde_json::from_slice(&read(&index_path)?)
        .with_context(|| format!("{}: not an image index", index_path.display()))?;
    let top = index
        .manifests()
        .first()
        .with_context(|| format!("{}: lists no image", index_path.display()))?;
    let images = if top.media_type() == &MediaType::ImageIndex {
        let nested: ImageIndex = serde_json::from_slice(&read(&blob(top))?)?;
        nested.manifests().clone()
    } else {
        vec![top.clone()]
    };
    let mut blobs = Blobs::default();
    let mut listed = index.manifests().clone();
    for image in &images {
        let manifest: ImageManifest = serde_json::from_slice(&read(&blob(image))?)?;
        let last = manifest
            .layers()
            .last()
            .with_context(|| format!("image {}: no layers", image.digest()))?;
        let doc = file_of_layer(&blob(last), SBOM)?;
        listed.push(referrer(image, doc, &mut blobs)?);
    }
    for (hex, data) in blobs.0 {
        crate::util::write_bytes_atomic(&layout.join(crate::layout::blob(&hex)), &data, 0o644)?;
    }
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .manifests(listed)
        .build()?;
    crate::util::write_bytes_atomic(&index_path, &canonical_json(&index)?, 0o644)
}

/// The file `rel` of the gzip'd layer blob `path`.
fn file_of_layer(path: &Path, rel: &str) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)));
    for entry in tar.entries().with_context(|| path.display().to_string())? {
        let mut entry = entry.with_context(|| path.display().to_string())?;
        if entry.path()?.to_string_lossy().trim_start_matches("./") == rel {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes)?;
            return Ok(bytes);
        }
    }
    bail!("{}: has no {rel}", path.display())
}

/// The artifact manifest that attaches the SBOM `doc` to the image
/// `image` (OCI 1.1: `subject` names the image, the one layer is the
/// document, the config is the empty descriptor), added to `blobs`; its
/// descriptor, for `index.json`.
fn referrer(image: &Descriptor, doc: Vec<u8>, blobs: &mut Blobs) -> Result<Descriptor> {
    let spdx = MediaType::Other(SPDX_JSON.to_string());
    let mut empty = blobs.add(MediaType::EmptyJSON, b"{}".to_vec())?;
    empty.set_data(Some("e30=".to_string()));
    let mut document = blobs.add(spdx.clone(), doc)?;
    document.set_annotations(Some(HashMap::from([(
        "org.opencontainers.image.title".to_string(),
        "sbom.spdx.json".to_string(),
    )])));
    let mut subject = image.clone();
    subject.set_platform(None);
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .artifact_type(spdx.clone())
        .config(empty)
        .layers(vec![document])
        .subject(subject)
        .build()?;
    let mut descriptor = blobs.add(MediaType::ImageManifest, canonical_json(&manifest)?)?;
    descriptor.set_artifact_type(Some(spdx));
    Ok(descriptor)
}

/// One layer: what it holds, its entries' mtime, its history line.
struct Layer {
    items: BTreeMap<String, Item>,
    mtime: u64,
    comment: String,
}

/// The label naming the image's shell and where it came from.
fn base_label(base: &StagedOciBase) -> String {
    format!(
        "{} {} ({}; source: {})",
        base.package, base.version, base.licence, base.source
    )
}

/// The first layer: Debian's busybox as /bin/sh, its copyright, /tmp.
fn shell_layer(base: &StagedOciBase) -> Layer {
    let mut shell = BTreeMap::new();
    shell.insert(
        base.binary.dest.trim_start_matches('/').to_string(),
        Item::File {
            path: base.binary.path.clone(),
            size: base.binary.size,
            mode: base.binary.mode,
        },
    );
    shell.insert("bin/sh".into(), Item::Symlink("busybox".into()));
    shell.insert("tmp".into(), Item::Dir(0o1777));
    shell.insert(
        base.copyright.dest.trim_start_matches('/').to_string(),
        Item::File {
            path: base.copyright.path.clone(),
            size: base.copyright.size,
            mode: base.copyright.mode,
        },
    );
    shell.insert(
        "kubedist/THIRD-PARTY".into(),
        Item::Bytes(
            format!(
                "/bin/busybox is Debian's {}\nversion {}, licence {}, source {}\n\
                 (its copyright file: {})\n",
                base.package, base.version, base.licence, base.source, base.copyright.dest
            )
            .into_bytes(),
            0o644,
        ),
    );
    Layer {
        items: shell,
        mtime: 0,
        comment: format!("the shell: {}", base_label(base)),
    }
}

/// The packages released on their own schedule, one layer each by name;
/// the images bundle, when the image carries one; then the release's own files (the tarball's, the image's scripts and
/// examples): what changes least sits lowest.
fn release_layers(
    arch: &StagedArch,
    oci: &StagedOci,
    entries: Vec<Entry>,
    k8s_version: &str,
    options: &Options,
) -> Vec<Layer> {
    let mut layers = Vec::new();
    let own_version: BTreeMap<&str, bool> = arch
        .packages
        .iter()
        .filter_map(|p| p.deb.as_ref().or(p.rpm.as_ref()))
        .map(|s| {
            (
                s.name.as_str(),
                s.upstream_version == crate::version::package_spelling(k8s_version),
            )
        })
        .collect();
    let mut by_package: BTreeMap<String, BTreeMap<String, Item>> = BTreeMap::new();
    let mut carried = BTreeMap::new();
    let mut release = BTreeMap::new();
    for Entry {
        path,
        item,
        package,
    } in entries
    {
        let key = format!("{BUNDLE}/{path}");
        match package {
            // The images bundle (`--carry-images`) changes with the image
            // list only: a layer of its own, shared by every revision.
            None if path.starts_with(tarball::CARRIED_DIR) => {
                carried.insert(key, item);
            }
            Some(p) if !own_version.get(p.as_str()).copied().unwrap_or(true) => {
                by_package.entry(p).or_default().insert(key, item);
            }
            _ => {
                release.insert(key, item);
            }
        }
    }
    for (package, items) in by_package {
        layers.push(Layer {
            items,
            mtime: 0,
            comment: format!("package {package}"),
        });
    }
    if !carried.is_empty() {
        layers.push(Layer {
            items: carried,
            mtime: 0,
            comment: "the images bundle".into(),
        });
    }
    let release_name = tarball::top_dir(k8s_version, arch.arch);
    for (name, text) in &oci.scripts {
        release.insert(
            format!("kubedist/{name}"),
            Item::Bytes(text.clone().into_bytes(), 0o755),
        );
    }
    release.insert(
        "kubedist/release".into(),
        Item::Bytes(format!("{release_name}\n").into_bytes(), 0o644),
    );
    for (name, text) in &oci.examples {
        release.insert(
            format!("kubedist/examples/{name}"),
            Item::Bytes(text.clone().into_bytes(), 0o644),
        );
    }
    layers.push(Layer {
        items: release,
        mtime: options.epoch,
        comment: format!("release {release_name}"),
    });

    layers
}

/// An image's layers as written: what its manifest and configuration list,
/// and the files they hold.
#[derive(Default)]
struct Layers {
    descriptors: Vec<Descriptor>,
    diff_ids: Vec<String>,
    history: Vec<History>,
    /// Each layer's files, from its root, in the order of `descriptors`.
    layer_files: Vec<Vec<Held>>,
}

/// Each layer as a gzip'd tar blob, added to `written` with its diff id,
/// history entry and files.
fn write_layers(
    written: &mut Layers,
    layers: Vec<Layer>,
    created: &str,
    options: &Options,
    blobs: &mut Blobs,
) -> Result<()> {
    let gzip = match options.codecs.of(tarball::NAME) {
        Codec {
            kind: Kind::Gz,
            level,
            ..
        } => Codec::new(Kind::Gz, level),
        _ => Codec::new(Kind::Gz, 9),
    };
    for Layer {
        mut items,
        mtime,
        comment,
    } in layers
    {
        add_parent_dirs(&mut items);
        let mut tar = tar::Builder::new(Vec::new());
        for (path, item) in &items {
            append_tar(&mut tar, path, item, mtime)?;
        }
        let tar = tar.into_inner().context("finishing a layer")?;
        written
            .diff_ids
            .push(format!("sha256:{}", sha256_bytes(&tar)));
        written
            .layer_files
            .push(sbom::contents::of_tar(&tar).context("reading a layer back")?);
        let compressed =
            codec::compress(gzip, options.threads, &tar).context("compressing a layer")?;
        written
            .descriptors
            .push(blobs.add(MediaType::ImageLayerGzip, compressed)?);
        written.history.push(
            HistoryBuilder::default()
                .created(created.to_string())
                .created_by(format!("kubedist: {comment}"))
                .build()?,
        );
    }
    Ok(())
}

/// What the image's configuration and manifest say.
struct ImageConfig<'a> {
    goarch: &'a str,
    oci: &'a StagedOci,
    base: &'a StagedOciBase,
    k8s_version: &'a str,
    /// The digest of the payload's SHA256SUMS, which the entrypoint checks.
    sha256sums: String,
    created: String,
    homepage: &'a str,
    /// The release's licence, an SPDX identifier.
    license: &'a str,
}

impl ImageConfig<'_> {
    /// The configuration and the manifest over `layers`, added to `blobs`:
    /// the manifest's descriptor (with its platform) and the config's.
    fn manifest(
        &self,
        layer_descriptors: Vec<Descriptor>,
        diff_ids: Vec<String>,
        history: Vec<History>,
        blobs: &mut Blobs,
    ) -> Result<(Descriptor, Descriptor)> {
        let base_label = base_label(self.base);
        let labels = HashMap::from([
            (
                "org.opencontainers.image.title".to_string(),
                "kubedist-installer".to_string(),
            ),
            (
                "org.opencontainers.image.version".to_string(),
                self.oci.tag.clone(),
            ),
            (
                "org.opencontainers.image.source".to_string(),
                self.homepage.to_string(),
            ),
            (
                "org.opencontainers.image.licenses".to_string(),
                format!("{} AND {}", self.license, self.base.licence),
            ),
            (
                "org.opencontainers.image.description".to_string(),
                format!(
                    "Installs the Kubernetes {} node components onto the host \
                     mounted at /host (run with --help)",
                    self.k8s_version
                ),
            ),
            ("io.kubedist.shell".to_string(), base_label),
        ]);
        let config = ConfigBuilder::default()
            .entrypoint(vec![
                "/bin/sh".to_string(),
                "/kubedist/entrypoint.sh".to_string(),
            ])
            .cmd(vec!["install".to_string()])
            .env(vec![
                "PATH=/bin".to_string(),
                // The entrypoint checks the payload's list against it.
                format!("KUBEDIST_SHA256SUMS={}", self.sha256sums),
            ])
            .working_dir("/")
            .labels(labels)
            .build()?;
        let annotations = HashMap::from([
            (
                "org.opencontainers.image.created".to_string(),
                self.created.clone(),
            ),
            (
                "org.opencontainers.image.version".to_string(),
                self.oci.tag.clone(),
            ),
        ]);
        crate::layout::add_image(
            blobs,
            crate::layout::Image {
                goarch: self.goarch.to_string(),
                created: self.created.clone(),
                config,
                layers: layer_descriptors,
                diff_ids,
                history,
                annotations,
            },
        )
    }
}

/// An entry of docker's `manifest.json`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    repo_tags: Vec<String>,
    layers: Vec<String>,
}
