#!/bin/sh
# `cargo xtask dist` itself: what an operator checks of the artifacts before
# any package manager sees them.
#
# - the same inputs and SOURCE_DATE_EPOCH give byte-identical artifacts when
#   built from another checkout directory at another time;
# - arm64, ppc64le and s390x artifacts carry their architecture's names and
#   binaries that run (under qemu; riscv64's, from source, are t-source's);
# - a tampered, missing or wrongly summed input fails with one line naming
#   the file, and leaves the output directory exactly as it was;
# - SHA256SUMS verifies and names every artifact, with upstream's file names.
# - every artifact has an SPDX SBOM that spdx-tools validates and that meets
#   the NTIA minimum elements; its file digests are those of the unpacked
#   artifact (and an altered file breaks that check); the Go build
#   information it names is what Go's own `go version -m` reports;
# - the release's provenance (in-toto, SLSA v1) names every other file of
#   SHA256SUMS with its digest, which the files have (a changed artifact
#   fails that check), and Cargo.lock and the inputs as its materials;
# - release N is, byte for byte, what ci/dist-sums records for the same
#   compiler, epoch and inputs: a change meant to change no artifact (a
#   refactoring) changes none, and one that does records it in its commit.
#
# Wall time: about 3 min on 2 cores (one full amd64 rebuild from a copy of
# the checkout, one arm64 build at --fast levels).

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require cargo git sha256sum dpkg-deb rpm rpm2cpio cpio tar qemu-aarch64-static qemu-ppc64le-static \
    qemu-s390x-static readelf skopeo umoci jq unsquashfs pyspdxtools ntia-checker go
kd_require_dist

# The epoch of KD_DIST (`cargo xtask test` passes it to the suites). cargo
# itself never sees it: `cargo xtask` builds the xtask without it.
EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
FIXTURES=$(kd_fixtures)
TMP=$(kd_scratch_dir t-dist)

# dist ARGS... : this checkout's `cargo xtask dist`.
dist() {
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=$EPOCH cargo xtask dist "$@")
}

# dist_logged LOG ARGS... : dist ARGS, its output in LOG (its end shown if
# it fails), for a test that reads what dist said.
dist_logged() {
    log=$1
    shift
    dist "$@" >"$log" 2>&1 || { tail -n 30 "$log" >&2 && return 1; }
}

# amd64_kubectl : the directory release N's amd64 kubectl deb is unpacked
# in (once a run).
amd64_kubectl() {
    [ -d "$TMP/amd64-kubectl" ] || {
        mkdir -p "$TMP/amd64-kubectl.tmp"
        dpkg-deb -x "$KD_DIST"/kubectl_*_amd64.deb "$TMP/amd64-kubectl.tmp"
        mv "$TMP/amd64-kubectl.tmp" "$TMP/amd64-kubectl"
    }
    printf '%s\n' "$TMP/amd64-kubectl"
}


