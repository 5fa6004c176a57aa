#!/bin/sh
# kubedist air-gapped installer: installs the Kubernetes node components of
# this tarball (kubelet, kubelet-wrapper, kubeadm, kubectl, crictl, the CNI
# plugins) and the kubelet's service files for systemd, OpenRC or runit.
# Run `./install.sh --help` for what it does and how.
#
# POSIX sh (dash, busybox sh). It never evaluates or sources a file it reads:
# MANIFEST, SHA256SUMS and its own install manifest are parsed as data.

set -eu
umask 022

prog=install.sh
tab=$(printf '\t')
# This tarball's release, X.Y.Z[-PRE]-REVISION (filled in by `cargo xtask dist`).
release=@RELEASE@
# The container runtime's packages (--runtime) and the packages of others
# it cannot be installed beside (pkg/*.toml, filled in by `cargo xtask dist`).
runtime_packages='@RUNTIME_PACKAGES@'
runtime_conflicts='@RUNTIME_CONFLICTS@'

usage() {
	cat <<'EOF'
Usage: ./install.sh [install|uninstall] [OPTIONS]

Installs the Kubernetes node components of this tarball without network
access: kubelet, kubelet-wrapper, kubeadm, kubectl, crictl, the CNI plugins
in /opt/cni/bin, the KUBELET_EXTRA_ARGS file and the kubelet service for the
host's init system.

Actions:
  install (default)   install or upgrade; run it again at any time
  uninstall           remove what install.sh installed, as its manifest lists

Options:
  --init systemd|openrc|runit
                      the init system to install the service for
  --family deb|rpm    deb: @DEB_ENV_FILE@, rpm: @RPM_ENV_FILE@
                      (the file kubeadm's drop-in and kubelet-wrapper read)
  --prefix DIR        install into the root DIR instead of / (DESTDIR=DIR in
                      the environment does the same); no service is touched
  --dry-run           print what would be done; change nothing
  --no-enable         do not enable the service at boot
  --no-start          do not start or restart the service
  --service-dir DIR   runit: the directory runsvdir watches (default: found)
  --kubelet-only      install only this tarball's kubelet, side by side, as
                      /opt/kubernetes/vX.Y.Z/bin/kubelet; select it with
                      KUBELET_VERSION=vX.Y.Z (kubelet-wrapper reads it from the
                      family env file, /etc/conf.d/kubelet or
                      /etc/sv/kubelet/conf). With uninstall: remove only it.
  --kubelet-version vX.Y.Z
                      the version for --kubelet-only (default: from the
                      tarball's directory name, kubedist-<version>-linux-<arch>)
  --images FILE       install only the images bundle FILE
                      (kubedist-images-<version>-<arch>.oci.tar of `cargo
                      xtask dist`, or its worker's, ...-<arch>-worker.oci.tar,
                      of `dist --worker-images`), checked against the SHA256SUMS beside it
                      (and its SHA256SUMS.asc with --verify-key), into
                      /var/lib/kubedist/images with a SHA256SUMS of its own;
                      then import it into the running container runtime with
                      kubedist-images (installed with kubeadm). A bundle
                      older than the release installed here is refused
                      (--downgrade takes it); the bundles of this release
                      and newer ones stay beside it, an older release's go;
                      uninstall removes them. A tarball
                      of `cargo xtask dist --carry-images` carries its
                      bundle in images/: install installs and imports it
                      after the node software, with no --images
  --runtime           install or upgrade only the container runtime this
                      tarball carries (@RUNTIME_PACKAGES@: containerd 2,
                      its runc shim, ctr and runc), configured for the init
                      system (the systemd cgroup driver under systemd,
                      cgroupfs under OpenRC and runit) in
                      /etc/containerd/config.toml, and its service, enabled
                      and started. Refused where a package manager installed
                      @RUNTIME_CONFLICTS@ (remove them first). Once
                      installed, later installs upgrade it too; uninstall
                      removes it (with --runtime: only it)
  --image-repository REPO
                      with --images: the repository kubeadm's
                      imageRepository names (registry.example.internal/k8s);
                      kubedist-images names every image under it too, as
                      kubeadm does, now and at every boot: install.sh keeps
                      it in /etc/kubedist/images.conf (later --images runs
                      keep it; uninstall removes it)
  --downgrade         install this tarball (or with --images a bundle) although
                      the release recorded here is newer (refused otherwise:
                      a node's kubelet and kubeadm must not go back behind
                      its control plane; as apt-get's --allow-downgrades)
  --replace-foreign   replace a file install.sh did not install (one a
                      package or someone else put where this tarball installs
                      a file); the original is kept in
                      /var/lib/kubedist/displaced and restored on uninstall
  --ignore-package-db install even when the dpkg or rpm database cannot be
                      read (then nothing tells whether kubelet, ... are
                      installed by a package manager)
  --verify-key KEYFILE
                      first of all, check SHA256SUMS.asc, the signature of
                      SHA256SUMS made by `cargo xtask dist --sign`, against
                      the OpenPGP public keys in KEYFILE (armoured or binary,
                      such as a repository's kubedist.asc or kubedist.gpg;
                      several concatenated, as during a key rotation: any
                      one of them may have signed),
                      with gpgv, else sqv; refuse a missing, bad or foreign
                      signature, and refuse to go on when neither tool is
                      installed. Without it the signature is not checked
  -h, --help          this text

Before anything is written, every file of the tarball is checked against
SHA256SUMS (offline), and every file must be listed there: a changed, missing
or extra file stops the installer with nothing written. With --verify-key,
SHA256SUMS itself is checked first against its signature (SHA256SUMS.asc).

Init system (first rule that applies): --init; the one recorded by an earlier
install here; the running one (/run/systemd/system: systemd;
/run/openrc/softlevel: OpenRC; a runit or runsvdir process: runit); the only
one installed (systemd, openrc-run, runsvdir). Several installed and none
running: pass --init. With --prefix only installed files count.

Family (first rule that applies, the same rule kubelet-wrapper follows):
--family; the one recorded earlier; the family whose env file exists when
exactly one of @DEB_ENV_FILE@ and @RPM_ENV_FILE@ does; deb if
@DEB_MARKER@ exists; rpm if @RPM_MARKER_DIR@ exists; deb.

Files are written to a temporary file beside their destination
(.NAME.kubedist-tmp, always created anew), given their mode, then renamed
over it, so a reader never sees half a file. A failed run removes its
temporary files; those of a killed run are removed by the next run and by
uninstall. A config file you edited (one whose content differs from what
install.sh last installed) is never overwritten: the new default lands beside
it as FILE.new and the installer says so; an unedited one follows the new
release. What was installed, with its sha256, is recorded in
/var/lib/kubedist/install.manifest; uninstall removes exactly that: edited
configs are kept (with a note), directories install.sh created are removed
when empty, and nothing else is touched (third-party plugins in /opt/cni/bin
stay).

A run that changes nothing says "nothing to do" and touches no service. An
interrupted run (killed, power loss) leaves a journal in /var/lib/kubedist;
run install.sh again and it completes the install. Its lock
(/var/lib/kubedist/lock) records the pid, the boot and the start time of its
process: a lock whose process is gone, whose pid now belongs to another
process, or that is from an earlier boot is taken over (with a note).

It refuses, with one line naming the file and nothing changed:
  - a path through a symlink that leads outside the root: a symlink on the
    way to a file it writes or removes is followed only if it resolves
    inside the root (as /bin -> usr/bin does on a merged-/usr system); with
    --prefix that is the prefix, on / every symlink resolves inside it.
    Its state files (install.manifest, install.journal) are never symlinks:
    one there is refused, never read or written through
  - a line of its install manifest or journal that names a path this
    release does not install (only those paths, their directories and
    FILE.new are ever removed)
  - a file it did not install where it installs one (a package's file, a
    vendor's plugin of the same name): it names the owner; --replace-foreign
    replaces it and keeps the original as
    /var/lib/kubedist/displaced/PATH, restored on uninstall. A config file
    that is not its own is kept, and the new default put beside it as .new
  - a package-manager install of the same components (dpkg or rpm says
    kubelet, kubeadm, ... is installed): remove those packages first, or
    keep using them. --kubelet-only is allowed beside them
  - a dpkg or rpm database it cannot read (it could not tell whether those
    packages are installed): --ignore-package-db installs anyway

Service (only when that init system is running here and no --prefix is given;
otherwise the commands to run are printed):
  systemd   systemctl daemon-reload; systemctl enable kubelet; started
            (restarted on upgrade, --no-block) only once /var/lib/kubelet/config.yaml
            exists: kubeadm init/join starts it
  openrc    rc-update add kubelet default; rc-service kubelet start (restart
            on upgrade); kubelet-wrapper waits for kubeadm's config
  runit     a link /etc/sv/kubelet in the service directory (/var/service,
            /etc/service, /run/runit/service or /etc/runit/runsvdir/default,
            or the one a running runsvdir watches); sv restart on upgrade.
            kubeadm cannot restart a runit service: after `kubeadm upgrade`,
            run `sv restart kubelet`.

Kernel prerequisites (/usr/lib/modules-load.d/kubernetes.conf and
/usr/lib/sysctl.d/60-kubernetes.conf, or files of the same name in /etc or
/run): the boot applies them; after a change install.sh also loads the
modules (modprobe) and applies the settings (sysctl -p) at once, but only on
a running host: not with --prefix, not in a chroot (/ is not PID 1's root,
or /proc/1/root cannot be read, as in an image build), not in a container.
One line says what was applied, or skipped and why; it never fails the
install.

Exit status: 0 done, 1 error (one line on stderr), 2 bad usage.
EOF
}

die() {
	printf '%s: error: %s\n' "$prog" "$*" >&2
	exit 1
}
usage_error() {
	printf '%s: %s (see --help)\n' "$prog" "$*" >&2
	exit 2
}
say() { printf '%s: %s\n' "$prog" "$*"; }

# ---------------------------------------------------------------------------
# Command line

action=
opt_init=
opt_family=
opt_prefix=${DESTDIR:-}
opt_service_dir=
opt_kubelet_version=
dry_run=
no_enable=
no_start=
kubelet_only=
opt_runtime=
then_carried=
opt_images=
opt_image_repository=
replace_foreign=
downgrade=
ignore_package_db=
verify_key=

# image_repository_ok REPO : whether REPO is a repository kubeadm could be
# given as imageRepository: a registry host (with a port, maybe) and path
# components, lower case, no tag or digest.
# (kubedist-images has the same function; a tidy test keeps them one text.)
image_repository_ok() {
	printf '%s\n' "$1" | LC_ALL=C grep -Eqx '[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*'
}

need_value() {
	if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "$1 needs a value"; fi
}

while [ $# -gt 0 ]; do
	case $1 in
	install | uninstall)
		[ -z "$action" ] || usage_error "one action only, not '$action' and '$1'"
		action=$1
		;;
	--init=* | --family=* | --prefix=* | --service-dir=* | --kubelet-version=* | --verify-key=* | --images=*)
		value=${1#*=}
		name=${1%%=*}
		shift
		set -- "$name" "$value" "$@"
		continue
		;;
	--init)
		need_value "$@"
		opt_init=$2
		shift
		;;
	--family)
		need_value "$@"
		opt_family=$2
		shift
		;;
	--prefix)
		need_value "$@"
		opt_prefix=$2
		shift
		;;
	--service-dir)
		need_value "$@"
		opt_service_dir=$2
		shift
		;;
	--kubelet-version)
		need_value "$@"
		opt_kubelet_version=$2
		shift
		;;
	--verify-key)
		need_value "$@"
		verify_key=$2
		shift
		;;
	--images)
		need_value "$@"
		opt_images=$2
		shift
		;;
	--image-repository)
		need_value "$@"
		opt_image_repository=$2
		shift
		;;
	--dry-run) dry_run=1 ;;
	--no-enable) no_enable=1 ;;
	--no-start) no_start=1 ;;
	--kubelet-only) kubelet_only=1 ;;
	--runtime) opt_runtime=1 ;;
	--then-carried) then_carried=1 ;;
	--replace-foreign) replace_foreign=1 ;;
	--downgrade) downgrade=1 ;;
	--ignore-package-db) ignore_package_db=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
