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
  --family deb|rpm    deb: /etc/default/kubelet, rpm: /etc/sysconfig/kubelet
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
  -h, --help          this text

Before anything is written, every file of the tarball is checked against
SHA256SUMS (offline), and every file must be listed there: a changed, missing
or extra file stops the installer with nothing written.

Init system (first rule that applies): --init; the one recorded by an earlier
install here; the running one (/run/systemd/system: systemd;
/run/openrc/softlevel: OpenRC; a runit or runsvdir process: runit); the only
one installed (systemd, openrc-run, runsvdir). Several installed and none
running: pass --init. With --prefix only installed files count.

Family (first rule that applies): --family; the one recorded earlier; rpm if
only /etc/sysconfig exists, deb if only /etc/default exists; both: deb if
/etc/debian_version exists, else rpm; neither: deb.

Files are written to a temporary file beside their destination, given their
mode, then renamed over it, so a reader never sees half a file. A config file
you edited (one whose content differs from what install.sh last installed) is
never overwritten: the new default lands beside it as FILE.new and the
installer says so; an unedited one follows the new release. What was
installed, with its sha256, is recorded in /var/lib/kubedist/install.manifest;
uninstall removes exactly that: edited configs are kept (with a note),
directories install.sh created are removed when empty, and nothing else is
touched (third-party plugins in /opt/cni/bin stay).

A run that changes nothing says "nothing to do" and touches no service. An
interrupted run (killed, power loss) leaves a journal in /var/lib/kubedist;
run install.sh again and it completes the install.

It refuses to install over a package-manager install of the same components
(dpkg or rpm says kubelet, kubeadm, ... is installed): remove those packages
first, or keep using them. --kubelet-only is allowed beside them.

Service (only when that init system is running here and no --prefix is given;
otherwise the commands to run are printed):
  systemd   systemctl daemon-reload; systemctl enable kubelet; started
            (restarted on upgrade) only once /var/lib/kubelet/config.yaml
            exists: kubeadm init/join starts it
  openrc    rc-update add kubelet default; rc-service kubelet start (restart
            on upgrade); kubelet-wrapper waits for kubeadm's config
  runit     a link /etc/sv/kubelet in the service directory (/var/service,
            /etc/service, /run/runit/service or /etc/runit/runsvdir/default,
            or the one a running runsvdir watches); sv restart on upgrade.
            kubeadm cannot restart a runit service: after `kubeadm upgrade`,
            run `sv restart kubelet`.

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

need_value() {
	if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "$1 needs a value"; fi
}

while [ $# -gt 0 ]; do
	case $1 in
	install | uninstall)
		[ -z "$action" ] || usage_error "one action only, not '$action' and '$1'"
		action=$1
		;;
	--init=* | --family=* | --prefix=* | --service-dir=* | --kubelet-version=*)
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
	--dry-run) dry_run=1 ;;
	--no-enable) no_enable=1 ;;
	--no-start) no_start=1 ;;
	--kubelet-only) kubelet_only=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
action=${action:-install}

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

