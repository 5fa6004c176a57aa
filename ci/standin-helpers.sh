# shellcheck shell=sh
# Shell functions for scripts that run inside a test root and watch the
# recorder stand-in kubelet (prepended to their in-root scripts by
# t-openrc.sh, t-runit.sh and t-tarball.sh; POSIX sh).

fail() { echo "FAIL: $*" >&2; exit 1; }
# OpenRC's state tree of a booted host (in this run's fresh /run) and a
# service that provides "net", as a real host's network service does.
openrc_boot() {
	for d in started starting stopping inactive wasinactive exclusive failed \
		scheduled options daemons tmp; do
		mkdir -p "/run/openrc/$d"
	done
	echo default >/run/openrc/softlevel
	if [ ! -f /etc/init.d/net-standin ]; then
		printf '#!/sbin/openrc-run\n# Test stand-in for the host network service.\ndepend() { provide net; }\nstart() { return 0; }\n' \
			>/etc/init.d/net-standin
		chmod 0755 /etc/init.d/net-standin
	fi
}

# wait_until SECONDS CMD... : polls CMD every 0.1 s.
wait_until() {
	n=$(($1 * 10))
	shift
	until "$@" 2>/dev/null; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.1
	done
}
REC=/tmp/kubedist-standin
# starts : how many times the stand-in kubelet has started.
starts() { if [ -f $REC/kubelet.log ]; then wc -l <$REC/kubelet.log; else echo 0; fi; }
has_starts() { [ "$(starts)" -ge "$1" ]; }
standin_pid() { jq -r .pid $REC/kubelet.json; }
alive() { kill -0 "$1" 2>/dev/null; }
