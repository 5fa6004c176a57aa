# shellcheck shell=sh
# Shared helpers for the install suites in ci/t-*.sh (sourced, POSIX sh).
#
# Each suite builds clean Debian roots from a cached mmdebstrap tarball,
# runs the real tools inside them in throwaway namespaces (nothing leaks:
# mounts, processes and, with kd_run_offline, the network stay inside), and
# reports one line per test plus a closing "N passed, N failed" line.
#
# Environment:
#   KD_DIST_PREV, KD_DIST   dist output dirs of release N-1 and N (set by
#                           `cargo xtask test`; suites that need them fail
#                           without them)
#   CI=true                 a missing tool fails the suite instead of skipping it
#   KD_ONLY                 words: run only the tests whose name contains
#                           one of them (`cargo xtask test deb:upgrade`)
#   KD_VMS                  the cluster suite's VM workers (unset: all four,
#                           v1 v2 v3 v4)
#   KD_XTASK                the xtask binary `cargo xtask test` runs, for a
#                           step a suite kills (a kill of cargo would not
#                           reach it)

set -eu

KD_REPO=$(cd "$(dirname "$0")/.." && pwd)
# The base roots and test packages the suites build once, in the home
# directory, where a fresh clone finds them again (keyed by what they hold).
KD_CACHE=${KD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubedist/ci}
KD_SUITE=$(basename "$0" .sh)
# Each suite's work apart from the others' (`cargo xtask test` runs suites
# at once): its roots, logs and booted nodes' state, named by node.
KD_WORK=${KD_WORK:-$KD_REPO/target/ci-work/${KD_SUITE#t-}}
# The tools ci/install-deps takes from PyPI (SBOM checkers, Go).
PATH=$PATH:$KD_REPO/target/ci-tools/sbom/bin
KD_SUITE_CODENAME=bookworm
KD_MIRROR=${KD_MIRROR:-http://deb.debian.org/debian}
kd_passed=0
kd_failed=0
kd_failures=

mkdir -p "$KD_CACHE" "$KD_WORK"

kd_log() { printf '%s: %s\n' "$KD_SUITE" "$*" >&2; }

# kd_require TOOL... : every tool must be on PATH. Under CI=true a missing
# tool fails the suite; elsewhere the suite is skipped, loudly.
kd_require() {
    missing=
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
    done
    [ -z "$missing" ] && return 0
    if [ "${CI:-}" = true ]; then
        echo "$KD_SUITE: FAIL: required tools missing:$missing" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "$KD_SUITE: SKIPPED: tools missing:$missing (ci/install-deps installs them)" >&2
    exit 0
}

# kd_require_dist : the artifacts of releases N-1 and N must exist.
kd_require_dist() {
    for d in "${KD_DIST_PREV:-}" "${KD_DIST:-}"; do
        if [ -z "$d" ] || [ ! -f "$d/SHA256SUMS" ]; then
            echo "$KD_SUITE: FAIL: KD_DIST_PREV and KD_DIST must name dist outputs (run through 'cargo xtask test')" >&2
            echo "0 passed, 1 failed"
            exit 1
        fi
    done
}

# kd_cached PATH : whether PATH, an entry of the cache, is there; its mtime
# marks its use (ci/prune-caches removes what no run used for two weeks).
kd_cached() { touch -c "$1" 2>/dev/null && [ -f "$1" ]; }

# kd_base_tarball NAME [PACKAGE...] [--OPTION...] : prints the path of a
# cached bookworm root tarball with PACKAGEs installed, building it once
# (mmdebstrap, ~15-30 s, with its OPTIONs: another --arch runs the root's
# maintainer scripts through qemu-user, which ci/install-deps registers with
# the kernel's binfmt_misc, in minutes). The cache key includes the package
# list and the options, so changing them rebuilds. Compressed with zstd
# (`tar -xf` reads it as it is): the suites' roots took 5.9 GB of the home
# directory as plain tar, about 1.9 so; a plain one cached before is
# compressed rather than built again.
kd_base_tarball() {
    name=$1
    shift
    include=
    while [ $# -gt 0 ]; do
        case $1 in --*) break ;; esac
        include="$include$1,"
        shift
    done
    key=$({
        printf '%s\n' "$KD_SUITE_CODENAME"
        printf '%s' "$include" | tr , '\n'
        [ $# -eq 0 ] || printf '%s\n' "$@"
    } | sha256sum | cut -c1-12)
    tarball=$KD_CACHE/$KD_SUITE_CODENAME-$name-$key.tar.zst
    if ! kd_cached "$tarball"; then
        # Built in a directory of its own and renamed into place: suites
        # running at once may build the same root.
        _kd_build=$(mktemp -d "$KD_CACHE/.build.XXXXXX")
        if [ -f "${tarball%.zst}" ]; then
            zstd -q -T0 "${tarball%.zst}" -o "$_kd_build/root.tar.zst"
        else
            kd_log "building base root '$name' (${include%,}) with mmdebstrap"
            # Package lists are kept so apt-get in the root can resolve real
            # dependencies from the archive without an update of its own.
            mmdebstrap --quiet --variant=apt --skip=cleanup/apt/lists "$@" \
                ${include:+--include="${include%,}"} \
                "$KD_SUITE_CODENAME" "$_kd_build/root.tar.zst" "$KD_MIRROR" >&2
        fi
        mv "$_kd_build/root.tar.zst" "$tarball"
        rm -f "${tarball%.zst}"
        rmdir "$_kd_build"
    fi
    printf '%s\n' "$tarball"
}

# kd_fixtures : the fixtures directory `dist --fixtures` reads for the
# pinned release; `cargo xtask test` writes it for every architecture
# before the suites, so none rewrites it while another reads it.
kd_fixtures() {
    printf '%s/target/fixtures/%s\n' "$KD_REPO" \
        "$(sed -n 's/^kubernetes = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml")"
}

# kd_new_root TARBALL : unpacks a fresh root and prints its path. Roots live
# under target/ci-work/SUITE/ and are removed when the suite exits. They are listed
# in a file, not a variable: `ROOT=$(kd_new_root ...)` runs in a subshell,
# whose variables the exit trap would never see.
kd_roots_file=$KD_WORK/roots.$$
# (The roots of the test running now: kd_test, kd_test_roots_done.)
kd_test_roots_file=$KD_WORK/test-roots.$$
kd_new_root() {
    root=$(mktemp -d "$KD_WORK/root.XXXXXX")
    kd_remove_on_exit "$root"
    # Made by a test: gone when it passes (kd_test), not at the suite's end.
    [ -z "${kd_test_roots:-}" ] || printf '%s\n' "$root" >>"$kd_test_roots"
    tar -xf "$1" -C "$root" --numeric-owner
    # A copy of the host's resolver, so apt inside can reach the archive.
    cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    printf '%s\n' "$root"
}

# kd_distribution_deb NAME PROGRAM OUT : writes OUT, a deb of a
# distribution's package NAME (version 1.6.20~ds1-1, as Debian 12's
# containerd) owning PROGRAM, a stub: what a host whose containerd or runc
# came from dpkg has.
kd_distribution_deb() {
    _kd_d=$(mktemp -d)
    mkdir -p "$_kd_d/DEBIAN" "$_kd_d$(dirname "$2")"
    chmod 0755 "$_kd_d" "$_kd_d/DEBIAN"
    printf 'Package: %s\nVersion: 1.6.20~ds1-1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: a distribution'"'"'s %s\n' \
        "$1" "$1" >"$_kd_d/DEBIAN/control"
    printf '#!/bin/sh\n' >"$_kd_d$2"
    chmod 0755 "$_kd_d$2"
    dpkg-deb -b "$_kd_d" "$3" >/dev/null
    rm -rf "$_kd_d"
}

# kd_one PATH... : prints PATH when exactly one path is given and it exists
# (what a glob of dist's output gives); otherwise the suite fails at once.
kd_one() {
    if [ $# -ne 1 ] || [ ! -e "$1" ]; then
        echo "$KD_SUITE: FAIL: expected exactly one file, found: $*" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
    printf '%s\n' "$1"
}

# kd_own_mount_namespace "$0" "$@" : runs the suite again in a mount
# namespace of its own, so that whatever it mounts vanishes with it.
kd_own_mount_namespace() {
    if [ "${KD_OWN_MOUNT_NS:-}" != "$KD_SUITE" ]; then
        KD_OWN_MOUNT_NS=$KD_SUITE
        export KD_OWN_MOUNT_NS
        exec unshare --mount --propagation private -- sh "$@"
    fi
}

# kd_guide_block GUIDE NAME [SHOWN USED]... : the shell block that the line
# `<!-- run by SUITE: NAME -->` marks in GUIDE (a path from the repository's
# top), without its fences: a suite runs the commands the guide shows, from
# the guide itself, so the two cannot drift apart. Each SHOWN, a value the
# guide gives as its example (a release, a key's path), is replaced by the
# suite's USED, as text, pair after pair. A marker that is missing, or not
# followed by a sh block, fails loudly.
kd_guide_block() {
    _kd_block=$(awk -v name="$2" '
        state == 0 && $0 ~ "^<!-- run by [^:]*: " name " -->$" { state = 1; next }
        state == 1 { if ($0 == "```sh") { state = 2; next } exit }
        state == 2 && $0 == "```" { state = 3; exit }
        state == 2 { print }
        END { exit state == 3 ? 0 : 1 }' "$KD_REPO/$1") || {
        echo "kd_guide_block: $1 marks no sh block $2" >&2
        return 1
    }
    shift 2
    while [ "$#" -ge 2 ]; do
        _kd_block=$(printf '%s\n' "$_kd_block" | awk -v from="$1" -v to="$2" '{
            out = ""
            while ((i = index($0, from)) > 0) { out = out substr($0, 1, i - 1) to; $0 = substr($0, i + length(from)) }
            print out $0
        }')
        shift 2
    done
    printf '%s\n' "$_kd_block"
}

# kd_provides_rpm : prints the path of the test-only package that provides
# the distribution packages our rpms require (ci/fixtures/), built once per
# version of its spec into the cache.
kd_provides_rpm() {
    spec=$KD_REPO/ci/fixtures/kubedist-test-provides.spec
    out=$KD_CACHE/kubedist-test-provides-$(sha256sum "$spec" | cut -c1-12).noarch.rpm
    if ! kd_cached "$out"; then
        mkdir -p "$KD_CACHE"
        top=$(mktemp -d "$KD_WORK/rpmbuild.XXXXXX")
        SOURCE_DATE_EPOCH=1700000000 rpmbuild -bb --quiet \
            --define "_topdir $top" --define "_rpmdir $top/out" \
            --define 'use_source_date_epoch_as_buildtime 1' \
            --define '_buildhost kubedist.invalid' "$spec" >&2
        # Copied into the cache's file system, then renamed into place.
        _kd_tmp=$(mktemp "$out.XXXXXX")
        mv "$top"/out/noarch/kubedist-test-provides-*.noarch.rpm "$_kd_tmp"
        mv "$_kd_tmp" "$out"
        rm -rf "$top"
    fi
    printf '%s\n' "$out"
}

# kd_suite_dir : prints the suite's own work directory, made afresh and
# removed when the suite exits.
kd_suite_dir() {
    rm -rf "${KD_WORK:?}/tmp"
    mkdir -p "$KD_WORK/tmp"
    kd_remove_on_exit "$KD_WORK/tmp"
    printf '%s\n' "$KD_WORK/tmp"
}

# kd_remove_on_exit PATH : PATH is removed when the suite exits.
kd_remove_on_exit() {
    printf '%s\n' "$1" >>"$kd_roots_file"
}

# kd_scratch_dir NAME : prints $KD_WORK/NAME, made afresh: a suite's
# scratch, removed when the suite exits with every test passed, kept after
# a failure with what the failing test left there (suites running later
# need the disk: one such directory held 2.8 GB).
kd_passed_removes_file=$KD_WORK/passed-removes.$$
kd_scratch_dir() {
    rm -rf "${KD_WORK:?}/$1"
    mkdir -p "$KD_WORK/$1"
    printf '%s\n' "$KD_WORK/$1" >>"$kd_passed_removes_file"
    printf '%s\n' "$KD_WORK/$1"
}

# kd_checkout_copy DIR : a copy of this checkout in DIR (its tracked and
# untracked files and .git, the same commit), removed when the suite exits,
# with its own target/ seeded with this checkout's compiled crates so that
# cargo does not spend minutes on the registry crates again. tar keeps the
# mtimes, and cargo names workspace crates by their path inside the
# workspace, so the seeded fingerprints would call the copy's xtask up to
# date and run this checkout's program (whose root is this checkout):
# touching the copy's sources makes cargo compile the xtask from the copy.
kd_checkout_copy() {
    mkdir -p "$1"
    kd_remove_on_exit "$1"
    (cd "$KD_REPO" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 tar -cf - --) | tar -xf - -C "$1"
    cp -a "$KD_REPO/.git" "$1/.git"
    mkdir -p "$1/target/debug"
    # The registry crates' outputs are hard links (a copy took 1.5 GB of
    # the disk the suites beside it need): the copy compiles none of them
    # again. The workspace's own, which it compiles from its own sources,
    # are left out, so that no write goes through a link into this
    # checkout's target/.
    cp -al "$KD_REPO/target/debug/deps" "$1/target/debug/"
    cp -a "$KD_REPO/target/debug/build" "$KD_REPO/target/debug/.fingerprint" "$1/target/debug/"
    for crate in $(cd "$KD_REPO" && cargo metadata --no-deps --format-version 1 |
        jq -r '.packages[].targets[].name | gsub("-"; "_")'); do
        rm -f "$1/target/debug/deps/$crate-"* "$1/target/debug/deps/lib$crate-"*
    done
    find "$1/xtask" -type f -exec touch {} +
}

kd_cleanup() {
    kd_boot_cleanup
    # A passing suite's scratch goes with its roots; a failing one's stays.
    if [ -f "$kd_passed_removes_file" ]; then
        [ "$kd_failed" -ne 0 ] || cat "$kd_passed_removes_file" >>"$kd_roots_file"
        rm -f "$kd_passed_removes_file"
    fi
    [ -f "$kd_roots_file" ] || return 0
    while IFS= read -r r; do
        rm -rf "$r"
    done <"$kd_roots_file"
    rm -f "$kd_roots_file"
}
trap kd_cleanup EXIT

# Booted init systems. kd_boot boots a root with systemd-nspawn, its own
# init as PID 1 (systemd, sysvinit + OpenRC, runit), in the background; a
# suite reuses it across tests by NAME, because each test runs in a subshell
# and a boot's state is kept in files: $KD_WORK/boot.NAME.{process,init,kind,
# console}. What the container mounts stays in its own mount namespace; it
# shares the host's network (apt in it needs none: the base roots hold the
# dependencies). Containers still running when the suite exits are killed.
# With --vm=... the root boots instead as a virtual machine with its own
# kernel (kd_vm_start below); the same helpers reach it.
kd_boots_file=$KD_WORK/boots.$$

# kd_boot NAME ROOT KIND [NSPAWN-OPTION...] : boots ROOT, unless NAME is
# already up (options without spaces: kd_reboot reuses them). KIND: systemd (nspawn --boot), openrc (/sbin/init of
# sysvinit-core) or runit (runit-init). Waits up to 90 s (a VM: 300 s) until
# the init system has finished starting up, else prints the console log and
# fails. `kd_boot NAME ROOT KIND --vm=NETNS,IP` boots a VM (kd_vm_start),
# once more if its QEMU died before its guest answered.
kd_boot() {
    name=$1 root=$2 kind=$3
    shift 3
    if kd_booted "$name"; then return 0; fi
    state=$KD_WORK/boot.$name
    # (The boot before's console kept: its shutdown is in it.)
    [ ! -s "$state.console" ] || mv "$state.console" "$state.console.before"
    : >"$state.console"
    printf '%s\n' "$kind" >"$state.kind"
    printf '%s\n' "$root" >"$state.root"
    printf '%s\n' "$*" >"$state.options"
    printf '%s\n' "${KD_BOOT_CGROUPS:-}" >"$state.cgroups"
    rm -f "$state.vm"
    case ${1:-} in
    --vm=*)
        kd_vm_start "$name" "$root" "${1#--vm=}"
        _kd_boot_wait "$name" 300 && return
        # QEMU itself can die: qemu-system-x86_64 7.2 (Debian 12) segfaulted
        # once here under TCG, 2.7 s into a guest's kernel on a loaded
        # machine. Or stop: once a guest's kernel (Debian's, which a test
        # never changes) wrote nothing more from 3.3 s into its start, at
        # "Loading compiled-in X.509 certificates", for the 300 s, on a
        # reboot whose first boot had started. Either is the emulator's,
        # not the node's, if the kernel never ran its init: such a VM boots
        # once more, the failed boot's console (with its CPUs' and tasks'
        # stacks, if it hung) and QEMU's log kept. A boot that reached its
        # init and did not finish is the node's: it fails.
        process=$(cat "$state.process")
        if _kd_vm_died "$name"; then
            status=0
            wait "$process" || status=$?
            what="the QEMU of $name ended (status $status) before its guest answered"
        elif ! grep -q 'Run /init as init process' "$state.console"; then
            _kd_vm_dump_tasks "$name"
            kill -KILL "$process" 2>/dev/null || true
            { wait "$process"; } 2>/dev/null || true
            _kd_vm_ssh_close "$name"
            what="the kernel of $name stopped before it ran its init"
        else
            return 1
        fi
        for f in console qemu; do cp "$state.$f" "$state.$f.failed"; done
        kd_log "$what; booting it once more (its console: $state.console.failed)"
        kd_vm_start "$name" "$root" "${1#--vm=}"
        _kd_boot_wait "$name" 300
        return
        ;;
    esac
    case $kind in
    systemd) set -- --boot "$@" ;;
    openrc) set -- "$@" /sbin/init ;;
    # runit's stage 1 runs the rcS scripts with PID 1's standard input, a
    # pty here, where the kernel's console is /dev/console: udev's script
    # (in a VM worker's root) takes that for an interactive shell and
    # sleeps 60 s, unless the runlevels say a boot runs it.
    runit) set -- "$@" --setenv=RUNLEVEL=S --setenv=PREVLEVEL=N /sbin/init ;;
    *) echo "kd_boot: unknown init kind '$kind'" >&2; return 1 ;;
    esac
    # The machine name keeps nspawn's per-container paths apart; the loop
    # devices let systemd-sysext in the container attach images. They are
    # nodes of our own: the kernel removes a loop device (and the host's
    # /dev node) that systemd detaches, and one created later never shows in
    # the container's /dev, so each boot gets loop-control and loop0-7,
    # which the kernel creates again when they are opened.
    loops=
    if [ -e /dev/loop-control ]; then
        devs=$KD_WORK/boot-dev
        mkdir -p "$devs"
        [ -c "$devs/loop-control" ] || mknod -m 0600 "$devs/loop-control" c 10 237
        loops="--bind=$devs/loop-control:/dev/loop-control"
        for n in 0 1 2 3 4 5 6 7; do
            [ -b "$devs/loop$n" ] || mknod -m 0600 "$devs/loop$n" b 7 "$n"
            loops="$loops --bind=$devs/loop$n:/dev/loop$n"
        done
    fi
    # KD_BOOT_CGROUPS: cgroup directories (one per v1 controller) the
    # container starts in; its cgroup namespace is rooted there.
    # shellcheck disable=SC2086 # $loops is a list of options
    sh -c "$_kd_join_cgroups" "$(cat "$state.cgroups")" systemd-nspawn -q -D "$root" -M "kd-$name" --register=no --keep-unit \
        --console=passive $loops "$@" </dev/null >>"$state.console" 2>&1 &
    printf '%s\n' "$!" >"$state.process"
    printf '%s %s\n' "$name" "$!" >>"$kd_boots_file"
    _kd_boot_wait "$name" 90
}

