//! The host's cgroup file system, before the kubelet starts.
//!
//! A host that systemd booted always has cgroup v2 at `/sys/fs/cgroup`. On
//! the others nothing guarantees one the kubelet can use: Debian's runit
//! mounts nothing there, and OpenRC's default before 0.52 (Debian 12 has
//! 0.45) is the hybrid layout, v1 controllers with cgroup2 only at
//! `/sys/fs/cgroup/unified`, which kubelet 1.35 and later refuse
//! (`failCgroupV1`). The kubelet then exits with an error that does not say
//! what to change, and its supervisor starts it again every 10 s. The
//! wrapper names the problem and what fixes it: where no kubelet could run
//! (nothing mounted, a controller missing) it waits for the fix; on cgroup
//! v1, which kubelets before 1.35 and `failCgroupV1: false` accept, it
//! says so in one line and lets the kubelet decide.

use std::path::Path;

use crate::{log, wait::Waiter, Error};

/// The controllers the kubelet sets its pods' limits with.
const NEEDED: [&str; 4] = ["cpu", "cpuset", "memory", "pids"];

/// What is mounted on `/sys/fs/cgroup`, as statfs(2) tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mounted {
    /// cgroup v2, the unified hierarchy.
    Unified,
    /// A tmpfs of v1 hierarchies (legacy or hybrid), or one v1 hierarchy.
    V1,
    /// Nothing: the directory of sysfs itself.
    Nothing,
    /// No such directory, or a file system of another kind: not judged.
    Unknown,
}

/// `/sys/fs/cgroup` under `root`.
pub fn mounted(root: &Path) -> Mounted {
    const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
    const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const SYSFS_MAGIC: u64 = 0x6265_6572;
    let path = crate::rooted(root, Path::new("/sys/fs/cgroup"));
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return Mounted::Unknown;
    };
    // SAFETY: statfs writes into the zeroed struct it is given, and reads
    // the NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return Mounted::Unknown;
    }
    // (f_type is signed on some targets; the magics fit in 32 bits.)
    match st.f_type as u64 & 0xffff_ffff {
        CGROUP2_SUPER_MAGIC => Mounted::Unified,
        TMPFS_MAGIC | CGROUP_SUPER_MAGIC => Mounted::V1,
        SYSFS_MAGIC => Mounted::Nothing,
        _ => Mounted::Unknown,
    }
}

/// The host's cgroups before the kubelet starts: where no kubelet could
/// run, an error without `waiter`, else a wait for the fix (a mount); on
/// cgroup v1, a line of what to change.
pub fn check(root: &Path, config: Option<&Path>, waiter: Option<Waiter>) -> Result<(), Error> {
    if let Some(first) = problem(root) {
        let Some(mut waiter) = waiter else {
            return Err(Error::input(first));
        };
        waiter.until_none(first, || problem(root))?;
    }
    if let Some(line) = v1_note(root, config) {
        log(&line);
    }
    Ok(())
}

/// Why no kubelet can run on the host's cgroups, in one line, or `None`.
pub fn problem(root: &Path) -> Option<String> {
    blocking(mounted(root), || {
        std::fs::read_to_string(crate::rooted(
            root,
            Path::new("/sys/fs/cgroup/cgroup.controllers"),
        ))
        .ok()
    })
}

/// A line for a host on cgroup v1 whose kubelet configuration (`config`,
/// once kubeadm has written it) does not say `failCgroupV1: false`: kubelet
/// 1.35 and later refuse to start there.
pub fn v1_note(root: &Path, config: Option<&Path>) -> Option<String> {
    let config = config?;
    let text = std::fs::read_to_string(config).ok()?;
    note(mounted(root), config, &text)
}

/// [`problem`], given what is mounted and a reader of the v2 controllers.
fn blocking(mounted: Mounted, controllers: impl FnOnce() -> Option<String>) -> Option<String> {
    match mounted {
        Mounted::Unified => {
            let controllers = controllers()?;
            let have: Vec<&str> = controllers.split_whitespace().collect();
            let missing: Vec<&str> = NEEDED.into_iter().filter(|c| !have.contains(c)).collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "/sys/fs/cgroup (cgroup v2) lacks the controllers {} the kubelet needs (its cgroup.controllers: {}): a kernel without them, or cgroup_disable= on its command line",
                    missing.join(" "),
                    have.join(" ")
                )
            })
        }
        Mounted::Nothing => Some(
            "nothing is mounted on /sys/fs/cgroup: mount cgroup v2 there before the container runtime and the kubelet start (`mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup`; kubedist-containerd's runit service does it)".to_string(),
        ),
        Mounted::V1 | Mounted::Unknown => None,
    }
}

/// [`v1_note`], given what it read.
fn note(mounted: Mounted, config: &Path, text: &str) -> Option<String> {
    if mounted != Mounted::V1
        || crate::driver::setting(text, "failCgroupV1").as_deref() == Some("false")
    {
        return None;
    }
    Some(format!(
        "/sys/fs/cgroup is cgroup v1 (v1 hierarchies on a tmpfs: OpenRC's rc_cgroup_mode \"hybrid\" or \"legacy\"), which kubelet 1.35 and later refuse unless {} says failCgroupV1: false: boot with cgroup v2 (OpenRC: rc_cgroup_mode=\"unified\" in /etc/rc.conf, then reboot)",
        config.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "/var/lib/kubelet/config.yaml";

    #[test]
    fn unified_with_the_controllers_is_fine() {
        let all = || Some("cpuset cpu io memory hugetlb pids rdma misc\n".to_string());
        assert_eq!(blocking(Mounted::Unified, all), None);
    }

    #[test]
    fn a_missing_controller_is_named() {
        let line = blocking(Mounted::Unified, || Some("cpuset cpu io pids\n".into())).unwrap();
        assert!(
            line.contains("lacks the controllers memory the kubelet"),
            "{line}"
        );
        assert!(
            line.contains("cgroup.controllers: cpuset cpu io pids)"),
            "{line}"
        );
    }

    #[test]
    fn nothing_mounted_says_what_to_mount() {
        let line = blocking(Mounted::Nothing, || None).unwrap();
        assert!(
            line.starts_with("nothing is mounted on /sys/fs/cgroup"),
            "{line}"
        );
        assert!(line.contains("mount -t cgroup2"), "{line}");
    }

    #[test]
    fn v1_blocks_nothing_and_is_noted_unless_fail_cgroup_v1_is_false() {
        assert_eq!(blocking(Mounted::V1, || None), None);
        let config = Path::new(CONFIG);
        assert_eq!(note(Mounted::V1, config, "failCgroupV1: false\n"), None);
        for text in ["cgroupDriver: cgroupfs\n", "failCgroupV1: true\n"] {
            let line = note(Mounted::V1, config, text).unwrap();
            assert!(
                line.contains(&format!("unless {CONFIG} says failCgroupV1: false")),
                "{line}"
            );
            assert!(line.contains("rc_cgroup_mode=\"unified\""), "{line}");
        }
        assert_eq!(note(Mounted::Unified, config, "failCgroupV1: true\n"), None);
    }

    #[test]
    fn a_root_without_sys_fs_cgroup_is_not_judged() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(mounted(dir.path()), Mounted::Unknown);
        assert_eq!(problem(dir.path()), None);
    }
}
