#!/bin/sh
# The kubelet under the real OpenRC: openrc-run, rc-service and
# supervise-daemon from Debian's openrc package, in a bookworm root.
#
# One root gets the current release's air-gapped tarball, installed with its
# install.sh (--init openrc). Each test then runs in its own namespaces (a
# fresh /run; every process is gone when it ends), puts the kubelet's inputs
# back to the same starting point, gives OpenRC the state tree of a booted
# host, and drives the service the way an admin and kubeadm do
# (`rc-service kubelet start|status|restart|stop`). The kubelet is the
# recorder stand-in the fixtures ship (it writes its argv, environment and
# pid to /tmp/kubedist-standin/kubelet.json and one line per start to
# kubelet.log), so every check reads what was really exec'd.
#
# Wall time: about 40 s on 2 cores with the base tarball cached (one test
# waits out supervise-daemon's 10 s respawn delay).

# shellcheck disable=SC2016 # $(...) and $k in single quotes are data and jq
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require unshare tar shellcheck
kd_require_dist

BASE=$(kd_base_tarball openrc openrc procps jq logrotate)
set -- "$KD_DIST"/kubedist-*-linux-amd64.tar.gz
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
	echo "$KD_SUITE: FAIL: expected one kubedist-*-linux-amd64.tar.gz in $KD_DIST" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
TARBALL=$1

# An admin's family file whose shell syntax must arrive as data (systemd's EnvironmentFile= rules: the last
# assignment wins, single quotes keep $(...) and ; literal).
EXTRA_FILE="# An admin's flags; systemd and kubelet-wrapper read this file, no shell does.
KUBELET_EXTRA_ARGS=\"--node-ip=192.0.2.1\"
KUBELET_EXTRA_ARGS='--node-ip=192.0.2.10 --node-labels=role=edge,zone=\$(hostname);true --v=4'
HTTPS_PROXY=\"http://proxy.example:3128\"
"
# (The kubeadm flags, and the argv systemd's drop-in makes of them and of
# this file: ci/lib.sh's KD_KUBEADM_FLAGS and KD_EXPECTED_ARGV.)

# The root: the tarball installed for OpenRC, a service that provides "net"
# (a real host's network service does), the kubeadm flags and the admin's
# family file, with pristine copies of the inputs under /srv/pristine.
ROOT=$(kd_new_root "$BASE")
kd_service_inputs "$ROOT" "$TARBALL" "$EXTRA_FILE"
if ! kd_script "$ROOT" >"$KD_WORK/$KD_SUITE.setup.log" 2>&1 <<'EOF'; then
# This root shares the host's network namespace: marked as the container it
# is, so that install.sh leaves the host's kernel settings alone.
touch /run/.containerenv
/root/kubedist-*/install.sh --init openrc --family deb
cat >/etc/init.d/net-standin <<'NET'
#!/sbin/openrc-run
# Test stand-in for the host's network service.
depend() { provide net; }
start() { return 0; }
NET
chmod 0755 /etc/init.d/net-standin
mv /flags.env /var/lib/kubelet/kubeadm-flags.env
mv /extra.env /etc/default/kubelet
for f in /etc/conf.d/kubelet /etc/default/kubelet /var/lib/kubelet/kubeadm-flags.env \
	/etc/init.d/net-standin; do
	mkdir -p "/srv/pristine${f%/*}"
	cp -p "$f" "/srv/pristine$f"
done
EOF
	cat "$KD_WORK/$KD_SUITE.setup.log" >&2
	echo "$KD_SUITE: FAIL: installing the tarball for OpenRC failed"
	echo "0 passed, 1 failed"
	exit 1
fi

# Shell functions every in-root script starts with.
PRELUDE=$(
	cat "$KD_REPO/ci/standin-helpers.sh"
	cat <<'EOF'
# The same start for every test: the inputs as first written, a service
# that provides net, no records, no logs, no config.yaml.
for f in /etc/conf.d/kubelet /etc/default/kubelet /var/lib/kubelet/kubeadm-flags.env \
	/etc/init.d/net-standin; do
	cp -p "/srv/pristine$f" "$f"
done
rm -rf /tmp/kubedist-standin /var/log/kubelet /var/lib/kubelet/config.yaml
EOF
)


test_shellcheck() {
	shellcheck -s sh "$KD_REPO/units/openrc/kubelet.initd"
	# conf.d is sourced by openrc-run: it must be plain sh too.
	shellcheck -s sh -e SC2034 "$KD_REPO/units/openrc/kubelet.confd"
}

