//! The codec floor: the time to compress the same bytes as dist with the
//! same codecs, levels and encoders on every CPU, and nothing else: no files,
//! no archive framing, no digests, no metadata.
//!
//! The bytes are dist's own uncompressed streams, unpacked from its
//! artifacts: each deb's data.tar, each rpm's cpio payload, the tarball's
//! tar. (The control archives, a few KiB each, are left out.) They are
//! compressed in memory with dist's schedule: in the same order, as many at
//! once and as many encoder threads each as dist uses.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::measure::{self, Sample};
use crate::emit;
use crate::emit::codec::{self, Codec, Codecs};
use crate::spec::{BranchFilter, Spec};

/// One uncompressed stream of an artifact.
pub struct Stream {
    name: String,
    codec: Codec,
    bytes: Vec<u8>,
}

pub struct Floor {
    pub sample: Sample,
    pub streams: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// The uncompressed streams of the artifacts in `dist`, each with the codec
/// dist compressed it with (a deb's or rpm's with its package's branch
/// filter).
pub fn streams(spec: &Spec, dist: &Path, codecs: &Codecs) -> Result<Vec<Stream>> {
    let mut out = Vec::new();
    for (path, name) in super::artifacts(dist)? {
        if name.ends_with(".deb") {
            out.extend(deb_stream(spec, &path, &name, codecs)?);
        } else if name.ends_with(".rpm") {
            let cpio = Command::new("rpm2cpio")
                .arg(&path)
                .output()
                .context("running rpm2cpio")?;
            // rpm 4.18's rpm2cpio exits 1 when the header has no
            // (LONG)ARCHIVESIZE tag, which the rpm crate does not write (rpm
            // and dnf do not need it): judge by what it wrote instead.
            if !cpio.stdout.starts_with(b"070701") {
                bail!(
                    "rpm2cpio {}: {}",
                    path.display(),
                    String::from_utf8_lossy(&cpio.stderr).trim()
                );
            }
            out.push(Stream {
                codec: codecs
                    .of(emit::rpm::NAME)
                    .with_filter(package_filter(spec, &name)),
                name,
                bytes: cpio.stdout,
            });
        } else if [".tar.gz", ".tar.xz", ".tar.zst"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            let data = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let tar = decompress(&name, &data).with_context(|| name.clone())?;
            out.push(Stream {
                name,
                codec: codecs.of(emit::tarball::NAME),
                bytes: tar,
            });
        }
    }
    Ok(out)
}

/// The data archive of the deb at `path` (named `name`), uncompressed, with
/// the codec dist compressed it with: the deb codec and its package's branch
/// filter.
fn deb_stream(spec: &Spec, path: &Path, name: &str, codecs: &Codecs) -> Result<Option<Stream>> {
    let mut ar = ar::Archive::new(
        fs::File::open(path).with_context(|| format!("reading {}", path.display()))?,
    );
    while let Some(entry) = ar.next_entry() {
        let mut entry = entry.with_context(|| format!("reading {}", path.display()))?;
        let member = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        if member.starts_with("data.tar") {
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .with_context(|| format!("reading {name}: {member}"))?;
            let tar = decompress(&member, &data).with_context(|| format!("{name}: {member}"))?;
            return Ok(Some(Stream {
                name: name.to_string(),
                codec: codecs
                    .of(emit::deb::NAME)
                    .with_filter(package_filter(spec, name)),
                bytes: tar,
            }));
        }
    }
    Ok(None)
}

/// The branch filter of the package file `name` (`NAME_VERSION_ARCH.deb`,
/// `NAME-VERSION-RELEASE.ARCH.rpm`): its package's for its architecture.
fn package_filter(spec: &Spec, name: &str) -> Option<BranchFilter> {
    let (package, arch) = match name.strip_suffix(".deb") {
        Some(deb) => {
            let mut parts = deb.split('_');
            (parts.next()?, parts.nth(1)?)
        }
        None => {
            let (nvr, arch) = name.strip_suffix(".rpm")?.rsplit_once('.')?;
            let mut parts = nvr.rsplitn(3, '-');
            (parts.nth(2)?, arch)
        }
    };
    let package = spec.packages.iter().find(|p| p.name == package)?;
    package.xz_filter(arch.parse().ok()?)
}

/// What a package's branch filter does to its deb: the data stream's size
/// through the deb codec with the filter and without.
pub struct FilterEffect {
    pub deb: String,
    pub filter: BranchFilter,
    pub with: u64,
    pub without: u64,
}

/// The branch filters' effect on the debs in `dist` whose package has one.
pub fn filter_effect(spec: &Spec, dist: &Path, codecs: &Codecs) -> Result<Vec<FilterEffect>> {
    let mut rows = Vec::new();
    for (path, name) in super::artifacts(dist)? {
        if !name.ends_with(".deb") || package_filter(spec, &name).is_none() {
            continue;
        }
        let Some(stream) = deb_stream(spec, &path, &name, codecs)? else {
            continue;
        };
        let Some(filter) = stream.codec.filter else {
            continue;
        };
        let size = |codec: Codec| -> Result<u64> {
            let threads = measure::cpus() as u32;
            Ok(codec::compress(codec, threads, &stream.bytes)
                .with_context(|| format!("compressing {}'s stream", stream.name))?
                .len() as u64)
        };
        rows.push(FilterEffect {
            with: size(stream.codec)?,
            without: size(stream.codec.with_filter(None))?,
            deb: stream.name,
            filter,
        });
    }
    Ok(rows)
}

fn decompress(name: &str, data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if name.ends_with(".xz") {
        xz2::read::XzDecoder::new(data).read_to_end(&mut out)?;
    } else if name.ends_with(".zst") {
        out = zstd::stream::decode_all(data)?;
    } else if name.ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out)?;
    } else {
        bail!("{name}: unknown compression");
    }
    Ok(out)
}

