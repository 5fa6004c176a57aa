//! Builds the kubelet's argv and environment the way systemd builds them
//! from kubeadm's drop-in `10-kubeadm.conf`:
//!
//! ```text
//! Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=… --kubeconfig=…"
//! Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
//! EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
//! EnvironmentFile=-ENV_FILE                    (the family's, pkg/families.toml: deb's or rpm's)
//! ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
//! ```
//!
//! followed by the wrapper's own command-line arguments.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::argv::Argv;
use crate::{envfile, rooted, split, version, wait, Error};

/// The drop-in's two `Environment=` lines.
pub const DROP_IN_ENVIRONMENT: [(&str, &str); 2] = [
    (
        "KUBELET_KUBECONFIG_ARGS",
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf",
    ),
    ("KUBELET_CONFIG_ARGS", "--config=/var/lib/kubelet/config.yaml"),
];

/// Written by `kubeadm init` / `kubeadm join`; sets `KUBELET_KUBEADM_ARGS`.
pub const KUBEADM_FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";

/// The drop-in's `ExecStart=` after the binary.
pub const EXEC_START_ARGS: [&str; 4] = [
    "$KUBELET_KUBECONFIG_ARGS",
    "$KUBELET_CONFIG_ARGS",
    "$KUBELET_KUBEADM_ARGS",
    "$KUBELET_EXTRA_ARGS",
];

/// A file only deb hosts have (pkg/families.toml, `[detect]`).
const DEB_MARKER: &str = deb_marker!();
/// A directory rpm hosts have (pkg/families.toml, `[detect]`).
const RPM_MARKER_DIR: &str = rpm_marker_dir!();

/// Which distribution family's env file holds `KUBELET_EXTRA_ARGS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Deb,
    Rpm,
}

impl Family {
    pub fn env_file(self) -> &'static str {
        match self {
            Family::Deb => deb_env_file!(),
            Family::Rpm => rpm_env_file!(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Deb => "deb",
            Family::Rpm => "rpm",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        match s {
            "deb" => Some(Family::Deb),
            "rpm" => Some(Family::Rpm),
            _ => None,
        }
    }
}

/// Where a variable's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    DropIn,
    /// The path is shared by every variable of the file.
    File {
        path: Rc<Path>,
        line: usize,
    },
    Process,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Origin::DropIn => write!(f, "drop-in Environment="),
            Origin::File { path, .. } => write!(f, "{}", path.display()),
            Origin::Process => write!(f, "process environment"),
        }
    }
}

