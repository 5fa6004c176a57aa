//! Upstream inputs: download, verify, cache (or read from `--from DIR`).
//!
//! Every file listed in `pkg/release.toml` is checked against the checksum
//! published beside it before anything uses it. Network downloads are also
//! pinned in `pkg/upstream.lock` (see `lock.rs`); `--from` directories are
//! checked against their own `.sha256` files only.
mod archive;
pub mod debian;
mod http;
mod lock;
pub mod pull;
#[cfg(test)]
mod tests;

pub use archive::is_archive;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::digest::{self, Algo, Published};
use crate::inputs::from_dir;
use crate::spec::{Arch, Source, Spec};
use http::Client;
pub use lock::{Key, Lock};

/// Download and verify the upstream files of pkg/release.toml.
///
/// Each file is checked against the checksum published beside it
/// (FILE.sha256, or FILE.sha512 where there is no .sha256) and against its
/// pin in pkg/upstream.lock; newly verified digests are added to the lock.
/// Verified files are kept in the cache and re-verified on every use.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask fetch                          # this host's architecture, official URLs
  cargo xtask fetch --arch amd64,arm64
  cargo xtask fetch --mirror https://mirror.example/kubedist
  cargo xtask fetch --from /srv/kubedist-inputs --arch arm64
  cargo xtask fetch --images --arch amd64,arm64  # the images kubeadm pulls
  cargo xtask fetch --images --image-mirror https://registry.example:5000")]
pub struct Args {
    /// Architectures to fetch, comma-separated: amd64, arm64, ppc64le,
    /// riscv64, s390x (deb and rpm spellings such as x86_64 are accepted too).
    /// Default: this host's architecture.
    #[arg(long, value_name = "ARCH[,ARCH...]", value_delimiter = ',')]
    pub arch: Vec<Arch>,
    /// Pull the images of pkg/images.toml instead of the upstream files:
    /// each architecture's, from registry.k8s.io or --image-mirror, into
    /// the cache's OCI layout (CACHE/images/), which dist bundles.
    #[arg(long)]
    pub images: bool,
    #[command(flatten)]
    pub origin: OriginArgs,
}

/// Where upstream files come from, as command-line flags (shared with
/// `dist`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OriginArgs {
    /// Use the files in DIR instead of downloading: DIR/<source>/<path> for
    /// every path of pkg/release.toml, each with a DIR/<source>/<path>.sha256
    /// beside it (`hex` or `hex  name`). A DIR/STANDINS file lists
    /// `<source>/<member>` names that are test stand-ins, not the real
    /// program (followed by architectures when only theirs are).
    /// `cargo xtask fixtures DIR` writes such a directory.
    #[arg(long, value_name = "DIR", conflicts_with = "mirror")]
    pub from: Option<PathBuf>,
    /// Download from a mirror instead of each source's official URL: files
    /// at URL/<source>/<path>, with their .sha256 (or .sha512) beside them.
    /// Digests are still checked against pkg/upstream.lock.
    #[arg(long, value_name = "URL")]
    pub mirror: Option<String>,
    /// Where downloaded files and extracted archives are kept (the images
    /// in DIR/images/, an OCI layout). Default: target/upstream in the
    /// repository.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Pull the images of pkg/images.toml from this registry instead of
    /// their own (registry.k8s.io): https://HOST[:PORT], or http:// for
    /// a plain-HTTP one, serving the same repository paths. Every digest
    /// is still checked against the pins.
    #[arg(long, value_name = "URL")]
    pub image_mirror: Option<String>,
    /// The CA certificate (PEM) that the image mirror's TLS certificate is
    /// checked against.
    #[arg(long, value_name = "FILE", requires = "image_mirror")]
    pub image_ca: Option<PathBuf>,
    /// The images and their pins from FILE, in pkg/images.toml's format,
    /// instead of pkg/images.toml: for a registry that serves its own
    /// builds of the images under their upstream names.
    #[arg(long, value_name = "FILE")]
    pub image_pins: Option<PathBuf>,
}

impl OriginArgs {
    /// Where the upstream files come from.
    pub fn origin(&self) -> Result<Origin> {
        Ok(match (&self.from, &self.mirror) {
            (Some(dir), _) => Origin::Dir(
                std::path::absolute(dir).with_context(|| format!("--from {}", dir.display()))?,
            ),
            (None, Some(url)) => Origin::Mirror(url.trim_end_matches('/').to_string()),
            (None, None) => Origin::Official,
        })
    }

