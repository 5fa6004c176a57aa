#!/bin/sh
# kubedist-cni-plugins: puts the CNI plugins of the kubernetes system
# extension into /opt/cni/bin, where network add-ons and the container
# runtime look for them. The extension itself cannot ship /opt/cni/bin: an
# extension with anything under /opt makes the host's whole /opt read-only.
#
#   cni-plugins [sync]   copy the merged extension's plugins into /opt/cni/bin
#   cni-plugins remove   remove our copies (run it before removing the extension)
#
# A plugin in /opt/cni/bin is ours only while it is exactly what we copied
# there, as the kubernetes-cni package owns its files one by one. The record
# /var/lib/kubedist/sysext-cni-plugins lists what we copied, in sha256sum's
# format. A copy is recorded before it lands (a temp file, the record, then
# the rename), so a run stopped at any point (a kill, a full disk, a power
# loss) leaves nothing of ours unrecorded, and the next run finishes it;
# while a copy replaces an older one, both digests are recorded. sync copies
# a plugin only where none is or where ours is unchanged, and removes a
# plugin the extension no longer has only if ours is unchanged. Every other file there (Calico's copy of portmap, one an admin
# edited) is left alone and is not, or no longer, recorded as ours.
#
# kubedist-cni-plugins.service runs `sync` before every start of the kubelet;
# a run with nothing to do prints nothing. It warns, at every start, when
# another merged extension overrides one of this extension's binaries or
# units (the kubelet, its unit, kubeadm's drop-in, ...). What it leaves
# alone is said once: on the first run, and when a copy of ours has changed.
# One run at a time: a run waits for the lock on the record's directory, so
# the sync of a kubelet start never interleaves with an admin's remove.
set -eu

FROM=/usr/lib/kubedist/cni/bin
TO=/opt/cni/bin
RECORD=/var/lib/kubedist/sysext-cni-plugins

log() { echo "kubedist-cni-plugins: $*" >&2; }

# lock: holds the record directory's lock until this run exits.
lock() {
    exec 9<"${RECORD%/*}"
    flock 9
}

# digest FILE: the sha256 of a regular file; nothing for a symlink, a
# directory or no file at all.
digest() {
    if [ -f "$1" ] && [ ! -L "$1" ]; then
        sha256sum <"$1" | cut -d ' ' -f 1
    fi
}

# is_ours NAME DIGEST: DIGEST is one the record holds for NAME.
is_ours() {
    [ -n "$2" ] && [ -f "$RECORD" ] &&
        awk -v name="$1" -v sum="$2" '$2 == name && $1 == sum { found = 1 } END { exit !found }' "$RECORD"
}

# recorded NAME: whether the record names NAME at all.
recorded() {
    [ -f "$RECORD" ] && awk -v name="$1" '$2 == name { found = 1 } END { exit !found }' "$RECORD"
}

# record_also NAME DIGEST: adds DIGEST to what the record holds for NAME.
record_also() {
    rtmp=$(mktemp "$RECORD.XXXXXX")
    { [ ! -f "$RECORD" ] || cat "$RECORD"; echo "$2  $1"; } >"$rtmp"
    chmod 0644 "$rtmp"
    mv -f "$rtmp" "$RECORD"
    rtmp=
}

# copy SRC DEST DIGEST: DEST appears whole or not at all, and is recorded
# as ours before it appears.
copy() {
    tmp=$(mktemp "$TO/.kubedist-cni.XXXXXX")
    cp "$1" "$tmp"
    chmod 0755 "$tmp"
    is_ours "${2##*/}" "$3" || record_also "${2##*/}" "$3"
    mv -f "$tmp" "$2"
    tmp=
}

