#!/bin/sh
# openSUSE/SLES hosts: the rpms from the signed repository `cargo xtask repo`
# writes, installed, upgraded and erased with the real zypper (Debian's
# zypper 1.14, libzypp underneath) into an alternate root (`zypper --root`),
# gpgcheck and repo_gpgcheck on, as the kubedist.repo snippet sets them.
#
# - The key: imported into the root's rpm database with `rpm --import`
#   before the repository is added, as an operator imports a key whose
#   fingerprint they checked. Not `--gpg-auto-import-keys`: that trusts
#   whatever key the repository itself serves, so a forged mirror would be
#   trusted with its own key. A root without the import refuses to refresh
#   (the control that shows the imported key is the one used).
# - The repository is added with the snippet verbatim
#   (`zypper addrepo file://.../kubedist.repo`; zypper expands $basearch).
# - Distribution dependencies (iptables, util-linux, conntrack-tools,
#   /bin/sh) come from the TEST-ONLY ci/fixtures/kubedist-test-provides.spec,
#   installed with rpm before zypper runs, as in t-rpm.sh. The names are the
#   ones openSUSE uses too (pkg/families.toml says where that was checked).
# - kubeadm does not depend on kubelet or cri-tools (pkg/kubeadm.toml says
#   why), so the install names them; kubernetes-cni comes in as kubelet's
#   dependency.
# - Release N-1 alone, then N added to the same repository with the same
#   key: `zypper update` takes the root to N. Erasing leaves no package and
#   none of the packaged programs.
# - A tampered rpm (bytes changed in its payload) in a repository whose
#   metadata was regenerated and signed again with the repository's own
#   key, as a compromised mirror would serve it: zypper refuses it. So it
#   does an unsigned rpm behind such metadata, thanks to the snippet's
#   pkg_gpgcheck=1 (libzypp checks a package's own signature only then,
#   once the metadata is signed; without it zypper installs the rpm).
# - `--channels minor`: a host installs from release N's channel and moves
#   to the next minor's channel (`dist --version` relabels the fixtures) by
#   taking that channel's snippet.
#
# The roots are bare directories with busybox as /bin/sh (t-rpm.sh's).
#
# Wall time: about 30-40 s on 2 cores with xtask built.

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require zypper rpm rpmbuild createrepo_c busybox gpg gpgv gpgconf cargo sha256sum
kd_require_dist

TMP=$(kd_suite_dir)

# rpm, rpmbuild and libzypp read ~/.rpmmacros: the database goes where an
# rpm host has it (Debian's rpm defaults to ~/.rpmdb). gpg gets a home of
# its own. cargo keeps the caller's HOME (its toolchains live there).
CALLER_HOME=$HOME
HOME=$TMP/home
export HOME
mkdir -p "$HOME"
printf '%%_dbpath /var/lib/rpm\n' >"$HOME/.rpmmacros"
GPG_HOME=$TMP/gnupg
mkdir -m 0700 "$GPG_HOME"
gpg_() { gpg --homedir "$GPG_HOME" --batch "$@"; }
trap 'gpgconf --homedir "$GPG_HOME" --kill gpg-agent >/dev/null 2>&1 || true; kd_cleanup' EXIT

PACKAGES="kubelet kubeadm kubectl kubernetes-cni cri-tools"
version_of() { rpm -qp --qf '%{VERSION}-%{RELEASE}' "$1/$2"-[0-9]*.rpm; }
# shellcheck disable=SC2086 # one word per package
kd_require_distinct_versions $PACKAGES

# expect DIST : "name version-release" of our five packages as DIST has them.
expect() {
    for p in $PACKAGES; do echo "$p $(version_of "$1" "$p")"; done | LC_ALL=C sort
}
installed() {
    # shellcheck disable=SC2086
    rpm --root "$1" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' $PACKAGES 2>/dev/null | grep -v 'not installed' | LC_ALL=C sort
}

