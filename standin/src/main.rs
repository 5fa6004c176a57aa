//! A recorder stand-in for the upstream binaries that Debian does not ship
//! (kubelet, kubeadm, crictl). It is NOT the real program: it records how it
//! was started so that tests can check what an init system or kubelet-wrapper
//! really exec'd.
//!
//! Each start writes `<dir>/<name>.json` (argv, environment, pid, cwd) and
//! appends the same object as one line to `<dir>/<name>.log`, where `<name>`
//! is the basename it was started as and `<dir>` is `$STANDIN_RECORD_DIR` or
//! `/tmp/kubedist-standin`. Started as `kubelet` it then stays up like a
//! daemon until signalled (unless `STANDIN_EXIT=1`: then it exits at once),
//! or, like the real kubelet, exits 1 when its `--config` file does not
//! exist; as anything else it exits at once. `--version` / `version` print a line that says it is a stand-in.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::{env, fs, process, thread, time::Duration};

fn main() {
    let argv: Vec<String> = env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "standin".into());

    if argv
        .iter()
        .skip(1)
        .any(|a| a == "--version" || a == "version")
    {
        println!("{name} version: kubedist recorder stand-in (not the real {name})");
        return;
    }

    let dir = env::var_os("STANDIN_RECORD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/kubedist-standin"));
    let record = serde_json::json!({
        "name": name,
        "pid": process::id(),
        "argv": argv,
        "env": env::vars_os()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .collect::<std::collections::BTreeMap<_, _>>(),
        "cwd": env::current_dir().ok(),
    });
    if let Err(e) = write_record(&dir, &name, &record) {
        eprintln!("{name} (stand-in): cannot record to {}: {e}", dir.display());
        process::exit(1);
    }
    eprintln!(
        "{name} (kubedist recorder stand-in) started, pid {}, {} argument(s)",
        process::id(),
        argv.len() - 1
    );

    if name == "kubelet" && env::var_os("STANDIN_EXIT").is_none() {
        // As the real kubelet does before `kubeadm init`/`join` has written
        // its config: fail at once, so that a service manager's restart
        // loop is what a test sees.
        if let Some(config) = config_flag(&argv).filter(|c| !Path::new(c).exists()) {
            eprintln!(
                "kubelet (stand-in): failed to load kubelet config file, path: {config}: no such file or directory"
            );
            process::exit(1);
        }
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// The value of the last `--config=PATH` or `--config PATH`, as the kubelet's
/// flag parser takes it.
fn config_flag(argv: &[String]) -> Option<&str> {
    let mut found = None;
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        if let Some(v) = w.strip_prefix("--config=") {
            found = Some(v);
        } else if w == "--config" {
            found = words.next().map(String::as_str);
        }
    }
    found
}

fn write_record(dir: &Path, name: &str, record: &serde_json::Value) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let line = record.to_string();
    // Whole-file record: written to a temp file and renamed, so a reader never
    // sees half of it.
    let tmp = dir.join(format!(".{name}.json.{}", process::id()));
    fs::write(&tmp, &line)?;
    fs::rename(&tmp, dir.join(format!("{name}.json")))?;
    let mut log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?;
    writeln!(log, "{line}")
}
