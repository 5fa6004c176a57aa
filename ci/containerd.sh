# shellcheck shell=sh
# containerd of a suite's own (sourced by ci/t-images.sh and ci/t-source.sh,
# and by the shells they start with unshare): private root, state and
# socket, started in the background, stopped by ctd_stop_all.

ctd_pids=
ctd_dirs=

# ctd_start DIR SANDBOX_IMAGE [CNI_DIR [HOSTS_DIR]] : containerd with its
# state under DIR, its sandbox image SANDBOX_IMAGE, with CNI_DIR the CRI
# plugin looking for the CNI plugins there (none when empty) and with
# HOSTS_DIR its registries' hosts.toml files there (config_path); ready
# when this returns. containerd 2 gets its own layout (version 3,
# docs/air-gapped.md's), 1.x version 2.
ctd_start() {
	mkdir -p "$1"
	# (Debian's 1.x says "1.6.20~ds1", the Go module's 2.x "v2.4.2".)
	case $(containerd --version) in
	*" v2."* | *" 2."*)
		cat >"$1/config.toml" <<TOML
version = 3
root = "$1/root"
state = "$1/state"
[grpc]
  address = "$1/containerd.sock"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '$2'
TOML
		[ -z "${3:-}" ] || printf "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = ['%s']\n" "$3" >>"$1/config.toml"
		[ -z "${4:-}" ] || printf "[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = '%s'\n" "$4" >>"$1/config.toml"
		;;
	*)
		cat >"$1/config.toml" <<TOML
version = 2
root = "$1/root"
state = "$1/state"
[grpc]
  address = "$1/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$2"
TOML
		[ -z "${3:-}" ] || printf '[plugins."io.containerd.grpc.v1.cri".cni]\n  bin_dir = "%s"\n' "$3" >>"$1/config.toml"
		[ -z "${4:-}" ] || printf '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "%s"\n' "$4" >>"$1/config.toml"
		;;
	esac
	containerd --config "$1/config.toml" >"$1/log" 2>&1 &
	ctd_pids="$ctd_pids $!"
	ctd_dirs="$ctd_dirs $1"
	i=0
	until ctr --address "$1/containerd.sock" version >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { cat "$1/log" >&2; echo "containerd did not start" >&2; return 1; }
		sleep 0.1
	done
}

# ctd_stop_all : every container of every containerd started here killed
# and deleted (their shims outlive containerd otherwise), then containerd;
# each one's images and snapshots (its root, up to 900 MB of the disk the
# suites beside it need) removed, its config and log kept.
ctd_stop_all() {
	for d in $ctd_dirs; do
		for t in $(ctr_in "$d" tasks ls -q 2>/dev/null); do
			ctr_in "$d" tasks kill -s SIGKILL "$t" 2>/dev/null || true
			i=0
			until ctr_in "$d" tasks delete "$t" >/dev/null 2>&1; do
				i=$((i + 1))
				[ "$i" -lt 50 ] || break
				sleep 0.1
			done
		done
	done
	for p in $ctd_pids; do kill "$p" 2>/dev/null || true; done
	for p in $ctd_pids; do wait "$p" 2>/dev/null || true; done
	ctd_pids=
	# (--one-file-system: a mount a container left is not descended into.)
	for d in $ctd_dirs; do rm -rf --one-file-system "$d/root" || true; done
	ctd_dirs=
}

# ctr_in DIR ARGS... : ctr of the containerd under DIR, in the k8s.io
# namespace (the kubelet's).
ctr_in() {
	d=$1
	shift
	ctr --address "$d/containerd.sock" --namespace k8s.io "$@"
}

# containerd_images DIR : "<digest> <reference>" of what the containerd
# under DIR holds, sorted by reference.
containerd_images() {
	ctr_in "$1" images ls | awk 'NR > 1 && $1 !~ /^sha256:/ { print $3 " " $1 }' | sort -k2
}
