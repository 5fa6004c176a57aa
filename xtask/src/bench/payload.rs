//! The bench's input: a `--from` directory laid out like the official
//! downloads, holding Go-like binaries of realistic sizes.
//!
//! Real ELF files come from the fixtures (Debian's kubectl and CNI plugins).
//! kubelet, kubeadm and crictl, which Debian does not ship, are synthesised
//! from those real bytes: runs of 1-4 MiB copied from random places of the
//! real binaries, each run XORed with its own byte. A XOR with a constant is
//! a bijection on bytes, so inside a run the codecs find the same matches and
//! the same symbol statistics as in the real binary (they compress like Go
//! binaries, not like zeros or random data), while no run repeats another
//! that the codec could match across. The generator is seeded by file name:
//! the same sizes give the same bytes.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::digest::sha256_bytes;
use crate::fetch::is_archive;
use crate::inputs::from_dir;
use crate::spec::{Arch, Spec};

const MIB: usize = 1 << 20;

/// Sizes, in MiB, of what is synthesised; `None` keeps the real file.
pub struct Sizes {
    pub kubelet: usize,
    pub kubeadm: usize,
    pub crictl: usize,
    /// Synthesise kubectl too (for a small payload).
    pub kubectl: Option<usize>,
    /// Synthesise this many CNI plugins of 1 MiB (for a small payload).
    pub cni: Option<usize>,
}

impl Sizes {
    /// About 250 MiB: real kubectl (36 MiB) and CNI plugins (42 MiB), the
    /// rest the size of upstream's.
    pub const FULL: Sizes = Sizes {
        kubelet: 80,
        kubeadm: 60,
        crictl: 30,
        kubectl: None,
        cni: None,
    };
    /// About 25 MiB, everything synthesised.
    pub const QUICK: Sizes = Sizes {
        kubelet: 8,
        kubeadm: 6,
        crictl: 3,
        kubectl: Some(4),
        cni: Some(4),
    };
}