# remove_stale KEEP_DIR: removes our unchanged copies of the recorded
# plugins that KEEP_DIR does not have (every one, for an empty KEEP_DIR).
remove_stale() {
    [ -f "$RECORD" ] || return 0
    awk '{ print $2 }' "$RECORD" | sort -u | while read -r name; do
        [ -n "$name" ] || continue
        if [ -n "$1" ] && [ -e "$1/$name" ]; then
            continue
        fi
        dest=$TO/$name
        if is_ours "$name" "$(digest "$dest")"; then
            rm -f "$dest"
            log "removed $dest"
        elif [ -e "$dest" ] || [ -L "$dest" ]; then
            log "left $dest alone: changed since kubedist copied it"
        fi
    done
}

# Temp files of a run that was stopped: ours by their name.
sweep_temps() {
    for t in "$TO"/.kubedist-cni.* "$RECORD".??????; do
        [ ! -f "$t" ] || rm -f "$t"
    done
}

# The digests of the binaries and units of kubedist's extensions (the
# runtime's too, when merged), and the names of the merged extensions
# (systemd-sysext writes them, in stacking order).
SHIPPED=/usr/lib/kubedist/sysext-files
MERGED=/usr/.systemd-sysext/extensions

# warn_overridden: one line when a binary or unit of kubedist's extensions
# is not what the merged /usr holds: another extension ships the same path
# and wins, because systemd-sysext stacks extensions by name and the one
# whose name sorts later wins.
warn_overridden() {
    changed=
    for list in "$SHIPPED"/*.sha256; do
        [ -f "$list" ] || continue
        changed="$changed$(cd / && sha256sum -c "$list" 2>/dev/null | sed -n 's/: FAILED.*$//p' | tr '\n' ' ')"
    done
    [ -n "$changed" ] || return 0
    # The other merged extensions: those that list no files of kubedist's.
    others=
    if [ -f "$MERGED" ]; then
        while read -r name; do
            [ -f "$SHIPPED/$name.sha256" ] || others="$others$name "
        done <"$MERGED"
    fi
    log "warning: another system extension wins over kubedist's for ${changed% } (merged: ${others% }; of two extensions shipping a path the one whose name sorts later wins)"
}

sync_plugins() {
    if [ ! -d "$FROM" ]; then
        log "$FROM: no such directory (is the kubernetes extension merged?)"
        exit 1
    fi
    warn_overridden
    mkdir -p "$TO" "${RECORD%/*}"
    lock
    first_run=
    [ -f "$RECORD" ] || first_run=1
    sweep_temps
    tmp='' rtmp=''
    new=$(mktemp "$RECORD.XXXXXX")
    trap 'rm -f "$new" ${tmp:+"$tmp"} ${rtmp:+"$rtmp"}' EXIT
    for src in "$FROM"/*; do
        [ -f "$src" ] || continue
        name=${src##*/}
        dest=$TO/$name
        want=$(digest "$src")
        have=$(digest "$dest")
        if [ ! -e "$dest" ] && [ ! -L "$dest" ]; then
            copy "$src" "$dest" "$want"
            log "installed $dest"
        elif is_ours "$name" "$have"; then
            if [ "$have" != "$want" ]; then
                copy "$src" "$dest" "$want"
                log "updated $dest"
            fi
        else
            # Not ours, or changed since we copied it: never ours again.
            if recorded "$name"; then
                log "left $dest alone: changed since kubedist copied it"
            elif [ -n "$first_run" ] && [ "$have" != "$want" ]; then
                log "left $dest alone: not copied there by kubedist"
            fi
            continue
        fi
        echo "$want  $name" >>"$new"
    done
    remove_stale "$FROM"
    chmod 0644 "$new"
    mv -f "$new" "$RECORD"
    trap - EXIT
}

case ${1:-sync} in
sync)
    sync_plugins
    ;;
remove)
    [ ! -d "${RECORD%/*}" ] || lock
    [ ! -d "$TO" ] || sweep_temps
    remove_stale ""
    rm -f "$RECORD"
    ;;
*)
    echo "usage: $0 [sync|remove]" >&2
    exit 2
    ;;
esac
