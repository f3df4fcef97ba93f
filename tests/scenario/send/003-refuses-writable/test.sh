#!/bin/bash
# encio send refuses the root of a writable subvolume as btrfs send does
# (exit 1, "subvolume PATH is not read-only", nothing written, --snapshot
# named), sends a read-only snapshot as before, and sends a directory that
# is not a read-only subvolume with one warning that it is live.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
compressible 2000000 >"$V/text"
random_bytes 300000 refuse >"$V/random"
mkdir "$V/dir"
echo inside >"$V/dir/file"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"
make_btrfs dst 256M
DST=$MNT
make_tmpfs plain 16M
PLAIN=$MNT
mkdir "$PLAIN/tree"
echo plain >"$PLAIN/tree/file"
S=$TEST_TMP/streams
mkdir "$S"

_log "a writable subvolume is refused, to a file and to a pipe"
run_mustfail "send of a writable subvolume" "$ENCIO" send -f "$S/vol" "$V"
echo "$ERR_OUT" | grep -q "^ERROR: subvolume $V is not read-only" ||
	_fail "not btrfs send's refusal: $ERR_OUT"
echo "$ERR_OUT" | grep -q -- "--snapshot" || _fail "--snapshot not named: $ERR_OUT"
[ ! -e "$S/vol" ] || _fail "a stream file was made for a refused send"
rc=0
"$ENCIO" send "$V" 2>"$TEST_TMP/err" >"$S/pipe" || rc=$?
cat "$TEST_TMP/err"
[ $rc = 1 ] || _fail "send of a writable subvolume to stdout: exit $rc"
[ ! -s "$S/pipe" ] || _fail "a refused send wrote $(stat -c %s "$S/pipe") bytes"
# one writable subvolume among several paths: nothing is sent
run_mustfail "a writable subvolume after a snapshot" "$ENCIO" send -f "$S/two" "$SRC/snap" "$V"
[ ! -e "$S/two" ] || _fail "a stream file was made for a refused send of two paths"

_log "a read-only snapshot is sent as before, without a warning"
"$ENCIO" send -f "$S/snap" "$SRC/snap" 2>"$TEST_TMP/err" || _fail "send of a snapshot: $(cat "$TEST_TMP/err")"
cat "$TEST_TMP/err"
grep -q WARNING "$TEST_TMP/err" && _fail "a read-only snapshot warned about"
mkdir "$DST/b"
run_check btrfs receive -f "$S/snap" "$DST/b"
diff -r "$SRC/snap" "$DST/b/snap" || _fail "received snapshot differs"
[ "$(uuid_of "$DST/b/snap" Received)" = "$(uuid_of "$SRC/snap")" ] ||
	_fail "received UUID is not the snapshot's"
# a directory inside a read-only snapshot does not change either
"$ENCIO" send -f "$S/snapdir" "$SRC/snap/dir" 2>"$TEST_TMP/err" || _fail "send of a directory of a snapshot"
grep -q WARNING "$TEST_TMP/err" && _fail "a directory of a read-only snapshot warned about"

_log "--snapshot sends the writable subvolume, without a warning"
"$ENCIO" send --snapshot -f "$S/snapshot" "$V" 2>"$TEST_TMP/err" || _fail "send --snapshot: $(cat "$TEST_TMP/err")"
grep -q WARNING "$TEST_TMP/err" && _fail "--snapshot warned about"
mkdir "$DST/s"
run_check btrfs receive -f "$S/snapshot" "$DST/s"
diff -r "$V" "$DST/s/vol" || _fail "--snapshot: received tree differs"

_log "a plain directory is sent live, with one warning"
n=0
for d in "$V/dir" "$PLAIN/tree"; do
	n=$((n + 1))
	"$ENCIO" send -f "$S/live" "$d" 2>"$TEST_TMP/err" || _fail "send of $d: $(cat "$TEST_TMP/err")"
	cat "$TEST_TMP/err"
	[ "$(grep -c WARNING "$TEST_TMP/err")" = 1 ] || _fail "not one warning for $d"
	grep -q "^WARNING: $d .*live" "$TEST_TMP/err" || _fail "the warning does not name $d as live"
	mkdir "$DST/p$n"
	run_check btrfs receive -f "$S/live" "$DST/p$n"
	diff -r "$d" "$DST/p$n/$(basename "$d")" || _fail "received $d differs"
done
exit 0
