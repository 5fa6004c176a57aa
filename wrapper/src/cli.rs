//! The wrapper's own options.
//!
//! Hand-parsed because the grammar is unusual: wrapper options come first,
//! end at the first argument that is not one of them (or at `--`), and
//! everything after belongs to the kubelet untouched. The names avoid every
//! kubelet flag (`--version`, `--help`, `--root-dir`, …).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::chain::{Family, Inputs};
use crate::{envfile, rooted, Error};

pub const USAGE: &str = concat!(
    "\
Usage: kubelet-wrapper [WRAPPER-OPTIONS] [--] [KUBELET-ARGS...]

Starts the kubelet (exec, same PID) with the command line and environment
that systemd builds from kubeadm's drop-in 10-kubeadm.conf, for hosts
without systemd (OpenRC, runit, a container, a chroot).

The kubelet's argv, in order:
  1. $KUBELET_KUBECONFIG_ARGS  --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf
                               --kubeconfig=/etc/kubernetes/kubelet.conf
  2. $KUBELET_CONFIG_ARGS      --config=/var/lib/kubelet/config.yaml
  3. $KUBELET_KUBEADM_ARGS     from /var/lib/kubelet/kubeadm-flags.env (kubeadm writes it)
  4. $KUBELET_EXTRA_ARGS       from the family env file: ",
    deb_env_file!(),
    " (deb)
                               or ",
    rpm_env_file!(),
    " (rpm)
  5. KUBELET-ARGS              this command line
The files use systemd's EnvironmentFile= syntax (no shell runs), as systemd
254 and later read it (252 also skips the line after a comment that ends in
a backslash: the wrapper warns where that matters); a missing file is
skipped; values in the files override the two defaults above, later
assignments win, and every valid variable they set is exported to the
kubelet. $VAR splits into words as in systemd's ExecStart=.

Wrapper options (only before the first other argument; -- ends them):
  --print            print what would run as JSON (argv, sources, env, files,
                     family, kubelet, waits_for); start nothing. Fails like a
                     real start would (e.g. no kubelet), after the JSON
  --root DIR         read every file and run the kubelet under DIR
                     (DIR",
    deb_env_file!(),
    ", DIR/usr/bin/kubelet, ...);
                     flag values are passed unchanged
  --family deb|rpm   which family env file to read
  --wait SECONDS     longest wait for the --config file (default 3600; 0: no wait)
  --settings FILE    read KUBELET_WRAPPER_FAMILY, KUBELET_WRAPPER_WAIT and
                     KUBELET_VERSION from FILE (EnvironmentFile= syntax, read
                     under --root; it must exist)
  --wrapper-help     this text
  --wrapper-version  the wrapper's version
  (--root=DIR, --family=F, --wait=S and --settings=FILE work too.)

Settings: a command-line option beats the process environment, which beats
the --settings file (an empty value in the environment counts as unset).
  KUBELET_WRAPPER_FAMILY   deb or rpm. When unset: if exactly one family file
                           exists, it is read; if both exist, the host's
                           convention decides (",
    deb_marker!(),
    " exists:
                           deb, else rpm) and a warning names the ignored
                           file; if neither exists, deb.
  KUBELET_WRAPPER_WAIT     as --wait
  KUBELET_VERSION          vX.Y.Z (the v is optional): run
                           /opt/kubernetes/vX.Y.Z/bin/kubelet instead of
                           /usr/bin/kubelet. Set in the env files it beats the
                           process environment and the settings file.

Waiting: if the final argv has --config PATH (the last one counts) and PATH
does not exist, the wrapper logs one line, waits (a line about every 60 s),
re-reads the env files when PATH appears and starts the kubelet; after the
limit it exits with status 1 and the supervisor starts it again.

Exit status: 2 for bad input (file:line on stderr), 1 when the wait gave up;
otherwise the kubelet replaces the wrapper.
",
);

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Options),
    Help,
    Version,
}

