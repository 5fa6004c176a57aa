//! `ensure` against a real HTTP/1.1 server on 127.0.0.1 (a thread serving a
//! fixture tree), and against `--from` directories on disk.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;
use crate::spec::Source;

/// What the test server answers for one path.
#[derive(Clone)]
enum Reply {
    Body(Vec<u8>),
    /// Announces `claimed` bytes, sends `body`, closes the connection.
    Truncated {
        body: Vec<u8>,
        claimed: usize,
    },
}

#[derive(Clone, Default)]
struct Server {
    base: String,
    routes: Arc<Mutex<BTreeMap<String, Reply>>>,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = Server {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..Server::default()
        };
        let s = server.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                s.answer(stream);
            }
        });
        server
    }

    fn answer(&self, mut stream: std::net::TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request = String::new();
        if reader.read_line(&mut request).is_err() {
            return;
        }
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
        self.hits.lock().unwrap().push(path.clone());
        let reply = self.routes.lock().unwrap().get(&path).cloned();
        let (status, body, claimed) = match reply {
            Some(Reply::Body(b)) => ("200 OK", b.clone(), b.len()),
            Some(Reply::Truncated { body, claimed }) => ("200 OK", body, claimed),
            None => ("404 Not Found", b"not found\n".to_vec(), 10),
        };
        let head =
            format!("HTTP/1.1 {status}\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body);
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }

    fn put(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_string(), reply);
    }

    /// Serves `path` with a `.sha256` beside it, as `hex  name`.
    fn put_file(&self, path: &str, body: &[u8]) {
        let name = path.rsplit('/').next().unwrap();
        self.put(path, Reply::Body(body.to_vec()));
        let sum = format!("{}  {name}\n", digest::sha256_bytes(body));
        self.put(&format!("{path}.sha256"), Reply::Body(sum.into_bytes()));
    }

    fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

/// The repository's spec, re-rooted in `root` (for the lock) with one
/// source `tools` whose files live under `base`.
fn spec_with(root: &Path, base: &str, files: &[&str]) -> Spec {
    let mut spec = Spec::load(&crate::util::repo_root()).unwrap();
    spec.root = root.to_path_buf();
    spec.release.sources = BTreeMap::from([(
        "tools".to_string(),
        Source {
            version: "1.0".into(),
            base: base.to_string(),
            files: files.iter().map(|f| f.to_string()).collect(),
            copyright: "2024 The tool authors".into(),
            sums: None,
            archive_dir: None,
            unpublished: Vec::new(),
        },
    )]);
    spec
}

/// A gzip'd tar whose member names are stored exactly as given (the tar
/// crate's own setters refuse `..`, which is what these tests need).
fn tgz(members: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        tar.append(&h, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// Every regular file under `dir`, relative.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if dir.is_dir() {
        archive_list(dir, dir, &mut out);
    }
    out.sort();
    out
}

fn archive_list(top: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            archive_list(top, &p, out);
        } else {
            out.push(p.strip_prefix(top).unwrap().display().to_string());
        }
    }
}

