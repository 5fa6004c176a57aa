#!/bin/sh
# The linters a distribution packager runs, on release N's artifacts:
#
# - lintian on every .deb and rpmlint on every .rpm: every error or warning
#   must be answered in pkg/lint/lintian.allow or pkg/lint/rpmlint.allow
#   (each entry with its reason), and every entry there must still be used;
# - shellcheck on the maintainer scripts as the packages carry them (with
#   their @...@ values filled in) and on the scriptlets of the rpms, and on
#   every shell file of the checkout (the installer, the image's scripts,
#   the init files, the suites themselves).
#
# Wall time: about a minute on 2 cores (lintian is most of it).

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require lintian rpmlint shellcheck dpkg-deb rpm git
kd_require_dist

TMP=$(kd_scratch_dir t-lint)

# allowed LIST FINDINGS : FINDINGS ("package tag" lines) not allowed by LIST
# are printed and fail; so do entries of LIST that allow none of them.
allowed() {
    grep -v '^#' "$1" | grep . | LC_ALL=C sort -u >"$TMP/allow"
    LC_ALL=C sort -u "$2" >"$TMP/found"
    awk 'NR == FNR { allow[$1 " " $2] = 1; next }
        !(($1 " " $2) in allow) && !(("* " $2) in allow) { print; bad = 1 }
        END { exit bad }' "$TMP/allow" "$TMP/found" >"$TMP/unexpected" || {
        echo "assertion failed: findings not answered in $1:" >&2
        sed 's/^/  | /' "$TMP/unexpected" >&2
        return 1
    }
    awk 'NR == FNR { used[$1 " " $2] = 1; used["* " $2] = 1; next }
        !(($1 " " $2) in used) { print; bad = 1 }
        END { exit bad }' "$TMP/found" "$TMP/allow" >"$TMP/stale" || {
        echo "assertion failed: entries of $1 that no finding uses any more (remove them):" >&2
        sed 's/^/  | /' "$TMP/stale" >&2
        return 1
    }
}

lintian_findings_are_all_answered() {
    # lintian exits non-zero on errors; the allow-list decides.
    lintian --tag-display-limit 0 "$KD_DIST"/*.deb >"$TMP/lintian.out" 2>"$TMP/lintian.err" || true
    cat "$TMP/lintian.out"
    if grep -v 'running with root privileges' "$TMP/lintian.err" | grep .; then
        echo "assertion failed: lintian reported problems of its own (above)" >&2
        return 1
    fi
    # "E: package: tag [context]" -> "package tag"
    sed -n 's/^[EW]: \([^:]*\): \([^ ]*\).*/\1 \2/p' "$TMP/lintian.out" >"$TMP/lintian.found"
    [ "$(grep -c . "$TMP/lintian.found")" -gt 0 ] || {
        echo "assertion failed: lintian found nothing at all; did it run?" >&2
        return 1
    }
    allowed "$KD_REPO/pkg/lint/lintian.allow" "$TMP/lintian.found"
}

rpmlint_findings_are_all_answered() {
    # rpmlint exits non-zero on errors; the allow-list decides.
    rpmlint "$KD_DIST"/*.rpm >"$TMP/rpmlint.out" 2>&1 || true
    cat "$TMP/rpmlint.out"
    grep -q "^ *[0-9]* packages and 0 specfiles checked" "$TMP/rpmlint.out" || {
        echo "assertion failed: rpmlint did not check the packages (above)" >&2
        return 1
    }
    # "package.arch: E: tag details" -> "package tag"
    sed -n 's/^\([^ :]*\)\.[^ .:]*: [EW]: \([^ ]*\).*/\1 \2/p' "$TMP/rpmlint.out" >"$TMP/rpmlint.found"
    allowed "$KD_REPO/pkg/lint/rpmlint.allow" "$TMP/rpmlint.found"
}

maintainer_scripts_pass_shellcheck() {
    n=0
    for deb in "$KD_DIST"/*.deb; do
        dir=$TMP/control.$(basename "$deb" .deb)
        dpkg-deb -e "$deb" "$dir"
        for s in preinst postinst prerm postrm; do
            [ -f "$dir/$s" ] || continue
            shellcheck -s sh "$dir/$s"
            n=$((n + 1))
        done
    done
    for rpm in "$KD_DIST"/*.rpm; do
        base=$TMP/scriptlet.$(basename "$rpm" .rpm)
        for tag in PREIN POSTIN PREUN POSTUN; do
            rpm -qp --qf "%{$tag}" "$rpm" >"$base.$tag"
            [ "$(cat "$base.$tag")" = "(none)" ] && continue
            shellcheck -s sh "$base.$tag"
            n=$((n + 1))
        done
    done
    echo "$n scripts checked"
    [ "$n" -gt 0 ] || { echo "assertion failed: no maintainer script found" >&2; return 1; }
}

# every_shell_file_passes_shellcheck : every shell file the checkout ships or
# runs, found as git lists them (not by a list here): a *.sh name, a sh or
# bash shebang, a `shellcheck shell=` directive, OpenRC's init script, the
# maintainer-script templates. No finding is allowed; the exceptions are the
# `# shellcheck disable=` lines in the files, each with its reason, and the
# one below.
every_shell_file_passes_shellcheck() {
    n=0
    failed=
    git -C "$KD_REPO" ls-files >"$TMP/tracked"
    while read -r f; do
        [ -f "$KD_REPO/$f" ] || continue
        case $f in
        # /etc/conf.d/kubelet: OpenRC sources it into the init script, which
        # reads its variables: they are not unused (SC2034).
        units/openrc/kubelet.confd) opts="-s sh -e SC2034" ;;
        # Run by openrc-run, a POSIX sh; the templates and the sourced
        # kernel-apply fragment are sh (and checked rendered, below).
        units/openrc/kubelet.initd | pkg/scripts/*) opts="-s sh" ;;
        # Fuzz inputs: rpm headers carry the maintainer scripts, directives
        # and all, but they are data.
        fuzz/corpus/*) continue ;;
        *.sh) opts= ;;
        *)
            first=$(head -c 200 "$KD_REPO/$f" | tr -d '\0' | head -n 1)
            case $first in
            '#!'*/sh | '#!'*/bash | '#!'*' sh' | '#!'*' bash') opts= ;;
            *) grep -q '^# shellcheck shell=' "$KD_REPO/$f" 2>/dev/null || continue; opts= ;;
            esac
            ;;
        esac
        # shellcheck disable=SC2086 # opts is a list of options
        if ! (cd "$KD_REPO" && shellcheck -x $opts "$f"); then
            failed="$failed $f"
        fi
        n=$((n + 1))
    done <"$TMP/tracked"
    echo "$n shell files checked"
    [ -z "$failed" ] || { echo "assertion failed: shellcheck findings in:$failed" >&2; return 1; }
    # installer/, units/, ci/, pkg/scripts/: far more than this.
    [ "$n" -ge 30 ] || { echo "assertion failed: only $n shell files found" >&2; return 1; }
}

kd_test lintian_findings_are_all_answered
kd_test rpmlint_findings_are_all_answered
kd_test maintainer_scripts_pass_shellcheck
kd_test every_shell_file_passes_shellcheck

kd_summary