/// The options as given, not yet checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub print: bool,
    pub root: Option<String>,
    pub family: Option<String>,
    pub wait: Option<String>,
    pub settings: Option<String>,
    /// Bytes, passed on unchanged: argv on Linux need not be UTF-8.
    pub kubelet_args: Vec<OsString>,
}

const VALUE_OPTIONS: [&str; 4] = ["--root", "--family", "--wait", "--settings"];

pub fn parse(args: &[OsString]) -> Result<Command, Error> {
    let mut opts = Options::default();
    let mut i = 0;
    while i < args.len() {
        // Every wrapper option is ASCII: an argument that is not UTF-8 is
        // the kubelet's.
        let Some(arg) = args[i].to_str() else { break };
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if VALUE_OPTIONS.contains(&name) => (name, Some(value)),
            _ => (arg, None),
        };
        match name {
            "--" => {
                i += 1;
                break;
            }
            "--print" => opts.print = true,
            "--wrapper-help" => return Ok(Command::Help),
            "--wrapper-version" => return Ok(Command::Version),
            _ if VALUE_OPTIONS.contains(&name) => {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        let value = args.get(i).ok_or_else(|| {
                            Error::input(format!("{name} needs a value (see --wrapper-help)"))
                        })?;
                        value.to_str().ok_or_else(|| {
                            Error::input(format!("{name}: the value is not valid UTF-8"))
                        })?
                    }
                };
                let slot = match name {
                    "--root" => &mut opts.root,
                    "--family" => &mut opts.family,
                    "--wait" => &mut opts.wait,
                    _ => &mut opts.settings,
                };
                *slot = Some(value.to_string());
            }
            // The first argument that is not a wrapper option: the kubelet's.
            _ => break,
        }
        i += 1;
    }
    opts.kubelet_args = args[i..].to_vec();
    Ok(Command::Run(opts))
}

/// The options resolved against the environment and the settings file.
#[derive(Debug)]
pub struct Settings {
    pub inputs: Inputs,
    pub print: bool,
    pub wait: Duration,
    pub wait_log_interval: Duration,
    pub warnings: Vec<String>,
}

const SETTINGS_VARIABLES: [&str; 3] = [
    "KUBELET_WRAPPER_FAMILY",
    "KUBELET_WRAPPER_WAIT",
    "KUBELET_VERSION",
];

