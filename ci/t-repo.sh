#!/bin/sh
# `cargo xtask repo` with the real clients: a signed apt and dnf repository
# built from releases N-1 and N, used the way an operator's air-gapped hosts
# use it, and refused by them whenever it has been tampered with.
#
# - apt: a bookworm root with only the kubedist repository as a source (the
#   written kubedist.gpg in /etc/apt/keyrings, kubedist.sources or .list
#   verbatim, no [trusted=yes]) and no network at all (kd_run_offline):
#   apt-get update verifies InRelease with our key, installs release N,
#   pins kubelet back to N-1; a tampered Packages index and a repository
#   signed by another key are refused.
# - dnf: a bare busybox root with kubedist.repo verbatim (gpgcheck=1,
#   repo_gpgcheck=1, gpgkey=file:///srv/kubedist/kubedist.asc). The host's
#   dnf runs with --installroot in a private mount namespace where a tmpfs
#   on /srv holds the repository at /srv/kubedist, so the snippet's URLs
#   work unedited, and without network. Distribution dependencies come from
#   the TEST-ONLY ci/fixtures/kubedist-test-provides.spec, as in t-rpm.sh.
#   rpm -K reports our signatures; a corrupted rpm, an rpm signed by another
#   key, an unsigned rpm and a repomd.xml that no longer matches its
#   signature are refused.
# - keys: an expired key is refused and leaves the repository as it was (or
#   uncreated); a key expiring within 90 days signs with a warning (one
#   expiring later gets none). Those keys are made with gpg in a throwaway GNUPGHOME
#   (--faked-system-time for the expired one).
# - the dependency-closure gate: release N without kubernetes-cni (both
#   families, then the rpm alone) is refused with one line naming kubelet,
#   the dependency and the channel, and creates nothing; a kubeadm .deb
#   rebuilt to need a cri-tools no release has is refused and leaves an
#   existing repository byte for byte as it was, while the same package
#   needing a cri-tools the repository holds is published.
# - --channels minor: releases N-1 and N and the next minor's first release
#   (the fixtures relabelled by `dist --version`) make two channels, each
#   with only paths inside itself and its own signatures and snippets; a
#   host given one channel alone (as rsync would copy it) installs from it,
#   and moves to the next minor by taking that channel's snippet (apt and
#   dnf); a flat run on the minor repository is refused.
# - adding release N to a repository holding N-1 keeps N-1 installable and
#   re-signs the metadata; a client that installed N-1 upgrades to N.
#
# The apt roots come from their own cached base tarball with iptables and
# conntrack (kubelet's and kubeadm's Debian dependencies) preinstalled:
# offline, apt cannot fetch them from Debian's archive.
#
# SOURCE_DATE_EPOCH is left as the caller has it for `cargo xtask repo` (the
# runner sets one for every step): the build scripts of ring and zstd-sys
# rerun when it changes, so every new value would rebuild xtask (minutes).
#
# Wall time: about 80-110 s on 2 cores with the base tarball cached and
# xtask built (about 75 s more to build the tarball once); a third of it is
# removing the roots.

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require mmdebstrap unshare cargo gpg gpgv gpgconf dpkg-deb rpm rpmbuild dnf \
    createrepo_c busybox gzip xz sha256sum
kd_require_dist

# The dnf tests mount a tmpfs on /srv in a private mount namespace; a work
# directory under /srv would be hidden by it.
if [ ! -d /srv ] || case $KD_WORK in /srv/*) true ;; *) false ;; esac; then
    echo "$KD_SUITE: FAIL: the dnf tests need a host directory /srv, and KD_WORK outside it" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

TMP=$(kd_scratch_dir t-repo)
# Repository copies and roots: removed when the suite exits (kd_cleanup).
SCRATCH=$TMP/scratch
mkdir -p "$SCRATCH"
kd_remove_on_exit "$SCRATCH"

# gpg and rpm get homes of their own: nothing of the host's keyrings or
# ~/.rpmmacros is read or written. The rpm database is where an rpm host has
# it (Debian's rpm defaults to ~/.rpmdb). HOME itself stays: cargo needs it.
GPG_HOME=$TMP/gnupg
mkdir -m 0700 "$GPG_HOME"
RPM_HOME=$TMP/rpm-home
mkdir -p "$RPM_HOME"
printf '%%_dbpath /var/lib/rpm\n' >"$RPM_HOME/.rpmmacros"
gpg_() { gpg --homedir "$GPG_HOME" --batch "$@"; }
gpgv_() { GNUPGHOME=$GPG_HOME gpgv "$@"; }
rpm_() { HOME=$RPM_HOME rpm "$@"; }
# The gpg-agent that gpg starts for GPG_HOME is ours; stop it on exit.
trap 'gpgconf --homedir "$GPG_HOME" --kill gpg-agent >/dev/null 2>&1 || true; kd_cleanup' EXIT

REPO=$TMP/repo        # release N-1 and N, signed with the generated test key
TEST_KEY=$TMP/test.key
OTHER=$SCRATCH/other  # the same, re-signed with another generated key
OTHER_KEY=$TMP/other.key

# repo ARGS... : this checkout's `cargo xtask repo`.
repo() {
    (cd "$KD_REPO" && cargo xtask repo "$@")
}

# repo_fails NAME ARGS... : `cargo xtask repo ARGS` must fail; its output is
# printed and kept in $TMP/NAME.out and $TMP/NAME.err.
repo_fails() {
    name=$1
    shift
    if repo "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        cat "$TMP/$name.out" "$TMP/$name.err"
        echo "assertion failed: cargo xtask repo $* succeeded" >&2
        return 1
    fi
    cat "$TMP/$name.out" "$TMP/$name.err"
}

# signer STDOUT : the fingerprint `cargo xtask repo` reports it signed with.
signer() { sed -n 's/^signed by \([0-9A-F]\{40\}\) .*/\1/p' "$1"; }

deb_version() { dpkg-deb -f "$1/$2"_*.deb Version; }
rpm_version() { rpm_ -qp --qf '%{VERSION}-%{RELEASE}' "$1/$2"-[0-9]*.rpm; }

CLIENT_PACKAGES="kubelet kubeadm kubectl"
ALL_PACKAGES="kubelet kubeadm kubectl kubernetes-cni cri-tools kubedist-containerd"
# Packages of one release, and of the two (N-1 and N).
ONE=$(echo "$ALL_PACKAGES" | wc -w)
TWO=$((2 * ONE))
# Each package must differ between the releases, or pins and the
# incremental repository prove nothing.
for p in $ALL_PACKAGES; do
    if [ "$(deb_version "$KD_DIST_PREV" "$p")" = "$(deb_version "$KD_DIST" "$p")" ] ||
        [ "$(rpm_version "$KD_DIST_PREV" "$p")" = "$(rpm_version "$KD_DIST" "$p")" ]; then
        echo "$KD_SUITE: FAIL: $p has the same version in KD_DIST_PREV and KD_DIST" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
done

# expect_debs DIST : "name version" of the client packages as DIST has them.
expect_debs() {
    for p in $CLIENT_PACKAGES; do echo "$p $(deb_version "$1" "$p")"; done | LC_ALL=C sort
}
expect_rpms() {
    for p in $CLIENT_PACKAGES; do echo "$p $(rpm_version "$1" "$p")"; done | LC_ALL=C sort
}

# --- apt clients ------------------------------------------------------------

BASE=$(kd_base_tarball repo netbase mount iptables conntrack)