action=${action:-install}
if [ -n "$opt_images" ]; then
	[ "$action" = install ] || usage_error "--images is for install; uninstall removes the bundle with everything else"
	[ -z "$kubelet_only" ] || usage_error "--images and --kubelet-only install different things: one at a time"
fi
if [ -n "$opt_runtime" ]; then
	[ -z "$kubelet_only$opt_images" ] || usage_error "--runtime, --images and --kubelet-only install different things: one at a time"
fi
if [ -n "$opt_image_repository" ]; then
	if [ "$action" != install ] || [ -n "$kubelet_only" ] || { [ -n "$opt_runtime" ] && [ -z "$then_carried" ]; }; then
		usage_error "--image-repository goes with --images (or a tarball that carries its bundle)"
	fi
	image_repository_ok "$opt_image_repository" ||
		usage_error "--image-repository $opt_image_repository: not an image repository (registry.example.internal/k8s: a host, maybe a port, a path; no tag)"
fi

case $opt_init in
'' | systemd | openrc | runit) ;;
*) usage_error "--init must be systemd, openrc or runit, not '$opt_init'" ;;
esac
case $opt_family in
'' | deb | rpm) ;;
*) usage_error "--family must be deb or rpm, not '$opt_family'" ;;
esac

# root: the target root with no trailing slash ("" for /).
root=${opt_prefix%/}
case $opt_prefix in
'') ;;
/*) [ -d "$opt_prefix" ] || die "--prefix $opt_prefix: not a directory" ;;
*) usage_error "--prefix must be an absolute path, not '$opt_prefix'" ;;
esac
[ "$root" = / ] && root=
# The root with every symlink resolved: where "inside the root" ends.
root_phys=$(cd "${root:-/}" && pwd -P) || die "cannot enter $root"

if [ -z "$dry_run" ] && [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
	die "run as root (or try --dry-run, or --prefix DIR)"
fi

# The unpacked tarball: the directory of this script.
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || die "cannot enter the directory of $0"

# State, as host paths (without the root) and as paths on this system.
state_dir=/var/lib/kubedist
images_dir=$state_dir/images
# kubedist-images' settings (--image-repository), kept with the bundles.
images_conf=/etc/kubedist/images.conf
state=$root$state_dir
manifest=$state/install.manifest
journal=$state/install.journal
lock=$state/lock

work=$(mktemp -d "${TMPDIR:-/tmp}/kubedist-install.XXXXXX") ||
	die "cannot create a temporary directory in ${TMPDIR:-/tmp}"
locked=
# The temporary file being written, if any: a failed run removes it.
cur_tmp=
cleanup() {
	if [ -n "$cur_tmp" ]; then rm -f "$cur_tmp"; fi
	rm -rf "$work"
	if [ -n "$locked" ]; then rm -rf "$lock"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# ---------------------------------------------------------------------------
# Small helpers

sha256_of() { sha256sum <"$1" | cut -c1-64; }

# mode_of FILE: its permission bits as "755".
mode_of() { stat -c %a "$1"; }

# same_mode WANTED(0755) ACTUAL(755)
same_mode() { [ "$(printf '%o' "$1")" = "$(printf '%o' "0$2")" ]; }

# A path we accept in MANIFEST and SHA256SUMS and write to: letters, digits,
# . _ + @ - and /, no empty, "." or ".." component. dist stages files by the
# same rule (stage.rs, check_path; a tidy test runs both on the same cases).
safe_path() {
	case $1 in
	'' | . | .. | *[!A-Za-z0-9._+@/-]* | *//* | */./* | */../* | */. | */.. | ./* | ../*) return 1 ;;
	esac
}

# The last words of the error a command wrote to $work/err ("No space left
# on device"), so that a failure is reported in one line of our own.
reason() { sed -n '$s/.*: //p' "$work/err"; }

# The first two lines of a tool's error message in FILE, as one line.
first_words() { head -n 2 "$1" | tr -s '\n\t ' '   ' | sed 's/ *$//'; }

# Whether PATH exists, as anything (a dangling symlink too).
present() { [ -e "$1" ] || [ -L "$1" ]; }

# kernel_apply: pkg/scripts/kernel-apply, written once for this installer and
# the kubelet package's scripts; `cargo xtask dist` puts it here.
@KERNEL_APPLY@

# ---------------------------------------------------------------------------
# The path rule, for every host path install.sh writes, removes or reads its
# state from: it is a safe path (no "..", so it is inside the root as
# written), and each of its components that exists is a directory or file
# or a symlink that resolves inside the root. A symlink on the way is
# followed only then: /bin -> usr/bin on a merged-/usr root is, a link to
# another tree is not. On / every symlink resolves inside the root.
check_path() { # HOST-PATH (without the root)
	case $1 in /*) ;; *) die "$root$1: refusing a relative path" ;; esac
	safe_path "$1" || die "$root$1: refusing the path"
	cp_rest=${1#/}
	cp_at=$root
	while [ -n "$cp_rest" ]; do
		cp_at=$cp_at/${cp_rest%%/*}
		case $cp_rest in
		*/*) cp_rest=${cp_rest#*/} ;;
		*) cp_rest= ;;
		esac
		if [ -L "$cp_at" ]; then
			[ -n "$root" ] || continue
			cp_to=$(readlink -f "$cp_at" 2>/dev/null) || cp_to=
			case $cp_to in
			"$root_phys" | "$root_phys"/*) ;;
			*) die "$cp_at: a symlink to ${cp_to:-$(readlink "$cp_at")}, outside $root; refusing to follow it" ;;
			esac
		elif [ ! -e "$cp_at" ]; then
			return 0 # the rest does not exist yet
		fi
	done
}

# Writes SRCFILE's content with MODE to FILE (a path on this system): into a
# temporary file beside it, created anew (never an existing file or symlink
# written through), then renamed over FILE. One line on failure; the
# temporary file goes with the exit trap.
write_new() { # SRCFILE MODE FILE
	wn_tmp=${3%/*}/.${3##*/}.kubedist-tmp
	rm -f "$wn_tmp" 2>"$work/err" || die "$wn_tmp: cannot remove the leftover of an earlier run: $(reason)"
	cur_tmp=$wn_tmp
	# set -C: the shell creates it with O_EXCL, so nothing planted there is
	# written through.
	(set -C && cat "$1" >"$wn_tmp") 2>"$work/err" || die "$3: cannot write: $(reason)"
	chmod "$2" "$wn_tmp" 2>"$work/err" || die "$3: cannot set mode $2: $(reason)"
	mv -f "$wn_tmp" "$3" 2>"$work/err" || die "$3: cannot rename $wn_tmp over it: $(reason)"
	cur_tmp=
}

# ---------------------------------------------------------------------------
# 1. The tarball: checked before anything on the host is touched.

