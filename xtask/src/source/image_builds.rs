//! The images of pkg/images.toml built from source, by the recipes of
//! pkg/source-images.toml: each an image index over the architectures
//! asked for, under the reference kubeadm asks for, in the OCI layout
//! `DIR/images/` of a `--from` directory, with their pins in
//! `DIR/images.toml` (pkg/images.toml's format, `--image-pins`). `dist`
//! stages that layout as it stages the fixtures' or a pulled one.
//!
//! Go programs are built by `super::build` (the same verification and
//! cache as the node's programs); C programs (pause) by the architecture's
//! gcc from the module of their recipe, which go.sum verified; Debian's
//! packages come through apt, which verifies them against the signed
//! archive. Every file has mtime 0 and every image's `created` is its
//! tag's date, so the same inputs give the same digests. Compressed layers
//! are cached by their content beside the programs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use oci_spec::image::{ConfigBuilder, Descriptor, HistoryBuilder, ImageIndexBuilder, MediaType};
use serde::Deserialize;

use super::{build_pinned, pins_dir, program_name, Go, Recipes};
use crate::archive::{add_parent_dirs, append_tar, Item};
use crate::emit::codec::{self, Codec, Kind};
use crate::inputs::from_dir;
use crate::layout::{canonical_json, Blobs};
use crate::spec::{Arch, Image, Images, Spec};

/// The `record` of each pin: where its digest comes from.
const RECORD: &str = "built from source by kubedist (cargo xtask source --images)";

/// The label that says an image was built from source, and from what.
pub const BUILT_FROM_SOURCE_LABEL: &str = "io.kubedist.built-from-source";

/// pkg/source-images.toml: the recipe of each image, by its short name.
#[derive(Debug, Deserialize)]
struct ImageRecipes(BTreeMap<String, ImageRecipe>);

/// How one image is built.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageRecipe {
    /// The pkg/source.toml recipe whose module holds its programs.
    recipe: String,
    /// Path in the image → main package of the recipe's module.
    #[serde(default)]
    programs: BTreeMap<String, String>,
    /// A C program compiled from the recipe's module.
    c: Option<CProgram>,
    entrypoint: Vec<String>,
    user: String,
    /// Debian packages whose files the image holds (`NAME`, of the
    /// image's architecture, or `NAME:all`).
    #[serde(default)]
    debian: Vec<String>,
    /// Symbolic links added beside them: path → target.
    #[serde(default)]
    links: BTreeMap<String, String>,
    /// Variables the image's config sets on some architectures only,
    /// `NAME=VALUE` by architecture, after PATH.
    #[serde(default)]
    env: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CProgram {
    /// The C file, relative to the module.
    source: String,
    /// Where the program goes in the image.
    path: String,
    /// The Makefile whose `TAG ?=` must be the image's tag.
    makefile: String,
    /// Image tag → the recipe's version it is compiled from. One reference
    /// must name one image in every release's bundle (a node upgraded
    /// from one release to the next imports both): pause 3.10.2 from the
    /// same module version whichever release bundles it. A tag not listed
    /// is compiled from the release's version.
    #[serde(default)]
    built_from: BTreeMap<String, String>,
}

