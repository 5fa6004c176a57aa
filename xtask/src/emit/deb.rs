//! `.deb` through cargo-deb used as a library.
//!
//! cargo-deb is manifest-driven: its `BuildEnvironment`/`PackageConfig` can
//! only be made from a Cargo.toml. So each package gets a throwaway crate
//! (empty lib.rs, empty `[workspace]` so that cargo does not look for an
//! enclosing one) whose `[package.metadata.deb]` lists the staged files as
//! assets; after `from_manifest` the public fields are set to what cargo-deb
//! cannot know (version verbatim with its revision, architecture, timestamp,
//! dependencies). cargo-deb writes the control archive; the data archive,
//! with the codec of `--compression`, comes from `super::debpack`.
//!
//! `md5sums` is added on the way (see `super::debpack`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use cargo_deb::config::{BuildOptions, ExtendedDescription};
use cargo_deb::listener::Listener;
use cargo_deb::BuildEnvironment;

use super::codec::{Codec, Kind};
use super::{
    About, Artifacts, Families, Format, FormatCodecs, Input, Options, Run, Staging, Written,
    MAINTAINER,
};
use crate::spec::Family;
use crate::stage::Staged;

/// The format's name in `--formats` and `--compression`.
pub const NAME: &str = "deb";

pub struct Deb;

static ABOUT: About = About {
    name: NAME,
    summary: "one .deb per package, for apt and dpkg",
    codecs: Some(FormatCodecs {
        // xz reaches every dpkg; the long window (a dictionary the size of
        // the package, up to 64 MiB) makes a fast preset smaller than
        // dpkg-deb's own xz:6 on packages of several Go binaries
        // (docs/performance.md, "Long windows"); preset 1 from the table
        // on the programs built from source ("The real programs").
        default: Codec::long(Kind::Xz, 1),
        fast: Codec::new(Kind::Xz, 1),
        help: "xz:0-9 (default xz:1+long; every dpkg), zstd:1-19 (dpkg >= 1.21.18: \
               Debian 12, Ubuntu 22.04), gz:1-9; +long after xz or zstd: a window the \
               size of the package (xz up to 64 MiB, zstd up to 128 MiB), on one thread",
    }),
    codec_of: NAME,
    artifacts: Artifacts::Package(Family::Deb),
    families: Families::Own(Family::Deb),
    staging: Staging::Packages,
    single_threaded: false,
    carries_images: false,
};

impl Format for Deb {
    fn about(&self) -> &'static About {
        &ABOUT
    }
    fn write(&self, input: &Input, run: &Run) -> Result<Written> {
        write(input.package()?, run.options, run.work, run.out_dir)
    }
}

/// Where a `config = true` file's pristine default lives in a deb.
pub const SEED_DIR: &str = "/usr/share/kubedist/seed";