# --verify-key KEYFILE: SHA256SUMS.asc must be a good signature of
# SHA256SUMS by a key in KEYFILE, which may hold several (a rotation: the old
# and the new key concatenated, armoured or binary), as gpgv's keyrings do.
# gpgv reads binary keyrings only: each armoured block is decoded into one in
# our temporary directory first (sqv reads either).
verify_signature() { # DIR: the directory of SHA256SUMS and its signature
	sig=$1/SHA256SUMS.asc
	if [ "$1" = "$here" ]; then vs_what=SHA256SUMS vs_whose="this tarball"; else vs_what=$1/SHA256SUMS vs_whose="the dist output $1"; fi
	[ -f "$verify_key" ] || die "$verify_key: no such key file (--verify-key)"
	[ -f "$sig" ] || die "$sig: missing: $vs_whose is not signed; refusing it (--verify-key)"
	[ -f "$1/SHA256SUMS" ] || die "$1/SHA256SUMS: missing (run install.sh from the unpacked kubedist tarball)"
	if command -v gpgv >/dev/null 2>&1 && [ -f "$work/keyring.gpg" ]; then
		: # the keyring was read for an earlier signature of this run
	elif command -v gpgv >/dev/null 2>&1; then
		if grep -q '^-----BEGIN PGP PUBLIC KEY BLOCK-----' "$verify_key"; then
			# One file of base64 per armoured block (the last line of each,
			# "=XXXX", is its checksum), each decoded on its own: their
			# padding does not concatenate.
			mkdir "$work/armour"
			awk -v dir="$work/armour" '
				/^-----BEGIN PGP PUBLIC KEY BLOCK-----/ { n++; inside = 1; headers = 1; next }
				/^-----END PGP PUBLIC KEY BLOCK-----/ { inside = 0; next }
				inside && headers { if ($0 ~ /^[ \t\r]*$/) headers = 0; next }
				inside && !/^=/ { gsub(/\r/, ""); print > (dir "/" n) }' "$verify_key"
			: >"$work/keyring.gpg"
			for block in "$work"/armour/*; do
				[ -f "$block" ] || die "$verify_key: not a readable OpenPGP public key (--verify-key)"
				base64 -d <"$block" >>"$work/keyring.gpg" 2>"$work/err" ||
					die "$verify_key: not a readable OpenPGP public key (--verify-key)"
			done
		else
			cat "$verify_key" >"$work/keyring.gpg"
		fi
	fi
	if command -v gpgv >/dev/null 2>&1; then
		[ -d "$work/gnupg" ] || mkdir -m 700 "$work/gnupg"
		if ! GNUPGHOME=$work/gnupg gpgv --keyring "$work/keyring.gpg" "$sig" "$1/SHA256SUMS" >"$work/gpgv" 2>&1; then
			why=$(grep -m 1 -e 'BAD signature' -e "Can't check" -e 'no valid OpenPGP' "$work/gpgv" | sed 's/^gpgv: //')
			die "$sig: not a good signature of SHA256SUMS by the key in $verify_key (${why:-$(first_words "$work/gpgv")}); nothing was installed"
		fi
		tool=gpgv
	elif command -v sqv >/dev/null 2>&1; then
		if ! sqv --keyring "$verify_key" "$sig" "$1/SHA256SUMS" >"$work/sqv" 2>&1; then
			die "$sig: not a good signature of SHA256SUMS by the key in $verify_key ($(first_words "$work/sqv")); nothing was installed"
		fi
		tool=sqv
	else
		die "--verify-key: neither gpgv nor sqv is installed, so $sig cannot be checked; install one (gnupg's gpgv, or sqv) or leave out --verify-key"
	fi
	say "$vs_what: good signature by the key in $verify_key ($tool)"
}

verify_tarball() {
	[ -z "$verify_key" ] || verify_signature "$here"
	sums=$here/SHA256SUMS
	[ -f "$sums" ] || die "$sums: missing (run install.sh from the unpacked kubedist tarball)"
	[ -f "$here/MANIFEST" ] || die "$here/MANIFEST: missing (run install.sh from the unpacked kubedist tarball)"

	bad=$(awk '!/^[0-9a-f]+  [^ ]+$/ || length($1) != 64 { print NR; exit }' "$sums")
	[ -z "$bad" ] || die "$sums line $bad: not 'SHA256  PATH'"
	awk '{ print $2 }' "$sums" | sort >"$work/listed"
	while IFS= read -r p; do
		case $p in /*) die "$sums: refusing the absolute path '$p'" ;; esac
		safe_path "$p" || die "$sums: refusing the path '$p'"
	done <"$work/listed"
	dup=$(uniq -d "$work/listed" | head -n 1)
	[ -z "$dup" ] || die "$sums: $dup is listed twice"

	# Every file of the tarball must be listed: an extra file is refused.
	# (SHA256SUMS.asc, dist --sign's signature of SHA256SUMS, is not listed in it.)
	(cd "$here" && find . ! -type d) | sed 's|^\./||' | grep -vxF -e SHA256SUMS -e SHA256SUMS.asc | sort >"$work/present"
	extra=$(awk 'NR == FNR { listed[$0] = 1; next } !($0 in listed)' "$work/listed" "$work/present" | head -n 1)
	[ -z "$extra" ] || die "$here/$extra: not listed in SHA256SUMS; refusing a tarball with unknown files"
	odd=$(cd "$here" && find . ! -type d ! -type f | head -n 1)
	[ -z "$odd" ] || die "$here/${odd#./}: not a regular file; refusing"
	grep -qx MANIFEST "$work/listed" || die "$sums: MANIFEST is not listed"
	# The images bundle the tarball carries (dist --carry-images), if any.
	carried=$(grep '^images/' "$work/listed" || true)
	case $carried in
	'') ;;
	images/kubedist-images-*.oci.tar)
		[ "$(grep -c '^images/' "$work/listed")" = 1 ] ||
			die "$sums: images/ holds more than one images bundle; refusing"
		;;
	*) die "$sums: $(echo "$carried" | head -n 1) is not an images bundle (images/kubedist-images-<version>-<arch>.oci.tar); refusing" ;;
	esac

	if ! (cd "$here" && sha256sum -c "$sums") >"$work/check" 2>&1; then
		failed=$(grep -v ': OK$' "$work/check" | head -n 1)
		die "$here: checksum verification failed (${failed:-see sha256sum -c SHA256SUMS}); the tarball is damaged or was changed, nothing was installed"
	fi
	awk '{ print $2 "\t" $1 }' "$sums" >"$work/sums"

	# MANIFEST: family init kind mode package path, tab-separated.
	awk -F "$tab" -v q="'" '
		/^#/ || /^$/ { next }
		function bad(why) { printf "MANIFEST line %d: %s\n", NR, why; exit }
		NF != 6 { bad("expected 6 tab-separated fields, found " NF) }
		$1 !~ /^(any|deb|rpm)$/ { bad("family " q $1 q " is not any, deb or rpm") }
		$2 !~ /^(any|systemd|openrc|runit)$/ { bad("init " q $2 q " is not any, systemd, openrc or runit") }
		$3 !~ /^(file|config|dir)$/ { bad("kind " q $3 q " is not file, config or dir") }
		$4 !~ /^[0-7][0-7][0-7][0-7]$/ { bad("mode " q $4 q " is not four octal digits") }
		$5 !~ /^[a-z0-9][a-z0-9.+-]*$/ { bad("package " q $5 q " is not a package name") }
		$6 !~ /^\// { bad("path " q $6 q " is not absolute") }
	' "$here/MANIFEST" >"$work/bad"
	[ ! -s "$work/bad" ] || die "$here/$(cat "$work/bad")"
	grep -v -e '^#' -e '^$' "$here/MANIFEST" >"$work/entries" || true
	[ -s "$work/entries" ] || die "$here/MANIFEST: no entries"
	# Where each file entry's content is (lines: family init path payload):
	# payload/FAMILY/PATH, or payload/FAMILY.INIT/PATH where the MANIFEST
	# has the path for the family under several init systems (the tarball's
	# writer follows the same rule).
	awk -F "$tab" -v OFS="$tab" '
		$3 == "dir" { next }
		{ n++; fam[n] = $1; ini[n] = $2; p[n] = $6; if (!seen[$1, $6, $2]++) inits[$1, $6]++ }
		END {
			for (i = 1; i <= n; i++) {
				d = inits[fam[i], p[i]] > 1 ? fam[i] "." ini[i] : fam[i]
				print fam[i], ini[i], p[i], "payload/" d p[i]
			}
		}' "$work/entries" >"$work/payload-of"
	while IFS=$tab read -r _ _ _ _ _ path; do
		safe_path "$path" || die "$here/MANIFEST: refusing the path '$path'"
	done <"$work/entries"
	while IFS=$tab read -r _ _ _ file; do
		grep -qxF -- "$file" "$work/listed" ||
			die "$here/MANIFEST: $file is missing from the tarball"
	done <"$work/payload-of"
	# ... and every payload file belongs to an entry.
	cut -f4 "$work/payload-of" | sort >"$work/payload"
	stray=$(grep '^payload/' "$work/listed" |
		awk 'NR == FNR { known[$0] = 1; next } !($0 in known)' "$work/payload" - | head -n 1)
	[ -z "$stray" ] || die "$here/$stray: no MANIFEST entry installs it; refusing"
}

# The tarball's file that holds the content of the entry FAMILY INIT PATH.
payload_of() { # FAMILY INIT PATH
	awk -F "$tab" -v f="$1" -v i="$2" -v p="$3" '$1 == f && $2 == i && $3 == p { print $4; exit }' "$work/payload-of"
}

# The sha256 of a tarball file (relative path), from the verified list.
sum_of() { awk -F "$tab" -v p="$1" '$1 == p { print $2; exit }' "$work/sums"; }

# ---------------------------------------------------------------------------
# 2. What is installed already: the manifest plus the journal of an
#    interrupted run. Lines: set kind mode sha256 path (tab-separated), kinds
#    file, config, new (a FILE.new we wrote), dir (a directory we created),
#    link (runit's service link; sha256 holds its target), displaced (a file
#    that was there before, kept in $state_dir/displaced; mode and sha256
#    are "-"). "@key value" lines carry the family and init system.
#    Sets: main, kubelet-vX.Y.Z (--kubelet-only), images (--images),
#    runtime (--runtime), state (the state directory's parents that
#    install.sh created).

# The state directory and its files obey the path rule, and the manifest and
# journal are plain files: install.sh never makes a symlink there, so one
# is refused rather than read or written through.
check_state() {
	check_path "$state_dir"
	for f in "$manifest" "$journal"; do
		check_path "${f#"$root"}"
		if [ -L "$f" ]; then
			die "$f: a symlink (install.sh never makes one there); refusing to read or write through it"
		fi
		if [ -e "$f" ] && [ ! -f "$f" ]; then die "$f: not a regular file; refusing"; fi
	done
	had_journal=
	if [ -f "$journal" ]; then had_journal=1; fi
}

# The other name of a host path on a merged-/usr root, where /lib/x and
# /usr/lib/x are the same file (likewise bin, sbin, lib32, lib64, libx32),
# as the awk function usr_alias(p): "" where it has none. One rule for
# known_paths and the shell's usr_alias.
usr_alias_awk='
	function usr_alias(p) {
		if (p ~ /^\/usr\/(bin|sbin|lib|lib32|lib64|libx32)(\/|$)/) return substr(p, 5)
		if (p ~ /^\/(bin|sbin|lib|lib32|lib64|libx32)(\/|$)/) return "/usr" p
		return ""
	}'

# The other name of host path PATH on a merged-/usr root; PATH itself where
# it has none.
usr_alias() { # PATH
	awk "$usr_alias_awk"' BEGIN { a = usr_alias(ARGV[1]); print (a == "" ? ARGV[1] : a) }' "$1"
}

# The paths a record may name: those of this release's MANIFEST (for any
# family and init system), FILE.new of its configs, every directory above
# them and the state directory's parents. Lines: kind (file, new, dir) and
# path. Side-by-side kubelets (/opt/kubernetes/vX.Y.Z) are matched by set.
known_paths() {
	{
		# Each path by its other name on a merged-/usr root too: an earlier
		# release's records name the deb family's units under /lib, this
		# one's under /usr/lib.
		awk -F "$tab" "$usr_alias_awk"'
			function known(kind, p) { print kind "\t" p; if (usr_alias(p) != "") print kind "\t" usr_alias(p) }
			function parents(p) { while (sub(/\/[^\/]*$/, "", p) && p != "") known("dir", p) }
			$3 == "dir" { known("dir", $6) }
			$3 != "dir" { known("file", $6) }
			$3 == "config" { known("new", $6 ".new") }
			{ parents($6) }
		' "$work/entries"
		d=${state_dir%/*}
		while [ -n "$d" ]; do
			printf 'dir\t%s\n' "$d"
			d=${d%/*}
		done
	} | sort -u >"$work/known"
}

# Checks every line of an install manifest or journal: a record naming
# anything but a known path (or a malformed one) stops install.sh before it
# removes or writes anything.
check_records() { # FILE
	awk -F "$tab" -v q="'" -v im="$images_dir" -v conf="$images_conf" -v confdir="${images_conf%/*}" '
		NR == FNR { known[$1 SUBSEP $2] = 1; next }
		function bad(why) { printf "line %d: %s\n", FNR, why; exit }
		function octal(m) { return m ~ /^[0-7][0-7][0-7][0-7]$/ }
		function sha(s) { return s ~ /^[0-9a-f]+$/ && length(s) == 64 }
		/^#/ || /^$/ { next }
		/^@/ {
			if ($0 !~ /^@family (deb|rpm)$/ && $0 !~ /^@init (systemd|openrc|runit)$/ &&
				$0 !~ /^@release [0-9]+\.[0-9]+\.[0-9]+(-[a-z]+\.[0-9]+)?-[0-9]+$/)
				bad("not @family deb|rpm, @init systemd|openrc|runit or @release X.Y.Z-N")
			next
		}
		NF != 5 { bad("expected 5 tab-separated fields, found " NF) }
		{ set = $1; kind = $2; mode = $3; sum = $4; p = $5 }
		set != "main" && set != "state" && set != "images" && set != "runtime" && set !~ /^kubelet-v[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$/ {
			bad("set " q set q " is not main, state, images, runtime or kubelet-vX.Y.Z")
		}
		p !~ /^\/[A-Za-z0-9._+@\/-]+$/ || p ~ /\/\// || p ~ /\/\.\.?\// || p ~ /\/\.\.?$/ {
			bad(q p q " is not a plain absolute path")
		}
		# A side-by-side kubelet: its file and the directories above it.
		{
			own = ""
			if (set ~ /^kubelet-/) own = "/opt/kubernetes/" substr(set, 9) "/bin/kubelet"
		}
		# The images bundle and its SHA256SUMS, in their directory, and the
		# settings file of kubedist-images.
		set == "images" {
			if (kind == "file" && (p == im "/SHA256SUMS" || p ~ ("^" im "/kubedist-images-[A-Za-z0-9._+-]+[.]oci[.]tar$") || p == conf) && octal(mode) && sha(sum)) next
			if (kind == "dir" && (p == im || p == confdir) && octal(mode) && sum == "-") next
			bad(q p q " is not a file or directory of the images bundle")
		}
		kind == "file" || kind == "config" || kind == "displaced" {
			if (!(known["file", p] || (own != "" && p == own)))
				bad(q p q " is not a file this release installs")
			if (kind == "displaced") {
				if (mode != "-" || sum != "-") bad("a displaced record has - as mode and sha256")
			} else if (!octal(mode) || !sha(sum)) bad("mode or sha256 malformed")
			next
		}
		kind == "new" {
			if (!known["new", p]) bad(q p q " is not a FILE.new this release installs")
			if (!octal(mode) || !sha(sum)) bad("mode or sha256 malformed")
			next
		}
		kind == "dir" {
			if (!(known["dir", p] || (own != "" && index(own, p "/") == 1)))
				bad(q p q " is not a directory this release installs")
			if (!octal(mode) || sum != "-") bad("mode or sha256 malformed")
			next
		}
		kind == "link" {
			# runit service links: the kubelet (main) and containerd (runtime).
			svc = set == "main" ? "kubelet" : set == "runtime" ? "containerd" : ""
			if (svc == "" || p !~ ("/" svc "$") || mode != "-" || sum != "/etc/sv/" svc)
				bad("a link record is main or runtime, a path ending in /kubelet or /containerd, - and /etc/sv/kubelet or /etc/sv/containerd")
			next
		}
		{ bad("kind " q kind q " is not file, config, new, dir, link or displaced") }
	' "$work/known" "$1" >"$work/bad"
	[ ! -s "$work/bad" ] || die "$1 $(cat "$work/bad"); refusing it, nothing was changed"
}

load_installed() {
	: >"$work/old"
	for f in "$manifest" "$journal"; do
		[ -f "$f" ] || continue
		check_records "$f"
		grep -v -e '^#' -e '^@' -e '^$' "$f" >>"$work/old" || true
	done
	# The last record of a path wins (the journal is newer than the
	# manifest); a displaced original is recorded beside its path's record.
	awk -F "$tab" '{ k = $1 SUBSEP $5 SUBSEP ($2 == "displaced"); last[k] = $0; order[NR] = k }
		END { for (i = 1; i <= NR; i++) if (last[order[i]] != "") { print last[order[i]]; last[order[i]] = "" } }' \
		"$work/old" >"$work/old.tmp"
	mv "$work/old.tmp" "$work/old"
}

recorded() { # KEY: a "@KEY value" of the manifest
	[ -f "$manifest" ] || return 0
	awk -v k="@$1" '$1 == k { print $2; exit }' "$manifest"
}

# version_older A B : whether Kubernetes version A (X.Y.Z[-PRE.N]) comes
# before B: by number, a pre-release before its release (alpha, beta, rc).
# (kubedist-images has the same function; a tidy test keeps them one text.)
version_older() {
	LC_ALL=C awk -v a="$1" -v b="$2" '
		function key(v,  pre, n, x) {
			pre = "~"
			n = 0
			if (v ~ /-/) {
				pre = v
				sub(/^[^-]*-/, "", pre)
				sub(/-.*/, "", v)
				n = pre
				sub(/^[a-z]*\./, "", n)
				sub(/\..*/, "", pre)
			}
			split(v, x, ".")
			return sprintf("%09d.%09d.%09d.%s.%09d", x[1], x[2], x[3], pre, n)
		}
		BEGIN { exit !(key(a) < key(b)) }'
}