/// Applies the precedence: command-line option > process environment >
/// `--settings` file.
pub fn resolve(opts: Options, process_env: BTreeMap<String, OsString>) -> Result<Settings, Error> {
    let root = PathBuf::from(opts.root.as_deref().unwrap_or("/"));
    if !root.is_dir() {
        return Err(Error::input(format!(
            "--root {}: not a directory",
            root.display()
        )));
    }

    let mut warnings = Vec::new();
    // Variable → (value, "FILE:LINE").
    let mut from_file: BTreeMap<String, (String, String)> = BTreeMap::new();
    let settings_file = match &opts.settings {
        Some(file) => {
            let path = rooted(&root, Path::new(file));
            let file = envfile::load(&path)?.ok_or_else(|| {
                Error::input(format!("{}: settings file not found", path.display()))
            })?;
            for a in file.assignments {
                let at = format!("{}:{}", path.display(), a.line);
                if SETTINGS_VARIABLES.contains(&a.key.as_str()) {
                    from_file.insert(a.key, (a.value, at));
                } else {
                    warnings.push(format!(
                        "{at}: ignoring {}: a settings file sets only {} (kubelet flags go in the family env file)",
                        a.key,
                        SETTINGS_VARIABLES.join(", ")
                    ));
                }
            }
            Some(path)
        }
        None => None,
    };

    // A setting from the process environment; empty counts as unset. A
    // value that is not UTF-8 cannot be a valid setting: refused, not
    // mistaken for unset.
    let from_env = |var: &str| -> Result<Option<&str>, Error> {
        match process_env.get(var).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v.to_str().map(Some).ok_or_else(|| {
                Error::input(format!("{var} (process environment): not valid UTF-8"))
            }),
        }
    };

    // The strongest non-empty source of a setting, with its name for errors.
    let setting = |option: Option<&String>, option_name: &str, var: &str| {
        if let Some(v) = option {
            return Ok(Some((v.clone(), option_name.to_string())));
        }
        if let Some(v) = from_env(var)? {
            return Ok(Some((
                v.to_string(),
                format!("{var} (process environment)"),
            )));
        }
        Ok::<_, Error>(
            from_file
                .get(var)
                .filter(|(v, _)| !v.is_empty())
                .map(|(v, at)| (v.clone(), format!("{var} ({at})"))),
        )
    };

    let family = match setting(opts.family.as_ref(), "--family", "KUBELET_WRAPPER_FAMILY")? {
        Some((v, source)) => {
            let family = Family::parse(&v).ok_or_else(|| {
                Error::input(format!("{source}: family must be deb or rpm, not {v:?}"))
            })?;
            Some((family, source))
        }
        None => None,
    };

    let wait = match setting(opts.wait.as_ref(), "--wait", "KUBELET_WRAPPER_WAIT")? {
        Some((v, source)) => seconds(&v, &source)?,
        None => Duration::from_secs(3600),
    };
    let wait_log_interval = match from_env("KUBELET_WRAPPER_WAIT_LOG_INTERVAL")? {
        Some(v) => seconds(v, "KUBELET_WRAPPER_WAIT_LOG_INTERVAL")?.max(Duration::from_secs(1)),
        None => Duration::from_secs(60),
    };

    // KUBELET_VERSION from the process environment is one of the chain's
    // sources (the env files beat it); only the settings file is passed here.
    let settings_version = from_file.remove("KUBELET_VERSION");

    Ok(Settings {
        inputs: Inputs {
            root,
            family,
            process_env,
            settings_version,
            settings_file,
            kubelet_args: opts.kubelet_args,
        },
        print: opts.print,
        wait,
        wait_log_interval,
        warnings,
    })
}