test_argv_and_env_match_the_dropin() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
touch /var/lib/kubelet/config.yaml
rc-service kubelet start
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
rc-service kubelet status | tee /tmp/status
grep -q 'status: started' /tmp/status || fail "rc-service kubelet status does not say started"

echo "== argv: the stand-in's against the hand-written list"
jq -r '.argv[]' $REC/kubelet.json >/tmp/got-argv
diff -u /expected-argv /tmp/got-argv || fail "argv differs from the drop-in's"

echo "== argv and environment: the stand-in's against kubelet-wrapper --print"
kubelet-wrapper --family deb --print >/tmp/plan.json
jq . /tmp/plan.json
[ "$(jq -c .argv /tmp/plan.json)" = "$(jq -c .argv $REC/kubelet.json)" ] ||
	fail "argv differs from kubelet-wrapper --print"
jq -n --slurpfile p /tmp/plan.json --slurpfile s $REC/kubelet.json \
	'$p[0].env | to_entries | all(.value == $s[0].env[.key])' | grep -qx true ||
	fail "an environment variable of the chain did not reach the kubelet"
# The drop-in's environment, by hand: the four groups and the other
# assignment of the family file, verbatim.
for kv in \
	'KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf' \
	'KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml' \
	'KUBELET_KUBEADM_ARGS=--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10' \
	'KUBELET_EXTRA_ARGS=--node-ip=192.0.2.10 --node-labels=role=edge,zone=$(hostname);true --v=4' \
	'HTTPS_PROXY=http://proxy.example:3128'; do
	got=$(jq -r --arg k "${kv%%=*}" '.env[$k] // "<unset>"' $REC/kubelet.json)
	[ "$got" = "${kv#*=}" ] || fail "${kv%%=*}: expected '${kv#*=}', got '$got'"
done
extra=$(jq -r '.env | keys[] | select(startswith("KUBELET_"))' $REC/kubelet.json | sort | tr '\n' ' ')
[ "$extra" = "KUBELET_CONFIG_ARGS KUBELET_EXTRA_ARGS KUBELET_KUBEADM_ARGS KUBELET_KUBECONFIG_ARGS " ] ||
	fail "unexpected KUBELET_* variables: $extra"

echo "== supervised: the kubelet is supervise-daemon's child, with our respawn settings"
pid=$(standin_pid)
sup=$(ps -o ppid= -p "$pid" | tr -d ' ')
ps -o args= -p "$sup" | tee /tmp/sup
grep -q '^supervise-daemon kubelet ' /tmp/sup || fail "the kubelet's parent is not supervise-daemon"
grep -q -- '--respawn-delay 10 --respawn-max 0 --respawn-period 1800' /tmp/sup ||
	fail "supervise-daemon runs without the shipped respawn settings"
grep -q 'kubelet (kubedist recorder stand-in) started' /var/log/kubelet/kubelet.log ||
	fail "the kubelet's output is not in /var/log/kubelet/kubelet.log"
EOF
}

test_respawns_a_killed_kubelet() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
touch /var/lib/kubelet/config.yaml
rc-service kubelet start
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
first=$(standin_pid)
kill -KILL "$first"
echo "killed $first; supervise-daemon waits respawn_delay (10 s)"
wait_until 25 has_starts 2 || fail "the killed kubelet was not started again"
second=$(standin_pid)
[ "$second" != "$first" ] || fail "same pid after the respawn"
alive "$second" || fail "the respawned kubelet is not running"
rc-service kubelet status
EOF
}

test_restart_reads_new_kubeadm_flags() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
touch /var/lib/kubelet/config.yaml
rc-service kubelet start
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
first=$(standin_pid)
# What kubeadm does on join/upgrade: new flags, then rc-service kubelet restart.
echo 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/crio/crio.sock --node-labels=joined=yes"' \
	>/var/lib/kubelet/kubeadm-flags.env
rc-service kubelet restart
wait_until 10 has_starts 2 || fail "the kubelet did not start again after restart"
alive "$first" && fail "the old kubelet ($first) still runs"
jq -c .argv $REC/kubelet.json
jq -e '.argv | index("--container-runtime-endpoint=unix:///run/crio/crio.sock") and index("--node-labels=joined=yes")' \
	$REC/kubelet.json >/dev/null || fail "the restarted kubelet lacks the new kubeadm flags"
jq -e '.argv | index("--container-runtime-endpoint=unix:///run/containerd/containerd.sock") | not' \
	$REC/kubelet.json >/dev/null || fail "the restarted kubelet still has the old flags"
EOF
}

