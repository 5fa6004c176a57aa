//! `cargo xtask bump VERSION`: the tree moved to another upstream
//! Kubernetes release in one command. It asks the Go module proxy, pins the
//! release's modules (`source::lock`, the checksum database on), builds its
//! kubeadm from source, records the images that kubeadm lists
//! (`pkg/images/`), pins the modules of the images built from other
//! modules (etcd, CoreDNS), and moves the pin, cri-tools and the window of
//! supported minors (`pkg/release.toml`) where the version calls for it.
//!
//! All or nothing: every file is written first into a copy of `pkg/`
//! beside the tree and checked there as `Spec::load` checks the tree; only
//! then are the changed files moved into `pkg/`, new files first and the
//! pin last, so that a kill leaves the old release pinned (a run again
//! finishes the move).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::fetch::Lock;
use crate::source::{self, image_builds, Go, Recipes};
use crate::spec::{Arch, Image, Images, Spec, KUBERNETES};
use crate::version::Version;

/// Move the tree to another Kubernetes release.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask bump 1.38              # the newest 1.38 the proxy serves (a pre-release until 1.38.0)
  cargo xtask bump 1.37.3            # a patch of the pinned minor: the pin moves
  cargo xtask bump 1.36.4            # a patch of an older supported minor
  cargo xtask bump 1.38.0-rc.1       # a pre-release, for its channel v1.38-prerelease
  cargo xtask test                   # the proof

What moves (pkg/release.toml): a release newer than the pin becomes the pin
(the previous pin's images go to pkg/images/, cri-tools follows the minor
where upstream published it); a patch of a supported minor replaces that
minor in `supported`, the newest three minors; a pre-release of the next
minor becomes `prerelease`. Older minors leave `supported` and stay
buildable with `dist --version`. A version older than one the tree carries
of its minor is refused. docs/following-upstream.md has the whole path.")]
pub struct Args {
    /// X.Y.Z, X.Y.Z-rc.N (an alpha, beta or rc), or X.Y: the newest
    /// version of that minor the Go module proxy serves (its newest
    /// release, else its newest pre-release).
    #[arg(value_name = "VERSION")]
    pub version: String,
}

/// Why a file this command adds to `pkg/upstream.lock` has no digest: it
/// builds from source and downloads nothing.
const UNDOWNLOADED: &str = "not downloaded when `cargo xtask bump` added this release (it builds \
    from source); the first verified download pins it";

/// Why an image list carries no index digests (`Image::unrecorded`).
const UNRECORDED_INDEX: &str = "the index digest is not recorded: `cargo xtask bump` takes the \
    list from kubeadm, which names tags; the first fetch names it, and a pin is added here once a \
    record exists";

/// `"images <version>"` in `pkg/upstream.lock`'s records.
const UNRECORDED_MANIFESTS: &str = "no published record of the per-architecture manifests was \
    found offline, nor of the indexes (pkg/images.toml says so); the first fetch records the \
    manifest each index names for each architecture in [manifests], and later fetches are \
    checked against them";

pub fn run(root: &Path, args: &Args) -> Result<()> {
    let moved = bump(root, &args.version)?;
    match moved.changed.as_slice() {
        [] => println!(
            "nothing changed: the tree already carries {KUBERNETES} {}",
            moved.version
        ),
        lines => {
            println!("bump: {KUBERNETES} {}:", moved.version);
            for line in lines {
                println!("  {line}");
            }
        }
    }
    moved.steps.print();
    Ok(())
}

/// What a run did.
pub struct Moved {
    pub version: Version,
    /// What changed in the tree, a line each.
    pub changed: Vec<String>,
    pub steps: Steps,
}

/// Moves the tree at `root` to `wanted` (as `Args::version`).
pub fn bump(root: &Path, wanted: &str) -> Result<Moved> {
    let mut steps = Steps::default();
    let spec = Spec::load(root)?;
    let (version, changed) = move_tree(root, &spec, wanted, &mut steps)
        .map_err(|e| anyhow::anyhow!("{e:#} (nothing changed)"))?;
    Ok(Moved {
        version,
        changed,
        steps,
    })
}