# release_older A B : whether release A (VERSION-REVISION) comes before B:
# by version, then by revision.
release_older() {
	version_older "${1%-*}" "${2%-*}" ||
		{ [ "${1%-*}" = "${2%-*}" ] && [ "${1##*-}" -lt "${2##*-}" ]; }
}

old_record() { # SET PATH -> "kind mode sha256" of an earlier record, if any
	awk -F "$tab" -v s="$1" -v p="$2" '$1 == s && $5 == p && $2 != "displaced" { print $2 "\t" $3 "\t" $4; exit }' "$work/old"
}

# ---------------------------------------------------------------------------
# 3. The host: init system, family, package-manager installs.

runsvdir_pids() {
	for c in /proc/[0-9]*/comm; do
		[ -r "$c" ] || continue
		[ "$(cat "$c" 2>/dev/null)" = runsvdir ] && { p=${c%/comm}; echo "${p#/proc/}"; }
	done
	return 0
}

init_running() { # NAME
	[ -z "$root" ] || return 1
	case $1 in
	systemd) [ -d /run/systemd/system ] ;;
	openrc) [ -f /run/openrc/softlevel ] ;;
	runit)
		[ "$(cat /proc/1/comm 2>/dev/null)" = runit ] || [ -n "$(runsvdir_pids)" ]
		;;
	esac
}

init_installed() { # NAME
	case $1 in
	systemd) [ -x "$root/lib/systemd/systemd" ] || [ -x "$root/usr/lib/systemd/systemd" ] ;;
	openrc) [ -x "$root/sbin/openrc-run" ] || [ -x "$root/usr/sbin/openrc-run" ] || [ -x "$root/usr/bin/openrc-run" ] ;;
	runit) [ -x "$root/usr/bin/runsvdir" ] || [ -x "$root/sbin/runsvdir" ] || [ -x "$root/usr/sbin/runsvdir" ] || [ -x "$root/bin/runsvdir" ] ;;
	esac
}

detect_init() {
	if [ -n "$opt_init" ]; then
		init=$opt_init how="--init"
		return
	fi
	init=$(recorded init)
	if [ -n "$init" ]; then
		how="recorded by the earlier install"
		return
	fi
	for i in systemd openrc runit; do
		if init_running "$i"; then
			init=$i how="running"
			return
		fi
	done
	found=
	for i in systemd openrc runit; do
		init_installed "$i" && found="${found:+$found, }$i"
	done
	case $found in
	'') die "no init system found${root:+ in $root} (systemd, OpenRC or runit); pass --init" ;;
	*,*) die "several init systems are installed${root:+ in $root} ($found) and none is running; pass --init" ;;
	esac
	init=$found how="installed"
}

# The family rule of pkg/families.toml ([detect]), which kubelet-wrapper
# follows too: the family named, the one whose env file exists when exactly
# one does, deb on a Debian host, rpm where @RPM_MARKER_DIR@ exists, else deb.
detect_family() {
	if [ -n "$opt_family" ]; then
		family=$opt_family fhow="--family"
		return
	fi
	family=$(recorded family)
	if [ -n "$family" ]; then
		fhow="recorded by the earlier install"
		return
	fi
	fhow="found"
	deb_env='' rpm_env=''
	[ ! -e "$root@DEB_ENV_FILE@" ] || deb_env=1
	[ ! -e "$root@RPM_ENV_FILE@" ] || rpm_env=1
	if [ -n "$deb_env" ] && [ -z "$rpm_env" ]; then
		family=deb
	elif [ -n "$rpm_env" ] && [ -z "$deb_env" ]; then
		family=rpm
	elif [ -f "$root@DEB_MARKER@" ]; then
		family=deb
	elif [ -d "$root@RPM_MARKER_DIR@" ]; then
		family=rpm
	else
		family=deb
	fi
}

# Components another package manager already installed: refuse to mix.
# Prints " NAME (dpkg: STATUS)" or " NAME (rpm)" for each. A database that
# cannot be read stops install.sh (fail closed): it could not tell.
package_manager_installs() { # PACKAGE...
	[ -z "$ignore_package_db" ] || return 0
	db_help="cannot tell whether $(echo "$@" | sed 's/ /, /g') are installed by it: repair it, or pass --ignore-package-db to install anyway"
	if [ -f "$root/var/lib/dpkg/status" ]; then
		if command -v dpkg-query >/dev/null 2>&1; then
			# Exit status 1 is "no packages found matching": not an error.
			st=0
			# shellcheck disable=SC2016 # a dpkg-query format, not shell
			dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Package}\t${db:Status-Status}\n' "$@" \
				>"$work/dpkg" 2>"$work/err" || st=$?
			if [ "$st" -gt 1 ] || grep -qv '^dpkg-query: no packages found matching ' "$work/err"; then
				die "$root/var/lib/dpkg/status: the dpkg database cannot be read ($(first_words "$work/err")); $db_help"
			fi
		else
			[ -r "$root/var/lib/dpkg/status" ] ||
				die "$root/var/lib/dpkg/status: cannot be read; $db_help"
			awk -v list=" $* " '
				/^Package: / { pkg = $2 }
				/^Status: / && index(list, " " pkg " ") { print pkg "\t" $4 }' \
				"$root/var/lib/dpkg/status" >"$work/dpkg"
		fi
		while IFS=$tab read -r p st; do
			case $st in '' | not-installed | config-files) ;; *) printf ' %s (dpkg: %s)' "$p" "$st" ;; esac
		done <"$work/dpkg"
	fi
	if command -v rpm >/dev/null 2>&1 &&
		{ [ -d "$root/var/lib/rpm" ] || [ -d "$root/usr/lib/sysimage/rpm" ]; }; then
		# One line per package: its name, or "package NAME is not
		# installed"; anything on stderr is the database failing.
		rpm --root "${root:-/}" -q --qf '%{NAME}\n' "$@" >"$work/rpm" 2>"$work/err" || true
		if [ -s "$work/err" ]; then
			die "${root:-/}: the rpm database cannot be read ($(first_words "$work/err")); $db_help"
		fi
		for p in "$@"; do
			if grep -qxF -- "$p" "$work/rpm"; then printf ' %s (rpm)' "$p"; fi
		done
	fi
	return 0
}

# Whether host paths A and B, two names, are one file: the same name in one
# directory reached through a linked one (a merged-/usr root's /lib/x and
# /usr/lib/x).
same_file() { # A B
	[ "$1" != "$2" ] && [ "${1##*/}" = "${2##*/}" ] && [ -e "$root$1" ] || return 1
	sf_a=$(cd -P "$root${1%/*}" 2>/dev/null && pwd) || return 1
	sf_b=$(cd -P "$root${2%/*}" 2>/dev/null && pwd) || return 1
	[ "$sf_a" = "$sf_b" ]
}

# The package that owns host path PATH, as "the Debian package NAME" or
# "the RPM package NAME"; nothing if none does (or none can tell).
package_owner() { # PATH
	# dpkg lists a file under the name its package ships.
	po_alias=$(usr_alias "$1")
	if [ -d "$root/var/lib/dpkg/info" ]; then
		po_list=$(grep -lxF -e "$1" -e "$po_alias" "$root"/var/lib/dpkg/info/*.list 2>/dev/null | head -n 1) || po_list=
		if [ -n "$po_list" ]; then
			po_name=${po_list##*/}
			po_name=${po_name%.list}
			echo "the Debian package ${po_name%%:*}"
			return 0
		fi
	fi
	if command -v rpm >/dev/null 2>&1 &&
		{ [ -d "$root/var/lib/rpm" ] || [ -d "$root/usr/lib/sysimage/rpm" ]; }; then
		po_name=$(rpm --root "${root:-/}" -qf --qf '%{NAME}\n' "$1" 2>/dev/null | head -n 1) || po_name=
		case $po_name in '' | *' '*) ;; *) echo "the RPM package $po_name" ;; esac
	fi
	return 0
}

# The version of this tarball's kubelet, vX.Y.Z, for --kubelet-only.
kubelet_version() {
	v=$opt_kubelet_version
	if [ -z "$v" ]; then
		base=${here##*/}
		case $base in
		kubedist-*-linux-*) ;;
		*) die "cannot tell the kubelet's version from the directory name '$base' (expected kubedist-<version>-linux-<arch>); pass --kubelet-version vX.Y.Z" ;;
		esac
		v=${base#kubedist-}
		v=${v%-linux-*}
		# X.Y.Z-R (a package revision) and X.Y.Z~rc.N: back to Kubernetes'
		# spelling, vX.Y.Z and vX.Y.Z-rc.N.
		case ${v##*-} in
		"$v" | *[!0-9]*) ;;
		*) v=${v%-*} ;;
		esac
		v=$(printf '%s' "$v" | tr '~' '-')
	fi
	v=v${v#v}
	case $v in
	v[0-9]*.[0-9]*.[0-9]*) safe_path "$v" || die "--kubelet-version '$v' is not a version like v1.37.2" ;;
	*) die "--kubelet-version '$v' is not a version like v1.37.2" ;;
	esac
	printf '%s\n' "$v"
}

# ---------------------------------------------------------------------------
# 4. Changes to the host. In a dry run each only says what it would do.

changed=0
journal_fresh=

record() { # SET KIND MODE SHA PATH: the new manifest
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/new"
}
# The same line, at once, in the journal. The first line of a run makes the
# journal anew (a copy of an interrupted run's, if any), so that it is a file
# of this run's own, not one written through.
journal() {
	[ -n "$dry_run" ] && return 0
	if [ -z "$journal_fresh" ]; then
		if [ -f "$journal" ]; then
			write_new "$journal" 0644 "$journal"
		else
			(set -C && : >"$journal") 2>"$work/err" || die "$journal: cannot create: $(reason)"
		fi
		journal_fresh=1
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" 2>"$work/err" >>"$journal" || die "$journal: cannot write: $(reason)"
}
act() { # MESSAGE: say what we do (or would do)
	changed=$((changed + 1))
	if [ -n "$dry_run" ]; then say "would $*"; else say "$*"; fi
}

