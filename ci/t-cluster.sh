#!/bin/sh
# A real cluster, offline: kubeadm init and join on booted nodes installed
# from kubedist's artifacts built from source (cargo xtask test runs this
# suite on the `dist --source` release).
#
# Six nodes, each a Debian root booted with systemd-nspawn, its init
# system as PID 1, in a network namespace of its own on one bridge; no
# other network exists for them. They are installed at the release of the
# minor before the pin (KD_DIST_OLDER, built from source by cargo xtask
# test) and upgraded to the pin's release (KD_DIST) the way the kubeadm
# docs say, offline, each from its own kind of kubedist artifact:
#   cp  Debian 12, systemd 252; kubeadm kubelet kubectl kubernetes-cni
#       cri-tools from kubedist's signed apt repository (a file: source,
#       one channel per minor), held; the images bundle imported by
#       kubedist-images.service;
#   w1  sysvinit + OpenRC, installed by the tarball's install.sh, the bundle
#       installed with --images;
#   w2  runit, installed the same way;
#   w3  Debian 13, systemd 257: the sysext images, the node's and the
#       runtime's, fetched by systemd-sysupdate from the repository's sysext/
#       directory (the channels' transfer files, the signed SHA256SUMS) and
#       merged over /usr;
#   w4  Debian 12, systemd 252 with Debian's rpm and dnf: the rpms from the
#       repository's signed dnf channel, versionlocked, their scriptlets run
#       under the booted systemd;
#   w5  Debian 12, systemd 252: installed by the installer image, run with
#       podman on the host as docs/installer-image.md says, and upgraded by N's installer
#       image in the DaemonSet dist ships, imported into the node's
#       containerd.
# Four more workers are virtual machines on a kernel of their own (QEMU,
# cgroup v2), joined with kubeadm's defaults: no preflight check skipped
# and, on their kubelets, no failCgroupV1 (a `kubeadm join --patches` file
# takes the cluster's v1 setting back). One VM runs at a time, with the
# machine's CPUs: v1, then v2, then v3 join at N-1 after the cluster is up,
# each from its boot to its reboot in cases of its own (kd-v1-...), and
# leave after them; with KD_UPGRADE_VMS=v3 (by hand, not in CI) v3 stays
# and is upgraded with the cluster and leaves after it; v4 joins the
# upgraded cluster at N and leaves:
#   v1  Debian 12, systemd 252 with the systemd cgroup driver (kubelet and
#       containerd); apt from the signed repository, as cp;
#   v2  sysvinit + OpenRC, the tarball, as w1;
#   v3  arm64 (qemu-system-aarch64, Debian 12's arm64 cloud kernel), runit:
#       the arm64 tarball and bundle of N-1, then of N for its upgrade
#       when KD_UPGRADE_VMS=v3 (cargo xtask test builds them from source
#       beside each amd64 release, in its arm64/), its echo pod an arm64
#       program;
#   v4  riscv64 (qemu-system-riscv64, Debian 13's riscv64 kernel, QEMU's
#       OpenSBI), runit: the riscv64 tarball and bundle of N (the release's
#       riscv64/, which cargo xtask test builds from source for t-source),
#       its echo pod a riscv64 program. It boots alone once the cluster is
#       upgraded, beside the containers' cases after the upgrade, and joins
#       after them (docs/testing.md: its time).
# Each installs its way in a container first, its root booted there by its
# own init as the others are (under TCG an install with its bundle's import
# took 5-11 minutes; v3's and v4's containers run their programs through
# qemu-user, which ci/install-deps registers with binfmt_misc), then
# powers off (vm_park) and, in its first case, boots that root as its VM
# (vm_boot): kubedist's modules-load.d and sysctl.d files are what loads
# br_netfilter and overlay and sets the sysctls on that kernel, at its first
# boot and again after a reboot.
#
# The container runtime is kubedist-containerd (containerd 2 and runc built
# from source), installed by each node's own path with its software (apt,
# dnf, install.sh --runtime, its sysext image, the installer image's
# `install --runtime`). A runtime package upgrade keeps every container. Pods are networked
# by kubedist's own CNI plugins.
# The nodes install, import their images and upgrade with the commands of
# that guide's blocks, read from it (`guide` below), not with a copy; only
# w5's first install runs from the host, with podman (kd_installer_run).
#
# This machine's cgroups are v1: the kubelet refuses them from 1.35 on
# unless its configuration says `failCgroupV1: false`, and kubeadm's
# SystemVerification preflight check must be skipped (by init, join,
# upgrade apply and upgrade node). That is said here, in KUBEADM_CONFIG
# below and in `guide`'s flags, nowhere else in the tests, and holds for
# the nodes in containers alone: the VMs are cgroup v2, as real nodes
# should be.
#
# After the checks of a working cluster at N-1 comes the upgrade to N (the
# N bundle imported, the channels switched, kubeadm upgraded and held,
# `kubeadm upgrade apply` and `upgrade node`, each kubelet upgraded and
# restarted by its init), while a Service backed by a pod on every node is
# asked every 200 ms; its longest gap is reported. The repository starts
# with N's packages at the revision of KD_DIST_PREV; KD_DIST's, the next
# revision of the same release, are published after the upgrade, for the
# upgrade within a minor. Then N-1's kubelet side by side, the faults (a
# killed kubelet, the sysext worker rebooted, a restarted containerd) and the
# teardown (kubeadm reset, then each node's software taken off its way),
# compared with a listing of each node taken before the install.
#
# Node logs (journal, OpenRC's and svlogd's, the kubelet's and containerd's,
# kubectl get events) are kept under target/ci-work/cluster/logs when a
# case fails, as the cluster was before its teardown. Run it alone: cargo xtask test cluster.

# shellcheck disable=SC2016,SC2086 # $... in single quotes is for the inner shell; package lists split
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

# The nodes: name, address, pod subnet, init system, and the way kubedist's
# software reaches it: apt (the deb family), tarball (install.sh, deb
# family on these Debian roots), sysext (the image, which reads the rpm
# family's /etc/sysconfig/kubelet), dnf (the rpm family), installer (the
# installer image's install.sh, deb family).
NODES="cp w1 w2 w3 w4 w5"
WORKERS="w1 w2 w3 w4 w5"
# The virtual machines: v1 systemd (apt), v2 OpenRC and v3 runit (the
# tarball) in the cluster at N-1, each from its cases to its leaving, in
# that order; v4 runit (the tarball) in the upgraded cluster, for its own
# case. KD_VMS picks fewer (KD_VMS=v1: a quicker run that still shows
# kubeadm's defaults with the systemd driver); every run boots all four
# unless told.
VMS=${KD_VMS:-v1 v2 v3 v4}
# The VM at N-1 that stays and is upgraded with the cluster, from N's
# tarball and bundle of its architecture: v3, arm64, when KD_UPGRADE_VMS=v3
# says so (cargo xtask test then builds N's arm64 worker release too). Not
# in CI's run: under TCG, beside the other suites, its import of N's bundle
# and its upgrade took 15-25 minutes of the upgrade case
# (docs/testing.md).
UPGRADING_VMS=${KD_UPGRADE_VMS:-}
for vm in $VMS $UPGRADING_VMS; do
    case $vm in
    v1 | v2 | v3 | v4) ;;
    *) echo "t-cluster: KD_VMS, KD_UPGRADE_VMS: $vm is not a VM worker (v1, v2, v3, v4)" >&2 && exit 2 ;;
    esac
done
case " $VMS /$UPGRADING_VMS" in
*/ | *" v3 "*/v3) ;;
*) echo "t-cluster: KD_UPGRADE_VMS: only v3 is upgraded with the cluster, and KD_VMS must boot it" >&2 && exit 2 ;;
esac
OLDER_VMS=
UPGRADED_VMS=
for vm in v1 v2 v3 v4; do
    case " $VMS " in
    *" $vm "*) case $vm in v4) UPGRADED_VMS=$vm ;; *) OLDER_VMS="$OLDER_VMS $vm" ;; esac ;;
    esac
done
joins_upgraded() { case " $UPGRADED_VMS " in *" $1 "*) true ;; *) false ;; esac; }
upgrades_with_cluster() { [ "$1" = "$UPGRADING_VMS" ]; }
# Each VM works alone, with this machine's CPUs (two at most): under TCG an
# arm64 VM beside two others, one CPU each, took 438 s for its pod's case
# and 629 for its reboot; alone with two, 55 and 133.
KD_VM_CPUS=$(($(nproc) < 2 ? 1 : 2))
node_ip() { case $1 in cp) echo 10.88.0.11 ;; w1) echo 10.88.0.12 ;; w2) echo 10.88.0.13 ;; w3) echo 10.88.0.14 ;; w4) echo 10.88.0.15 ;; w5) echo 10.88.0.16 ;;
    v1) echo 10.88.0.21 ;; v2) echo 10.88.0.22 ;; v3) echo 10.88.0.23 ;; v4) echo 10.88.0.24 ;; esac; }
node_pods() { case $1 in cp) echo 10.244.0 ;; w1) echo 10.244.1 ;; w2) echo 10.244.2 ;; w3) echo 10.244.3 ;; w4) echo 10.244.4 ;; w5) echo 10.244.5 ;;
    v1) echo 10.244.21 ;; v2) echo 10.244.22 ;; v3) echo 10.244.23 ;; v4) echo 10.244.24 ;; esac; }
node_init() { case $1 in w1 | v2) echo openrc ;; w2 | v3 | v4) echo runit ;; *) echo systemd ;; esac; }
node_arch() { case $1 in v3) echo arm64 ;; v4) echo riscv64 ;; *) echo amd64 ;; esac; }
# bundle_end NODE : how the file name of the images bundle NODE installs
# ends, after its version: v3's is a worker's (`cargo xtask test` builds
# the foreign workers' with dist --worker-images), every other node's the
# whole bundle.
bundle_end() {
    role=
    [ "$1" != v3 ] || role=-worker
    echo "-$(node_arch "$1")$role.oci.tar"
}
# bundle_of NODE VERSION : the file name of release VERSION's bundle NODE
# installs.
bundle_of() { echo "kubedist-images-$2$(bundle_end "$1")"; }
# node_dist NODE DIST : where NODE's files of the release in DIST are: DIST,
# or DIST/ARCH for another architecture's.
node_dist() {
    case $(node_arch "$1") in
    amd64) echo "$2" ;;
    *) echo "$2/$(node_arch "$1")" ;;
    esac
}
# (What `uname -m` names it.)
node_machine() { case $(node_arch "$1") in amd64) echo x86_64 ;; arm64) echo aarch64 ;; riscv64) echo riscv64 ;; esac; }
node_way() { case $1 in cp | v1) echo apt ;; w1 | w2 | v2 | v3 | v4) echo tarball ;; w3) echo sysext ;; w4) echo dnf ;; w5) echo installer ;; esac; }
is_vm() { case $1 in v*) true ;; *) false ;; esac; }
# The family env file NODE's kubelet reads KUBELET_EXTRA_ARGS from.
env_file() { case $(node_way "$1") in sysext | dnf) echo /etc/sysconfig/kubelet ;; *) echo /etc/default/kubelet ;; esac; }
SW=kdc-sw.$$

NODE_TOOLS="iproute2 iptables conntrack ethtool socat kmod procps util-linux mount"

# node_base NODE : the cached tarball of NODE's base root (mmdebstrap's,
# made once, kd_base_tarball), made now if missing. Prints its path.
node_base() {
    case $1 in
    cp | w5) kd_base_tarball cluster-systemd systemd systemd-sysv dbus $NODE_TOOLS ;;
    w1) kd_base_tarball cluster-openrc sysvinit-core openrc $NODE_TOOLS ;;
    w2) kd_base_tarball cluster-runit runit-init runit $NODE_TOOLS ;;
    # Debian 13: systemd 257, whose systemd-container has systemd-sysupdate
    # (and gpg, which it verifies the served SHA256SUMS with).
    w3) (
        # shellcheck disable=SC2034 # read by kd_base_tarball
        KD_SUITE_CODENAME=trixie
        kd_base_tarball cluster-sysext systemd systemd-sysv dbus systemd-container gpg $NODE_TOOLS
    ) ;;
    # Debian's rpm and dnf (with the versionlock plugin): the rpm family's
    # package manager on a booted systemd.
    w4) kd_base_tarball cluster-dnf systemd systemd-sysv dbus rpm dnf dnf-plugins-core $NODE_TOOLS ;;
    # (curl and dig: what this machine runs in a pod's network elsewhere.)
    v*) kd_vm_base "cluster-$(node_init "$1")" "$(node_init "$1")" "$(node_arch "$1")" $NODE_TOOLS curl bind9-dnsutils ;;
    esac
}

# `t-cluster.sh --bases`: every node's base root made, and nothing else.
# cargo xtask test runs it beside the releases' builds, so that a machine
# without them (a cold cache) does not make them in the cluster's lane.
if [ "${1:-}" = --bases ]; then
    kd_require mmdebstrap
    for n in $NODES $VMS; do
        kd_log "kd-$n's base root: $(node_base "$n")"
    done
    exit 0
fi

kd_require systemd-nspawn nsenter ip unshare tar jq sha256sum dpkg-deb qemu-system-x86_64 qemu-system-aarch64 \
    qemu-system-riscv64 ssh ssh-keygen mkfs.ext4
kd_require_dist
# (As ci/install-deps requires it: with the F flag, in every root.)
for machine in aarch64 riscv64; do
    if ! grep -qsx enabled "/proc/sys/fs/binfmt_misc/qemu-$machine" ||
        ! grep -qs '^flags: .*F' "/proc/sys/fs/binfmt_misc/qemu-$machine"; then
        echo "t-cluster: FAIL: the kernel does not run $machine programs through qemu-user in every root (run ci/install-deps)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
done
XTASK=${KD_XTASK:?run through cargo xtask test}

kd_own_mount_namespace "$0" "$@"

TMP=$(kd_suite_dir)
LOGS=$KD_WORK/logs
rm -rf "$LOGS"

