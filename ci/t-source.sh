#!/bin/sh
# The upstream programs built from their Go modules (`cargo xtask source`,
# `dist --source`), checked as a user would check them:
#
# - kubelet, kubeadm, kubectl, crictl and a CNI plugin print the pinned
#   versions; `kubeadm config images list` names exactly pkg/images.toml's
#   images; `go version -m` shows each program's module at the pinned
#   version with upstream's tags, -trimpath and no cgo;
# - two builds from the same inputs, the second with an empty program
#   cache, give byte-identical files;
# - `dist --source` packages them (the release cargo xtask test builds for
#   this suite and the cluster): no TEST BUILD, a description that says
#   they were built from source, the kubelet's SBOM naming every module
#   `go version -m` prints (the main module included) (ci/t-cluster.sh
#   installs and runs them on booted nodes);
# - the images kubeadm pulls, built from source (`source --images`): an
#   index under each reference, pinned in images.toml, labelled,
#   byte-identical when built again, bundled by `dist --source`;
# - the container runtime built from source (containerd's and runc's files
#   of the release): containerd 2.x and runc with seccomp, static, which
#   run every image offline:
#   pause stays up as 65535 under the default seccomp profile, etcd serves
#   /health, CoreDNS answers, the control plane's programs print the
#   release, kube-proxy finds iptables and nft and cleans up with them;
# - `cargo xtask bump` moving a copy of the checkout to another release
#   (1.34.4, a patch of a minor outside the window), after refusals and a
#   kill that change nothing;
# - the release of the minor before (KD_DIST_OLDER, which cargo xtask test
#   builds for this suite and the cluster's upgrade): its programs print
#   its version, its kubeadm lists pkg/images/vX.Y.Z.toml, its bundle
#   holds those images.
#
# amd64 only, the architecture of the cluster's nodes: every build here is
# one the releases of cargo xtask test made already, so the suite compiles
# nothing on a machine whose caches are empty. The same builds for arm64
# cost 12 minutes of a cold CI run and started no node; `cargo xtask bench
# --payload source` builds and packages them (docs/performance.md), t-dist
# runs every arm64 artifact's programs
# under qemu-user, and the Go recipe is one for every architecture
# (GOARCH and its baseline, xtask/src/source.rs).
#
# The first build of a version compiles Kubernetes (README.md, "Building
# from source"); afterwards Go's caches and the program cache in the home
# directory make it a matter of seconds to a few minutes.

# shellcheck disable=SC2016 # $... in single quotes is for the inner shell
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require go jq dpkg-deb mmdebstrap dig curl skopeo unshare file docker-registry cargo git setsid \
    rpm rpm2cpio cpio readelf qemu-riscv64-static
XTASK=${KD_XTASK:?run through cargo xtask test}

# The containers' mounts stay in the suite's own mount namespace.
kd_own_mount_namespace "$0" "$@"

TMP=$(kd_scratch_dir tmp)

pin() { # SOURCE : pkg/release.toml's version of SOURCE
    awk -v s="[sources.$1]" '$0 == s { on = 1; next } /^\[/ { on = 0 }
        on && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$KD_REPO/pkg/release.toml"
}
K8S=$(pin kubernetes)
CRI=$(pin cri-tools)
CNI=$(pin cni-plugins)
CTD=$(pin containerd)
RUNC=$(pin runc)
IN=$TMP/inputs
BIN=$IN/kubernetes/v$K8S/bin/linux/amd64

# shellcheck source=ci/containerd.sh
. "$KD_REPO/ci/containerd.sh"
trap 'ctd_stop_all; kd_cleanup' EXIT

# The references pkg/images.toml lists, sorted.
sed -n 's/^reference = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml" | sort >"$TMP/refs"

# One build for the suite, from the caches the release builds filled
# (riscv64's: the release from source for it, KD_DIST/riscv64).
(cd "$KD_REPO" && "$XTASK" source --images --arch amd64,riscv64 --out "$IN") >"$TMP/source.log" 2>&1 || {
    tail -n 30 "$TMP/source.log" >&2
    echo "t-source: FAIL: cargo xtask source --images --arch amd64,riscv64 failed (above)" >&2
    echo "0 passed, 1 failed"
    exit 1
}
# containerd's and runc's programs as their release files hold them, in one
# directory for the runtime's tests.
RT=$TMP/runtime
mkdir -p "$RT"
tar -xzf "$IN/containerd/v$CTD/containerd-static-$CTD-linux-amd64.tar.gz" -C "$RT" --strip-components=1
install -m 0755 "$IN/runc/v$RUNC/runc.amd64" "$RT/runc"

test_programs_print_the_pinned_versions() {
    assert_eq "Kubernetes v$K8S" "$("$BIN/kubelet" --version)" "kubelet --version"
    assert_eq "v$K8S" "$("$BIN/kubeadm" version -o short)" "kubeadm version -o short"
    "$BIN/kubectl" version --client -o json >"$TMP/kubectl.json"
    assert_eq "v$K8S" "$(jq -r .clientVersion.gitVersion "$TMP/kubectl.json")" "kubectl's gitVersion"
    assert_eq "clean" "$(jq -r .clientVersion.gitTreeState "$TMP/kubectl.json")" "kubectl's gitTreeState"
    tar -xzf "$IN/cri-tools/v$CRI/crictl-v$CRI-linux-amd64.tar.gz" -C "$TMP" crictl
    assert_eq "crictl version v$CRI" "$("$TMP/crictl" --version)" "crictl --version"
    mkdir -p "$TMP/cni"
    tar -xzf "$IN/cni-plugins/v$CNI/cni-plugins-linux-amd64-v$CNI.tgz" -C "$TMP/cni"
    "$TMP/cni/bridge" 2>&1 | tee "$TMP/bridge.out" || true
    assert_grep "CNI bridge plugin v$CNI" "$TMP/bridge.out"
}

