#!/bin/sh
# The installer image (kubedist-installer-<tag>.oci.tar and its layout
# directory), run for real: loaded and run by podman (with runc), unpacked by
# umoci and run by runc, against fake host roots made from the same bookworm
# roots as the tarball and OpenRC suites. What it installs is compared with
# what the tarball's install.sh installs into an identical root by itself.
#
# Roots (overlays over two unpacked base roots, the tarball in /srv/kd):
#   systemd installed, not running: the image's chroot path, compared with a
#     direct install.sh; re-run; upgrade N-1 → N with an edited env file;
#     uninstall beside a vendor's CNI plugin
#   OpenRC, booted inside a "host" process of its own (its own mount and PID
#     namespaces, chrooted into the root): the image enters that process's
#     namespaces (--pid=host, HOST_PID) and the host's openrc-run enables and
#     starts the kubelet
#   an empty directory: files only
#
# Wall time: about 1.5 min on 2 cores with the base tarballs cached.

# shellcheck disable=SC2016 # $... in single quotes is for the root's shell
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require unshare mount tar sha256sum jq skopeo umoci podman runc nsenter shellcheck cargo docker-registry curl \
	pyspdxtools ntia-checker
kd_require_dist

# The overlay roots are mounted in a mount namespace of this suite's own.
kd_own_mount_namespace "$0" "$@"

