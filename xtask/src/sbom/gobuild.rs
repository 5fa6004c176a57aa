//! The build information a Go program carries (`go version -m` prints it):
//! the Go version, the main package's path, the modules linked in and the
//! build settings.
//!
//! Read by hand: no maintained crate reads it, and the format is small and
//! stable since Go 1.18 (`debug/buildinfo` in Go's sources). A 32-byte
//! header starting `\xff Go buildinf:` at a 16-byte boundary; flag bit 2
//! means two length-prefixed strings follow it, the Go version and the
//! module information, whose text sits between two 16-byte sentinels.
//! Older binaries (pointers instead of inline strings) are reported as
//! having no build information.

const MAGIC: &[u8] = b"\xff Go buildinf:";
const HEADER: usize = 32;
const INLINE_STRINGS: u8 = 2;

/// What a Go program says about its own build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoBuild {
    pub go_version: String,
    /// The module information's lines as `go version -m` prints them, each
    /// a tab-separated record: `path`, `mod`, `dep`, `=>` (replacing the
    /// record before it) or `build`.
    pub lines: Vec<String>,
}

/// A module record (`mod` or `dep`, with what `=>` replaced it by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub path: String,
    pub version: String,
    /// The `h1:` sum of go.sum, when the module has one.
    pub sum: Option<String>,
    /// `mod` (the main module) or `dep`.
    pub main: bool,
}

impl GoBuild {
    /// The main package's import path.
    pub fn path(&self) -> Option<&str> {
        self.records("path").next().map(|f| f[0])
    }

    /// The main module and every dependency, each as finally linked (a
    /// replacement stands for the module it replaces).
    pub fn modules(&self) -> Vec<Module> {
        let mut out: Vec<Module> = Vec::new();
        for line in &self.lines {
            let fields: Vec<&str> = line.split('\t').collect();
            let module = |main| Module {
                path: fields.get(1).unwrap_or(&"").to_string(),
                version: fields.get(2).unwrap_or(&"").to_string(),
                sum: fields
                    .get(3)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.to_string()),
                main,
            };
            match fields[0] {
                "mod" => out.push(module(true)),
                "dep" => out.push(module(false)),
                "=>" => {
                    if let Some(last) = out.last_mut() {
                        let main = last.main;
                        *last = module(main);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The fields after the key of every record of kind `key`.
    fn records<'a>(&'a self, key: &'a str) -> impl Iterator<Item = Vec<&'a str>> + 'a {
        self.lines.iter().filter_map(move |l| {
            let mut fields = l.split('\t');
            (fields.next() == Some(key)).then(|| fields.collect())
        })
    }

    /// The text `go version -m FILE` prints after `FILE: `.
    pub fn text(&self) -> String {
        let mut text = format!("{}\n", self.go_version);
        for line in &self.lines {
            text.push('\t');
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

/// The build information in the program `bytes`, if it is a Go program
/// built by Go 1.18 or later.
pub fn read(bytes: &[u8]) -> Option<GoBuild> {
    let mut from = 0;
    let start = loop {
        let at = from + find(&bytes[from..], MAGIC)?;
        if at % 16 == 0 {
            break at;
        }
        from = at + 1;
    };
    let header = bytes.get(start..start + HEADER)?;
    if header[MAGIC.len() + 1] & INLINE_STRINGS == 0 {
        return None;
    }
    let rest = &bytes[start + HEADER..];
    let (version, rest) = length_prefixed(rest)?;
    let (info, _) = length_prefixed(rest)?;
    // The module information sits between two 16-byte sentinels.
    let info = if info.len() >= 33 && info[info.len() - 17] == b'\n' {
        &info[16..info.len() - 16]
    } else {
        info
    };
    let info = std::str::from_utf8(info).ok()?;
    Some(GoBuild {
        go_version: std::str::from_utf8(version).ok()?.to_string(),
        lines: info
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// A uvarint length and that many bytes, and what follows them.
fn length_prefixed(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut len: u64 = 0;
    for (i, b) in bytes.iter().enumerate().take(10) {
        len |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let start = i + 1;
            let end = start.checked_add(usize::try_from(len).ok()?)?;
            return Some((bytes.get(start..end)?, &bytes[end..]));
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program image with build information in the Go 1.18+ layout.
    fn program(version: &str, info: &str) -> Vec<u8> {
        let mut bytes = vec![0u8; 48];
        bytes.extend_from_slice(MAGIC);
        bytes.push(8);
        bytes.push(INLINE_STRINGS);
        bytes.resize(48 + HEADER, 0);
        let mut sentinel_info = vec![0x30u8; 16];
        sentinel_info.extend_from_slice(info.as_bytes());
        sentinel_info.extend_from_slice(&[0xf9u8; 16]);
        for s in [version.as_bytes(), &sentinel_info] {
            let mut len = s.len();
            while len >= 0x80 {
                bytes.push((len as u8) | 0x80);
                len >>= 7;
            }
            bytes.push(len as u8);
            bytes.extend_from_slice(s);
        }
        bytes.extend_from_slice(b"trailing code");
        bytes
    }

    #[test]
    fn modules_replacements_and_settings_are_read() {
        let info = "path\texample.com/cmd/x\n\
                    mod\texample.com\tv1.2.3\th1:abc=\n\
                    dep\tgolang.org/x/sys\tv0.1.0\th1:sys=\n\
                    dep\texample.com/old\tv0.0.1\th1:old=\n\
                    =>\texample.com/new\tv0.0.2\th1:new=\n\
                    build\t-compiler=gc\n\
                    build\tCGO_ENABLED=0\n";
        let build = read(&program("go1.22.5", info)).unwrap();
        assert_eq!(build.go_version, "go1.22.5");
        assert_eq!(build.path(), Some("example.com/cmd/x"));
        let modules = build.modules();
        assert_eq!(modules.len(), 3);
        assert!(modules[0].main);
        assert_eq!(modules[2].path, "example.com/new");
        assert_eq!(modules[2].sum.as_deref(), Some("h1:new="));
        assert!(build
            .text()
            .starts_with("go1.22.5\n\tpath\texample.com/cmd/x\n"));
        assert!(build.text().ends_with("\tbuild\tCGO_ENABLED=0\n"));
    }

    #[test]
    fn a_program_without_build_information_has_none() {
        assert_eq!(read(b"\x7fELF just some bytes"), None);
        // The magic, but not on a 16-byte boundary.
        let mut bytes = vec![0u8; 3];
        bytes.extend_from_slice(&program("go1.22.5", "path\tx\n")[48..]);
        assert_eq!(read(&bytes), None);
    }
}
