#!/bin/sh
# The kubelet started by a real PID 1: systemd, OpenRC and runit booted in
# containers (systemd-nspawn), each install path checked as a node operator
# would check it.
#
# - systemd 252 (Debian 12), deb family: apt-get install from a local
#   repository; enabled; before kubeadm's files exist the kubelet fails and
#   systemd restarts it every 10 s (upstream's unit, unchanged), and it runs
#   once they appear; what systemd gave it (the stand-in's record: argv and
#   environment) equals kubelet-wrapper --print for the same files, over the
#   env-file cases of ci/fixtures/env-cases (systemd's own test files and
#   hostile ones), with the known version differences asserted as such; an
#   admin drop-in's KUBELET_EXTRA_ARGS reaches it; upgrade N-1 -> N restarts
#   it once; a reboot brings it back; with an images bundle in
#   /var/lib/kubedist/images, a boot imports it into containerd between
#   containerd and the kubelet; apt-get remove stops it.
# - systemd 252, rpm family layout, through the tarball's install.sh
#   --family rpm on the same booted system: the same cases; uninstall stops
#   it and removes its files.
# - systemd 252, the sysext image: merged at boot from /var/lib/extensions;
#   after the reload 252 needs, the kubelet started through Upholds= with the
#   CNI plugins copied to /opt/cni/bin first; N -> N-1 (rollback) -> N
#   restarts it on each image. (systemd 257, which reloads by itself after
#   a merge, starts the real kubelet from the image at boot in the cluster
#   suite.)
# - the installer image run by podman in the booted host's PID namespace
#   with its root at /host, on systemd 252 and on OpenRC: the host's own
#   init system enables and starts the kubelet, which outlives the container.
# - systemd 257 (Debian 13), deb family: the env-file cases again, where
#   systemd's newer rule holds.
# - OpenRC as PID 1 (sysvinit-core + openrc) and runit as PID 1
#   (runit-init), installed by install.sh: with an images bundle, OpenRC
#   starts containerd, then kubedist-images (which imports it), then the
#   kubelet, and runit's run script imports it before it execs the kubelet.
#   The rest of their lifecycle (install, reboot, a killed kubelet, the
#   argv, uninstall) is the cluster suite's, with the real kubelet.
#
# Each root boots once and serves the tests of its group in order; the
# base roots are cached mmdebstrap tarballs under ~/.cache/kubedist/ci.
# Wall time: about 2 minutes on 2 cores with the base roots cached, 3½
# with the four built afresh (as in CI).

# shellcheck disable=SC2016 # $VAR in single quotes are for the inner shell
# shellcheck disable=SC2086 # package lists split into words on purpose
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require systemd-nspawn nsenter mmdebstrap apt-ftparchive jq tar podman
kd_require_dist

TMP=$(kd_suite_dir)

CASES=$KD_REPO/ci/fixtures/env-cases
TARBALL_PREV=$(kd_one "$KD_DIST_PREV"/kubedist-*-linux-amd64.tar.gz)
TARBALL=$(kd_one "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)
SYSEXT_PREV=$(kd_one "$KD_DIST_PREV"/kubernetes-v*-x86-64.raw)
SYSEXT=$(kd_one "$KD_DIST"/kubernetes-v*-x86-64.raw)
IMAGE=$(kd_one "$KD_DIST"/kubedist-installer-*.oci.tar)
BUNDLE=$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)

# What the packages depend on (so that apt needs no network) and the tools
# the tests use inside.
NODE_PKGS="iptables conntrack procps jq"
SYSTEMD_PKGS="systemd systemd-sysv dbus $NODE_PKGS"

# The variables systemd itself puts in a service's environment, beside what
# the unit and its env files set.
# (USER: systemd >= 256 sets it for every service.)
SYSTEMD_OWN_ENV='["PATH","LANG","INVOCATION_ID","JOURNAL_STREAM","SYSTEMD_EXEC_PID","USER"]'

# Where systemd and kubelet-wrapper are known to differ, per systemd
# version (case names of ci/fixtures/env-cases). systemd < 254 continues a
# comment line that ends in a backslash onto the next line (systemd issue
# 27975) and so drops the assignment there; kubelet-wrapper follows
# systemd >= 254, which does not.
KNOWN_DIFFERENCES_252="comment-ends-in-backslash systemd-env-file-3"
KNOWN_DIFFERENCES_257=
# Where kubelet-wrapper is stricter than every systemd, on purpose: systemd
# skips a file with a NUL byte or invalid UTF-8 (or the variable holding a
# noncharacter) and takes an open quote's value up to the end of the file,
# then starts the kubelet without the admin's flags; the wrapper refuses,
# naming the file and line (README, "kubelet-wrapper").
STRICTER="hostile-invalid-utf8 hostile-noncharacter hostile-nul hostile-unterminated-double-quote hostile-unterminated-single-quote"

# The argv every init system must give the kubelet for the reference files
# (extra-args-quoted.env and default.flags).
REFERENCE_ARGV='["/usr/bin/kubelet","--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf","--kubeconfig=/etc/kubernetes/kubelet.conf","--config=/var/lib/kubelet/config.yaml","--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock","--pod-infra-container-image=registry.k8s.io/pause:3.10.1","--node-labels=pool=a,zone=b","--v=4"]'