/// Everything but the last step runs on the copy; returns the version and
/// what changed in the tree.
fn move_tree(
    root: &Path,
    spec: &Spec,
    wanted: &str,
    steps: &mut Steps,
) -> Result<(Version, Vec<String>)> {
    let go = Go::from_env(root)?;
    // The module whose tags are Kubernetes' releases.
    let module = Recipes::load(root)?.get(KUBERNETES)?.module.clone();
    let served = steps.time("ask the Go module proxy", || served_versions(&go, &module))?;
    let version = choose(wanted, &module, &served)?;
    let role = Role::of(spec, &version)?;
    refuse_older(spec, &version)?;
    eprintln!("bump: {KUBERNETES} {version}: {}", role.describe(spec));

    let mut tree = Tree::copy(root)?;
    // The tag's facts and the modules of its programs and images.
    steps.time("pin the release's modules", || {
        add_facts(&go, &mut tree, KUBERNETES, &version)?;
        lock_source(&go, &tree, (&version, None), KUBERNETES, &version)
    })?;
    // kubeadm alone: what the image list needs; `dist --source` builds
    // the rest from the same pins.
    let kubeadm = steps.time("build kubeadm from source", || {
        let recipes = tree.recipes()?;
        let host = Arch::host()?;
        let built = source::build_pinned(
            &go,
            &tree.root,
            KUBERNETES,
            recipes.get(KUBERNETES)?,
            &version.to_string(),
            &[host],
            &["cmd/kubeadm".to_string()],
        )?;
        built
            .get(&host)
            .and_then(|programs| programs.get("kubeadm"))
            .cloned()
            .context("pkg/source.toml: [kubernetes] builds no kubeadm")
    })?;
    let images = steps.time("record the images its kubeadm lists", || {
        let mut images = kubeadm_images(&kubeadm, &version)?;
        keep_records(
            &mut images,
            &spec.with_kubernetes_version(&version.to_string())?.images,
        );
        for (recipe, tag) in image_builds::unbuilt_c_tags(&tree.root, &images)? {
            tree.edit_toml("pkg/source-images.toml", |doc| {
                doc[recipe.as_str()]["c"]["built_from"][tag.as_str()] =
                    toml_edit::value(version.to_string());
                Ok(())
            })?;
        }
        Ok(images)
    })?;
    steps.time("pin the images' other modules", || {
        lock_image_modules(&go, &mut tree, spec, &version, &images)
    })?;
    let cri_tools = steps.time("follow cri-tools", || match role {
        Role::NewPin => follow_cri_tools(&go, &mut tree, spec, &version),
        _ => Ok(None),
    })?;
    steps.time("move the pin and the window", || {
        write_images(&mut tree, spec, &version, &images, role)?;
        write_release(&mut tree, spec, &version, role, cri_tools.as_deref())?;
        account_in_lock(&mut tree, &version, cri_tools.as_deref())
    })?;
    steps.time("check the new tree", || tree.check())?;
    // From here on the tree changes: a kill leaves the old pin with some
    // new files beside it, which a run again completes.
    Ok((version, tree.install(root)?))
}

/// What a version becomes in the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A release newer than the pin: the pin.
    NewPin,
    /// A patch of a supported minor older than the pin's.
    Supported,
    /// A pre-release of a minor after the pin's.
    Prerelease,
    /// A release of a minor older than the window: buildable only.
    Outside,
}

impl Role {
    fn of(spec: &Spec, version: &Version) -> Result<Role> {
        let pin = Version::parse(spec.kubernetes_version())?;
        let oldest = spec
            .release
            .supported
            .first()
            .map(|v| Version::parse(v))
            .transpose()?
            .unwrap_or(pin.clone());
        Ok(match version {
            v if v.is_prerelease() && v.minor_key() > pin.minor_key() => Role::Prerelease,
            v if v.is_prerelease() => bail!(
                "{KUBERNETES} {v}: a pre-release of {}, which is released already (pkg/release.toml \
                 pins {pin}): refused",
                v.minor()
            ),
            v if v >= &pin => Role::NewPin,
            v if v.minor_key() >= oldest.minor_key() => Role::Supported,
            _ => Role::Outside,
        })
    }

    fn describe(self, spec: &Spec) -> String {
        let pin = spec.kubernetes_version();
        match self {
            Role::NewPin => format!("the new pin (was {pin})"),
            Role::Supported => "a patch of a supported minor".to_string(),
            Role::Prerelease => "the pre-release of the next minor".to_string(),
            Role::Outside => format!(
                "a minor older than the supported ones ({}): buildable with `dist --version`, in no default channel",
                spec.release.supported.join(", ")
            ),
        }
    }
}

