//! Compression: the codec and level of each format (`--compression`) and the
//! encoders behind them.
//!
//! Every encoder here writes the same bytes whatever the thread count, so
//! the thread count is a matter of speed only. Most use several threads
//! (`xz_small`, for documents of a few KiB, and `+long` use one):
//! - xz: liblzma's multithreaded encoder; blocks of 3 × the dictionary size,
//!   fixed by the level. `+long`: one stream, one thread, the dictionary
//!   sized to the payload (at most 64 MiB).
//! - zstd: libzstd's multithreaded mode (never its single-threaded one, whose
//!   output differs); job size and overlap fixed by the level. `+long`:
//!   the single-threaded mode with long-distance matching and a window
//!   sized to the payload (at most 2^27): the multithreaded mode's jobs see
//!   only an overlap of the one before, which would cut the window.
//! - gzip: one gzip member made of 1 MiB deflate chunks compressed in
//!   parallel, each primed with the 32 KiB before it and ended by a sync
//!   flush, as pigz does. Any gzip reader unpacks it, busybox included.
//!
//! Which codec suits which format, and who can read it:
//! - deb: xz (every dpkg; `+long`'s dictionary of at most 64 MiB too, as
//!   liblzma decodes any), zstd (dpkg ≥ 1.21.18: Debian 12, Ubuntu 22.04 —
//!   not Debian 11; `+long`'s 2^27 window is libzstd's default limit),
//!   gzip (every dpkg).
//! - rpm: zstd (rpm ≥ 4.14: RHEL/CentOS 8, Fedora 27, SLES 15 — not RHEL 7;
//!   `+long` within libzstd's default limit, which rpm keeps), xz (rpm ≥
//!   4.7: RHEL 6 on; `+long`'s dictionary of at most 64 MiB within the
//!   100 MiB rpm's decoder allows), gzip (every rpm). The rpm crate writes
//!   the archive uncompressed and these encoders compress it: the crate's
//!   own xz would link a second liblzma (both claim `links = "lzma"`).
//! - tar: gzip (every host: busybox, GNU and BSD tar, Go and Python), xz
//!   (GNU tar, busybox with xz support), zstd (GNU tar ≥ 1.31, rarely
//!   busybox). The file name follows: `.tar.gz`, `.tar.xz`, `.tar.zst`.
//! - sysext: the squashfs image's blocks, compressed by the `backhand` crate
//!   (emit::sysext, one thread): gzip (every kernel's squashfs; mksquashfs's
//!   default, as Flatcar's own extensions use), zstd (kernels ≥ 4.14 built
//!   with SQUASHFS_ZSTD, as Fedora's are). No xz: backhand's links a second
//!   liblzma, like the rpm crate's. No `+long`: each block is compressed on
//!   its own.
//! - The installer image's layers: gzip, the one codec every runtime pulls;
//!   its 32 KiB window is fixed.
//!
//! A deb or rpm whose package lists its architecture in `xz_branch_filter`
//! (pkg/*.toml: the one-program packages, on amd64) puts xz's x86 branch
//! filter ahead of LZMA2 when its codec is xz: every liblzma decodes it.
//! The filter is data of the package, not of `--compression`: it shrinks a
//! one-program package and grows a many-program one (the CNI plugins'),
//! and no other architecture has one every reader decodes
//! (`spec::BranchFilter::for_arch` says why, and refuses it).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

use crate::spec::BranchFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Gz,
    Xz,
    Zstd,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gz => "gz",
            Kind::Xz => "xz",
            Kind::Zstd => "zstd",
        }
    }

    /// Levels offered. zstd stops at 19: 20-22 need up to 128 MiB of window
    /// memory on every host that unpacks the artifact.
    fn levels(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Kind::Gz => 1..=9,
            Kind::Xz => 0..=9,
            Kind::Zstd => 1..=19,
        }
    }
}

