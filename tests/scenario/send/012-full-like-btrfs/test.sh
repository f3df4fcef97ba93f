#!/bin/bash
# A full encio send gives what btrfs send gives where they differed: a
# nested subvolume is left out (no directory for it); a file that shares
# the start of a longer file's extent and ends off a sector is cloned only
# in whole sectors, its tail sent as data, so both receivers take it; a
# file using a part of a compressed extent is sent as those bytes when
# they are fewer than the encoded ones (a stream no larger than btrfs
# send's); a snapshot gives the same stream whatever the cache holds; a
# path longer than PATH_MAX is an error naming what failed.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e"

run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
run_check btrfs -q subvolume create "$V/nested"
echo inside >"$V/nested/f"
mkdir "$V/dir"
random_bytes 30462 a >"$V/dir/a"
touch "$V/dir/b"
sync
run_check xfs_io -c "reflink $V/dir/a 0 0 8192" "$V/dir/b"
run_check truncate -s 7615 "$V/dir/b"
# a 128 KiB compressed extent, 12 KiB of it left
compressible 131072 >"$V/cut"
sync
run_check truncate -s 12288 "$V/cut"
random_bytes 900000 plain >"$V/plain"
compressible 700000 >"$V/text"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"
S=$SRC/snap

run_check "$ENCIO" -q send -f "$TEST_TMP/encio.stream" "$S"
run_check btrfs -q send --compressed-data -f "$TEST_TMP/btrfs.stream" "$S"
"$ENCIO" dump -f "$TEST_TMP/encio.stream" >"$TEST_TMP/dump" || _fail "dump"
grep -q nested "$TEST_TMP/dump" && _fail "the nested subvolume is in the stream: $(grep nested "$TEST_TMP/dump")"
run_check btrfs -q receive -f "$TEST_TMP/encio.stream" "$DST/b"
run_check "$ENCIO" -q receive -f "$TEST_TMP/encio.stream" "$DST/e"
for d in b e; do
	[ ! -e "$DST/$d/snap/nested" ] || _fail "$d: a directory for the nested subvolume"
	diff -r --exclude=nested "$S" "$DST/$d/snap" || _fail "$d: the copy differs"
done
grep -E "^clone +\./snap/dir/b " "$TEST_TMP/dump" | grep -q "len=4096" ||
	_fail "b's whole sectors not cloned: $(grep -E '^clone' "$TEST_TMP/dump")"

_log "sizes: encio's stream against btrfs send's"
es=$(stat -c %s "$TEST_TMP/encio.stream") bs=$(stat -c %s "$TEST_TMP/btrfs.stream")
echo "encio $es B, btrfs $bs B"
[ "$es" -le "$bs" ] || _fail "encio's stream ($es B) is larger than btrfs send's ($bs B)"

_log "the same stream with a cold cache"
echo 3 >/proc/sys/vm/drop_caches
run_check "$ENCIO" -q send -f "$TEST_TMP/again.stream" "$S"
cmp "$TEST_TMP/encio.stream" "$TEST_TMP/again.stream" || _fail "another stream of the same snapshot"

_log "a path longer than PATH_MAX"
run_check btrfs -q subvolume create "$SRC/deep"
name=$(printf 'd%.0s' {1..250})
(cd "$SRC/deep" && for i in $(seq 18); do mkdir "$name" && cd "$name" || exit 1; done && touch f) ||
	_fail "cannot make the deep tree"
run_check btrfs -q subvolume snapshot -r "$SRC/deep" "$SRC/deep-snap"
run_mustfail "a path past PATH_MAX" "$ENCIO" send -f /dev/null "$SRC/deep-snap"
echo "$ERR_OUT" | grep -q "cannot make the stream path of '.*': File name too long" ||
	_fail "the error does not say what failed"
