//! The upstream programs built from their Go modules (`pkg/source.toml`),
//! an input mode beside download and `--from`: the programs are laid out
//! as a `--from` directory (`DIR/<source>/<path>` for every path of
//! pkg/release.toml, each with its `.sha256`), which `fetch` then reads as
//! it reads any other, so staging and every format take exactly what they
//! take from a download.
//!
//! Every module is verified by the committed `go.sum` of its source and
//! version (`pkg/source/NAME/vVERSION/`), with `-mod=readonly` and the
//! checksum database left on; the module cache is checked (`go mod
//! verify`) before each build. Built programs are cached by what decides
//! their bytes (toolchain, recipe, go.mod, go.sum, architecture) in the
//! home directory, where a clean clone finds them again, as Go's own build
//! and module caches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::spec::{Arch, Spec};

/// Build the upstream programs from their Go modules (pkg/source.toml)
/// into a `--from` directory, or (`--lock`) pin their modules.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Examples:
  cargo xtask source --arch amd64,arm64 --images --out /srv/kubedist-inputs
  cargo xtask dist --from /srv/kubedist-inputs --image-pins /srv/kubedist-inputs/images.toml \
      --arch amd64,arm64
  cargo xtask dist --source --arch amd64,arm64   # the same in one step
  cargo xtask source --lock --version 1.36.3     # go.mod and go.sum of another version

The first build of Kubernetes' programs on a 2-CPU machine takes a long
time (README.md, \"Building from source\"); later ones reuse the cache.")]
pub struct Args {
    /// Architectures to build, comma-separated: amd64, arm64, ppc64le,
    /// riscv64, s390x. Default: this host's architecture.
    #[arg(long, value_name = "ARCH[,ARCH...]", value_delimiter = ',')]
    pub arch: Vec<Arch>,
    /// The Kubernetes version instead of pkg/release.toml's (its go.mod and
    /// go.sum must be in pkg/source/kubernetes/).
    #[arg(long, value_name = "X.Y.Z")]
    pub version: Option<String>,
    /// The `--from` directory to write (replaced whole).
    /// Default: target/source-inputs.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also build the images of pkg/images.toml (pkg/source-images.toml)
    /// into DIR/images/, an OCI layout, with their pins in DIR/images.toml
    /// (for dist's --image-pins).
    #[arg(long, conflicts_with = "lock")]
    pub images: bool,
    /// Write pkg/source/NAME/vVERSION/{go.mod,go.sum} for every source of
    /// the release and of its images (asks the Go module proxy and the
    /// checksum database), instead of building.
    #[arg(long)]
    pub lock: bool,
}

pub fn run(spec: &Spec, args: &Args) -> Result<()> {
    let spec = match &args.version {
        Some(v) => spec.with_kubernetes_version(v)?,
        None => Spec::load(&spec.root)?,
    };
    let go = Go::from_env(&spec.root)?;
    if args.lock {
        let recipes = Recipes::load(&spec.root)?;
        for ((name, version), packages) in image_builds::to_lock(&spec, &recipes)? {
            lock(
                &spec.root,
                &go,
                &name,
                recipes.get(&name)?,
                &version,
                &packages,
            )?;
        }
        return Ok(());
    }
    let arches = Arch::list_or_host(&args.arch)?;
    let out = args.out.clone().unwrap_or_else(|| default_dir(&spec.root));
    let images = match args.images {
        true if spec.images.kubernetes != spec.kubernetes_version() => {
            bail!(
                "--images: {}",
                spec.images_unknown(spec.kubernetes_version())
            )
        }
        true => Some(&spec.images),
        false => None,
    };
    write_inputs(&spec, &go, &arches, Extras { images }, &out)?;
    println!("{}", out.display());
    Ok(())
}

/// `target/source-inputs` of the checkout.
pub fn default_dir(root: &Path) -> PathBuf {
    root.join("target/source-inputs")
}

/// pkg/source.toml: the recipe of each source, and the toolchains of Go
/// versions newer than the host's.
#[derive(Debug, Deserialize)]
pub struct Recipes {
    #[serde(default)]
    toolchains: BTreeMap<String, String>,
    #[serde(flatten)]
    recipes: BTreeMap<String, Recipe>,
}

/// How one source's programs are built.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The Go module holding the programs.
    pub module: String,
    /// The version every local-path replacement of the module's go.mod is
    /// replaced by, `{minor}` and `{patch}` filled in.
    pub staging: Option<String>,
    /// The main packages, relative to `module`; each program is named by
    /// its last path element.
    pub packages: Vec<String>,
    pub tags: Vec<String>,
    pub ldflags: Vec<String>,
    /// Whether the programs link C code (cgo), with the architecture's gcc
    /// (`<triple>-gcc`); all others are built with CGO_ENABLED=0.
    #[serde(default)]
    pub cgo: bool,
    /// With `cgo`: Debian's packages of the architecture whose headers and
    /// static libraries the C code links, unpacked into one directory that
    /// pkg-config takes as the target's root (`c_sysroot`).
    #[serde(default)]
    pub debian: Vec<String>,
    pub versions: BTreeMap<String, Facts>,
}

