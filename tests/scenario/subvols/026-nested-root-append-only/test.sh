#!/bin/bash
# A nested subvolume whose root directory is append-only (+a), holding a
# subvolume of its own: copy --subvolumes copies both, the copy's root
# append-only as its source's. Its root's flag is lifted for the copy's
# last steps (the partial's mark removed, the rename to its name), as
# receive -s lifts it to give a subvolume its name; before, the copy of
# the nested subvolume failed there (EPERM), and the one inside it was
# left out.
# Not done yet, and asserted as it is: in SRC, encio's read-only snapshot
# of that subvolume has the flag too, and cannot be renamed to be kept as
# the next run's base (EPERM): the run says so and exits 1.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/d"
run_check btrfs -q subvolume create "$SRC/vol/d/n"
echo n >"$SRC/vol/d/n/f"
run_check btrfs -q subvolume create "$SRC/vol/d/n/m"
echo m >"$SRC/vol/d/n/m/g"
chattr +a "$SRC/vol/d/n"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err"
rc=$?
cat "$TEST_TMP/err" >&2
[ "$(cat "$DST/vol/d/n/f" 2>/dev/null)" = n ] || _fail "no copy of n"
[ "$(cat "$DST/vol/d/n/m/g" 2>/dev/null)" = m ] || _fail "no copy of n/m"
lsattr -d "$DST/vol/d/n" | awk '{ print $1 }' | grep -q a || _fail "n's copy is not append-only"
if [ $rc -ne 0 ]; then
	grep -v "keep the snapshot as the next run's base" "$TEST_TMP/err" | grep -q . &&
		_fail "another error than the base kept in SRC"
fi
echo "PASS: $TEST_NAME"
