#!/bin/sh
# kubelet.service and kubeadm's drop-in 10-kubeadm.conf as dist renders them,
# for both families: unpacked from release N's .deb (dpkg-deb -x) and .rpm
# (rpm2cpio | cpio), never read from units/.
#
# - where they land and with which mode, and which package ships them;
# - the upstream unit and drop-in line by line (kubeadm's packages), with the
#   family's own env file in the drop-in and never the other one (failure 2
#   of §4);
# - `systemd-analyze verify` in a root holding a copy of this host's unit
#   tree: exit 0 and not one line on stderr (it exits 0 even for unknown
#   keys); a deliberately broken copy must make it complain, so the check
#   is known to read the drop-in;
# - kubelet-wrapper from the same package builds exactly the argv that the
#   rendered drop-in's ExecStart= gives (the drop-in's chain, simulated here
#   from the file itself);
# - an untouched install's argv is the one an empty KUBELET_EXTRA_ARGS= gave,
#   and an admin drop-in's Environment=KUBELET_EXTRA_ARGS=... reaches the
#   kubelet while the env file is untouched (systemd's simulated chain and
#   kubelet-wrapper --print, which takes Environment= from its environment);
# - the kernel prerequisites land where systemd-modules-load and
#   systemd-sysctl read them (systemd-analyze cat-config --root), and an
#   admin's file of the same name in /etc replaces them;
# - the tarball's systemd files are the packages' bytes.
#
# No systemd runs here; nothing is installed on the host. What a booted
# systemd (252 and 257) really gives the kubelet is ci/t-boot.sh's.
# Wall time: about 5 s on 2 cores.

# shellcheck disable=SC2016 # $VAR in single quotes are systemd's and jq's
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require dpkg-deb rpm2cpio cpio systemd-analyze jq tar sha256sum
kd_require_dist

TMP=$(kd_suite_dir)

# The host's unit tree, which systemd-analyze needs to resolve
# network-online.target, multi-user.target, ...
HOST_UNITS=/usr/lib/systemd/system
[ -f "$HOST_UNITS/multi-user.target" ] || HOST_UNITS=/lib/systemd/system

DEB_KUBELET=$(ls "$KD_DIST"/kubelet_*.deb)
DEB_KUBEADM=$(ls "$KD_DIST"/kubeadm_*.deb)
RPM_KUBELET=$(ls "$KD_DIST"/kubelet-[0-9]*.rpm)
RPM_KUBEADM=$(ls "$KD_DIST"/kubeadm-[0-9]*.rpm)
TARBALL=$(ls "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)

# The family's layout (pkg/families.toml).
family_vars() { # FAMILY
    case $1 in
    deb)
        UNITDIR=/usr/lib/systemd/system ENV_FILE=/etc/default/kubelet OTHER_ENV=/etc/sysconfig/kubelet
        # A deb ships the default as a seed that postinst puts in place.
        ENV_SHIPPED=/usr/share/kubedist/seed/etc/default/kubelet
        KUBELET_PKG=$DEB_KUBELET KUBEADM_PKG=$DEB_KUBEADM
        ;;
    rpm)
        UNITDIR=/usr/lib/systemd/system ENV_FILE=/etc/sysconfig/kubelet OTHER_ENV=/etc/default/kubelet
        ENV_SHIPPED=/etc/sysconfig/kubelet
        KUBELET_PKG=$RPM_KUBELET KUBEADM_PKG=$RPM_KUBEADM
        ;;
    esac
    UNIT=$UNITDIR/kubelet.service
    DROPIN=$UNITDIR/kubelet.service.d/10-kubeadm.conf
}

# unpack PACKAGE DIR : the package's files as its package manager would
# write them, without any package manager.
unpack() {
    mkdir -p "$2"
    case $1 in
    *.deb) dpkg-deb -x "$1" "$2" ;;
    *.rpm) (cd "$2" && rpm2cpio "$1" | cpio -idm --quiet --no-absolute-filenames) ;;
    esac
}

