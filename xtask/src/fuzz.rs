//! What the fuzz targets (`fuzz/`) run: the readers of the files an
//! attacker controls most, on bytes. `repo --from` reads a dist directory
//! someone else may have written (its SHA256SUMS, each deb's control data,
//! each rpm's headers through the `rpm` crate); `dist --from` reads an OCI
//! image layout of the images kubeadm pulls. Each reader must refuse bad
//! input with an error, never panic, hang or exhaust memory.

use std::path::Path;

use crate::repo::{closure, debfile, incoming, rpmfile};

/// `SHA256SUMS` as `repo --from` parses it.
pub fn sha256sums(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = incoming::parse_sha256sums(text);
    }
}

/// A `.deb` as `repo` reads it: the control member found and unpacked, the
/// control file parsed, its relations read for the dependency gate.
pub fn deb(data: &[u8]) {
    let Ok(text) = debfile::control_text(data) else {
        return;
    };
    if let Ok(control) = debfile::Control::parse(&text) {
        let _ = closure::deb_pkg(Path::new("fuzz.deb"), &control);
    }
}

/// An rpm's lead, signature header and header as `repo` reads them: the
/// package's name, version, dependencies and files, and who signed it.
pub fn rpm(data: &[u8]) {
    let Ok(meta) = rpmfile::parse(data) else {
        return;
    };
    let _ = closure::rpm_pkg(Path::new("fuzz.rpm"), &meta);
    if let Ok(signatures) = meta.signatures() {
        for signature in signatures {
            let _ = signature.fingerprint();
        }
    }
}

/// An OCI image layout as `dist --from` stages its images for amd64:
/// `data` is the layout's files, separated by [`LAYOUT_SEPARATOR`]: first
/// `index.json`, then blobs, each stored under its own sha256 (so a seed
/// made from a real layout keeps its digests, and mutations of
/// `index.json` reach every reader below it).
pub fn images_layout(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let mut parts = split(data, LAYOUT_SEPARATOR);
    let index = parts.next().unwrap_or_default();
    let blobs = dir.path().join(crate::layout::BLOBS);
    if std::fs::create_dir_all(&blobs).is_err()
        || std::fs::write(dir.path().join(crate::layout::INDEX), index).is_err()
    {
        return;
    }
    for blob in parts {
        let name = crate::digest::sha256_bytes(blob);
        if std::fs::write(blobs.join(name), blob).is_err() {
            return;
        }
    }
    let images = [crate::spec::Image {
        reference: "registry.k8s.io/pause:3.10.2".into(),
        worker: true,
        index: None,
        record: None,
        unrecorded: None,
    }];
    let _ = crate::stage::images::stage(dir.path(), &images, crate::spec::Arch::Amd64);
}

/// Separates the files of an [`images_layout`] input.
pub const LAYOUT_SEPARATOR: &[u8] = b"\n--kubedist-fuzz-blob--\n";

/// `data` split at every `separator`.
fn split<'a>(data: &'a [u8], separator: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let now = rest?;
        match memchr::memmem::find(now, separator) {
            Some(at) => {
                rest = Some(&now[at + separator.len()..]);
                Some(&now[..at])
            }
            None => {
                rest = None;
                Some(now)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_input_splits_into_its_files() {
        let input = [b"{}".as_slice(), b"a", b""].join(LAYOUT_SEPARATOR);
        let parts: Vec<&[u8]> = split(&input, LAYOUT_SEPARATOR).collect();
        assert_eq!(parts, vec![b"{}".as_slice(), b"a", b""]);
    }
}
