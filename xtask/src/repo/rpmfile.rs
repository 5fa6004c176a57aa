//! An rpm's headers read through the `rpm` crate, guarded: rpm 0.30.2
//! panics on some malformed headers where it should return an error (an
//! index entry whose offset lies past the header's data, found by the
//! `rpm` fuzz target: `fuzz/corpus/rpm/entry-offset-past-the-data`). Every
//! reading of an rpm's headers in `repo` goes through here, and a panic
//! becomes an error naming the file, as any other bad input does.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::panic;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use rpm::PackageMetadata;

/// The headers of the rpm at `path`.
pub fn read(path: &Path) -> Result<PackageMetadata> {
    File::open(path)
        .map_err(anyhow::Error::from)
        .and_then(|file| parse(BufReader::new(file)))
        .with_context(|| format!("{}: not a readable rpm", path.display()))
}

/// The headers of the rpm `reader` holds.
pub fn parse(mut reader: impl BufRead) -> Result<PackageMetadata> {
    // The panic's own message would be a second, misleading error line.
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let parsed = panic::catch_unwind(panic::AssertUnwindSafe(|| {
        PackageMetadata::parse(&mut reader)
    }));
    panic::set_hook(hook);
    match parsed {
        Ok(parsed) => parsed.map_err(|e| anyhow!("{e}")),
        Err(_) => Err(anyhow!("malformed headers")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_that_make_the_crate_panic_are_an_error() {
        let data = include_bytes!("../../../fuzz/corpus/rpm/entry-offset-past-the-data");
        let Err(err) = parse(&data[..]) else {
            panic!("headers that make the crate panic were accepted");
        };
        assert_eq!(err.to_string(), "malformed headers");
        // The same file's good headers parse.
        let good = include_bytes!("../../../fuzz/corpus/rpm/kubeadm-signed-headers");
        assert!(parse(&good[..]).is_ok());
    }
}
