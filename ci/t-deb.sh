#!/bin/sh
# The .deb lifecycle with the real apt and dpkg: install release N-1 into a
# minimal bookworm root (apt resolves iptables, conntrack, ... from Debian's
# archive), upgrade to N non-interactively, reinstall, remove, purge; mixed
# versions; coexistence with Debian's containernetworking-plugins.
#
# Test names say which failure of the upstream packages they would have
# caught; docs/lifecycle.md numbers the failures and has the table. No systemd runs in
# these roots (kd_run: fresh mount and PID namespaces, PID 1 is a shell), so
# every maintainer script is exercised the way a chroot or container runs it.
#
# Roots (each unpacked from one cached mmdebstrap tarball):
#   A  unedited /etc/default/kubelet: install, upgrade, reinstall, remove, purge
#   B  edited /etc/default/kubelet: the same lifecycle, admin edit kept
#   C  Debian's containernetworking-plugins beside our kubernetes-cni
#   D  both releases in a local apt repository: N-1 and N mixed, `pkg=VERSION`
#      downgrades, kubeadm upgraded alone while the others are held
#
# Then piuparts, Debian's own package tester, in chroots of its own: the
# five debs of N installed and purged, and N-1 installed from a local
# repository and upgraded to N, then purged; every file left behind, removed
# (such as the host's /opt) or changed fails.
#
# Versions come from the artifacts: kubelet, kubeadm and kubectl carry the
# Kubernetes version, kubernetes-cni the CNI plugins' and cri-tools its own
# (as upstream's packages do), all with the same revision.
#
# Wall time: about 80 s on 2 cores with the base tarballs cached, plus about
# a minute for piuparts.

# shellcheck disable=SC2016 # ${...} in single quotes are dpkg-query formats
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require mmdebstrap unshare dpkg-deb apt-ftparchive jq sha256sum piuparts zsh fish
kd_require_dist

PACKAGES="kubelet kubeadm kubectl kubernetes-cni cri-tools"
# Release N-1's debs as releases before the move of the units to
# /usr/lib/systemd/system shipped them, so that every upgrade here moves them.
PREV_DIST=$KD_WORK/deb.prev
kd_debs_units_under_lib "$KD_DIST_PREV" "$PREV_DIST"
ENV_FILE=/etc/default/kubelet
CRICTL_YAML=/etc/crictl.yaml
DROPIN=/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
SEED=/usr/share/kubedist/seed/etc/default/kubelet
# The admin's own files, created before anything is installed: none of them
# may be changed by any install, upgrade, remove or purge.
THIRD_PARTY_PLUGIN=/opt/cni/bin/vendor-x-plugin
ADMIN_CONFLIST=/etc/cni/net.d/10-admin.conflist
ADMIN_OVERRIDE=/etc/systemd/system/kubelet.service.d/20-admin.conf
EXTRA_ARGS='--node-ip=192.0.2.10 --v=4'

# netbase and mount are in the base root because apt never autoremoves a
# package of priority important or required once a dependency pulled it in
# (kubelet's `mount`, iptables' `netbase`): the purge test removes the
# pulled-in dependencies with `apt-get autoremove --purge` and compares.
# jq runs docs/supply-chain.md's SBOM lookup on the installed node.
BASE=$(kd_base_tarball deb netbase mount jq)

# deb_of DIST PACKAGE : the path of PACKAGE's .deb in DIST (exactly one).
deb_of() {
    set -- "$1" "$2" "$1/$2"_*.deb
    if [ $# -ne 3 ] || [ ! -f "$3" ]; then
        echo "t-deb: expected one $2 .deb in $1" >&2
        return 1
    fi
    printf '%s\n' "$3"
}
version_of() { dpkg-deb -f "$(deb_of "$1" "$2")" Version; }

# expect [PACKAGE...] : "name version" of our five packages, sorted: the named
# ones at release N-1, the others at N, each as its artifact says.
expect() {
    for p in $PACKAGES; do
        d=$KD_DIST
        case " $* " in *" $p "*) d=$PREV_DIST ;; esac
        echo "$p $(version_of "$d" "$p")"
    done | LC_ALL=C sort
}
# shellcheck disable=SC2086 # one word per package
ALL_PREV=$(expect $PACKAGES)
ALL_CUR=$(expect)
# shellcheck disable=SC2086 # one word per package
kd_require_distinct_versions $PACKAGES

# The shipped defaults of both releases, straight from the packages.
seed_of() { # DEB OUT
    dpkg-deb --fsys-tarfile "$1" | tar -xO ".$SEED" >"$2"
}
SEED_PREV=$KD_WORK/deb.seed.prev
SEED_CUR=$KD_WORK/deb.seed.cur
seed_of "$PREV_DIST"/kubelet_*.deb "$SEED_PREV"
seed_of "$KD_DIST"/kubelet_*.deb "$SEED_CUR"

# new_root : a fresh bookworm root with both releases' debs in /srv/prev and
# /srv/cur.
new_root() {
    r=$(kd_new_root "$BASE")
    mkdir -p "$r/srv/prev" "$r/srv/cur" "$r/srv/runtime/prev" "$r/srv/runtime/cur"
    for p in $PACKAGES; do
        cp "$(deb_of "$PREV_DIST" "$p")" "$(deb_of "$PREV_DIST" "$p").spdx.json" "$r/srv/prev/"
        cp "$(deb_of "$KD_DIST" "$p")" "$r/srv/cur/"
    done
    # The container runtime, installed only when asked.
    cp "$(deb_of "$PREV_DIST" kubedist-containerd)" "$r/srv/runtime/prev/"
    cp "$(deb_of "$KD_DIST" kubedist-containerd)" "$r/srv/runtime/cur/"
    printf '%s\n' "$r"
}



# What apt and dpkg keep about their own work, and nothing else: package
# database and lists, downloaded archives, debconf's database, their logs, and
# the linker cache that libc-bin's trigger rewrites.
BOOKKEEPING='/(var/lib/dpkg|var/lib/apt|var/cache/apt|var/cache/debconf|var/cache/ldconfig|var/log/apt|var/log/dpkg\.log|var/log/alternatives\.log|etc/ld\.so\.cache)([[:space:]]|/)'

# package_states ROOT : "name version status" for those of our five packages
# dpkg knows about (one without conffiles or postrm is forgotten on remove).
package_states() {
    # shellcheck disable=SC2086
    kd_run "$1" dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null |
        LC_ALL=C sort
}