/// What is known of one tag.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    pub date: String,
    pub commit: String,
}

impl Recipe {
    /// The `-ldflags` of `version`, its placeholders filled in; with
    /// `debian` packages, no Go build ID (`-buildid=`): a cgo package
    /// compiled holds its C flags, the unpacked libraries' absolute path
    /// among them, and Go's build ID (and the GNU one made from it) would
    /// carry that path into the program's bytes. Without it the linker's
    /// GNU build ID hashes the program alone.
    fn ldflags(&self, version: &str) -> Result<Vec<String>> {
        let facts = self.versions.get(version).with_context(|| {
            format!("pkg/source.toml: {} has no facts of {version}", self.module)
        })?;
        let (minor, _) = minor_patch(version)?;
        let major = version.split('.').next().unwrap_or("1");
        let no_build_id = (!self.debian.is_empty()).then(|| "-buildid=".to_string());
        Ok(self
            .ldflags
            .iter()
            .map(|f| {
                f.replace("{version}", version)
                    .replace("{major}", major)
                    .replace("{minor}", minor)
                    .replace("{commit}", &facts.commit)
                    .replace("{date}", &facts.date)
            })
            .chain(no_build_id)
            .collect())
    }

    /// The `go build` of `packages` at `version` for `arch` into `out`,
    /// run in `dir` (which holds the pinned go.mod and go.sum), its C
    /// libraries from `sysroot` (`c_sysroot`).
    #[allow(clippy::too_many_arguments)]
    pub fn go_build(
        &self,
        go: &Go,
        dir: &Path,
        version: &str,
        arch: Arch,
        packages: &[String],
        sysroot: Option<&Path>,
        out: &Path,
    ) -> Result<Command> {
        let mut build = go.command(dir)?;
        // The baseline of each architecture, as upstream builds (a caller's
        // GOAMD64=v3 would make programs that fail on older CPUs).
        build
            .env("GOARCH", arch.go_name())
            .env("GOAMD64", "v1")
            .env("GOARM64", "v8.0")
            .env("GOPPC64", "power8")
            .env("GORISCV64", "rva20u64");
        if self.cgo {
            build
                .env("CGO_ENABLED", "1")
                .env("CC", format!("{}-gcc", arch.gnu_triple()));
        }
        if let Some(sysroot) = sysroot {
            // pkg-config reads the target's .pc files alone and puts the
            // directory ahead of the paths they name. Go's compile cache
            // keys a cgo package by its CGO_* flags but not by what
            // pkg-config answers, and the package keeps the `-L` it was
            // compiled with: the directory is named in CGO_CPPFLAGS too, so
            // that a package compiled against another (since removed)
            // directory is never taken from the cache to link with.
            build
                .env(
                    "CGO_CPPFLAGS",
                    format!("-I{}", sysroot.join("usr/include").display()),
                )
                .env("PKG_CONFIG_SYSROOT_DIR", sysroot)
                .env(
                    "PKG_CONFIG_LIBDIR",
                    sysroot
                        .join("usr/lib")
                        .join(arch.gnu_triple())
                        .join("pkgconfig"),
                )
                .env("PKG_CONFIG_ALLOW_SYSTEM_CFLAGS", "1")
                .env("PKG_CONFIG_ALLOW_SYSTEM_LIBS", "1");
        }
        build
            .args(["build", "-trimpath", "-buildvcs=false"])
            .arg(format!("-tags={}", self.tags.join(",")))
            .arg(format!("-ldflags={}", self.ldflags(version)?.join(" ")))
            .arg("-o")
            .arg(format!("{}/", out.display()))
            .args(packages.iter().map(|p| self.import_path(p)));
        Ok(build)
    }

    /// The import path of `package` (`.` is the module's own).
    pub fn import_path(&self, package: &str) -> String {
        match package {
            "." => self.module.clone(),
            _ => format!("{}/{package}", self.module),
        }
    }
}

/// The name `go build -o DIR/` gives the program of `import_path`: its
/// last element, or the one before a major-version suffix
/// (`go.etcd.io/etcd/server/v3` → `server`).
pub fn program_name(import_path: &str) -> &str {
    let mut elements = import_path.rsplit('/');
    let last = elements.next().unwrap_or(import_path);
    let is_major =
        last.len() > 1 && last.starts_with('v') && last[1..].bytes().all(|b| b.is_ascii_digit());
    match (is_major, elements.next()) {
        (true, Some(before)) => before,
        _ => last,
    }
}

