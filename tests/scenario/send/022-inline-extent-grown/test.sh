#!/bin/bash
# A file whose compressed inline extent is followed, within its first
# sector, by zeros up to its size (grown by fallocate or truncate): the
# kernel's compressed send counts the extent's ENCODED_WRITE as reaching
# the size and sends no TRUNCATE, so an incremental stream left a new
# such file at the inline data's end and a changed one at its old size
# (btrfs send --compressed-data -p | btrfs receive does so too). encio
# send -p sends the size: encio receive and btrfs receive both give SRC.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
V=$SRC/vol
run_check btrfs -q subvolume create "$V"
yes hello | head -c 100 >"$V/old"
yes keep | head -c 300 >"$V/same"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
yes abcdefgh | head -c 222 >"$V/new"
fallocate -o 0 -l 3369 "$V/new"
yes zzzzzz | head -c 222 >"$V/old"
fallocate -o 0 -l 3369 "$V/old"
yes qqqq | head -c 300 >"$V/full"
truncate -s 4096 "$V/full"
cp --reflink=always "$V/new" "$V/clone"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"
for f in new old full clone; do
	"$ENCIO" list "$SRC/s2/$f" | grep -q inline || _fail "$f has no inline extent: the case is not made"
done

make_btrfs dst 512M
DST=$MNT
mkdir "$DST/e" "$DST/b"
run_check "$ENCIO" -q send "$SRC/s1" -f "$TEST_TMP/full.stream"
run_check "$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" -f "$TEST_TMP/inc.stream"
run_check "$ENCIO" -q receive -f "$TEST_TMP/full.stream" "$DST/e"
run_check "$ENCIO" -q receive -f "$TEST_TMP/inc.stream" "$DST/e"
run_check btrfs receive -q -f "$TEST_TMP/full.stream" "$DST/b"
run_check btrfs receive -q -f "$TEST_TMP/inc.stream" "$DST/b"
for d in e b; do
	for f in new old full clone same; do
		cmp "$SRC/s2/$f" "$DST/$d/s2/$f" || _fail "$d: $f differs from SRC"
		[ "$(stat -c %s "$DST/$d/s2/$f")" = "$(stat -c %s "$SRC/s2/$f")" ] ||
			_fail "$d: $f has another size"
	done
done
"$ENCIO" dump -f "$TEST_TMP/inc.stream" | grep -q "truncate .*/new .*size=3369" ||
	_fail "no TRUNCATE of new to its size"