/// A codec and its level, written `xz:6`; `+long` (xz and zstd) widens the
/// window to the whole payload, up to [`XZ_LONG_DICT_MAX`] or
/// 2^[`ZSTD_LONG_WINDOW_LOG_MAX`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Codec {
    pub kind: Kind,
    pub level: u32,
    /// A window as long as the payload. Go binaries share long runs of
    /// runtime and library code at distances beyond the presets' 1-8 MiB:
    /// the CNI plugins' 46 MB shrink by a third. One thread per stream, as
    /// the encoders' multithreaded modes cut the input into blocks (xz) or
    /// jobs (zstd) that cannot see each other.
    pub long: bool,
    /// xz only: the branch filter ahead of LZMA2, set per package and
    /// architecture by the package's `xz_branch_filter` (pkg/*.toml), never
    /// by `--compression`.
    pub filter: Option<BranchFilter>,
}

/// The largest xz dictionary of `+long`: what xz -9 uses, and what busybox's
/// unxz (xz-embedded, 64 MiB at most) and every liblzma decode.
pub const XZ_LONG_DICT_MAX: u32 = 64 << 20;
/// The largest zstd window of `+long`: 2^27, the most libzstd decodes
/// without being told to accept more (ZSTD_WINDOWLOG_LIMIT_DEFAULT), which
/// is how dpkg, rpm, GNU tar's zstd and containers' image libraries call it.
pub const ZSTD_LONG_WINDOW_LOG_MAX: u32 = 27;

impl Codec {
    pub const fn new(kind: Kind, level: u32) -> Codec {
        Codec {
            kind,
            level,
            long: false,
            filter: None,
        }
    }

    /// `kind` at `level` with the long window.
    pub const fn long(kind: Kind, level: u32) -> Codec {
        Codec {
            kind,
            level,
            long: true,
            filter: None,
        }
    }

    /// This codec with a package's branch filter: xz's streams take it, the
    /// other codecs have none and stay as they are.
    pub fn with_filter(self, filter: Option<BranchFilter>) -> Codec {
        match self.kind {
            Kind::Xz => Codec { filter, ..self },
            Kind::Gz | Kind::Zstd => self,
        }
    }

    /// The file-name extension of a stream compressed with this codec.
    pub fn ext(self) -> &'static str {
        match self.kind {
            Kind::Gz => "gz",
            Kind::Xz => "xz",
            Kind::Zstd => "zst",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.level)?;
        if self.long {
            f.write_str("+long")?;
        }
        if let Some(filter) = self.filter {
            write!(f, " (with the {filter:?} branch filter)")?;
        }
        Ok(())
    }
}

/// The codec of each format that has one, in `FORMATS` order: made only
/// from the formats' own settings, so every such format has its entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Codecs(Vec<(&'static str, Codec)>);

impl Codecs {
    /// Each format's default: what the distributions themselves use
    /// (`Format::codecs`).
    pub fn defaults() -> Codecs {
        Codecs::from_formats(|c| c.default)
    }

    /// Quick trial builds: larger files in a fraction of the time.
    pub fn fast() -> Codecs {
        Codecs::from_formats(|c| c.fast)
    }

    fn from_formats(pick: impl Fn(&super::FormatCodecs) -> Codec) -> Codecs {
        Codecs(
            super::FORMATS
                .iter()
                .filter_map(|f| f.about().codecs.as_ref().map(|c| (f.about().name, pick(c))))
                .collect(),
        )
    }

    /// The codec of the format `name` (one with codecs of its own).
    pub fn of(&self, name: &str) -> Codec {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
            .unwrap_or_else(|| panic!("no codec for format {name:?}"))
    }

