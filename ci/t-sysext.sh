#!/bin/sh
# The systemd-sysext image (`cargo xtask dist --formats sysext`) on hosts
# like Flatcar and Fedora CoreOS, without a running systemd: Debian roots
# (with Debian's systemd, whose systemd-sysext does the merging) that say
# ID=flatcar SYSEXT_LEVEL=1.0 or ID=fedora VERSION_ID=40 in /etc/os-release.
# systemd-sysext merges in a private mount namespace, the images activated
# as hosts do: /etc/extensions/kubernetes.raw -> /opt/extensions/kubernetes/….
#
# - the image is listed in dist's SHA256SUMS, holds /usr only, root-owned,
#   with the packages' bytes (the CNI plugins moved out of /opt);
# - systemd-dissect takes it as a system extension for this architecture;
# - it merges on both roots: files under /usr, /opt still writable, /etc
#   untouched, `systemd-analyze verify` of the merged units and drop-ins
#   silent; images pinned with --sysext-os merge only on their OS, an image
#   for another architecture nowhere (systemd says "ignored" and exits 0:
#   results are checked, never exit codes);
# - the CNI copier keeps a third-party plugin (and one with our plugin's
#   name) through a start from N-1 and the switch to N, updates and removes
#   only its own unchanged copies;
# - switching the link N-1 -> N and back changes what is merged;
# - the runtime's image (kubedist-containerd) merges beside it, its unit
#   reading the image's configuration, and the copier checks its files too;
# - `cargo xtask repo` serves the images with a SHA256SUMS that verifies and
#   a signature gpgv accepts, and a transfer file whose patterns match the
#   images' names. Debian 12 has no systemd-sysupdate: the patterns are
#   translated to regular expressions here (@v: a version, %a: systemd's
#   architecture name);
# - the image is the same bytes when built again; an OS no host can match
#   is refused at build time with one line.
#
# The fixtures' N-1 and N are two revisions of one Kubernetes version: their
# images have the same name and the same binaries, and differ in their
# extension-release file (SYSEXT_VERSION_ID=X.Y.Z-R), which tells them apart.
#
# Wall time: about 40 s on 2 quiet cores with the artifact cache warm, up to
# 3 min under load (three sysext-only dist runs, unpacking two roots); the
# first run adds a minute for the cached mmdebstrap root with systemd.

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require cargo unshare chroot mmdebstrap unsquashfs mksquashfs systemd-dissect \
    systemd-sysext systemd-analyze sha256sum gpgv jq rpm2cpio cpio
kd_require_dist

EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
TMP=$(kd_suite_dir)

NAME=kubernetes
ARCH=x86-64
IMG_PREV=$(ls "$KD_DIST_PREV"/$NAME-v*-$ARCH.raw)
IMG=$(ls "$KD_DIST"/$NAME-v*-$ARCH.raw)
IMAGE=$(basename "$IMG")
KUBE=${IMAGE#"$NAME"-v}
KUBE=${KUBE%-"$ARCH".raw}
REV_PREV=$(rpm -qp --qf '%{RELEASE}' "$KD_DIST_PREV"/kubelet-[0-9]*.rpm 2>/dev/null)
REV=$(rpm -qp --qf '%{RELEASE}' "$KD_DIST"/kubelet-[0-9]*.rpm 2>/dev/null)
RELEASE_FILE=/usr/lib/extension-release.d/extension-release.$NAME
# The runtime's image, kubedist-containerd's, named with containerd's version.
RT_NAME=kubedist-containerd
RT_IMG=$(kd_one "$KD_DIST"/$RT_NAME-v*-$ARCH.raw)
RT_IMAGE=$(basename "$RT_IMG")
RT_VERSION=${RT_IMAGE#"$RT_NAME"-v}
RT_VERSION=${RT_VERSION%-"$ARCH".raw}
BASE=$(kd_base_tarball sysext systemd)

# dist ARGS... : this checkout's `cargo xtask dist`, N's inputs.
dist() {
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=$EPOCH cargo xtask dist --fixtures --arch amd64 "$@")
}

# set_os ROOT OS : ROOT's os-release says Flatcar (flatcar), Fedora 40
# (fedora) or Fedora 41 (fedora41).
set_os() {
    rm -f "$1/etc/os-release"
    case $2 in
    flatcar) printf 'ID=flatcar\nVERSION_ID=4081.2.0\nSYSEXT_LEVEL=1.0\n' ;;
    fedora) printf 'ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=40\n' ;;
    fedora41) printf 'ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\n' ;;
    esac >"$1/etc/os-release"
}

# host OS : a fresh root of OS (flatcar, fedora); prints its path.
host() {
    root=$(kd_new_root "$BASE")
    set_os "$root" "$1"
    mkdir -p "$root/etc/extensions" "$root/opt/extensions/$NAME"
    printf '%s\n' "$root"
}

# shared_host OS : the one root of OS that the tests which only merge share
# (each in_host merges afresh and leaves nothing merged, and each test
# links the image it merges), made on first use: unpacking and removing a
# root costs seconds of disk time each. (Not a test's own root, which
# kd_test removes when the test passes: it stays to the suite's end.)
shared_host() {
    if [ ! -f "$TMP/host.$1" ]; then
        (kd_test_roots='' && host "$1") >"$TMP/host.$1"
    fi
    cat "$TMP/host.$1"
}

# activate ROOT IMAGE [SLOT] : puts IMAGE under /opt/extensions/kubernetes/
# (in SLOT/: the images of one Kubernetes version share a name) and links
# /etc/extensions/kubernetes.raw to it.
activate() {
    dir=/opt/extensions/$NAME${3:+/$3}
    mkdir -p "$1$dir"
    cmp -s "$2" "$1$dir/$(basename "$2")" || cp "$2" "$1$dir/"
    ln -sfn "$dir/$(basename "$2")" "$1/etc/extensions/$NAME.raw"
}