# new_apt_root : a fresh bookworm root in $NEW_ROOT whose only apt source
# will be ours: an air-gapped host has no route to Debian's archive. (Not
# $(...): kd_new_root must register the root for cleanup in this shell.)
new_apt_root() {
    kd_new_root "$BASE" >"$TMP/new-root"
    NEW_ROOT=$(cat "$TMP/new-root")
    rm -f "$NEW_ROOT/etc/apt/sources.list" "$NEW_ROOT"/etc/apt/sources.list.d/*
}

# apt_client ROOT TREE KEYRING SNIPPET : TREE served at /srv/kubedist in ROOT,
# KEYRING installed as the operator installs kubedist.gpg, and SNIPPET (a
# file TREE's build wrote, by its path in TREE) copied verbatim to
# /etc/apt/sources.list.d/.
apt_client() {
    cp -R "$2" "$1/srv/kubedist"
    install -m 0644 "$3" "$1/etc/apt/keyrings/kubedist.gpg"
    install -m 0644 "$2/$4" "$1/etc/apt/sources.list.d/$(basename "$4")"
}

# offline ROOT OUT : the script on stdin (under set -eu) inside ROOT with no
# network; its output goes to OUT and to the test's log. Returns its status.
offline() {
    script=$(mktemp "$1/tmp/kd-test.XXXXXX")
    { echo 'set -eu'; cat; } >"$script"
    status=0
    kd_run_offline "$1" sh "/tmp/$(basename "$script")" </dev/null >"$2" 2>&1 || status=$?
    sed 's/^/  | /' "$2" >&2
    return "$status"
}

# installed ROOT : "name version" of the client packages dpkg has installed.
installed() {
    # shellcheck disable=SC2016,SC2086 # a dpkg-query format; one word per package
    kd_run "$1" dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' $CLIENT_PACKAGES |
        awk '$3 == "ii" { print $1, $2 }' | LC_ALL=C sort
}

# assert_clean_update OUT : apt-get update output with nothing wrong in it.
assert_clean_update() {
    if grep -E '^(W|E|Err):' "$1" ||
        grep -Ei 'unsigned|insecure|not signed|NO_PUBKEY|unauthenticated|trusted=yes' "$1"; then
        echo "assertion failed: apt-get update reported the problems above" >&2
        return 1
    fi
}

# assert_nothing_offered ROOT : after a refused apt-get update, apt has nothing
# of ours to install.
assert_nothing_offered() {
    offered=$(kd_run "$1" apt-cache madison kubelet 2>/dev/null)
    assert_eq "" "$offered" "kubelet versions apt offers after the refused update"
}

ROOT_A=
ROOT_T=
ROOT_K=
ROOT_I=
new_apt_root
ROOT_A=$NEW_ROOT
new_apt_root
ROOT_T=$NEW_ROOT
new_apt_root
ROOT_K=$NEW_ROOT
new_apt_root
ROOT_I=$NEW_ROOT

# --- dnf clients ------------------------------------------------------------

# The test-only provides package (kd_provides_rpm; rpmbuild with the
# suite's own HOME, as every rpm command here).
PROVIDES_REPO=$TMP/provides
mkdir -p "$PROVIDES_REPO"
cp "$(HOME=$RPM_HOME kd_provides_rpm)" "$PROVIDES_REPO/"
createrepo_c --quiet "$PROVIDES_REPO" >&2

# new_dnf_root : in $NEW_ROOT, a bare root with busybox as /bin/sh (as in
# t-rpm.sh), kubedist.repo from $REPO verbatim, the TEST-ONLY provides
# repository (unsigned, never shipped) and a dnf.conf as Fedora's defaults
# have it (a repository that fails is an error, not skipped).
new_dnf_root() {
    r=$(mktemp -d "$SCRATCH/root.XXXXXX")
    kd_busybox_root "$r" etc/yum.repos.d etc/dnf
    printf '[main]\ngpgcheck=1\nskip_if_unavailable=False\ninstall_weak_deps=False\n' >"$r/etc/dnf/dnf.conf"
    cp "$REPO/kubedist.repo" "$r/etc/yum.repos.d/kubedist.repo"
    printf '%s\n' '# TEST ONLY: declares the distribution packages kubedist needs (t-rpm.sh)' \
        '[kubedist-test-provides]' 'name=kubedist TEST-ONLY provides' \
        'baseurl=file:///srv/kubedist-test-provides' 'gpgcheck=0' 'repo_gpgcheck=0' \
        >"$r/etc/yum.repos.d/kubedist-test-provides.repo"
    NEW_ROOT=$r
}

# dnf_offline ROOT TREE OUT ARGS... : `dnf -y --installroot ROOT ARGS` with
# TREE at /srv/kubedist (a tmpfs on /srv in a private mount namespace: the
# host's /srv is not touched) and no network. Output in OUT and the log;
# returns dnf's status.
dnf_offline() {
    root=$1
    tree=$2
    out=$3
    shift 3
    # A fresh cache each call, under /tmp (dnf also writes it into the root).
    cache=$(mktemp -d /tmp/kd-dnf-cache.XXXXXX)
    status=0
    # shellcheck disable=SC2016 # expanded by the inner shell
    HOME=$RPM_HOME unshare --mount --net -- sh -c '
        tree=$1 provides=$2 root=$3 cache=$4
        shift 4
        mount -t tmpfs -o mode=0755 kd-srv /srv
        mkdir /srv/kubedist /srv/kubedist-test-provides
        mount --bind "$tree" /srv/kubedist
        mount --bind "$provides" /srv/kubedist-test-provides
        exec dnf -y --installroot="$root" --releasever=12 --setopt=cachedir="$cache" "$@"
    ' dnf_offline "$tree" "$PROVIDES_REPO" "$root" "$cache" "$@" </dev/null >"$out" 2>&1 || status=$?
    rm -rf "$cache"
    sed 's/^/  | /' "$out" >&2
    return "$status"
}

rpm_installed() {
    # shellcheck disable=SC2086 # one word per package
    rpm_ --root "$1" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' $CLIENT_PACKAGES | LC_ALL=C sort
}

# tree_listing DIR : every path under DIR with type and mode, and the
# sha256 of every file, sorted.
tree_listing() {
    (cd "$1" && find . -printf '%p %y %m\n' && find . -type f -exec sha256sum {} +) | LC_ALL=C sort
}

# sign_repomd TREE : repodata regenerated for TREE/x86_64 as it now is, and
# repomd.xml signed with the repository's own key (the test holds it), as a
# mirror that regenerates metadata would: dnf then has only each package's
# own signature to go by.
sign_repomd() {
    rm -rf "$1/x86_64/repodata"
    createrepo_c --quiet --no-database "$1/x86_64" >&2
    gpg_ --quiet --import "$TEST_KEY"
    gpg_ --yes --armor --local-user "$(signer "$TMP/build.out")!" --detach-sign \
        -o "$1/x86_64/repodata/repomd.xml.asc" "$1/x86_64/repodata/repomd.xml"
    gpgv_ --keyring "$1/kubedist.gpg" "$1/x86_64/repodata/repomd.xml.asc" "$1/x86_64/repodata/repomd.xml"
}


# --- the repository ----------------------------------------------------------

repo_built_from_both_releases_with_test_key() {
    repo --from "$KD_DIST_PREV" "$KD_DIST" --out "$REPO" --generate-test-key "$TEST_KEY" \
        --base-url file:///srv/kubedist >"$TMP/build.out" 2>"$TMP/build.err"
    cat "$TMP/build.out" "$TMP/build.err"
    fpr=$(signer "$TMP/build.out")
    [ -n "$fpr" ] || { echo "assertion failed: no 'signed by' line" >&2; return 1; }
    assert_grep "generated test signing key $fpr -> $TEST_KEY" "$TMP/build.err"
    assert_eq 600 "$(stat -c %a "$TEST_KEY")" "mode of the generated secret key"
    # A key that never expires: no expiry warning.
    if grep -E '^warning: .*expire' "$TMP/build.err"; then
        echo "assertion failed: expiry warning for a key without expiry" >&2
        return 1
    fi
    # Nothing secret is published (the packages' payloads are compressed
    # and hold programs that may name PEM blocks: not searched).
    if grep -rl --exclude='*.deb' --exclude='*.rpm' -- '-----BEGIN PGP PRIVATE KEY BLOCK-----' "$REPO"; then
        echo "assertion failed: a secret key is inside the repository" >&2
        return 1
    fi
    assert_eq "$TWO" "$(find "$REPO/pool" -name '*.deb' | wc -l)" ".debs in the pool"
    # Each package's SBOM beside it, naming the package as served (the
    # rpms signed by the repository).
    assert_eq "$TWO" "$(find "$REPO/pool" -name '*.deb.spdx.json' | wc -l)" "SBOMs in the pool"
    assert_eq "$TWO" "$(find "$REPO/x86_64" -name '*.rpm.spdx.json' | wc -l)" "SBOMs in x86_64/"
    sboms_name_what_is_served "$REPO"
    assert_eq "$TWO" "$(find "$REPO/x86_64" -name '*.rpm' | wc -l)" "rpms in x86_64/"
    # The client snippets point at the repository and at the key, and
    # trust nothing unsigned.
    assert_grep '^URIs: file:///srv/kubedist$' "$REPO/kubedist.sources"
    assert_grep '^Signed-By: /etc/apt/keyrings/kubedist.gpg$' "$REPO/kubedist.sources"
    assert_grep '^deb \[signed-by=/etc/apt/keyrings/kubedist.gpg\] file:///srv/kubedist stable main$' "$REPO/kubedist.list"
    # shellcheck disable=SC2016 # dnf's $basearch, literally
    assert_grep '^baseurl=file:///srv/kubedist/\$basearch$' "$REPO/kubedist.repo"
    assert_grep '^gpgcheck=1$' "$REPO/kubedist.repo"
    assert_grep '^repo_gpgcheck=1$' "$REPO/kubedist.repo"
    assert_grep '^gpgkey=file:///srv/kubedist/kubedist.asc$' "$REPO/kubedist.repo"
    if grep -Ei 'trusted|gpgcheck=0|Allow' "$REPO/kubedist.sources" "$REPO/kubedist.list" "$REPO/kubedist.repo"; then
        echo "assertion failed: a snippet weakens verification" >&2
        return 1
    fi
    # Every signature verifies with the published key, as gpgv sees it.
    gpgv_ --keyring "$REPO/kubedist.gpg" "$REPO/dists/stable/InRelease"
    gpgv_ --keyring "$REPO/kubedist.gpg" "$REPO/dists/stable/Release.gpg" "$REPO/dists/stable/Release"
    gpgv_ --keyring "$REPO/kubedist.gpg" "$REPO/x86_64/repodata/repomd.xml.asc" "$REPO/x86_64/repodata/repomd.xml"
    assert_eq "$fpr" "$(gpg_ --with-colons --show-keys "$REPO/kubedist.asc" | awk -F: '$1 == "fpr" { print $10; exit }')" \
        "fingerprint of kubedist.asc"
}

# sboms_name_what_is_served TREE : the SBOM beside each deb and rpm of TREE
# names that file's digest.
sboms_name_what_is_served() {
    find "$1" -name '*.deb' -o -name '*.rpm' | sort >"$TMP/served"
    while read -r pkg; do
        assert_eq "$(sha256sum "$pkg" | cut -d ' ' -f 1)" \
            "$(jq -r '.packages[] | select(.SPDXID == "SPDXRef-Artifact") | .checksums[0].checksumValue' "$pkg.spdx.json")" \
            "the digest $(basename "$pkg").spdx.json names"
    done <"$TMP/served"
}

kd_test repo_built_from_both_releases_with_test_key
FPR=$(signer "$TMP/build.out")

# A package's SBOM that does not match the dist output's SHA256SUMS is
# refused with the package, in one line naming it, before anything is
# written.
repo_refuses_a_changed_sbom_and_leaves_the_repo_as_it_was() {
    dir=$TMP/changed-sbom
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$KD_DIST"/*.deb "$KD_DIST"/*.deb.spdx.json "$KD_DIST/SHA256SUMS" "$dir/"
    sbom=$(kd_one "$dir"/kubectl_*.deb.spdx.json)
    sed -i 's/"kubectl"/"kubectl-changed"/' "$sbom"
    tree_listing "$REPO" >"$TMP/before"
    repo_fails changed-sbom --from "$dir" --out "$REPO" --key "$TEST_KEY" || return 1
    assert_grep "$(basename "$sbom"): sha256 .* does not match" "$TMP/changed-sbom.err"
    tree_listing "$REPO" >"$TMP/after"
    diff -u "$TMP/before" "$TMP/after" >&2
}
kd_test repo_refuses_a_changed_sbom_and_leaves_the_repo_as_it_was

# --- apt: install, pin back ---------------------------------------------------

apt_update_verifies_inrelease_offline() {
    apt_client "$ROOT_A" "$REPO" "$REPO/kubedist.gpg" kubedist.sources
    if grep -ri trusted "$ROOT_A/etc/apt/sources.list.d"; then
        echo "assertion failed: the source is marked trusted: the test would prove nothing" >&2
        return 1
    fi
    offline "$ROOT_A" "$TMP/A.update" <<'EOF'
if apt-config dump | grep -Ei '(AllowInsecureRepositories|AllowUnauthenticated|AllowDowngradeToInsecureRepositories|AllowWeakRepositories) "(1|true|yes)"'; then
    echo "apt is configured to accept unsigned repositories: the test would prove nothing" >&2
    exit 1
fi
apt-get update -o Debug::Acquire::gpgv=1
EOF
    assert_clean_update "$TMP/A.update"
    # gpgv's own status line: a good signature by our key, from the keyring
    # the snippet names.
    assert_grep "VALIDSIG $FPR " "$TMP/A.update"
    assert_grep '--keyring /etc/apt/keyrings/kubedist.gpg' "$TMP/A.update"
    assert_file "$ROOT_A/var/lib/apt/lists/_srv_kubedist_dists_stable_InRelease"
}

apt_installs_release_n_from_signed_repo() {
    offline "$ROOT_A" "$TMP/A.install" <<'EOF'
apt-get install -y kubelet kubeadm kubectl
EOF
    assert_eq "$(expect_debs "$KD_DIST")" "$(installed "$ROOT_A")" "installed versions"
    assert_grep "^Get:.* file:/srv/kubedist stable/main amd64 kubelet amd64 $(deb_version "$KD_DIST" kubelet) " "$TMP/A.install"
    if grep -Ei 'cannot be authenticated|unauthenticated' "$TMP/A.install"; then
        echo "assertion failed: apt installed unauthenticated packages" >&2
        return 1
    fi
    # kubernetes-cni came from the repository as kubelet's dependency.
    # shellcheck disable=SC2016 # a dpkg-query format
    assert_eq "$(deb_version "$KD_DIST" kubernetes-cni)" \
        "$(kd_run "$ROOT_A" dpkg-query -W -f '${Version}' kubernetes-cni)" "kubernetes-cni version"
}

apt_pins_kubelet_back_to_release_n_minus_1() {
    prev=$(deb_version "$KD_DIST_PREV" kubelet)
    offline "$ROOT_A" "$TMP/A.pin" <<EOF
apt-cache madison kubelet
apt-get install -y --allow-downgrades kubelet=$prev
EOF
    # Both releases are offered, and N-1 went in.
    assert_grep "kubelet | *$prev | file:/srv/kubedist stable/main amd64 Packages" "$TMP/A.pin"
    assert_grep "kubelet | *$(deb_version "$KD_DIST" kubelet) | file:/srv/kubedist stable/main amd64 Packages" "$TMP/A.pin"
    assert_grep '^The following packages will be DOWNGRADED:' "$TMP/A.pin"
    expected=$( (echo "kubelet $prev"; expect_debs "$KD_DIST" | grep -v '^kubelet ') | LC_ALL=C sort)
    assert_eq "$expected" "$(installed "$ROOT_A")" "installed versions"
}

kd_test apt_update_verifies_inrelease_offline
kd_test apt_installs_release_n_from_signed_repo
kd_test apt_pins_kubelet_back_to_release_n_minus_1

# --- apt: refusals ------------------------------------------------------------

apt_refuses_tampered_packages_index() {
    apt_client "$ROOT_T" "$REPO" "$REPO/kubedist.gpg" kubedist.sources
    # An attacker's kubelet: a higher version in every Packages index (the
    # same length, so only the digests can tell), compressed ones rebuilt.
    v=$(deb_version "$KD_DIST" kubelet)
    case $v in *9) evil=${v%?}8 ;; *) evil=${v%?}9 ;; esac
    dir=$ROOT_T/srv/kubedist/dists/stable/main/binary-amd64
    sed -i "/^Package: kubelet\$/,/^\$/ s/^Version: $v\$/Version: $evil/" "$dir/Packages"
    if cmp -s "$REPO/dists/stable/main/binary-amd64/Packages" "$dir/Packages"; then
        echo "assertion failed: the tampering changed nothing: the test would prove nothing" >&2
        return 1
    fi
    gzip -9n <"$dir/Packages" >"$dir/Packages.gz"
    xz <"$dir/Packages" >"$dir/Packages.xz"
    # apt fetches each index by the digest InRelease names (by-hash): the
    # attacker replaces those copies too.
    for f in Packages Packages.gz Packages.xz; do
        digest=$(sha256sum <"$REPO/dists/stable/main/binary-amd64/$f" | cut -d' ' -f1)
        assert_file "$dir/by-hash/SHA256/$digest"
        cp "$dir/$f" "$dir/by-hash/SHA256/$digest"
    done
    if offline "$ROOT_T" "$TMP/T.update" <<'EOF'; then
apt-get update
EOF
        echo "assertion failed: apt-get update accepted the tampered index" >&2
        return 1
    fi
    grep -E '^E: Failed to fetch .*/binary-amd64/by-hash/SHA256/[0-9a-f]{64} +(Hash Sum mismatch|File has unexpected size)' "$TMP/T.update" ||
        { echo "assertion failed: no hash mismatch error" >&2; return 1; }
    assert_nothing_offered "$ROOT_T"
    if kd_run "$ROOT_T" apt-cache policy kubelet 2>&1 | grep -F "$evil"; then
        echo "assertion failed: apt offers the tampered version" >&2
        return 1
    fi
}