# assert_all_installed ROOT EXPECTED : each package installed and configured
# ("ii"), at the versions of EXPECTED (from `expect`).
assert_all_installed() {
    states=$(package_states "$1")
    echo "$states"
    assert_eq "$(echo "$2" | sed 's/$/ ii/')" "$(echo "$states" | awk '{ print $1, $2, $3 }')" "dpkg states"
}

# known_packages ROOT : those of our packages dpkg still has a record of.
known_packages() {
    package_states "$1" | awk '$3 != "un" { print $1 }' | tr '\n' ' '
}

# assert_extra_args_reach_kubelet ROOT : KUBELET_EXTRA_ARGS from the deb
# family file ends the kubelet's argv as kubelet-wrapper rebuilds systemd's
# chain (--print starts nothing).
assert_extra_args_reach_kubelet() {
    plan=$(kd_run "$1" /usr/bin/kubelet-wrapper --print)
    echo "$plan"
    assert_eq deb "$(echo "$plan" | jq -r .family)" "family kubelet-wrapper reads"
    assert_eq read "$(echo "$plan" | jq -r --arg f "$ENV_FILE" '.files[] | select(.path == $f) | .status')" "status of $ENV_FILE"
    assert_eq '["--node-ip=192.0.2.10","--v=4"]' "$(echo "$plan" | jq -c '.argv[-2:]')" "last kubelet arguments"
    echo "$plan" | jq -e --arg f "$ENV_FILE" '.sources[-1] | contains($f)' >/dev/null ||
        { echo "assertion failed: the last argument does not come from $ENV_FILE" >&2; return 1; }
}

# assert_admin_files_intact ROOT : the admin's files, byte for byte.
assert_admin_files_intact() {
    for f in $THIRD_PARTY_PLUGIN $ADMIN_CONFLIST $ADMIN_OVERRIDE; do
        assert_file "$1$f"
    done
    (cd "$1" && sha256sum -c "$KD_WORK/deb.admin-files.sha256")
}