repo() { (cd "$KD_REPO" && HOME=$CALLER_HOME cargo xtask repo "$@"); }

# The test-only provides package (the same cache file as t-rpm.sh's).
PROVIDES_RPM=$(kd_provides_rpm)

# new_root import|noimport TREE : a bare rpm root with the provides package
# and (import) TREE's key in its rpm database; its path in $NEW_ROOT.
new_root() {
    NEW_ROOT=$(mktemp -d "$TMP/root.XXXXXX")
    kd_busybox_root "$NEW_ROOT" usr/share/licenses
    rpm --root "$NEW_ROOT" --initdb
    rpm --root "$NEW_ROOT" -i "$PROVIDES_RPM" 2>/dev/null
    [ "${1:-}" = noimport ] || rpm --root "$NEW_ROOT" --import "$2/kubedist.asc"
}

# zyp ROOT OUT ARGS... : zypper non-interactive in ROOT; output in OUT and
# in the test's log. Returns zypper's status.
zyp() {
    root=$1
    out=$2
    shift 2
    status=0
    zypper --non-interactive --root "$root" "$@" </dev/null >"$out" 2>&1 || status=$?
    sed 's/^/  | /' "$out" >&2
    return "$status"
}

# add_repo ROOT TREE : the snippet TREE's build wrote, added verbatim.
add_repo() {
    zyp "$1" "$TMP/addrepo.out" addrepo "file://$2/kubedist.repo"
    repofile=$1/etc/zypp/repos.d/kubedist.repo
    assert_grep '^gpgcheck=1$' "$repofile"
    assert_grep '^repo_gpgcheck=1$' "$repofile"
}

# No zypper configuration on this host may turn the checks off, or every
# test below proves nothing.
if grep -Ehs '^[[:space:]]*(gpgcheck|repo_gpgcheck|pkg_gpgcheck)[[:space:]]*=[[:space:]]*(0|off|no|false)' \
    /etc/zypp/zypp.conf; then
    echo "$KD_SUITE: FAIL: /etc/zypp/zypp.conf turns signature checks off" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

TREE=$TMP/repo
KEY=$TMP/repo.key

# resign_metadata TREE : TREE (a copy of $TREE) with its x86_64 repodata
# regenerated as the tree now is and repomd.xml signed with the repository's
# own key, as a compromised mirror holding the key would serve it; its
# snippet pointed at TREE.
resign_metadata() {
    rm -rf "$1/x86_64/repodata"
    createrepo_c --quiet --no-database "$1/x86_64" >&2
    gpg_ --quiet --import "$KEY"
    fpr=$(sed -n 's/^signed by \([0-9A-F]\{40\}\) .*/\1/p' "$TMP/build.out")
    gpg_ --yes --armor --local-user "$fpr!" --detach-sign \
        -o "$1/x86_64/repodata/repomd.xml.asc" "$1/x86_64/repodata/repomd.xml"
    GNUPGHOME=$GPG_HOME gpgv --keyring "$1/kubedist.gpg" \
        "$1/x86_64/repodata/repomd.xml.asc" "$1/x86_64/repodata/repomd.xml"
    sed -i "s|file://$TREE|file://$1|g" "$1/kubedist.repo"
}
ROOT=

zypper_refreshes_signed_repo_with_imported_key() {
    repo --from "$KD_DIST_PREV" --out "$TREE" --generate-test-key "$KEY" \
        --base-url "file://$TREE" >"$TMP/build.out" 2>"$TMP/build.err"
    cat "$TMP/build.out" "$TMP/build.err"
    new_root import "$TREE"
    ROOT=$NEW_ROOT
    echo "$ROOT" >"$TMP/root"
    add_repo "$ROOT" "$TREE"
    zyp "$ROOT" "$TMP/refresh.out" refresh
    if grep -Ei 'unsigned|insecure|not signed|ignore|untrusted|trust' "$TMP/refresh.out"; then
        echo "assertion failed: zypper refresh reported the problems above" >&2
        return 1
    fi
    # Control: without the key, repo_gpgcheck stops the refresh.
    new_root noimport "$TREE"
    add_repo "$NEW_ROOT" "$TREE"
    if zyp "$NEW_ROOT" "$TMP/refresh-nokey.out" refresh; then
        echo "assertion failed: zypper refreshed without the repository key" >&2
        return 1
    fi
    assert_grep "File 'repomd.xml' from repository .* is signed with an unknown key" "$TMP/refresh-nokey.out"
    assert_grep 'Signature verification failed for repomd.xml' "$TMP/refresh-nokey.out"
}