# Release N again, from a copy of the checkout in another directory (its own
# target/; only compiled registry crates and the fixture inputs come from
# this one), later than $KD_DIST was built, under the variations of Debian's
# reprotest that apply to one machine: every artifact must be the same bytes.
test_reproducible_from_another_checkout() {
    copy=$TMP/checkout
    # The same commit (the provenance names it), its own target directory:
    # the shipped binaries are built from scratch under the copy's
    # target/static, and --no-cache writes every artifact anew.
    kd_checkout_copy "$copy"
    # File order: the package descriptions, the units and the inputs read
    # through disorderfs, which lists every directory in a shuffled order
    # (read-only: nothing removes a file through it).
    # shellcheck disable=SC2317 # called by the trap
    unshuffle() {
        for m in "$copy/pkg" "$copy/units" "$TMP/inputs"; do umount "$m" 2>/dev/null || true; done
    }
    trap unshuffle EXIT
    for d in pkg units; do
        mv "$copy/$d" "$copy/$d.ordered"
        mkdir "$copy/$d"
        disorderfs --quiet --shuffle-dirents=yes -o ro "$copy/$d.ordered" "$copy/$d"
    done
    mkdir -p "$TMP/inputs"
    disorderfs --quiet --shuffle-dirents=yes -o ro "$FIXTURES" "$TMP/inputs"
    echo "== variations: build path ($copy), a later time, file order (disorderfs" \
        "--shuffle-dirents: pkg/, units/, the inputs), umask 0077, TZ=Pacific/Chatham," \
        "LC_ALL=fr_FR.UTF-8, hostname kd-reprotest; not varied: the user (the build" \
        "reads root's cargo and Go caches)"
    # shellcheck disable=SC2016 # the inner shell expands its arguments
    (cd "$copy" && umask 0077 && unshare --uts sh -ec '
        hostname kd-reprotest
        SOURCE_DATE_EPOCH=$1 TZ=Pacific/Chatham LC_ALL=fr_FR.UTF-8 LANG=fr_FR.UTF-8 \
            cargo xtask dist --arch amd64 --no-cache --revision 2 --from "$2" --out "$3"' \
        sh "$EPOCH" "$TMP/inputs" "$TMP/again")
    # Proof that the copy did the work: its own wrapper build.
    assert_file "$copy/target/static/x86_64-unknown-linux-musl/release/kubelet-wrapper"
    assert_eq "$(cat "$KD_DIST/SHA256SUMS")" "$(cat "$TMP/again/SHA256SUMS")" \
        "SHA256SUMS of two builds of release N"
    kd_listing "$KD_DIST" >"$TMP/first.list"
    kd_listing "$TMP/again" >"$TMP/second.list"
    assert_eq "$(cat "$TMP/first.list")" "$(cat "$TMP/second.list")" "artifact digests"
}

# A new SOURCE_DATE_EPOCH, as every release sets one, compiles nothing:
# `cargo xtask` keeps it away from the cargo that builds the xtask (gcc reads
# it, so cc-based build scripts would run again and their crates rebuild).
test_new_epoch_compiles_nothing() {
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=1 cargo xtask --help >/dev/null)
    stamp=$TMP/epoch.stamp
    touch "$stamp"
    sleep 1
    (cd "$KD_REPO" && SOURCE_DATE_EPOCH=2 cargo xtask --help >/dev/null 2>"$TMP/epoch.err")
    rebuilt=$(find "$KD_REPO/target/debug/deps" "$KD_REPO/target/debug/build" \
        -newer "$stamp" -type f | head -n 5)
    assert_eq "" "$rebuilt" "files compiled by a run with another SOURCE_DATE_EPOCH"
}

test_sums_verify_and_use_upstream_names() {
    (cd "$KD_DIST" && sha256sum --strict -c SHA256SUMS)
    names=$(cut -d ' ' -f 3 "$KD_DIST/SHA256SUMS" | tr '\n' ' ')
    kube=$(dpkg-deb -f "$KD_DIST"/kubelet_*_amd64.deb Version)
    for n in kubelet kubeadm kubectl; do
        case " $names " in
        *" ${n}_${kube}_amd64.deb "*) ;;
        *) echo "no ${n}_${kube}_amd64.deb in SHA256SUMS: $names" >&2; return 1 ;;
        esac
        rpmname=$(rpm -qp --qf '%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm' "$KD_DIST/$n"-*.x86_64.rpm)
        case " $names " in
        *" $rpmname "*) ;;
        *) echo "no $rpmname in SHA256SUMS: $names" >&2; return 1 ;;
        esac
    done
    for n in kubernetes-cni cri-tools; do
        ls "$KD_DIST/${n}"_*_amd64.deb "$KD_DIST/${n}"-*.x86_64.rpm >/dev/null
    done
    # Every artifact of the directory is listed, and nothing else is there.
    on_disk=$(cd "$KD_DIST" && find . -mindepth 1 -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | tr '\n' ' ')
    listed=$(cut -d ' ' -f 3 "$KD_DIST/SHA256SUMS" | sort | tr '\n' ' ')
    assert_eq "$on_disk" "$listed" "artifacts vs SHA256SUMS"
}

