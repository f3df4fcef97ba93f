#!/bin/bash
# encio send of a live directory reads each entry's xattrs through the
# directory it holds open, never by the full source path: with a directory
# of the tree replaced by a symlink to a directory outside it while the send
# runs (encio stopped at that moment), no xattr from outside reaches the
# stream.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v setfattr >/dev/null || _not_run "needs setfattr (attr)"

make_btrfs src 1G compress-force=zstd
SRC=$MNT

S=$SRC/S
# sent in name order: a/0big (read while encio is stopped), then a/b
mkdir -p "$S/a/b/c"
random_bytes 40000000 big >"$S/a/0big"
setfattr -n user.inside -v yes "$S/a/b"
setfattr -n user.inside -v yes "$S/a/b/c"
echo data >"$S/a/b/file"
OUT=$SRC/outside
mkdir -p "$OUT/b/c"
setfattr -n user.secret -v leaked "$OUT/b"
setfattr -n user.secret -v leaked "$OUT/b/c"
echo outside >"$OUT/b/file"
echo outside >"$OUT/0big"
setfattr -n user.secret -v leaked "$OUT/0big"
sync

"$ENCIO" -q -d 1 send -f "$TEST_TMP/stream" "$S" 2>"$TEST_TMP/err" &
pid=$!
stop_when_open $pid "$S/a/0big"
mv "$S/a" "$SRC/a.moved"
ln -s "$OUT" "$S/a"
kill -CONT $pid
rc=0
wait $pid || rc=$?
cat "$TEST_TMP/err"
echo "exit status $rc"
[ -s "$TEST_TMP/stream" ] || _fail "no stream written"
"$ENCIO" dump -f "$TEST_TMP/stream" >"$TEST_TMP/dump" || _fail "the stream does not parse"
grep -E "set_xattr" "$TEST_TMP/dump"
grep -q "secret" "$TEST_TMP/dump" && _fail "xattrs from outside the tree in the stream"
grep -q "leaked" "$TEST_TMP/dump" && _fail "xattr values from outside the tree in the stream"
_log "PASS"
