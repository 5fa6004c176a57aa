//! Published checksums (`FILE.sha256` / `FILE.sha512`) and hashing: the
//! one place that hashes files, for fetch, stage, emit, the cache and the
//! repository's indices.

use crate::util::hex;
use std::io::{Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use md5::Md5;
use sha2::{Digest, Sha256, Sha512};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    Sha256,
    Sha512,
}

impl Algo {
    /// The extension of the checksum file published beside a file.
    pub fn ext(self) -> &'static str {
        match self {
            Algo::Sha256 => "sha256",
            Algo::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Algo::Sha256 => 64,
            Algo::Sha512 => 128,
        }
    }
}

/// A checksum as published beside a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub algo: Algo,
    /// Lower-case hex.
    pub hex: String,
}

impl Published {
    /// Parses a checksum file: bare hex, or `hex  filename` as sha256sum
    /// writes it (`*filename` in binary mode). A named file must be `name`:
    /// a checksum file for some other file is not a checksum of this one.
    pub fn parse(text: &str, algo: Algo, name: &str) -> Result<Published> {
        let mut words = text.split_whitespace();
        let hex = words.next().unwrap_or("").to_ascii_lowercase();
        if hex.len() != algo.hex_len() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!(
                "not a {} checksum (expected {} hex digits, optionally followed by the file name)",
                algo.ext(),
                algo.hex_len()
            );
        }
        if let Some(named) = words.next() {
            let named = named.trim_start_matches('*');
            let base = named.rsplit('/').next().unwrap_or(named);
            if base != name {
                bail!("the checksum is for {named:?}, not {name:?}");
            }
        }
        Ok(Published { algo, hex })
    }

    /// The line of a checksum list (`hex  name` lines, as sha256sum
    /// writes) that names `name`.
    pub fn from_list(text: &str, algo: Algo, name: &str) -> Result<Published> {
        let line = text
            .lines()
            .find(|l| {
                l.split_whitespace().nth(1).is_some_and(|n| {
                    let n = n.trim_start_matches('*');
                    n.rsplit('/').next() == Some(name)
                })
            })
            .with_context(|| format!("no checksum of {name:?} in the list"))?;
        Published::parse(line, algo, name)
    }

    pub fn matches(&self, digests: &Digests) -> bool {
        match self.algo {
            Algo::Sha256 => digests.sha256 == self.hex,
            Algo::Sha512 => digests.sha512.as_deref() == Some(self.hex.as_str()),
        }
    }

    /// What the content hashed to under this checksum's algorithm.
    pub fn actual<'a>(&self, digests: &'a Digests) -> &'a str {
        match self.algo {
            Algo::Sha256 => &digests.sha256,
            Algo::Sha512 => digests.sha512.as_deref().unwrap_or("(not computed)"),
        }
    }
}

/// The digests of one file or buffer: its size and SHA-256 always (the
/// lock records it), SHA-512 when the published checksum is one, MD5 where
/// apt's indices list it. (Serialised as the repository's state file has
/// it: size, md5, sha256.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digests {
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512: Option<String>,
}

impl Digests {
    /// Size, MD5 and SHA-256 of bytes in memory (what apt's indices list).
    pub fn of_bytes(data: &[u8]) -> Digests {
        let mut hasher = Hasher::new(Algo::Sha256).with_md5();
        hasher.update(data);
        hasher.finish()
    }

    /// Size, MD5 and SHA-256 of a file (what apt's indices list).
    pub fn of_file(path: &Path) -> Result<Digests> {
        hash_file(path, Hasher::new(Algo::Sha256).with_md5())
    }

    /// The MD5, or "" where it was not asked for.
    pub fn md5(&self) -> &str {
        self.md5.as_deref().unwrap_or_default()
    }
}

/// Hashes a stream as it is written elsewhere.
pub struct Hasher {
    size: u64,
    sha256: Sha256,
    sha512: Option<Sha512>,
    md5: Option<Md5>,
}

impl Hasher {
    pub fn new(algo: Algo) -> Hasher {
        Hasher {
            size: 0,
            sha256: Sha256::new(),
            sha512: (algo == Algo::Sha512).then(Sha512::new),
            md5: None,
        }
    }

    /// MD5 too.
    fn with_md5(self) -> Hasher {
        Hasher {
            md5: Some(Md5::new()),
            ..self
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        self.size += data.len() as u64;
        self.sha256.update(data);
        if let Some(h) = &mut self.sha512 {
            h.update(data);
        }
        if let Some(h) = &mut self.md5 {
            h.update(data);
        }
    }

    pub fn finish(self) -> Digests {
        Digests {
            size: self.size,
            md5: self.md5.map(|h| hex(&h.finalize())),
            sha256: hex(&self.sha256.finalize()),
            sha512: self.sha512.map(|h| hex(&h.finalize())),
        }
    }
}

/// Hashes a file on disk.
pub fn file_digests(path: &Path, algo: Algo) -> Result<Digests> {
    hash_file(path, Hasher::new(algo))
}

fn hash_file(path: &Path, mut hasher: Hasher) -> Result<Digests> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finish())
}

/// The sha256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    Ok(file_digests(path, Algo::Sha256)?.sha256)
}

/// The sha256 of bytes in memory, as lower-case hex.
pub fn sha256_bytes(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Copies `input` (read from `from`) to `output` (written to `to`) in one
/// pass, returning the SHA-256 (lower-case hex) and size of what it copied.
pub fn copy_hashing(
    input: &mut impl Read,
    from: &Path,
    output: &mut impl Write,
    to: &Path,
) -> Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .with_context(|| format!("reading {}", from.display()))?;
        if n == 0 {
            return Ok((hex(&hasher.finalize()), size));
        }
        hasher.update(&buf[..n]);
        output
            .write_all(&buf[..n])
            .with_context(|| format!("writing {}", to.display()))?;
        size += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_known_values() {
        let d = Digests::of_bytes(b"abc");
        assert_eq!(d.size, 3);
        assert_eq!(d.md5(), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn bare_hex_and_sha256sum_lines_both_parse() {
        for text in [
            format!("{ABC}\n"),
            format!("{ABC}  abc.tgz\n"),
            format!("{} *abc.tgz", ABC.to_uppercase()),
            format!("{ABC}  ./dist/abc.tgz"),
        ] {
            let p = Published::parse(&text, Algo::Sha256, "abc.tgz").unwrap();
            assert_eq!(p.hex, ABC, "{text}");
        }
    }

    #[test]
    fn bad_checksum_files_are_refused() {
        assert!(Published::parse("", Algo::Sha256, "f").is_err());
        assert!(Published::parse("<html>Not Found</html>", Algo::Sha256, "f").is_err());
        assert!(Published::parse(&ABC[1..], Algo::Sha256, "f").is_err());
        assert!(Published::parse(ABC, Algo::Sha512, "f").is_err());
        let err = Published::parse(&format!("{ABC}  other.tgz"), Algo::Sha256, "abc.tgz")
            .unwrap_err()
            .to_string();
        assert!(err.contains("other.tgz"), "{err}");
    }

    #[test]
    fn hashing_matches_the_published_checksum() {
        let mut h = Hasher::new(Algo::Sha512);
        h.update(b"a");
        h.update(b"bc");
        let d = h.finish();
        assert_eq!(d.sha256, ABC);
        assert_eq!(sha256_bytes(b"abc"), ABC);
        let sha512 = Published::parse(
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            Algo::Sha512,
            "abc",
        )
        .unwrap();
        assert!(sha512.matches(&d));
    }
}
