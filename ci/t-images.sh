#!/bin/sh
# The images bundle of air-gapped nodes (kubedist-images-<version>-<arch>.oci.tar)
# and its import step (kubedist-images), with the real runtimes: Debian's
# containerd, started on its own in this suite's namespaces with a private
# root and socket, and containers-storage (what CRI-O reads) through skopeo,
# looked at with podman. The images are the fixtures' stand-ins under the
# names pkg/images.toml gives (labelled test builds); the bundle holds them
# as a registry would serve them.
#
#   - dist writes one bundle per architecture, byte for byte the same twice,
#     naming every image of pkg/images.toml; skopeo reads each image of it;
#     its SBOM relates every file of a layer to the images holding the layer
#   - dist --worker-images writes a worker's bundle (...-<arch>-worker): the
#     images pkg/images.toml says a worker runs, each the same image as in
#     the whole bundle; install.sh --images installs it beside the whole one
#   - kubedist-images imports every image into containerd's k8s.io
#     namespace at the bundle's digest with no network; the pause image runs
#     (ctr run); a second run imports nothing; a differing sandbox image is
#     named with the fix, a matching one is not, in containerd 1's layout and
#     in containerd 2's (pinned_images.sandbox)
#   - a changed bundle, or one SHA256SUMS does not list, imports nothing
#   - for CRI-O, every image lands in containers-storage at its digest
#   - the whole air-gapped path in a bookworm root with containerd and no
#     network: install.sh installs the node, install.sh --images the bundle
#     and imports it into the running containerd; a tarball of dist
#     --carry-images does both in one run (its bundle the artifact's bytes,
#     a changed one refused with nothing written), and the installer image
#     carries the same bundle in a layer of its own
#   - a real registry (Debian's docker-registry on 127.0.0.1) holding the
#     stand-ins: `fetch --images --image-mirror` pulls them into the cache
#     (a second fetch asks the registry nothing), dist bundles them byte for
#     byte as from the layout; a tag moved to other content, a blob changed
#     or cut short in the registry's storage and an index whose arm64 entry
#     is an amd64 image each fail in one line and leave the cache as it was
#
# Wall time: about 1 min on 2 cores with the base tarball cached.

# shellcheck disable=SC2016 # $... in single quotes is for the inner shell
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require unshare tar sha256sum jq skopeo podman containerd ctr runc docker-registry curl openssl python3 cargo
kd_require_dist

kd_own_mount_namespace "$0" "$@"