/// Writes `<name>_<version>_<debarch>.deb` into `out_dir`, using `work` as
/// scratch space, and returns its path and the files of its data archive.
pub fn write(pkg: &Staged, meta: &Options, work: &Path, out_dir: &Path) -> Result<Written> {
    let arch = pkg.arch_name.as_str();
    let out = out_dir.join(format!("{}_{}_{arch}.deb", pkg.name, pkg.version));
    let crate_dir = work.join(format!("deb-{}-{}", pkg.name, pkg.arch));
    fs::create_dir_all(crate_dir.join("scripts"))
        .with_context(|| format!("creating {}", crate_dir.display()))?;

    let docs = crate_dir.join("doc");
    fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    let copyright = docs.join("copyright");
    fs::write(&copyright, copyright_text(pkg, meta)?)
        .with_context(|| format!("writing {}", copyright.display()))?;
    let changelog = docs.join("changelog.Debian.gz");
    fs::write(&changelog, changelog_gz(pkg, meta)?)
        .with_context(|| format!("writing {}", changelog.display()))?;

    // (source, dest, mode) of every file in the data archive.
    let mut assets: Vec<(PathBuf, String, u32)> = Vec::new();
    let seeds = pkg.seeds();
    for f in pkg.package_files() {
        let dest = if seeds.iter().any(|s| s.dest == f.dest) {
            format!("{SEED_DIR}{}", f.dest)
        } else {
            // Files under /etc become dpkg conffiles (cargo-deb does that).
            f.dest.clone()
        };
        assets.push((f.path.clone(), dest, f.mode));
    }
    let doc_dir = format!("/usr/share/doc/{}", pkg.name);
    // cargo-deb also resolves a copyright of its own at this path, which
    // would win over an asset; the manifest's `license-file` names ours, so
    // both are the same text (copied line by line: it already carries the
    // machine-readable header).
    assets.push((copyright, format!("{doc_dir}/copyright"), 0o644));
    assets.push((changelog, format!("{doc_dir}/changelog.Debian.gz"), 0o644));
    assets.sort_by(|a, b| a.1.cmp(&b.1));

    for script in &pkg.scripts {
        let path = crate_dir.join("scripts").join(&script.name);
        fs::write(&path, &script.text).with_context(|| format!("writing {}", path.display()))?;
    }
    let has_scripts = !pkg.scripts.is_empty();

    let manifest = crate_dir.join("Cargo.toml");
    fs::write(&manifest, manifest_text(pkg, meta, &assets, has_scripts)?)
        .with_context(|| format!("writing {}", manifest.display()))?;
    fs::write(crate_dir.join("lib.rs"), "").context("writing lib.rs")?;

    let listener = Collect::default();
    let mut held = Vec::new();
    crate::util::write_atomic(&out, 0o644, |file| {
        held = build(pkg, arch, meta, &assets, &manifest, file, &out, &listener).map_err(|e| {
            let warnings = listener
                .warnings
                .lock()
                .map(|w| w.join("; "))
                .unwrap_or_default();
            anyhow::anyhow!(
                "cargo-deb: {}{}",
                e.to_string().trim_end(),
                if warnings.is_empty() {
                    String::new()
                } else {
                    format!(" (warnings: {warnings})")
                }
            )
        })?;
        Ok(())
    })?;
    Ok(Written {
        path: out,
        held: Some(held),
    })
}

#[allow(clippy::too_many_arguments)]
fn build(
    pkg: &Staged,
    arch: &str,
    meta: &Options,
    assets: &[(PathBuf, String, u32)],
    manifest: &Path,
    out: &mut fs::File,
    out_path: &Path,
    listener: &Collect,
) -> cargo_deb::CDResult<Vec<crate::sbom::contents::Held>> {
    let (config, mut debs) = BuildEnvironment::from_manifest(
        BuildOptions {
            manifest_path: Some(manifest),
            ..BuildOptions::default()
        },
        listener,
    )?;
    let mut deb = debs.pop().ok_or("cargo-deb found no package")?;
    deb.deb_version = pkg.version.clone();
    deb.architecture = arch.to_string();
    deb.default_timestamp = meta.epoch;
    // Explicit, never `$auto`: dpkg-shlibdeps has nothing to say about static
    // Go binaries, and the dependencies are part of the package's contract.
    let list = |deps: &[crate::spec::Dep]| {
        (!deps.is_empty()).then(|| deps.iter().map(|d| d.deb()).collect::<Vec<_>>().join(", "))
    };
    deb.resolved_depends = list(&pkg.depends);
    deb.recommends = list(&pkg.recommends);
    deb.provides = list(&pkg.provides);
    deb.conflicts = list(&pkg.conflicts);
    deb.replaces = list(&pkg.replaces);
    deb.extended_description = ExtendedDescription::String(pkg.description.clone());
    deb.resolve_assets(listener)?;
    deb.sort_assets_by_type();
    let codec = meta.codecs.of(NAME).with_filter(pkg.xz_filter);
    super::debpack::write(
        &config,
        &deb,
        assets,
        &pkg.host_dirs,
        codec,
        meta.threads,
        meta.epoch,
        out,
        out_path,
        listener,
    )
}

