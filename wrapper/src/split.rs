//! How systemd expands `$VAR` in `ExecStart=`.
//!
//! Ports of `replace_env_argv()` / `replace_env()` (src/basic/env-util.c)
//! and of the word splitting they use for a lone `$VAR` word:
//! `strv_split_full(…, WHITESPACE, EXTRACT_RELAX|EXTRACT_UNQUOTE)`, i.e.
//! `extract_first_word()` (src/basic/extract-word.c) with those flags.

use crate::envfile::is_valid_name;

const WHITESPACE: &[u8] = b" \t\n\r";

/// Splits a variable's value into words as systemd does for a lone `$VAR`,
/// handing each word to `word`: whitespace separates words; `'…'` and `"…"`
/// group and are removed; a backslash takes the next byte literally (inside
/// quotes too). Lenient like systemd (`EXTRACT_RELAX`): an unclosed quote
/// runs to the end, a trailing backslash is dropped. An empty or blank value
/// gives no word; `''` gives one empty word.
///
/// It works on bytes, as systemd's C code does: every byte with a meaning
/// here is ASCII, and in UTF-8 an ASCII byte is never part of another
/// character, so UTF-8 text splits exactly as it would by characters and any
/// other byte passes through unchanged.
pub fn split(value: &[u8], mut word: impl FnMut(&[u8])) {
    let mut current = Vec::new();
    let mut bytes = value.iter().copied().peekable();
    loop {
        while bytes.next_if(|b| WHITESPACE.contains(b)).is_some() {}
        if bytes.peek().is_none() {
            return;
        }
        current.clear();
        let mut quote: Option<u8> = None;
        while let Some(b) = bytes.next() {
            match (quote, b) {
                (_, b'\\') => current.extend(bytes.next()),
                (Some(q), b) if b == q => quote = None,
                (Some(_), b) => current.push(b),
                (None, b'\'' | b'"') => quote = Some(b),
                (None, b) if WHITESPACE.contains(&b) => break,
                (None, b) => current.push(b),
            }
        }
        word(&current);
    }
}

/// The inverse of [`split`]: splitting `quote(words)` gives `words` back, for
/// any words without a NUL byte.
pub fn quote<W: AsRef<[u8]>>(words: &[W]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.push(b'"');
        for &b in w.as_ref() {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    }
    out
}

/// Expands one `ExecStart=` word (`replace_env_argv()` for one element),
/// handing each resulting word to `push`: a lone `$NAME` becomes the split
/// words of the variable (none when it is unset, empty or not a valid name);
/// any other word stays one word, with each `${NAME}` replaced by the value
/// as is and `$$` by `$`.
pub fn expand_word<'a>(
    word: &str,
    lookup: impl Fn(&str) -> Option<&'a [u8]>,
    mut push: impl FnMut(&[u8]),
) {
    if let Some(name) = word.strip_prefix('$') {
        if !name.starts_with(['{', '$']) {
            if is_valid_name(name) {
                if let Some(value) = lookup(name) {
                    split(value, push);
                }
            }
            return;
        }
    }
    push(&replace_env(word, &lookup));
}

/// `replace_env_argv()`: expands every word of a command line.
pub fn replace_env_argv<'a, S: AsRef<str>>(
    words: &[S],
    lookup: impl Fn(&str) -> Option<&'a [u8]>,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for w in words {
        expand_word(w.as_ref(), &lookup, |word| out.push(word.to_vec()));
    }
    out
}