if [ -z "$dry_run" ] && [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
	die "run as root (or try --dry-run, or --prefix DIR)"
fi

# The unpacked tarball: the directory of this script.
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || die "cannot enter the directory of $0"

state=$root/var/lib/kubedist
manifest=$state/install.manifest
journal=$state/install.journal
lock=$state/lock

work=$(mktemp -d "${TMPDIR:-/tmp}/kubedist-install.XXXXXX") ||
	die "cannot create a temporary directory in ${TMPDIR:-/tmp}"
locked=
cleanup() {
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

# A path we accept in MANIFEST and SHA256SUMS: no spaces, quotes or globs.
safe_path() {
	case $1 in
	'' | *[!A-Za-z0-9._+@:=,/-]* | *//* | */./* | */../* | */. | */.. | ./* | ../*) return 1 ;;
	esac
}

# ---------------------------------------------------------------------------
# 1. The tarball: checked before anything on the host is touched.

verify_tarball() {
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
	(cd "$here" && find . ! -type d) | sed 's|^\./||' | grep -vx SHA256SUMS | sort >"$work/present"
	extra=$(awk 'NR == FNR { listed[$0] = 1; next } !($0 in listed)' "$work/listed" "$work/present" | head -n 1)
	[ -z "$extra" ] || die "$here/$extra: not listed in SHA256SUMS; refusing a tarball with unknown files"
	odd=$(cd "$here" && find . ! -type d ! -type f | head -n 1)
	[ -z "$odd" ] || die "$here/${odd#./}: not a regular file; refusing"
	grep -qx MANIFEST "$work/listed" || die "$sums: MANIFEST is not listed"

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
	while IFS=$tab read -r fam _ kind _ _ path; do
		safe_path "$path" || die "$here/MANIFEST: refusing the path '$path'"
		if [ "$kind" != dir ]; then
			grep -qx "payload/$fam$path" "$work/listed" ||
				die "$here/MANIFEST: payload/$fam$path is missing from the tarball"
		fi
	done <"$work/entries"
	# ... and every payload file belongs to an entry.
	awk -F "$tab" '$3 != "dir" { print "payload/" $1 $6 }' "$work/entries" | sort >"$work/payload"
	stray=$(grep '^payload/' "$work/listed" |
		awk 'NR == FNR { known[$0] = 1; next } !($0 in known)' "$work/payload" - | head -n 1)
	[ -z "$stray" ] || die "$here/$stray: no MANIFEST entry installs it; refusing"
}

# The sha256 of a tarball file (relative path), from the verified list.
sum_of() { awk -F "$tab" -v p="$1" '$1 == p { print $2; exit }' "$work/sums"; }

# ---------------------------------------------------------------------------
# 2. What is installed already: the manifest plus the journal of an
#    interrupted run. Lines: set kind mode sha256 path (tab-separated), kinds
#    file, config, new (a FILE.new we wrote), dir (a directory we created),
#    link (runit's service link; sha256 holds its target). "@key value" lines
#    carry the family and init system.

load_installed() {
	: >"$work/old"
	for f in "$manifest" "$journal"; do
		[ -f "$f" ] || continue
		grep -v -e '^#' -e '^@' -e '^$' "$f" >>"$work/old" || true
	done
	# The last record of a path wins (the journal is newer than the manifest).
	awk -F "$tab" '{ k = $1 SUBSEP $5; last[k] = $0; order[NR] = k }
		END { for (i = 1; i <= NR; i++) if (last[order[i]] != "") { print last[order[i]]; last[order[i]] = "" } }' \
		"$work/old" >"$work/old.tmp"
	mv "$work/old.tmp" "$work/old"
}

recorded() { # KEY: a "@KEY value" of the manifest
	[ -f "$manifest" ] || return 0
	awk -v k="@$1" '$1 == k { print $2; exit }' "$manifest"
}

old_record() { # SET PATH -> "kind mode sha256" of an earlier record, if any
	awk -F "$tab" -v s="$1" -v p="$2" '$1 == s && $5 == p { print $2 "\t" $3 "\t" $4; exit }' "$work/old"
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
	if [ -d "$root/etc/sysconfig" ] && [ ! -d "$root/etc/default" ]; then
		family=rpm
	elif [ -d "$root/etc/sysconfig" ] && [ ! -f "$root/etc/debian_version" ]; then
		family=rpm
	else
		family=deb
	fi
}

# Components another package manager already installed: refuse to mix.
package_manager_installs() { # PACKAGE...
	if [ -f "$root/var/lib/dpkg/status" ]; then
		for p in "$@"; do
			if command -v dpkg-query >/dev/null 2>&1; then
				# shellcheck disable=SC2016 # a dpkg-query format, not shell
				st=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${db:Status-Status}' "$p" 2>/dev/null) || st=
			else
				st=$(awk -v p="$p" '
					/^Package: / { pkg = $2 }
					/^Status: / && pkg == p { print $4; exit }' "$root/var/lib/dpkg/status")
			fi
			case $st in '' | not-installed | config-files) ;; *) printf ' %s (dpkg: %s)' "$p" "$st" ;; esac
		done
	fi
	if command -v rpm >/dev/null 2>&1 &&
		{ [ -d "$root/var/lib/rpm" ] || [ -d "$root/usr/lib/sysimage/rpm" ]; }; then
		for p in "$@"; do
			if rpm --root "${root:-/}" -q --quiet "$p" 2>/dev/null; then
				printf ' %s (rpm)' "$p"
			fi
		done
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
	v[0-9]*.[0-9]*.[0-9]*) safe_path "$v" || die "--kubelet-version '$v' is not a version like v1.34.2" ;;
	*) die "--kubelet-version '$v' is not a version like v1.34.2" ;;
	esac
	printf '%s\n' "$v"
}