# dist_record : what release N was built from (the compiler, the epoch, the
# inputs' digests, Cargo.lock's included) and the digest of every artifact,
# in the form of ci/dist-sums.
dist_record() {
    echo "# Release N of \`cargo xtask test\`: \`cargo xtask dist --fixtures --arch amd64"
    echo "# --revision 2\`, byte for byte; ci/t-dist.sh compares. See the file's end."
    echo "rustc $(rustc --version | cut -d ' ' -f 2)"
    echo "epoch $EPOCH"
    # The inputs as the provenance names them (not the commit: every
    # commit changes it, and ci/dist-sums with it).
    jq -r '.predicate.buildDefinition.resolvedDependencies[] | select(.name != "source")
        | "input " + .digest.sha256 + "  " + .name' "$KD_DIST"/kubedist-*.intoto.json
    # Not the provenance: it names the commit, which every commit changes.
    grep -v '\.intoto\.json$' "$KD_DIST/SHA256SUMS" | sed 's/^/artifact /'
    echo "# Any change to an artifact's bytes must be meant (a new codec, a changed"
    echo "# file): record it with the file ci/t-dist.sh writes when they differ."
}

# The artifacts are the bytes recorded in ci/dist-sums for the same inputs:
# a change that was meant to change nothing (a refactoring) changes no byte,
# and one that changes an artifact records it in the same commit.
test_artifacts_are_the_recorded_bytes() {
    dist_record >"$TMP/dist-sums"
    if ! diff -u "$KD_REPO/ci/dist-sums" "$TMP/dist-sums" >"$TMP/dist-sums.diff"; then
        cat "$TMP/dist-sums.diff" >&2
        echo "release N differs from ci/dist-sums (above: - recorded, + now). If the" \
            "rustc, epoch or input lines differ, the inputs changed; if only artifact" \
            "lines do, the output did. When the change is meant:" \
            "cp $TMP/dist-sums $KD_REPO/ci/dist-sums" >&2
        return 1
    fi
}

# Every artifact of KD_DIST has its SBOM, listed in SHA256SUMS; spdx-tools
# validates each and the NTIA checker finds every minimum element and no
# element left outside the artifact's tree.
test_sboms_validate_and_meet_the_ntia_minimum() {
    cut -d ' ' -f 3 "$KD_DIST/SHA256SUMS" | grep -v -e '\.spdx\.json$' -e '\.intoto\.json$' -e '\.yaml$' -e '\.oci/' >"$TMP/artifacts"
    n=0
    while read -r a; do
        doc=$a.spdx.json
        grep -q "  $doc\$" "$KD_DIST/SHA256SUMS" || { echo "$doc not in SHA256SUMS" >&2; return 1; }
        pyspdxtools -i "$KD_DIST/$doc" >"$TMP/spdx.out" 2>&1 || { cat "$TMP/spdx.out" >&2; return 1; }
        ntia-checker --file "$KD_DIST/$doc" >"$TMP/ntia.out" 2>&1 || true
        grep -q "Conformant: True" "$TMP/ntia.out" || { cat "$TMP/ntia.out" >&2; return 1; }
        if grep -qi "floating" "$TMP/ntia.out"; then cat "$TMP/ntia.out" >&2; return 1; fi
        n=$((n + 1))
    done <"$TMP/artifacts"
    [ "$n" -ge 10 ] || { echo "only $n SBOMs" >&2; return 1; }
}

# sbom_matches DOC DIR : every file the SBOM DOC lists is in DIR (the
# unpacked artifact, its paths from DIR) with the SHA-256 the SBOM gives, and
# DIR has no other regular file.
sbom_matches() {
    jq -r '.files[] | (.checksums[] | select(.algorithm == "SHA256") | .checksumValue) + "  " + .fileName' \
        "$1" | sort -k 2 >"$TMP/listed"
    (cd "$2" && find . -type f -exec sha256sum {} + | sort -k 2) >"$TMP/unpacked"
    diff -u "$TMP/listed" "$TMP/unpacked" >&2
}

