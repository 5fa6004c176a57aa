//! kubelet-wrapper: runs the kubelet with the flag chain of kubeadm's
//! systemd drop-in, for init systems without systemd. See README.md.
//!
//! - [`envfile`]: systemd's `EnvironmentFile=` parser
//! - [`split`]: systemd's `$VAR` expansion in `ExecStart=`
//! - [`chain`]: files → argv, environment and where each part came from
//! - [`argv`]: the kubelet's argv, one buffer for every word
//! - [`version`]: `KUBELET_VERSION` → kubelet binary
//! - [`wait`]: waiting for kubeadm's `--config` file
//! - [`driver`]: a systemd cgroup driver on a host without systemd, said in one line
//! - [`cgroups`]: a host whose cgroups the kubelet cannot use, named (and waited on)
//! - [`explain`]: the `--print` JSON
//! - [`cli`]: the wrapper's options

// deb_env_file!(), rpm_env_file!(), deb_marker!(), rpm_marker_dir!(): the
// family facts of pkg/families.toml (build.rs).
include!(concat!(env!("OUT_DIR"), "/families.rs"));

pub mod argv;
pub mod cgroups;
pub mod chain;
pub mod cli;
pub mod driver;
pub mod envfile;
pub mod explain;
pub mod split;
pub mod version;
pub mod wait;

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CString, OsString};
use std::fmt;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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
        print_json(&plan, settings.wait.as_secs())?;
        // A dry run: after explaining, fail where a real start would fail,
        // so that an init script can use --print as a pre-start check.
        check(&plan)?;
        cgroups::check(root, plan.config.as_deref(), None)?;
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

    // A host whose cgroups no kubelet can use is named, and waited on (a
    // mount fixes it) rather than crash-looped on; cgroup v1 is noted.
    let waiter = (!settings.wait.is_zero())
        .then(|| wait::Waiter::new(settings.wait, settings.wait_log_interval));
    cgroups::check(root, plan.config.as_deref(), waiter)?;
    if let Some(line) = driver::mismatch(root, plan.argv.iter(), plan.config.as_deref()) {
        log(&line);
    }
    let err = exec(&plan);
    Err(Error::input(format!(
        "cannot exec {}: {err}",
        plan.kubelet.display()
    )))
}

extern "C" {
    fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
        -> c_int;
}

/// Replaces this process with the kubelet: argv[0] is its path, and its
/// environment is the wrapper's with the plan's variables laid over it.
/// Returns only on failure. (One `execve` and nothing else: std's `Command`
/// would also copy the environment into a map and reset signals first.)
fn exec(plan: &chain::Plan) -> io::Error {
    let cstring = |bytes: Vec<u8>| {
        CString::new(bytes).map_err(|_| io::Error::other("a variable holds a NUL byte"))
    };
    let build_env = || -> io::Result<Vec<CString>> {
        let mut envp = Vec::new();
        for (name, value) in std::env::vars_os() {
            let overridden = name.to_str().is_some_and(|n| plan.env.contains_key(n));
            if !overridden {
                let mut entry = name.into_encoded_bytes();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                envp.push(cstring(entry)?);
            }
        }
        for (name, value) in &plan.env {
            envp.push(cstring(format!("{name}={}", value.value).into_bytes())?);
        }
        Ok(envp)
    };
    let path = match cstring(plan.kubelet.as_os_str().as_bytes().to_vec()) {
        Ok(path) => path,
        Err(e) => return e,
    };
    let envp = match build_env() {
        Ok(envp) => envp,
        Err(e) => return e,
    };
    // The argv's words are NUL-terminated in its own buffer already.
    let argv_ptrs = plan.argv.pointers();
    let envp_ptrs: Vec<*const c_char> = envp
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: every pointer refers to a NUL-terminated string owned by
    // `path`, `plan.argv` or `envp`, which outlive the call; both arrays end
    // in NULL.
    unsafe { execve(path.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    io::Error::last_os_error()
}

/// The wrapper's environment, by name. Values stay bytes: one that is not
/// UTF-8 still expands into the kubelet's argv. A name that is not UTF-8
/// cannot be referred to (valid names are ASCII); it still reaches the
/// kubelet with the rest of the environment.
fn process_env() -> BTreeMap<String, OsString> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .collect()
}

fn print(text: &str) -> Result<i32, Error> {
    writeln!(std::io::stdout().lock(), "{text}")
        .map_err(|e| Error::input(format!("cannot write to stdout: {e}")))?;
    Ok(0)
}

/// The `--print` JSON on stdout, written as it is produced.
fn print_json(plan: &chain::Plan, wait_limit: u64) -> Result<(), Error> {
    let cannot_write = |e: io::Error| Error::input(format!("cannot write to stdout: {e}"));
    let mut out = io::BufWriter::with_capacity(64 << 10, io::stdout().lock());
    explain::write(plan, wait_limit, &mut out).map_err(|e| cannot_write(e.into()))?;
    writeln!(out)
        .and_then(|()| out.flush())
        .map_err(cannot_write)
}