for f in deb rpm; do
    if [ $f = deb ]; then kubelet=$DEB_KUBELET kubeadm=$DEB_KUBEADM; else kubelet=$RPM_KUBELET kubeadm=$RPM_KUBEADM; fi
    unpack "$kubelet" "$TMP/$f-kubelet"
    unpack "$kubeadm" "$TMP/$f-kubeadm"
    # One root per family: the host's units, then both packages on top.
    mkdir -p "$TMP/$f-root/usr/lib/systemd"
    cp -a "$HOST_UNITS" "$TMP/$f-root/usr/lib/systemd/system"
    unpack "$kubelet" "$TMP/$f-root"
    unpack "$kubeadm" "$TMP/$f-root"
done
mkdir -p "$TMP/tarball"
tar -xzf "$TARBALL" -C "$TMP/tarball"

fail() {
    echo "FAIL: $*" >&2
    return 1
}

# The unit: where, which mode, which package, and upstream's keys.
check_unit() { # FAMILY
    family_vars "$1"
    pkg=$TMP/$1-kubelet
    assert_file "$pkg$UNIT"
    assert_eq 644 "$(stat -c %a "$pkg$UNIT")" "mode of $UNIT in the $1 kubelet package"
    assert_no_file "$TMP/$1-kubeadm$UNIT"
    for line in \
        'Wants=network-online.target' \
        'After=network-online.target' \
        'ExecStart=/usr/bin/kubelet' \
        'Restart=always' \
        'StartLimitInterval=0' \
        'RestartSec=10' \
        'WantedBy=multi-user.target'; do
        grep -qx -- "$line" "$pkg$UNIT" || fail "$1: $UNIT lacks the line '$line'"
    done
    # Each key in its section, as upstream has it.
    awk '/^\[/ { s = $0; next } /^[A-Za-z]/ { sub(/=.*/, ""); print s, $0 }' "$pkg$UNIT" >"$TMP/$1-unit-keys"
    cat "$TMP/$1-unit-keys"
    for sk in '[Unit] Wants' '[Unit] After' '[Service] ExecStart' '[Service] Restart' \
        '[Service] RestartSec' '[Install] WantedBy'; do
        grep -qxF "$sk" "$TMP/$1-unit-keys" || fail "$1: $UNIT: ${sk#* } is not in ${sk%% *}"
    done
}

# The drop-in: upstream's lines, the family's env file, not the other's.
check_dropin() { # FAMILY
    family_vars "$1"
    pkg=$TMP/$1-kubeadm
    assert_file "$pkg$DROPIN"
    assert_eq 644 "$(stat -c %a "$pkg$DROPIN")" "mode of $DROPIN in the $1 kubeadm package"
    assert_no_file "$TMP/$1-kubelet$DROPIN"
    cat "$pkg$DROPIN"
    grep -v -e '^#' -e '^$' "$pkg$DROPIN" >"$TMP/$1-dropin-lines"
    cat >"$TMP/$1-dropin-expected" <<EOF
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-$ENV_FILE
ExecStart=
ExecStart=/usr/bin/kubelet \$KUBELET_KUBECONFIG_ARGS \$KUBELET_CONFIG_ARGS \$KUBELET_KUBEADM_ARGS \$KUBELET_EXTRA_ARGS
EOF
    diff -u "$TMP/$1-dropin-expected" "$TMP/$1-dropin-lines" ||
        fail "$1: $DROPIN is not upstream's drop-in reading $ENV_FILE"
    # Not even in a comment: the deb once read the rpm's file (docs/lifecycle.md, failure 2).
    if grep -n -- "$OTHER_ENV" "$pkg$DROPIN"; then
        fail "$1: $DROPIN names the other family's $OTHER_ENV"
    fi
    # The file it names is the one this family's kubelet package ships.
    assert_file "$TMP/$1-kubelet$ENV_SHIPPED"
    # KUBELET_EXTRA_ARGS is shown but not assigned: an assignment here, even
    # an empty one, would win over a drop-in's Environment=.
    assert_grep '^#KUBELET_EXTRA_ARGS=$' "$TMP/$1-kubelet$ENV_SHIPPED"
    if grep -n '^[[:space:]]*[A-Za-z_]' "$TMP/$1-kubelet$ENV_SHIPPED"; then
        fail "$1: the default $ENV_FILE assigns a variable"
    fi
}

