//! The cgroup driver the kubelet will use, against the host's init.
//!
//! kubeadm writes `cgroupDriver: systemd` into the kubelet's `config.yaml`
//! unless told otherwise; on a host whose init is not systemd (OpenRC,
//! runit) the kubelet then fails with an error that does not say why. The
//! wrapper says it in one line before the start, and starts the kubelet
//! anyway: the setting is the operator's (README.md, "A node, offline").

use std::path::Path;

/// A line to log when the kubelet is about to use the systemd cgroup driver
/// on a host that systemd did not boot (no `/run/systemd/system`, the test
/// of `sd_booted(3)`), else `None`. The driver is the last
/// `--cgroup-driver` of `args`, else `cgroupDriver` of `config`.
pub fn mismatch<'a>(
    root: &Path,
    args: impl IntoIterator<Item = &'a [u8]>,
    config: Option<&Path>,
) -> Option<String> {
    let (driver, source) = match flag(args) {
        Some(driver) => (driver, "--cgroup-driver".to_string()),
        None => {
            let config = config?;
            let text = std::fs::read_to_string(config).ok()?;
            (
                setting(&text, "cgroupDriver")?,
                format!("{} (cgroupDriver)", config.display()),
            )
        }
    };
    if driver != "systemd" || crate::rooted(root, Path::new("/run/systemd/system")).is_dir() {
        return None;
    }
    Some(format!(
        "{source} says the systemd cgroup driver, but systemd is not this host's init (no /run/systemd/system): the kubelet will fail; set cgroupDriver: cgroupfs in kubeadm's KubeletConfiguration (and SystemdCgroup = false in containerd's runc options)"
    ))
}

/// The value of the last `--cgroup-driver=V` or `--cgroup-driver V`.
fn flag<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Option<String> {
    let mut value = None;
    let mut next_is_value = false;
    for arg in args {
        if next_is_value {
            value = Some(String::from_utf8_lossy(arg).into_owned());
            next_is_value = false;
        } else if let Some(v) = arg.strip_prefix(b"--cgroup-driver=") {
            value = Some(String::from_utf8_lossy(v).into_owned());
        } else if arg == b"--cgroup-driver" {
            next_is_value = true;
        }
    }
    value
}

/// The top-level `KEY:` of a KubeletConfiguration in YAML, as kubeadm
/// writes it (one key per line, the value plain or quoted).
pub(crate) fn setting(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        let value = value.split(" #").next().unwrap_or("").trim();
        Some(value.trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(systemd: bool, config: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let root = tempfile::tempdir().unwrap();
        if systemd {
            std::fs::create_dir_all(root.path().join("run/systemd/system")).unwrap();
        }
        let path = root.path().join("config.yaml");
        std::fs::write(&path, config).unwrap();
        (root, path)
    }

    #[test]
    fn systemd_driver_without_systemd_is_named_with_its_file() {
        let (root, config) = host(false, "kind: KubeletConfiguration\ncgroupDriver: systemd\n");
        let line = mismatch(root.path(), [], Some(&config)).unwrap();
        assert!(
            line.starts_with(&format!(
                "{} (cgroupDriver) says the systemd",
                config.display()
            )),
            "{line}"
        );
        assert!(line.contains("cgroupDriver: cgroupfs"), "{line}");
    }

    #[test]
    fn agreeing_hosts_and_drivers_say_nothing() {
        let (root, config) = host(true, "cgroupDriver: systemd\n");
        assert_eq!(mismatch(root.path(), [], Some(&config)), None);
        let (root, config) = host(false, "cgroupDriver: \"cgroupfs\"\n");
        assert_eq!(mismatch(root.path(), [], Some(&config)), None);
        let (root, config) = host(false, "kind: KubeletConfiguration\n");
        assert_eq!(mismatch(root.path(), [], Some(&config)), None);
        assert_eq!(mismatch(root.path(), [], None), None);
    }

    #[test]
    fn the_last_flag_beats_the_config() {
        let (root, config) = host(false, "cgroupDriver: systemd\n");
        let args: [&[u8]; 2] = [b"--cgroup-driver=systemd", b"--cgroup-driver=cgroupfs"];
        assert_eq!(mismatch(root.path(), args, Some(&config)), None);
        let args: [&[u8]; 2] = [b"--cgroup-driver", b"systemd"];
        let (root, config) = host(false, "cgroupDriver: cgroupfs\n");
        assert!(mismatch(root.path(), args, Some(&config))
            .unwrap()
            .starts_with("--cgroup-driver says"));
    }
}