# _kd_boot_wait NAME SECONDS : waits SECONDS for NAME's
# init system to finish starting up (kd_boot_ready), then records its init.
# (By the clock: a question to a VM that does not answer takes seconds.)
_kd_boot_wait() {
    state=$KD_WORK/boot.$1
    process=$(cat "$state.process")
    deadline=$(($(date +%s) + $2))
    while :; do
        if [ -f "$state.vm" ]; then
            init=vm
        else
            init=$(ps -o pid= --ppid "$process" 2>/dev/null | tr -d ' ' | head -n 1)
        fi
        # (Quiet: a VM refuses ssh until it has started sshd.)
        if [ -n "$init" ] && kd_boot_ready "$1" "$init" 2>/dev/null; then break; fi
        if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$process" 2>/dev/null; then
            echo "kd_boot: $1 ($(cat "$state.kind")) did not finish booting; its console:" >&2
            tail -n 60 "$state.console" >&2
            return 1
        fi
        # A VM is asked every 2 s: each question is an ssh session and
        # processes in a guest whose CPU, under TCG, is what its boot needs.
        if [ "$init" = vm ]; then sleep 2; else sleep 0.1; fi
    done
    printf '%s\n' "$init" >"$state.init"
    kd_log "booted $1 ($(cat "$state.kind")) in $(cat "$state.root"), init $init"
}