fn err_of(r: Result<Upstream>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

const TOOL: &[u8] = b"#!/bin/sh\necho tool\n";

#[test]
fn a_good_download_is_verified_cached_pinned_and_reused() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let archive = tgz(&[("./b", b"bee"), ("./a", b"ay"), ("sub/c", b"see")]);
    server.put_file("/tools/v1.0/amd64/tool", TOOL);
    server.put_file("/tools/v1.0/tools-amd64.tgz", &archive);
    let spec = spec_with(
        tmp.path(),
        &format!("{}/tools", server.base),
        &["v{version}/{arch}/tool", "v{version}/tools-{arch}.tgz"],
    );

    let up = ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert!(up.files().iter().all(|f| f.how == How::Downloaded));
    let cached = cache.join("tools/v1.0/amd64/tool");
    assert_eq!(std::fs::read(&cached).unwrap(), TOOL);
    assert!(up.standins().is_empty());

    // Pinned in the lock, keyed by source, version, arch and path.
    let lock = std::fs::read_to_string(tmp.path().join("pkg/upstream.lock")).unwrap();
    assert!(lock.contains("[sources.tools.\"1.0\".amd64]"), "{lock}");
    assert!(
        lock.contains(&format!(
            "\"v1.0/amd64/tool\" = \"{}\"",
            digest::sha256_bytes(TOOL)
        )),
        "{lock}"
    );

    // Plain files by base name, archive members by name, `*` sorted.
    let tool = up.resolve("tools", "tool").unwrap();
    assert_eq!(tool, vec![("tool".to_string(), cached.clone())]);
    let b = up.resolve("tools", "b").unwrap();
    assert_eq!(std::fs::read(&b[0].1).unwrap(), b"bee");
    let all: Vec<String> = up
        .resolve("tools", "*")
        .unwrap()
        .into_iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(all, ["a", "b", "sub/c"]);
    let err = format!("{:#}", up.resolve("tools", "kubelet").unwrap_err());
    assert!(
        err.contains("tools/kubelet") && err.contains("a, b, sub/c, tool"),
        "{err}"
    );
    let err = format!("{:#}", up.resolve("nope", "x").unwrap_err());
    assert!(err.contains("\"nope\"") && err.contains("tools"), "{err}");

    // A second run re-verifies the cache and downloads nothing.
    let again = ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert!(again.files().iter().all(|f| f.how == How::Cached));
    assert_eq!(server.hits("/tools/v1.0/amd64/tool"), 1);
    assert_eq!(server.hits("/tools/v1.0/tools-amd64.tgz"), 1);
}

#[test]
fn a_sha512_is_used_where_no_sha256_is_published() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put("/t/tool", Reply::Body(TOOL.to_vec()));
    let sha512 = {
        use sha2::Digest;
        sha2::Sha512::digest(TOOL)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    server.put("/t/tool.sha512", Reply::Body(sha512.into_bytes()));
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");
    ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert_eq!(std::fs::read(cache.join("tools/tool")).unwrap(), TOOL);

    // And a wrong sha512 is caught like a wrong sha256.
    server.put("/t/tool", Reply::Body(b"other".to_vec()));
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_dir_all(tmp.path().join("pkg")).unwrap();
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(err.contains("checksum mismatch: sha512"), "{err}");
}

#[test]
fn containerd_s_sha256sum_and_runc_s_list_are_the_published_checksums() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    // containerd: FILE.sha256sum beside the file.
    server.put("/t/tool", Reply::Body(TOOL.to_vec()));
    let line = format!("{}  tool\n", digest::sha256_bytes(TOOL));
    server.put("/t/tool.sha256sum", Reply::Body(line.into_bytes()));
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");
    ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert_eq!(std::fs::read(cache.join("tools/tool")).unwrap(), TOOL);

    // runc: one list for every architecture, `*` before binary names.
    let mut spec = spec_with(
        tmp.path(),
        &format!("{}/r", server.base),
        &["v1.0/tool.{arch}"],
    );
    spec.release.sources.get_mut("tools").unwrap().sums = Some("v{version}/tool.sha256sum".into());
    server.put("/r/v1.0/tool.amd64", Reply::Body(TOOL.to_vec()));
    let list = format!(
        "{}  *tool.arm64\n{}  *tool.amd64\n",
        digest::sha256_bytes(b"arm"),
        digest::sha256_bytes(TOOL)
    );
    server.put("/r/v1.0/tool.sha256sum", Reply::Body(list.into_bytes()));
    std::fs::remove_dir_all(tmp.path().join("pkg")).unwrap();
    let up = ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert_eq!(up.files()[0].sha256, digest::sha256_bytes(TOOL));

    // The list's line for another file is no checksum of this one.
    server.put("/r/v1.0/tool.amd64", Reply::Body(b"arm".to_vec()));
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_dir_all(tmp.path().join("pkg")).unwrap();
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(err.contains("checksum mismatch"), "{err}");
    server.put(
        "/r/v1.0/tool.sha256sum",
        Reply::Body(b"00  *tool.s390x\n".to_vec()),
    );
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(
        err.contains("/r/v1.0/tool.sha256sum") && err.contains("no checksum of \"tool.amd64\""),
        "{err}"
    );
}