# The release installed (N-1) and the one upgraded to (N): each one's
# tarball, images bundle and version.
OLD=${KD_DIST_OLDER:?cargo xtask test builds the release of the minor before the pin}
set -- "$OLD"/kubedist-*-linux-amd64.tar.gz
OLD_TARBALL=$(kd_one "$@")
set -- "$OLD"/kubedist-images-*-amd64.oci.tar
OLD_BUNDLE=$(kd_one "$@")
set -- "$KD_DIST"/kubedist-*-linux-amd64.tar.gz
TARBALL=$(kd_one "$@")
set -- "$KD_DIST"/kubedist-images-*-amd64.oci.tar
BUNDLE=$(kd_one "$@")
# Each release's installer image, and N's DaemonSet.
set -- "$OLD"/kubedist-installer-*.oci.tar
OLD_INSTALLER=$(kd_one "$@")
set -- "$KD_DIST"/kubedist-installer-*.oci.tar
INSTALLER=$(kd_one "$@")
set -- "$KD_DIST"/kubedist-installer-*-daemonset.yaml
DAEMONSET=$(kd_one "$@")
version_of() { basename "$1" | sed 's/^kubedist-\(.*\)-linux-amd64.tar.gz$/\1/'; }
OLD_K8S=$(version_of "$OLD_TARBALL")
K8S=$(version_of "$TARBALL")
# The cluster's imageRepository, a site's own as docs/air-gapped.md shows
# it: no registry answers this name, and the nodes' images are named under
# it by kubedist-images (install.sh --image-repository, images.conf).
REPO=registry.example.internal/k8s
# The references of each bundle's images, and of both: each under its own
# name and under REPO's as kubeadm names it there (CoreDNS: REPO/coredns).
refs() {
    tar -xOf "$1" index.json | jq -r '.manifests[].annotations["io.containerd.image.name"]' |
        kd_with_repository_names "$REPO" | sort
}
refs "$OLD_BUNDLE" >"$TMP/old.refs"
refs "$BUNDLE" >"$TMP/bundle.refs"
sort -u "$TMP/old.refs" "$TMP/bundle.refs" >"$TMP/all.refs"
# Each VM's, of the bundles of its architecture it installs (vm_refs):
# N-1's (old), N's (next), both (all).
for n in $VMS; do
    joins_upgraded "$n" || refs "$(node_dist "$n" "$OLD")/$(bundle_of "$n" "$OLD_K8S")" >"$TMP/$n-old.refs"
    if joins_upgraded "$n" || upgrades_with_cluster "$n"; then
        refs "$(node_dist "$n" "$KD_DIST")/$(bundle_of "$n" "$K8S")" >"$TMP/$n-next.refs"
    fi
    sort -u "$TMP/$n"-*.refs >"$TMP/$n-all.refs"
done
# The sandbox image: the same pause in both releases (an upgrade whose pause
# changes also changes the runtime's setting, docs/air-gapped.md).
PAUSE=$(grep '^registry.k8s.io/pause:' "$TMP/old.refs")
grep -qx "$PAUSE" "$TMP/bundle.refs" || {
    echo "t-cluster: FAIL: $OLD_K8S and $K8S want other pause images; this suite knows one" >&2
    echo "0 passed, 1 failed"
    exit 1
}


# --- the network: a bridge in a namespace of its own, a veth per node ------

net_up() {
    ip netns add "$SW"
    ip -n "$SW" link add br0 type bridge
    ip -n "$SW" addr add 10.88.0.1/24 dev br0
    ip -n "$SW" link set br0 up
    # (A VM worker's veth serves its root while it installs in a
    # container; vm_park takes it away.)
    for n in $NODES $VMS; do
        ip netns add "kdc-$n.$$"
        ip link add "kdc$n$$" type veth peer name eth0 netns "kdc-$n.$$"
        ip link set "kdc$n$$" netns "$SW"
        ip -n "$SW" link set "kdc$n$$" master br0 up
    done
    # A VM's wire is a tap device its QEMU opens (kd_vm_start).
    for n in $VMS; do
        ip -n "$SW" tuntap add "kd-$n" mode tap
        ip -n "$SW" link set "kd-$n" master br0 up
    done
}

# node_net NODE : the script that configures NODE's end of the wire at each
# boot, as a host's network service does (sysvinit's halt takes the links
# down): its address, the default route, and each other node's pod subnet
# through that node.
node_net() {
    echo '#!/bin/sh'
    echo 'set -e'
    echo 'ip link set lo up'
    echo "ip addr replace $(node_ip "$1")/24 dev eth0"
    echo 'ip link set eth0 up'
    echo 'ip route replace default via 10.88.0.1'
    for m in $NODES $VMS; do
        [ "$m" = "$1" ] || echo "ip route replace $(node_pods "$m").0/24 via $(node_ip "$m")"
    done
}

net_down() {
    for n in $NODES $VMS; do ip netns del "kdc-$n.$$" 2>/dev/null || true; done
    ip netns del "$SW" 2>/dev/null || true
}

# --- cgroups: each node in a v1 subtree of its own ------------------------

CONTROLLERS="cpu cpuacct cpuset memory devices freezer blkio pids systemd"
cg_up() { # NODE
    for c in $CONTROLLERS; do
        d=/sys/fs/cgroup/$c/kdc-$1.$$
        mkdir -p "$d"
        if [ "$c" = cpuset ]; then
            cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$d/cpuset.cpus"
            cat /sys/fs/cgroup/cpuset/cpuset.mems >"$d/cpuset.mems"
        fi
    done
}

# cg_remove SUFFIX : every process left in the cgroups kdc-*.SUFFIX killed
# (a node's shims outlive its init), then the cgroups removed.
cg_remove() {
    for c in $CONTROLLERS; do
        for d in /sys/fs/cgroup/"$c"/kdc-*."$1"; do
            [ -d "$d" ] || continue
            find "$d" -name cgroup.procs -exec cat {} + | while read -r p; do kill -KILL "$p" 2>/dev/null || true; done
        done
    done
    sleep 1
    for c in $CONTROLLERS; do
        for d in /sys/fs/cgroup/"$c"/kdc-*."$1"; do
            [ ! -d "$d" ] || find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
    done
}
cg_down() { cg_remove $$; }

