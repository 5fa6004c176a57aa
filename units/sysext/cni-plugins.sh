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
# format. sync copies a plugin only where none is or where ours is unchanged,
# and removes a plugin the extension no longer has only if ours is
# unchanged. Every other file there (Calico's copy of portmap, one an admin
# edited) is left alone and is not, or no longer, recorded as ours.
#
# kubedist-cni-plugins.service runs `sync` before every start of the kubelet;
# a run with nothing to do prints nothing. What it leaves alone is said once:
# on the first run, and when a copy of ours has changed.
set -eu

FROM=/usr/lib/kubedist/cni/bin
TO=/opt/cni/bin
RECORD=/var/lib/kubedist/sysext-cni-plugins

log() { echo "kubedist-cni-plugins: $*" >&2; }

# digest FILE: the sha256 of a regular file; nothing for a symlink, a
# directory or no file at all.
digest() {
    if [ -f "$1" ] && [ ! -L "$1" ]; then
        sha256sum <"$1" | cut -d ' ' -f 1
    fi
}

# recorded NAME: the digest of our copy of NAME, if we made one.
recorded() {
    [ -f "$RECORD" ] || return 0
    awk -v name="$1" '$2 == name { print $1; exit }' "$RECORD"
}

# copy SRC DEST: DEST appears whole or not at all.
copy() {
    tmp=$(mktemp "$TO/.kubedist-cni.XXXXXX")
    cp "$1" "$tmp"
    chmod 0755 "$tmp"
    mv -f "$tmp" "$2"
}

# remove_stale KEEP_DIR: removes our unchanged copies of the recorded
# plugins that KEEP_DIR does not have (every one, for an empty KEEP_DIR).
remove_stale() {
    [ -f "$RECORD" ] || return 0
    while read -r sum name; do
        [ -n "$name" ] || continue
        if [ -n "$1" ] && [ -e "$1/$name" ]; then
            continue
        fi
        dest=$TO/$name
        if [ "$(digest "$dest")" = "$sum" ]; then
            rm -f "$dest"
            log "removed $dest"
        elif [ -e "$dest" ] || [ -L "$dest" ]; then
            log "left $dest alone: changed since kubedist copied it"
        fi
    done <"$RECORD"
}

sync_plugins() {
    if [ ! -d "$FROM" ]; then
        log "$FROM: no such directory (is the kubernetes extension merged?)"
        exit 1
    fi
    first_run=
    [ -f "$RECORD" ] || first_run=1
    mkdir -p "$TO" "${RECORD%/*}"
    new=$(mktemp "$RECORD.XXXXXX")
    trap 'rm -f "$new"' EXIT
    for src in "$FROM"/*; do
        [ -f "$src" ] || continue
        name=${src##*/}
        dest=$TO/$name
        want=$(digest "$src")
        ours=$(recorded "$name")
        have=$(digest "$dest")
        if [ ! -e "$dest" ] && [ ! -L "$dest" ]; then
            copy "$src" "$dest"
            log "installed $dest"
        elif [ -n "$ours" ] && [ "$have" = "$ours" ]; then
            if [ "$have" != "$want" ]; then
                copy "$src" "$dest"
                log "updated $dest"
            fi
        else
            # Not ours, or changed since we copied it: never ours again.
            if [ -n "$ours" ]; then
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
    remove_stale ""
    rm -f "$RECORD"
    ;;
*)
    echo "usage: $0 [sync|remove]" >&2
    exit 2
    ;;
esac
