#!/bin/bash
# A full send goes through the snapshot in inode-number order, as btrfs
# send does, so its stream is never larger than btrfs send
# --compressed-data's where the walk by directories made it larger:
# - a file made before the directory it was moved into (a higher inode
#   number) is written under a short orphan name, then renamed;
# - a hard-linked file is written under its shortest name;
# - of two files sharing a compressed extent, the one with the lower inode
#   number sends it, though it is in the root and the other in a directory
#   of a still lower inode number; the other clones its part.
# Received by btrfs receive and by encio receive, each gives the source.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e"

LONG=$(printf 'd%.0s' $(seq 200))
run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
# inode 257: the directory made first; 258: the file whose extent it shares
run_check mkdir "$V/t"
run_check xfs_io -f -c "pwrite -S 0xcd 0 128K" "$V/d" >/dev/null
# 259: written, then moved under directories made after it
run_check head -c 2M /dev/urandom >"$V/moved"
# 260: a hard-linked file, its second name longer
run_check head -c 1M /dev/urandom >"$V/n1"
run_check ln "$V/n1" "$V/l-$LONG"
run_check mkdir -p "$V/$LONG/$LONG/$LONG"
run_check mv "$V/moved" "$V/$LONG/$LONG/$LONG/moved"
run_check touch "$V/t/p"
sync
run_check xfs_io -c "reflink $V/d 32K 0 64K" "$V/t/p" >/dev/null
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"

"$ENCIO" -q send -f "$TEST_TMP/e.stream" "$SRC/snap" || _fail "encio send failed"
btrfs -q send --compressed-data -f "$TEST_TMP/b.stream" "$SRC/snap" || _fail "btrfs send failed"
btrfs receive --dump -f "$TEST_TMP/e.stream" >"$TEST_TMP/e.dump" || _fail "btrfs receive --dump"
grep -qE '^clone +\./snap/t/p +offset=0 len=65536 from=\./snap/d ' "$TEST_TMP/e.dump" ||
	_fail "t/p does not clone its part of d's extent"
! grep -qE "^write +\./snap/$LONG/" "$TEST_TMP/e.dump" ||
	_fail "moved is written under its long path"
grep -qE '^write +\./snap/n1 ' "$TEST_TMP/e.dump" || _fail "n1 is not written under its short name"
e=$(stat -c %s "$TEST_TMP/e.stream") b=$(stat -c %s "$TEST_TMP/b.stream")
echo "stream: encio $e bytes, btrfs send $b bytes"
[ "$e" -le "$b" ] || _fail "stream of $e bytes, btrfs send's $b"

btrfs receive -f "$TEST_TMP/e.stream" "$DST/b" >/dev/null || _fail "btrfs receive failed"
"$ENCIO" -q receive -f "$TEST_TMP/e.stream" "$DST/e" || _fail "encio receive failed"
for r in b e; do
	diff -r "$SRC/snap" "$DST/$r/snap" || _fail "$r: content differs"
	[ "$(stat -c %i "$DST/$r/snap/n1")" = "$(stat -c %i "$DST/$r/snap/l-$LONG")" ] ||
		_fail "$r: n1 and its second name are not one inode"
	[ "$(stat -c %Y "$DST/$r/snap/$LONG")" = "$(stat -c %Y "$SRC/snap/$LONG")" ] ||
		_fail "$r: a directory's mtime differs"
	! ls "$DST/$r/snap" | grep -q '^o[0-9]' || _fail "$r: an orphan name is left"
done
