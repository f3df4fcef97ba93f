#!/bin/bash
# A compressed extent that an earlier file of the snapshot uses in part
# is sent as btrfs send sends it: where that part is the extent's start
# (a reflink of its first half), the part goes as CLONE and the rest as
# an encoded write; where it is a middle part, the extent is sent whole.
# Received by btrfs receive and by encio receive, the later file's first
# extent is shared with the earlier one (xfstests btrfs/281's layout);
# the stream is no larger than btrfs send --compressed-data's.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v filefrag >/dev/null || _not_run "needs filefrag"
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e"

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
# inode order: head and mid before big, whose extents they use in part
run_check xfs_io -f -c "pwrite -S 0xab 0 65K" "$V/head" >/dev/null
run_check xfs_io -f -c "pwrite -S 0x11 0 16K" "$V/mid" >/dev/null
run_check xfs_io -f -c "pwrite -S 0xcd 0 128K" -c "pwrite -S 0xef 128K 128K" "$V/big" >/dev/null
sync
run_check xfs_io -c "reflink $V/big 0 0 64K" "$V/head" >/dev/null
run_check xfs_io -c "reflink $V/big 160K 0 64K" "$V/mid" >/dev/null
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"

"$ENCIO" -q send -f "$TEST_TMP/e.stream" "$SRC/snap" || _fail "encio send failed"
btrfs -q send --compressed-data -f "$TEST_TMP/b.stream" "$SRC/snap" || _fail "btrfs send failed"
btrfs receive --dump -f "$TEST_TMP/e.stream" >"$TEST_TMP/e.dump" || _fail "btrfs receive --dump"
grep -qE '^clone +\./snap/big +offset=0 len=65536 from=\./snap/head ' "$TEST_TMP/e.dump" ||
	_fail "big's first 64 KiB not cloned from head"
# mid holds a middle part of big's second extent, not its start: btrfs
# send sends that extent whole, and a clone would make the stream longer
! grep -qE '^clone +\./snap/big .* from=\./snap/mid ' "$TEST_TMP/e.dump" ||
	_fail "big's second extent cut around mid's part"
e=$(stat -c %s "$TEST_TMP/e.stream") b=$(stat -c %s "$TEST_TMP/b.stream")
echo "stream: encio $e bytes, btrfs send $b bytes"
[ "$e" -le "$b" ] || _fail "stream of $e bytes, btrfs send's $b"

btrfs receive -f "$TEST_TMP/e.stream" "$DST/b" >/dev/null || _fail "btrfs receive failed"
"$ENCIO" -q receive -f "$TEST_TMP/e.stream" "$DST/e" || _fail "encio receive failed"
for r in b e; do
	diff -r "$SRC/snap" "$DST/$r/snap" || _fail "$r: content differs"
	filefrag -v "$DST/$r/snap/big" | grep -E '^ +0: ' | grep -q shared ||
		_fail "$r: big's first extent is not shared"
done