impl Recipes {
    pub fn load(root: &Path) -> Result<Recipes> {
        let path = root.join("pkg/source.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| path.display().to_string())
    }

    pub fn get(&self, name: &str) -> Result<&Recipe> {
        self.recipes
            .get(name)
            .with_context(|| format!("pkg/source.toml: no [{name}] recipe to build it from source"))
    }
}

/// The directory of a source's pinned modules at `version`.
pub fn pins_dir(root: &Path, name: &str, version: &str) -> PathBuf {
    root.join("pkg/source")
        .join(name)
        .join(format!("v{version}"))
}

/// The Go toolchain every build here runs, and where its programs are kept.
pub struct Go {
    /// `go env GOVERSION` (`go1.26.8`), recorded beside what it built.
    pub version: String,
    /// pkg/source.toml's `[toolchains]`: Go minor (`1.27`) → the toolchain a
    /// module whose go.mod needs that Go, newer than `version`, is built
    /// with (`go1.27.3`, which the go command takes from the module proxy
    /// and checks against the checksum database like any module).
    pub toolchains: BTreeMap<String, String>,
    /// Where built programs are kept, by what decides their bytes.
    pub cache: PathBuf,
    /// Variables set on every go command besides the fixed ones (a test's
    /// own module cache).
    pub env: Vec<(String, PathBuf)>,
}

impl Go {
    /// The `go` on PATH with `root`'s toolchains, and the cache
    /// `$KUBEDIST_SOURCE_CACHE`, else `$XDG_CACHE_HOME/kubedist/source` or
    /// `~/.cache/kubedist/source` (beside Go's own build cache).
    pub fn from_env(root: &Path) -> Result<Go> {
        let out = Command::new("go")
            .args(["env", "GOVERSION"])
            .env("GOTOOLCHAIN", "local")
            .stdin(Stdio::null())
            .output()
            .context("building from source needs Go on PATH (`go env GOVERSION` did not run)")?;
        if !out.status.success() {
            bail!(
                "go env GOVERSION failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let cache = match std::env::var_os("KUBEDIST_SOURCE_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => crate::util::user_cache_dir()?.join("source"),
        };
        Ok(Go {
            version: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            toolchains: Recipes::load(root)?.toolchains,
            cache,
            env: Vec::new(),
        })
    }

    /// The toolchain that builds the module of `dir/go.mod`: this one
    /// (`go1.26.8`), or, where its `go` line needs a newer Go, the one
    /// `[toolchains]` names for that Go's minor. No go.mod: this one.
    pub fn toolchain(&self, dir: &Path) -> Result<String> {
        let go_mod = dir.join("go.mod");
        let Ok(text) = std::fs::read_to_string(&go_mod) else {
            return Ok(self.version.clone());
        };
        let needed = text
            .lines()
            .find_map(|l| l.strip_prefix("go "))
            .map(str::trim)
            .unwrap_or("1.0");
        self.toolchain_for(needed)
            .with_context(|| go_mod.display().to_string())
    }

    /// The toolchain for a module that needs Go `needed` (`1.27.0`).
    pub fn toolchain_for(&self, needed: &str) -> Result<String> {
        let numbers = |v: &str| -> Vec<u64> {
            v.trim_start_matches("go")
                .split(['.', 'r', 'b', '-'])
                .map_while(|n| n.parse().ok())
                .collect()
        };
        if numbers(needed) <= numbers(&self.version) {
            return Ok(self.version.clone());
        }
        let minor = needed.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
        match self.toolchains.get(&minor) {
            Some(t) if numbers(t) >= numbers(needed) => Ok(t.clone()),
            Some(t) => bail!(
                "needs Go {needed}, newer than pkg/source.toml's [toolchains] {minor:?} = {t:?}"
            ),
            None => bail!(
                "needs Go {needed}, newer than this machine's {}, and pkg/source.toml's \
                 [toolchains] names no toolchain for Go {minor}",
                self.version
            ),
        }
    }

    /// A `go` command in `dir` with the environment every build here has:
    /// module mode, go.mod and go.sum read-only, the toolchain of `dir`'s
    /// go.mod (`toolchain`), no cgo, the checksum database on (whatever the
    /// caller's environment says), no workspace.
    pub(crate) fn command(&self, dir: &Path) -> Result<Command> {
        let toolchain = match self.toolchain(dir)? {
            t if t == self.version => "local".to_string(),
            t => t,
        };
        let mut cmd = Command::new("go");
        cmd.current_dir(dir)
            .stdin(Stdio::null())
            .env("GOFLAGS", "-mod=readonly")
            .env("GOTOOLCHAIN", toolchain)
            .env("GO111MODULE", "on")
            .env("GOWORK", "off")
            .env("CGO_ENABLED", "0")
            .env("GOOS", "linux");
        for unsafe_var in [
            "GONOSUMDB",
            "GONOSUMCHECK",
            "GONOVERIFY",
            "GOINSECURE",
            "GOPRIVATE",
        ] {
            cmd.env_remove(unsafe_var);
        }
        if std::env::var("GOSUMDB").is_ok_and(|v| v == "off") {
            cmd.env_remove("GOSUMDB");
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        Ok(cmd)
    }
}

/// `<triple>-gcc --version` of `arch`, or why it cannot run.
pub fn c_compiler_version(arch: Arch) -> Result<Vec<u8>> {
    let gcc = format!("{}-gcc", arch.gnu_triple());
    Command::new(&gcc)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| o.stdout)
        .with_context(|| {
            format!(
                "building C code for {arch} needs {gcc} (Debian's gcc-{})",
                arch.gnu_triple()
            )
        })
}

/// Runs `cmd`, its output kept; on failure, one line: `what` and the most
/// telling line go printed.
pub(crate) fn run_go(cmd: &mut Command, what: &str, go_sum: &Path) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: go did not run"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("{what}: {}", go_failure(&stderr, go_sum));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The line of go's complaint an operator acts on: a checksum mismatch
/// names the module and go.sum, a modified module cache the module and
/// its directory.
fn go_failure(stderr: &str, go_sum: &Path) -> String {
    // go's progress lines (`go: downloading M V`) are never the failure.
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("go: downloading "))
        .collect();
    // `… M@V: reading https://…: 404 Not Found`: each module named once.
    let refused = |by: &str| -> Vec<String> {
        let mut modules: Vec<String> = lines
            .iter()
            .filter(|l| l.contains(": reading ") && l.contains(by))
            .filter_map(|l| {
                l.split(": ")
                    .find(|part| part.contains('@') && !part.contains("://"))
                    .map(|m| m.trim_start_matches("verifying ").replace('@', " "))
            })
            .collect();
        modules.sort();
        modules.dedup();
        modules
    };
    let unknown = refused("/lookup/");
    if !unknown.is_empty() {
        return format!(
            "the checksum database does not know {}: refused",
            unknown.join(", ")
        );
    }
    let unserved = refused("proxy");
    if !unserved.is_empty() {
        return format!(
            "the Go module proxy does not serve {}, so it cannot be built from source here",
            unserved.join(", ")
        );
    }
    if let Some(line) = lines.iter().find(|l| l.contains("checksum mismatch")) {
        let module = line
            .trim_start_matches("go: ")
            .trim_start_matches("verifying ")
            .split(':')
            .next()
            .unwrap_or(line);
        let sum = |key: &str| {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(key))
                .map(str::trim)
                .unwrap_or("?")
                .to_string()
        };
        return format!(
            "{}: {module}: checksum mismatch (the module is {}, go.sum says {}): refused",
            go_sum.display(),
            sum("downloaded:"),
            sum("go.sum:")
        );
    }
    if let Some(line) = lines.iter().find(|l| l.contains("dir has been modified")) {
        return format!(
            "the module cache was changed after download: {line}: refused (`go clean -modcache` \
             removes it; the next build downloads and verifies it again)"
        );
    }
    if let Some(line) = lines.iter().find(|l| l.contains("missing go.sum entry")) {
        return format!(
            "{}: {line} (run `cargo xtask source --lock` to pin it)",
            go_sum.display()
        );
    }
    // The linker's own line, not collect2's summary after it.
    if let Some(line) = lines.iter().find(|l| l.contains("cannot find -l")) {
        return line.to_string();
    }
    lines
        .iter()
        .find(|l| l.starts_with("go: ") || l.contains("error"))
        .or(lines.last())
        .unwrap_or(&"go failed")
        .to_string()
}