# kd_installer_bind NAME : the nspawn option kd_installer_run needs NAME
# booted with: on a real node `-v /:/host` brings the host's /run along;
# a booted root's /run is a tmpfs of its own mount namespace, which cannot
# be bound from outside, so its /run/kubedist (where the installer image
# stages its payload) is a directory shared with this side.
kd_installer_bind() {
    mkdir -p "$KD_WORK/run-kubedist-$1"
    printf '%s\n' "--bind=$KD_WORK/run-kubedist-$1:/run/kubedist"
}

# kd_installer_run NAME IMAGE ARG... : the installer image IMAGE (an OCI
# archive) loaded and run with podman from this machine on the booted NAME
# as README.md runs it on a host: privileged, in NAME's PID namespace,
# NAME's root at /host, with the image's ARGs (install, uninstall, flags).
# The shared /run/kubedist (kd_installer_bind) is bound over the root's
# run/kubedist for podman alone. Prints what the image printed; fails as
# it does.
kd_installer_run() {
    name=$1 image=$2
    shift 2
    root=$(cat "$KD_WORK/boot.$name.root")
    init=$(cat "$KD_WORK/boot.$name.init")
    mkdir -p "$root/run/kubedist"
    # podman refuses a runroot path longer than 50 characters.
    [ -f "$KD_WORK/podman-runroot.$$" ] || {
        mktemp -d /tmp/kd-podman.XXXXXX >"$KD_WORK/podman-runroot.$$"
        kd_remove_on_exit "$(cat "$KD_WORK/podman-runroot.$$")"
        kd_remove_on_exit "$KD_WORK/podman-runroot.$$"
        kd_remove_on_exit "$KD_WORK/podman.$$"
    }
    pm="podman --root $KD_WORK/podman.$$/storage --runroot $(cat "$KD_WORK/podman-runroot.$$") --storage-driver vfs
        --cgroup-manager cgroupfs --events-backend file --runtime runc"
    ref=$($pm load -q -i "$image" | sed -n 's/^Loaded image: //p' | head -n 1)
    if [ -z "$ref" ]; then
        echo "kd_installer_run: podman did not load $image" >&2
        return 1
    fi
    status=0
    # shellcheck disable=SC2086,SC2016 # $pm is a command line; $1, $2 the inner shell's
    unshare --mount --propagation private -- sh -c '
        mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$KD_WORK/run-kubedist-$name" "$root/run/kubedist" \
        $pm run --rm --privileged --network=none --pid="ns:/proc/$init/ns/pid" \
        --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
        -v "$root:/host" "$ref" "$@" 2>&1 || status=$?
    # The image's copy (vfs: a whole tree per layer, 1.1 GB) given back to
    # the machine's disk: a next run loads it again.
    $pm rmi -f "$ref" >/dev/null 2>&1 || true
    return "$status"
}