    /// The registry the images are pulled from.
    pub fn registry(&self) -> pull::Registry {
        pull::Registry {
            mirror: self
                .image_mirror
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_string()),
            ca: self.image_ca.clone(),
        }
    }

    /// pkg/images.toml, or the `--image-pins` file instead.
    pub fn images(&self, spec: &Spec) -> Result<crate::spec::Images> {
        let path = match &self.image_pins {
            Some(path) => path.clone(),
            None => spec.root.join("pkg/images.toml"),
        };
        crate::spec::Images::load(&path, &spec.release)
    }

    pub fn cache(&self, spec: &Spec) -> PathBuf {
        self.cache
            .clone()
            .unwrap_or_else(|| default_cache(&spec.root))
    }
}

/// `target/upstream` of the checkout.
pub fn default_cache(root: &Path) -> PathBuf {
    root.join("target/upstream")
}

pub fn run(spec: &Spec, args: &Args) -> Result<()> {
    let arches = Arch::list_or_host(&args.arch)?;
    let origin = args.origin.origin()?;
    let cache = args.origin.cache(spec);
    if args.images {
        if matches!(origin, Origin::Dir(_)) {
            bail!("--images: the images are pulled from a registry; with --from DIR they are DIR/images/");
        }
        let images = args.origin.images(spec)?;
        let layout = ensure_images(spec, &args.origin, &images, &arches, &cache)?;
        println!(
            "images: {} for {} architecture(s) in {}",
            images.images.len(),
            arches.len(),
            layout.display()
        );
        return Ok(());
    }
    for &arch in &arches {
        let upstream = ensure(spec, arch, &origin, &cache)?;
        for f in upstream.files() {
            println!(
                "{}  {}/{}  ({})",
                f.sha256,
                f.source,
                f.path,
                f.how.describe()
            );
        }
        for s in upstream.standins() {
            println!("stand-in (not the real program): {s} ({arch})");
        }
    }
    Ok(())
}

/// Where upstream files come from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Each source's official `base` URL.
    Official,
    /// A mirror: files at `<url>/<source>/<path>`.
    Mirror(String),
    /// An offline directory: files at `<dir>/<source>/<path>`.
    Dir(PathBuf),
}

/// One verified upstream file.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The `[sources.*]` name.
    pub source: String,
    /// The path from release.toml, expanded.
    pub path: String,
    /// Where the verified content is.
    pub file: PathBuf,
    pub sha256: String,
    pub how: How,
    /// For archives: the regular files inside, `(name, extracted path)`,
    /// sorted by name.
    pub members: Option<Vec<(String, PathBuf)>>,
}

impl Verified {
    fn base_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// How a file came to be verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    Downloaded,
    Cached,
    FromDir,
}

impl How {
    fn describe(&self) -> &'static str {
        match self {
            How::Downloaded => "downloaded",
            How::Cached => "cached",
            How::FromDir => "from --from directory",
        }
    }
}

/// The verified upstream files for one architecture.
pub struct Upstream {
    arch: Arch,
    files: Vec<Verified>,
    standins: Vec<String>,
    /// The sources a `--from` directory says were built from source, each
    /// with what built it (its BUILT-FROM-SOURCE file).
    from_source: std::collections::BTreeMap<String, String>,
}

/// Makes sure every upstream file of `spec` for `arch` is present and
/// verified (downloading into `cache` what is missing), and returns them.
pub fn ensure(spec: &Spec, arch: Arch, origin: &Origin, cache: &Path) -> Result<Upstream> {
    let (files, standins, from_source) = match origin {
        // A --from directory holds the operator's own vetted inputs (or our
        // fixtures, whose stand-ins differ from every real release): it is
        // checked against the checksum files it carries, never against the
        // lock, which pins what the official servers published.
        Origin::Dir(dir) => {
            let mut files = Vec::new();
            for (name, source) in &spec.release.sources {
                for path in source.paths(arch) {
                    files.push(verify_in_dir(dir, name, &path)?);
                }
            }
            (
                files,
                read_standins(dir, spec, arch)?,
                read_from_source(dir)?,
            )
        }
        Origin::Official | Origin::Mirror(_) => {
            if let Some((name, _)) = spec
                .release
                .sources
                .iter()
                .find(|(_, s)| !s.published(arch))
            {
                bail!(
                    "upstream publishes no {arch} build of {name} (pkg/release.toml, \
                     [sources.{name}] unpublished): build it from source with `cargo xtask dist --source`"
                );
            }
            let mut lock = Lock::load(&lock_path(spec))?;
            let client = Client::new();
            let mut files = Vec::new();
            let mut result = Ok(());
            'all: for (name, source) in &spec.release.sources {
                for path in source.paths(arch) {
                    let base = match origin {
                        Origin::Mirror(url) => format!("{}/{name}", url.trim_end_matches('/')),
                        _ => source.base.trim_end_matches('/').to_string(),
                    };
                    let file = Remote {
                        client: &client,
                        cache,
                        name,
                        source,
                        arch,
                        path: &path,
                        url: format!("{base}/{path}"),
                    };
                    match file.fetch(&mut lock) {
                        Ok(v) => files.push(v),
                        Err(e) => {
                            result = Err(e);
                            break 'all;
                        }
                    }
                }
            }
            // Pins of the files verified before a failure are kept.
            lock.save()?;
            result?;
            (files, Vec::new(), Default::default())
        }
    };
    let mut files = files;
    for f in &mut files {
        if archive::is_archive(f.base_name()) {
            f.members = Some(archive::extract(&f.file, &f.sha256, cache)?);
        }
    }
    Ok(Upstream {
        arch,
        files,
        standins,
        from_source,
    })
}