ARCHIVE_PREV=$(kd_one "$KD_DIST_PREV"/kubedist-installer-*.oci.tar)
ARCHIVE_CUR=$(kd_one "$KD_DIST"/kubedist-installer-*.oci.tar)
LAYOUT_CUR=$(kd_one "${ARCHIVE_CUR%.tar}")
TARBALL_CUR=$(kd_one "$KD_DIST"/kubedist-*-linux-amd64.tar.gz)
tag_of() { t=${1##*/kubedist-installer-}; echo "${t%.oci.tar}"; }
REF_PREV=localhost/kubedist/installer:$(tag_of "$ARCHIVE_PREV")
REF_CUR=localhost/kubedist/installer:$(tag_of "$ARCHIVE_CUR")

OT=$KD_WORK/t-oci
rm -rf "$OT"
mkdir -p "$OT"
ot_cleanup() {
	# Every mount under $OT (tests mount their roots in subshells), deepest first.
	awk -v top="$OT/" 'index($2, top) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$OT"
	kd_cleanup
}
trap ot_cleanup EXIT

# podman as these machines allow it: its own storage, runc, cgroupfs, no
# journald, limits the sandbox permits; its runroot under /tmp, because it
# refuses a path longer than 50 characters.
OT_RUNROOT=$(mktemp -d /tmp/kd-oci-podman.XXXXXX)
kd_remove_on_exit "$OT_RUNROOT"
# (PM_STORAGE: another storage, for a test's own pulls.)
pm() {
	podman --root "${PM_STORAGE:-$OT/storage}" --runroot "$OT_RUNROOT" --storage-driver vfs \
		--cgroup-manager cgroupfs --events-backend file --runtime runc "$@"
}
pm_run() {
	pm run --rm --privileged --network=none \
		--ulimit nofile=20000:20000 --ulimit nproc=32768:32768 "$@"
}

# lower NAME TARBALL : a base root, unpacked once, with release N's tarball
# in /srv/kd/cur.
lower() {
	d=$OT/lower-$1
	mkdir "$d"
	tar -xf "$2" -C "$d" --numeric-owner
	mkdir -p "$d/srv/kd/cur"
	tar -xzf "$TARBALL_CUR" -C "$d/srv/kd/cur"
	printf '%s\n' "$d"
}
LOWER_SYSTEMD=$(lower systemd "$(kd_base_tarball tarball-systemd systemd procps)")
LOWER_OPENRC=$(lower openrc "$(kd_base_tarball openrc openrc procps jq logrotate)")

# new_root LOWER : a fresh root (an overlay over LOWER) in $NEW_ROOT, with a
# tmpfs /run as a booted host has.
new_root() {
	d=$(mktemp -d "$OT/root.XXXXXX")
	mkdir "$d/upper" "$d/work" "$d/root"
	mount -t overlay overlay -o "lowerdir=$1,upperdir=$d/upper,workdir=$d/work" "$d/root"
	mount -t tmpfs tmpfs "$d/root/run"
	NEW_ROOT=$d/root
}

# listing ROOT : kd_listing without /srv (the tarball a direct install runs from).
listing() { kd_listing "$1" /srv; }

# image_run ROOT ARGS... : podman runs the current image against ROOT as its
# host root; its output is in $OT/out, its status in $rc.
image_run() {
	root=$1
	shift
	set +e
	pm_run -v "$root:/host" "$@" >"$OT/out" 2>&1
	rc=$?
	set -e
	sed 's/^/  | /' "$OT/out"
	echo "  (exit status $rc)"
}
said() { grep -qF -- "$1" "$OT/out" || { echo "FAIL: the image did not say: $1" >&2; return 1; }; }
ok() { [ "$rc" = 0 ] || { echo "FAIL: the image exited with $rc" >&2; return 1; }; }

echo "== podman load of both releases' archives" >&2
pm load -i "$ARCHIVE_PREV" >&2
pm load -i "$ARCHIVE_CUR" >&2

PRELUDE=$(cat "$KD_REPO/ci/standin-helpers.sh")

test_archive_and_layout_read_by_skopeo() {
	for ref in "oci-archive:$ARCHIVE_CUR" "oci:$LAYOUT_CUR:$REF_CUR" "docker-archive:$ARCHIVE_CUR"; do
		echo "== skopeo inspect $ref"
		skopeo inspect "$ref" >"$OT/inspect.json"
		jq . "$OT/inspect.json"
		assert_eq amd64 "$(jq -r .Architecture "$OT/inspect.json")" "architecture of $ref"
		assert_eq "${REF_CUR##*:}" "$(jq -r '.Labels."org.opencontainers.image.version"' "$OT/inspect.json")" "version label of $ref"
		jq -e '.Labels."io.kubedist.shell" | startswith("busybox-static ")' "$OT/inspect.json" >/dev/null
	done
	echo "== the archive and every file of the layout are in SHA256SUMS, and match"
	(cd "$KD_DIST" && sha256sum -c SHA256SUMS) >"$OT/sums"
	grep -qx "kubedist-installer-.*\.oci\.tar: OK" "$OT/sums"
	grep -qx "kubedist-installer-.*\.oci/index\.json: OK" "$OT/sums"
	blobs=$(find "$LAYOUT_CUR/blobs/sha256" -type f | wc -l)
	assert_eq "$blobs" "$(grep -c '\.oci/blobs/sha256/.*: OK$' "$OT/sums")" "blobs listed in SHA256SUMS"
	echo "== podman loaded it under its full name"
	pm image exists "$REF_CUR"
}

test_two_architectures_make_one_index() {
	(cd "$KD_REPO" && SOURCE_DATE_EPOCH=1700000000 cargo xtask dist --fixtures \
		--arch amd64,arm64 --formats oci --fast --out "$OT/multi")
	layout=$(echo "$OT"/multi/kubedist-installer-*.oci)
	ref=$(jq -r '.manifests[0].annotations."org.opencontainers.image.ref.name"' "$layout/index.json")
	skopeo inspect --raw "oci:$layout:$ref" >"$OT/index.json"
	jq . "$OT/index.json"
	assert_eq application/vnd.oci.image.index.v1+json "$(jq -r .mediaType "$OT/index.json")" "media type"
	assert_eq "amd64 arm64" "$(jq -r '[.manifests[].platform.architecture] | join(" ")' "$OT/index.json")" "platforms"
	for a in amd64 arm64; do
		assert_eq "$a" "$(skopeo inspect --override-arch "$a" "oci-archive:$layout.tar" | jq -r .Architecture)" "image for $a"
	done
	echo "== in the layout, each architecture's image has its SBOM attached"
	for m in $(jq -r '.manifests[].digest' "$OT/index.json"); do
		referrer_of "$layout" "$m" >/dev/null
	done
	echo "== podman loads this host's image under the release's name"
	pm --root "$OT/storage-multi" load -i "$layout.tar"
	assert_eq amd64 "$(pm --root "$OT/storage-multi" image inspect "$ref" | jq -r '.[0].Architecture')" "loaded architecture"
	echo "== docker's manifest.json names one image per architecture"
	tar -xOf "$layout.tar" manifest.json | jq -r '.[].RepoTags[]' >"$OT/tags"
	assert_eq "$ref-amd64 $ref-arm64" "$(tr '\n' ' ' <"$OT/tags" | sed 's/ $//')" "docker tags"
}

test_podman_install_matches_tarball_install() {
	new_root "$LOWER_SYSTEMD"
	direct=$NEW_ROOT
	new_root "$LOWER_SYSTEMD"
	image=$NEW_ROOT
	echo "== direct: install.sh from the tarball"
	kd_in_root_offline "$direct" <<'EOF'
/srv/kd/cur/kubedist-*-linux-amd64/install.sh install --no-start
EOF
	echo "== the image, into an identical root"
	image_run "$image" "$REF_CUR" install --no-start
	ok
	said "installing through chroot"
	listing "$direct" >"$OT/direct.list"
	listing "$image" >"$OT/image.list"
	diff -u "$OT/direct.list" "$OT/image.list"
	grep -q '^/var/lib/kubedist/install\.manifest[[:space:]]' "$OT/image.list"
	assert_no_file "$image/run/kubedist"
	echo "== a second run changes nothing"
	image_run "$image" "$REF_CUR"
	ok
	said "nothing to do"
	listing "$image" >"$OT/again.list"
	diff -u "$OT/image.list" "$OT/again.list"
}

test_upgrade_keeps_the_edited_env_file_and_uninstall_leaves_a_vendor_plugin() {
	new_root "$LOWER_SYSTEMD"
	r=$NEW_ROOT
	image_run "$r" "$REF_PREV" install --no-start
	ok
	echo 'KUBELET_EXTRA_ARGS=--node-ip=10.0.0.7' >"$r/etc/default/kubelet"
	printf 'vendor\n' >"$r/opt/cni/bin/vendor-plugin"
	image_run "$r" "$REF_CUR" install --no-start
	ok
	assert_eq 'KUBELET_EXTRA_ARGS=--node-ip=10.0.0.7' "$(cat "$r/etc/default/kubelet")" "edited env file"
	assert_file "$r/etc/default/kubelet.new"
	want=$(awk '$2 == "payload/any/usr/bin/kubeadm" { print $1 }' "$LOWER_SYSTEMD"/srv/kd/cur/*/SHA256SUMS)
	assert_eq "$want" "$(sha256sum <"$r/usr/bin/kubeadm" | cut -c1-64)" "kubeadm is release N's"
	echo "== uninstall"
	image_run "$r" "$REF_CUR" uninstall
	ok
	assert_no_file "$r/usr/bin/kubeadm"
	assert_no_file "$r/var/lib/kubedist/install.manifest"
	assert_file "$r/opt/cni/bin/vendor-plugin"
	assert_file "$r/etc/default/kubelet"
}

# referrer_of LAYOUT DIGEST : the SBOM attached to the image manifest DIGEST
# in LAYOUT, as a tool following OCI 1.1 referrers finds it: the one
# manifest listed in index.json whose subject is that image; its blobs are
# checked against their digests. Prints the SBOM's blob path.
referrer_of() {
	jq -c --arg d "$2" '.manifests[] | select(.artifactType == "application/spdx+json")' "$1/index.json" |
		while IFS= read -r desc; do
			r=$1/blobs/sha256/$(echo "$desc" | jq -r '.digest | ltrimstr("sha256:")')
			if [ "$(jq -r .subject.digest "$r")" = "$2" ]; then echo "$r"; fi
		done >"$OT/referrers"
	assert_eq 1 "$(wc -l <"$OT/referrers")" "referrers of $2"
	r=$(cat "$OT/referrers")
	assert_eq application/spdx+json "$(jq -r .artifactType "$r")" "artifact type of the referrer"
	assert_eq application/vnd.oci.empty.v1+json "$(jq -r .config.mediaType "$r")" "config of the referrer"
	assert_eq application/spdx+json "$(jq -r '.layers | map(.mediaType) | join(" ")' "$r")" "the referrer's one blob"
	for b in "$r" "$1/blobs/sha256/$(jq -r '.layers[0].digest | ltrimstr("sha256:")' "$r")"; do
		assert_eq "${b##*/}" "$(sha256sum <"$b" | cut -d' ' -f1)" "digest of $b"
	done
	echo "$1/blobs/sha256/$(jq -r '.layers[0].digest | ltrimstr("sha256:")' "$r")"
}

test_the_image_carries_its_sbom_and_a_referrer_attaches_it() {
	image=$(jq -r '.manifests[0].digest' "$LAYOUT_CUR/index.json")
	sbom=$(referrer_of "$LAYOUT_CUR" "$image")
	echo "== docs/supply-chain.md's loop finds it (its layout is release 1.37.2-1)"
	layout=${LAYOUT_CUR##*/}
	release=${layout#kubedist-installer-}
	release=${release%.oci}
	kd_guide_block docs/supply-chain.md image-sboms 1.37.2-1 "$release" >"$OT/image-sboms.sh"
	(cd "${LAYOUT_CUR%/*}" && sh -eu "$OT/image-sboms.sh") >"$OT/image-sboms.out"
	assert_eq "$image sha256:${sbom##*/}" "$(cat "$OT/image-sboms.out")" "the guide's image → SBOM line"
	echo "== the attached SBOM is the one inside the image"
	umoci unpack --image "$LAYOUT_CUR:$REF_CUR" "$OT/sbom-bundle" >/dev/null
	rootfs=$OT/sbom-bundle/rootfs
	cmp "$sbom" "$rootfs/kubedist/sbom.spdx.json"
	echo "== it validates and meets the NTIA minimum"
	cp "$sbom" "$OT/image.spdx.json"
	pyspdxtools -i "$OT/image.spdx.json"
	ntia-checker --file "$OT/image.spdx.json" | tee "$OT/ntia"
	grep -q "Conformant: True" "$OT/ntia"
	echo "== it names every other file of the image, with the digest it has there"
	jq -r '.files[] | "\(.checksums[] | select(.algorithm == "SHA256") | .checksumValue)  \(.fileName)"' \
		"$OT/image.spdx.json" >"$OT/image.sums"
	(cd "$rootfs" && sha256sum -c --quiet "$OT/image.sums")
	(cd "$rootfs" && find . -type f ! -path ./kubedist/sbom.spdx.json | sort) >"$OT/image.files"
	cut -d' ' -f3- "$OT/image.sums" | sort | diff -u "$OT/image.files" -
	echo "== Debian's kubectl in it is named with its Go build"
	jq -e '.packages[] | select(.name == "k8s.io/kubernetes/cmd/kubectl")' "$OT/image.spdx.json" >/dev/null
}

# installer-image.md's push, to Debian's docker-registry on this machine's
# loopback (plain HTTP, so with skopeo's --dest-tls-verify=false): the
# registry serves the release's image under its digest, and podman pulls it
# from there into storage of its own and runs it.
test_the_guide_s_skopeo_copy_pushes_to_a_registry_podman_pulls_from() {
	port=$((20000 + $$ % 10000))
	cat >"$OT/registry.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $OT/registry
http:
  addr: 127.0.0.1:$port
EOF
	docker-registry serve "$OT/registry.yml" >"$OT/registry.log" 2>&1 &
	registry=$!
	trap 'kill $registry' EXIT
	i=0
	until curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -lt 50 ] || { cat "$OT/registry.log"; echo "docker-registry did not answer on 127.0.0.1:$port" >&2; return 1; }
		sleep 0.2
	done
	tag=${REF_CUR##*:}
	kd_guide_block docs/installer-image.md skopeo-push 1.37.2-1 "$tag" \
		registry.example.org "127.0.0.1:$port" 'docker://' '--dest-tls-verify=false docker://' >"$OT/push.sh"
	cat "$OT/push.sh"
	(cd "${LAYOUT_CUR%/*}" && sh -eu "$OT/push.sh")
	pushed=127.0.0.1:$port/kubedist/installer:$tag
	want=$(jq -r --arg ref "$REF_CUR" '.manifests[] | select(.annotations."org.opencontainers.image.ref.name" == $ref) | .digest' "$LAYOUT_CUR/index.json")
	assert_eq "$want" "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$pushed")" "the registry's digest of $pushed"
	loaded=$(pm image inspect --format '{{.Id}}' "$REF_CUR")
	echo "== podman pulls it into storage of its own and runs it"
	PM_STORAGE=$OT/storage-pulled
	pm pull --tls-verify=false "$pushed"
	assert_eq "$loaded" "$(pm image inspect --format '{{.Id}}' "$pushed")" "the pulled image's ID"
	image_run "$OT" "$pushed" --help
	ok
	said "Usage: podman run"
}

# bundle DIR : an unpacked runc bundle of the current image from its layout
# (umoci), its process the entrypoint with ARGS, the root $2 at /host.
bundle() {
	umoci unpack --image "$LAYOUT_CUR:$REF_CUR" "$1"
	jq --arg host "$2" '
		.process.terminal = false
		| .process.args = ["/bin/sh", "/kubedist/entrypoint.sh", "install", "--no-start"]
		| .mounts += [{"destination": "/host", "type": "bind", "source": $host, "options": ["rbind", "rw"]}]
		| .linux.namespaces |= map(select(.type != "user"))
	' "$1/config.json" >"$1/config.json.new"
	mv "$1/config.json.new" "$1/config.json"
}

# runc_run BUNDLE NAME : runc runs the bundle as container kd-oci-NAME; its
# output is in $OT/out (and shown), its status in $rc.
runc_run() {
	set +e
	runc --root "$OT/runc" run -b "$1" "kd-oci-$2-$$" </dev/null >"$OT/out" 2>&1
	rc=$?
	set -e
	cat "$OT/out"
}

test_umoci_and_runc_install_matches_tarball_install() {
	new_root "$LOWER_SYSTEMD"
	direct=$NEW_ROOT
	new_root "$LOWER_SYSTEMD"
	image=$NEW_ROOT
	kd_in_root_offline "$direct" <<'EOF'
/srv/kd/cur/kubedist-*-linux-amd64/install.sh install --no-start
EOF
	bundle "$OT/bundle-runc" "$image"
	runc_run "$OT/bundle-runc" i
	ok
	listing "$direct" >"$OT/direct.list"
	listing "$image" >"$OT/image.list"
	diff -u "$OT/direct.list" "$OT/image.list"
}

test_tampered_layer_is_refused() {
	new_root "$LOWER_SYSTEMD"
	r=$NEW_ROOT
	listing "$r" >"$OT/before.list"
	cp -a "$LAYOUT_CUR" "$OT/tampered"
	# The biggest blob is a layer: one byte of it changed, same size.
	blob=$(find "$OT/tampered/blobs/sha256" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)
	printf 'X' | dd of="$blob" bs=1 seek=4096 conv=notrunc status=none
	tar -cf "$OT/tampered.tar" -C "$OT/tampered" .
	echo "== podman load refuses it"
	if pm --root "$OT/storage-tampered" load -i "$OT/tampered.tar"; then
		echo "FAIL: podman loaded a tampered layer" >&2
		return 1
	fi
	echo "== umoci unpack refuses it"
	if umoci unpack --image "$OT/tampered:$REF_CUR" "$OT/bundle-tampered"; then
		echo "FAIL: umoci unpacked a tampered layer" >&2
		return 1
	fi
	listing "$r" >"$OT/after.list"
	diff -u "$OT/before.list" "$OT/after.list"
}

test_tampered_payload_file_is_refused_before_any_write() {
	new_root "$LOWER_SYSTEMD"
	r=$NEW_ROOT
	listing "$r" >"$OT/before.list"
	bundle "$OT/bundle-payload" "$r"
	k=$OT/bundle-payload/rootfs/kubedist/bundle/payload/any/usr/bin/kubectl
	printf 'X' >>"$k"
	runc_run "$OT/bundle-payload" p
	[ "$rc" != 0 ] || { echo "FAIL: a changed payload file was installed" >&2; return 1; }
	said "checksum verification failed"
	echo "== and a SHA256SUMS changed to match it: refused by the image's digest"
	s=$OT/bundle-payload/rootfs/kubedist/bundle/SHA256SUMS
	new=$(sha256sum <"$k" | cut -c1-64)
	awk -v n="$new" '$2 == "payload/any/usr/bin/kubectl" { $1 = n; print $1 "  " $2; next } { print }' "$s" >"$s.new"
	mv "$s.new" "$s"
	runc_run "$OT/bundle-payload" q
	[ "$rc" != 0 ] || { echo "FAIL: a changed SHA256SUMS was accepted" >&2; return 1; }
	said "not the one in the image's configuration"
	listing "$r" >"$OT/after.list"
	diff -u "$OT/before.list" "$OT/after.list"
	assert_eq "" "$(ls -A "$r/run")" "the host's /run"
}

# boot_host ROOT : the stand-in host: OpenRC booted in a process of its own
# mount and PID namespaces, chrooted into ROOT (PID 1 of this machine cannot
# be entered). Its /run is the root's tmpfs, shared with this suite. Its
# init's pid (as this suite sees it) in $hp; host_sh runs a script in it.
# Called from a test (a subshell), which ends the host when it exits.
boot_host() {
	r=$1
	printf '%s\n' "$PRELUDE" >"$r/tmp/host-boot"
	cat >>"$r/tmp/host-boot" <<'EOF'
openrc_boot
echo booted >/tmp/host-booted
exec sleep 600
EOF
	unshare --mount --pid --fork --kill-child -- sh -c '
		mount -t proc proc "$1/proc"
		mount --rbind /dev "$1/dev"
		mount --rbind /sys "$1/sys"
		exec chroot "$1" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh /tmp/host-boot
	' host "$r" &
	outer=$!
	trap 'kill -KILL "$outer" 2>/dev/null; wait "$outer" 2>/dev/null || true' EXIT
	n=50
	until [ -f "$r/tmp/host-booted" ]; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || { echo "FAIL: the stand-in host did not boot" >&2; return 1; }
		sleep 0.1
	done
	hp=$(tr -d ' ' <"/proc/$outer/task/$outer/children")
	echo "== the stand-in host's init is process $hp"
}
host_sh() { nsenter -t "$hp" -m -p -r -w /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c "$1"; }

test_nsenter_into_a_host_process_starts_the_service_with_its_openrc() {
	new_root "$LOWER_OPENRC"
	r=$NEW_ROOT
	boot_host "$r"
	image_run "$r" --pid=host -e "HOST_PID=$hp" "$REF_CUR" install
	ok
	said "installing in the host's namespaces (process $hp)"
	echo "== in the host: enabled and started by its own openrc-run"
	host_sh 'rc-update show default' | tee "$OT/rc-update"
	grep -q 'kubelet' "$OT/rc-update"
	host_sh "$PRELUDE"'
touch /var/lib/kubelet/config.yaml
wait_until 10 has_starts 1 || fail "the stand-in kubelet did not start"
rc-service kubelet status | grep -q "status: started" || fail "rc-service kubelet status: not started"
'
	echo "== a second run changes nothing and restarts nothing"
	before=$(host_sh "$PRELUDE"'
starts')
	image_run "$r" --pid=host -e "HOST_PID=$hp" "$REF_CUR" install
	ok
	said "nothing to do"
	sleep 1
	assert_eq "$before" "$(host_sh "$PRELUDE"'
starts')" "stand-in kubelet starts"
}

# Without --pid=host, the host's /proc under /host (its own procfs, as a
# host's / mounted with -v /:/host has it) leads to the host's PID 1.
test_nsenter_through_the_hosts_proc_without_pid_host() {
	new_root "$LOWER_OPENRC"
	r=$NEW_ROOT
	boot_host "$r"
	nsenter -t "$hp" -p -- mount -t proc proc "$r/proc"
	image_run "$r" "$REF_CUR" install
	ok
	said "installing in the host's namespaces (process 1)"
	# Its PID namespace is not below the container's: enabled by the
	# host's rc-update, and the run says what that means.
	said "cannot enter the host's PID namespace (run with --pid=host)"
	host_sh 'rc-update show default' | grep -q kubelet
	umount "$r/proc"
}

# A run killed while its payload is staged leaves it in the host's /run
# (RAM): the next run removes it, and never the staging directory of a run
# that is still alive. The host's procfs is at /host/proc, as `-v /:/host`
# brings it.
test_a_killed_runs_staging_is_removed_by_the_next() {
	new_root "$LOWER_SYSTEMD"
	r=$NEW_ROOT
	mount -t proc proc "$r/proc"
	# A live run's directory: this sleep stands for its owner.
	sleep 300 &
	live=$!
	read -r st <"/proc/$live/stat"
	kept=$r/run/kubedist/image.$live-$(echo "${st##*) }" | awk '{ print $20 }').x
	mkdir -p "$kept"
	echo "== a run killed while it stages"
	# (--init: the root's proc is this machine's, where another suite's
	# runsvdir may run.)
	pm_run -v "$r:/host" "$REF_CUR" install --init systemd --no-start >"$OT/killed.out" 2>&1 &
	run=$!
	n=0
	d=
	while [ -z "$d" ]; do
		d=$(find "$r/run/kubedist" -maxdepth 1 -name 'image.*' ! -path "$kept" | head -n 1)
		n=$((n + 1))
		[ "$n" -lt 2000 ] || { echo "FAIL: no staging directory appeared" >&2; return 1; }
		[ -n "$d" ] || sleep 0.01
	done
	owner=${d##*/image.}
	owner=${owner%%-*}
	echo "staging: $d; its owner, process $owner, is killed"
	kill -KILL "$owner"
	wait "$run" || true
	[ -d "$d" ] || { echo "FAIL: the killed run left nothing to sweep" >&2; return 1; }
	echo "== the next run"
	image_run "$r" "$REF_CUR" install --init systemd --no-start
	ok
	said "removed 1 staging directory of earlier runs that were killed"
	assert_no_file "$d"
	[ -d "$kept" ] || { echo "FAIL: a live run's staging directory was removed" >&2; return 1; }
	kill "$live"
	rm -rf "$kept"
	umount "$r/proc"
}

test_files_only_without_a_host_shell() {
	r=$OT/bare
	mkdir -p "$r/run" "$r/etc"
	touch "$r/etc/debian_version"
	image_run "$r" "$REF_CUR" install --init openrc
	ok
	said "installing files only"
	said "left for the host"
	assert_file "$r/usr/bin/kubelet"
	assert_file "$r/etc/init.d/kubelet"
	assert_file "$r/var/lib/kubedist/install.manifest"
	echo "== --dry-run writes nothing"
	d=$OT/bare-dry
	mkdir -p "$d/run" "$d/etc"
	image_run "$d" "$REF_CUR" install --dry-run --init openrc
	ok
	assert_eq "./etc ./run" "$(cd "$d" && find . -mindepth 1 | sort | tr "\n" " " | sed "s/ $//")" "what the dry run left"
}

test_help_and_bad_arguments() {
	image_run "$OT" "$REF_CUR" --help
	ok
	said "Usage: podman run"
	image_run "$OT" "$REF_CUR" install --prefix /x
	assert_eq 2 "$rc" "exit status of --prefix"
	said "set HOST_ROOT instead"
	image_run "$OT" "$REF_CUR" install --via ssh
	assert_eq 2 "$rc" "exit status of --via ssh"
}

test_image_scripts_pass_shellcheck() {
	shellcheck -s sh "$KD_REPO"/installer/image/*.sh
}

kd_test test_archive_and_layout_read_by_skopeo
kd_test test_two_architectures_make_one_index
kd_test test_the_guide_s_skopeo_copy_pushes_to_a_registry_podman_pulls_from
kd_test test_the_image_carries_its_sbom_and_a_referrer_attaches_it
kd_test test_podman_install_matches_tarball_install
kd_test test_upgrade_keeps_the_edited_env_file_and_uninstall_leaves_a_vendor_plugin
kd_test test_umoci_and_runc_install_matches_tarball_install
kd_test test_tampered_layer_is_refused
kd_test test_tampered_payload_file_is_refused_before_any_write
kd_test test_nsenter_into_a_host_process_starts_the_service_with_its_openrc
kd_test test_nsenter_through_the_hosts_proc_without_pid_host
kd_test test_a_killed_runs_staging_is_removed_by_the_next
kd_test test_files_only_without_a_host_shell
kd_test test_help_and_bad_arguments
kd_test test_image_scripts_pass_shellcheck
kd_summary