# sh -c "$_kd_join_cgroups" DIRS CMD... : execs CMD in the cgroup directories
# DIRS (none: where it is).
# shellcheck disable=SC2016 # $0, $$ and $@ are the inner shell's
_kd_join_cgroups='for d in $0; do echo $$ >"$d/cgroup.procs"; done; exec "$@"'

# kd_boot_ready NAME INIT : the init system of NAME is up.
# shellcheck disable=SC2016 # $(...) in single quotes: the inner shell's
kd_boot_ready() {
    case $(cat "$KD_WORK/boot.$1.kind") in
    # running or degraded: start-up is over either way; degraded is
    # reported by the tests that care (systemctl --failed).
    systemd)
        st=$(_kd_nsenter "$1" "$2" systemctl is-system-running 2>/dev/null) || true
        [ "$st" = running ] || [ "$st" = degraded ]
        ;;
    # sysvinit has run rc 2 (OpenRC's default runlevel) to its end.
    openrc) _kd_nsenter "$1" "$2" sh -c '[ "$(cat /run/openrc/softlevel 2>/dev/null)" = default ] && ! pgrep -x openrc >/dev/null && ! pgrep -f "[/]etc/init.d/rc " >/dev/null' ;;
    # runit's stage 2 watches the service directory.
    runit) _kd_nsenter "$1" "$2" pgrep -x runsvdir >/dev/null ;;
    esac
}

# kd_booted NAME : NAME is booted and still running.
kd_booted() {
    state=$KD_WORK/boot.$1
    [ -f "$state.init" ] && kill -0 "$(cat "$state.process")" 2>/dev/null
}

# _kd_nsenter NAME INIT CMD... : CMD in the namespaces of INIT, the init of
# the booted NAME, as root, with a clean environment. A node booted in
# cgroups of its own (KD_BOOT_CGROUPS) runs it there too, in its cgroup
# namespace, so that what it starts (a service restarted by hand or by
# kubeadm) is the node's. In a VM: over ssh (kd_vm_ssh).
_kd_nsenter() {
    if [ -f "$KD_WORK/boot.$1.vm" ]; then
        _kd_vm=$1
        shift 2
        kd_vm_ssh "$_kd_vm" /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
        return
    fi
    cgroups=$(cat "$KD_WORK/boot.$1.cgroups" 2>/dev/null || true)
    init=$2
    shift 2
    # shellcheck disable=SC2086 # ${cgroups:+-C}: one option or none
    sh -c "$_kd_join_cgroups" "$cgroups" nsenter -t "$init" -m -u -i -n -p ${cgroups:+-C} -- /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# kd_in_boot NAME CMD... : runs CMD inside the booted NAME, as a command of
# its own (_kd_nsenter).
kd_in_boot() {
    name=$1
    shift
    kd_booted "$name" || { echo "kd_in_boot: $name is not booted" >&2; return 1; }
    _kd_nsenter "$name" "$(cat "$KD_WORK/boot.$name.init")" "$@"
}

# kd_boot_script NAME [PRELUDE] : runs the shell script on stdin (after the
# shell text PRELUDE) inside the booted NAME, with `set -eu`.
# The script is an argument (the container's /tmp is its own tmpfs, and
# its stdin stays free for the commands it runs).
kd_boot_script() {
    text=$(
        echo 'set -eu'
        [ -z "${2:-}" ] || printf '%s\n' "$2"
        cat
    )
    kd_in_boot "$1" sh -c "$text" kd-boot-script </dev/null
}

# kd_poweroff NAME : shuts NAME down through its own init system and waits
# for the container to end (60 s; a VM, whose shutdown under TCG with the
# kubelet's 30 s drain took longer than that: 180 s), then it is killed and
# this fails.
kd_poweroff() {
    name=$1
    state=$KD_WORK/boot.$name
    kd_booted "$name" || return 0
    case $(cat "$state.kind") in
    systemd) kd_in_boot "$name" systemctl --no-block poweroff ;;
    openrc) kd_in_boot "$name" halt -p ;;
    runit) kd_in_boot "$name" /lib/runit/runit-init 0 ;;
    esac
    process=$(cat "$state.process")
    n=600
    [ ! -f "$state.vm" ] || n=1800
    limit=$((n / 10))
    while kill -0 "$process" 2>/dev/null; do
        n=$((n - 1))
        if [ "$n" -le 0 ]; then
            echo "kd_poweroff: $name did not power off in $limit s; its console:" >&2
            tail -n 40 "$state.console" >&2
            if [ -f "$state.vm" ]; then
                _kd_vm_dump_tasks "$name"
                echo "kd_poweroff: its tasks, as its kernel dumped them, end $state.console" >&2
            fi
            kd_boot_kill "$name"
            return 1
        fi
        sleep 0.1
    done
    rm -f "$state.init"
    [ ! -f "$state.vm" ] || _kd_vm_ssh_close "$name"
    kd_log "powered off $name"
}

# kd_reboot NAME : powers NAME off and boots the same root again, with the
# same options.
kd_reboot() {
    state=$KD_WORK/boot.$1
    kd_poweroff "$1"
    # shellcheck disable=SC2046 # the saved options, one word each
    KD_BOOT_CGROUPS=$(cat "$state.cgroups") kd_boot "$1" "$(cat "$state.root")" "$(cat "$state.kind")" $(cat "$state.options")
}

# kd_boot_kill NAME : ends NAME at once (its PID 1, and so every process in it).
kd_boot_kill() {
    state=$KD_WORK/boot.$1
    [ -f "$state.process" ] || return 0
    process=$(cat "$state.process")
    if [ ! -f "$state.vm" ]; then
        init=$(ps -o pid= --ppid "$process" 2>/dev/null | tr -d ' ' | head -n 1)
        [ -z "$init" ] || kill -KILL "$init" 2>/dev/null || true
        n=100
        while kill -0 "$process" 2>/dev/null && [ "$n" -gt 0 ]; do
            sleep 0.1
            n=$((n - 1))
        done
    fi
    kill -KILL "$process" 2>/dev/null || true
    rm -f "$state.init"
    [ ! -f "$state.vm" ] || _kd_vm_ssh_close "$1"
}

kd_boot_cleanup() {
    [ -f "$kd_boots_file" ] || return 0
    while read -r name _; do
        kd_boot_kill "$name"
        rm -f "$KD_WORK/boot.$name.disk"
    done <"$kd_boots_file"
    rm -f "$kd_boots_file"
}

