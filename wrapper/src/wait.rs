//! Waiting for kubeadm's config instead of crash-looping.
//!
//! Before `kubeadm init`/`join` has run, `/var/lib/kubelet/config.yaml` does
//! not exist and a kubelet started with `--config` exits at once; under a
//! supervisor that is a restart loop every few seconds. The wrapper waits
//! (bounded, with a log line now and then) and starts the kubelet as soon as
//! the file appears.

use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::{log, Error};

/// How often to look for the file.
pub const POLL: Duration = Duration::from_secs(1);

/// The value of the last `--config` flag (`--config=PATH` or `--config
/// PATH`), as the kubelet's flag parser reads it: nothing after `--` is a
/// flag.
pub fn config_flag<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    let mut found = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == b"--" {
            break;
        } else if arg == b"--config" {
            found = args.next();
        } else if let Some(path) = arg.strip_prefix(b"--config=") {
            found = Some(path);
        }
    }
    found
}

/// One bounded wait, possibly for several paths in turn (the files are read
/// again when the config appears, and may name another one).
pub struct Waiter {
    started: Instant,
    limit: Duration,
    log_every: Duration,
    next_log: Duration,
    announced: Option<PathBuf>,
}

impl Waiter {
    pub fn new(limit: Duration, log_every: Duration) -> Waiter {
        Waiter {
            started: Instant::now(),
            limit,
            log_every,
            next_log: log_every,
            announced: None,
        }
    }

    /// Returns once `path` exists, or fails when the limit is reached.
    pub fn until_exists(&mut self, path: &Path) -> Result<(), Error> {
        let shown = path.display();
        if self.announced.as_deref() != Some(path) {
            log(&format!(
                "waiting for {shown} (written by kubeadm init/join) before starting the kubelet; giving up after {} s",
                self.limit.as_secs()
            ));
            self.announced = Some(path.to_path_buf());
        }
        self.until_gone(
            || (!path.exists()).then(String::new),
            Lines {
                still: &|_| format!("still waiting for {shown}"),
                gave_up: &|_| format!("{shown} still does not exist (run kubeadm init or kubeadm join; when restarted, the wrapper waits again)"),
                done: &format!("{shown} appeared"),
            },
        )
    }

    /// Returns once `problem` says nothing, or fails when the limit is
    /// reached; `first` is what it said before the wait, logged at once and
    /// then now and then.
    pub fn until_none(
        &mut self,
        first: String,
        problem: impl Fn() -> Option<String>,
    ) -> Result<(), Error> {
        log(&format!(
            "{first}; waiting, giving up after {} s",
            self.limit.as_secs()
        ));
        self.until_gone(
            problem,
            Lines {
                still: &|now| format!("still: {now}"),
                gave_up: &|now| now.to_string(),
                done: "fixed",
            },
        )
    }

    /// The one wait: `problem` polled until it says nothing (`done` is
    /// logged) or the limit is reached (`gave_up` of its last word), `still`
    /// of it logged now and then.
    fn until_gone(
        &mut self,
        problem: impl Fn() -> Option<String>,
        lines: Lines,
    ) -> Result<(), Error> {
        loop {
            let elapsed = self.started.elapsed();
            let Some(now) = problem() else {
                log(&format!(
                    "{} after {} s; starting the kubelet",
                    lines.done,
                    elapsed.as_secs()
                ));
                return Ok(());
            };
            if elapsed >= self.limit {
                return Err(Error::gave_up(format!(
                    "gave up after {} s: {}",
                    self.limit.as_secs(),
                    (lines.gave_up)(&now)
                )));
            }
            if elapsed >= self.next_log {
                log(&format!(
                    "{} ({} s of {} s)",
                    (lines.still)(&now),
                    elapsed.as_secs(),
                    self.limit.as_secs()
                ));
                self.next_log = elapsed + self.log_every;
            }
            sleep(POLL.min(self.limit - elapsed));
        }
    }
}

/// What a wait logs, given what its problem says now.
struct Lines<'a> {
    still: &'a dyn Fn(&str) -> String,
    gave_up: &'a dyn Fn(&str) -> String,
    done: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_flag(args: &[&str]) -> Option<String> {
        let found = super::config_flag(args.iter().map(|a| a.as_bytes()))?;
        Some(String::from_utf8(found.to_vec()).unwrap())
    }

    #[test]
    fn config_flag_forms_and_last_wins() {
        assert_eq!(config_flag(&["--config=/a"]).as_deref(), Some("/a"));
        assert_eq!(config_flag(&["--config", "/a"]).as_deref(), Some("/a"));
        assert_eq!(
            config_flag(&["--config=/a", "--v=2", "--config", "/b"]).as_deref(),
            Some("/b")
        );
        assert_eq!(
            config_flag(&["--config", "/a", "--config=/c"]).as_deref(),
            Some("/c")
        );
        assert_eq!(config_flag(&["--config"]).as_deref(), None);
        assert_eq!(
            config_flag(&["--configx=/a", "--kubeconfig=/k"]).as_deref(),
            None
        );
        assert_eq!(
            config_flag(&["--config=/a", "--", "--config=/b"]).as_deref(),
            Some("/a")
        );
        assert_eq!(config_flag(&["--config="]).as_deref(), Some(""));
    }

    #[test]
    fn gives_up_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("config.yaml");
        let mut waiter = Waiter::new(Duration::from_millis(300), Duration::from_secs(60));
        let start = Instant::now();
        let err = waiter.until_exists(&missing).unwrap_err();
        assert_eq!(err.code(), 1);
        assert!(err.to_string().contains("gave up after 0 s"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn waits_until_the_problem_is_gone_or_gives_up() {
        let calls = std::cell::Cell::new(0);
        let mut waiter = Waiter::new(Duration::from_secs(10), Duration::from_secs(60));
        waiter
            .until_none("no cgroups".into(), || {
                calls.set(calls.get() + 1);
                (calls.get() < 2).then(|| "still none".to_string())
            })
            .unwrap();
        assert_eq!(calls.get(), 2);
        let mut waiter = Waiter::new(Duration::from_millis(300), Duration::from_secs(60));
        let err = waiter
            .until_none("no cgroups".into(), || Some("no cgroups yet".into()))
            .unwrap_err();
        assert_eq!(err.code(), 1);
        assert_eq!(err.to_string(), "gave up after 0 s: no cgroups yet");
    }

    #[test]
    fn returns_at_once_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let mut waiter = Waiter::new(Duration::from_secs(10), Duration::from_secs(60));
        let start = Instant::now();
        waiter.until_exists(dir.path()).unwrap();
        assert!(start.elapsed() < Duration::from_millis(500));
    }
}