# systemd-analyze verify: no output at all, and it must see the drop-in.
check_verify() { # FAMILY
    family_vars "$1"
    root=$TMP/$1-root
    # kubelet.service with its drop-ins, and the image import it pulls in.
    assert_file "$root$UNITDIR/kubedist-images.service"
    systemd-analyze verify --man=no --root="$root" kubelet.service kubedist-images.service >"$TMP/$1-verify.out" 2>"$TMP/$1-verify.err" ||
        { cat "$TMP/$1-verify.out" "$TMP/$1-verify.err"; fail "$1: systemd-analyze verify failed"; }
    if [ -s "$TMP/$1-verify.err" ] || [ -s "$TMP/$1-verify.out" ]; then
        cat "$TMP/$1-verify.out" "$TMP/$1-verify.err"
        fail "$1: systemd-analyze verify printed something (it exits 0 on unknown keys)"
    fi
    echo "systemd-analyze verify: clean"

    # The same check on a broken copy must complain, about the drop-in by
    # name: the check above really read this family's drop-in.
    rm -rf "$TMP/$1-broken"
    cp -a "$root" "$TMP/$1-broken"
    echo 'KubedistNoSuchKey=1' >>"$TMP/$1-broken$DROPIN"
    systemd-analyze verify --man=no --root="$TMP/$1-broken" kubelet.service 2>"$TMP/$1-broken.err" || true
    cat "$TMP/$1-broken.err"
    grep -q "10-kubeadm.conf:.*KubedistNoSuchKey" "$TMP/$1-broken.err" ||
        fail "$1: systemd-analyze verify did not report the broken drop-in: it does not read $DROPIN"
    rm -rf "$TMP/$1-broken"
}

# simulate_exec ROOT DROPIN... : the argv systemd would exec, simulated from
# the drop-ins (in the order given: systemd's, by file name) for simple values
# (no quotes inside them). As in systemd, every EnvironmentFile= wins over
# every Environment=, whatever their order; among each kind the later wins.
# ExecStart='s words have $NAME replaced by the value split at spaces; an
# unset NAME, like an empty one, gives no word.
simulate_exec() {
    root=$1
    shift
    awk -v root="$root" '
        function unquote(s) { if (s ~ /^".*"$/) s = substr(s, 2, length(s) - 2); return s }
        function assign(a, s,   i) { i = index(s, "="); a[substr(s, 1, i - 1)] = unquote(substr(s, i + 1)) }
        /^Environment=/ { assign(env, unquote(substr($0, 13))) }
        /^EnvironmentFile=/ {
            f = substr($0, 17); sub(/^-/, "", f)
            while ((getline l < (root f)) > 0) if (l ~ /^[A-Z_]+=/) assign(fileenv, l)
            close(root f)
        }
        /^ExecStart=./ { exec = substr($0, 11) }
        END {
            for (k in fileenv) env[k] = fileenv[k]
            n = split(exec, w, " ")
            for (i = 1; i <= n; i++) {
                if (w[i] ~ /^\$/) { m = split(env[substr(w[i], 2)], v, " "); for (j = 1; j <= m; j++) print v[j] }
                else print w[i]
            }
        }' "$@"
}

# wrapper_argv ROOT FAMILY [NAME=VALUE...] : the argv kubelet-wrapper --print
# plans in ROOT, with ROOT stripped from the kubelet's path; NAME=VALUE go
# into its environment, where a manager's Environment= puts them.
wrapper_argv() {
    root=$1 family=$2
    shift 2
    env "$@" "$root/usr/bin/kubelet-wrapper" --root "$root" --family "$family" --print |
        jq -r '.argv[]' | sed "1s|^$root||"
}