/// What went into the payload of one architecture: `(package file, bytes,
/// real or synthesised)`.
pub struct Payload {
    pub dir: PathBuf,
    pub arch: Arch,
    pub files: Vec<(String, u64, &'static str)>,
}

impl Payload {
    pub fn total(&self) -> u64 {
        self.files.iter().map(|f| f.1).sum()
    }
}

/// The fixtures directory `fixtures` as a payload of its own: every input
/// file as it is, real (Debian's kubectl and CNI plugins) or a stand-in
/// (listed in its STANDINS: `source/name`, then the architectures it
/// stands in for when not all).
pub fn real(spec: &Spec, fixtures: &Path, arch: Arch) -> Result<Payload> {
    let standins = fs::read_to_string(fixtures.join(from_dir::STANDINS))
        .with_context(|| format!("reading {}/STANDINS", fixtures.display()))?;
    listed(spec, fixtures, arch, |name| {
        let standin = |line: &str| {
            let mut words = line.split_whitespace();
            let member = words
                .next()
                .unwrap_or("#")
                .rsplit('/')
                .next()
                .unwrap_or("#");
            let arches: Vec<&str> = words.collect();
            !line.starts_with('#')
                && name.starts_with(member)
                && (arches.is_empty() || arches.contains(&arch.go_name()))
        };
        if standins.lines().any(standin) {
            "stand-in"
        } else {
            "real"
        }
    })
}

/// The release's real programs for each of `arches`, built from their Go
/// modules at the pinned versions (`cargo xtask source`, cached in the home
/// directory) into the `--from` directory `dir`: one directory for all, as
/// a mirror of the official servers holds every architecture (a run of one
/// then finds the host's programs for the shell completions there).
pub fn source(spec: &Spec, arches: &[Arch], dir: &Path) -> Result<Vec<Payload>> {
    let go = crate::source::Go::from_env(&spec.root)?;
    crate::source::write_inputs(spec, &go, arches, Default::default(), dir)?;
    arches
        .iter()
        .map(|&arch| listed(spec, dir, arch, |_| "built from source"))
        .collect()
}

/// The input files of `arch` in the `--from` directory `dir` (those
/// pkg/release.toml lists, without their checksum files), each said to be
/// `how(name)`.
fn listed(
    spec: &Spec,
    dir: &Path,
    arch: Arch,
    how: impl Fn(&str) -> &'static str,
) -> Result<Payload> {
    let mut files = Vec::new();
    for (source, release) in &spec.release.sources {
        for path in release.paths(arch) {
            let file = dir.join(source).join(&path);
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            let len = fs::metadata(&file)
                .with_context(|| format!("{}: missing", file.display()))?
                .len();
            files.push((name.clone(), len, how(&name)));
        }
    }
    files.sort();
    Ok(Payload {
        dir: dir.to_path_buf(),
        arch,
        files,
    })
}

/// Writes the `--from` directory `dir` from the fixtures directory
/// `fixtures` (which must hold `arch`).
pub fn write(
    spec: &Spec,
    fixtures: &Path,
    arch: Arch,
    sizes: &Sizes,
    dir: &Path,
) -> Result<Payload> {
    let k8s = spec.kubernetes();
    let kube_path = |name: &str| -> Result<String> {
        k8s.paths(arch)
            .into_iter()
            .find(|p| p.rsplit('/').next() == Some(name))
            .with_context(|| format!("pkg/release.toml: no {name} in [sources.kubernetes]"))
    };
    let single = |source: &str| -> Result<String> {
        let s = spec
            .release
            .sources
            .get(source)
            .with_context(|| format!("pkg/release.toml: no [sources.{source}]"))?;
        s.paths(arch)
            .into_iter()
            .find(|p| is_archive(p))
            .with_context(|| format!("pkg/release.toml: no archive in [sources.{source}]"))
    };
    let kubectl_rel = format!("kubernetes/{}", kube_path("kubectl")?);
    let cni_rel = format!("cni-plugins/{}", single("cni-plugins")?);

    // The real binaries: the corpus to synthesise from.
    let kubectl = fs::read(fixtures.join(&kubectl_rel))
        .with_context(|| format!("reading {}", fixtures.join(&kubectl_rel).display()))?;
    let cni = untar_gz(&fixtures.join(&cni_rel))?;
    let mut corpus = kubectl.clone();
    for (_, data) in &cni {
        corpus.extend_from_slice(data);
    }
    if corpus.len() < 8 * MIB {
        bail!(
            "{}: too little real binary data to synthesise from",
            fixtures.display()
        );
    }

    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    let put = |rel: &str, bytes: &[u8]| -> Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let sum = format!("{}  {name}\n", sha256_bytes(bytes));
        fs::write(dir.join(format!("{rel}.sha256")), sum)
            .with_context(|| format!("writing {rel}.sha256"))?;
        Ok(())
    };

    for name in ["kubelet", "kubeadm"] {
        let size = if name == "kubelet" {
            sizes.kubelet
        } else {
            sizes.kubeadm
        };
        let bytes = synthesise(&corpus, size * MIB, name);
        files.push((name.to_string(), bytes.len() as u64, "synthesised"));
        put(&format!("kubernetes/{}", kube_path(name)?), &bytes)?;
    }
    let kubectl = match sizes.kubectl {
        Some(mib) => {
            let bytes = synthesise(&corpus, mib * MIB, "kubectl");
            files.push(("kubectl".into(), bytes.len() as u64, "synthesised"));
            bytes
        }
        None => {
            files.push(("kubectl".into(), kubectl.len() as u64, "real (Debian)"));
            kubectl
        }
    };
    put(&kubectl_rel, &kubectl)?;

    let crictl = synthesise(&corpus, sizes.crictl * MIB, "crictl");
    files.push(("crictl".into(), crictl.len() as u64, "synthesised"));
    put(
        &format!("cri-tools/{}", single("cri-tools")?),
        &tgz(&[("crictl".to_string(), crictl)], false)?,
    )?;