test_kubeadm_lists_the_images_of_pkg_images_toml() {
    "$BIN/kubeadm" config images list --kubernetes-version "v$K8S" | sort >"$TMP/kubeadm.images"
    sed -n 's/^reference = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml" | sort >"$TMP/pinned.images"
    cat "$TMP/kubeadm.images"
    [ "$(grep -c . "$TMP/kubeadm.images")" -ge 7 ] || {
        echo "assertion failed: kubeadm listed fewer than 7 images" >&2
        return 1
    }
    diff -u "$TMP/pinned.images" "$TMP/kubeadm.images" || {
        echo "assertion failed: kubeadm v$K8S's images differ from pkg/images.toml (above)" >&2
        return 1
    }
}

test_go_version_m_shows_the_module_and_upstream_flags() {
    for p in kubelet kubeadm kubectl; do
        go version -m "$BIN/$p" >"$TMP/$p.buildinfo"
        assert_grep "mod	k8s.io/kubernetes	v$K8S	h1:" "$TMP/$p.buildinfo"
        assert_grep "path	k8s.io/kubernetes/cmd/$p" "$TMP/$p.buildinfo"
        assert_grep "build	-tags=selinux,notest,grpcnotrace" "$TMP/$p.buildinfo"
        assert_grep "build	-trimpath=true" "$TMP/$p.buildinfo"
        assert_grep "build	CGO_ENABLED=0" "$TMP/$p.buildinfo"
        assert_grep "build	GOAMD64=v1" "$TMP/$p.buildinfo"
        # Every staging module is its published version, never a directory.
        if grep '=>' "$TMP/$p.buildinfo" | grep -v "	v0\.[0-9]*\.[0-9]*	h1:" | grep .; then
            echo "assertion failed: $p links a replaced module that is not a published one (above)" >&2
            return 1
        fi
    done
}

test_two_builds_are_byte_identical() {
    # The program cache emptied: everything is linked again (Go's compile
    # cache is shared; its entries are checked by content), the images
    # compared by their manifests. amd64's programs and runtime, and
    # riscv64's with its images: riscv64's runc links Debian 13's
    # libseccomp.a, unpacked in the program cache (another directory here),
    # and its images take the path every architecture's take (the same
    # assembly, their programs cross-compiled, their base layers Debian's
    # packages); amd64's images again would add their build and no path.
    again=$TMP/inputs2
    (cd "$KD_REPO" && KUBEDIST_SOURCE_CACHE="$TMP/cache2" "$XTASK" source --arch amd64 --out "$again/amd64" &&
        KUBEDIST_SOURCE_CACHE="$TMP/cache2" "$XTASK" source --images --arch riscv64 --out "$again/riscv64")
    for arch in amd64 riscv64; do
        dir=kubernetes/v$K8S/bin/linux/$arch
        diff -r "$IN/$dir" "$again/$arch/$dir" || {
            echo "assertion failed: a second build from the same inputs differs in $dir (above)" >&2
            return 1
        }
        for f in "runc/v$RUNC/runc.$arch" "cri-tools/v$CRI/crictl-v$CRI-linux-$arch.tar.gz" \
            "cni-plugins/v$CNI/cni-plugins-linux-$arch-v$CNI.tgz" \
            "containerd/v$CTD/containerd-static-$CTD-linux-$arch.tar.gz"; do
            cmp "$IN/$f" "$again/$arch/$f" || {
                echo "assertion failed: a second build from the same inputs differs: $f" >&2
                return 1
            }
        done
    done
    source_manifests "$IN/images" riscv64 >"$TMP/manifests.first"
    [ -s "$TMP/manifests.first" ]
    source_manifests "$again/riscv64/images" riscv64 | diff -u "$TMP/manifests.first" - || {
        echo "assertion failed: an image built again has another riscv64 manifest (above)" >&2
        return 1
    }
    [ "$(find "$TMP/cache2" -type f -name kubelet | grep -c .)" = 2 ] || {
        echo "assertion failed: the second build did not build the kubelet itself" >&2
        return 1
    }
    rm -rf "$TMP/cache2" "$again"
}

test_dist_source_builds_every_artifact_and_says_what_built_them() {
    # The release cargo xtask test built with `dist --source` for this
    # suite and the cluster (KD_DIST, revision 2).
    amd=${KD_DIST:?}
    for p in kubelet kubeadm kubectl kubernetes-cni cri-tools; do
        kd_one "$amd/${p}"_*_amd64.deb >/dev/null
    done
    for f in "$amd/kubedist-$K8S-linux-amd64.tar.gz" "$amd/kubernetes-v$K8S-x86-64.raw" \
        "$amd/kubedist-containerd-v$CTD-x86-64.raw" \
        "$amd/kubedist-installer-$K8S-2.oci.tar" "$amd/kubelet-$K8S-2.x86_64.rpm"; do
        assert_file "$f"
    done
    echo "== the images bundle holds the images built from source, at their digests"
    tar -xOf "$amd/kubedist-images-$K8S-amd64.oci.tar" index.json |
        jq -r '.manifests[] | .annotations["io.containerd.image.name"] + " " + .digest' | sort >"$TMP/bundled"
    source_manifests "$IN/images" amd64 >"$TMP/built"
    diff -u "$TMP/built" "$TMP/bundled"
    [ "$(grep -c . "$TMP/bundled")" = "$(grep -c '^reference = ' "$KD_REPO/pkg/images.toml")" ]
    (cd "$amd" && sha256sum -c --quiet SHA256SUMS)
    jq -r '.predicate.buildDefinition.externalParameters.upstream' "$amd/kubedist-$K8S-2.intoto.json" >"$TMP/origin"
    assert_grep "built from source: the Go modules of pkg/source.toml" "$TMP/origin"
    deb=$amd/kubelet_${K8S}-2_amd64.deb
    dpkg-deb -f "$deb" Description >"$TMP/description"
    cat "$TMP/description"
    assert_grep "Built from source by kubedist: kubernetes $K8S from its Go modules" "$TMP/description"
    if grep -q "TEST BUILD" "$TMP/description"; then
        echo "assertion failed: a package built from source says TEST BUILD" >&2
        return 1
    fi
    sbom_names_every_module "$BIN/kubelet" "$deb.spdx.json"
    # The program itself as the purl spec names a Go package: the module
    # holding it (what scanners match advisories against), the package's
    # path inside it as the subpath.
    assert_eq "pkg:golang/k8s.io/kubernetes@v$K8S#cmd/kubelet" \
        "$(jq -r '.packages[] | select(.name == "k8s.io/kubernetes/cmd/kubelet") | .externalRefs[0].referenceLocator' "$deb.spdx.json")" \
        "the kubelet's package URL"
}