# What a killed run of this suite left (its pid is in the names): its
# nodes' processes, cgroups and network namespaces.
for d in /sys/fs/cgroup/pids/kdc-*.*; do
    [ -d "$d" ] || continue
    pid=${d##*.}
    kill -0 "$pid" 2>/dev/null || cg_remove "$pid"
done
for ns in $(ip netns list | awk '$1 ~ /^kdc-/ { print $1 }'); do
    kill -0 "${ns##*.}" 2>/dev/null || ip netns del "$ns"
done

# The kernel settings the kubelet writes are global ones (not of a network
# namespace): put back as they were when the suite ends, or, when a run was
# killed before its end, by the next run before it records them. (In /run:
# a reboot resets them, and the record with them.)
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
restore_sysctls() { # FILE
    while IFS= read -r line; do sysctl -q -w "$line" || true; done <"$1"
    rm -f "$1"
}
for f in /run/kubedist-t-cluster.*.sysctls; do
    [ -f "$f" ] || continue
    pid=${f#/run/kubedist-t-cluster.}
    kill -0 "${pid%.sysctls}" 2>/dev/null || restore_sysctls "$f"
done
SYSCTLS_SAVED=/run/kubedist-t-cluster.$$.sysctls
for s in $SYSCTLS; do printf '%s=%s\n' "$s" "$(sysctl -n "$s")"; done >"$SYSCTLS_SAVED.new"
mv "$SYSCTLS_SAVED.new" "$SYSCTLS_SAVED"

cluster_cleanup() {
    kd_boot_cleanup
    cg_down
    net_down
    restore_sysctls "$SYSCTLS_SAVED"
    kd_cleanup
}
trap cluster_cleanup EXIT
trap 'exit 1' INT TERM

# --- inputs ----------------------------------------------------------------

# containerd's version, as the runtime's deb says it.
set -- "$OLD"/kubedist-containerd_*_amd64.deb
RUNTIME_VERSION=$(dpkg-deb -f "$(kd_one "$@")" Version | sed 's/-[0-9]*$//')

# One channel per minor: v$OLD_MINOR/ holds N-1, v$MINOR/ holds N.
OLD_MINOR=${OLD_K8S%.*}
MINOR=${K8S%.*}
# The repository at first holds N-1 and N's first packages (KD_DIST_PREV,
# the same release at the revision before KD_DIST's); N's newer packages
# are published later, for the patch upgrade.
revision_in() { # DIST : the package revision of its kubeadm $K8S deb
    set -- "$1"/kubeadm_"$K8S"-*_amd64.deb
    [ ! -f "$1" ] || basename "$1" | sed 's/^kubeadm_.*-\([0-9]*\)_amd64\.deb$/\1/'
}
PREV_REV=$(revision_in "$KD_DIST_PREV")
REV=$(revision_in "$KD_DIST")
if [ -z "$PREV_REV" ] || [ -z "$REV" ] || [ "$PREV_REV" -ge "$REV" ]; then
    echo "t-cluster: FAIL: KD_DIST_PREV and KD_DIST must hold kubeadm $K8S, KD_DIST at a later revision" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
(cd "$KD_REPO" && "$XTASK" repo --channels minor --from "$OLD" --from "$KD_DIST_PREV" --out "$TMP/repo" \
    --generate-test-key "$TMP/repo-key.asc" --base-url file:///srv/kubedist/repo) >"$TMP/repo.log" 2>&1 || {
    cat "$TMP/repo.log" >&2
    echo "t-cluster: FAIL: cargo xtask repo failed (above)" >&2
    echo "0 passed, 1 failed"
    exit 1
}

# --- the nodes -------------------------------------------------------------

# This machine's settings for containerd, in a file of the configuration
# directory kubedist-containerd's config.toml imports: the cgroupfs driver
# on every node (the kubelets' too, see KUBEADM_CONFIG: this machine's
# cgroups are v1, and systemd in a container manages none of them), and the
# restriction below.
runtime_dropin() {
    cat <<TOML
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
$RESTRICT_OOM
TOML
}
# The processes of this machine lack CAP_SYS_RESOURCE (an operator's host
# has it): no one here may lower an oom_score_adj, which runc does for
# every pod sandbox (-998) unless containerd keeps the scores at its own.
RESTRICT_OOM=
if ! grep -q '^CapBnd:.*' /proc/self/status || [ $((0x$(awk '/^CapBnd/ { print $2 }' /proc/self/status) >> 24 & 1)) -eq 0 ]; then
    RESTRICT_OOM="[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true"
fi

# The node's cgroups, made writable at every boot before containerd starts.
NODE_CGROUPS='#!/bin/sh
# Writable v1 controllers, as a host has them: systemd-nspawn mounts them
# read-only in a container, and sysvinit'\''s boot scripts mount a sysfs of
# their own over its /sys, which hides them. Mounted again from inside the
# node, they are rooted at its cgroup namespace.
controllers="cpu cpuacct cpuset memory devices freezer blkio pids"
writable() {
    for c in $controllers; do
        mkdir "/sys/fs/cgroup/$c/.node-probe" 2>/dev/null || return 1
        rmdir "/sys/fs/cgroup/$c/.node-probe"
    done
}
writable && exit 0
for c in $controllers; do
    umount "/sys/fs/cgroup/$c" 2>/dev/null &&
        mount -t cgroup -o "rw,nosuid,nodev,noexec,relatime,$c" cgroup "/sys/fs/cgroup/$c"
done
writable && exit 0
# Over the whole of /sys/fs/cgroup, where the mounts cannot be reached.
mount -t tmpfs -o mode=0755,nosuid,nodev,noexec cgroup /sys/fs/cgroup
for c in $controllers; do
    mkdir "/sys/fs/cgroup/$c"
    mount -t cgroup -o "rw,nosuid,nodev,noexec,relatime,$c" cgroup "/sys/fs/cgroup/$c"
done
mkdir /sys/fs/cgroup/systemd
mount -t cgroup -o rw,nosuid,nodev,noexec,relatime,none,name=systemd cgroup /sys/fs/cgroup/systemd
writable
'

# carry FILE... DIR : FILEs into DIR, hard-linked where they can be.
carry() { ln -f "$@" 2>/dev/null || cp "$@"; }

# node_root NODE : NODE's root, with containerd and runc installed and
# started by its init system, and the files an operator carries over in
# /srv/kubedist. Prints its path.
node_root() {
    n=$1
    init=$(node_init "$n")
    base=$(node_base "$n")
    r=$TMP/root-$n
    mkdir -p "$r"
    tar -xf "$base" -C "$r" --numeric-owner
    # crictl's 2 s for an answer from containerd is too short for a VM under
    # TCG with its pods starting: the suite's crictl waits 30 s there.
    if is_vm "$n"; then
        printf 'runtime-endpoint: unix:///run/containerd/containerd.sock\ntimeout: 30\n' >"$r/etc/crictl.yaml"
    fi
    # (A VM worker's runtime runs no container before vm_park: no drop-in.)
    if ! is_vm "$n"; then
        mkdir -p "$r/etc/containerd/conf.d"
        runtime_dropin >"$r/etc/containerd/conf.d/99-this-machine.toml"
    fi
    printf '%s' "$NODE_CGROUPS" >"$r/usr/local/sbin/node-cgroups"
    node_net "$n" >"$r/usr/local/sbin/node-net"
    chmod 0755 "$r/usr/local/sbin/node-cgroups" "$r/usr/local/sbin/node-net"
    # No name server exists offline; CoreDNS forwards to this one in vain.
    echo "nameserver 10.88.0.1" >"$r/etc/resolv.conf"
    {
        echo "127.0.0.1 localhost"
        for m in $NODES $VMS; do echo "$(node_ip "$m") kd-$m"; done
    } >"$r/etc/hosts"
    : >"$r/etc/machine-id"
    echo "kd-$n" >"$r/etc/hostname"
    rm -f "$r/etc/apt/sources.list" "$r"/etc/apt/sources.list.d/*
    # The node's network and cgroups, set up at boot before containerd.
    case $init in
    systemd)
        cat >"$r/etc/systemd/system/node-setup.service" <<'UNIT'
[Unit]
Description=The node's end of its wire, and writable cgroups
Before=containerd.service kubelet.service
DefaultDependencies=no
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/node-net
ExecStart=/usr/local/sbin/node-cgroups

[Install]
WantedBy=multi-user.target
UNIT
        ln -s /etc/systemd/system/node-setup.service "$r/etc/systemd/system/multi-user.target.wants/node-setup.service"
        ;;
    openrc)
        cat >"$r/etc/init.d/node-net" <<'INITD'
#!/sbin/openrc-run
# The node's end of its wire, and writable cgroups (containerd wants net).
depend() { provide net; }
start() { /usr/local/sbin/node-net && /usr/local/sbin/node-cgroups; }
INITD
        chmod 0755 "$r/etc/init.d/node-net"
        ln -s /etc/init.d/node-net "$r/etc/runlevels/default/node-net"
        # What the services print at boot, kept in /var/log/rc.log, and
        # each service OpenRC starts and stops named on the console (a
        # shutdown that hangs then says where).
        printf '%s\n' 'rc_logger="YES"' 'rc_verbose="YES"' >>"$r/etc/rc.conf"
        ;;
    runit)
        # runit's stage 1 runs /etc/rcS.d's scripts, before any service.
        cat >"$r/etc/init.d/node-setup" <<'INITD'
#!/bin/sh
# The node's end of its wire, and writable cgroups.
[ "${1:-}" = start ] || exit 0
/usr/local/sbin/node-net
/usr/local/sbin/node-cgroups
INITD
        chmod 0755 "$r/etc/init.d/node-setup"
        mkdir -p "$r/etc/rcS.d"
        ln -s ../init.d/node-setup "$r/etc/rcS.d/S99node-setup"
        ;;
    esac
    # What the operator carries over, linked (the nodes only read it).
    mkdir -p "$r/srv/kubedist"
    case $(node_way "$n") in
    apt | sysext | dnf) cp -al "$TMP/repo" "$r/srv/kubedist/repo" ;;
    esac
    case $(node_way "$n") in
    installer)
        # N's image, for the node's containerd (N-1's runs from the host).
        mkdir "$r/srv/kubedist/v$MINOR"
        carry "$INSTALLER" "$r/srv/kubedist/v$MINOR/"
        ;;
    esac
    # A host has its kernel's modules in /usr/lib/modules, which kube-proxy
    # mounts; over a merged, read-only /usr nothing could create it.
    [ "$(node_way "$n")" != sysext ] || mkdir -p "$r/usr/lib/modules"
    # dnf takes the release from a system-release package, which Debian
    # has not; the repository snippet does not use it.
    if [ "$(node_way "$n")" = dnf ]; then
        mkdir -p "$r/etc/dnf/vars" "$r/etc/yum.repos.d"
        echo 12 >"$r/etc/dnf/vars/releasever"
        # Debian enables dnf's "local" plugin, whose repository of every
        # installed package no rpm host has.
        sed -i 's/^enabled.*/enabled = 0/' "$r/etc/dnf/plugins/local.conf"
        cp "$(kd_provides_rpm)" "$r/srv/kubedist/"
    fi
    # Each release's files in a directory of their own (docs/air-gapped.md,
    # step 2): the bundle, on a tarball node the tarball, and their
    # SHA256SUMS.
    # (A VM has on its disk, copied, the releases it runs: the one it
    # joins at, and N too for the one upgraded with the cluster.)
    joins_upgraded "$n" || carry_release "$n" "$OLD" "$OLD_K8S" "$OLD_MINOR"
    { is_vm "$n" && ! joins_upgraded "$n" && ! upgrades_with_cluster "$n"; } ||
        carry_release "$n" "$KD_DIST" "$K8S" "$MINOR"
    printf '%s\n' "$r"
}

# carry_release NODE DIST VERSION MINOR : into NODE's root, release
# VERSION's bundle of its architecture, on a tarball node its tarball, and
# their SHA256SUMS, from DIST (another architecture's from DIST/ARCH).
carry_release() {
    arch=$(node_arch "$1")
    from=$(node_dist "$1" "$2")
    to=$TMP/root-$1/srv/kubedist/v$4
    mkdir -p "$to"
    carry "$from/$(bundle_of "$1" "$3")" "$to/"
    cp "$from/SHA256SUMS" "$to/"
    [ "$(node_way "$1")" != tarball ] || carry "$from/kubedist-$3-linux-$arch.tar.gz" "$to/"
}

export SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 SYSTEMD_SECCOMP=0

# boot_node NODE : boots NODE's root in its cgroups and network namespace;
# a VM worker's, once vm_park has parked it, as its VM.
boot_node() {
    n=$1
    if [ -f "$TMP/$n.moved" ]; then
        kd_boot "$n" "$TMP/root-$n" "$(node_init "$n")" "--vm=$SW,$(node_ip "$n")"
        return
    fi
    cg_up "$n"
    KD_BOOT_CGROUPS=$(for c in $CONTROLLERS; do printf '/sys/fs/cgroup/%s/kdc-%s.%s ' "$c" "$n" "$$"; done)
    export KD_BOOT_CGROUPS
    extra=
    [ "$(node_way "$n")" != installer ] || extra=$(kd_installer_bind "$n")
    kd_boot "$n" "$TMP/root-$n" "$(node_init "$n")" --capability=all --bind=/dev/kmsg \
        "--network-namespace-path=/run/netns/kdc-$n.$$" --hostname="kd-$n" $extra
    unset KD_BOOT_CGROUPS
}

# in_node NODE SCRIPT : the shell text SCRIPT inside NODE (set -eu).
in_node() { kd_boot_script "$1" <<EOF
$2
EOF
}

# at_once FUNCTION NODE... : FUNCTION NODE for every NODE at once, what
# each printed shown after it, in turn; fails when one did. A node's
# install, upgrade or VM waits on one thing at a time: one node after the
# other left one of this machine's two CPUs idle. (The functions run in
# subshells: what they set stays there.) The nodes that failed are named
# last, each with its last lines: a report that keeps the case's end alone
# still says which node failed and why.
at_once() {
    _at_fn=$1
    shift
    _at_jobs=
    for _at_node in "$@"; do
        "$_at_fn" "$_at_node" >"$TMP/$_at_node.$_at_fn" 2>&1 &
        _at_jobs="$_at_jobs $_at_node:$!"
    done
    _at_failed=
    for _at_job in $_at_jobs; do
        wait "${_at_job#*:}" || _at_failed="$_at_failed ${_at_job%%:*}"
    done
    for _at_node in "$@"; do cat "$TMP/$_at_node.$_at_fn"; done
    for _at_node in $_at_failed; do
        echo "at_once: $_at_fn $_at_node failed; its last lines:" >&2
        tail -n 12 "$TMP/$_at_node.$_at_fn" | sed 's/^/  | /' >&2
    done
    [ -z "$_at_failed" ]
}

# The kubeadm configuration docs/air-gapped.md gives for an air-gapped node: the
# release it runs (no label: those need the internet), the images as the
# bundle names them, never pulled; the cgroup driver of hosts without systemd
# (cgroupfs, every node of this cluster, see below); and kind's settings for
# a node whose disk is shared: no image garbage collection, no eviction.
# This machine's cgroups are v1 (see the top of this file): failCgroupV1 and
# the skipped SystemVerification check are for that alone.
# The control plane here runs systemd but not as its host's cgroup manager:
# systemd-nspawn leaves the container's systemd only the name=systemd
# hierarchy on a v1 host, so its kubelet uses cgroupfs too.
KUBEADM_CONFIG="apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: $(node_ip cp)
nodeRegistration:
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never
  ignorePreflightErrors: [SystemVerification]
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v$OLD_K8S
imageRepository: $REPO
networking:
  serviceSubnet: 10.95.0.0/16
  podSubnet: 10.244.0.0/16
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: 0%
  nodefs.inodesFree: 0%
  imagefs.available: 0%
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  maxPerCore: 0
"

# The pod network of NODE: kubedist's bridge, host-local and portmap plugins
# on the node's own subnet; the routes between the nodes' subnets are the
# network's (net_up).
cni_conflist() {
    cat <<JSON
{
  "cniVersion": "1.0.0",
  "name": "kubedist",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$(node_pods "$1").0/24" }]],
                "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
JSON
}

# write_cni NODE : NODE's pod network (cni_conflist) in its /etc/cni/net.d.
write_cni() {
    cni_conflist "$1" | kd_in_boot "$1" sh -c 'mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-kubedist.conflist'
}

# keep_logs : each node's logs, for a case that failed.
keep_logs() {
    for n in $NODES $VMS; do
        kd_booted "$n" || continue
        mkdir -p "$LOGS/$n"
        kd_in_boot "$n" sh -c 'journalctl --no-pager -b 2>/dev/null | tail -n 3000' >"$LOGS/$n/journal" 2>&1 || true
        for f in /var/log/rc.log /var/log/kubelet/kubelet.log /var/log/containerd.log \
            /var/log/kubelet/current /var/log/containerd/current; do
            kd_in_boot "$n" tail -n 3000 "$f" >"$LOGS/$n/$(echo "${f#/var/log/}" | tr / -)" 2>/dev/null || true
        done
    done
    kd_in_boot cp kubectl --kubeconfig /etc/kubernetes/admin.conf get events -A >"$LOGS/events" 2>&1 || true
    kd_in_boot cp kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A -o wide >"$LOGS/pods" 2>&1 || true
    cp "$KD_WORK"/boot.*.console "$KD_WORK"/boot.*.console.before "$LOGS/" 2>/dev/null || true
}

# kubectl ARGS... : kubectl on the control plane, as its admin.
kc() { kd_in_boot cp kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"; }

# wait_for SECONDS WHAT CMD... : CMD until it succeeds, else fail saying WHAT.
wait_for() {
    secs=$1 what=$2
    shift 2
    end=$(($(date +%s) + secs))
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$end" ]; then
            echo "assertion failed: $what (after $secs s)" >&2
            "$@" >&2 || true
            return 1
        fi
        sleep 2
    done
}

# --- bring-up --------------------------------------------------------------

net_up
for n in $NODES $VMS; do node_root "$n" >/dev/null; done
for n in $NODES $VMS; do boot_node "$n"; done

# set_zone NODE VALUE : an admin's KUBELET_EXTRA_ARGS in NODE's family file.
set_zone() {
    kd_in_boot "$1" sh -c 'mkdir -p "${2%/*}" && printf "%s\n" "KUBELET_EXTRA_ARGS=--node-labels=kubedist.test/zone=$1" >"$2"' sh "$2" "$(env_file "$1")"
}

# What stays where it is until the admin moves it (apt-mark hold, dnf
# versionlock).
HELD="kubeadm kubelet kubectl"

# guide NODE NAME VERSION MINOR [SHOWN USED]... : the commands
# docs/air-gapped.md shows in its block NAME, for NODE, release VERSION from
# the channel of MINOR (the guide names 1.37.2 and v1.37) and NODE's
# architecture's files (the guide names amd64's), with SHOWN replaced by
# USED first. The two changes are this machine's: its cgroups
# are v1, so kubeadm's upgrades skip the SystemVerification check (see the
# top of this file); and on runit the kubelet restarts with sv, as the
# guide's comment says.
guide() {
    node=$1 name=$2 version=$3 minor=$4
    shift 4
    restart='' patches=''
    [ "$(node_init "$node")" != runit ] || restart='s/^rc-service kubelet restart .*/sv restart kubelet/'
    # A VM's kubelet settings (vm_patch) kept through its upgrade, as kubeadm
    # takes them at the join.
    ! is_vm "$node" || patches='s|^kubeadm upgrade node.*|& --patches /etc/kubedist-test/patches|'
    kd_guide_block docs/air-gapped.md "$name" "$@" 1.37.2 "$version" v1.37 "v$minor" \
        -amd64.oci.tar "$(bundle_end "$node")" amd64 "$(node_arch "$node")" | sed \
        -e 's/^kubeadm upgrade \(apply\|node\).*/& --ignore-preflight-errors=SystemVerification/' \
        -e "$restart" -e "$patches"
}

# install NODE VERSION MINOR : kubedist's software of release VERSION on
# NODE and its images, the way docs/air-gapped.md's step 2 installs them on
# its path: the packages held (apt-mark hold, dnf versionlock), the sysext
# image from the channel of MINOR with systemd-sysupdate.
install() {
    case $(node_way "$1") in
    apt) in_node "$1" "$(guide "$1" apt-node "$2" "$3")" ;;
    tarball) in_node "$1" "$(guide "$1" tarball-node "$2" "$3")" ;;
    sysext) in_node "$1" "$(guide "$1" sysext-node "$2" "$3")" ;;
    installer)
        image=$OLD_INSTALLER
        [ "$2" != "$K8S" ] || image=$INSTALLER
        # The runtime first, on its own, as docs/installer-image.md says.
        for what in "install --runtime" install; do
            # shellcheck disable=SC2086 # the action and its option, as words
            kd_installer_run "$1" "$image" $what >"$TMP/$1.installer.out" ||
                { cat "$TMP/$1.installer.out"; return 1; }
            cat "$TMP/$1.installer.out"
            assert_grep "installing in the host's namespaces" "$TMP/$1.installer.out"
        done ;;
    dnf) in_node "$1" "
        # TEST-ONLY: declares the distribution packages Debian installed
        # (iptables, util-linux, conntrack) to this root's rpm database.
        rpm -i /srv/kubedist/kubedist-test-provides-*.noarch.rpm
        $(guide "$1" dnf-node "$2" "$3")" ;;
    esac
    # The tarball's install.sh imported the images already.
    [ "$(node_way "$1")" = tarball ] || in_node "$1" "$(guide "$1" bundle "$2" "$3")"
}

# install_older NODE : NODE installed at N-1, its way.
install_older() { install "$1" "$OLD_K8S" "$OLD_MINOR"; }

# import_next_bundle NODE : N's images bundle imported on NODE, before the
# upgrade, as the guide's step 4 says.
import_next_bundle() {
    case $(node_way "$1") in
    tarball) in_node "$1" "$(guide "$1" tarball-bundle-next "$K8S" "$MINOR")" ;;
    *) in_node "$1" "$(guide "$1" bundle-next "$K8S" "$MINOR")" ;;
    esac
}

