//! Small releases shaped like kubedist's, for the repository bench and
//! tests: a dist-like directory (`.deb`, `.rpm`, `SHA256SUMS`) with
//! kubelet, kubeadm, kubectl, cri-tools and kubernetes-cni per
//! architecture, their names, versions and dependencies as `pkg/` gives
//! them, and a small incompressible payload each. Written directly (no
//! staging, no dist), so that a year of releases takes seconds.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Debian's and rpm's names of the four architectures.
pub const ARCHES: &[(&str, &str)] = &[
    ("amd64", "x86_64"),
    ("arm64", "aarch64"),
    ("ppc64el", "ppc64le"),
    ("s390x", "s390x"),
];

/// Bytes of payload per package.
const PAYLOAD: usize = 16 * 1024;

/// One package: name, version, deb dependencies, rpm dependencies
/// (`name` or `name >= version`).
type Synth = (
    &'static str,
    String,
    &'static [&'static str],
    &'static [&'static str],
);

/// Kubernetes `1.<minor>.<patch>` as a dist directory in `dir` (replaced),
/// for `arches` (indices into [`ARCHES`]).
pub fn release(dir: &Path, minor: u32, patch: u32, arches: &[usize], epoch: u64) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let k8s = format!("1.{minor}.{patch}");
    let packages: [Synth; 5] = [
        (
            "kubelet",
            k8s.clone(),
            &[
                "iptables (>= 1.4.21)",
                "kubernetes-cni (>= 1.2.0)",
                "util-linux",
                "mount",
            ],
            &[
                "iptables >= 1.4.21",
                "kubernetes-cni >= 1.2.0",
                "util-linux",
            ],
        ),
        ("kubeadm", k8s.clone(), &["conntrack"], &["conntrack-tools"]),
        ("kubectl", k8s, &[], &[]),
        ("cri-tools", format!("1.{minor}.0"), &[], &[]),
        ("kubernetes-cni", "1.8.0".into(), &[], &[]),
    ];
    let mut sums = String::new();
    for &a in arches {
        let (deb_arch, rpm_arch) = ARCHES[a];
        for (name, version, deb_deps, rpm_deps) in &packages {
            let payload = payload(&format!("{name} {version} {deb_arch}"));
            let deb = format!("{name}_{version}-1_{deb_arch}.deb");
            let rpm = format!("{name}-{version}-1.{rpm_arch}.rpm");
            let package = |arch, deps| Synthetic {
                name,
                version,
                arch,
                deps,
                payload: &payload,
                epoch,
            };
            let files = [
                (deb, write_deb(&package(deb_arch, deb_deps))?),
                (rpm, write_rpm(&package(rpm_arch, rpm_deps))?),
            ];
            for (file, bytes) in files {
                crate::util::write_bytes_atomic(&dir.join(&file), &bytes, 0o644)?;
                writeln!(
                    sums,
                    "{}  {file}",
                    crate::util::hex(&Sha256::digest(&bytes))
                )?;
            }
        }
    }
    crate::util::write_bytes_atomic(&dir.join("SHA256SUMS"), sums.as_bytes(), 0o644)
}

/// Incompressible bytes that depend on `seed` only (xorshift over its hash).
fn payload(seed: &str) -> Vec<u8> {
    let h = Sha256::digest(seed.as_bytes());
    let mut x = u64::from_le_bytes(h[..8].try_into().expect("8 bytes")) | 1;
    let mut out = Vec::with_capacity(PAYLOAD);
    while out.len() < PAYLOAD {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// One synthetic package of one family.
struct Synthetic<'a> {
    name: &'a str,
    version: &'a str,
    arch: &'a str,
    deps: &'a [&'a str],
    payload: &'a [u8],
    epoch: u64,
}

fn write_deb(p: &Synthetic) -> Result<Vec<u8>> {
    let (name, payload, epoch) = (p.name, p.payload, p.epoch);
    let mut control = format!(
        "Package: {name}\nVersion: {}-1\nArchitecture: {}\n\
         Maintainer: kubedist <kubedist@example.invalid>\nInstalled-Size: {}\n",
        p.version,
        p.arch,
        payload.len().div_ceil(1024)
    );
    if !p.deps.is_empty() {
        writeln!(control, "Depends: {}", p.deps.join(", "))?;
    }
    control.push_str(
        "Section: admin\nPriority: optional\nHomepage: https://kubernetes.io\n\
         Description: synthetic kubedist package\n A small stand-in for the repository bench.\n",
    );
    let control_tar = targz(&[("./control", control.as_bytes(), 0o644)], epoch)?;
    let path = format!("./usr/bin/{name}");
    let data_tar = targz(&[(path.as_str(), payload, 0o755)], epoch)?;
    let members: [(&str, &[u8]); 3] = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", &control_tar),
        ("data.tar.gz", &data_tar),
    ];
    Ok(crate::archive::ar(&members, epoch, Vec::new())?)
}

fn targz(entries: &[(&str, &[u8], u32)], epoch: u64) -> Result<Vec<u8>> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, bytes, mode) in entries {
        let item = crate::archive::Item::Bytes(bytes.to_vec(), *mode);
        crate::archive::append_tar(&mut tar, path, &item, epoch)?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    Ok(gz.finish()?)
}

fn write_rpm(p: &Synthetic) -> Result<Vec<u8>> {
    let (name, version, arch) = (p.name, p.version, p.arch);
    let epoch = u32::try_from(p.epoch).context("SOURCE_DATE_EPOCH beyond 2106")?;
    let mut b = rpm::PackageBuilder::new(
        name,
        version,
        "Apache-2.0",
        arch,
        "synthetic kubedist package",
    );
    b.using_config(
        rpm::BuildConfig::v4()
            .compression(rpm::CompressionWithLevel::Gzip(6))
            .source_date(epoch),
    );
    b.release("1")
        .description("A small stand-in for the repository bench.")
        .build_host("kubedist.invalid");
    for dep in p.deps {
        b.requires(match dep.split_once(" >= ") {
            Some((n, v)) => rpm::Dependency::greater_eq(n, v),
            None => rpm::Dependency::any(*dep),
        });
    }
    b.with_file_contents(
        p.payload.to_vec(),
        rpm::FileOptions::new(format!("/usr/bin/{name}"))
            .permissions(0o755)
            .modified_at(rpm::Timestamp(epoch)),
    )?;
    let pkg = b
        .build()
        .with_context(|| format!("building {name} {version} {arch}"))?;
    let mut out = Vec::new();
    pkg.write(&mut out)?;
    Ok(out)
}