# --- virtual machines: a root on a kernel of its own -------------------------
# A VM is a Debian root with Debian's cloud kernel, booted by QEMU (TCG:
# this machine's KVM guests hang) from an ext4 disk made of the root
# directory at its first boot; a reboot boots the same disk. Its network is
# a tap device on a bridge of the caller's, its console a file, and the
# helpers above reach it over ssh as root with a key of the suite's.

# kd_vm_base NAME KIND ARCH [PACKAGE...] : a cached root tarball
# (kd_base_tarball) of Debian's architecture ARCH that boots as a VM with
# its cloud kernel and init system KIND (systemd, openrc or runit), and
# holds PACKAGEs. Its initramfs holds the virtio disk's and network's
# modules alone, not most of the kernel's (as the arm64 root's maintainer
# scripts run under qemu-user, the initramfs of all modules took minutes):
# eth0 is there before the root's init, whose first service configures it
# (the node's node-net). It has no man pages (man-db's index, minutes more).
#
# riscv64's root is Debian 13's (Debian 12 has no riscv64), with its one
# kernel, linux-image-riscv64, whose ext4 is a module: its initramfs holds
# that too.
kd_vm_base() {
    name=$1 kind=$2 _kd_arch=$3
    shift 3
    case $kind in
    systemd) set -- systemd systemd-sysv dbus "$@" ;;
    openrc) set -- sysvinit-core openrc "$@" ;;
    runit) set -- runit-init runit "$@" ;;
    esac
    kernel=linux-image-cloud-$_kd_arch modules="virtio_pci virtio_blk virtio_net"
    if [ "$_kd_arch" = riscv64 ]; then
        KD_SUITE_CODENAME=trixie kernel=linux-image-riscv64 modules="$modules ext4"
    fi
    set -- "vm-$name-$_kd_arch" "$kernel" initramfs-tools openssh-server "$@" \
        --essential-hook="$(_kd_vm_initramfs "$modules")" --dpkgopt='path-exclude=/usr/share/man/*'
    [ "$_kd_arch" = "$(dpkg --print-architecture)" ] || set -- "$@" --arch="$_kd_arch"
    kd_base_tarball "$@"
}
# _kd_vm_initramfs MODULES : an mmdebstrap hook, run before the kernel's
# package with the root as its $1, that makes the initramfs hold MODULES
# alone. (Its text is part of the root's cache key.)
_kd_vm_initramfs() {
    # shellcheck disable=SC2016 # for the hook's shell
    printf '%s\n' 'set -e
d=$1/etc/initramfs-tools
mkdir -p "$d/conf.d" "$d/hooks"
echo MODULES=list >"$d/conf.d/kd-vm"
printf "%s\n" "#!/bin/sh" "[ \"\$1\" = prereqs ] && exit 0" ". /usr/share/initramfs-tools/hook-functions" \
    "manual_add_modules '"$1"'" >"$d/hooks/kd-vm"
chmod 0755 "$d/hooks/kd-vm"'
}

# kd_vm_key : the private key the VMs let root log in with (made once a run).
kd_vm_key() {
    key=$KD_WORK/vm-key.$$
    [ -f "$key" ] || {
        ssh-keygen -q -t ed25519 -N '' -C kd-vm -f "$key" >/dev/null
        kd_remove_on_exit "$key"
        kd_remove_on_exit "$key.pub"
    }
    printf '%s\n' "$key"
}

# kd_vm_prepare ROOT : makes the unpacked kd_vm_base root ROOT bootable as a
# VM: its root file system (never checked at boot: the disk is new, and the
# root has no fsck.ext4) and root's ssh key. openssh-server starts sshd on
# every init system: on runit, Debian's /etc/sv/ssh, which Debian 12's
# package enables and Debian 13's, installed by mmdebstrap, leaves
# disabled: enabled here.
kd_vm_prepare() {
    printf '/dev/vda / ext4 rw,errors=remount-ro 0 0\n' >"$1/etc/fstab"
    mkdir -p "$1/root/.ssh"
    chmod 0700 "$1/root/.ssh"
    cp "$(kd_vm_key).pub" "$1/root/.ssh/authorized_keys"
    # (-L: the link's target is the root's, not this machine's.)
    if [ -d "$1/etc/runit/runsvdir/default" ] && [ ! -L "$1/etc/runit/runsvdir/default/ssh" ]; then
        ln -s /etc/sv/ssh "$1/etc/runit/runsvdir/default/ssh"
    fi
}

# kd_vm_start NAME ROOT NETNS,IP : boots ROOT (kd_vm_prepare'd) as NAME: a VM
# of KD_VM_CPUS CPUs (1 unless the suite says: the machine's CPUs are
# shared by every node of a suite) and 2 GiB on a tap device kd-NAME in the
# network namespace NETNS (the caller puts it on its bridge), which its root
# configures as IP. Its disk is made of ROOT at the first boot.
kd_vm_start() {
    name=$1 root=$2 netns=${3%%,*}
    state=$KD_WORK/boot.$name
    printf '%s\n' "${3#*,}" >"$state.vm"
    if [ ! -f "$state.disk" ]; then
        mkfs.ext4 -q -F -d "$root" -L root "$state.disk.tmp" 12G
        mv "$state.disk.tmp" "$state.disk"
    fi
    tap=kd-$name
    ip -n "$netns" link show "$tap" >/dev/null 2>&1 || ip -n "$netns" tuntap add "$tap" mode tap
    # The VM's kernel and initramfs, as its root holds them, and the
    # machine of the kernel's architecture (Debian names it last).
    set -- "$root"/boot/vmlinu[xz]-*
    kernel=$(kd_one "$@")
    set -- "$root"/boot/initrd.img-*
    initrd=$(kd_one "$@")
    case $kernel in
    *-arm64)
        # QEMU's generic board; a core without pointer authentication,
        # whose emulation under TCG costs every call and return. Its
        # console is the board's PL011. (No keyboard: a hung arm64 guest
        # dumps no tasks, _kd_vm_dump_tasks' keys go nowhere.)
        # kpti=0: the kernel forces page table isolation on while KASLR
        # is, and under TCG the table switch on every kernel entry costs
        # a flush of QEMU's TLB (400,000 syscalls: 20 s with it, 1.4 s
        # without).
        set -- qemu-system-aarch64 -M virt -cpu cortex-a72
        kargs="console=ttyAMA0 kpti=0"
        ;;
    *-riscv64)
        # QEMU's generic board, its OpenSBI firmware (qemu-system-data), a
        # 16550 console; no keyboard either.
        set -- qemu-system-riscv64 -M virt -cpu rv64
        kargs=console=ttyS0
        ;;
    *)
        # tsc=reliable: the kernel keeps TSC, which TCG reads from this
        # machine's clock. Its watchdog, late under load, would otherwise
        # switch to the emulated HPET, on which a clock read costs 5-25 us
        # instead of 2 (measured with Go's time.Now), and the guests' Go
        # programs read it all the time.
        set -- qemu-system-x86_64 -cpu max
        kargs="console=ttyS0 tsc=reliable"
        ;;
    esac
    mac=$(printf '%s' "$name" | sha256sum | sed 's/^\(..\)\(..\)\(..\).*/52:54:00:\1:\2:\3/')
    # QEMU's monitor reads a FIFO (which QEMU opens read-write, so the open
    # does not block) and writes a file: _kd_vm_dump_tasks asks the guest's
    # kernel, through it, for its tasks.
    rm -f "$state.monitor.in"
    mkfifo -m 0600 "$state.monitor.in"
    : >"$state.monitor.out"
    # mitigations=off: an emulated CPU speculates nothing, and the guest
    # runs only the suite's programs; the x86 guest's syscalls took 30 %
    # less time without them.
    # At a higher priority than the suites beside it: the guest's programs
    # keep their own timeouts (the kubelet's on a container's start, 2
    # minutes), which an emulated CPU sharing the machine with a compile at
    # the same priority can miss. (In a CI run at the same priority, v3's
    # kube-proxy failed to start four times in 15 minutes; here v3's import
    # of N's bundle went from about 17 minutes to 4 with this.) The suites
    # on containers run natively and wait longer.
    ip netns exec "$netns" nice -n -5 "$@" -nodefaults -display none \
        -chardev "pipe,id=monitor,path=$state.monitor" -mon chardev=monitor \
        -accel tcg,thread=multi -smp "${KD_VM_CPUS:-1}" -m 2048 \
        -kernel "$kernel" -initrd "$initrd" \
        -append "root=/dev/vda rw $kargs mitigations=off net.ifnames=0 panic=-1 sysrq_always_enabled" -no-reboot \
        -drive "file=$state.disk,format=raw,if=virtio,cache=unsafe" \
        -netdev "tap,id=net0,ifname=$tap,script=no,downscript=no" \
        -device "virtio-net-pci,netdev=net0,mac=$mac" \
        -serial "file:$state.console" </dev/null >"$state.qemu" 2>&1 &
    printf '%s\n' "$!" >"$state.process"
    printf '%s %s\n' "$name" "$!" >>"$kd_boots_file"
    printf '%s\n' "$netns" >"$state.netns"
}

