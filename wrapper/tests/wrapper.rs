//! End-to-end tests of the built `kubelet-wrapper` binary.
//!
//! Each test builds a throwaway root with `--root`, puts a *stand-in* for
//! the kubelet at /usr/bin/kubelet (a small sh script, not a real kubelet:
//! it records the PID, argv and environment it was started with, then
//! exits), and checks what the stand-in saw.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use kubelet_wrapper::chain::max_exec_string;
use kubelet_wrapper::envfile::MAX_FILE_SIZE;
use serde_json::Value;

const WRAPPER: &str = env!("CARGO_BIN_EXE_kubelet-wrapper");

/// The kubelet stand-in: records how it was started, then exits 0.
const STANDIN: &str = r#"#!/bin/sh
# kubelet STAND-IN for tests: records how it was started, then exits.
rec="$KUBELET_STANDIN_RECORD"
echo "$$" > "$rec/pid"
printf '%s' "$0" > "$rec/path"
for a in "$@"; do printf '%s\0' "$a"; done > "$rec/argv"
grep '^SigIgn:' /proc/$$/status > "$rec/sigign"
exec env -0 > "$rec/env"
"#;

const DEFAULT_ARGS: [&str; 3] = [
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
    "--kubeconfig=/etc/kubernetes/kubelet.conf",
    "--config=/var/lib/kubelet/config.yaml",
];

const KUBEADM_FLAGS: &str = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9\"\n";
const KUBEADM_ARGS: [&str; 2] = [
    "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
    "--pod-infra-container-image=registry.k8s.io/pause:3.9",
];

/// A throwaway host: `root/` is passed with --root, `record/` receives what
/// the stand-in saw.
struct Host {
    dir: tempfile::TempDir,
}

/// What the stand-in recorded.
#[derive(Debug)]
struct Recorded {
    pid: u32,
    path: String,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    sigign: u64,
}