/// The throwaway crate's Cargo.toml.
fn manifest_text(
    pkg: &Staged,
    meta: &Options,
    assets: &[(PathBuf, String, u32)],
    scripts: bool,
) -> Result<String> {
    use toml::Value;
    let mut list = Vec::new();
    for (src, dest, mode) in assets {
        let src = src
            .to_str()
            .with_context(|| format!("{}: not a UTF-8 path", src.display()))?;
        // cargo-deb treats sources as glob patterns.
        if src.contains(['*', '?', '[', ']', '{', '}']) {
            bail!("{src}: the work directory's path must not contain glob characters");
        }
        list.push(Value::Array(vec![
            src.into(),
            dest.as_str().into(),
            format!("{mode:o}").into(),
        ]));
    }
    let mut deb = toml::Table::new();
    deb.insert("name".into(), pkg.name.as_str().into());
    deb.insert("maintainer".into(), MAINTAINER.into());
    deb.insert("section".into(), "admin".into());
    deb.insert("priority".into(), "optional".into());
    deb.insert("assets".into(), Value::Array(list));
    deb.insert("license-file".into(), "doc/copyright".into());
    if scripts {
        deb.insert("maintainer-scripts".into(), "scripts".into());
    }
    let mut package = toml::Table::new();
    package.insert("name".into(), "kubedist-staged".into());
    package.insert("version".into(), "0.0.0".into());
    package.insert("edition".into(), "2021".into());
    package.insert("license".into(), meta.license.as_str().into());
    package.insert("description".into(), pkg.summary.as_str().into());
    package.insert("homepage".into(), meta.homepage.as_str().into());
    package.insert("publish".into(), false.into());
    let mut metadata = toml::Table::new();
    metadata.insert("deb".into(), deb.into());
    package.insert("metadata".into(), metadata.into());
    let mut lib = toml::Table::new();
    lib.insert("path".into(), "lib.rs".into());
    let mut doc = toml::Table::new();
    doc.insert("package".into(), package.into());
    doc.insert("lib".into(), lib.into());
    doc.insert("workspace".into(), toml::Table::new().into());
    toml::to_string(&doc).context("rendering the throwaway Cargo.toml")
}

/// `/usr/share/doc/<pkg>/copyright` in Debian's machine-readable format. The
/// license text itself is in /usr/share/common-licenses on every Debian host;
/// the paragraph that points there is Apache-2.0's, so another licence is
/// refused until it has its own.
fn copyright_text(pkg: &Staged, meta: &Options) -> Result<String> {
    if meta.license != "Apache-2.0" {
        bail!(
            "Cargo.toml: workspace.package.license is {}: the deb's copyright file has \
             a licence paragraph for Apache-2.0 only",
            meta.license
        );
    }
    Ok(format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: {up}
Source: {source}
Comment: Upstream release binaries, packaged by kubedist ({home}).

Files: *
Copyright: {copyright}
License: {license}
{others}
License: {license}
 Licensed under the Apache License, Version 2.0 (the \"License\");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
     http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an \"AS IS\" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in \"/usr/share/common-licenses/Apache-2.0\".
",
        up = pkg.version_from,
        source = pkg.upstream_url,
        copyright = pkg.copyright,
        others = pkg
            .other_copyrights
            .iter()
            .map(|(dest, copyright)| format!(
                "\nFiles: {}\nCopyright: {copyright}\nLicense: {}\n",
                dest.trim_start_matches('/'),
                meta.license
            ))
            .collect::<String>(),
        home = meta.homepage,
        license = meta.license,
    ))
}

/// A one-entry Debian changelog, gzipped reproducibly (no name, no mtime,
/// maximum compression as lintian expects).
fn changelog_gz(pkg: &Staged, meta: &Options) -> Result<Vec<u8>> {
    let text = format!(
        "{name} ({version}) stable; urgency=medium\n\n  * {line}\n\n -- {MAINTAINER}  {date}\n",
        name = pkg.name,
        version = pkg.version,
        line = super::changelog_line(pkg),
        date = crate::util::rfc2822(meta.epoch),
    );
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    gz.write_all(text.as_bytes())?;
    Ok(gz.finish()?)
}

/// Keeps cargo-deb's warnings (shown only if the build fails) and drops its
/// progress chatter.
#[derive(Default)]
struct Collect {
    warnings: Mutex<Vec<String>>,
}

impl Listener for Collect {
    fn warning(&self, s: String) {
        if let Ok(mut w) = self.warnings.lock() {
            w.push(s);
        }
    }
    fn info(&self, _s: String) {}
    fn progress(&self, _operation: &str, _detail: String) {}
    fn generated_archive(&self, _path: &Path) {}
}
