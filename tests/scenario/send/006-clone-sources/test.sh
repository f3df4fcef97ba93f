#!/bin/bash
# encio send -c: data a snapshot shares with a clone source arrives as a
# CLONE of it (a clone path of the clone source, no such file in the
# snapshot), in btrfs receive and encio receive alike; without -p the
# parent is picked among the clone sources as btrfs send picks it, each
# subvolume sent becomes a clone source for the next; refusals as btrfs
# send's.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
export TZ=UTC

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e" "$SRC/ro"
run_check btrfs -q subvolume create "$SRC/vol"
run_check btrfs -q subvolume create "$SRC/lib"
V=$SRC/vol

compressible 2000000 >"$SRC/lib/text"
random_bytes 1000000 lib >"$SRC/lib/random"
run_check btrfs -q subvolume snapshot -r "$SRC/lib" "$SRC/ro/lib"
compressible 300000 >"$V/own"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/ro/a"
cp --reflink=always "$SRC/ro/lib/text" "$V/text-from-lib"
cp --reflink=always "$SRC/ro/lib/random" "$V/random-from-lib"
echo more >>"$V/own"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/ro/b"
mkdir "$V/dir"
cp --reflink=always "$SRC/ro/lib/text" "$V/dir/again"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/ro/c"

# shared DIR: compsize's referenced bytes of DIR over its disk usage
shared()
{
	compsize -b "$1" | awk '$1 == "TOTAL" { print $4 / $2 }'
}

_log "the clone source and the first snapshot, full"
for s in lib a; do
	"$ENCIO" -q send "$SRC/ro/$s" | btrfs receive "$DST/b" >/dev/null || _fail "full send of $s | btrfs receive"
	"$ENCIO" -q send "$SRC/ro/$s" | "$ENCIO" -q receive "$DST/e" || _fail "full send of $s | encio receive"
done

_log "-p a -c lib: the reflinked files are clones of lib"
run_check "$ENCIO" -q send -p "$SRC/ro/a" -c "$SRC/ro/lib" -f "$TEST_TMP/b.stream" "$SRC/ro/b"
btrfs receive --dump -f "$TEST_TMP/b.stream" >"$TEST_TMP/b.dump" || _fail "dump"
grep -qE '^clone +\./b/text-from-lib .* from=\./b/text ' "$TEST_TMP/b.dump" || _fail "text-from-lib is not a clone of lib/text"
grep -qE '^clone +\./b/random-from-lib .* from=\./b/random ' "$TEST_TMP/b.dump" || _fail "random-from-lib is not a clone of lib/random"
! grep -qE '^(write|encoded_write) +\./b/(text|random)-from-lib ' "$TEST_TMP/b.dump" || _fail "data of a clone sent"
[ "$(stat -c %s "$TEST_TMP/b.stream")" -lt 100000 ] || _fail "stream of $(stat -c %s "$TEST_TMP/b.stream") bytes"
run_check btrfs receive -f "$TEST_TMP/b.stream" "$DST/b"
run_check "$ENCIO" -q receive -f "$TEST_TMP/b.stream" "$DST/e"
for d in b e; do
	diff -r "$SRC/ro/b" "$DST/$d/b" || _fail "$d/b differs"
	[ "$(stat -c '%s %Y' "$DST/$d/b/text-from-lib")" = "$(stat -c '%s %Y' "$SRC/ro/b/text-from-lib")" ] || _fail "$d/b metadata"
	r=$(shared "$DST/$d/")
	awk -v r="$r" 'BEGIN { exit !(r >= 1.4) }' || _fail "$d: clones not shared on the receiver (referenced/disk $r)"
done

_log "-c a -c b without -p: the parent btrfs send picks"
run_check "$ENCIO" -q send --no-data -c "$SRC/ro/a" -c "$SRC/ro/b" -c "$SRC/ro/lib" -f "$TEST_TMP/c-nodata" "$SRC/ro/c"
run_check btrfs -q send --proto 2 --no-data -c "$SRC/ro/a" -c "$SRC/ro/b" -c "$SRC/ro/lib" -f "$TEST_TMP/c-nodata-btrfs" "$SRC/ro/c"
cmp "$TEST_TMP/c-nodata" "$TEST_TMP/c-nodata-btrfs" || _fail "another parent or clone than btrfs send's"
btrfs receive --dump -f "$TEST_TMP/c-nodata" | grep -q "^snapshot .*parent_uuid=$(uuid_of "$SRC/ro/b")" ||
	_fail "not b as the parent"
run_check "$ENCIO" -q send -c "$SRC/ro/a" -c "$SRC/ro/b" -c "$SRC/ro/lib" -f "$TEST_TMP/c.stream" "$SRC/ro/c"
grep -qE '^clone +\./c/dir/again .* from=\./c/(text|text-from-lib) ' <(btrfs receive --dump -f "$TEST_TMP/c.stream") ||
	_fail "dir/again is not a clone"
run_check btrfs receive -f "$TEST_TMP/c.stream" "$DST/b"
run_check "$ENCIO" -q receive -f "$TEST_TMP/c.stream" "$DST/e"
diff -r "$SRC/ro/c" "$DST/b/c" || _fail "b/c differs"
diff -r "$SRC/ro/c" "$DST/e/c" || _fail "e/c differs"

_log "each subvolume sent is a clone source for the next"
run_check "$ENCIO" -q send --no-data -c "$SRC/ro/a" -f "$TEST_TMP/bc" "$SRC/ro/b" "$SRC/ro/c"
run_check btrfs -q send --proto 2 --no-data -c "$SRC/ro/a" -f "$TEST_TMP/bc-btrfs" "$SRC/ro/b" "$SRC/ro/c"
cmp "$TEST_TMP/bc" "$TEST_TMP/bc-btrfs" || _fail "the streams of b and c differ from btrfs send's"

_log "refusals"
run_mustfail "no parent among the clone sources" "$ENCIO" send -c "$SRC/ro/lib" -f "$TEST_TMP/x" "$SRC/ro/b"
echo "$ERR_OUT" | grep -q "parent" || _fail "message without a parent determination"
run_mustfail "a writable clone source" "$ENCIO" send -c "$V" -f "$TEST_TMP/x" "$SRC/ro/b"
echo "$ERR_OUT" | grep -q "cloned subvolume .* is not read-only" || _fail "message for a writable clone source"
run_mustfail "a clone source that is no subvolume" "$ENCIO" send -c "$SRC/ro/c/dir" -p "$SRC/ro/a" -f "$TEST_TMP/x" "$SRC/ro/b"
echo "$ERR_OUT" | grep -q "not a subvolume" || _fail "message for a clone source that is no subvolume"
run_mustfail "a directory with -p" "$ENCIO" send -p "$SRC/ro/a" -f "$TEST_TMP/x" "$V/dir"
[ ! -e "$TEST_TMP/x" ] || _fail "a refused send made its file"