# in_host ROOT : runs the script on stdin inside ROOT (as lib.sh's
# kd_script), with ROOT bind-mounted on itself and shared, which
# systemd-sysext needs to set up its mounts (in a plain kd_run it fails with
# "Protocol error").
in_host() {
    root=$1
    script=$(mktemp "$root/tmp/kd-test.XXXXXX")
    { echo 'set -eu'; cat; } >"$script"
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --pid --fork --kill-child -- sh -c '
        root=$1; shift
        mount --bind "$root" "$root"
        mount --make-rshared "$root"
        mount -t proc proc "$root/proc"
        mount -t sysfs sysfs "$root/sys"
        # The host'"'"'s cgroups, as a host has them (kubelet-wrapper waits
        # where nothing is mounted).
        mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/run"
        exec chroot "$root" /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 "$@"
    ' in_host "$root" sh "/tmp/$(basename "$script")"
}

# image_listing IMAGE : `mode owner path` of every entry of IMAGE (the root: `/`).
image_listing() {
    unsquashfs -lln -d '' "$1" | awk '{ print $1, $2, (NF >= 6 ? $6 : "/") }'
}

# digest_in IMAGE PATH : the sha256 of PATH inside IMAGE.
digest_in() {
    unsquashfs -cat "$1" "$2" | sha256sum | cut -d ' ' -f 1
}

fail() {
    echo "FAIL: $*" >&2
    return 1
}

test_listed_in_sha256sums() {
    for d in "$KD_DIST_PREV" "$KD_DIST"; do
        line=$(grep "  $NAME-v$KUBE-$ARCH.raw\$" "$d/SHA256SUMS") ||
            fail "$d/SHA256SUMS does not list the image"
        echo "$line"
        (cd "$d" && echo "$line" | sha256sum --strict -c)
    done
}

