//! kubelet-wrapper's start-to-exec overhead, measured with hyperfine: the
//! wrapper starting a stand-in kubelet that exits at once, against exec'ing
//! the stand-in directly with the same argv, and against a POSIX shell
//! wrapper that sources the same two env files.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::spec::Arch;

/// hyperfine's figures for one command, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub stddev: f64,
}

pub struct Wrapper {
    pub runs: u32,
    pub direct: Timing,
    pub wrapper: Timing,
    pub shell: Timing,
}

const KUBEADM_FLAGS: &str = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";
// Quoted: systemd also takes the unquoted form, but a shell that sources it
// runs `--max-pods=200` as a command, and the two wrappers must agree.
const EXTRA: &str = "KUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.2 --max-pods=200\"\n";

/// The argv the drop-in chain gives for the files above.
const ARGV: [&str; 8] = [
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
    "--kubeconfig=/etc/kubernetes/kubelet.conf",
    "--config=/var/lib/kubelet/config.yaml",
    "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
    "--pod-infra-container-image=registry.k8s.io/pause:3.10",
    "--node-ip=10.0.0.2",
    "--max-pods=200",
    "--v=2",
];

pub fn run(root_dir: &Path, arch: Arch, work: &Path, runs: u32) -> Result<Wrapper> {
    if !crate::util::on_path("hyperfine") {
        bail!("hyperfine is not installed: apt-get install hyperfine");
    }
    let wrapper =
        crate::build::static_binary(root_dir, "kubelet-wrapper", "kubelet-wrapper", arch)?.path;
    let standin =
        crate::build::static_binary(root_dir, "kubedist-standin", "kubedist-standin", arch)?.path;

    let _ = fs::remove_dir_all(work);
    let root = work.join("root");
    for dir in [
        "usr/bin",
        "var/lib/kubelet",
        "etc/default",
        "etc/kubernetes",
    ] {
        fs::create_dir_all(root.join(dir)).with_context(|| format!("creating {dir}"))?;
    }
    let copy = |from: &Path, to: &str| -> Result<()> {
        fs::copy(from, root.join(to)).with_context(|| format!("copying {}", from.display()))?;
        Ok(())
    };
    copy(&standin, "usr/bin/kubelet")?;
    copy(&wrapper, "usr/bin/kubelet-wrapper")?;
    let write = |rel: &str, text: &str| -> Result<()> {
        fs::write(root.join(rel), text).with_context(|| format!("writing {rel}"))
    };
    write("var/lib/kubelet/kubeadm-flags.env", KUBEADM_FLAGS)?;
    write("etc/default/kubelet", EXTRA)?;
    write(
        "var/lib/kubelet/config.yaml",
        "kind: KubeletConfiguration\n",
    )?;
    write("etc/debian_version", "12\n")?;
    let root_s = root.to_str().context("the bench directory is not UTF-8")?;
    let shell = format!(
        "KUBELET_KUBECONFIG_ARGS=\"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"\n\
         KUBELET_CONFIG_ARGS=\"--config=/var/lib/kubelet/config.yaml\"\n\
         [ -r {root_s}/var/lib/kubelet/kubeadm-flags.env ] && . {root_s}/var/lib/kubelet/kubeadm-flags.env\n\
         [ -r {root_s}/etc/default/kubelet ] && . {root_s}/etc/default/kubelet\n\
         exec {root_s}/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS \"$@\"\n"
    );
    write("kubelet.sh", &shell)?;

    let direct = format!("{root_s}/usr/bin/kubelet {}", ARGV.join(" "));
    let wrapped =
        format!("{root_s}/usr/bin/kubelet-wrapper --root {root_s} --family deb --wait 0 --v=2");
    let shelled = format!("/bin/sh {root_s}/kubelet.sh --v=2");

    // The three must start the same kubelet argv: checked once, recorded by
    // the stand-in.
    let records = work.join("records");
    for (i, cmd) in [&direct, &wrapped, &shelled].iter().enumerate() {
        let dir = records.join(i.to_string());
        let words: Vec<&str> = cmd.split(' ').collect();
        let st = Command::new(words[0])
            .args(&words[1..])
            .env("STANDIN_EXIT", "1")
            .env("STANDIN_RECORD_DIR", &dir)
            .status()
            .with_context(|| format!("running {}", words[0]))?;
        if !st.success() {
            bail!("{cmd}: {st}");
        }
    }
    let argv_of = |i: usize| -> Result<String> {
        let path = records.join(i.to_string()).join("kubelet.json");
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let start = text
            .find("\"argv\"")
            .context("no argv in the stand-in's record")?;
        let end = text[start..]
            .find(']')
            .context("no argv in the stand-in's record")?;
        // Everything after argv[0], which differs (path) by design.
        let argv = &text[start..start + end];
        Ok(argv
            .split_once(',')
            .map_or(String::new(), |(_, rest)| rest.to_string()))
    };
    let want = argv_of(0)?;
    for (i, what) in [(1, "kubelet-wrapper"), (2, "the shell wrapper")] {
        let got = argv_of(i)?;
        if got != want {
            bail!("{what} started the kubelet with {got}, not {want}");
        }
    }

    // Timed with `--version` last, which each of the three passes on to the
    // kubelet: the stand-in, like a kubelet, prints one line and exits at
    // once, without the file writes of a recorded start that would only add
    // noise to all three.
    let [direct, wrapped, shelled] = [direct, wrapped, shelled].map(|c| format!("{c} --version"));
    let csv = work.join("hyperfine.csv");
    let status = Command::new("hyperfine")
        .args(["-N", "--style", "basic", "--warmup", "20"])
        .args(["--runs", &runs.to_string()])
        .args(["--export-csv"])
        .arg(&csv)
        .args([
            "-n", "direct", &direct, "-n", "wrapper", &wrapped, "-n", "shell", &shelled,
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running hyperfine")?;
    if !status.success() {
        bail!("hyperfine failed ({status})");
    }
    let text = fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
    let row = |name: &str| -> Result<Timing> {
        // command,mean,stddev,median,user,system,min,max
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name},")))
            .with_context(|| format!("{}: no row for {name}", csv.display()))?;
        let f: Vec<f64> = line
            .split(',')
            .skip(1)
            .map(|x| x.parse().unwrap_or(f64::NAN))
            .collect();
        if f.len() < 7 {
            bail!("{}: short row for {name}", csv.display());
        }
        Ok(Timing {
            mean: f[0],
            stddev: f[1],
            median: f[2],
            min: f[5],
        })
    };
    Ok(Wrapper {
        runs,
        direct: row("direct")?,
        wrapper: row("wrapper")?,
        shell: row("shell")?,
    })
}
