#!/bin/bash
# encio copy --verify-only -r walks the whole tree and compares every byte,
# plain data included: a good copy passes and says how much it compared;
# a changed byte in plain data, a missing or extra entry, another symlink
# target, another size fail with exit 1, naming the copy and the offset.
# -T names the copy as for copy -r -T; --format=json is one JSON object.
# A hole and written zeros are equal. A destination that is not btrfs
# (tmpfs) is verified by reading it: copy --verify to it succeeds.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M ""
DST=$MNT
make_tmpfs tmp 256M
TMP=$MNT

T=$SRC/tree
mkdir -p "$T/sub/deeper" "$T/empty-dir"
compressible 1000000 >"$T/text"
random_bytes 300000 r1 >"$T/sub/random"
random_bytes 5000 r2 >"$T/sub/deeper/small"
: >"$T/empty"
truncate -s 20M "$T/sparse"
random_bytes 100000 r3 | dd of="$T/sparse" bs=4K seek=1000 conv=notrunc status=none
ln -s sub/random "$T/link"
mkfifo "$T/fifo"
mknod "$T/null-dev" c 1 3
sync
NFILES=5

# verify_ok ARGS...: --verify-only passes; its summary in $OUT.
OUT=
verify_ok()
{
	echo "+ $ENCIO copy --verify-only $*"
	OUT=$("$ENCIO" copy --verify-only "$@") || _fail "verify failed: $*"
	echo "$OUT"
}

# verify_fails WHAT FILE OFFSET ARGS...: --verify-only exits 1 naming FILE
# (and OFFSET unless it is -).
verify_fails()
{
	local what=$1 file=$2 offset=$3
	shift 3
	run_mustfail "$what" "$ENCIO" copy --verify-only "$@"
	echo "$ERR_OUT" | grep -F "'$file'" | grep -q "$what" ||
		_fail "no '$what' error naming $file"
	[ "$offset" = - ] || echo "$ERR_OUT" | grep -F "'$file'" |
		grep -q "at offset $offset\$" || _fail "offset $offset of $file not named"
}

_log "a good tree passes, every file and byte counted"
run_check "$ENCIO" copy -r "$T" "$DST"
verify_ok -r "$T" "$DST"
echo "$OUT" | grep -q "^verified: $NFILES files, 4 directories, 1 symlink, 2 special files equal to their sources; 0 failed$" ||
	_fail "summary does not count every entry"
bytes=$(($(find "$T" -type f -printf '%s+') 0))
echo "$OUT" | grep -q "^compared: .* of file content, every byte" || _fail "no bytes compared"
# The sources' compressed extents are the copies': compared encoded.
echo "$OUT" | grep -qE "compressed extents of the copies: [1-9][0-9]* identical" ||
	_fail "compressed extents not compared encoded"

_log "--format=json"
"$ENCIO" copy --verify-only -r --format=json "$T" "$DST" >"$TEST_TMP/json" || _fail "json verify failed"
cat "$TEST_TMP/json"
python3 -m json.tool "$TEST_TMP/json" >/dev/null || _fail "not JSON"
python3 - "$TEST_TMP/json" "$NFILES" "$bytes" <<'EOF' || _fail "JSON summary wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["files_verified"] == int(sys.argv[2]), d
assert d["bytes_compared"] == int(sys.argv[3]), d
assert d["bytes_read"] + d["bytes_holes"] == d["bytes_compared"], d
assert d["bytes_holes"] > 0 and d["extents_compared_encoded"] > 0, d
assert d["failed"] == 0 and d["dirs"] == 4 and d["symlinks"] == 1, d
EOF

_log "-T: DEST is the copy itself"
verify_ok -r -T "$T" "$DST/tree"
verify_fails "missing in the copy" "$DST/tree/tree" - -r "$T" "$DST/tree"
mkdir "$DST/several"
run_check "$ENCIO" copy -r "$T" "$T/sub" "$DST/several"
verify_ok -r "$T" "$T/sub" "$DST/several"
run_mustfail "several sources with -T" "$ENCIO" copy --verify-only -r -T "$T" "$T/sub" "$DST/several"