# Shell functions for the scripts that run inside a booted root.
PRELUDE=$(
	cat "$KD_REPO/ci/standin-helpers.sh"
	kd_function kd_listing
	cat <<'EOF'
unit() { systemctl show -p "$1" --value kubelet; }
# host_listing : every path of the host's root file system but the kernel's,
# the runtime's and the test's own scratch (/srv, /tmp, /var/log). Paths
# only: a booted init system rewrites files of its own (OpenRC's cache).
host_listing() { kd_listing / /srv /var/log | cut -f1; }
# bundle_images : how many images the bundle in /var/lib/kubedist/images holds.
bundle_images() { tar -xOf /var/lib/kubedist/images/*.oci.tar index.json | jq '.manifests | length'; }
# running_recorded : systemd runs the kubelet, and the stand-in's record is
# that process's.
running_recorded() {
	[ "$(unit SubState)" = running ] && [ -f $REC/kubelet.json ] &&
		[ "$(standin_pid)" = "$(unit MainPID)" ]
}
# write_case NAME ENV_FILE : the case's env file and kubeadm's flags, and
# kubeadm's config, as kubeadm join leaves them.
write_case() {
	mkdir -p "${2%/*}" /var/lib/kubelet
	cp "/srv/kubedist/cases/$1.env" "$2"
	flags=/srv/kubedist/cases/$1.flags
	[ -f "$flags" ] || flags=/srv/kubedist/cases/default.flags
	cp "$flags" /var/lib/kubelet/kubeadm-flags.env
	: >/var/lib/kubelet/config.yaml
}
# systemd_cases FAMILY ENV_FILE OUT : for every case, what systemd starts
# (OUT/NAME.systemd.json, the stand-in's record) or that it refuses to
# (OUT/NAME.systemd.refused), and kubelet-wrapper --print for the same files
# (OUT/NAME.wrapper.json and .rc).
systemd_cases() {
	mkdir -p "$3"
	for c in /srv/kubedist/cases/*.env; do
		name=${c##*/}
		name=${name%.env}
		write_case "$name" "$2"
		rm -f $REC/kubelet.json
		if systemctl restart kubelet 2>"$3/$name.systemctl" && wait_until 5 running_recorded; then
			cp $REC/kubelet.json "$3/$name.systemd.json"
		else
			journalctl -u kubelet -n 4 --no-pager >"$3/$name.systemd.refused" 2>&1 || true
		fi
		set +e
		kubelet-wrapper --family "$1" --wait 0 --print >"$3/$name.wrapper.json" 2>"$3/$name.wrapper.err"
		echo $? >"$3/$name.wrapper.rc"
		set -e
	done
	[ ! -e /tmp/pwned ] || fail "a case's shell syntax ran"
	systemctl stop kubelet
}
EOF
)

# compare_cases OUT KNOWN : systemd's results in OUT against the wrapper's;
# fails unless they agree exactly where KNOWN does not name the case, and
# differ where it does.
compare_cases() {
	out=$1 known=$2 bad=
	for c in "$CASES"/*.env; do
		name=${c##*/}
		name=${name%.env}
		rc=$(cat "$out/$name.wrapper.rc")
		if [ -f "$out/$name.systemd.json" ] && [ "$rc" = 0 ]; then
			sd_argv=$(jq -c .argv "$out/$name.systemd.json")
			wr_argv=$(jq -c .argv "$out/$name.wrapper.json")
			sd_env=$(jq -cS --argjson own "$SYSTEMD_OWN_ENV" \
				'.env | with_entries(select(.key as $k | $own | index($k) | not))' "$out/$name.systemd.json")
			wr_env=$(jq -cS .env "$out/$name.wrapper.json")
			if [ "$sd_argv" = "$wr_argv" ] && [ "$sd_env" = "$wr_env" ]; then
				verdict=same
			else
				verdict="differ: systemd argv $sd_argv env $sd_env; wrapper argv $wr_argv env $wr_env"
			fi
		elif [ -f "$out/$name.systemd.refused" ] && [ "$rc" = 2 ]; then
			verdict="same (both refuse: $(head -n 1 "$out/$name.wrapper.err"))"
		elif [ -f "$out/$name.systemd.refused" ]; then
			verdict="differ: systemd refused to start ($(tail -n 2 "$out/$name.systemd.refused" | tr '\n' ' ')), the wrapper exits $rc"
		else
			verdict="differ: systemd started the kubelet, the wrapper exits $rc ($(head -n 1 "$out/$name.wrapper.err"))"
		fi
		case " $STRICTER " in
		*" $name "*)
			case $verdict in
			"differ: systemd started the kubelet, the wrapper exits 2 ("*:[0-9]*) echo "case $name: stricter on purpose: $verdict" ;;
			*) echo "case $name: $verdict, but the wrapper should refuse it where systemd starts"; bad=1 ;;
			esac
			continue
			;;
		esac
		case " $known " in
		*" $name "*)
			case $verdict in
			same*) echo "case $name: $verdict, but it is listed as a known difference"; bad=1 ;;
			*) echo "case $name: known difference: $verdict" ;;
			esac
			;;
		*)
			echo "case $name: $verdict"
			case $verdict in same*) ;; *) bad=1 ;; esac
			;;
		esac
	done
	[ -z "$bad" ] || fail "systemd and kubelet-wrapper disagree (above)"
}

fail() {
	echo "FAIL: $*" >&2
	return 1
}

# in_boot NAME : the script on stdin, with PRELUDE, inside the booted NAME.
in_boot() {
	kd_boot_script "$1" "$PRELUDE"
}