impl ImageRecipes {
    fn load(root: &Path) -> Result<ImageRecipes> {
        let path = root.join("pkg/source-images.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let recipes: ImageRecipes =
            toml::from_str(&text).with_context(|| path.display().to_string())?;
        for (name, recipe) in &recipes.0 {
            if recipe.programs.is_empty() == recipe.c.is_none() {
                bail!(
                    "{}: [{name}]: give `programs` or `c`, one of them",
                    path.display()
                );
            }
            if let Some(arch) = recipe.env.keys().find(|a| a.parse::<Arch>().is_err()) {
                bail!(
                    "{}: [{name}] env: {arch:?} is not an architecture",
                    path.display()
                );
            }
        }
        Ok(recipes)
    }

    fn get(&self, image: &Image) -> Result<&ImageRecipe> {
        self.0.get(image.short_name()).with_context(|| {
            format!(
                "pkg/source-images.toml: no [{}] recipe to build {} from source",
                image.short_name(),
                image.reference
            )
        })
    }
}

/// The version of its recipe an image's tag names: `v1.37.2` → `1.37.2`,
/// etcd's `3.7.0-0` → `3.7.0` (the part after `-` is the image's own
/// revision).
fn version_of(image: &Image) -> Result<String> {
    let tag = image
        .reference
        .rsplit_once(':')
        .map(|(_, t)| t)
        .unwrap_or_default();
    let version = tag.trim_start_matches('v').split('-').next().unwrap_or("");
    if !crate::version::Version::is_valid(version) {
        bail!("{}: its tag {tag:?} names no version", image.reference);
    }
    Ok(version.to_string())
}

/// The version of `recipe` an image is built from: the release's, when the
/// recipe is one of the release's sources (the control plane's images and
/// pause come from the kubernetes module of the release), else its tag's.
fn recipe_version(spec: &Spec, recipe: &ImageRecipe, image: &Image) -> Result<String> {
    let tag = image.reference.rsplit_once(':').map_or("", |(_, t)| t);
    if let Some(version) = recipe.c.as_ref().and_then(|c| c.built_from.get(tag)) {
        return Ok(version.clone());
    }
    match spec.release.sources.get(&recipe.recipe) {
        Some(source) => Ok(source.version.clone()),
        None => version_of(image),
    }
}

/// Checks that every image of `images` has a recipe (else names the one
/// without) and returns `(recipe, tag)` of each image compiled from C whose
/// tag no Kubernetes version is chosen to build yet (`built_from`).
pub fn unbuilt_c_tags(root: &Path, images: &Images) -> Result<Vec<(String, String)>> {
    let recipes = ImageRecipes::load(root)?;
    let mut out = Vec::new();
    for image in &images.images {
        let recipe = recipes.get(image)?;
        let tag = image.reference.rsplit_once(':').map_or("", |(_, t)| t);
        if recipe
            .c
            .as_ref()
            .is_some_and(|c| !c.built_from.contains_key(tag))
        {
            out.push((image.short_name().to_string(), tag.to_string()));
        }
    }
    Ok(out)
}

/// What `cargo xtask source --lock` pins: for each recipe and version, the
/// main packages its go.mod must keep. Each source of the release with its
/// programs and every image program of the same recipe; the image-only
/// recipes (etcd, CoreDNS) at their tags when pkg/images.toml is the
/// release's.
pub fn to_lock(spec: &Spec, recipes: &Recipes) -> Result<BTreeMap<(String, String), Vec<String>>> {
    let image_recipes = ImageRecipes::load(&spec.root)?;
    let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (name, source) in &spec.release.sources {
        let packages = wanted
            .entry((name.clone(), source.version.clone()))
            .or_default();
        packages.extend(recipes.get(name)?.packages.iter().cloned());
        for recipe in image_recipes.0.values().filter(|r| &r.recipe == name) {
            packages.extend(recipe.programs.values().cloned());
        }
    }
    if spec.kubernetes_version() == spec.images.kubernetes {
        for image in &spec.images.images {
            let recipe = image_recipes.get(image)?;
            if !spec.release.sources.contains_key(&recipe.recipe) && !recipe.programs.is_empty() {
                wanted
                    .entry((recipe.recipe.clone(), version_of(image)?))
                    .or_default()
                    .extend(recipe.programs.values().cloned());
            }
        }
    }
    Ok(wanted
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect())
}

/// Builds every image of `images` for `arches` into the OCI layout
/// `dir/images/` and writes their pins to `dir/images.toml`.
pub fn write(spec: &Spec, go: &Go, images: &Images, arches: &[Arch], dir: &Path) -> Result<()> {
    let recipes = Recipes::load(&spec.root)?;
    let image_recipes = ImageRecipes::load(&spec.root)?;
    // Every image's recipe and version first: a missing one fails before
    // any build.
    let mut planned = Vec::new();
    let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for image in &images.images {
        let recipe = image_recipes.get(image)?;
        let version = recipe_version(spec, recipe, image)?;
        if !recipe.programs.is_empty() {
            wanted
                .entry((recipe.recipe.clone(), version.clone()))
                .or_default()
                .extend(recipe.programs.values().cloned());
        }
        planned.push((image, recipe, version));
    }
    let mut built: BTreeMap<(String, String, Arch), BTreeMap<String, PathBuf>> = BTreeMap::new();
    for ((name, version), packages) in &wanted {
        let packages: Vec<String> = packages.iter().cloned().collect();
        let recipe = recipes.get(name)?;
        for (arch, programs) in
            build_pinned(go, &spec.root, name, recipe, version, arches, &packages)?
        {
            built.insert((name.clone(), version.clone(), arch), programs);
        }
    }

    let mut blobs = Blobs::default();
    let mut layers = LayerCache::new(go.cache.join("layers"));
    let mut listed = Vec::new();
    let mut pins = Vec::new();
    for (image, recipe, version) in planned {
        let source = recipes.get(&recipe.recipe)?;
        let facts = source.versions.get(&version).with_context(|| {
            format!(
                "pkg/source.toml: [{}.versions.\"{version}\"] is missing (its date and commit)",
                recipe.recipe
            )
        })?;
        let described = format!(
            "{} {}@v{version} with {}",
            image.short_name(),
            source.module,
            go.toolchain(&super::pins_dir(&spec.root, &recipe.recipe, &version))?
        );
        eprintln!("source: image {}", image.reference);
        let mut manifests = Vec::new();
        for &arch in arches {
            let mut image_layers = vec![base_layer()];
            if !recipe.debian.is_empty() {
                image_layers.push(debian_layer(spec, recipe, arch)?);
            }
            let mut programs = BTreeMap::new();
            for (path, package) in &recipe.programs {
                let name = program_name(&source.import_path(package)).to_string();
                let file = &built[&(recipe.recipe.clone(), version.clone(), arch)][&name];
                let bytes =
                    std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
                programs.insert(path.clone(), Item::Bytes(bytes, 0o755));
            }
            if let Some(c) = &recipe.c {
                let bytes = compile(go, spec, &recipe.recipe, source, c, image, &version, arch)?;
                programs.insert(c.path.clone(), Item::Bytes(bytes, 0o755));
            }
            image_layers.push((programs, format!("the programs: {described}")));
            manifests.push(manifest(
                image,
                recipe,
                arch,
                image_layers,
                &facts.date,
                &described,
                &mut layers,
                &mut blobs,
            )?);
        }
        let index = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(manifests)
            .build()?;
        let mut top = blobs.add(MediaType::ImageIndex, canonical_json(&index)?)?;
        top.set_annotations(Some(HashMap::from([(
            "org.opencontainers.image.ref.name".to_string(),
            image.reference.clone(),
        )])));
        pins.push(Image {
            reference: image.reference.clone(),
            worker: image.worker,
            index: Some(top.digest().to_string()),
            record: Some(RECORD.to_string()),
            unrecorded: None,
        });
        listed.push(top);
    }
    crate::layout::write_dir(&dir.join(from_dir::IMAGES), listed, blobs)?;
    let pins = Images {
        kubernetes: images.kubernetes.clone(),
        images: pins,
    };
    let text = format!(
        "# The images `cargo xtask source --images` built, in pkg/images.toml's format:\n\
         # `cargo xtask dist --from DIR --image-pins DIR/{}` bundles them.\n{}",
        from_dir::IMAGE_PINS,
        toml::to_string(&pins).context("writing the images' pins")?
    );
    crate::util::write_bytes_atomic(&dir.join(from_dir::IMAGE_PINS), text.as_bytes(), 0o644)
}

/// A layer's files and its history line.
type Layer = (BTreeMap<String, Item>, String);

/// The files of upstream's base image (distroless) the programs use.
fn base_layer() -> Layer {
    let text = |s: &str| Item::Bytes(s.as_bytes().to_vec(), 0o644);
    let items = BTreeMap::from([
        (
            "etc/passwd".to_string(),
            text(
                "root:x:0:0:root:/root:/sbin/nologin\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
                 nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
            ),
        ),
        (
            "etc/group".to_string(),
            text("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"),
        ),
        ("etc/nsswitch.conf".to_string(), text("hosts: files dns\n")),
        ("home/nonroot".to_string(), Item::Dir(0o700)),
        ("root".to_string(), Item::Dir(0o700)),
        ("tmp".to_string(), Item::Dir(0o1777)),
    ]);
    (
        items,
        "the base: passwd, group, nsswitch.conf, /tmp".to_string(),
    )
}

/// Debian's packages of `recipe` for `arch`, their documentation left out
/// but for the copyright files, with the recipe's links.
fn debian_layer(spec: &Spec, recipe: &ImageRecipe, arch: Arch) -> Result<Layer> {
    use crate::fetch::debian;
    let debarch = spec.families.deb.arch_name(arch)?;
    debian::require_arch(debarch, crate::util::is_root())?;
    let mut items = BTreeMap::new();
    let mut versions = Vec::new();
    let wanted: Vec<&str> = recipe.debian.iter().map(String::as_str).collect();
    let debs = debian::download_all(debarch, &wanted, &spec.root.join("target/debian-debs"))?;
    for (package, deb) in recipe.debian.iter().zip(debs) {
        for (path, item) in debian::tree(&deb.path)? {
            let documentation = ["usr/share/doc/", "usr/share/man/", "usr/share/info/"]
                .iter()
                .any(|d| path.starts_with(d))
                || path.starts_with("usr/share/lintian/")
                || path.starts_with("usr/share/locale/");
            if documentation && !path.ends_with("/copyright") {
                continue;
            }
            items.insert(path, item);
        }
        versions.push(format!("{package} {}", deb.version));
    }
    merged_usr_links(&mut items);
    for (path, target) in &recipe.links {
        items.insert(path.clone(), Item::Symlink(target.clone()));
    }
    Ok((items, format!("Debian's {}", versions.join(", "))))
}

/// The directories a merged /usr makes links into /usr.
const ALIASED_DIRS: [&str; 4] = ["bin", "sbin", "lib", "lib64"];

/// Debian 13's packages ship their files below /usr alone (DEP 17): the
/// links /bin, /sbin, /lib and /lib64 into /usr come with the system, not
/// with a package. Packages that put nothing in those four get the links a
/// Debian 13 system has (those whose /usr directory they fill), or the
/// programs' loader (/lib/ld-linux-riscv64-lp64d.so.1) is missing. Debian
/// 12's packages still ship /lib and /lib64 themselves: left as they are.
fn merged_usr_links(items: &mut BTreeMap<String, Item>) {
    let under = |path: &str, dir: &str| {
        path == dir
            || path
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if items
        .keys()
        .any(|path| ALIASED_DIRS.iter().any(|dir| under(path, dir)))
    {
        return;
    }
    for dir in ALIASED_DIRS {
        let in_usr = format!("usr/{dir}");
        if items.keys().any(|path| under(path, &in_usr)) {
            items.insert(dir.to_string(), Item::Symlink(in_usr));
        }
    }
}

/// The C program `c` of the module of `recipe` (pkg/source.toml's
/// `[recipe_name]`) at `version`, compiled for
/// `arch` as its Makefile does (static, `-Os`, stripped), cached by the
/// compiler's version, the source and the flags.
#[allow(clippy::too_many_arguments)]
fn compile(
    go: &Go,
    spec: &Spec,
    recipe_name: &str,
    recipe: &super::Recipe,
    c: &CProgram,
    image: &Image,
    version: &str,
    arch: Arch,
) -> Result<Vec<u8>> {
    let module = module_dir(
        go,
        &pins_dir(&spec.root, recipe_name, version),
        &recipe.module,
        version,
    )?;
    let makefile = module.join(&c.makefile);
    let text = std::fs::read_to_string(&makefile)
        .with_context(|| format!("reading {}", makefile.display()))?;
    let tag = text
        .lines()
        .find_map(|l| l.strip_prefix("TAG ?="))
        .map(str::trim)
        .with_context(|| format!("{}: no `TAG ?=` line", makefile.display()))?;
    let wanted = image.reference.rsplit_once(':').map_or("", |(_, t)| t);
    if tag != wanted {
        bail!(
            "{}: builds {} {tag}, but pkg/images.toml asks for {}",
            makefile.display(),
            image.short_name(),
            image.reference
        );
    }
    let gcc = format!("{}-gcc", arch.gnu_triple());
    let gcc_version = super::c_compiler_version(arch)
        .with_context(|| format!("{}: compiling {}", image.reference, c.source))?;
    let source = std::fs::read(module.join(&c.source))
        .with_context(|| format!("reading {}", module.join(&c.source).display()))?;
    let flags = [
        "-Os".to_string(),
        "-Wall".to_string(),
        "-Werror".to_string(),
        "-static".to_string(),
        "-s".to_string(),
        format!("-DVERSION=v{tag}-v{version}"),
    ];
    let key = crate::digest::sha256_bytes(
        &[gcc_version.as_slice(), &source, flags.join(" ").as_bytes()].join(&0u8),
    );
    let name = c.path.rsplit('/').next().unwrap_or(&c.path);
    let cached = go
        .cache
        .join(format!("{name}-{tag}-{arch}-{}", &key[..16]))
        .join(name);
    if let Ok(bytes) = std::fs::read(&cached) {
        return Ok(bytes);
    }
    // A fixed file name and directory: the compiler sees the same paths on
    // every machine.
    let work = tempfile::tempdir()?;
    let file = work.path().join(format!("{name}.c"));
    std::fs::write(&file, &source)?;
    eprintln!("source: {name} {tag} {arch}: {gcc}");
    let out = Command::new(&gcc)
        .current_dir(work.path())
        .args(&flags)
        .args(["-o", name, &format!("{name}.c")])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {gcc}"))?;
    if !out.status.success() {
        bail!(
            "{gcc} {}: {}",
            c.source,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let bytes = std::fs::read(work.path().join(name))?;
    crate::util::write_bytes_atomic(&cached, &bytes, 0o755)?;
    Ok(bytes)
}

/// The directory of `module@version`, downloaded where the module cache
/// lacks it and checked against the go.sum of `pins`.
fn module_dir(go: &Go, pins: &Path, module: &str, version: &str) -> Result<PathBuf> {
    let work = tempfile::tempdir()?;
    for file in ["go.mod", "go.sum"] {
        std::fs::copy(pins.join(file), work.path().join(file))?;
    }
    let at = format!("{module}@v{version}");
    let mut download = go.command(work.path())?;
    download.args(["mod", "download", "-json", &at]);
    let json = super::run_go(&mut download, &at, &pins.join("go.sum"))?;
    let info: serde_json::Value = serde_json::from_str(&json).context("go mod download -json")?;
    info["Dir"]
        .as_str()
        .map(PathBuf::from)
        .with_context(|| format!("go mod download {at}: no directory"))
}

/// Compressed layers by the digest of their tar: a layer built again from
/// the same files is not compressed again.
struct LayerCache {
    dir: PathBuf,
}

impl LayerCache {
    fn new(dir: PathBuf) -> LayerCache {
        LayerCache { dir }
    }

    /// The gzip'd `tar` whose digest is `diff_id` (hex).
    fn gzip(&mut self, diff_id: &str, tar: &[u8]) -> Result<Vec<u8>> {
        let path = self.dir.join(format!("{diff_id}.gz"));
        if let Ok(bytes) = std::fs::read(&path) {
            return Ok(bytes);
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let gz = codec::compress(Codec::new(Kind::Gz, 9), threads, tar)
            .context("compressing a layer")?;
        crate::util::write_bytes_atomic(&path, &gz, 0o644)?;
        Ok(gz)
    }
}

/// One architecture's image of `image`: its layers, config and manifest
/// added to `blobs`; returns the manifest's descriptor with its platform.
#[allow(clippy::too_many_arguments)]
fn manifest(
    image: &Image,
    recipe: &ImageRecipe,
    arch: Arch,
    image_layers: Vec<Layer>,
    date: &str,
    described: &str,
    cache: &mut LayerCache,
    blobs: &mut Blobs,
) -> Result<Descriptor> {
    let mut descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    let mut history = Vec::new();
    for (mut items, comment) in image_layers {
        add_parent_dirs(&mut items);
        let mut tar = tar::Builder::new(Vec::new());
        for (path, item) in &items {
            append_tar(&mut tar, path, item, 0)?;
        }
        let tar = tar.into_inner().context("finishing a layer")?;
        let diff_id = crate::digest::sha256_bytes(&tar);
        descriptors.push(blobs.add(MediaType::ImageLayerGzip, cache.gzip(&diff_id, &tar)?)?);
        diff_ids.push(format!("sha256:{diff_id}"));
        history.push(
            HistoryBuilder::default()
                .created(date.to_string())
                .created_by(format!("kubedist: {comment}"))
                .build()?,
        );
    }
    let version = image.reference.rsplit_once(':').map_or("", |(_, t)| t);
    let labels = HashMap::from([
        (
            "org.opencontainers.image.title".to_string(),
            image.short_name().to_string(),
        ),
        (
            "org.opencontainers.image.version".to_string(),
            version.to_string(),
        ),
        (
            "org.opencontainers.image.description".to_string(),
            format!("Built from source by kubedist: {described}"),
        ),
        (BUILT_FROM_SOURCE_LABEL.to_string(), described.to_string()),
    ]);
    let config = ConfigBuilder::default()
        .entrypoint(recipe.entrypoint.clone())
        .env(
            std::iter::once(
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            )
            .chain(
                recipe
                    .env
                    .get(arch.go_name())
                    .into_iter()
                    .flatten()
                    .cloned(),
            )
            .collect::<Vec<_>>(),
        )
        .user(recipe.user.clone())
        .working_dir("/")
        .labels(labels)
        .build()?;
    let (manifest, _) = crate::layout::add_image(
        blobs,
        crate::layout::Image {
            goarch: arch.go_name().to_string(),
            created: date.to_string(),
            config,
            layers: descriptors,
            diff_ids,
            history,
            annotations: HashMap::new(),
        },
    )?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::verify_pins;

    fn file() -> Item {
        Item::Bytes(Vec::new(), 0o755)
    }

    #[test]
    fn packages_below_usr_alone_get_the_merged_usr_links() {
        // Debian 13's libc6 and iptables: the loader and the programs in /usr.
        let mut items = BTreeMap::from([
            ("usr/lib/ld-linux-riscv64-lp64d.so.1".to_string(), file()),
            ("usr/sbin/xtables-nft-multi".to_string(), file()),
            ("usr/share/doc/libc6/copyright".to_string(), file()),
        ]);
        merged_usr_links(&mut items);
        let links: Vec<(&str, &str)> = items
            .iter()
            .filter_map(|(path, item)| match item {
                Item::Symlink(target) => Some((path.as_str(), target.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(links, [("lib", "usr/lib"), ("sbin", "usr/sbin")]);
    }

    #[test]
    fn packages_with_their_own_lib_are_left_as_they_are() {
        // Debian 12's libc6: /lib64's loader and /lib's libraries its own.
        let mut items = BTreeMap::from([
            ("lib64/ld-linux-x86-64.so.2".to_string(), file()),
            ("lib/x86_64-linux-gnu/libc.so.6".to_string(), file()),
            ("usr/bin/ldd".to_string(), file()),
            ("usr/sbin/xtables-nft-multi".to_string(), file()),
        ]);
        let before: Vec<String> = items.keys().cloned().collect();
        merged_usr_links(&mut items);
        assert_eq!(items.keys().cloned().collect::<Vec<_>>(), before);
    }

    fn image(reference: &str) -> Image {
        Image {
            reference: reference.to_string(),
            worker: true,
            index: None,
            record: None,
            unrecorded: Some("test".to_string()),
        }
    }

    #[test]
    fn an_images_tag_names_its_recipes_version() {
        let version = |r: &str| version_of(&image(r)).map_err(|e| e.to_string());
        assert_eq!(
            version("registry.k8s.io/kube-proxy:v1.37.2").unwrap(),
            "1.37.2"
        );
        assert_eq!(version("registry.k8s.io/etcd:3.7.0-0").unwrap(), "3.7.0");
        assert_eq!(
            version("registry.k8s.io/coredns/coredns:v1.14.6").unwrap(),
            "1.14.6"
        );
        assert_eq!(version("registry.k8s.io/pause:3.10.2").unwrap(), "3.10.2");
        let err = version("registry.k8s.io/pause:latest").unwrap_err();
        assert_eq!(
            err,
            "registry.k8s.io/pause:latest: its tag \"latest\" names no version"
        );
    }

    #[test]
    fn go_names_a_program_by_its_path_without_a_major_version() {
        assert_eq!(program_name("go.etcd.io/etcd/server/v3"), "server");
        assert_eq!(program_name("github.com/coredns/coredns"), "coredns");
        assert_eq!(
            program_name("k8s.io/kubernetes/cmd/kube-proxy"),
            "kube-proxy"
        );
        assert_eq!(program_name("example.com/tools/v"), "v");
    }

    /// Every image the release pins has a recipe, pinned modules at its
    /// version and the facts of that version: `dist --source` of the pin
    /// cannot fail for a missing one.
    #[test]
    fn every_image_of_the_release_has_a_recipe_and_pinned_modules() {
        let spec = Spec::load(&crate::util::repo_root()).unwrap();
        let recipes = Recipes::load(&spec.root).unwrap();
        let image_recipes = ImageRecipes::load(&spec.root).unwrap();
        let locked = to_lock(&spec, &recipes).unwrap();
        for image in &spec.images.images {
            let recipe = image_recipes.get(image).unwrap();
            let version = recipe_version(&spec, recipe, image).unwrap();
            let source = recipes.get(&recipe.recipe).unwrap();
            verify_pins(
                &pins_dir(&spec.root, &recipe.recipe, &version),
                &recipe.recipe,
                source,
                &version,
            )
            .unwrap();
            let go_mod = std::fs::read_to_string(
                pins_dir(&spec.root, &recipe.recipe, &version).join("go.mod"),
            )
            .unwrap();
            for package in recipe.programs.values() {
                let path = source.import_path(package);
                assert!(
                    go_mod
                        .lines()
                        .any(|l| l.trim().trim_start_matches("tool ") == path),
                    "{}: its go.mod does not keep {path} as a tool",
                    image.reference
                );
                assert!(locked[&(recipe.recipe.clone(), version.clone())].contains(package));
            }
        }
    }

    #[test]
    fn a_recipe_with_both_or_neither_kind_of_program_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("pkg")).unwrap();
        std::fs::write(
            tmp.path().join("pkg/source-images.toml"),
            "[pause]\nrecipe = \"kubernetes\"\nentrypoint = [\"/pause\"]\nuser = \"0\"\n",
        )
        .unwrap();
        let err = ImageRecipes::load(tmp.path()).unwrap_err().to_string();
        assert!(
            err.ends_with("pkg/source-images.toml: [pause]: give `programs` or `c`, one of them"),
            "{err}"
        );
    }

    /// The same files give the same manifest, whatever the order they were
    /// added in; another file gives another.
    #[test]
    fn the_same_files_give_the_same_image() {
        let tmp = tempfile::tempdir().unwrap();
        let recipe = ImageRecipe {
            recipe: "kubernetes".into(),
            programs: BTreeMap::new(),
            c: None,
            entrypoint: vec!["/pause".into()],
            user: "65535:65535".into(),
            debian: vec![],
            links: BTreeMap::new(),
            env: BTreeMap::new(),
        };
        let pause = image("registry.k8s.io/pause:3.10.2");
        let build = |program: &[u8]| {
            let mut blobs = Blobs::default();
            let mut cache = LayerCache::new(tmp.path().join("layers"));
            let layers = vec![
                base_layer(),
                (
                    BTreeMap::from([("pause".to_string(), Item::Bytes(program.to_vec(), 0o755))]),
                    "the programs".to_string(),
                ),
            ];
            let d = manifest(
                &pause,
                &recipe,
                Arch::Arm64,
                layers,
                "2026-10-27T12:01:04Z",
                "pause",
                &mut cache,
                &mut blobs,
            )
            .unwrap();
            (d, blobs)
        };
        let (a, blobs) = build(b"program");
        let (b, _) = build(b"program");
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), build(b"other").0.digest());
        let manifest: serde_json::Value =
            serde_json::from_slice(&blobs.0[&crate::layout::hex_of(&a)]).unwrap();
        let config: serde_json::Value = serde_json::from_slice(
            &blobs.0[manifest["config"]["digest"]
                .as_str()
                .unwrap()
                .trim_start_matches("sha256:")],
        )
        .unwrap();
        assert_eq!(config["architecture"], "arm64");
        assert_eq!(config["variant"], "v8");
        assert_eq!(config["config"]["User"], "65535:65535");
        assert_eq!(config["config"]["Labels"][BUILT_FROM_SOURCE_LABEL], "pause");
        assert_eq!(config["created"], "2026-10-27T12:01:04Z");
    }
}