/// Runs `f`, saying every minute that `what` still runs: a first build of
/// Kubernetes' programs is minutes of silence otherwise.
fn heartbeat<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (done, ticks) = std::sync::mpsc::channel::<()>();
    let what = what.to_string();
    let ticker = std::thread::spawn(move || {
        let mut minutes = 0;
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            ticks.recv_timeout(std::time::Duration::from_secs(60))
        {
            minutes += 1;
            eprintln!("source: {what}: still running ({minutes} min)");
        }
    });
    let result = f();
    drop(done);
    let _ = ticker.join();
    result
}

/// What the Go module proxy says of `module` at `version`.
pub struct Upstream {
    /// Its go.mod.
    pub go_mod: String,
    /// The tag's time (`2026-10-27T12:01:04Z`).
    pub time: String,
    /// The tag's commit, where the proxy records it; else empty.
    pub commit: String,
}

/// Asks the proxy for `module` at `version` (`go list -m`, which checks its
/// go.mod against the checksum database), whatever Go it needs.
pub fn upstream(go: &Go, module: &str, version: &str) -> Result<Upstream> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let at = format!("{module}@v{version}");
    let mut cmd = go.command(dir.path())?;
    cmd.env("GOFLAGS", "-mod=mod")
        .args(["list", "-m", "-json"])
        .arg(&at);
    let json = run_go(&mut cmd, &at, Path::new("go.sum"))?;
    let info: serde_json::Value =
        serde_json::from_str(&json).context("reading go list -m -json")?;
    let text = |key: &str| info[key].as_str().unwrap_or_default().to_string();
    let go_mod_path = text("GoMod");
    if go_mod_path.is_empty() {
        bail!("{at}: the module proxy gave no go.mod");
    }
    Ok(Upstream {
        go_mod: std::fs::read_to_string(&go_mod_path)
            .with_context(|| format!("reading {go_mod_path}"))?,
        time: text("Time"),
        commit: info["Origin"]["Hash"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    })
}