apt_refuses_repo_signed_by_another_key() {
    # The same repository re-signed (no --from) with a key the client does
    # not hold; the client keeps the key it was given.
    cp -a "$REPO" "$OTHER"
    repo --out "$OTHER" --generate-test-key "$OTHER_KEY" >"$TMP/other.out" 2>"$TMP/other.err"
    cat "$TMP/other.out" "$TMP/other.err"
    other=$(signer "$TMP/other.out")
    if [ -z "$other" ] || [ "$other" = "$FPR" ]; then
        echo "assertion failed: not re-signed by a new key ($other)" >&2
        return 1
    fi
    assert_grep "note: the signing key changed to $other" "$TMP/other.err"
    gpgv_ --keyring "$OTHER/kubedist.gpg" "$OTHER/dists/stable/InRelease"
    apt_client "$ROOT_K" "$OTHER" "$REPO/kubedist.gpg" kubedist.sources
    if offline "$ROOT_K" "$TMP/K.update" <<'EOF'; then
apt-get update
EOF
        echo "assertion failed: apt-get update accepted a repository signed by an unknown key" >&2
        return 1
    fi
    keyid=$(echo "$other" | cut -c25-40)
    assert_grep "NO_PUBKEY $keyid" "$TMP/K.update"
    assert_grep "^E: The repository 'file:/srv/kubedist stable InRelease' is not signed" "$TMP/K.update"
    assert_nothing_offered "$ROOT_K"
}

kd_test apt_refuses_tampered_packages_index
kd_test apt_refuses_repo_signed_by_another_key

# --- dnf ----------------------------------------------------------------------

new_dnf_root
ROOT_D=$NEW_ROOT

dnf_installs_with_gpgcheck_and_repo_gpgcheck() {
    short=$(echo "$FPR" | cut -c33-40)
    dnf_offline "$ROOT_D" "$REPO" "$TMP/D.install" install kubelet kubeadm kubectl
    assert_eq "$(expect_rpms "$KD_DIST")" "$(rpm_installed "$ROOT_D")" "installed versions"
    # The key came from the snippet's gpgkey= and is in the root's rpmdb.
    assert_grep "^Importing GPG key 0x$short:" "$TMP/D.install"
    assert_grep '^ From *: /srv/kubedist/kubedist.asc$' "$TMP/D.install"
    assert_grep "^ kubelet  *x86_64  *$(rpm_version "$KD_DIST" kubelet)  *kubedist " "$TMP/D.install"
    short_lc=$(echo "$short" | tr 'A-F' 'a-f')
    rpm_ --root "$ROOT_D" -q "gpg-pubkey-$short_lc"
}