# Only /usr, root-owned, the packages' files with the packages' bytes.
test_holds_usr_only_with_the_packages_bytes() {
    image_listing "$IMG" >"$TMP/listing"
    cat "$TMP/listing"
    awk '$3 != "/" && $3 != "/usr" && $3 !~ "^/usr/"' "$TMP/listing" >"$TMP/outside"
    [ ! -s "$TMP/outside" ] || fail "entries outside /usr: $(cat "$TMP/outside")"
    awk '$2 != "0/0"' "$TMP/listing" >"$TMP/owners"
    [ ! -s "$TMP/owners" ] || fail "entries not owned by 0/0: $(cat "$TMP/owners")"
    for entry in \
        '-rwxr-xr-x /usr/bin/kubelet' '-rwxr-xr-x /usr/bin/kubelet-wrapper' \
        '-rwxr-xr-x /usr/bin/kubeadm' '-rwxr-xr-x /usr/bin/kubectl' '-rwxr-xr-x /usr/bin/crictl' \
        '-rw-r--r-- /usr/lib/systemd/system/kubelet.service' \
        '-rw-r--r-- /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf' \
        '-rw-r--r-- /usr/lib/systemd/system/kubelet.service.d/05-kubedist-cni-plugins.conf' \
        '-rw-r--r-- /usr/lib/systemd/system/kubedist-cni-plugins.service' \
        '-rw-r--r-- /usr/lib/systemd/system/multi-user.target.d/10-kubernetes-sysext.conf' \
        '-rwxr-xr-x /usr/lib/kubedist/cni-plugins' \
        "-rw-r--r-- /usr/lib/tmpfiles.d/$NAME.conf" '-rw-r--r-- /usr/bin/crictl.yaml' \
        "-rw-r--r-- /usr/lib/kubedist/sysext-files/$NAME.sha256" \
        "-rw-r--r-- $RELEASE_FILE"; do
        awk -v m="${entry%% *}" -v p="${entry#* }" '$1 == m && $3 == p { found = 1 } END { exit !found }' \
            "$TMP/listing" || fail "no '$entry' in the image"
    done
    # The rpm family's staging: the same bytes as the rpms, the CNI plugins
    # of kubernetes-cni under /usr/lib/kubedist/cni/bin.
    mkdir -p "$TMP/rpms"
    for rpm in "$KD_DIST"/*.x86_64.rpm; do
        (cd "$TMP/rpms" && rpm2cpio "$rpm" | cpio -idm --quiet --no-absolute-filenames)
    done
    for f in usr/bin/kubelet usr/bin/kubeadm usr/bin/kubectl usr/bin/crictl usr/bin/kubelet-wrapper \
        usr/lib/systemd/system/kubelet.service usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf; do
        assert_eq "$(sha256sum <"$TMP/rpms/$f" | cut -d ' ' -f 1)" "$(digest_in "$IMG" "/$f")" "/$f: rpm vs image"
    done
    # cri-tools' /etc/crictl.yaml where crictl looks when /etc has none.
    assert_eq "$(sha256sum <"$TMP/rpms/etc/crictl.yaml" | cut -d ' ' -f 1)" "$(digest_in "$IMG" /usr/bin/crictl.yaml)" \
        "/etc/crictl.yaml (rpm) vs /usr/bin/crictl.yaml (image)"
    (cd "$TMP/rpms/opt/cni/bin" && ls) >"$TMP/rpm-plugins"
    awk '$1 ~ /^-/ { print $3 }' "$TMP/listing" | sed -n 's|^/usr/lib/kubedist/cni/bin/||p' >"$TMP/image-plugins"
    diff -u "$TMP/rpm-plugins" "$TMP/image-plugins" || fail "the image's plugins are not kubernetes-cni's"
    while read -r p; do
        assert_eq "$(sha256sum <"$TMP/rpms/opt/cni/bin/$p" | cut -d ' ' -f 1)" \
            "$(digest_in "$IMG" "/usr/lib/kubedist/cni/bin/$p")" "plugin $p: rpm vs image"
    done <"$TMP/rpm-plugins"
    unsquashfs -cat "$IMG" /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf |
        grep -qx 'EnvironmentFile=-/etc/sysconfig/kubelet' || fail "the drop-in does not read /etc/sysconfig/kubelet"
    # The digests the CNI copier checks the merged /usr against: every
    # binary and unit of the image, right.
    rm -rf "$TMP/unpacked"
    unsquashfs -q -d "$TMP/unpacked" "$IMG" >/dev/null
    (cd "$TMP/unpacked" && sha256sum --quiet -c "usr/lib/kubedist/sysext-files/$NAME.sha256")
    assert_eq "$(cd "$TMP/unpacked" && find usr/bin usr/lib/systemd/system -type f | LC_ALL=C sort)" \
        "$(awk '{ print $2 }' "$TMP/unpacked/usr/lib/kubedist/sysext-files/$NAME.sha256")" \
        "the files sysext-files/$NAME.sha256 lists"
    rm -rf "$TMP/unpacked"
}

# systemd-dissect finds the release file under the name hosts give the image
# (it looks for extension-release.<image name>). systemd 252's dissect does
# not judge the host's OS or architecture: the merges below do.
test_dissect_takes_it_as_a_system_extension() {
    mkdir -p "$TMP/dissect"
    ln -sf "$IMG" "$TMP/dissect/$NAME.raw"
    systemd-dissect --json=short "$TMP/dissect/$NAME.raw" >"$TMP/dissect.json"
    cat "$TMP/dissect.json"
    assert_eq true "$(jq -r .useSystemExtension "$TMP/dissect.json")" "useSystemExtension"
    assert_eq false "$(jq -r .usePortableExtension "$TMP/dissect.json")" "usePortableExtension (SYSEXT_SCOPE=system)"
    jq -r '.extensionRelease[]' "$TMP/dissect.json" >"$TMP/release"
    printf '%s\n' ID=_any "ARCHITECTURE=$ARCH" "SYSEXT_VERSION_ID=$KUBE-$REV" SYSEXT_SCOPE=system \
        EXTENSION_RELOAD_MANAGER=1 >"$TMP/release.expected"
    diff -u "$TMP/release.expected" "$TMP/release" || fail "extension-release"
}

# N merged in ROOT, as systemd-sysext.service merges it at boot: what a
# host sees.
check_merged() { # ROOT
    activate "$1" "$IMG"
    in_host "$1" <<EOF
systemd-sysext merge >/tmp/merge.log 2>&1
cat /tmp/merge.log
grep -q "Merged extensions into '/usr'" /tmp/merge.log
systemd-sysext status
for f in kubelet kubeadm kubectl crictl kubelet-wrapper; do test -x /usr/bin/\$f; done
grep -x 'SYSEXT_VERSION_ID=$KUBE-$REV' $RELEASE_FILE
# /opt stays the host's, writable; /etc gets nothing from the image.
mkdir -p /opt/cni/bin && touch /opt/cni/bin/probe && rm /opt/cni/bin/probe
test ! -e /etc/sysconfig/kubelet
# The packages' directories, as systemd-tmpfiles-setup creates them at boot.
systemd-tmpfiles --create /usr/lib/tmpfiles.d/$NAME.conf
test "\$(stat -c %a /var/lib/kubelet)" = 700
test -d /etc/kubernetes/manifests && test -d /etc/cni/net.d
# Silent, or it found something (it exits 0 for unknown keys).
systemd-analyze verify --man=no kubelet.service kubedist-cni-plugins.service multi-user.target \
    >/tmp/verify.out 2>&1 || true
cat /tmp/verify.out
test ! -s /tmp/verify.out
# ... and it reads the image's drop-ins: broken copies in /etc make it speak.
mkdir -p /etc/systemd/system/kubelet.service.d /etc/systemd/system/multi-user.target.d
sed 's/^Wants=/Wantz=/' /usr/lib/systemd/system/kubelet.service.d/05-kubedist-cni-plugins.conf \
    >/etc/systemd/system/kubelet.service.d/05-kubedist-cni-plugins.conf
sed 's/^Upholds=/Uphold=/' /usr/lib/systemd/system/multi-user.target.d/10-kubernetes-sysext.conf \
    >/etc/systemd/system/multi-user.target.d/10-kubernetes-sysext.conf
systemd-analyze verify --man=no kubelet.service multi-user.target >/tmp/broken.out 2>&1 || true
cat /tmp/broken.out
grep -q 'Wantz' /tmp/broken.out && grep -q 'Uphold' /tmp/broken.out
rm /etc/systemd/system/kubelet.service.d/05-kubedist-cni-plugins.conf \
    /etc/systemd/system/multi-user.target.d/10-kubernetes-sysext.conf
EOF
}

test_merges_on_flatcar() { check_merged "$(shared_host flatcar)"; }
test_merges_on_fedora() { check_merged "$(shared_host fedora)"; }

# merges ROOT IMAGE yes|no : whether ROOT's systemd-sysext merges IMAGE.
merges() {
    activate "$1" "$2" "$(basename "$(dirname "$2")")"
    in_host "$1" <<EOF
systemd-sysext merge >/tmp/merge.log 2>&1
cat /tmp/merge.log
if [ -x /usr/bin/kubelet ]; then echo merged=yes; else echo merged=no; fi >/tmp/merged
EOF
    cat "$1/tmp/merge.log"
    assert_eq "merged=$3" "$(cat "$1/tmp/merged")" "$(grep '^ID=\|VERSION_ID=\|SYSEXT_LEVEL=' "$1/etc/os-release" | tr '\n' ' ')merging $(basename "$(dirname "$2")")"
    if [ "$3" = no ]; then assert_grep 'ignored due to incompatible' "$1/tmp/merge.log"; fi
}

# --sysext-os pins the image to one OS: it merges there and nowhere else.
test_pinned_images_merge_only_on_their_os() {
    dist --formats sysext --sysext-os flatcar:1.0 --revision "$REV" --out "$TMP/flatcar" >"$TMP/flatcar.log" 2>&1 ||
        { cat "$TMP/flatcar.log"; fail "dist --sysext-os flatcar:1.0"; }
    dist --formats sysext --sysext-os fedora:40 --revision "$REV" --out "$TMP/fedora" >"$TMP/fedora.log" 2>&1 ||
        { cat "$TMP/fedora.log"; fail "dist --sysext-os fedora:40"; }
    unsquashfs -cat "$TMP/flatcar/$IMAGE" "$RELEASE_FILE" | grep -x 'SYSEXT_LEVEL=1.0'
    unsquashfs -cat "$TMP/fedora/$IMAGE" "$RELEASE_FILE" | grep -x 'VERSION_ID=40'
    merges "$(shared_host flatcar)" "$TMP/flatcar/$IMAGE" yes
    merges "$(shared_host fedora)" "$TMP/flatcar/$IMAGE" no
    merges "$(shared_host fedora)" "$TMP/fedora/$IMAGE" yes
    fedora=$(shared_host fedora)
    set_os "$fedora" fedora41
    merges "$fedora" "$TMP/fedora/$IMAGE" no
    set_os "$fedora" fedora
    merges "$(shared_host flatcar)" "$TMP/fedora/$IMAGE" no
}

# N's image with only its ARCHITECTURE= changed to arm64 (repacked with
# mksquashfs, uncompressed for speed): what an x86-64 host sees of an arm64
# image.
test_other_architecture_refused() {
    unsquashfs -q -d "$TMP/arm64" "$IMG" >/dev/null
    sed -i "s/^ARCHITECTURE=$ARCH\$/ARCHITECTURE=arm64/" "$TMP/arm64$RELEASE_FILE"
    grep -x ARCHITECTURE=arm64 "$TMP/arm64$RELEASE_FILE"
    mkdir -p "$TMP/arm64-image"
    mksquashfs "$TMP/arm64" "$TMP/arm64-image/$IMAGE" -all-root -noappend -quiet -no-progress \
        -noI -noD -noF -noX >/dev/null
    merges "$(shared_host flatcar)" "$TMP/arm64-image/$IMAGE" no
    merges "$(shared_host fedora)" "$TMP/arm64-image/$IMAGE" no
}

# What kubedist-cni-plugins.service runs before the kubelet, in ROOT.
start_cni() { # ROOT
    in_host "$1" <<'EOF'
systemd-sysext merge >/dev/null 2>&1
cmd=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/kubedist-cni-plugins.service)
echo "+ $cmd"
$cmd 2>/tmp/cni.log
cat /tmp/cni.log
EOF
}

# plugin_digests ROOT : `sha256 name` of /opt/cni/bin, sorted.
plugin_digests() {
    (cd "$1/opt/cni/bin" && for f in *; do echo "$(sha256sum <"$f" | cut -d ' ' -f 1) $f"; done)
}

# The image's plugins, as `sha256 name`.
image_plugins() { # IMAGE
    unsquashfs -q -d "$TMP/plugins.$$" "$1" /usr/lib/kubedist/cni/bin >/dev/null
    (cd "$TMP/plugins.$$/usr/lib/kubedist/cni/bin" && for f in *; do echo "$(sha256sum <"$f" | cut -d ' ' -f 1) $f"; done)
    rm -rf "$TMP/plugins.$$"
}

test_cni_plugins_keep_third_party_and_follow_the_image() {
    root=$(host flatcar)
    bin=$root/opt/cni/bin
    record=$root/var/lib/kubedist/sysext-cni-plugins
    mkdir -p "$bin"
    echo 'calico, from its own installer' >"$bin/calico"
    echo 'a portmap another vendor put here' >"$bin/portmap"
    chmod 0755 "$bin/calico" "$bin/portmap"

    # Start from N-1.
    activate "$root" "$IMG_PREV" prev
    start_cni "$root"
    image_plugins "$IMG_PREV" >"$TMP/prev-plugins"
    grep -v ' portmap$' "$TMP/prev-plugins" | while read -r sum name; do
        assert_eq "$sum" "$(sha256sum <"$bin/$name" | cut -d ' ' -f 1)" "$name after a start from N-1"
        assert_eq 755 "$(stat -c %a "$bin/$name")" "mode of $name"
    done
    assert_grep 'calico, from its own installer' "$bin/calico"
    assert_grep 'a portmap another vendor put here' "$bin/portmap"
    assert_grep 'left /opt/cni/bin/portmap alone: not copied there by kubedist' "$root/tmp/cni.log"
    # The record: every plugin we copied, never the other vendor's portmap.
    awk '{ print $2 }' "$record" >"$TMP/recorded"
    grep -v ' portmap$' "$TMP/prev-plugins" | awk '{ print $2 }' >"$TMP/ours"
    diff -u "$TMP/ours" "$TMP/recorded" || fail "the record is not what was copied"
    (cd "$bin" && sha256sum --quiet -c "$record")

    # Our copy of a plugin N no longer has, and a copy of ours an admin
    # edited since.
    echo 'an old plugin of ours' >"$bin/oldplugin"
    echo "$(sha256sum <"$bin/oldplugin" | cut -d ' ' -f 1)  oldplugin" >>"$record"
    echo 'edited by the admin' >>"$bin/bridge"
    edited=$(sha256sum <"$bin/bridge" | cut -d ' ' -f 1)

    # The switch to N, and its first kubelet start.
    activate "$root" "$IMG" cur
    start_cni "$root"
    image_plugins "$IMG" >"$TMP/cur-plugins"
    grep -v -e ' portmap$' -e ' bridge$' "$TMP/cur-plugins" | while read -r sum name; do
        assert_eq "$sum" "$(sha256sum <"$bin/$name" | cut -d ' ' -f 1)" "$name after the switch to N"
    done
    assert_grep 'calico, from its own installer' "$bin/calico"
    assert_grep 'a portmap another vendor put here' "$bin/portmap"
    assert_eq "$edited" "$(sha256sum <"$bin/bridge" | cut -d ' ' -f 1)" "the edited bridge"
    assert_grep 'left /opt/cni/bin/bridge alone: changed since' "$root/tmp/cni.log"
    assert_no_file "$bin/oldplugin"
    assert_grep 'removed /opt/cni/bin/oldplugin' "$root/tmp/cni.log"
    if grep -q -e ' bridge$' -e ' portmap$' -e ' oldplugin$' "$record"; then
        fail "the record still claims a file that is not ours"
    fi
    # Nothing left to do: a second start copies nothing.
    before=$(plugin_digests "$root")
    start_cni "$root"
    [ ! -s "$root/tmp/cni.log" ] || fail "a second start changed something: $(cat "$root/tmp/cni.log")"
    assert_eq "$before" "$(plugin_digests "$root")" "/opt/cni/bin after a second start"

    # Before removing the image: `cni-plugins remove` takes our copies only.
    in_host "$root" <<'EOF'
systemd-sysext merge >/dev/null 2>&1
/usr/lib/kubedist/cni-plugins remove
EOF
    assert_eq 'bridge calico portmap' "$(cd "$bin" && echo *)" "/opt/cni/bin after remove"
    assert_no_file "$record"
}

# A sync stopped part-way (a full disk, a kill at several points) is
# finished by the next run: every copy of ours is recorded, whatever the
# stop left, no temp file stays in /opt/cni/bin, and `remove` takes exactly
# our copies, never the vendor's.
test_cni_plugins_interrupted_sync_is_finished_by_the_next() {
    root=$(host flatcar)
    activate "$root" "$IMG" cur
    image_plugins "$IMG" >"$root/tmp/want"
    in_host "$root" <<'EOF'
systemd-sysext merge >/dev/null 2>&1
sync=/usr/lib/kubedist/cni-plugins
record=/var/lib/kubedist/sysext-cni-plugins
# finished : the state a completed sync leaves, checked.
finished() {
    "$sync" sync 2>>/tmp/cni.log || { cat /tmp/cni.log; echo "FAIL: the sync after the stop failed" >&2; exit 1; }
    while read -r sum name; do
        [ "$(sha256sum </opt/cni/bin/$name | cut -d ' ' -f 1)" = "$sum" ] ||
            { echo "FAIL: /opt/cni/bin/$name is not the image's" >&2; exit 1; }
    done </tmp/want
    (cd /opt/cni/bin && sha256sum --quiet -c "$record") || { echo "FAIL: the record does not match" >&2; exit 1; }
    [ "$(awk '{ print $2 }' "$record" | sort)" = "$(awk '{ print $2 }' /tmp/want | sort)" ] ||
        { echo "FAIL: the record is not every plugin of the image" >&2; exit 1; }
    if ls -A /opt/cni/bin | grep -v -x -f /tmp/want-names -e calico; then
        echo "FAIL: files other than the plugins and the vendor's are in /opt/cni/bin" >&2; exit 1
    fi
    "$sync" remove 2>>/tmp/cni.log
    [ "$(ls -A /opt/cni/bin)" = calico ] || { echo "FAIL: remove left $(ls -A /opt/cni/bin)" >&2; exit 1; }
}
awk '{ print $2 }' /tmp/want >/tmp/want-names
vendor() { mkdir -p /opt/cni/bin; echo 'calico, from its own installer' >/opt/cni/bin/calico; chmod 0755 /opt/cni/bin/calico; }

echo "== a full disk"
mkdir -p /opt/cni/bin
mount -t tmpfs -o size=6m tmpfs /opt/cni/bin
vendor
if "$sync" sync 2>/tmp/cni.log; then echo "FAIL: the sync did not fail on a full disk" >&2; exit 1; fi
cat /tmp/cni.log
echo "after the full disk: $(ls -A /opt/cni/bin | tr '\n' ' ')"
if ls -A /opt/cni/bin | grep -q '^\.kubedist-cni'; then echo "FAIL: a temp file stayed after the full disk" >&2; exit 1; fi
mount -o remount,size=512m /opt/cni/bin
finished
umount /opt/cni/bin

for delay in 0.02 0.05 0.1 0.2 0.3 0.5; do
    echo "== killed after $delay s"
    vendor
    "$sync" sync 2>/dev/null &
    pid=$!
    sleep "$delay"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "left: $(ls -A /opt/cni/bin | wc -l) file(s), record of $(cat "$record" 2>/dev/null | wc -l)"
    finished
done
EOF
}

# An admin's remove while a kubelet start's sync is copying (a restart loop
# while the node is taken down) waits for the sync, then takes every copy:
# the two never interleave, which would leave copies behind.
test_cni_plugins_remove_during_a_sync_takes_every_copy() {
    root=$(host flatcar)
    activate "$root" "$IMG" cur
    in_host "$root" <<'EOF'
systemd-sysext merge >/dev/null 2>&1
cni=/usr/lib/kubedist/cni-plugins
record=/var/lib/kubedist/sysext-cni-plugins
for round in 1 2 3; do
    "$cni" sync 2>/dev/null &
    # The record appears with the sync's first copy: the sync is under way.
    while [ ! -f "$record" ]; do :; done
    "$cni" remove 2>/dev/null
    wait
    left=$(ls -A /opt/cni/bin)
    [ -z "$left" ] || { echo "FAIL: round $round: a remove during a sync left" $left >&2; exit 1; }
    [ ! -e "$record" ] || { echo "FAIL: round $round: the record stayed" >&2; exit 1; }
done
EOF
}

# The runtime's image merges beside the node's: containerd, its shim, ctr
# and runc with the rpm's bytes, the rpm's config.toml under /usr, read by
# a drop-in of the unit (as systemd-delta shows), containerd upheld as the
# kubelet is, /etc/containerd/conf.d made at boot and /etc left alone. The
# CNI copier checks the runtime's files too: another extension's runc is
# named, kubedist's own two images are not.
test_runtime_image_merges_beside_the_node_image() {
    root=$(host flatcar)
    activate "$root" "$IMG" cur
    mkdir -p "$root/opt/extensions/$RT_NAME"
    cp "$RT_IMG" "$root/opt/extensions/$RT_NAME/"
    ln -s "/opt/extensions/$RT_NAME/$RT_IMAGE" "$root/etc/extensions/$RT_NAME.raw"
    unsquashfs -cat "$RT_IMG" "/usr/lib/extension-release.d/extension-release.$RT_NAME" |
        grep -x "SYSEXT_VERSION_ID=$RT_VERSION-$REV"
    rm -rf "$TMP/rt-rpm" && mkdir -p "$TMP/rt-rpm"
    (cd "$TMP/rt-rpm" && rpm2cpio "$(kd_one "$KD_DIST"/$RT_NAME-[0-9]*.x86_64.rpm)" | cpio -idm --quiet --no-absolute-filenames)
    for f in usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/bin/runc \
        usr/lib/systemd/system/containerd.service; do
        assert_eq "$(sha256sum <"$TMP/rt-rpm/$f" | cut -d ' ' -f 1)" "$(digest_in "$RT_IMG" "/$f")" "/$f: rpm vs image"
    done
    assert_eq "$(sha256sum <"$TMP/rt-rpm/etc/containerd/config.toml" | cut -d ' ' -f 1)" \
        "$(digest_in "$RT_IMG" /usr/lib/kubedist/containerd/config.toml)" "the rpm's config.toml vs the image's"
    in_host "$root" <<'EOF'
bad() { echo "FAIL: $*" >&2; exit 1; }
systemd-sysext merge
grep -qx kubedist-containerd /usr/.systemd-sysext/extensions || bad "the runtime's image is not merged"
for f in containerd containerd-shim-runc-v2 ctr runc kubelet; do test -x /usr/bin/$f || bad "no /usr/bin/$f"; done
systemd-delta --no-pager --type=extended >/tmp/delta || true
cat /tmp/delta
grep -q '/usr/lib/systemd/system/containerd.service → .*/containerd.service.d/10-kubedist-sysext.conf' /tmp/delta ||
    bad "containerd.service is not extended by the image's drop-in"
grep -qx 'ExecStart=/usr/bin/containerd --config /usr/lib/kubedist/containerd/config.toml' \
    /usr/lib/systemd/system/containerd.service.d/10-kubedist-sysext.conf
systemd-analyze verify --man=no containerd.service kubelet.service multi-user.target >/tmp/verify.out 2>&1 || true
cat /tmp/verify.out
test ! -s /tmp/verify.out || bad "systemd-analyze verify speaks"
grep -qx 'Upholds=containerd.service' /usr/lib/systemd/system/multi-user.target.d/10-kubedist-containerd-sysext.conf
systemd-tmpfiles --create /usr/lib/tmpfiles.d/kubedist-containerd.conf
test -d /etc/containerd/conf.d || bad "no /etc/containerd/conf.d"
test ! -e /etc/containerd/config.toml || bad "the image wrote /etc/containerd/config.toml"
/usr/lib/kubedist/cni-plugins sync 2>/tmp/cni.log
if grep warning /tmp/cni.log; then bad "a warning with kubedist's two images merged"; fi
systemd-sysext unmerge
d=/var/lib/extensions/zzz-runc
mkdir -p $d/usr/bin $d/usr/lib/extension-release.d
printf '#!/bin/sh\necho zzz\n' >$d/usr/bin/runc
chmod 0755 $d/usr/bin/runc
echo ID=_any >$d/usr/lib/extension-release.d/extension-release.zzz-runc
systemd-sysext merge
/usr/lib/kubedist/cni-plugins sync 2>/tmp/cni.log
cat /tmp/cni.log
grep -qxF "kubedist-cni-plugins: warning: another system extension wins over kubedist's for usr/bin/runc (merged: zzz-runc; of two extensions shipping a path the one whose name sorts later wins)" /tmp/cni.log ||
    bad "no warning that zzz-runc's runc wins"
/usr/lib/kubedist/cni-plugins remove
EOF
}