/// Writes go.mod and go.sum of `name` at `version`: a main module that
/// requires the recipe's module, replaces its local-path replacements by
/// their published versions, and lists its programs and the images'
/// (`packages`) as tools (so that `go mod tidy` keeps what they import).
pub fn lock(
    root: &Path,
    go: &Go,
    name: &str,
    recipe: &Recipe,
    version: &str,
    packages: &[String],
) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let upstream_mod = upstream(go, &recipe.module, version)?.go_mod;
    let go_line = upstream_mod
        .lines()
        .find(|l| l.starts_with("go "))
        .unwrap_or("go 1.24");
    let mut text = format!(
        "// The main module `cargo xtask source --lock` generated to build {name} v{version}\n\
         // from {}; go.sum beside it pins every module.\n\
         module kubedist.local/source/{name}\n\n{go_line}\n\nrequire {} v{version}\n",
        recipe.module, recipe.module
    );
    if let Some(staging) = &recipe.staging {
        let (minor, patch) = minor_patch(version)?;
        let published = staging
            .replace("{version}", version)
            .replace("{minor}", minor)
            .replace("{patch}", patch);
        let replaced = local_replacements(&upstream_mod);
        if replaced.is_empty() {
            bail!("{}@v{version}: its go.mod replaces no module by a directory, but pkg/source.toml gives [{name}] staging", recipe.module);
        }
        text.push_str("\nreplace (\n");
        for module in replaced {
            text.push_str(&format!("\t{module} => {module} {published}\n"));
        }
        text.push_str(")\n");
    }
    text.push_str("\ntool (\n");
    for package in packages {
        text.push_str(&format!("\t{}\n", recipe.import_path(package)));
    }
    text.push_str(")\n");
    std::fs::write(dir.path().join("go.mod"), &text).context("writing go.mod")?;
    eprintln!("source: {name} v{version}: go mod tidy (downloads and checks every module)");
    let mut tidy = go.command(dir.path())?;
    tidy.env("GOFLAGS", "-mod=mod").args(["mod", "tidy"]);
    run_go(
        &mut tidy,
        &format!("{name} v{version}: go mod tidy"),
        Path::new("go.sum"),
    )?;
    let pins = pins_dir(root, name, version);
    std::fs::create_dir_all(&pins).with_context(|| format!("creating {}", pins.display()))?;
    for file in ["go.mod", "go.sum"] {
        let bytes = std::fs::read(dir.path().join(file))?;
        crate::util::write_bytes_atomic(&pins.join(file), &bytes, 0o644)?;
    }
    eprintln!("source: wrote {}/go.mod and go.sum", pins.display());
    Ok(())
}

/// `(minor, patch)` of `X.Y.Z[-pre]`, the pre-release with the patch:
/// `1.38.0-beta.0` gives `("38", "0-beta.0")`, as its staging modules are
/// `v0.38.0-beta.0`.
fn minor_patch(version: &str) -> Result<(&str, &str)> {
    crate::version::Version::parse(version)?;
    // Three dot-separated parts, the parse says: X, Y and Z[-pre].
    let mut parts = version.splitn(3, '.').skip(1);
    Ok((
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    ))
}

/// The modules a go.mod requires and replaces by a local directory
/// (`X => ./dir`). A replaced module it does not require is one it forbids
/// (etcd 3.6: `go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY`), not one to build.
fn local_replacements(go_mod: &str) -> Vec<String> {
    let mut required = std::collections::BTreeSet::new();
    let mut in_require = false;
    for line in go_mod.lines().map(str::trim) {
        let entry = match line.strip_prefix("require") {
            Some(rest) if rest.trim() == "(" => {
                in_require = true;
                continue;
            }
            Some(rest) => rest.trim(),
            None if in_require && line == ")" => {
                in_require = false;
                continue;
            }
            None if in_require => line,
            None => continue,
        };
        if let Some(module) = entry.split_whitespace().next() {
            required.insert(module);
        }
    }
    go_mod
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches("replace").trim();
            let (module, target) = l.split_once("=>")?;
            let target = target.trim();
            let module = module.split_whitespace().next()?;
            ((target.starts_with("./") || target.starts_with("../")) && required.contains(module))
                .then(|| module.to_string())
        })
        .collect()
}

/// What a `--from` directory holds besides the release's programs.
#[derive(Default)]
pub struct Extras<'a> {
    /// These images, built from source (`image_builds::write`).
    pub images: Option<&'a crate::spec::Images>,
}