/// Calls `f` with the lock's key of every file of `spec`'s release, for
/// every architecture.
pub fn each_file(spec: &Spec, mut f: impl FnMut(Key)) {
    for (name, source) in &spec.release.sources {
        for arch in Arch::ALL.into_iter().filter(|&a| source.published(a)) {
            for path in source.paths(arch) {
                f(Key {
                    source: name,
                    version: &source.version,
                    arch,
                    path: &path,
                });
            }
        }
    }
}

/// Every file of `spec`'s release, for every architecture, that
/// `pkg/upstream.lock` neither pins nor says why it cannot yet
/// (`<source> <version> <arch> <path>`). For the tidy guard.
#[cfg(test)]
pub fn unaccounted(spec: &Spec) -> Result<Vec<String>> {
    let lock = Lock::load(&lock_path(spec))?;
    let mut out = Vec::new();
    each_file(spec, |key| {
        if lock.get(key).is_none() && lock.unrecorded(key).is_none() {
            out.push(format!(
                "{} {} {} {}",
                key.source, key.version, key.arch, key.path
            ));
        }
    });
    // Each image's manifest per architecture, or a record that says why
    // the lock has none yet.
    let remark = format!("images {}", spec.images.kubernetes);
    for image in &spec.images.images {
        for arch in Arch::ALL {
            if lock.manifest(&image.reference, arch).is_none() && lock.record(&remark).is_none() {
                out.push(format!("image {} {arch}: its manifest", image.reference));
            }
        }
    }
    Ok(out)
}

/// The layout in `cache` holding `images` for `arches` (`pull::ensure`).
/// With the release's pins (no `--image-pins`), each architecture's manifest
/// is checked against `[manifests]` of pkg/upstream.lock and recorded there.
pub fn ensure_images(
    spec: &Spec,
    args: &OriginArgs,
    images: &crate::spec::Images,
    arches: &[Arch],
    cache: &Path,
) -> Result<PathBuf> {
    let mut lock = match args.image_pins {
        None => Some(Lock::load(&lock_path(spec))?),
        Some(_) => None,
    };
    pull::ensure(
        &images.images,
        arches,
        &args.registry(),
        cache,
        lock.as_mut(),
    )
}

/// `pkg/upstream.lock` of the checkout.
pub fn lock_path(spec: &Spec) -> PathBuf {
    spec.root.join("pkg/upstream.lock")
}

impl Upstream {
    /// The content for `upstream = "<source>/<member>"`: `(file name, path of
    /// the verified content)`. A member is a file's base name or a regular
    /// file inside one of the source's archives; `*` is every member of the
    /// source's archives, sorted by name. `{arch}` in `member` is the
    /// architecture's Go name (runc's `runc.{arch}`).
    pub fn resolve(&self, source: &str, member: &str) -> Result<Vec<(String, PathBuf)>> {
        let member = &member.replace("{arch}", self.arch.go_name());
        let files: Vec<&Verified> = self.files.iter().filter(|f| f.source == source).collect();
        if files.is_empty() {
            let known: Vec<&str> = self.files.iter().map(|f| f.source.as_str()).collect();
            bail!(
                "upstream {source:?}: no such source (known: {})",
                dedup_join(known)
            );
        }
        let archived = || files.iter().filter_map(|f| f.members.as_ref()).flatten();
        if member == "*" {
            let mut all: Vec<(String, PathBuf)> = archived().cloned().collect();
            if all.is_empty() {
                bail!(
                    "{source}/*: {source} has no archive members ({})",
                    self.arch
                );
            }
            all.sort();
            if let Some(w) = all.windows(2).find(|w| w[0].0 == w[1].0) {
                bail!("{source}/*: {:?} is in more than one archive", w[0].0);
            }
            return Ok(all);
        }
        if let Some(f) = files.iter().find(|f| f.base_name() == member) {
            return Ok(vec![(member.to_string(), f.file.clone())]);
        }
        if let Some((name, path)) = archived().find(|(name, _)| name == member) {
            return Ok(vec![(name.clone(), path.clone())]);
        }
        let mut known: Vec<&str> = files.iter().map(|f| f.base_name()).collect();
        known.extend(archived().map(|(n, _)| n.as_str()));
        bail!(
            "{source}/{member}: no such file or archive member for {} (there are: {})",
            self.arch,
            dedup_join(known)
        )
    }