# Two extensions shipping the same path stack by name: the one whose name
# sorts later wins (measured with systemd 252, as README.md says). The CNI
# copier, which runs before every kubelet start, warns when one of the
# image's binaries or units is overridden, and only then.
test_extensions_shipping_the_kubelet_stack_by_name() {
    root=$(host flatcar)
    activate "$root" "$IMG" cur
    for n in aaa-kubelet zzz-kubelet; do
        d=$root/var/lib/extensions/$n
        mkdir -p "$d/usr/bin" "$d/usr/lib/extension-release.d"
        printf '#!/bin/sh\necho %s\n' "$n" >"$d/usr/bin/kubelet"
        chmod 0755 "$d/usr/bin/kubelet"
        echo ID=_any >"$d/usr/lib/extension-release.d/extension-release.$n"
    done
    in_host "$root" <<'EOF'
bad() { echo "FAIL: $*" >&2; exit 1; }
systemd-sysext merge
[ "$(/usr/bin/kubelet)" = zzz-kubelet ] || bad "zzz-kubelet's kubelet does not win: $(/usr/bin/kubelet --version)"
/usr/lib/kubedist/cni-plugins sync 2>/tmp/cni.log
cat /tmp/cni.log
grep -qxF "kubedist-cni-plugins: warning: another system extension wins over kubedist's for usr/bin/kubelet (merged: aaa-kubelet zzz-kubelet; of two extensions shipping a path the one whose name sorts later wins)" /tmp/cni.log ||
    bad "no warning that zzz-kubelet's kubelet wins"
systemd-sysext unmerge
rm -rf /var/lib/extensions/zzz-kubelet
systemd-sysext merge
/usr/bin/kubelet --version | grep -q 'kubedist recorder stand-in' || bad "ours does not win over aaa-kubelet"
/usr/lib/kubedist/cni-plugins sync 2>/tmp/cni.log
if grep warning /tmp/cni.log; then bad "a warning where ours wins"; fi
/usr/lib/kubedist/cni-plugins remove
EOF
}