# A local apt repository of each release's debs, as an operator's mirror
# serves them (unsigned here: t-repo checks the signed one). N-1's debs as
# releases before the move of the units to /usr/lib/systemd/system shipped
# them, so that the upgrades here move them.
make_repos() {
	[ ! -d "$TMP/repo" ] || return 0
	kd_debs_units_under_lib "$KD_DIST_PREV" "$TMP/prev-debs"
	for r in prev cur; do
		if [ $r = prev ]; then d=$TMP/prev-debs; else d=$KD_DIST; fi
		mkdir -p "$TMP/repo/$r"
		cp "$d"/*.deb "$TMP/repo/$r/"
		(cd "$TMP/repo/$r" && apt-ftparchive packages . >Packages && apt-ftparchive release . >Release)
	done
}

# new_boot_root NAME CODENAME PACKAGE... : a fresh root for NAME from the
# cached base tarball, with the repositories, the tarballs and the cases
# under /srv/kubedist. Prints its path.
new_boot_root() {
	name=$1 codename=$2
	shift 2
	base=$(
		# shellcheck disable=SC2034 # read by kd_base_tarball
		KD_SUITE_CODENAME=$codename
		kd_base_tarball "boot-$name" "$@"
	)
	make_repos
	r=$TMP/root-$name
	rm -rf "$r"
	mkdir -p "$r"
	tar -xf "$base" -C "$r" --numeric-owner
	mkdir -p "$r/srv/kubedist/cases"
	cp -a "$TMP/repo" "$r/srv/kubedist/repo"
	cp "$CASES"/*.env "$CASES"/*.flags "$r/srv/kubedist/cases/"
	cp "$TARBALL_PREV" "$r/srv/kubedist/prev.tar.gz"
	cp "$TARBALL" "$r/srv/kubedist/cur.tar.gz"
	echo "deb [trusted=yes] file:/srv/kubedist/repo/prev ./" >"$r/etc/apt/sources.list.d/kubedist.list"
	printf '%s\n' "$r"
}

# boot NAME CODENAME KIND PACKAGE... : boots NAME, building its root on
# first use.
boot() {
	name=$1 codename=$2 kind=$3
	shift 3
	kd_booted "$name" && return 0
	[ -d "$TMP/root-$name" ] || new_boot_root "$name" "$codename" "$@" >/dev/null
	# /run/kubedist, where the installer image stages its payload, is also
	# a directory of the host (image_install).
	kd_boot "$name" "$TMP/root-$name" "$kind" "$(kd_installer_bind "$name")"
}

boot_sd252() { boot sd252 bookworm systemd $SYSTEMD_PKGS containerd; }
boot_sd257() { boot sd257 trixie systemd $SYSTEMD_PKGS; }

# The apt-get update of our repository alone: the Debian lists came with
# the root, and the host needs no network.
APT_UPDATE='apt-get update -qq -o Dir::Etc::SourceList=/etc/apt/sources.list.d/kubedist.list -o Dir::Etc::SourceParts=- -o APT::Get::List-Cleanup=0'
PACKAGES="kubelet kubeadm kubectl kubernetes-cni cri-tools"

# --- systemd 252, deb family ------------------------------------------------

test_systemd252_deb_apt_install_enables_and_starts() {
	boot_sd252
	in_boot sd252 <<EOF
$APT_UPDATE
apt-get install -y -q $PACKAGES
systemctl is-enabled kubelet | grep -qx enabled || fail "kubelet.service is not enabled"
grep -q 'EnvironmentFile=-/etc/default/kubelet' /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
EOF
	in_boot sd252 <<'EOF'
# Before kubeadm has run: upstream's unit, so systemd starts the kubelet,
# which fails at once, and restarts it every 10 s; it never gives up.
systemctl start kubelet
wait_until 5 has_starts 1 || fail "systemd did not start the kubelet"
wait_until 5 sh -c '[ "$(systemctl show -p SubState --value kubelet)" = auto-restart ]' ||
	fail "the kubelet is not in systemd's restart loop: $(systemctl status kubelet --no-pager)"
echo "before kubeadm: $(starts) start(s), state $(unit ActiveState)/$(unit SubState)"
# kubeadm join writes its files; systemd's next restart runs the kubelet.
write_case extra-args-quoted /etc/default/kubelet
wait_until 15 running_recorded || fail "the kubelet did not start within a restart period after kubeadm's files appeared"
echo "after kubeadm: running, pid $(standin_pid)"
jq -c .argv $REC/kubelet.json
EOF
	kd_in_boot sd252 cat /tmp/kubedist-standin/kubelet.json | jq -c .argv >"$TMP/sd252-argv"
	assert_eq "$REFERENCE_ARGV" "$(cat "$TMP/sd252-argv")" "argv systemd 252 gave the kubelet"
	kd_in_boot sd252 kubelet-wrapper --family deb --print | jq -c .argv >"$TMP/sd252-wrapper-argv"
	assert_eq "$REFERENCE_ARGV" "$(cat "$TMP/sd252-wrapper-argv")" "argv of kubelet-wrapper --print"
}

test_systemd252_deb_env_file_cases() {
	boot_sd252
	in_boot sd252 <<'EOF'
cp /etc/default/kubelet /tmp/default-kubelet.saved
systemd_cases deb /etc/default/kubelet /srv/kubedist/results-252-deb
cp /tmp/default-kubelet.saved /etc/default/kubelet
EOF
	compare_cases "$TMP/root-sd252/srv/kubedist/results-252-deb" "$KNOWN_DIFFERENCES_252"
	# What 252 does, exactly: the assignment after the comment is gone.
	out=$TMP/root-sd252/srv/kubedist/results-252-deb
	assert_eq null "$(jq -r '.env.KUBELET_EXTRA_ARGS' "$out/comment-ends-in-backslash.systemd.json")" \
		"KUBELET_EXTRA_ARGS under systemd 252 after a comment ending in a backslash"
	assert_eq "--node-labels=lost=on-252" "$(jq -r '.env.KUBELET_EXTRA_ARGS' "$out/comment-ends-in-backslash.wrapper.json")" \
		"KUBELET_EXTRA_ARGS in kubelet-wrapper --print"
	# ... and the wrapper says so.
	jq -r '.warnings[]' "$out/comment-ends-in-backslash.wrapper.json" | grep -q 'systemd < 254' ||
		fail "kubelet-wrapper --print does not warn about the comment ending in a backslash"
}

test_systemd252_deb_admin_dropin_reaches_the_kubelet() {
	boot_sd252
	in_boot sd252 <<'EOF'
write_case empty /etc/default/kubelet
# The package's default env file assigns nothing, so a drop-in's
# Environment= is not overridden by it.
cp /usr/share/kubedist/seed/etc/default/kubelet /etc/default/kubelet
mkdir -p /etc/systemd/system/kubelet.service.d
printf '%s\n' '[Service]' 'Environment="KUBELET_EXTRA_ARGS=--node-labels=from=dropin --v=2"' \
	>/etc/systemd/system/kubelet.service.d/20-admin.conf
systemctl daemon-reload
systemctl restart kubelet
wait_until 5 running_recorded || fail "the kubelet did not start"
jq -c '.argv[-2:]' $REC/kubelet.json | grep -qxF '["--node-labels=from=dropin","--v=2"]' ||
	fail "the drop-in's KUBELET_EXTRA_ARGS did not reach the kubelet: $(jq -c .argv $REC/kubelet.json)"
[ "$(jq -c .argv $REC/kubelet.json)" = "$(KUBELET_EXTRA_ARGS='--node-labels=from=dropin --v=2' kubelet-wrapper --family deb --print | jq -c .argv)" ] ||
	fail "kubelet-wrapper, given the drop-in's Environment=, plans another argv"
rm /etc/systemd/system/kubelet.service.d/20-admin.conf
systemctl daemon-reload
EOF
}

test_systemd252_deb_upgrade_restarts_once() {
	boot_sd252
	in_boot sd252 <<EOF
write_case extra-args-quoted /etc/default/kubelet
echo '# edited by the admin' >>/etc/default/kubelet
systemctl restart kubelet
wait_until 5 running_recorded || fail "the kubelet did not start"
before=\$(starts)
old=\$(standin_pid)
echo "deb [trusted=yes] file:/srv/kubedist/repo/cur ./" >/etc/apt/sources.list.d/kubedist.list
$APT_UPDATE
apt-get install -y -q $PACKAGES
dpkg-query -W -f '\${Version}\n' kubelet | grep -q -- '-2\$' || fail "kubelet was not upgraded"
wait_until 10 running_recorded || fail "the kubelet is not running after the upgrade"
sleep 2
[ "\$(starts)" = \$((before + 1)) ] || fail "the upgrade started the kubelet \$((\$(starts) - before)) times, not once"
[ "\$(standin_pid)" != "\$old" ] || fail "the kubelet was not restarted"
tail -n 1 /etc/default/kubelet | grep -qx '# edited by the admin' || fail "the upgrade lost the admin's edit"
# N-1's units were under /lib, N's under /usr/lib: one directory here.
dpkg-query -L kubelet | grep -qx /usr/lib/systemd/system/kubelet.service || fail "kubelet.service is not under /usr/lib"
systemctl show -p DropInPaths --value kubelet | grep -q lib/systemd/system/kubelet.service.d/10-kubeadm.conf ||
	fail "systemd lost kubeadm's drop-in: \$(systemctl show -p DropInPaths --value kubelet)"
echo "upgraded; restarted once (pid \$old -> \$(standin_pid))"
EOF
}

test_systemd252_deb_reboot_brings_it_back() {
	boot_sd252
	kd_reboot sd252
	in_boot sd252 <<'EOF'
systemctl is-enabled kubelet | grep -qx enabled || fail "not enabled after the reboot"
wait_until 15 running_recorded || fail "the kubelet does not run after the reboot"
jq -c .argv $REC/kubelet.json
EOF
}

# place_bundle DIR : what install.sh --images leaves in a root's
# /var/lib/kubedist/images: the images bundle and its SHA256SUMS.
place_bundle() { kd_bundle_dir "$1" "$BUNDLE"; }

test_systemd252_deb_images_imported_before_the_kubelet_at_boot() {
	boot_sd252
	d=$TMP/root-sd252/var/lib/kubedist/images
	place_bundle "$d"
	kd_reboot sd252
	in_boot sd252 <<'EOF'
wait_until 30 sh -c '[ "$(systemctl show -p ActiveState --value kubedist-images)" = active ]' ||
	fail "kubedist-images.service did not run at boot: $(systemctl status kubedist-images --no-pager)"
journalctl -b -o cat --no-pager -u kubedist-images.service | grep 'kubedist-images: '
[ "$(journalctl -b -o cat --no-pager -u kubedist-images.service | grep -c ': imported (sha256:')" = "$(bundle_images)" ] ||
	fail "not every image was imported"
[ "$(ctr -n k8s.io images ls -q | grep -c '^registry.k8s.io/')" = "$(bundle_images)" ] || fail "containerd does not hold the images"
# Booted in order: containerd, the import, then the kubelet.
order=$(journalctl -b -o cat --no-pager -u containerd.service -u kubedist-images.service -u kubelet.service |
	grep -E '^(Started containerd|Finished kubedist|Started kubelet)' | cut -d ' ' -f 2 | uniq | head -n 3 | tr '\n' ' ')
echo "boot order: $order"
[ "$order" = "containerd.service kubedist-images.service kubelet.service " ] || fail "not containerd, then the import, then the kubelet: $order"
EOF
	rm -rf "$d"
}

test_systemd252_deb_remove_stops_it() {
	boot_sd252
	in_boot sd252 <<EOF
wait_until 15 running_recorded || fail "the kubelet is not running"
pid=\$(standin_pid)
apt-get remove -y -q kubelet
! alive "\$pid" || fail "apt-get remove left the kubelet running"
[ "\$(unit ActiveState)" != active ] || fail "kubelet.service is still active"
apt-get purge -y -q $PACKAGES
[ ! -e /usr/bin/kubelet ] || fail "/usr/bin/kubelet is still there"
EOF
}

# --- systemd 252, rpm family, through the tarball ------------------------------

test_systemd252_tarball_rpm_family() {
	boot_sd252
	in_boot sd252 <<'EOF'
rm -rf /srv/kubedist/t && mkdir -p /srv/kubedist/t && tar -xzf /srv/kubedist/cur.tar.gz -C /srv/kubedist/t
cd /srv/kubedist/t/kubedist-*/
./install.sh --family rpm >/tmp/install.out 2>&1 || { cat /tmp/install.out; fail "install.sh failed"; }
cat /tmp/install.out
grep -q 'EnvironmentFile=-/etc/sysconfig/kubelet' /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf ||
	fail "the rpm family's drop-in does not read /etc/sysconfig/kubelet"
[ -f /etc/sysconfig/kubelet ] || fail "no /etc/sysconfig/kubelet"
[ ! -e /etc/default/kubelet ] || fail "/etc/default/kubelet is installed for the rpm family"
systemctl is-enabled kubelet | grep -qx enabled || fail "kubelet.service is not enabled"
cp /etc/sysconfig/kubelet /tmp/sysconfig-kubelet.saved
systemd_cases rpm /etc/sysconfig/kubelet /srv/kubedist/results-252-rpm
cp /tmp/sysconfig-kubelet.saved /etc/sysconfig/kubelet
EOF
	compare_cases "$TMP/root-sd252/srv/kubedist/results-252-rpm" "$KNOWN_DIFFERENCES_252"
	in_boot sd252 <<'EOF'
write_case extra-args-quoted /etc/sysconfig/kubelet
systemctl restart kubelet
wait_until 5 running_recorded || fail "the kubelet did not start"
pid=$(standin_pid)
cd /srv/kubedist/t/kubedist-*/
./install.sh uninstall
! alive "$pid" || fail "install.sh uninstall left the kubelet running"
for f in /usr/bin/kubelet /usr/lib/systemd/system/kubelet.service /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf; do
	[ ! -e "$f" ] || fail "$f is still there after uninstall"
done
systemctl is-enabled kubelet 2>/dev/null && fail "kubelet.service is still enabled"
true
EOF
}