# What systemd would exec, simulated from the rendered drop-in, against
# kubelet-wrapper --print.
check_chain() { # FAMILY
    family_vars "$1"
    root=$TMP/$1-root
    mkdir -p "$root/var/lib/kubelet" "$root${ENV_FILE%/*}" "$root${OTHER_ENV%/*}"
    echo 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels=from=kubeadm"' \
        >"$root/var/lib/kubelet/kubeadm-flags.env"
    echo "KUBELET_EXTRA_ARGS=\"--node-labels=from=$1 --v=4\"" >"$root$ENV_FILE"
    # The other family's file: neither systemd nor the wrapper reads it.
    echo 'KUBELET_EXTRA_ARGS="--node-labels=from=the-other-family"' >"$root$OTHER_ENV"
    : >"$root/var/lib/kubelet/config.yaml"

    simulate_exec "$root" "$root$DROPIN" >"$TMP/$1-systemd-argv"
    echo "== what the drop-in execs"
    cat "$TMP/$1-systemd-argv"
    grep -qx -- "--node-labels=from=$1" "$TMP/$1-systemd-argv" ||
        fail "$1: the simulated drop-in did not read $ENV_FILE"

    "$root/usr/bin/kubelet-wrapper" --root "$root" --family "$1" --print >"$TMP/$1-plan.json"
    jq -r '.argv[]' "$TMP/$1-plan.json" | sed "1s|^$root||" >"$TMP/$1-wrapper-argv"
    diff -u "$TMP/$1-systemd-argv" "$TMP/$1-wrapper-argv" ||
        fail "$1: kubelet-wrapper's argv differs from the rendered drop-in's"
    # ... reading the same files, in the drop-in's order.
    sed -n 's/^EnvironmentFile=-//p' "$root$DROPIN" >"$TMP/$1-dropin-files"
    jq -r '.files[] | select(.status == "read") | .path' "$TMP/$1-plan.json" | sed "s|^$root||" >"$TMP/$1-wrapper-files"
    diff -u "$TMP/$1-dropin-files" "$TMP/$1-wrapper-files" ||
        fail "$1: kubelet-wrapper reads other files than the drop-in"
}

# untouched_root FAMILY : a root as an untouched install leaves it (both
# packages, the default env file in place, kubeadm's flags written) and no
# admin drop-in. Sets ROOT.
untouched_root() {
    family_vars "$1"
    ROOT=$TMP/$1-untouched
    rm -rf "$ROOT"
    unpack "$KUBELET_PKG" "$ROOT"
    unpack "$KUBEADM_PKG" "$ROOT"
    # What deb's postinst does with the seed; the rpm ships it in place.
    mkdir -p "$ROOT${ENV_FILE%/*}"
    [ "$ENV_SHIPPED" = "$ENV_FILE" ] || cp "$ROOT$ENV_SHIPPED" "$ROOT$ENV_FILE"
    mkdir -p "$ROOT/var/lib/kubelet"
    echo 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"' \
        >"$ROOT/var/lib/kubelet/kubeadm-flags.env"
    : >"$ROOT/var/lib/kubelet/config.yaml"
}

# The kubelet's argv for an untouched install is what it was while the
# default still held an empty KUBELET_EXTRA_ARGS=, in systemd's simulation
# and in kubelet-wrapper alike.
check_untouched_argv() { # FAMILY
    untouched_root "$1"
    cat >"$TMP/$1-untouched-expected" <<'EOF'
/usr/bin/kubelet
--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf
--kubeconfig=/etc/kubernetes/kubelet.conf
--config=/var/lib/kubelet/config.yaml
--container-runtime-endpoint=unix:///run/containerd/containerd.sock
EOF
    simulate_exec "$ROOT" "$ROOT$DROPIN" >"$TMP/$1-untouched-systemd"
    wrapper_argv "$ROOT" "$1" >"$TMP/$1-untouched-wrapper"
    diff -u "$TMP/$1-untouched-expected" "$TMP/$1-untouched-systemd" ||
        fail "$1: the drop-in's argv changed for an untouched install"
    diff -u "$TMP/$1-untouched-expected" "$TMP/$1-untouched-wrapper" ||
        fail "$1: kubelet-wrapper's argv changed for an untouched install"
    # The same with the old default's empty assignment.
    echo 'KUBELET_EXTRA_ARGS=' >"$ROOT$ENV_FILE"
    simulate_exec "$ROOT" "$ROOT$DROPIN" | diff -u "$TMP/$1-untouched-expected" - ||
        fail "$1: the old default gave another argv"
    wrapper_argv "$ROOT" "$1" | diff -u "$TMP/$1-untouched-expected" - ||
        fail "$1: kubelet-wrapper gave another argv with the old default"
}