# A directory that exists, or that this (dry) run has created.
dir_exists() { [ -d "$root$1" ] || grep -qxF -- "$1" "$work/made"; }

make_dir() { # SET MODE PATH (host path without root)
	t=$root$3
	check_path "$3"
	if dir_exists "$3"; then
		# Ours from an earlier run: keep owning it.
		if [ "$(old_record "$1" "$3" | cut -f1)" = dir ]; then
			record "$1" dir "$2" - "$3"
		fi
		return 0
	fi
	if present "$t"; then
		# A runtime starting beside us (containerd makes /etc/cni/net.d)
		# may have made it since the test above: then it is theirs.
		[ -d "$t" ] && [ ! -L "$t" ] && return 0
		die "$t: exists and is not a directory"
	fi
	act "create directory $3"
	echo "$3" >>"$work/made"
	record "$1" dir "$2" - "$3"
	[ -n "$dry_run" ] && return 0
	journal "$1" dir "$2" - "$3"
	mkdir "$t" 2>"$work/err" || die "$t: cannot create the directory: $(reason)"
	chmod "$2" "$t" 2>"$work/err" || die "$t: cannot set mode $2: $(reason)"
}

# Every missing ancestor of PATH, outermost first.
make_parents() { # SET PATH
	missing=
	parent=${2%/*}
	while [ -n "$parent" ] && ! dir_exists "$parent"; do
		missing="$parent $missing"
		parent=${parent%/*}
	done
	for parent in $missing; do
		make_dir "$1" 0755 "$parent"
	done
}

# Writes SRC to host path DEST with MODE (write_new: a temporary file
# beside it, renamed over it).
put_file() { # SRC MODE DEST
	t=$root$3
	check_path "$3"
	# (mv would move the file into a directory, or where a link to one leads)
	[ -d "$t" ] && die "$t: is a directory, expected a file"
	write_new "$1" "$2" "$t"
	# For tests of interrupted runs: stop right here (the file in place, its
	# journal line not yet written), so that a test can kill the installer
	# at a known point. PID 1 of a namespace cannot stop itself: it waits.
	if [ "${KUBEDIST_INSTALL_TEST_STOP_AFTER:-}" = "$3" ]; then
		kill -STOP $$
		while [ $$ = 1 ]; do sleep 1; done
	fi
}

# Whether the file at host path PATH is ours: recorded by an earlier run
# (under its other name, when that is the same file: a release moved it
# from /lib to /usr/lib), or, while completing an interrupted run, a plain
# file no package owns with exactly the content we install (the kill came
# after its rename, before its journal line).
is_ours() { # PATH SHA
	io_other=$(usr_alias "$1")
	same_file "$1" "$io_other" || io_other=$1
	if awk -F "$tab" -v p="$1" -v q="$io_other" '($5 == p || $5 == q) && $2 != "dir" && $2 != "link" { f = 1 } END { exit !f }' "$work/old"; then
		return 0
	fi
	[ -n "$had_journal" ] && [ -f "$root$1" ] && [ ! -L "$root$1" ] &&
		[ "$(sha256_of "$root$1")" = "$2" ] && [ -z "$(package_owner "$1")" ]
}

# May this run write host path PATH? Status 0: nothing is there, or it is
# ours. Status 1: it is not ours and --replace-foreign says to replace it
# (displace it first). Otherwise install.sh stops, naming its owner.
claim() { # PATH SHA
	present "$root$1" || return 0
	is_ours "$1" "$2" && return 0
	[ -z "$replace_foreign" ] || return 1
	cl_owner=$(package_owner "$1")
	cl_how="pass --replace-foreign to replace it (the original is kept as $state_dir/displaced$1 and restored on uninstall)"
	if [ -n "$cl_owner" ]; then
		die "$root$1 belongs to $cl_owner, not to install.sh: remove that package, or $cl_how"
	fi
	die "$root$1 was not installed by install.sh and no package owns it: remove it, or $cl_how"
}

# Keeps the file at host path PATH, not ours, as $state_dir/displaced/PATH
# (--replace-foreign): uninstall puts it back.
displace() { # SET PATH
	dp_aside=$state/displaced$2
	act "keep the original $2 as ${dp_aside#"$root"} (--replace-foreign)"
	record "$1" displaced - - "$2"
	[ -n "$dry_run" ] && return 0
	check_path "${dp_aside#"$root"}"
	mkdir -p "${dp_aside%/*}" 2>"$work/err" || die "${dp_aside%/*}: cannot create: $(reason)"
	dp_tmp=${dp_aside%/*}/.${dp_aside##*/}.kubedist-tmp
	rm -f "$dp_tmp" 2>"$work/err" || die "$dp_tmp: cannot remove: $(reason)"
	cur_tmp=$dp_tmp
	# -P: a symlink is kept as the symlink it is; -p: mode, owner and times.
	cp -pP "$root$2" "$dp_tmp" 2>"$work/err" || die "$root$2: cannot copy it to $dp_aside: $(reason)"
	mv -f "$dp_tmp" "$dp_aside" 2>"$work/err" || die "$dp_aside: cannot write: $(reason)"
	cur_tmp=
	journal "$1" displaced - - "$2"
}