test_every_node_installs_offline_its_own_way() {
    # (What the teardown compares with.)
    for n in $NODES; do listing "$n" >"$TMP/$n.before"; done
    # The VM workers first, each at the release it joins: once installed
    # each is powered off and made ready to boot as its VM (vm_park) while
    # the others install; its join case boots it. Their own pod network and
    # kubelet settings go with them.
    for n in $VMS; do
        if joins_upgraded "$n"; then
            install "$n" "$K8S" "$MINOR"
        else
            install "$n" "$OLD_K8S" "$OLD_MINOR"
        fi
        write_cni "$n"
        vm_patch "$n" | kd_in_boot "$n" sh -c 'mkdir -p /etc/kubedist-test/patches && cat >/etc/kubedist-test/patches/kubeletconfiguration+merge.yaml'
        behind "$n.park" vm_park "$n"
    done
    at_once install_older $NODES
    for n in $WORKERS; do set_zone "$n" "a-$n"; done
    for n in $NODES; do
        # A booted host applies the packages'"'"' kernel settings at boot; in a
        # container the installers leave that to the boot (kernel_apply).
        in_node "$n" 'sysctl -q --system'
        write_cni "$n"
    done
}

test_kubeadm_init_completes_offline_and_every_node_is_ready() {
    printf '%s' "$KUBEADM_CONFIG" | kd_in_boot cp sh -c 'cat >/root/kubeadm.yaml'
    in_node cp 'kubeadm init --config /root/kubeadm.yaml' >"$TMP/cp.kubeadm" 2>&1 ||
        { cat "$TMP/cp.kubeadm"; return 1; }
    cat "$TMP/cp.kubeadm"
    join=$(kc -n kube-system get cm >/dev/null; kd_in_boot cp kubeadm token create --print-join-command)
    for n in $WORKERS; do
        in_node "$n" "$join --ignore-preflight-errors=SystemVerification" >"$TMP/$n.kubeadm" 2>&1 ||
            { cat "$TMP/$n.kubeadm"; return 1; }
        cat "$TMP/$n.kubeadm"
    done
    # The runtime has CRI's RuntimeConfig: kubeadm's preflight does not warn
    # (from 1.38 on, it refuses a runtime without it).
    for n in $NODES; do
        if grep ContainerRuntimeVersion "$TMP/$n.kubeadm"; then
            echo "assertion failed: kubeadm's preflight on kd-$n warned about the runtime (above)" >&2
            return 1
        fi
    done
    for n in $NODES; do
        wait_for 180 "node kd-$n is Ready" kc wait --for=condition=Ready "node/kd-$n" --timeout=5s
    done
}


# The init system that supervises the kubelet on NODE, as ps names it.
supervisor_of() { case $(node_init "$1") in systemd) echo systemd ;; openrc) echo supervise-daemon ;; runit) echo runsv ;; esac; }

test_every_kubelet_is_its_init_systems_child_with_the_drop_in_chain() {
    for n in $NODES; do
        pid=$(kd_in_boot "$n" pgrep -x kubelet)
        ppid=$(kd_in_boot "$n" ps -o ppid= -p "$pid" | tr -d ' ')
        parent=$(basename "$(kd_in_boot "$n" readlink "/proc/$ppid/exe")")
        assert_eq "$(supervisor_of "$n")" "$parent" "the parent of kd-$n's kubelet"
        kd_in_boot "$n" cat "/proc/$pid/cmdline" | tr '\0' '\n' | jq -R . | jq -sc '.[1:]' >"$TMP/$n.argv"
        kd_in_boot "$n" kubelet-wrapper --wait 0 --print >"$TMP/$n.print"
        jq -c '.argv[1:]' "$TMP/$n.print" >"$TMP/$n.print.argv"
        cat "$TMP/$n.argv"
        assert_eq "$(cat "$TMP/$n.print.argv")" "$(cat "$TMP/$n.argv")" "kd-$n's kubelet argv against kubelet-wrapper --print"
        assert_grep '"--config=/var/lib/kubelet/config.yaml"' "$TMP/$n.argv"
        # Every variable the chain sets reaches the kubelet as it says.
        kd_in_boot "$n" cat "/proc/$pid/environ" | tr '\0' '\n' | sort >"$TMP/$n.environ"
        jq -r '.env | to_entries[] | "\(.key)=\(.value)"' "$TMP/$n.print" | sort >"$TMP/$n.print.env"
        comm -23 "$TMP/$n.print.env" "$TMP/$n.environ" >"$TMP/$n.missing"
        assert_empty "$TMP/$n.missing" "kd-$n's kubelet lacks the variables above"
    done
}

# Every node's runtime is kubedist-containerd's, and its kubelet runs with
# the cgroup driver the runtime reports through CRI RuntimeConfig.
test_every_runtime_is_kubedist_containerd_with_the_kubelets_cgroup_driver() {
    for n in $NODES; do
        kd_in_boot "$n" containerd --version >"$TMP/$n.containerd.version"
        assert_grep " v$RUNTIME_VERSION " "$TMP/$n.containerd.version"
        kd_in_boot "$n" crictl runtime-config >"$TMP/$n.runtime-config"
        cat "$TMP/$n.runtime-config"
        driver=$(awk '/^cgroup driver:/ { print tolower($3) }' "$TMP/$n.runtime-config")
        kc get --raw "/api/v1/nodes/kd-$n/proxy/configz" | jq -r .kubeletconfig.cgroupDriver >"$TMP/$n.kubelet-driver"
        assert_eq cgroupfs "$driver" "kd-$n's runtime's cgroup driver (this machine's, see runtime_dropin)"
        assert_eq "$driver" "$(cat "$TMP/$n.kubelet-driver")" "kd-$n's kubelet's cgroup driver"
    done
}