    /// The formats that take a codec, comma-separated.
    fn names(&self) -> String {
        self.0
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Parses `[PRESET,]FORMAT=CODEC:LEVEL,...` on top of `base`: presets
    /// `default` and `fast`, the formats that take a codec, codecs `xz`,
    /// `zstd`, `gz` (a missing level means the codec's usual one); a codec
    /// a format's writer cannot use is refused by that format.
    pub fn parse(text: &str, base: Codecs) -> Result<Codecs> {
        let mut codecs = base;
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((format, codec)) = item.split_once('=') else {
                codecs = match item {
                    "default" => Codecs::defaults(),
                    "fast" => Codecs::fast(),
                    _ => bail!(
                        "--compression {item:?}: expected FORMAT=CODEC[:LEVEL][+long] \
                         (e.g. deb=xz:6) or a preset (default, fast)"
                    ),
                };
                continue;
            };
            let codec =
                parse_codec(codec.trim()).with_context(|| format!("--compression {item:?}"))?;
            let names = codecs.names();
            let Some(slot) = codecs.0.iter_mut().find(|(n, _)| *n == format.trim()) else {
                bail!(
                    "--compression {item:?}: unknown format {:?} ({names})",
                    format.trim()
                );
            };
            slot.1 = codec;
        }
        for format in super::FORMATS {
            if format.about().codecs.is_some() {
                format.check_codec(codecs.of(format.about().name))?;
            }
        }
        Ok(codecs)
    }
}

impl fmt::Display for Codecs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self.0.iter().map(|(n, c)| format!("{n}={c}")).collect();
        f.write_str(&items.join(","))
    }
}

