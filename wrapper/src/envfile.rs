//! systemd's `EnvironmentFile=` parser.
//!
//! A line-for-line port of `parse_env_file_internal()` and `load_env_file()`
//! in systemd's `src/basic/env-file.c` (the state machine, its whitespace
//! trimming and its escape rules), so that a file means here exactly what it
//! means to systemd. Where the wrapper refuses input that systemd would skip,
//! the function says so; README.md lists every such case.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, ErrorKind, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::Error;

/// Larger files are refused. kubeadm writes a few hundred bytes and an
/// admin's file is not much longer; the limit keeps the wrapper's memory
/// small whatever a file holds (systemd's own limit is 64 MiB).
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

// Character classes of systemd's string-util.h and escape.h.
const WHITESPACE: &[char] = &[' ', '\t', '\n', '\r'];
const NEWLINE: &[char] = &['\n', '\r'];
const COMMENTS: &[char] = &['#', ';'];
/// Inside double quotes, a backslash before one of these yields the character.
const SHELL_NEED_ESCAPE: &[char] = &['"', '\\', '`', '$'];

/// One `KEY=value` line (or several, with continuations) of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub key: String,
    pub value: String,
    /// 1-based line on which the key starts.
    pub line: usize,
}

/// A whole file: its assignments, and where systemd before v254 reads it
/// differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvFile {
    pub assignments: Vec<Assignment>,
    /// 1-based lines of comments that end in a backslash and are followed by
    /// a line that is not blank. systemd < 254 continues such a comment onto
    /// the next line and so skips it (systemd issue 27975); systemd ≥ 254,
    /// and this parser, read the next line.
    pub continued_comments: Vec<usize>,
}

/// Why a file's text was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// `env_name_is_valid()`: what systemd accepts as a variable name (bash's
/// rules: letters, digits and `_`, not starting with a digit).
pub fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphabetic() || first == b'_' => {
            bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        _ => false,
    }
}

/// Reads and parses `path`. `Ok(None)` when the file does not exist (the
/// `-` of `EnvironmentFile=-…`); every other problem is an error.
///
/// Stricter than systemd: with `-`, systemd silently skips a file it cannot
/// read or that holds invalid UTF-8 or a NUL byte; we stop with an error.
pub fn load(path: &Path) -> Result<Option<EnvFile>, Error> {
    let Some(bytes) = read_regular_file(path)? else {
        return Ok(None);
    };
    parse_file(&bytes)
        .map(Some)
        .map_err(|e| Error::input(format!("{}:{}: {}", path.display(), e.line, e.message)))
}

/// The content of the regular file `path`; `None` when nothing is there.
///
/// The file is opened without blocking and then checked through the open
/// descriptor: a check of the path before opening it could be passed by a
/// regular file that is then swapped for a FIFO, whose open would wait for a
/// writer forever.
fn read_regular_file(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let cannot_read = |e: io::Error| Error::input(format!("{}: cannot read: {e}", path.display()));
    // O_NONBLOCK: opening a FIFO returns at once. O_NOCTTY: opening a
    // terminal does not make it ours. (std adds O_CLOEXEC.)
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot_read(e)),
    };
    let meta = file.metadata().map_err(cannot_read)?;
    check_regular(path, &meta)?;
    blocking(&file).map_err(cannot_read)?;

    // Room for the whole file up front: read in one call, not in doubling steps.
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(MAX_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    // It may have grown since the check.
    if bytes.len() as u64 > MAX_FILE_SIZE {
        return Err(too_big(path));
    }
    Ok(Some(bytes))
}

/// Clears the O_NONBLOCK that `file` was opened with, so that a read never
/// ends early with EAGAIN (a regular file ignores the flag; a file system in
/// user space need not). F_SETFL sets only the status flags (O_APPEND,
/// O_NONBLOCK, …), and O_NONBLOCK is the only one set: 0 clears it.
fn blocking(file: &File) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor `file` owns; F_SETFL takes an int.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Refuses anything but a regular file, and a file over the size limit.
fn check_regular(path: &Path, meta: &Metadata) -> Result<(), Error> {
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(Error::input(format!(
            "{}: is a directory, expected a file",
            path.display()
        )));
    }
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(Error::input(format!(
            "{}: is not a regular file but {what}, refusing to read it",
            path.display()
        )));
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(too_big(path));
    }
    Ok(())
}

