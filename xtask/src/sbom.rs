//! What is inside each artifact and where it came from: an SPDX 2.3 JSON
//! document beside every artifact (`<artifact>.spdx.json`), listed in
//! SHA256SUMS like the artifact, so `--sign` covers it.
//!
//! A document names the artifact itself (name, version, architecture,
//! supplier, licence, package URL, digest); every regular file it holds
//! (`contents`), with SHA-1 and SHA-256: as its writer put it in (the
//! images bundle's read back from its layers);
//! the inputs those files came from, matched by digest (`Origin`): the
//! upstream downloads with their URLs and verified digests, the programs
//! built here with the Rust crates inside them, the Debian package the
//! installer image's shell comes from; and, for each Go program, the build
//! information it carries (`gobuild`): its Go version, main package, build
//! settings and the modules linked in, each module a `pkg:golang` package.
//!
//! Everything in it comes from the inputs and `SOURCE_DATE_EPOCH`: two
//! builds give the same bytes.

pub mod contents;
pub mod gobuild;
pub mod origins;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use contents::Held;

/// What the document says the artifact is.
pub struct Subject {
    /// The package's name (`kubelet`), or the artifact's for the others.
    pub name: String,
    pub version: String,
    /// `pkg:deb/...`, `pkg:rpm/...`, `pkg:oci/...`, `pkg:generic/...`.
    pub purl: String,
    /// An SPDX licence expression.
    pub licence: String,
}

/// Something the artifacts' files came from.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Origin {
    pub name: String,
    pub version: String,
    /// `Organization: ...`, as SPDX writes a supplier.
    pub supplier: String,
    /// Where it was downloaded from, if it was.
    pub url: Option<String>,
    pub purl: String,
    /// The SHA-256 of the file itself (a download, a built program).
    pub sha256: String,
    /// Every file it yields, `(name, SHA-256)`: itself, or an archive's
    /// members.
    pub yields: Vec<(String, String)>,
    /// What it says of itself, for the reader (the lock entry, "stand-in").
    pub comment: String,
    /// Packages linked into it: `(name, version, purl)` (a Rust program's
    /// crates).
    pub linked: Vec<(String, String, String)>,
    /// An image's blobs (hex digests): every file of those layers came
    /// from it, whatever its bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blobs: Vec<String>,
}

/// Where an artifact's SBOM goes: `<artifact>.spdx.json`, beside it.
pub fn path_of(artifact: &Path) -> std::path::PathBuf {
    let mut name = artifact.file_name().unwrap_or_default().to_os_string();
    name.push(".spdx.json");
    artifact.with_file_name(name)
}

/// The supplier of kubedist's own artifacts and programs.
pub const SUPPLIER: &str = "Organization: kubedist";

/// The creator the documents name.
pub const TOOL: &str = concat!("kubedist-", env!("CARGO_PKG_VERSION"));

/// The SPDX document of the artifact `path`, whose SHA-256 is `sha256`, of
/// the files `held` as its format put them in, or else read back from it.
pub fn document(
    path: &Path,
    sha256: &str,
    held: Option<Vec<Held>>,
    subject: &Subject,
    origins: &[Origin],
    epoch: u64,
) -> Result<Vec<u8>> {
    let held = match held {
        Some(mut held) => {
            held.sort_by(|a, b| a.path.cmp(&b.path));
            held
        }
        None => contents::read(path)?,
    };
    let file_name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    document_of(&held, &file_name, Some(sha256), subject, origins, epoch)
}

