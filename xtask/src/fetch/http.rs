//! HTTP downloads: small checksum files into memory, release files streamed
//! to a temp file while being hashed, with progress lines on stderr.
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::digest::{Algo, Digests, Hasher};
use crate::util::TempFile;

/// How often a running download reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// Checksum files are a line of text; anything bigger is not one.
const CHECKSUM_LIMIT: u64 = 64 * 1024;

pub struct Client {
    agent: ureq::Agent,
}

impl Client {
    pub fn new() -> Client {
        let config = ureq::Agent::config_builder()
            // Status codes are reported by us, with the URL.
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            // A stalled connection fails instead of hanging CI forever.
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(concat!("kubedist-xtask/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.new_agent(),
        }
    }

    /// The response to a GET of `url`: a success, or `None` where the
    /// server answers one of `absent`; any other status is an error.
    fn get(&self, url: &str, absent: &[u16]) -> Result<Option<ureq::http::Response<ureq::Body>>> {
        let resp = self
            .agent
            .get(url)
            .call()
            .map_err(|e| request_error(url, e))?;
        let status = resp.status();
        if absent.contains(&status.as_u16()) {
            return Ok(None);
        }
        if !status.is_success() {
            bail!("{url}: HTTP {status}");
        }
        Ok(Some(resp))
    }

    /// A small text file; `None` if the server says 404 (or 410).
    pub fn get_text(&self, url: &str) -> Result<Option<String>> {
        let Some(mut resp) = self.get(url, &[404, 410])? else {
            return Ok(None);
        };
        let text = resp
            .body_mut()
            .with_config()
            .limit(CHECKSUM_LIMIT)
            .read_to_string()
            .map_err(|e| anyhow::anyhow!("{url}: reading the response: {e}"))?;
        Ok(Some(text))
    }

    /// Streams `url` into a new temp file in `dir`, hashing as it goes, and
    /// returns the temp file and the digests. The caller verifies and renames;
    /// the temp file is removed on any error here (and by the returned guard
    /// when dropped without `keep`).
    pub fn download(
        &self,
        url: &str,
        dir: &Path,
        name: &str,
        algo: Algo,
    ) -> Result<(TempFile, Digests)> {
        let mut resp = self
            .get(url, &[])?
            .with_context(|| format!("{url}: no response"))?;
        let expected = resp.body().content_length();
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (temp, mut out) = TempFile::create(&dir.join(name), 0o644)?;

        let mut reader = resp.body_mut().as_reader();
        let mut hasher = Hasher::new(algo);
        let mut progress = Progress::new(name, expected);
        let mut got: u64 = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => bail!("{url}: download interrupted after {got} bytes: {e}"),
            };
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .with_context(|| format!("writing {}", temp.path().display()))?;
            got += n as u64;
            progress.update(got);
        }
        if let Some(len) = expected {
            if got != len {
                bail!("{url}: truncated download: {got} of {len} bytes");
            }
        }
        out.sync_all()
            .with_context(|| format!("writing {}", temp.path().display()))?;
        progress.done(got);
        Ok((temp, hasher.finish()))
    }
}

fn request_error(url: &str, e: ureq::Error) -> anyhow::Error {
    anyhow::anyhow!("{url}: {e}")
}

/// Progress of one download as plain lines (a CI log shows them too): bytes
/// and percent every few seconds, and a summary at the end.
struct Progress<'a> {
    name: &'a str,
    total: Option<u64>,
    started: Instant,
    last: Instant,
}

impl<'a> Progress<'a> {
    fn new(name: &'a str, total: Option<u64>) -> Progress<'a> {
        let now = Instant::now();
        Progress {
            name,
            total,
            started: now,
            last: now,
        }
    }

    fn update(&mut self, got: u64) {
        if self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        match self.total {
            Some(total) if total > 0 => eprintln!(
                "  {}: {} of {} ({}%)",
                self.name,
                mib(got),
                mib(total),
                got * 100 / total
            ),
            _ => eprintln!("  {}: {}", self.name, mib(got)),
        }
    }

    fn done(&self, got: u64) {
        let secs = self.started.elapsed().as_secs_f64();
        // Only long downloads get a closing line; short ones were just named.
        if secs >= PROGRESS_EVERY.as_secs_f64() {
            eprintln!("  {}: {} in {secs:.1} s", self.name, mib(got));
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