# An admin drop-in's Environment=KUBELET_EXTRA_ARGS=... reaches the kubelet
# while the env file is untouched; the old default's empty assignment
# swallowed it. systemd-analyze verify reads the admin drop-in cleanly.
check_admin_dropin() { # FAMILY
    untouched_root "$1"
    admin=$ROOT/etc/systemd/system/kubelet.service.d/20-extra.conf
    mkdir -p "${admin%/*}"
    printf '%s\n' '[Service]' 'Environment="KUBELET_EXTRA_ARGS=--node-labels=from=dropin --v=2"' >"$admin"
    extra=$(sed -n 's/^Environment="\(KUBELET_EXTRA_ARGS=.*\)"$/\1/p' "$admin")

    simulate_exec "$ROOT" "$ROOT$DROPIN" "$admin" >"$TMP/$1-dropin-systemd"
    wrapper_argv "$ROOT" "$1" "$extra" >"$TMP/$1-dropin-wrapper"
    cat "$TMP/$1-dropin-wrapper"
    assert_eq '--node-labels=from=dropin --v=2' "$(tail -n 2 "$TMP/$1-dropin-systemd" | tr '\n' ' ' | sed 's/ $//')" \
        "last arguments systemd would pass"
    diff -u "$TMP/$1-dropin-systemd" "$TMP/$1-dropin-wrapper" ||
        fail "$1: kubelet-wrapper's argv differs from the drop-ins'"

    # The old default: the file's empty value wins, in both.
    echo 'KUBELET_EXTRA_ARGS=' >"$ROOT$ENV_FILE"
    simulate_exec "$ROOT" "$ROOT$DROPIN" "$admin" | grep -q -- '--node-labels=from=dropin' &&
        fail "$1: the simulation lets a drop-in win over the env file"
    wrapper_argv "$ROOT" "$1" "$extra" | grep -q -- '--node-labels=from=dropin' &&
        fail "$1: kubelet-wrapper lets the environment win over the env file"

    # systemd itself parses the admin drop-in on top of ours.
    rm -rf "$TMP/$1-admin-root"
    cp -a "$TMP/$1-root" "$TMP/$1-admin-root"
    mkdir -p "$TMP/$1-admin-root/etc/systemd/system/kubelet.service.d"
    cp "$admin" "$TMP/$1-admin-root/etc/systemd/system/kubelet.service.d/"
    systemd-analyze verify --man=no --root="$TMP/$1-admin-root" kubelet.service >"$TMP/$1-admin.out" 2>&1 ||
        { cat "$TMP/$1-admin.out"; fail "$1: systemd-analyze verify failed with the admin drop-in"; }
    if [ -s "$TMP/$1-admin.out" ]; then
        cat "$TMP/$1-admin.out"
        fail "$1: systemd-analyze verify complained about the admin drop-in"
    fi
    rm -rf "$TMP/$1-admin-root"
}

