#!/bin/bash
# Data written just before its subvolume is made read-only, or read through
# a read-only bind mount of a writable file system, is still in memory and
# has no extents yet: copy, copy -r and send | btrfs receive must copy it,
# not holes in its place.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M ""
DST=$MNT

# fresh_tree DIR: 20 small files and one of 300 KB, not synced.
fresh_tree()
{
	local i
	for i in $(seq 20); do
		echo "small file $i of $1" >"$1/f$i"
	done
	random_bytes 300000 "$1" >"$1/big"
}

# same_tree A B: every file of A has its content in B.
same_tree()
{
	local f
	for f in "$1"/*; do
		cmp "$f" "$2/${f##*/}" || _fail "content differs: $f $2/${f##*/}"
	done
}

# fresh_ro_subvol NAME: a subvolume of fresh files, read-only at once.
fresh_ro_subvol()
{
	btrfs -q subvolume create "$SRC/$1" >/dev/null || _fail "subvolume $1"
	fresh_tree "$SRC/$1"
	btrfs property set "$SRC/$1" ro true || _fail "set $1 read-only"
}

_log "read-only subvolume: copy of each file"
fresh_ro_subvol one
mkdir "$DST/one"
for f in "$SRC/one"/*; do
	run_check "$ENCIO" -q copy "$f" "$DST/one/"
done
same_tree "$SRC/one" "$DST/one"

_log "read-only subvolume: copy -r"
fresh_ro_subvol tree
run_check "$ENCIO" -q copy -r "$SRC/tree" "$DST/tree"
same_tree "$SRC/tree" "$DST/tree"

_log "read-only subvolume: send | btrfs receive"
fresh_ro_subvol sent
mkdir "$DST/recv"
"$ENCIO" -q send "$SRC/sent" | btrfs receive "$DST/recv" ||
	_fail "send | btrfs receive"
same_tree "$SRC/sent" "$DST/recv/sent"

_log "read-only bind mount of a writable file system"
mkdir "$SRC/rw" "$TEST_TMP/ro"
run_check mount --bind "$SRC/rw" "$TEST_TMP/ro"
_MOUNTS+=("$TEST_TMP/ro")
run_check mount -o remount,bind,ro "$TEST_TMP/ro"
mkdir "$SRC/rw/a" "$SRC/rw/b"
fresh_tree "$SRC/rw/a"
mkdir "$DST/bind-one"
for f in "$TEST_TMP/ro/a"/*; do
	run_check "$ENCIO" -q copy "$f" "$DST/bind-one/"
done
same_tree "$SRC/rw/a" "$DST/bind-one"
fresh_tree "$SRC/rw/b"
run_check "$ENCIO" -q copy -r "$TEST_TMP/ro/b" "$DST/bind-tree"
same_tree "$SRC/rw/b" "$DST/bind-tree"
mkdir "$SRC/rw/c" "$DST/bind-recv"
fresh_tree "$SRC/rw/c"
"$ENCIO" -q send "$TEST_TMP/ro/c" | btrfs receive "$DST/bind-recv" ||
	_fail "send | btrfs receive of the bind mount"
same_tree "$SRC/rw/c" "$DST/bind-recv/c"
echo "PASS: $TEST_NAME"