/// Compresses `streams` as dist would schedule them and times it.
pub fn run(streams: &[Stream]) -> Result<Floor> {
    let (workers, threads) = crate::schedule::workers(measure::cpus(), streams.len(), None);
    let mut order: Vec<&Stream> = streams.iter().collect();
    // A long window is compressed on one thread: those streams start first, as in dist.
    order.sort_by_key(|s| crate::schedule::start_order(s.codec.long, s.bytes.len() as u64));
    let next = AtomicUsize::new(0);
    let sizes: Mutex<Vec<Result<u64>>> = Mutex::new(Vec::new());
    let (_, sample) = measure::in_process(|| {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let Some(stream) = order.get(next.fetch_add(1, Ordering::SeqCst)) else {
                        return;
                    };
                    let size = codec::compress(stream.codec, threads, &stream.bytes)
                        .map(|c| c.len() as u64)
                        .with_context(|| format!("compressing {}'s stream", stream.name));
                    if let Ok(mut v) = sizes.lock() {
                        v.push(size);
                    }
                });
            }
        });
        Ok(())
    })?;
    let sizes = sizes
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a compressor thread panicked"))?;
    if sizes.len() != streams.len() {
        bail!("a compressor thread panicked");
    }
    let bytes_out = sizes.into_iter().sum::<Result<u64>>()?;
    Ok(Floor {
        sample,
        streams: streams.len(),
        bytes_in: streams.iter().map(|s| s.bytes.len() as u64).sum(),
        bytes_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deb's and an rpm's file name lead to their package's filter for
    /// their architecture (pkg/*.toml: the one-program packages, amd64).
    #[test]
    fn debs_and_rpms_take_their_packages_branch_filter() {
        let spec = Spec::load(&crate::util::repo_root()).unwrap();
        for (name, filter) in [
            ("kubelet_1.37.2-1_amd64.deb", Some(BranchFilter::X86)),
            ("kubelet-1.37.2-1.x86_64.rpm", Some(BranchFilter::X86)),
            ("cri-tools-1.37.0-1.x86_64.rpm", Some(BranchFilter::X86)),
            ("kubernetes-cni-1.10.0-1.x86_64.rpm", None),
            ("kubelet-1.37.2-1.aarch64.rpm", None),
            ("kubelet_1.37.2-1_arm64.deb", None),
        ] {
            assert_eq!(package_filter(&spec, name), filter, "{name}");
        }
    }
}