/// A server holding TOOL at /t/tool, the spec of one source served from
/// it, and where its cache goes.
fn one_tool() -> (Server, tempfile::TempDir, Spec, PathBuf) {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put_file("/t/tool", TOOL);
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");
    (server, tmp, spec, cache)
}

#[test]
fn an_architecture_upstream_does_not_publish_is_refused_before_any_download() {
    let (server, tmp, mut spec, cache) = one_tool();
    for source in spec.release.sources.values_mut() {
        source.unpublished = vec!["riscv64".into()];
    }
    let err = err_of(ensure(&spec, Arch::Riscv64, &Origin::Official, &cache));
    assert_eq!(
        err,
        "upstream publishes no riscv64 build of tools (pkg/release.toml, [sources.tools] \
         unpublished): build it from source with `cargo xtask dist --source`"
    );
    assert_eq!(server.hits("/t/tool"), 0);
    assert!(!cache.exists());
    assert!(!tmp.path().join("pkg/upstream.lock").exists());
    // Another architecture of the same source is fetched as ever.
    ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert_eq!(server.hits("/t/tool"), 1);
}

#[test]
fn a_tampered_file_is_refused_and_nothing_is_cached() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put_file("/t/tool", TOOL);
    server.put("/t/tool", Reply::Body(b"#!/bin/sh\nevil\n".to_vec()));
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(
        err.contains(&format!("{}/t/tool: checksum mismatch", server.base)),
        "{err}"
    );
    assert!(!err.contains('\n'), "one line: {err}");
    assert_eq!(files_under(&cache), Vec::<String>::new());
    assert!(!tmp.path().join("pkg/upstream.lock").exists());
}

#[test]
fn a_truncated_download_is_an_error_and_nothing_is_cached() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put_file("/t/tool", TOOL);
    server.put(
        "/t/tool",
        Reply::Truncated {
            body: TOOL[..5].to_vec(),
            claimed: TOOL.len(),
        },
    );
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(err.contains(&format!("{}/t/tool", server.base)), "{err}");
    assert!(
        err.contains("truncated") || err.contains("interrupted"),
        "{err}"
    );
    assert_eq!(files_under(&cache), Vec::<String>::new());
}

#[test]
fn http_errors_name_the_url() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let cache = tmp.path().join("cache");

    // No checksum at all.
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(err.contains("/t/tool: no checksum published"), "{err}");

    // A checksum, but the file itself is missing.
    server.put(
        "/t/tool.sha256",
        Reply::Body(digest::sha256_bytes(TOOL).into_bytes()),
    );
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(
        err.contains(&format!("{}/t/tool: HTTP 404", server.base)),
        "{err}"
    );
    assert_eq!(files_under(&cache), Vec::<String>::new());

    // Nobody listening.
    let dead = spec_with(tmp.path(), "http://127.0.0.1:9/t", &["tool"]);
    let err = err_of(ensure(&dead, Arch::Amd64, &Origin::Official, &cache));
    assert!(err.contains("http://127.0.0.1:9/t/tool.sha256"), "{err}");
}