# riscv64, for which upstream publishes no Kubernetes: the release cargo
# xtask test built from source for it (KD_DIST/riscv64) holds every format
# under riscv64's names; every program in its packages is RISC-V code and
# runs under qemu-user (the runtime's runc with Debian 13's libseccomp); its
# kubelet's SBOM names every module the kubelet links; its bundle holds
# riscv64 images, the ones `source --images` builds (a second build of
# which is byte-identical: test_two_builds_are_byte_identical), and its
# etcd starts on riscv64 only with the variable its image sets.
test_riscv64_builds_from_source_in_every_format() {
    rv=${KD_DIST:?}/riscv64 x=$TMP/riscv64 q=qemu-riscv64-static
    mkdir -p "$x/deb" "$x/rpm"
    for p in kubelet kubeadm kubectl kubernetes-cni cri-tools kubedist-containerd; do
        deb=$(kd_one "$rv/${p}"_*_riscv64.deb)
        rpm=$(kd_one "$rv/${p}"-[0-9]*.riscv64.rpm)
        assert_eq riscv64 "$(dpkg-deb -f "$deb" Architecture)" "$p deb Architecture"
        assert_eq riscv64 "$(rpm -qp --qf '%{ARCH}' "$rpm")" "$p rpm arch"
        dpkg-deb -x "$deb" "$x/deb"
        (cd "$x/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
    done
    for f in "$rv/kubedist-$K8S-linux-riscv64.tar.gz" "$rv/kubernetes-v$K8S-riscv64.raw" \
        "$rv/kubedist-containerd-v$CTD-riscv64.raw" "$rv/kubedist-installer-$K8S-2.oci.tar"; do
        assert_file "$f"
    done
    (cd "$rv" && sha256sum -c --quiet SHA256SUMS)
    # The installer image: riscv64's, its shell Debian 13's riscv64 busybox.
    inst=$rv/kubedist-installer-$K8S-2.oci.tar
    manifest=$(tar -xOf "$inst" index.json | jq -r '.manifests[0].digest')
    config=$(tar -xOf "$inst" "blobs/sha256/${manifest#sha256:}" | jq -r .config.digest)
    assert_eq riscv64 "$(tar -xOf "$inst" "blobs/sha256/${config#sha256:}" | jq -r .architecture)" \
        "the installer image's architecture"
    shell=$(tar -xOf "$inst" "blobs/sha256/${manifest#sha256:}" | jq -r '.layers[0].digest')
    mkdir -p "$x/installer"
    tar -xOf "$inst" "blobs/sha256/${shell#sha256:}" | tar -xzf - -C "$x/installer" bin/busybox
    readelf -h "$x/installer/bin/busybox" | grep -q 'Machine: *RISC-V'
    assert_eq ok "$($q "$x/installer/bin/busybox" sh -c 'echo ok')" "riscv64 installer image's busybox"
    for tree in deb rpm; do
        find "$x/$tree" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF && readelf -h "$1" |
            sed -n "s/^ *Machine: *//p"' sh {} \; | sort -u >"$TMP/rv-machines"
        assert_eq "RISC-V" "$(cat "$TMP/rv-machines")" "the machine of every ELF file of riscv64's ${tree}s"
    done
    b=$x/deb/usr/bin
    assert_eq "Kubernetes v$K8S" "$($q "$b/kubelet" --version)" "riscv64 kubelet --version"
    assert_eq "v$K8S" "$($q "$b/kubeadm" version -o short)" "riscv64 kubeadm version -o short"
    assert_eq "crictl version v$CRI" "$($q "$b/crictl" --version)" "riscv64 crictl --version"
    mkdir -p "$x/deb/etc/default" "$x/deb/var/lib/kubelet"
    echo 'KUBELET_EXTRA_ARGS="--node-ip=192.0.2.9"' >"$x/deb/etc/default/kubelet"
    $q "$b/kubelet-wrapper" --root "$x/deb" --family deb --print >"$TMP/rv-print.json"
    assert_grep '"--node-ip=192.0.2.9"' "$TMP/rv-print.json"
    $q "$b/runc" --version >"$TMP/rv-runc"
    cat "$TMP/rv-runc"
    assert_grep "^runc version $RUNC" "$TMP/rv-runc"
    assert_grep "^libseccomp: 2\." "$TMP/rv-runc"
    $q "$b/containerd" --version | tee "$TMP/rv-ctd"
    assert_grep " v$CTD " "$TMP/rv-ctd"
    go version -m "$b/kubelet" >"$TMP/rv-buildinfo"
    assert_grep "build	GOARCH=riscv64" "$TMP/rv-buildinfo"
    sbom_names_every_module "$b/kubelet" "$rv/kubelet_${K8S}-2_riscv64.deb.spdx.json"
    echo "== the bundle holds riscv64 images, those source --images built"
    bundle=$rv/kubedist-images-$K8S-riscv64.oci.tar
    tar -xOf "$bundle" index.json |
        jq -r '.manifests[] | .annotations["io.containerd.image.name"] + " " + .digest' | sort >"$TMP/rv-bundled"
    source_manifests "$IN/images" riscv64 | diff -u - "$TMP/rv-bundled"
    [ "$(grep -c . "$TMP/rv-bundled")" = "$(grep -c '^reference = ' "$KD_REPO/pkg/images.toml")" ]
    echo "== etcd's image names its architecture, which etcd does not start on otherwise"
    etcd=$(awk '/etcd/ { print $2 }' "$TMP/rv-bundled")
    config=$(tar -xOf "$bundle" "blobs/sha256/${etcd#sha256:}" | jq -r .config.digest)
    tar -xOf "$bundle" "blobs/sha256/${config#sha256:}" | jq -r '.architecture, .config.Env[]' >"$TMP/rv-etcd"
    assert_grep "^riscv64$" "$TMP/rv-etcd"
    assert_grep "^ETCD_UNSUPPORTED_ARCH=riscv64$" "$TMP/rv-etcd"
    # The image's etcd under qemu-user: it starts with the image's variable
    # and refuses to without it.
    image_root "$bundle" "$etcd" "$x/etcd"
    env -i ETCD_UNSUPPORTED_ARCH=riscv64 "$q" "$x/etcd/usr/local/bin/etcd" --version >"$TMP/rv-etcd-version" 2>&1
    assert_grep "^etcd Version: " "$TMP/rv-etcd-version"
    if env -i "$q" "$x/etcd/usr/local/bin/etcd" --version >"$TMP/rv-etcd-refused" 2>&1; then
        echo "assertion failed: riscv64's etcd started without ETCD_UNSUPPORTED_ARCH" >&2
        return 1
    fi
    assert_grep "unsupported architecture" "$TMP/rv-etcd-refused"
    # kube-proxy's iptables and nft are Debian 13's, whose packages ship
    # below /usr alone. In the image's root (qemu-user through binfmt_misc)
    # the kernel finds their loader, /lib/ld-linux-riscv64-lp64d.so.1, and
    # the loader every library. (Their commands need nf_tables' netlink,
    # which qemu-user lacks: xtables-nft-multi, named as none of them, lists
    # them.)
    echo "== kube-proxy's iptables and nft start in its image's root"
    image_root "$bundle" "$(awk '/kube-proxy/ { print $2 }' "$TMP/rv-bundled")" "$x/kube-proxy"
    chroot "$x/kube-proxy" /usr/sbin/xtables-nft-multi >"$TMP/rv-xtables" 2>&1 || true
    cat "$TMP/rv-xtables"
    assert_grep '^ \* iptables-restore$' "$TMP/rv-xtables"
    for program in xtables-nft-multi nft; do
        if ! chroot "$x/kube-proxy" /lib/ld-linux-riscv64-lp64d.so.1 --list "/usr/sbin/$program" >"$TMP/rv-$program.libs" 2>&1 ||
            grep -q "not found" "$TMP/rv-$program.libs"; then
            cat "$TMP/rv-$program.libs" >&2
            echo "assertion failed: riscv64's kube-proxy image lacks a library of its $program (above)" >&2
            return 1
        fi
    done
}

test_the_minor_before_builds_from_source_too() {
    # cargo xtask test builds it (dist --source --version, amd64) for this
    # suite and the cluster's upgrade.
    out=${KD_DIST_OLDER:?cargo xtask test builds the release of the minor before}
    deb=$(kd_one "$out"/kubelet_*_amd64.deb)
    older=$(basename "$deb" | sed 's/^kubelet_\(.*\)-[0-9]*_amd64.deb$/\1/')
    assert_eq "${K8S%.*}" "$(echo "$older" | awk -F. '{ print $1 "." $2 + 1 }')" "the minor before $K8S ($older)"
    dpkg-deb -x "$deb" "$TMP/older"
    assert_eq "Kubernetes v$older" "$("$TMP/older/usr/bin/kubelet" --version)" "kubelet --version of $older"
    dpkg-deb -x "$(kd_one "$out"/kubeadm_*_amd64.deb)" "$TMP/older"
    assert_eq "v$older" "$("$TMP/older/usr/bin/kubeadm" version -o short)" "kubeadm of $older"
    echo "== kubeadm $older lists the images of pkg/images/v$older.toml, and they are bundled"
    "$TMP/older/usr/bin/kubeadm" config images list --kubernetes-version "v$older" | sort >"$TMP/older.images"
    sed -n 's/^reference = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images/v$older.toml" | sort | diff -u - "$TMP/older.images"
    tar -xOf "$out/kubedist-images-$older-amd64.oci.tar" index.json |
        jq -r '.manifests[].annotations["io.containerd.image.name"]' | sort | diff -u "$TMP/older.images" -
    echo "== a reference both releases bundle names one image in both (pause)"
    tar -xOf "$out/kubedist-images-$older-amd64.oci.tar" index.json |
        jq -r '.manifests[] | .annotations["io.containerd.image.name"] + " " + .digest' | sort >"$TMP/older.manifests"
    source_manifests "$IN/images" amd64 >"$TMP/pin.manifests"
    join "$TMP/older.manifests" "$TMP/pin.manifests" | tee "$TMP/shared.manifests"
    assert_grep '/pause:' "$TMP/shared.manifests"
    awk '$2 != $3' "$TMP/shared.manifests" >"$TMP/shared.differ"
    assert_empty "$TMP/shared.differ" "images under the same reference that differ between $older and $K8S"
    assert_file "$out/kubedist-$older-linux-amd64.tar.gz"
}

# "<reference> <digest>" of each image's manifest for ARCH in the layout
# DIR, sorted.
# sbom_names_every_module PROGRAM SPDX: the SBOM names every module the Go
# PROGRAM links, the main one too, each as linked (a replaced one under its
# replacement), as `go version -m` lists them.
sbom_names_every_module() {
    go version -m "$1" | awk '
        $1 == "mod" || $1 == "dep" { if (m != "") print m; m = $2 "@" $3; next }
        $1 == "=>" { m = $2 "@" $3; next }
        END { if (m != "") print m }' | sort -u >"$TMP/modules"
    jq -r '.packages[].externalRefs[]?.referenceLocator' "$2" |
        sed -n 's|^pkg:golang/\(.*\)$|\1|p' | sed 's/%2F/\//g' | sort -u >"$TMP/sbom.modules"
    [ "$(grep -c . "$TMP/modules")" -gt 100 ] || {
        echo "assertion failed: go version -m listed few modules of $1" >&2
        return 1
    }
    missing=$(comm -23 "$TMP/modules" "$TMP/sbom.modules")
    [ -z "$missing" ] || {
        echo "assertion failed: modules of $1 missing from $2:" >&2
        echo "$missing" | head -20 >&2
        return 1
    }
}

# image_root BUNDLE MANIFEST DIR : the layers of the image whose manifest
# is MANIFEST (its digest) in the images bundle BUNDLE, unpacked in order
# into DIR (the image's root).
image_root() {
    mkdir -p "$3"
    for layer in $(tar -xOf "$1" "blobs/sha256/${2#sha256:}" | jq -r '.layers[].digest'); do
        tar -xOf "$1" "blobs/sha256/${layer#sha256:}" | tar -xzf - -C "$3"
    done
}

source_manifests() { # DIR ARCH
    jq -r '.manifests[] | .annotations["org.opencontainers.image.ref.name"] + " " + .digest' "$1/index.json" |
        while read -r ref digest; do
            jq -r --arg ref "$ref" --arg arch "$2" \
                '.manifests[] | select(.platform.architecture == $arch) | $ref + " " + .digest' \
                "$1/blobs/sha256/${digest#sha256:}"
        done | sort
}

# `cargo xtask bump` on a copy of the checkout (docs/following-upstream.md):
# an older patch and an unserved version are refused in one line, a run
# killed while it pins modules leaves the tree as it was, then a patch of a
# minor older than the window, which the proxy serves and the tree lacks
# (1.34.4: the tree has 1.34.2), is pinned through the checksum database,
# its kubeadm built from source and its image list recorded, with the
# images' own modules; the window stays; the same command again changes
# nothing.
BUMP_TO=1.34.4
test_bump_moves_a_copy_of_the_tree_to_another_release() {
    copy=$TMP/checkout
    kd_checkout_copy "$copy"
    bump() { (cd "$copy" && cargo xtask bump "$@"); }
    # What differs from the commit before the command runs (nothing, on a
    # clean checkout): the unchanged tree.
    changes() { (cd "$copy" && git status --porcelain --untracked-files=all); }
    changes >"$TMP/unchanged"
    unchanged() { changes >"$TMP/changes" && assert_eq "$(cat "$TMP/unchanged")" "$(cat "$TMP/changes")" "$1"; }
    for refused in "1.36.1:1.36.1 is older than 1.36.3" "1.37.99:serves no such version (1.37: newest 1.37.2)"; do
        if bump "${refused%%:*}" >"$TMP/bump.out" 2>"$TMP/bump.err"; then
            echo "assertion failed: bump took ${refused%%:*}" >&2
            return 1
        fi
        assert_one_error "$TMP/bump.err" "${refused#*:}" "(nothing changed)" || return 1
        unchanged "the tree after bump ${refused%%:*}" || return 1
    done
    # Killed (the whole process group: cargo, the xtask, go) while it pins
    # the release's modules: a stand-in for go holds `go mod tidy` until
    # then (on warm caches it takes less than a second).
    mkdir -p "$TMP/held-go"
    printf '%s\n' '#!/bin/sh' \
        "case \"\$*\" in *'mod tidy'*) : >'$TMP/tidy-started'; exec sleep 600 ;; esac" \
        "exec '$(command -v go)' \"\$@\"" >"$TMP/held-go/go"
    chmod 0755 "$TMP/held-go/go"
    rm -f "$TMP/tidy-started"
    (cd "$copy" && PATH=$TMP/held-go:$PATH exec setsid cargo xtask bump "$BUMP_TO") >/dev/null 2>"$TMP/killed.err" &
    runner=$!
    waited=0
    until [ -e "$TMP/tidy-started" ]; do
        waited=$((waited + 1))
        [ "$waited" -lt 3000 ] || { cat "$TMP/killed.err"; echo "assertion failed: bump never began pinning" >&2; return 1; }
        sleep 0.1
    done
    assert_grep "pin the release's modules" "$TMP/killed.err" || return 1
    # setsid made the runner the leader of its own process group.
    kill -KILL "-$runner"
    wait "$runner" 2>/dev/null || true
    unchanged "the tree after a killed bump" || return 1
    # The real move.
    bump "$BUMP_TO" >"$TMP/bump.out" 2>"$TMP/bump.err" || { cat "$TMP/bump.err"; return 1; }
    cat "$TMP/bump.out"
    [ -z "$(ls -d "$copy"/target/.bump-* 2>/dev/null)" ] || { echo "assertion failed: the killed run's copy is left in target/" >&2; return 1; }
    changes >"$TMP/changes"
    for f in "pkg/images/v$BUMP_TO.toml" "pkg/source/kubernetes/v$BUMP_TO/go.mod" \
        "pkg/source/kubernetes/v$BUMP_TO/go.sum" pkg/source.toml pkg/upstream.lock; do
        assert_grep " $f\$" "$TMP/changes" || return 1
    done
    assert_no_grep " pkg/release.toml\$" "$TMP/changes" || return 1
    list=$copy/pkg/images/v$BUMP_TO.toml
    assert_grep "^kubernetes = \"$BUMP_TO\"\$" "$list" || return 1
    assert_grep "^reference = \"registry.k8s.io/kube-apiserver:v$BUMP_TO\"\$" "$list" || return 1
    assert_grep "^[[:space:]]*k8s.io/kubernetes v$BUMP_TO\( \|\$\)" "$copy/pkg/source/kubernetes/v$BUMP_TO/go.mod" || return 1
    # The images' other modules: each at its tag's version, pinned.
    for name in etcd coredns; do
        tag=$(sed -n "s|^reference = \"registry.k8s.io/\(coredns/\)\{0,1\}$name:v\{0,1\}\([0-9.]*\).*|\2|p" "$list")
        [ -n "$tag" ] || { echo "assertion failed: no $name image in $list" >&2; return 1; }
        assert_file "$copy/pkg/source/$name/v$tag/go.sum" || return 1
        assert_grep "^\[$name.versions.\"$tag\"\]\$" "$copy/pkg/source.toml" || return 1
    done
    (cd "$copy" && git diff) >"$TMP/first.diff"
    bump "$BUMP_TO" >"$TMP/again.out" 2>"$TMP/again.err" || { cat "$TMP/again.err"; return 1; }
    assert_grep "^nothing changed" "$TMP/again.out" || return 1
    (cd "$copy" && git diff) >"$TMP/second.diff"
    assert_eq "$(cat "$TMP/first.diff")" "$(cat "$TMP/second.diff")" "the tree after bump $BUMP_TO twice"
}

test_images_from_source_are_indexes_pinned_and_labelled() {
    jq -r '.manifests[].annotations["org.opencontainers.image.ref.name"]' "$IN/images/index.json" | sort |
        diff -u "$TMP/refs" -
    echo "== each pin of images.toml is its index's digest"
    jq -r '.manifests[] | .annotations["org.opencontainers.image.ref.name"] + " " + .digest' "$IN/images/index.json" |
        sort >"$TMP/indexes"
    awk -F'"' '/^reference = / { r = $2 } /^index = / { print r " " $2 }' "$IN/images.toml" | sort |
        diff -u "$TMP/indexes" -
    source_manifests "$IN/images" amd64 >"$TMP/manifests-amd64"
    assert_eq "$(grep -c . "$TMP/refs")" "$(grep -c . "$TMP/manifests-amd64")" "images for amd64"
    echo "== each says what built it; pause runs as 65535, CoreDNS as nonroot"
    while read -r ref; do
        skopeo inspect --config "oci:$IN/images:$ref" >"$TMP/config.json"
        jq -r '.config.Labels."io.kubedist.built-from-source"' "$TMP/config.json" >"$TMP/label"
        assert_grep "with go1\.[0-9]" "$TMP/label"
        case $ref in
        */pause:*) assert_eq "65535:65535" "$(jq -r .config.User "$TMP/config.json")" "pause's user" ;;
        */coredns:*) assert_eq "65532" "$(jq -r .config.User "$TMP/config.json")" "CoreDNS's user" ;;
        */kube-apiserver:*) assert_grep "kube-apiserver k8s.io/kubernetes@v$K8S with" "$TMP/label" ;;
        esac
    done <"$TMP/refs"
}

