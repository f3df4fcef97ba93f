#!/bin/bash
# The directory a nested subvolume is in keeps its times in every copy,
# also in a snapshot copied as a difference from the live subvolume's
# copy: that copy's directory has the times of the snapshot it was made
# from, not those SRC's directory has once encio made its snapshot of the
# nested subvolume in it, which it cannot put back where the directory is
# append-only (a difference then sends no times for a directory it finds
# unchanged, and the snapshot's copy took the later times: random seed
# 81).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir -p "$SRC/vol/a/d" "$SRC/snaps"
compressible 20000 >"$SRC/vol/a/d/f"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s1"
# the nested subvolume made before vol's last change: copied before s2
run_check btrfs -q subvolume create "$SRC/vol/a/d/n"
compressible 5000 >"$SRC/vol/a/d/n/in-nested"
sync
compressible 30000 >"$SRC/vol/a/g"
touch -d @1500000000 "$SRC/vol/a/d"
# append-only: encio cannot put back the times of SRC's directory once
# it made its snapshot of n there
chattr +a "$SRC/vol/a/d"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s2"
sleep 1.1

"$ENCIO" -v copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err" || _fail "copy: $(cat "$TEST_TMP/err")"
grep "^subvolume" "$TEST_TMP/err" >&2
for s in snaps/s1 snaps/s2; do
	[ "$(stat -c %y "$SRC/$s/a/d")" = "$(stat -c %y "$DST/$s/a/d")" ] ||
		_fail "$s/a/d: mtime $(stat -c %y "$DST/$s/a/d"), in SRC $(stat -c %y "$SRC/$s/a/d")"
done
[ "$(stat -c %y "$DST/vol/a/d")" = "$(stat -c %y "$DST/snaps/s2/a/d")" ] ||
	_fail "vol/a/d: mtime $(stat -c %y "$DST/vol/a/d"), not its source's"
python3 "$TOP_SRCDIR/tests/random/difftest.py" compare "$SRC/snaps/s2" "$DST/snaps/s2" ||
	_fail "s2 differs"
echo "PASS: $TEST_NAME"
