#!/bin/bash
# encio copy --verify compares every byte of the copy with the source,
# decoding its compressed extents (or finding them byte-identical to the
# source's): a good copy passes; a copy whose extent is replaced on purpose
# (encio write of a valid zstd frame of other data), a changed byte in its
# plain data, a compressed extent that does not decode, all fail
# --verify-only with the file and the offset named, exit 1.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v zstd >/dev/null || _not_run "needs zstd"

make_btrfs src 1G compress-force=zstd
BSRC=$MNT
make_tmpfs tsrc 64M
TSRC=$MNT
make_btrfs dst 1G ""
DST=$MNT

compressible 1000000 >"$TSRC/text"
compressible 3000 >"$TSRC/small"
compressible 1000000 >"$BSRC/text"
sync

_log "good copies pass"
sum=$("$ENCIO" copy --verify --compress=zlib:9 "$TSRC/text" "$DST/a")
echo "$sum"
echo "$sum" | grep -q "^verified: 1 copy equal to its source" &&
	echo "$sum" | grep -q "(976.56KiB read from both files, 0B holes in both); compressed extents of the copies: 0 identical to the source's encoded bytes, 8 decoded and compared" ||
	_fail "extents not verified"
sum=$("$ENCIO" copy --verify "$BSRC/text" "$DST/b")
echo "$sum"
n=$(echo "$sum" | sed -n 's/.*; extents \([0-9]*\) encoded,.*/\1/p')
[ "${n:-0}" -ge 8 ] &&
	echo "$sum" | grep -q "compressed extents of the copies: $n identical to the source's encoded bytes, 0 decoded" ||
	_fail "encoded copies not verified"
mkdir "$DST/r"
run_check "$ENCIO" copy -r --verify --compress=zstd "$TSRC" "$DST/r"
sum=$("$ENCIO" copy --verify --compress=lzo "$TSRC/small" "$DST/small")
echo "$sum"
echo "$sum" | grep -q "1 decoded and compared" || _fail "inline extent not verified"
sum=$("$ENCIO" copy --verify --format=json "$BSRC/text" "$DST/json")
echo "$sum"
echo "$sum" | python3 -c 'import json, sys; v = json.load(sys.stdin)["verify"]; assert v["files_verified"] == 1 and v["bytes_compared"] == 1000000 and v["extents_identical"] >= 8 and v["extents_decoded"] == 0, v' ||
	_fail "JSON verify summary"
run_check "$ENCIO" copy --verify-only "$TSRC/text" "$DST/a"
run_check "$ENCIO" copy --verify-only "$BSRC/text" "$DST/b"

_log "a corrupted copy fails"
# The second chunk (offset 131072) becomes a valid zstd extent of other
# data: a frame the kernel's decoder takes (window of 128 KiB at most).
head -c 131072 /dev/zero | tr '\0' x | zstd -q -c --zstd=wlog=17 >"$TEST_TMP/other.zst"
run_check "$ENCIO" write -o 131072 -c zstd -u 131072 "$DST/a" <"$TEST_TMP/other.zst"
cmp -s "$TSRC/text" "$DST/a" && _fail "the corruption did not change the file"
run_mustfail "verify a corrupted copy" "$ENCIO" copy --verify-only "$TSRC/text" "$DST/a"
echo "$ERR_OUT"
echo "$ERR_OUT" | grep -q "'$DST/a': content differs from the source at offset 131072$" ||
	_fail "error does not name the file and the offset"

_log "a changed byte in plain data fails"
random_bytes 300000 seed1 >"$TSRC/random"
run_check "$ENCIO" copy --verify "$TSRC/random" "$DST/random"
printf 'X' | dd of="$DST/random" bs=1 seek=123456 conv=notrunc status=none
cmp -s "$TSRC/random" "$DST/random" && _fail "the change did not change the file"
run_mustfail "verify a changed plain byte" "$ENCIO" copy --verify-only "$TSRC/random" "$DST/random"
echo "$ERR_OUT" | grep -q "'$DST/random': content differs from the source at offset 123456$" ||
	_fail "the file and the offset of the changed byte not named"

_log "garbage that does not decode fails too"
head -c 3000 /dev/urandom >"$TEST_TMP/garbage"
run_check "$ENCIO" write -o 262144 -c zstd -u 131072 "$DST/b" <"$TEST_TMP/garbage"
run_mustfail "verify garbage" "$ENCIO" copy --verify-only "$TSRC/text" "$DST/b"
echo "$ERR_OUT"
echo "$ERR_OUT" | grep -q "$DST/b" || _fail "error does not name the file"
exit 0