# The kubelet the host runs, as kubelet-wrapper resolves it and as the
# merged drop-in's ExecStart names it, and which image it comes from.
kubelet_of() { # ROOT
    in_host "$1" <<EOF
systemd-sysext merge >/dev/null 2>&1
sed -n 's/^SYSEXT_VERSION_ID=//p' $RELEASE_FILE >/tmp/version
kubelet-wrapper --family rpm --wait 0 --print >/tmp/plan.json
sed -n 's/^ExecStart=\\(.\\)/\\1/p' /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf | cut -d ' ' -f 1 >/tmp/execstart
sha256sum </usr/bin/kubelet | cut -d ' ' -f 1 >/tmp/kubelet.sha256
EOF
    argv0=$(jq -r '.argv[0]' "$1/tmp/plan.json")
    assert_eq /usr/bin/kubelet "$argv0" "kubelet-wrapper's kubelet"
    assert_eq /usr/bin/kubelet "$(cat "$1/tmp/execstart")" "the drop-in's ExecStart"
    echo "$(cat "$1/tmp/version") $(cat "$1/tmp/kubelet.sha256")"
}

test_switch_and_rollback() {
    root=$(shared_host flatcar)
    prev="$KUBE-$REV_PREV $(digest_in "$IMG_PREV" /usr/bin/kubelet)"
    cur="$KUBE-$REV $(digest_in "$IMG" /usr/bin/kubelet)"
    activate "$root" "$IMG_PREV" prev
    assert_eq "$prev" "$(kubelet_of "$root" | tail -n 1)" "N-1 linked"
    activate "$root" "$IMG" cur
    assert_eq "$cur" "$(kubelet_of "$root" | tail -n 1)" "switched to N"
    activate "$root" "$IMG_PREV" prev
    assert_eq "$prev" "$(kubelet_of "$root" | tail -n 1)" "rolled back to N-1"
}