# _kd_vm_dump_tasks NAME : the VM NAME's kernel writes where its CPUs are,
# its blocked tasks, then every task with its stack, to the console (SysRq
# l, w and t, sent as keys through QEMU's monitor): a guest that stops
# answering, its boot or shutdown hung, says where.
_kd_vm_dump_tasks() {
    for key in l w t; do
        # (timeout: a FIFO's open for writing waits for a reader, and QEMU
        # may have ended.)
        # shellcheck disable=SC2016 # $1 and $2 are the inner shell's
        timeout 5 sh -c 'printf "sendkey alt-sysrq-%s\n" "$1" >"$2"' sh "$key" \
            "$KD_WORK/boot.$1.monitor.in" || true
        sleep 10
    done
}

# _kd_vm_died NAME : whether the QEMU of the VM NAME has ended.
_kd_vm_died() { ! kill -0 "$(cat "$KD_WORK/boot.$1.process")" 2>/dev/null; }

# kd_vm_ssh NAME CMD... : CMD (its words quoted for the remote shell) as root
# in the VM NAME, stdin passed on.
kd_vm_ssh() {
    _kd_state=$KD_WORK/boot.$1
    shift
    _kd_cmd=
    for _kd_a in "$@"; do
        _kd_cmd="$_kd_cmd '$(printf '%s' "$_kd_a" | sed "s/'/'\\\\''/g")'"
    done
    # One connection a VM, its sessions multiplexed: a key exchange under
    # TCG costs about a second, and the suites run hundreds of commands. It
    # lasts until the VM powers off or is killed (_kd_vm_ssh_close): one that
    # ends when idle can end as a session starts, which then fails.
    ip netns exec "$(cat "$_kd_state.netns")" ssh -i "$(kd_vm_key)" -o BatchMode=yes \
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
        -o ConnectTimeout=5 -o ServerAliveInterval=5 -o ServerAliveCountMax=6 \
        -o ControlMaster=auto -o "ControlPath=$_kd_state.ssh" -o ControlPersist=yes \
        "root@$(cat "$_kd_state.vm")" "$_kd_cmd"
}

# _kd_vm_ssh_close NAME : the VM NAME's shared connection ended (its VM is
# gone: a new boot needs a new one).
_kd_vm_ssh_close() {
    _kd_state=$KD_WORK/boot.$1
    [ -S "$_kd_state.ssh" ] || return 0
    ssh -q -o "ControlPath=$_kd_state.ssh" -O exit x 2>/dev/null || true
    rm -f "$_kd_state.ssh"
}

# kd_busybox_root DIR [SUBDIR...] : makes DIR a bare rpm-host root: the
# directories every such host has (plus SUBDIRs), busybox-static as /bin/sh
# and every applet, and root in /etc/passwd and /etc/group.
kd_busybox_root() {
    r=$1
    shift
    mkdir -p "$r/bin" "$r/proc" "$r/sys" "$r/dev" "$r/run" "$r/tmp" "$r/root" \
        "$r/etc/sysconfig" "$r/etc/systemd/system" "$r/opt" "$r/usr/lib/systemd/system" \
        "$r/var/lib" "$r/var/log" "$r/var/cache" "$r/var/tmp"
    for d in "$@"; do
        mkdir -p "$r/$d"
    done
    chmod 1777 "$r/tmp" "$r/var/tmp"
    cp /usr/bin/busybox "$r/bin/busybox"
    for applet in $(busybox --list-full); do
        [ -e "$r/$applet" ] && continue
        mkdir -p "$r/$(dirname "$applet")"
        ln -s /bin/busybox "$r/$applet"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
    echo 'root:x:0:' >"$r/etc/group"
}

# kd_require_distinct_versions PACKAGE... : each package's version (from the
# suite's `version_of DIST PACKAGE`) differs between KD_DIST_PREV and
# KD_DIST, or an upgrade proves nothing and the suite fails at once.
kd_require_distinct_versions() {
    for p in "$@"; do
        if [ "$(version_of "$KD_DIST_PREV" "$p")" = "$(version_of "$KD_DIST" "$p")" ]; then
            echo "$KD_SUITE: FAIL: $p has the same version in KD_DIST_PREV and KD_DIST" >&2
            echo "0 passed, 1 failed"
            exit 1
        fi
    done
}

# kd_run ROOT CMD... : runs CMD chrooted into ROOT, in new mount and PID
# namespaces with /proc, /sys, /dev and a tmpfs /run. When CMD exits, every
# process it started is killed and every mount disappears.
kd_run() {
    _kd_run "" "$@"
}

# kd_run_offline ROOT CMD... : kd_run with no network at all (an air-gapped host).
kd_run_offline() {
    _kd_run --net "$@"
}

_kd_run() {
    netflag=$1
    shift
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --pid --fork --kill-child ${netflag:+"$netflag"} -- sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount -t sysfs sysfs "$root/sys"
        # The host'"'"'s cgroups, as a host has them mounted (kubelet-wrapper
        # waits where nothing is).
        mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/run"
        [ -n "$(ip link show lo 2>/dev/null)" ] && ip link set lo up 2>/dev/null
        exec chroot "$root" /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
    ' kd_run "$@"
}

# kd_script ROOT : runs the shell script on stdin inside ROOT (kd_run). The
# script runs with `set -eu`, so its first failing command fails the test.
kd_script() {
    _kd_script "" "$1"
}

# kd_script_offline ROOT : kd_script with no network (kd_run_offline).
kd_script_offline() {
    _kd_script --net "$1"
}

_kd_script() {
    root=$2
    script=$(mktemp "$root/tmp/kd-test.XXXXXX")
    { echo 'set -eu'; cat; } >"$script"
    _kd_run "$1" "$root" sh "/tmp/$(basename "$script")"
}

# kd_in_root ROOT [PRELUDE] : kd_script of the script on stdin, after the
# shell text PRELUDE (the functions every test of a suite starts with).
kd_in_root() {
    { [ -z "${2:-}" ] || printf '%s\n' "$2"; cat; } | kd_script "$1"
}

# kd_in_root_offline ROOT [PRELUDE] : kd_in_root with no network.
kd_in_root_offline() {
    { [ -z "${2:-}" ] || printf '%s\n' "$2"; cat; } | kd_script_offline "$1"
}