# --- systemd 252, the sysext image ------------------------------------------

test_systemd252_sysext_upholds_the_kubelet() {
	boot_sd252
	# A vendor's plugin, which the CNI copier must leave alone.
	root=$TMP/root-sd252
	mkdir -p "$root/opt/extensions/kubernetes/prev" "$root/opt/extensions/kubernetes/cur" "$root/var/lib/extensions"
	cp "$SYSEXT_PREV" "$root/opt/extensions/kubernetes/prev/"
	cp "$SYSEXT" "$root/opt/extensions/kubernetes/cur/"
	in_boot sd252 <<EOF
[ ! -e /usr/bin/kubelet ] || fail "a kubelet is installed already"
# Flatcar and Fedora CoreOS merge extensions at boot; Debian ships the
# service disabled.
systemctl enable systemd-sysext.service
mkdir -p /opt/cni/bin
printf '#!/bin/sh\necho vendor\n' >/opt/cni/bin/portmap
chmod 0755 /opt/cni/bin/portmap
write_case extra-args-quoted /etc/sysconfig/kubelet
rm -f /etc/default/kubelet
ln -sf /opt/extensions/kubernetes/cur/${SYSEXT##*/} /var/lib/extensions/kubernetes.raw
EOF
	# The image is merged at boot, as on Flatcar.
	kd_reboot sd252
	in_boot sd252 <<'EOF'
[ -x /usr/bin/kubelet ] || fail "the image is not merged at boot: no /usr/bin/kubelet"
# systemd 252 merges at boot after the manager has loaded its units and
# does not reload it (EXTENSION_RELOAD_MANAGER=1 is honoured from v255;
# Flatcar merges in the initrd): until a reload the kubelet is not known.
[ "$(unit LoadState)" != loaded ] || [ "$(unit ActiveState)" != active ] ||
	fail "the kubelet runs before the manager was reloaded: this test no longer shows 252's rule"
systemctl daemon-reload
wait_until 20 running_recorded || fail "the kubelet did not start from the image: $(systemctl status kubelet --no-pager)"
systemctl show -p Result --value kubedist-cni-plugins | grep -qx success || fail "the CNI copier did not run"
[ "$(cat /opt/cni/bin/portmap)" = "$(printf '#!/bin/sh\necho vendor')" ] || fail "the vendor's portmap was replaced"
[ -x /opt/cni/bin/bridge ] || fail "the image's CNI plugins are not in /opt/cni/bin"
[ "$(jq -c .argv $REC/kubelet.json)" = "$(kubelet-wrapper --family rpm --print | jq -c .argv)" ] ||
	fail "the argv differs from kubelet-wrapper's"
EOF
	for step in prev cur; do
		if [ $step = prev ]; then img=$SYSEXT_PREV; else img=$SYSEXT; fi
		in_boot sd252 <<EOF
old=\$(standin_pid)
ln -sfn /opt/extensions/kubernetes/$step/${img##*/} /var/lib/extensions/kubernetes.raw
systemd-sysext refresh
systemctl daemon-reload
systemctl restart kubelet
wait_until 10 running_recorded || fail "the kubelet did not start on the $step image"
[ "\$(standin_pid)" != "\$old" ] || fail "the kubelet was not restarted"
pid=\$(standin_pid)
cmp /proc/\$pid/exe /usr/bin/kubelet || fail "the kubelet does not run the merged image's binary"
echo "$step image: \$(grep SYSEXT_VERSION_ID /usr/lib/extension-release.d/extension-release.kubernetes), kubelet pid \$pid"
EOF
		want=$(unsquashfs -cat "$img" usr/lib/extension-release.d/extension-release.kubernetes | sed -n 's/^SYSEXT_VERSION_ID=//p')
		got=$(kd_in_boot sd252 sed -n 's/^SYSEXT_VERSION_ID=//p' /usr/lib/extension-release.d/extension-release.kubernetes)
		assert_eq "$want" "$got" "the merged image's version after switching to $step"
	done
	in_boot sd252 <<'EOF'
systemctl mask --runtime --now kubelet
/usr/lib/kubedist/cni-plugins remove
rm /var/lib/extensions/kubernetes.raw
systemd-sysext refresh
systemctl daemon-reload
systemctl unmask --runtime kubelet
[ ! -e /usr/bin/kubelet ] || fail "the image is still merged"
[ -f /opt/cni/bin/portmap ] || fail "the vendor's portmap was removed"
[ ! -e /opt/cni/bin/bridge ] || fail "our copy of bridge is still there"
rm -f /opt/cni/bin/portmap /etc/sysconfig/kubelet
EOF
}

# --- systemd 252, the installer image ---------------------------------------

# image_install NAME : runs the installer image with podman in the booted
# NAME's PID namespace, its root at /host, and checks that it installed
# through the host's namespaces.
image_install() {
	kd_installer_run "$1" "$IMAGE" install --family deb >"$TMP/image.out" ||
		{ cat "$TMP/image.out"; fail "the installer image failed"; }
	cat "$TMP/image.out"
	grep -q "installing in the host's namespaces" "$TMP/image.out" ||
		fail "the image did not install through the host's namespaces"
}

test_systemd252_installer_image_on_the_booted_host() {
	boot_sd252
	in_boot sd252 <<'EOF'
# A host with no extension merged, and without the sysext test's vendor
# plugin (left behind when that test fails).
rm -f /var/lib/extensions/kubernetes.raw /opt/cni/bin/portmap
systemd-sysext unmerge >/dev/null
[ ! -e /usr/bin/kubelet ] || fail "a kubelet is installed already"
write_case extra-args-quoted /etc/default/kubelet
EOF
	image_install sd252
	in_boot sd252 <<'EOF'
systemctl is-enabled kubelet | grep -qx enabled || fail "the host's systemd did not enable the kubelet"
wait_until 15 running_recorded || fail "the host's systemd does not run the kubelet"
[ "$(jq -c .argv $REC/kubelet.json)" = "$(kubelet-wrapper --family deb --print | jq -c .argv)" ] ||
	fail "the argv differs from kubelet-wrapper's"
echo "the kubelet runs under the host's systemd, pid $(standin_pid), after the installer container ended"
EOF
}

# --- systemd 257, deb family ------------------------------------------------

test_systemd257_deb_env_file_cases() {
	boot_sd257
	in_boot sd257 <<EOF
systemctl --version | head -n 1
$APT_UPDATE
apt-get install -y -q $PACKAGES
systemctl is-enabled kubelet | grep -qx enabled || fail "kubelet.service is not enabled"
systemd_cases deb /etc/default/kubelet /srv/kubedist/results-257-deb
EOF
	compare_cases "$TMP/root-sd257/srv/kubedist/results-257-deb" "$KNOWN_DIFFERENCES_257"
}

# Debian 13, whose /lib is only a link to /usr/lib: N-1's units under /lib
# move on the upgrade, and purge warns about no directory.
test_systemd257_deb_upgrade_then_purge_without_warnings() {
	boot_sd257
	in_boot sd257 <<EOF
dpkg-query -L kubelet | grep -qx /lib/systemd/system/kubelet.service || fail "N-1's kubelet.service is not under /lib"
echo "deb [trusted=yes] file:/srv/kubedist/repo/cur ./" >/etc/apt/sources.list.d/kubedist.list
$APT_UPDATE
apt-get install -y -q $PACKAGES
dpkg-query -W -f '\${Version}\n' kubelet | grep -q -- '-2\$' || fail "kubelet was not upgraded"
systemctl show -p DropInPaths --value kubelet | grep -q lib/systemd/system/kubelet.service.d/10-kubeadm.conf ||
	fail "systemd lost kubeadm's drop-in after the upgrade"
systemctl is-enabled kubelet | grep -qx enabled || fail "kubelet.service is not enabled after the upgrade"
apt-get purge -y -q $PACKAGES >/tmp/purge.out 2>&1 || { cat /tmp/purge.out; fail "apt-get purge failed"; }
cat /tmp/purge.out
! grep 'dpkg: warning' /tmp/purge.out || fail "dpkg warned on purge (above)"
[ ! -e /usr/lib/systemd/system/kubelet.service ] || fail "kubelet.service is still there"
EOF
}

# --- OpenRC and runit as PID 1 ----------------------------------------------

boot_openrc() { boot openrc bookworm openrc sysvinit-core openrc containerd $NODE_PKGS; }

# containerd as an OpenRC service (as Alpine and Gentoo ship it; Debian's
# package has none), a bundle where install.sh --images puts it: at boot
# OpenRC starts containerd, then kubedist-images, then the kubelet.
test_openrc_pid1_images_imported_before_the_kubelet_at_boot() {
	boot_openrc
	d=$TMP/root-openrc/var/lib/kubedist/images
	in_boot openrc <<'EOF'
cat >/etc/init.d/containerd <<'RC'
#!/sbin/openrc-run
command=/usr/bin/containerd
supervisor=supervise-daemon
output_log=/var/log/containerd.log
error_log=/var/log/containerd.log
RC
chmod 755 /etc/init.d/containerd
rc-update add containerd default
rm -rf /srv/kubedist/t /tmp/kubedist-standin && mkdir -p /srv/kubedist/t && tar -xzf /srv/kubedist/cur.tar.gz -C /srv/kubedist/t
/srv/kubedist/t/kubedist-*/install.sh --no-start
write_case extra-args-quoted /etc/default/kubelet
EOF
	place_bundle "$d"
	kd_reboot openrc
	in_boot openrc <<'EOF'
wait_until 20 sh -c '[ -f /tmp/kubedist-standin/kubelet.json ] && kill -0 "$(jq -r .pid /tmp/kubedist-standin/kubelet.json)"' ||
	fail "the kubelet did not start at boot"
rc-service kubedist-images status | grep -q started || fail "kubedist-images did not run: $(rc-service kubedist-images status)"
[ "$(ctr -n k8s.io images ls -q | grep -c '^registry.k8s.io/')" = "$(bundle_images)" ] || fail "containerd does not hold the images"
# OpenRC marked each started in order: containerd, the import, the kubelet.
t() { date -r "/run/openrc/started/$1" +%s%N; }
[ "$(t containerd)" -le "$(t kubedist-images)" ] && [ "$(t kubedist-images)" -le "$(t kubelet)" ] ||
	fail "not containerd, then the import, then the kubelet: $(t containerd) $(t kubedist-images) $(t kubelet)"
echo "started in order: containerd $(t containerd), kubedist-images $(t kubedist-images), kubelet $(t kubelet)"
/srv/kubedist/t/kubedist-*/install.sh uninstall
rc-service containerd stop
rc-update del containerd default
rm -rf /var/lib/kubedist/images /tmp/kubedist-standin
EOF
}

# The tarball's block of docs/air-gapped.md, as it stands, on a booted
# OpenRC host: install.sh installs and OpenRC starts the kubelet's service,
# --dry-run has nothing left to do, and uninstall leaves the host as it
# found it.
test_openrc_pid1_the_guide_s_tarball_commands() {
	boot_openrc
	version=${TARBALL##*/kubedist-}
	version=${version%-linux-amd64.tar.gz}
	in_boot openrc <<'EOF'
# A host kubedist never touched: an earlier test's bundle directory goes.
rm -rf /srv/kubedist/g /tmp/kubedist-standin /var/lib/kubedist && mkdir -p /srv/kubedist/g
host_listing >/srv/kubedist/g.before
EOF
	{
		echo "cp /srv/kubedist/cur.tar.gz /srv/kubedist/g/kubedist-$version-linux-amd64.tar.gz"
		echo "cd /srv/kubedist/g"
		kd_guide_block docs/air-gapped.md tarball 1.37.2 "$version"
	} | in_boot openrc >"$TMP/guide-tarball.out" 2>&1 || { cat "$TMP/guide-tarball.out"; return 1; }
	cat "$TMP/guide-tarball.out"
	assert_grep '^install.sh: installing for openrc (running), family deb (found)$' "$TMP/guide-tarball.out"
	assert_grep 'Starting kubelet \.\.\. \[ ok \]' "$TMP/guide-tarball.out"
	assert_grep '^install.sh: nothing to do: everything is installed and unchanged$' "$TMP/guide-tarball.out"
	assert_grep '^install.sh: uninstalled$' "$TMP/guide-tarball.out"
	in_boot openrc <<'EOF'
# Nothing is left: no service, no file.
[ ! -e /etc/init.d/kubelet ] || fail "the kubelet's service is left"
host_listing >/srv/kubedist/g.after
diff /srv/kubedist/g.before /srv/kubedist/g.after || fail "uninstall left the host changed (above)"
rm -rf /srv/kubedist/g /srv/kubedist/g.before /srv/kubedist/g.after /tmp/kubedist-standin
EOF
}

test_openrc_pid1_installer_image_on_the_booted_host() {
	boot_openrc
	in_boot openrc <<'EOF'
rm -rf /tmp/kubedist-standin
write_case extra-args-quoted /etc/default/kubelet
# A real host's cgroup hierarchies are writable by root; nspawn mounts the
# container's read-only. The image moves its install.sh into PID 1's
# cgroups there, so that supervise-daemon outlives the container.
for m in /sys/fs/cgroup /sys/fs/cgroup/*; do
	mount -o remount,bind,rw "$m"
done
EOF
	image_install openrc
	in_boot openrc <<'EOF'
[ -L /etc/runlevels/default/kubelet ] || fail "the kubelet is not in the default runlevel"
rc-service kubelet status | grep -q started || fail "the host's OpenRC did not start the kubelet"
wait_until 10 sh -c '[ -f /tmp/kubedist-standin/kubelet.json ] && kill -0 "$(jq -r .pid /tmp/kubedist-standin/kubelet.json)"' ||
	fail "the kubelet does not run after the installer container ended"
pgrep -f '^supervise-daemon kubelet' >/dev/null || fail "supervise-daemon does not run"
echo "the kubelet runs under the host's supervise-daemon, pid $(standin_pid)"
EOF
	kd_poweroff openrc
}

boot_runit() { boot runit bookworm runit runit-init runit containerd $NODE_PKGS; }

# containerd as a runit service, a bundle where install.sh --images puts
# it: runit starts both at once, and the kubelet's run script imports the
# bundle (waiting for containerd's socket) before it execs the kubelet.
test_runit_pid1_images_imported_before_the_kubelet_at_boot() {
	boot_runit
	d=$TMP/root-runit/var/lib/kubedist/images
	in_boot runit <<'EOF'
mkdir -p /etc/sv/containerd
printf '%s\n' '#!/bin/sh' 'exec 2>&1' 'exec /usr/bin/containerd' >/etc/sv/containerd/run
chmod 755 /etc/sv/containerd/run
ln -sfn /etc/sv/containerd /etc/service/containerd
rm -rf /srv/kubedist/t /tmp/kubedist-standin && mkdir -p /srv/kubedist/t && tar -xzf /srv/kubedist/cur.tar.gz -C /srv/kubedist/t
/srv/kubedist/t/kubedist-*/install.sh
write_case extra-args-quoted /etc/default/kubelet
EOF
	kd_poweroff runit
	# This boot's log only.
	rm -f "$TMP/root-runit/var/log/kubelet/current" "$TMP/root-runit/tmp/kubedist-standin/kubelet.json"
	place_bundle "$d"
	boot_runit
	in_boot runit <<'EOF'
wait_until 60 sh -c '[ -f /tmp/kubedist-standin/kubelet.json ] && kill -0 "$(jq -r .pid /tmp/kubedist-standin/kubelet.json)"' ||
	fail "the kubelet did not start at boot"
[ "$(ctr -n k8s.io images ls -q | grep -c '^registry.k8s.io/')" = "$(bundle_images)" ] || fail "containerd does not hold the images"
# The kubelet's log: the import, then (after it) the kubelet's first start.
log=$(cat /var/log/kubelet/current)
echo "$log" | grep 'kubedist-images: '
first_import=$(echo "$log" | grep -n 'kubedist-images: registry.k8s.io/pause:.*: imported' | head -n 1 | cut -d : -f 1)
first_start=$(echo "$log" | grep -n 'kubedist recorder stand-in) started' | head -n 1 | cut -d : -f 1)
[ -n "$first_import" ] && [ -n "$first_start" ] && [ "$first_import" -lt "$first_start" ] ||
	fail "the kubelet did not start after the import (lines $first_import, $first_start)"
/srv/kubedist/t/kubedist-*/install.sh uninstall
rm -f /etc/service/containerd
rm -rf /var/lib/kubedist/images /tmp/kubedist-standin
EOF
}

kd_test test_systemd252_deb_apt_install_enables_and_starts
kd_test test_systemd252_deb_env_file_cases
kd_test test_systemd252_deb_admin_dropin_reaches_the_kubelet
kd_test test_systemd252_deb_upgrade_restarts_once
kd_test test_systemd252_deb_reboot_brings_it_back
kd_test test_systemd252_deb_images_imported_before_the_kubelet_at_boot
kd_test test_systemd252_deb_remove_stops_it
kd_test test_systemd252_tarball_rpm_family
kd_test test_systemd252_sysext_upholds_the_kubelet
kd_test test_systemd252_installer_image_on_the_booted_host
kd_poweroff sd252
kd_test test_systemd257_deb_env_file_cases
kd_test test_systemd257_deb_upgrade_then_purge_without_warnings
kd_test test_openrc_pid1_images_imported_before_the_kubelet_at_boot
kd_test test_openrc_pid1_the_guide_s_tarball_commands
kd_test test_openrc_pid1_installer_image_on_the_booted_host
kd_test test_runit_pid1_images_imported_before_the_kubelet_at_boot
kd_summary