    let plugins: Vec<(String, Vec<u8>)> = match sizes.cni {
        Some(n) => cni
            .iter()
            .take(n)
            .map(|(name, _)| (name.clone(), synthesise(&corpus, MIB, name)))
            .collect(),
        None => cni,
    };
    let how = if sizes.cni.is_some() {
        "synthesised"
    } else {
        "real (Debian)"
    };
    files.push((
        format!("CNI plugins ({})", plugins.len()),
        plugins.iter().map(|p| p.1.len() as u64).sum(),
        how,
    ));
    let members: Vec<(String, Vec<u8>)> = plugins
        .into_iter()
        .map(|(n, d)| (format!("./{}", n.trim_start_matches("./")), d))
        .collect();
    put(&cni_rel, &tgz(&members, true)?)?;

    let standins = fixtures.join(from_dir::STANDINS);
    fs::copy(&standins, dir.join(from_dir::STANDINS))
        .with_context(|| format!("copying {}", standins.display()))?;
    fs::write(
        dir.join(from_dir::README),
        "kubedist bench input: NOT an upstream release. kubectl and the CNI plugins\n\
         are Debian's real binaries (or, for a small payload, synthesised like the\n\
         rest); kubelet, kubeadm and crictl are synthesised from real ELF bytes\n\
         and do not run. Written by `cargo xtask bench`.\n",
    )
    .context("writing the bench README")?;
    Ok(Payload {
        dir: dir.to_path_buf(),
        arch,
        files,
    })
}

/// `size` bytes that compress like the Go binaries in `corpus`.
pub fn synthesise(corpus: &[u8], size: usize, seed: &str) -> Vec<u8> {
    let mut rng = SplitMix(seed.bytes().fold(0x6b75_6265_6469_7374, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }));
    let mut out = Vec::with_capacity(size);
    // An ELF header and program headers, as the file command expects.
    out.extend_from_slice(&corpus[..corpus.len().min(size).min(4096)]);
    while out.len() < size {
        let len = (MIB + (rng.next() as usize % (3 * MIB))).min(size - out.len());
        let start = rng.next() as usize % (corpus.len() - len.min(corpus.len()) + 1);
        let key = (rng.next() % 255) as u8 + 1;
        out.extend(
            corpus[start..start + len.min(corpus.len())]
                .iter()
                .map(|b| b ^ key),
        );
    }
    out.truncate(size);
    out
}

/// splitmix64: small, fast, and the same on every machine.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The regular files of a .tar.gz, `(name without ./, bytes)`, in order.
fn untar_gz(path: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let file = fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut out = Vec::new();
    for entry in archive
        .entries()
        .with_context(|| format!("reading {}", path.display()))?
    {
        let mut entry = entry.with_context(|| format!("reading {}", path.display()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes())
            .trim_start_matches("./")
            .to_string();
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .with_context(|| format!("reading {name} in {}", path.display()))?;
        out.push((name, data));
    }
    Ok(out)
}

/// A .tar.gz of `members` laid out like the release tarballs, quickly.
fn tgz(members: &[(String, Vec<u8>)], dot_dir: bool) -> Result<Vec<u8>> {
    let members: Vec<(String, &[u8])> = members
        .iter()
        .map(|(n, d)| (n.clone(), d.as_slice()))
        .collect();
    crate::archive::release_tgz(&members, dot_dir, 0, flate2::Compression::fast())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthesis_is_deterministic_and_sized() {
        let corpus: Vec<u8> = (0..5 * MIB).map(|i| (i * 7 % 253) as u8).collect();
        let a = synthesise(&corpus, 3 * MIB + 5, "kubelet");
        assert_eq!(a.len(), 3 * MIB + 5);
        assert!(a == synthesise(&corpus, 3 * MIB + 5, "kubelet"));
        assert!(a != synthesise(&corpus, 3 * MIB + 5, "kubeadm"));
        assert_eq!(&a[..4096], &corpus[..4096]);
    }
}
