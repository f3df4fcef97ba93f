#!/bin/bash
# DEST may be a mounted filesystem's root, as in README's
# `copy -rT --subvolumes /mnt/old /mnt/new`: the move fills its top level
# in place, and copy -rT into it writes, probes, indexes shared extents
# and syncs on DEST's filesystem, not on the one DEST is mounted on (the
# compressed extents stay encoded, the reflinks shared, no "not btrfs"
# warning). A rerun finds the move complete.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 1G compress=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@data"
head -c 3000000 /usr/bin/bash >"$SRC/@data/big"
cp --reflink=always "$SRC/@data/big" "$SRC/@data/big.reflink"
echo top >"$SRC/topfile"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/@data.1"

make_btrfs moved 1G
"$ENCIO" -v copy -rT --subvolumes "$SRC" "$MNT" >"$TEST_TMP/move.out" 2>&1 ||
	{ cat "$TEST_TMP/move.out"; _fail "copy -rT --subvolumes into a mount point failed"; }
cat "$TEST_TMP/move.out"
! grep -q "not btrfs" "$TEST_TMP/move.out" || _fail "the move took DEST for another filesystem"
! grep -q "/\./" "$TEST_TMP/move.out" || _fail "the messages name DEST/./"
[ "$(btrfs subvolume list "$MNT" | awk '{print $NF}' | sort | tr '\n' ' ')" = "@data @data.1 " ] ||
	_fail "DEST's subvolumes: $(btrfs subvolume list "$MNT")"
for p in topfile @data/big @data/big.reflink @data.1/big; do
	cmp "$SRC/$p" "$MNT/$p" || _fail "$p differs"
done
[ "$(btrfs property get -ts "$MNT/@data.1" ro)" = "ro=true" ] || _fail "@data.1 is not read-only"
"$ENCIO" copy -rT --subvolumes "$SRC" "$MNT" >"$TEST_TMP/rerun.out" 2>&1 || _fail "the rerun failed"
grep -q "0 of 2 copied.*2 complete already" "$TEST_TMP/rerun.out" || _fail "rerun: $(cat "$TEST_TMP/rerun.out")"

make_btrfs plain 1G
"$ENCIO" copy -rT "$SRC/@data.1" "$MNT" >"$TEST_TMP/copy.out" 2>&1 ||
	{ cat "$TEST_TMP/copy.out"; _fail "copy -rT into a mount point failed"; }
cat "$TEST_TMP/copy.out"
! grep -q "not btrfs" "$TEST_TMP/copy.out" || _fail "copy -rT took DEST for another filesystem"
grep -qE "extents [1-9][0-9]* encoded, 0 decoded" "$TEST_TMP/copy.out" || _fail "nothing copied encoded"
grep -qE "^shared: [1-9][0-9]* ranges? cloned" "$TEST_TMP/copy.out" || _fail "the reflink was not cloned"
diff -r "$SRC/@data.1" "$MNT" || _fail "the copy differs"
