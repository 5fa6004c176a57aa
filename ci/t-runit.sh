#!/bin/sh
# The kubelet under the real runit: runsv, sv and svlogd from Debian's runit
# package, in a bookworm root.
#
# One root gets the current release's air-gapped tarball, installed with its
# install.sh (--init runit): /etc/sv/kubelet/{run,finish,conf,log/run}. Each
# test runs in its own namespaces (every process is gone when it ends), puts
# the kubelet's inputs back to the same starting point, starts
# `runsv /etc/sv/kubelet` as runsvdir would, and drives it with sv. The
# kubelet is the recorder stand-in of the fixtures (argv, environment and pid
# in /tmp/kubedist-standin/kubelet.json, one line per start in kubelet.log).
#
# Wall time: about 35 s on 2 cores with the base tarball cached (one test
# waits out ./finish's 10 s back-off).

# shellcheck disable=SC2016 # $(...) and $k in single quotes are data and jq
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require unshare tar shellcheck
kd_require_dist

BASE=$(kd_base_tarball runit runit procps jq mount)
set -- "$KD_DIST"/kubedist-*-linux-amd64.tar.gz
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
	echo "$KD_SUITE: FAIL: expected one kubedist-*-linux-amd64.tar.gz in $KD_DIST" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
TARBALL=$1

# An admin's family file whose shell syntax must arrive as data (systemd's
# EnvironmentFile= rules).
EXTRA_FILE="# An admin's flags; systemd and kubelet-wrapper read this file, no shell does.
KUBELET_EXTRA_ARGS='--node-ip=192.0.2.10 --node-labels=role=edge,zone=\$(hostname);true --v=4'
"
# (The kubeadm flags, and the argv systemd's drop-in makes of them and of
# this file: ci/lib.sh's KD_KUBEADM_FLAGS and KD_EXPECTED_ARGV.)

# The root, with pristine copies of the inputs under /srv/pristine.
ROOT=$(kd_new_root "$BASE")
kd_service_inputs "$ROOT" "$TARBALL" "$EXTRA_FILE"
if ! kd_script "$ROOT" >"$KD_WORK/$KD_SUITE.setup.log" 2>&1 <<'EOF'; then
# This root shares the host's network namespace: marked as the container it
# is, so that install.sh leaves the host's kernel settings alone.
touch /run/.containerenv
/root/kubedist-*/install.sh --init runit --family deb
mv /flags.env /var/lib/kubelet/kubeadm-flags.env
mv /extra.env /etc/default/kubelet
for f in /etc/sv/kubelet/conf /etc/default/kubelet /var/lib/kubelet/kubeadm-flags.env; do
	mkdir -p "/srv/pristine${f%/*}"
	cp -p "$f" "/srv/pristine$f"
done
EOF
	cat "$KD_WORK/$KD_SUITE.setup.log" >&2
	echo "$KD_SUITE: FAIL: installing the tarball for runit failed"
	echo "0 passed, 1 failed"
	exit 1
fi

# Shell functions every in-root script starts with.
PRELUDE=$(
	cat "$KD_REPO/ci/standin-helpers.sh"
	cat <<'EOF'
# The same start for every test: the inputs as first written, no records,
# no logs, no config.yaml, no state of an earlier runsv.
for f in /etc/sv/kubelet/conf /etc/default/kubelet /var/lib/kubelet/kubeadm-flags.env; do
	cp -p "/srv/pristine$f" "$f"
done
rm -f /etc/sysconfig/kubelet
rm -rf /tmp/kubedist-standin /var/log/kubelet /var/lib/kubelet/config.yaml \
	/etc/sv/kubelet/supervise /etc/sv/kubelet/log/supervise
SV=/etc/sv/kubelet
# start_runsv [VAR=VALUE...] : runsv as runsvdir starts it, in the background.
start_runsv() {
	env "$@" runsv $SV </dev/null >/tmp/runsv.out 2>&1 &
	wait_until 5 sv status $SV >/dev/null || fail "runsv did not come up"
}
# The pid sv reports for the service ("run: /etc/sv/kubelet: (pid N) 3s; ...").
sv_pid() { sv status $SV | sed -n 's/^run: [^ ]*: (pid \([0-9]*\)).*/\1/p'; }
EOF
)


test_shellcheck() {
	for f in run finish log-run; do
		shellcheck -s sh "$KD_REPO/units/runit/$f"
	done
}

test_argv_env_and_log() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
start_runsv
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
sv status $SV
[ "$(sv_pid)" = "$(standin_pid)" ] || fail "runsv supervises pid $(sv_pid), the kubelet is $(standin_pid) (no exec?)"

echo "== argv: the stand-in's against the hand-written list"
jq -r '.argv[]' $REC/kubelet.json >/tmp/got-argv
diff -u /expected-argv /tmp/got-argv || fail "argv differs from the drop-in's"