fn seconds(value: &str, source: &str) -> Result<Duration, Error> {
    value
        .trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| {
            Error::input(format!(
                "{source}: expected a number of seconds, not {value:?}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        match parse(&args).unwrap() {
            Command::Run(o) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wrapper_options_then_kubelet_args() {
        let o = run(&[
            "--print",
            "--root",
            "/r",
            "--family=rpm",
            "--v=2",
            "--root",
            "/x",
        ]);
        assert!(o.print);
        assert_eq!(o.root.as_deref(), Some("/r"));
        assert_eq!(o.family.as_deref(), Some("rpm"));
        assert_eq!(o.kubelet_args, ["--v=2", "--root", "/x"]);
    }

    #[test]
    fn double_dash_ends_wrapper_options() {
        let o = run(&["--wait", "0", "--", "--print", "--wrapper-help"]);
        assert_eq!(o.wait.as_deref(), Some("0"));
        assert!(!o.print);
        assert_eq!(o.kubelet_args, ["--print", "--wrapper-help"]);
    }

    #[test]
    fn kubelet_flags_are_not_wrapper_options() {
        for flag in [
            "--version",
            "--help",
            "--root-dir=/var/lib/kubelet",
            "-v",
            "--roots",
        ] {
            let o = run(&[flag, "--print"]);
            assert!(!o.print, "{flag}");
            assert_eq!(o.kubelet_args, [flag, "--print"]);
        }
    }

    #[test]
    fn help_and_version() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(parse(&args(&["--wrapper-help"])).unwrap(), Command::Help);
        assert_eq!(
            parse(&args(&["--print", "--wrapper-version"])).unwrap(),
            Command::Version
        );
        // After the first kubelet argument they belong to the kubelet.
        assert!(matches!(
            parse(&args(&["--v=2", "--wrapper-help"])).unwrap(),
            Command::Run(_)
        ));
    }

    #[test]
    fn arguments_that_are_not_utf8_belong_to_the_kubelet() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(b"--node-labels=caf\xe9".to_vec());
        let args = [
            OsString::from("--print"),
            bad.clone(),
            OsString::from("--root"),
        ];
        match parse(&args).unwrap() {
            Command::Run(o) => {
                assert!(o.print);
                assert_eq!(o.kubelet_args, [bad.clone(), OsString::from("--root")]);
            }
            other => panic!("{other:?}"),
        }
        // A wrapper option's value must be text.
        let err = parse(&[OsString::from("--root"), bad]).unwrap_err();
        assert!(err
            .to_string()
            .contains("--root: the value is not valid UTF-8"));
    }

    #[test]
    fn missing_value_is_an_error() {
        let err = parse(&[OsString::from("--root")]).unwrap_err();
        assert_eq!(err.code(), 2);
        assert!(err.to_string().contains("--root needs a value"));
    }

    #[test]
    fn precedence_option_then_environment_then_settings_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("conf"),
            "KUBELET_WRAPPER_FAMILY=rpm\nKUBELET_WRAPPER_WAIT=5\nKUBELET_VERSION=1.30.2\nOTHER=x\n",
        )
        .unwrap();
        let root = dir.path().to_str().unwrap().to_string();
        let opts = |family: Option<&str>| Options {
            root: Some(root.clone()),
            settings: Some("/conf".into()),
            family: family.map(String::from),
            ..Options::default()
        };
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, OsString> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect()
        };

        let s = resolve(opts(None), env(&[])).unwrap();
        assert_eq!(s.inputs.family.as_ref().unwrap().0, Family::Rpm);
        assert!(s.inputs.family.as_ref().unwrap().1.ends_with("/conf:1)"));
        assert_eq!(s.wait, Duration::from_secs(5));
        assert_eq!(s.inputs.settings_version.as_ref().unwrap().0, "1.30.2");
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("/conf:4: ignoring OTHER"));

        let s = resolve(
            opts(None),
            env(&[
                ("KUBELET_WRAPPER_FAMILY", "deb"),
                ("KUBELET_WRAPPER_WAIT", "7"),
            ]),
        )
        .unwrap();
        assert_eq!(s.inputs.family.unwrap().0, Family::Deb);
        assert_eq!(s.wait, Duration::from_secs(7));

        // Empty in the environment counts as unset.
        let s = resolve(opts(None), env(&[("KUBELET_WRAPPER_FAMILY", "")])).unwrap();
        assert_eq!(s.inputs.family.unwrap().0, Family::Rpm);

        let s = resolve(opts(Some("rpm")), env(&[("KUBELET_WRAPPER_FAMILY", "deb")])).unwrap();
        assert_eq!(
            s.inputs.family.unwrap(),
            (Family::Rpm, "--family".to_string())
        );
    }

    #[test]
    fn bad_settings() {
        let dir = tempfile::tempdir().unwrap();
        let root = Some(dir.path().to_str().unwrap().to_string());
        let err = resolve(
            Options {
                root: root.clone(),
                family: Some("arch".into()),
                ..Options::default()
            },
            BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("--family: family must be deb or rpm"),
            "{err}"
        );

        let err = resolve(
            Options {
                root: root.clone(),
                settings: Some("/nope".into()),
                ..Options::default()
            },
            BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("/nope: settings file not found"),
            "{err}"
        );

        let env = BTreeMap::from([("KUBELET_WRAPPER_WAIT".to_string(), OsString::from("1h"))]);
        let err = resolve(
            Options {
                root: root.clone(),
                ..Options::default()
            },
            env,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("KUBELET_WRAPPER_WAIT (process environment): expected a number"),
            "{err}"
        );

        // Not UTF-8: refused, not taken as unset.
        use std::os::unix::ffi::OsStringExt;
        let env = BTreeMap::from([(
            "KUBELET_WRAPPER_FAMILY".to_string(),
            OsString::from_vec(b"d\xebb".to_vec()),
        )]);
        let err = resolve(
            Options {
                root,
                ..Options::default()
            },
            env,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "KUBELET_WRAPPER_FAMILY (process environment): not valid UTF-8"
        );
    }
}