test_the_runtime_from_source_is_containerd_2_and_runc_with_seccomp() {
    rt=$RT
    "$rt/containerd" --version | tee "$TMP/containerd.version"
    assert_grep "^containerd github.com/containerd/containerd/v2 v$CTD " "$TMP/containerd.version"
    "$rt/runc" --version | tee "$TMP/runc.version"
    assert_grep "^runc version $RUNC\$" "$TMP/runc.version"
    assert_grep "^libseccomp: 2\." "$TMP/runc.version"
    "$rt/runc" features | jq -r .linux.seccomp.enabled >"$TMP/seccomp"
    assert_eq true "$(cat "$TMP/seccomp")" "runc's seccomp"
    for p in containerd containerd-shim-runc-v2 ctr runc; do
        file "$rt/$p" | tee -a "$TMP/file"
    done
    assert_eq 4 "$(grep -c 'statically linked' "$TMP/file")" "static programs"
}

test_every_image_from_source_runs_in_containerd() {
    tar -C "$IN/images" -cf "$TMP/images.tar" .
    ref() { grep "/$1:" "$TMP/refs"; }
    mkdir -p "$TMP/coredns"
    printf '.:1053 {\n    hosts {\n        10.1.2.3 kubedist.test\n    }\n}\n' >"$TMP/coredns/Corefile"
    # Offline, in a network namespace of its own with only lo, with the
    # containerd and runc built from source.
    PATH=$RT:$PATH TMP=$TMP KD_REPO=$KD_REPO unshare --net sh -eu -c '
        . "$KD_REPO/ci/containerd.sh"
        trap ctd_stop_all EXIT
        ip link set lo up
        d=$TMP/ctd
        ctd_start "$d" "$1"
        ctr_in "$d" images import --platform linux/amd64 "$TMP/images.tar" >"$TMP/imported"
        ctr_in "$d" version >"$TMP/ctr.version"
        ctr_in "$d" run -d --seccomp "$1" kd-pause
        for v in apiserver controller-manager scheduler; do
            ctr_in "$d" run --rm "$(grep "/kube-$v:" "$TMP/refs")" "kd-$v" "kube-$v" --version
        done >"$TMP/versions"
        ctr_in "$d" run -d --net-host "$2" kd-etcd etcd --data-dir /tmp/etcd             --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790             --listen-peer-urls http://127.0.0.1:23800
        ctr_in "$d" run -d --net-host --mount "type=bind,src=$TMP/coredns,dst=/etc/coredns,options=rbind:ro"             "$3" kd-coredns /coredns -conf /etc/coredns/Corefile
        ctr_in "$d" run --rm --privileged --net-host "$4" kd-proxy-iptables iptables --version >"$TMP/iptables"
        ctr_in "$d" run --rm --privileged --net-host "$4" kd-proxy-nft nft --version >"$TMP/nft"
        ctr_in "$d" run --rm --privileged --net-host "$4" kd-proxy-cleanup kube-proxy --cleanup -v=5             >"$TMP/cleanup" 2>&1 || { cat "$TMP/cleanup" >&2; exit 1; }
        i=0
        until curl -fs http://127.0.0.1:23790/health >"$TMP/health" 2>/dev/null; do
            i=$((i + 1)); [ "$i" -lt 100 ] || { ctr_in "$d" tasks ls >&2; exit 1; }; sleep 0.2
        done
        i=0
        until dig +short +time=1 +tries=1 @127.0.0.1 -p 1053 kubedist.test >"$TMP/dig" 2>&1 && [ -s "$TMP/dig" ]; do
            i=$((i + 1)); [ "$i" -lt 50 ] || exit 1; sleep 0.2
        done
        sleep 2
        ctr_in "$d" tasks ls >"$TMP/tasks"
        pid=$(awk "\$1 == \"kd-pause\" { print \$2 }" "$TMP/tasks")
        ps -o uid= -p "$pid" >"$TMP/pause.uid"
    ' sh "$(ref pause)" "$(ref etcd)" "$(ref coredns)" "$(ref kube-proxy)"
    cat "$TMP/ctr.version" "$TMP/versions" "$TMP/health" "$TMP/dig" "$TMP/iptables" "$TMP/nft" "$TMP/tasks"
    assert_eq 2 "$(grep -c "Version: *v$CTD" "$TMP/ctr.version")" \
        "client and server of the containerd built from source"
    assert_eq 3 "$(grep -c "^Kubernetes v$K8S\$" "$TMP/versions")" "control plane versions"
    assert_eq true "$(jq -r .health "$TMP/health")" "etcd /health"
    assert_eq 10.1.2.3 "$(cat "$TMP/dig")" "CoreDNS's answer"
    assert_grep "(nf_tables)" "$TMP/iptables"
    assert_grep "^nftables v" "$TMP/nft"
    assert_grep '"Running" command="iptables-restore"' "$TMP/cleanup"
    if grep -i "not found in \$PATH\|executable file not found" "$TMP/cleanup"; then
        echo "assertion failed: kube-proxy misses a program of its userland (above)" >&2
        return 1
    fi
    assert_eq RUNNING "$(awk '$1 == "kd-pause" { print $3 }' "$TMP/tasks")" "the pause container"
    assert_eq 65535 "$(tr -d ' ' <"$TMP/pause.uid")" "pause's uid"
}

