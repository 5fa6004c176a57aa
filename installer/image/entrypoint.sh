#!/bin/sh
# The installer image's entrypoint: installs this image's release onto the
# host whose root is mounted into the container, with the tarball's own
# install.sh. Run it with `--help` for how.
#
# POSIX sh (the image's busybox). It evaluates and sources nothing; its
# arguments are checked one by one and handed to install.sh as words.

set -eu
umask 022

prog=kubedist-installer
bundle=/kubedist/bundle
host_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

usage() {
	cat <<'EOF'
Usage: podman run --rm --privileged --pid=host --network=none -v /:/host IMAGE [install|uninstall] [OPTIONS]

Installs (or uninstalls) this image's Kubernetes node components on the
host whose / is mounted at /host (HOST_ROOT=DIR to change it; /rootfs is
found too), with the same install.sh as the air-gapped tarball: kubelet,
kubelet-wrapper, kubeadm, kubectl, crictl, the CNI plugins and the kubelet's
service for the host's systemd, OpenRC or runit. An image built with
`cargo xtask dist --carry-images` also installs the images kubeadm pulls
(/var/lib/kubedist/images) and imports them into the host's containerd or
CRI-O.

  1. Every file of the payload is checked against SHA256SUMS (and that list
     against the digest in the image's configuration): a changed file stops
     it with nothing written.
  2. The payload is copied to the host, under /run/kubedist (a temporary
     directory, removed when the run ends; one left by a killed run is
     removed by the next run), and checked again there.
  3. install.sh runs from there:
       nsenter  in the host's namespaces (mount, UTS, IPC, network, PID) as
                a process of the host, so the host's own systemctl, rc-service
                or sv enables and starts the kubelet. Needs --pid=host (or the
                host's /proc under HOST_ROOT) and a privileged container.
       chroot   in a chroot of the host's root when its namespaces cannot be
                entered: systemd is reached through its socket; OpenRC and
                runit services are left to start on the host (it says how).
       files    from the image, with --prefix HOST_ROOT, when the host has no
                /bin/sh this image can run: files only; it says what is left
                to do on the host.
     The first that works is used; --via chooses one.

The container runtime the image carries (containerd 2 and runc,
kubedist-containerd) is installed only when asked, on its own: `install
--runtime` on a host without one (a podman host has none of its own for
the kubelet), before the node components; `uninstall --runtime` removes it.
Once installed, each later install upgrades it too.

Options (those of install.sh, see its --help):
  --via nsenter|chroot|files   how to run install.sh (default: the first that works)
  --init systemd|openrc|runit  --family deb|rpm      --service-dir DIR
  --no-enable  --no-start  --dry-run  --kubelet-only  --kubelet-version vX.Y.Z  --runtime
  --replace-foreign  --ignore-package-db
  -h, --help                   this text

Environment: HOST_ROOT (default /host, else /rootfs), HOST_PID (the host
process whose namespaces are entered; default 1).

A run that changes nothing changes nothing: no file is written and no service
is touched; a kubelet is restarted only when one of its files changed.
Exit status: install.sh's (0 done, 1 error, 2 bad usage).
EOF
}

die() {
	printf '%s: error: %s\n' "$prog" "$*" >&2
	exit 1
}
usage_error() {
	printf '%s: %s (see --help)\n' "$prog" "$*" >&2
	exit 2
}
say() { printf '%s: %s\n' "$prog" "$*"; }

# The device and inode of a directory, following symlinks.
dev_ino() { stat -L -c %d:%i "$1/." 2>/dev/null; }

# --- arguments: checked one by one, kept as words ---------------------------
action=install
via=auto
dry_run=
no_start=
n=$#
first=1
while [ "$n" -gt 0 ]; do
	arg=$1
	shift
	n=$((n - 1))
	case $arg in
	install | uninstall)
		[ -n "$first" ] || usage_error "$arg: the action comes first"
		action=$arg
		first=
		continue
		;;
	-h | --help)
		usage
		exit 0
		;;
	--via)
		[ "$n" -gt 0 ] || usage_error "--via needs a value"
		via=$1
		shift
		n=$((n - 1))
		case $via in nsenter | chroot | files) ;; *) usage_error "--via $via: nsenter, chroot or files" ;; esac
		first=
		continue
		;;
	--via=*)
		via=${arg#--via=}
		case $via in nsenter | chroot | files) ;; *) usage_error "--via $via: nsenter, chroot or files" ;; esac
		first=
		continue
		;;
	--init | --family | --service-dir | --kubelet-version)
		[ "$n" -gt 0 ] || usage_error "$arg needs a value"
		set -- "$@" "$arg" "$1"
		shift
		n=$((n - 1))
		;;
	--init=* | --family=* | --service-dir=* | --kubelet-version=*)
		set -- "$@" "$arg"
		;;
	--dry-run)
		dry_run=1
		set -- "$@" "$arg"
		;;
	--no-start)
		no_start=1
		set -- "$@" "$arg"
		;;
	--no-enable | --kubelet-only | --runtime | --replace-foreign | --ignore-package-db)
		set -- "$@" "$arg"
		;;
	--prefix | --prefix=*)
		usage_error "$arg: the image installs into HOST_ROOT; set HOST_ROOT instead"
		;;
	*)
		usage_error "unknown argument: $arg"
		;;
	esac
	first=