# sysupdate's MatchPattern as an extended regular expression: @v is a
# version (systemd: letters, digits and ".,_-+"), %a the architecture.
# Anchored at the start only: systemd-sysupdate 257 (Debian 13) takes a
# name that merely starts with a match (ci/t-cluster.sh runs it).
pattern_regex() { # PATTERN ARCH
    printf '%s\n' "$1" | sed -e 's/[.]/\\./g' -e 's/@v/[A-Za-z0-9.,_+-]+/' -e "s/%a/$2/" -e 's/^/^/'
}

test_repo_serves_a_signed_channel() {
    repo=$TMP/repo
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=$EPOCH cargo xtask repo --from "$KD_DIST_PREV" "$KD_DIST" \
        --out "$repo" --generate-test-key "$TMP/repo.key" --base-url https://mirror.example/kubedist) \
        >"$TMP/repo.out" 2>&1 || { cat "$TMP/repo.out"; fail "cargo xtask repo"; }
    cat "$TMP/repo.out"
    dir=$repo/sysext
    ls -l "$dir"
    # N replaced N-1 under the shared name.
    cmp "$IMG" "$dir/$IMAGE"
    assert_grep "revision $REV replaces revision $REV_PREV" "$TMP/repo.out"
    # Its SBOM beside it, dist's own bytes, listed with it, named so that
    # no pattern takes it for an image (below).
    sbom=${IMAGE%.raw}.spdx.json
    cmp "$KD_DIST/$IMAGE.spdx.json" "$dir/$sbom"
    assert_grep "  $sbom\$" "$dir/SHA256SUMS"
    (cd "$dir" && sha256sum --strict -c SHA256SUMS)
    gpgv --keyring "$repo/kubedist.gpg" "$dir/SHA256SUMS.gpg" "$dir/SHA256SUMS"
    cp "$dir/SHA256SUMS" "$TMP/SHA256SUMS.tampered"
    echo "0000000000000000000000000000000000000000000000000000000000000000  $NAME-v9.9.9-$ARCH.raw" >>"$TMP/SHA256SUMS.tampered"
    if gpgv --keyring "$repo/kubedist.gpg" "$dir/SHA256SUMS.gpg" "$TMP/SHA256SUMS.tampered" 2>/dev/null; then
        fail "gpgv accepted a changed SHA256SUMS"
    fi

    minor=${KUBE%.*}
    conf=$dir/$NAME-v$minor.conf
    cat "$conf"
    assert_grep '^Verify=yes$' "$conf"
    assert_grep '^Type=url-file$' "$conf"
    assert_grep '^Path=https://mirror.example/kubedist/sysext/$' "$conf"
    assert_grep '^InstancesMax=3$' "$conf"
    # The link hosts get must be the name of the image's release file.
    released=$(unsquashfs -lln -d '' "$IMG" | sed -n 's|.*/usr/lib/extension-release.d/extension-release\.||p')
    assert_eq "$NAME" "$released" "the release file's suffix"
    assert_grep "^CurrentSymlink=/etc/extensions/$released.raw\$" "$conf"
    # Each pattern matches every served image, and no other minor or arch;
    # sysupdate takes only the SHA256SUMS lines it matches: not the SBOMs.
    grep '^MatchPattern=' "$conf" | sed 's/^MatchPattern=//' >"$TMP/patterns"
    assert_eq 2 "$(wc -l <"$TMP/patterns")" "MatchPattern lines (source and target)"
    while read -r pattern; do
        re=$(pattern_regex "$pattern" "$ARCH")
        echo "$pattern -> $re"
        cut -d ' ' -f 3 "$dir/SHA256SUMS" | while read -r served; do
            case $served in
            "$NAME"-v*.raw) echo "$served" | grep -Eq "$re" || fail "$pattern does not match $served" ;;
            *) if echo "$served" | grep -Eq "$re"; then fail "$pattern matches $served, which is no image of $NAME"; fi ;;
            esac
        done
        for other in "$NAME-v1.35.0-$ARCH.raw" "$NAME-v$minor.2-arm64.raw" "$NAME.raw"; do
            if echo "$other" | grep -Eq "$re"; then fail "$pattern matches $other"; fi
        done
        echo "$NAME-v$minor.17-$ARCH.raw" | grep -Eq "$re" || fail "$pattern misses a later patch release"
    done <"$TMP/patterns"

    # The runtime's channel: containerd's minor, its own image only.
    cmp "$RT_IMG" "$dir/$RT_IMAGE"
    rt_conf=$dir/$RT_NAME-v${RT_VERSION%.*}.conf
    cat "$rt_conf"
    assert_grep '^Verify=yes$' "$rt_conf"
    assert_grep "^Path=/opt/extensions/$RT_NAME\$" "$rt_conf"
    assert_grep "^CurrentSymlink=/etc/extensions/$RT_NAME.raw\$" "$rt_conf"
    grep '^MatchPattern=' "$rt_conf" | sed 's/^MatchPattern=//' | while read -r pattern; do
        re=$(pattern_regex "$pattern" "$ARCH")
        cut -d ' ' -f 3 "$dir/SHA256SUMS" | while read -r served; do
            if [ "$served" = "$RT_IMAGE" ]; then
                echo "$served" | grep -Eq "$re" || fail "$pattern does not match $served"
            elif echo "$served" | grep -Eq "$re"; then
                fail "$pattern matches $served"
            fi
        done
    done
}