fn parse_codec(text: &str) -> Result<Codec> {
    let (text, long) = match text.strip_suffix("+long") {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    let (name, level) = match text.split_once(':') {
        Some((n, l)) => (n, Some(l)),
        None => (text, None),
    };
    let kind = match name {
        "gz" | "gzip" => Kind::Gz,
        "xz" => Kind::Xz,
        "zstd" | "zst" => Kind::Zstd,
        other => bail!("unknown codec {other:?} (xz, zstd, gz)"),
    };
    if long && kind == Kind::Gz {
        bail!("gz+long: gzip's window is 32 KiB, always (+long is for xz and zstd)");
    }
    let level = match level {
        None => match kind {
            Kind::Gz => 9,
            Kind::Xz => 6,
            Kind::Zstd => 19,
        },
        Some(l) => l
            .parse()
            .ok()
            .filter(|l| kind.levels().contains(l))
            .with_context(|| {
                let r = kind.levels();
                format!(
                    "level {l:?}: {} takes {}-{}",
                    kind.name(),
                    r.start(),
                    r.end()
                )
            })?,
    };
    Ok(Codec {
        kind,
        level,
        long,
        filter: None,
    })
}

/// A compressing writer; `finish` ends the stream and returns the sink.
pub enum Encoder<W: Write> {
    Gz(ParGz<W>),
    Xz(xz2::write::XzEncoder<W>),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

/// An encoder for `codec` using up to `threads` threads, writing to `out`.
/// `size_hint`, about how many bytes will be written (the sum of the file
/// sizes will do), sizes a long window: the output depends on it, so it
/// must come from the input, never from timing or the machine.
pub fn encoder<W: Write>(
    codec: Codec,
    threads: u32,
    size_hint: u64,
    out: W,
) -> io::Result<Encoder<W>> {
    let threads = threads.max(1);
    Ok(match codec.kind {
        Kind::Gz => Encoder::Gz(ParGz::new(out, codec.level, threads)),
        Kind::Xz if codec.long => {
            let dict = fitted_dict(size_hint).min(XZ_LONG_DICT_MAX);
            Encoder::Xz(xz2::write::XzEncoder::new_stream(
                out,
                xz_stream(codec.level, dict, codec.filter)?,
            ))
        }
        Kind::Zstd if codec.long => {
            let mut z = zstd::stream::write::Encoder::new(out, codec.level as i32)?;
            // Never more than the payload needs: a reader allocates the
            // window the frame names.
            let log = u64::BITS - size_hint.max(1).saturating_sub(1).leading_zeros();
            z.window_log(log.clamp(20, ZSTD_LONG_WINDOW_LOG_MAX))?;
            z.long_distance_matching(true)?;
            z.include_checksum(true)?;
            Encoder::Zstd(z)
        }
        Kind::Xz => {
            let mut builder = xz2::stream::MtStreamBuilder::new();
            builder.threads(threads).preset(codec.level);
            if codec.filter.is_some() {
                // A filter chain replaces the preset; liblzma sizes the
                // blocks from its dictionary as it does the preset's.
                let lzma =
                    xz2::stream::LzmaOptions::new_preset(codec.level).map_err(io::Error::other)?;
                builder.filters(xz_filters(&lzma, codec.filter));
            }
            let stream = builder.encoder().map_err(io::Error::other)?;
            Encoder::Xz(xz2::write::XzEncoder::new_stream(out, stream))
        }
        Kind::Zstd => {
            let mut z = zstd::stream::write::Encoder::new(out, codec.level as i32)?;
            // Always the multithreaded mode, even for one thread: its output
            // does not depend on the worker count.
            z.multithread(threads)?;
            z.include_checksum(true)?;
            Encoder::Zstd(z)
        }
    })
}

impl<W: Write> Encoder<W> {
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Gz(e) => e.finish(),
            Encoder::Xz(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Gz(e) => e.write(buf),
            Encoder::Xz(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
        }
    }

    /// Nothing to flush early: the stream is only useful once finished, and
    /// a flush would add bytes that depend on when it was called.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `data` compressed with `codec` on up to `threads` threads.
pub fn compress(codec: Codec, threads: u32, data: &[u8]) -> io::Result<Vec<u8>> {
    let mut e = encoder(codec, threads, data.len() as u64, Vec::new())?;
    e.write_all(data)?;
    e.finish()
}

/// A small document (a control archive, an apt index) as one xz stream at
/// `level`, on one thread, with the dictionary no larger than the document:
/// the same compressed data as the preset's own dictionary, but liblzma then
/// sizes and clears its match finder for the document, not for the preset
/// (at -9, 74 ms per call for a few KiB of input).
pub fn xz_small(level: u32, data: &[u8]) -> io::Result<Vec<u8>> {
    // The presets' dictionaries (xz(1), "Presets"); liblzma has no getter.
    const PRESET_DICT_KIB: [u32; 10] =
        [256, 1024, 2048, 4096, 4096, 8192, 8192, 16384, 32768, 65536];
    let preset = PRESET_DICT_KIB[level.min(9) as usize] << 10;
    let dict = fitted_dict(data.len() as u64).min(preset);
    let mut xz = xz2::write::XzEncoder::new_stream(Vec::new(), xz_stream(level, dict, None)?);
    xz.write_all(data)?;
    xz.finish()
}

/// The smallest dictionary that holds `len` bytes: a power of two, at
/// least liblzma's LZMA_DICT_SIZE_MIN.
fn fitted_dict(len: u64) -> u32 {
    u32::try_from(len)
        .unwrap_or(u32::MAX)
        .checked_next_power_of_two()
        .unwrap_or(u32::MAX)
        .max(4096)
}

/// A single-threaded xz stream: `level`'s preset with a `dict`-byte
/// dictionary, CRC64 as xz(1) writes.
fn xz_stream(
    level: u32,
    dict: u32,
    filter: Option<BranchFilter>,
) -> io::Result<xz2::stream::Stream> {
    let mut lzma = xz2::stream::LzmaOptions::new_preset(level).map_err(io::Error::other)?;
    lzma.dict_size(dict);
    xz2::stream::Stream::new_stream_encoder(&xz_filters(&lzma, filter), xz2::stream::Check::Crc64)
        .map_err(io::Error::other)
}

/// The filter chain of an xz stream: the branch filter, if any, then LZMA2.
fn xz_filters(
    lzma: &xz2::stream::LzmaOptions,
    filter: Option<BranchFilter>,
) -> xz2::stream::Filters {
    let mut filters = xz2::stream::Filters::new();
    match filter {
        Some(BranchFilter::X86) => {
            filters.x86();
        }
        None => {}
    }
    filters.lzma2(lzma);
    filters
}

/// Input per deflate chunk. Fixed: the output depends on it, not on threads.
const GZ_CHUNK: usize = 1 << 20;
/// Deflate's window: each chunk is primed with this much of the input before it.
const GZ_WINDOW: usize = 32 << 10;

type GzJob = (u64, Vec<u8>, Vec<u8>);
type GzDone = (u64, io::Result<Vec<u8>>);

/// Parallel gzip: one member whose deflate stream is the concatenation of
/// independently compressed, dictionary-primed, sync-flushed chunks.
pub struct ParGz<W: Write> {
    out: W,
    level: u32,
    crc: crc32fast::Hasher,
    size: u64,
    chunk: Vec<u8>,
    /// The last GZ_WINDOW bytes of input before `chunk`.
    window: Vec<u8>,
    next_job: u64,
    next_out: u64,
    done: BTreeMap<u64, Vec<u8>>,
    pool: Option<Pool>,
}

struct Pool {
    jobs: Option<mpsc::Sender<GzJob>>,
    results: mpsc::Receiver<GzDone>,
    workers: Vec<JoinHandle<()>>,
    /// Chunks handed out at most at once, to bound memory.
    limit: u64,
}

impl<W: Write> ParGz<W> {
    pub fn new(out: W, level: u32, threads: u32) -> ParGz<W> {
        let pool = (threads > 1).then(|| {
            let (jobs, job_rx) = mpsc::channel::<GzJob>();
            let (done_tx, results) = mpsc::channel::<GzDone>();
            let job_rx = Arc::new(Mutex::new(job_rx));
            let workers = (0..threads)
                .map(|_| {
                    let job_rx = Arc::clone(&job_rx);
                    let done_tx = done_tx.clone();
                    std::thread::spawn(move || loop {
                        let job = match job_rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok((index, data, dict)) = job else { return };
                        if done_tx
                            .send((index, deflate_chunk(&data, &dict, level)))
                            .is_err()
                        {
                            return;
                        }
                    })
                })
                .collect();
            Pool {
                jobs: Some(jobs),
                results,
                workers,
                limit: 2 * u64::from(threads),
            }
        });
        ParGz {
            out,
            level,
            crc: crc32fast::Hasher::new(),
            size: 0,
            chunk: Vec::with_capacity(GZ_CHUNK),
            window: Vec::new(),
            next_job: 0,
            next_out: 0,
            done: BTreeMap::new(),
            pool,
        }
    }

    fn header(&self) -> [u8; 10] {
        // No name, no mtime (reproducible); XFL says "best" or "fastest" as
        // gzip does; OS 3 = Unix.
        let xfl = match self.level {
            9 => 2,
            1 => 4,
            _ => 0,
        };
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 3]
    }

    /// Hands the full chunk to a worker (or compresses it here).
    fn dispatch(&mut self) -> io::Result<()> {
        if self.next_job == 0 {
            let header = self.header();
            self.out.write_all(&header)?;
        }
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(GZ_CHUNK));
        let dict = std::mem::take(&mut self.window);
        self.window = data[data.len().saturating_sub(GZ_WINDOW)..].to_vec();
        if self.window.len() < GZ_WINDOW && !dict.is_empty() {
            // A chunk shorter than the window: keep the tail of the one before.
            let need = GZ_WINDOW - self.window.len();
            let mut w = dict[dict.len().saturating_sub(need)..].to_vec();
            w.extend_from_slice(&self.window);
            self.window = w;
        }
        let index = self.next_job;
        self.next_job += 1;
        match &self.pool {
            None => {
                let bytes = deflate_chunk(&data, &dict, self.level)?;
                self.out.write_all(&bytes)?;
                self.next_out += 1;
            }
            Some(pool) => {
                pool.jobs
                    .as_ref()
                    .ok_or_else(|| io::Error::other("gzip workers are gone"))?
                    .send((index, data, dict))
                    .map_err(|_| io::Error::other("a gzip worker stopped"))?;
                let limit = pool.limit;
                while self.next_job - self.next_out >= limit {
                    self.collect_one()?;
                }
            }
        }
        Ok(())
    }

    /// Waits for one finished chunk and writes out what is now in order.
    fn collect_one(&mut self) -> io::Result<()> {
        let pool = self
            .pool
            .as_ref()
            .ok_or_else(|| io::Error::other("no gzip workers"))?;
        let (index, bytes) = pool
            .results
            .recv()
            .map_err(|_| io::Error::other("a gzip worker stopped"))?;
        self.done.insert(index, bytes?);
        while let Some(bytes) = self.done.remove(&self.next_out) {
            self.out.write_all(&bytes)?;
            self.next_out += 1;
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        if !self.chunk.is_empty() || self.next_job == 0 {
            self.dispatch()?;
        }
        while self.next_out < self.next_job {
            self.collect_one()?;
        }
        // An empty final block (fixed Huffman, end-of-block only) closes the
        // deflate stream, then CRC-32 and size modulo 2^32.
        self.out.write_all(&[0x03, 0x00])?;
        let crc = std::mem::take(&mut self.crc).finalize();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&(self.size as u32).to_le_bytes())?;
        self.out.flush()?;
        drop(self.pool.take());
        let ParGz { out, .. } = self;
        Ok(out)
    }
}

impl<W: Write> Write for ParGz<W> {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        self.crc.update(buf);
        self.size += n as u64;
        while !buf.is_empty() {
            let take = (GZ_CHUNK - self.chunk.len()).min(buf.len());
            self.chunk.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.chunk.len() == GZ_CHUNK {
                self.dispatch()?;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Pool {
    /// Closing the job channel lets every worker return.
    fn drop(&mut self) {
        drop(self.jobs.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Raw deflate of `data` at `level`, primed with `dict`, ended by a sync
/// flush so that the next chunk's bytes can follow directly.
fn deflate_chunk(data: &[u8], dict: &[u8], level: u32) -> io::Result<Vec<u8>> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(level), false);
    if !dict.is_empty() {
        c.set_dictionary(dict).map_err(io::Error::other)?;
    }
    let mut out = Vec::with_capacity(data.len() + data.len() / 16 + 1024);
    loop {
        let consumed = c.total_in() as usize;
        c.compress_vec(&data[consumed..], &mut out, FlushCompress::Sync)
            .map_err(io::Error::other)?;
        // Done once all input is in and the flush left room to spare.
        if c.total_in() as usize == data.len() && out.len() < out.capacity() {
            return Ok(out);
        }
        out.reserve(64 << 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Bytes that compress somewhat, like a binary: a repeating pattern with
    /// pseudo-random noise.
    fn sample(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 7 == 0 {
                    x as u8
                } else {
                    (i % 251) as u8
                }
            })
            .collect()
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn parallel_gzip_round_trips_and_ignores_the_thread_count() {
        for len in [0, 1, GZ_CHUNK - 1, GZ_CHUNK, 3 * GZ_CHUNK + 12_345] {
            let data = sample(len);
            let one = compress(Codec::new(Kind::Gz, 9), 1, &data).unwrap();
            assert_eq!(gunzip(&one), data, "len {len}");
            for threads in [2, 3, 8] {
                let many = compress(Codec::new(Kind::Gz, 9), threads, &data).unwrap();
                assert!(one == many, "len {len}, {threads} threads");
            }
        }
    }

    #[test]
    fn parallel_gzip_is_one_member_that_gzip_reads() {
        let data = sample(2 * GZ_CHUNK + 77);
        let gz = compress(Codec::new(Kind::Gz, 6), 2, &data).unwrap();
        // A single-member reader must see everything.
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz.as_slice())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        if std::path::Path::new("/bin/gzip").exists() {
            let mut child = std::process::Command::new("gzip")
                .args(["-t"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&gz).unwrap();
            assert!(child.wait().unwrap().success(), "gzip -t");
        }
    }

    #[test]
    fn xz_and_zstd_ignore_the_thread_count() {
        let data = sample(5 << 20);
        for codec in [Codec::new(Kind::Xz, 0), Codec::new(Kind::Zstd, 3)] {
            let one = compress(codec, 1, &data).unwrap();
            let four = compress(codec, 4, &data).unwrap();
            assert!(one == four, "{codec}");
        }
        let xz = compress(Codec::new(Kind::Xz, 0), 2, &data).unwrap();
        let mut out = Vec::new();
        xz2::read::XzDecoder::new(xz.as_slice())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        let zst = compress(Codec::new(Kind::Zstd, 3), 2, &data).unwrap();
        assert_eq!(zstd::stream::decode_all(zst.as_slice()).unwrap(), data);
    }

    /// Two copies of the same 3 MiB, 9 MiB apart: beyond the window of xz -1
    /// (1 MiB) and zstd -3 (2 MiB), inside a long one.
    fn far_repeat() -> Vec<u8> {
        let part = sample(3 << 20);
        let mut data = part.clone();
        data.extend(
            std::iter::repeat_n(0u8, 6 << 20)
                .enumerate()
                .map(|(i, _)| (i * 7 % 253) as u8),
        );
        data.extend_from_slice(&part);
        data
    }

    #[test]
    fn a_long_window_finds_what_the_preset_cannot_and_round_trips() {
        let data = far_repeat();
        for kind in [Kind::Xz, Kind::Zstd] {
            let level = if kind == Kind::Xz { 1 } else { 3 };
            let short = compress(Codec::new(kind, level), 2, &data).unwrap();
            let long = compress(Codec::long(kind, level), 2, &data).unwrap();
            assert!(
                (long.len() as f64) < short.len() as f64 * 0.8,
                "{kind:?}: long {} vs short {}",
                long.len(),
                short.len()
            );
            let back = match kind {
                Kind::Xz => {
                    let mut out = Vec::new();
                    xz2::read::XzDecoder::new(long.as_slice())
                        .read_to_end(&mut out)
                        .unwrap();
                    out
                }
                _ => zstd::stream::decode_all(long.as_slice()).unwrap(),
            };
            assert!(back == data, "{kind:?} round trip");
            // One thread or four: the same bytes.
            assert!(long == compress(Codec::long(kind, level), 4, &data).unwrap());
        }
    }

    /// x86 code (this test's own program) shrinks through the x86 branch
    /// filter, and the filtered stream decodes to the same bytes, multithreaded
    /// and with the long window alike.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_x86_branch_filter_shrinks_x86_code_and_round_trips() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // The executable segment of this ELF64 program: its first PT_LOAD
        // with PF_X, from the program headers (no ELF crate is linked in).
        let u = |at: usize, n: usize| {
            (0..n).fold(0u64, |v, i| v | u64::from(exe[at + i]) << (8 * i)) as usize
        };
        let (phoff, phsize, phnum) = (u(0x20, 8), u(0x36, 2), u(0x38, 2));
        let text = (0..phnum)
            .map(|i| phoff + i * phsize)
            .find(|&h| u(h, 4) == 1 && u(h + 4, 4) & 1 == 1)
            .map(|h| u(h + 8, 8)..u(h + 8, 8) + u(h + 0x20, 8))
            .expect("an executable segment");
        // 4 MiB from its middle: in this unoptimised build the filter gains
        // least at the segment's start (0.01 % of its first 4 MiB, 3.7 % of
        // the middle's, measured), and what comes first moves with the
        // dependencies linked in.
        let len = text.len().min(4 << 20);
        let start = text.start + (text.len() - len) / 2;
        let code = &exe[start..start + len];
        for plain in [Codec::new(Kind::Xz, 1), Codec::long(Kind::Xz, 0)] {
            let filtered = plain.with_filter(Some(BranchFilter::X86));
            let (p, f) = (
                compress(plain, 2, code).unwrap(),
                compress(filtered, 2, code).unwrap(),
            );
            assert!(
                f.len() < p.len(),
                "{plain}: {} filtered vs {}",
                f.len(),
                p.len()
            );
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut xz2::read::XzDecoder::new(f.as_slice()), &mut back)
                .unwrap();
            assert!(
                back == code,
                "{plain}: the filtered stream decodes to other bytes"
            );
            assert!(
                f == compress(filtered, 1, code).unwrap(),
                "{plain}: depends on threads"
            );
        }
        // zstd and gzip have no branch filter: the codec stays as it is.
        let zstd = Codec::new(Kind::Zstd, 3);
        assert_eq!(zstd.with_filter(Some(BranchFilter::X86)), zstd);
    }

    #[test]
    fn a_long_window_is_no_larger_than_the_payload_needs() {
        // A reader allocates the window the stream names: a small payload
        // must not make every reader reserve 64 or 128 MiB.
        let data = sample(300 << 10);
        let zst = compress(Codec::long(Kind::Zstd, 3), 1, &data).unwrap();
        let mut dec = zstd::stream::read::Decoder::new(zst.as_slice()).unwrap();
        dec.window_log_max(20).unwrap();
        let mut out = Vec::new();
        dec.read_to_end(&mut out)
            .expect("a 1 MiB window decodes a 300 KiB zstd+long stream");
        assert!(out == data);
        let xz = compress(Codec::long(Kind::Xz, 6), 1, &data).unwrap();
        let mut stream = xz2::stream::Stream::new_stream_decoder(1 << 20, 0).unwrap();
        let mut out = Vec::with_capacity(data.len() + 1024);
        let status = stream
            .process_vec(&xz, &mut out, xz2::stream::Action::Finish)
            .expect("1 MiB of decoder memory decodes a 300 KiB xz+long stream");
        assert_eq!(status, xz2::stream::Status::StreamEnd);
        assert!(out == data);
    }

    #[test]
    fn a_small_xz_compresses_as_the_preset_does() {
        for data in [b"Package: kubelet\n".repeat(3), sample(300 << 10)] {
            let small = xz_small(9, &data).unwrap();
            let mut preset = xz2::write::XzEncoder::new(Vec::new(), 9);
            preset.write_all(&data).unwrap();
            let preset = preset.finish().unwrap();
            // Only the block header's dictionary size and its CRC32 differ.
            assert_eq!(small.len(), preset.len());
            let differing = small.iter().zip(&preset).filter(|(a, b)| a != b).count();
            assert!(differing <= 5, "{differing} bytes differ");
            let mut out = Vec::new();
            xz2::read::XzDecoder::new(small.as_slice())
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, data);
        }
    }

    #[test]
    fn compression_options_parse() {
        let c = Codecs::parse("deb=zstd:10,tar=xz", Codecs::defaults()).unwrap();
        assert_eq!(
            c.to_string(),
            "deb=zstd:10,rpm=zstd:12+long,tar=xz:6,sysext=gz:9"
        );
        let c = Codecs::parse("deb=xz:3+long,rpm=zstd+long", Codecs::fast()).unwrap();
        assert_eq!(
            c.to_string(),
            "deb=xz:3+long,rpm=zstd:19+long,tar=gz:1,sysext=gz:1"
        );
        let c = Codecs::parse("fast,rpm=gz:6,sysext=zstd:15", Codecs::defaults()).unwrap();
        assert_eq!(c.to_string(), "deb=xz:1,rpm=gz:6,tar=gz:1,sysext=zstd:15");
        assert_eq!(
            Codecs::parse("", Codecs::fast()).unwrap(),
            Codecs::fast(),
            "nothing overrides nothing"
        );
        for (bad, says) in [
            ("deb=xz:10", "xz takes 0-9"),
            ("sysext=xz", "not available"),
            ("zip=gz", "unknown format"),
            ("deb=bzip2", "unknown codec"),
            ("quick", "a preset"),
            ("deb=zstd:22", "zstd takes 1-19"),
            ("tar=gz:9+long", "gzip's window is 32 KiB"),
            ("sysext=zstd:9+long", "on its own"),
            ("rpm=zstd+long+long", "unknown codec"),
        ] {
            let err = format!("{:#}", Codecs::parse(bad, Codecs::defaults()).unwrap_err());
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