test_sbom_file_digests_are_the_unpacked_artifacts() {
    u=$TMP/unpacked-artifacts
    rm -rf "$u"
    for deb in "$KD_DIST"/*.deb; do
        mkdir -p "$u/deb" && rm -rf "$u/deb/"* && dpkg-deb -x "$deb" "$u/deb"
        sbom_matches "$deb.spdx.json" "$u/deb" || { echo "$deb" >&2; return 1; }
    done
    for rpm in "$KD_DIST"/*.rpm; do
        mkdir -p "$u/rpm" && rm -rf "$u/rpm/"*
        (cd "$u/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
        sbom_matches "$rpm.spdx.json" "$u/rpm" || { echo "$rpm" >&2; return 1; }
    done
    tb=$(kd_one "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)
    mkdir -p "$u/tar" && tar -xzf "$tb" -C "$u/tar"
    sbom_matches "$tb.spdx.json" "$u/tar"
    for raw in "$KD_DIST"/*.raw; do
        rm -rf "$u/raw"
        unsquashfs -q -n -d "$u/raw" "$raw" >/dev/null
        sbom_matches "$raw.spdx.json" "$u/raw" || { echo "$raw" >&2; return 1; }
    done
    # The installer image and the images bundle: each layer of the layout
    # unpacked under its blob.
    for image in "$(kd_one "$KD_DIST"/kubedist-installer-*.oci.tar)" \
        "$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)"; do
        rm -rf "$u/layout" "$u/oci"
        mkdir -p "$u/layout" "$u/oci"
        tar -xf "$image" -C "$u/layout"
        for blob in "$u"/layout/blobs/sha256/*; do
            [ "$(head -c 2 "$blob" | od -An -tx1 | tr -d ' ')" = 1f8b ] || continue
            layer=$u/oci/blobs/sha256/$(basename "$blob")
            mkdir -p "$layer" && tar -xzf "$blob" -C "$layer"
        done
        sbom_matches "$image.spdx.json" "$u/oci" || { echo "$image" >&2; return 1; }
    done
    # A file that differs from what the SBOM says fails the check.
    f=$(find "$u/tar" -type f -name install.sh | head -n 1)
    echo '# altered' >>"$f"
    if sbom_matches "$tb.spdx.json" "$u/tar" 2>/dev/null; then
        echo "an altered install.sh still matched the SBOM" >&2
        return 1
    fi
}

# The Go build information an SBOM gives for each Go program is what
# `go version -m` prints for the same file (Debian's real kubectl and CNI
# plugins here).
test_sbom_go_build_info_is_what_go_reports() {
    u=$TMP/go-programs
    n=0
    for deb in "$KD_DIST"/kubectl_*.deb "$KD_DIST"/kubernetes-cni_*.deb; do
        rm -rf "$u" && mkdir -p "$u" && dpkg-deb -x "$deb" "$u"
        # File name and Go package id of each program the SBOM describes.
        jq -r '. as $d | .relationships[]
            | select(.relationshipType == "GENERATED_FROM" and (.relatedSpdxElement | startswith("SPDXRef-Go-")))
            | . as $r | ($d.files[] | select(.SPDXID == $r.spdxElementId) | .fileName) + " " + .relatedSpdxElement' \
            "$deb.spdx.json" >"$TMP/programs"
        while read -r file id; do
            jq -j --arg id "$id" '.packages[] | select(.SPDXID == $id) | .comment' "$deb.spdx.json" |
                sed 1d >"$TMP/sbom-go"
            go version -m "$u/$file" | sed "1s|^.*: ||" >"$TMP/go-says"
            diff -u "$TMP/go-says" "$TMP/sbom-go" >&2 || { echo "$deb: $file" >&2; return 1; }
            n=$((n + 1))
        done <"$TMP/programs"
    done
    [ "$n" -ge 2 ] || { echo "only $n Go programs compared" >&2; return 1; }
    echo "$n Go programs: the SBOMs say what go version -m says"
}

# provenance_verifies DIR : every subject of DIR's provenance is a file of
# DIR with the digest the statement gives.
provenance_verifies() {
    jq -r '.subject[] | .digest.sha256 + "  " + .name' "$1"/kubedist-*.intoto.json >"$TMP/subjects"
    (cd "$1" && sha256sum --quiet --strict -c "$TMP/subjects")
}

test_provenance_names_every_artifact_and_input() {
    prov=$(kd_one "$KD_DIST"/kubedist-*.intoto.json)
    name=$(basename "$prov")
    assert_eq "$(jq -r ._type "$prov") $(jq -r .predicateType "$prov")" \
        "https://in-toto.io/Statement/v1 https://slsa.dev/provenance/v1" "statement type"
    # The subjects are SHA256SUMS without the statement itself.
    grep -v "  $name\$" "$KD_DIST/SHA256SUMS" | sort >"$TMP/listed"
    jq -r '.subject[] | .digest.sha256 + "  " + .name' "$prov" | sort >"$TMP/subjects-sorted"
    diff -u "$TMP/listed" "$TMP/subjects-sorted" >&2
    provenance_verifies "$KD_DIST"
    # Materials: Cargo.lock as built, every upstream input by its digest.
    lock=$(jq -r '.predicate.buildDefinition.resolvedDependencies[] | select(.name == "Cargo.lock") | .digest.sha256' "$prov")
    assert_eq "$lock" "$(sha256sum "$KD_REPO/Cargo.lock" | cut -d ' ' -f 1)" "Cargo.lock's digest"
    for sum in "$FIXTURES"/kubernetes/*/bin/linux/amd64/kubectl.sha256 "$FIXTURES"/cni-plugins/*/*amd64*.sha256; do
        d=$(cut -d ' ' -f 1 "$sum")
        jq -e --arg d "$d" '[.predicate.buildDefinition.resolvedDependencies[] | select(.digest.sha256 == $d)] | length == 1' \
            "$prov" >/dev/null || { echo "no material with digest $d ($sum)" >&2; return 1; }
    done
    # ... and each image the images bundle holds, by its manifest's digest.
    bundle=$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)
    for d in $(tar -xOf "$bundle" index.json | jq -r '.manifests[].digest'); do
        jq -e --arg d "${d#sha256:}" '[.predicate.buildDefinition.resolvedDependencies[] | select(.digest.sha256 == $d)] | length == 1' \
            "$prov" >/dev/null || { echo "no material for the image $d" >&2; return 1; }
    done
    # A changed artifact no longer matches its subject.
    copy=$TMP/changed
    rm -rf "$copy" && mkdir -p "$copy"
    cp "$prov" "$KD_DIST"/*.deb "$KD_DIST"/*.rpm "$KD_DIST"/*.raw "$KD_DIST"/*.tar.gz "$KD_DIST"/*.spdx.json \
        "$KD_DIST"/*.yaml "$KD_DIST"/*.oci.tar "$copy/"
    cp -r "$KD_DIST"/*.oci "$copy/"
    provenance_verifies "$copy"
    printf 'x' >>"$(kd_one "$copy"/kubelet_*_amd64.deb)"
    if provenance_verifies "$copy" 2>/dev/null; then
        echo "a changed kubelet deb still verified against the provenance" >&2
        return 1
    fi
}

test_arm64_artifacts_run_under_qemu() {
    # The fixtures without this host's files: no amd64 program at hand.
    from=$TMP/arm64-from
    cp -al "$FIXTURES" "$from"
    find "$from" -depth -path '*amd64*' -exec rm -rf {} +
    dist_logged "$TMP/arm64.log" --from "$from" --arch arm64 --fast --out "$TMP/arm64"
    assert_grep "shell completions: no amd64 program of these versions at hand" "$TMP/arm64.log"
    out=$TMP/arm64
    assert_eq arm64 "$(dpkg-deb -f "$out"/kubelet_*_arm64.deb Architecture)" "deb Architecture"
    assert_eq aarch64 "$(rpm -qp --qf '%{ARCH}' "$out"/kubelet-*.aarch64.rpm)" "rpm arch"
    assert_file "$out/kubedist-$(dpkg-deb -f "$out"/kubelet_*_arm64.deb Version | cut -d - -f 1)-linux-arm64.tar.gz"
    x=$TMP/arm64-x
    mkdir -p "$x"
    dpkg-deb -x "$out"/kubelet_*_arm64.deb "$x"
    dpkg-deb -x "$out"/kubectl_*_arm64.deb "$x"
    readelf -h "$x/usr/bin/kubelet-wrapper" | grep -q 'Machine: *AArch64'
    # Static: no interpreter to look for inside the qemu process.
    if readelf -l "$x/usr/bin/kubelet-wrapper" | grep -q INTERP; then
        echo "arm64 kubelet-wrapper is dynamically linked" >&2
        return 1
    fi
    mkdir -p "$x/etc/default" "$x/var/lib/kubelet"
    echo 'KUBELET_EXTRA_ARGS="--node-ip=192.0.2.7"' >"$x/etc/default/kubelet"
    qemu-aarch64-static "$x/usr/bin/kubelet-wrapper" --root "$x" --family deb --print >"$TMP/print.json"
    grep -q '"--node-ip=192.0.2.7"' "$TMP/print.json"
    # Debian's real arm64 kubectl.
    qemu-aarch64-static "$x/usr/bin/kubectl" version --client 2>&1 | grep -q 'Client Version'
    # With no amd64 program at hand, the arm64 kubectl wrote its completions
    # under qemu-aarch64-static: the same bytes as amd64's kubectl of the
    # same version wrote for release N. Which is why a run without the
    # host's architecture has the host's programs write them where they
    # are at hand (the ppc64le and s390x test below).
    a=$(amd64_kubectl)
    for f in /usr/share/bash-completion/completions/kubectl /usr/share/zsh/vendor-completions/_kubectl; do
        assert_file "$x$f"
        cmp "$a$f" "$x$f"
    done
    # The installer image: an arm64 image whose shell is Debian's arm64 busybox.
    image=$(echo "$out"/kubedist-installer-*.oci.tar)
    assert_eq arm64 "$(skopeo inspect "oci-archive:$image" | jq -r .Architecture)" "image architecture"
    ref=$(jq -r '.manifests[0].annotations."org.opencontainers.image.ref.name"' "${image%.tar}/index.json")
    umoci unpack --image "${image%.tar}:$ref" "$TMP/arm64-image"
    readelf -h "$TMP/arm64-image/rootfs/bin/busybox" | grep -q 'Machine: *AArch64'
    assert_eq ok "$(qemu-aarch64-static "$TMP/arm64-image/rootfs/bin/busybox" sh -c 'echo ok')" "arm64 busybox"
}

# elf_machines DIR : "Machine/Data" of every ELF file under DIR, one line
# per distinct pair (the Data line says the byte order).
elf_machines() {
    find "$1" -type f | while read -r f; do
        [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = 177ELF ] || continue
        readelf -h "$f" | sed -n 's/^ *Machine: *//p; s/^ *Data: *//p' | tr '\n' / | sed 's|/$|\n|'
    done | sort -u
}

