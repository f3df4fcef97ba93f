#!/bin/bash
# Shared data stays shared: reflinked copies, a 64 KiB FICLONERANGE into
# the middle of another file, a file cloned into itself, a FIDEDUPERANGE'd
# pair, compressed and plain extents, an unaligned tail, and two snapshots
# of one subvolume given as two SRC. After encio copy (several files) and
# copy -r (one tree, two snapshots): content equal, DEST's disk usage
# (compsize) no more than 1.5% over SRC's, FIEMAP showing the shared
# extents, the clones counted. A destination that cannot clone (tmpfs) gets the data
# written; a source without sharing gets no clone.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
command -v filefrag >/dev/null || _not_run "needs filefrag"
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G compress-force=zstd
DST=$MNT
make_tmpfs plain 256M
PLAIN=$MNT

make_shared_tree "$SRC"
[ "$(shared_extents "$SRC/snap1/text.reflink")" -gt 0 ] || _fail "the source has no shared extents to keep"

_log "copy -r of one snapshot"
out=$("$ENCIO" copy -r --format=json "$SRC/snap1" "$DST/" 2>"$TEST_TMP/err") || _fail "copy -r: $(cat "$TEST_TMP/err")"
echo "$out"
diff -r "$SRC/snap1" "$DST/snap1" || _fail "copy -r: content differs"
sync
s=$(disk "$SRC/snap1") d=$(disk "$DST/snap1")
echo "disk usage: source $s, copy $d"
within "$d" "$s" || _fail "copy -r: disk usage $d against the source's $s"
clones=$(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["clones"], j["clone_bytes"])')
set -- $clones
[ "$1" -gt 0 ] && [ "$2" -gt 3000000 ] || _fail "copy -r: clones counted as $clones"
# every byte either written or cloned, once (the tree has no holes)
sizes=$(find "$SRC/snap1" -type f -printf '%s\n' | awk '{ n += $1 } END { print n }')
moved=$(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["logical_bytes"] + j["clone_bytes"])')
[ "$moved" = "$sizes" ] || _fail "copy -r: $moved bytes written and cloned for $sizes bytes of files"
for f in text text.reflink mixed random.reflink middle self dup1 dup2 tail.reflink; do
	[ "$(shared_extents "$DST/snap1/$f")" -gt 0 ] || _fail "copy -r: $f has no shared extent in DEST"
done
cmp "$SRC/snap1/tail.reflink" "$DST/snap1/tail.reflink" || _fail "the unaligned tail"

_log "copy -r of two snapshots of one subvolume"
out=$("$ENCIO" -q copy -r "$SRC/snap1" "$SRC/snap2" "$DST/two/" 2>&1) ||
	{ mkdir -p "$DST/two" && out=$("$ENCIO" -q copy -r "$SRC/snap1" "$SRC/snap2" "$DST/two/" 2>&1); } ||
	_fail "copy -r of two snapshots: $out"
diff -r "$SRC/snap1" "$DST/two/snap1" || _fail "two: snap1 differs"
diff -r "$SRC/snap2" "$DST/two/snap2" || _fail "two: snap2 differs"
sync
s=$(disk "$SRC/snap1" "$SRC/snap2") d=$(disk "$DST/two/snap1" "$DST/two/snap2")
echo "disk usage: sources $s, copies $d"
within "$d" "$s" || _fail "two snapshots: disk usage $d against the sources' $s"

_log "encio copy of several files into a directory"
mkdir "$DST/files"
run_check "$ENCIO" -q copy "$SRC/snap1/text" "$SRC/snap1/text.reflink" "$SRC/snap1/mixed" "$SRC/snap1/self" "$DST/files/"
for f in text text.reflink mixed self; do
	cmp "$SRC/snap1/$f" "$DST/files/$f" || _fail "files: $f differs"
done
sync
s=$(disk "$SRC/snap1/text" "$SRC/snap1/text.reflink" "$SRC/snap1/mixed" "$SRC/snap1/self")
d=$(disk "$DST/files")
echo "disk usage: sources $s, copies $d"
within "$d" "$s" || _fail "several files: disk usage $d against the sources' $s"

_log "a destination that cannot clone gets the data"
out=$("$ENCIO" copy -r --format=json "$SRC/snap1" "$PLAIN/" 2>"$TEST_TMP/err") || _fail "copy -r to tmpfs: $(cat "$TEST_TMP/err")"
diff -r "$SRC/snap1" "$PLAIN/snap1" || _fail "tmpfs: content differs"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(j["clones"] != 0)' || _fail "clones counted on tmpfs"

_log "an interrupted copy resumed: correct, sharing kept"
# a0 and its reflinks are copied first (a directory lists in creation
# order), then b0, whose 64 MiB take long enough to stop the copy there
mkdir "$SRC/sv/many"
for g in a b; do
	random_bytes "$([ $g = a ] && echo 4194304 || echo 67108864)" "$g" >"$SRC/sv/many/${g}0"
	for i in $(seq 1 20); do
		cp --reflink=always "$SRC/sv/many/${g}0" "$SRC/sv/many/$g$i"
	done
done
sync
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/snap-many"
# a background job of a script starts with SIGINT ignored: not this one
env --default-signal=INT "$ENCIO" -q copy -r -j 1 "$SRC/snap-many/many" "$DST/resumed" 2>"$TEST_TMP/err" &
pid=$!
stop_when_open "$pid" "$SRC/snap-many/many/b0"
kill -INT "$pid"
kill -CONT "$pid"
wait "$pid"
rc=$?
[ $rc -eq 130 ] || _fail "interrupted copy: exit $rc, $(cat "$TEST_TMP/err")"
out=$("$ENCIO" copy -r --format=json "$SRC/snap-many/many" "$DST/resumed" 2>"$TEST_TMP/err") ||
	_fail "resumed copy: $(cat "$TEST_TMP/err")"
echo "$out"
diff -r "$SRC/snap-many/many" "$DST/resumed" || _fail "resumed copy differs"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(not (j["skipped"] > 0 and j["clones"] >= 20))' ||
	_fail "the rerun did not skip what was complete and clone b0's reflinks"
sync
d=$(disk "$DST/resumed") s=$(disk "$SRC/snap-many/many")
echo "disk usage: source $s, resumed copy $d"
within "$d" "$s" || _fail "resumed copy: disk usage $d against the source's $s"

_log "no sharing, no clone"
random_bytes 500000 alone >"$SRC/sv/alone"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/snap3"
out=$("$ENCIO" copy --format=json "$SRC/snap3/alone" "$DST/alone" 2>"$TEST_TMP/err") || _fail "copy alone: $(cat "$TEST_TMP/err")"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(j["clones"] != 0)' || _fail "a clone without sharing"
cmp "$SRC/snap3/alone" "$DST/alone" || _fail "alone differs"
echo "PASS: $TEST_NAME"