# ---------------------------------------------------------------------------
# 4. Changes to the host. In a dry run each only says what it would do.

changed=0

record() { # SET KIND MODE SHA PATH: the new manifest
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/new"
}
journal() { # the same line, at once, in the journal
	[ -n "$dry_run" ] && return 0
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$journal" || die "$journal: cannot write"
}
act() { # MESSAGE: say what we do (or would do)
	changed=$((changed + 1))
	if [ -n "$dry_run" ]; then say "would $*"; else say "$*"; fi
}

# A directory that exists, or that this (dry) run has created.
dir_exists() { [ -d "$root$1" ] || grep -qxF -- "$1" "$work/made"; }

make_dir() { # SET MODE PATH (host path without root)
	t=$root$3
	if dir_exists "$3"; then
		# Ours from an earlier run: keep owning it.
		if [ "$(old_record "$1" "$3" | cut -f1)" = dir ]; then
			record "$1" dir "$2" - "$3"
		fi
		return 0
	fi
	[ -e "$t" ] && die "$t: exists and is not a directory"
	act "create directory $3"
	echo "$3" >>"$work/made"
	record "$1" dir "$2" - "$3"
	[ -n "$dry_run" ] && return 0
	journal "$1" dir "$2" - "$3"
	mkdir "$t" || die "$t: cannot create the directory"
	chmod "$2" "$t" || die "$t: cannot set mode $2"
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

# Writes SRC to host path DEST with MODE: temp file beside it, then rename.
# A killed run may have left the temp file (half written, or anything else):
# it is removed first, never written through.
put_file() { # SRC MODE DEST
	t=$root$3
	tmp=${t%/*}/.${t##*/}.kubedist-tmp
	[ -d "$t" ] && die "$t: is a directory, expected a file"
	rm -f -- "$tmp" || die "$tmp: cannot remove the leftover of an earlier run"
	cp -- "$1" "$tmp" || die "$tmp: cannot write"
	chmod "$2" "$tmp" || die "$tmp: cannot set mode $2"
	mv -f -- "$tmp" "$t" || die "$t: cannot rename $tmp over it"
	# For tests of interrupted runs: stop right here (the file in place, its
	# journal line not yet written), so that a test can kill the installer
	# at a known point.
	if [ "${KUBEDIST_INSTALL_TEST_STOP_AFTER:-}" = "$3" ]; then kill -STOP $$; fi
}

install_file() { # SET MODE SHA SRC DEST: a vendor file, always ours to replace
	t=$root$5
	if [ -f "$t" ] && [ "$(sha256_of "$t")" = "$3" ]; then
		if ! same_mode "$2" "$(mode_of "$t")"; then
			act "set mode $2 on $5"
			[ -n "$dry_run" ] || { journal "$1" file "$2" "$3" "$5"; chmod "$2" "$t" || die "$t: cannot set mode $2"; }
		fi
		record "$1" file "$2" "$3" "$5"
		return 0
	fi
	if [ -e "$t" ]; then act "update $5"; else act "install $5"; fi
	if [ -z "$dry_run" ]; then
		put_file "$4" "$2" "$5"
		journal "$1" file "$2" "$3" "$5"
	fi
	record "$1" file "$2" "$3" "$5"
}

install_config() { # SET MODE SHA SRC DEST: an admin-editable file
	t=$root$5
	prev=$(old_record "$1" "$5")
	prev_sha=
	[ "$(printf '%s' "$prev" | cut -f1)" = config ] && prev_sha=$(printf '%s' "$prev" | cut -f3)
	if [ ! -e "$t" ]; then
		act "install $5"
		[ -n "$dry_run" ] || { put_file "$4" "$2" "$5"; journal "$1" config "$2" "$3" "$5"; }
		record "$1" config "$2" "$3" "$5"
		return 0
	fi
	now=$(sha256_of "$t")
	if [ "$now" = "$3" ]; then
		record "$1" config "$2" "$3" "$5"
		return 0
	fi
	if [ -n "$prev_sha" ] && [ "$now" = "$prev_sha" ]; then
		# Unedited since we installed it: it follows the release.
		act "update $5"
		[ -n "$dry_run" ] || { put_file "$4" "$2" "$5"; journal "$1" config "$2" "$3" "$5"; }
		record "$1" config "$2" "$3" "$5"
		return 0
	fi
	# Edited (or not ours): keep it, put the new default beside it.
	[ -n "$prev_sha" ] && record "$1" config "$2" "$prev_sha" "$5"
	if [ -f "$t.new" ] && [ "$(sha256_of "$t.new")" = "$3" ]; then
		record "$1" new "$2" "$3" "$5.new"
		return 0
	fi
	offered=$(old_record "$1" "$5.new")
	if [ ! -e "$t.new" ] && [ "$(printf '%s' "$offered" | cut -f1)" = new ] &&
		[ "$(printf '%s' "$offered" | cut -f3)" = "$3" ]; then
		# This default was offered before and you removed FILE.new: it is
		# not offered again until a release changes it.
		record "$1" new "$2" "$3" "$5.new"
		return 0
	fi
	act "keep your edited $5; the new default is in $5.new"
	[ -n "$dry_run" ] || { put_file "$4" "$2" "$5.new"; journal "$1" new "$2" "$3" "$5.new"; }
	record "$1" new "$2" "$3" "$5.new"
}

# Removes what an old record lists, if it is still what we installed.
remove_recorded() { # KIND SHA PATH VERB(remove|uninstall)
	t=$root$3
	case $1 in
	dir) return 0 ;; # later, deepest first
	link)
		if [ -L "$t" ] && [ "$(readlink "$t")" = "$2" ]; then
			act "remove the link $3"
			[ -n "$dry_run" ] || rm -f "$t"
		fi
		return 0
		;;
	esac
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