# ppc64le (little-endian) and s390x (big-endian), architectures no
# developer machine runs: every package's fields and every ELF file inside
# it name the architecture, and the programs run under qemu-user. (riscv64,
# which only a build from source serves, is checked the same way on its
# release from source: t-source.)
test_ppc64le_and_s390x_artifacts_run_under_qemu() {
    dist_logged "$TMP/other.log" --fixtures --arch ppc64le,s390x --fast --out "$TMP/other"
    # The fixtures hold amd64's files too: amd64's real kubectl wrote the
    # completions of s390x's (real, the same version), none under qemu.
    assert_grep "shell completions: written by this host's (amd64) files in" "$TMP/other.log"
    out=$TMP/other
    for spec in "ppc64le ppc64el ppc64le ppc64-le PowerPC64 little qemu-ppc64le-static" \
        "s390x s390x s390x s390x IBM_S/390 big qemu-s390x-static"; do
        # shellcheck disable=SC2086 # one word per field
        set -- $spec
        arch=$1 debarch=$2 rpmarch=$3 sdarch=$4 machine=$(echo "$5" | tr _ ' ') order=$6 qemu=$7
        x=$TMP/other-$arch
        mkdir -p "$x/deb" "$x/rpm"
        for p in kubelet kubeadm kubectl kubernetes-cni cri-tools; do
            deb=$(echo "$out/${p}"_*_"$debarch".deb)
            rpm=$(echo "$out/${p}"-*."$rpmarch".rpm)
            assert_eq "$debarch" "$(dpkg-deb -f "$deb" Architecture)" "$p deb Architecture"
            assert_eq "$rpmarch" "$(rpm -qp --qf '%{ARCH}' "$rpm")" "$p rpm arch"
            dpkg-deb -x "$deb" "$x/deb"
            (cd "$x/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
        done
        for tree in deb rpm; do
            assert_eq "2's complement, $order endian/$machine" "$(elf_machines "$x/$tree")" "$arch $tree ELF files"
        done
        assert_file "$out/kubedist-1.37.2-linux-$arch.tar.gz"
        assert_file "$out/kubernetes-v1.37.2-$sdarch.raw"
        w=$x/deb/usr/bin/kubelet-wrapper
        if readelf -l "$w" | grep -q INTERP; then
            echo "$arch kubelet-wrapper is dynamically linked" >&2
            return 1
        fi
        mkdir -p "$x/deb/etc/default" "$x/deb/var/lib/kubelet"
        echo 'KUBELET_EXTRA_ARGS="--node-ip=192.0.2.7"' >"$x/deb/etc/default/kubelet"
        "$qemu" "$w" --root "$x/deb" --family deb --print >"$TMP/print-$arch.json"
        grep -q '"--node-ip=192.0.2.7"' "$TMP/print-$arch.json"
    done
    # Debian's real s390x kubectl; Debian builds none for ppc64el, so that
    # is a stand-in and its package says so.
    qemu-s390x-static "$TMP/other-s390x/deb/usr/bin/kubectl" version --client 2>&1 | grep -q 'Client Version'
    a=$(amd64_kubectl)
    cmp "$a/usr/share/bash-completion/completions/kubectl" \
        "$TMP/other-s390x/deb/usr/share/bash-completion/completions/kubectl"
    case $(dpkg-deb -f "$out"/kubectl_*_ppc64el.deb Description) in
    *"TEST BUILD"*) ;;
    *) echo "the ppc64el kubectl package does not say it is a test build" >&2; return 1 ;;
    esac
    # One image index with both architectures, each with its own busybox.
    image=${out}/$(cd "$out" && echo kubedist-installer-*.oci)
    blob() { echo "$image/blobs/sha256/${1#sha256:}"; }
    index=$(blob "$(jq -r '.manifests[0].digest' "$image/index.json")")
    assert_eq "ppc64le s390x" "$(jq -r '[.manifests[].platform.architecture] | sort | join(" ")' "$index")" "image index"
    for spec in "ppc64le PowerPC64 qemu-ppc64le-static" "s390x IBM_S/390 qemu-s390x-static"; do
        # shellcheck disable=SC2086 # one word per field
        set -- $spec
        manifest=$(blob "$(jq -r --arg a "$1" '.manifests[] | select(.platform.architecture == $a) | .digest' "$index")")
        # The first layer is the shell.
        shell=$TMP/other-shell-$1
        mkdir -p "$shell"
        tar -xzf "$(blob "$(jq -r '.layers[0].digest' "$manifest")")" -C "$shell" bin/busybox
        readelf -h "$shell/bin/busybox" | grep -q "Machine: *$(echo "$2" | tr _ ' ')"
        assert_eq ok "$("$3" "$shell/bin/busybox" sh -c 'echo ok')" "$1 busybox"
    done
}