rpm_checksig_reports_our_signatures() {
    short_lc=$(echo "$FPR" | cut -c25-40 | tr 'A-F' 'a-f')
    rpm_ --root "$ROOT_D" -K "$REPO"/x86_64/*.rpm >"$TMP/D.checksig"
    cat "$TMP/D.checksig"
    assert_eq "$TWO" "$(grep -c ': digests signatures OK$' "$TMP/D.checksig")" "rpms with good signatures"
    # What was installed carries our key's signature.
    for p in $CLIENT_PACKAGES; do
        # EdDSA and ECDSA header signatures are in DSAHEADER, RSA ones in RSAHEADER.
        sig=$(rpm_ --root "$ROOT_D" -q --qf '%|DSAHEADER?{%{DSAHEADER:pgpsig}}:{%{RSAHEADER:pgpsig}}|\n' "$p")
        echo "$p: $sig"
        case $sig in
        *"Key ID $short_lc") ;;
        *) echo "assertion failed: $p is not signed by $FPR" >&2; return 1 ;;
        esac
    done
    # Controls: the unsigned dist rpm has digests only, and without the key
    # imported the signatures do not check out.
    out=$(rpm_ --root "$ROOT_D" -K "$KD_DIST"/kubelet-[0-9]*.rpm)
    echo "$out"
    case $out in *": digests OK") ;; *) echo "assertion failed: unsigned rpm: $out" >&2; return 1 ;; esac
    mkdir -p "$SCRATCH/nokey"
    if rpm_ --root "$SCRATCH/nokey" -K "$REPO"/x86_64/kubelet-[0-9]*.rpm; then
        echo "assertion failed: rpm -K passes without the key: it would prove nothing" >&2
        return 1
    fi
}

# dnf_refuses TREE PATTERN : dnf in a fresh root must fail to install
# kubectl from TREE, saying PATTERN.
dnf_refuses() {
    new_dnf_root
    if dnf_offline "$NEW_ROOT" "$1" "$TMP/dnf.refused" install kubectl; then
        echo "assertion failed: dnf installed from the bad repository" >&2
        return 1
    fi
    assert_grep "$2" "$TMP/dnf.refused"
    if rpm_ --root "$NEW_ROOT" -q kubectl; then
        echo "assertion failed: kubectl is installed" >&2
        return 1
    fi
}

kubectl_rpm() { echo "$1/x86_64/kubectl-$(rpm_version "$KD_DIST" kubectl).x86_64.rpm"; }

dnf_refuses_corrupted_rpm_with_original_metadata() {
    tree=$SCRATCH/corrupt
    cp -a "$REPO" "$tree"
    f=$(kubectl_rpm "$tree")
    # Bytes in the middle of the payload; the size stays.
    printf 'kubedist-tamper!' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) conv=notrunc 2>/dev/null
    if cmp "$(kubectl_rpm "$REPO")" "$f"; then
        echo "assertion failed: the rpm is unchanged: the test would prove nothing" >&2
        return 1
    fi
    dnf_refuses "$tree" 'Package "kubectl-.*" from local repository "kubedist" has incorrect checksum'
    # rpm itself finds the payload broken, whatever the metadata says.
    if rpm_ --root "$ROOT_D" -Kv "$f" >"$TMP/corrupt.checksig" 2>&1; then
        echo "assertion failed: rpm -K accepts the corrupted rpm" >&2
        return 1
    fi
    cat "$TMP/corrupt.checksig"
    assert_grep 'Payload SHA256 digest: BAD' "$TMP/corrupt.checksig"
}

dnf_refuses_rpm_signed_by_another_key() {
    tree=$SCRATCH/foreign
    cp -a "$REPO" "$tree"
    # kubectl as the other key signed it (apt_refuses_repo_signed_by_another_key).
    cp "$(kubectl_rpm "$OTHER")" "$(kubectl_rpm "$tree")"
    mkdir -p "$SCRATCH/nokey"
    rpm_ --root "$SCRATCH/nokey" -Kv "$(kubectl_rpm "$tree")" | grep -i "key ID $(echo "$OTHER_FPR" | cut -c33-40)" ||
        { echo "assertion failed: the replacement is not signed by the other key" >&2; return 1; }
    sign_repomd "$tree"
    dnf_refuses "$tree" 'Error: GPG check FAILED'
    assert_grep "Public key for kubectl-.* is not installed" "$TMP/dnf.refused"
}

dnf_refuses_unsigned_rpm() {
    tree=$SCRATCH/unsigned
    cp -a "$REPO" "$tree"
    cp "$KD_DIST"/kubectl-[0-9]*.rpm "$(kubectl_rpm "$tree")"
    sign_repomd "$tree"
    dnf_refuses "$tree" 'Error: GPG check FAILED'
    assert_grep "Package kubectl-.* is not signed" "$TMP/dnf.refused"
}

dnf_refuses_repomd_not_matching_its_signature() {
    tree=$SCRATCH/repomd
    cp -a "$REPO" "$tree"
    sed -i 's|<revision>[0-9]*</revision>|<revision>1</revision>|' "$tree/x86_64/repodata/repomd.xml"
    if cmp "$REPO/x86_64/repodata/repomd.xml" "$tree/x86_64/repodata/repomd.xml"; then
        echo "assertion failed: repomd.xml is unchanged: the test would prove nothing" >&2
        return 1
    fi
    dnf_refuses "$tree" "repomd.xml GPG signature verification error: Bad GPG signature"
}

kd_test dnf_installs_with_gpgcheck_and_repo_gpgcheck
kd_test rpm_checksig_reports_our_signatures
OTHER_FPR=$(signer "$TMP/other.out" 2>/dev/null || true)
kd_test dnf_refuses_corrupted_rpm_with_original_metadata
kd_test dnf_refuses_rpm_signed_by_another_key
kd_test dnf_refuses_unsigned_rpm
kd_test dnf_refuses_repomd_not_matching_its_signature

# --- signing keys --------------------------------------------------------------

# gen_key NAME EXPIRY [GPG-OPTION...] : an unprotected Ed25519 signing key
# made by gpg, exported (secret) to $TMP/NAME.asc.
gen_key() {
    name=$1
    expiry=$2
    shift 2
    gpg_ --passphrase '' "$@" --quick-gen-key "kubedist $name test key <$name@kubedist.invalid>" ed25519 sign "$expiry"
    fpr=$(gpg_ --with-colons --list-keys "$name@kubedist.invalid" | awk -F: '$1 == "fpr" { print $10; exit }')
    gpg_ --pinentry-mode loopback --passphrase '' --armor --export-secret-keys "$fpr" >"$TMP/$name.asc"
}

expired_key_is_refused_and_repo_untouched() {
    # Made on 2020-01-01, valid for a year.
    gen_key expired 1y --faked-system-time '20200101T000000!'
    tree=$SCRATCH/expired
    cp -a "$REPO" "$tree"
    tree_listing "$tree" >"$TMP/expired.before"
    repo_fails expired --from "$KD_DIST" --out "$tree" --key "$TMP/expired.asc" || return 1
    assert_grep "^error: .*expired.asc: primary key [0-9A-F]\{40\} expired on 2020-12-3[01] " "$TMP/expired.err"
    tree_listing "$tree" >"$TMP/expired.after"
    diff -u "$TMP/expired.before" "$TMP/expired.after"
    # Into a new directory: refused before anything is created.
    if repo --from "$KD_DIST" --out "$SCRATCH/expired-new" --key "$TMP/expired.asc" >/dev/null 2>&1; then
        echo "assertion failed: cargo xtask repo signed with an expired key" >&2
        return 1
    fi
    assert_no_file "$SCRATCH/expired-new"
}

key_expiring_within_90_days_warns_but_signs() {
    gen_key soon 30d
    tree=$SCRATCH/soon
    repo --from "$KD_DIST_PREV" --out "$tree" --key "$TMP/soon.asc" >"$TMP/soon.out" 2>"$TMP/soon.err"
    cat "$TMP/soon.out" "$TMP/soon.err"
    warning=$(grep '^warning: .*soon.asc: primary key .* expires on ' "$TMP/soon.err")
    days=$(echo "$warning" | sed -n 's/.*(in \([0-9]*\) days).*/\1/p')
    if [ -z "$days" ] || [ "$days" -lt 29 ] || [ "$days" -gt 30 ]; then
        echo "assertion failed: expected a warning 'in 29/30 days': $warning" >&2
        return 1
    fi
    # It signed, and clients accept the signature.
    soon=$(gpg_ --with-colons --list-keys soon@kubedist.invalid | awk -F: '$1 == "fpr" { print $10; exit }')
    assert_eq "$soon" "$(signer "$TMP/soon.out")" "signing key"
    gpgv_ --keyring "$tree/kubedist.gpg" "$tree/dists/stable/InRelease"
    gpgv_ --keyring "$tree/kubedist.gpg" "$tree/x86_64/repodata/repomd.xml.asc" "$tree/x86_64/repodata/repomd.xml"
    # Control: 120 days left is no reason to warn.
    gen_key later 120d
    repo --from "$KD_DIST_PREV" --out "$SCRATCH/later" --key "$TMP/later.asc" >"$TMP/later.out" 2>"$TMP/later.err"
    cat "$TMP/later.out" "$TMP/later.err"
    if grep '^warning: .*expire' "$TMP/later.err"; then
        echo "assertion failed: a warning for a key with 120 days left" >&2
        return 1
    fi
}

kd_test expired_key_is_refused_and_repo_untouched
kd_test key_expiring_within_90_days_warns_but_signs

# --- key rotation --------------------------------------------------------------
#
# The three runs docs/repositories.md gives, each re-signing (no --from) a
# copy of the repository signed by the test key (OLD): --key OLD
# --publish-key NEW.pub, then --key NEW --also-sign-with OLD, then --key
# NEW. The clients: apt on Debian 12 (gpgv) and on Debian 13 (sqv), each
# holding only the old keyring, one that took the published keyring at the
# first run, and dnf, which imported OLD when it installed release N-1.
# (zypper refuses a signature by a key it lacks: t-zypper.sh.)

ROTATION=$SCRATCH/rotation

# rotate STEP ARGS... : re-signs $ROTATION with ARGS; output in $TMP/STEP.*.
rotate() {
    step=$1
    shift
    repo --out "$ROTATION" "$@" >"$TMP/$step.out" 2>"$TMP/$step.err"
    cat "$TMP/$step.out" "$TMP/$step.err"
}

# primary_fprs FILE : the primary fingerprints of the keys in FILE.
primary_fprs() {
    gpg_ --with-colons --show-keys "$1" |
        awk -F: '$1 == "pub" { p = 1; next } $1 == "fpr" && p { print $10; p = 0 }'
}

