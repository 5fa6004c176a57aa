//! The kubelet's argv, kept compact: every word in one buffer, each followed
//! by the NUL that `execve` wants, and where each run of words came from.
//!
//! A word costs its bytes, a NUL and an offset; its source is stored once per
//! run (one run per variable of the chain), not once per word. Words are
//! bytes, not text: argv on Linux is bytes, and a variable from the process
//! environment need not be UTF-8.

use std::ffi::c_char;
use std::ops::Range;

#[derive(Debug, Clone, Default)]
pub struct Argv {
    /// Every word, each followed by a NUL.
    bytes: Vec<u8>,
    /// Where each word starts in `bytes`.
    starts: Vec<usize>,
    /// Where each run came from, with the index of its first word.
    runs: Vec<(usize, String)>,
}

impl Argv {
    pub fn new() -> Argv {
        Argv::default()
    }

    /// Starts a run: the words pushed from now on came from `source`.
    pub fn begin(&mut self, source: String) {
        self.runs.push((self.starts.len(), source));
    }

    /// Appends a word to the current run. No input the wrapper reads can put a
    /// NUL into a word: the env files refuse it, and the process environment
    /// and command line cannot hold one.
    pub fn push(&mut self, word: &[u8]) {
        debug_assert!(!word.contains(&0), "a word with a NUL byte");
        debug_assert!(!self.runs.is_empty(), "a word before any run");
        self.starts.push(self.bytes.len());
        self.bytes.extend_from_slice(word);
        self.bytes.push(0);
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The words with indexes in `range`.
    pub fn words(&self, range: Range<usize>) -> impl Iterator<Item = &[u8]> + '_ {
        range.map(|i| self.word(i))
    }

    /// Every word, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.words(0..self.len())
    }

    /// Every word's source, in order (one per word).
    pub fn sources(&self) -> impl Iterator<Item = &str> + '_ {
        self.runs
            .iter()
            .enumerate()
            .flat_map(|(i, (first, source))| {
                let end = self.runs.get(i + 1).map_or(self.len(), |(next, _)| *next);
                (*first..end).map(move |_| source.as_str())
            })
    }

    /// One pointer per word, into this buffer, then a NULL: the `argv` of
    /// `execve`. Valid while `self` is neither changed nor dropped.
    pub fn pointers(&self) -> Vec<*const c_char> {
        self.starts
            .iter()
            .map(|&start| self.bytes[start..].as_ptr().cast())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    }

    fn word(&self, i: usize) -> &[u8] {
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.bytes.len(), |&next| next);
        // Without the NUL that ends it.
        &self.bytes[self.starts[i]..end - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_sources_and_pointers() {
        let mut argv = Argv::new();
        argv.begin("first".into());
        argv.push(b"/usr/bin/kubelet");
        argv.begin("unset".into());
        argv.begin("second".into());
        argv.push(b"");
        argv.push(b"caf\xe9");
        assert_eq!(argv.len(), 3);
        let words: Vec<&[u8]> = argv.iter().collect();
        assert_eq!(words, [&b"/usr/bin/kubelet"[..], b"", b"caf\xe9"]);
        assert_eq!(argv.words(1..3).count(), 2);
        // A run without words has no entry.
        let sources: Vec<&str> = argv.sources().collect();
        assert_eq!(sources, ["first", "second", "second"]);

        let pointers = argv.pointers();
        assert_eq!(pointers.len(), 4);
        assert!(pointers[3].is_null());
        // SAFETY: each pointer is to a NUL-terminated word inside `argv`.
        let third = unsafe { std::ffi::CStr::from_ptr(pointers[2]) };
        assert_eq!(third.to_bytes(), b"caf\xe9");
    }
}