# Puts back the original of host path PATH that displace kept, once the
# file we installed there is gone.
restore_displaced() { # SET PATH
	rs_aside=$state/displaced$2
	if [ -n "$dry_run" ]; then
		act "restore the original $2 from ${rs_aside#"$root"}"
		return 0
	fi
	check_path "${rs_aside#"$root"}"
	if ! present "$rs_aside"; then
		say "note: the original of $2, kept as ${rs_aside#"$root"}, is gone"
		return 0
	fi
	check_path "$2"
	if present "$root$2"; then
		say "note: kept the original of $2 in ${rs_aside#"$root"}: $2 changed since it was installed"
		record "$1" displaced - - "$2"
		return 0
	fi
	act "restore the original $2"
	mv -f "$rs_aside" "$root$2" 2>"$work/err" || die "$root$2: cannot restore it from $rs_aside: $(reason)"
	# The directories of the displaced tree, once empty.
	rs_d=${rs_aside%/*}
	while [ "$rs_d" != "$state" ] && rmdir "$rs_d" 2>/dev/null; do
		rs_d=${rs_d%/*}
	done
}

install_file() { # SET MODE SHA SRC DEST: a vendor file, ours to replace
	t=$root$5
	check_path "$5"
	claim "$5" "$3" || displace "$1" "$5"
	if [ -f "$t" ] && [ ! -L "$t" ] && [ "$(sha256_of "$t")" = "$3" ]; then
		if ! same_mode "$2" "$(mode_of "$t")"; then
			act "set mode $2 on $5"
			[ -n "$dry_run" ] || { journal "$1" file "$2" "$3" "$5"; chmod "$2" "$t" || die "$t: cannot set mode $2"; }
		fi
		record "$1" file "$2" "$3" "$5"
		return 0
	fi
	if present "$t"; then act "update $5"; else act "install $5"; fi
	if [ -z "$dry_run" ]; then
		put_file "$4" "$2" "$5"
		journal "$1" file "$2" "$3" "$5"
	fi
	record "$1" file "$2" "$3" "$5"
}

# The sha256 of the config we last installed at PATH, if any.
config_prev_sha() { # SET PATH
	cps=$(old_record "$1" "$2")
	if [ "$(printf '%s' "$cps" | cut -f1)" = config ]; then printf '%s' "$cps" | cut -f3; fi
}

# What install_config finds at host path PATH: absent; same (the new
# default already); update (the default we installed, unedited: it follows
# the release); kept (edited, or not ours: kept, the new default beside it
# as PATH.new).
config_state() { # SET PATH SHA
	cs_t=$root$2
	if ! present "$cs_t"; then
		echo absent
	elif [ ! -f "$cs_t" ]; then
		echo kept
	else
		cs_now=$(sha256_of "$cs_t")
		cs_prev=$(config_prev_sha "$1" "$2")
		if [ "$cs_now" = "$3" ]; then
			echo same
		elif [ -n "$cs_prev" ] && [ "$cs_now" = "$cs_prev" ]; then
			echo update
		else
			echo kept
		fi
	fi
}

install_config() { # SET MODE SHA SRC DEST: an admin-editable file
	t=$root$5
	check_path "$5"
	prev_sha=$(config_prev_sha "$1" "$5")
	case $(config_state "$1" "$5" "$3") in
	absent)
		act "install $5"
		[ -n "$dry_run" ] || { put_file "$4" "$2" "$5"; journal "$1" config "$2" "$3" "$5"; }
		record "$1" config "$2" "$3" "$5"
		return 0
		;;
	same)
		# Ours: recorded. Someone else's, with the same content: theirs.
		if [ -n "$prev_sha" ] || is_ours "$5" "$3"; then
			record "$1" config "$2" "$3" "$5"
		fi
		return 0
		;;
	update)
		act "update $5"
		[ -n "$dry_run" ] || { put_file "$4" "$2" "$5"; journal "$1" config "$2" "$3" "$5"; }
		record "$1" config "$2" "$3" "$5"
		return 0
		;;
	esac
	# Edited (or not ours): keep it, put the new default beside it.
	[ -n "$prev_sha" ] && record "$1" config "$2" "$prev_sha" "$5"
	check_path "$5.new"
	if [ -f "$t.new" ] && [ ! -L "$t.new" ] && [ "$(sha256_of "$t.new")" = "$3" ]; then
		if is_ours "$5.new" "$3"; then record "$1" new "$2" "$3" "$5.new"; fi
		return 0
	fi
	offered=$(old_record "$1" "$5.new")
	if ! present "$t.new" && [ "$(printf '%s' "$offered" | cut -f1)" = new ] &&
		[ "$(printf '%s' "$offered" | cut -f3)" = "$3" ]; then
		# This default was offered before and you removed FILE.new: it is
		# not offered again until a release changes it.
		record "$1" new "$2" "$3" "$5.new"
		return 0
	fi
	claim "$5.new" "$3" || displace "$1" "$5.new"
	act "keep your edited $5; the new default is in $5.new"
	[ -n "$dry_run" ] || { put_file "$4" "$2" "$5.new"; journal "$1" new "$2" "$3" "$5.new"; }
	record "$1" new "$2" "$3" "$5.new"
}

# Removes what an old record lists, if it is still what we installed.
remove_recorded() { # KIND SHA PATH
	t=$root$3
	case $1 in
	dir) return 0 ;; # later, deepest first
	link)
		check_path "${3%/*}"
		if [ -L "$t" ] && [ "$(readlink "$t")" = "$2" ]; then
			act "remove the link $3"
			[ -n "$dry_run" ] || rm -f "$t"
		fi
		return 0
		;;
	esac
	check_path "$3"
	if [ -L "$t" ]; then
		say "note: kept $3: it is a symlink now, not the file install.sh installed"
		return 0
	fi
	[ -f "$t" ] || return 0
	if [ "$(sha256_of "$t")" != "$2" ]; then
		if [ "$1" = config ]; then
			say "note: kept $3: you edited it"
		else
			say "note: kept $3: it changed since it was installed"
		fi
		return 0
	fi
	act "remove $3"
	[ -n "$dry_run" ] || rm -f "$t" || die "$t: cannot remove"
}

remove_dirs() { # FILE of dir paths
	sort -r "$1" >"$work/dirs.sorted"
	while IFS= read -r d; do
		t=$root$d
		check_path "$d"
		if [ -L "$t" ]; then
			say "note: kept $d: it is a symlink now, not the directory install.sh created"
			continue
		fi
		[ -d "$t" ] || continue
		# The state runsv keeps in a service directory is not content, once
		# no runsv uses it.
		s=$t/supervise
		if [ -d "$s" ] && [ ! -L "$s" ] && [ -e "$s/status" ] && [ -z "$dry_run" ] &&
			! runsv_running "$t"; then
			rm -rf "$s"
		fi
		if [ -n "$dry_run" ]; then
			act "remove directory $d if it is empty then"
		elif [ -z "$(ls -A "$t")" ]; then
			act "remove directory $d"
			[ -n "$dry_run" ] || rmdir "$t" || die "$t: cannot remove"
		else
			say "note: kept $d: not empty"
		fi
	done <"$work/dirs.sorted"
}

# Whether a runsv supervises DIR (sv reaches it through DIR/supervise/ok).
runsv_running() {
	[ -z "$root" ] && command -v sv >/dev/null 2>&1 && sv status "$1" >/dev/null 2>&1
}

# Removes the temporary files (.NAME.kubedist-tmp) a killed run left in the
# directories of the host paths listed in FILE and in the state directory.
# Nowhere else: the name alone does not make a file ours.
remove_leftovers() { # FILE
	{
		sed 's|/[^/]*$||' "$1"
		echo "$state_dir"
	} | sort -u >"$work/tmpdirs"
	while IFS= read -r d; do
		if [ -z "$d" ] || [ ! -d "$root$d" ]; then continue; fi
		check_path "$d"
		for f in "$root$d"/.*.kubedist-tmp; do
			present "$f" || continue
			if [ -n "$dry_run" ]; then
				say "would remove ${f#"$root"}, left by an interrupted run"
				continue
			fi
			rm -f "$f" 2>"$work/err" || die "$f: cannot remove: $(reason)"
			say "removed ${f#"$root"}, left by an interrupted run"
		done
	done <"$work/tmpdirs"
	# The temporary manifest of an older install.sh.
	if present "$manifest.tmp" && [ -z "$dry_run" ]; then
		rm -f "$manifest.tmp" 2>"$work/err" || die "$manifest.tmp: cannot remove: $(reason)"
	fi
}

# The host paths install.sh may have left temporary files beside: those of
# the plan (if any) and of the records, and the displaced originals.
written_paths() {
	if [ -f "$work/plan" ]; then cut -f5 "$work/plan"; fi
	cut -f5 "$work/old"
	awk -F "$tab" -v d="$state_dir/displaced" '$2 == "displaced" { print d $5 }' "$work/old"
}

write_manifest() { # SET: the manifest = other sets' records + this run's
	{
		echo "# kubedist install manifest, written by install.sh; uninstall removes what it lists."
		echo "# set	kind	mode	sha256	path"
		[ -z "$family" ] || printf '@family %s\n' "$family"
		[ -z "$init" ] || printf '@init %s\n' "$init"
		[ -z "$node_release" ] || printf '@release %s\n' "$node_release"
		# Sorted, so the same install gives the same manifest however it got there.
		{
			awk -F "$tab" -v s="$1" '$1 != s' "$work/old"
			cat "$work/new"
		} | LC_ALL=C sort -u -t "$tab" -k1,1 -k5,5 -k2,4
	} >"$work/manifest"
	if [ -f "$manifest" ] && cmp -s "$work/manifest" "$manifest"; then
		return 0
	fi
	[ -n "$dry_run" ] && return 0
	write_new "$work/manifest" 0644 "$manifest"
}

# ---------------------------------------------------------------------------
# The lock: a directory only one run can create, holding its process's pid,
# boot id and start time, so that a later run can tell a lock whose owner
# died (killed, power loss) from a running one, even once the pid is reused.

boot_id() { cat /proc/sys/kernel/random/boot_id 2>/dev/null || true; }

# The start time of process PID, in clock ticks since boot: field 22 of
# /proc/PID/stat, the 20th after the command name (in parentheses, which
# may hold spaces).
start_time_of() { # PID
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 20
}

process_exists() { # PID
	if [ -d /proc/self ]; then [ -d "/proc/$1" ]; else kill -0 "$1" 2>/dev/null; fi
}

# Why the lock's owner is not running any more; nothing if it may be.
stale_lock() {
	sl_pid=$(cat "$lock/pid" 2>/dev/null) || sl_pid=
	case $sl_pid in '' | *[!0-9]*)
		echo "it names no process"
		return 0
		;;
	esac
	sl_boot=$(cat "$lock/boot_id" 2>/dev/null) || sl_boot=
	sl_start=$(cat "$lock/start_time" 2>/dev/null) || sl_start=
	if [ -n "$sl_boot" ] && [ "$sl_boot" != "$(boot_id)" ]; then
		echo "pid $sl_pid ran before the last boot"
	elif ! process_exists "$sl_pid"; then
		echo "pid $sl_pid is gone"
	elif [ "$sl_pid" = $$ ]; then
		echo "pid $sl_pid is now this run"
	elif [ -n "$sl_start" ]; then
		[ "$(start_time_of "$sl_pid")" = "$sl_start" ] || echo "pid $sl_pid is now another process"
	elif [ -r "/proc/$sl_pid/cmdline" ] && ! tr '\0' ' ' <"/proc/$sl_pid/cmdline" | grep -q 'install\.sh'; then
		# The lock of an older install.sh, which recorded the pid only.
		echo "pid $sl_pid is now another process"
	fi
}

take_lock() {
	[ -n "$dry_run" ] && return 0
	# Ancestors of the state directory that we create (under a --prefix)
	# are recorded, so that uninstall leaves the prefix as it found it.
	state_parents=
	d=${state%/*}
	while [ -n "$d" ] && [ "$d" != "$root" ] && [ ! -d "$d" ]; do
		state_parents="${d#"$root"} $state_parents"
		d=${d%/*}
	done
	if ! { mkdir -p "$state" && chmod 0755 "$state"; } 2>"$work/err"; then
		die "$state: cannot create: $(reason)"
	fi
	if ! mkdir "$lock" 2>/dev/null; then
		why=$(stale_lock)
		if [ -z "$why" ]; then
			die "another install.sh (pid $(cat "$lock/pid" 2>/dev/null)) is running; $lock is its lock"
		fi
		say "taking over the stale lock $lock: $why"
		rm -rf "$lock"
		mkdir "$lock" 2>"$work/err" || die "$lock: cannot create the lock: $(reason)"
	fi
	locked=1
	echo $$ >"$lock/pid"
	boot_id >"$lock/boot_id"
	start_time_of $$ >"$lock/start_time"
	for d in $state_parents; do
		journal state dir 0755 - "$d"
	done
}

# ---------------------------------------------------------------------------
# 5. Services

runit_service_dir() {
	if [ -n "$opt_service_dir" ]; then
		printf '%s\n' "$opt_service_dir"
		return
	fi
	# The directory a running runsvdir watches: its first non-option
	# argument that is a directory. (Not merely the first: a runsvdir that
	# qemu-user runs, through binfmt_misc, has the program's path first.)
	if [ -z "$root" ]; then
		for pid in $(runsvdir_pids); do
			d=$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed 1d | grep -v '^-' | while IFS= read -r a; do
				case $a in /*) ;; '') continue ;; *) a=$(cd "/proc/$pid/cwd/$a" 2>/dev/null && pwd) || continue ;; esac
				[ -d "$a" ] && { printf '%s\n' "$a"; break; }
			done)
			[ -n "$d" ] && { printf '%s\n' "$d"; return; }
		done
	fi
	for d in /var/service /etc/service /run/runit/service /etc/runit/runsvdir/default; do
		if [ -d "$root$d" ]; then
			printf '%s\n' "$d"
			return
		fi
	done
}

run_cmd() { # COMMAND...: run it, or say we would
	if [ -n "$dry_run" ]; then
		say "would run: $*"
		return 0
	fi
	say "running: $*"
	"$@"
}

# The kernel prerequisites this release installs (modules-load.d,
# sysctl.d), applied at once where that is safe (kernel_apply).
apply_kernel() {
	k_mod=$(awk -F "$tab" 'index($5, "/usr/lib/modules-load.d/") == 1 { print $5; exit }' "$work/plan")
	k_sysctl=$(awk -F "$tab" 'index($5, "/usr/lib/sysctl.d/") == 1 { print $5; exit }' "$work/plan")
	[ -n "$k_mod$k_sysctl" ] || return 0
	if [ -n "$dry_run" ]; then
		say "would apply the kernel prerequisites ($k_mod, $k_sysctl) if this is a running host"
		return 0
	fi
	say "$(kernel_apply "${root:-/}" "$k_mod" "$k_sysctl")"
}

# Enables and starts SERVICE after a change: the kubelet for the set main,
# containerd for the set runtime. Under systemd the kubelet starts only once
# kubeadm has configured it; containerd at once, and install.sh waits for
# it to be ready. runit's service link is recorded in the set.
service_after_install() { # SERVICE
	svc=$1
	if [ -n "$root" ] || ! init_running "$init"; then
		where=${root:+ in $root}
		case $init in
		systemd) say "systemd is not running here$where; to enable $svc: systemctl enable $svc" ;;
		openrc) say "OpenRC is not running here$where; to enable and start $svc: rc-update add $svc default && rc-service $svc start" ;;
		runit)
			d=$(runit_service_dir)
			say "runit is not running here$where; to enable and start $svc: ln -s /etc/sv/$svc ${d:-<your runsvdir service directory>}/"
			;;
		esac
		return 0
	fi
	case $init in
	systemd)
		run_cmd systemctl daemon-reload || die "systemctl daemon-reload failed"
		[ -n "$no_enable" ] || run_cmd systemctl enable "$svc" || die "systemctl enable $svc failed"
		[ -z "$no_start" ] || return 0
		if [ "$svc" != kubelet ]; then
			run_cmd systemctl restart "$svc" || die "systemctl restart $svc failed (systemctl status $svc says why)"
		elif [ -f "$root/var/lib/kubelet/config.yaml" ] || systemctl -q is-active kubelet; then
			# Queued, not waited for: an installer that runs in a pod
			# (the installer image) must not wait on the kubelet
			# that runs it.
			run_cmd systemctl --no-block restart kubelet || die "systemctl restart kubelet failed"
		else
			say "the kubelet starts once kubeadm init or join has configured it"
		fi
		;;
	openrc)
		if [ -z "$no_enable" ] && [ ! -e "/etc/runlevels/default/$svc" ]; then
			run_cmd rc-update add "$svc" default || die "rc-update add $svc default failed"
		fi
		if [ -z "$no_start" ]; then
			if rc-service "$svc" status >/dev/null 2>&1; then
				run_cmd rc-service "$svc" restart || die "rc-service $svc restart failed"
			else
				run_cmd rc-service "$svc" start || die "rc-service $svc start failed"
			fi
		fi
		;;
	runit)
		d=$(runit_service_dir)
		[ -n "$d" ] || die "cannot find runit's service directory; pass --service-dir"
		if [ -L "$d/$svc" ] || [ -e "$d/$svc" ]; then
			if [ -z "$no_start" ]; then
				run_cmd sv restart "$d/$svc" || die "sv restart $d/$svc failed"
			fi
		elif [ -n "$no_enable" ] || [ -n "$no_start" ]; then
			say "not linked (--no-enable/--no-start); to enable and start: ln -s /etc/sv/$svc $d/"
		else
			act "enable and start $svc: link $d/$svc -> /etc/sv/$svc"
			if [ -z "$dry_run" ]; then
				ln -s "/etc/sv/$svc" "$d/$svc" || die "$d/$svc: cannot create the link"
				journal "$set_name" link - "/etc/sv/$svc" "$d/$svc"
			fi
			record "$set_name" link - "/etc/sv/$svc" "$d/$svc"
		fi
		;;
	esac
}

# Stops and disables SERVICE before the files of SET go.
service_before_uninstall() { # SERVICE SET
	svc=$1
	if [ -n "$root" ] || ! init_running "$init"; then
		return 0
	fi
	case $init in
	systemd)
		run_cmd systemctl disable --now "$svc" || say "note: systemctl disable --now $svc failed"
		;;
	openrc)
		if rc-service "$svc" status >/dev/null 2>&1; then
			run_cmd rc-service "$svc" stop || say "note: rc-service $svc stop failed"
		fi
		if [ -e "/etc/runlevels/default/$svc" ]; then
			run_cmd rc-update del "$svc" default || say "note: rc-update del $svc default failed"
		fi
		;;
	runit)
		link=$(awk -F "$tab" -v s="$2" '$1 == s && $2 == "link" { print $5; exit }' "$work/old")
		if [ -n "$link" ] && [ -L "$link" ]; then
			run_cmd sv force-stop "$link" || say "note: sv force-stop $link failed"
			act "remove the link $link"
			[ -n "$dry_run" ] || rm -f "$link"
		fi
		# Let its runsv (and the log's) exit, so its state can go too.
		if runsv_running "/etc/sv/$svc"; then
			run_cmd sv exit "/etc/sv/$svc" || true
			n=0
			while [ -z "$dry_run" ] && runsv_running "/etc/sv/$svc" && [ $n -lt 50 ]; do
				sleep 0.2
				n=$((n + 1))
			done
		fi
		;;
	esac
}

# ---------------------------------------------------------------------------
# 6. The actions

# What this run installs, in order: directories by path (parents before
# children, so each gets its own mode), then files, then configs. Lines:
# kind mode sha256 source path (tab-separated).
make_plan() {
	awk -F "$tab" -v OFS="$tab" '$3 == "dir" { print "dir", $4, "-", "-", $6 }' "$work/selected" |
		LC_ALL=C sort -t "$tab" -k5,5 >"$work/plan"
	for k in file config; do
		while IFS=$tab read -r fam ini kind mode _ path; do
			[ "$kind" = "$k" ] || continue
			file=$(payload_of "$fam" "$ini" "$path")
			src=$here/$file
			sha=$(sum_of "$file")
			if [ -n "$kubelet_only" ]; then
				path=/opt/kubernetes/${set_name#kubelet-}/bin/kubelet
			fi
			printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$mode" "$sha" "$src" "$path"
		done <"$work/selected" >>"$work/plan"
	done
}

# Before anything is written: every path this run writes or may remove obeys
# the path rule, and none is a file someone else put there (unless
# --replace-foreign), so that a refusal leaves the host as it was.
check_destinations() {
	while IFS=$tab read -r kind _ sha _ path; do
		check_path "$path"
		case $kind in
		file) claim "$path" "$sha" || true ;;
		config)
			# Only an edited (or foreign) config gets a FILE.new.
			[ "$(config_state "$set_name" "$path" "$sha")" = kept ] || continue
			check_path "$path.new"
			present "$root$path.new" || continue
			if [ ! -f "$root$path.new" ] || [ -L "$root$path.new" ] ||
				[ "$(sha256_of "$root$path.new")" != "$sha" ]; then
				claim "$path.new" "$sha" || true
			fi
			;;
		esac
	done <"$work/plan"
	check_recorded_paths "$work/old"
}

# Every path of the records in FILE obeys the path rule (they may be removed).
check_recorded_paths() { # FILE
	while IFS=$tab read -r _ kind _ _ path; do
		case $kind in
		link) check_path "${path%/*}" ;;
		displaced)
			check_path "$path"
			check_path "$state_dir/displaced$path"
			;;
		*) check_path "$path" ;;
		esac
	done <"$1"
}

# --images FILE: the images bundle of `cargo xtask dist`, checked against
# the SHA256SUMS of the dist output it sits in, planned as the set "images":
# /var/lib/kubedist/images holding it and a SHA256SUMS of its own, which
# kubedist-images checks before it imports anything.
plan_images() {
	im_name=${opt_images##*/}
	case $im_name in
	kubedist-images-*.oci.tar) safe_path "$im_name" || die "$opt_images: refusing the file name" ;;
	*) die "$opt_images: not an images bundle (kubedist-images-<version>-<arch>.oci.tar)" ;;
	esac
	if [ ! -f "$opt_images" ] || [ -L "$opt_images" ]; then
		die "$opt_images: not a regular file"
	fi
	case $opt_images in */*) im_dir=${opt_images%/*} ;; *) im_dir=. ;; esac
	im_dir=$(cd "${im_dir:-/}" && pwd) || die "cannot enter the directory of $opt_images"
	if [ -n "$carried" ] && [ "$im_dir/$im_name" = "$here/$carried" ]; then
		# The bundle this tarball carries: listed in the tarball's own
		# SHA256SUMS, which verify_tarball checked (and its signature).
		im_sums=$here/SHA256SUMS
		im_want=$(sum_of "$carried")
	else
		im_sums=$im_dir/SHA256SUMS
		[ -z "$verify_key" ] || verify_signature "$im_dir"
		[ -f "$im_sums" ] ||
			die "$im_sums: missing: the bundle is checked against the SHA256SUMS of the dist output it came in"
		im_want=$(awk -v n="$im_name" '$2 == n { print $1; exit }' "$im_sums")
		[ -n "$im_want" ] || die "$opt_images: not listed in $im_sums"
	fi
	im_sha=$(sha256_of "$im_dir/$im_name")
	[ "$im_sha" = "$im_want" ] ||
		die "$opt_images: sha256 $im_sha does not match $im_sums ($im_want); nothing was installed"
	# Its images are for one architecture: this tarball's, the node's.
	im_arch=$(bundle_arch "$im_dir/$im_name")
	node_arch=$(elf_arch "$here/payload/any/usr/bin/kubelet-wrapper")
	[ "$im_arch" = "$node_arch" ] ||
		die "$opt_images: its images are for ${im_arch:-no single architecture}, this tarball's programs for $node_arch; nothing was installed"
	# Its release: the tag of its kube-proxy, which its name must say too.
	im_version=$(bundle_version "$im_dir/$im_name")
	case $im_name in
	kubedist-images-"$im_version"-"$im_arch".oci.tar) ;;
	kubedist-images-"$im_version"-"$im_arch"-worker.oci.tar) ;;
	*) die "$opt_images: holds the images of Kubernetes ${im_version:-(no kube-proxy image)}, which its name does not say; nothing was installed" ;;
	esac
	# Not older than the node: a node's bundle is for its release, or a newer
	# one installed ahead of an upgrade (docs/air-gapped.md, step 4).
	node_version=${node_release%-*}
	if [ -n "$node_release" ] && version_older "$im_version" "$node_version"; then
		[ -n "$downgrade" ] || die "$opt_images: holds the images of Kubernetes $im_version, older than release $node_release installed here: pass --downgrade to install it anyway (nothing was changed)"
		say "warning: the images of Kubernetes $im_version, older than release $node_release installed here (--downgrade)"
	fi
	# The bundles installed before stay beside it while they are for this
	# node's release or a newer one (intact, as recorded); an older
	# release's goes. With no release recorded here, it replaces them.
	printf '%s\t%s\n' "$im_sha" "$im_name" >"$work/images.keep"
	printf 'file\t0644\t%s\t%s\t%s\n' "$im_sha" "$im_dir/$im_name" "$images_dir/$im_name" >"$work/images.plan"
	if [ -n "$node_release" ]; then
		awk -F "$tab" -v d="$images_dir/" \
			'$1 == "images" && $2 == "file" && index($5, d) == 1 && $5 ~ /\/kubedist-images-[^\/]*[.]oci[.]tar$/ { print $4 "\t" $5 }' \
			"$work/old" >"$work/images.before"
		while IFS=$tab read -r kb_sha kb_path; do
			kb_name=${kb_path##*/}
			[ "$kb_name" != "$im_name" ] || continue
			if [ ! -f "$root$kb_path" ] || [ -L "$root$kb_path" ] || [ "$(sha256_of "$root$kb_path")" != "$kb_sha" ]; then
				continue
			fi
			kb_version=$(bundle_version "$root$kb_path")
			! version_older "$kb_version" "$node_version" || continue
			printf '%s\t%s\n' "$kb_sha" "$kb_name" >>"$work/images.keep"
			printf 'file\t0644\t%s\t%s\t%s\n' "$kb_sha" "$root$kb_path" "$kb_path" >>"$work/images.plan"
		done <"$work/images.before"
	fi
	LC_ALL=C sort -t "$tab" -k2,2 "$work/images.keep" | awk -F "$tab" '{ print $1 "  " $2 }' >"$work/images.sums"
	# kubedist-images' settings: --image-repository's, else the ones an
	# earlier run installed (intact, as recorded), which stay.
	if [ -n "$opt_image_repository" ]; then
		printf '# Written by install.sh --images --image-repository; read by kubedist-images.\nimage-repository = %s\n' \
			"$opt_image_repository" >"$work/images.conf"
	else
		ic_sha=$(awk -F "$tab" -v p="$images_conf" '$1 == "images" && $2 == "file" && $5 == p { print $4; exit }' "$work/old")
		if [ -n "$ic_sha" ] && [ -f "$root$images_conf" ] && [ ! -L "$root$images_conf" ] &&
			[ "$(sha256_of "$root$images_conf")" = "$ic_sha" ]; then
			cp "$root$images_conf" "$work/images.conf"
		fi
	fi
	{
		printf 'dir\t0755\t-\t-\t%s\n' "$images_dir"
		cat "$work/images.plan"
		printf 'file\t0644\t%s\t%s\t%s\n' "$(sha256_of "$work/images.sums")" "$work/images.sums" "$images_dir/SHA256SUMS"
		[ ! -f "$work/images.conf" ] ||
			printf 'file\t0644\t%s\t%s\t%s\n' "$(sha256_of "$work/images.conf")" "$work/images.conf" "$images_conf"
	} >"$work/plan"
}