/// The `--from` directory `out` (replaced whole), holding every file of
/// `spec`'s release for `arches`, each program built from source, and the
/// `extras`.
pub fn write_inputs(
    spec: &Spec,
    go: &Go,
    arches: &[Arch],
    extras: Extras,
    out: &Path,
) -> Result<()> {
    let recipes = Recipes::load(&spec.root)?;
    let staged = crate::util::temp_path(out)?;
    let _ = std::fs::remove_dir_all(&staged);
    let mut notes = Vec::new();
    for (name, source) in &spec.release.sources {
        let recipe = recipes.get(name)?;
        let built = build_pinned(
            go,
            &spec.root,
            name,
            recipe,
            &source.version,
            arches,
            &recipe.packages,
        )?;
        for (arch, programs) in built {
            for path in source.paths(arch) {
                let file_name = path.rsplit('/').next().unwrap_or(&path);
                let bytes = if crate::fetch::is_archive(file_name) {
                    let members: Vec<(String, Vec<u8>)> = programs
                        .iter()
                        .map(|(n, p)| Ok((source.member_path(n), std::fs::read(p)?)))
                        .collect::<Result<_>>()?;
                    let members: Vec<(String, &[u8])> = members
                        .iter()
                        .map(|(n, b)| (n.clone(), b.as_slice()))
                        .collect();
                    // Stored, not deflated: the archive only hands the
                    // programs to staging, which unpacks it at once;
                    // deflating ~180 MiB of programs per architecture took
                    // 6-9 s of CPU on every `dist --source` (a valid .tgz
                    // still, which any tar reads).
                    crate::archive::release_tgz(&members, false, 0, flate2::Compression::none())?
                } else {
                    // runc publishes `runc.<arch>`.
                    let program_name = file_name
                        .strip_suffix(&format!(".{}", arch.go_name()))
                        .unwrap_or(file_name);
                    let program = programs.get(program_name).with_context(|| {
                        format!(
                            "pkg/release.toml lists {name}/{path}, but pkg/source.toml's \
                             [{name}] builds no program {file_name}"
                        )
                    })?;
                    std::fs::read(program)?
                };
                let dest = staged.join(name).join(&path);
                std::fs::create_dir_all(dest.parent().unwrap_or(&staged))?;
                crate::util::write_bytes_atomic(&dest, &bytes, 0o755)?;
                let sum = format!("{}  {file_name}\n", crate::digest::sha256_bytes(&bytes));
                let mut sum_path = dest.clone().into_os_string();
                sum_path.push(".sha256");
                crate::util::write_bytes_atomic(Path::new(&sum_path), sum.as_bytes(), 0o644)?;
            }
        }
        let toolchain = go.toolchain(&pins_dir(&spec.root, name, &source.version))?;
        notes.push(format!("{name} {} {toolchain}", source.version));
    }
    let built = format!(
        "# Built from source by `cargo xtask source`: source, version, Go toolchain.\n{}\n",
        notes.join("\n")
    );
    crate::util::write_bytes_atomic(
        &staged.join(crate::inputs::from_dir::BUILT_FROM_SOURCE),
        built.as_bytes(),
        0o644,
    )?;
    if let Some(images) = extras.images {
        image_builds::write(spec, go, images, arches, &staged)?;
    }
    crate::util::replace_dir(&staged, out)
}

/// `packages` of `name` at `version` for each of `arches`, built by `build`
/// once the pins are checked (`verify_pins`), the modules verified once.
pub fn build_pinned(
    go: &Go,
    root: &Path,
    name: &str,
    recipe: &Recipe,
    version: &str,
    arches: &[Arch],
    packages: &[String],
) -> Result<BTreeMap<Arch, BTreeMap<String, PathBuf>>> {
    let pinned = Build::pinned(root, name, recipe, version, packages)?;
    let mut verified = false;
    let mut out = BTreeMap::new();
    for &arch in arches {
        out.insert(arch, build(go, &pinned, arch, &mut verified)?);
    }
    Ok(out)
}

/// The pinned go.mod must be the one `lock` writes for this version.
fn verify_pins(pins: &Path, name: &str, recipe: &Recipe, version: &str) -> Result<()> {
    let go_mod = pins.join("go.mod");
    let text = std::fs::read_to_string(&go_mod).map_err(|_| {
        anyhow::anyhow!(
            "{}: missing: {name} v{version} has no pinned modules; run `cargo xtask source --lock{}`",
            go_mod.display(),
            if recipe.versions.contains_key(version) { String::new() } else { format!(" --version {version}") }
        )
    })?;
    let wanted = format!("v{version}");
    let requires = text.lines().any(|l| {
        let words: Vec<&str> = l
            .trim()
            .trim_start_matches("require")
            .split_whitespace()
            .collect();
        words.len() >= 2 && words[0] == recipe.module && words[1] == wanted
    });
    if !requires {
        bail!(
            "{}: does not require {} v{version}: run `cargo xtask source --lock`",
            go_mod.display(),
            recipe.module
        );
    }
    if !pins.join("go.sum").is_file() {
        bail!(
            "{}: missing: run `cargo xtask source --lock`",
            pins.join("go.sum").display()
        );
    }
    if !recipe.versions.contains_key(version) {
        bail!("pkg/source.toml: [{name}.versions.\"{version}\"] is missing (its date and commit)");
    }
    Ok(())
}