# kubedist-images against the containerd 2 built from source: configured as
# docs/air-gapped.md says (its image verifier's bin_dir is no CNI directory),
# it gets no note; with the CRI plugin looking for the CNI plugins in
# /usr/lib/cni, the note naming containerd 2's setting.
test_kubedist_images_notes_are_true_on_containerd_2() {
    kd_bundle_dir "$TMP/kdi" "$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)"
    for cni in /opt/cni/bin /usr/lib/cni; do
        PATH=$RT:$PATH TMP=$TMP KD_REPO=$KD_REPO unshare --net sh -eu -c '
            . "$KD_REPO/ci/containerd.sh"
            trap ctd_stop_all EXIT
            d=$TMP/ctd-notes$(echo "$2" | tr / -)
            ctd_start "$d" "$1" "$2"
            "$KD_REPO/installer/images/kubedist-images" --dir "$TMP/kdi" \
                --containerd-address "$d/containerd.sock" --containerd-config "$d/config.toml"
        ' sh "$(grep /pause: "$TMP/refs")" "$cni" >"$TMP/notes.out" 2>&1 || { cat "$TMP/notes.out"; return 1; }
        cat "$TMP/notes.out"
        assert_grep ': imported (sha256:' "$TMP/notes.out"
        case $cni in
        /opt/cni/bin) assert_eq 0 "$(grep -c 'note:' "$TMP/notes.out" || true)" "notes on a node set up as the guide says" ;;
        *) assert_grep "note: containerd looks for CNI plugins in /usr/lib/cni, kubernetes-cni installs them in /opt/cni/bin: set bin_dirs = \['/opt/cni/bin'\] under \[plugins.'io.containerd.cri.v1.runtime'.cni\]" "$TMP/notes.out" ;;
        esac
    done
}

