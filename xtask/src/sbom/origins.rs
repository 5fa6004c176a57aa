//! Where the artifacts' files come from, as the SBOMs name it: the verified
//! upstream downloads (and their archives' members), the programs built
//! here with the crates linked into them, and the Debian package of the
//! installer image's shell.

use anyhow::{Context, Result};

use super::Origin;
use crate::fetch::{self, Upstream};
use crate::spec::{Arch, Spec};
use crate::stage::images::StagedImage;
use crate::stage::StagedOciBase;

/// Every verified upstream file of one architecture.
pub fn upstream(spec: &Spec, up: &Upstream, origin: &fetch::Origin) -> Result<Vec<Origin>> {
    let mut out = Vec::new();
    for f in up.files() {
        let source = spec
            .release
            .sources
            .get(&f.source)
            .with_context(|| format!("pkg/release.toml: no [sources.{}]", f.source))?;
        let name = f.path.rsplit('/').next().unwrap_or(&f.path).to_string();
        let built_here = up.built_from_source(&f.source).map(|line| {
            format!(
                "built here from its Go modules (pkg/source.toml), each verified against the \
                 pinned go.sum: {line}"
            )
        });
        let (url, how) = match origin {
            fetch::Origin::Official => (
                Some(format!("{}/{}", source.base.trim_end_matches('/'), f.path)),
                "downloaded and verified against pkg/upstream.lock",
            ),
            fetch::Origin::Mirror(m) => (
                Some(format!("{m}/{}/{}", f.source, f.path)),
                "downloaded from a mirror and verified against pkg/upstream.lock",
            ),
            fetch::Origin::Dir(_) => (
                None,
                "from a --from directory, checked against its .sha256 files",
            ),
        };
        let how = built_here.as_deref().unwrap_or(how);
        // A stand-in is listed by its source and member name: the file
        // itself, or a member of it when it is an archive.
        let mut names = vec![name.as_str()];
        names.extend(f.members.iter().flatten().map(|(m, _)| m.as_str()));
        let standin = names
            .iter()
            .any(|n| up.standins().contains(&format!("{}/{n}", f.source)));
        let mut yields = vec![(name.clone(), f.sha256.clone())];
        for (member, path) in f.members.iter().flatten() {
            yields.push((member.clone(), crate::digest::sha256_file(path)?));
        }
        out.push(Origin {
            purl: format!("pkg:generic/{}/{name}@{}", f.source, source.version),
            name,
            version: source.version.clone(),
            supplier: format!("Organization: {}", f.source),
            url,
            sha256: f.sha256.clone(),
            yields,
            comment: if standin {
                format!("{how}; a recorder stand-in (kubedist-standin), not the real program")
            } else {
                how.to_string()
            },
            linked: Vec::new(),
            blobs: Vec::new(),
        });
    }
    Ok(out)
}

/// The workspace program `package` as built for `arch`, with the crates
/// its build compiled into it (`build::Built::linked`).
pub fn built(package: &str, program: &crate::build::Built, arch: Arch) -> Result<Origin> {
    let linked = program
        .linked
        .iter()
        .map(|(n, v)| (n.clone(), v.clone(), format!("pkg:cargo/{n}@{v}")))
        .collect();
    let version = program.version.clone();
    let sha256 = crate::digest::sha256_file(&program.path)?;
    Ok(Origin {
        name: package.to_string(),
        purl: format!("pkg:generic/kubedist/{package}@{version}"),
        version,
        supplier: super::SUPPLIER.to_string(),
        url: None,
        yields: vec![(package.to_string(), sha256.clone())],
        sha256,
        comment: format!(
            "built from this source tree for {arch} ({}); the crates it CONTAINS are its \
             dependencies as Cargo.lock resolves them",
            arch.static_target()
        ),
        linked,
        blobs: Vec::new(),
    })
}

/// One architecture's image of `pkg/images.toml`, as the images bundle
/// holds it: named by its manifest's digest, which its index (pinned in
/// `pkg/images.toml`) names. `built_here`: the image was built from source by kubedist (`dist
/// --source`), not pulled from its registry.
pub fn image(image: &StagedImage, arch: Arch, built_here: bool) -> Origin {
    let (repository, tag) = image
        .reference
        .rsplit_once(':')
        .unwrap_or((&image.reference, ""));
    let registry = repository.split('/').next().unwrap_or(repository);
    let short = repository.rsplit('/').next().unwrap_or(repository);
    let digest = &image.manifest.digest;
    Origin {
        name: image.reference.clone(),
        version: tag.to_string(),
        supplier: match built_here {
            true => "Organization: kubedist (built from source)".to_string(),
            false => format!("Organization: {registry}"),
        },
        url: Some(format!("{repository}@{digest}")),
        purl: format!(
            "pkg:oci/{short}@{digest}?arch={}&repository_url={repository}&tag={tag}",
            arch.go_name()
        ),
        sha256: digest.trim_start_matches("sha256:").to_string(),
        yields: Vec::new(),
        comment: format!(
            "the {arch} image of {}{}; its blobs checked against this manifest's digests",
            image.reference,
            if built_here {
                ", built from source by kubedist"
            } else {
                ""
            }
        ),
        linked: Vec::new(),
        blobs: image
            .blobs
            .iter()
            .map(|b| b.digest.trim_start_matches("sha256:").to_string())
            .collect(),
    }
}

/// The Debian package the installer image's shell comes from.
pub fn debian(base: &StagedOciBase, debarch: &str) -> Origin {
    Origin {
        name: base.package.clone(),
        version: base.version.clone(),
        supplier: "Organization: Debian".to_string(),
        url: None,
        purl: format!(
            "pkg:deb/debian/{}@{}?arch={debarch}",
            base.package, base.version
        ),
        sha256: base.binary.sha256.clone(),
        yields: [&base.binary, &base.copyright]
            .iter()
            .map(|f| {
                let name = f.dest.rsplit('/').next().unwrap_or(&f.dest);
                (name.to_string(), f.sha256.clone())
            })
            .collect(),
        comment: "taken through apt, which verified it against Debian's signed archive; \
                  the digest is that of the program taken from it"
            .to_string(),
        linked: Vec::new(),
        blobs: Vec::new(),
    }
}
