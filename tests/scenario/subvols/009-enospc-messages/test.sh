#!/bin/bash
# copy -r --subvolumes onto a filesystem too small for it fails with the
# cause, ENOSPC, leaving no snapshot of its own in SRC (but one a copy in
# flight is made from, kept with it for a rerun), and naming paths a
# user knows: a subvolume copied whole names
# the file in DEST (not /proc/self/fd/N/...), one received as a difference
# names the receiver's failure (not the sender's broken pipe).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@whole"
for i in 1 2 3 4 5; do random_bytes 60000000 "w$i" >"$SRC/@whole/f$i"; done

make_btrfs small 300M
if "$ENCIO" copy -rT --subvolumes "$SRC" "$MNT/m" >"$TEST_TMP/whole.out" 2>&1; then
	_fail "a copy larger than DEST succeeded"
fi
cat "$TEST_TMP/whole.out"
grep -q "No space left on device" "$TEST_TMP/whole.out" || _fail "the error is not ENOSPC"
! grep -q "/proc/self/fd" "$TEST_TMP/whole.out" || _fail "the error names a descriptor"
grep -q "$MNT/m/" "$TEST_TMP/whole.out" || _fail "the error does not name the file in DEST"
# the failed move leaves no snapshot of its own in SRC but the one the
# copy in flight is made from, kept with it for the rerun
left=$(ls -a "$SRC" | grep "encio")
[ "$left" = ".@whole.encio-snapshot" ] || _fail "left in SRC: $left"
[ -d "$MNT/m/.@whole.encio-partial" ] || _fail "the copy in flight is not kept"
run_check btrfs -q subvolume delete "$SRC/@whole" "$SRC/.@whole.encio-snapshot"

run_check btrfs -q subvolume create "$SRC/@d"
echo a >"$SRC/@d/a"
run_check btrfs -q subvolume snapshot -r "$SRC/@d" "$SRC/s1"
for i in 1 2 3 4 5; do random_bytes 60000000 "d$i" >"$SRC/@d/f$i"; done
make_btrfs small2 300M
if "$ENCIO" copy -rT --subvolumes "$SRC" "$MNT/m" >"$TEST_TMP/diff.out" 2>&1; then
	_fail "a copy larger than DEST succeeded"
fi
cat "$TEST_TMP/diff.out"
grep -q "No space left on device" "$TEST_TMP/diff.out" || _fail "the error is not ENOSPC"
! grep -q "Broken pipe" "$TEST_TMP/diff.out" || _fail "the error is the sender's broken pipe"
! grep -q "/proc/self/fd" "$TEST_TMP/diff.out" || _fail "the error names a descriptor"
! ls -a "$SRC" | grep "encio" || _fail "a temporary left in SRC"
# with room enough, the same command completes the move
rm "$SRC/@d/f5" "$SRC/@d/f4" "$SRC/@d/f3"
run_check btrfs subvolume sync "$MNT"
run_check "$ENCIO" -q copy -rT --subvolumes --final "$SRC" "$MNT/m"
diff -r "$SRC/@d" "$MNT/m/@d" || _fail "@d differs after the rerun"
! ls -a "$SRC" | grep "encio" || _fail "a temporary left in SRC after the rerun"