pod_running() { [ "$(kc -n kube-system get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
kube_proxies_running() {
    [ "$(kc -n kube-system get pods -l k8s-app=kube-proxy --field-selector=status.phase=Running -o name | grep -c .)" = "$(kc get nodes -o name | grep -c .)" ]
}

test_the_control_plane_kube_proxy_and_coredns_run() {
    for p in kube-apiserver kube-controller-manager kube-scheduler etcd; do
        wait_for 60 "$p-kd-cp is Running" pod_running "$p-kd-cp"
    done
    wait_for 120 "kube-proxy runs on every node" kube_proxies_running
    wait_for 120 "CoreDNS is available" kc -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
    kc get pods -A -o wide
}


# (N-1's CoreDNS: on every node before and after the upgrade; N's on a VM
# that joins the upgraded cluster. Of the images a worker's bundle holds
# (v3's: dist --worker-images), CoreDNS's is the one that serves.)
ECHO_IMAGE=$(grep "^$REPO/coredns:" "$TMP/old.refs")
NEXT_ECHO_IMAGE=$(grep "^$REPO/coredns:" "$TMP/bundle.refs")

# echo_manifest NODE : a pod on NODE running its bundle's CoreDNS image as
# a server whose health plugin answers /health on port 2379 ("OK"), and a
# ClusterIP Service in front of it alone.
echo_manifest() {
    image=$ECHO_IMAGE
    ! joins_upgraded "$1" || image=$NEXT_ECHO_IMAGE
    cat <<YAML
---
apiVersion: v1
kind: ConfigMap
metadata: { name: echo }
data:
  Corefile: |
    .:5353 {
        whoami
        health :2379
    }
---
apiVersion: v1
kind: Pod
metadata: { name: echo-$1, labels: { app: echo, node: $1 } }
spec:
  nodeName: kd-$1
  # runc's seccomp, as kubeadm's static pods have it too.
  securityContext: { seccompProfile: { type: RuntimeDefault } }
  # Its node's for good: a node that reboots slowly (a VM under TCG) may be
  # away longer than the 300 s after which a pod is evicted by default.
  tolerations: [{ operator: Exists, effect: NoExecute }]
  containers:
  - name: echo
    image: $image
    imagePullPolicy: Never
    args: [-conf, /etc/echo/Corefile]
    volumeMounts: [{ name: corefile, mountPath: /etc/echo }]
  volumes: [{ name: corefile, configMap: { name: echo } }]
---
apiVersion: v1
kind: Service
metadata: { name: echo-$1 }
spec:
  selector: { app: echo, node: $1 }
  ports: [{ port: 2379 }]
YAML
}

# sandbox NODE POD : the id of POD's ready sandbox on NODE.
sandbox() { kd_in_boot "$1" crictl pods -q --name "^$2\$" --state ready | head -n 1; }

# pod_netns NODE POD : the network namespace of POD, which runs on NODE,
# as a path on this machine.
pod_netns() {
    path=$(kd_in_boot "$1" crictl inspectp "$(sandbox "$1" "$2")" |
        jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type == "network") | .path')
    # (/var/run is a link to /run, which would resolve on this machine.)
    case $path in /var/run/*) path=${path#/var} ;; esac
    if is_vm "$1"; then echo "$path"; else echo "/proc/$(cat "$KD_WORK/boot.$1.init")/root$path"; fi
}

# in_pod NODE POD CMD... : CMD (curl, dig) in the network namespace of POD,
# which runs on NODE: this machine's, or on a VM the VM's own.
in_pod() {
    node=$1
    netns=$(pod_netns "$1" "$2")
    shift 2
    if is_vm "$node"; then
        kd_in_boot "$node" nsenter --net="$netns" "$@"
    else
        nsenter --net="$netns" "$@"
    fi
}

test_pods_on_every_node_reach_each_other_through_services_and_coredns() {
    wait_for 120 "CoreDNS is available" kc -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
    for n in $NODES; do echo_manifest "$n"; done | kd_in_boot cp kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f -
    for n in $NODES; do
        wait_for 120 "echo-$n is Ready" kc wait --for=condition=Ready "pod/echo-$n" --timeout=5s
    done
    for n in $NODES; do
        # kubectl logs and exec through each node's kubelet.
        kc logs "echo-$n" >"$TMP/echo-$n.log"
        assert_grep '^CoreDNS-' "$TMP/echo-$n.log"
        kc exec "echo-$n" -- /coredns -version >"$TMP/echo-$n.version"
        assert_grep '^CoreDNS-' "$TMP/echo-$n.version"
        # The pod's resolver is the DNS address of serviceSubnet 10.95.0.0/16 (its tenth).
        id=$(sandbox "$n" "echo-$n")
        kd_in_boot "$n" cat "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/$id/resolv.conf" >"$TMP/echo-$n.resolv"
        assert_grep '^nameserver 10.95.0.10$' "$TMP/echo-$n.resolv"
        assert_grep '^search default.svc.cluster.local svc.cluster.local cluster.local' "$TMP/echo-$n.resolv"
        kd_in_boot "$n" grep -A1 '^clusterDNS:' /var/lib/kubelet/config.yaml >"$TMP/$n.dns"
        assert_grep '^- 10.95.0.10$' "$TMP/$n.dns"
    done
    for n in $NODES; do
        # CoreDNS, through its ClusterIP, from the pod: the API's Service and
        # the other nodes' echo Services.
        in_pod "$n" "echo-$n" dig +short +time=5 +tries=3 @10.95.0.10 kubernetes.default.svc.cluster.local >"$TMP/$n.kubernetes"
        assert_eq 10.95.0.1 "$(cat "$TMP/$n.kubernetes")" "kubernetes.default.svc as CoreDNS answers a pod on kd-$n"
        for m in $NODES; do
            [ "$m" != "$n" ] || continue
            ip=$(in_pod "$n" "echo-$n" dig +short +time=5 +tries=3 @10.95.0.10 "echo-$m.default.svc.cluster.local")
            assert_eq "$(kc get svc "echo-$m" -o jsonpath='{.spec.clusterIP}')" "$ip" "echo-$m's ClusterIP as CoreDNS answers on kd-$n"
            in_pod "$n" "echo-$n" curl -fsS --max-time 10 "http://$ip:2379/health" >"$TMP/$n-$m.health"
            assert_grep '^OK$' "$TMP/$n-$m.health"
        done
    done
}

test_nothing_was_pulled_and_the_bundles_images_are_pinned() {
    for n in $NODES; do
        kd_in_boot "$n" crictl images -o json >"$TMP/$n.images"
        # Every image of the bundle, pinned: the kubelet's garbage collection
        # never removes a pinned image.
        jq -r '.images[] | select(.pinned) | .repoTags[]' "$TMP/$n.images" | sort >"$TMP/$n.pinned"
        comm -23 "$TMP/old.refs" "$TMP/$n.pinned" >"$TMP/$n.unpinned"
        assert_empty "$TMP/$n.unpinned" "kd-$n holds the bundle's images above unpinned"
        # And nothing else: no image came from a registry.
        jq -r '.images[].repoTags[]' "$TMP/$n.images" | sort | comm -23 - "$TMP/old.refs" >"$TMP/$n.others"
        assert_empty "$TMP/$n.others" "kd-$n holds images the bundle does not"
    done
}

# --- the VM workers: a kernel of their own, cgroup v2 ------------------------

# vm_patch NODE : NODE's own kubelet settings, a `kubeadm join --patches`
# file: kubelet's failCgroupV1 default again (the cluster's `false` is for
# the nodes in containers), and where systemd booted the host, kubeadm's
# systemd cgroup driver.
vm_patch() {
    echo 'failCgroupV1: true'
    [ "$(node_init "$1")" != systemd ] || echo 'cgroupDriver: systemd'
}

# vm_kernel NODE : whether NODE's kernel has the modules and settings the
# kubelet needs (units/kernel/), one line each.
vm_kernel() {
    kd_in_boot "$1" sh -c '
        for m in br_netfilter overlay; do
            if [ -d "/sys/module/$m" ]; then echo "$m loaded"; else echo "$m not loaded"; fi
        done
        for s in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
            echo "$s = $(sysctl -n "$s" 2>/dev/null || echo absent)"
        done
        echo "cgroup $(stat -fc %T /sys/fs/cgroup)"'
}

# assert_kernel_ready FILE : the kernel as vm_kernel's FILE says, as the
# node needs it.
assert_kernel_ready() {
    assert_grep '^cgroup cgroup2fs$' "$1"
    assert_grep '^br_netfilter loaded$' "$1"
    assert_grep '^overlay loaded$' "$1"
    assert_grep '^net.ipv4.ip_forward = 1$' "$1"
    assert_grep '^net.bridge.bridge-nf-call-iptables = 1$' "$1"
}

# pod_pid NODE POD : the process ID on NODE of POD's container.
pod_pid() {
    id=$(kd_in_boot "$1" crictl ps -q --pod "$(sandbox "$1" "$2")" | head -n 1)
    kd_in_boot "$1" crictl inspect "$id" | jq -r '.info.pid'
}

# pod_cgroup NODE POD : the cgroup of POD's container, as /proc/PID/cgroup
# on NODE says it.
pod_cgroup() { kd_in_boot "$1" cat "/proc/$(pod_pid "$1" "$2")/cgroup"; }

# pod_machine NODE POD : the machine POD's program on NODE is for, as
# `uname -m` names it: its ELF header's e_machine, read by NODE's kernel.
pod_machine() {
    case $(kd_in_boot "$1" od -An -tx2 -j18 -N2 "/proc/$(pod_pid "$1" "$2")/exe" | tr -d ' ') in
    003e) echo x86_64 ;;
    00b7) echo aarch64 ;;
    00f3) echo riscv64 ;;
    *) echo unknown ;;
    esac
}

# vm_park NODE : VM worker NODE, installed in its container, powered off
# there and its root made ready to boot as its VM: its veth and writable v1
# cgroups given up, its boot's logs so far set aside, OpenRC's cgroup mode
# set as the guide says (where the guide reboots).
vm_park() {
    r=$TMP/root-$1
    kd_poweroff "$1"
    ip netns del "kdc-$1.$$"
    printf '#!/bin/sh\n' >"$r/usr/local/sbin/node-cgroups"
    case $(node_init "$1") in
    openrc)
        mv "$r/var/log/rc.log" "$r/var/log/rc.log.in-container"
        kd_guide_block docs/hosts-without-systemd.md openrc-cgroup-v2 >"$r/root/cgroup-v2.sh"
        chroot "$r" sh -eu /root/cgroup-v2.sh
        rm "$r/root/cgroup-v2.sh"
        ;;
    runit) mv "$r/var/log/kubelet" "$r/var/log/kubelet.in-container" && mkdir "$r/var/log/kubelet" ;;
    esac
    kd_vm_prepare "$r"
    : >"$TMP/$1.moved"
}

# vm_boot NODE : VM worker NODE, parked, booted as its VM, its disk made.
vm_boot() {
    boot_node "$1"
    # The root is on its disk now: of the directory only the kernel and
    # initramfs its reboot boots are kept (not 1.4 GB twice on this
    # machine's disk).
    find "$TMP/root-$1" -mindepth 1 -maxdepth 1 ! -name boot -exec rm -rf {} +
}

# vm_refs NODE : the file of the image references of the bundles VM NODE
# imported (refs): N's for one that joins the upgraded cluster, both for
# one upgraded with it once upgraded, else N-1's.
vm_refs() {
    if joins_upgraded "$1"; then
        echo "$TMP/$1-next.refs"
    elif [ -f "$TMP/$1.upgraded" ]; then
        echo "$TMP/$1-all.refs"
    else
        echo "$TMP/$1-old.refs"
    fi
}

# import_named_all NODE FILE : whether VM NODE's boot-time import has named
# every image of its bundle yet (what it said so far kept in FILE).
import_named_all() {
    boot_import "$1" >"$2" 2>/dev/null || true
    while read -r ref; do grep -qF "$ref: " "$2" || return 1; done <"$(vm_refs "$1")"
}

# assert_boot_imported_nothing NODE FILE : what VM NODE's boot-time import
# said (boot_import, kept in FILE): every image of its bundle present,
# none imported, no note. (A VM's ssh can answer before the import ends:
# on runit the kubelet's service runs it, on a CPU three VMs share.)
assert_boot_imported_nothing() {
    wait_for 300 "kd-$1's boot-time import to name every image" import_named_all "$1" "$2"
    while read -r ref; do
        assert_grep "$ref: present " "$2"
    done <"$(vm_refs "$1")"
    assert_no_grep ': imported ' "$2"
    assert_no_grep 'note:' "$2"
}

# behind NAME COMMAND... : COMMAND run in the background, once a run:
# $TMP/NAME.started marks its start, $TMP/NAME takes what it prints and
# $TMP/NAME.rc its exit status when it ends (behind_ended).
behind() {
    behind_name=$1
    shift
    [ ! -f "$TMP/$behind_name.started" ] || return 0
    : >"$TMP/$behind_name.started"
    # (Its file named before the subshell: the helpers' variables are
    # global, and another call may change them meanwhile.)
    behind_out=$TMP/$behind_name
    (
        rc=0
        "$@" >"$behind_out" 2>&1 || rc=$?
        echo "$rc" >"$behind_out.rc"
    ) </dev/null >/dev/null 2>&1 &
}

# behind_ended NAME WHAT : waits up to 1200 s for `behind NAME`'s end,
# shows what it printed, and fails naming WHAT unless it succeeded. (v3's
# import of N's tarball and bundle, whose install.sh checks every file
# under TCG, took 4 minutes, and 11-17 beside compiling suites before QEMU
# ran at a higher priority: kd_vm_start.)
behind_ended() {
    wait_for 1200 "$2 to end" test -f "$TMP/$1.rc"
    cat "$TMP/$1"
    echo "$2: ended $(($(stat -c %Y "$TMP/$1.rc") - $(stat -c %Y "$TMP/$1.started"))) s after it started"
    assert_eq 0 "$(cat "$TMP/$1.rc")" "the exit status of $2"
}

# vm_parked NODE : fails, saying so, when the install case did not install
# VM NODE; else waits for its root to be ready for its VM (vm_park).
vm_parked() {
    [ -f "$TMP/$1.park.started" ] ||
        { echo "kd-$1 was not installed: the install case installs the VM workers" >&2 && return 1; }
    behind_ended "$1.park" "kd-$1's root made ready for its VM"
}

# vm_join NODE : VM NODE, booted, joined and checked (the case below).
vm_join() {
    vm_kernel "$1" >"$TMP/$1.kernel-booted"
    cat "$TMP/$1.kernel-booted"
    assert_kernel_ready "$TMP/$1.kernel-booted"
    assert_boot_imported_nothing "$1" "$TMP/$1.first-import"
    # kubeadm's preflight gives the runtime 2 s to answer, which a VM under
    # TCG just booted, its crash-looping kubelet beside, has missed once:
    # an operator joins a node whose runtime answers (crictl: 30 s here).
    wait_for 120 "kd-$1's containerd answers CRI" kd_in_boot "$1" crictl info
    in_node "$1" "$(cat "$TMP/join")" >"$TMP/$1.kubeadm" 2>&1 ||
        { cat "$TMP/$1.kubeadm"; return 1; }
    cat "$TMP/$1.kubeadm"
    assert_no_grep 'ignored' "$TMP/$1.kubeadm"
    wait_for 300 "node kd-$1 is Ready" kc wait --for=condition=Ready "node/kd-$1" --timeout=5s
    driver=cgroupfs
    [ "$(node_init "$1")" != systemd ] || driver=systemd
    kd_in_boot "$1" cat /var/lib/kubelet/config.yaml >"$TMP/$1.kubelet-config"
    assert_grep "^cgroupDriver: $driver\$" "$TMP/$1.kubelet-config"
    assert_grep '^failCgroupV1: true$' "$TMP/$1.kubelet-config"
    kd_in_boot "$1" containerd config dump >"$TMP/$1.containerd-config"
    if [ "$driver" = systemd ]; then
        assert_grep 'SystemdCgroup = true' "$TMP/$1.containerd-config"
    else
        assert_grep 'SystemdCgroup = false' "$TMP/$1.containerd-config"
    fi
    pid=$(kd_in_boot "$1" pgrep -x kubelet)
    ppid=$(kd_in_boot "$1" ps -o ppid= -p "$pid" | tr -d ' ')
    assert_eq "$(supervisor_of "$1")" "$(basename "$(kd_in_boot "$1" readlink "/proc/$ppid/exe")")" "the kubelet's parent on kd-$1"
}

# The cases of a VM at N-1 (kd_test FUNCTION NODE): one VM at a time, from
# its boot to its leaving, so that each has the machine's CPUs (KD_VM_CPUS).

# VM NODE, installed its way at N-1 in its container and booted on its own
# kernel: the boot applied kubedist's modules and settings and found every
# image present; then joined with kubeadm's preflight whole and its own
# kubelet settings: Ready, its kubelet its init system's child with the
# cgroup driver of its host, and containerd's the same.
test_joins_on_cgroup_v2_with_kubeadms_defaults() {
    vm_parked "$1"
    vm_boot "$1"
    write_vm_join
    vm_join "$1"
}

# write_vm_join : the VMs' join command, with their kubelet settings.
write_vm_join() {
    echo "$(kd_in_boot cp kubeadm token create --print-join-command) --patches /etc/kubedist-test/patches" >"$TMP/join"
}

# pod_until NODE POD SECONDS WHAT CHECK : the shell command CHECK, in the
# network namespace of POD on NODE, every 2 s until it succeeds, else fail
# saying WHAT. The pod's namespace is looked up once, and on a VM the loop
# runs in the VM, in one session: under TCG an ssh session and two crictl
# runs a try took the guest's CPU from the kube-proxy being waited for.
# shellcheck disable=SC2016 # $1-$3 and $(...) are the loop's shell's
pod_until() {
    loop='end=$(($(date +%s) + $1))
        until nsenter --net="$2" sh -c "$3" >/dev/null 2>&1; do
            [ "$(date +%s)" -lt "$end" ] || { nsenter --net="$2" sh -c "$3"; exit 1; }
            sleep 2
        done'
    netns=$(pod_netns "$1" "$2")
    if is_vm "$1"; then
        kd_in_boot "$1" sh -c "$loop" pod-until "$3" "$netns" "$5"
    else
        sh -c "$loop" pod-until "$3" "$netns" "$5"
    fi || { echo "assertion failed: $4 (after $3 s)" >&2 && return 1; }
}

# resolves NAME IP : a CHECK of pod_until: CoreDNS answers IP for NAME.
resolves() { printf '[ "$(dig +short +time=5 +tries=1 @10.95.0.10 %s)" = %s ]' "$1" "$2"; }
# answers IP [SECONDS] : a CHECK of pod_until: the echo pod behind IP
# answers within SECONDS (10).
answers() { printf 'curl -fsS --max-time %s http://%s:2379/health' "${2:-10}" "$1"; }

# proxy_has NODE IP : whether NODE's kube-proxy has written the rules of
# the Service IP (in either of iptables' back ends: kube-proxy's image takes
# the one the node uses).
# shellcheck disable=SC2016 # $1 is the node's shell's
proxy_has() {
    kd_in_boot "$1" sh -c '{ iptables-nft-save -t nat; iptables-legacy-save -t nat; } 2>/dev/null |
        grep -qF -- "-d $1/32"' proxy-has "$2"
}

# proxy_log NODE : NODE's kube-proxy pod, its addresses as kube-proxy
# reads them, its container's state (a start refused says why there), how
# its last container ended, the pod's events and the last lines, on
# stderr (the container running may not have said anything yet).
proxy_log() {
    pod=$(kc -n kube-system get pods -l k8s-app=kube-proxy --field-selector "spec.nodeName=kd-$1" -o name)
    kc -n kube-system get "$pod" -o wide >&2 || true
    echo "kd-$1's addresses: $(kc get node "kd-$1" -o jsonpath='{.status.addresses}' || true)" >&2
    echo "kube-proxy's state: $(kc -n kube-system get "$pod" -o jsonpath='{.status.containerStatuses[0].state}' || true)" >&2
    echo "kube-proxy's last end: $(kc -n kube-system get "$pod" -o jsonpath='{.status.containerStatuses[0].lastState}' || true)" >&2
    kc -n kube-system get events --field-selector "involvedObject.name=${pod#pod/}" >&2 || true
    kc -n kube-system logs "$pod" --previous --tail=30 >&2 || kc -n kube-system logs "$pod" --tail=30 >&2 || true
}

# vm_pod NODE : VM NODE's echo pod checked (the case below).
vm_pod() {
    wait_for 300 "echo-$1 is Ready" kc wait --for=condition=Ready "pod/echo-$1" --timeout=5s
    kd_mark "echo-$1 Ready"
    pod_cgroup "$1" "echo-$1" >"$TMP/$1.pod-cgroup"
    cat "$TMP/$1.pod-cgroup"
    # cgroup v2: one line, the unified hierarchy's.
    assert_eq 1 "$(wc -l <"$TMP/$1.pod-cgroup")" "lines of /proc/PID/cgroup on kd-$1"
    case $(node_init "$1") in
    systemd) assert_grep '^0::/kubepods.slice/.*\.scope$' "$TMP/$1.pod-cgroup" ;;
    *) assert_grep '^0::/kubepods/' "$TMP/$1.pod-cgroup" ;;
    esac
    # The pod's program is of its node's architecture (arm64's from its
    # bundle on v3, riscv64's on v4), run by its kernel.
    machine=$(node_machine "$1")
    assert_eq "$machine" "$(kd_in_boot "$1" uname -m)" "uname -m on kd-$1"
    pod_machine=$(pod_machine "$1" "echo-$1")
    echo "kd-$1 is $machine; echo-$1's program is for $pod_machine"
    assert_eq "$machine" "$pod_machine" "the machine echo-$1's program is for"
    # A pod Ready may come before its node's kube-proxy, under TCG slow to
    # start, has written the Services' rules: the limits on the answers
    # below start when the rules are there. (Beside a build from source,
    # three VMs on two CPUs: an arm64 kube-proxy running without a restart
    # had not written them 300 s into this wait.)
    cp_ip=$(kc get svc echo-cp -o jsonpath='{.spec.clusterIP}')
    for ip in 10.95.0.10 "$cp_ip"; do
        wait_for 600 "kd-$1's kube-proxy has written the rules of Service $ip" proxy_has "$1" "$ip" ||
            { proxy_log "$1" && return 1; }
    done
    kd_mark "kd-$1's kube-proxy has written the Services' rules"
    pod_until "$1" "echo-$1" 120 "CoreDNS answers echo-cp's ClusterIP to echo-$1" \
        "$(resolves echo-cp.default.svc.cluster.local "$cp_ip")"
    pod_until "$1" "echo-$1" 60 "echo-cp's Service answers echo-$1" "$(answers "$cp_ip")"
    in_pod "$1" "echo-$1" curl -fsS --max-time 10 "http://$cp_ip:2379/health" >"$TMP/$1-cp.health"
    assert_grep '^OK$' "$TMP/$1-cp.health"
    ip=$(kc get svc "echo-$1" -o jsonpath='{.spec.clusterIP}')
    pod_until cp echo-cp 60 "echo-$1's Service answers echo-cp" "$(answers "$ip")"
    in_pod cp echo-cp curl -fsS --max-time 10 "http://$ip:2379/health" >"$TMP/cp-$1.health"
    assert_grep '^OK$' "$TMP/cp-$1.health"
    kd_in_boot "$1" crictl images -o json | jq -r '.images[].repoTags[]' | sort | comm -23 - "$(vm_refs "$1")" >"$TMP/$1.others"
    assert_empty "$TMP/$1.others" "kd-$1 holds images the bundle does not"
}

# A pod on VM NODE, its program of the node's machine, in a cgroup of the
# kubelet's driver on cgroup v2, reached through its Service from the
# control plane's pod, and reaching the control plane's through CoreDNS;
# no image pulled.
test_runs_a_pod_of_its_machine_reached_through_services() {
    echo_manifest "$1" | kc apply -f -
    vm_pod "$1"
}

# vm_reboot NODE : VM NODE rebooted through its init system.
vm_reboot() {
    # The logs of the boot to come alone: the earlier ones set aside.
    case $(node_init "$1") in
    openrc) kd_in_boot "$1" mv /var/log/rc.log /var/log/rc.log.before-reboot ;;
    runit) kd_in_boot "$1" sh -c 'mv /var/log/kubelet /var/log/kubelet.before-reboot && mkdir /var/log/kubelet' ;;
    esac
    now >"$TMP/$1.rebooted"
    kd_reboot "$1"
}

# vm_back NODE : VM NODE back after vm_reboot, as the case below says.
vm_back() {
    since=$(cat "$TMP/$1.rebooted")
    wait_for 300 "kd-$1 is Ready after its reboot" back_since "$1" "$since"
    wait_for 300 "echo-$1 runs again after kd-$1's reboot" echo_back_since "$1" "$since"
    vm_kernel "$1" >"$TMP/$1.kernel-rebooted"
    cat "$TMP/$1.kernel-rebooted"
    assert_kernel_ready "$TMP/$1.kernel-rebooted"
    assert_boot_imported_nothing "$1" "$TMP/$1.reboot-import"
    # Running is not serving: CoreDNS answers /health once its server has
    # started, slow on a TCG VM beside a busy machine. Asked in its own pod
    # first, the Service's limit is the network's alone.
    pod_until "$1" "echo-$1" 300 "echo-$1 answers in its own pod after kd-$1's reboot" "$(answers 127.0.0.1 5)"
    ip=$(kc get svc "echo-$1" -o jsonpath='{.spec.clusterIP}')
    pod_until cp echo-cp 180 "echo-$1's Service answers cp's pod" "$(answers "$ip" 5)" || {
        # What tells the Service's rules from the route to the pod.
        kc get endpointslices -l "kubernetes.io/service-name=echo-$1" -o wide >&2
        pod_ip=$(kc get pod "echo-$1" -o jsonpath='{.status.podIP}')
        echo "echo-$1's pod $pod_ip, asked directly from cp's pod:" >&2
        in_pod cp echo-cp curl -sS --max-time 5 "http://$pod_ip:2379/health" >&2 || true
        return 1
    }
}

# VM NODE rebooted through its init system: its kernel comes up without
# the modules and settings, the boot applies kubedist's files, and the
# kubelet, the pod and its Service come back, with no image imported again.
# (The node in a container that reboots is the sysext worker: the VMs show
# OpenRC's and runit's boots, and systemd's on a kernel of its own.)
test_comes_back_with_its_kernel_settings_after_a_reboot() {
    vm_reboot "$1"
    vm_back "$1"
}

# VM NODE leaves (its reboot showed the graceful power-off), its logs kept
# first when a case failed, so that the next VM has the machine.
test_leaves_the_cluster() {
    [ "$kd_failed" -eq 0 ] || keep_logs
    vm_leave "$1"
}

# vm_leave NODE : VM NODE's pod and node deleted, the VM stopped, its disk
# and root given back to the machine.
vm_leave() {
    kc delete pod,service "echo-$1" --wait=false
    kd_boot_kill "$1"
    kc delete node "kd-$1"
    rm -rf "$TMP/root-$1" "$KD_WORK/boot.$1.disk"
}

# The Service the upgrade is measured by: every node's echo pod behind it.
ECHO_ALL='apiVersion: v1
kind: Service
metadata: { name: echo-all }
spec:
  selector: { app: echo }
  ports: [{ port: 2379 }]
'

# probe_service IP : from w1's echo pod, asks IP's /health every 200 ms
# until killed; prints "<epoch seconds> ok|fail" per attempt.
probe_service() {
    exec nsenter --net="$(pod_netns w1 echo-w1)" sh -c '
        while :; do
            if curl -fsS --max-time 1 "http://$1:2379/health" 2>/dev/null | grep -qx OK; then
                echo "$(date +%s.%N) ok"
            else
                echo "$(date +%s.%N) fail"
            fi
            sleep 0.2
        done' sh "$1"
}

# longest_gap FILE : the longest time in FILE (probe_service's lines)
# between two answered attempts, in seconds.
longest_gap() {
    awk '$2 == "ok" { if (last != "" && $1 - last > gap) gap = $1 - last; last = $1 }
        END { printf "%.1f\n", gap }' "$1"
}

kubelet_version_is() { [ "$(kc get node "kd-$1" -o jsonpath='{.status.nodeInfo.kubeletVersion}')" = "v$2" ]; }
image_of() { kc -n kube-system get "$1" -o jsonpath='{.spec.template.spec.containers[0].image}'; }

# upgrade_worker NODE : NODE taken to N its way, kubeadm first, as the
# kubeadm docs say: `kubeadm upgrade node`, then the kubelet upgraded and
# restarted by the init system. The tarball's install.sh upgrades both at
# once (and restarts the kubelet, which the upgrade's new configuration
# takes a second restart for); the sysext image of channel N, fetched by
# systemd-sysupdate and merged, brings both too, the running kubelet kept
# until its restart.
upgrade_worker() {
    case $(node_way "$1") in
    tarball) in_node "$1" "$(guide "$1" upgrade-tarball-node "$K8S" "$MINOR")" ;;
    sysext) in_node "$1" "$(guide "$1" upgrade-sysext-node "$K8S" "$MINOR")" ;;
    installer)
        # N's image in the node's containerd; on the control plane the
        # DaemonSet dist ships for it, edited as the guide says to keep it
        # to this node: its init container installs, restarts the kubelet
        # without waiting, and the pod stays.
        tag=${INSTALLER##*/kubedist-installer-}
        tag=${tag%.oci.tar}
        in_node "$1" "$(guide "$1" upgrade-installer-import "$K8S" "$MINOR" 1.37.2-1 "$tag")"
        # --local: the edit asks nothing of the API server, which may be
        # restarting after the control plane's upgrade.
        kc patch --local -f - --type merge -o yaml \
            -p "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"kd-$1\"}}}}}" \
            <"$DAEMONSET" >"$TMP/root-cp/srv/kubedist/v$MINOR/${DAEMONSET##*/}"
        # The upgraded kubelet on kd-cp can restart the control plane's
        # static pods once more, after /readyz said ok (seen: kubectl
        # apply's "failed to download openapi" 20 s later): a kubectl
        # refused meanwhile is run again once the API server is ready, as
        # an operator would.
        tries=1
        until in_node cp "$(guide cp upgrade-installer-daemonset "$K8S" "$MINOR" 1.37.2-1 "$tag")"; do
            [ "$tries" -lt 3 ] || return 1
            tries=$((tries + 1))
            wait_for 120 "kd-cp's API server is ready" kc get --raw /readyz
        done
        kc -n kube-system logs -l app.kubernetes.io/name=kubedist-installer -c install --tail=-1
        in_node "$1" "$(guide "$1" upgrade-installer-node "$K8S" "$MINOR")" ;;
    dnf) in_node "$1" "$(guide "$1" upgrade-dnf-node "$K8S" "$MINOR")" ;;
    esac
    kd_mark "kd-$1 upgraded its way"
}