# A site's own repository, as kubeadm's imageRepository names it: no
# registry answers this name.
REPO=registry.example.internal/k8s

# kubedist-images --image-repository on the containerd 2 built from source:
# every image under the names the kubeadm built from source lists for that
# repository, at the bundle's digests; a sandbox image naming the
# repository's pause gets no note.
test_kubedist_images_names_the_images_as_kubeadm_lists_them_under_a_repository() {
    "$BIN/kubeadm" config images list --kubernetes-version "v$K8S" --image-repository "$REPO" | sort >"$TMP/kubeadm.repo"
    cat "$TMP/kubeadm.repo"
    bundle=$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)
    kd_bundle_dir "$TMP/kdi-repo" "$bundle"
    PATH=$RT:$PATH TMP=$TMP KD_REPO=$KD_REPO unshare --net sh -eu -c '
        . "$KD_REPO/ci/containerd.sh"
        trap ctd_stop_all EXIT
        d=$TMP/ctd-repo
        ctd_start "$d" "$1"
        "$KD_REPO/installer/images/kubedist-images" --dir "$TMP/kdi-repo" --image-repository "$2" \
            --containerd-address "$d/containerd.sock" --containerd-config "$d/config.toml" >"$TMP/repo.out"
        containerd_images "$d" >"$TMP/repo.held"
    ' sh "$(grep "^$REPO/pause:" "$TMP/kubeadm.repo")" "$REPO" || { cat "$TMP/repo.out"; return 1; }
    cat "$TMP/repo.out"
    grep " $REPO/" "$TMP/repo.held" | cut -d ' ' -f 2 | diff -u "$TMP/kubeadm.repo" -
    # Each at the digest of the bundle's image it names.
    sed -n 's/^kubedist-images: \([^ ]*\): named (\(sha256:[0-9a-f]*\), as \([^ )]*\))$/\2 \1 \3/p' "$TMP/repo.out" |
        while read -r digest name ref; do
            assert_grep "^$digest $ref\$" "$TMP/repo.held"
            assert_grep "^$digest $name\$" "$TMP/repo.held"
        done
    assert_eq "$(grep -c . "$TMP/kubeadm.repo")" "$(grep -c ': named (sha256:' "$TMP/repo.out")" "images named"
    assert_eq 0 "$(grep -c 'note:' "$TMP/repo.out" || true)" "notes with the repository's pause as the sandbox image"
}

