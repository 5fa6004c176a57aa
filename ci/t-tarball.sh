#!/bin/sh
# The air-gapped tarball's install.sh, run for real in bookworm roots with no
# network at all (kd_run_offline): release N-1's and N's tarballs from
# $KD_DIST_PREV and $KD_DIST, unpacked as an operator would.
#
# Roots (each an overlay over one of two unpacked base roots, so a fresh
# root costs a mount, not an unpack):
#   S  systemd installed, not running: install N-1, re-run, upgrade to N
#      with the env file unedited (it follows the release)
#   O  OpenRC, booted as a host boots it (the service really starts under
#      supervise-daemon): install N-1, re-run (no restart), upgrade to N
#      with the env file edited (kept, .new beside it), side-by-side
#      kubelets, uninstall
#   O2 OpenRC: --no-enable and --no-start
#   C  OpenRC installed, not running: --dry-run, tampered/missing/extra
#      payload files, then the clean install the next two are compared to
#   K  the same install killed with SIGKILL half way, then run again
#   B  the same install by busybox sh with only busybox's applets on PATH
#   D  a dpkg-installed kubelet: refused; so is a dpkg database that cannot
#      be read
#   E  detection rules, --prefix and DESTDIR, in directories under /srv
#   P  paths, in prefixes under /srv: symlinks at state files and on the
#      way out of the prefix, merged /usr, planted manifest lines, a first
#      install
#   L  a stale lock of install.sh killed as PID 1 of its namespace;
#   L2 one whose pid another process got after a "reboot" (a new PID
#      namespace), and one from an earlier boot
#   T  temporary files: ENOSPC on a small tmpfs, leftovers of a killed run
#   F  files that are not install.sh's: a vendor's CNI plugin, a dpkg
#      package's kubectl; refused, then replaced and restored
#
# "Nothing written" and "nothing changed" are checked against a listing of
# the whole root (kd_listing: all but /proc, /sys, /dev, /run and /tmp) with
# type, mode, owner, sha256 and, where it matters, mtime of every file.
#
# Wall time: about 2 to 2.5 min on 2 cores with the base tarballs cached.

# shellcheck disable=SC2016 # $... in single quotes is for the root's shell
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require unshare mount tar sha256sum shellcheck dash busybox gpg gpgv gpgconf cargo
kd_require_dist

# The overlay roots are mounted in a mount namespace of this suite's own:
# whatever happens, they vanish with it.
kd_own_mount_namespace "$0" "$@"

TARBALL_CUR=$(kd_one "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)
DEB_KUBELET=$(kd_one "$KD_DIST"/kubelet_*_amd64.deb)

TB=$KD_WORK/t-tarball
rm -rf "$TB"
mkdir -p "$TB"
# N-1's tarball as releases before the move of the deb family's units to
# /usr/lib/systemd/system shipped it, so that the upgrades here move them.
TARBALL_PREV=$TB/$(basename "$(kd_one "$KD_DIST_PREV"/kubedist-*-linux-amd64.tar.gz)")
kd_tarball_units_under_lib "$(kd_one "$KD_DIST_PREV"/kubedist-*-linux-amd64.tar.gz)" "$TARBALL_PREV"
tb_mounts=
tb_cleanup() {
	for m in $tb_mounts; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$TB"
	kd_cleanup
}
trap tb_cleanup EXIT

# lower NAME TARBALL : unpacks a base root once, with both releases'
# tarballs unpacked in /srv/kd/{prev,cur} and the kubelet .deb in /srv/kd/deb.
lower() {
	d=$TB/lower-$1
	mkdir "$d"
	tar -xf "$2" -C "$d" --numeric-owner
	mkdir -p "$d/srv/kd/prev" "$d/srv/kd/cur" "$d/srv/kd/deb"
	tar -xzf "$TARBALL_PREV" -C "$d/srv/kd/prev"
	tar -xzf "$TARBALL_CUR" -C "$d/srv/kd/cur"
	cp "$DEB_KUBELET" "$d/srv/kd/deb/"
	printf '%s\n' "$d"
}
LOWER_SYSTEMD=$(lower systemd "$(kd_base_tarball tarball-systemd systemd procps)")
LOWER_OPENRC=$(lower openrc "$(kd_base_tarball openrc openrc procps jq logrotate)")

# new_root LOWER : a fresh root (an overlay over LOWER) in $NEW_ROOT.
new_root() {
	d=$(mktemp -d "$TB/root.XXXXXX")
	mkdir "$d/upper" "$d/work" "$d/root"
	mount -t overlay overlay -o "lowerdir=$1,upperdir=$d/upper,workdir=$d/work" "$d/root"
	tb_mounts="$tb_mounts $d/root"
	NEW_ROOT=$d/root
}

# Shell functions every in-root script starts with.
PRELUDE=$(
	cat "$KD_REPO/ci/standin-helpers.sh"
	kd_function kd_listing
	cat <<'EOF'
TAB=$(printf '\t')
PREV=$(echo /srv/kd/prev/kubedist-*-linux-amd64)
CUR=$(echo /srv/kd/cur/kubedist-*-linux-amd64)
M=/var/lib/kubedist/install.manifest
sha() { sha256sum <"$1" | cut -c1-64; }
# payload_sum DIR FAMILY PATH [INIT] : the sha256 SHA256SUMS gives the
# payload file (payload/FAMILY.INIT/PATH where the MANIFEST has PATH for
# FAMILY under several init systems).
payload_sum() {
	n=$(awk -F "$TAB" -v f="$2" -v p="$3" '$1 == f && $6 == p && $3 != "dir"' "$1/MANIFEST" | wc -l)
	if [ "$n" -gt 1 ]; then set -- "$1" "$2.$4" "$3"; fi
	awk -v p="payload/$2$3" '$2 == p { print $1 }' "$1/SHA256SUMS"
}
# payload_of DIR PATH FAMILY : the payload file installed at PATH for FAMILY.
payload_of() {
	f=$(awk -F "$TAB" -v p="$2" -v f="$3" '$6 == p && ($1 == f || $1 == "any") { print $1; exit }' "$1/MANIFEST")
	[ -n "$f" ] || fail "no $2 for $3 in $1/MANIFEST"
	echo "$1/payload/$f$2"
}
# run_install DIR ARGS... : DIR/install.sh; output in /tmp/out (shown), status in $rc.
run_install() {
	d=$1
	shift
	echo "\$ $d/install.sh $*"
	set +e
	"$d/install.sh" "$@" >/tmp/out 2>&1
	rc=$?
	set -e
	sed 's/^/  | /' /tmp/out
	echo "  (exit status $rc)"
}
said() { grep -qF -- "$1" /tmp/out || fail "install.sh did not say: $1"; }
not_said() { if grep -F -- "$1" /tmp/out; then fail "install.sh said: $1"; fi; }
ok() { [ "$rc" = 0 ] || fail "install.sh exited with $rc"; }
# kill_install_after FILE : starts $CUR/install.sh in the background (its pid
# in $inst, its output in /tmp/killed.out), lets KUBEDIST_INSTALL_TEST_STOP_AFTER
# stop it (SIGSTOP) right after renaming FILE into place, before its journal
# line, and kills it there with SIGKILL: the worst moment to die.
kill_install_after() {
	KUBEDIST_INSTALL_TEST_STOP_AFTER=$1 "$CUR/install.sh" >/tmp/killed.out 2>&1 &
	inst=$!
	wait_until 60 stopped || fail "install.sh did not stop at $1"
	kill -KILL "$inst"
}
stopped() { [ "$(sed 's/.*) //' /proc/$inst/stat | cut -d ' ' -f 1)" = T ]; }
# one_line_error WORDS : install.sh exited 1 with one line, saying WORDS.
one_line_error() {
	[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
	[ "$(wc -l </tmp/out)" = 1 ] || fail "expected one line of error"
	said "$1"
}
# listing DIR : kd_listing DIR --mtime, enough to see that a refusal wrote
# nothing there.
listing() { kd_listing "$1" --mtime; }

# snapshot FILE [mtime] [PRUNE...] : the root's kd_listing (without PRUNE...)
# in FILE; with "mtime", the regular files' modification times too (a
# directory's changes with every file made and removed in it, the lock's).
snapshot() {
	out=$1
	shift
	if [ "${1:-}" = mtime ]; then
		shift
		kd_listing / --mtime "$@" | awk -F "$TAB" -v OFS="$TAB" '$2 != "f" { $7 = "" } 1' >"$out"
	else
		kd_listing / "$@" >"$out"
	fi
}
same_snapshot() { # A B WHAT
	diff -u "$1" "$2" >/tmp/snapdiff || { head -n 40 /tmp/snapdiff; fail "$3"; }
}

# check_landed DIR FAMILY INIT [PREFIX] : every MANIFEST entry of DIR for
# FAMILY and INIT is installed with the tarball's content and MANIFEST's mode
# and (unless it is a directory that was there before) in the install
# manifest; no entry of another family or init system is installed. With
# KEPT="PATH...", those paths may hold other content (edited configs). The
# entries of the node's packages; with RUNTIME=1, the container runtime's
# (install.sh --runtime), and then the node's may be there too.
check_landed() {
	d=$1 fam=$2 ini=$3 pre=${4:-}
	sel='($1 == "any" || $1 == f) && ($2 == "any" || $2 == i) && (($5 == "kubedist-containerd") == rt)'
	awk -F "$TAB" -v f="$fam" -v i="$ini" -v rt="${RUNTIME:-0}" "$sel" "$d/MANIFEST" >/tmp/sel
	awk -F "$TAB" -v f="$fam" -v i="$ini" -v rt="${RUNTIME:-0}" \
		"!(($sel) || (\$5 == \"kubedist-containerd\") != rt)" "$d/MANIFEST" >/tmp/unsel
	[ -s /tmp/sel ] || fail "MANIFEST has nothing for $fam/$ini"
	while IFS=$TAB read -r f i kind mode _ path; do
		t=$pre$path
		if [ "$kind" = dir ]; then
			[ -d "$t" ] || fail "directory $t is missing"
		else
			[ -f "$t" ] || fail "$t is missing"
			case " ${KEPT:-} " in *" $path "*) ;; *)
				[ "$(sha "$t")" = "$(payload_sum "$d" "$f" "$path" "$i")" ] || fail "$t is not the tarball's payload for $f/$i $path" ;;
			esac
		fi
		[ "$(stat -c %a "$t")" = "${mode#0}" ] || fail "$t has mode $(stat -c %a "$t"), MANIFEST says $mode"
		[ "$kind" = dir ] ||
			awk -F "$TAB" -v p="$path" '$5 == p { found = 1 } END { exit !found }' "$pre$M" ||
			fail "$path is not in $pre$M"
	done </tmp/sel
	cut -f6 /tmp/sel | while read -r p; do readlink -f "$pre$p"; done | sort -u >/tmp/sel.real
	while IFS=$TAB read -r f i _ _ _ path; do
		[ -e "$pre$path" ] || continue
		# (on a merged-/usr root /lib/x and /usr/lib/x are one file)
		grep -qxF "$(readlink -f "$pre$path")" /tmp/sel.real && continue
		fail "$pre$path ($f/$i) is installed on a $fam/$ini host"
	done </tmp/unsel
	echo "all $(wc -l </tmp/sel) MANIFEST entries for $fam/$ini are in place${pre:+ under $pre}"
}

# start_kubelet : rc-service kubelet start, and wait for the stand-in.
start_kubelet() {
	n0=$(starts)
	rc-service kubelet start
	wait_until 10 has_starts $((n0 + 1)) || fail "the kubelet did not start"
	sleep 0.5
}
EOF
)