impl Host {
    /// A root with the stand-in at /usr/bin/kubelet and kubeadm's config
    /// present (so nothing waits).
    fn new() -> Host {
        let host = Host::bare();
        host.install_kubelet("/usr/bin/kubelet");
        host.write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\n",
        );
        host
    }

    fn bare() -> Host {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("root")).unwrap();
        fs::create_dir(dir.path().join("record")).unwrap();
        Host { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn under(&self, path: &str) -> PathBuf {
        self.root().join(path.trim_start_matches('/'))
    }

    fn write(&self, path: &str, content: impl AsRef<[u8]>) {
        let path = self.under(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn install_kubelet(&self, path: &str) {
        self.write(path, STANDIN);
        fs::set_permissions(self.under(path), fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The wrapper with `--root` and a small, known environment.
    fn wrapper(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(WRAPPER);
        cmd.env_clear()
            .envs(self.base_env())
            .arg("--root")
            .arg(self.root())
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn base_env(&self) -> BTreeMap<String, String> {
        let record = self.dir.path().join("record");
        BTreeMap::from([
            ("PATH".into(), "/usr/bin:/bin".into()),
            (
                "KUBELET_STANDIN_RECORD".into(),
                record.to_str().unwrap().into(),
            ),
            ("FROM_THE_SUPERVISOR".into(), "kept as is".into()),
        ])
    }

    /// Runs the wrapper to completion (at most 60 s).
    fn run(&self, cmd: &mut Command) -> (Output, u32) {
        self.run_within(cmd, Duration::from_secs(60))
    }

    /// Runs the wrapper to completion; kills it and fails after `limit`.
    /// Its output is read while it runs: a pipe that fills up would stop it.
    fn run_within(&self, cmd: &mut Command, limit: Duration) -> (Output, u32) {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || done.send(child.wait_with_output()));
        match finished.recv_timeout(limit) {
            Ok(out) => (out.unwrap(), pid),
            Err(_) => {
                // Not reaped yet (the thread still waits for it): the PID is
                // still the child's.
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                panic!("kubelet-wrapper did not finish within {limit:?}");
            }
        }
    }

    fn print(&self, args: &[&str]) -> Value {
        let mut full = vec!["--print"];
        full.extend_from_slice(args);
        let (out, _) = self.run(&mut self.wrapper(&full));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn recorded(&self) -> Option<Recorded> {
        let rec = self.dir.path().join("record");
        let pid = fs::read_to_string(rec.join("pid")).ok()?;
        let read = |name: &str| fs::read(rec.join(name)).unwrap();
        let split0 = |bytes: Vec<u8>| -> Vec<String> {
            let text = String::from_utf8(bytes).unwrap();
            let mut parts: Vec<String> = text.split('\0').map(String::from).collect();
            parts.pop(); // after the last NUL
            parts
        };
        let pairs: Vec<(String, String)> = split0(read("env"))
            .into_iter()
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        let mut env: BTreeMap<String, String> = pairs.iter().cloned().collect();
        // A variable the env files override appears once, not twice.
        assert_eq!(env.len(), pairs.len(), "duplicate names in {pairs:?}");
        // dash exports PWD itself; the wrapper does not set it.
        env.remove("PWD");
        let sigign = String::from_utf8(read("sigign")).unwrap();
        let sigign = u64::from_str_radix(sigign.trim_start_matches("SigIgn:").trim(), 16).unwrap();
        Some(Recorded {
            pid: pid.trim().parse().unwrap(),
            path: String::from_utf8(read("path")).unwrap(),
            argv: split0(read("argv")),
            env,
            sigign,
        })
    }
}

/// The argv the stand-in recorded, each word with its bytes that are not
/// printable ASCII escaped (`\xe9`): `recorded` wants UTF-8.
fn recorded_argv_escaped(host: &Host) -> Vec<String> {
    let bytes = fs::read(host.dir.path().join("record/argv")).unwrap();
    let mut words: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|w| w.escape_ascii().to_string())
        .collect();
    words.pop(); // after the last NUL
    words
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Limits the address space of the process `cmd` starts (and of the
/// kubelet it execs) to `bytes`, as `ulimit -v` does.
fn limit_memory(cmd: &mut Command, bytes: u64) -> &mut Command {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn json_strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn execs_the_drop_in_chain_with_same_pid_and_print_agrees() {
    let host = Host::new();
    host.write("/var/lib/kubelet/kubeadm-flags.env", KUBEADM_FLAGS);
    host.write(
        "/etc/default/kubelet",
        "# Flags for the kubelet\n\
         KUBELET_EXTRA_ARGS=--node-labels=\"role=worker,zone=a b\" \\\n\
         \x20 --max-pods=110 '$(reboot)' `id`;\n\
         export NOT_A_NAME=1\n\
         OTHER_VAR='single $HOME'\n",
    );
    host.write("/etc/debian_version", "12.0\n");
    let kubelet_args = ["--v=2", "--root-dir", "/x y"];

    let (out, wrapper_pid) = host.run(&mut host.wrapper(&kubelet_args));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().expect("the stand-in ran");

    // exec: the kubelet is the wrapper's process.
    assert_eq!(rec.pid, wrapper_pid);
    assert_eq!(rec.path, host.under("/usr/bin/kubelet").to_str().unwrap());
    let mut expected = strings(&DEFAULT_ARGS);
    expected.extend(strings(&KUBEADM_ARGS));
    expected.extend(strings(&[
        "--node-labels=role=worker,zone=a b",
        "--max-pods=110",
        "$(reboot)",
        "`id`;",
    ]));
    expected.extend(strings(&kubelet_args));
    assert_eq!(rec.argv, expected);

    // The environment: the wrapper's own plus every valid variable of the
    // drop-in and the files.
    let mut env = host.base_env();
    for (k, v) in [
        ("KUBELET_KUBECONFIG_ARGS", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"),
        ("KUBELET_CONFIG_ARGS", "--config=/var/lib/kubelet/config.yaml"),
        ("KUBELET_KUBEADM_ARGS", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9"),
        ("KUBELET_EXTRA_ARGS", "--node-labels=\"role=worker,zone=a b\"   --max-pods=110 '$(reboot)' `id`;"),
        ("OTHER_VAR", "single $HOME"),
    ] {
        env.insert(k.into(), v.into());
    }
    assert_eq!(rec.env, env);
    // SIGPIPE reaches the kubelet as the supervisor left it (here: not
    // ignored); the wrapper sets no signal disposition of its own.
    assert_eq!(rec.sigign & (1 << (13 - 1)), 0, "SigIgn {:x}", rec.sigign);
    // The invalid name is reported, as systemd logs it.
    assert!(
        stderr(&out).contains("/etc/default/kubelet:4: ignoring \"export NOT_A_NAME\""),
        "{}",
        stderr(&out)
    );

    // --print describes exactly that.
    let json = host.print(&kubelet_args);
    let mut exec_line = vec![rec.path.clone()];
    exec_line.extend(rec.argv.clone());
    assert_eq!(json_strings(&json["argv"]), exec_line);
    let json_env: BTreeMap<String, String> = json["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let mut env_via_print = host.base_env();
    env_via_print.extend(json_env);
    assert_eq!(env_via_print, rec.env);
    let flags = host
        .under("/var/lib/kubelet/kubeadm-flags.env")
        .display()
        .to_string();
    let default = host.under("/etc/default/kubelet").display().to_string();
    let mut sources = vec!["default /usr/bin/kubelet".to_string()];
    sources.extend(vec![
        "KUBELET_KUBECONFIG_ARGS (drop-in Environment=)"
            .to_string();
        2
    ]);
    sources.push("KUBELET_CONFIG_ARGS (drop-in Environment=)".into());
    sources.extend(vec![format!("KUBELET_KUBEADM_ARGS ({flags})"); 2]);
    sources.extend(vec![format!("KUBELET_EXTRA_ARGS ({default})"); 4]);
    sources.extend(vec!["command line".to_string(); 3]);
    assert_eq!(json_strings(&json["sources"]), sources);
    assert_eq!(json["family"], "deb");
    assert_eq!(json["kubelet"], rec.path.as_str());
    assert_eq!(json["waits_for"], Value::Null);
    assert_eq!(
        json["env_sources"]["KUBELET_EXTRA_ARGS"],
        format!("{default}:2")
    );
    assert_eq!(
        json["files"],
        serde_json::json!([
            {"path": flags, "role": "kubeadm flags", "status": "read"},
            {"path": default, "role": "family env file", "status": "read"},
        ])
    );
}

#[test]
fn rpm_family_reads_sysconfig() {
    let host = Host::new();
    host.write(
        "/etc/sysconfig/kubelet",
        "KUBELET_EXTRA_ARGS=--max-pods=50\n",
    );
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    let mut expected = strings(&DEFAULT_ARGS);
    expected.push("--max-pods=50".into());
    assert_eq!(rec.argv, expected);
    assert_eq!(rec.env["KUBELET_EXTRA_ARGS"], "--max-pods=50");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));

    let json = host.print(&[]);
    assert_eq!(json["family"], "rpm");
    assert_eq!(
        json["family_source"],
        "auto: only /etc/sysconfig/kubelet exists"
    );
}

#[test]
fn both_family_files_follow_the_host_and_warn() {
    let host = Host::new();
    host.write(
        "/etc/default/kubelet",
        "KUBELET_EXTRA_ARGS=--from-default\n",
    );
    host.write(
        "/etc/sysconfig/kubelet",
        "KUBELET_EXTRA_ARGS=--from-sysconfig\n",
    );

    // No /etc/debian_version: the rpm convention.
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-sysconfig"
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "ignoring {}",
            host.under("/etc/default/kubelet").display()
        )),
        "{err}"
    );

    host.write("/etc/debian_version", "12.0\n");
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-default"
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "ignoring {}",
            host.under("/etc/sysconfig/kubelet").display()
        )),
        "{err}"
    );

    let json = host.print(&[]);
    assert_eq!(json["files"][2]["status"], "ignored");
    assert_eq!(json["warnings"].as_array().unwrap().len(), 1);

    // An explicit family wins over detection, without a warning.
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_WRAPPER_FAMILY", "rpm"));
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-sysconfig"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    host.run(&mut host.wrapper(&["--family", "rpm"]));
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-sysconfig"
    );
}

#[test]
fn neither_family_file_means_deb_and_defaults_only() {
    let host = Host::new();
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    assert_eq!(rec.argv, strings(&DEFAULT_ARGS));
    assert!(!rec.env.contains_key("KUBELET_EXTRA_ARGS"));
    let json = host.print(&[]);
    assert_eq!(json["family"], "deb");
    let statuses: Vec<&str> = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["missing", "missing"]);
}