# What docs/air-gapped.md says of a site that runs a registry instead: the
# containerd 2 built from source, its CRI plugin's config_path at a hosts.toml
# for registry.example.internal whose host is Debian's docker-registry on
# 127.0.0.1, pulls the repository's pause through CRI (crictl) at the
# bundle's digest; without the hosts.toml the same pull fails (no network).
test_a_mirror_in_containerd_2_s_hosts_toml_serves_the_site_s_repository() {
    bundle=$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)
    tar -xzf "$IN/cri-tools/v$CRI/crictl-v$CRI-linux-amd64.tar.gz" -C "$TMP" crictl
    pause=$(grep '/pause:' "$TMP/refs")
    want=$(tar -xOf "$bundle" index.json |
        jq -r --arg r "$pause" '.manifests[] | select(.annotations["io.containerd.image.name"] == $r) | .digest')
    mkdir -p "$TMP/hosts/registry.example.internal"
    cat >"$TMP/hosts/registry.example.internal/hosts.toml" <<TOML
server = "https://registry.example.internal"
[host."http://127.0.0.1:5123"]
  capabilities = ["pull", "resolve"]
TOML
    PATH=$RT:$PATH TMP=$TMP KD_REPO=$KD_REPO unshare --net sh -eu -c '
        . "$KD_REPO/ci/containerd.sh"
        trap ctd_stop_all EXIT
        ip link set lo up
        mkdir -p "$TMP/registry"
        printf "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:5123\n" \
            "$TMP/registry/data" >"$TMP/registry/config.yml"
        docker-registry serve "$TMP/registry/config.yml" >"$TMP/registry/log" 2>&1 &
        ctd_pids="$ctd_pids $!"
        i=0
        until curl -fs http://127.0.0.1:5123/v2/ >/dev/null; do i=$((i + 1)); [ "$i" -lt 100 ]; sleep 0.1; done
        skopeo copy --quiet --all --preserve-digests --dest-tls-verify=false \
            "oci-archive:$2:$1" "docker://127.0.0.1:5123/k8s/${1#registry.k8s.io/}"
        for how in with without; do
            d=$TMP/ctd-mirror-$how
            hosts=
            [ "$how" = without ] || hosts=$TMP/hosts
            ctd_start "$d" "$1" "" "$hosts"
            if "$TMP/crictl" --runtime-endpoint "unix://$d/containerd.sock" pull "$3" >"$TMP/pull-$how" 2>&1; then
                echo "pulled" >>"$TMP/pull-$how"
            fi
            containerd_images "$d" >"$TMP/held-$how"
        done
    ' sh "$pause" "$bundle" "$REPO/${pause#registry.k8s.io/}" || { cat "$TMP/registry/log"; return 1; }
    cat "$TMP/pull-with" "$TMP/held-with"
    assert_grep '^pulled$' "$TMP/pull-with"
    # (CRI also records the image by its digest.)
    assert_grep "^$want $REPO/${pause#registry.k8s.io/}\$" "$TMP/held-with"
    assert_eq 0 "$(grep -vc "^$want " "$TMP/held-with")" "images held at another digest"
    # Through the mirror, which containerd asked for the repository's name.
    assert_grep 'GET /v2/k8s/pause/manifests/.*ns=registry.example.internal' "$TMP/registry/log"
    cat "$TMP/pull-without"
    assert_no_grep '^pulled$' "$TMP/pull-without"
    assert_empty "$TMP/held-without" "images held without the mirror"
}