# ---------------------------------------------------------------------------

test_shellcheck_and_shells() {
	shellcheck -s sh "$KD_REPO/installer/install.sh"
	# The installer parses with the shells it promises to run under.
	dash -n "$KD_REPO/installer/install.sh"
	busybox sh -n "$KD_REPO/installer/install.sh"
	# The tarball carries this very installer, with pkg/scripts/kernel-apply
	# in place of its @KERNEL_APPLY@ line, the family facts of
	# pkg/families.toml in place of theirs and its release in @RELEASE@'s; it
	# passes shellcheck as shipped.
	shipped_installer >"$TB/shipped-install.sh"
	fact() { sed -n "/^\[$1\]/,/^\[/s/^$2 = \"\(.*\)\"/\1/p" "$KD_REPO/pkg/families.toml"; }
	# The release, as the kubelet package of the same dist output names it.
	release=$(basename "$DEB_KUBELET" | sed 's/^kubelet_\(.*\)_amd64\.deb$/\1/; s/~/-/')
	# The container runtime's packages (`runtime = true`) and their conflicts.
	runtime_tables=$(grep -lx 'runtime = true' "$KD_REPO"/pkg/*.toml)
	# shellcheck disable=SC2086 # one word per file
	runtime_packages=$(sed -n 's/^name = "\(.*\)"$/\1/p' $runtime_tables | sort -u | tr '\n' ' ' | sed 's/ $//')
	# shellcheck disable=SC2086 # one word per file
	runtime_conflicts=$(sed -n 's/^conflicts = \[\(.*\)\]$/\1/p' $runtime_tables | tr -d '" ' | tr ',' '\n' |
		sort -u | tr '\n' ' ' | sed 's/ $//')
	awk -v fragment="$KD_REPO/pkg/scripts/kernel-apply" '
		$0 == "@KERNEL_APPLY@" { while ((getline line < fragment) > 0) print line; next }
		{ print }' "$KD_REPO/installer/install.sh" |
		sed -e "s|@RELEASE@|$release|g" -e "s|@DEB_ENV_FILE@|$(fact deb env_file)|g" -e "s|@RPM_ENV_FILE@|$(fact rpm env_file)|g" \
			-e "s|@DEB_MARKER@|$(fact detect deb_marker)|g" -e "s|@RPM_MARKER_DIR@|$(fact detect rpm_marker_dir)|g" \
			-e "s|@RUNTIME_PACKAGES@|$runtime_packages|g" -e "s|@RUNTIME_CONFLICTS@|$runtime_conflicts|g" |
		cmp - "$TB/shipped-install.sh" ||
		{ echo "the tarball's install.sh is not installer/install.sh (rebuild the dist output)"; return 1; }
	! grep -n '@[A-Z_]*@' "$TB/shipped-install.sh" || { echo "a placeholder left in the shipped install.sh"; return 1; }
	shellcheck -s sh "$TB/shipped-install.sh"
}

# shipped_installer : the install.sh of release N's tarball.
shipped_installer() {
	top=$(tar -tzf "$TARBALL_CUR" | head -n 1)
	tar -xzOf "$TARBALL_CUR" "${top%/}/install.sh"
}

test_help_explains_everything() {
	shipped_installer >"$TB/installer-n.sh"
	sh "$TB/installer-n.sh" --help >"$TB/help"
	cat "$TB/help"
	for w in install uninstall --init systemd openrc runit --family /etc/default /etc/sysconfig \
		--prefix DESTDIR --dry-run --no-enable --no-start --kubelet-only --kubelet-version \
		KUBELET_VERSION /opt/kubernetes SHA256SUMS .new install.manifest 'nothing to do' \
		interrupted package-manager 'sv restart kubelet' 'kubeadm upgrade' /opt/cni/bin 'Exit status' \
		--replace-foreign --ignore-package-db /var/lib/kubedist/displaced symlink 'inside the root' \
		merged-/usr .kubedist-tmp 'boot' 'start time' 'refuses' --verify-key SHA256SUMS.asc gpgv sqv \
		'Kernel prerequisites' 'in a chroot' 'never fails'; do
		grep -qF -- "$w" "$TB/help" || { echo "--help does not mention '$w'"; return 1; }
	done
	set +e
	sh "$TB/installer-n.sh" --bogus >"$TB/bad" 2>&1
	rc=$?
	set -e
	cat "$TB/bad"
	assert_eq 2 "$rc" "exit status for a bad option"
	assert_eq 1 "$(wc -l <"$TB/bad")" "lines printed for a bad option"
}

# --- S: a systemd host (installed, not running), deb family ---------------

new_root "$LOWER_SYSTEMD"
ROOT_S=$NEW_ROOT

test_systemd_install() {
	kd_in_root_offline "$ROOT_S" "$PRELUDE" <<'EOF'
[ -x /lib/systemd/systemd ] && [ ! -e /sbin/openrc-run ] || fail "not a systemd-only root"
run_install "$PREV"
ok
said "installing for systemd (installed), family deb (found)"
check_landed "$PREV" deb systemd
cmp /etc/default/kubelet "$(payload_of "$PREV" /etc/default/kubelet deb)"
grep -qx 'EnvironmentFile=-/etc/default/kubelet' /lib/systemd/system/kubelet.service.d/10-kubeadm.conf ||
	fail "the drop-in does not read /etc/default/kubelet"
for p in /etc/init.d/kubelet /etc/conf.d/kubelet /etc/sv/kubelet /etc/sysconfig/kubelet; do
	[ ! -e "$p" ] || fail "$p does not belong on a deb systemd host"
done
# No systemd runs here: the installer says what to run instead of running it.
said "systemctl enable kubelet"
not_said "running: systemctl"
echo "== the installed unit and drop-in, as this root's systemd sees them"
systemd-analyze verify --man=no kubelet.service >/tmp/verify 2>&1 || { cat /tmp/verify; fail "systemd-analyze verify failed"; }
[ ! -s /tmp/verify ] || { cat /tmp/verify; fail "systemd-analyze verify complained"; }
EOF
}

test_systemd_rerun_nothing_to_do() {
	kd_in_root_offline "$ROOT_S" "$PRELUDE" <<'EOF'
snapshot /tmp/s1 mtime
run_install "$PREV"
ok
said "nothing to do"
snapshot /tmp/s2 mtime
same_snapshot /tmp/s1 /tmp/s2 "a re-run with nothing changed changed the root"
EOF
}

test_systemd_upgrade_unedited_follows() {
	kd_in_root_offline "$ROOT_S" "$PRELUDE" <<'EOF'
cmp -s "$(payload_of "$PREV" /etc/default/kubelet deb)" "$(payload_of "$CUR" /etc/default/kubelet deb)" &&
	fail "N-1 and N ship the same /etc/default/kubelet: this test needs them to differ"
grep -q "$TAB/lib/systemd/system/kubelet.service\$" $M ||
	fail "N-1 recorded no unit under /lib: the move to /usr/lib would go untested"
run_install "$CUR"
ok
said "update /etc/default/kubelet"
cmp /etc/default/kubelet "$(payload_of "$CUR" /etc/default/kubelet deb)" ||
	fail "the unedited /etc/default/kubelet did not follow the release"
[ ! -e /etc/default/kubelet.new ] || fail "a .new beside an unedited config"
# N's units are under /usr/lib: on this merged-/usr root the same files as
# N-1's under /lib, which must not go with their old names.
check_landed "$CUR" deb systemd
! grep "$TAB/lib/systemd/" $M || fail "the records still name /lib (above)"
run_install "$CUR"
ok
said "nothing to do"
EOF
}

# N-1's tarball (revision 1) after N's: refused in one line naming both
# releases, nothing changed; installed with --downgrade, then N again.
test_an_older_release_is_refused_unless_downgrade() {
	kd_in_root_offline "$ROOT_S" "$PRELUDE" <<'EOF'
old=$(awk '/^release=/ { sub(/^release=/, ""); print }' "$PREV/install.sh")
new=$(awk '/^release=/ { sub(/^release=/, ""); print }' "$CUR/install.sh")
[ "$old" != "$new" ] || fail "N-1 and N are both release $new: this test needs them to differ"
run_install "$CUR"
ok
snapshot /tmp/s0 mtime
run_install "$PREV"
one_line_error "this tarball is release $old, older than $new installed here"
said "pass --downgrade to install it anyway (nothing was changed)"
snapshot /tmp/s1 mtime
same_snapshot /tmp/s0 /tmp/s1 "a refused downgrade changed the root"
run_install "$PREV" --downgrade
ok
said "warning: going back from release $new to $old (--downgrade)"
check_landed "$PREV" deb systemd
grep -qx "@release $old" "$M" || fail "the manifest does not record release $old"
run_install "$CUR"
ok
grep -qx "@release $new" "$M" || fail "the manifest does not record release $new"
EOF
}

# --- O: an OpenRC host, booted: the service really runs --------------------

new_root "$LOWER_OPENRC"
ROOT_O=$NEW_ROOT
# A third party's CNI plugin, there before kubedist.
mkdir -p "$ROOT_O/opt/cni/bin"
printf '#!/bin/sh\necho vendor\n' >"$ROOT_O/opt/cni/bin/vendor-plugin"
chmod 0755 "$ROOT_O/opt/cni/bin/vendor-plugin"
# The root as it was before any install, for the uninstall test.
kd_in_root_offline "$ROOT_O" "$PRELUDE" >"$KD_WORK/$KD_SUITE.O-snapshot.log" 2>&1 <<'EOF'
snapshot /tmp/before-install
EOF

test_openrc_install_enables_and_starts() {
	kd_in_root_offline "$ROOT_O" "$PRELUDE" <<'EOF'
openrc_boot
run_install "$PREV"
ok
said "installing for openrc (running), family deb (found)"
check_landed "$PREV" deb openrc
grep -qx 'kubelet_family="deb"' /etc/conf.d/kubelet || fail "/etc/conf.d/kubelet is not rendered for deb"
for p in /lib/systemd/system/kubelet.service /usr/lib/systemd/system/kubelet.service.d /etc/sv/kubelet /etc/sysconfig/kubelet; do
	[ ! -e "$p" ] || fail "$p does not belong on a deb OpenRC host"
done
said "running: rc-update add kubelet default"
said "running: rc-service kubelet start"
[ -L /etc/runlevels/default/kubelet ] || fail "kubelet is not in the default runlevel"
rc-service kubelet status | grep -q 'status: started' || fail "the service is not started"
# kubeadm join writes its config: the waiting wrapper becomes the kubelet.
: >/var/lib/kubelet/config.yaml
wait_until 10 has_starts 1 || fail "the kubelet did not start once config.yaml appeared"
[ "$(jq -r '.argv[0]' $REC/kubelet.json)" = /usr/bin/kubelet ] || fail "not /usr/bin/kubelet"
EOF
}

test_openrc_rerun_restarts_nothing() {
	kd_in_root_offline "$ROOT_O" "$PRELUDE" <<'EOF'
openrc_boot
start_kubelet
n=$(starts)
pid=$(standin_pid)
snapshot /tmp/s1 mtime
run_install "$PREV"
ok
said "nothing to do"
not_said "rc-service"
sleep 1
[ "$(starts)" = "$n" ] && [ "$(standin_pid)" = "$pid" ] && alive "$pid" ||
	fail "the kubelet was restarted by a re-run that changed nothing"
snapshot /tmp/s2 mtime
same_snapshot /tmp/s1 /tmp/s2 "a re-run with nothing changed changed the root"
EOF
}

test_openrc_upgrade_keeps_edited_config() {
	kd_in_root_offline "$ROOT_O" "$PRELUDE" <<'EOF'
openrc_boot
start_kubelet
n=$(starts)
pid=$(standin_pid)
echo 'KUBELET_EXTRA_ARGS="--node-ip=192.0.2.10"' >>/etc/default/kubelet
cp -p /etc/default/kubelet /tmp/edited
cp -p /etc/conf.d/kubelet /tmp/confd
sed -i 's|^runtime-endpoint: .*|runtime-endpoint: unix:///var/run/crio/crio.sock|' /etc/crictl.yaml
cp -p /etc/crictl.yaml /tmp/crictl
run_install "$CUR"
ok
said "keep your edited /etc/default/kubelet; the new default is in /etc/default/kubelet.new"
cmp /tmp/edited /etc/default/kubelet || fail "the edited /etc/default/kubelet was changed"
cmp /tmp/crictl /etc/crictl.yaml || fail "the edited /etc/crictl.yaml was changed"
cmp /etc/default/kubelet.new "$(payload_of "$CUR" /etc/default/kubelet deb)" || fail ".new is not N's default"
[ "$(stat -c %a /etc/default/kubelet.new)" = 644 ] || fail ".new has mode $(stat -c %a /etc/default/kubelet.new)"
cmp /tmp/confd /etc/conf.d/kubelet || fail "/etc/conf.d/kubelet changed"
KEPT="/etc/default/kubelet /etc/crictl.yaml" check_landed "$CUR" deb openrc
said "running: rc-service kubelet restart"
wait_until 10 has_starts $((n + 1)) || fail "the upgrade did not restart the kubelet"
alive "$pid" && fail "the old kubelet still runs"
jq -e '.argv | index("--node-ip=192.0.2.10")' $REC/kubelet.json >/dev/null ||
	fail "the restarted kubelet lacks the edited KUBELET_EXTRA_ARGS"

echo "== again: nothing to do, nothing restarted"
n=$(starts)
run_install "$CUR"
ok
said "nothing to do"
echo "== the admin merged and removed .new: it is not offered again"
rm /etc/default/kubelet.new
run_install "$CUR"
ok
said "nothing to do"
[ ! -e /etc/default/kubelet.new ] || fail ".new came back"
sleep 0.5
[ "$(starts)" = "$n" ] || fail "a re-run restarted the kubelet"
EOF
}

test_side_by_side_kubelet() {
	kd_in_root_offline "$ROOT_O" "$PRELUDE" <<'EOF'
run_install "$CUR" --kubelet-only
ok
run_install "$PREV" --kubelet-only --kubelet-version v1.33.7
ok
K=$(payload_of "$CUR" /usr/bin/kubelet deb)
for v in v1.37.2 v1.33.7; do
	f=/opt/kubernetes/$v/bin/kubelet
	[ -f "$f" ] || fail "$f is missing"
	[ "$(stat -c %a "$f")" = 755 ] || fail "$f has mode $(stat -c %a "$f")"
	cmp "$f" "$K" || fail "$f is not the tarball's kubelet"
done
print() { # [VAR=VALUE...]
	env "$@" kubelet-wrapper --family deb --print | tee /tmp/plan.json |
		jq -c '{argv0: .argv[0], kubelet_version, kubelet_exists}'
}
print
[ "$(jq -r '.argv[0]' /tmp/plan.json)" = /usr/bin/kubelet ] || fail "without KUBELET_VERSION the wrapper does not run /usr/bin/kubelet"
print KUBELET_VERSION=v1.33.7
[ "$(jq -r '.argv[0]' /tmp/plan.json)" = /opt/kubernetes/v1.33.7/bin/kubelet ] ||
	fail "KUBELET_VERSION=v1.33.7 does not pick /opt/kubernetes/v1.33.7/bin/kubelet"
jq -e .kubelet_exists /tmp/plan.json >/dev/null || fail "the wrapper does not find it"

echo "== KUBELET_VERSION in the env file, through the real service"
cp -p /etc/default/kubelet /tmp/env
echo 'KUBELET_VERSION=v1.37.2' >>/etc/default/kubelet
print
openrc_boot
start_kubelet
[ "$(jq -r '.argv[0]' $REC/kubelet.json)" = /opt/kubernetes/v1.37.2/bin/kubelet ] ||
	fail "the service did not run /opt/kubernetes/v1.37.2/bin/kubelet"
rc-service kubelet stop
cp -p /tmp/env /etc/default/kubelet

echo "== uninstall one of them"
run_install "$CUR" uninstall --kubelet-only --kubelet-version v1.33.7
ok
[ ! -e /opt/kubernetes/v1.33.7 ] || fail "/opt/kubernetes/v1.33.7 is still there"
[ -f /opt/kubernetes/v1.37.2/bin/kubelet ] && [ -f /usr/bin/kubelet ] || fail "uninstalled too much"
run_install "$CUR"
ok
said "nothing to do"
EOF
}

test_uninstall_removes_only_what_it_installed() {
	# A file another tool put in a directory kubedist created.
	printf '{"cniVersion":"1.0.0","name":"other"}\n' >"$ROOT_O/etc/cni/net.d/10-other.conflist"
	kd_in_root_offline "$ROOT_O" "$PRELUDE" <<'EOF'
openrc_boot
start_kubelet
run_install "$CUR" uninstall
ok
said "note: kept /etc/default/kubelet: you edited it"
said "note: kept /etc/crictl.yaml: you edited it"
said "running: rc-service kubelet stop"
said "running: rc-update del kubelet default"
[ ! -e /etc/runlevels/default/kubelet ] || fail "kubelet is still in the default runlevel"
if pgrep -x supervise-daemon; then fail "supervise-daemon still runs"; fi
[ ! -e /var/lib/kubedist ] || fail "/var/lib/kubedist is still there"
[ -x /opt/cni/bin/vendor-plugin ] || fail "the third-party plugin is gone"
rm -f /etc/init.d/net-standin
snapshot /tmp/after-uninstall
echo "== added since before the install:"
comm -13 /tmp/before-install /tmp/after-uninstall | cut -f1 | tee /tmp/added
echo "== removed or changed since before the install:"
comm -23 /tmp/before-install /tmp/after-uninstall | tee /tmp/removed
[ ! -s /tmp/removed ] || fail "uninstall removed or changed what was there before"
# What stays: the edited env file and crictl.yaml, what others and the
# kubelet wrote, and the directories holding it.
cat >/tmp/expected <<'LIST'
/etc/cni
/etc/cni/net.d
/etc/cni/net.d/10-other.conflist
/etc/crictl.yaml
/etc/default/kubelet
/var/lib/kubelet
/var/lib/kubelet/config.yaml
/var/log/kubelet
/var/log/kubelet/kubelet.log
LIST
diff -u /tmp/expected /tmp/added || fail "uninstall left other things behind"
EOF
}

# --- O2: --no-enable, --no-start -------------------------------------------

new_root "$LOWER_OPENRC"
ROOT_O2=$NEW_ROOT

test_no_enable_no_start() {
	kd_in_root_offline "$ROOT_O2" "$PRELUDE" <<'EOF'
openrc_boot
run_install "$CUR" --no-start
ok
[ -L /etc/runlevels/default/kubelet ] || fail "--no-start did not enable"
if rc-service kubelet status; then fail "--no-start started the kubelet"; fi
not_said "rc-service kubelet start"
run_install "$CUR" uninstall
ok
run_install "$CUR" --no-enable
ok
[ ! -e /etc/runlevels/default/kubelet ] || fail "--no-enable enabled the kubelet"
rc-service kubelet status | grep -q 'status: started' || fail "--no-enable did not start it"
EOF
}

# --- C: dry run, tampering, then a clean install ---------------------------

new_root "$LOWER_OPENRC"
ROOT_C=$NEW_ROOT

test_dry_run_changes_nothing() {
	kd_in_root_offline "$ROOT_C" "$PRELUDE" <<'EOF'
snapshot /tmp/s0 mtime
run_install "$CUR" --dry-run
ok
said "would install /usr/bin/kubelet"
said "would install /etc/default/kubelet"
said "would create directory /opt/cni/bin"
said "dry run: nothing was changed"
snapshot /tmp/s1 mtime
same_snapshot /tmp/s0 /tmp/s1 "--dry-run changed the root"
ls /tmp | grep kubedist-install && fail "a temporary directory was left in /tmp"
true
EOF
}

test_merged_extension_is_named() {
	kd_in_root_offline "$ROOT_C" "$PRELUDE" <<'EOF'
mkdir -p /usr/lib/extension-release.d
echo ID=_any >/usr/lib/extension-release.d/extension-release.zz-kubelet
run_install "$CUR" --dry-run
rm -r /usr/lib/extension-release.d
ok
said "warning: system extensions are merged over /usr: zz-kubelet;"
run_install "$CUR" --dry-run
not_said "system extensions"
EOF
}

test_tampered_tarball_refused() {
	kd_in_root_offline "$ROOT_C" "$PRELUDE" <<'EOF'
cp -a "$CUR" /tmp/pristine
snapshot /tmp/s0 mtime
# refused HOW EXPECTED-WORDS : a copy of the tarball changed by HOW is
# refused with one line naming the file, and nothing is written.
refused() {
	rm -rf /tmp/t
	cp -a /tmp/pristine /tmp/t
	echo "== $1"
	sh -c "$1"
	run_install /tmp/t
	[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
	[ "$(wc -l </tmp/out)" = 1 ] || fail "expected one line of error"
	said "$2"
	snapshot /tmp/s1 mtime
	same_snapshot /tmp/s0 /tmp/s1 "a refused install changed the root"
	ls /tmp | grep kubedist-install && fail "a temporary directory was left in /tmp"
	true
}
refused 'printf x >>/tmp/t/payload/any/usr/bin/kubectl' "payload/any/usr/bin/kubectl: FAILED"
refused 'printf "\n# harmless?\n" >>/tmp/t/payload/deb/etc/default/kubelet' "payload/deb/etc/default/kubelet: FAILED"
refused 'rm /tmp/t/payload/any/opt/cni/bin/bridge' "payload/any/opt/cni/bin/bridge"
refused 'cp /tmp/t/payload/any/usr/bin/kubectl /tmp/t/payload/any/usr/bin/kubectl-extra' \
	"payload/any/usr/bin/kubectl-extra: not listed in SHA256SUMS"
refused 'sed -i "s|^any\tany\tfile\t0755\tkubelet\t/usr/bin/kubelet$|any\tany\tfile\t4755\tkubelet\t/usr/bin/kubelet|" /tmp/t/MANIFEST' \
	"MANIFEST: FAILED"
EOF
}

test_clean_install() {
	kd_in_root_offline "$ROOT_C" "$PRELUDE" <<'EOF'
run_install "$CUR"
ok
said "installing for openrc (installed), family deb (found)"
said "OpenRC is not running here"
check_landed "$CUR" deb openrc
snapshot /tmp/clean
EOF
}

# --- K: killed half way, then run again ------------------------------------

new_root "$LOWER_OPENRC"
ROOT_K=$NEW_ROOT

test_killed_install_completes_on_rerun() {
	kd_in_root_offline "$ROOT_K" "$PRELUDE" <<'EOF'
# MANIFEST order: crictl, kubeadm, kubectl, kubelet, ...
kill_install_after /usr/bin/kubectl
set +e
wait "$inst"
status=$?
set -e
[ "$status" = 137 ] || fail "install.sh ended with $status, not by SIGKILL"
cat /tmp/killed.out
echo "== the state it was killed in"
cat /var/lib/kubedist/install.journal
for f in crictl kubeadm kubectl; do
	[ "$(sha /usr/bin/$f)" = "$(payload_sum "$CUR" any /usr/bin/$f)" ] || fail "/usr/bin/$f was not written before the kill"
done
grep -q "$TAB/usr/bin/kubeadm\$" /var/lib/kubedist/install.journal || fail "kubeadm is not in the journal"
if grep "$TAB/usr/bin/kubectl\$" /var/lib/kubedist/install.journal; then fail "kubectl is in the journal already"; fi
[ ! -e /usr/bin/kubelet ] && [ ! -e /opt/cni/bin/bridge ] && [ ! -e /etc/default/kubelet ] ||
	fail "more than half was done"
[ ! -e $M ] || fail "a manifest already"

echo "== run again"
run_install "$CUR"
ok
said "completing an interrupted earlier run"
check_landed "$CUR" deb openrc
[ ! -e /var/lib/kubedist/install.journal ] || fail "the journal is still there"
snapshot /tmp/rerun
EOF
	diff -u "$ROOT_C/tmp/clean" "$ROOT_K/tmp/rerun" || {
		echo "killed + re-run differs from a clean install"
		return 1
	}
}

# --- B: busybox sh and busybox's applets only -------------------------------

new_root "$LOWER_OPENRC"
ROOT_B=$NEW_ROOT
mkdir -p "$ROOT_B/tmp/bb"
cp /usr/bin/busybox "$ROOT_B/tmp/bb/busybox"

test_busybox_sh() {
	kd_in_root_offline "$ROOT_B" "$PRELUDE" <<'EOF'
/tmp/bb/busybox --install -s /tmp/bb
echo "\$ env -i PATH=/tmp/bb /tmp/bb/sh $CUR/install.sh"
set +e
env -i PATH=/tmp/bb /tmp/bb/sh "$CUR/install.sh" >/tmp/out 2>&1
rc=$?
set -e
sed 's/^/  | /' /tmp/out
ok
said "installing for openrc (installed), family deb (found)"
check_landed "$CUR" deb openrc
snapshot /tmp/busybox
set +e
env -i PATH=/tmp/bb /tmp/bb/sh "$CUR/install.sh" >/tmp/out 2>&1
rc=$?
set -e
cat /tmp/out
ok
said "nothing to do"
EOF
	diff -u "$ROOT_C/tmp/clean" "$ROOT_B/tmp/busybox" || {
		echo "the busybox install differs from a clean install"
		return 1
	}
}

# --- D: a package manager's kubelet ----------------------------------------

new_root "$LOWER_OPENRC"
ROOT_D=$NEW_ROOT

test_refuses_over_dpkg_install() {
	kd_in_root_offline "$ROOT_D" "$PRELUDE" <<'EOF'
# (iptables, conntrack, ... are not in this offline root)
dpkg -i --force-depends /srv/kd/deb/kubelet_*.deb
[ "$(dpkg-query -W -f '${db:Status-Status}' kubelet)" = installed ] || fail "dpkg did not install kubelet"
snapshot /tmp/s0 mtime
run_install "$CUR"
[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
said "already installed by a package manager: kubelet (dpkg: installed)"
snapshot /tmp/s1 mtime
same_snapshot /tmp/s0 /tmp/s1 "a refused install changed the root"
echo "== a side-by-side kubelet is fine beside the package"
run_install "$CUR" --kubelet-only
ok
[ -x /opt/kubernetes/v1.37.2/bin/kubelet ] || fail "no side-by-side kubelet"
EOF
}

# --- R: the container runtime (install.sh --runtime) ---------------------

new_root "$LOWER_OPENRC"
ROOT_R=$NEW_ROOT
new_root "$LOWER_SYSTEMD"
ROOT_RS=$NEW_ROOT
new_root "$LOWER_OPENRC"
ROOT_RD=$NEW_ROOT

test_runtime_only_when_asked_then_upgraded_with_the_node() {
	kd_in_root_offline "$ROOT_R" "$PRELUDE" <<'EOF'
openrc_boot
run_install "$PREV"
ok
for p in /usr/bin/containerd /usr/bin/runc /etc/containerd /etc/init.d/containerd; do
	[ ! -e "$p" ] || fail "$p was installed without --runtime"
done
run_install "$PREV" --runtime
ok
said "installing the container runtime for openrc (recorded by the earlier install)"
RUNTIME=1 check_landed "$PREV" deb openrc
grep -qx '  SystemdCgroup = false' /etc/containerd/config.toml || fail "not the cgroupfs driver on an OpenRC host"
grep -qx 'imports = \["/etc/containerd/conf.d/\*.toml"\]' /etc/containerd/config.toml || fail "conf.d/ is not imported"
[ -d /etc/containerd/conf.d ] || fail "no /etc/containerd/conf.d"
said "running: rc-update add containerd default"
said "running: rc-service containerd start"
[ -L /etc/runlevels/default/containerd ] || fail "containerd is not in the default runlevel"
wait_until 10 test -f $REC/containerd.json || fail "containerd was not started"
[ "$(jq -r '.argv[0]' $REC/containerd.json)" = /usr/bin/containerd ] || fail "not /usr/bin/containerd"
# The kubelet's service orders itself after it.
grep -q 'want net cgroups containerd' /etc/init.d/kubelet || fail "the kubelet does not want containerd"
echo "== the admin edits the configuration; the node is upgraded"
echo "# the admin's" >>/etc/containerd/config.toml
run_install "$CUR"
ok
said "upgrading the container runtime installed here (--runtime)"
KEPT=/etc/containerd/config.toml RUNTIME=1 check_landed "$CUR" deb openrc
check_landed "$CUR" deb openrc
grep -qx "# the admin's" /etc/containerd/config.toml || fail "the edited configuration was not kept"
echo "== uninstall --runtime: the runtime alone goes"
run_install "$CUR" uninstall --runtime
ok
said "rc-update del containerd default"
for p in /usr/bin/containerd /usr/bin/containerd-shim-runc-v2 /usr/bin/ctr /usr/bin/runc /etc/init.d/containerd; do
	[ ! -e "$p" ] || fail "$p is still there"
done
grep -qx "# the admin's" /etc/containerd/config.toml || fail "the edited configuration was not kept"
[ -x /usr/bin/kubelet ] || fail "the kubelet went with the runtime"
if awk -F "$TAB" '$1 == "runtime"' $M | grep .; then fail "runtime records are left"; fi
echo "== and an upgrade no longer brings it back"
run_install "$CUR"
ok
not_said "container runtime"
[ ! -e /usr/bin/containerd ] || fail "the runtime came back"
EOF
}

test_runtime_on_systemd_has_the_systemd_cgroup_driver() {
	kd_in_root_offline "$ROOT_RS" "$PRELUDE" <<'EOF'
run_install "$CUR" --runtime
ok
said "installing the container runtime for systemd (installed)"
RUNTIME=1 check_landed "$CUR" deb systemd
grep -qx '  SystemdCgroup = true' /etc/containerd/config.toml || fail "not the systemd driver on a systemd host"
said "systemctl enable containerd"
echo "== its unit, as this root's systemd sees it"
systemd-analyze verify --man=no containerd.service >/tmp/verify 2>&1 || { cat /tmp/verify; fail "systemd-analyze verify failed"; }
[ ! -s /tmp/verify ] || { cat /tmp/verify; fail "systemd-analyze verify complained"; }
grep -qx 'KillMode=process' /usr/lib/systemd/system/containerd.service || fail "containerd's unit would kill the containers"
grep -qx 'Delegate=yes' /usr/lib/systemd/system/containerd.service || fail "no Delegate=yes"
echo "== uninstall takes it with everything else"
run_install "$CUR"
ok
run_install "$CUR" uninstall
ok
for p in /usr/bin/containerd /usr/lib/systemd/system/containerd.service /etc/containerd /usr/bin/kubelet $M; do
	[ ! -e "$p" ] || fail "$p is still there"
done
EOF
}

test_runtime_refused_beside_a_package_managers_containerd() {
	# A containerd of dpkg's, as Debian's or Docker's package puts it.
	kd_distribution_deb containerd /usr/bin/containerd "$ROOT_RD/tmp/containerd.deb"
	kd_in_root_offline "$ROOT_RD" "$PRELUDE" <<'EOF'
dpkg -i /tmp/containerd.deb >/dev/null
snapshot /tmp/s0 mtime
for extra in "" --replace-foreign; do
	run_install "$CUR" --runtime $extra
	one_line_error "already installed by a package manager: containerd (dpkg: installed); remove those packages first"
	snapshot /tmp/s1 mtime
	same_snapshot /tmp/s0 /tmp/s1 "a refused install changed the root"
done
echo "== the node's own programs install beside it"
run_install "$CUR"
ok
# (kd_distribution_deb's program: a one-line stub.)
[ "$(cat /usr/bin/containerd)" = '#!/bin/sh' ] || fail "dpkg's containerd was touched"
EOF
}

test_refuses_when_dpkg_database_unreadable() {
	kd_in_root_offline "$ROOT_D" "$PRELUDE" <<'EOF'
# The dpkg-installed kubelet of the test above, and one malformed stanza:
# dpkg-query fails for every package, the kubelet included.
cp -p /var/lib/dpkg/status /tmp/status
printf '\nPackage: not a package name\nStatus: install ok installed\nVersion: 1\n' >>/var/lib/dpkg/status
if dpkg-query -W kubelet; then fail "dpkg-query reads the damaged database"; fi
snapshot /tmp/s0 mtime
run_install "$CUR"
one_line_error "/var/lib/dpkg/status: the dpkg database cannot be read (dpkg-query: error: parsing file"
said "pass --ignore-package-db to install anyway"
snapshot /tmp/s1 mtime
same_snapshot /tmp/s0 /tmp/s1 "a refused install changed the root"
echo "== --ignore-package-db: past the database, the kubelet's files are still dpkg's"
run_install "$CUR" --ignore-package-db
# (it names the first of the kubelet's files in MANIFEST order)
one_line_error "belongs to the Debian package kubelet, not to install.sh"
cp -p /tmp/status /var/lib/dpkg/status
EOF
}

# --- E: detection rules, --prefix, DESTDIR ----------------------------------

new_root "$LOWER_OPENRC"
ROOT_E=$NEW_ROOT

test_detection_rules() {
	kd_in_root_offline "$ROOT_E" "$PRELUDE" <<'EOF'
exe() { mkdir -p "${1%/*}" && printf '#!/bin/sh\n' >"$1" && chmod 0755 "$1"; }
# detect DIR EXPECTED [ARGS...] : a dry run into DIR says EXPECTED
detect() {
	d=$1 want=$2
	shift 2
	run_install "$CUR" --dry-run --prefix "$d" "$@"
	ok
	said "$want"
}
mkdir -p /srv/h/systemd /srv/h/openrc /srv/h/runit /srv/h/two /srv/h/none
exe /srv/h/systemd/usr/lib/systemd/systemd
exe /srv/h/openrc/sbin/openrc-run
exe /srv/h/runit/usr/bin/runsvdir
exe /srv/h/two/lib/systemd/systemd
exe /srv/h/two/sbin/runsvdir
detect /srv/h/systemd "installing for systemd (installed)"
detect /srv/h/openrc "installing for openrc (installed)"
detect /srv/h/runit "installing for runit (installed)"
detect /srv/h/two "installing for runit (--init)" --init runit
run_install "$CUR" --dry-run --prefix /srv/h/two
[ "$rc" = 1 ] || fail "exit status $rc"
said "several init systems are installed in /srv/h/two (systemd, runit) and none is running; pass --init"
run_install "$CUR" --dry-run --prefix /srv/h/none
[ "$rc" = 1 ] || fail "exit status $rc"
said "no init system found in /srv/h/none"

echo "== the running one wins over the installed ones (here: OpenRC installed)"
mkdir -p /run/systemd/system
run_install "$CUR" --dry-run
said "installing for systemd (running)"
rmdir /run/systemd/system
openrc_boot
run_install "$CUR" --dry-run
said "installing for openrc (running)"

echo "== family"
mkdir -p /srv/f/rpm/etc/sysconfig /srv/f/deb/etc/default /srv/f/both/etc/sysconfig /srv/f/both/etc/default \
	/srv/f/debian/etc/sysconfig /srv/f/debian/etc/default /srv/f/neither
echo 12 >/srv/f/debian/etc/debian_version
detect /srv/f/rpm "family rpm (found)" --init systemd
detect /srv/f/deb "family deb (found)" --init systemd
detect /srv/f/both "family rpm (found)" --init systemd
detect /srv/f/debian "family deb (found)" --init systemd
detect /srv/f/neither "family deb (found)" --init systemd
detect /srv/f/rpm "family deb (--family)" --init systemd --family deb
EOF
}

test_prefix_and_destdir() {
	kd_in_root_offline "$ROOT_E" "$PRELUDE" <<'EOF'
mkdir -p /srv/img1/etc/sysconfig /srv/img2/etc/sysconfig
snapshot /tmp/outside0 mtime /srv
echo "== DESTDIR, rpm family, systemd"
export DESTDIR=/srv/img1
run_install "$CUR" --init systemd
unset DESTDIR
ok
said "family rpm (found), into /srv/img1"
said "systemd is not running here in /srv/img1"
check_landed "$CUR" rpm systemd /srv/img1
grep -qx 'EnvironmentFile=-/etc/sysconfig/kubelet' /srv/img1/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf ||
	fail "the rpm drop-in does not read /etc/sysconfig/kubelet"
grep -q /srv/img1 /srv/img1$M && fail "the manifest records paths with the prefix"

echo "== --prefix, rpm family, runit"
run_install "$CUR" --prefix /srv/img2 --init runit
ok
check_landed "$CUR" rpm runit /srv/img2
grep -qx 'KUBELET_WRAPPER_FAMILY=rpm' /srv/img2/etc/sv/kubelet/conf || fail "runit's conf is not rendered for rpm"
said "runit is not running here in /srv/img2"
run_install "$CUR" --prefix /srv/img2
ok
said "installing for runit (recorded by the earlier install), family rpm (recorded by the earlier install)"
said "nothing to do"

snapshot /tmp/outside1 mtime /srv
same_snapshot /tmp/outside0 /tmp/outside1 "an install into a prefix changed the root outside it"

echo "== uninstall both: back to what was there"
export DESTDIR=/srv/img1
run_install "$CUR" uninstall
unset DESTDIR
ok
run_install "$CUR" uninstall --prefix /srv/img2
ok
for d in /srv/img1 /srv/img2; do
	left=$(cd $d && find . -mindepth 1 | sort | tr '\n' ' ')
	[ "$left" = "./etc ./etc/sysconfig " ] || fail "left in $d: $left"
done
EOF
}

# --- P: paths: symlinks, planted manifests, a first install ----------------
# (prefixes under /srv; what lies outside them must stay as it was)

new_root "$LOWER_OPENRC"
ROOT_P=$NEW_ROOT

test_state_file_symlinks_not_followed() {
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
echo precious >/srv/victim-journal
echo precious >/srv/victim-manifest
cp /srv/victim-journal /tmp/precious
mkdir -p /srv/sj/var/lib/kubedist /srv/sm/var/lib/kubedist
ln -s /srv/victim-journal /srv/sj/var/lib/kubedist/install.journal
ln -s /srv/victim-manifest /srv/sm/var/lib/kubedist/install.manifest.tmp

echo "== a symlink at the journal, to outside the prefix"
run_install "$CUR" --prefix /srv/sj --init openrc
one_line_error "/srv/sj/var/lib/kubedist/install.journal: a symlink to /srv/victim-journal, outside /srv/sj"
cmp /tmp/precious /srv/victim-journal || fail "the journal's symlink was written through"

echo "== a symlink at the manifest's old temporary name"
run_install "$CUR" --prefix /srv/sm --init openrc
ok
cmp /tmp/precious /srv/victim-manifest || fail "install.manifest.tmp was written through"
[ -f /srv/sm$M ] && [ ! -L /srv/sm$M ] || fail "the manifest is not a plain file"
[ ! -e /srv/sm$M.tmp ] && [ ! -L /srv/sm$M.tmp ] || fail "the planted install.manifest.tmp is still there"

echo "== a symlink at the journal on / (it resolves inside the root, and is still refused)"
mkdir -p /var/lib/kubedist
ln -s /srv/victim-journal /var/lib/kubedist/install.journal
run_install "$CUR"
one_line_error "/var/lib/kubedist/install.journal: a symlink (install.sh never makes one there)"
cmp /tmp/precious /srv/victim-journal || fail "the journal's symlink was written through"
rm -r /var/lib/kubedist
EOF
}

test_directory_symlinks_outside_root_refused() {
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
# symlinked DIR TARGET : in a fresh prefix, DIR is a symlink to TARGET (a
# directory outside the prefix): install.sh refuses, writing nothing there.
symlinked() {
	p=/srv/d$(echo "$1" | tr / -)
	mkdir -p "$p/${1%/*}" /srv/outside
	ln -s "$2" "$p/$1"
	listing /srv/outside >/tmp/l0
	run_install "$CUR" --prefix "$p" --init openrc
	one_line_error "$p/$1: a symlink to /srv/outside, outside $p; refusing to follow it"
	listing /srv/outside >/tmp/l1
	diff -u /tmp/l0 /tmp/l1 || fail "install.sh wrote outside the prefix through $p/$1"
}
symlinked usr/bin /srv/outside
symlinked etc/default /srv/outside
symlinked var/lib/kubedist /srv/outside
symlinked opt/cni/bin ../../../outside

echo "== merged /usr: /bin, /lib and /sbin link inside the prefix, and that is fine"
mkdir -p /srv/mu/usr/bin /srv/mu/usr/lib /srv/mu/usr/sbin
for d in bin lib sbin; do ln -s usr/$d /srv/mu/$d; done
run_install "$CUR" --prefix /srv/mu --init systemd --family deb
ok
check_landed "$CUR" deb systemd /srv/mu
[ -L /srv/mu/lib ] && [ -f /srv/mu/usr/lib/systemd/system/kubelet.service ] ||
	fail "the unit did not land in /usr/lib through the /lib link"
run_install "$CUR" --prefix /srv/mu uninstall
ok
left=$(cd /srv/mu && find . -mindepth 1 | sort | tr '\n' ' ')
[ "$left" = "./bin ./lib ./sbin ./usr ./usr/bin ./usr/lib ./usr/sbin " ] || fail "left in /srv/mu: $left"
EOF
}

test_uninstall_through_symlink_refused() {
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
mkdir /srv/sv
run_install "$CUR" --prefix /srv/sv --init runit
ok
# /etc/sv/kubelet is now a link to a directory outside the prefix, with
# runsv's state in it: uninstall would remove its files and supervise/.
mv /srv/sv/etc/sv/kubelet /srv/outside-sv
ln -s /srv/outside-sv /srv/sv/etc/sv/kubelet
mkdir /srv/outside-sv/supervise
: >/srv/outside-sv/supervise/status
listing /srv >/tmp/l0
run_install "$CUR" --prefix /srv/sv uninstall
one_line_error "/srv/sv/etc/sv/kubelet: a symlink to /srv/outside-sv, outside /srv/sv; refusing to follow it"
listing /srv >/tmp/l1
diff -u /tmp/l0 /tmp/l1 || fail "a refused uninstall changed something"
EOF
}

test_planted_manifest_refused() {
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
mkdir /srv/m
run_install "$CUR" --prefix /srv/m --init openrc
ok
cp /srv/m$M /tmp/manifest
echo precious >/srv/victim
mkdir /srv/victim-dir
echo precious >/srv/m/etc/hostname
# planted FILE LINE WORDS : LINE added to the state file FILE is refused by
# install and uninstall with one line saying WORDS, and nothing changes.
planted() {
	cp /tmp/manifest /srv/m$M
	rm -f /srv/m/var/lib/kubedist/install.journal
	printf '%s\n' "$2" >>"/srv/m/var/lib/kubedist/$1"
	listing /srv >/tmp/l0
	for action in install uninstall; do
		run_install "$CUR" $action --prefix /srv/m
		one_line_error "/srv/m/var/lib/kubedist/$1 line "
		said "$3"
		listing /srv >/tmp/l1
		diff -u /tmp/l0 /tmp/l1 || fail "a refused $action changed something"
	done
}
planted install.manifest "main${TAB}file${TAB}0644${TAB}$(sha /srv/victim)${TAB}/../victim" \
	"'/../victim' is not a plain absolute path"
planted install.manifest "main${TAB}dir${TAB}0755${TAB}-${TAB}/../victim-dir" \
	"'/../victim-dir' is not a plain absolute path"
planted install.manifest "main${TAB}file${TAB}0644${TAB}$(sha /srv/m/etc/hostname)${TAB}/etc/hostname" \
	"'/etc/hostname' is not a file this release installs"
planted install.journal "main${TAB}file${TAB}0644${TAB}$(sha /srv/victim)${TAB}/../victim" \
	"'/../victim' is not a plain absolute path"
[ -f /srv/victim ] && [ -d /srv/victim-dir ] && [ -f /srv/m/etc/hostname ] || fail "a planted line removed something"

echo "== the manifest as install.sh wrote it: uninstall works"
cp /tmp/manifest /srv/m$M
rm -f /srv/m/var/lib/kubedist/install.journal
run_install "$CUR" uninstall --prefix /srv/m
ok
EOF
}

test_first_install_not_an_interrupted_run() {
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
mkdir /srv/empty
run_install "$CUR" --prefix /srv/empty --init openrc
ok
not_said "completing an interrupted earlier run"
run_install "$CUR" --prefix /srv/empty uninstall
ok
[ -z "$(ls -A /srv/empty)" ] || fail "uninstall left: $(ls -A /srv/empty)"
EOF
}

# --- L: stale locks --------------------------------------------------------

new_root "$LOWER_OPENRC"
ROOT_L=$NEW_ROOT
new_root "$LOWER_OPENRC"
ROOT_L2=$NEW_ROOT

test_stale_lock_of_killed_pid_1() {
	kd_in_root_offline "$ROOT_L" "$PRELUDE" <<'EOF'
# install.sh as PID 1 of a PID namespace of its own (as in a container),
# held at /usr/bin/kubectl, then killed with its namespace.
KUBEDIST_INSTALL_TEST_STOP_AFTER=/usr/bin/kubectl \
	unshare --pid --fork --kill-child --mount-proc "$CUR/install.sh" >/tmp/pid1.out 2>&1 &
us=$!
at_kubectl() {
	[ "$(cat /var/lib/kubedist/lock/pid)" = 1 ] &&
		[ "$(sha /usr/bin/kubectl)" = "$(payload_sum "$CUR" any /usr/bin/kubectl)" ]
}
wait_until 60 at_kubectl || { cat /tmp/pid1.out; fail "install.sh (pid 1) did not hold at /usr/bin/kubectl"; }
# (unshare's child, install.sh, dies with it: --kill-child)
kill -KILL "$us" 2>/dev/null || true
set +e
wait "$us"
set -e
cat /tmp/pid1.out
[ -d /var/lib/kubedist/lock ] || fail "the run as pid 1 left no lock: it was not killed half way"
echo "== here pid 1 is this script, alive: the lock's pid, not its process"
run_install "$CUR"
ok
said "taking over the stale lock /var/lib/kubedist/lock: pid 1 is now another process"
said "completing an interrupted earlier run"
check_landed "$CUR" deb openrc
[ ! -e /var/lib/kubedist/lock ] || fail "the lock is still there"
EOF
}

test_stale_lock_of_reused_pid() {
	kd_in_root_offline "$ROOT_L2" "$PRELUDE" <<'EOF'
# Some processes first, so that the installer's pid is higher than any
# this namespace's next one starts with.
while :; do
	sh -c : &
	wait $!
	[ $! -lt 200 ] || break
done
kill_install_after /usr/bin/kubectl
set +e
wait "$inst"
set -e
[ "$(cat /var/lib/kubedist/lock/pid)" = "$inst" ] || fail "the lock does not name pid $inst"
echo "$inst" >/tmp/old-pid
EOF
	# A new PID namespace, as after a reboot: another process gets that pid.
	kd_in_root_offline "$ROOT_L2" "$PRELUDE" <<'EOF'
old=$(cat /tmp/old-pid)
while :; do
	sleep 600 &
	p=$!
	[ "$p" -lt "$old" ] || break
	kill "$p"
done
[ "$p" = "$old" ] || fail "could not start a process with pid $old (got $p)"
run_install "$CUR"
ok
said "taking over the stale lock /var/lib/kubedist/lock: pid $old is now another process"
said "completing an interrupted earlier run"
check_landed "$CUR" deb openrc

echo "== a lock from an earlier boot, whose pid and start time match a process now"
mkdir /var/lib/kubedist/lock
echo "$p" >/var/lib/kubedist/lock/pid
sed 's/.*) //' /proc/$p/stat | cut -d ' ' -f 20 >/var/lib/kubedist/lock/start_time
echo 00000000-0000-4000-8000-000000000000 >/var/lib/kubedist/lock/boot_id
run_install "$CUR"
ok
said "taking over the stale lock /var/lib/kubedist/lock: pid $p ran before the last boot"
said "nothing to do"
echo "== the same lock from this boot: its owner runs"
mkdir /var/lib/kubedist/lock
echo "$p" >/var/lib/kubedist/lock/pid
sed 's/.*) //' /proc/$p/stat | cut -d ' ' -f 20 >/var/lib/kubedist/lock/start_time
cat /proc/sys/kernel/random/boot_id >/var/lib/kubedist/lock/boot_id
run_install "$CUR"
[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
said "another install.sh (pid $p) is running"
kill "$p"
rm -r /var/lib/kubedist/lock
EOF
}

# --- T: temporary files ----------------------------------------------------

new_root "$LOWER_OPENRC"
ROOT_T=$NEW_ROOT

test_enospc_leaves_no_temporary_file() {
	# A prefix with room for crictl and kubeadm, not for kubectl (mounted
	# here, in the suite's mount namespace: the root has no mount(8)).
	mkdir "$ROOT_T/srv/small"
	mount -t tmpfs -o size=8m tmpfs "$ROOT_T/srv/small"
	status=0
	kd_in_root_offline "$ROOT_T" "$PRELUDE" <<'EOF' || status=$?
set +e
"$CUR/install.sh" --prefix /srv/small --init openrc >/tmp/stdout 2>/tmp/stderr
rc=$?
set -e
cat /tmp/stdout /tmp/stderr
[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
[ "$(wc -l </tmp/stderr)" = 1 ] || fail "expected one line of error"
grep -qF "/srv/small/usr/bin/kubectl: cannot write: No space left on device" /tmp/stderr ||
	fail "the error does not name /srv/small/usr/bin/kubectl and ENOSPC"
left=$(find /srv/small -name '*kubedist-tmp*')
[ -z "$left" ] || fail "temporary files left: $left"
run_install "$CUR" uninstall --prefix /srv/small
ok
[ -z "$(ls -A /srv/small)" ] || fail "uninstall left: $(ls -A /srv/small)"
EOF
	umount "$ROOT_T/srv/small"
	return "$status"
}

test_leftovers_of_killed_run_removed() {
	kd_in_root_offline "$ROOT_T" "$PRELUDE" <<'EOF'
run_install "$CUR"
ok
# plant : what a run killed while writing kubectl, bridge and the manifest
# leaves behind, and a file of that name elsewhere, which is not ours.
plant() {
	head -c 4000000 /dev/zero >/usr/bin/.kubectl.kubedist-tmp
	head -c 1000 /dev/zero >/opt/cni/bin/.bridge.kubedist-tmp
	: >/var/lib/kubedist/.install.manifest.kubedist-tmp
	: >/root/.notes.kubedist-tmp
}
plant
run_install "$CUR"
ok
said "removed /usr/bin/.kubectl.kubedist-tmp, left by an interrupted run"
said "nothing to do"
for f in /usr/bin/.kubectl.kubedist-tmp /opt/cni/bin/.bridge.kubedist-tmp /var/lib/kubedist/.install.manifest.kubedist-tmp; do
	[ ! -e "$f" ] || fail "$f is still there"
done
plant
run_install "$CUR" uninstall
ok
left=$(find /usr /opt /etc /var -name '*kubedist-tmp*')
[ -z "$left" ] || fail "left after uninstall: $left"
[ ! -e /var/lib/kubedist ] || fail "/var/lib/kubedist is still there"
[ -f /root/.notes.kubedist-tmp ] || fail "a file install.sh does not write to was removed"
EOF
}

# --- F: files that are not install.sh's ------------------------------------

new_root "$LOWER_OPENRC"
ROOT_F=$NEW_ROOT

test_foreign_files_refused_or_displaced() {
	kd_in_root_offline "$ROOT_F" "$PRELUDE" <<'EOF'
echo "== a vendor's /opt/cni/bin/loopback"
mkdir -p /opt/cni/bin
printf '#!/bin/sh\necho vendor loopback\n' >/opt/cni/bin/loopback
chmod 0755 /opt/cni/bin/loopback
cp -p /opt/cni/bin/loopback /tmp/loopback
listing / >/tmp/l0
run_install "$CUR"
one_line_error "/opt/cni/bin/loopback was not installed by install.sh and no package owns it"
said "pass --replace-foreign to replace it"
listing / >/tmp/l1
diff -u /tmp/l0 /tmp/l1 || fail "a refused install changed the root"

echo "== /usr/bin/kubectl of a Debian package (kubernetes-client, as in Debian)"
mkdir -p /tmp/kc/DEBIAN /tmp/kc/usr/bin
printf '#!/bin/sh\necho kubectl of Debian\n' >/tmp/kc/usr/bin/kubectl
chmod 0755 /tmp/kc/usr/bin/kubectl
cat >/tmp/kc/DEBIAN/control <<'CONTROL'
Package: kubernetes-client
Version: 1.20.5+really1.20.2-1.1
Architecture: all
Maintainer: kubedist tests <tests@kubedist.invalid>
Description: test stand-in for Debian's kubernetes-client (/usr/bin/kubectl)
CONTROL
dpkg-deb --root-owner-group --build /tmp/kc /tmp/kc.deb
dpkg -i /tmp/kc.deb
dpkg -S /usr/bin/kubectl | grep -q '^kubernetes-client: ' || fail "dpkg does not own /usr/bin/kubectl"
cp -p /usr/bin/kubectl /tmp/kubectl
snapshot /tmp/s0 mtime /srv/kd
listing / >/tmp/l0
run_install "$CUR"
one_line_error "/usr/bin/kubectl belongs to the Debian package kubernetes-client, not to install.sh"
said "pass --replace-foreign to replace it (the original is kept as /var/lib/kubedist/displaced/usr/bin/kubectl and restored on uninstall)"
listing / >/tmp/l1
diff -u /tmp/l0 /tmp/l1 || fail "a refused install changed the root"

echo "== --replace-foreign: replaced, the originals kept aside"
run_install "$CUR" --replace-foreign
ok
said "keep the original /usr/bin/kubectl as /var/lib/kubedist/displaced/usr/bin/kubectl (--replace-foreign)"
said "keep the original /opt/cni/bin/loopback as /var/lib/kubedist/displaced/opt/cni/bin/loopback (--replace-foreign)"
check_landed "$CUR" deb openrc
cmp /tmp/kubectl /var/lib/kubedist/displaced/usr/bin/kubectl || fail "the kept kubectl is not the original"
cmp /tmp/loopback /var/lib/kubedist/displaced/opt/cni/bin/loopback || fail "the kept loopback is not the original"
run_install "$CUR"
ok
said "nothing to do"

echo "== uninstall puts the originals back"
run_install "$CUR" uninstall
ok
said "restore the original /usr/bin/kubectl"
said "restore the original /opt/cni/bin/loopback"
dpkg -V kubernetes-client || fail "dpkg -V: kubernetes-client's files are not as dpkg installed them"
snapshot /tmp/s2 mtime /srv/kd
same_snapshot /tmp/s0 /tmp/s2 "uninstall did not bring back the root as it was"
EOF
}

# --- V: a signed tarball (dist --sign) and install.sh --verify-key ----------

# A signing key (protected, as a real one is) and a foreign one, made by gpg
# in a home of our own.
KEY_PASSPHRASE=kubedist-test
tb_gpg() { gpg --homedir "$TB/gnupg" --batch --pinentry-mode loopback --passphrase "$KEY_PASSPHRASE" "$@"; }

new_root "$LOWER_OPENRC"
ROOT_V=$NEW_ROOT

test_signed_tarball_verified_before_anything() {
	mkdir -m 0700 "$TB/gnupg"
	tb_gpg --quick-gen-key "kubedist dist test <dist@kubedist.invalid>" ed25519 sign never
	tb_gpg --quick-gen-key "someone else <other@kubedist.invalid>" ed25519 sign never
	mkdir -p "$TB/keys"
	tb_gpg --armor --export-secret-keys dist@kubedist.invalid >"$TB/keys/sign.key"
	tb_gpg --armor --export dist@kubedist.invalid >"$TB/keys/sign.asc"
	tb_gpg --export dist@kubedist.invalid >"$TB/keys/sign.gpg"
	tb_gpg --armor --export other@kubedist.invalid >"$TB/keys/other.asc"
	tb_gpg --export other@kubedist.invalid >"$TB/keys/other.gpg"
	# A key rotation: the other key first, the signing key second.
	cat "$TB/keys/other.asc" "$TB/keys/sign.asc" >"$TB/keys/rotation.asc"
	cat "$TB/keys/other.gpg" "$TB/keys/sign.gpg" >"$TB/keys/rotation.gpg"
	gpgconf --homedir "$TB/gnupg" --kill gpg-agent >/dev/null 2>&1 || true

	echo "== cargo xtask dist --sign"
	(cd "$KD_REPO" && KUBEDIST_KEY_PASSPHRASE=$KEY_PASSPHRASE cargo xtask dist --fixtures --arch amd64 \
		--formats tar --fast --sign "$TB/keys/sign.key" --out "$TB/signed") >&2
	GNUPGHOME=$TB/gnupg gpgv --keyring "$TB/keys/sign.gpg" "$TB/signed/SHA256SUMS.asc" "$TB/signed/SHA256SUMS"
	cp "$TB/signed/SHA256SUMS.asc" "$TB/first.asc"
	(cd "$KD_REPO" && KUBEDIST_KEY_PASSPHRASE=$KEY_PASSPHRASE cargo xtask dist --fixtures --arch amd64 \
		--formats tar --fast --sign "$TB/keys/sign.key" --out "$TB/signed") >&2
	cmp "$TB/first.asc" "$TB/signed/SHA256SUMS.asc" || {
		echo "assertion failed: the signature of SHA256SUMS differs between two runs" >&2
		return 1
	}
	# A reader's check of the release and its provenance, as
	# docs/supply-chain.md shows it (its release is 1.37.2-1), in a copy of
	# the release's files with the public key beside them.
	release=$(kd_one "$TB/signed"/kubedist-*.intoto.json)
	release=${release##*/kubedist-}
	release=${release%.intoto.json}
	cp -a "$TB/signed" "$TB/check"
	cp "$TB/keys/sign.gpg" "$TB/check/kubedist.gpg"
	kd_guide_block docs/supply-chain.md check-release 1.37.2-1 "$release" >"$TB/check.sh"
	(cd "$TB/check" && GNUPGHOME=$TB/gnupg sh -eu "$TB/check.sh") >"$TB/check.out" 2>&1 || {
		cat "$TB/check.out" >&2
		echo "assertion failed: the release check docs/supply-chain.md shows fails" >&2
		return 1
	}
	cat "$TB/check.out" >&2
	assert_grep "kubedist-$release.intoto.json: OK" "$TB/check.out"
	assert_grep "^kubedist-.*-linux-amd64.tar.gz: OK" "$TB/check.out"

	r=$ROOT_V
	mkdir -p "$r/srv/kd/signed" "$r/srv/kd/keys"
	tar -xzf "$(kd_one "$TB/signed"/kubedist-*-linux-amd64.tar.gz)" -C "$r/srv/kd/signed"
	cp "$TB/keys/sign.asc" "$TB/keys/sign.gpg" "$TB/keys/other.asc" \
		"$TB/keys/rotation.asc" "$TB/keys/rotation.gpg" "$r/srv/kd/keys/"
	# The install docs/supply-chain.md shows, with this test's key.
	kd_guide_block docs/supply-chain.md verify-key /root/kubedist.asc /srv/kd/keys/sign.asc >"$r/srv/kd/guide-verify-key.sh"
	kd_in_root_offline "$r" "$PRELUDE" <<'EOF'
SIGNED=$(echo /srv/kd/signed/kubedist-*-linux-amd64)
[ -f "$SIGNED/SHA256SUMS.asc" ] || fail "the signed tarball holds no SHA256SUMS.asc"
grep -q 'SHA256SUMS.asc' "$SIGNED/SHA256SUMS" && fail "SHA256SUMS lists its own signature"
cp -a "$SIGNED" /tmp/pristine
snapshot /tmp/s0 mtime /srv/kd
# refused HOW KEY EXPECTED-WORDS : a copy of the signed tarball changed by
# HOW is refused with --verify-key KEY, in one line, and nothing is written.
refused() {
	rm -rf /tmp/t
	cp -a /tmp/pristine /tmp/t
	echo "== $1 (--verify-key $2)"
	sh -c "$1"
	run_install /tmp/t --verify-key "$2"
	[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
	[ "$(wc -l </tmp/out)" = 1 ] || fail "expected one line of error"
	said "$3"
	snapshot /tmp/s1 mtime /srv/kd
	same_snapshot /tmp/s0 /tmp/s1 "a refused install changed the root"
}
refused true /srv/kd/keys/other.asc "/tmp/t/SHA256SUMS.asc: not a good signature of SHA256SUMS by the key in /srv/kd/keys/other.asc"
# A changed SHA256SUMS, even one that still matches its files, is refused by
# its signature, before any checksum is looked at.
refused 'printf x >>/tmp/t/payload/any/usr/bin/kubectl && (cd /tmp/t && grep -v "  SHA256SUMS" SHA256SUMS | sed "s|^[0-9a-f]*  payload/any/usr/bin/kubectl\$|$(sha256sum payload/any/usr/bin/kubectl | cut -c1-64)  payload/any/usr/bin/kubectl|" >S && mv S SHA256SUMS)' \
	/srv/kd/keys/sign.asc "/tmp/t/SHA256SUMS.asc: not a good signature of SHA256SUMS by the key in /srv/kd/keys/sign.asc"
refused 'rm /tmp/t/SHA256SUMS.asc' /srv/kd/keys/sign.asc "/tmp/t/SHA256SUMS.asc: missing: this tarball is not signed"
refused 'printf "not a key\n" >/tmp/key' /tmp/key "/tmp/t/SHA256SUMS.asc: not a good signature of SHA256SUMS by the key in /tmp/key"
echo "== neither gpgv nor sqv"
mv /usr/bin/gpgv /usr/bin/gpgv.off
command -v sqv && fail "sqv is installed here: the test proves nothing"
snapshot /tmp/n0 mtime /srv/kd
run_install "$SIGNED" --verify-key /srv/kd/keys/sign.asc
[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
one_line_error "--verify-key: neither gpgv nor sqv is installed, so $SIGNED/SHA256SUMS.asc cannot be checked"
snapshot /tmp/n1 mtime /srv/kd
same_snapshot /tmp/n0 /tmp/n1 "a refused install changed the root"
mv /usr/bin/gpgv.off /usr/bin/gpgv
echo "== the unsigned tarball is refused with --verify-key, installs without"
run_install "$CUR" --verify-key /srv/kd/keys/sign.asc --dry-run
[ "$rc" = 1 ] || fail "install.sh exited with $rc, expected 1"
said "SHA256SUMS.asc: missing: this tarball is not signed"
echo "== a good signature installs (armoured key; binary key)"
run_install "$SIGNED" --verify-key /srv/kd/keys/sign.gpg --dry-run
ok
said "SHA256SUMS: good signature by the key in /srv/kd/keys/sign.gpg (gpgv)"
echo "== a key rotation: several keys in one file, the signing one not first (armoured; binary)"
for k in rotation.asc rotation.gpg; do
	run_install "$SIGNED" --verify-key /srv/kd/keys/$k --dry-run
	ok
	said "SHA256SUMS: good signature by the key in /srv/kd/keys/$k (gpgv)"
done
echo "== docs/supply-chain.md's install: $(cat /srv/kd/guide-verify-key.sh)"
set +e
(cd "$SIGNED" && sh -eu /srv/kd/guide-verify-key.sh) >/tmp/out 2>&1
rc=$?
set -e
sed 's/^/  | /' /tmp/out
ok
said "SHA256SUMS: good signature by the key in /srv/kd/keys/sign.asc (gpgv)"
check_landed "$SIGNED" deb openrc
echo "== the signed tarball without --verify-key: as today"
run_install "$SIGNED"
ok
said "nothing to do"
EOF
}

# --- P: the kernel prerequisites, applied only on a running host ------------

new_root "$LOWER_OPENRC"
ROOT_P=$NEW_ROOT

test_kernel_prerequisites_applied_only_on_a_running_host() {
	mkdir -p "$ROOT_P/usr/local/sbin"
	for tool in modprobe sysctl; do
		printf '#!/bin/sh\necho "%s $*" >>/var/log/kd-kernel.log\n' "$tool" >"$ROOT_P/usr/local/sbin/$tool"
		chmod 0755 "$ROOT_P/usr/local/sbin/$tool"
	done
	echo "== in a chroot whose PID 1 is outside it (an image build)"
	# PID 1 of the fresh PID namespace is the shell that chroots, outside it.
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --pid --fork --kill-child -- sh -c '
		mount -t proc proc "$1/proc"
		chroot "$1" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			sh -c "\$(echo /srv/kd/cur/kubedist-*-linux-amd64)/install.sh --init openrc"
	' chrooted "$ROOT_P" >"$TB/p.out" 2>&1 || { cat "$TB/p.out"; return 1; }
	cat "$TB/p.out"
	assert_grep '^install.sh: kernel prerequisites not applied now: running in a chroot; the boot applies /usr/lib/modules-load.d/kubernetes.conf and /usr/lib/sysctl.d/60-kubernetes.conf$' "$TB/p.out"
	assert_no_file "$ROOT_P/var/log/kd-kernel.log"
	kd_in_root_offline "$ROOT_P" "$PRELUDE" <<'EOF'
echo "== --prefix: another root, never this host's kernel"
mkdir /tmp/other
run_install "$PREV" --prefix /tmp/other --init openrc --family deb
ok
said "kernel prerequisites not applied now: installing into /tmp/other"
[ ! -e /var/log/kd-kernel.log ] || fail "modprobe or sysctl ran for --prefix"
echo "== on a running host (PID 1 in this root): an install applies them"
run_install "$CUR" uninstall
ok
run_install "$CUR"
ok
said "kernel prerequisites: loaded modules: br_netfilter overlay; applied /usr/lib/sysctl.d/60-kubernetes.conf"
printf 'modprobe br_netfilter\nmodprobe overlay\nsysctl -p /usr/lib/sysctl.d/60-kubernetes.conf\n' >/tmp/want
diff -u /tmp/want /var/log/kd-kernel.log || fail "modprobe and sysctl were not called as expected"
EOF
}

kd_test test_shellcheck_and_shells
kd_test test_help_explains_everything
kd_test test_systemd_install
kd_test test_systemd_rerun_nothing_to_do
kd_test test_systemd_upgrade_unedited_follows
kd_test test_an_older_release_is_refused_unless_downgrade
kd_test test_openrc_install_enables_and_starts
kd_test test_openrc_rerun_restarts_nothing
kd_test test_openrc_upgrade_keeps_edited_config
kd_test test_side_by_side_kubelet
kd_test test_uninstall_removes_only_what_it_installed
kd_test test_no_enable_no_start
kd_test test_dry_run_changes_nothing
kd_test test_merged_extension_is_named
kd_test test_tampered_tarball_refused
kd_test test_clean_install
kd_test test_killed_install_completes_on_rerun
kd_test test_busybox_sh
kd_test test_refuses_over_dpkg_install
kd_test test_detection_rules
kd_test test_prefix_and_destdir
kd_test test_refuses_when_dpkg_database_unreadable
kd_test test_runtime_only_when_asked_then_upgraded_with_the_node
kd_test test_runtime_on_systemd_has_the_systemd_cgroup_driver
kd_test test_runtime_refused_beside_a_package_managers_containerd
kd_test test_state_file_symlinks_not_followed
kd_test test_directory_symlinks_outside_root_refused
kd_test test_uninstall_through_symlink_refused
kd_test test_planted_manifest_refused
kd_test test_first_install_not_an_interrupted_run
kd_test test_stale_lock_of_killed_pid_1
kd_test test_stale_lock_of_reused_pid
kd_test test_enospc_leaves_no_temporary_file
kd_test test_leftovers_of_killed_run_removed
kd_test test_foreign_files_refused_or_displaced
kd_test test_signed_tarball_verified_before_anything
kd_test test_kernel_prerequisites_applied_only_on_a_running_host
kd_summary
