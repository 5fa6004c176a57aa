#!/bin/sh
# The .rpm lifecycle with the real dnf and rpm: install release N-1 from a
# createrepo_c repository into an alternate root, upgrade to N from a second
# repository, reinstall, remove; mixed versions.
#
# The roots are bare directories with busybox-static as /bin/sh and the
# directories an rpm host's base packages own (filesystem, systemd), so that
# every scriptlet really runs, without systemd, the way it runs in a chroot or
# a container. Nothing in them can satisfy our packages' distribution
# dependencies (iptables, util-linux, conntrack-tools): the TEST-ONLY package
# ci/fixtures/kubedist-test-provides.spec declares them, and nothing else.
#
# Test names say which failure of the upstream packages they would have
# caught; docs/lifecycle.md numbers the failures and has the table.
#
# Roots:
#   E  unedited /etc/sysconfig/kubelet: install, upgrade, reinstall, remove
#   F  edited /etc/sysconfig/kubelet: upgrade writes .rpmnew, remove .rpmsave
#   G  both releases in one repository: N-1 and N mixed, downgrades, kubeadm
#      upgraded alone while the others are excluded
#
# Versions come from the artifacts: kubelet, kubeadm and kubectl carry the
# Kubernetes version, kubernetes-cni the CNI plugins' and cri-tools its own
# (as upstream's packages do), all with the same release.
#
# Wall time: about 30 s on 2 cores (11 s of it the xz case's dist).

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require rpm rpmbuild rpm2cpio cpio dnf createrepo_c busybox unshare jq sha256sum bash zsh xz
kd_require_dist

PACKAGES="kubelet kubeadm kubectl kubernetes-cni cri-tools"
ENV_FILE=/etc/sysconfig/kubelet
CRICTL_YAML=/etc/crictl.yaml
DROPIN=/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
THIRD_PARTY_PLUGIN=/opt/cni/bin/vendor-x-plugin
ADMIN_OVERRIDE=/etc/systemd/system/kubelet.service.d/20-admin.conf
EXTRA_ARGS='--node-ip=192.0.2.10 --v=4'

# rpm, rpmbuild and dnf read ~/.rpmmacros: a HOME of our own keeps the host's
# settings out and puts the database where an rpm host has it (Debian's rpm
# defaults to ~/.rpmdb).
HOME=$KD_WORK/rpm-home
export HOME
mkdir -p "$HOME"
printf '%%_dbpath /var/lib/rpm\n' >"$HOME/.rpmmacros"

# run_test NAME : runs the test function NAME (kd_test).

rpm_of() { # DIST PACKAGE : the path of PACKAGE's rpm in DIST (exactly one)
    set -- "$1" "$2" "$1/$2"-[0-9]*.rpm
    if [ $# -ne 3 ] || [ ! -f "$3" ]; then
        echo "t-rpm: expected one $2 rpm in $1" >&2
        return 1
    fi
    printf '%s\n' "$3"
}
# version_of DIST PACKAGE : VERSION-RELEASE of PACKAGE's rpm in DIST.
version_of() { rpm -qp --qf '%{VERSION}-%{RELEASE}' "$(rpm_of "$1" "$2")"; }

# expect [PACKAGE...] : "name version-release" of our five packages, sorted:
# the named ones at release N-1, the others at N, each as its artifact says.
expect() {
    for p in $PACKAGES; do
        d=$KD_DIST
        case " $* " in *" $p "*) d=$KD_DIST_PREV ;; esac
        echo "$p $(version_of "$d" "$p")"
    done | LC_ALL=C sort
}
# nvr DIST PACKAGE : NAME-VERSION-RELEASE, as dnf takes it on its command line.
nvr() { echo "$2-$(version_of "$1" "$2")"; }
# shellcheck disable=SC2086 # one word per package
kd_require_distinct_versions $PACKAGES