# bad_input NAME HOW : a copy of the fixtures broken by HOW (a shell
# function), then dist into an output directory holding an earlier release.
# dist must fail with one `error:` line naming NAME and leave the directory
# and its parent as they were.
bad_input() {
    broken=$TMP/broken-$2
    rm -rf "$broken"
    cp -a "$FIXTURES" "$broken"
    "$2" "$broken"
    parent=$TMP/parent-$2
    out=$parent/out
    rm -rf "$parent"
    mkdir "$parent"
    cp -a "$KD_DIST_PREV" "$out"
    kd_listing "$out" >"$TMP/before.list"
    ls -a "$parent" >"$TMP/parent.before"
    if dist --arch amd64 --from "$broken" --out "$out" >"$TMP/stdout" 2>"$TMP/stderr"; then
        echo "dist succeeded on broken inputs ($2)" >&2
        return 1
    fi
    assert_one_error "$TMP/stderr" "$1"
    kd_listing "$out" >"$TMP/after.list"
    assert_eq "$(cat "$TMP/before.list")" "$(cat "$TMP/after.list")" "output directory"
    ls -a "$parent" >"$TMP/parent.after"
    assert_eq "$(cat "$TMP/parent.before")" "$(cat "$TMP/parent.after")" "output's parent directory"
}