zypper_installs_release_n_minus_1() {
    ROOT=$(cat "$TMP/root")
    zyp "$ROOT" "$TMP/install.out" install kubelet kubeadm kubectl cri-tools
    assert_eq "$(expect "$KD_DIST_PREV")" "$(installed "$ROOT")" "installed versions"
    # kubernetes-cni was pulled in as kubelet's dependency.
    assert_grep 'kubernetes-cni' "$TMP/install.out"
    assert_file "$ROOT/usr/bin/kubeadm"
    # Signed by the repository's key: rpm checks what was installed.
    rpm --root "$ROOT" -K "$TREE"/x86_64/kubeadm-*.rpm | grep ': digests signatures OK$'
}

zypper_upgrades_to_release_n() {
    ROOT=$(cat "$TMP/root")
    repo --from "$KD_DIST" --out "$TREE" --key "$KEY" --base-url "file://$TREE" >"$TMP/add.out" 2>"$TMP/add.err"
    cat "$TMP/add.out" "$TMP/add.err"
    zyp "$ROOT" "$TMP/refresh2.out" refresh
    zyp "$ROOT" "$TMP/update.out" update
    assert_eq "$(expect "$KD_DIST")" "$(installed "$ROOT")" "versions after zypper update"
}

# A key rotation (docs/repositories.md), on a root that trusts only the
# old key: run 1 (--key OLD --publish-key NEW.pub) refreshes as before and
# the operator imports the published kubedist.asc; run 2 (--key NEW
# --also-sign-with OLD) re-signs the rpms, which install; run 3 (--key NEW)
# refreshes. Control: a root that did not take the new key refuses run 2's
# rpms: zypper hosts must take it at run 1.
zypper_follows_a_key_rotation() {
    # (Not \$root: zyp sets it.)
    gpg_ --passphrase '' --quick-gen-key 'kubedist rotated test key <rotated@kubedist.invalid>' ed25519 sign never
    new=$(gpg_ --with-colons --list-keys rotated@kubedist.invalid | awk -F: '$1 == "fpr" { print $10; exit }')
    gpg_ --pinentry-mode loopback --passphrase '' --armor --export-secret-keys "$new" >"$TMP/rotated.asc"
    gpg_ --export "$new" >"$TMP/rotated.pub"
    short=$(echo "$new" | cut -c33-40 | tr 'A-F' 'a-f')
    tree=$TMP/rotation
    cp -a "$TREE" "$tree"
    new_root import "$TREE"
    host=$NEW_ROOT
    new_root import "$TREE"
    stale=$NEW_ROOT
    repo --out "$tree" --key "$KEY" --publish-key "$TMP/rotated.pub" --base-url "file://$tree" >"$TMP/rot1.out"
    for r in "$host" "$stale"; do
        add_repo "$r" "$tree"
        zyp "$r" "$TMP/rot1.refresh" refresh
        assert_no_grep 'unknown key' "$TMP/rot1.refresh"
    done
    zyp "$host" "$TMP/rot1.install" install "kubectl = $(version_of "$KD_DIST_PREV" kubectl)"
    rpm --root "$host" --import "$tree/kubedist.asc"
    rpm --root "$host" -q "gpg-pubkey-$short"

    repo --out "$tree" --key "$TMP/rotated.asc" --also-sign-with "$KEY" --base-url "file://$tree" >"$TMP/rot2.out"
    zyp "$host" "$TMP/rot2.refresh" refresh
    zyp "$host" "$TMP/rot2.update" update kubectl
    assert_eq "kubectl $(version_of "$KD_DIST" kubectl)" \
        "$(rpm --root "$host" -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' kubectl)" "kubectl after run 2"
    rpm --root "$host" -q --qf '%|DSAHEADER?{%{DSAHEADER:pgpsig}}:{%{RSAHEADER:pgpsig}}|\n' kubectl |
        grep "Key ID $(echo "$new" | cut -c25-40 | tr 'A-F' 'a-f')$"
    # The root that did not take the new key still refreshes: libzypp
    # checks the last signature of repomd.xml.asc, which is the old key's
    # (--also-sign-with signs after --key). The re-signed rpms it refuses.
    zyp "$stale" "$TMP/rot2.stale" refresh
    if zyp "$stale" "$TMP/rot2.stale-install" install kubectl; then
        echo "assertion failed: zypper without the new key installed an rpm it signed" >&2
        return 1
    fi
    assert_grep 'Signature verification failed \[4-Signatures public key is not available\]' "$TMP/rot2.stale-install"

    repo --out "$tree" --key "$TMP/rotated.asc" --base-url "file://$tree" >"$TMP/rot3.out"
    zyp "$host" "$TMP/rot3.refresh" refresh
}