# signers_of SIGNATURE [DATA] : the fingerprints of the good signatures in
# SIGNATURE, as gpgv reports them with every published key.
signers_of() {
    gpgv_ --status-fd 1 --keyring "$ROTATION/kubedist.gpg" "$@" 2>/dev/null |
        awk '$2 == "VALIDSIG" { print $NF }' | LC_ALL=C sort
}

# apt_update ROOT OUT : the root's copy of the repository replaced by
# $ROTATION as it is now, then apt-get update offline; output in OUT.
apt_update() {
    rm -rf "$1/srv/kubedist"
    cp -R "$ROTATION" "$1/srv/kubedist"
    offline "$1" "$2" <<'EOF'
apt-get update
EOF
}

# new_trixie_root : like new_apt_root, on Debian 13, whose apt verifies
# with sqv.
new_trixie_root() {
    base=$(
        # shellcheck disable=SC2034 # read by kd_base_tarball
        KD_SUITE_CODENAME=trixie
        kd_base_tarball repo netbase mount iptables conntrack sqv
    )
    kd_new_root "$base" >"$TMP/new-root"
    NEW_ROOT=$(cat "$TMP/new-root")
    rm -f "$NEW_ROOT/etc/apt/sources.list" "$NEW_ROOT"/etc/apt/sources.list.d/*
}

key_rotation_keeps_old_keyring_clients_through_the_overlap() {
    gen_key successor never
    old=$FPR
    new=$(gpg_ --with-colons --list-keys successor@kubedist.invalid | awk -F: '$1 == "fpr" { print $10; exit }')
    gpg_ --export "$new" >"$TMP/successor.pub"
    cp -a "$REPO" "$ROTATION"
    cp "$REPO/kubedist.gpg" "$TMP/old-keyring.gpg"
    both=$(printf '%s\n' "$old" "$new" | LC_ALL=C sort)

    # Clients set up before the rotation, holding the old keyring only.
    new_apt_root
    old12=$NEW_ROOT
    apt_client "$old12" "$ROTATION" "$TMP/old-keyring.gpg" kubedist.sources
    new_trixie_root
    old13=$NEW_ROOT
    apt_client "$old13" "$ROTATION" "$TMP/old-keyring.gpg" kubedist.sources
    new_dnf_root
    dnf_root=$NEW_ROOT
    dnf_offline "$dnf_root" "$ROTATION" "$TMP/rot0.dnf" install "kubelet-$(rpm_version "$KD_DIST_PREV" kubelet)"
    assert_grep "^Importing GPG key 0x$(echo "$old" | cut -c33-40):" "$TMP/rot0.dnf"

    # 1: the new key published beside the old one, signing nothing.
    rotate rot1 --key "$TEST_KEY" --publish-key "$TMP/successor.pub"
    assert_eq "$old" "$(signer "$TMP/rot1.out")" "keys run 1 signed with"
    assert_grep "^published $new (signing nothing yet)" "$TMP/rot1.out"
    assert_eq "$old
$new" "$(primary_fprs "$ROTATION/kubedist.asc")" "keys in kubedist.asc"
    assert_eq "$old
$new" "$(primary_fprs "$ROTATION/kubedist.gpg")" "keys in kubedist.gpg"
    assert_eq "$old" "$(signers_of "$ROTATION/dists/stable/InRelease")" "InRelease signed by"
    # This client's operator installs the published keyring now.
    new_apt_root
    new12=$NEW_ROOT
    apt_client "$new12" "$ROTATION" "$ROTATION/kubedist.gpg" kubedist.sources
    for root in "$old12" "$old13" "$new12"; do
        apt_update "$root" "$TMP/rot1.apt"
        assert_clean_update "$TMP/rot1.apt"
    done

    # 2: the new key signs, the old one signs the metadata beside it.
    rotate rot2 --key "$TMP/successor.asc" --also-sign-with "$TEST_KEY"
    assert_eq "$new
$old" "$(signer "$TMP/rot2.out")" "keys run 2 signed with"
    assert_grep "^re-signing .*/kubelet-.*\.rpm with $new" "$TMP/rot2.err"
    assert_eq "$both" "$(signers_of "$ROTATION/dists/stable/InRelease")" "InRelease signed by"
    assert_eq "$both" "$(signers_of "$ROTATION/dists/stable/Release.gpg" "$ROTATION/dists/stable/Release")" \
        "Release.gpg signed by"
    assert_eq "$both" "$(signers_of "$ROTATION/x86_64/repodata/repomd.xml.asc" "$ROTATION/x86_64/repodata/repomd.xml")" \
        "repomd.xml.asc signed by"
    for root in "$old12" "$old13" "$new12"; do
        apt_update "$root" "$TMP/rot2.apt"
        assert_clean_update "$TMP/rot2.apt"
    done
    # Debian 13's apt verified with sqv (there is no gpgv).
    kd_run "$old13" sh -c 'command -v sqv && ! command -v gpgv'
    offline "$old13" "$TMP/rot2.install" <<'EOF'
apt-get install -y kubelet
EOF
    # dnf takes the new key from gpgkey= (kubedist.asc holds both) for the
    # re-signed rpms, and upgrades.
    dnf_offline "$dnf_root" "$ROTATION" "$TMP/rot2.dnf" upgrade kubelet
    assert_grep "^Importing GPG key 0x$(echo "$new" | cut -c33-40):" "$TMP/rot2.dnf"
    assert_eq "kubelet $(rpm_version "$KD_DIST" kubelet)" \
        "$(rpm_ --root "$dnf_root" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' kubelet)" "dnf's kubelet after run 2"

    # 3: the new key alone. The client that took the keyring at run 1
    # updates; one still holding only the old keyring gets apt's warning
    # and exit 0, and keeps its old indices: it silently stops updating.
    rotate rot3 --key "$TMP/successor.asc"
    assert_eq "$new" "$(signer "$TMP/rot3.out")" "keys run 3 signed with"
    assert_eq "$new" "$(primary_fprs "$ROTATION/kubedist.gpg")" "keys in kubedist.gpg after run 3"
    apt_update "$new12" "$TMP/rot3.apt"
    assert_clean_update "$TMP/rot3.apt"
    apt_update "$old12" "$TMP/rot3.old"
    assert_grep "^W: .*NO_PUBKEY $(echo "$new" | cut -c25-40)" "$TMP/rot3.old"
    assert_grep '^W: .*The repository is not updated and the previous index files will be used' "$TMP/rot3.old"
}

a_key_given_twice_is_refused_and_repo_untouched() {
    tree=$SCRATCH/twice
    cp -a "$REPO" "$tree"
    tree_listing "$tree" >"$TMP/twice.before"
    repo_fails twice --out "$tree" --key "$TEST_KEY" --also-sign-with "$TEST_KEY" || return 1
    assert_one_error "$TMP/twice.err" "$TEST_KEY" "is already given as"
    tree_listing "$tree" >"$TMP/twice.after"
    diff -u "$TMP/twice.before" "$TMP/twice.after"
}

kd_test key_rotation_keeps_old_keyring_clients_through_the_overlap
kd_test a_key_given_twice_is_refused_and_repo_untouched

# --- the dependency-closure gate ---------------------------------------------

# partial_dist DIR PATTERN... : KD_DIST's packages but the files matching a
# PATTERN, with a SHA256SUMS of their own (a dist output someone trimmed).
partial_dist() {
    dir=$1
    shift
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$KD_DIST"/*.deb "$KD_DIST"/*.rpm "$dir/"
    for pattern in "$@"; do
        # shellcheck disable=SC2086 # a glob
        rm -f "$dir"/$pattern
    done
    (cd "$dir" && sha256sum -- *.deb *.rpm >SHA256SUMS)
}

# refused NAME ARGS... : `cargo xtask repo ARGS` must fail; its stderr is
# in $TMP/NAME.err.
refused() {
    repo_fails "$@" || return 1
    name=$1
    # One line says why.
    assert_eq 1 "$(grep -c 'refusing to publish' "$TMP/$name.err")" "refusal lines"
}

closure_refuses_channels_missing_kubernetes_cni() {
    # Both families' kubernetes-cni gone: apt's channel is checked first.
    partial_dist "$SCRATCH/no-cni" 'kubernetes-cni[_-]*'
    refused no-cni --from "$SCRATCH/no-cni" --out "$SCRATCH/gate-new" --generate-test-key "$SCRATCH/gate.key"
    kubelet=$(deb_version "$KD_DIST" kubelet)
    assert_grep "^error: refusing to publish: kubelet $kubelet (amd64) depends on kubernetes-cni (>= 1.2.0), which channel dists/stable (amd64) does not hold and pkg/families.toml does not declare as a deb distribution package\$" \
        "$TMP/no-cni.err"
    # Nothing was created, not even the key.
    assert_no_file "$SCRATCH/gate-new"
    assert_no_file "$SCRATCH/gate.key"
    # Only the rpm gone: the dnf channel is refused.
    partial_dist "$SCRATCH/no-cni-rpm" 'kubernetes-cni-*.rpm'
    refused no-cni-rpm --from "$SCRATCH/no-cni-rpm" --out "$SCRATCH/gate-new" --generate-test-key "$SCRATCH/gate.key"
    assert_grep "^error: refusing to publish: kubelet $(rpm_version "$KD_DIST" kubelet) (x86_64) depends on kubernetes-cni >= 1.2.0, which channel x86_64/ does not hold and pkg/families.toml does not declare as a rpm distribution package\$" \
        "$TMP/no-cni-rpm.err"
    assert_no_file "$SCRATCH/gate-new"
}

