#!/bin/bash
# A writable subvolume holding a nested one made long ago is copied at its
# own generation, after the snapshots taken before its last change, its
# nested subvolume right after it: the copies stay one chain of
# differences and take no more room than SRC (2%). Pulled forward to go
# before the nested one, it was copied as a difference from the first
# snapshot, and what changed since went twice into DEST, once in it and
# once down the other snapshots, where the kernel finds no clone of it
# (random seed 168: +23%; here it finds them, and the order tells).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/snaps"
run_check btrfs -q subvolume create "$SRC/vol/n"
echo nested >"$SRC/vol/n/f"
sync
for i in 1 2 3; do
	random_bytes 2000000 "r$i" >"$SRC/vol/r$i"
	run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s$i"
done
random_bytes 500000 r4 >"$SRC/vol/r4"
sync

"$ENCIO" -v copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err" || _fail "copy: $(cat "$TEST_TMP/err")"
grep "^subvolume '" "$TEST_TMP/err" | sed "s|$DST/||; s|$SRC/||" >"$TEST_TMP/order"
cat "$TEST_TMP/order" >&2
cat >"$TEST_TMP/want" <<'ORDER'
subvolume 'snaps/s1': copied whole
subvolume 'snaps/s2': a snapshot of the copy of 'snaps/s1'
subvolume 'snaps/s3': a snapshot of the copy of 'snaps/s2'
subvolume 'vol': a snapshot of the copy of 'snaps/s3'
subvolume 'vol/n': copied whole
ORDER
sync
src=$(compsize -b "$SRC" | awk '$1 == "TOTAL" { print $3 }')
dst=$(compsize -b "$DST" | awk '$1 == "TOTAL" { print $3 }')
_log "disk use: SRC $src, DEST $dst"
[ "$dst" -le $((src + src / 50 + 65536)) ] || _fail "the copy takes $dst bytes on disk, SRC $src"
diff "$TEST_TMP/want" "$TEST_TMP/order" >&2 || _fail "not copied in that order"
for s in snaps/s1 snaps/s2 snaps/s3 vol vol/n; do
	# the nested subvolume shows as an empty directory in the snapshots,
	# which btrfs send leaves out
	diff -r -x n -x ".*encio*" "$SRC/$s" "$DST/$s" >&2 || _fail "$s differs"
done
echo "PASS: $TEST_NAME"
