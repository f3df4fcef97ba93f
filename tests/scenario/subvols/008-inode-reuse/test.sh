#!/bin/bash
# copy -rT --subvolumes of a history in which btrfs gave a removed
# directory's inode number to a new directory after a remount (a new
# generation): every subvolume's copy equals its source, the file that
# was in the removed directory keeps its own data.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@d"
random_bytes 30000 z >"$SRC/@d/z"
random_bytes 30000 x >"$SRC/@d/x"
random_bytes 5000 w >"$SRC/@d/w"
mkdir "$SRC/@d/D"
mv "$SRC/@d/x" "$SRC/@d/D/f"
run_check btrfs -q subvolume snapshot -r "$SRC/@d" "$SRC/s1"
mv "$SRC/@d/D/f" "$SRC/@d/y"
rmdir "$SRC/@d/D"
random_bytes 10000 more >>"$SRC/@d/y"
run_check umount "$SRC"
run_check mount -o compress-force=zstd "${_LOOPS[0]}" "$SRC"
mkdir "$SRC/@d/E" "$SRC/@d/F"
mv "$SRC/@d/z" "$SRC/@d/E/f"
mv "$SRC/@d/w" "$SRC/@d/F/other"
run_check btrfs -q subvolume snapshot -r "$SRC/@d" "$SRC/s2"

make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m"
for p in s1 s2 @d; do
	diff -r "$SRC/$p" "$DST/m/$p" || _fail "$p differs"
done
[ "$(stat -c %s "$DST/m/s2/y")" = 40000 ] || _fail "y: $(stat -c %s "$DST/m/s2/y") bytes"