# The kernel prerequisites: in the kubelet package, in the vendor
# directories systemd-modules-load and systemd-sysctl read (as systemd itself
# lists them: systemd-analyze cat-config), and replaced by an admin's file of
# the same name in /etc.
check_kernel() { # FAMILY
    family_vars "$1"
    for p in /usr/lib/modules-load.d/kubernetes.conf /usr/lib/sysctl.d/60-kubernetes.conf; do
        assert_file "$TMP/$1-kubelet$p"
        assert_eq 644 "$(stat -c %a "$TMP/$1-kubelet$p")" "mode of $p in the $1 kubelet package"
    done
    root=$TMP/$1-kernel
    rm -rf "$root"
    unpack "$KUBELET_PKG" "$root"
    systemd-analyze cat-config --root="$root" modules-load.d >"$TMP/$1-modules"
    systemd-analyze cat-config --root="$root" sysctl.d >"$TMP/$1-sysctl"
    cat "$TMP/$1-modules" "$TMP/$1-sysctl"
    assert_grep "^# $root/usr/lib/modules-load.d/kubernetes.conf\$" "$TMP/$1-modules"
    for m in br_netfilter overlay; do
        assert_grep "^$m\$" "$TMP/$1-modules"
    done
    assert_grep "^# $root/usr/lib/sysctl.d/60-kubernetes.conf\$" "$TMP/$1-sysctl"
    for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables; do
        assert_grep "^$k = 1\$" "$TMP/$1-sysctl"
    done

    # The admin's files of the same names win; ours are no longer read.
    mkdir -p "$root/etc/modules-load.d" "$root/etc/sysctl.d"
    echo 'overlay' >"$root/etc/modules-load.d/kubernetes.conf"
    echo 'net.ipv4.ip_forward = 0' >"$root/etc/sysctl.d/60-kubernetes.conf"
    systemd-analyze cat-config --root="$root" modules-load.d >"$TMP/$1-modules"
    systemd-analyze cat-config --root="$root" sysctl.d >"$TMP/$1-sysctl"
    cat "$TMP/$1-modules" "$TMP/$1-sysctl"
    assert_grep "^# $root/etc/modules-load.d/kubernetes.conf\$" "$TMP/$1-modules"
    assert_grep "^# $root/etc/sysctl.d/60-kubernetes.conf\$" "$TMP/$1-sysctl"
    if grep -e br_netfilter -e "$root/usr/lib/" "$TMP/$1-modules" "$TMP/$1-sysctl"; then
        fail "$1: systemd still reads the vendor file beside the admin's"
    fi
    rm -rf "$root"
}

# The tarball installs the packages' bytes on a systemd host of each family.
check_tarball() { # FAMILY
    family_vars "$1"
    top=$(ls -d "$TMP"/tarball/kubedist-*)
    for p in "$UNIT" "$DROPIN"; do
        line=$(awk -F '\t' -v f="$1" -v p="$p" '($1 == f || $1 == "any") && ($2 == "any" || $2 == "systemd") && $6 == p' "$top/MANIFEST")
        [ -n "$line" ] || fail "$1: the tarball's MANIFEST has no systemd entry for $p"
        echo "$line"
        assert_eq 0644 "$(echo "$line" | cut -f4)" "MANIFEST mode of $p"
        fam=$(echo "$line" | cut -f1)
        if [ "$p" = "$UNIT" ]; then pkg=$TMP/$1-kubelet; else pkg=$TMP/$1-kubeadm; fi
        cmp "$top/payload/$fam$p" "$pkg$p" || fail "$1: the tarball's $p differs from the package's"
    done
    # And no systemd file for a host of another init system.
    awk -F '\t' '$2 == "openrc" || $2 == "runit"' "$top/MANIFEST" | grep systemd &&
        fail "systemd files marked for OpenRC or runit"
    return 0
}

test_deb_unit() { check_unit deb; }
test_deb_dropin() { check_dropin deb; }
test_deb_verify() { check_verify deb; }
test_deb_chain() { check_chain deb; }
test_deb_untouched_argv() { check_untouched_argv deb; }
test_deb_admin_dropin() { check_admin_dropin deb; }
test_deb_kernel() { check_kernel deb; }
test_deb_tarball() { check_tarball deb; }
test_rpm_unit() { check_unit rpm; }
test_rpm_dropin() { check_dropin rpm; }
test_rpm_verify() { check_verify rpm; }
test_rpm_chain() { check_chain rpm; }
test_rpm_untouched_argv() { check_untouched_argv rpm; }
test_rpm_admin_dropin() { check_admin_dropin rpm; }
test_rpm_kernel() { check_kernel rpm; }
test_rpm_tarball() { check_tarball rpm; }

kd_test test_deb_unit
kd_test test_deb_dropin
kd_test test_deb_verify
kd_test test_deb_chain
kd_test test_deb_untouched_argv
kd_test test_deb_admin_dropin
kd_test test_deb_kernel
kd_test test_deb_tarball
kd_test test_rpm_unit
kd_test test_rpm_dropin
kd_test test_rpm_verify
kd_test test_rpm_chain
kd_test test_rpm_untouched_argv
kd_test test_rpm_admin_dropin
kd_test test_rpm_kernel
kd_test test_rpm_tarball
kd_summary