# bundle_version BUNDLE: the Kubernetes version of an images bundle, the tag
# of its kube-proxy image (every node runs one; index.json names it).
bundle_version() {
	tar -xOf "$1" index.json 2>/dev/null | grep -o '/kube-proxy:v[0-9][0-9A-Za-z.+-]*"' |
		sed 's|^/kube-proxy:v||; s|"$||' | head -n 1
}

# bundle_arch BUNDLE: the one architecture of the images of an images
# bundle, from the platform of each manifest its index.json lists (written
# compact by kubedist); nothing unless there is exactly one.
bundle_arch() {
	tar -xOf "$1" index.json 2>/dev/null |
		grep -o '"platform":{"architecture":"[a-z0-9]*"' |
		sed 's/.*:"//; s/"$//' | sort -u | awk '{ a[NR] = $0 } END { if (NR == 1) print a[1] }'
}

# elf_arch FILE: the Go name of the architecture an ELF program is for,
# from its byte order (EI_DATA) and machine (e_machine): `unknown` for any
# other file.
elf_arch() {
	# shellcheck disable=SC2046 # the bytes, one word each
	set -- $(od -An -tu1 -j5 -N1 "$1" 2>/dev/null) $(od -An -tu1 -j18 -N2 "$1" 2>/dev/null)
	case "${1:-} ${2:-} ${3:-}" in
	"1 62 0") echo amd64 ;;
	"1 183 0") echo arm64 ;;
	"1 21 0") echo ppc64le ;;
	"1 243 0") echo riscv64 ;;
	"2 0 22") echo s390x ;;
	*) echo unknown ;;
	esac
}

# After --images: the import into the running runtime, when this is the
# running host and kubeadm's package (or this tarball) installed the step.
import_images() {
	if [ -n "$root" ] || [ -n "$dry_run" ]; then
		say "to import the images on the node: kubedist-images (it reads $images_dir)"
	elif [ ! -x /usr/bin/kubedist-images ]; then
		say "note: /usr/bin/kubedist-images is not installed (it comes with kubeadm): install this tarball, then run it"
	elif ! /usr/bin/kubedist-images; then
		say "note: the bundle is in $images_dir but kubedist-images did not import it (see above); run kubedist-images once that is fixed"
	fi
}

# The system extensions merged over /usr (systemd-sysext), as " NAME...":
# while they are, /usr is read-only and what they ship hides what is
# installed there (the README's "Immutable hosts").
merged_extensions() {
	for f in "$root"/usr/lib/extension-release.d/extension-release.*; do
		[ -e "$f" ] || continue
		printf ' %s' "${f##*/extension-release.}"
	done
}