kubelet_path() { echo "$1/kubernetes/v1.37.2/bin/linux/amd64/kubelet"; }
tamper_kubelet() { printf 'x' >>"$(kubelet_path "$1")"; }
drop_crictl() { rm "$1"/cri-tools/v*/crictl-*-linux-amd64.tar.gz; }
wrong_sum() {
    f=$(kubelet_path "$1").sha256
    echo "0000000000000000000000000000000000000000000000000000000000000000  kubelet" >"$f"
}

test_tampered_input_is_refused_and_output_untouched() { bad_input "linux/amd64/kubelet" tamper_kubelet; }
test_missing_input_is_refused_and_output_untouched() { bad_input "crictl-" drop_crictl; }
test_wrong_checksum_is_refused_and_output_untouched() { bad_input "linux/amd64/kubelet" wrong_sum; }

# A disk that fills part way through a run: dist fails with one `error:`
# line naming what it could not write, the output directory (holding the
# release before) and its parent are as they were, and once there is room
# the next run writes release N byte for byte.
test_a_full_disk_leaves_the_output_as_it_was_and_the_next_run_completes() {
    parent=$TMP/full
    mkdir -p "$parent"
    # Room for release N-1 and about half of release N.
    size=$(( $(du -sm "$KD_DIST_PREV" | cut -f 1) + $(du -sm "$KD_DIST" | cut -f 1) / 2 ))
    mount -t tmpfs -o "size=${size}m" kd-full "$parent"
    trap 'umount "$parent"' EXIT
    out=$parent/out
    cp -a "$KD_DIST_PREV" "$out"
    kd_listing "$out" >"$TMP/full-before.list"
    ls -a "$parent" >"$TMP/full-parent.before"
    if dist --fixtures --revision 2 --arch amd64 --out "$out" >"$TMP/full.out" 2>"$TMP/full.err"; then
        echo "dist succeeded on a full disk (${size} MiB)" >&2
        return 1
    fi
    grep '^error:' "$TMP/full.err"
    assert_one_error "$TMP/full.err" "$parent/" "No space left on device"
    kd_listing "$out" >"$TMP/full-after.list"
    diff -u "$TMP/full-before.list" "$TMP/full-after.list"
    ls -a "$parent" >"$TMP/full-parent.after"
    diff -u "$TMP/full-parent.before" "$TMP/full-parent.after"
    echo "== room again: the next run completes"
    mount -o "remount,size=$((size * 4))m" "$parent"
    dist --fixtures --revision 2 --arch amd64 --out "$out" >"$TMP/full2.out" 2>&1 ||
        { tail -n 20 "$TMP/full2.out"; return 1; }
    # Every artifact of release N, byte for byte, beside N-1's (dist adds to
    # its output directory; the provenance names both, so it differs).
    missing=$(grep -v '\.intoto\.json$' "$KD_DIST/SHA256SUMS" | grep -vxF -f "$out/SHA256SUMS" || true)
    assert_eq "" "$missing" "release N's artifacts missing or different after the second run"
    (cd "$out" && sha256sum --quiet -c SHA256SUMS)
}

kd_test test_new_epoch_compiles_nothing
kd_test test_sums_verify_and_use_upstream_names
kd_test test_artifacts_are_the_recorded_bytes
kd_test test_sboms_validate_and_meet_the_ntia_minimum
kd_test test_sbom_file_digests_are_the_unpacked_artifacts
kd_test test_sbom_go_build_info_is_what_go_reports
kd_test test_provenance_names_every_artifact_and_input
kd_test test_tampered_input_is_refused_and_output_untouched
kd_test test_missing_input_is_refused_and_output_untouched
kd_test test_wrong_checksum_is_refused_and_output_untouched
kd_test test_a_full_disk_leaves_the_output_as_it_was_and_the_next_run_completes
kd_test test_arm64_artifacts_run_under_qemu
kd_test test_ppc64le_and_s390x_artifacts_run_under_qemu
kd_test test_reproducible_from_another_checkout
kd_summary