    /// `<source>/<member>` names that are recorder stand-ins, not the real
    /// program (listed in the `--from` directory's STANDINS file).
    pub fn standins(&self) -> &[String] {
        &self.standins
    }

    /// What built `source` from its Go module (`source version toolchain`),
    /// when it was.
    pub fn built_from_source(&self, source: &str) -> Option<&str> {
        self.from_source.get(source).map(String::as_str)
    }

    /// Every verified file, in release.toml order per source.
    pub fn files(&self) -> &[Verified] {
        &self.files
    }
}

fn dedup_join(mut names: Vec<&str>) -> String {
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// `<file>.<ext>`, the checksum file beside `file`.
fn beside(file: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(file.as_os_str());
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

fn verify_in_dir(dir: &Path, source: &str, path: &str) -> Result<Verified> {
    let file = dir.join(source).join(path);
    let name = path.rsplit('/').next().unwrap_or(path);
    if !file.is_file() {
        bail!("{}: missing from the --from directory", file.display());
    }
    let sum_file = beside(&file, "sha256");
    let text = match std::fs::read_to_string(&sum_file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{}: missing (every file of a --from directory needs a .sha256 beside it)",
            sum_file.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", sum_file.display())),
    };
    let published = Published::parse(&text, Algo::Sha256, name)
        .with_context(|| sum_file.display().to_string())?;
    let digests = digest::file_digests(&file, Algo::Sha256)?;
    if !published.matches(&digests) {
        bail!(
            "{}: sha256 is {}, but {} says {}",
            file.display(),
            digests.sha256,
            sum_file.display(),
            published.hex
        );
    }
    Ok(Verified {
        source: source.to_string(),
        path: path.to_string(),
        file,
        sha256: digests.sha256,
        how: How::FromDir,
        members: None,
    })
}

/// The STANDINS file of a `--from` directory: one `<source>/<member>` a line,
/// `#` comments. No file means every input is the real program.
fn read_standins(dir: &Path, spec: &Spec, arch: Arch) -> Result<Vec<String>> {
    let path = dir.join(from_dir::STANDINS);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        // `<source>/<member> [ARCH...]`: without architectures, every one.
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        match name.split_once('/') {
            Some((source, member))
                if spec.release.sources.contains_key(source) && !member.is_empty() => {}
            _ => bail!(
                "{}: {line:?} is not <source>/<member> with a source of pkg/release.toml",
                at()
            ),
        }
        let arches = words
            .map(str::parse)
            .collect::<Result<Vec<Arch>>>()
            .with_context(at)?;
        if arches.is_empty() || arches.contains(&arch) {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// The BUILT-FROM-SOURCE file of a `--from` directory: source → the
/// line that names it.
fn read_from_source(dir: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    let path = dir.join(from_dir::BUILT_FROM_SOURCE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| Some((l.split_whitespace().next()?.to_string(), l.to_string())))
        .collect())
}

/// One file to get over the network.
struct Remote<'a> {
    client: &'a Client,
    cache: &'a Path,
    name: &'a str,
    source: &'a Source,
    arch: Arch,
    path: &'a str,
    url: String,
}

impl Remote<'_> {
    fn key(&self) -> Key<'_> {
        Key {
            source: self.name,
            version: &self.source.version,
            arch: self.arch,
            path: self.path,
        }
    }

    fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    fn verified(&self, file: PathBuf, sha256: String, how: How) -> Verified {
        Verified {
            source: self.name.to_string(),
            path: self.path.to_string(),
            file,
            sha256,
            how,
            members: None,
        }
    }

    /// The cached file, re-verified, or a fresh verified download.
    fn fetch(&self, lock: &mut Lock) -> Result<Verified> {
        let dest = self.cache.join(self.name).join(self.path);
        if let Some(sha256) = self.cached(&dest, lock)? {
            lock.insert(self.key(), &sha256);
            return Ok(self.verified(dest, sha256, How::Cached));
        }

        let pinned = lock.get(self.key()).map(str::to_owned);
        if pinned.is_none() {
            let why = lock
                .unrecorded(self.key())
                .unwrap_or("a release the lock does not cover");
            eprintln!(
                "note: {} has no pin in {} ({why}); the verified download is pinned",
                self.path,
                lock.path().display()
            );
        }
        let (published, text) = self.published_checksum()?;
        eprintln!("fetch: {}", self.url);
        let dir = dest.parent().context("cache path has no parent")?;
        let (temp, digests) =
            self.client
                .download(&self.url, dir, self.file_name(), published.algo)?;
        if !published.matches(&digests) {
            bail!(
                "{}: checksum mismatch: {} is {}, but {}.{} says {}",
                self.url,
                published.algo.ext(),
                published.actual(&digests),
                self.url,
                published.algo.ext(),
                published.hex
            );
        }
        if let Some(pin) = &pinned {
            if *pin != digests.sha256 {
                bail!(
                    "{}: sha256 {} differs from {} in {} (pinned {}); refusing a changed upstream file",
                    self.url,
                    digests.sha256,
                    self.path,
                    lock.path().display(),
                    pin
                );
            }
        }
        // The checksum first: a file in the cache always has one beside it.
        crate::util::write_bytes_atomic(
            &beside(&dest, published.algo.ext()),
            text.as_bytes(),
            0o644,
        )?;
        temp.persist(&dest)?;
        lock.insert(self.key(), &digests.sha256);
        Ok(self.verified(dest, digests.sha256, How::Downloaded))
    }

    /// Re-verifies a cached file against the checksum stored beside it and
    /// the lock; returns its sha256, or `None` (and clears it) if it must be
    /// downloaded again.
    fn cached(&self, dest: &Path, lock: &Lock) -> Result<Option<String>> {
        if !dest.is_file() {
            return Ok(None);
        }
        for algo in [Algo::Sha256, Algo::Sha512] {
            let sum_file = beside(dest, algo.ext());
            let Ok(text) = std::fs::read_to_string(&sum_file) else {
                continue;
            };
            let Ok(published) = Published::parse(&text, algo, self.file_name()) else {
                break;
            };
            let digests = digest::file_digests(dest, algo)?;
            if !published.matches(&digests) {
                eprintln!(
                    "fetch: cached {} does not match its checksum; downloading it again",
                    dest.display()
                );
                break;
            }
            if let Some(pin) = lock.get(self.key()) {
                if pin != digests.sha256 {
                    remove_cached(dest);
                    bail!(
                        "{}: sha256 {} differs from {} in {} (pinned {}); removed it from the cache",
                        dest.display(),
                        digests.sha256,
                        self.path,
                        lock.path().display(),
                        pin
                    );
                }
            }
            return Ok(Some(digests.sha256));
        }
        remove_cached(dest);
        Ok(None)
    }

    /// The checksum upstream publishes for the file: its line of the
    /// source's `sums` list, else the file beside it (`.sha256`,
    /// `.sha256sum` as containerd names it, or `.sha512` when there is no
    /// sha256). Returns it parsed and as a line to cache.
    fn published_checksum(&self) -> Result<(Published, String)> {
        let with_line = |published: Published| {
            let line = format!("{}  {}\n", published.hex, self.file_name());
            (published, line)
        };
        if let Some(list) = &self.source.sums {
            let url = format!("{}/{}", self.source.base, self.source.fill(list, self.arch));
            let text = self.client.get_text(&url)?.with_context(|| {
                format!(
                    "{url}: not found (the checksum list of [sources.{}] sums)",
                    self.name
                )
            })?;
            let published = Published::from_list(&text, Algo::Sha256, self.file_name())
                .with_context(|| url.clone())?;
            return Ok(with_line(published));
        }
        for (ext, algo) in [
            ("sha256", Algo::Sha256),
            ("sha256sum", Algo::Sha256),
            ("sha512", Algo::Sha512),
        ] {
            let url = format!("{}.{ext}", self.url);
            if let Some(text) = self.client.get_text(&url)? {
                let published =
                    Published::parse(&text, algo, self.file_name()).with_context(|| url.clone())?;
                return Ok(with_line(published));
            }
        }
        bail!(
            "{}: no checksum published beside it (neither .sha256, .sha256sum nor .sha512)",
            self.url
        )
    }
}

/// Removes a cached file and its checksum files; a later run downloads it anew.
fn remove_cached(dest: &Path) {
    let _ = std::fs::remove_file(dest);
    for algo in [Algo::Sha256, Algo::Sha512] {
        let _ = std::fs::remove_file(beside(dest, algo.ext()));
    }
}