fn too_big(path: &Path) -> Error {
    Error::input(format!(
        "{}: larger than {} MiB, refusing to read it (an env file for the kubelet needs a few hundred bytes)",
        path.display(),
        MAX_FILE_SIZE >> 20
    ))
}

/// Checks the raw bytes the way systemd would accept them, then parses.
///
/// systemd refuses a file with a NUL byte (`read_full_file`), and a key or
/// value with invalid UTF-8 or a Unicode noncharacter (`utf8_is_valid`). We
/// apply the UTF-8 rules to the whole file, comments included (stricter).
pub fn parse_bytes(bytes: &[u8]) -> Result<Vec<Assignment>, ParseError> {
    parse_file(bytes).map(|f| f.assignments)
}

/// [`parse_bytes`], with the lines systemd < 254 reads differently.
pub fn parse_file(bytes: &[u8]) -> Result<EnvFile, ParseError> {
    let line_at = |offset: usize| 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(ParseError {
            line: line_at(offset),
            message: "contains a NUL byte".into(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError {
        line: line_at(e.valid_up_to()),
        message: "invalid UTF-8".into(),
    })?;
    if let Some((offset, c)) = text.char_indices().find(|&(_, c)| is_noncharacter(c)) {
        return Err(ParseError {
            line: line_at(offset),
            message: format!(
                "contains U+{:04X}, a Unicode noncharacter systemd rejects",
                c as u32
            ),
        });
    }
    let mut continued_comments = Vec::new();
    let assignments = scan(text, &mut continued_comments)?;
    // One line can hold several comments that a backslash continues, each
    // ended by a CR (a newline to systemd); the line is reported once.
    continued_comments.dedup();
    let lines: Vec<&str> = text.split('\n').collect();
    // `comment` counts from 1, so `lines[comment]` is the line after it.
    continued_comments.retain(|&comment| lines.get(comment).is_some_and(|l| !l.trim().is_empty()));
    Ok(EnvFile {
        assignments,
        continued_comments,
    })
}

/// The code points systemd's `unichar_is_valid()` rejects beyond Rust's own
/// UTF-8 rules.
fn is_noncharacter(c: char) -> bool {
    let c = c as u32;
    (0xFDD0..=0xFDEF).contains(&c) || c & 0xFFFE == 0xFFFE
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    PreKey,
    Key,
    PreValue,
    Value,
    ValueEscape,
    SingleQuoteValue,
    DoubleQuoteValue,
    DoubleQuoteValueEscape,
    Comment,
    CommentEscape,
}

/// Parses env-file text into its assignments, in file order, duplicates
/// kept (see [`dedup`] for systemd's "later wins" list). Keys are returned as
/// written, valid or not: systemd drops invalid names only later, when it
/// builds the service's environment, and so do we (see `chain`).
///
/// The one error: a quote still open at the end of the file. systemd takes
/// everything up to the end as the value; we refuse it (stricter).
pub fn parse(text: &str) -> Result<Vec<Assignment>, ParseError> {
    scan(text, &mut Vec::new())
}

/// The state machine; pushes the line of every comment that ends in a
/// backslash onto `continued_comments`.
fn scan(text: &str, continued_comments: &mut Vec<usize>) -> Result<Vec<Assignment>, ParseError> {
    let mut out = Vec::new();
    let mut state = State::PreKey;
    let mut key = String::new();
    let mut value = String::new();
    // Byte lengths at which trailing whitespace starts, as in systemd.
    let mut last_key_whitespace: Option<usize> = None;
    let mut last_value_whitespace: Option<usize> = None;
    let mut line = 1;
    let mut key_line = 1;
    let mut quote_line = 1;

    let mut push = |key: &mut String, value: &mut String, kws: Option<usize>, line: usize| {
        if let Some(n) = kws {
            key.truncate(n);
        }
        out.push(Assignment {
            key: std::mem::take(key),
            value: std::mem::take(value),
            line,
        });
    };

    for c in text.chars() {
        match state {
            State::PreKey => {
                if COMMENTS.contains(&c) {
                    state = State::Comment;
                } else if !WHITESPACE.contains(&c) {
                    state = State::Key;
                    last_key_whitespace = None;
                    key_line = line;
                    key.push(c);
                }
            }
            State::Key => {
                if NEWLINE.contains(&c) {
                    // A line without '=' is skipped.
                    state = State::PreKey;
                    key.clear();
                } else if c == '=' {
                    state = State::PreValue;
                    last_value_whitespace = None;
                } else {
                    if !WHITESPACE.contains(&c) {
                        last_key_whitespace = None;
                    } else if last_key_whitespace.is_none() {
                        last_key_whitespace = Some(key.len());
                    }
                    key.push(c);
                }
            }
            State::PreValue => {
                if NEWLINE.contains(&c) {
                    state = State::PreKey;
                    push(&mut key, &mut value, last_key_whitespace, key_line);
                } else if c == '\'' {
                    state = State::SingleQuoteValue;
                    quote_line = line;
                } else if c == '"' {
                    state = State::DoubleQuoteValue;
                    quote_line = line;
                } else if c == '\\' {
                    state = State::ValueEscape;
                } else if !WHITESPACE.contains(&c) {
                    state = State::Value;
                    value.push(c);
                }
            }
            State::Value => {
                if NEWLINE.contains(&c) {
                    state = State::PreKey;
                    if let Some(n) = last_value_whitespace {
                        value.truncate(n);
                    }
                    push(&mut key, &mut value, last_key_whitespace, key_line);
                } else if c == '\\' {
                    state = State::ValueEscape;
                    last_value_whitespace = None;
                } else {
                    if !WHITESPACE.contains(&c) {
                        last_value_whitespace = None;
                    } else if last_value_whitespace.is_none() {
                        last_value_whitespace = Some(value.len());
                    }
                    value.push(c);
                }
            }
            State::ValueEscape => {
                state = State::Value;
                // An escaped newline (a continuation line) is dropped.
                if !NEWLINE.contains(&c) {
                    value.push(c);
                }
            }
            State::SingleQuoteValue => {
                if c == '\'' {
                    state = State::PreValue;
                } else {
                    value.push(c);
                }
            }
            State::DoubleQuoteValue => {
                if c == '"' {
                    state = State::PreValue;
                } else if c == '\\' {
                    state = State::DoubleQuoteValueEscape;
                } else {
                    value.push(c);
                }
            }
            State::DoubleQuoteValueEscape => {
                state = State::DoubleQuoteValue;
                if SHELL_NEED_ESCAPE.contains(&c) {
                    value.push(c);
                } else if c != '\n' {
                    // Like the shell: other backslashes stay.
                    value.push('\\');
                    value.push(c);
                }
            }
            State::Comment => {
                if c == '\\' {
                    state = State::CommentEscape;
                } else if NEWLINE.contains(&c) {
                    state = State::PreKey;
                }
            }
            State::CommentEscape => {
                // Since systemd v254 a backslash does not continue a comment.
                state = if NEWLINE.contains(&c) {
                    continued_comments.push(line);
                    State::PreKey
                } else {
                    State::Comment
                };
            }
        }
        if c == '\n' {
            line += 1;
        }
    }

    match state {
        State::SingleQuoteValue | State::DoubleQuoteValue | State::DoubleQuoteValueEscape => {
            let which = if state == State::SingleQuoteValue {
                "single"
            } else {
                "double"
            };
            return Err(ParseError {
                line: quote_line,
                message: format!(
                    "unterminated {which} quote (it is still open at the end of the file)"
                ),
            });
        }
        State::PreValue | State::Value | State::ValueEscape => {
            if state == State::Value {
                if let Some(n) = last_value_whitespace {
                    value.truncate(n);
                }
            }
            push(&mut key, &mut value, last_key_whitespace, key_line);
        }
        State::PreKey | State::Key | State::Comment | State::CommentEscape => {}
    }
    Ok(out)
}

/// `load_env_file()`'s list: one entry per key, the last assignment's value,
/// at the position of the key's first assignment.
pub fn dedup(assignments: Vec<Assignment>) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = Vec::new();
    for a in assignments {
        match out.iter_mut().find(|o| o.key == a.key) {
            Some(existing) => *existing = a,
            None => out.push(a),
        }
    }
    out
}

/// Writes variables as env-file text that [`parse`] reads back unchanged:
/// every value double-quoted, with `"`, `\`, `` ` `` and `$` escaped (like
/// systemd's `write_env_file()`). Test fixtures and property tests use it.
pub fn serialize<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (key, value) in vars {
        out.push_str(key);
        out.push_str("=\"");
        for c in value.chars() {
            if SHELL_NEED_ESCAPE.contains(&c) {
                out.push('\\');
            }
            out.push(c);
        }
        out.push_str("\"\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What systemd's `load_env_file()` returns: "KEY=value" strings.
    fn load_env(text: &str) -> Vec<String> {
        dedup(parse_bytes(text.as_bytes()).expect("parses"))
            .into_iter()
            .map(|a| format!("{}={}", a.key, a.value))
            .collect()
    }

    // The cases of systemd's src/test/test-env-file.c, byte for byte.

    #[test]
    fn systemd_load_env_file_1() {
        let env_file_1 = "a=a\n\
                          a=b\n\
                          a=b\n\
                          a=a\n\
                          b=b\\\n\
                          c\n\
                          d= d\\\n\
                          e  \\\n\
                          f  \n\
                          g=g\\ \n\
                          h= ąęół\\ śćńźżμ \n\
                          i=i\\";
        assert_eq!(
            load_env(env_file_1),
            ["a=a", "b=bc", "d=de  f", "g=g ", "h=ąęół śćńźżμ", "i=i"]
        );
    }

    #[test]
    fn systemd_load_env_file_2() {
        assert_eq!(load_env("a=a\\\n"), ["a=a"]);
    }

    #[test]
    fn systemd_load_env_file_3() {
        let env_file_3 = "#SPAMD_ARGS=\"-d --socketpath=/var/lib/bulwark/spamd \\\n\
                          #--nouser-config                                     \\\n\
                          normal1=line\\\n\
                          111\n\
                          ;normal=ignored                                      \\\n\
                          normal2=line222\n\
                          normal ignored                                       \\\n";
        assert_eq!(load_env(env_file_3), ["normal1=line111", "normal2=line222"]);
    }

    #[test]
    fn systemd_load_env_file_4() {
        let env_file_4 = "# Generated\n\
                          \n\
                          HWMON_MODULES=\"coretemp f71882fg\"\n\
                          \n\
                          # For compatibility reasons\n\
                          \n\
                          MODULE_0=coretemp\n\
                          MODULE_1=f71882fg";
        assert_eq!(
            load_env(env_file_4),
            [
                "HWMON_MODULES=coretemp f71882fg",
                "MODULE_0=coretemp",
                "MODULE_1=f71882fg"
            ]
        );
    }

    #[test]
    fn systemd_load_env_file_5() {
        assert_eq!(load_env("a=\nb="), ["a=", "b="]);
    }

    #[test]
    fn systemd_load_env_file_6() {
        let env_file_6 = "a=\\ \\n \\t \\x \\y \\' \n\
                          b= \\$'                  \n\
                          c= ' \\n\\t\\$\\`\\\\\n\
                          '   \n\
                          d= \" \\n\\t\\$\\`\\\\\n\
                          \"   \n";
        assert_eq!(
            load_env(env_file_6),
            [
                "a= n t x y '",
                "b=$'",
                "c= \\n\\t\\$\\`\\\\\n",
                "d= \\n\\t$`\\\n"
            ]
        );
    }

    #[test]
    fn systemd_load_env_file_invalid_utf8() {
        // Noncharacters: valid UTF-8 to Rust, invalid to systemd.
        for text in [
            "fo\u{fffe}o=bar",
            "foo=b\u{ffff}ar",
            "baz=hello world\u{fffe}",
        ] {
            let err = parse_bytes(text.as_bytes()).unwrap_err();
            assert_eq!(err.line, 1, "{text:?}");
            assert!(err.message.contains("noncharacter"), "{err:?}");
        }
    }

    #[test]
    fn systemd_write_and_load_env_file() {
        // systemd writes each value with its writer and reads it back.
        for v in [
            "obbardc-laptop",
            "obbardc\\-laptop",
            "obbardc-lap\\top",
            "obbardc-lap\\top",
            "obbardc-lap\\\\top",
            "double\"quote",
            "single'quote",
            "dollar$dollar",
            "newline\nnewline",
        ] {
            let text = format!("# header 1\n\n# header 2\n{}", serialize([("TEST", v)]));
            assert_eq!(load_env(&text), [format!("TEST={v}")], "{text:?}");
        }
    }

    // systemd's env_name_is_valid() cases (src/test/test-env-util.c).
    #[test]
    fn systemd_env_name_is_valid() {
        assert!(is_valid_name("test"));
        assert!(is_valid_name("KUBELET_EXTRA_ARGS"));
        assert!(is_valid_name("_x9"));
        for bad in [
            "",
            "xxx\x07",
            "xxx\x07b",
            "\x07\x009",
            "5_starting_with_a_number_is_wrong",
            "#¤%&?_only_numbers_letters_and_underscore_allowed",
            "a.b",
            "a-b",
            "a b",
            " b",
            "głąb",
            "BASH_FUNC_foo%%",
        ] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn later_assignments_win() {
        assert_eq!(load_env("A=1\nB=2\nA=3\n"), ["A=3", "B=2"]);
    }

    #[test]
    fn kubeadm_flags_env_as_kubeadm_writes_it() {
        let text = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9\"\n";
        assert_eq!(
            load_env(text),
            ["KUBELET_KUBEADM_ARGS=--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9"]
        );
    }

    #[test]
    fn shell_syntax_is_data() {
        assert_eq!(
            load_env("A=$(rm -rf /); `id` ${HOME}\nB='$(x)'\n"),
            ["A=$(rm -rf /); `id` ${HOME}", "B=$(x)"]
        );
    }

    #[test]
    fn quotes_only_open_a_value_or_follow_a_closed_quote() {
        assert_eq!(
            load_env("A=x \"y z\"\nB=\"x\" 'y'  z  \nC= \"a b\"   \n"),
            ["A=x \"y z\"", "B=xyz", "C=a b"]
        );
    }

    #[test]
    fn whitespace_around_key_and_value_is_trimmed() {
        assert_eq!(load_env("  A  =  b c  \n\tB\t=\t\n"), ["A=b c", "B="]);
    }

    #[test]
    fn lines_without_equals_and_comments_are_skipped() {
        assert_eq!(
            load_env("# c\n; c\nnot an assignment\n  # indented comment\nA=1 # not a comment\n"),
            ["A=1 # not a comment"]
        );
    }

    #[test]
    fn invalid_names_are_kept_by_the_parser() {
        // systemd drops them later, when building the environment.
        assert_eq!(load_env("export A=1\na.b=2\n"), ["export A=1", "a.b=2"]);
    }

    #[test]
    fn crlf_line_endings() {
        assert_eq!(load_env("A=1\r\nB=\"2\"\r\n"), ["A=1", "B=2"]);
    }

    #[test]
    fn multi_line_quoted_value_reports_its_key_line() {
        let parsed = parse("\nA=\"1\n2\"\nB=3\n").unwrap();
        assert_eq!(parsed[0].line, 2);
        assert_eq!(parsed[0].value, "1\n2");
        assert_eq!(parsed[1].line, 4);
    }

    #[test]
    fn hostile_inputs_name_the_line() {
        let cases: [(&[u8], usize, &str); 6] = [
            (b"A=1\nB=\"open\n\nC=3\n", 2, "unterminated double quote"),
            (b"A='open", 1, "unterminated single quote"),
            (b"A=\"x\\", 1, "unterminated double quote"),
            (b"A=1\nB=x\0y\n", 2, "NUL"),
            (b"A=1\n\nB=\xff\n", 3, "invalid UTF-8"),
            (b"A=\xc5", 1, "invalid UTF-8"), // a truncated "ł"
        ];
        for (bytes, line, what) in cases {
            let err = parse_bytes(bytes).unwrap_err();
            assert_eq!(err.line, line, "{bytes:?}: {err:?}");
            assert!(err.message.contains(what), "{bytes:?}: {err:?}");
        }
    }

    #[test]
    fn comments_that_old_systemd_continues_are_reported() {
        let file = parse_file(b"# a \\\nA=1\n; b\\\n\n# c \\\nB=2\n#d\\").unwrap();
        assert_eq!(load_env("# a \\\nA=1\n"), ["A=1"]);
        // Line 3's next line is blank, line 7 is the last: nothing skipped.
        assert_eq!(file.continued_comments, [1, 5]);
        let file = parse_file(b"# x\r\n# y \\\r\nA=1\r\n").unwrap();
        assert_eq!(file.continued_comments, [2]);
        assert_eq!(file.assignments.len(), 1);
        // Two continued comments on one line, each ended by a CR (found by
        // the envfile fuzz target: the line was counted twice and the
        // arithmetic over it overflowed).
        let file = parse_file(b"#a \\\r#b \\\r\nA=1\n").unwrap();
        assert_eq!(file.continued_comments, [1]);
        let crash = include_bytes!("../../fuzz/corpus/envfile/two-continued-comments-on-one-line");
        assert!(parse_file(crash).is_ok());
    }

    #[test]
    fn empty_and_blank_files() {
        assert_eq!(load_env(""), Vec::<String>::new());
        assert_eq!(load_env("\n\n   \n"), Vec::<String>::new());
    }
}