BUNDLE=$(kd_one "$KD_DIST"/kubedist-images-*-amd64.oci.tar)
TARBALL=$(kd_one "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)
IMPORT=$KD_REPO/installer/images/kubedist-images

OT=$(kd_suite_dir)
trap 'ctd_stop_all; kd_cleanup' EXIT

# The references pkg/images.toml lists, sorted.
expected_refs() {
	sed -n 's/^reference = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml" | sort
}

# Those of them a worker runs (`worker = true`), sorted.
worker_refs() {
	awk '/^reference = / { ref = $3; gsub(/"/, "", ref) } /^worker = true$/ { print ref }' \
		"$KD_REPO/pkg/images.toml" | sort
}

# The worker's bundle of the fixtures for amd64 (dist --worker-images).
worker_bundle() {
	if ! ls "$OT"/w/kubedist-images-*-amd64-worker.oci.tar >/dev/null 2>&1; then
		(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures --arch amd64 \
			--formats images --worker-images --out "$OT/w") >"$OT/dist-worker.log" 2>&1 ||
			{ cat "$OT/dist-worker.log" >&2; return 1; }
	fi
	kd_one "$OT"/w/kubedist-images-*-amd64-worker.oci.tar
}

# "<digest> <reference>" of every image of bundle $1, sorted by reference.
bundle_images() {
	tar -xOf "$1" index.json |
		jq -r '.manifests[] | .digest + " " + .annotations["io.containerd.image.name"]' | sort -k2
}

# A directory as install.sh leaves it: the bundle (default: $BUNDLE) and
# its SHA256SUMS.
images_dir() { kd_bundle_dir "$1" "${2:-$BUNDLE}"; } # DIR [BUNDLE]

# shellcheck source=ci/containerd.sh
. "$KD_REPO/ci/containerd.sh"

# The arm64 bundle of the fixtures (the first test's, or built now).
arm64_bundle() {
	if ! ls "$OT"/a/kubedist-images-*-arm64.oci.tar >/dev/null 2>&1; then
		(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures --arch arm64 \
			--formats images --out "$OT/a") >"$OT/dist-arm64.log" 2>&1 ||
			{ cat "$OT/dist-arm64.log" >&2; return 1; }
	fi
	kd_one "$OT"/a/kubedist-images-*-arm64.oci.tar
}

test_one_bundle_per_architecture_reproducible_naming_every_image() {
	for run in a b; do
		(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures --arch amd64,arm64 \
			--formats images --no-cache --out "$OT/$run") >"$OT/dist-$run.log" 2>&1 ||
			{ cat "$OT/dist-$run.log"; return 1; }
	done
	for arch in amd64 arm64; do
		b=$(kd_one "$OT"/a/kubedist-images-*-$arch.oci.tar)
		cmp "$b" "$OT/b/${b##*/}"
		grep -q "  ${b##*/}\$" "$OT/a/SHA256SUMS"
		echo "== $arch: every image of pkg/images.toml, under its name, for $arch"
		bundle_images "$b" | cut -d ' ' -f 2 >"$OT/refs"
		expected_refs | diff -u - "$OT/refs"
		assert_eq "$arch" "$(tar -xOf "$b" index.json | jq -r '[.manifests[].platform.architecture] | unique | join(" ")')" "platforms"
		while read -r ref; do
			skopeo inspect "oci-archive:$b:$ref" >"$OT/inspect.json"
			assert_eq "$arch" "$(jq -r .Architecture "$OT/inspect.json")" "architecture of $ref"
			assert_eq true "$(jq -r '.Labels."io.kubedist.test-build"' "$OT/inspect.json")" "$ref is labelled a test build"
		done <"$OT/refs"
		echo "== $arch: its SBOM says which image each file of a layer came from"
		tar -xOf "$b" index.json | jq -r '.manifests[] | .digest + " " + .annotations["io.containerd.image.name"]' |
			while read -r digest ref; do
				tar -xOf "$b" "blobs/sha256/${digest#sha256:}" |
					jq -r --arg ref "$ref" '.layers[].digest | sub("sha256:"; "") + " " + $ref'
			done | sort >"$OT/layers-expected"
		jq -r '(.files | map({key: .SPDXID, value: .fileName}) | from_entries) as $files
			| (.packages | map({key: .SPDXID, value: .name}) | from_entries) as $packages
			| .relationships[] | select(.relationshipType == "GENERATED_FROM")
			| ($files[.spdxElementId] | split("/")[3]) + " " + $packages[.relatedSpdxElement]' \
			"$b.spdx.json" | sort -u >"$OT/layers-sbom"
		diff -u "$OT/layers-expected" "$OT/layers-sbom"
		assert_eq "$(jq '.files | length' "$b.spdx.json")" \
			"$(jq '[.relationships[] | select(.relationshipType == "GENERATED_FROM") | .spdxElementId] | unique | length' "$b.spdx.json")" \
			"files with an origin"
	done
}

test_a_workers_bundle_holds_the_images_a_worker_runs() {
	w=$(worker_bundle)
	grep -q "  ${w##*/}\$" "$OT/w/SHA256SUMS"
	echo "== ${w##*/}: what pkg/images.toml says a worker runs"
	worker_refs >"$OT/worker-refs"
	cat "$OT/worker-refs"
	assert_eq 3 "$(wc -l <"$OT/worker-refs")" "images a worker runs"
	bundle_images "$w" >"$OT/worker-images"
	cut -d ' ' -f 2 "$OT/worker-images" | diff -u "$OT/worker-refs" -
	# Each the same image as the whole bundle's, at the same digest.
	bundle_images "$BUNDLE" | grep -Ff "$OT/worker-refs" | diff -u - "$OT/worker-images"
	assert_eq "$(jq '.files | length' "$w.spdx.json")" \
		"$(jq '[.relationships[] | select(.relationshipType == "GENERATED_FROM") | .spdxElementId] | unique | length' "$w.spdx.json")" \
		"files with an origin"
	echo "== --worker-images without an images bundle: one line, nothing written"
	if (cd "$KD_REPO" && cargo xtask dist --fixtures --arch amd64 --formats deb --worker-images \
		--out "$OT/none") >"$OT/none.out" 2>"$OT/none.err"; then
		return 1
	fi
	cat "$OT/none.err"
	assert_grep '^error: --worker-images: no images bundle in this run' "$OT/none.err"
	[ ! -e "$OT/none" ]
}

test_containerd_imports_every_image_offline_and_the_pause_image_runs() {
	images_dir "$OT/img"
	# No network from here on: containerd, the import and the container.
	unshare --net sh -eu -c '
		. "$1"
		ctd_start "$OT/ctd" registry.k8s.io/pause:3.6
		"$IMPORT" --dir "$OT/img" --containerd-address "$OT/ctd/containerd.sock" \
			--containerd-config "$OT/ctd/config.toml" | tee "$OT/first"
		containerd_images "$OT/ctd" >"$OT/held"
		pause=$(sed -n "s/^reference = \"\(.*\/pause:.*\)\"$/\1/p" "$KD_REPO/pkg/images.toml")
		ctr_in "$OT/ctd" run --rm "$pause" kd-pause >"$OT/ran" 2>&1
		"$IMPORT" --dir "$OT/img" --containerd-address "$OT/ctd/containerd.sock" \
			--containerd-config "$OT/ctd/config.toml" >"$OT/second"
		ctd_stop_all
	' sh "$OT/functions"
	echo "== containerd holds every image at the bundle's digest"
	bundle_images "$BUNDLE" | diff -u - "$OT/held"
	assert_eq "$(expected_refs | wc -l)" "$(grep -c ': imported (sha256:' "$OT/first")" "images imported"
	echo "== the pause image ran: $(cat "$OT/ran")"
	grep -q 'pause version: kubedist recorder stand-in' "$OT/ran"
	echo "== the second run imports nothing"
	cat "$OT/second"
	assert_eq 0 "$(grep -c ': imported ' "$OT/second" || true)" "images imported again"
	assert_eq "$(expected_refs | wc -l)" "$(grep -c ': present (sha256:' "$OT/second")" "images present"
	echo "== the differing sandbox image is named, with the fix"
	grep -q 'sandbox image is registry.k8s.io/pause:3.6, the bundle.s is registry.k8s.io/pause:.*: set sandbox_image' "$OT/first"
}

test_a_matching_sandbox_image_gets_no_note() {
	images_dir "$OT/img2"
	pause=$(expected_refs | grep /pause:)
	unshare --net sh -eu -c '
		. "$1"
		ctd_start "$OT/ctd2" "$2"
		"$IMPORT" --dir "$OT/img2" --containerd-address "$OT/ctd2/containerd.sock" \
			--containerd-config "$OT/ctd2/config.toml" >"$OT/out2"
		ctd_stop_all
	' sh "$OT/functions" "$pause"
	cat "$OT/out2"
	if grep -q 'note:' "$OT/out2"; then echo "a note although the sandbox image is $pause" >&2; return 1; fi

	echo "== containerd 2's layout (pinned_images.sandbox, single quotes), read from a stand-in"
	# Debian ships containerd 1.x only: a stand-in answers `containerd config
	# dump` in containerd 2's layout; the import itself talks to the real one.
	mkdir -p "$OT/ctd2-bin"
	for sandbox in registry.k8s.io/pause:3.8 "$pause"; do
		cat >"$OT/ctd2-bin/containerd" <<STANDIN
#!/bin/sh
# stand-in for containerd 2's \`containerd config dump\`
cat <<'DUMP'
version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$sandbox'
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
DUMP
STANDIN
		chmod 0755 "$OT/ctd2-bin/containerd"
		unshare --net sh -eu -c '
			. "$1"
			ctd_start "$OT/ctd3" registry.k8s.io/pause:3.6
			PATH="$OT/ctd2-bin:$PATH" "$IMPORT" --dir "$OT/img2" \
				--containerd-address "$OT/ctd3/containerd.sock" >"$OT/out3"
			ctd_stop_all
		' sh "$OT/functions"
		cat "$OT/out3"
		if [ "$sandbox" = "$pause" ]; then
			assert_eq 0 "$(grep -c 'note:' "$OT/out3" || true)" "notes when containerd 2 pins $pause"
		else
			assert_grep "containerd's sandbox image is $sandbox, the bundle's is $pause: set sandbox = '$pause' under \\[plugins.'io.containerd.cri.v1.images'.pinned_images\\]" "$OT/out3"
		fi
	done
}

test_a_changed_or_unlisted_bundle_imports_nothing() {
	images_dir "$OT/bad"
	b=$(kd_one "$OT"/bad/*.oci.tar)
	printf 'x' | dd of="$b" bs=1 seek=2000 conv=notrunc 2>/dev/null
	images_dir "$OT/unlisted"
	: >"$OT/unlisted/SHA256SUMS"
	# A bundle for another architecture, listed with its true sum.
	images_dir "$OT/foreign" "$(arm64_bundle)"
	for dir in bad unlisted foreign; do
		set +e
		unshare --net sh -eu -c '
			. "$1"
			ctd_start "$OT/ctd-$2" registry.k8s.io/pause:3.6
			rc=0
			"$IMPORT" --dir "$OT/$2" --containerd-address "$OT/ctd-$2/containerd.sock" 2>"$OT/err-$2" || rc=$?
			containerd_images "$OT/ctd-$2" >"$OT/held-$2"
			ctd_stop_all
			exit "$rc"
		' sh "$OT/functions" "$dir"
		rc=$?
		set -e
		cat "$OT/err-$dir"
		assert_eq 1 "$rc" "exit status for the $dir bundle"
		assert_eq 1 "$(wc -l <"$OT/err-$dir")" "one line for the $dir bundle"
		grep -q "$OT/$dir/kubedist-images-" "$OT/err-$dir"
		assert_eq "" "$(cat "$OT/held-$dir")" "images imported from the $dir bundle"
	done
	grep -q 'its images are for arm64, this node is amd64' "$OT/err-foreign"
}

test_cri_o_storage_holds_every_image_at_its_digest() {
	images_dir "$OT/img3"
	cat >"$OT/storage.conf" <<TOML
[storage]
driver = "vfs"
graphroot = "$OT/storage"
runroot = "$OT/storage-run"
TOML
	export CONTAINERS_STORAGE_CONF="$OT/storage.conf"
	unshare --net "$IMPORT" --dir "$OT/img3" --runtime cri-o | tee "$OT/crio"
	podman images --format '{{.Digest}} {{.Repository}}:{{.Tag}}' | sort -k2 >"$OT/podman"
	bundle_images "$BUNDLE" | diff -u - "$OT/podman"
	# CRI-O pins by its configuration: the note names every image, which
	# no configuration here lists.
	note=$(grep 'note: CRI-O.s image garbage collection' "$OT/crio")
	bundle_images "$BUNDLE" | while read -r _ ref; do
		case $note in *"\"$ref\""*) ;; *) echo "assertion failed: the pinning note does not name $ref: $note" >&2; exit 1 ;; esac
	done
	unshare --net "$IMPORT" --dir "$OT/img3" --runtime cri-o >"$OT/crio2"
	assert_eq 0 "$(grep -c ': imported ' "$OT/crio2" || true)" "images imported again"
}

# A site's own repository, as kubeadm's imageRepository names it: no
# registry answers this name.
REPO=registry.example.internal/k8s

# "<digest> <reference>" of every image of bundle $1 under its own name and
# under REPO's as kubeadm names images there, sorted by reference.
bundle_images_with_repo() { bundle_images "$1" | kd_with_repository_names "$REPO" | sort -k2; }

test_an_image_repository_names_every_image_as_kubeadm_does() {
	images_dir "$OT/img4"
	printf '# the site registry\nimage-repository = %s\n' "$REPO" >"$OT/images.conf"
	unshare --net sh -eu -c '
		. "$1"
		ctd_start "$OT/ctd4" registry.k8s.io/pause:3.6
		"$IMPORT" --dir "$OT/img4" --config "$OT/images.conf" --containerd-address "$OT/ctd4/containerd.sock" \
			--containerd-config "$OT/ctd4/config.toml" >"$OT/repo1"
		containerd_images "$OT/ctd4" >"$OT/held4"
		ctr_in "$OT/ctd4" images ls | awk "NR > 1 && \$1 !~ /^sha256:/ && \$NF !~ /io.cri-containerd.pinned=pinned/" >"$OT/unpinned4"
		"$IMPORT" --dir "$OT/img4" --config "$OT/images.conf" --containerd-address "$OT/ctd4/containerd.sock" \
			--containerd-config "$OT/ctd4/config.toml" >"$OT/repo2"
		ctd_stop_all
	' sh "$OT/functions"
	cat "$OT/repo1"
	echo "== containerd holds every image under both names, at the bundle's digest, pinned"
	bundle_images_with_repo "$BUNDLE" | diff -u - "$OT/held4"
	assert_empty "$OT/unpinned4" "images without the pinned label (above)"
	assert_eq "$(expected_refs | wc -l)" "$(grep -c "^kubedist-images: $REPO/.*: named (sha256:" "$OT/repo1")" "images named under $REPO"
	echo "== the sandbox note names the repository's pause"
	assert_grep "sandbox image is registry.k8s.io/pause:3.6, the bundle.s is $REPO/pause:" "$OT/repo1"
	echo "== a second run names nothing again"
	assert_eq 0 "$(grep -c ': named \|: imported ' "$OT/repo2" || true)" "images imported or named again"

	echo "== CRI-O: containers-storage holds both names at the bundle's digest"
	cat >"$OT/storage5.conf" <<TOML
[storage]
driver = "vfs"
graphroot = "$OT/storage5"
runroot = "$OT/storage5-run"
TOML
	CONTAINERS_STORAGE_CONF="$OT/storage5.conf" unshare --net "$IMPORT" --dir "$OT/img4" --runtime cri-o \
		--image-repository "$REPO" >"$OT/crio5"
	CONTAINERS_STORAGE_CONF="$OT/storage5.conf" podman images --format '{{.Digest}} {{.Repository}}:{{.Tag}}' |
		sort -k2 >"$OT/podman5"
	bundle_images_with_repo "$BUNDLE" | diff -u - "$OT/podman5"

	echo "== a repository kubeadm could not be given, or a line the file may not have: one line, nothing imported"
	for conf in "image-repository = Registry.example/k8s:v1" "image-repository =" "image-repository = $REPO
imageRepository: $REPO"; do
		printf '%s\n' "$conf" >"$OT/bad.conf"
		if "$IMPORT" --dir "$OT/img4" --config "$OT/bad.conf" --runtime containerd \
			--containerd-address "$OT/none.sock" >"$OT/bad.out" 2>"$OT/bad.err"; then
			echo "assertion failed: a bad $OT/bad.conf was taken" >&2
			return 1
		fi
		cat "$OT/bad.err"
		assert_eq 1 "$(wc -l <"$OT/bad.err")" "lines of the error"
		assert_grep "^kubedist-images: $OT/bad.conf: .*nothing was imported\$" "$OT/bad.err"
		assert_empty "$OT/bad.out" "output before the refusal"
	done
}

test_air_gapped_host_installs_the_node_and_its_images() {
	root=$(kd_new_root "$(kd_base_tarball images containerd)")
	mkdir -p "$root/srv/kd" "$root/srv/dist"
	tar -xzf "$TARBALL" -C "$root/srv/kd"
	cp "$BUNDLE" "$root/srv/dist/"
	grep "  ${BUNDLE##*/}\$" "$KD_DIST/SHA256SUMS" >"$root/srv/dist/SHA256SUMS"
	mkdir -p "$root/srv/bad" "$root/srv/arm64"
	cp "$BUNDLE" "$root/srv/bad/"
	sed 's/^./0/' "$root/srv/dist/SHA256SUMS" >"$root/srv/bad/SHA256SUMS"
	arm=$(arm64_bundle)
	cp "$arm" "$root/srv/arm64/"
	grep "  ${arm##*/}\$" "$OT/a/SHA256SUMS" >"$root/srv/arm64/SHA256SUMS"
	mkdir -p "$root/srv/worker"
	wb=$(worker_bundle)
	cp "$wb" "$root/srv/worker/"
	grep "  ${wb##*/}\$" "$OT/w/SHA256SUMS" >"$root/srv/worker/SHA256SUMS"
	kd_script_offline "$root" <<'SCRIPT'
bundle=$(ls /srv/dist/*.oci.tar)
# "<digest> <reference>" of every image containerd holds, sorted.
held() { ctr -n k8s.io images ls | awk 'NR > 1 && $1 !~ /^sha256:/ { print $3 " " $1 }' | sort -k2; }
containerd >/var/log/containerd.log 2>&1 &
ctd=$!
i=0
until ctr version >/dev/null 2>&1; do i=$((i + 1)); [ $i -lt 100 ]; sleep 0.1; done
/srv/kd/kubedist-*/install.sh --init systemd --no-start
# A bundle its SHA256SUMS does not vouch for: refused, nothing written.
if /srv/kd/kubedist-*/install.sh --images /srv/bad/"${bundle##*/}" 2>/tmp/bad; then exit 1; fi
cat /tmp/bad
grep -q 'does not match' /tmp/bad
[ ! -e /var/lib/kubedist/images ]
/srv/kd/kubedist-*/install.sh --images "$bundle" | tee /tmp/install
held >/tmp/held
# The arm64 bundle, vouched for by its own SHA256SUMS, on this amd64 node:
# refused in one line before any write; the amd64 bundle stays.
before=$(cd /var/lib/kubedist/images && sha256sum ./*)
if /srv/kd/kubedist-*/install.sh --images /srv/arm64/kubedist-images-*-arm64.oci.tar >/tmp/arm.out 2>/tmp/arm; then exit 1; fi
cat /tmp/arm.out /tmp/arm
[ "$(wc -l </tmp/arm)" = 1 ] && grep -q 'its images are for arm64, this tarball.s programs for amd64; nothing was installed' /tmp/arm
[ "$(cd /var/lib/kubedist/images && sha256sum ./*)" = "$before" ]
# The site's repository: kept in kubedist-images' settings, which a later
# --images run keeps and uninstall removes.
/srv/kd/kubedist-*/install.sh --images "$bundle" --image-repository registry.example.internal/k8s | tee /tmp/repo
grep -qx 'image-repository = registry.example.internal/k8s' /etc/kubedist/images.conf
held >/tmp/held-repo
/srv/kd/kubedist-*/install.sh --images "$bundle" >/tmp/again
grep -qx 'image-repository = registry.example.internal/k8s' /etc/kubedist/images.conf
# A worker's bundle of the same release: installed beside the whole one,
# its images there already.
/srv/kd/kubedist-*/install.sh --images /srv/worker/kubedist-images-*-amd64-worker.oci.tar >/tmp/worker
ls /var/lib/kubedist/images >/tmp/bundles
/srv/kd/kubedist-*/install.sh uninstall >/tmp/uninstall
[ ! -e /etc/kubedist ]
kill "$ctd"
SCRIPT
	echo "== --image-repository: every image under the repository's name too"
	cat "$root/tmp/repo"
	bundle_images_with_repo "$BUNDLE" | diff -u - "$root/tmp/held-repo"
	assert_grep "install /etc/kubedist/images.conf" "$root/tmp/repo"
	cat "$root/tmp/held"
	bundle_images "$BUNDLE" | diff -u - "$root/tmp/held"
	grep -q 'install /var/lib/kubedist/images/kubedist-images-' "$root/tmp/install"
	grep -q 'kubedist-images: registry.k8s.io/pause:.*: imported' "$root/tmp/install"
	echo "== a worker's bundle beside the whole one"
	cat "$root/tmp/worker" "$root/tmp/bundles"
	assert_eq "$(printf '%s\n' SHA256SUMS "${BUNDLE##*/}" "$(basename "$(worker_bundle)")" | sort)" \
		"$(sort "$root/tmp/bundles")" "the bundles installed"
	assert_no_grep ': imported' "$root/tmp/worker"
	# Debian's containerd looks for the CNI plugins elsewhere: said once.
	assert_eq 1 "$(grep -c 'note: containerd looks for CNI plugins in /usr/lib/cni, kubernetes-cni installs them in /opt/cni/bin: set bin_dir = "/opt/cni/bin"' "$root/tmp/install")" \
		"notes on containerd's CNI directory"
}

test_a_tarball_carrying_the_bundle_installs_and_imports_it_offline() {
	(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures --arch amd64 \
		--formats tar,oci --carry-images --out "$OT/carry") >"$OT/carry.log" 2>&1 ||
		{ cat "$OT/carry.log"; return 1; }
	carrying=$(kd_one "$OT"/carry/kubedist-*-linux-amd64.tar.gz)
	root=$(kd_new_root "$(kd_base_tarball images containerd)")
	mkdir -p "$root/srv/kd" "$root/srv/bad"
	tar -xzf "$carrying" -C "$root/srv/kd"
	echo "== the tarball carries the bundle artifact, byte for byte"
	cmp "$root"/srv/kd/kubedist-*/images/"${BUNDLE##*/}" "$BUNDLE"
	# A copy whose carried bundle changed: refused before anything is written.
	tar -xzf "$carrying" -C "$root/srv/bad"
	printf 'x' >>"$(kd_one "$root"/srv/bad/kubedist-*/images/*.oci.tar)"
	kd_script_offline "$root" <<'SCRIPT'
containerd >/var/log/containerd.log 2>&1 &
ctd=$!
i=0
until ctr version >/dev/null 2>&1; do i=$((i + 1)); [ $i -lt 100 ]; sleep 0.1; done
if /srv/bad/kubedist-*/install.sh --init systemd --no-start 2>/tmp/bad; then exit 1; fi
cat /tmp/bad
grep -q 'images/kubedist-images-.*FAILED' /tmp/bad
[ ! -e /var/lib/kubedist ]
/srv/kd/kubedist-*/install.sh --init systemd --no-start | tee /tmp/install
ctr -n k8s.io images ls | awk 'NR > 1 && $1 !~ /^sha256:/ { print $3 " " $1 }' | sort -k2 >/tmp/held
/srv/kd/kubedist-*/install.sh --init systemd --no-start | tee /tmp/again
kill "$ctd"
SCRIPT
	echo "== one install.sh run: the node software, then the bundle, imported"
	bundle_images "$BUNDLE" | diff -u - "$root/tmp/held"
	assert_grep 'install /usr/bin/kubelet$' "$root/tmp/install"
	assert_grep 'install /var/lib/kubedist/images/kubedist-images-' "$root/tmp/install"
	assert_grep 'kubedist-images: registry.k8s.io/pause:.*: imported' "$root/tmp/install"
	assert_eq 2 "$(grep -c 'nothing to do' "$root/tmp/again")" "a second run's sets left unchanged"
	assert_eq 2 "$(awk -F '\t' '$1 == "images" && $2 == "file"' "$root/var/lib/kubedist/install.manifest" | wc -l)" \
		"the bundle and its SHA256SUMS recorded as the set images"

	echo "== the installer image carries the same bytes, in a layer of its own"
	img=$OT/carry-image
	mkdir -p "$img"
	tar -xf "$(kd_one "$OT"/carry/kubedist-installer-*.oci.tar)" -C "$img"
	manifest=$img/blobs/sha256/$(jq -r '.manifests[0].digest' "$img/index.json" | cut -d: -f2)
	found=
	for layer in $(jq -r '.layers[].digest | sub("sha256:"; "")' "$manifest"); do
		tar -tzf "$img/blobs/sha256/$layer" | grep -v '/$' >"$OT/layer-files"
		grep -q '^kubedist/bundle/images/' "$OT/layer-files" || continue
		assert_eq "kubedist/bundle/images/${BUNDLE##*/}" "$(cat "$OT/layer-files")" "the bundle's layer holds it alone"
		tar -xzOf "$img/blobs/sha256/$layer" "kubedist/bundle/images/${BUNDLE##*/}" | cmp - "$BUNDLE"
		found=1
	done
	assert_eq 1 "$found" "a layer with the bundle"
}

# A docker-registry of our own on 127.0.0.1:$REG_PORT, its storage in
# $OT/registry, holding every stand-in image of the fixtures under its
# repository path; and pins of those images in pkg/images.toml's format.
REG_PORT=5055
REG=http://127.0.0.1:$REG_PORT
FIXTURE_IMAGES=$(kd_fixtures)/images
start_registry() {
	if curl -fs "$REG/v2/" >/dev/null; then
		echo "something else listens on 127.0.0.1:$REG_PORT" >&2
		return 1
	fi
	# Fresh storage: a test may have changed blobs in the last one.
	rm -rf "$OT/registry"
	mkdir -p "$OT/registry"
	cat >"$OT/registry/config.yml" <<YAML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $OT/registry/data
http:
  addr: 127.0.0.1:$REG_PORT
YAML
	docker-registry serve "$OT/registry/config.yml" >"$OT/registry/log" 2>&1 &
	ctd_pids="$ctd_pids $!"
	i=0
	until curl -fs "$REG/v2/" >/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { cat "$OT/registry/log" >&2; return 1; }
		sleep 0.1
	done
	expected_refs | while read -r ref; do
		skopeo copy --quiet --all --preserve-digests --dest-tls-verify=false \
			"oci:$FIXTURE_IMAGES:$ref" "docker://127.0.0.1:$REG_PORT/${ref#*/}"
	done
	jq -r '.manifests[] | .annotations["org.opencontainers.image.ref.name"] + " " + .digest' \
		"$FIXTURE_IMAGES/index.json" | pins >"$OT/pins.toml"
}
# pkg/images.toml's format for "<reference> <index digest>" lines on stdin;
# each image a worker's as pkg/images.toml says, so the bundle is a whole one.
pins() {
	echo "kubernetes = \"$(sed -n 's/^kubernetes = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml")\""
	workers=$(worker_refs)
	while read -r ref digest; do
		worker=false
		if printf '%s\n' "$workers" | grep -qxF "$ref"; then worker=true; fi
		printf '\n[[image]]\nreference = "%s"\nworker = %s\nindex = "%s"\nrecord = "the fixtures"\n' "$ref" "$worker" "$digest"
	done
}
fetch_images() { # CACHE [PINS]
	(cd "$KD_REPO" && cargo xtask fetch --images --arch amd64,arm64 --image-mirror "$REG" \
		--image-pins "${2:-$OT/pins.toml}" --cache "$1")
}
# Every file under DIR with its digest: what a failed fetch must not change.
snapshot() { (cd "$1" && find . -type f ! -path './images/.fetch-*' -exec sha256sum {} + | sort -k2); }
# The index digest LAYOUT names REFERENCE by.
index_digest_of() { # LAYOUT REFERENCE
	jq -r --arg r "$2" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $r) | .digest' "$1/index.json"
}
# The storage file of a blob in the registry.
registry_blob() { echo "$OT/registry/data/docker/registry/v2/blobs/sha256/$(echo "$1" | cut -c1-2)/$1/data"; }

test_a_registry_mirror_is_pulled_into_the_cache_and_bundled_the_same() {
	trap ctd_stop_all EXIT
	start_registry
	lock_before=$(sha256sum <"$KD_REPO/pkg/upstream.lock")
	fetch_images "$OT/cache" 2>&1 | tee "$OT/fetch1"
	[ -f "$OT/cache/images/index.json" ]
	echo "== pins of one's own (--image-pins) record nothing in the release's lock"
	assert_eq "$lock_before" "$(sha256sum <"$KD_REPO/pkg/upstream.lock")" "pkg/upstream.lock"
	echo "== a second fetch asks the registry nothing (it is stopped)"
	ctd_stop_all
	fetch_images "$OT/cache" 2>&1 | tee "$OT/fetch2"
	if grep -q 'docker://' "$OT/fetch2"; then echo "the second fetch went to the registry" >&2; return 1; fi
	echo "== dist bundles them as it does from the layout"
	start_registry
	(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures --arch amd64 --formats images \
		--image-mirror "$REG" --image-pins "$OT/pins.toml" --cache "$OT/cache2" --no-cache --out "$OT/from-registry") \
		>"$OT/dist.log" 2>&1 || { cat "$OT/dist.log"; return 1; }
	grep -q 'fetch: registry.k8s.io/pause' "$OT/dist.log"
	cmp "$BUNDLE" "$OT/from-registry/${BUNDLE##*/}"
}

# The same registry over HTTPS, its certificate signed by a CA of our own:
# pulled with --image-ca, refused without it.
test_an_https_mirror_is_trusted_through_the_given_ca_only() {
	trap ctd_stop_all EXIT
	start_registry
	tls=$OT/tls
	mkdir -p "$tls"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kubedist-test-ca \
		-keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\n' >"$tls/san"
	openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
		-days 2 -extfile "$tls/san" -out "$tls/server.pem" 2>/dev/null
	sed -e "s|addr: 127.0.0.1:$REG_PORT|addr: 127.0.0.1:$((REG_PORT + 1))\n  tls:\n    certificate: $tls/server.pem\n    key: $tls/server.key|" \
		"$OT/registry/config.yml" >"$tls/config.yml"
	docker-registry serve "$tls/config.yml" >"$tls/log" 2>&1 &
	ctd_pids="$ctd_pids $!"
	https=https://127.0.0.1:$((REG_PORT + 1))
	i=0
	until curl -fs --cacert "$tls/ca.pem" "$https/v2/" >/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { cat "$tls/log" >&2; return 1; }
		sleep 0.1
	done
	pull() { # CACHE [CA]
		(cd "$KD_REPO" && cargo xtask fetch --images --arch amd64 --image-mirror "$https" \
			${2:+--image-ca "$2"} --image-pins "$OT/pins.toml" --cache "$1")
	}
	if pull "$OT/cache-untrusted" 2>"$OT/untrusted.err"; then
		echo "a mirror whose certificate no CA vouches for was trusted" >&2
		return 1
	fi
	cat "$OT/untrusted.err"
	grep -q '^error: .*certificate' "$OT/untrusted.err"
	assert_no_file "$OT/cache-untrusted/images/index.json"
	pull "$OT/cache-tls" "$tls/ca.pem"
	[ -f "$OT/cache-tls/images/index.json" ]
}

# fails_and_keeps_the_cache WHAT PINS : a fetch into a copy of a full cache
# fails in one line naming WHAT, and the cache is as it was.
fails_and_keeps_the_cache() {
	rm -rf "$OT/cache-fail"
	mkdir -p "$OT/cache-fail"
	snapshot "$OT/cache-fail" >"$OT/before"
	set +e
	fetch_images "$OT/cache-fail" "$2" >"$OT/fail.out" 2>"$OT/fail.err"
	rc=$?
	set -e
	cat "$OT/fail.err"
	[ "$rc" != 0 ] || { echo "the fetch succeeded" >&2; return 1; }
	assert_one_error "$OT/fail.err" "$1"
	snapshot "$OT/cache-fail" | diff -u "$OT/before" -
	assert_no_file "$OT/cache-fail/images/index.json"
}

test_a_registry_that_changed_an_image_is_refused_and_the_cache_kept() {
	trap ctd_stop_all EXIT
	start_registry
	echo "== a tag moved to other content"
	skopeo copy --quiet --all --preserve-digests --dest-tls-verify=false \
		"oci:$FIXTURE_IMAGES:$(expected_refs | grep /pause:)" "docker://127.0.0.1:$REG_PORT/kube-proxy:moved"
	proxy=$(expected_refs | grep /kube-proxy:)
	echo "${proxy%:*}:moved $(index_digest_of "$FIXTURE_IMAGES" "$proxy")" | pins >"$OT/pins-moved.toml"
	fails_and_keeps_the_cache "registry.k8s.io/kube-proxy:moved: the registry's tag names" "$OT/pins-moved.toml"

	echo "== an index whose arm64 entry is the amd64 image"
	python3 - "$FIXTURE_IMAGES" "$OT/wrong" "$(expected_refs | grep /pause:)" <<'PY'
import hashlib, json, os, shutil, sys
src, dst, ref = sys.argv[1:]
shutil.copytree(src, dst)
index = json.load(open(os.path.join(dst, "index.json")))
top = next(m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == ref)
inner = json.load(open(os.path.join(dst, "blobs/sha256", top["digest"][7:])))
amd64 = next(m for m in inner["manifests"] if m["platform"]["architecture"] == "amd64")
for m in inner["manifests"]:
    if m["platform"]["architecture"] == "arm64":
        m["digest"], m["size"] = amd64["digest"], amd64["size"]
data = json.dumps(inner, separators=(",", ":")).encode()
digest = hashlib.sha256(data).hexdigest()
open(os.path.join(dst, "blobs/sha256", digest), "wb").write(data)
top["digest"], top["size"] = "sha256:" + digest, len(data)
json.dump(index, open(os.path.join(dst, "index.json"), "w"))
print("sha256:" + digest)
PY
	wrong=$(index_digest_of "$OT/wrong" "$(expected_refs | grep /pause:)")
	skopeo copy --quiet --all --preserve-digests --dest-tls-verify=false \
		"oci:$OT/wrong:$(expected_refs | grep /pause:)" "docker://127.0.0.1:$REG_PORT/pause:wrongarch"
	echo "registry.k8s.io/pause:wrongarch $wrong" | pins >"$OT/pins-wrong.toml"
	fails_and_keeps_the_cache "registry.k8s.io/pause:wrongarch: the index's manifest for arm64 is an image for" "$OT/pins-wrong.toml"

	echo "== a layer changed in the registry's storage"
	etcd=$(expected_refs | grep /etcd:)
	layer=$(skopeo inspect --tls-verify=false --override-arch amd64 "docker://127.0.0.1:$REG_PORT/${etcd#*/}" | jq -r '.Layers[0]')
	data=$(registry_blob "${layer#sha256:}")
	cp "$data" "$OT/layer.orig"
	printf 'x' | dd of="$data" bs=1 seek=100 conv=notrunc 2>/dev/null
	fails_and_keeps_the_cache "$etcd (amd64)" "$OT/pins.toml"

	echo "== the same layer cut short"
	head -c 1000 "$OT/layer.orig" >"$data"
	fails_and_keeps_the_cache "$etcd (amd64)" "$OT/pins.toml"
}

# An input directory like the fixtures whose amd64 kubeadm is no stand-in
# but a program that prints LIST for `config images list` (and is the
# stand-in otherwise); dist then checks pkg/images.toml against it.
from_dir_with_kubeadm() { # DIR LIST
	fix=$(kd_fixtures)
	rm -rf "$1"
	cp -al "$fix" "$1"
	k=$1/kubernetes/v$(sed -n 's/^kubernetes = "\(.*\)"$/\1/p' "$KD_REPO/pkg/images.toml")/bin/linux/amd64/kubeadm
	rm -f "$k" "$k.sha256" "$1/STANDINS"
	grep -vx 'kubernetes/kubeadm' "$fix/STANDINS" >"$1/STANDINS"
	printf '%s\n' "$2" >"$OT/kubeadm-says"
	cat >"$k" <<SH
#!/bin/sh
if [ "\$1 \$2 \$3" = "config images list" ]; then exec cat "$OT/kubeadm-says"; fi
exec "$fix/kubernetes/${k#"$1"/kubernetes/}" "\$@"
SH
	chmod 755 "$k"
	(cd "${k%/*}" && sha256sum kubeadm >kubeadm.sha256)
}

test_an_image_list_kubeadm_disagrees_with_is_refused() {
	dist_from() { # DIR OUT
		(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --from "$1" --arch amd64 \
			--formats images --no-cache --out "$2")
	}
	from_dir_with_kubeadm "$OT/kubeadm-agrees" "$(expected_refs)"
	dist_from "$OT/kubeadm-agrees" "$OT/agrees" 2>&1 | tee "$OT/agrees.log"
	grep -q 'the image list is what kubeadm' "$OT/agrees.log"
	from_dir_with_kubeadm "$OT/kubeadm-differs" "$(expected_refs | grep -v /etcd: ; echo registry.k8s.io/etcd:9.9.9-0)"
	if dist_from "$OT/kubeadm-differs" "$OT/differs" 2>"$OT/differs.err"; then
		echo "dist built a bundle kubeadm disagrees with" >&2
		return 1
	fi
	tail -n 1 "$OT/differs.err"
	tail -n 1 "$OT/differs.err" | grep -q 'pkg/images.toml is not what kubeadm .* pulls.*etcd:9.9.9-0'
	assert_no_file "$OT/differs"
}

# The functions the tests run in their own shells (unshare).
{
	echo "OT='$OT' KD_REPO='$KD_REPO' IMPORT='$IMPORT'"
	echo '. "$KD_REPO/ci/containerd.sh"'
	echo 'trap ctd_stop_all EXIT'
} >"$OT/functions"

kd_test test_one_bundle_per_architecture_reproducible_naming_every_image
kd_test test_a_workers_bundle_holds_the_images_a_worker_runs
kd_test test_containerd_imports_every_image_offline_and_the_pause_image_runs
kd_test test_a_matching_sandbox_image_gets_no_note
kd_test test_a_changed_or_unlisted_bundle_imports_nothing
kd_test test_cri_o_storage_holds_every_image_at_its_digest
kd_test test_an_image_repository_names_every_image_as_kubeadm_does
kd_test test_air_gapped_host_installs_the_node_and_its_images
kd_test test_a_tarball_carrying_the_bundle_installs_and_imports_it_offline
kd_test test_an_image_list_kubeadm_disagrees_with_is_refused
kd_test test_a_registry_mirror_is_pulled_into_the_cache_and_bundled_the_same
kd_test test_a_registry_that_changed_an_image_is_refused_and_the_cache_kept
kd_test test_an_https_mirror_is_trusted_through_the_given_ca_only
kd_summary
