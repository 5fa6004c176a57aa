//! An rpm's headers read through the `rpm` crate, guarded where rpm 0.30.2
//! fails on malformed input in ways other than an error, both found by the
//! `rpm` fuzz target:
//! - it allocates whatever size a header declares, 4 GiB for a 205-byte file
//!   (`fuzz/corpus/rpm/header-larger-than-the-file`), and whatever count of
//!   numbers an index entry declares (`entry-count-past-the-data`), so each
//!   header's size is checked against what the file holds, and each entry
//!   against its header's data, before the crate sees them, as rpm itself
//!   checks them;
//! - it panics on an index entry whose offset lies past the header's data
//!   (`entry-offset-past-the-data`): that check turns it into an error, and
//!   a panic left elsewhere becomes one too.
//!
//! Every reading of an rpm's headers in `repo` goes through here, and either
//! failure becomes an error naming the file, as any other bad input does.

use std::fs::File;
use std::io::{BufReader, Read};
use std::panic;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use rpm::PackageMetadata;

/// The lead's size, fixed by the format.
const LEAD_BYTES: usize = 96;
/// A header's intro: magic, version, reserved, entry count, data size.
const INTRO_BYTES: usize = 16;
const ENTRY_BYTES: u64 = 16;

/// The headers of the rpm at `path`.
pub fn read(path: &Path) -> Result<PackageMetadata> {
    File::open(path)
        .and_then(|file| Ok((file.metadata()?.len(), file)))
        .map_err(anyhow::Error::from)
        .and_then(|(len, file)| parse_bounded(BufReader::new(file), len))
        .with_context(|| format!("{}: not a readable rpm", path.display()))
}

/// The headers of the rpm `data` holds.
pub fn parse(data: &[u8]) -> Result<PackageMetadata> {
    parse_bounded(data, data.len() as u64)
}

fn parse_bounded(reader: impl Read, file_len: u64) -> Result<PackageMetadata> {
    let headers = header_bytes(reader, file_len)?;
    // The panic's own message would be a second, misleading error line.
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let parsed = panic::catch_unwind(|| PackageMetadata::parse(&mut &headers[..]));
    panic::set_hook(hook);
    match parsed {
        Ok(parsed) => parsed.map_err(|e| anyhow!("{e}")),
        Err(_) => Err(anyhow!("malformed headers")),
    }
}

/// The lead, the signature header with its padding and the header, each
/// header's declared size checked against the `file_len` bytes there are.
fn header_bytes(mut reader: impl Read, file_len: u64) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut take = |bytes: &mut Vec<u8>, count: u64| -> Result<()> {
        if bytes.len() as u64 + count > file_len {
            bail!("headers larger than the file ({file_len} bytes)");
        }
        let start = bytes.len();
        bytes.resize(start + count as usize, 0);
        reader
            .read_exact(&mut bytes[start..])
            .context("headers cut short")
    };
    take(&mut bytes, LEAD_BYTES as u64)?;
    for signature in [true, false] {
        let intro = bytes.len();
        take(&mut bytes, INTRO_BYTES as u64)?;
        let (entries, data) = (be_u32(&bytes, intro + 8), be_u32(&bytes, intro + 12));
        // The signature header is padded to 8 bytes; the header is not.
        let padding = if signature { (8 - data % 8) % 8 } else { 0 };
        let index = intro + INTRO_BYTES;
        take(&mut bytes, entries * ENTRY_BYTES + data + padding)?;
        let index = &bytes[index..index + (entries * ENTRY_BYTES) as usize];
        for entry in index.chunks_exact(ENTRY_BYTES as usize) {
            check_entry(entry, data)?;
        }
    }
    Ok(bytes)
}

/// An index entry (tag, type, offset, count) whose items lie inside its
/// header's `data` bytes, each string at least its terminating NUL.
fn check_entry(entry: &[u8], data: u64) -> Result<()> {
    let (kind, offset, count) = (be_u32(entry, 4), be_u32(entry, 8), be_u32(entry, 12));
    let item_bytes = match kind {
        0 => 0,             // null
        1 | 2 | 6..=9 => 1, // char, int8, string, bin, string array, i18n string
        3 => 2,             // int16
        4 => 4,             // int32
        5 => 8,             // int64
        _ => bail!("malformed headers: an index entry of type {kind}"),
    };
    if offset + count * item_bytes > data {
        bail!("malformed headers: an index entry reaches past its header's data");
    }
    Ok(())
}

/// The big-endian 32-bit number at `at`, widened so that sums of them
/// cannot overflow.
fn be_u32(bytes: &[u8], at: usize) -> u64 {
    u64::from(u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `parse` gives for `data`, which it must refuse (`what`
    /// says what that input is, if it is accepted).
    fn refusal(data: &[u8], what: &str) -> String {
        match parse(data) {
            Ok(_) => panic!("{what} was accepted"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn headers_that_make_the_crate_panic_are_an_error() {
        let data = include_bytes!("../../../fuzz/corpus/rpm/entry-offset-past-the-data");
        assert_eq!(
            refusal(data, "headers that make the crate panic"),
            "malformed headers: an index entry reaches past its header's data"
        );
        // The same file's good headers parse.
        let good = include_bytes!("../../../fuzz/corpus/rpm/kubeadm-signed-headers");
        assert!(parse(good).is_ok());
    }

    #[test]
    fn a_header_larger_than_the_file_is_refused_before_it_is_read() {
        let data = include_bytes!("../../../fuzz/corpus/rpm/header-larger-than-the-file");
        assert_eq!(
            refusal(data, "a header declaring 4 GiB in a 205-byte file"),
            "headers larger than the file (205 bytes)"
        );
    }

    #[test]
    fn an_entry_counting_more_numbers_than_its_data_holds_is_refused() {
        let data = include_bytes!("../../../fuzz/corpus/rpm/entry-count-past-the-data");
        assert_eq!(
            refusal(data, "an entry declaring 8 GiB of numbers"),
            "malformed headers: an index entry reaches past its header's data"
        );
    }

    #[test]
    fn a_real_rpm_reads_whole() {
        let good = include_bytes!("../../../fuzz/corpus/rpm/kubelet-headers");
        let meta = parse(good).unwrap();
        assert_eq!(meta.get_name().unwrap(), "kubelet");
        // The headers are the file's start; a file cut inside them is refused.
        let cut = &good[..good.len() - 1];
        assert!(parse(cut).is_err());
    }
}