/// The versions `module` has on the Go module proxy, oldest first.
fn served_versions(go: &Go, module: &str) -> Result<Vec<Version>> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let mut list = go.command(dir.path())?;
    list.env("GOFLAGS", "-mod=mod")
        .args(["list", "-m", "-versions", module]);
    let out = source::run_go(
        &mut list,
        &format!("asking the proxy for {module}"),
        Path::new("go.sum"),
    )?;
    let mut versions: Vec<Version> = out
        .split_whitespace()
        .skip(1)
        .filter_map(|v| Version::parse(v.trim_start_matches('v')).ok())
        .collect();
    versions.sort();
    Ok(versions)
}

/// The version `wanted` names among those `served`: itself, or the newest
/// of a minor `X.Y` (its newest release, else its newest pre-release).
fn choose(wanted: &str, module: &str, served: &[Version]) -> Result<Version> {
    let wanted = wanted.trim_start_matches('v');
    let newest = |minor: &str| -> Option<Version> {
        let of_minor: Vec<&Version> = served.iter().filter(|v| v.minor() == minor).collect();
        let release = of_minor.iter().rfind(|v| !v.is_prerelease());
        release.or(of_minor.last()).map(|v| (*v).clone())
    };
    if !wanted.contains('-') && wanted.matches('.').count() == 1 {
        return newest(wanted).with_context(|| {
            format!("{module}: the Go module proxy serves no version of {wanted}: refused")
        });
    }
    let version = Version::parse(wanted)?;
    if !served.contains(&version) {
        let known = newest(&version.minor()).map_or("none".to_string(), |v| format!("newest {v}"));
        bail!(
            "{module} v{version}: the Go module proxy serves no such version ({}: {known}): \
             refused",
            version.minor()
        );
    }
    Ok(version)
}

/// Refuses a version older than one the tree carries of its minor.
fn refuse_older(spec: &Spec, version: &Version) -> Result<()> {
    let mut carried: Vec<(String, &str)> = Vec::new();
    for v in spec
        .release
        .supported
        .iter()
        .chain(&spec.release.prerelease)
    {
        carried.push((v.clone(), "pkg/release.toml"));
    }
    for v in spec.image_versions()? {
        carried.push((v, "pkg/images/"));
    }
    let pinned = spec.root.join("pkg/source/kubernetes");
    for entry in std::fs::read_dir(&pinned).with_context(|| pinned.display().to_string())? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(v) = name.strip_prefix('v') {
            carried.push((v.to_string(), "pkg/source/kubernetes/"));
        }
    }
    for (v, place) in carried {
        let Ok(other) = Version::parse(&v) else {
            continue;
        };
        if other.minor_key() == version.minor_key() && &other > version {
            bail!(
                "{KUBERNETES} {version} is older than {other}, which the tree carries already \
                 ({place}): refused"
            );
        }
    }
    Ok(())
}

/// `[NAME.versions."VERSION"]` of pkg/source.toml from the proxy, unless
/// the tree has them.
fn add_facts(go: &Go, tree: &mut Tree, name: &str, version: &Version) -> Result<()> {
    let version = version.to_string();
    let recipes = tree.recipes()?;
    let recipe = recipes.get(name)?;
    if recipe.versions.contains_key(&version) {
        return Ok(());
    }
    let upstream = source::upstream(go, &recipe.module, &version)?;
    tree.edit_toml("pkg/source.toml", |doc| {
        let mut facts = toml_edit::Table::new();
        facts["date"] = toml_edit::value(upstream.time.clone());
        facts["commit"] = toml_edit::value(upstream.commit.clone());
        let versions = doc[name]["versions"]
            .as_table_mut()
            .with_context(|| format!("[{name}] has no versions"))?;
        // Displayed right after the recipe's last version, not at the end.
        let last = versions
            .iter()
            .filter_map(|(_, item)| item.as_table()?.position())
            .max();
        facts.set_position(last);
        versions.insert(&version, toml_edit::Item::Table(facts));
        Ok(())
    })
}