done

# --- the host's root ---------------------------------------------------------
host=${HOST_ROOT:-}
if [ -z "$host" ]; then
	for d in /host /rootfs; do
		if [ -d "$d" ]; then
			host=$d
			break
		fi
	done
	[ -n "$host" ] || die "no host root at /host or /rootfs: mount the host's / there (-v /:/host) or set HOST_ROOT"
fi
case $host in /*) ;; *) die "HOST_ROOT=$host: not an absolute path" ;; esac
[ -d "$host" ] || die "$host: not a directory (mount the host's / there)"
[ "$(dev_ino "$host")" != "$(dev_ino /)" ] || die "$host is this container's own root, not the host's: mount the host's / there"

# --- 1. the payload, as the image carries it ----------------------------------
release=$(cat /kubedist/release) || die "/kubedist/release: cannot read it"
case $release in kubedist-*-linux-*) ;; *) die "/kubedist/release: unexpected name '$release'" ;; esac
[ -n "${KUBEDIST_SHA256SUMS:-}" ] || die "KUBEDIST_SHA256SUMS is not set: this is not the image's own configuration"
sums=$(sha256sum "$bundle/SHA256SUMS") || die "$bundle/SHA256SUMS: cannot read it"
[ "${sums%% *}" = "$KUBEDIST_SHA256SUMS" ] || die "$bundle/SHA256SUMS: its digest is not the one in the image's configuration; the image was changed, nothing was installed"
verify() {
	(cd "$1" && sha256sum -c -s SHA256SUMS) || die "$1: checksum verification failed (see sha256sum -c SHA256SUMS there); nothing was installed"
}
verify "$bundle"

# --- 2. staged on the host -----------------------------------------------------
if [ -n "$dry_run" ]; then
	# Nothing may be written to the host: install.sh reads it from here.
	stage=$(mktemp -d /tmp/kubedist.XXXXXX) || die "cannot create a directory in /tmp"
	trap 'rm -rf "$stage"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	cp -a "$bundle" "$stage/$release" || die "copying the payload to $stage failed"
	verify "$stage/$release"
	sh "$stage/$release/install.sh" "$action" --prefix "$host" "$@"
	exit $?
fi

for d in run run/kubedist; do
	[ ! -L "$host/$d" ] || die "$host/$d: a symlink; refusing to stage the payload through it"
done
[ -d "$host/run" ] || die "$host/run: no such directory on the host"
if [ ! -d "$host/run/kubedist" ]; then
	mkdir -m 0700 "$host/run/kubedist" || die "$host/run/kubedist: cannot create it"
fi

# A run that is killed (an evicted pod, a drained node) cannot remove its
# staging directory. Each one is named after its owner, this shell as the
# host's procfs at $host/proc shows it (PID and start time, which no later
# process shares), and a run removes those whose owner no longer runs. Where
# the host's procfs is not there, the owner is "unknown": such a directory
# is never taken for a dead run's.
# start_time PROC_STAT_LINE : field 22 of /proc/PID/stat (after the command
# name, which may hold spaces, in parentheses).
start_time() {
	echo "${1##*) }" | awk '{ print $20 }'
}
# is_owner_id ID : ID has the shape PID-STARTTIME.
is_owner_id() {
	case $1 in *[!0-9-]* | -* | *-) return 1 ;; esac
}
owner=unknown
if { read -r self_stat <"$host/proc/self/stat"; } 2>/dev/null; then
	self_id=${self_stat%% *}-$(start_time "$self_stat")
	! is_owner_id "$self_id" || owner=$self_id
fi
if [ "$owner" != unknown ]; then
	swept=0
	for d in "$host"/run/kubedist/image.*; do
		[ -d "$d" ] || continue
		id=${d##*/image.}
		id=${id%.*}
		is_owner_id "$id" || continue
		if { read -r stat <"$host/proc/${id%-*}/stat"; } 2>/dev/null &&
			[ "$(start_time "$stat")" = "${id#*-}" ]; then
			continue
		fi
		rm -rf "$d" && swept=$((swept + 1))
	done
	[ "$swept" = 0 ] || say "removed $swept staging director$([ "$swept" = 1 ] && echo y || echo ies) of earlier runs that were killed"