# file_of RPM PATH OUT : PATH's content as shipped in RPM.
file_of() {
    rpm2cpio "$1" | cpio -i --quiet --to-stdout ".$2" >"$3"
    [ -s "$3" ] || { echo "t-rpm: $2 not in $1" >&2; return 1; }
}
DEFAULT_PREV=$KD_WORK/rpm.default.prev
DEFAULT_CUR=$KD_WORK/rpm.default.cur
file_of "$(rpm_of "$KD_DIST_PREV" kubelet)" "$ENV_FILE" "$DEFAULT_PREV"
file_of "$(rpm_of "$KD_DIST" kubelet)" "$ENV_FILE" "$DEFAULT_CUR"

# The test-only provides package, built once per version of its spec.
PROVIDES_RPM=$(kd_provides_rpm)

# make_repo NAME DIST... : a createrepo_c repository of the DISTs' rpms plus
# the test-only provides package; prints its path.
make_repo() {
    repo=$KD_WORK/rpm.repo.$1
    shift
    rm -rf "$repo"
    mkdir -p "$repo"
    for d in "$@"; do cp "$d"/*.rpm "$repo/"; done
    cp "$PROVIDES_RPM" "$repo/"
    createrepo_c --quiet "$repo" >&2
    printf '%s\n' "$repo"
}
REPO_PREV=$(make_repo prev "$KD_DIST_PREV")
REPO_CUR=$(make_repo cur "$KD_DIST")
REPO_BOTH=$(make_repo both "$KD_DIST_PREV" "$KD_DIST")

# new_root : a bare root with busybox as /bin/sh (and every other applet), a
# root user, and the directories an rpm host's base packages own (filesystem,
# systemd), so that the before/after comparison sees only what we did.
new_root() {
    r=$(mktemp -d "$KD_WORK/root.XXXXXX")
    kd_remove_on_exit "$r"
    kd_busybox_root "$r" usr/share/licenses
    printf '%s\n' "$r"
}

# dnf_in ROOT REPO ARGS... : dnf with only REPO, non-interactive (stdin from
# /dev/null). Its output is shown and kept in $KD_WORK/rpm.dnf.out; a
# scriptlet failure fails the call even when dnf exits 0.
dnf_in() {
    root=$1
    repo=$2
    shift 2
    # Under /tmp: dnf also writes into ROOT/<cachedir>, and /tmp is scratch
    # space in the root too. A fresh cache each call: a stale one makes
    # dnf fail checksums or see no upgrade.
    cache=$(mktemp -d /tmp/kd-dnf-cache.XXXXXX)
    # Unsigned test packages: signatures are the repo suite's concern.
    set +e
    dnf -y --installroot="$root" --releasever=12 \
        --setopt=reposdir=/dev/null --setopt=cachedir="$cache" \
        --setopt=metadata_expire=0 --setopt=best=True \
        --setopt=install_weak_deps=False --setopt=clean_requirements_on_remove=True \
        --nogpgcheck --repofrompath=local,"file://$repo" --repo=local \
        "$@" </dev/null >"$KD_WORK/rpm.dnf.out" 2>&1
    rc=$?
    set -e
    rm -rf "$cache"
    cat "$KD_WORK/rpm.dnf.out" >&2
    [ "$rc" -eq 0 ] || { echo "dnf $* failed (exit $rc)" >&2; return 1; }
    # rpm reports a failed scriptlet as a warning and still succeeds.
    if grep -Ei 'scriptlet failed|exit status [1-9]|error:' "$KD_WORK/rpm.dnf.out"; then
        echo "assertion failed: a scriptlet failed (above)" >&2
        return 1
    fi
}

# assert_versions ROOT EXPECTED : "name version-release" of our five packages,
# sorted, one per line.
assert_versions() {
    # shellcheck disable=SC2086
    actual=$(rpm --root "$1" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' $PACKAGES | LC_ALL=C sort)
    assert_eq "$2" "$actual" "installed versions"
}


# What rpm and dnf keep about their own work, and nothing else: the rpm
# database, dnf's history, cache, module state and logs.
BOOKKEEPING='/(var/lib/rpm|var/lib/dnf|var/cache/dnf|etc/dnf|var/log/dnf\.log|var/log/dnf\.rpm\.log|var/log/dnf\.librepo\.log|var/log/hawkey\.log)([[:space:]]|/)'

assert_extra_args_reach_kubelet() { # ROOT
    plan=$(kd_run "$1" /usr/bin/kubelet-wrapper --print)
    echo "$plan"
    assert_eq rpm "$(echo "$plan" | jq -r .family)" "family kubelet-wrapper reads"
    assert_eq read "$(echo "$plan" | jq -r --arg f "$ENV_FILE" '.files[] | select(.path == $f) | .status')" "status of $ENV_FILE"
    assert_eq '["--node-ip=192.0.2.10","--v=4"]' "$(echo "$plan" | jq -c '.argv[-2:]')" "last kubelet arguments"
    echo "$plan" | jq -e --arg f "$ENV_FILE" '.sources[-1] | contains($f)' >/dev/null ||
        { echo "assertion failed: the last argument does not come from $ENV_FILE" >&2; return 1; }
}

# --- root E: the unedited lifecycle ----------------------------------------

ROOT_E=$(new_root)

dnf_install_prev_runs_scriptlets_without_systemd() { # failure 7
    mkdir -p "$ROOT_E/opt/cni/bin" "$ROOT_E/etc/systemd/system/kubelet.service.d"
    printf '#!/bin/sh\necho third-party CNI plugin\n' >"$ROOT_E$THIRD_PARTY_PLUGIN"
    chmod 0755 "$ROOT_E$THIRD_PARTY_PLUGIN"
    printf '[Service]\nEnvironment="ADMIN_OVERRIDE=1"\n' >"$ROOT_E$ADMIN_OVERRIDE"
    (cd "$ROOT_E" && sha256sum ".$THIRD_PARTY_PLUGIN" ".$ADMIN_OVERRIDE") >"$KD_WORK/rpm.admin-files.sha256"
    kd_listing "$ROOT_E" >"$KD_WORK/rpm.E.before"

    # The command docs/packages.md shows, from the release's directory, with
    # dnf pointed at this root (and at the release's repository for the
    # test-only package that stands in for the distribution's).
    kd_guide_block docs/packages.md dnf-install-files \
        'dnf install -y ' "dnf_in $ROOT_E $REPO_PREV install " >"$KD_WORK/rpm.guide.sh"
    # shellcheck source=/dev/null # the guide's block, written just above
    (cd "$KD_DIST_PREV" && . "$KD_WORK/rpm.guide.sh")
    # shellcheck disable=SC2086
    assert_versions "$ROOT_E" "$(expect $PACKAGES)"
    # Every package that has scriptlets had them run (by /bin/sh in the root).
    n=0
    for p in $PACKAGES; do
        if [ -n "$(rpm -qp --scripts "$(rpm_of "$KD_DIST_PREV" "$p")")" ]; then
            assert_grep "Running scriptlet: $(nvr "$KD_DIST_PREV" "$p")" "$KD_WORK/rpm.dnf.out"
            n=$((n + 1))
        fi
    done
    [ "$n" -gt 0 ] || { echo "assertion failed: no package has scriptlets; the test proves nothing" >&2; return 1; }
    # dnf --installroot runs %post chrooted, as an image build does: the
    # kernel prerequisites are left to the boot, and %post says so.
    assert_grep '^kubelet: kernel prerequisites not applied now: ' "$KD_WORK/rpm.dnf.out"
}

# The completions land in the rpm family's vendor directories (zsh's
# site-functions), and the real kubectl's work in bash.
completions_in_the_rpm_vendor_directories() {
    assert_file "$ROOT_E/usr/share/zsh/site-functions/_kubectl"
    assert_no_file "$ROOT_E/usr/share/zsh/vendor-completions/_kubectl"
    f=$ROOT_E/usr/share/bash-completion/completions/kubectl
    out=$(bash -c '. "$1" && complete -p kubectl' sh "$f")
    echo "$out"
    case $out in "complete "*" kubectl") ;; *) echo "assertion failed: no bash completion for kubectl" >&2; return 1 ;; esac
    zsh -n "$ROOT_E/usr/share/zsh/site-functions/_kubectl"
    rpm --root "$ROOT_E" -qf /usr/share/zsh/site-functions/_kubectl | grep -q '^kubectl-' ||
        { echo "assertion failed: _kubectl is not kubectl's" >&2; return 1; }
}

rpm_verify_clean_after_install() {
    # shellcheck disable=SC2086
    out=$(rpm --root "$ROOT_E" -V $PACKAGES)
    assert_eq "" "$out" "rpm -V output"
}

sysconfig_is_prev_default_noreplace_config() { # failure 1
    cmp "$DEFAULT_PREV" "$ROOT_E$ENV_FILE"
    flags=$(rpm --root "$ROOT_E" -q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' kubelet | awk -v f="$ENV_FILE" '$2 == f { print $1 }')
    assert_eq cn "$flags" "rpm file flags of $ENV_FILE (c: config, n: noreplace)"
}

crictl_yaml_is_a_noreplace_config_with_the_runtime_endpoint_only() {
    # image-endpoint stays unset: set, it would not follow --runtime-endpoint.
    assert_eq 'runtime-endpoint: unix:///run/containerd/containerd.sock' \
        "$(grep -v -e '^#' -e '^$' "$ROOT_E$CRICTL_YAML")" "settings in $CRICTL_YAML"
    flags=$(rpm --root "$ROOT_E" -q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' cri-tools | awk -v f="$CRICTL_YAML" '$2 == f { print $1 }')
    assert_eq cn "$flags" "rpm file flags of $CRICTL_YAML (c: config, n: noreplace)"
}

rpm_dropin_reads_etc_sysconfig_kubelet() { # failure 2
    assert_grep "^EnvironmentFile=-$ENV_FILE\$" "$ROOT_E$DROPIN"
    if grep -n /etc/default "$ROOT_E$DROPIN"; then
        echo "assertion failed: the rpm's drop-in names the deb family's file" >&2
        return 1
    fi
    # A vendor file, not %config: admins override it under /etc/systemd.
    flags=$(rpm --root "$ROOT_E" -q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' kubeadm | awk -v f="$DROPIN" '$2 == f { print $1 }')
    case $flags in
    *c*)
        echo "assertion failed: $DROPIN is %config ($flags)" >&2
        return 1
        ;;
    esac
}

kubeadm_requires_conntrack_tools() { # failure 9
    rpm --root "$ROOT_E" -q --requires kubeadm | grep -x 'conntrack-tools.*'
    # dnf resolved it (here from the test-only provides package).
    rpm --root "$ROOT_E" -q --whatprovides conntrack-tools
}

kubernetes_cni_stays_out_of_distro_plugin_dirs() { # failure 6
    files=$(rpm --root "$ROOT_E" -ql kubernetes-cni)
    echo "$files"
    if echo "$files" | grep -Ev '^(/opt/cni|/etc/cni|/usr/share/licenses/kubernetes-cni)(/|$)'; then
        echo "assertion failed: kubernetes-cni installs outside /opt/cni, /etc/cni and its license directory" >&2
        return 1
    fi
    conflicts=$(rpm --root "$ROOT_E" -q --conflicts --obsoletes kubernetes-cni)
    assert_eq "" "$conflicts" "conflicts and obsoletes of kubernetes-cni"
}

upgrade_replaces_unedited_sysconfig_noninteractive() { # failures 1, 3
    dnf_in "$ROOT_E" "$REPO_CUR" upgrade
    assert_versions "$ROOT_E" "$(expect)"
    if cmp -s "$DEFAULT_PREV" "$DEFAULT_CUR"; then
        echo "assertion failed: releases N-1 and N ship the same default; the test would prove nothing" >&2
        return 1
    fi
    cmp "$DEFAULT_CUR" "$ROOT_E$ENV_FILE"
    assert_no_file "$ROOT_E$ENV_FILE.rpmnew"
}

third_party_cni_plugin_survives_upgrade() { # failure 5
    (cd "$ROOT_E" && sha256sum -c "$KD_WORK/rpm.admin-files.sha256")
    assert_eq kubernetes-cni "$(rpm --root "$ROOT_E" -qf --qf '%{NAME}\n' /opt/cni/bin/bridge)" "owner of /opt/cni/bin/bridge"
    if rpm --root "$ROOT_E" -qf "$THIRD_PARTY_PLUGIN"; then
        echo "assertion failed: a package claims the third-party plugin" >&2
        return 1
    fi
}

admin_dropin_override_survives_upgrade() { # failure 1
    (cd "$ROOT_E" && sha256sum -c "$KD_WORK/rpm.admin-files.sha256")
}

reinstall_restores_deleted_kubeadm_dropin() { # failure 1
    file_of "$(rpm_of "$KD_DIST" kubeadm)" "$DROPIN" "$KD_WORK/rpm.dropin.cur"
    rm "$ROOT_E$DROPIN"
    dnf_in "$ROOT_E" "$REPO_CUR" reinstall kubeadm
    cmp "$KD_WORK/rpm.dropin.cur" "$ROOT_E$DROPIN"
    assert_eq "" "$(rpm --root "$ROOT_E" -V kubeadm)" "rpm -V kubeadm"
}

remove_leaves_nothing_behind() { # failures 5, 7
    # shellcheck disable=SC2086
    dnf_in "$ROOT_E" "$REPO_CUR" remove $PACKAGES
    for p in $PACKAGES kubedist-test-provides; do
        if rpm --root "$ROOT_E" -q "$p"; then
            echo "assertion failed: $p still installed" >&2
            return 1
        fi
    done
    # rpm erases an unedited %config file and saves nothing.
    assert_no_file "$ROOT_E$ENV_FILE"
    assert_no_file "$ROOT_E$ENV_FILE.rpmsave"
    (cd "$ROOT_E" && sha256sum -c "$KD_WORK/rpm.admin-files.sha256")
    kd_listing "$ROOT_E" >"$KD_WORK/rpm.E.after"
    # Every difference outside rpm's and dnf's bookkeeping is a failure:
    # something we installed was left, or something we did not was touched.
    if diff "$KD_WORK/rpm.E.before" "$KD_WORK/rpm.E.after" | grep '^[<>]' | grep -Ev "^[<>] $BOOKKEEPING"; then
        echo "assertion failed: the root differs from before the install (above)" >&2
        return 1
    fi
}

kd_test dnf_install_prev_runs_scriptlets_without_systemd
kd_test completions_in_the_rpm_vendor_directories
kd_test rpm_verify_clean_after_install
kd_test sysconfig_is_prev_default_noreplace_config
kd_test crictl_yaml_is_a_noreplace_config_with_the_runtime_endpoint_only
kd_test rpm_dropin_reads_etc_sysconfig_kubelet
kd_test kubeadm_requires_conntrack_tools
kd_test kubernetes_cni_stays_out_of_distro_plugin_dirs
kd_test upgrade_replaces_unedited_sysconfig_noninteractive
kd_test third_party_cni_plugin_survives_upgrade
kd_test admin_dropin_override_survives_upgrade
kd_test reinstall_restores_deleted_kubeadm_dropin
kd_test remove_leaves_nothing_behind

# --- root F: an edited /etc/sysconfig/kubelet -------------------------------

ROOT_F=$(new_root)

extra_args_in_etc_sysconfig_reach_kubelet() { # failure 2
    # shellcheck disable=SC2086
    dnf_in "$ROOT_F" "$REPO_PREV" install $PACKAGES
    sed -i "s|^#KUBELET_EXTRA_ARGS=.*|KUBELET_EXTRA_ARGS=\"$EXTRA_ARGS\"|" "$ROOT_F$ENV_FILE"
    cp "$ROOT_F$ENV_FILE" "$KD_WORK/rpm.F.edited"
    assert_grep '^KUBELET_EXTRA_ARGS="--node-ip=192.0.2.10 --v=4"$' "$ROOT_F$ENV_FILE"
    assert_extra_args_reach_kubelet "$ROOT_F"
}

edit_crictl_yaml_for_cri_o() {
    sed -i 's|^runtime-endpoint: .*|runtime-endpoint: unix:///var/run/crio/crio.sock|' "$ROOT_F$CRICTL_YAML"
    assert_grep '^runtime-endpoint: unix:///var/run/crio/crio.sock$' "$ROOT_F$CRICTL_YAML"
    cp "$ROOT_F$CRICTL_YAML" "$KD_WORK/rpm.F.crictl"
}

upgrade_keeps_edited_sysconfig_writes_rpmnew_noninteractive() { # failures 1, 3
    dnf_in "$ROOT_F" "$REPO_CUR" upgrade
    assert_versions "$ROOT_F" "$(expect)"
    cmp "$KD_WORK/rpm.F.edited" "$ROOT_F$ENV_FILE"
    cmp "$DEFAULT_CUR" "$ROOT_F$ENV_FILE.rpmnew"
    assert_extra_args_reach_kubelet "$ROOT_F"
}

upgrade_keeps_edited_crictl_yaml() {
    cmp "$KD_WORK/rpm.F.crictl" "$ROOT_F$CRICTL_YAML"
    # The default did not change between the releases: nothing to offer.
    assert_no_file "$ROOT_F$CRICTL_YAML.rpmnew"
}

remove_saves_edited_sysconfig_as_rpmsave() {
    # shellcheck disable=SC2086
    dnf_in "$ROOT_F" "$REPO_CUR" remove $PACKAGES
    # rpm's rule for an edited %config file on erase: renamed to .rpmsave.
    # The .rpmnew from the upgrade belongs to no package and stays.
    assert_no_file "$ROOT_F$ENV_FILE"
    cmp "$KD_WORK/rpm.F.edited" "$ROOT_F$ENV_FILE.rpmsave"
    assert_no_file "$ROOT_F$CRICTL_YAML"
    cmp "$KD_WORK/rpm.F.crictl" "$ROOT_F$CRICTL_YAML.rpmsave"
    cmp "$DEFAULT_CUR" "$ROOT_F$ENV_FILE.rpmnew"
}

kd_test extra_args_in_etc_sysconfig_reach_kubelet
kd_test edit_crictl_yaml_for_cri_o
kd_test upgrade_keeps_edited_sysconfig_writes_rpmnew_noninteractive
kd_test upgrade_keeps_edited_crictl_yaml
kd_test remove_saves_edited_sysconfig_as_rpmsave

# --- root G: no exact pins between the packages ----------------------------

ROOT_G=$(new_root)

mixed_versions_prev_kubeadm_with_cur_kubelet() { # failure 8
    dnf_in "$ROOT_G" "$REPO_BOTH" install "$(nvr "$KD_DIST_PREV" kubeadm)" kubelet kubectl \
        kubernetes-cni cri-tools
    assert_versions "$ROOT_G" "$(expect kubeadm)"
}

older_versions_stay_installable() { # failure 8
    dnf_in "$ROOT_G" "$REPO_BOTH" downgrade kubelet kubectl kubernetes-cni cri-tools
    # shellcheck disable=SC2086
    assert_versions "$ROOT_G" "$(expect $PACKAGES)"
}

upgrade_kubeadm_alone_while_others_excluded() { # failure 8
    # Upstream's repository file excludes the packages from plain upgrades;
    # with exact pins between them, kubeadm alone could not move.
    dnf_in "$ROOT_G" "$REPO_BOTH" --exclude=kubelet,kubectl,kubernetes-cni,cri-tools upgrade kubeadm
    assert_grep 'Upgrading *: kubeadm' "$KD_WORK/rpm.dnf.out"
    assert_versions "$ROOT_G" "$(expect kubelet kubectl kubernetes-cni cri-tools)"
}

kd_test mixed_versions_prev_kubeadm_with_cur_kubelet
kd_test older_versions_stay_installable
kd_test upgrade_kubeadm_alone_while_others_excluded

# --- root X: xz payloads --------------------------------------------------

# `--compression rpm=xz:1+long`: every payload is xz, the one-program
# packages' with the x86 branch filter (pkg/*.toml), and the header says so
# as rpmbuild's would; rpm -K accepts each, dnf installs them, and rpm -V
# finds every file as its header describes it, so rpm decoded each payload.
# (The fixtures' release: the source releases' rpms are zstd.)
xz_payloads_install_and_verify() {
    out=$KD_WORK/rpm.xz
    rm -rf "$out"
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 "${KD_XTASK:-$KD_REPO/target/debug/xtask}" dist \
        --fixtures --arch amd64 --formats rpm --compression rpm=xz:1+long --out "$out") >"$KD_WORK/rpm.xz.log" 2>&1 ||
        { cat "$KD_WORK/rpm.xz.log" >&2; return 1; }
    for p in $PACKAGES; do
        rpm -K "$(rpm_of "$out" "$p")"
        assert_eq xz "$(rpm -qp --qf '%{PAYLOADCOMPRESSOR}' "$(rpm_of "$out" "$p")")" "$p's payload compressor"
        rpm -qp --requires "$(rpm_of "$out" "$p")" >"$KD_WORK/rpm.xz.requires"
        assert_grep '^rpmlib(PayloadIsXz) <= 5.2-1$' "$KD_WORK/rpm.xz.requires"
    done
    # The kubelet's payload (from xz's magic on) has the x86 filter;
    # kubernetes-cni's, of many programs, none.
    for p in kubelet:--x86 kubernetes-cni:--lzma2; do
        rpm=$(rpm_of "$out" "${p%%:*}")
        at=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$rpm" | head -1 | cut -d : -f 1)
        tail -c +"$((at + 1))" "$rpm" >"$KD_WORK/rpm.xz.payload"
        xz --robot --list -vv "$KD_WORK/rpm.xz.payload" | awk -F '\t' '$1 == "block" { print $NF }' | sort -u >"$KD_WORK/rpm.xz.filters"
        assert_grep "^${p#*:}" "$KD_WORK/rpm.xz.filters"
    done
    root=$(new_root)
    repo=$(make_repo xz "$out")
    # shellcheck disable=SC2086
    dnf_in "$root" "$repo" install $PACKAGES
    # shellcheck disable=SC2086
    assert_eq "" "$(rpm --root "$root" -V $PACKAGES)" "rpm -V output"
}

kd_test xz_payloads_install_and_verify

# --- root R: the container runtime, kubedist-containerd --------------------

ROOT_R=$(new_root)
RUNTIME_CONFIG=/etc/containerd/config.toml

# A distribution's containerd, as rpm records it: a package of that name
# owning /usr/bin/containerd (Fedora's own is 2.x; RHEL has none).
distribution_containerd_rpm() {
    top=$KD_WORK/rpm.fake-containerd
    rm -rf "$top"
    mkdir -p "$top"
    cat >"$top/containerd.spec" <<'SPEC'
Name: containerd
Version: 1.7.24
Release: 1
Summary: A distribution's containerd (test)
License: Apache-2.0
BuildArch: noarch
%description
Owns /usr/bin/containerd, as a distribution's package does.
%install
mkdir -p %{buildroot}/usr/bin
printf '#!/bin/sh\n' >%{buildroot}/usr/bin/containerd
chmod 0755 %{buildroot}/usr/bin/containerd
%files
/usr/bin/containerd
SPEC
    SOURCE_DATE_EPOCH=1700000000 rpmbuild -bb --quiet --define "_topdir $top" --define "_rpmdir $top/out" \
        "$top/containerd.spec" >&2
    printf '%s\n' "$top"/out/noarch/containerd-1.7.24-1.noarch.rpm
}

runtime_beside_a_distribution_s_containerd_dnf_refuses_until_allowed_to_erase() {
    rpm --root "$ROOT_R" -i --nodeps "$(distribution_containerd_rpm)"
    kd_listing "$ROOT_R" >"$KD_WORK/rpm.R.before"
    # shellcheck disable=SC2015 # the || branch is the expected one
    (cd "$KD_DIST_PREV" && dnf_in "$ROOT_R" "$REPO_PREV" install ./kubedist-containerd-*.rpm) &&
        { echo "assertion failed: dnf installed kubedist-containerd beside containerd" >&2; return 1; } || true
    assert_grep "conflicts with containerd provided by containerd-1.7.24-1.noarch" "$KD_WORK/rpm.dnf.out"
    assert_grep "allowerasing" "$KD_WORK/rpm.dnf.out"
    kd_listing "$ROOT_R" >"$KD_WORK/rpm.R.after"
    if diff "$KD_WORK/rpm.R.before" "$KD_WORK/rpm.R.after" | grep '^[<>]' | grep -Ev "^[<>] $BOOKKEEPING"; then
        echo "assertion failed: a refused install changed the root (above)" >&2
        return 1
    fi
}

runtime_installs_with_the_guide_s_command() {
    # The command docs/packages.md shows, with dnf allowed to erase the
    # distribution's containerd of the test above.
    kd_guide_block docs/packages.md dnf-install-runtime \
        'dnf install -y ' "dnf_in $ROOT_R $REPO_PREV install --allowerasing " >"$KD_WORK/rpm.runtime.sh"
    # shellcheck source=/dev/null # the guide's block, written just above
    (cd "$KD_DIST_PREV" && . "$KD_WORK/rpm.runtime.sh")
    rpm --root "$ROOT_R" -q kubedist-containerd
    if rpm --root "$ROOT_R" -q containerd; then
        echo "assertion failed: the distribution's containerd is still installed" >&2
        return 1
    fi
    assert_eq "kubedist-containerd" "$(rpm --root "$ROOT_R" -qf /usr/bin/containerd --qf '%{NAME}')" "owner of /usr/bin/containerd"
    assert_grep '^  SystemdCgroup = true$' "$ROOT_R$RUNTIME_CONFIG"
    rpm --root "$ROOT_R" -qc kubedist-containerd | grep -qx "$RUNTIME_CONFIG" ||
        { echo "assertion failed: $RUNTIME_CONFIG is not a %config file" >&2; return 1; }
    rpm --root "$ROOT_R" -q --provides kubedist-containerd >"$KD_WORK/rpm.R.provides"
    for p in containerd runc; do assert_grep "^$p\$" "$KD_WORK/rpm.R.provides"; done
    assert_eq "" "$(rpm --root "$ROOT_R" -V kubedist-containerd)" "rpm -V kubedist-containerd"
}

runtime_upgrade_keeps_an_edited_config() {
    echo '# the admin'"'"'s' >>"$ROOT_R$RUNTIME_CONFIG"
    (cd "$KD_DIST" && dnf_in "$ROOT_R" "$REPO_CUR" upgrade ./kubedist-containerd-*.rpm)
    assert_eq "kubedist-containerd-$(version_of "$KD_DIST" kubedist-containerd)" \
        "$(rpm --root "$ROOT_R" -q kubedist-containerd --qf '%{NAME}-%{VERSION}-%{RELEASE}')" "installed version"
    assert_grep "^# the admin's\$" "$ROOT_R$RUNTIME_CONFIG"
}

kd_test runtime_beside_a_distribution_s_containerd_dnf_refuses_until_allowed_to_erase
kd_test runtime_installs_with_the_guide_s_command
kd_test runtime_upgrade_keeps_an_edited_config

kd_summary
