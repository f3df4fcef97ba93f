#!/bin/bash
# A rerun of copy -rT --subvolumes brings a writable subvolume that changed
# in SRC up to date (its copy is made again), finds an unchanged one
# complete, refuses a writable subvolume in DEST that is not its copy, and
# refuses, naming it and keeping it, a copy that changed in DEST too. A
# look at SRC or at the copy (diff -r reads them, and updates atimes, which
# moves the subvolume's ctransid) is no change.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@d"
echo one >"$SRC/@d/f"
run_check btrfs -q subvolume snapshot -r "$SRC/@d" "$SRC/s1"
echo two >"$SRC/@d/g"

make_btrfs dst 1G
DST=$MNT
move()
{
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/m" >"$TEST_TMP/move.out" 2>&1
	local rc=$?
	cat "$TEST_TMP/move.out"
	return $rc
}
move || _fail "the move failed"
diff -r "$SRC/@d" "$DST/m/@d" || _fail "@d differs"

_log "run again, nothing changed"
move || _fail "the rerun failed"
grep -q "0 of 2 copied.*2 complete already, 0 copied again" "$TEST_TMP/move.out" || _fail "an unchanged rerun copied"

_log "run again after @d changed in SRC"
echo three >"$SRC/@d/h"
rm "$SRC/@d/f"
# A change within the clock tick the snapshot is marked with makes the next
# rerun copy the subvolume once more (never the reverse): not what this
# test is about.
sleep 1
move || _fail "the rerun failed"
grep -q "1 complete already, 1 copied again" "$TEST_TMP/move.out" || _fail "the changed subvolume was not copied again"
diff -r "$SRC/@d" "$DST/m/@d" || _fail "@d is stale in DEST"
move || _fail "the rerun failed"
grep -q "2 complete already" "$TEST_TMP/move.out" || _fail "the updated copy is not complete"

_log "a writable subvolume in DEST that is not the copy"
mkdir "$DST/n"
run_check btrfs -q subvolume create "$DST/n/@d"
echo foreign >"$DST/n/@d/f"
if "$ENCIO" copy -rT --subvolumes "$SRC" "$DST/n" >"$TEST_TMP/n.out" 2>&1; then
	cat "$TEST_TMP/n.out"
	_fail "a foreign subvolume was taken as the copy"
fi
cat "$TEST_TMP/n.out"
grep -q "n/@d" "$TEST_TMP/n.out" || _fail "the error does not name it"
[ "$(cat "$DST/n/@d/f")" = foreign ] || _fail "the foreign subvolume was changed"

_log "changed in SRC and in DEST"
echo four >"$SRC/@d/i"
echo mine >"$DST/m/@d/mine"
if move; then
	_fail "a copy changed in DEST was replaced"
fi
grep -q "m/@d" "$TEST_TMP/move.out" || _fail "the error does not name the copy"
[ "$(cat "$DST/m/@d/mine")" = mine ] || _fail "the change in DEST was lost"