# The MANIFEST entries for the family and init system into
# $work/selected: the container runtime's packages (runtime) or the others
# (main).
select_entries() { # main|runtime
	awk -F "$tab" -v f="$family" -v i="$init" -v want="$1" -v rt=" $runtime_packages " '
		($1 == "any" || $1 == f) && ($2 == "any" || $2 == i) &&
			(index(rt, " " $5 " ") > 0) == (want == "runtime")' \
		"$work/entries" >"$work/selected"
	dup=$(cut -f6 "$work/selected" | sort | uniq -d | head -n 1)
	[ -z "$dup" ] || die "$here/MANIFEST: two entries install $dup for $family/$init"
}

# Whether the container runtime was installed here (--runtime).
runtime_installed() {
	awk -F "$tab" '$1 == "runtime" { found = 1 } END { exit !found }' "$work/old"
}

do_install() {
	check_state
	load_installed
	node_release=$(recorded release)
	detect_family
	if [ -n "$kubelet_only" ]; then
		init=$(recorded init)
		set_name=kubelet-$(kubelet_version)
		awk -F "$tab" -v f="$family" \
			'($1 == "any" || $1 == f) && $3 == "file" && $6 == "/usr/bin/kubelet"' \
			"$work/entries" >"$work/selected"
		[ -s "$work/selected" ] || die "$here/MANIFEST: no kubelet (/usr/bin/kubelet) for $family"
		make_plan
		check_destinations
		say "installing the kubelet ${set_name#kubelet-} side by side (family $family)"
	elif [ -n "$opt_images" ]; then
		init=$(recorded init)
		set_name=images
		plan_images
		check_destinations
		say "installing the images bundle $im_name into ${root}$images_dir"
	elif [ -n "$opt_runtime" ]; then
		set_name=runtime
		detect_init
		select_entries runtime
		[ -s "$work/selected" ] || die "$here/MANIFEST: this tarball carries no container runtime"
		# Theirs or ours, never both: the same programs at the same paths,
		# or a runc on containerd's PATH ahead of ours.
		# shellcheck disable=SC2086 # package names are checked words
		package_manager_installs $runtime_packages $runtime_conflicts >"$work/clash"
		clash=$(cat "$work/clash")
		[ -z "$clash" ] || die "already installed by a package manager:$clash; remove those packages first (or keep using them): a host has one containerd"
		make_plan
		check_destinations
		say "installing the container runtime for $init ($how)${root:+, into $root}"
	else
		set_name=main
		if [ -n "$node_release" ] && release_older "$release" "$node_release"; then
			[ -n "$downgrade" ] || die "this tarball is release $release, older than $node_release installed here: a node's kubelet and kubeadm must not go back behind its control plane; pass --downgrade to install it anyway (nothing was changed)"
			say "warning: going back from release $node_release to $release (--downgrade)"
		fi
		node_release=$release
		detect_init
		select_entries main
		# (into a file, not $(...): its refusal must stop install.sh itself)
		# shellcheck disable=SC2046 # package names are checked words
		package_manager_installs $(cut -f5 "$work/selected" | sort -u) >"$work/clash"
		clash=$(cat "$work/clash")
		[ -z "$clash" ] || die "already installed by a package manager:$clash; remove those packages first (or keep using them): mixing both breaks upgrades"
		make_plan
		check_destinations
		say "installing for $init ($how), family $family ($fhow)${root:+, into $root}"
	fi
	merged=$(merged_extensions)
	[ -z "$merged" ] ||
		say "warning: system extensions are merged over /usr:$merged; while they are, /usr is read-only and what they ship there hides what this installs (on such a host use the sysext image)"

	take_lock
	load_installed
	[ -z "$had_journal" ] || say "completing an interrupted earlier run"
	written_paths >"$work/written"
	remove_leftovers "$work/written"
	: >"$work/new"
	: >"$work/made"

	while IFS=$tab read -r kind mode sha src path; do
		make_parents "$set_name" "$path"
		case $kind in
		dir) make_dir "$set_name" "$mode" "$path" ;;
		config) install_config "$set_name" "$mode" "$sha" "$src" "$path" ;;
		*) install_file "$set_name" "$mode" "$sha" "$src" "$path" ;;
		esac
	done <"$work/plan"

	# Records of this set that the new release no longer has.
	: >"$work/stale-dirs"
	: >"$work/restore"
	while IFS=$tab read -r s kind mode sha path; do
		[ "$s" = "$set_name" ] || continue
		case $kind in
		link)
			# The service link stays until uninstall.
			record "$s" link "$mode" "$sha" "$path"
			continue
			;;
		displaced)
			# The original stays aside while we install a file there.
			if awk -F "$tab" -v p="$path" '$5 == p && $2 != "displaced" { found = 1 } END { exit !found }' "$work/new"; then
				record "$s" displaced - - "$path"
			else
				echo "$path" >>"$work/restore"
			fi
			continue
			;;
		esac
		awk -F "$tab" -v p="$path" '$5 == p { found = 1 } END { exit !found }' "$work/new" && continue
		# A file the new release installs under its other name (a release
		# moved it from /lib to /usr/lib) is the same file on a merged-/usr
		# root: removing the old name would remove what was just installed.
		other=$(usr_alias "$path")
		if same_file "$path" "$other" &&
			awk -F "$tab" -v p="$other" '$5 == p { found = 1 } END { exit !found }' "$work/new"; then
			continue
		fi
		if [ "$kind" = dir ]; then
			# A directory we created that still holds what we install stays ours.
			if [ -d "$root$path" ] &&
				awk -F "$tab" -v d="$path/" 'index($5, d) == 1 { found = 1 } END { exit !found }' "$work/new"; then
				record "$s" dir "$mode" - "$path"
				continue
			fi
			echo "$path" >>"$work/stale-dirs"
		else
			remove_recorded "$kind" "$sha" "$path"
		fi
	done <"$work/old"
	while IFS= read -r path; do
		restore_displaced "$set_name" "$path"
	done <"$work/restore"
	[ -s "$work/stale-dirs" ] && remove_dirs "$work/stale-dirs"

	if [ "$changed" = 0 ] && [ -z "$had_journal" ]; then
		write_manifest "$set_name"
		[ -n "$dry_run" ] || rm -f "$journal"
		say "nothing to do: everything is installed and unchanged"
		return 0
	fi

	if [ "$set_name" = main ]; then
		[ -n "$dry_run" ] || write_manifest "$set_name"
		apply_kernel
		service_after_install kubelet
	fi
	if [ "$set_name" = runtime ]; then
		[ -n "$dry_run" ] || write_manifest "$set_name"
		service_after_install containerd
	fi
	if [ "$set_name" = images ]; then
		[ -n "$dry_run" ] || write_manifest "$set_name"
		import_images
	fi
	write_manifest "$set_name"
	[ -n "$dry_run" ] || rm -f "$journal"
	if [ -n "$dry_run" ]; then
		say "dry run: nothing was changed"
	else
		say "done ($changed change(s)); manifest: ${manifest#"$root"}"
	fi
}

do_uninstall() {
	check_state
	node_release=$(recorded release)
	if [ ! -f "$manifest" ] && [ ! -f "$journal" ]; then
		say "nothing to do: no kubedist install recorded in ${manifest#"$root"}"
		return 0
	fi
	load_installed
	init=$(recorded init)
	family=$(recorded family)
	if [ -n "$kubelet_only" ]; then
		set_name=kubelet-$(kubelet_version)
		awk -F "$tab" -v s="$set_name" '$1 == s' "$work/old" >"$work/remove"
		[ -s "$work/remove" ] || die "no side-by-side kubelet ${set_name#kubelet-} is recorded in $manifest"
	elif [ -n "$opt_runtime" ]; then
		set_name=runtime
		awk -F "$tab" -v s="$set_name" '$1 == s' "$work/old" >"$work/remove"
		[ -s "$work/remove" ] || die "no container runtime installed by install.sh --runtime is recorded in $manifest"
	else
		set_name=
		awk -F "$tab" '$1 != "state"' "$work/old" >"$work/remove"
	fi
	check_recorded_paths "$work/remove"
	take_lock
	written_paths >"$work/written"
	remove_leftovers "$work/written"
	# The kubelet first: it talks to the runtime.
	[ -n "$set_name" ] || service_before_uninstall kubelet main
	if [ -z "$set_name" ] && runtime_installed || [ "$set_name" = runtime ]; then
		service_before_uninstall containerd runtime
	fi
	: >"$work/dirs"
	: >"$work/restore"
	: >"$work/new"
	while IFS=$tab read -r _ kind _ sha path; do
		case $kind in
		dir) echo "$path" >>"$work/dirs" ;;
		displaced) echo "$path" >>"$work/restore" ;;
		*) remove_recorded "$kind" "$sha" "$path" ;;
		esac
	done <"$work/remove"
	while IFS= read -r path; do
		restore_displaced "${set_name:-main}" "$path"
	done <"$work/restore"
	remove_dirs "$work/dirs"
	if [ -n "$set_name" ]; then
		write_manifest "$set_name"
		[ -n "$dry_run" ] || rm -f "$journal"
	elif [ -z "$dry_run" ]; then
		rm -f "$manifest" "$journal"
		rm -rf "$lock"
		locked=
		if rmdir "$state" 2>/dev/null; then
			awk -F "$tab" '$1 == "state" && $2 == "dir" { print $5 }' "$work/old" | sort -r |
				while IFS= read -r d; do rmdir "$root$d" 2>/dev/null || true; done
		else
			say "note: kept ${state#"$root"}: not empty"
		fi
		if [ "$init" = systemd ] && [ -z "$root" ] && init_running systemd; then
			run_cmd systemctl daemon-reload || true
		fi
	fi
	if [ -n "$dry_run" ]; then say "dry run: nothing was changed"; else say "uninstalled"; fi
}

# After the node software, each by a run of its own, so that a kill
# between them is completed by the next install: the container runtime,
# when --runtime installed it here, is upgraded too; then the bundle a
# tarball carries is installed (--images). The runtime's run is told to go
# on with the bundle by --then-carried, an option of these runs only.
install_follow_ups() {
	[ -z "$opt_images$kubelet_only" ] || return 0
	if [ -z "$opt_runtime" ] && runtime_installed; then
		say "upgrading the container runtime installed here (--runtime)"
		set -- --runtime
		[ -z "$no_enable" ] || set -- "$@" --no-enable
		[ -z "$no_start" ] || set -- "$@" --no-start
		[ -z "$ignore_package_db" ] || set -- "$@" --ignore-package-db
		[ -z "$opt_service_dir" ] || set -- "$@" --service-dir "$opt_service_dir"
		[ -z "$opt_image_repository" ] || set -- "$@" --image-repository "$opt_image_repository"
		rerun "$@" --then-carried
	fi
	[ -n "$carried" ] && { [ -z "$opt_runtime" ] || [ -n "$then_carried" ]; } || return 0
	say "this tarball carries the images bundle ${carried#images/}"
	set -- --images "$here/$carried"
	[ -z "$opt_image_repository" ] || set -- "$@" --image-repository "$opt_image_repository"
	rerun "$@"
}

# Runs this installer again, in this process, for ARGS and the options
# every run shares.
rerun() { # ARGS...
	set -- install "$@"
	[ -z "$root" ] || set -- "$@" --prefix "$root"
	[ -z "$verify_key" ] || set -- "$@" --verify-key "$verify_key"
	[ -z "$dry_run" ] || set -- "$@" --dry-run
	[ -z "$replace_foreign" ] || set -- "$@" --replace-foreign
	cleanup
	trap - EXIT
	exec sh "$here/${0##*/}" "$@"
}

verify_tarball
known_paths
case $action in
install)
	do_install
	load_installed
	install_follow_ups
	;;
uninstall) do_uninstall ;;
esac