/// The programs of the release's sources for `arch` that kubedist's cache
/// already holds, `(source, program name) → path`, nothing built: a run
/// without `arch` runs them where any build of the version would do
/// (shell completions). A source not built for `arch` yet is left out.
pub fn cached_programs(
    spec: &Spec,
    go: &Go,
    arch: Arch,
) -> Result<BTreeMap<(String, String), PathBuf>> {
    let recipes = Recipes::load(&spec.root)?;
    let mut found = BTreeMap::new();
    for (name, source) in &spec.release.sources {
        let recipe = recipes.get(name)?;
        let Ok(pinned) = Build::pinned(&spec.root, name, recipe, &source.version, &recipe.packages)
        else {
            continue;
        };
        let sysroot = c_sysroot(go, &pinned, arch)?;
        let programs = pinned.programs(&cache_entry(go, &pinned, arch, sysroot.as_deref())?);
        if programs.values().all(|p| p.is_file()) {
            found.extend(
                programs
                    .into_iter()
                    .map(|(p, path)| ((name.clone(), p), path)),
            );
        }
    }
    Ok(found)
}

/// What a build is of, whatever the architecture: `packages` of `name` at
/// `version`, from the pinned modules in `pins`.
struct Build<'a> {
    /// The tree whose pkg/ describes the build.
    root: &'a Path,
    pins: PathBuf,
    name: &'a str,
    recipe: &'a Recipe,
    version: &'a str,
    packages: &'a [String],
}

impl<'a> Build<'a> {
    /// `packages` of `name` at `version`, from the checkout's pins, once
    /// they are checked (`verify_pins`).
    fn pinned(
        root: &'a Path,
        name: &'a str,
        recipe: &'a Recipe,
        version: &'a str,
        packages: &'a [String],
    ) -> Result<Build<'a>> {
        let pins = pins_dir(root, name, version);
        verify_pins(&pins, name, recipe, version)?;
        Ok(Build {
            root,
            pins,
            name,
            recipe,
            version,
            packages,
        })
    }

    /// `program name → path` of its packages in the cache entry `dir`.
    fn programs(&self, dir: &Path) -> BTreeMap<String, PathBuf> {
        self.packages
            .iter()
            .map(|p| {
                let program = program_name(&self.recipe.import_path(p)).to_string();
                (program.clone(), dir.join(&program))
            })
            .collect()
    }
}

/// The cache directory of `one`'s programs for `arch`, named by what
/// decides their bytes (`sysroot`: its C libraries, `c_sysroot`).
fn cache_entry(go: &Go, one: &Build, arch: Arch, sysroot: Option<&Path>) -> Result<PathBuf> {
    let (recipe, name, version) = (one.recipe, one.name, one.version);
    let ldflags = recipe.ldflags(version)?;
    let go_mod = std::fs::read(one.pins.join("go.mod"))?;
    let go_sum = std::fs::read(one.pins.join("go.sum"))?;
    // What decides the bytes: the toolchain, the pins and the build's own
    // arguments. Not the whole recipe: a new version's facts in
    // pkg/source.toml must not rebuild the others.
    let toolchain = go.toolchain(&one.pins)?;
    let key = {
        let (packages, tags, ldflags) = (
            one.packages.join(" "),
            recipe.tags.join(","),
            ldflags.join(" "),
        );
        // A cgo build's bytes depend on the C compiler as well, and on the
        // C libraries, whose directory is named by the packages it holds.
        let cc = match recipe.cgo {
            true => {
                let mut cc = c_compiler_version(arch)?;
                if let Some(dir) = sysroot {
                    cc.extend_from_slice(dir.file_name().unwrap_or_default().as_encoded_bytes());
                }
                cc
            }
            false => Vec::new(),
        };
        let parts: [&[u8]; 11] = [
            toolchain.as_bytes(),
            &cc,
            name.as_bytes(),
            version.as_bytes(),
            arch.go_name().as_bytes(),
            recipe.module.as_bytes(),
            packages.as_bytes(),
            tags.as_bytes(),
            ldflags.as_bytes(),
            &go_mod,
            &go_sum,
        ];
        crate::digest::sha256_bytes(&parts.join(&0u8))
    };
    Ok(go
        .cache
        .join(format!("{name}-{version}-{arch}-{}", &key[..16])))
}