write_manifest() { # SET: the manifest = other sets' records + this run's
	{
		echo "# kubedist install manifest, written by install.sh; uninstall removes what it lists."
		echo "# set	kind	mode	sha256	path"
		[ -z "$family" ] || printf '@family %s\n' "$family"
		[ -z "$init" ] || printf '@init %s\n' "$init"
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
	if ! { cp "$work/manifest" "$manifest.tmp" && chmod 0644 "$manifest.tmp" &&
		mv -f "$manifest.tmp" "$manifest"; }; then
		die "$manifest: cannot write"
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
	if ! { mkdir -p "$state" && chmod 0755 "$state"; }; then die "$state: cannot create"; fi
	if ! mkdir "$lock" 2>/dev/null; then
		pid=$(cat "$lock/pid" 2>/dev/null) || pid=
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			die "another install.sh (pid $pid) is running; $lock is its lock"
		fi
		rm -rf "$lock"
		mkdir "$lock" || die "$lock: cannot create the lock"
	fi
	locked=1
	echo $$ >"$lock/pid"
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
	# The directory a running runsvdir watches (its first non-option argument).
	if [ -z "$root" ]; then
		for pid in $(runsvdir_pids); do
			d=$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed 1d | grep -v '^-' | head -n 1)
			if [ -n "$d" ]; then
				case $d in /*) ;; *) d=$(cd "/proc/$pid/cwd/$d" 2>/dev/null && pwd) || d= ;; esac
				[ -n "$d" ] && { printf '%s\n' "$d"; return; }
			fi
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

# Enables/starts the kubelet after a change. SVDIR_LINK is recorded as ours.
service_after_install() {
	config_written=
	[ -f "$root/var/lib/kubelet/config.yaml" ] && config_written=1
	if [ -n "$root" ] || ! init_running "$init"; then
		where=${root:+ in $root}
		case $init in
		systemd) say "systemd is not running here$where; to enable the kubelet: systemctl enable kubelet" ;;
		openrc) say "OpenRC is not running here$where; to enable and start the kubelet: rc-update add kubelet default && rc-service kubelet start" ;;
		runit)
			d=$(runit_service_dir)
			say "runit is not running here$where; to enable and start the kubelet: ln -s /etc/sv/kubelet ${d:-<your runsvdir service directory>}/"
			;;
		esac
		return 0
	fi
	case $init in
	systemd)
		run_cmd systemctl daemon-reload || die "systemctl daemon-reload failed"
		[ -n "$no_enable" ] || run_cmd systemctl enable kubelet || die "systemctl enable kubelet failed"
		if [ -z "$no_start" ]; then
			if [ -n "$config_written" ] || systemctl -q is-active kubelet; then
				run_cmd systemctl restart kubelet || die "systemctl restart kubelet failed"
			else
				say "the kubelet starts once kubeadm init or join has configured it"
			fi
		fi
		;;
	openrc)
		if [ -z "$no_enable" ] && [ ! -e /etc/runlevels/default/kubelet ]; then
			run_cmd rc-update add kubelet default || die "rc-update add kubelet default failed"
		fi
		if [ -z "$no_start" ]; then
			if rc-service kubelet status >/dev/null 2>&1; then
				run_cmd rc-service kubelet restart || die "rc-service kubelet restart failed"
			else
				run_cmd rc-service kubelet start || die "rc-service kubelet start failed"
			fi
		fi
		;;
	runit)
		d=$(runit_service_dir)
		[ -n "$d" ] || die "cannot find runit's service directory; pass --service-dir"
		if [ -L "$d/kubelet" ] || [ -e "$d/kubelet" ]; then
			if [ -z "$no_start" ]; then
				run_cmd sv restart "$d/kubelet" || die "sv restart $d/kubelet failed"
			fi
		elif [ -n "$no_enable" ] || [ -n "$no_start" ]; then
			say "not linked (--no-enable/--no-start); to enable and start: ln -s /etc/sv/kubelet $d/"
		else
			act "enable and start the kubelet: link $d/kubelet -> /etc/sv/kubelet"
			if [ -z "$dry_run" ]; then
				ln -s /etc/sv/kubelet "$d/kubelet" || die "$d/kubelet: cannot create the link"
				journal main link - /etc/sv/kubelet "$d/kubelet"
			fi
			record main link - /etc/sv/kubelet "$d/kubelet"
		fi
		;;
	esac
}

service_before_uninstall() {
	if [ -n "$root" ] || ! init_running "$init"; then
		return 0
	fi
	case $init in
	systemd)
		run_cmd systemctl disable --now kubelet || say "note: systemctl disable --now kubelet failed"
		;;
	openrc)
		if rc-service kubelet status >/dev/null 2>&1; then
			run_cmd rc-service kubelet stop || say "note: rc-service kubelet stop failed"
		fi
		if [ -e /etc/runlevels/default/kubelet ]; then
			run_cmd rc-update del kubelet default || say "note: rc-update del kubelet default failed"
		fi
		;;
	runit)
		link=$(awk -F "$tab" '$2 == "link" { print $5; exit }' "$work/old")
		if [ -n "$link" ] && [ -L "$link" ]; then
			run_cmd sv force-stop "$link" || say "note: sv force-stop $link failed"
			act "remove the link $link"
			[ -n "$dry_run" ] || rm -f "$link"
		fi
		# Let its runsv (and the log's) exit, so its state can go too.
		if runsv_running /etc/sv/kubelet; then
			run_cmd sv exit /etc/sv/kubelet || true
			n=0
			while [ -z "$dry_run" ] && runsv_running /etc/sv/kubelet && [ $n -lt 50 ]; do
				sleep 0.2
				n=$((n + 1))
			done
		fi
		;;
	esac
}

# ---------------------------------------------------------------------------
# 6. The actions

do_install() {
	detect_family
	if [ -n "$kubelet_only" ]; then
		init=$(recorded init)
		set_name=kubelet-$(kubelet_version)
		awk -F "$tab" -v f="$family" \
			'($1 == "any" || $1 == f) && $3 == "file" && $6 == "/usr/bin/kubelet"' \
			"$work/entries" >"$work/selected"
		[ -s "$work/selected" ] || die "$here/MANIFEST: no kubelet (/usr/bin/kubelet) for $family"
		say "installing the kubelet ${set_name#kubelet-} side by side (family $family)"
	else
		set_name=main
		detect_init
		awk -F "$tab" -v f="$family" -v i="$init" \
			'($1 == "any" || $1 == f) && ($2 == "any" || $2 == i)' \
			"$work/entries" >"$work/selected"
		dup=$(cut -f6 "$work/selected" | sort | uniq -d | head -n 1)
		[ -z "$dup" ] || die "$here/MANIFEST: two entries install $dup for $family/$init"
		# shellcheck disable=SC2046 # package names are checked words
		clash=$(package_manager_installs $(cut -f5 "$work/selected" | sort -u))
		[ -z "$clash" ] || die "already installed by a package manager:$clash; remove those packages first (or keep using them): mixing both breaks upgrades"
		say "installing for $init ($how), family $family ($fhow)${root:+, into $root}"
	fi

	take_lock
	load_installed
	had_journal=
	[ -f "$journal" ] && had_journal=1 && say "completing an interrupted earlier run"
	: >"$work/new"
	: >"$work/made"

	# Directories first, by path (parents before children, so each gets its
	# own mode), then the missing parents of files, then files, then configs.
	awk -F "$tab" '$3 == "dir"' "$work/selected" | LC_ALL=C sort -t "$tab" -k6,6 >"$work/dirs.selected"
	while IFS=$tab read -r fam _ kind mode _ path; do
		make_parents "$set_name" "$path"
		make_dir "$set_name" "$mode" "$path"
	done <"$work/dirs.selected"
	for k in file config; do
		while IFS=$tab read -r fam _ kind mode _ path; do
			[ "$kind" = "$k" ] || continue
			src=$here/payload/$fam$path
			sha=$(sum_of "payload/$fam$path")
			if [ -n "$kubelet_only" ]; then
				path=/opt/kubernetes/${set_name#kubelet-}/bin/kubelet
			fi
			make_parents "$set_name" "$path"
			if [ "$kind" = config ]; then
				install_config "$set_name" "$mode" "$sha" "$src" "$path"
			else
				install_file "$set_name" "$mode" "$sha" "$src" "$path"
			fi
		done <"$work/selected"
	done

	# Records of this set that the new release no longer has.
	: >"$work/stale-dirs"
	while IFS=$tab read -r s kind mode sha path; do
		[ "$s" = "$set_name" ] || continue
		if [ "$kind" = link ]; then
			# The service link stays until uninstall.
			record "$s" link "$mode" "$sha" "$path"
			continue
		fi
		awk -F "$tab" -v p="$path" '$5 == p { found = 1 } END { exit !found }' "$work/new" && continue
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
	[ -s "$work/stale-dirs" ] && remove_dirs "$work/stale-dirs"

	if [ "$changed" = 0 ] && [ -z "$had_journal" ]; then
		write_manifest "$set_name"
		say "nothing to do: everything is installed and unchanged"
		return 0
	fi

	if [ "$set_name" = main ]; then
		[ -n "$dry_run" ] || write_manifest "$set_name"
		service_after_install
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
	if [ ! -f "$manifest" ] && [ ! -f "$journal" ]; then
		say "nothing to do: no kubedist install recorded in ${manifest#"$root"}"
		return 0
	fi
	init=$(recorded init)
	family=$(recorded family)
	take_lock
	load_installed
	if [ -n "$kubelet_only" ]; then
		set_name=kubelet-$(kubelet_version)
		awk -F "$tab" -v s="$set_name" '$1 == s' "$work/old" >"$work/remove"
		[ -s "$work/remove" ] || die "no side-by-side kubelet ${set_name#kubelet-} is recorded in $manifest"
	else
		set_name=
		awk -F "$tab" '$1 != "state"' "$work/old" >"$work/remove"
		service_before_uninstall
	fi
	: >"$work/dirs"
	while IFS=$tab read -r _ kind _ sha path; do
		if [ "$kind" = dir ]; then
			echo "$path" >>"$work/dirs"
		else
			remove_recorded "$kind" "$sha" "$path"
		fi
	done <"$work/remove"
	remove_dirs "$work/dirs"
	if [ -n "$set_name" ]; then
		: >"$work/new"
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

verify_tarball
case $action in
install) do_install ;;
uninstall) do_uninstall ;;
esac