# kubedist-images with the kubelet built from source on PATH (v$K8S): the
# bundle of the minor before is left out, said in a note; alone it is
# refused in one line naming both releases, nothing imported; --downgrade
# imports it.
test_kubedist_images_leaves_out_a_bundle_older_than_the_kubelet() {
    old=$(kd_one "${KD_DIST_OLDER:?}"/kubedist-images-*-amd64.oci.tar)
    old_v=$(basename "$old" | sed 's/^kubedist-images-\(.*\)-amd64\.oci\.tar$/\1/')
    kd_bundle_dir "$TMP/kdi-both" "$old" "$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)"
    kd_bundle_dir "$TMP/kdi-old" "$old"
    PATH=$BIN:$RT:$PATH TMP=$TMP KD_REPO=$KD_REPO unshare --net sh -eu -c '
        . "$KD_REPO/ci/containerd.sh"
        trap ctd_stop_all EXIT
        d=$TMP/ctd-older
        ctd_start "$d" "$1"
        kdi() {
            "$KD_REPO/installer/images/kubedist-images" --containerd-address "$d/containerd.sock" \
                --containerd-config "$d/config.toml" "$@"
        }
        kdi --dir "$TMP/kdi-both" >"$TMP/older.both" 2>&1
        if kdi --dir "$TMP/kdi-old" >"$TMP/older.alone" 2>&1; then exit 3; fi
        kdi --dir "$TMP/kdi-old" --downgrade >"$TMP/older.downgrade" 2>&1
    ' sh "$(grep /pause: "$TMP/refs")" || { cat "$TMP"/older.*; return 1; }
    cat "$TMP/older.both" "$TMP/older.alone" "$TMP/older.downgrade"
    assert_grep "note: ${old##*/} holds the images of Kubernetes $old_v, older than this node's kubelet v$K8S: not imported" "$TMP/older.both"
    assert_grep "/kube-proxy:v$K8S: imported" "$TMP/older.both"
    assert_eq 0 "$(grep -c "/kube-proxy:v$old_v" "$TMP/older.both" || true)" "lines on $old_v's kube-proxy"
    assert_eq 1 "$(wc -l <"$TMP/older.alone")" "lines of the refusal"
    assert_grep "no bundle for this node's kubelet v$K8S, only older ones ($old_v); nothing was imported" "$TMP/older.alone"
    assert_grep "/kube-proxy:v$old_v: imported" "$TMP/older.downgrade"
}

kd_test test_programs_print_the_pinned_versions
kd_test test_bump_moves_a_copy_of_the_tree_to_another_release
kd_test test_kubeadm_lists_the_images_of_pkg_images_toml
kd_test test_go_version_m_shows_the_module_and_upstream_flags
kd_test test_images_from_source_are_indexes_pinned_and_labelled
kd_test test_the_runtime_from_source_is_containerd_2_and_runc_with_seccomp
kd_test test_every_image_from_source_runs_in_containerd
kd_test test_kubedist_images_notes_are_true_on_containerd_2
kd_test test_kubedist_images_leaves_out_a_bundle_older_than_the_kubelet
kd_test test_kubedist_images_names_the_images_as_kubeadm_lists_them_under_a_repository
kd_test test_a_mirror_in_containerd_2_s_hosts_toml_serves_the_site_s_repository
kd_test test_two_builds_are_byte_identical
kd_test test_dist_source_builds_every_artifact_and_says_what_built_them
kd_test test_the_minor_before_builds_from_source_too
kd_test test_riscv64_builds_from_source_in_every_format

kd_summary