test_rebuild_is_byte_identical() {
    dist --formats sysext --revision "$REV" --no-cache --out "$TMP/again" >"$TMP/again.log" 2>&1 ||
        { cat "$TMP/again.log"; fail "dist --formats sysext"; }
    cmp "$IMG" "$TMP/again/$IMAGE"
    cmp "$RT_IMG" "$TMP/again/$RT_IMAGE"
    # The images, and their SBOMs, are the same bytes.
    for f in "$IMAGE" "$IMAGE.spdx.json" "$RT_IMAGE" "$RT_IMAGE.spdx.json"; do
        assert_eq "$(grep " $f\$" "$KD_DIST/SHA256SUMS")" "$(grep " $f\$" "$TMP/again/SHA256SUMS")" "SHA256SUMS of $f"
    done
}

# One line, before anything is built, and no output directory.
test_bad_hosts_refused_at_build_time() {
    for os in Fedora:40 fedora fedora:4.0/x _any:1.0; do
        if dist --formats sysext --sysext-os "$os" --out "$TMP/bad" >"$TMP/bad.out" 2>"$TMP/bad.err"; then
            fail "--sysext-os $os was accepted"
        fi
        cat "$TMP/bad.err"
        assert_eq 1 "$(kd_own_lines "$TMP/bad.err" | wc -l)" "lines of the error for --sysext-os $os"
        assert_grep '^error: --sysext-os' "$TMP/bad.err"
        assert_no_file "$TMP/bad"
    done
    if dist --formats sysext --arch x86-64 --out "$TMP/bad" >/dev/null 2>"$TMP/bad.err"; then
        fail "--arch x86-64 (systemd's name, not ours) was accepted"
    fi
    cat "$TMP/bad.err"
    assert_no_file "$TMP/bad"
}

kd_test test_listed_in_sha256sums
kd_test test_holds_usr_only_with_the_packages_bytes
kd_test test_dissect_takes_it_as_a_system_extension
kd_test test_merges_on_flatcar
kd_test test_merges_on_fedora
kd_test test_pinned_images_merge_only_on_their_os
kd_test test_other_architecture_refused
kd_test test_cni_plugins_keep_third_party_and_follow_the_image
kd_test test_cni_plugins_interrupted_sync_is_finished_by_the_next
kd_test test_cni_plugins_remove_during_a_sync_takes_every_copy
kd_test test_extensions_shipping_the_kubelet_stack_by_name
kd_test test_runtime_image_merges_beside_the_node_image
kd_test test_switch_and_rollback
kd_test test_repo_serves_a_signed_channel
kd_test test_rebuild_is_byte_identical
kd_test test_bad_hosts_refused_at_build_time
kd_summary