# kd_keep_output CMD... : runs CMD with its output shown on stderr and also
# kept in a file, whose path it prints, so that a test can both show the
# output and check it. Fails when CMD fails.
kd_keep_output() {
    out=$(mktemp "$KD_WORK/$KD_SUITE.out.XXXXXX")
    set +e
    "$@" >"$out" 2>&1
    rc=$?
    set -e
    cat "$out" >&2
    [ "$rc" -eq 0 ] || { echo "command in the root failed (exit $rc)" >&2; return 1; }
    printf '%s\n' "$out"
}

# kd_listing DIR [--mtime] [PRUNE...] : every path under DIR on its file
# system but the kernel's and the scratch ones (/proc /sys /dev /run /tmp)
# and PRUNE... (as seen from DIR), one tab-separated line each: path (as seen
# from DIR: /etc/hosts), type,
# mode, numeric owner, link target, the BLAKE2b-256 digest of a regular file
# (- for others) and, with --mtime, the modification time; sorted. What
# "nothing changed" and "nothing left behind" are checked against, here and,
# through `kd_function kd_listing`, in a root or on a booted node (POSIX sh,
# GNU find, coreutils' b2sum: a whole root is hashed each time, and b2sum
# does it in a third of the time of coreutils' sha256sum, which uses no SHA
# instructions).
kd_listing() {
    (
        cd "$1" || exit 1
        shift
        kl_time=
        if [ "${1:-}" = --mtime ]; then
            kl_time='\t%T@'
            shift
        fi
        kl_prune=
        for kl_p in /proc /sys /dev /run /tmp "$@"; do kl_prune="$kl_prune -path .$kl_p -o"; done
        {
            # shellcheck disable=SC2086 # $kl_prune is find's words, no globs
            find . -xdev \( $kl_prune -false \) -prune -o -printf "M\t%p\t%y\t%m\t%U:%G\t%l$kl_time\n"
            # shellcheck disable=SC2086
            find . -xdev \( $kl_prune -false \) -prune -o -type f -exec b2sum -l 256 {} + | sed 's/^/S\t/'
        } | awk -F '\t' -v OFS='\t' '
            function seen_from_dir(p) { return p == "." ? "/" : substr(p, 2) }
            $1 == "S" { sum[seen_from_dir(substr($2, 67))] = substr($2, 1, 64); next }
            { meta[seen_from_dir($2)] = $0 }
            END {
                for (p in meta) {
                    n = split(meta[p], f, "\t")
                    line = p OFS f[3] OFS f[4] OFS f[5] OFS f[6] OFS (p in sum ? sum[p] : "-")
                    if (n > 6) line = line OFS f[7]
                    print line
                }
            }'
    ) | LC_ALL=C sort
}