# kubeadm_needing DIR CONSTRAINT : a dist directory holding only KD_DIST's
# kubeadm .deb rebuilt as version N+gate with `Depends: cri-tools (CONSTRAINT)`.
kubeadm_needing() {
    rm -rf "$1" "$TMP/kubeadm-deb"
    mkdir -p "$1"
    dpkg-deb -R "$KD_DIST"/kubeadm_*.deb "$TMP/kubeadm-deb"
    control=$TMP/kubeadm-deb/DEBIAN/control
    version=$(deb_version "$KD_DIST" kubeadm)+gate
    sed -i -e "s/^Version: .*/Version: $version/" \
        -e "s/^Depends: \(.*\)/Depends: \1, cri-tools ($2)/" "$control"
    assert_grep "^Depends: .*, cri-tools ($2)\$" "$control"
    dpkg-deb --root-owner-group -b "$TMP/kubeadm-deb" "$1/kubeadm_${version}_amd64.deb" >/dev/null
    (cd "$1" && sha256sum -- *.deb >SHA256SUMS)
}

closure_refuses_missing_version_and_leaves_repo_as_it_was() {
    tree=$SCRATCH/gate-existing
    cp -a "$REPO" "$tree"
    tree_listing "$tree" >"$TMP/gate.before"
    # No release holds cri-tools 99.
    kubeadm_needing "$SCRATCH/kubeadm-cri99" '>= 99'
    refused cri99 --from "$SCRATCH/kubeadm-cri99" --out "$tree" --key "$TEST_KEY"
    assert_grep "^error: refusing to publish: kubeadm $(deb_version "$KD_DIST" kubeadm)+gate (amd64) depends on cri-tools (>= 99), which channel dists/stable (amd64) does not hold " \
        "$TMP/cri99.err"
    tree_listing "$tree" >"$TMP/gate.after"
    diff -u "$TMP/gate.before" "$TMP/gate.after"
    # Control: the same package needing a cri-tools the repository holds
    # is published, and apt sees it.
    kubeadm_needing "$SCRATCH/kubeadm-cri1" ">= $(deb_version "$KD_DIST" cri-tools)"
    repo --from "$SCRATCH/kubeadm-cri1" --out "$tree" --key "$TEST_KEY" >"$TMP/cri1.out" 2>"$TMP/cri1.err"
    cat "$TMP/cri1.out" "$TMP/cri1.err"
    assert_grep "^apt: $((TWO + 1)) package(s) in dists/stable for amd64\$" "$TMP/cri1.out"
    assert_grep "^Version: $(deb_version "$KD_DIST" kubeadm)+gate\$" "$tree/dists/stable/main/binary-amd64/Packages"
}

kd_test closure_refuses_channels_missing_kubernetes_cni
kd_test closure_refuses_missing_version_and_leaves_repo_as_it_was

# --- minor channels -------------------------------------------------------------

MINOR=$SCRATCH/minor
NEXT_DIST=$SCRATCH/dist-next-minor
PRE_DIST=$SCRATCH/dist-next-minor-rc