echo "== argv and environment: the stand-in's against kubelet-wrapper --print"
kubelet-wrapper --settings $SV/conf --print >/tmp/plan.json
jq -c '{argv, env, family}' /tmp/plan.json
[ "$(jq -c .argv /tmp/plan.json)" = "$(jq -c .argv $REC/kubelet.json)" ] ||
	fail "argv differs from kubelet-wrapper --print"
jq -n --slurpfile p /tmp/plan.json --slurpfile s $REC/kubelet.json \
	'$p[0].env | to_entries | all(.value == $s[0].env[.key])' | grep -qx true ||
	fail "an environment variable of the chain did not reach the kubelet"
for kv in \
	'KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf' \
	'KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml' \
	'KUBELET_KUBEADM_ARGS=--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10' \
	'KUBELET_EXTRA_ARGS=--node-ip=192.0.2.10 --node-labels=role=edge,zone=$(hostname);true --v=4'; do
	got=$(jq -r --arg k "${kv%%=*}" '.env[$k] // "<unset>"' $REC/kubelet.json)
	[ "$got" = "${kv#*=}" ] || fail "${kv%%=*}: expected '${kv#*=}', got '$got'"
done

echo "== log: stdout and stderr through svlogd, timestamped"
wait_until 5 grep -q 'kubelet (kubedist recorder stand-in) started' /var/log/kubelet/current ||
	fail "the kubelet's output is not in /var/log/kubelet/current"
cat /var/log/kubelet/current
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9:.]+ kubelet \(kubedist' /var/log/kubelet/current ||
	fail "svlogd -tt timestamps missing"
EOF
}

test_killed_kubelet_restarts_after_backoff() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
start_runsv
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
first=$(standin_pid)
kill -KILL "$first"
killed_at=$(date +%s)
wait_until 25 has_starts 2 || fail "the killed kubelet was not started again"
waited=$(($(date +%s) - killed_at))
echo "restarted after ${waited} s"
[ "$waited" -ge 9 ] || fail "restarted after ${waited} s: ./finish did not back off"
second=$(standin_pid)
[ "$second" != "$first" ] && alive "$second" || fail "no new kubelet process"
[ "$(sv_pid)" = "$second" ] || fail "sv does not report the new kubelet"
grep 'starting it again in 10 s' /var/log/kubelet/current || fail "./finish's line is not in the log"
EOF
}

test_restart_is_quick_and_reads_new_flags() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
start_runsv
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
first=$(standin_pid)
# After `kubeadm upgrade` an admin runs `sv restart kubelet`.
echo 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/crio/crio.sock --node-labels=upgraded=yes"' \
	>/var/lib/kubelet/kubeadm-flags.env
sv restart $SV
wait_until 3 has_starts 2 || fail "no new kubelet within 3 s of sv restart (./finish backed off?)"
alive "$first" && fail "the old kubelet ($first) still runs"
jq -c .argv $REC/kubelet.json
jq -e '.argv | index("--container-runtime-endpoint=unix:///run/crio/crio.sock") and index("--node-labels=upgraded=yes")' \
	$REC/kubelet.json >/dev/null || fail "the restarted kubelet lacks the new kubeadm flags"
EOF
}

test_sv_stop_leaves_nothing_running() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
start_runsv
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
sv stop $SV
sv status $SV
sv status $SV | grep -q '^down: ' || fail "sv status does not say down"
ps -eo pid,args
for p in /usr/bin/kubelet /usr/bin/kubelet-wrapper; do
	if pgrep -f "^$p( |$)"; then fail "$p still runs after sv stop"; fi
done
# sv exit: runsv and its svlogd go too.
sv exit $SV
wait_until 5 sh -c '! pgrep -x runsv && ! pgrep -x svlogd' || fail "runsv or svlogd still run after sv exit"
EOF
}

test_waits_for_kubeadm_without_flapping() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
rm -f /var/lib/kubelet/config.yaml
# A wait line every second instead of every minute, to see it within the test.
start_runsv KUBELET_WRAPPER_WAIT_LOG_INTERVAL=1
wait_until 15 test -n "$(sv_pid)" || {
	sv status $SV
	cat /tmp/runsv.out /var/log/kubelet/current 2>/dev/null
	fail "the service did not start"
}
waiter=$(sv_pid)
sleep 4
[ "$(starts)" = 0 ] || fail "the kubelet started before kubeadm wrote its config"
[ "$(sv_pid)" = "$waiter" ] || fail "the waiting wrapper was restarted (flapping)"
cat /var/log/kubelet/current
grep -q 'waiting for /var/lib/kubelet/config.yaml' /var/log/kubelet/current ||
	fail "no wait line in /var/log/kubelet/current"
grep -q 'still waiting' /var/log/kubelet/current || fail "no periodic wait line"