/// go.mod and go.sum of `name` at `version` into the tree's copy, with the
/// main packages `cargo xtask source --lock` keeps for the release
/// `kubernetes` and its image list `images`.
fn lock_source(
    go: &Go,
    tree: &Tree,
    (kubernetes, images): (&Version, Option<&Images>),
    name: &str,
    version: &Version,
) -> Result<()> {
    let version = version.to_string();
    let spec = tree.spec_at(&kubernetes.to_string(), images)?;
    let recipes = tree.recipes()?;
    let packages = image_builds::to_lock(&spec, &recipes)?
        .remove(&(name.to_string(), version.clone()))
        .with_context(|| format!("{name} {version}: nothing of it to build"))?;
    source::lock(
        &tree.root,
        go,
        name,
        recipes.get(name)?,
        &version,
        &packages,
    )
}

/// What `kubeadm config images list` prints for `version`, as an image list.
fn kubeadm_images(kubeadm: &Path, version: &Version) -> Result<Images> {
    let home = tempfile::tempdir().context("creating a temporary directory")?;
    let out = Command::new(kubeadm)
        .args(["config", "images", "list", "--kubernetes-version"])
        .arg(format!("v{version}"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", kubeadm.display()))?;
    if !out.status.success() {
        bail!(
            "kubeadm {version} config images list: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let images = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|reference| {
            let mut image = Image {
                reference: reference.to_string(),
                worker: false,
                index: None,
                record: None,
                unrecorded: Some(UNRECORDED_INDEX.to_string()),
            };
            // A worker runs kube-proxy, every pod's sandbox and, since
            // kubeadm's CoreDNS Deployment selects no node role, CoreDNS.
            image.worker = matches!(image.short_name(), "kube-proxy" | "pause" | "coredns");
            image
        })
        .collect::<Vec<_>>();
    if images.is_empty() {
        bail!("kubeadm {version} config images list printed no image");
    }
    Ok(Images {
        kubernetes: version.to_string(),
        images,
    })
}

/// The index digests and records the tree has for the same references
/// (`known`, where it lists the same version) kept.
fn keep_records(images: &mut Images, known: &Images) {
    if known.kubernetes != images.kubernetes {
        return;
    }
    for image in &mut images.images {
        if let Some(old) = known.images.iter().find(|o| o.reference == image.reference) {
            image.index = old.index.clone();
            image.record = old.record.clone();
            image.unrecorded = old.unrecorded.clone();
        }
    }
}

/// The modules of every image built from a recipe other than Kubernetes'
/// (etcd, CoreDNS) at the tag's version, where the tree has none yet.
fn lock_image_modules(
    go: &Go,
    tree: &mut Tree,
    spec: &Spec,
    version: &Version,
    images: &Images,
) -> Result<()> {
    let wanted = image_builds::to_lock(
        &tree.spec_at(&version.to_string(), Some(images))?,
        &tree.recipes()?,
    )?;
    for (name, at) in wanted.keys() {
        if spec.release.sources.contains_key(name)
            || source::pins_dir(&spec.root, name, at)
                .join("go.sum")
                .is_file()
        {
            continue;
        }
        let at = Version::parse(at)?;
        add_facts(go, tree, name, &at)?;
        lock_source(go, tree, (version, Some(images)), name, &at)?;
    }
    Ok(())
}

/// cri-tools' newest release of the new pin's minor, where upstream has
/// published one newer than the tree's (its minor follows Kubernetes').
fn follow_cri_tools(
    go: &Go,
    tree: &mut Tree,
    spec: &Spec,
    version: &Version,
) -> Result<Option<String>> {
    let name = "cri-tools";
    let Some(current) = spec.release.sources.get(name) else {
        return Ok(None);
    };
    let module = tree.recipes()?.get(name)?.module.clone();
    let current = Version::parse(&current.version)?;
    let newest = served_versions(go, &module)?
        .into_iter()
        .rfind(|v| v.minor_key() == version.minor_key() && !v.is_prerelease());
    match newest {
        Some(v) if v > current => {
            add_facts(go, tree, name, &v)?;
            let recipes = tree.recipes()?;
            let recipe = recipes.get(name)?;
            source::lock(
                &tree.root,
                go,
                name,
                recipe,
                &v.to_string(),
                &recipe.packages,
            )?;
            Ok(Some(v.to_string()))
        }
        _ => {
            eprintln!(
                "bump: cri-tools: the proxy has no release of {} newer than {current}: kept",
                version.minor()
            );
            Ok(None)
        }
    }
}

/// The image lists: the new pin's in pkg/images.toml (the old pin's moved
/// to pkg/images/), any other version's in pkg/images/vX.toml.
fn write_images(
    tree: &mut Tree,
    spec: &Spec,
    version: &Version,
    images: &Images,
    role: Role,
) -> Result<()> {
    let pin = spec.kubernetes_version();
    if role == Role::NewPin && version.to_string() != pin {
        tree.write(
            &format!("pkg/images/v{pin}.toml"),
            other_images_text(&spec.images)?,
        )?;
    }
    match role {
        Role::NewPin => tree.write("pkg/images.toml", pinned_images_text(images)?),
        _ => tree.write(
            &format!("pkg/images/v{version}.toml"),
            other_images_text(images)?,
        ),
    }
}

/// pkg/images.toml's text for `images`.
fn pinned_images_text(images: &Images) -> Result<Vec<u8>> {
    let v = &images.kubernetes;
    Ok(format!(
        "# The container images kubeadm pulls for the pinned release: what\n\
         # `kubeadm config images list --kubernetes-version v{v}` prints (the\n\
         # control plane's four, CoreDNS, the pause (sandbox) image every pod needs,\n\
         # etcd). `cargo xtask fetch --images` pulls them and `cargo xtask dist`\n\
         # bundles them per architecture for air-gapped nodes (README.md,\n\
         # \"Air-gapped nodes: the images\"). `cargo xtask bump` writes it.\n\
         #\n\
         # `kubernetes`: the release these are for, pkg/release.toml's kubernetes\n\
         # version. Each image: its full reference (the name kubeadm asks the\n\
         # runtime for); whether a worker needs it (a control-plane node needs\n\
         # all); `index`, the digest of the image index the tag names, taken from\n\
         # published records of it (`record`), or `unrecorded` with the reason. A\n\
         # registry that serves another index under the tag is refused.\n\n{}",
        toml::to_string(images).context("writing the image list")?
    )
    .into_bytes())
}

/// pkg/images/vX.toml's text for `images`.
fn other_images_text(images: &Images) -> Result<Vec<u8>> {
    let v = &images.kubernetes;
    Ok(format!(
        "# The container images kubeadm {v} pulls: what `kubeadm config images list\n\
         # --kubernetes-version v{v}` prints, for `cargo xtask dist --version {v}`\n\
         # (pkg/images.toml's format; it holds the pinned release's).\n{}",
        toml::to_string(images).context("writing the image list")?
    )
    .into_bytes())
}

/// pkg/release.toml: the pin, `supported`, `prerelease`, cri-tools.
fn write_release(
    tree: &mut Tree,
    spec: &Spec,
    version: &Version,
    role: Role,
    cri_tools: Option<&str>,
) -> Result<()> {
    let v = version.to_string();
    let mut supported: Vec<String> = spec.release.supported.clone();
    let mut prerelease = spec.release.prerelease.clone();
    match role {
        Role::NewPin | Role::Supported => {
            supported.retain(|s| {
                Version::parse(s).map_or(true, |s| s.minor_key() != version.minor_key())
            });
            supported.push(v.clone());
            supported.sort_by_key(|s| Version::parse(s).ok());
            let len = supported.len();
            supported.drain(..len.saturating_sub(3));
            if prerelease
                .as_deref()
                .and_then(|p| Version::parse(p).ok())
                .is_some_and(|p| p.minor_key() <= version.minor_key())
            {
                prerelease = None;
            }
        }
        Role::Prerelease => prerelease = Some(v.clone()),
        Role::Outside => {}
    }
    tree.edit_toml("pkg/release.toml", |doc| {
        if role == Role::NewPin {
            doc["sources"][KUBERNETES]["version"] = toml_edit::value(v.clone());
        }
        if let Some(c) = cri_tools {
            doc["sources"]["cri-tools"]["version"] = toml_edit::value(c);
        }
        doc["supported"] = toml_edit::value(supported.iter().collect::<toml_edit::Array>());
        match &prerelease {
            Some(p) => doc["prerelease"] = toml_edit::value(p.as_str()),
            None => {
                doc.remove("prerelease");
            }
        }
        Ok(())
    })
}

/// pkg/upstream.lock: the new version's download paths (and cri-tools')
/// said to be unpinned yet, and its images' record.
fn account_in_lock(tree: &mut Tree, version: &Version, cri_tools: Option<&str>) -> Result<()> {
    let spec = tree.spec_at(&version.to_string(), None)?;
    let mut lock = Lock::load(&tree.root.join("pkg/upstream.lock"))?;
    crate::fetch::each_file(&spec, |key| {
        let is_new = key.source == KUBERNETES
            || (key.source == "cri-tools" && Some(key.version) == cri_tools);
        if is_new {
            lock.insert_unrecorded(key, UNDOWNLOADED);
        }
    });
    lock.insert_record(&format!("images {version}"), UNRECORDED_MANIFESTS);
    let text = lock.text()?;
    tree.write("pkg/upstream.lock", text.into_bytes())
}

/// A copy of the tree's `pkg/` beside it, with every other top-level entry
/// linked, which the command writes and checks before anything of the tree
/// changes.
struct Tree {
    _dir: tempfile::TempDir,
    /// The copy's root (`pkg/` copied, the rest linked).
    root: PathBuf,
}

impl Tree {
    fn copy(root: &Path) -> Result<Tree> {
        let target = root.join("target");
        std::fs::create_dir_all(&target).with_context(|| target.display().to_string())?;
        // A killed run's copy, never read again.
        for entry in std::fs::read_dir(&target)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(".bump-") {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = tempfile::Builder::new()
            .prefix(".bump-")
            .tempdir_in(&target)
            .context("creating the tree's copy")?;
        let copy = dir.path().join("tree");
        copy_tree(root, &copy)?;
        Ok(Tree {
            _dir: dir,
            root: copy,
        })
    }

    fn recipes(&self) -> Result<Recipes> {
        Recipes::load(&self.root)
    }

    /// The copy's spec with `version` as Kubernetes' and `images`' list.
    fn spec_at(&self, version: &str, images: Option<&Images>) -> Result<Spec> {
        let mut spec = Spec::load(&self.root)?.with_kubernetes_version(version)?;
        if let Some(images) = images {
            spec.images = images.clone();
        }
        Ok(spec)
    }

    fn write(&mut self, rel: &str, bytes: Vec<u8>) -> Result<()> {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(&self.root))?;
        std::fs::write(&path, bytes).with_context(|| format!("writing {rel}"))
    }

    /// Edits a TOML file of the copy in place, keeping its comments.
    fn edit_toml(
        &mut self,
        rel: &str,
        edit: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<()>,
    ) -> Result<()> {
        let path = self.root.join(rel);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {rel}"))?;
        let mut doc: toml_edit::DocumentMut = text.parse().with_context(|| rel.to_string())?;
        edit(&mut doc).with_context(|| rel.to_string())?;
        std::fs::write(&path, doc.to_string()).with_context(|| format!("writing {rel}"))
    }

    /// The copy read back as every command reads the tree.
    fn check(&self) -> Result<()> {
        let spec = Spec::load(&self.root).context("the new tree")?;
        let recipes = self.recipes()?;
        Lock::load(&self.root.join("pkg/upstream.lock"))?;
        for version in spec
            .release
            .supported
            .iter()
            .chain(&spec.release.prerelease)
        {
            let pins = source::pins_dir(&self.root, KUBERNETES, version);
            if !pins.join("go.sum").is_file()
                || !recipes.get(KUBERNETES)?.versions.contains_key(version)
            {
                bail!("the new tree: {KUBERNETES} {version} is supported but not pinned in pkg/source/");
            }
        }
        Ok(())
    }

    /// Moves every file of the copy's `pkg/` that differs into `root`'s:
    /// new files first, changed ones next, the pin's files last. Returns
    /// what changed, a line each.
    fn install(&self, root: &Path) -> Result<Vec<String>> {
        let mut files = Vec::new();
        list_files(&self.root.join("pkg"), Path::new("pkg"), &mut files)?;
        let mut changes = Vec::new();
        for rel in files {
            let new = std::fs::read(self.root.join(&rel))?;
            let old = std::fs::read(root.join(&rel)).ok();
            if old.as_ref() == Some(&new) {
                continue;
            }
            let last = ["pkg/images.toml", "pkg/release.toml"]
                .iter()
                .position(|p| Path::new(p) == rel);
            changes.push((last, old.is_some(), rel, new));
        }
        changes.sort_by_key(|(last, existed, rel, _)| (*last, *existed, rel.clone()));
        let mut lines = Vec::new();
        for (_, existed, rel, bytes) in changes {
            crate::util::write_bytes_atomic(&root.join(&rel), &bytes, 0o644)?;
            lines.push(format!(
                "{} {}",
                if existed { "changed" } else { "added  " },
                rel.display()
            ));
        }
        Ok(lines)
    }
}

/// A tree at `dest` that commands read as they read `root`: `pkg/` copied,
/// every other entry of `root` linked (`target/` too: cargo's and dist's
/// caches).
pub fn copy_tree(root: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).with_context(|| dest.display().to_string())?;
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        if name != "pkg" {
            std::os::unix::fs::symlink(entry.path(), dest.join(&name))?;
        }
    }
    copy_dir(&root.join("pkg"), &dest.join("pkg"))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| from.display().to_string())? {
        let entry = entry?;
        let (src, dest) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_dir(&src, &dest)?;
        } else {
            std::fs::copy(&src, &dest).with_context(|| src.display().to_string())?;
        }
    }
    Ok(())
}