test_stop_leaves_nothing_running() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
touch /var/lib/kubelet/config.yaml
rc-service kubelet start
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
rc-service kubelet stop
ps -eo pid,args
# (pgrep -f: process names are cut to 15 characters.)
for p in /usr/bin/kubelet /usr/bin/kubelet-wrapper supervise-daemon; do
	if pgrep -f "^$p( |$)"; then fail "$p still runs after stop"; fi
done
rc-service kubelet status >/tmp/status 2>&1 || true
cat /tmp/status
grep -q 'status: stopped' /tmp/status || fail "status does not say stopped"
EOF
}

test_waits_for_kubeadm_without_flapping() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
# A wait line every second instead of every minute, to see it within the test.
echo 'export KUBELET_WRAPPER_WAIT_LOG_INTERVAL=1' >>/etc/conf.d/kubelet
rm -f /var/lib/kubelet/config.yaml
rc-service kubelet start
sleep 1
sup=$(pgrep -f '^supervise-daemon kubelet ') || fail "supervise-daemon is not running"
waiter=$(pgrep -P "$sup") || fail "supervise-daemon has no child"
echo "supervise-daemon $sup, kubelet-wrapper $waiter"
sleep 4
[ "$(starts)" = 0 ] || fail "the kubelet started before kubeadm wrote its config"
[ "$(pgrep -P "$sup")" = "$waiter" ] || fail "the waiting wrapper was restarted (flapping)"
rc-service kubelet status
cat /var/log/kubelet/kubelet.log
grep -q 'waiting for /var/lib/kubelet/config.yaml' /var/log/kubelet/kubelet.log ||
	fail "no wait line in /var/log/kubelet/kubelet.log"
grep -q 'still waiting' /var/log/kubelet/kubelet.log || fail "no periodic wait line"

echo "== kubeadm writes its config: the same process becomes the kubelet"
touch /var/lib/kubelet/config.yaml
wait_until 10 has_starts 1 || fail "the kubelet did not start once config.yaml appeared"
sleep 1
[ "$(starts)" = 1 ] || fail "the kubelet started $(starts) times, expected once"
[ "$(standin_pid)" = "$waiter" ] || fail "the kubelet runs as pid $(standin_pid), not as the wrapper's $waiter (no exec?)"
[ "$(pgrep -P "$sup")" = "$waiter" ] || fail "supervise-daemon's child changed"
EOF
}

test_logrotate_copytruncate_keeps_logging() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
echo 'export KUBELET_WRAPPER_WAIT_LOG_INTERVAL=1' >>/etc/conf.d/kubelet
rm -f /var/lib/kubelet/config.yaml
rc-service kubelet start
wait_until 10 grep -q 'still waiting' /var/log/kubelet/kubelet.log || fail "no wait lines"
logrotate --force --state /tmp/logrotate.state /etc/logrotate.d/kubelet
[ -s /var/log/kubelet/kubelet.log.1 ] || fail "logrotate did not rotate /var/log/kubelet/kubelet.log"
wait_until 5 grep -q 'still waiting' /var/log/kubelet/kubelet.log ||
	fail "the running service no longer writes /var/log/kubelet/kubelet.log after rotation"
# Append mode: after the truncation writes start at 0, not at the old offset.
if tr -d '\000' </var/log/kubelet/kubelet.log | cmp -s - /var/log/kubelet/kubelet.log; then :; else
	fail "NUL bytes in the rotated log: the file is not written in append mode"
fi
ls -l /var/log/kubelet
EOF
}

# A host where no service provides net (Debian and Devuan with OpenRC:
# ifupdown brings the network up in sysinit) still starts the kubelet; where
# one does, it is started first.
test_wants_net() {
	kd_in_root "$ROOT" "$PRELUDE" <<'EOF'
openrc_boot
touch /var/lib/kubelet/config.yaml
rc-service kubelet start
rc-service net-standin status | grep -q started || fail "the service providing net was not started first"
rc-service kubelet stop
rc-service net-standin stop
rm /etc/init.d/net-standin
rc-service kubelet start || fail "the kubelet does not start without a service providing net"
wait_until 10 has_starts 2 || fail "the kubelet did not run"
rc-service kubelet stop
EOF
}

kd_test test_shellcheck
kd_test test_argv_and_env_match_the_dropin
kd_test test_respawns_a_killed_kubelet
kd_test test_restart_reads_new_kubeadm_flags
kd_test test_stop_leaves_nothing_running
kd_test test_waits_for_kubeadm_without_flapping
kd_test test_logrotate_copytruncate_keeps_logging
kd_test test_wants_net
kd_summary