# next_minor : the first release of the minor after KD_DIST's (1.34.2 ->
# 1.35.0), as `dist --fixtures --version` labels the fixtures.
next_minor() {
    v=$(deb_version "$KD_DIST" kubelet)
    major=${v%%.*}
    rest=${v#*.}
    echo "$major.$((${rest%%.*} + 1)).0"
}
channel_of() { echo "v$(echo "$1" | cut -d. -f1-2)"; }
CUR_CHANNEL=$(channel_of "$(deb_version "$KD_DIST" kubelet)")
NEXT_CHANNEL=$(channel_of "$(next_minor)")
# The next minor's release candidate, in a channel of its own.
PRE_VERSION=$(next_minor)-rc.1
PRE_CHANNEL=$NEXT_CHANNEL-prerelease

minor_channels_hold_relative_paths_only() {
    # (Their debs zstd, as the releases from source the cluster installs:
    # every dpkg of the test's roots reads it, and xz -1 took 25 s of the
    # CNI plugins' deb beside the other suites.)
    (cd "$KD_REPO" && cargo xtask dist --fixtures --arch amd64 --version "$(next_minor)" \
        --fast --compression deb=zstd:3 --formats deb,rpm --out "$NEXT_DIST") >"$TMP/next-dist.out" 2>&1 ||
        { cat "$TMP/next-dist.out"; return 1; }
    # (With its sysext image, which the repository leaves out; the
    # runtime's image beside it, of N-1's revision, at N-1's codec: the
    # repository serves it already and takes only the same bytes.)
    (cd "$KD_REPO" && cargo xtask dist --fixtures --arch amd64 --version "$PRE_VERSION" \
        --fast --compression deb=zstd:3,sysext=gz:9 --formats deb,rpm,sysext --out "$PRE_DIST") >"$TMP/pre-dist.out" 2>&1 ||
        { cat "$TMP/pre-dist.out"; return 1; }
    assert_eq "$(next_minor)~rc.1-1" "$(deb_version "$PRE_DIST" kubelet)" "the release candidate's deb version"
    # A pre-release never goes into the flat layout's one suite.
    repo_fails flat-pre --from "$PRE_DIST" --out "$SCRATCH/flat-pre" --key "$TEST_KEY" || return 1
    assert_grep "Kubernetes $PRE_VERSION is a pre-release: it goes into a channel of its own, $PRE_CHANNEL (--channels minor)" \
        "$TMP/flat-pre.err"
    assert_no_file "$SCRATCH/flat-pre"
    repo --channels minor --from "$KD_DIST_PREV" "$KD_DIST" "$NEXT_DIST" "$PRE_DIST" --out "$MINOR" --key "$TEST_KEY" \
        --base-url file:///srv/kubedist >"$TMP/minor.out" 2>"$TMP/minor.err"
    cat "$TMP/minor.out" "$TMP/minor.err"
    # The repository holds copies: the next minor's dist outputs (and their
    # space) are not needed any more, but for their versions.
    expect_debs "$NEXT_DIST" >"$TMP/next.versions"
    expect_rpms "$NEXT_DIST" >"$TMP/next.rpm-versions"
    deb_version "$NEXT_DIST" kubelet >"$TMP/next.kubelet"
    expect_debs "$PRE_DIST" >"$TMP/pre.versions"
    expect_rpms "$PRE_DIST" >"$TMP/pre.rpm-versions"
    rm -rf "$NEXT_DIST" "$PRE_DIST"
    # The release candidate: its own channel, and no sysext image (systemd-
    # sysupdate would order it after the release).
    assert_grep "^apt: $ONE package(s) in $PRE_CHANNEL/deb/dists/stable for amd64\$" "$TMP/minor.out"
    assert_grep "^dnf: $ONE package(s) in $PRE_CHANNEL/rpm/x86_64/\$" "$TMP/minor.out"
    assert_grep "^note: leaving out .*kubernetes-v$PRE_VERSION-x86-64.raw: a pre-release" "$TMP/minor.err"
    if grep -q "kubernetes-v$PRE_VERSION" "$MINOR/sysext/SHA256SUMS"; then
        echo "assertion failed: the pre-release's sysext image is served" >&2
        return 1
    fi
    # Releases N-1 and N are one minor; the next minor has its own channel.
    assert_grep "^apt: $TWO package(s) in $CUR_CHANNEL/deb/dists/stable for amd64\$" "$TMP/minor.out"
    assert_grep "^dnf: $TWO package(s) in $CUR_CHANNEL/rpm/x86_64/\$" "$TMP/minor.out"
    assert_grep "^apt: $ONE package(s) in $NEXT_CHANNEL/deb/dists/stable for amd64\$" "$TMP/minor.out"
    assert_grep "^dnf: $ONE package(s) in $NEXT_CHANNEL/rpm/x86_64/\$" "$TMP/minor.out"
    for gone in pool dists x86_64 kubedist.sources kubedist.repo; do
        assert_no_file "$MINOR/$gone"
    done
    for c in "$CUR_CHANNEL" "$NEXT_CHANNEL" "$PRE_CHANNEL"; do
        d=$MINOR/$c
        # Every index entry names a file inside the channel's own tree.
        grep '^Filename: ' "$d/deb/dists/stable/main/binary-amd64/Packages" | cut -d' ' -f2 >"$TMP/filenames"
        [ -s "$TMP/filenames" ]
        while read -r f; do
            case $f in /* | *..*) echo "assertion failed: $c: Filename $f leaves the channel" >&2; return 1 ;; esac
            assert_file "$d/deb/$f"
        done <"$TMP/filenames"
        zcat "$d"/rpm/x86_64/repodata/*-primary.xml.gz | grep -o '<location href="[^"]*"' | cut -d'"' -f2 >"$TMP/hrefs"
        [ -s "$TMP/hrefs" ]
        while read -r f; do
            case $f in /* | *..* | *:*) echo "assertion failed: $c: location $f leaves the channel" >&2; return 1 ;; esac
            assert_file "$d/rpm/x86_64/$f"
        done <"$TMP/hrefs"
        gpgv_ --keyring "$d/kubedist.gpg" "$d/deb/dists/stable/InRelease"
        gpgv_ --keyring "$d/kubedist.gpg" "$d/rpm/x86_64/repodata/repomd.xml.asc" "$d/rpm/x86_64/repodata/repomd.xml"
        assert_grep "^URIs: file:///srv/kubedist/$c/deb\$" "$d/kubedist.sources"
        assert_grep "^baseurl=file:///srv/kubedist/$c/rpm/.basearch\$" "$d/kubedist.repo"
        assert_grep "^gpgkey=file:///srv/kubedist/$c/kubedist.asc\$" "$d/kubedist.repo"
    done
    # One layout per repository.
    repo_fails mixed --from "$KD_DIST" --out "$MINOR" --key "$TEST_KEY" || return 1
    assert_grep "holds minor channels ($CUR_CHANNEL $NEXT_CHANNEL $PRE_CHANNEL); run with --channels minor" "$TMP/mixed.err"
}

apt_host_moves_from_one_minor_channel_to_the_next() {
    # A root of its own, made here and removed when done (roots take space).
    new_apt_root
    ROOT_M=$NEW_ROOT
    # Only the channel is copied to the host's mirror, as rsync would.
    mkdir -p "$ROOT_M/srv/kubedist"
    cp -R "$MINOR/$CUR_CHANNEL" "$ROOT_M/srv/kubedist/$CUR_CHANNEL"
    install -m 0644 "$MINOR/$CUR_CHANNEL/kubedist.gpg" "$ROOT_M/etc/apt/keyrings/kubedist.gpg"
    install -m 0644 "$MINOR/$CUR_CHANNEL/kubedist.sources" "$ROOT_M/etc/apt/sources.list.d/kubedist.sources"
    offline "$ROOT_M" "$TMP/M.first" <<'EOF'
apt-get update
apt-get install -y kubelet kubeadm kubectl
apt-cache madison kubelet
EOF
    assert_clean_update "$TMP/M.first"
    assert_eq "$(expect_debs "$KD_DIST")" "$(installed "$ROOT_M")" "versions from the $CUR_CHANNEL channel"
    if grep "$(cat "$TMP/next.kubelet")" "$TMP/M.first"; then
        echo "assertion failed: the $CUR_CHANNEL channel offers the next minor" >&2
        return 1
    fi
    # The next minor's release candidate, from its pre-release channel, as
    # docs/repositories.md says; then the release, from the next minor's
    # channel (the guide's is v1.38): the candidate upgrades to it.
    cp -R "$MINOR/$PRE_CHANNEL" "$ROOT_M/srv/kubedist/$PRE_CHANNEL"
    kd_guide_block docs/repositories.md apt-prerelease v1.38-prerelease "$PRE_CHANNEL" |
        offline "$ROOT_M" "$TMP/M.pre"
    assert_clean_update "$TMP/M.pre"
    assert_eq "$(cat "$TMP/pre.versions")" "$(installed "$ROOT_M")" "versions from $PRE_CHANNEL"
    cp -R "$MINOR/$NEXT_CHANNEL" "$ROOT_M/srv/kubedist/$NEXT_CHANNEL"
    kd_guide_block docs/repositories.md apt-next-minor v1.38 "$NEXT_CHANNEL" |
        offline "$ROOT_M" "$TMP/M.next"
    assert_grep "^URIs: file:///srv/kubedist/$NEXT_CHANNEL/deb\$" "$ROOT_M/etc/apt/sources.list.d/kubedist.sources"
    assert_clean_update "$TMP/M.next"
    assert_eq "$(cat "$TMP/next.versions")" "$(installed "$ROOT_M")" "versions after moving to $NEXT_CHANNEL"
    rm -rf "$ROOT_M"
}

dnf_host_moves_from_one_minor_channel_to_the_next() {
    new_dnf_root
    root=$NEW_ROOT
    cp "$MINOR/$CUR_CHANNEL/kubedist.repo" "$root/etc/yum.repos.d/kubedist.repo"
    dnf_offline "$root" "$MINOR" "$TMP/MD.first" install kubelet kubeadm kubectl
    assert_eq "$(expect_rpms "$KD_DIST")" "$(rpm_installed "$root")" "versions from the $CUR_CHANNEL channel"
    cp "$MINOR/$PRE_CHANNEL/kubedist.repo" "$root/etc/yum.repos.d/kubedist.repo"
    dnf_offline "$root" "$MINOR" "$TMP/MD.pre" upgrade
    assert_eq "$(cat "$TMP/pre.rpm-versions")" "$(rpm_installed "$root")" "versions from $PRE_CHANNEL"
    cp "$MINOR/$NEXT_CHANNEL/kubedist.repo" "$root/etc/yum.repos.d/kubedist.repo"
    dnf_offline "$root" "$MINOR" "$TMP/MD.next" upgrade
    assert_eq "$(cat "$TMP/next.rpm-versions")" "$(rpm_installed "$root")" "versions after moving to $NEXT_CHANNEL"
    rm -rf "$root" "$MINOR"
}

kd_test minor_channels_hold_relative_paths_only
kd_test apt_host_moves_from_one_minor_channel_to_the_next
kd_test dnf_host_moves_from_one_minor_channel_to_the_next

# --- adding a release --------------------------------------------------------

INC=$SCRATCH/incremental

adding_release_keeps_older_packages_and_resigns() {
    # Release N-1 alone, and a client that installs it (kubedist.list this time).
    repo --from "$KD_DIST_PREV" --out "$INC" --key "$TEST_KEY" >"$TMP/inc1.out" 2>"$TMP/inc1.err"
    cat "$TMP/inc1.out" "$TMP/inc1.err"
    cp "$INC/dists/stable/InRelease" "$TMP/inc.InRelease.before"
    cp "$INC/x86_64/repodata/repomd.xml" "$TMP/inc.repomd.xml.before"
    cp "$INC/x86_64/repodata/repomd.xml.asc" "$TMP/inc.repomd.xml.asc.before"
    apt_client "$ROOT_I" "$INC" "$INC/kubedist.gpg" kubedist.list
    offline "$ROOT_I" "$TMP/I.first" <<'EOF'
apt-get update
apt-get install -y kubelet kubeadm kubectl
apt-cache madison kubelet
EOF
    assert_clean_update "$TMP/I.first"
    assert_eq "$(expect_debs "$KD_DIST_PREV")" "$(installed "$ROOT_I")" "versions installed from N-1 alone"
    assert_eq 1 "$(grep -c '^ *kubelet |' "$TMP/I.first")" "kubelet versions offered by N-1 alone"

    # Release N added, with the same key.
    repo --from "$KD_DIST" --out "$INC" --key "$TEST_KEY" >"$TMP/inc2.out" 2>"$TMP/inc2.err"
    cat "$TMP/inc2.out" "$TMP/inc2.err"
    assert_grep "^apt: $TWO package(s) in dists/stable for amd64\$" "$TMP/inc2.out"
    assert_grep "^dnf: $TWO package(s) in x86_64/\$" "$TMP/inc2.out"
    for p in $ALL_PACKAGES; do
        assert_file "$INC/pool/main/${p%"${p#?}"}/$p/${p}_$(deb_version "$KD_DIST_PREV" "$p")_amd64.deb"
        assert_file "$INC/x86_64/$p-$(rpm_version "$KD_DIST_PREV" "$p").x86_64.rpm"
    done
    # Re-signed: a new Release listing the new index's digest, and
    # signatures that verify.
    if cmp -s "$TMP/inc.InRelease.before" "$INC/dists/stable/InRelease"; then
        echo "assertion failed: InRelease was not rewritten" >&2
        return 1
    fi
    assert_grep " $(sha256sum <"$INC/dists/stable/main/binary-amd64/Packages" | cut -d ' ' -f 1) .* main/binary-amd64/Packages\$" \
        "$INC/dists/stable/Release"
    gpgv_ --keyring "$INC/kubedist.gpg" "$INC/dists/stable/InRelease"
    gpgv_ --keyring "$INC/kubedist.gpg" "$INC/x86_64/repodata/repomd.xml.asc" "$INC/x86_64/repodata/repomd.xml"
    for p in $ALL_PACKAGES; do
        for d in "$KD_DIST_PREV" "$KD_DIST"; do
            zcat "$INC"/x86_64/repodata/*-primary.xml.gz |
                grep -q "<location href=\"$p-$(rpm_version "$d" "$p").x86_64.rpm\"/>" ||
                { echo "assertion failed: $p $(rpm_version "$d" "$p") not in primary.xml" >&2; return 1; }
        done
    done

    # The client sees both releases and upgrades to N.
    rm -rf "$ROOT_I/srv/kubedist"
    cp -R "$INC" "$ROOT_I/srv/kubedist"
    offline "$ROOT_I" "$TMP/I.second" <<'EOF'
apt-get update
apt-cache madison kubelet kubeadm kubectl
apt-get upgrade -y
EOF
    assert_clean_update "$TMP/I.second"
    for p in $CLIENT_PACKAGES; do
        for d in "$KD_DIST_PREV" "$KD_DIST"; do
            assert_grep "^ *$p | *$(deb_version "$d" "$p") | file:/srv/kubedist stable/main amd64 Packages" "$TMP/I.second"
        done
    done
    assert_eq "$(expect_debs "$KD_DIST")" "$(installed "$ROOT_I")" "versions after the upgrade"
    # Re-signed rpms: their SBOMs name them as they now are.
    sboms_name_what_is_served "$INC"
}

# A client that read InRelease or repomd.xml just before a run switched the
# tree in asks for the indices they name next: the tree the run made still
# has them (by-hash for apt, the replaced repodata files for dnf).
a_client_holding_the_replaced_metadata_still_updates() {
    tree=$SCRATCH/inc-seen-mid-switch
    rm -rf "$tree"
    cp -a "$INC" "$tree"
    cp "$TMP/inc.InRelease.before" "$tree/dists/stable/InRelease"
    cp "$TMP/inc.repomd.xml.before" "$tree/x86_64/repodata/repomd.xml"
    cp "$TMP/inc.repomd.xml.asc.before" "$tree/x86_64/repodata/repomd.xml.asc"
    new_apt_root
    root=$NEW_ROOT
    apt_client "$root" "$tree" "$tree/kubedist.gpg" kubedist.sources
    printf 'apt-get update\napt-cache madison kubelet\n' | offline "$root" "$TMP/mid.apt"
    assert_clean_update "$TMP/mid.apt"
    assert_eq 1 "$(grep -c '^ *kubelet |' "$TMP/mid.apt")" "kubelet versions the replaced InRelease offers"
    rm -rf "$root"
    new_dnf_root
    root=$NEW_ROOT
    dnf_offline "$root" "$tree" "$TMP/mid.dnf" install kubelet
    assert_eq "kubelet $(rpm_version "$KD_DIST_PREV" kubelet)" "$(rpm_ --root "$root" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' kubelet)" \
        "kubelet installed through the replaced repomd.xml"
    rm -rf "$root" "$tree"
}

kd_test adding_release_keeps_older_packages_and_resigns
kd_test a_client_holding_the_replaced_metadata_still_updates

# --- killed anywhere -----------------------------------------------------------

# The xtask binary itself (`cargo xtask test` names it), so that a kill
# reaches the run and its children, not cargo.
XTASK=${KD_XTASK:-$KD_REPO/target/debug/xtask}
# When to kill, as fractions of one whole run's time: denser towards the
# end, where the new tree is switched in.
SWEEP_AT="0.15 0.35 0.55 0.75 0.9 0.98"

# published TREE : what a reader gets from TREE, file by file
# (tree_listing), but the repository's record of its files' mtimes, which
# no client reads and which differs between two runs that copy a package.
published() { tree_listing "$1" | grep -v '\.kubedist-repo-state\.json$'; }

# clients_accept TREE : the real clients take TREE as it is, each with the
# key TREE publishes: apt-get update (offline, a file: source) and dnf
# makecache of every channel, gpgv and sha256sum -c of the sysext directory.
clients_accept() {
    tree=$1
    for snippet in $(cd "$tree" && find . -name kubedist.sources | LC_ALL=C sort); do
        dir=$(dirname "$snippet")
        new_apt_root
        root=$NEW_ROOT
        apt_client "$root" "$tree" "$tree/$dir/kubedist.gpg" "$snippet"
        echo 'apt-get update' | offline "$root" "$TMP/sweep.apt"
        assert_clean_update "$TMP/sweep.apt"
        rm -rf "$root"
        new_dnf_root
        root=$NEW_ROOT
        cp "$tree/$dir/kubedist.repo" "$root/etc/yum.repos.d/kubedist.repo"
        dnf_offline "$root" "$tree" "$TMP/sweep.dnf" makecache
        rm -rf "$root"
    done
    if [ -d "$tree/sysext" ]; then
        (cd "$tree/sysext" && sha256sum --strict --quiet -c SHA256SUMS)
        gpgv_ --keyring "$tree/kubedist.gpg" "$tree/sysext/SHA256SUMS.gpg" "$tree/sysext/SHA256SUMS"
    fi
}

# sweep NAME BEFORE ARGS... : `repo ARGS --out TREE` on a copy of the
# repository BEFORE, killed (SIGKILL to the run and its children) at each
# of the SWEEP_AT moments of one whole run's time. After each kill
# the tree is exactly BEFORE or exactly what the whole run makes, and the
# clients take it; the same command run again then completes it. "Exactly"
# is every path's type, mode and content (published): the clients read
# nothing else, so they are run once on each of the two trees a kill left,
# not again on every kill that left the same bytes.
sweep() {
    name=$1
    before=$2
    shift 2
    ref=$SCRATCH/sweep-$name-whole
    rm -rf "$ref"
    cp -a "$before" "$ref"
    start=$(date +%s%N)
    "$XTASK" repo "$@" --out "$ref" >"$TMP/sweep-$name.out" 2>&1 ||
        { cat "$TMP/sweep-$name.out"; return 1; }
    took_ms=$((($(date +%s%N) - start) / 1000000))
    published "$before" >"$TMP/sweep-$name.old"
    published "$ref" >"$TMP/sweep-$name.new"
    if cmp -s "$TMP/sweep-$name.old" "$TMP/sweep-$name.new"; then
        echo "assertion failed: $name changes nothing: the sweep would prove nothing" >&2
        return 1
    fi
    rm -rf "$ref"
    olds=0
    news=0
    accepted=
    for fraction in $SWEEP_AT; do
        at=$(awk -v t="$took_ms" -v f="$fraction" 'BEGIN { printf "%.3f", t * f / 1000 }')
        tree=$SCRATCH/sweep-$name
        rm -rf "$tree"
        cp -a "$before" "$tree"
        # timeout signals its whole process group: xtask, createrepo_c, gpg.
        status=0
        timeout -s KILL "$at" "$XTASK" repo "$@" --out "$tree" >"$TMP/sweep-$name.killed" 2>&1 || status=$?
        published "$tree" >"$TMP/sweep-$name.now"
        if cmp -s "$TMP/sweep-$name.now" "$TMP/sweep-$name.old"; then
            olds=$((olds + 1))
            state=old
        elif cmp -s "$TMP/sweep-$name.now" "$TMP/sweep-$name.new"; then
            news=$((news + 1))
            state=new
        else
            echo "assertion failed: $name killed after ${at}s (status $status): neither the old tree nor the new" >&2
            diff "$TMP/sweep-$name.old" "$TMP/sweep-$name.now" | head -20 >&2
            return 1
        fi
        echo "$name: killed after ${at}s of ${took_ms} ms (status $status): the $state tree" >&2
        case " $accepted " in
        *" $state "*) ;;
        *)
            clients_accept "$tree"
            accepted="$accepted $state"
            ;;
        esac
        "$XTASK" repo "$@" --out "$tree" >"$TMP/sweep-$name.rerun" 2>&1 ||
            { cat "$TMP/sweep-$name.rerun"; return 1; }
        published "$tree" >"$TMP/sweep-$name.now"
        diff -u "$TMP/sweep-$name.new" "$TMP/sweep-$name.now"
        # Nothing of the killed run is left beside the tree but the lock
        # and the tree the re-run replaced (kept for readers still in it).
        left=
        for f in "$SCRATCH/.sweep-$name".*; do
            case $f in *"*" | *.kubedist-lock | *.kubedist-prev) ;; *) left="$left ${f##*/}" ;; esac
        done
        assert_eq "" "$left" "what the killed run left beside the repository"
        rm -rf "$tree"
    done
    rm -rf "$SCRATCH/.sweep-$name".*
    echo "$name: $olds kill(s) left the old tree, $news the new one; every re-run completed it" >&2
}