#[test]
fn a_download_that_differs_from_the_lock_is_refused() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put_file("/t/tool", TOOL);
    let spec = spec_with(tmp.path(), &format!("{}/t", server.base), &["tool"]);
    let pinned = digest::sha256_bytes(b"what we verified last time");
    std::fs::create_dir_all(tmp.path().join("pkg")).unwrap();
    let lock = format!("[sources.tools.\"1.0\".amd64]\n\"tool\" = \"{pinned}\"\n");
    std::fs::write(tmp.path().join("pkg/upstream.lock"), &lock).unwrap();
    let cache = tmp.path().join("cache");

    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(
        err.contains("upstream.lock") && err.contains(&pinned),
        "{err}"
    );
    assert_eq!(files_under(&cache), Vec::<String>::new());
    // The pin stays as it was.
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("pkg/upstream.lock")).unwrap(),
        lock
    );

    // The pin holds for a mirror too, which serves <url>/<source>/<path>.
    server.put_file("/mirror/tools/tool", TOOL);
    let mirror = Origin::Mirror(format!("{}/mirror/", server.base));
    let err = err_of(ensure(&spec, Arch::Amd64, &mirror, &cache));
    assert!(
        err.contains("/mirror/tools/tool") && err.contains("upstream.lock"),
        "{err}"
    );
}

#[test]
fn a_mirror_serves_source_and_path() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    server.put_file("/m/tools/v1.0/arm64/tool", TOOL);
    let spec = spec_with(
        tmp.path(),
        "http://127.0.0.1:9/unused",
        &["v{version}/{arch}/tool"],
    );
    let cache = tmp.path().join("cache");
    let mirror = Origin::Mirror(format!("{}/m", server.base));
    let up = ensure(&spec, Arch::Arm64, &mirror, &cache).unwrap();
    assert_eq!(up.files()[0].file, cache.join("tools/v1.0/arm64/tool"));
    assert_eq!(server.hits("/m/tools/v1.0/arm64/tool"), 1);
}

#[test]
fn a_corrupted_cache_is_downloaded_again() {
    let (server, _tmp, spec, cache) = one_tool();
    ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    std::fs::write(cache.join("tools/tool"), b"bit rot").unwrap();
    let up = ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    assert_eq!(up.files()[0].how, How::Downloaded);
    assert_eq!(std::fs::read(cache.join("tools/tool")).unwrap(), TOOL);
    assert_eq!(server.hits("/t/tool"), 2);
}

#[test]
fn a_cached_file_that_differs_from_the_lock_is_refused() {
    let (_server, tmp, spec, cache) = one_tool();
    ensure(&spec, Arch::Amd64, &Origin::Official, &cache).unwrap();
    let other = digest::sha256_bytes(b"re-pinned");
    std::fs::write(
        tmp.path().join("pkg/upstream.lock"),
        format!("[sources.tools.\"1.0\".amd64]\n\"tool\" = \"{other}\"\n"),
    )
    .unwrap();
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Official, &cache));
    assert!(
        err.contains("upstream.lock") && err.contains(&other),
        "{err}"
    );
    assert_eq!(files_under(&cache), Vec::<String>::new());
}

/// The error of fetching `spec` for amd64 from the directory `dir`.
fn dir_error(spec: &Spec, dir: &Path, cache: &Path) -> String {
    err_of(ensure(
        spec,
        Arch::Amd64,
        &Origin::Dir(dir.to_path_buf()),
        cache,
    ))
}

/// A `--from` directory with `tools/<path>` and a `.sha256` beside each.
fn from_dir(root: &Path, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = root.join("from");
    for (path, body) in files {
        let file = dir.join("tools").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, body).unwrap();
        std::fs::write(beside(&file, "sha256"), digest::sha256_bytes(body)).unwrap();
    }
    dir
}