# upgrade_noninteractive ROOT : apt-get install ./*.deb of release N with
# DEBIAN_FRONTEND=noninteractive, stdin from /dev/null and no --force-conf*
# option anywhere (not on the command line, not in apt's configuration).
upgrade_noninteractive() {
    out=$(kd_keep_output kd_script "$1" <<'EOF'
if apt-config dump | grep -i 'force-conf'; then
    echo "apt is configured with a --force-conf option: the test would prove nothing" >&2
    exit 1
fi
cd /srv/cur
DEBIAN_FRONTEND=noninteractive apt-get install -y ./*.deb </dev/null
EOF
    )
    if grep -Ei 'conffile prompt|Configuration file .* modified|\*\*\* .* \(Y/I/N/O/D/Z\)' "$out"; then
        echo "assertion failed: the upgrade reached dpkg's conffile prompt" >&2
        return 1
    fi
    # Nothing left half-installed or half-configured.
    assert_eq "" "$(kd_run "$1" dpkg --audit)" "dpkg --audit after the upgrade"
    printf '%s\n' "$out"
}

# run_test NAME : runs the test function NAME (kd_test).

# --- root A: the unedited lifecycle ----------------------------------------

ROOT_A=$(new_root)

install_prev_resolves_deps_from_archive() { # failures 7, 9
    # The admin's files exist before any package does.
    mkdir -p "$ROOT_A/opt/cni/bin" "$ROOT_A/etc/cni/net.d" "$ROOT_A/etc/systemd/system/kubelet.service.d"
    printf '#!/bin/sh\necho third-party CNI plugin\n' >"$ROOT_A$THIRD_PARTY_PLUGIN"
    chmod 0755 "$ROOT_A$THIRD_PARTY_PLUGIN"
    printf '{"cniVersion":"1.0.0","name":"admin","plugins":[]}\n' >"$ROOT_A$ADMIN_CONFLIST"
    printf '[Service]\nEnvironment="ADMIN_OVERRIDE=1"\n' >"$ROOT_A$ADMIN_OVERRIDE"
    (cd "$ROOT_A" && sha256sum ".$THIRD_PARTY_PLUGIN" ".$ADMIN_CONFLIST" ".$ADMIN_OVERRIDE") >"$KD_WORK/deb.admin-files.sha256"
    kd_run "$ROOT_A" dpkg-query -W -f '${Package}\n' | sort >"$KD_WORK/deb.A.packages-before"
    kd_listing "$ROOT_A" >"$KD_WORK/deb.A.before"

    # The command docs/packages.md shows, from the release's directory.
    {
        echo 'test ! -d /run/systemd/system  # no systemd is running here'
        echo 'cd /srv/prev'
        kd_guide_block docs/packages.md apt-install-files
        cat <<'EOF'
# Pulled in from Debian's archive as dependencies (marked automatic).
apt-mark showauto | grep -x iptables
apt-mark showauto | grep -x conntrack
EOF
    } | kd_keep_output kd_script "$ROOT_A" >/dev/null
    assert_all_installed "$ROOT_A" "$ALL_PREV"
}

maintainer_scripts_succeed_without_systemd() { # failure 7
    assert_all_installed "$ROOT_A" "$ALL_PREV"
    # dpkg --audit lists half-installed and half-configured packages.
    assert_eq "" "$(kd_run "$ROOT_A" dpkg --audit)" "dpkg --audit"
}

conntrack_installed_as_kubeadm_dependency() { # failure 9
    kd_run "$ROOT_A" dpkg-query -W -f '${Depends}\n' kubeadm | grep -w conntrack
    assert_eq "install ok installed" "$(kd_run "$ROOT_A" dpkg-query -W -f '${Status}' conntrack)" "status of conntrack"
    kd_run "$ROOT_A" conntrack --version
}

kubectl_version_client_runs_real_binary() {
    out=$(kd_run "$ROOT_A" kubectl version --client)
    echo "$out"
    echo "$out" | grep -q 'Client Version' || { echo "assertion failed: no client version" >&2; return 1; }
    if echo "$out" | grep -qi 'stand-in'; then
        echo "assertion failed: kubectl is the stand-in, not Debian's kubectl" >&2
        return 1
    fi
}

# docs/supply-chain.md's lookup on the node, from the release's directory:
# the package's version, and the installed kubelet's digest, the same as the
# one the package's SBOM names.
the_guide_s_sbom_lookup_finds_the_installed_kubelet() {
    deb=$(basename "$(deb_of "$PREV_DIST" kubelet)")
    {
        echo 'cd /srv/prev'
        kd_guide_block docs/supply-chain.md sbom-on-node kubelet_1.37.2-1_amd64.deb "$deb"
    } | kd_script "$ROOT_A" >"$KD_WORK/deb.sbom-lookup"
    cat "$KD_WORK/deb.sbom-lookup"
    version=$(dpkg-deb -f "$PREV_DIST/$deb" Version)
    assert_eq "$(printf 'kubelet\t%s' "$version")" "$(sed -n 1p "$KD_WORK/deb.sbom-lookup")" "the version dpkg-query shows"
    installed=$(sed -n 2p "$KD_WORK/deb.sbom-lookup")
    assert_eq "${installed%% *}" "$(sed -n 3p "$KD_WORK/deb.sbom-lookup")" "the SBOM's digest of ./usr/bin/kubelet"
    assert_eq "/usr/bin/kubelet" "${installed##* }" "the file sha256sum read"
}

dpkg_verify_clean_after_install() {
    # shellcheck disable=SC2086
    out=$(kd_run "$ROOT_A" dpkg --verify $PACKAGES)
    assert_eq "" "$out" "dpkg --verify output"
}

env_file_is_prev_default_after_install() {
    cmp "$SEED_PREV" "$ROOT_A$ENV_FILE"
    # Not a dpkg conffile: a conffile stops non-interactive upgrades at a prompt.
    if kd_run "$ROOT_A" dpkg-query -W -f '${Conffiles}\n' kubelet | grep -F "$ENV_FILE"; then
        echo "assertion failed: $ENV_FILE is a dpkg conffile" >&2
        return 1
    fi
}

crictl_yaml_is_a_seed_with_the_runtime_endpoint_only() {
    cmp "$ROOT_A/usr/share/kubedist/seed$CRICTL_YAML" "$ROOT_A$CRICTL_YAML"
    # image-endpoint stays unset: set, it would not follow --runtime-endpoint.
    assert_eq 'runtime-endpoint: unix:///run/containerd/containerd.sock' \
        "$(grep -v -e '^#' -e '^$' "$ROOT_A$CRICTL_YAML")" "settings in $CRICTL_YAML"
    if kd_run "$ROOT_A" dpkg-query -W -f '${Conffiles}\n' cri-tools | grep -F "$CRICTL_YAML"; then
        echo "assertion failed: $CRICTL_YAML is a dpkg conffile" >&2
        return 1
    fi
}

deb_dropin_reads_etc_default_kubelet() { # failure 2
    assert_grep "^EnvironmentFile=-$ENV_FILE\$" "$ROOT_A$DROPIN"
    if grep -n sysconfig "$ROOT_A$DROPIN"; then
        echo "assertion failed: the deb's drop-in names the rpm family's file" >&2
        return 1
    fi
    # A vendor file: admins override it under /etc, so it is never a conffile.
    if kd_run "$ROOT_A" dpkg-query -W -f '${Conffiles}\n' kubeadm | grep -F 10-kubeadm.conf; then
        echo "assertion failed: the drop-in is a conffile" >&2
        return 1
    fi
}

upgrade_replaces_unedited_env_file_noninteractive() { # failures 1, 3
    upgrade_noninteractive "$ROOT_A"
    assert_all_installed "$ROOT_A" "$ALL_CUR"
    if cmp -s "$SEED_PREV" "$SEED_CUR"; then
        echo "assertion failed: releases N-1 and N ship the same default; the test would prove nothing" >&2
        return 1
    fi
    cmp "$SEED_CUR" "$ROOT_A$ENV_FILE"
    assert_no_file "$ROOT_A$ENV_FILE.dpkg-dist"
    # shellcheck disable=SC2086
    assert_eq "" "$(kd_run "$ROOT_A" dpkg --verify $PACKAGES)" "dpkg --verify after the upgrade"
}

# N-1's units were under /lib/systemd/system (PREV_DIST), N's are under
# /usr/lib/systemd/system: on this merged-/usr root one directory with two
# names, where dpkg must not remove the files it has just unpacked when it
# drops their old names.
units_moved_from_lib_to_usr_lib_on_upgrade() {
    [ -L "$ROOT_A/lib" ] || { echo "assertion failed: the root's /lib is no link: not merged-/usr" >&2; return 1; }
    dpkg-deb -c "$(deb_of "$PREV_DIST" kubelet)" | grep -q ' \./lib/systemd/system/kubelet\.service$' ||
        { echo "assertion failed: N-1's kubelet has no unit under /lib: the test would prove nothing" >&2; return 1; }
    for p in kubelet:kubelet.service kubeadm:kubelet.service.d/10-kubeadm.conf kubeadm:kubedist-images.service; do
        pkg=${p%%:*} f=/usr/lib/systemd/system/${p#*:}
        kd_run "$ROOT_A" dpkg-query -L "$pkg" >"$KD_WORK/deb.A.list"
        assert_grep "^$f\$" "$KD_WORK/deb.A.list"
        if grep '^/lib/systemd' "$KD_WORK/deb.A.list"; then
            echo "assertion failed: dpkg still lists $pkg's files under /lib (above)" >&2
            return 1
        fi
        dpkg-deb --fsys-tarfile "$(deb_of "$KD_DIST" "$pkg")" | tar -xO ".$f" | cmp - "$ROOT_A$f"
    done
}

third_party_cni_plugin_survives_upgrade() { # failure 5
    assert_admin_files_intact "$ROOT_A"
    # Ours are there too, each owned by kubernetes-cni alone.
    kd_run "$ROOT_A" dpkg-query -S /opt/cni/bin/bridge | grep -x 'kubernetes-cni: /opt/cni/bin/bridge'
    if kd_run "$ROOT_A" dpkg-query -S "$THIRD_PARTY_PLUGIN" 2>/dev/null; then
        echo "assertion failed: a package claims the third-party plugin" >&2
        return 1
    fi
}

admin_dropin_override_survives_upgrade() { # failure 1
    assert_admin_files_intact "$ROOT_A"
    assert_grep 'ADMIN_OVERRIDE=1' "$ROOT_A$ADMIN_OVERRIDE"
}

reinstall_restores_deleted_kubeadm_dropin() { # failure 1
    dpkg-deb --fsys-tarfile "$KD_DIST"/kubeadm_*.deb | tar -xO ".$DROPIN" >"$KD_WORK/deb.dropin.cur"
    rm "$ROOT_A$DROPIN"
    kd_keep_output kd_script "$ROOT_A" <<'EOF' >/dev/null
cd /srv/cur
apt-get install -y --reinstall ./kubeadm_*.deb </dev/null
dpkg --verify kubeadm
EOF
    cmp "$KD_WORK/deb.dropin.cur" "$ROOT_A$DROPIN"
}

remove_keeps_config_and_admin_files() { # failure 5
    # shellcheck disable=SC2086
    kd_run "$ROOT_A" apt-get remove -y $PACKAGES </dev/null
    states=$(package_states "$ROOT_A")
    echo "$states"
    # Removed, with only their configuration left ("rc"), or forgotten when
    # there was none.
    if echo "$states" | awk '$3 != "rc"' | grep .; then
        echo "assertion failed: packages not in state rc after remove (above)" >&2
        return 1
    fi
    echo "$states" | awk '$1 == "kubelet" && $3 == "rc"' | grep -q . ||
        { echo "assertion failed: kubelet's configuration was not kept" >&2; return 1; }
    assert_no_file "$ROOT_A/usr/bin/kubelet"
    assert_no_file "$ROOT_A/opt/cni/bin/bridge"
    cmp "$SEED_CUR" "$ROOT_A$ENV_FILE"
    assert_admin_files_intact "$ROOT_A"
}

purge_leaves_nothing_behind() { # failures 5, 7
    # Only packages dpkg still knows can be purged: apt cannot even name one
    # that came from a local file and left nothing behind on remove.
    # shellcheck disable=SC2046 # one word per package
    kd_run "$ROOT_A" apt-get purge -y $(known_packages "$ROOT_A") </dev/null >"$KD_WORK/deb.A.purge" 2>&1
    cat "$KD_WORK/deb.A.purge"
    # (The admin's plugin keeps /opt/cni/bin, and dpkg says so.)
    if grep "dpkg: warning: .*'/\(usr/\)\?lib/systemd" "$KD_WORK/deb.A.purge"; then
        echo "assertion failed: dpkg warned on purge about the units' directories (above)" >&2
        return 1
    fi
    assert_eq "" "$(known_packages "$ROOT_A")" "packages dpkg still knows after purge"
    assert_no_file "$ROOT_A$ENV_FILE"
    assert_no_file "$ROOT_A$CRICTL_YAML"
    assert_no_file "$ROOT_A/var/lib/kubedist"
    assert_admin_files_intact "$ROOT_A"
    # The dependencies apt pulled in go the way an admin removes them.
    kd_run "$ROOT_A" apt-get autoremove --purge -y </dev/null
    kd_run "$ROOT_A" dpkg-query -W -f '${Package}\n' | sort >"$KD_WORK/deb.A.packages-after"
    diff -u "$KD_WORK/deb.A.packages-before" "$KD_WORK/deb.A.packages-after"
    kd_listing "$ROOT_A" >"$KD_WORK/deb.A.after"
    # Every difference outside apt's and dpkg's bookkeeping is a failure:
    # something we installed was left, or something we did not was touched.
    if diff "$KD_WORK/deb.A.before" "$KD_WORK/deb.A.after" | grep '^[<>]' | grep -Ev "^[<>] $BOOKKEEPING"; then
        echo "assertion failed: the root differs from before the install (above)" >&2
        return 1
    fi
}

kd_test install_prev_resolves_deps_from_archive
kd_test maintainer_scripts_succeed_without_systemd
kd_test conntrack_installed_as_kubeadm_dependency
kd_test kubectl_version_client_runs_real_binary
kd_test the_guide_s_sbom_lookup_finds_the_installed_kubelet
kd_test dpkg_verify_clean_after_install
kd_test env_file_is_prev_default_after_install
kd_test crictl_yaml_is_a_seed_with_the_runtime_endpoint_only
kd_test deb_dropin_reads_etc_default_kubelet
kd_test upgrade_replaces_unedited_env_file_noninteractive
kd_test units_moved_from_lib_to_usr_lib_on_upgrade
kd_test third_party_cni_plugin_survives_upgrade
kd_test admin_dropin_override_survives_upgrade
kd_test reinstall_restores_deleted_kubeadm_dropin
kd_test remove_keeps_config_and_admin_files
kd_test purge_leaves_nothing_behind

# --- root B: an edited /etc/default/kubelet --------------------------------

ROOT_B=$(new_root)

extra_args_in_etc_default_reach_kubelet() { # failure 2
    kd_keep_output kd_script "$ROOT_B" <<'EOF' >/dev/null
cd /srv/prev
apt-get install -y ./kubelet_*.deb ./kubeadm_*.deb ./kubectl_*.deb ./kubernetes-cni_*.deb ./cri-tools_*.deb </dev/null
EOF
    sed -i "s|^#KUBELET_EXTRA_ARGS=.*|KUBELET_EXTRA_ARGS=\"$EXTRA_ARGS\"|" "$ROOT_B$ENV_FILE"
    cp "$ROOT_B$ENV_FILE" "$KD_WORK/deb.B.edited"
    assert_grep '^KUBELET_EXTRA_ARGS="--node-ip=192.0.2.10 --v=4"$' "$ROOT_B$ENV_FILE"
    assert_extra_args_reach_kubelet "$ROOT_B"
}

edit_crictl_yaml_for_cri_o() {
    sed -i 's|^runtime-endpoint: .*|runtime-endpoint: unix:///var/run/crio/crio.sock|' "$ROOT_B$CRICTL_YAML"
    assert_grep '^runtime-endpoint: unix:///var/run/crio/crio.sock$' "$ROOT_B$CRICTL_YAML"
    cp "$ROOT_B$CRICTL_YAML" "$KD_WORK/deb.B.crictl"
}

upgrade_keeps_edited_env_file_noninteractive() { # failures 1, 3
    out=$(upgrade_noninteractive "$ROOT_B")
    # What the operator sees in apt's output.
    assert_grep "keeping your edited $ENV_FILE; the new default is in $ENV_FILE.dpkg-dist" "$out"
    assert_all_installed "$ROOT_B" "$ALL_CUR"
    cmp "$KD_WORK/deb.B.edited" "$ROOT_B$ENV_FILE"
    # The new default lands beside the admin's file.
    cmp "$SEED_CUR" "$ROOT_B$ENV_FILE.dpkg-dist"
    assert_extra_args_reach_kubelet "$ROOT_B"
}

upgrade_keeps_edited_crictl_yaml() {
    cmp "$KD_WORK/deb.B.crictl" "$ROOT_B$CRICTL_YAML"
    cmp "$ROOT_B/usr/share/kubedist/seed$CRICTL_YAML" "$ROOT_B$CRICTL_YAML.dpkg-dist"
}

remove_keeps_edited_env_file() {
    # shellcheck disable=SC2086
    kd_run "$ROOT_B" apt-get remove -y $PACKAGES </dev/null
    assert_no_file "$ROOT_B/usr/bin/kubelet"
    cmp "$KD_WORK/deb.B.edited" "$ROOT_B$ENV_FILE"
    cmp "$KD_WORK/deb.B.crictl" "$ROOT_B$CRICTL_YAML"
}

purge_removes_edited_env_file() {
    # shellcheck disable=SC2046 # one word per package
    kd_run "$ROOT_B" apt-get purge -y $(known_packages "$ROOT_B") </dev/null
    assert_no_file "$ROOT_B$ENV_FILE"
    assert_no_file "$ROOT_B$ENV_FILE.dpkg-dist"
    assert_no_file "$ROOT_B$CRICTL_YAML"
    assert_no_file "$ROOT_B$CRICTL_YAML.dpkg-dist"
    assert_no_file "$ROOT_B/var/lib/kubedist"
}

kd_test extra_args_in_etc_default_reach_kubelet
kd_test edit_crictl_yaml_for_cri_o
kd_test upgrade_keeps_edited_env_file_noninteractive
kd_test upgrade_keeps_edited_crictl_yaml
kd_test remove_keeps_edited_env_file
kd_test purge_removes_edited_env_file

# --- root C: Debian's containernetworking-plugins beside ours --------------

ROOT_C=$(new_root)

# assert_sole_owner ROOT PACKAGE : every file PACKAGE installed is owned by
# PACKAGE alone, and is intact (dpkg --verify).
assert_sole_owner() {
    kd_run "$1" dpkg-query -L "$2" >"$KD_WORK/deb.C.$2.files"
    n=0
    while read -r f; do
        if [ ! -f "$1$f" ] || [ -L "$1$f" ]; then continue; fi
        assert_eq "$2: $f" "$(kd_run "$1" dpkg-query -S "$f")" "owner of $f"
        n=$((n + 1))
    done <"$KD_WORK/deb.C.$2.files"
    [ "$n" -gt 0 ] || { echo "assertion failed: $2 has no files" >&2; return 1; }
    assert_eq "" "$(kd_run "$1" dpkg --verify "$2")" "dpkg --verify $2"
}

coexists_with_debian_containernetworking_plugins() { # failure 6
    # The admin's own env file, written before kubedist was installed: the
    # packages never take it (purge_keeps_an_env_file_written_before_the_install).
    mkdir -p "$ROOT_C${ENV_FILE%/*}"
    echo 'KUBELET_EXTRA_ARGS="--v=2" # the admin wrote this before kubedist' >"$ROOT_C$ENV_FILE"
    kd_keep_output kd_script "$ROOT_C" <<'EOF' >/dev/null
apt-get install -y containernetworking-plugins </dev/null
cd /srv/cur
apt-get install -y ./kubelet_*.deb ./kubeadm_*.deb ./kubectl_*.deb ./kubernetes-cni_*.deb ./cri-tools_*.deb </dev/null
EOF
    assert_all_installed "$ROOT_C" "$ALL_CUR"
    assert_eq "install ok installed" "$(kd_run "$ROOT_C" dpkg-query -W -f '${Status}' containernetworking-plugins)" "status of containernetworking-plugins"
    assert_file "$ROOT_C/usr/lib/cni/bridge"
    assert_file "$ROOT_C/opt/cni/bin/bridge"
    assert_sole_owner "$ROOT_C" kubernetes-cni
    assert_sole_owner "$ROOT_C" containernetworking-plugins
    # Taking ours away leaves theirs whole.
    kd_run "$ROOT_C" apt-get purge -y kubernetes-cni kubelet </dev/null
    assert_sole_owner "$ROOT_C" containernetworking-plugins
}

# An env file that was there before the install is the admin's: the
# install keeps it (N's default beside it, as for an edit), and purge,
# which takes the file the package seeded, leaves this one. (Root C's
# admin wrote it before coexists_with_debian_containernetworking_plugins
# installed and purged the kubelet.)
purge_keeps_an_env_file_written_before_the_install() {
    assert_grep 'the admin wrote this before kubedist' "$ROOT_C$ENV_FILE"
    kd_keep_output kd_script "$ROOT_C" <<'EOF' >/dev/null
cd /srv/cur
apt-get install -y ./kubelet_*.deb ./kubernetes-cni_*.deb </dev/null
EOF
    assert_grep 'the admin wrote this before kubedist' "$ROOT_C$ENV_FILE"
    assert_file "$ROOT_C$ENV_FILE.dpkg-dist"
    kd_run "$ROOT_C" apt-get purge -y kubelet kubernetes-cni </dev/null >"$KD_WORK/deb.C.purge" 2>&1 ||
        { cat "$KD_WORK/deb.C.purge"; return 1; }
    cat "$KD_WORK/deb.C.purge"
    assert_grep 'the admin wrote this before kubedist' "$ROOT_C$ENV_FILE"
    assert_no_file "$ROOT_C$ENV_FILE.dpkg-dist"
    assert_grep "kubelet: kept $ENV_FILE: it was there before the package" "$KD_WORK/deb.C.purge"
}

kd_test coexists_with_debian_containernetworking_plugins
kd_test purge_keeps_an_env_file_written_before_the_install

# --- root D: no exact pins between the packages ----------------------------

ROOT_D=$(new_root)

# A local repository with both releases, the way an operator's mirror of
# pkgs.k8s.io holds several versions. Unsigned ([trusted=yes]): signing is
# the repo suite's concern.
mkdir -p "$ROOT_D/srv/repo"
cp "$PREV_DIST"/*.deb "$KD_DIST"/*.deb "$ROOT_D/srv/repo/"
(
    cd "$ROOT_D/srv/repo"
    apt-ftparchive packages . >Packages
    apt-ftparchive release . >Release
)
echo 'deb [trusted=yes] file:/srv/repo ./' >"$ROOT_D/etc/apt/sources.list.d/kubedist.list"

# repo_apt ARGS... : `apt-get -y ARGS` in root D after refreshing the
# repository's lists (and no other source's: Debian's stay as the base root
# has them). Prints the path of the output (kd_keep_output).
repo_apt() {
    kd_keep_output kd_script "$ROOT_D" <<EOF
apt-get update -o Dir::Etc::sourcelist=sources.list.d/kubedist.list \
    -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null
apt-get -y $* </dev/null
EOF
}

# version_table : "name version" of our installed packages in root D, sorted.
# Held packages are "hi": any wanted state, installed.
version_table() { package_states "$ROOT_D" | awk '$3 ~ /^.i$/ { print $1, $2 }'; }

v_prev() { version_of "$PREV_DIST" "$1"; }

mixed_versions_prev_kubeadm_with_cur_kubelet() { # failure 8
    repo_apt install "kubeadm=$(v_prev kubeadm)" kubelet kubectl kubernetes-cni cri-tools >/dev/null
    assert_eq "$(expect kubeadm)" "$(version_table)" "installed versions"
}

older_versions_stay_installable() { # failure 8
    # apt-get install PACKAGE=OLDER, as an operator pins back a release.
    repo_apt install --allow-downgrades "kubelet=$(v_prev kubelet)" "kubectl=$(v_prev kubectl)" \
        "kubernetes-cni=$(v_prev kubernetes-cni)" "cri-tools=$(v_prev cri-tools)" >/dev/null
    # shellcheck disable=SC2086
    assert_eq "$(expect $PACKAGES)" "$(version_table)" "installed versions"
}

upgrade_kubeadm_alone_while_others_held() { # failure 8
    # Held as kubeadm's upgrade guide says; with exact pins apt would refuse
    # ("held packages were changed") or want to unhold everything.
    kd_run "$ROOT_D" apt-mark hold kubelet kubectl kubernetes-cni cri-tools
    out=$(repo_apt install kubeadm)
    assert_grep '^1 upgraded, 0 newly installed, 0 to remove' "$out"
    assert_eq "$(expect kubelet kubectl kubernetes-cni cri-tools)" "$(version_table)" "installed versions"
    assert_eq "cri-tools kubectl kubelet kubernetes-cni" \
        "$(kd_run "$ROOT_D" apt-mark showhold | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')" "held packages"
}

kd_test mixed_versions_prev_kubeadm_with_cur_kubelet
kd_test older_versions_stay_installable
kd_test upgrade_kubeadm_alone_while_others_held

# --- root F: the kernel prerequisites applied on install; completions -------

ROOT_F=$(new_root)
KERNEL_LOG=/var/log/kd-kernel.log

# Recorders in front of modprobe and sysctl (/usr/local/sbin comes first on
# PATH): they log their arguments to KERNEL_LOG and change nothing.
kernel_recorders() { # ROOT
    mkdir -p "$1/usr/local/sbin"
    for tool in modprobe sysctl; do
        printf '#!/bin/sh\necho "%s $*" >>%s\n' "$tool" "$KERNEL_LOG" >"$1/usr/local/sbin/$tool"
        chmod 0755 "$1/usr/local/sbin/$tool"
    done
    : >"$1$KERNEL_LOG"
}

# in_chroot ROOT CMD... : CMD chrooted into ROOT as an image build runs it:
# PID 1 (of fresh PID and mount namespaces: the shell that sets them up)
# stays outside ROOT, as the build host's init does.
in_chroot() {
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --pid --fork --kill-child -- sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc"
        chroot "$root" /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
    ' in_chroot "$@"
}

kernel_prerequisites_skipped_in_a_chroot() {
    kernel_recorders "$ROOT_F"
    out=$(kd_keep_output in_chroot "$ROOT_F" sh -c \
        'cd /srv/cur && apt-get install -y ./kubelet_*.deb ./kubernetes-cni_*.deb </dev/null')
    assert_grep '^kubelet: kernel prerequisites not applied now: running in a chroot; the boot applies /usr/lib/modules-load.d/kubernetes.conf and /usr/lib/sysctl.d/60-kubernetes.conf$' "$out"
    assert_eq "" "$(cat "$ROOT_F$KERNEL_LOG")" "modprobe and sysctl calls in a chroot"
}

kernel_prerequisites_applied_on_a_running_host() {
    kernel_recorders "$ROOT_F"
    # kd_run: PID 1 runs inside the root, as on a booted host.
    out=$(kd_keep_output kd_script "$ROOT_F" <<'EOF'
dpkg -i /srv/cur/kubelet_*.deb
EOF
    )
    assert_grep '^kubelet: kernel prerequisites: loaded modules: br_netfilter overlay; applied /usr/lib/sysctl.d/60-kubernetes.conf$' "$out"
    assert_eq "modprobe br_netfilter
modprobe overlay
sysctl -p /usr/lib/sysctl.d/60-kubernetes.conf" "$(cat "$ROOT_F$KERNEL_LOG")" "what was applied"
    # The admin's file of the same name wins, as at boot.
    kernel_recorders "$ROOT_F"
    mkdir -p "$ROOT_F/etc/sysctl.d" "$ROOT_F/etc/modules-load.d"
    printf 'net.ipv4.ip_forward = 1\n' >"$ROOT_F/etc/sysctl.d/60-kubernetes.conf"
    printf '# mine\noverlay\n' >"$ROOT_F/etc/modules-load.d/kubernetes.conf"
    kd_keep_output kd_script "$ROOT_F" >/dev/null <<'EOF'
dpkg -i /srv/cur/kubelet_*.deb
EOF
    assert_eq "modprobe overlay
sysctl -p /etc/sysctl.d/60-kubernetes.conf" "$(cat "$ROOT_F$KERNEL_LOG")" "what was applied with the admin's files"
    rm "$ROOT_F/etc/sysctl.d/60-kubernetes.conf" "$ROOT_F/etc/modules-load.d/kubernetes.conf"
}

kernel_prerequisites_skipped_in_a_container() {
    kernel_recorders "$ROOT_F"
    out=$(kd_keep_output kd_script "$ROOT_F" <<'EOF'
touch /run/.containerenv
dpkg -i /srv/cur/kubelet_*.deb
EOF
    )
    assert_grep '^kubelet: kernel prerequisites not applied now: running in a container;' "$out"
    # Without /proc nothing tells a chroot from a host: skipped too.
    out=$(kd_keep_output chroot "$ROOT_F" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh -c 'dpkg -i /srv/cur/kubelet_*.deb')
    assert_grep '^kubelet: kernel prerequisites not applied now: cannot tell whether this is a chroot' "$out"
    assert_eq "" "$(cat "$ROOT_F$KERNEL_LOG")" "modprobe and sysctl calls"
}

# The completions of the real kubectl (Debian's, in the fixtures) work in
# bash as Debian's bash-completion loads them; the zsh and fish files parse.
completions_of_real_kubectl_load() {
    kd_keep_output kd_script "$ROOT_F" >/dev/null <<'EOF'
cd /srv/cur
apt-get install -y ./kubectl_*.deb ./kubeadm_*.deb ./cri-tools_*.deb </dev/null
EOF
    assert_file "$ROOT_F/usr/share/bash-completion/completions/kubectl"
    out=$(kd_run "$ROOT_F" bash -c '. /usr/share/bash-completion/completions/kubectl && complete -p kubectl')
    echo "$out"
    case $out in "complete "*" kubectl") ;; *) echo "assertion failed: no bash completion for kubectl" >&2; return 1 ;; esac
    assert_file "$ROOT_F/usr/share/zsh/vendor-completions/_kubectl"
    for f in "$ROOT_F"/usr/share/zsh/vendor-completions/_*; do
        zsh -n "$f"
        echo "zsh -n $f: ok"
    done
    for f in "$ROOT_F"/usr/share/fish/vendor_completions.d/*.fish; do
        [ -e "$f" ] || continue
        fish -n "$f"
        echo "fish -n $f: ok"
    done
    # A program that writes none (a stand-in, or a shell it lacks) gives no
    # file, and its package says so; a shipped one is not denied.
    for p in kubectl kubeadm cri-tools; do
        deb=$(deb_of "$KD_DIST" "$p")
        dpkg-deb -c "$deb" | awk '{ print $6 }' | grep -v '/$' >"$KD_WORK/deb.files.$p"
        dpkg-deb -f "$deb" Description | tr '\n' ' ' | tr -s ' ' >"$KD_WORK/deb.description.$p"
        for shell in bash zsh fish; do
            [ "$p.$shell" != kubeadm.fish ] || continue
            case $shell in
            bash) pattern=/bash-completion/completions/ ;;
            zsh) pattern=/zsh/vendor-completions/_ ;;
            fish) pattern=/fish/vendor_completions.d/ ;;
            esac
            if ! grep -q "$pattern" "$KD_WORK/deb.files.$p"; then
                assert_grep "no shell completions for.* $shell: " "$KD_WORK/deb.description.$p"
            elif grep -Eq "(for|;) $shell: " "$KD_WORK/deb.description.$p"; then
                echo "assertion failed: $p ships $shell completions and its description says it has none" >&2
                return 1
            fi
        done
    done
}

kd_test kernel_prerequisites_skipped_in_a_chroot
kd_test kernel_prerequisites_applied_on_a_running_host
kd_test kernel_prerequisites_skipped_in_a_container
kd_test completions_of_real_kubectl_load

# --- root R: the container runtime, kubedist-containerd --------------------

RUNTIME_CUR=$(deb_of "$KD_DIST" kubedist-containerd)
ROOT_R=$(new_root)
RUNTIME_CONFIG=/etc/containerd/config.toml

# A distribution's containerd and runc, as dpkg records them: packages of
# those names owning the programs' paths (Debian's own are 1.6 and 1.1).
kd_distribution_deb containerd /usr/bin/containerd "$ROOT_R/srv/runtime/containerd.deb"
kd_distribution_deb runc /usr/sbin/runc "$ROOT_R/srv/runtime/runc.deb"

runtime_beside_a_distribution_s_containerd_apt_shows_the_swap_first() {
    kd_run "$ROOT_R" dpkg -i /srv/runtime/containerd.deb /srv/runtime/runc.deb >/dev/null
    kd_listing "$ROOT_R" >"$KD_WORK/deb.R.before"
    # What apt says it would do, before doing anything.
    kd_run "$ROOT_R" sh -c "cd /srv/runtime/prev && apt-get install -s ./kubedist-containerd_*.deb" </dev/null >"$KD_WORK/deb.R.apt-s"
    cat "$KD_WORK/deb.R.apt-s"
    sed -n '/^The following packages will be REMOVED:/,/^[^ ]/p' "$KD_WORK/deb.R.apt-s" >"$KD_WORK/deb.R.removed"
    assert_grep "^  containerd runc\$" "$KD_WORK/deb.R.removed"
    # Asked without -y and no terminal to answer, apt does nothing.
    if kd_run "$ROOT_R" sh -c "cd /srv/runtime/prev && apt-get install ./kubedist-containerd_*.deb" </dev/null >"$KD_WORK/deb.R.apt-n" 2>&1; then
        cat "$KD_WORK/deb.R.apt-n"
        echo "assertion failed: apt swapped the runtimes without being told to" >&2
        return 1
    fi
    kd_listing "$ROOT_R" >"$KD_WORK/deb.R.after"
    if diff "$KD_WORK/deb.R.before" "$KD_WORK/deb.R.after" | grep '^[<>]' | grep -Ev "^[<>] $BOOKKEEPING"; then
        echo "assertion failed: what apt did not do changed the root (above)" >&2
        return 1
    fi
}

runtime_installs_with_the_guide_s_command_and_replaces_them() {
    {
        echo 'cd /srv/runtime/prev'
        kd_guide_block docs/packages.md apt-install-runtime
    } | kd_keep_output kd_script "$ROOT_R" >"$KD_WORK/deb.R.install"
    kd_run "$ROOT_R" dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' containerd runc kubedist-containerd \
        >"$KD_WORK/deb.R.states" 2>/dev/null || true
    cat "$KD_WORK/deb.R.states"
    assert_eq "ii " "$(awk '$1 == "kubedist-containerd" { print $2 " " }' "$KD_WORK/deb.R.states")" "kubedist-containerd's state"
    for p in containerd runc; do
        if awk -v p="$p" '$1 == p && $2 ~ /^.i/' "$KD_WORK/deb.R.states" | grep .; then
            echo "assertion failed: $p is still installed beside kubedist-containerd" >&2
            return 1
        fi
    done
    # One step, nothing half-done.
    assert_eq "" "$(kd_run "$ROOT_R" dpkg --audit)" "dpkg --audit"
    kd_run "$ROOT_R" dpkg -S /usr/bin/containerd /usr/bin/runc >"$KD_WORK/deb.R.owners"
    assert_eq 2 "$(grep -c '^kubedist-containerd: ' "$KD_WORK/deb.R.owners")" "owner of containerd and runc"
    assert_grep '^  SystemdCgroup = true$' "$ROOT_R$RUNTIME_CONFIG"
    assert_grep "^  bin_dirs = \['/opt/cni/bin'\]\$" "$ROOT_R$RUNTIME_CONFIG"
    [ -d "$ROOT_R/etc/containerd/conf.d" ] || { echo "assertion failed: no /etc/containerd/conf.d" >&2; return 1; }
    # Enabled (nothing runs here to start it).
    [ -L "$ROOT_R/etc/systemd/system/multi-user.target.wants/containerd.service" ] ||
        { echo "assertion failed: containerd.service is not enabled" >&2; return 1; }
}

runtime_upgrade_keeps_the_admin_s_config() {
    echo '# the admin'"'"'s' >>"$ROOT_R$RUNTIME_CONFIG"
    kd_run "$ROOT_R" sh -c "cd /srv/runtime/cur && DEBIAN_FRONTEND=noninteractive apt-get install -y ./kubedist-containerd_*.deb" </dev/null
    assert_eq "$(dpkg-deb -f "$RUNTIME_CUR" Version)" \
        "$(kd_run "$ROOT_R" dpkg-query -W -f '${Version}' kubedist-containerd)" "kubedist-containerd's version"
    assert_grep "^# the admin's\$" "$ROOT_R$RUNTIME_CONFIG"
    echo '[plugins]' >"$ROOT_R/etc/containerd/conf.d/50-admin.toml"
    kd_run "$ROOT_R" apt-get purge -y kubedist-containerd </dev/null
    # The admin's own file of conf.d/ stays (and so does the directory).
    assert_file "$ROOT_R/etc/containerd/conf.d/50-admin.toml"
    assert_no_file "$ROOT_R/usr/bin/containerd"
}

kd_test runtime_beside_a_distribution_s_containerd_apt_shows_the_swap_first
kd_test runtime_installs_with_the_guide_s_command_and_replaces_them
kd_test runtime_upgrade_keeps_the_admin_s_config

# --- piuparts ----------------------------------------------------------------

# piuparts' base chroot, saved by its first run (-s) and unpacked by every
# later one (-b, which wants a gzip tarball). It refreshes the package lists
# itself.
PIUPARTS_BASE=$KD_CACHE/piuparts-$KD_SUITE_CODENAME.tar.gz

# debs_of DIST : the paths of our debs in DIST, the runtime's too.
debs_of() {
    for p in $PACKAGES kubedist-containerd; do deb_of "$1" "$p"; done
}

# piuparts_run ARGS... : piuparts on bookworm from KD_MIRROR with the cached
# base chroot (made on the first run), its chroots under KD_WORK, in a mount
# namespace of its own so that no mount outlives it. Its log is kept in
# $KD_WORK/deb.piuparts.log.
piuparts_run() {
    if kd_cached "$PIUPARTS_BASE"; then
        set -- --basetgz="$PIUPARTS_BASE" "$@"
    else
        rm -f "$PIUPARTS_BASE.tmp"
        set -- --save="$PIUPARTS_BASE.tmp" "$@"
    fi
    set +e
    unshare --mount --propagation private -- piuparts \
        --distribution="$KD_SUITE_CODENAME" --mirror="$KD_MIRROR" --tmpdir="$KD_WORK" \
        "$@" >"$KD_WORK/deb.piuparts.log" 2>&1
    rc=$?
    set -e
    # Its verdicts, and the lines above a failure; the whole log stays in
    # $KD_WORK/deb.piuparts.log.
    grep -E '(PASS|FAIL|ERROR|WARN)' "$KD_WORK/deb.piuparts.log" || true
    if [ -f "$PIUPARTS_BASE.tmp" ]; then
        mv "$PIUPARTS_BASE.tmp" "$PIUPARTS_BASE"
    fi
    [ "$rc" -eq 0 ] || {
        tail -n 40 "$KD_WORK/deb.piuparts.log"
        echo "piuparts failed (exit $rc); its log: $KD_WORK/deb.piuparts.log" >&2
        return 1
    }
}

piuparts_install_purge() { # failures 5, 7
    # shellcheck disable=SC2046 # one word per deb
    piuparts_run --no-upgrade-test $(debs_of "$KD_DIST")
    assert_grep 'PASS: Installation and purging test' "$KD_WORK/deb.piuparts.log"
}

piuparts_upgrade_prev_to_cur() { # failures 1, 3, 5
    # Release N-1 in a local repository, bind-mounted into piuparts' chroot:
    # piuparts installs the packages from it with apt, upgrades them to the
    # debs of N, purges them and compares.
    repo=$KD_WORK/deb.piuparts-prev
    rm -rf "$repo"
    mkdir -p "$repo"
    # shellcheck disable=SC2046 # one word per deb
    cp $(debs_of "$PREV_DIST") "$repo/"
    (cd "$repo" && apt-ftparchive packages . >Packages && apt-ftparchive release . >Release)
    # shellcheck disable=SC2046 # one word per deb
    piuparts_run --no-install-purge-test --bindmount="$repo" \
        --extra-repo="deb [trusted=yes] file://$repo ./" $(debs_of "$KD_DIST")
    assert_grep 'PASS: Installation, upgrade and purging tests' "$KD_WORK/deb.piuparts.log"
    # It really went from N-1 to N.
    assert_grep "Setting up kubelet ($(version_of "$PREV_DIST" kubelet))" "$KD_WORK/deb.piuparts.log"
    assert_grep "Unpacking kubelet ($(version_of "$KD_DIST" kubelet)) over ($(version_of "$PREV_DIST" kubelet))" "$KD_WORK/deb.piuparts.log"
}

kd_test piuparts_install_purge
kd_test piuparts_upgrade_prev_to_cur

kd_summary