# kd_bundle_dir DIR BUNDLE... : DIR as install.sh --images leaves
# /var/lib/kubedist/images: the images bundles and a SHA256SUMS listing them.
kd_bundle_dir() {
    kb_dir=$1
    shift
    mkdir -p "$kb_dir"
    cp "$@" "$kb_dir/"
    (cd "$kb_dir" && sha256sum ./*.oci.tar | sed 's| \./| |') >"$kb_dir/SHA256SUMS"
}

# kd_debs_units_under_lib FROM TO : the debs of dist output FROM (and their
# SBOMs) in the emptied directory TO, each as releases before the deb
# family's unitdir became /usr/lib/systemd/system shipped it: what is under
# /usr/lib/systemd/ under /lib/systemd/ instead, md5sums to match, nothing
# else changed (member order, modes, owners and times; xz, dist's format).
# The suites upgrade from these to exercise dpkg's move of a package's own
# files from /lib to /usr/lib on merged-/usr roots.
kd_debs_units_under_lib() {
    rm -rf "$2"
    mkdir -p "$2"
    cp -p "$1"/*.deb "$1"/*.deb.spdx.json "$2/"
    for kdu_deb in "$2"/*.deb; do
        kdu=$(mktemp -d)
        dpkg-deb --fsys-tarfile "$kdu_deb" >"$kdu/data.tar"
        tar -tf "$kdu/data.tar" >"$kdu/data.list"
        # (Only kubelet and kubeadm have units: the others stay as they are.)
        if ! grep -q '^\./usr/lib/systemd/' "$kdu/data.list"; then
            rm -rf "$kdu"
            continue
        fi
        mkdir "$kdu/data" "$kdu/control"
        dpkg-deb --ctrl-tarfile "$kdu_deb" >"$kdu/control.tar"
        tar -tf "$kdu/control.tar" >"$kdu/control.list"
        tar -xpf "$kdu/data.tar" -C "$kdu/data"
        tar -xpf "$kdu/control.tar" -C "$kdu/control"
        sed -i 's|  usr/lib/systemd/|  lib/systemd/|' "$kdu/control/md5sums"
        # dist gives every member the release's time.
        kdu_time=$(TZ=UTC tar --full-time -tvf "$kdu/data.tar" | awk 'NR == 1 { print $4 " " $5 }')
        TZ=UTC tar -C "$kdu/data" -cf - --no-recursion --numeric-owner --owner=0 --group=0 \
            --mtime="$kdu_time" --transform 'flags=r;s|^\./usr/lib/systemd$|./lib/systemd|;s|^\./usr/lib/systemd/|./lib/systemd/|' \
            -T "$kdu/data.list" |
            xz -6 >"$kdu/data.tar.xz"
        TZ=UTC tar -C "$kdu/control" -cf - --no-recursion --numeric-owner --owner=0 --group=0 \
            --mtime="$kdu_time" -T "$kdu/control.list" | xz -6 >"$kdu/control.tar.xz"
        printf '2.0\n' >"$kdu/debian-binary"
        rm "$kdu_deb"
        (cd "$kdu" && ar rcD "$kdu_deb" debian-binary control.tar.xz data.tar.xz)
        rm -rf "$kdu"
    done
}

# kd_tarball_units_under_lib TARBALL OUT : the tarball as releases before
# that move shipped it: the deb family's files under /usr/lib/systemd/
# under /lib/systemd/ (a file both families shared becomes one per family),
# SHA256SUMS to match.
kd_tarball_units_under_lib() {
    kdt=$(mktemp -d)
    tar -xzf "$1" -C "$kdt"
    kdt_top=$(cd "$kdt" && echo kubedist-*)
    (
        cd "$kdt/$kdt_top" || exit 1
        awk -F '\t' -v OFS='\t' '
            $2 != "systemd" || index($6, "/usr/lib/systemd/") != 1 { print; next }
            $1 == "deb" || $1 == "any" { d = $0; sub(/\t\/usr\/lib\/systemd\//, "\t/lib/systemd/", d); sub(/^any\t/, "deb\t", d); print d }
            $1 == "any" { sub(/^any\t/, "rpm\t"); print; next }
            $1 == "rpm" { print }
        ' MANIFEST >MANIFEST.new
        mv MANIFEST.new MANIFEST
        if [ -d payload/any/usr/lib/systemd ]; then
            for f in deb rpm; do
                mkdir -p payload/$f/usr/lib/systemd
                cp -a payload/any/usr/lib/systemd/. payload/$f/usr/lib/systemd/
            done
            rm -r payload/any/usr/lib/systemd
        fi
        mkdir -p payload/deb/lib
        mv payload/deb/usr/lib/systemd payload/deb/lib/systemd
        rm SHA256SUMS
        find . ! -type d ! -name SHA256SUMS.asc | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >"$kdt.sums"
        mv "$kdt.sums" SHA256SUMS
    ) || return 1
    tar -C "$kdt" -czf "$2" --numeric-owner --owner=0 --group=0 "$kdt_top"
    rm -rf "$kdt"
}

# kd_with_repository_names REPO : each line of stdin ("[DIGEST ]REFERENCE")
# and, after one of registry.k8s.io, the same line with the reference as
# kubeadm names it under imageRepository REPO (GetGenericImage, GetDNSImage):
# registry.k8s.io/coredns/coredns is REPO/coredns, registry.k8s.io/NAME is
# REPO/NAME.
kd_with_repository_names() {
    sed -n -e p -e "s#\(^\| \)registry\.k8s\.io/coredns/coredns:#\1$1/coredns:#p" -e t \
        -e "s#\(^\| \)registry\.k8s\.io/#\1$1/#p"
}

# kd_function NAME : the text of lib.sh's function NAME, for a script that
# runs in a root or on a booted node, where lib.sh is not.
kd_function() {
    sed -n "/^$1() {\$/,/^}\$/p" "$KD_REPO/ci/lib.sh"
}

# --- the OpenRC and runit suites' inputs --------------------------------------

# The flags as kubeadm writes them.
KD_KUBEADM_FLAGS='KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"'
# What systemd's drop-in makes of KD_KUBEADM_FLAGS and an admin's file whose
# last assignment is KUBELET_EXTRA_ARGS='--node-ip=192.0.2.10
# --node-labels=role=edge,zone=$(hostname);true --v=4', written out by hand.
# shellcheck disable=SC2016 # $(hostname) is a literal part of a flag
KD_EXPECTED_ARGV='/usr/bin/kubelet
--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf
--kubeconfig=/etc/kubernetes/kubelet.conf
--config=/var/lib/kubelet/config.yaml
--container-runtime-endpoint=unix:///run/containerd/containerd.sock
--pod-infra-container-image=registry.k8s.io/pause:3.10
--node-ip=192.0.2.10
--node-labels=role=edge,zone=$(hostname);true
--v=4'

# kd_service_inputs ROOT TARBALL EXTRA_FILE : TARBALL unpacked in ROOT/root,
# the kubeadm flags in ROOT/flags.env, EXTRA_FILE (the admin's family file)
# in ROOT/extra.env, and KD_EXPECTED_ARGV in ROOT/expected-argv.
kd_service_inputs() {
    tar -xzf "$2" -C "$1/root"
    printf '%s\n' "$KD_KUBEADM_FLAGS" >"$1/flags.env"
    printf '%s' "$3" >"$1/extra.env"
    printf '%s\n' "$KD_EXPECTED_ARGV" >"$1/expected-argv"
}

# kd_test FUNCTION [NODE] : runs the test FUNCTION (with NODE, a case run
# for several nodes) in a subshell; it passes when it exits 0. Its name, in
# the report and for KD_ONLY, is the function's name without `test_`, with
# `-` for `_`, after kd-NODE- when given (test_upgrade_keeps_x:
# upgrade-keeps-x; test_leaves v1: kd-v1-leaves).
kd_test() {
    fn=$1
    name=${2:+kd-$2-}$(printf '%s' "${fn#test_}" | tr _ -)
    if [ -n "${KD_ONLY:-}" ]; then
        wanted=
        for word in $KD_ONLY; do
            case $name in *"$word"*) wanted=1 ;; esac
        done
        [ -n "$wanted" ] || return 0
    fi
    log=$KD_WORK/$KD_SUITE.$name.log
    start=$(date +%s)
    kd_test_start=$start
    # Not `if ( ... )`: set -e is ignored inside a tested subshell.
    set +e
    ( set -e; kd_test_roots=$kd_test_roots_file; "$fn" ${2:+"$2"} ) >"$log" 2>&1
    rc=$?
    set -e
    kd_test_roots_done "$rc"
    if [ "$rc" -eq 0 ]; then
        kd_passed=$((kd_passed + 1))
        echo "ok   $KD_SUITE::$name ($(($(date +%s) - start)) s)"
    else
        kd_failed=$((kd_failed + 1))
        kd_failures="$kd_failures $name"
        echo "FAIL $KD_SUITE::$name ($(($(date +%s) - start)) s); last lines of $log:"
        tail -n 25 "$log" | sed 's/^/    /'
    fi
}

# kd_mark WHAT : "== N s: WHAT" in the test's log, N the seconds since the
# test started: where a long test's time went.
kd_mark() { echo "== $(($(date +%s) - kd_test_start)) s: $*"; }

# kd_test_roots_done STATUS : the roots a test made with kd_new_root
# (nothing else can reach them: its variables went with its subshell) are
# removed when it passed and nothing is mounted in them, so that a suite
# holds one test's roots at a time, not all of them (seven of t-repo's held
# 2.2 GB beside the cluster). A failed test's stay until the suite's end.
kd_test_roots_done() {
    [ -f "$kd_test_roots_file" ] || return 0
    if [ "$1" -eq 0 ]; then
        while IFS= read -r r; do
            awk -v r="$r/" 'index($5 "/", r) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo ||
                rm -rf "$r"
        done <"$kd_test_roots_file"
    fi
    rm -f "$kd_test_roots_file"
}

# kd_summary : the closing line; exits non-zero when a test failed.
kd_summary() {
    # The CPU time of what the suite ran and saw end (its cases' commands;
    # of its containers' and VMs' processes, what reached its shell), for
    # the budget's accounting in docs/testing.md. (`times` in the suite's
    # own shell: in a pipeline it would report a subshell's.)
    if times >"$KD_WORK/times" 2>/dev/null; then
        kd_log "CPU: $(awk 'NR == 2 {
            for (i = 1; i <= 2; i++) { split($i, t, "m"); s[i] = t[1] * 60 + t[2] }
            printf "%d s user, %d s system", s[1], s[2] }' "$KD_WORK/times")"
    fi
    echo "$kd_passed passed, $kd_failed failed"
    [ "$kd_failed" -eq 0 ]
}

# Assertions for test functions. Each prints what it expected on failure.
assert_eq() { # EXPECTED ACTUAL WHAT
    [ "$1" = "$2" ] && return 0
    printf 'assertion failed: %s\n  expected: %s\n  actual:   %s\n' "$3" "$1" "$2" >&2
    return 1
}
assert_file() { [ -f "$1" ] || { echo "assertion failed: missing file $1" >&2; return 1; }; }
assert_no_file() { [ ! -e "$1" ] || { echo "assertion failed: $1 should not exist" >&2; return 1; }; }
assert_grep() { # PATTERN FILE
    grep -q -- "$1" "$2" || { echo "assertion failed: '$1' not in $2:" >&2; sed 's/^/  | /' "$2" >&2; return 1; }
}
# kd_own_lines FILE : FILE, a `cargo xtask` run's stderr, without cargo's
# "Blocking waiting for file lock" lines, which the xtask's launcher relays
# from its build when another cargo holds a lock (suites run at once).
kd_own_lines() { grep -v '^ *Blocking waiting for file lock on ' "$1" || true; }
assert_one_error() { # FILE TEXT... : FILE (a command's stderr) has one `error:` line, holding each TEXT in turn
    err=$(grep '^error:' "$1" || true)
    assert_eq 1 "$(printf '%s\n' "$err" | grep -c .)" "\`error:\` lines in $1" || return 1
    shift
    rest=$err
    for text in "$@"; do
        case $rest in
        *"$text"*) rest=${rest#*"$text"} ;;
        *) echo "assertion failed: the error does not say '$text': $err" >&2; return 1 ;;
        esac
    done
}
assert_empty() { # FILE WHAT : FILE lists nothing; else it is printed, WHAT said
    [ ! -s "$1" ] || { sed 's/^/  | /' "$1" >&2; echo "assertion failed: $2" >&2; return 1; }
}
assert_no_grep() { # PATTERN FILE
    ! grep -q -- "$1" "$2" || { echo "assertion failed: '$1' in $2:" >&2; sed 's/^/  | /' "$2" >&2; return 1; }
}