/// The SPDX document of the files `held`, named `file_name`; of a file
/// whose SHA-256 is `sha256`, or of what has no digest of its own yet (the
/// installer image's document of its own layers, which sits inside it).
pub fn document_of(
    held: &[Held],
    file_name: &str,
    sha256: Option<&str>,
    subject: &Subject,
    origins: &[Origin],
    epoch: u64,
) -> Result<Vec<u8>> {
    let code = verification_code(held);
    let mut artifact = json!({
        "SPDXID": "SPDXRef-Artifact",
        "name": subject.name,
        "versionInfo": subject.version,
        "packageFileName": file_name,
        "supplier": SUPPLIER,
        "originator": SUPPLIER,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": true,
        "packageVerificationCode": { "packageVerificationCodeValue": code },
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": subject.licence,
        "copyrightText": "NOASSERTION",
        "externalRefs": [purl_ref(&subject.purl)],
        "hasFiles": (0..held.len()).map(file_id).collect::<Vec<_>>(),
    });
    if let Some(sha256) = sha256 {
        artifact["checksums"] = json!([{ "algorithm": "SHA256", "checksumValue": sha256 }]);
    }
    let mut packages = vec![artifact];
    let mut relationships = vec![relationship(
        "SPDXRef-DOCUMENT",
        "DESCRIBES",
        "SPDXRef-Artifact",
    )];
    let mut files = Vec::new();
    let mut used = BTreeSet::new();
    for (i, f) in held.iter().enumerate() {
        files.push(json!({
            "SPDXID": file_id(i),
            "fileName": format!(".{}", f.path),
            "checksums": [
                { "algorithm": "SHA1", "checksumValue": f.sha1 },
                { "algorithm": "SHA256", "checksumValue": f.sha256 },
            ],
            "licenseConcluded": "NOASSERTION",
            "copyrightText": "NOASSERTION",
        }));
        relationships.push(relationship("SPDXRef-Artifact", "CONTAINS", &file_id(i)));
        let from = origins_of(f, origins);
        for &o in &from {
            used.insert(o);
            relationships.push(relationship(
                &file_id(i),
                "GENERATED_FROM",
                &origin_id(&origins[o]),
            ));
        }
        let from = from.first().copied();
        if let Some(go) = &f.go {
            let version = from.map_or(subject.version.as_str(), |o| origins[o].version.as_str());
            go_packages(i, go, version, &mut packages, &mut relationships);
        }
    }
    for o in used {
        let origin = &origins[o];
        packages.push(json!({
            "SPDXID": origin_id(origin),
            "name": origin.name,
            "versionInfo": origin.version,
            "supplier": origin.supplier,
            "downloadLocation": origin.url.as_deref().unwrap_or("NOASSERTION"),
            "filesAnalyzed": false,
            "checksums": [{ "algorithm": "SHA256", "checksumValue": origin.sha256 }],
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "externalRefs": [purl_ref(&origin.purl)],
            "comment": origin.comment,
        }));
        relationships.push(relationship(
            "SPDXRef-Artifact",
            "CONTAINS",
            &origin_id(origin),
        ));
        for (k, (name, version, purl)) in origin.linked.iter().enumerate() {
            let id = format!("{}-Linked-{k}", origin_id(origin));
            packages.push(json!({
                "SPDXID": id,
                "name": name,
                "versionInfo": version,
                "supplier": format!("Organization: {}", supplier_of(purl)),
                "downloadLocation": "NOASSERTION",
                "filesAnalyzed": false,
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": "NOASSERTION",
                "copyrightText": "NOASSERTION",
                "externalRefs": [purl_ref(purl)],
            }));
            relationships.push(relationship(&origin_id(origin), "CONTAINS", &id));
        }
    }
    let doc = json!({
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": file_name,
        // Unique per artifact content, and the same for the same bytes.
        "documentNamespace": format!(
            "https://kubedist.invalid/spdx/{file_name}-{}",
            sha256.unwrap_or(&code)
        ),
        "creationInfo": {
            "created": crate::util::rfc3339(epoch)?,
            "creators": [format!("Tool: {TOOL}"), SUPPLIER],
        },
        "documentDescribes": ["SPDXRef-Artifact"],
        "packages": packages,
        "files": files,
        "relationships": relationships,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The SBOM `doc` of a package, for the same package signed by the
/// repository (`repo` re-signs every rpm it serves): the signature changes
/// the file's digest, not a byte of what it installs. The document names
/// the signed file's digest instead, and the one dist wrote in a comment.
pub fn for_signed(doc: &[u8], sha256: &str) -> Result<Vec<u8>> {
    let mut doc: Value = serde_json::from_slice(doc).context("not an SBOM of kubedist's")?;
    let file_name = doc["name"].as_str().unwrap_or_default().to_string();
    doc["documentNamespace"] = json!(format!(
        "https://kubedist.invalid/spdx/{file_name}-{sha256}"
    ));
    let artifact = doc["packages"]
        .as_array_mut()
        .and_then(|p| p.iter_mut().find(|p| p["SPDXID"] == "SPDXRef-Artifact"))
        .context("an SBOM without its artifact")?;
    let unsigned = artifact["checksums"][0]["checksumValue"].clone();
    artifact["checksums"] = json!([{ "algorithm": "SHA256", "checksumValue": sha256 }]);
    artifact["comment"] = json!(format!(
        "signed by the repository that serves it; as dist wrote it, unsigned, its SHA-256 was {}",
        unsigned.as_str().unwrap_or_default()
    ));
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The Go program in file `i`: a package for the program (its build
/// information as `go version -m` prints it in the comment) and one per
/// module linked in.
fn go_packages(
    i: usize,
    go: &gobuild::GoBuild,
    version: &str,
    packages: &mut Vec<Value>,
    relationships: &mut Vec<Value>,
) {
    let id = format!("SPDXRef-Go-{i}");
    let path = go.path().unwrap_or("unknown");
    let modules = go.modules();
    let main_version = modules
        .iter()
        .find(|m| m.main && m.version != "(devel)")
        .map_or(version, |m| m.version.as_str());
    let note = if modules.is_empty() {
        "no module information: built outside module mode"
    } else {
        "the modules linked in are the packages it CONTAINS"
    };
    packages.push(json!({
        "SPDXID": id,
        "name": path,
        "versionInfo": main_version,
        "supplier": format!("Organization: {}", supplier_of(&format!("pkg:golang/{path}"))),
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": false,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "externalRefs": [purl_ref(&program_purl(path, &modules, main_version))],
        "comment": format!("Go build information ({note}):\n{}", go.text()),
    }));
    relationships.push(relationship("SPDXRef-Artifact", "CONTAINS", &id));
    relationships.push(relationship(&file_id(i), "GENERATED_FROM", &id));
    // The main module too, where it has a version (a module built as a
    // dependency of a generated main module, as the source builds do): it
    // is what the program's own code comes from, with its go.sum hash.
    for (k, m) in modules
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.main || m.version != "(devel)")
    {
        let module_id = format!("{id}-Module-{k}");
        let mut package = json!({
            "SPDXID": module_id,
            "name": m.path,
            "versionInfo": m.version,
            "supplier": format!("Organization: {}", supplier_of(&format!("pkg:golang/{}", m.path))),
            "downloadLocation": format!("https://proxy.golang.org/{}/@v/{}.zip", m.path, m.version),
            "filesAnalyzed": false,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "externalRefs": [purl_ref(&format!("pkg:golang/{}@{}", m.path, m.version))],
        });
        if let Some(sum) = &m.sum {
            package["comment"] = json!(format!("go.sum: {sum}"));
        }
        packages.push(package);
        relationships.push(relationship(&id, "CONTAINS", &module_id));
    }
}

/// The origins the file `f` came from: the images whose layer holds it
/// (base layers are shared); else one that yields its bytes under its
/// name; else one that yields its bytes (the stand-ins of test builds are
/// one program under several names).
fn origins_of(f: &Held, origins: &[Origin]) -> Vec<usize> {
    if let Some(blob) = f
        .path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(crate::layout::BLOBS))
        .and_then(|p| p.strip_prefix('/'))
        .and_then(|rest| rest.split_once('/'))
        .map(|(blob, _)| blob)
    {
        let images: Vec<usize> = (0..origins.len())
            .filter(|&o| origins[o].blobs.iter().any(|b| b == blob))
            .collect();
        if !images.is_empty() {
            return images;
        }
    }
    let base = f.path.rsplit('/').next().unwrap_or(&f.path);
    let yields = |o: &Origin, named: bool| {
        o.yields
            .iter()
            .any(|(name, sha)| *sha == f.sha256 && (!named || name == base))
    };
    origins
        .iter()
        .position(|o| yields(o, true))
        .or_else(|| origins.iter().position(|o| yields(o, false)))
        .into_iter()
        .collect()
}

fn file_id(i: usize) -> String {
    format!("SPDXRef-File-{i}")
}

/// An origin's id: from its name and digest, so that it does not depend
/// on which other origins a run has.
fn origin_id(origin: &Origin) -> String {
    let name: String = origin
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "SPDXRef-Origin-{name}-{}",
        &origin.sha256[..origin.sha256.len().min(12)]
    )
}

fn relationship(from: &str, kind: &str, to: &str) -> Value {
    json!({ "spdxElementId": from, "relationshipType": kind, "relatedSpdxElement": to })
}

/// The package URL of the Go program whose main package is `path`: the
/// module holding the package as the name, at its version, the package's
/// path inside it as the subpath (the purl spec's `golang` type:
/// `pkg:golang/k8s.io/kubernetes@v1.37.2#cmd/kubelet`), which is what
/// scanners match a module's advisories against. A main module built
/// outside a version (`(devel)`, as upstream's release builds are) takes
/// the `release` version of the upstream file.
fn program_purl(path: &str, modules: &[gobuild::Module], release: &str) -> String {
    let holder = modules
        .iter()
        .filter(|m| path == m.path || path.starts_with(&format!("{}/", m.path)))
        .max_by_key(|m| m.path.len());
    let Some(module) = holder else {
        return format!("pkg:golang/{path}@{release}");
    };
    let version = if module.version != "(devel)" {
        module.version.clone()
    } else if release.starts_with('v') {
        release.to_string()
    } else {
        format!("v{release}")
    };
    match path[module.path.len()..].trim_start_matches('/') {
        "" => format!("pkg:golang/{}@{version}", module.path),
        subpath => format!("pkg:golang/{}@{version}#{subpath}", module.path),
    }
}

fn purl_ref(purl: &str) -> Value {
    json!({ "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl })
}

/// Who publishes what a package URL names: a Go module's host and owner
/// (`github.com/spf13`), a crate's registry, else the URL's namespace.
fn supplier_of(purl: &str) -> String {
    let rest = purl.split_once(':').map_or(purl, |(_, r)| r);
    let (kind, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.split('@').next().unwrap_or(path);
    match kind {
        "cargo" => "crates.io".to_string(),
        "golang" => path.split('/').take(2).collect::<Vec<_>>().join("/"),
        _ => path.split('/').next().unwrap_or(path).to_string(),
    }
}

/// SPDX's package verification code: the SHA-1 of the files' SHA-1s,
/// sorted and concatenated.
fn verification_code(held: &[Held]) -> String {
    use sha1::Digest as _;
    let mut sums: Vec<&str> = held.iter().map(|f| f.sha1.as_str()).collect();
    sums.sort_unstable();
    crate::util::hex(&sha1::Sha1::digest(sums.concat().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_package_is_named_by_its_new_digest() {
        let doc = br#"{"name": "k.rpm", "documentNamespace": "https://kubedist.invalid/spdx/k.rpm-aaa",
            "packages": [{"SPDXID": "SPDXRef-Artifact", "checksums": [{"algorithm": "SHA256", "checksumValue": "aaa"}]}],
            "files": [{"SPDXID": "SPDXRef-File-0"}]}"#;
        let signed: Value = serde_json::from_slice(&for_signed(doc, "bbb").unwrap()).unwrap();
        assert_eq!(
            signed["documentNamespace"],
            "https://kubedist.invalid/spdx/k.rpm-bbb"
        );
        assert_eq!(
            signed["packages"][0]["checksums"][0]["checksumValue"],
            "bbb"
        );
        assert!(signed["packages"][0]["comment"]
            .as_str()
            .unwrap()
            .contains("aaa"));
        assert_eq!(signed["files"][0]["SPDXID"], "SPDXRef-File-0");
        assert!(for_signed(b"{}", "bbb").is_err());
    }

    #[test]
    fn a_go_program_is_named_by_the_module_holding_its_package() {
        let module = |path: &str, version: &str, main| gobuild::Module {
            path: path.into(),
            version: version.into(),
            sum: None,
            main,
        };
        // Upstream's release build: the main module without a version.
        let upstream = [
            module("k8s.io/kubernetes", "(devel)", true),
            module("k8s.io/api", "v0.34.5", false),
        ];
        assert_eq!(
            program_purl("k8s.io/kubernetes/cmd/kubectl", &upstream, "1.34.5"),
            "pkg:golang/k8s.io/kubernetes@v1.34.5#cmd/kubectl"
        );
        // A module build (as the source builds are): the module is a
        // dependency of a generated main module, at its version.
        let built = [
            module("kubedist.invalid/build", "(devel)", true),
            module("k8s.io/kubernetes", "v1.37.2", false),
            module("k8s.io/kubectl", "v0.37.2", false),
        ];
        assert_eq!(
            program_purl("k8s.io/kubernetes/cmd/kubelet", &built, "1.37.2"),
            "pkg:golang/k8s.io/kubernetes@v1.37.2#cmd/kubelet"
        );
        // The package at the module's root; no module information at all.
        let cni = [module(
            "github.com/containernetworking/plugins",
            "v1.10.0",
            true,
        )];
        assert_eq!(
            program_purl("github.com/containernetworking/plugins", &cni, "1.10.0"),
            "pkg:golang/github.com/containernetworking/plugins@v1.10.0"
        );
        assert_eq!(
            program_purl("example.com/tool", &[], "v2.0.0"),
            "pkg:golang/example.com/tool@v2.0.0"
        );
    }

    #[test]
    fn suppliers_come_from_the_package_url() {
        assert_eq!(
            supplier_of("pkg:golang/github.com/spf13/cobra@v1.8.0"),
            "github.com/spf13"
        );
        assert_eq!(
            supplier_of("pkg:golang/golang.org/x/sys@v0.1.0"),
            "golang.org/x"
        );
        assert_eq!(supplier_of("pkg:cargo/libc@0.2.1"), "crates.io");
        assert_eq!(
            supplier_of("pkg:generic/kubernetes/kubelet@1.34.2"),
            "kubernetes"
        );
    }
}
