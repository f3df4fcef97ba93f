#!/bin/bash
# A read-only snapshot nested in a writable subvolume (vol/snaps/s1, as
# snapper keeps them): a rerun that replaces vol's copy carries the
# snapshot's copy into the new one (btrfs moves no read-only subvolume to
# another directory: it is made writable for the move, then marked
# received again and read-only), with copy --subvolumes and with a second
# send --subvolumes | receive from the state; a nested subvolume SRC
# deleted since goes with the old copy, the times of its directory kept.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M noatime
SRC=$MNT
make_btrfs dst 256M noatime
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/snaps" "$SRC/vol/d"
random_bytes 100000 one >"$SRC/vol/file"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/vol/snaps/s1"
run_check btrfs -q subvolume create "$SRC/vol/d/gone"
sync
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/copy"
"$ENCIO" -q send --subvolumes "$SRC" | "$ENCIO" -q receive "$DST/pipe" ||
	_fail "the first send --subvolumes | receive"

_log "vol changed, a nested subvolume deleted, the runs again"
random_bytes 50000 two >>"$SRC/vol/file"
run_check btrfs -q subvolume delete "$SRC/vol/d/gone"
touch -d @1600000000 "$SRC/vol/d"
sync
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/copy"
"$ENCIO" receive --state "$DST/pipe" >"$TEST_TMP/state" || _fail "receive --state"
"$ENCIO" -q send --subvolumes --state "$TEST_TMP/state" "$SRC" |
	"$ENCIO" -q receive "$DST/pipe" || _fail "the second send --subvolumes | receive"
for d in copy pipe; do
	cmp "$SRC/vol/file" "$DST/$d/vol/file" || _fail "$d: vol/file differs"
	[ "$(btrfs property get -ts "$DST/$d/vol/snaps/s1" ro)" = ro=true ] ||
		_fail "$d: vol/snaps/s1 is not read-only"
	cmp "$SRC/vol/snaps/s1/file" "$DST/$d/vol/snaps/s1/file" || _fail "$d: s1 differs"
	[ ! -e "$DST/$d/vol/d/gone" ] || _fail "$d: vol/d/gone stays"
	[ "$(stat -c %Y "$DST/$d/vol/d")" = 1600000000 ] || _fail "$d: the times of vol/d"
done
"$ENCIO" receive --state "$DST/pipe" | grep -q " vol/snaps/s1$" ||
	_fail "the carried snapshot is not in the next state (marked again)"
echo "PASS: $TEST_NAME"