/// The programs of `one` for `arch`, `program name → path`, from the cache
/// or built now. `verified`: whether its modules were verified already.
fn build(
    go: &Go,
    one: &Build,
    arch: Arch,
    verified: &mut bool,
) -> Result<BTreeMap<String, PathBuf>> {
    // Its C libraries, once: they name the cache entry and build it.
    let sysroot = c_sysroot(go, one, arch)?;
    let cached = cache_entry(go, one, arch, sysroot.as_deref())?;
    let (pins, name, recipe, version, packages) =
        (&one.pins, one.name, one.recipe, one.version, one.packages);
    let programs = |dir: &Path| one.programs(dir);
    if programs(&cached).values().all(|p| p.is_file()) {
        eprintln!(
            "source: {name} v{version} {arch}: cached ({})",
            cached.display()
        );
        // The entry's mtime marks its last use: ci/prune-caches removes
        // those of versions and recipes no longer used. (Best effort: a
        // cache another user owns is read all the same.)
        let _ = std::fs::File::open(&cached)
            .and_then(|dir| dir.set_modified(std::time::SystemTime::now()));
        return Ok(programs(&cached));
    }
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    for file in ["go.mod", "go.sum"] {
        std::fs::copy(pins.join(file), work.path().join(file))
            .with_context(|| format!("copying {}", pins.join(file).display()))?;
    }
    let go_sum_path = pins.join("go.sum");
    if !*verified {
        eprintln!("source: {name} v{version}: downloading what the module cache lacks, then go mod verify");
        let mut download = go.command(work.path())?;
        download.args(["mod", "download"]);
        run_go(&mut download, &format!("{name} v{version}"), &go_sum_path)?;
        let mut verify = go.command(work.path())?;
        verify.args(["mod", "verify"]);
        run_go(&mut verify, &format!("{name} v{version}"), &go_sum_path)?;
        *verified = true;
    }
    let out = crate::util::temp_path(&cached)?;
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    let started = std::time::Instant::now();
    eprintln!(
        "source: {name} v{version} {arch}: go build {} program(s) (the first build of a version takes long)",
        packages.len()
    );
    let mut build = recipe.go_build(
        go,
        work.path(),
        version,
        arch,
        packages,
        sysroot.as_deref(),
        &out,
    )?;
    let what = format!("{name} v{version} {arch}: go build");
    heartbeat(&what, || run_go(&mut build, &what, &go_sum_path))?;
    eprintln!(
        "source: {name} v{version} {arch}: built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    std::fs::create_dir_all(cached.parent().unwrap_or(Path::new(".")))?;
    crate::util::replace_dir(&out, &cached)?;
    Ok(programs(&cached))
}

/// [`c_sysroot`] of `name`'s pinned build at `version`: for a plain
/// `go build` beside kubedist's (the benchmark's floor).
pub fn sysroot(
    go: &Go,
    root: &Path,
    name: &str,
    recipe: &Recipe,
    version: &str,
    arch: Arch,
) -> Result<Option<PathBuf>> {
    c_sysroot(go, &Build::pinned(root, name, recipe, version, &[])?, arch)
}

/// The directory holding the `debian` packages of `one`'s recipe for
/// `arch`, unpacked as on a host of that architecture, named by their files
/// and made once; None for a recipe without. The packages come from
/// Debian's archive through apt (`fetch::debian`, which verifies them),
/// the host's release's or, for an architecture it lacks, the next one's.
fn c_sysroot(go: &Go, one: &Build, arch: Arch) -> Result<Option<PathBuf>> {
    if one.recipe.debian.is_empty() {
        return Ok(None);
    }
    let families = crate::spec::Families::load(one.root)?;
    let debarch = families.deb.arch_name(arch)?;
    let wanted: Vec<&str> = one.recipe.debian.iter().map(String::as_str).collect();
    let debs =
        crate::fetch::debian::download_all(debarch, &wanted, &one.root.join("target/debian-debs"))?;
    let names: Vec<String> = debs
        .iter()
        .map(|deb| {
            deb.path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let key = crate::digest::sha256_bytes(names.join("\n").as_bytes());
    let dir = go.cache.join(format!("sysroot-{arch}-{}", &key[..16]));
    if dir.is_dir() {
        // Its use marked, as a program entry's (ci/prune-caches).
        let _ =
            std::fs::File::open(&dir).and_then(|d| d.set_modified(std::time::SystemTime::now()));
        return Ok(Some(dir));
    }
    let staged = crate::util::temp_path(&dir)?;
    let _ = std::fs::remove_dir_all(&staged);
    std::fs::create_dir_all(&staged)?;
    for deb in &debs {
        let status = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb.path)
            .arg(&staged)
            .status()
            .context("running dpkg-deb -x")?;
        if !status.success() {
            bail!("dpkg-deb -x {} failed ({status})", deb.path.display());
        }
    }
    crate::util::replace_dir(&staged, &dir)?;
    Ok(Some(dir))
}

pub mod image_builds;

#[cfg(test)]
mod tests;