_log "a changed byte in plain data fails, file and offset named"
run_check "$ENCIO" copy -r -T "$T" "$DST/c1"
printf 'X' | dd of="$DST/c1/sub/random" bs=1 seek=200000 conv=notrunc status=none
sync
verify_fails "content differs from the source" "$DST/c1/sub/random" 200000 -r -T "$T" "$DST/c1"
verify_fails "content differs from the source" "$DST/c1/sub/random" 200000 "$T/sub/random" "$DST/c1/sub/random"
out=$("$ENCIO" copy --verify-only -r -T "$T" "$DST/c1" 2>/dev/null)
echo "$out" | grep -q "; 1 failed$" || _fail "the difference is not counted: $out"

_log "missing, extra, other symlink target, other size, other type"
run_check "$ENCIO" copy -r -T "$T" "$DST/c2"
rm "$DST/c2/sub/deeper/small"
echo extra >"$DST/c2/sub/extra"
ln -sf text "$DST/c2/link"
truncate -s 999999 "$DST/c2/text"
rm "$DST/c2/fifo" && echo x >"$DST/c2/fifo"
verify_fails "missing in the copy" "$DST/c2/sub/deeper/small" - -r -T "$T" "$DST/c2"
verify_fails "not in the source" "$DST/c2/sub/extra" - -r -T "$T" "$DST/c2"
verify_fails "symlink target differs" "$DST/c2/link" - -r -T "$T" "$DST/c2"
verify_fails "size differs" "$DST/c2/text" 999999 -r -T "$T" "$DST/c2"
verify_fails "type differs" "$DST/c2/fifo" - -r -T "$T" "$DST/c2"

_log "a hole and written zeros are equal content"
cp --sparse=never "$T/sparse" "$DST/dense"
[ "$(stat -c %b "$DST/dense")" -gt "$(stat -c %b "$T/sparse")" ] || _fail "the dense copy is sparse"
verify_ok "$T/sparse" "$DST/dense"
cp --sparse=never "$T/sparse" "$SRC/dense-src"
cp --sparse=always "$T/sparse" "$DST/sparse-dst"
verify_ok "$SRC/dense-src" "$DST/sparse-dst"
printf 'X' | dd of="$DST/dense" bs=1 seek=100 conv=notrunc status=none
verify_fails "content differs from the source" "$DST/dense" 100 "$T/sparse" "$DST/dense"

_log "a destination that is not btrfs (tmpfs) is read plain"
sum=$("$ENCIO" copy -r --verify "$T" "$TMP") || _fail "copy -r --verify to tmpfs"
echo "$sum"
echo "$sum" | grep -q "^verified: $NFILES copies equal to their sources" || _fail "--verify to tmpfs: files not verified"
echo "$sum" | grep -q "copies read plain (no encoded reads): $((NFILES - 1))" || _fail "not read plain"
sum=$("$ENCIO" copy --verify "$T/text" "$TMP/one") || _fail "copy --verify of one file to tmpfs"
echo "$sum"
echo "$sum" | grep -q "^verified: 1 copy equal to its source" || _fail "--verify to tmpfs: the file not verified"
verify_ok -r "$T" "$TMP"
echo "$OUT" | grep -q "^verified: $NFILES files" || _fail "tmpfs tree not verified"
printf 'X' | dd of="$TMP/tree/text" bs=1 seek=777777 conv=notrunc status=none
verify_fails "content differs from the source" "$TMP/tree/text" 777777 -r "$T" "$TMP"

_log "and a source that is not btrfs against a btrfs copy, compressed by encio"
run_check cp -a "$T/text" "$TMP/tree/text"
run_check "$ENCIO" copy -r -T --compress=zlib "$TMP/tree" "$DST/from-tmpfs"
verify_ok -r -T "$TMP/tree" "$DST/from-tmpfs"
echo "$OUT" | grep -qE "[1-9][0-9]* decoded and compared" || _fail "compressed extents not decoded"
exit 0