echo "== kubeadm writes its config: the same process becomes the kubelet"
touch /var/lib/kubelet/config.yaml
wait_until 10 has_starts 1 || fail "the kubelet did not start once config.yaml appeared"
sleep 1
[ "$(starts)" = 1 ] || fail "the kubelet started $(starts) times, expected once"
[ "$(standin_pid)" = "$waiter" ] || fail "the kubelet runs as $(standin_pid), not as the wrapper's pid $waiter"
[ "$(sv_pid)" = "$waiter" ] || fail "runsv's child changed"
EOF
}

# A host whose runit mounts no cgroup file system (Debian's runit-init, on a
# kernel of its own: the cluster's VM worker): the wrapper names it and waits
# without flapping, and the same process becomes the kubelet once a cgroup
# file system is there (this machine's, bound back).
test_waits_for_a_cgroup_file_system_without_flapping() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
mkdir -p /tmp/host-cgroup
mount --rbind /sys/fs/cgroup /tmp/host-cgroup
umount -R /sys/fs/cgroup
[ "$(stat -f -c %T /sys/fs/cgroup)" = sysfs ] || fail "something is still mounted on /sys/fs/cgroup"
echo "== --print, an init script's pre-start check, fails with the line"
if kubelet-wrapper --settings $SV/conf --print >/dev/null 2>/tmp/print.err; then
	fail "kubelet-wrapper --print passed with nothing on /sys/fs/cgroup"
fi
cat /tmp/print.err
grep -q '^kubelet-wrapper: nothing is mounted on /sys/fs/cgroup: mount cgroup v2 there' /tmp/print.err ||
	fail "--print did not name the missing cgroup file system"
start_runsv KUBELET_WRAPPER_WAIT_LOG_INTERVAL=1
wait_until 15 test -n "$(sv_pid)" || fail "the service did not start"
waiter=$(sv_pid)
sleep 3
[ "$(starts)" = 0 ] || fail "the kubelet started with nothing on /sys/fs/cgroup"
[ "$(sv_pid)" = "$waiter" ] || fail "the waiting wrapper was restarted (flapping)"
cat /var/log/kubelet/current
grep -q 'nothing is mounted on /sys/fs/cgroup' /var/log/kubelet/current || fail "no line naming /sys/fs/cgroup in the log"
grep -q 'still: nothing is mounted' /var/log/kubelet/current || fail "no periodic line"
echo "== cgroups mounted: the same process becomes the kubelet"
mount --rbind /tmp/host-cgroup /sys/fs/cgroup
wait_until 10 has_starts 1 || fail "the kubelet did not start once /sys/fs/cgroup was mounted"
[ "$(standin_pid)" = "$waiter" ] || fail "the kubelet runs as $(standin_pid), not as the wrapper's pid $waiter"
EOF
}

test_conf_is_honoured_and_never_run() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
touch /var/lib/kubelet/config.yaml
# Switch the family in ./conf: the wrapper must read /etc/sysconfig/kubelet.
mkdir -p /etc/sysconfig
echo 'KUBELET_EXTRA_ARGS="--node-ip=198.51.100.7"' >/etc/sysconfig/kubelet
sed -i 's/^KUBELET_WRAPPER_FAMILY=.*/KUBELET_WRAPPER_FAMILY=rpm/' $SV/conf
grep -q '^KUBELET_WRAPPER_FAMILY=rpm$' $SV/conf || fail "conf has no KUBELET_WRAPPER_FAMILY line to change"
# A shell reading ./conf would run this; the wrapper only warns that flags
# do not belong there.
echo 'KUBELET_EXTRA_ARGS="$(touch /tmp/conf-was-run-by-a-shell)"' >>$SV/conf
start_runsv
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
[ ! -e /tmp/conf-was-run-by-a-shell ] || fail "a shell ran ./conf"
jq -c .argv $REC/kubelet.json
[ "$(jq -r '.argv[-1]' $REC/kubelet.json)" = --node-ip=198.51.100.7 ] ||
	fail "the kubelet did not get KUBELET_EXTRA_ARGS of /etc/sysconfig/kubelet"
wait_until 5 grep -q "$SV/conf:.*ignoring KUBELET_EXTRA_ARGS" /var/log/kubelet/current ||
	fail "no warning about the misplaced KUBELET_EXTRA_ARGS in the log"
cat /var/log/kubelet/current
EOF
}

kd_test test_shellcheck
kd_test test_argv_env_and_log
kd_test test_killed_kubelet_restarts_after_backoff
kd_test test_restart_is_quick_and_reads_new_flags
kd_test test_sv_stop_leaves_nothing_running
kd_test test_waits_for_kubeadm_without_flapping
kd_test test_waits_for_a_cgroup_file_system_without_flapping
kd_test test_conf_is_honoured_and_never_run
kd_summary