# N-1 to N as the kubeadm docs say, offline: N's bundle imported on every
# node first; on the control plane the apt source switched to channel N,
# kubeadm unheld, upgraded and held again, `kubeadm upgrade plan` and
# `apply`, then kubelet and kubectl the same way and the kubelet restarted;
# then each worker its way (upgrade_worker). No node is drained: a
# kubelet's restart leaves its pods running, which the Service's gap shows.
test_the_cluster_upgrades_to_the_next_minor_offline_through_the_channels() {
    printf '%s' "$ECHO_ALL" | kd_in_boot cp kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f -
    ip=$(kc get svc echo-all -o jsonpath='{.spec.clusterIP}')
    wait_for 60 "the echo-all Service answers" in_pod w1 echo-w1 curl -fsS --max-time 2 "http://$ip:2379/health"
    probe_service "$ip" >"$TMP/gap.log" &
    probe=$!
    # N's images on every node first: `upgrade apply` rolls kube-proxy and
    # CoreDNS out to the workers at once.
    at_once import_next_bundle $NODES
    kd_mark "N's bundle imported on the containers' nodes"
    for n in $UPGRADING_VMS; do
        behind "$n.import" import_next_bundle "$n"
        behind_ended "$n.import" "kd-$n's import of N's bundle"
    done
    kd_mark "N's bundle imported on every node"
    in_node cp "$(guide cp upgrade-control-plane "$K8S" "$MINOR")"
    wait_for 120 "kd-cp's API server is ready after its upgrade" kc get --raw /readyz
    kd_mark "the control plane upgraded"
    at_once upgrade_worker $WORKERS $UPGRADING_VMS
    kd_mark "the workers upgraded"
    for n in $NODES $UPGRADING_VMS; do
        wait_for 180 "kd-$n's kubelet reports v$K8S" kubelet_version_is "$n" "$K8S"
        wait_for 120 "kd-$n is Ready at v$K8S" kc wait --for=condition=Ready "node/kd-$n" --timeout=5s
    done
    kd_mark "every node Ready at N"
    # N-1's bundle goes, as the guide says (a tarball node's upgrade did it).
    for n in $NODES $UPGRADING_VMS; do
        [ "$(node_way "$n")" = tarball ] ||
            in_node "$n" "$(guide "$n" bundle-prune "$K8S" "$MINOR" 1.36.3 "$OLD_K8S")"
        kd_in_boot "$n" ls /var/lib/kubedist/images >"$TMP/$n.bundles"
        assert_eq "$(printf '%s\n' SHA256SUMS "$(bundle_of "$n" "$K8S")")" "$(cat "$TMP/$n.bundles")" "kd-$n's bundles after the upgrade"
    done
    kill "$probe"
    wait "$probe" || true
    for p in kube-apiserver kube-controller-manager kube-scheduler etcd; do
        wait_for 120 "$p-kd-cp is Running" pod_running "$p-kd-cp"
        image=$(kc -n kube-system get pod "$p-kd-cp" -o jsonpath='{.spec.containers[0].image}')
        assert_grep "^$image\$" "$TMP/bundle.refs"
    done
    assert_eq "$(grep "^$REPO/kube-proxy:" "$TMP/bundle.refs")" "$(image_of daemonset/kube-proxy)" "kube-proxy's image after the upgrade"
    assert_eq "$(grep "^$REPO/coredns:" "$TMP/bundle.refs")" "$(image_of deployment/coredns)" "CoreDNS's image after the upgrade"
    # (Its new pod on a VM under TCG starts slowly.)
    wait_for 300 "kube-proxy runs on every node" kube_proxies_running
    wait_for 120 "CoreDNS is available" kc -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
    for n in $NODES; do
        wait_for 60 "the echo Services answer from kd-$n's pod" echo_reachable "$n"
    done
    kc get nodes -o wide
    gap=$(longest_gap "$TMP/gap.log")
    echo "the echo-all Service during the upgrade: $(grep -c ' ok$' "$TMP/gap.log") answers, $(grep -c ' fail$' "$TMP/gap.log") misses, longest gap ${gap} s" |
        tee "$TMP/gap.summary"
    # Kept pods mean the Service is never down for long: far less than a
    # node's restart (a timing goal belongs in the bench, not here).
    awk -v gap="$gap" 'BEGIN { exit !(gap < 30) }' || {
        echo "assertion failed: the echo-all Service went unanswered for $gap s during the upgrade" >&2
        return 1
    }
}

# vm_upgraded NODE : VM NODE upgraded with the cluster: its kubelet's
# settings of the join kept (kubeadm upgrade node --patches), and its pod
# checked again (vm_pod), now with N's images beside N-1's.
vm_upgraded() {
    : >"$TMP/$1.upgraded"
    kd_in_boot "$1" cat /var/lib/kubelet/config.yaml >"$TMP/$1.kubelet-config-upgraded"
    assert_grep '^failCgroupV1: true$' "$TMP/$1.kubelet-config-upgraded"
    vm_pod "$1"
}

# The arm64 worker (v3), upgraded with the cluster above from N's arm64
# tarball and bundle: its pod, kept through the kubelet's restart, still
# arm64 and cgroup v2, reached through its Service and reaching the control
# plane's through CoreDNS, on its kube-proxy of N; no image pulled. Then it
# leaves, also when a check failed, its logs kept first. (A run with
# KD_UPGRADE_VMS=v3 alone has this case.)
test_the_arm64_worker_was_upgraded_with_the_cluster() {
    rc=0
    # (at_once's subshells keep set -e, which the `||` would turn off.)
    at_once vm_upgraded $UPGRADING_VMS || { rc=1 && keep_logs; }
    for n in $UPGRADING_VMS; do vm_leave "$n" || rc=1; done
    return "$rc"
}

# vm_boot_behind NODE : VM NODE, parked, booted in the background, once
# (behind NODE.boot): the upgrade's end starts it, so that its boot under
# TCG, alone of the VMs, runs beside the containers' cases.
vm_boot_behind() { behind "$1.boot" vm_boot "$1"; }

# vm_joins_upgraded NODE : VM NODE, parked at N since the install case,
# booted (vm_boot_behind) and checked as the VMs at N-1 are before their
# reboot: vm_join, vm_pod.
vm_joins_upgraded() {
    vm_parked "$1"
    vm_boot_behind "$1"
    behind_ended "$1.boot" "kd-$1's boot as a VM"
    vm_join "$1"
    echo_manifest "$1" | kc apply -f -
    vm_pod "$1"
}

