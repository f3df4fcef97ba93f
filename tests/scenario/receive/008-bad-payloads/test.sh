#!/bin/bash
# Encoded payloads are checked before they are written: for each algorithm,
# a payload that is not well formed (truncated, garbage, a zstd window past
# 128 KiB or content size past the extent, a bad zlib header, lzo lengths
# past the payload) is an error at its command's offset and nothing is
# written for it. With --verify, a payload whose framing is right but
# whose data does not decode, or decodes to less than the file uses, is
# refused too. Good payloads of each algorithm are written encoded.
source "$(dirname "$0")/../../../common.sh"
require_root
# The generator of this tree, also when ENCIO is another build.
GEN=$TOP_BUILDDIR/tests/unit/stream-gen
[ -x "$GEN" ] || make -C "$TOP_BUILDDIR" -s tests/unit/stream-gen >/dev/null 2>&1 ||
	_not_run "needs tests/unit/stream-gen (make check builds it)"

make_btrfs dst 256M
DST=$MNT
ZLIB=1 ZSTD=2 LZO=3

# The encoded write (at file offset 4096) comes after "subvol vol",
# "mkfile f" and a write of "hello": its offset is the size of that prefix,
# which an END (10 bytes) closes here.
printf 'subvol vol\nmkfile f\nwrite f 0 hello\nend\n' | "$GEN" >"$TEST_TMP/prefix" ||
	_fail "stream-gen"
OFFSET=$(($(stat -c %s "$TEST_TMP/prefix") - 10))

# stream NAME ALG PAYLOAD [ULEN]: one encoded write of ULEN (65536) bytes.
stream()
{
	local ulen=${4:-65536}
	printf 'subvol vol\nmkfile f\nwrite f 0 hello\nencoded f 4096 %s %s 0 %s %s\nend\n' \
		"$ulen" "$ulen" "$2" "$3" | "$GEN" >"$TEST_TMP/$1.stream" || _fail "stream-gen $1"
}

# refused NAME MESSAGE [receive options]
refused()
{
	local name=$1 msg=$2 d=$DST/$1
	shift 2
	mkdir "$d"
	_log "$name"
	run_mustfail "$name" "$ENCIO" receive "$@" -f "$TEST_TMP/$name.stream" "$d"
	echo "$ERR_OUT" | grep -q "^ERROR: encoded_write: writing to f failed" ||
		_fail "$name: not btrfs receive's words for a failed encoded write"
	echo "$ERR_OUT" | grep -qF "at offset $OFFSET)" ||
		_fail "$name: the error does not name the command's offset $OFFSET"
	echo "$ERR_OUT" | grep -qF -- "$msg" || _fail "$name: the error does not say '$msg'"
	[ "$(cat "$d/vol/f")" = hello ] && [ "$(stat -c %s "$d/vol/f")" = 5 ] ||
		_fail "$name: data written for the refused payload"
}

_log "good payloads of each algorithm are written encoded"
for alg in $ZLIB $ZSTD $LZO; do
	stream "good-$alg" $alg good
	mkdir "$DST/good-$alg"
	run_check "$ENCIO" receive --verify -f "$TEST_TMP/good-$alg.stream" "$DST/good-$alg" >"$TEST_TMP/out" 2>&1
	grep -q "extents 1 encoded, 0 decoded" "$TEST_TMP/out" || _fail "alg $alg: not written encoded"
	[ "$(tail -c +4097 "$DST/good-$alg/vol/f" | head -c 17)" = "encio stream-gen " ] ||
		_fail "alg $alg: data wrong"
done

stream zstd-truncated $ZSTD truncated
refused zstd-truncated "zstd"
stream zstd-garbage $ZSTD garbage
refused zstd-garbage "zstd: no frame header"
stream zstd-window $ZSTD big-window
refused zstd-window "zstd: window larger than 128 KiB"
stream zstd-content $ZSTD big-content
refused zstd-content "zstd: content size larger than the extent"
stream zstd-header $ZSTD bad-header
refused zstd-header "zstd: no frame header"

stream zlib-header $ZLIB bad-header
refused zlib-header "zlib: header check fails"
stream zlib-garbage $ZLIB garbage
refused zlib-garbage "zlib: not deflate"
stream zlib-truncated $ZLIB truncated
# Cut in half, a zlib stream keeps its header: only decoding tells.
refused zlib-truncated "does not decode" --verify

stream lzo-lengths $LZO bad-lengths
refused lzo-lengths "lzo: segment past the total length"
stream lzo-total $LZO bad-header
refused lzo-total "lzo: total length past the payload"
stream lzo-truncated $LZO truncated
refused lzo-truncated "lzo: total length past the payload"
stream lzo-garbage $LZO garbage
refused lzo-garbage "lzo: total length past the payload"

_log "--verify decodes: data that does not decode, or decodes short, is refused"
for alg in $ZLIB $ZSTD; do
	stream "body-$alg" $alg bad-body
	refused "body-$alg" "does not decode" --verify
done
stream short-lzo $LZO short
refused short-lzo "the data decodes to 8192 bytes, the file uses 65536" --verify
stream short-zstd $ZSTD short
refused short-zstd "the data decodes to 8192 bytes, the file uses 65536" --verify