fi
stage=$(mktemp -d "$host/run/kubedist/image.$owner.XXXXXX") || die "cannot create a directory in $host/run/kubedist"
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	rm -rf "$stage"
	rmdir "$host/run/kubedist" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cp -a "$bundle" "$stage/$release.part" || die "copying the payload to $stage failed (is the host's disk full?)"
cp /kubedist/in-host.sh "$stage/in-host.sh" || die "copying in-host.sh to $stage failed"
mv "$stage/$release.part" "$stage/$release" || die "renaming $stage/$release.part failed"
verify "$stage/$release"
on_host=${stage#"$host"}/$release

# --- 3. install.sh, run where the host's service manager is reachable ----------
# The host process whose namespaces are entered: its root must be the root
# mounted at $host (same device and inode) and it must see the staged copy.
target=
if [ "$via" = auto ] || [ "$via" = nsenter ]; then
	pid=${HOST_PID:-1}
	case $pid in '' | *[!0-9]*) die "HOST_PID=$pid: not a process id" ;; esac
	for proc in /proc "$host/proc"; do
		t=$proc/$pid
		[ -r "$t/ns/mnt" ] || continue
		[ "$(readlink "$t/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || continue
		[ "$(dev_ino "$t/root")" = "$(dev_ino "$host")" ] || continue
		[ -f "$t/root$on_host/install.sh" ] || continue
		target=$t
		break
	done
	if [ -z "$target" ] && [ "$via" = nsenter ]; then
		die "cannot enter the namespaces of host process $pid (run with --pid=host and --privileged, or mount the host's / with its /proc at $host)"
	fi
fi

status=0
if [ -n "$target" ]; then
	say "installing in the host's namespaces (process ${target##*/})"
	# The host's PID namespace can be entered only from an ancestor of it
	# (or when it is ours already: --pid=host). Without it, a service that
	# install.sh starts itself (OpenRC's) would end with the container.
	pid_ns=-p"$target/ns/pid"
	if [ "$(readlink "$target/ns/pid")" = "$(readlink /proc/self/ns/pid)" ]; then
		pid_ns=
	elif ! /bin/busybox nsenter "$pid_ns" true 2>/dev/null; then
		pid_ns=
		say "note: cannot enter the host's PID namespace (run with --pid=host): a kubelet that OpenRC starts now ends with this container"
	fi
	env -i PATH="$host_path" LC_ALL=C /bin/busybox nsenter \
		-m"$target/ns/mnt" -u"$target/ns/uts" -i"$target/ns/ipc" -n"$target/ns/net" ${pid_ns:+"$pid_ns"} \
		-r"$target/root" -w"$target/root" \
		/bin/sh "${stage#"$host"}/in-host.sh" "$on_host/install.sh" "$action" "$@" || status=$?
	exit "$status"
fi

if { [ "$via" = auto ] || [ "$via" = chroot ]; } && [ -x "$host/bin/sh" ] && chroot "$host" /bin/sh -c : 2>/dev/null; then
	if [ -d "$host/run/systemd/system" ]; then
		# systemctl refuses to act in a chroot unless told; the host's
		# systemd is reached through its socket under the host's /run.
		say "installing through chroot $host (systemd is reached through its socket)"
		env -i PATH="$host_path" LC_ALL=C SYSTEMD_IGNORE_CHROOT=1 \
			chroot "$host" /bin/sh "$on_host/install.sh" "$action" "$@" || status=$?
	else
		# rc-service or sv would start the kubelet inside this container.
		say "installing through chroot $host; the kubelet is not started from here"
		[ -n "$no_start" ] || set -- "$@" --no-start
		env -i PATH="$host_path" LC_ALL=C \
			chroot "$host" /bin/sh "$on_host/install.sh" "$action" "$@" || status=$?
		if [ "$status" = 0 ] && [ "$action" = install ] && [ -z "$no_start" ]; then
			say "left for the host: start the kubelet there (rc-service kubelet start, or sv start kubelet)"
		fi
	fi
	exit "$status"
fi
[ "$via" != chroot ] || die "$host/bin/sh cannot be run here: cannot chroot into $host"

say "installing files only into $host (the host's shell cannot be run from here)"
sh "$stage/$release/install.sh" "$action" --prefix "$host" "$@" || status=$?
if [ "$status" = 0 ] && [ "$action" = install ]; then
	say "left for the host: enable and start the kubelet with its init system (install.sh printed the commands above)"
fi
exit "$status"
