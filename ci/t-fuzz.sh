#!/bin/sh
# The fuzz targets of fuzz/ (cargo fuzz, libFuzzer with AddressSanitizer),
# each run from the committed corpus (fuzz/corpus/TARGET) for
# KD_FUZZ_SECONDS (10 by default; README.md gives the longer run): a crash,
# a hang (one input over 10 s) or 2 GiB of memory fails it, and the input
# that did it is kept in the suite's directory and named.
#
# - envfile, split: kubelet-wrapper's EnvironmentFile= parser and ExecStart=
#   splitter, on bytes, each checked to round-trip what it accepts;
# - sha256sums, deb, rpm: a dist directory as `cargo xtask repo --from`
#   reads it (xtask/src/fuzz.rs);
# - images_layout: an OCI image layout as `dist --from` stages its images.
#
# cargo fuzz's sanitizer flags are nightly-only: RUSTC_BOOTSTRAP=1 lets the
# project's own toolchain take them (no second toolchain to install). The
# build goes to a target directory in the home directory, which a clean
# clone finds again.
#
# Wall time: about 3 min on 2 cores with the dependencies built (xtask and
# the wrapper compiled again, 10 s a target); the first build compiles
# xtask's dependencies with the sanitizer, about 10 min.

# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

kd_require cargo cargo-fuzz

TMP=$(kd_suite_dir)
# Kept after the suite: the inputs a failing target found.
ARTIFACTS=$KD_WORK/fuzz-artifacts
SECONDS_EACH=${KD_FUZZ_SECONDS:-10}
TARGET_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/kubedist/fuzz-target
TARGETS="envfile split sha256sums deb rpm images_layout"

# fuzz ARGS... : cargo fuzz on this checkout's fuzz/ crate. No incremental
# state: it only grows, and the dev profile builds these crates fast enough.
fuzz() {
    (cd "$KD_REPO" && CARGO_INCREMENTAL=0 RUSTC_BOOTSTRAP=1 \
        cargo fuzz "$@" --fuzz-dir fuzz --target-dir "$TARGET_DIR")
}

# prune_older_builds : the project's own crates carry the checkout's path in
# their hashes, so each clone leaves about 1.5 GiB of them behind; only the
# newest build of each is kept (the dependencies are shared and stay).
prune_older_builds() {
    deps=$TARGET_DIR/x86_64-unknown-linux-gnu/debug/deps
    for crate in libxtask xtask libkubelet_wrapper kubelet_wrapper $TARGETS; do
        newest=
        for f in "$deps/$crate"-????????????????*; do
            [ -e "$f" ] || continue
            if [ -z "$newest" ] || [ -n "$(find "$f" -prune -newer "$newest")" ]; then newest=$f; fi
        done
        [ -n "$newest" ] || continue
        hash=$(printf '%.16s' "${newest#"$deps/$crate-"}")
        for f in "$deps/$crate"-????????????????*; do
            case $f in "$deps/$crate-$hash"*) ;; *) rm -f "$f" ;; esac
        done
    done
    rm -rf "$TARGET_DIR/x86_64-unknown-linux-gnu/debug/incremental"
}

# The dev profile: overflow checks and debug assertions on, and a clean
# clone recompiles its own crates in a minute where the release profile
# takes several. The targets run as built (cargo fuzz run would build again).
if ! fuzz build --dev >"$TMP/build.log" 2>&1; then
    tail -n 30 "$TMP/build.log" >&2
    echo "$KD_SUITE: FAIL: cargo fuzz build failed (above)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
prune_older_builds

# runs_clean TARGET : TARGET for SECONDS_EACH from its committed corpus;
# what it finds goes to a scratch corpus, never into fuzz/corpus.
runs_clean() {
    t=$1
    corpus=$KD_REPO/fuzz/corpus/$t
    [ -n "$(ls "$corpus")" ] || { echo "assertion failed: $corpus is empty" >&2; return 1; }
    rm -rf "${ARTIFACTS:?}/$t"
    mkdir -p "$TMP/runs/$t" "$ARTIFACTS/$t"
    status=0
    "$TARGET_DIR/x86_64-unknown-linux-gnu/debug/$t" \
        -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$ARTIFACTS/$t/" "$TMP/runs/$t" "$corpus" >"$TMP/$t.log" 2>&1 || status=$?
    tail -n 5 "$TMP/$t.log"
    if [ "$status" -ne 0 ] || [ -n "$(ls "$ARTIFACTS/$t")" ]; then
        grep -E 'ERROR|panicked|SUMMARY|Test unit written' "$TMP/$t.log" | head -n 20 >&2
        echo "assertion failed: fuzz target $t found the input(s) in $ARTIFACTS/$t" >&2
        return 1
    fi
    # It ran the corpus, then mutated it for the whole time.
    assert_grep 'INITED' "$TMP/$t.log"
    ran=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$TMP/$t.log")
    [ "${ran:-0}" -ge "$SECONDS_EACH" ] || { echo "assertion failed: $t ran ${ran:-no} seconds" >&2; return 1; }
}

test_envfile_runs_clean() { runs_clean envfile; }
test_split_runs_clean() { runs_clean split; }
test_sha256sums_runs_clean() { runs_clean sha256sums; }
test_deb_runs_clean() { runs_clean deb; }
test_rpm_runs_clean() { runs_clean rpm; }
test_images_layout_runs_clean() { runs_clean images_layout; }

for t in $TARGETS; do
    kd_test "test_${t}_runs_clean"
done
kd_summary