zypper_erases_everything_it_installed() {
    ROOT=$(cat "$TMP/root")
    # shellcheck disable=SC2086
    zyp "$ROOT" "$TMP/remove.out" remove $PACKAGES
    assert_eq "" "$(installed "$ROOT")" "installed after remove"
    for f in kubelet kubeadm kubectl crictl kubelet-wrapper; do
        assert_no_file "$ROOT/usr/bin/$f"
    done
    assert_no_file "$ROOT/opt/cni/bin/bandwidth"
}

zypper_refuses_tampered_rpm() {
    tree=$TMP/tampered
    cp -a "$TREE" "$tree"
    f=$tree/x86_64/kubectl-$(version_of "$KD_DIST" kubectl).x86_64.rpm
    printf 'kubedist-tamper!' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) conv=notrunc 2>/dev/null
    # The mirror's metadata matches the tampered file and is signed with the
    # repository's own key: only the package's signature can tell.
    resign_metadata "$tree"
    new_root import "$tree"
    add_repo "$NEW_ROOT" "$tree"
    zyp "$NEW_ROOT" "$TMP/tampered-refresh.out" refresh
    if zyp "$NEW_ROOT" "$TMP/tampered.out" install kubectl; then
        echo "assertion failed: zypper installed the tampered rpm" >&2
        return 1
    fi
    # zypper checks the package's signature (pkg_gpgcheck=1) and finds the
    # payload digest the signed header holds broken.
    assert_grep 'Payload SHA256 digest: BAD' "$TMP/tampered.out"
    assert_grep 'kubectl-.*: Signature verification failed \[2-Signature does not verify\]' "$TMP/tampered.out"
    if rpm --root "$NEW_ROOT" -q kubectl; then
        echo "assertion failed: kubectl is installed" >&2
        return 1
    fi
}

