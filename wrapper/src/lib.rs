//! kubelet-wrapper: runs the kubelet with the flag chain of kubeadm's
//! systemd drop-in, for init systems without systemd. See README.md.
//!
//! - [`envfile`]: systemd's `EnvironmentFile=` parser
//! - [`split`]: systemd's `$VAR` expansion in `ExecStart=`
//! - [`chain`]: files → argv, environment and where each part came from
//! - [`version`]: `KUBELET_VERSION` → kubelet binary
//! - [`wait`]: waiting for kubeadm's `--config` file
//! - [`explain`]: the `--print` JSON
//! - [`cli`]: the wrapper's options

pub mod chain;
pub mod cli;
pub mod envfile;
pub mod explain;
pub mod split;
pub mod version;
pub mod wait;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An error that ends the wrapper: one line on stderr and an exit status.
#[derive(Debug)]
pub struct Error {
    code: i32,
    message: String,
}

impl Error {
    /// Bad input, bad usage or an unusable installation: exit status 2.
    pub fn input(message: String) -> Error {
        Error { code: 2, message }
    }

    /// The wait for kubeadm's config ran out: exit status 1.
    pub fn gave_up(message: String) -> Error {
        Error { code: 1, message }
    }

    pub fn code(&self) -> i32 {
        self.code
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `path` as seen under `root`: absolute paths move under it, relative
/// ones stay relative to the current directory.
pub fn rooted(root: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix("/") {
        Ok(relative) => root.join(relative),
        Err(_) => path.to_path_buf(),
    }
}

/// One line on stderr. A closed stderr must not stop the kubelet from
/// starting, so write errors are ignored.
pub fn log(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "kubelet-wrapper: {line}");
}

/// Everything `main` does. Returns the exit status, or never returns when
/// the kubelet was exec'd.
pub fn run(args: &[OsString]) -> Result<i32, Error> {
    let opts = match cli::parse(args)? {
        cli::Command::Help => return print(cli::USAGE.trim_end()),
        cli::Command::Version => {
            return print(concat!("kubelet-wrapper ", env!("CARGO_PKG_VERSION")));
        }
        cli::Command::Run(opts) => opts,
    };
    let settings = cli::resolve(opts, process_env())?;
    settings.warnings.iter().for_each(|w| log(w));

    let root = &settings.inputs.root;
    let check = |plan: &chain::Plan| {
        version::check_installed(
            root,
            &plan.kubelet,
            plan.kubelet_version.as_deref(),
            &plan.kubelet_source,
        )
    };

    let mut plan = chain::build(&settings.inputs)?;
    plan.warnings.iter().for_each(|w| log(w));
    if settings.print {
        let json = explain::to_json(&plan, settings.wait.as_secs());
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| Error::input(format!("cannot format JSON: {e}")))?;
        print(&text)?;
        // A dry run: after explaining, fail where a real start would fail,
        // so that an init script can use --print as a pre-start check.
        check(&plan)?;
        return Ok(0);
    }

    // Fail on a missing kubelet now, not after an hour of waiting.
    check(&plan)?;
    if !settings.wait.is_zero() && plan.missing_config().is_some() {
        let mut waiter = wait::Waiter::new(settings.wait, settings.wait_log_interval);
        while let Some(missing) = plan.missing_config() {
            waiter.until_exists(missing)?;
            // kubeadm writes kubeadm-flags.env just before config.yaml: read
            // every file again.
            plan = chain::build(&settings.inputs)?;
        }
        plan.warnings.iter().for_each(|w| log(w));
        check(&plan)?;
    }

    let err = Command::new(&plan.kubelet)
        .args(plan.argv[1..].iter().map(|a| &a.value))
        .envs(plan.env.iter().map(|(k, v)| (k, &v.value)))
        .exec();
    Err(Error::input(format!(
        "cannot exec {}: {err}",
        plan.kubelet.display()
    )))
}

/// The wrapper's environment; variables that are not UTF-8 are still
/// passed to the kubelet, but cannot be referred to.
fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn print(text: &str) -> Result<i32, Error> {
    writeln!(std::io::stdout().lock(), "{text}")
        .map_err(|e| Error::input(format!("cannot write to stdout: {e}")))?;
    Ok(0)
}