#[test]
fn neither_family_file_on_an_rpm_host_means_rpm() {
    let host = Host::new();
    host.write("/etc/sysconfig/network", "");
    let json = host.print(&[]);
    assert_eq!(json["family"], "rpm");
    host.write("/etc/debian_version", "12.0\n");
    assert_eq!(host.print(&[])["family"], "deb");
}

#[test]
fn env_files_override_the_drop_in_and_the_process() {
    let host = Host::new();
    host.write(
        "/var/lib/kubelet/kubeadm-flags.env",
        "KUBELET_CONFIG_ARGS=--config=/etc/kubelet/other.yaml\n",
    );
    host.write("/etc/kubelet/other.yaml", "");
    host.write("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=\n");
    let (out, _) = host.run(
        host.wrapper(&[])
            .env("KUBELET_EXTRA_ARGS", "--from-process")
            .env("KUBELET_KUBEADM_ARGS", "--kubeadm-from-process"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    // The file's empty KUBELET_EXTRA_ARGS wins over the process; the unset
    // KUBELET_KUBEADM_ARGS comes from the process, as a manager's
    // environment would under systemd.
    assert_eq!(
        rec.argv,
        strings(&[
            DEFAULT_ARGS[0],
            DEFAULT_ARGS[1],
            "--config=/etc/kubelet/other.yaml",
            "--kubeadm-from-process"
        ])
    );
    assert_eq!(rec.env["KUBELET_EXTRA_ARGS"], "");
}

/// The env file as the packages ship it (its one placeholder is in a comment).
fn shipped_env_default() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../env-defaults/kubelet");
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_shipped_default_leaves_the_argv_as_an_empty_assignment_did() {
    let host = Host::new();
    host.write("/etc/default/kubelet", shipped_env_default());
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert!(out.status.success(), "{}", stderr(&out));
    let untouched = host.recorded().unwrap();
    assert_eq!(untouched.argv, strings(&DEFAULT_ARGS));
    assert!(!untouched.env.contains_key("KUBELET_EXTRA_ARGS"));

    host.write("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=\n");
    host.run(&mut host.wrapper(&[]));
    assert_eq!(host.recorded().unwrap().argv, untouched.argv);
}

#[test]
fn the_shipped_default_lets_a_drop_in_environment_reach_the_kubelet() {
    // systemd's Environment= arrives in the wrapper's own environment; an
    // untouched env file no longer overrides it.
    let host = Host::new();
    host.write("/etc/default/kubelet", shipped_env_default());
    let (out, _) = host.run(
        host.wrapper(&[])
            .env("KUBELET_EXTRA_ARGS", "--v=2 --max-pods=50"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    let mut expected = strings(&DEFAULT_ARGS);
    expected.extend(strings(&["--v=2", "--max-pods=50"]));
    assert_eq!(rec.argv, expected);
    assert_eq!(rec.env["KUBELET_EXTRA_ARGS"], "--v=2 --max-pods=50");
}

#[test]
fn wrapper_options_after_a_kubelet_argument_belong_to_the_kubelet() {
    let host = Host::new();
    let (out, _) = host.run(&mut host.wrapper(&["--v=2", "--print", "--wrapper-help"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    assert_eq!(
        &rec.argv[3..],
        strings(&["--v=2", "--print", "--wrapper-help"])
    );
    let (out, _) = host.run(&mut host.wrapper(&["--", "--print"]));
    assert!(out.status.success());
    assert_eq!(host.recorded().unwrap().argv.last().unwrap(), "--print");
}

#[test]
fn waits_for_the_config_then_rereads_the_files() {
    let host = Host::bare();
    host.install_kubelet("/usr/bin/kubelet");
    let mut cmd = host.wrapper(&["--wait", "30"]);
    cmd.env("KUBELET_WRAPPER_WAIT_LOG_INTERVAL", "1");
    let json = host.print(&["--wait", "30"]);
    let config = host.under("/var/lib/kubelet/config.yaml");
    assert_eq!(json["waits_for"], config.to_str().unwrap());

    let start = Instant::now();
    let writer = {
        let flags = host.under("/var/lib/kubelet/kubeadm-flags.env");
        let config = config.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            // As kubeadm does: the flags first, then the config.
            fs::create_dir_all(flags.parent().unwrap()).unwrap();
            fs::write(flags, KUBEADM_FLAGS).unwrap();
            fs::write(config, "kind: KubeletConfiguration\n").unwrap();
        })
    };
    let (out, pid) = host.run(&mut cmd);
    writer.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(start.elapsed() >= Duration::from_secs(2));
    let rec = host.recorded().unwrap();
    assert_eq!(rec.pid, pid);
    // kubeadm-flags.env was written during the wait and is read.
    assert_eq!(&rec.argv[3..], KUBEADM_ARGS);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "kubelet-wrapper: waiting for {}",
            config.display()
        )),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.contains("still waiting for")),
        "{err}"
    );
    assert!(lines.last().unwrap().contains("appeared after"), "{err}");
}

#[test]
fn gives_up_after_the_limit_with_status_1() {
    let host = Host::bare();
    host.install_kubelet("/usr/bin/kubelet");
    let start = Instant::now();
    let (out, _) = host.run(&mut host.wrapper(&["--wait", "2"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(start.elapsed() >= Duration::from_secs(2));
    assert!(host.recorded().is_none(), "the kubelet must not start");
    let err = stderr(&out);
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("kubelet-wrapper: gave up after 2 s: "),
        "{err}"
    );
    assert!(last.contains("config.yaml still does not exist"), "{err}");
}

#[test]
fn wait_zero_and_no_config_flag_start_at_once() {
    let host = Host::bare();
    host.install_kubelet("/usr/bin/kubelet");
    let (out, _) = host.run(&mut host.wrapper(&["--wait", "0"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(host.recorded().unwrap().argv, strings(&DEFAULT_ARGS));
    assert_eq!(host.print(&["--wait", "0"])["waits_for"], Value::Null);

    // No --config in the final argv: nothing to wait for.
    host.write(
        "/var/lib/kubelet/kubeadm-flags.env",
        "KUBELET_CONFIG_ARGS=\n",
    );
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_WRAPPER_WAIT", "30"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(host.recorded().unwrap().argv, strings(&DEFAULT_ARGS[..2]));
}

#[test]
fn kubelet_version_selects_the_side_by_side_kubelet() {
    let host = Host::new();
    host.install_kubelet("/opt/kubernetes/v1.29.6/bin/kubelet");
    host.install_kubelet("/opt/kubernetes/v1.30.2/bin/kubelet");
    let v130 = host.under("/opt/kubernetes/v1.30.2/bin/kubelet");
    let v129 = host.under("/opt/kubernetes/v1.29.6/bin/kubelet");

    // From the process environment, without the leading v.
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_VERSION", "1.29.6"));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    assert_eq!(rec.path, v129.to_str().unwrap());
    assert_eq!(
        rec.argv,
        strings(&DEFAULT_ARGS),
        "KUBELET_VERSION is no argument"
    );

    // The env files beat the process environment.
    host.write("/etc/default/kubelet", "KUBELET_VERSION=v1.30.2\n");
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_VERSION", "1.29.6"));
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = host.recorded().unwrap();
    assert_eq!(rec.path, v130.to_str().unwrap());
    assert_eq!(rec.env["KUBELET_VERSION"], "v1.30.2");
    let json = host.print(&[]);
    assert_eq!(json["kubelet"], v130.to_str().unwrap());
    assert_eq!(json["argv"][0], v130.to_str().unwrap());
    assert_eq!(json["kubelet_version"], "v1.30.2");
    assert_eq!(
        json["sources"][0],
        format!(
            "KUBELET_VERSION=v1.30.2 ({}:1)",
            host.under("/etc/default/kubelet").display()
        )
    );

    // The settings file is the weakest source.
    fs::remove_file(host.under("/etc/default/kubelet")).unwrap();
    host.write("/etc/sv/kubelet/conf", "KUBELET_VERSION=v1.29.6\n");
    let (out, _) = host.run(&mut host.wrapper(&["--settings", "/etc/sv/kubelet/conf"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(host.recorded().unwrap().path, v129.to_str().unwrap());
    // Empty in the process environment counts as unset.
    let (out, _) = host.run(
        host.wrapper(&["--settings", "/etc/sv/kubelet/conf"])
            .env("KUBELET_VERSION", ""),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(host.recorded().unwrap().path, v129.to_str().unwrap());
}

#[test]
fn a_version_not_installed_lists_the_installed_ones() {
    let host = Host::new();
    host.install_kubelet("/opt/kubernetes/v1.30.2/bin/kubelet");
    host.install_kubelet("/opt/kubernetes/v1.29.6/bin/kubelet");
    fs::create_dir_all(host.under("/opt/kubernetes/v1.28.0")).unwrap(); // no kubelet inside
    host.write("/etc/default/kubelet", "KUBELET_VERSION=1.31.0\n");
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "kubelet-wrapper: KUBELET_VERSION=v1.31.0 ({}:1) is not installed: ",
            host.under("/etc/default/kubelet").display()
        )),
        "{err}"
    );
    assert!(
        err.contains("/opt/kubernetes/v1.31.0/bin/kubelet does not exist"),
        "{err}"
    );
    assert!(
        err.trim_end()
            .ends_with("installed under /opt/kubernetes: v1.29.6, v1.30.2"),
        "{err}"
    );
    assert!(host.recorded().is_none());
    let (out, _) = host.run(&mut host.wrapper(&["--print"]));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), err, "--print fails the same way");
}

#[test]
fn an_invalid_version_names_file_and_line() {
    let host = Host::new();
    host.write(
        "/etc/default/kubelet",
        "# pin\nKUBELET_VERSION=../../usr/bin\n",
    );
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let expected = format!(
        "kubelet-wrapper: {}:2: KUBELET_VERSION=\"../../usr/bin\" is not a version like v1.30.2\n",
        host.under("/etc/default/kubelet").display()
    );
    assert_eq!(err, expected);
}

#[test]
fn a_missing_kubelet_is_one_clear_line() {
    let host = Host::bare();
    host.write("/var/lib/kubelet/config.yaml", "");
    let (out, _) = host.run(&mut host.wrapper(&[]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "kubelet-wrapper: kubelet not found: {} does not exist",
            host.under("/usr/bin/kubelet").display()
        )),
        "{err}"
    );
    // --print explains, then fails as the start would (a pre-start check).
    let (out, _) = host.run(&mut host.wrapper(&["--print"]));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), err);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kubelet_exists"], false);
}

#[test]
fn settings_file_configures_the_wrapper() {
    let host = Host::bare();
    host.install_kubelet("/usr/bin/kubelet");
    host.write(
        "/etc/default/kubelet",
        "KUBELET_EXTRA_ARGS=--from-default\n",
    );
    host.write(
        "/etc/sysconfig/kubelet",
        "KUBELET_EXTRA_ARGS=--from-sysconfig\n",
    );
    host.write(
        "/etc/sv/kubelet/conf",
        "# runit settings\nKUBELET_WRAPPER_FAMILY=rpm\nKUBELET_WRAPPER_WAIT=0\n",
    );
    // No config.yaml, but the settings file turns the wait off.
    let (out, _) = host.run(&mut host.wrapper(&["--settings", "/etc/sv/kubelet/conf"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-sysconfig"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));

    // The process environment beats the settings file; an option beats both.
    host.run(
        host.wrapper(&["--settings", "/etc/sv/kubelet/conf"])
            .env("KUBELET_WRAPPER_FAMILY", "deb"),
    );
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-default"
    );
    host.run(
        host.wrapper(&["--settings", "/etc/sv/kubelet/conf", "--family", "rpm"])
            .env("KUBELET_WRAPPER_FAMILY", "deb"),
    );
    assert_eq!(
        host.recorded().unwrap().argv.last().unwrap(),
        "--from-sysconfig"
    );

    let (out, _) = host.run(&mut host.wrapper(&["--settings", "/etc/sv/kubelet/missing"]));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "kubelet-wrapper: {}: settings file not found\n",
            host.under("/etc/sv/kubelet/missing").display()
        )
    );
}

/// Every kind of bad file, in both files the chain reads: one line naming
/// the file (and the line where there is one), exit status 2, no kubelet.
#[test]
fn bad_input_is_one_line_with_file_and_line_and_status_2() {
    type Make = fn(&Host, &str);
    let cases: &[(&str, Make, &str)] = &[
        (
            "invalid UTF-8",
            |h, p| h.write(p, b"A=1\nB=\xff\xfe\n"),
            ":2: invalid UTF-8",
        ),
        (
            "NUL byte",
            |h, p| h.write(p, b"A=1\n\nB=x\0y\n"),
            ":3: contains a NUL byte",
        ),
        (
            "noncharacter",
            |h, p| h.write(p, "A=\u{fffe}\n"),
            ":1: contains U+FFFE",
        ),
        (
            "unterminated quote",
            |h, p| h.write(p, "A=1\nKUBELET_EXTRA_ARGS=\"--v=2\n--max-pods=3\n"),
            ":2: unterminated double quote",
        ),
        (
            "directory",
            |h, p| fs::create_dir_all(h.under(p)).unwrap(),
            ": is a directory, expected a file",
        ),
        (
            "FIFO",
            |h, p| {
                fs::create_dir_all(h.under(p).parent().unwrap()).unwrap();
                mkfifo(&h.under(p));
            },
            ": is not a regular file but a FIFO",
        ),
        (
            "huge file",
            |h, p| {
                h.write(p, "");
                let f = fs::OpenOptions::new().write(true).open(h.under(p)).unwrap();
                f.set_len(MAX_FILE_SIZE + 1).unwrap(); // sparse: one byte over the limit
            },
            ": larger than 1 MiB",
        ),
        (
            "symlink loop",
            |h, p| {
                fs::create_dir_all(h.under(p).parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(h.under(p), h.under(p)).unwrap();
            },
            ": cannot read: ",
        ),
    ];
    for file in ["/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"] {
        for (what, make, expected) in cases {
            let host = Host::new();
            make(&host, file);
            for args in [
                &["--family", "deb"][..],
                &["--family", "deb", "--print"][..],
            ] {
                let (out, _) = host.run(&mut host.wrapper(args));
                let err = stderr(&out);
                assert_eq!(out.status.code(), Some(2), "{what} in {file}: {err}");
                assert_eq!(err.lines().count(), 1, "{what} in {file}: {err}");
                let prefix = format!("kubelet-wrapper: {}{expected}", host.under(file).display());
                assert!(
                    err.starts_with(&prefix),
                    "{what} in {file}:\n{err}\nexpected {prefix}"
                );
                assert!(out.stdout.is_empty());
                assert!(
                    host.recorded().is_none(),
                    "{what}: the kubelet must not start"
                );
            }
        }
    }
}

#[test]
fn usage_errors_and_help() {
    let host = Host::new();
    for (args, expected) in [
        (
            &["--family", "arch"][..],
            "kubelet-wrapper: --family: family must be deb or rpm, not \"arch\"\n",
        ),
        (
            &["--wait", "soon"][..],
            "kubelet-wrapper: --wait: expected a number of seconds, not \"soon\"\n",
        ),
        (
            &["--settings"][..],
            "kubelet-wrapper: --settings needs a value (see --wrapper-help)\n",
        ),
    ] {
        let (out, _) = host.run(&mut host.wrapper(args));
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(stderr(&out), expected);
    }
    let (out, _) = host.run(Command::new(WRAPPER).args(["--root", "/nonexistent/dir"]));
    assert_eq!(
        stderr(&out),
        "kubelet-wrapper: --root /nonexistent/dir: not a directory\n"
    );

    let out = Command::new(WRAPPER)
        .arg("--wrapper-help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "$KUBELET_KUBEADM_ARGS",
        "/etc/sysconfig/kubelet",
        "/etc/debian_version",
        "KUBELET_VERSION",
        "KUBELET_WRAPPER_WAIT",
        "--settings FILE",
    ] {
        assert!(help.contains(needle), "help lacks {needle}");
    }
    let out = Command::new(WRAPPER)
        .arg("--wrapper-version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("kubelet-wrapper {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// An env file far beyond any real one, a 10 MB line of 5 million words, is
/// refused with one line naming the file: within a 600 MB address-space
/// limit, for a start and for --print alike. So is a variable too long to
/// be passed to a program, in a file under the size limit; one just short
/// of that starts the kubelet with every word.
#[test]
fn oversized_input_is_refused_in_bounded_memory() {
    const LIMIT: u64 = 600 << 20;
    let host = Host::new();
    let file = host.under("/etc/default/kubelet");
    let refused = |expected: &str| {
        for args in [&[][..], &["--print"][..]] {
            let (out, _) = host.run(limit_memory(&mut host.wrapper(args), LIMIT));
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.starts_with(expected),
                "{args:?}: {err}\nexpected {expected}"
            );
            assert!(out.stdout.is_empty());
            assert!(host.recorded().is_none(), "the kubelet must not start");
        }
    };

    let huge = format!("KUBELET_EXTRA_ARGS={}\n", "a ".repeat(5_000_000));
    assert!(huge.len() > 10_000_000);
    host.write("/etc/default/kubelet", &huge);
    refused(&format!(
        "kubelet-wrapper: {}: larger than 1 MiB",
        file.display()
    ));

    // One byte more than Linux passes as NAME=VALUE plus its NUL. (With
    // pages of 64 KiB, that no longer fits the file size limit.)
    let max = max_exec_string();
    if max as u64 + 100 < MAX_FILE_SIZE {
        let value = "a ".repeat(max / 2);
        let name = "KUBELET_EXTRA_ARGS";
        host.write(
            "/etc/default/kubelet",
            format!("# too long\n{name}={}\n", &value[..max - name.len() - 1]),
        );
        refused(&format!(
            "kubelet-wrapper: {}:2: {name} is {} bytes long; Linux passes at most {max} bytes",
            file.display(),
            max - name.len() - 1
        ));

        let value = &value[..max - name.len() - 3];
        host.write("/etc/default/kubelet", format!("{name}={value}\n"));
        let words = value.split_whitespace().count();
        let (out, _) = host.run(limit_memory(&mut host.wrapper(&[]), LIMIT));
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            host.recorded().unwrap().argv.len(),
            DEFAULT_ARGS.len() + words
        );
        let (out, _) = host.run(limit_memory(&mut host.wrapper(&["--print"]), LIMIT));
        assert!(out.status.success(), "{}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            json["argv"].as_array().unwrap().len(),
            1 + DEFAULT_ARGS.len() + words
        );
        assert_eq!(
            json["sources"].as_array().unwrap().len(),
            1 + DEFAULT_ARGS.len() + words
        );
    }
}

/// Keeps replacing `path` with a hard link to each of `sources` in turn,
/// until dropped.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(path: PathBuf, sources: Vec<PathBuf>) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let next = path.with_extension("next");
                for source in sources.iter().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    // rename() replaces the path in one step: it always exists.
                    let _ = fs::remove_file(&next);
                    let _ = fs::hard_link(source, &next).and_then(|()| fs::rename(&next, &path));
                }
            })
        };
        Swapper {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The env file's path flips between a regular file and a FIFO while the
/// wrapper runs again and again. Whatever it finds when it opens the path,
/// it must read the file or refuse the FIFO with one line; it must never
/// wait in open() for a writer that does not come (as it did when it looked
/// at the path first and opened it after: the FIFO could come in between).
#[test]
fn a_fifo_swapped_in_is_refused_not_waited_for() {
    const RUNS: usize = 1000;
    let host = Host::new();
    let path = host.under("/etc/default/kubelet");
    let dir = path.parent().unwrap().to_path_buf();
    fs::create_dir_all(&dir).unwrap();
    let regular = dir.join("kubelet.regular");
    fs::write(&regular, "KUBELET_EXTRA_ARGS=--v=2\n").unwrap();
    let fifo = dir.join("kubelet.fifo");
    mkfifo(&fifo);
    fs::copy(&regular, &path).unwrap();
    let _swapper = Swapper::start(path.clone(), vec![regular, fifo]);

    let refused = format!("kubelet-wrapper: {}: is not a regular file", path.display());
    let mut fifos = 0;
    for _ in 0..RUNS {
        let (out, _) = host.run_within(&mut host.wrapper(&["--print"]), Duration::from_secs(10));
        let err = stderr(&out);
        match out.status.code() {
            Some(0) => {}
            Some(2) if err.starts_with(&refused) && err.lines().count() == 1 => fifos += 1,
            _ => panic!("{:?}: {err}", out.status),
        }
    }
    assert!(fifos > 0, "the FIFO was never found in {RUNS} runs");
}

/// A variable the chain expands that is not UTF-8 in the process
/// environment reaches the kubelet byte for byte, with a warning on stderr;
/// --print shows it (U+FFFD for the invalid byte), lists it in
/// argv_not_utf8 and repeats the warning. The same for a kubelet argument
/// on the command line.
#[test]
fn variables_that_are_not_utf8_pass_through_with_a_warning() {
    let host = Host::new();
    let extra = OsStr::from_bytes(b"--node-labels=caf\xe9 --v=2");
    let arg = OsStr::from_bytes(b"--hostname-override=n\xf6de");
    let warning = |source: &str| {
        format!("{source} is not valid UTF-8: its words are passed to the kubelet byte for byte (--print shows U+FFFD for the invalid bytes)")
    };
    let lines = |warnings: &[String]| -> String {
        warnings
            .iter()
            .map(|w| format!("kubelet-wrapper: {w}\n"))
            .collect()
    };
    let mut expected = strings(&DEFAULT_ARGS);
    expected.extend(strings(&["--node-labels=caf\\xe9", "--v=2"]));

    // From the process environment.
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_EXTRA_ARGS", extra));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(recorded_argv_escaped(&host), expected);
    let warnings = vec![warning("KUBELET_EXTRA_ARGS (process environment)")];
    assert_eq!(stderr(&out), lines(&warnings));

    let (out, _) = host.run(host.wrapper(&["--print"]).env("KUBELET_EXTRA_ARGS", extra));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), lines(&warnings));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = json_strings(&json["argv"]);
    let n = shown.len();
    assert_eq!(shown[n - 2..], ["--node-labels=caf\u{fffd}", "--v=2"]);
    assert_eq!(json["argv_not_utf8"], serde_json::json!([n - 2]));
    assert_eq!(json_strings(&json["warnings"]), warnings);
    assert_eq!(
        json["sources"][n - 2],
        "KUBELET_EXTRA_ARGS (process environment)"
    );

    // And on the command line, after it.
    let (out, _) = host.run(
        host.wrapper(&["--print"])
            .env("KUBELET_EXTRA_ARGS", extra)
            .arg(arg),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let warnings = vec![
        warning("KUBELET_EXTRA_ARGS (process environment)"),
        warning("the command line"),
    ];
    assert_eq!(stderr(&out), lines(&warnings));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["argv"][n], "--hostname-override=n\u{fffd}de");
    assert_eq!(json["argv_not_utf8"], serde_json::json!([n - 2, n]));
    let (out, _) = host.run(host.wrapper(&[]).env("KUBELET_EXTRA_ARGS", extra).arg(arg));
    assert!(out.status.success(), "{}", stderr(&out));
    expected.push("--hostname-override=n\\xf6de".to_string());
    assert_eq!(recorded_argv_escaped(&host), expected);
}