# A worker of the release upgraded to, on a kernel of its own: v4, riscv64
# (the architecture only a build from source serves), installed offline
# from N's riscv64 tarball and bundle, joins the upgraded cluster with
# kubeadm's defaults; Ready, its pod's program riscv64, reached through its
# Service and reaching the control plane's through CoreDNS, no image
# pulled. Then it leaves, as the VMs at N-1 did, also when a check failed,
# its logs kept first. (It runs after the containers' cases that follow
# the upgrade, which its boot runs beside: vm_boot_behind.)
test_a_vm_worker_of_the_next_release_joins_the_upgraded_cluster() {
    write_vm_join
    rc=0
    # (at_once's subshells keep set -e, which the `||` would turn off.)
    at_once vm_joins_upgraded $UPGRADED_VMS || { rc=1 && keep_logs; }
    for n in $UPGRADED_VMS; do vm_leave "$n" || rc=1; done
    return "$rc"
}

# A bundle of the release before, given to a tarball worker that runs N:
# refused in one line naming both releases; the node keeps its bundle.
test_a_stray_older_bundle_is_refused_and_the_node_keeps_its_own() {
    kd_in_boot w1 sh -c 'cd /var/lib/kubedist/images && sha256sum ./*' >"$TMP/w1.bundles-before"
    if in_node w1 "/srv/kubedist/v$MINOR/kubedist-$K8S-linux-amd64/install.sh --images /srv/kubedist/v$OLD_MINOR/${OLD_BUNDLE##*/}" \
        >"$TMP/w1.stray" 2>&1; then
        cat "$TMP/w1.stray"
        echo "assertion failed: install.sh took N-1's bundle on kd-w1" >&2
        return 1
    fi
    cat "$TMP/w1.stray"
    assert_grep "holds the images of Kubernetes $OLD_K8S, older than release $K8S-[0-9]* installed here: pass --downgrade" "$TMP/w1.stray"
    kd_in_boot w1 sh -c 'cd /var/lib/kubedist/images && sha256sum ./*' >"$TMP/w1.bundles-after"
    assert_eq "$(cat "$TMP/w1.bundles-before")" "$(cat "$TMP/w1.bundles-after")" "kd-w1's bundles after the refusal"
}

# pkg_versions NODE PACKAGE... : each package's installed version on NODE
# (apt or dnf), one per line.
pkg_versions() {
    n=$1
    shift
    case $(node_way "$n") in
    apt) kd_in_boot "$n" dpkg-query -W -f '${Version}\n' "$@" ;;
    dnf) kd_in_boot "$n" rpm -q --qf '%{VERSION}-%{RELEASE}\n' "$@" ;;
    esac
}

# each_held VERSION : VERSION once for each package of $HELD, a line each.
each_held() { for _ in $HELD; do echo "$1"; done; }

# newer_package NODE : the case below on NODE, a node of the channels.
newer_package() {
    n=$1
    old=$(kubelet_pid "$n")
    old_containerd=$(containerd_pid "$n")
    kd_in_boot "$n" crictl ps -q | sort >"$TMP/$n.containers-before"
    # The channel offers the newer package (its metadata read afresh).
    case $(node_way "$n") in
    apt) in_node "$n" "
        apt-get update -q
        apt-cache madison kubelet | grep ' $K8S-$REV '
        apt-get upgrade -y -q" ;;
    dnf) in_node "$n" "
        dnf makecache -y -q --refresh
        dnf -q --disableplugin=versionlock list --available kubelet | grep ' $K8S-$REV '
        dnf upgrade -y -q" ;;
    esac
    assert_eq "$(each_held "$K8S-$PREV_REV")" "$(pkg_versions "$n" $HELD)" "kd-$n's held packages after a plain upgrade"
    # The runtime is not held: upgraded, and restarted on its new
    # binary, every container kept (their shims outlive containerd).
    assert_eq "$RUNTIME_VERSION-$REV" "$(pkg_versions "$n" kubedist-containerd)" "kd-$n's kubedist-containerd after a plain upgrade"
    wait_for 60 "kd-$n's containerd runs again after its upgrade" containerd_restarted "$n" "$old_containerd"
    kd_in_boot "$n" crictl ps -q | sort >"$TMP/$n.containers-after"
    assert_eq "$(cat "$TMP/$n.containers-before")" "$(cat "$TMP/$n.containers-after")" "kd-$n's container IDs across the runtime's upgrade"
    [ -s "$TMP/$n.containers-before" ] || { echo "assertion failed: kd-$n ran no container; the test proves nothing" >&2; return 1; }
    assert_eq "$old" "$(kubelet_pid "$n")" "kd-$n's kubelet pid after a plain upgrade that upgraded no kubelet"
    case $(node_way "$n") in
    apt) in_node "$n" "
        apt-mark unhold $HELD
        apt-get upgrade -y -q
        apt-mark hold $HELD" ;;
    dnf) in_node "$n" "
        dnf versionlock delete $HELD
        dnf upgrade -y -q
        dnf versionlock add $HELD" ;;
    esac
    assert_eq "$(each_held "$K8S-$REV")" "$(pkg_versions "$n" $HELD)" "kd-$n's packages after the released upgrade"
    wait_for 60 "kd-$n's kubelet is restarted on the new package" kubelet_restarted "$n" "$old"
    since=$(now)
    wait_for 120 "kd-$n is Ready on the new package" back_since "$n" "$since"
}

# A newer package of N published to the channel the nodes already follow:
# a plain `apt-get upgrade` and `dnf upgrade` leave the held kubeadm,
# kubelet and kubectl where they are (apt-mark hold, dnf versionlock);
# released, they are upgraded, the running kubelet restarted once by the
# packages' scripts, and the node is Ready on it. (KD_DIST is the same
# Kubernetes release at the next package revision, which apt and dnf order
# as they order a patch release.)
test_a_newer_package_in_the_channel_upgrades_only_what_is_not_held() {
    (cd "$KD_REPO" && "$XTASK" repo --channels minor --from "$KD_DIST" --out "$TMP/repo" \
        --key "$TMP/repo-key.asc" --base-url file:///srv/kubedist/repo) >"$TMP/repo-next.log" 2>&1 ||
        { cat "$TMP/repo-next.log"; return 1; }
    for n in cp w4; do
        rm -rf "$TMP/root-$n/srv/kubedist/repo"
        cp -al "$TMP/repo" "$TMP/root-$n/srv/kubedist/repo"
    done
    at_once newer_package cp w4
}

# kubelet_pid NODE : the kubelet's pid in NODE, or nothing.
kubelet_pid() { kd_in_boot "$1" pgrep -x kubelet || true; }
kubelet_restarted() { p=$(kubelet_pid "$1"); [ -n "$p" ] && [ "$p" != "$2" ]; }

# (Every node's at once: each init system restarts its own.)
test_a_killed_kubelet_is_brought_back_by_its_init_system() {
    for n in $NODES; do
        kubelet_pid "$n" >"$TMP/$n.killed"
        kd_in_boot "$n" kill -9 "$(cat "$TMP/$n.killed")"
    done
    for n in $NODES; do
        old=$(cat "$TMP/$n.killed")
        # supervise-daemon waits respawn_delay, runsv a second, systemd RestartSec.
        wait_for 60 "kd-$n's init system restarts the kubelet" kubelet_restarted "$n" "$old"
        wait_for 120 "kd-$n is Ready again" kc wait --for=condition=Ready "node/kd-$n" --timeout=5s
        echo "kd-$n: kubelet $old killed, $(kubelet_pid "$n") running"
    done
}

node_label() { kc get node "kd-$1" -o jsonpath="{.metadata.labels.kubedist\.test/zone}"; }
label_is() { [ "$(node_label "$1")" = "$2" ]; }

# The family env file (/etc/default/kubelet on these Debian nodes) of each
# worker set --node-labels before it joined (bring-up). The kubelet applies
# --node-labels when it registers the node; a changed value takes a new
# registration: the Node deleted, the kubelet restarted through the init
# system (docs/lifecycle.md).
test_kubelet_extra_args_label_a_worker_and_a_restart_relabels_it() {
    for n in $WORKERS; do
        assert_eq "a-$n" "$(node_label "$n")" "kd-$n's kubedist.test/zone label from KUBELET_EXTRA_ARGS"
    done
    set_zone w1 b-w1
    kc delete node kd-w1
    kd_in_boot w1 rc-service kubelet restart
    wait_for 120 "kd-w1 is labelled b-w1" label_is w1 b-w1
    wait_for 120 "kd-w1 is Ready again" kc wait --for=condition=Ready node/kd-w1 --timeout=5s
}

# Side by side: N-1's kubelet installed beside N's on kd-w1 with the N-1
# tarball's `install.sh --kubelet-only`; KUBELET_VERSION in the family file
# picks it and the node reports that version. A version that is not
# installed is one line from `rc-service kubelet restart` (the init
# script's check refuses to start it) and no kubelet; without the line, N
# again.
test_kubelet_version_picks_a_kubelet_installed_side_by_side() {
    in_node w1 "
        /srv/kubedist/v$OLD_MINOR/kubedist-$OLD_K8S-linux-amd64/install.sh --kubelet-only
        echo KUBELET_VERSION=v$OLD_K8S >>/etc/default/kubelet
        rc-service kubelet restart"
    wait_for 120 "kd-w1's kubelet reports v$OLD_K8S" kubelet_version_is w1 "$OLD_K8S"
    wait_for 120 "kd-w1 is Ready on v$OLD_K8S" kc wait --for=condition=Ready node/kd-w1 --timeout=5s
    kd_in_boot w1 sh -c 'readlink /proc/$(pgrep -x kubelet)/exe' >"$TMP/w1.side-exe"
    assert_eq "/opt/kubernetes/v$OLD_K8S/bin/kubelet" "$(cat "$TMP/w1.side-exe")" "the kubelet KUBELET_VERSION=v$OLD_K8S runs"
    kd_in_boot w1 sh -c "sed -i 's/^KUBELET_VERSION=.*/KUBELET_VERSION=v1.0.0/' /etc/default/kubelet
        rc-service kubelet restart" >"$TMP/w1.side-out" 2>&1 || true
    cat "$TMP/w1.side-out"
    assert_grep "^kubelet-wrapper: KUBELET_VERSION=v1.0.0 (/etc/default/kubelet:2) is not installed: /opt/kubernetes/v1.0.0/bin/kubelet does not exist; installed under /opt/kubernetes: v$OLD_K8S\$" "$TMP/w1.side-out"
    assert_eq 1 "$(grep -c '^kubelet-wrapper: ' "$TMP/w1.side-out")" "kubelet-wrapper's lines for a KUBELET_VERSION not installed"
    kd_in_boot w1 pgrep -a -x kubelet >"$TMP/w1.side-running" || true
    assert_empty "$TMP/w1.side-running" "a kubelet runs with KUBELET_VERSION=v1.0.0"
    in_node w1 "
        sed -i '/^KUBELET_VERSION=/d' /etc/default/kubelet
        rc-service kubelet restart"
    wait_for 120 "kd-w1's kubelet reports v$K8S again" kubelet_version_is w1 "$K8S"
    wait_for 120 "kd-w1 is Ready on v$K8S again" kc wait --for=condition=Ready node/kd-w1 --timeout=5s
}

# boot_logs NODE : the logs a worker's boot-time image import writes to:
# OpenRC's rc.log (the kubedist-images service), svlogd's logs of the
# kubelet service on runit (its run script imports before each start),
# under systemd the journal of the boot.
boot_logs() { case $(node_init "$1") in openrc) echo /var/log/rc.log ;; runit) echo /var/log/kubelet ;; esac; }

# boot_import NODE : what the boot-time image import said on NODE's boot.
boot_import() {
    case $(node_init "$1") in
    systemd) kd_in_boot "$1" journalctl -b --no-pager -o cat -u kubedist-images.service ;;
    *) kd_in_boot "$1" grep -rh 'kubedist-images:' "$(boot_logs "$1")" ;;
    esac
}

# now : the time, as the API server writes it (UTC, RFC 3339).
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
# later TIME SINCE : TIME (RFC 3339, UTC) is after SINCE.
later() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort | tail -n 1)" = "$1" ]; }

# back_since NODE TIME : NODE's kubelet has renewed its lease since TIME
# and NODE is Ready: a Ready condition alone may be the one from before
# (the node controller waits 40 s before it marks a silent node).
back_since() {
    later "$(kc -n kube-node-lease get lease "kd-$1" -o jsonpath='{.spec.renewTime}')" "$2" &&
        kc wait --for=condition=Ready "node/kd-$1" --timeout=5s
}

# echo_back_since NODE TIME : NODE's echo pod is Ready, its container one
# started since TIME.
echo_back_since() {
    later "$(kc get pod "echo-$1" -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" "$2" &&
        kc wait --for=condition=Ready "pod/echo-$1" --timeout=5s
}

# The sysext worker powered off through systemd and booted again: the
# kubelet starts once systemd-sysext.service has merged the image at boot,
# the node and its pod are Ready again, and the boot-time import finds
# every bundled image present and imports none. (OpenRC's and runit's
# boots are the VMs', on a kernel of their own.)
# (kd_reboot's helpers use $n: the worker is $w here.)
test_a_rebooted_worker_is_ready_again_with_nothing_imported_again() {
    w=w3
    now >"$TMP/$w.rebooted"
    kd_reboot "$w"
    since=$(cat "$TMP/$w.rebooted")
    wait_for 180 "kd-$w is Ready after its reboot" back_since "$w" "$since"
    wait_for 180 "echo-$w runs again after kd-$w's reboot" echo_back_since "$w" "$since"
    boot_import "$w" >"$TMP/$w.reboot-import" || true
    cat "$TMP/$w.reboot-import"
    while read -r ref; do
        assert_grep "$ref: present " "$TMP/$w.reboot-import"
    done <"$TMP/bundle.refs"
    assert_no_grep ': imported ' "$TMP/$w.reboot-import"
    # Nothing of N-1's bundle, and no note: the runtime is set up as the
    # guide says.
    assert_no_grep 'note:' "$TMP/$w.reboot-import"
    comm -23 "$TMP/old.refs" "$TMP/bundle.refs" >"$TMP/old-only.refs"
    while read -r ref; do
        assert_no_grep "$ref" "$TMP/$w.reboot-import"
    done <"$TMP/old-only.refs"
    kd_in_boot "$w" crictl images -o json | jq -r '.images[].repoTags[]' | sort >"$TMP/$w.after-reboot"
    # N's images and N-1's, which the upgrade left in the runtime.
    assert_eq "$(cat "$TMP/all.refs")" "$(cat "$TMP/$w.after-reboot")" "the images on kd-$w after its reboot"
    for n in $NODES; do
        wait_for 60 "the echo Services answer from kd-$n's pod" echo_reachable "$n"
    done
}