impl Origin {
    /// `FILE:LINE` for a file, else the same as `Display`.
    pub fn location(&self) -> String {
        match self {
            Origin::File { path, line } => format!("{}:{line}", path.display()),
            other => other.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub value: String,
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    Read,
    Missing,
    /// The other family's file, present but not read.
    Ignored,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub path: PathBuf,
    pub role: &'static str,
    pub status: FileStatus,
}

/// Everything the chain depends on besides the files it reads.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Every path is read under this directory (`/` normally).
    pub root: PathBuf,
    /// The family when chosen explicitly, with what chose it.
    pub family: Option<(Family, String)>,
    /// The wrapper's own environment (what systemd's manager environment is
    /// to a unit): the base that the drop-in and the files add to. Values
    /// are bytes: they need not be UTF-8.
    pub process_env: BTreeMap<String, OsString>,
    /// `KUBELET_VERSION` from the `--settings` file, the weakest source.
    pub settings_version: Option<(String, String)>,
    /// The `--settings` file, listed among the files read.
    pub settings_file: Option<PathBuf>,
    /// The wrapper's command-line arguments for the kubelet.
    pub kubelet_args: Vec<OsString>,
}

/// What the wrapper will exec, and why.
#[derive(Debug, Clone)]
pub struct Plan {
    pub family: Family,
    pub family_source: String,
    pub files: Vec<FileRecord>,
    /// The variables the drop-in and the files add to the environment.
    pub env: BTreeMap<String, Value>,
    pub kubelet: PathBuf,
    pub kubelet_version: Option<String>,
    pub kubelet_source: String,
    /// argv[0] is the kubelet path.
    pub argv: Argv,
    /// The `--config` file the kubelet will read, under the root.
    pub config: Option<PathBuf>,
    pub warnings: Vec<String>,
}

impl Plan {
    /// The `--config` file, if the kubelet would be started without it.
    pub fn missing_config(&self) -> Option<&Path> {
        self.config.as_deref().filter(|p| !p.exists())
    }
}

/// Reads the files and builds the plan.
pub fn build(inputs: &Inputs) -> Result<Plan, Error> {
    let root = inputs.root.as_path();
    let mut warnings = Vec::new();
    let mut files = Vec::new();
    let (family, family_source, ignored) = choose_family(root, inputs, &mut warnings);

    // As in systemd: Environment= first, then each EnvironmentFile= in order,
    // later assignments winning.
    let mut env: BTreeMap<String, Value> = DROP_IN_ENVIRONMENT
        .iter()
        .map(|(k, v)| {
            let value = Value {
                value: v.to_string(),
                origin: Origin::DropIn,
            };
            (k.to_string(), value)
        })
        .collect();
    for (path, role) in [
        (KUBEADM_FLAGS_ENV, "kubeadm flags"),
        (family.env_file(), "family env file"),
    ] {
        let path: Rc<Path> = rooted(root, Path::new(path)).into();
        let Some(file) = envfile::load(&path)? else {
            files.push(FileRecord {
                path: path.to_path_buf(),
                role,
                status: FileStatus::Missing,
            });
            continue;
        };
        for line in &file.continued_comments {
            warnings.push(format!(
                "{}:{line}: this comment ends in a backslash: systemd < 254 (Debian 12, RHEL 9) also skips line {}; kubelet-wrapper reads that line, as systemd >= 254 does",
                path.display(),
                line + 1
            ));
        }
        for a in file.assignments {
            if !envfile::is_valid_name(&a.key) {
                warnings.push(format!(
                    "{}:{}: ignoring {:?}: not a valid variable name (systemd ignores it too)",
                    path.display(),
                    a.line,
                    a.key
                ));
                continue;
            }
            check_exportable(&path, &a)?;
            let origin = Origin::File {
                path: path.clone(),
                line: a.line,
            };
            env.insert(
                a.key,
                Value {
                    value: a.value,
                    origin,
                },
            );
        }
        files.push(FileRecord {
            path: path.to_path_buf(),
            role,
            status: FileStatus::Read,
        });
    }
    if let Some(path) = ignored {
        files.push(FileRecord {
            path,
            role: "family env file (other family)",
            status: FileStatus::Ignored,
        });
    }
    if let Some(path) = &inputs.settings_file {
        files.push(FileRecord {
            path: path.clone(),
            role: "wrapper settings",
            status: FileStatus::Read,
        });
    }

    let lookup = |name: &str| lookup_var(&env, &inputs.process_env, name);

    // KUBELET_VERSION: the files win, then the process (empty counts as
    // unset there), then --settings.
    let pinned = match lookup("KUBELET_VERSION") {
        Some((b"", Origin::Process)) => inputs.settings_version.clone(),
        Some((v, origin)) => Some((String::from_utf8_lossy(v).into_owned(), origin.location())),
        None => inputs.settings_version.clone(),
    };
    let kubelet_version = match &pinned {
        Some((raw, at)) => {
            version::normalize(raw).map_err(|e| Error::input(format!("{at}: {e}")))?
        }
        None => None,
    };
    let kubelet = version::kubelet_path(root, kubelet_version.as_deref());
    let kubelet_source = match (&kubelet_version, &pinned) {
        (Some(v), Some((_, at))) => format!("KUBELET_VERSION={v} ({at})"),
        _ => format!("default {}", version::DEFAULT_KUBELET),
    };

    let mut argv = Argv::new();
    argv.begin(kubelet_source.clone());
    argv.push(kubelet.as_os_str().as_bytes());
    for word in EXEC_START_ARGS {
        let name = &word[1..];
        let source = match lookup(name) {
            Some((_, origin)) => format!("{name} ({origin})"),
            None => format!("{name} (unset)"),
        };
        let first = argv.len();
        argv.begin(source.clone());
        split::expand_word(word, |n| lookup(n).map(|(v, _)| v), |w| argv.push(w));
        warn_if_not_utf8(&argv, first, &source, &mut warnings);
    }
    let first = argv.len();
    argv.begin("command line".to_string());
    for arg in &inputs.kubelet_args {
        argv.push(arg.as_bytes());
    }
    warn_if_not_utf8(&argv, first, "the command line", &mut warnings);

    let config = wait::config_flag(argv.words(1..argv.len()))
        .filter(|p| !p.is_empty())
        .map(|p| rooted(root, Path::new(OsStr::from_bytes(p))));

    Ok(Plan {
        family,
        family_source,
        files,
        env,
        kubelet,
        kubelet_version,
        kubelet_source,
        argv,
        config,
        warnings,
    })
}

/// Linux refuses to exec with an argument or environment string longer than
/// MAX_ARG_STRLEN: 32 pages, 128 KiB with 4 KiB pages.
pub fn max_exec_string() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    32 * usize::try_from(page).unwrap_or(4096).max(4096)
}