#[test]
fn a_from_dir_is_used_in_place_with_its_standins() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tgz(&[("./x", b"ex")]);
    let dir = from_dir(
        tmp.path(),
        &[("v1.0/tool", TOOL), ("v1.0/t.tar.gz", &archive)],
    );
    std::fs::write(dir.join("STANDINS"), "# recorders\ntools/tool\n\n").unwrap();
    let spec = spec_with(
        tmp.path(),
        "http://127.0.0.1:9",
        &["v{version}/tool", "v{version}/t.tar.gz"],
    );
    let cache = tmp.path().join("cache");
    let up = ensure(&spec, Arch::Amd64, &Origin::Dir(dir.clone()), &cache).unwrap();
    assert_eq!(up.files()[0].file, dir.join("tools/v1.0/tool"));
    assert_eq!(up.standins(), ["tools/tool"]);
    let x = up.resolve("tools", "x").unwrap();
    assert!(x[0].1.starts_with(cache.join("extracted")), "{x:?}");
    // --from inputs are never pinned.
    assert!(!tmp.path().join("pkg/upstream.lock").exists());

    std::fs::write(dir.join("STANDINS"), "kubelet\n").unwrap();
    let err = dir_error(&spec, &dir, &cache);
    assert!(
        err.contains("STANDINS:1") && err.contains("kubelet"),
        "{err}"
    );

    // A line with architectures names a stand-in of those only.
    std::fs::write(
        dir.join("STANDINS"),
        "tools/tool ppc64le s390x
",
    )
    .unwrap();
    let of = |arch| {
        ensure(&spec, arch, &Origin::Dir(dir.clone()), &cache)
            .unwrap()
            .standins()
            .to_vec()
    };
    assert!(of(Arch::Amd64).is_empty());
    assert_eq!(of(Arch::S390x), ["tools/tool"]);
    std::fs::write(
        dir.join("STANDINS"),
        "tools/tool sparc
",
    )
    .unwrap();
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Dir(dir), &cache));
    assert!(err.contains("STANDINS:1") && err.contains("sparc"), "{err}");
}

#[test]
fn a_from_dir_with_a_wrong_or_missing_checksum_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = from_dir(tmp.path(), &[("tool", TOOL)]);
    let spec = spec_with(tmp.path(), "http://127.0.0.1:9", &["tool"]);
    let cache = tmp.path().join("cache");
    let sum = dir.join("tools/tool.sha256");

    std::fs::write(&sum, format!("{}  tool\n", digest::sha256_bytes(b"else"))).unwrap();
    let err = dir_error(&spec, &dir, &cache);
    assert!(
        err.contains(&format!("{}: sha256 is", dir.join("tools/tool").display())),
        "{err}"
    );

    std::fs::write(&sum, "not a checksum\n").unwrap();
    let err = dir_error(&spec, &dir, &cache);
    assert!(
        err.contains("tool.sha256") && err.contains("not a sha256"),
        "{err}"
    );

    std::fs::remove_file(&sum).unwrap();
    let err = dir_error(&spec, &dir, &cache);
    assert!(
        err.contains(&format!("{}: missing", sum.display())),
        "{err}"
    );

    std::fs::remove_file(dir.join("tools/tool")).unwrap();
    let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Dir(dir), &cache));
    assert!(
        err.contains("tools/tool: missing from the --from directory"),
        "{err}"
    );
}

#[test]
fn archive_members_escaping_the_directory_are_refused() {
    for evil in ["../evil", "./a/../../evil", "/tmp/evil"] {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tgz(&[("./ok", b"ok"), (evil, b"owned")]);
        let dir = from_dir(tmp.path(), &[("t.tgz", &archive)]);
        let spec = spec_with(tmp.path(), "http://127.0.0.1:9", &["t.tgz"]);
        let cache = tmp.path().join("cache");
        let err = err_of(ensure(&spec, Arch::Amd64, &Origin::Dir(dir), &cache));
        assert!(
            err.contains("t.tgz") && err.contains(evil) && err.contains("escapes"),
            "{err}"
        );
        // Nothing was left: no extraction directory, nothing outside it.
        assert_eq!(files_under(&cache), Vec::<String>::new(), "{evil}");
        assert!(!tmp.path().join("evil").exists() && !cache.join("evil").exists());
    }
}

#[test]
fn star_needs_an_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = from_dir(tmp.path(), &[("tool", TOOL)]);
    let spec = spec_with(tmp.path(), "http://127.0.0.1:9", &["tool"]);
    let up = ensure(&spec, Arch::Amd64, &Origin::Dir(dir), &tmp.path().join("c")).unwrap();
    let err = format!("{:#}", up.resolve("tools", "*").unwrap_err());
    assert!(
        err.contains("tools/*") && err.contains("no archive members"),
        "{err}"
    );
}