# echo_reachable NODE : the echo Services of the other nodes answer from
# NODE's pod.
echo_reachable() {
    for m in $NODES; do
        [ "$m" != "$1" ] || continue
        ip=$(kc get svc "echo-$m" -o jsonpath='{.spec.clusterIP}')
        in_pod "$1" "echo-$1" curl -fsS --max-time 10 "http://$ip:2379/health" | grep -qx OK || return 1
    done
}

containerd_pid() { kd_in_boot "$1" pgrep -x containerd || true; }
containerd_restarted() { p=$(containerd_pid "$1"); [ -n "$p" ] && [ "$p" != "$2" ]; }

# echo_container NODE : the id of the container of NODE's echo pod.
echo_container() { kc get pod "echo-$1" -o jsonpath='{.status.containerStatuses[0].containerID}'; }

# containerd restarted through each node's init system: the pods' containers
# outlive it (their shims are not its children), and the kubelet and the
# Services find them again.
test_a_restarted_containerd_brings_the_pods_back() {
    # (Every node's at once.)
    for n in $NODES; do
        echo_container "$n" >"$TMP/$n.container"
        containerd_pid "$n" >"$TMP/$n.containerd"
        case $(node_init "$n") in
        systemd) kd_in_boot "$n" systemctl restart containerd ;;
        openrc) kd_in_boot "$n" rc-service containerd restart ;;
        runit) kd_in_boot "$n" sv restart containerd ;;
        esac
    done
    for n in $NODES; do
        old=$(cat "$TMP/$n.containerd")
        wait_for 60 "containerd runs again on kd-$n" containerd_restarted "$n" "$old"
    done
    since=$(now)
    for n in $NODES; do
        old=$(cat "$TMP/$n.containerd")
        wait_for 120 "kd-$n is Ready after containerd's restart" back_since "$n" "$since"
        wait_for 120 "echo-$n is Ready after containerd's restart" kc wait --for=condition=Ready "pod/echo-$n" --timeout=5s
        echo "kd-$n: containerd $old restarted as $(containerd_pid "$n")"
        assert_eq "$(cat "$TMP/$n.container")" "$(echo_container "$n")" "echo-$n's container after containerd's restart on kd-$n (the same one)"
    done
    for n in $NODES; do
        wait_for 60 "the echo Services answer from kd-$n's pod" echo_reachable "$n"
    done
}

# The paths of a node, without those of the kernel, the runtime's state and
# logs, the package managers' databases and their daily backups (Debian's
# dpkg-db-backup.timer writes /var/backups at midnight, whenever a run
# crosses it) and OpenRC's cache: compared before the install and after the
# teardown. Paths only: the node's own files change while it runs.
listing() {
    kd_in_boot "$1" sh -c "$(kd_function kd_listing)
kd_listing / /var/tmp /var/log /var/cache /var/backups /var/lib/apt /var/lib/dpkg /var/lib/rpm \
    /var/lib/dnf /var/lib/containerd /var/lib/systemd /usr/lib/rc/cache /root /srv | cut -f1"
}

# not_kubedists NODE : the paths, as patterns, that may be new on NODE after
# its teardown, none of them kubedist's: what kubeadm reset says it leaves
# (CNI state and configuration, /etc/kubernetes) and the backups kubeadm
# upgrade made in /etc/kubernetes/tmp (etcd's data, the static pods'
# manifests, the kubelet's configuration), which reset leaves too; the emptied etcd
# directory, the hostPath directories the kubelet creates for the static
# pods and kube-proxy, its volume plugin directory; the directories
# containerd makes at its first start (its opt plugin's, the CNI
# configuration's, where the conflist reset leaves is); and the admin's own
# files: the bundle copied into /var/lib/kubedist/images and
# /etc/kubedist/images.conf, the edited family
# env file (kept by install.sh, saved as .rpmsave by rpm, never touched on
# a sysext host), the repository's key and snippet, and on the sysext host the
# transfer file, the key, the extension directories and the enabled
# systemd-sysext.service.
not_kubedists() {
    # (containerd makes /opt/containerd, its opt plugin's, and the CNI
    # configuration's /etc/cni/net.d at its first start.)
    printf '%s\n' '^/opt/containerd(/.*)?$' '^/etc/cni(/net\.d)?$'
    printf '%s\n' '^/etc/cni/net\.d/10-kubedist\.conflist$' '^/etc/kubernetes(/pki|/tmp(/.*)?)?$' '^/var/lib/etcd$' \
        '^/var/lib/cni(/.*)?$' '^/etc/ssl(/certs)?$' '^/usr/lib/modules$' \
        '^/usr/libexec/kubernetes(/kubelet-plugins(/volume(/exec)?)?)?$'
    # (The bundle and kubedist-images' settings: install.sh --images keeps
    # no copy of its own, and removes the settings it wrote.)
    [ "$(node_way "$1")" = tarball ] || printf '%s\n' '^/var/lib/kubedist(/images(/.*)?)?$' '^/etc/kubedist(/images\.conf)?$'
    case $(node_way "$1") in
    apt) printf '%s\n' '^/etc/apt/keyrings(/kubedist\.gpg)?$' '^/etc/apt/sources\.list\.d/kubedist\.list$' ;;
    tarball | installer) echo '^/etc/default/kubelet$' ;;
    # (rpm keeps the .rpmnew an upgrade wrote beside the edited file as it
    # keeps the .rpmsave; /usr/share/licenses is the filesystem package's
    # on an rpm host, and rpm made it on this Debian root.)
    dnf) printf '%s\n' '^/etc/sysconfig(/kubelet\.rpm(save|new))?$' '^/etc/yum\.repos\.d/kubedist\.repo$' \
        '^/usr/share/licenses$' ;;
    sysext) printf '%s\n' '^/etc/sysconfig(/kubelet)?$' \
        '^/etc/sysupdate\.kubernetes\.d(/kubernetes\.conf)?$' '^/etc/systemd/import-pubring\.gpg$' \
        '^/etc/sysupdate\.kubedist-containerd\.d(/kubedist-containerd\.conf)?$' \
        '^/(etc|opt)/extensions$' '^/etc/systemd/system/[a-z.-]+\.wants/systemd-sysext\.service$' ;;
    esac
}

# kubeadm_reset NODE : kubeadm's state taken off NODE.
kubeadm_reset() { in_node "$1" 'kubeadm reset -f'; }

# uninstall NODE : kubedist's software taken off NODE its way: the
# packages purged or erased, the tarball's files uninstalled, the sysext
# image unmerged and removed with the CNI plugins it copied (docs/air-gapped.md).
uninstall() {
    case $(node_way "$1") in
    apt) in_node "$1" 'apt-get purge -y -q --allow-change-held-packages kubeadm kubelet kubectl kubernetes-cni cri-tools kubedist-containerd' ;;
    tarball) in_node "$1" "/srv/kubedist/v$MINOR/kubedist-$K8S-linux-amd64/install.sh uninstall" ;;
    dnf) in_node "$1" '
        dnf versionlock delete '"$HELD"'
        dnf remove -y -q kubeadm kubelet kubectl kubernetes-cni cri-tools kubedist-containerd
        rpm -e kubedist-test-provides' ;;
    installer) kd_installer_run "$1" "$INSTALLER" uninstall ;;
    sysext) in_node "$1" '
        systemctl mask --runtime --now kubelet kubedist-cni-plugins containerd
        /usr/lib/kubedist/cni-plugins remove
        rm -r /etc/extensions/kubernetes.raw /opt/extensions/kubernetes
        rm -r /etc/extensions/kubedist-containerd.raw /opt/extensions/kubedist-containerd
        # What the image'"'"'s tmpfiles.d made at boot, where empty.
        rmdir --ignore-fail-on-non-empty /opt/cni/bin /opt/cni /var/lib/kubelet /etc/kubernetes/manifests
        systemd-sysext refresh
        systemctl daemon-reload
        systemctl unmask --runtime kubelet kubedist-cni-plugins containerd
        [ ! -e /usr/bin/kubelet ] && [ ! -e /usr/bin/containerd ]' ;;
    esac
}

# kubeadm reset on every node (on runit after `sv stop kubelet`, which
# kubeadm cannot do there, see docs/lifecycle.md), then kubedist's software
# taken off each its way: nothing of kubedist's runs, and the only paths
# new since the install, owned by the installers or not, are what kubeadm,
# the kubelet and the admin made; the admin's edited env file is kept as it
# was (as .rpmsave by rpm).
test_kubeadm_reset_and_the_uninstalls_leave_nothing_of_kubedist() {
    for n in $WORKERS; do kd_in_boot "$n" cat "$(env_file "$n")" >"$TMP/$n.admin-env"; done
    # The installer's DaemonSet first, while the cluster is there (the
    # upgrade made it: a failed upgrade is its own test's failure).
    kc -n kube-system delete ds kubedist-installer --wait=true --ignore-not-found
    in_node w2 'sv stop kubelet'
    at_once kubeadm_reset $WORKERS
    kubeadm_reset cp
    at_once uninstall $NODES
    for n in $WORKERS; do
        # Nothing of kubedist's runs: no kubelet, wrapper or their supervisor.
        kd_in_boot "$n" pgrep -a -f 'kubelet|supervise-daemon kubelet|runsv kubelet' >"$TMP/$n.running" || true
        assert_empty "$TMP/$n.running" "kd-$n still runs the above"
        kept=$(env_file "$n")
        [ "$(node_way "$n")" != dnf ] || kept=$kept.rpmsave
        assert_eq "$(cat "$TMP/$n.admin-env")" "$(kd_in_boot "$n" cat "$kept")" "kd-$n's edited $kept after the uninstall"
    done
    for n in $NODES; do
        listing "$n" >"$TMP/$n.after"
        comm -13 "$TMP/$n.before" "$TMP/$n.after" >"$TMP/$n.new"
        echo "kd-$n: new since the install:"
        sed 's/^/  /' "$TMP/$n.new"
        # (Every path the installers owned and left is new here too; an
        # installed directory kubeadm's files keep, /etc/kubernetes, is
        # kubeadm's now.)
        not_kubedists "$n" >"$TMP/$n.allowed"
        grep -Ev -f "$TMP/$n.allowed" "$TMP/$n.new" >"$TMP/$n.left" || true
    done
    # Every node's leftovers, not only the first node's.
    for n in $NODES; do
        ( assert_empty "$TMP/$n.left" "kd-$n keeps the new paths above" ) || leftovers=1
    done
    [ -z "${leftovers:-}" ]
}

kd_test test_every_node_installs_offline_its_own_way
kd_test test_kubeadm_init_completes_offline_and_every_node_is_ready
kd_test test_every_kubelet_is_its_init_systems_child_with_the_drop_in_chain
kd_test test_every_runtime_is_kubedist_containerd_with_the_kubelets_cgroup_driver
kd_test test_the_control_plane_kube_proxy_and_coredns_run
kd_test test_pods_on_every_node_reach_each_other_through_services_and_coredns
kd_test test_nothing_was_pulled_and_the_bundles_images_are_pinned
for vm in $OLDER_VMS; do
    kd_test test_joins_on_cgroup_v2_with_kubeadms_defaults "$vm"
    kd_test test_runs_a_pod_of_its_machine_reached_through_services "$vm"
    kd_test test_comes_back_with_its_kernel_settings_after_a_reboot "$vm"
    # The one upgraded with the cluster stays, and imports N's bundle
    # behind the cases until the upgrade's (under TCG that takes minutes).
    if upgrades_with_cluster "$vm"; then
        behind "$vm.import" import_next_bundle "$vm"
    else
        kd_test test_leaves_the_cluster "$vm"
    fi
done
kd_test test_the_cluster_upgrades_to_the_next_minor_offline_through_the_channels
[ -z "$UPGRADING_VMS" ] || kd_test test_the_arm64_worker_was_upgraded_with_the_cluster
# The VM that joins the upgraded cluster boots behind the cases on the
# containers' nodes that follow (its own comes after them).
for vm in $UPGRADED_VMS; do vm_boot_behind "$vm"; done
kd_test test_a_stray_older_bundle_is_refused_and_the_node_keeps_its_own
kd_test test_a_newer_package_in_the_channel_upgrades_only_what_is_not_held
kd_test test_a_killed_kubelet_is_brought_back_by_its_init_system
kd_test test_kubelet_extra_args_label_a_worker_and_a_restart_relabels_it
kd_test test_kubelet_version_picks_a_kubelet_installed_side_by_side
kd_test test_a_rebooted_worker_is_ready_again_with_nothing_imported_again
kd_test test_a_restarted_containerd_brings_the_pods_back
# (Registered only with a VM to check, as v3's upgrade case above: a run
# whose KD_VMS leaves v4 out has no case that checks nothing.)
[ -z "$UPGRADED_VMS" ] || kd_test test_a_vm_worker_of_the_next_release_joins_the_upgraded_cluster
# The cluster's logs as a failure left them, before the teardown.
[ "$kd_failed" -eq 0 ] || keep_logs
kd_test test_kubeadm_reset_and_the_uninstalls_leave_nothing_of_kubedist
[ "$kd_failed" -eq 0 ] || [ -d "$LOGS" ] || keep_logs
# The upgrade's Service gap, in the suite's own output.
[ ! -f "$TMP/gap.summary" ] || kd_log "$(cat "$TMP/gap.summary")"
# Each node's peak memory, from its memory cgroup.
for n in $NODES; do
    f=/sys/fs/cgroup/memory/kdc-$n.$$/memory.max_usage_in_bytes
    [ ! -f "$f" ] || kd_log "peak memory of kd-$n: $(($(cat "$f") / 1048576)) MiB"
done
kd_summary