/// Fails when `NAME=VALUE` could not be passed to the kubelet: every valid
/// variable of the files is exported, and the exec would fail with
/// "Argument list too long". Checked here to name the file and the line.
fn check_exportable(path: &Path, a: &envfile::Assignment) -> Result<(), Error> {
    // NAME, '=', VALUE and the NUL that ends it.
    let len = a.key.len() + 1 + a.value.len() + 1;
    let max = max_exec_string();
    if len > max {
        return Err(Error::input(format!(
            "{}:{}: {} is {} bytes long; Linux passes at most {max} bytes per variable to a program, so the kubelet could not be started with it",
            path.display(),
            a.line,
            a.key,
            a.value.len()
        )));
    }
    Ok(())
}

/// Warns when a word of the run starting at `first` is not UTF-8: such a
/// word reaches the kubelet byte for byte, but --print can only show it
/// with U+FFFD in place of the bytes.
fn warn_if_not_utf8(argv: &Argv, first: usize, source: &str, warnings: &mut Vec<String>) {
    if argv
        .words(first..argv.len())
        .any(|w| std::str::from_utf8(w).is_err())
    {
        warnings.push(format!(
            "{source} is not valid UTF-8: its words are passed to the kubelet byte for byte (--print shows U+FFFD for the invalid bytes)"
        ));
    }
}

/// A variable as the kubelet will see it: from the drop-in or the files,
/// else from the wrapper's own environment.
fn lookup_var<'a>(
    env: &'a BTreeMap<String, Value>,
    process_env: &'a BTreeMap<String, OsString>,
    name: &str,
) -> Option<(&'a [u8], Origin)> {
    match env.get(name) {
        Some(v) => Some((v.value.as_bytes(), v.origin.clone())),
        None => process_env
            .get(name)
            .map(|v| (v.as_bytes(), Origin::Process)),
    }
}

/// The family of pkg/families.toml's `[detect]` rule, which install.sh
/// follows too: the explicit family, else the one whose env file exists
/// when exactly one does, else deb when the deb marker file exists, else
/// rpm when the rpm marker directory exists, else deb. When both env files
/// exist, the other one is returned to be reported as ignored.
fn choose_family(
    root: &Path,
    inputs: &Inputs,
    warnings: &mut Vec<String>,
) -> (Family, String, Option<PathBuf>) {
    if let Some((family, source)) = &inputs.family {
        return (*family, source.clone(), None);
    }
    let exists = |f: Family| rooted(root, Path::new(f.env_file())).exists();
    let only = |family: Family, why: &str| (family, why.to_string(), None);
    let (host, why) = if rooted(root, Path::new(DEB_MARKER)).exists() {
        (Family::Deb, concat!(deb_marker!(), " exists"))
    } else if rooted(root, Path::new(RPM_MARKER_DIR)).is_dir() {
        (
            Family::Rpm,
            concat!(
                rpm_marker_dir!(),
                " exists and ",
                deb_marker!(),
                " does not"
            ),
        )
    } else {
        (
            Family::Deb,
            concat!(
                "neither ",
                deb_marker!(),
                " nor ",
                rpm_marker_dir!(),
                " exists"
            ),
        )
    };
    match (exists(Family::Deb), exists(Family::Rpm)) {
        (true, false) => only(
            Family::Deb,
            concat!("auto: only ", deb_env_file!(), " exists"),
        ),
        (false, true) => only(
            Family::Rpm,
            concat!("auto: only ", rpm_env_file!(), " exists"),
        ),
        (false, false) => (
            host,
            format!("auto: neither family file exists and {why}"),
            None,
        ),
        (true, true) => {
            let ignored = match host {
                Family::Deb => Family::Rpm,
                Family::Rpm => Family::Deb,
            };
            let ignored_path = rooted(root, Path::new(ignored.env_file()));
            warnings.push(format!(
                concat!(
                    "both ", deb_env_file!(), " and ", rpm_env_file!(),
                    " exist; reading the {} one because {}; ignoring {} (set KUBELET_WRAPPER_FAMILY to choose)"
                ),
                host.name(),
                why,
                ignored_path.display()
            ));
            let source = format!("auto: both family files exist and {why}");
            (host, source, Some(ignored_path))
        }
    }
}