repo_killed_while_adding_a_release_is_old_or_new() {
    base=$SCRATCH/sweep-base-add
    repo --from "$KD_DIST_PREV" --out "$base" --key "$TEST_KEY" --base-url file:///srv/kubedist \
        >"$TMP/sweep-base.out" 2>&1 || { cat "$TMP/sweep-base.out"; return 1; }
    sweep add "$base" --from "$KD_DIST" --key "$TEST_KEY" --base-url file:///srv/kubedist
}

repo_killed_while_re_signing_with_a_new_key_is_old_or_new() {
    # Every rpm of both releases is rewritten with the new key's signature.
    gen_key rotated never
    sweep resign "$REPO" --key "$TMP/rotated.asc" --base-url file:///srv/kubedist
    assert_grep "note: the signing key changed to" "$TMP/sweep-resign.out"
}

repo_killed_while_adding_to_a_minor_channel_is_old_or_new() {
    base=$SCRATCH/sweep-base-minor
    repo --channels minor --from "$KD_DIST_PREV" --out "$base" --key "$TEST_KEY" --base-url file:///srv/kubedist \
        >"$TMP/sweep-base.out" 2>&1 || { cat "$TMP/sweep-base.out"; return 1; }
    sweep minor "$base" --channels minor --from "$KD_DIST" --key "$TEST_KEY" --base-url file:///srv/kubedist
}

kd_test repo_killed_while_adding_a_release_is_old_or_new
kd_test repo_killed_while_re_signing_with_a_new_key_is_old_or_new
kd_test repo_killed_while_adding_to_a_minor_channel_is_old_or_new

# --- a full disk ---------------------------------------------------------------

# A disk that fills part way through adding release N: repo fails with one
# `error:` line naming what it could not write, the published tree and its
# parent are as they were, and once there is room the next run adds N, which
# the real clients accept.
a_full_disk_leaves_the_repository_as_it_was_and_the_next_run_completes() {
    parent=$TMP/full
    mkdir -p "$parent"
    mount -t tmpfs -o size=1g kd-full "$parent"
    trap 'umount "$parent"' EXIT
    tree=$parent/repo
    repo --from "$KD_DIST_PREV" --out "$tree" --key "$TEST_KEY" >"$TMP/full0.out" 2>&1 ||
        { cat "$TMP/full0.out"; return 1; }
    # Room for about a quarter of the packages adding release N writes.
    used=$(du -sm "$parent" | cut -f 1)
    adds=$(cat "$KD_DIST"/*.deb "$KD_DIST"/*.rpm | wc -c)
    mount -o "remount,size=$((used + adds / 4 / 1048576))m" "$parent"
    published "$tree" >"$TMP/full.before"
    ls -a "$parent" >"$TMP/full-parent.before"
    repo_fails full --from "$KD_DIST" --out "$tree" --key "$TEST_KEY" || return 1
    assert_one_error "$TMP/full.err" "$parent/" "No space left on device"
    published "$tree" >"$TMP/full.after"
    diff -u "$TMP/full.before" "$TMP/full.after"
    ls -a "$parent" >"$TMP/full-parent.after"
    diff -u "$TMP/full-parent.before" "$TMP/full-parent.after"
    echo "== room again: the next run adds release N"
    mount -o remount,size=2g "$parent"
    repo --from "$KD_DIST" --out "$tree" --key "$TEST_KEY" >"$TMP/full2.out" 2>&1 ||
        { cat "$TMP/full2.out"; return 1; }
    for p in $ALL_PACKAGES; do
        find "$tree/pool" -name "${p}_$(deb_version "$KD_DIST" "$p")_*.deb" | grep -q . ||
            { echo "assertion failed: release N's $p is not in the pool" >&2; return 1; }
    done
    clients_accept "$tree"
}
kd_test a_full_disk_leaves_the_repository_as_it_was_and_the_next_run_completes

kd_summary