zypper_refuses_unsigned_rpm_behind_signed_metadata() {
    tree=$TMP/unsigned
    cp -a "$TREE" "$tree"
    # An unsigned rpm, untouched otherwise (dist's own), listed by metadata
    # signed with the repository's key: without pkg_gpgcheck=1 in the
    # snippet zypper installs it.
    cp "$KD_DIST"/kubectl-[0-9]*.rpm "$tree/x86_64/kubectl-$(version_of "$KD_DIST" kubectl).x86_64.rpm"
    resign_metadata "$tree"
    assert_grep '^pkg_gpgcheck=1$' "$tree/kubedist.repo"
    new_root import "$tree"
    add_repo "$NEW_ROOT" "$tree"
    zyp "$NEW_ROOT" "$TMP/unsigned-refresh.out" refresh
    if zyp "$NEW_ROOT" "$TMP/unsigned.out" install kubectl && rpm --root "$NEW_ROOT" -q kubectl; then
        echo "assertion failed: zypper installed the unsigned rpm" >&2
        return 1
    fi
    assert_grep 'Signature verification failed \[6-File is unsigned\]' "$TMP/unsigned.out"
    if rpm --root "$NEW_ROOT" -q kubectl; then
        echo "assertion failed: kubectl is installed" >&2
        return 1
    fi
}

# The next minor's first release (1.34.2 -> 1.35.0), the fixtures
# relabelled by `dist --version`, beside release N in a `--channels minor`
# repository: a host installs from N's channel snippet, then moves to the
# next minor by replacing the repository with that channel's snippet.
zypper_host_moves_from_one_minor_channel_to_the_next() {
    v=$(rpm -qp --qf '%{VERSION}' "$KD_DIST"/kubelet-[0-9]*.rpm)
    cur=v${v%.*}
    minor=${v#*.}
    minor=${minor%%.*}
    next_version=${v%%.*}.$((minor + 1)).0
    next=v${next_version%.*}
    (cd "$KD_REPO" && HOME=$CALLER_HOME cargo xtask dist --fixtures --arch amd64 \
        --version "$next_version" --fast --formats rpm --out "$TMP/next-dist") >"$TMP/next-dist.out" 2>&1 ||
        { cat "$TMP/next-dist.out"; return 1; }
    minor_tree=$TMP/minor
    rm -f "$TMP/minor.key"
    repo --channels minor --from "$KD_DIST" "$TMP/next-dist" --out "$minor_tree" --generate-test-key "$TMP/minor.key" \
        --base-url "file://$minor_tree" >"$TMP/minor.out" 2>"$TMP/minor.err"
    cat "$TMP/minor.out" "$TMP/minor.err"
    new_root import "$minor_tree/$cur"
    root=$NEW_ROOT
    add_repo "$root" "$minor_tree/$cur"
    zyp "$root" "$TMP/minor-install.out" install kubelet kubeadm kubectl cri-tools
    assert_eq "$(expect "$KD_DIST")" "$(installed "$root")" "versions from the $cur channel"
    zyp "$root" "$TMP/minor-update.out" update
    assert_eq "$(expect "$KD_DIST")" "$(installed "$root")" "versions after update within $cur"
    # The move: the next channel's snippet instead of this one's.
    zyp "$root" "$TMP/removerepo.out" removerepo kubedist
    add_repo "$root" "$minor_tree/$next"
    zyp "$root" "$TMP/minor-refresh.out" refresh
    zyp "$root" "$TMP/minor-move.out" update
    # The Kubernetes packages move to the next minor; kubernetes-cni and
    # cri-tools carry the same upstream versions there at revision 1, below
    # N's revision 2, and an update never downgrades.
    want=$( (expect "$TMP/next-dist" | grep -E '^kube(let|adm|ctl) '
        expect "$KD_DIST" | grep -E '^(kubernetes-cni|cri-tools) ') | LC_ALL=C sort)
    assert_eq "$want" "$(installed "$root")" "versions after moving to $next"
    rm -rf "$root" "$minor_tree" "$TMP/next-dist"
}

kd_test zypper_refreshes_signed_repo_with_imported_key
kd_test zypper_installs_release_n_minus_1
kd_test zypper_upgrades_to_release_n
kd_test zypper_follows_a_key_rotation
kd_test zypper_erases_everything_it_installed
kd_test zypper_refuses_tampered_rpm
kd_test zypper_refuses_unsigned_rpm_behind_signed_metadata
kd_test zypper_host_moves_from_one_minor_channel_to_the_next

kd_summary
