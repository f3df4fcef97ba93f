#!/bin/bash
# encio copy --verify decodes every encoded extent of the copy and compares
# it with the source: a good copy passes; a copy whose extent is replaced on
# purpose (encio write of a valid zstd frame of other data) fails
# --verify-only with the file and the offset named, exit 1.
source "$(dirname "$0")/../../common.sh"
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
echo "$sum" | grep -qE "8 verified" || _fail "extents not verified"
sum=$("$ENCIO" copy --verify "$BSRC/text" "$DST/b")
echo "$sum"
echo "$sum" | grep -q "extents 8 encoded" && echo "$sum" | grep -q " 8 verified" || _fail "encoded copies not verified"
mkdir "$DST/r"
run_check "$ENCIO" copy -r --verify --compress=zstd "$TSRC" "$DST/r"
sum=$("$ENCIO" copy --verify --compress=lzo "$TSRC/small" "$DST/small")
echo "$sum"
echo "$sum" | grep -qE " 1 verified" || _fail "inline extent not verified"
run_check "$ENCIO" copy --verify-only "$TSRC/text" "$DST/a"
run_check "$ENCIO" copy --verify-only "$BSRC/text" "$DST/b"

_log "a corrupted copy fails"
# The second chunk (offset 131072) becomes a valid zstd extent of other data.
head -c 131072 /dev/zero | tr '\0' x | zstd -q -c >"$TEST_TMP/other.zst"
run_check "$ENCIO" write -o 131072 -c zstd -u 131072 "$DST/a" <"$TEST_TMP/other.zst"
cmp -s "$TSRC/text" "$DST/a" && _fail "the corruption did not change the file"
run_mustfail "verify a corrupted copy" "$ENCIO" copy --verify-only "$TSRC/text" "$DST/a"
echo "$ERR_OUT"
echo "$ERR_OUT" | grep -q "$DST/a" || _fail "error does not name the file"
echo "$ERR_OUT" | grep -qE "131072|0x20000" || _fail "error does not name the offset"

_log "garbage that does not decode fails too"
head -c 3000 /dev/urandom >"$TEST_TMP/garbage"
run_check "$ENCIO" write -o 262144 -c zstd -u 131072 "$DST/b" <"$TEST_TMP/garbage"
run_mustfail "verify garbage" "$ENCIO" copy --verify-only "$TSRC/text" "$DST/b"
echo "$ERR_OUT"
echo "$ERR_OUT" | grep -q "$DST/b" || _fail "error does not name the file"
exit 0
