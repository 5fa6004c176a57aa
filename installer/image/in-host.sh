#!/bin/sh
# Runs install.sh as a process of the host: the installer image's entrypoint
# starts it in the host's mount, UTS, IPC, network and PID namespaces, from
# the copy it staged on the host. Usage: in-host.sh INSTALL_SH ARGS...
#
# On a host without systemd it first moves itself into the cgroups of the
# host's PID 1: a service that install.sh starts (OpenRC's supervise-daemon
# and the kubelet under it) is its child, and a container runtime stops
# every process of the container's cgroups when the container ends.
# (systemd starts services in cgroups of its own; runit's runsvdir is not
# our child.) POSIX sh; reads nothing but /proc and /sys.

set -eu
installer=$1
shift

# join_init_cgroups : each hierarchy's cgroup of PID 1, joined by writing 0
# (this shell) to its cgroup.procs. Says so when one cannot be joined.
join_init_cgroups() {
	left=
	while IFS=: read -r _ controllers path; do
		case $controllers in
		'')
			# cgroup v2: at the top, or under unified/ on a hybrid host.
			dir=/sys/fs/cgroup
			[ -f "$dir/cgroup.procs" ] || dir=/sys/fs/cgroup/unified
			;;
		*) dir=/sys/fs/cgroup/${controllers#name=} ;;
		esac
		case $path in
		/*) ;;
		*) path=/.. ;;
		esac
		case $path in
		*/..*) left="$left ${controllers:-unified}" ;;
		*) { echo 0 >"$dir$path/cgroup.procs"; } 2>/dev/null || left="$left ${controllers:-unified}" ;;
		esac
	done </proc/1/cgroup
	if [ -n "$left" ]; then
		echo "kubedist-installer: note: could not join PID 1's cgroups ($left ): a kubelet started now may stop when the container ends; if it does, start it on the host" >&2
	fi
}

[ -d /run/systemd/system ] || join_init_cgroups
exec /bin/sh "$installer" "$@"