/// `replace_env()` without extensions: `${NAME}` inside a word.
fn replace_env<'a>(format: &str, lookup: &impl Fn(&str) -> Option<&'a [u8]>) -> Vec<u8> {
    enum State {
        Word,
        Curly,
        Variable,
    }
    let bytes = format.as_bytes();
    let mut out = Vec::new();
    // Start of the text not yet copied to `out`. Every index below sits on an
    // ASCII byte ('$', '{', '}'), so slicing the text there is safe.
    let mut word = 0;
    let mut state = State::Word;
    for (i, &c) in bytes.iter().enumerate() {
        match state {
            State::Word => {
                if c == b'$' {
                    state = State::Curly;
                }
            }
            State::Curly => match c {
                b'{' => {
                    out.extend_from_slice(&bytes[word..i - 1]);
                    word = i - 1;
                    state = State::Variable;
                }
                b'$' => {
                    // "$$" is one literal '$'.
                    out.extend_from_slice(&bytes[word..i]);
                    word = i + 1;
                    state = State::Word;
                }
                _ => state = State::Word,
            },
            State::Variable => match c {
                b'}' => {
                    let name = &format[word + 2..i];
                    if is_valid_name(name) {
                        out.extend_from_slice(lookup(name).unwrap_or_default());
                    }
                    word = i + 1;
                    state = State::Word;
                }
                // "${A:-b}" needs REPLACE_ENV_ALLOW_EXTENDED, which ExecStart= lacks.
                b':' => state = State::Word,
                _ => {}
            },
        }
    }
    out.extend_from_slice(&bytes[word..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    /// The words of `value`, collected.
    fn split(value: impl AsRef<[u8]>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        super::split(value.as_ref(), |w| out.push(w.to_vec()));
        out
    }

    fn expand_word<'a>(word: &str, lookup: impl Fn(&str) -> Option<&'a [u8]>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        super::expand_word(word, lookup, |w| out.push(w.to_vec()));
        out
    }

    // strv_split_full(…, WHITESPACE, EXTRACT_RELAX|EXTRACT_UNQUOTE) over the
    // inputs of systemd's test-extract-word.c and test-strv.c. Cases that
    // systemd tests with other flags are given the result these flags give.
    #[test]
    fn systemd_extract_first_word_cases() {
        let cases: &[(&str, &[&str])] = &[
            ("foobar waldo", &["foobar", "waldo"]),
            ("\"foobar\" 'waldo'", &["foobar", "waldo"]),
            ("\"", &[""]),
            ("'", &[""]),
            ("'fooo", &["fooo"]),
            ("\"fooo", &["fooo"]),
            (
                "KEY=val \"KEY2=val with space\" \"KEY3=val with \\\"quotation\\\"\"",
                &[
                    "KEY=val",
                    "KEY2=val with space",
                    "KEY3=val with \"quotation\"",
                ],
            ),
            ("yay'foo'bar", &["yayfoobar"]),
            ("   foobar   ", &["foobar"]),
            (" foo\\ba\\x6ar ", &["foobax6ar"]),
            (
                "    f\\u00f6o \"pi\\U0001F4A9le\"   ",
                &["fu00f6o", "piU0001F4A9le"],
            ),
            ("fooo\\", &["fooo"]),
            ("\"foo\\", &["foo"]),
            ("fooo\\ bar quux", &["fooo bar", "quux"]),
            ("\\w+@\\K[\\d.]+", &["w+@K[d.]+"]),
            ("-N ''", &["-N", ""]),
            ("foo\\xbar", &["fooxbar"]),
            ("a\\ b:c", &["a b:c"]),
            (
                "foobar=\"waldo\"maldo, baldo",
                &["foobar=waldomaldo,", "baldo"],
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(split(input), words(expected), "{input:?}");
        }
    }

    #[test]
    fn systemd_strv_unquote_cases() {
        let cases: &[(&str, &[&str])] = &[
            (
                "    foo=bar     \"waldo\"    zzz    ",
                &["foo=bar", "waldo", "zzz"],
            ),
            ("", &[]),
            (" ", &[]),
            ("   ", &[]),
            ("   x", &["x"]),
            ("x   ", &["x"]),
            ("  x   ", &["x"]),
            ("  \"x\"   ", &["x"]),
            ("  'x'   ", &["x"]),
            ("  'x\"'   ", &["x\""]),
            ("  \"x'\"   ", &["x'"]),
            ("a  '--b=c \"d e\"'", &["a", "--b=c \"d e\""]),
            ("  x\\\\", &["x\\"]),
            // Invalid without EXTRACT_RELAX; systemd's ExecStart= takes them.
            ("  x\\", &["x"]),
            ("a  --b='c \"d e\"''", &["a", "--b=c \"d e\""]),
            ("a  --b='c \"d e\" '\"", &["a", "--b=c \"d e\" "]),
            ("a  --b='c \"d e\"garbage", &["a", "--b=c \"d e\"garbage"]),
            ("'x'y'g", &["xyg"]),
        ];
        for (input, expected) in cases {
            assert_eq!(split(input), words(expected), "{input:?}");
        }
    }

    #[test]
    fn whitespace_kinds_and_backslash_in_single_quotes() {
        assert_eq!(split("a\tb\nc\rd"), words(&["a", "b", "c", "d"]));
        // Unlike the shell, a backslash escapes inside single quotes too.
        assert_eq!(split("'a\\'b' c"), words(&["a'b", "c"]));
    }

    #[test]
    fn kubelet_flags() {
        assert_eq!(
            split("--node-labels=\"a=b,c=d\" --max-pods=110  --v=2"),
            words(&["--node-labels=a=b,c=d", "--max-pods=110", "--v=2"])
        );
        assert_eq!(
            split("--eviction-hard='memory.available<100Mi nodefs.available<10%'"),
            words(&["--eviction-hard=memory.available<100Mi nodefs.available<10%"])
        );
        assert_eq!(split("$(reboot); `id`"), words(&["$(reboot);", "`id`"]));
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a [u8]> {
        move |name| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.as_bytes())
        }
    }

    // systemd's test-env-util.c, TEST(replace_env_argv).
    #[test]
    fn systemd_replace_env_argv() {
        let env = env(&[("FOO", "BAR BAR"), ("BAR", "waldo")]);
        let line = [
            "FOO$FOO",
            "FOO$FOOFOO",
            "FOO${FOO}$FOO",
            "FOO${FOO}",
            "${FOO}",
            "$FOO",
            "$FOO$FOO",
            "${FOO}${BAR}",
            "${FOO",
            "FOO$$${FOO}",
            "$$FOO${FOO}",
            "${FOO:-${BAR}}",
            "${QUUX:-${FOO}}",
            "${FOO:+${BAR}}",
            "${QUUX:+${BAR}}",
            "${FOO:+|${BAR}|}}",
            "${FOO:+|${BAR}{|}",
        ];
        assert_eq!(
            replace_env_argv(&line, env),
            words(&[
                "FOO$FOO",
                "FOO$FOOFOO",
                "FOOBAR BAR$FOO",
                "FOOBAR BAR",
                "BAR BAR",
                "BAR",
                "BAR",
                "BAR BARwaldo",
                "${FOO",
                "FOO$BAR BAR",
                "$FOOBAR BAR",
                "${FOO:-waldo}",
                "${QUUX:-BAR BAR}",
                "${FOO:+waldo}",
                "${QUUX:+waldo}",
                "${FOO:+|waldo|}}",
                "${FOO:+|waldo{|}",
            ])
        );
    }

    // systemd's test-env-util.c, TEST(replace_env_argv_bad).
    #[test]
    fn systemd_replace_env_argv_bad() {
        let env = env(&[("FOO", "BAR BAR"), ("BAR", "waldo")]);
        let line = [
            "$FOO",
            "A${FOO}B",
            "a${~}${%}b",
            "x${}y",
            "$UNSET2",
            "z${UNSET3}z${UNSET1}z",
            "piff${UNSET2}piff",
        ];
        assert_eq!(
            replace_env_argv(&line, env),
            words(&["BAR", "BAR", "ABAR BARB", "ab", "xy", "zzz", "piffpiff"])
        );
    }

    // systemd's test-env-util.c, TEST(replace_env), without extensions.
    #[test]
    fn systemd_replace_env() {
        let env1 = env(&[("FOO", "BAR BAR"), ("BAR", "waldo")]);
        for (input, expected) in [
            ("FOO=$FOO=${FOO}", "FOO=$FOO=BAR BAR"),
            ("BAR=$BAR=${BAR}", "BAR=$BAR=waldo"),
            ("BARBAR=$BARBAR=${BARBAR}", "BARBAR=$BARBAR="),
            ("BAR=$BAR$BAR${BAR}${BAR}", "BAR=$BAR$BARwaldowaldo"),
            ("${BAR}$BAR$BAR", "waldo$BAR$BAR"),
        ] {
            assert_eq!(replace_env(input, &env1), expected.as_bytes(), "{input:?}");
        }
        let env2 = env(&[("FOO", "foo"), ("BAR", "bar")]);
        for (input, expected) in [
            ("FOO=${FOO:-${BAR}}", "FOO=${FOO:-bar}"),
            ("BAR=${XXX:-${BAR}}", "BAR=${XXX:-bar}"),
            ("XXX=${XXX:+${BAR}}", "XXX=${XXX:+bar}"),
            ("FOO=${FOO:+${BAR}}", "FOO=${FOO:+bar}"),
            ("FOO=${FOO:-${BAR}post}", "FOO=${FOO:-barpost}"),
            ("XXX=${XXX:+${BAR}post}", "XXX=${XXX:+barpost}"),
            ("FOO=${FOO}between${BAR:-baz}", "FOO=foobetween${BAR:-baz}"),
        ] {
            assert_eq!(replace_env(input, &env2), expected.as_bytes(), "{input:?}");
        }
    }

    #[test]
    fn lone_variable_unset_empty_blank_or_invalid_gives_no_word() {
        let env = env(&[("EMPTY", ""), ("BLANK", " \t "), ("QUOTED_EMPTY", "''")]);
        assert!(expand_word("$UNSET", &env).is_empty());
        assert!(expand_word("$EMPTY", &env).is_empty());
        assert!(expand_word("$BLANK", &env).is_empty());
        assert!(expand_word("$", &env).is_empty());
        assert!(expand_word("$A-B", &env).is_empty());
        assert_eq!(expand_word("$QUOTED_EMPTY", &env), words(&[""]));
    }

    #[test]
    fn quote_round_trips() {
        for ws in [
            &["a", "b c", "", "'\"\\", "x\ny", " lead", "trail "][..],
            &[][..],
            &[""][..],
        ] {
            assert_eq!(split(quote(ws)), words(ws), "{:?}", quote(ws));
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        assert_eq!(
            split(b"--a=caf\xe9 '\xff x' \\\xfe"),
            [&b"--a=caf\xe9"[..], b"\xff x", b"\xfe"]
        );
        let ws: [&[u8]; 2] = [b"\xc3", b"\"\\\x80"];
        assert_eq!(split(quote(&ws)), ws);
    }
}
