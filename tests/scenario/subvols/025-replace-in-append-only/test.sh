#!/bin/bash
# A rerun of copy --subvolumes replaces the copy of a subvolume whose
# source changed; a subvolume nested in the old copy that is not carried
# into the new one (SRC no longer has it; or a partial a stopped run
# left) goes with the old copy, also from an append-only directory (the
# copy's directory keeps its source's flags): the delete lifts the flag
# of each directory for it. A recursive delete failed there (EPERM), and
# the rerun with it (random seed 220, a rerun after a stop).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir -p "$SRC/vol/d/e"
echo a >"$SRC/vol/f"
run_check btrfs -q subvolume create "$SRC/vol/d/n"
mkdir "$SRC/vol/d/n/in"
run_check btrfs -q subvolume create "$SRC/vol/d/n/in/m"
echo m >"$SRC/vol/d/n/in/m/g"
chattr +a "$SRC/vol/d/n/in" "$SRC/vol/d"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" || _fail "the first copy"
[ -d "$DST/vol/d/n/in/m" ] || _fail "no copy of n/in/m"
# n goes from SRC (m with it), vol changes: the rerun copies vol again
chattr -a "$SRC/vol/d" "$SRC/vol/d/n/in"
run_check btrfs -q subvolume delete "$SRC/vol/d/n/in/m" "$SRC/vol/d/n/in/.m.encio-base" "$SRC/vol/d/n"
chattr +a "$SRC/vol/d"
echo b >"$SRC/vol/f2"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err" ||
	_fail "the rerun: $(cat "$TEST_TMP/err")"
[ -e "$DST/vol/d/n" ] && _fail "n's copy is still there"
[ "$(cat "$DST/vol/f2")" = b ] || _fail "vol not copied again"
lsattr -d "$DST/vol/d" | grep -q -- '-a-' || lsattr -d "$DST/vol/d" | awk '{ print $1 }' | grep -q a ||
	_fail "vol/d's copy is not append-only: $(lsattr -d "$DST/vol/d")"
echo "PASS: $TEST_NAME"