fn list_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            list_files(&entry.path(), &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// How long each step took, printed at the end.
#[derive(Default)]
pub struct Steps(pub Vec<(&'static str, f64)>);

impl Steps {
    fn time<T>(&mut self, name: &'static str, step: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("bump: {name}");
        let started = Instant::now();
        let result = step();
        self.0.push((name, started.elapsed().as_secs_f64()));
        result
    }

    pub fn print(&self) {
        let total: f64 = self.0.iter().map(|(_, s)| s).sum();
        println!("steps ({total:.0} s in all):");
        for (name, seconds) in &self.0 {
            println!("  {name:<40} {seconds:>6.1} s");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose_k8s(wanted: &str, served: &[Version]) -> Result<Version> {
        choose(wanted, "k8s.io/kubernetes", served)
    }

    fn served() -> Vec<Version> {
        [
            "1.36.1",
            "1.36.3",
            "1.37.2",
            "1.38.0-alpha.1",
            "1.38.0-beta.0",
        ]
        .iter()
        .map(|v| Version::parse(v).unwrap())
        .collect()
    }

    #[test]
    fn each_version_finds_its_place_and_an_older_patch_is_refused() {
        let spec = Spec::load(&crate::util::repo_root()).unwrap();
        let pin = Version::parse(spec.kubernetes_version()).unwrap();
        let (major, minor) = pin.minor_key();
        let v = |text: String| Version::parse(&text).unwrap();
        let next = v(format!("{major}.{}.0", minor + 1));
        let role = |version: &Version| Role::of(&spec, version).map_err(|e| e.to_string());
        assert_eq!(role(&next), Ok(Role::NewPin));
        assert_eq!(role(&v(format!("{next}-rc.0"))), Ok(Role::Prerelease));
        assert!(role(&v(format!("{major}.{minor}.99-rc.0")))
            .unwrap_err()
            .contains("released already"));
        let oldest = v(spec.release.supported[0].clone());
        let (_, oldest_minor) = oldest.minor_key();
        assert_eq!(
            role(&v(format!("{major}.{oldest_minor}.99"))),
            Ok(Role::Supported)
        );
        assert_eq!(
            role(&v(format!("{major}.{}.0", oldest_minor - 1))),
            Ok(Role::Outside)
        );
        let older = v(format!("{major}.{oldest_minor}.0"));
        let refused = refuse_older(&spec, &older).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("is older than {oldest}")),
            "{refused}"
        );
        assert!(refuse_older(&spec, &v(format!("{major}.{oldest_minor}.99"))).is_ok());
    }

    #[test]
    fn a_minor_names_its_newest_release_else_its_newest_pre_release() {
        assert_eq!(choose_k8s("1.36", &served()).unwrap().to_string(), "1.36.3");
        assert_eq!(
            choose_k8s("1.38", &served()).unwrap().to_string(),
            "1.38.0-beta.0"
        );
        assert_eq!(
            choose_k8s("v1.37.2", &served()).unwrap().to_string(),
            "1.37.2"
        );
    }

    #[test]
    fn a_version_the_proxy_does_not_serve_is_refused_naming_what_it_does() {
        let e = choose_k8s("1.37.9", &served()).unwrap_err().to_string();
        assert!(
            e.contains("serves no such version (1.37: newest 1.37.2)"),
            "{e}"
        );
        let e = choose_k8s("1.39", &served()).unwrap_err().to_string();
        assert!(e.contains("serves no version of 1.39"), "{e}");
        assert!(choose_k8s("1.x", &served()).is_err());
    }
}
