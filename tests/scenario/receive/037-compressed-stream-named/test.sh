#!/bin/bash
# A stream file compressed whole (zstd, gzip, xz, bzip2) given to receive
# -f, receive --dump, dump -f, or receive with standard input redirected
# from it, is refused with the compressor's name and the command that
# decompresses it, not only "cannot find the btrfs-stream magic"; nothing
# is received. Decompressed as said, it receives.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
compressible 500000 >"$SRC/v/text"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check "$ENCIO" -q send -f "$T/s1.stream" "$SRC/s1"

tried=0
for c in zstd gzip xz bzip2; do
	command -v $c >/dev/null || continue
	tried=$((tried + 1))
	f=$T/s1.stream.$c
	$c -c <"$T/s1.stream" >"$f" || _fail "$c failed"
	hint="the stream is compressed with $c: decompress it first ($c -dc '$f' | encio"
	run_mustfail "receive -f of a $c stream" "$ENCIO" receive -f "$f" "$DST"
	grep -qF "$hint receive ...)" <<<"$ERR_OUT" || _fail "receive -f: no $c hint: $ERR_OUT"
	run_mustfail "receive < a $c stream" sh -c "'$ENCIO' receive '$DST' <'$f'"
	grep -qF "compressed with $c" <<<"$ERR_OUT" || _fail "receive <: no $c hint: $ERR_OUT"
	run_mustfail "receive --dump of a $c stream" "$ENCIO" receive --dump -f "$f"
	grep -qF "$hint receive --dump)" <<<"$ERR_OUT" || _fail "receive --dump: no $c hint: $ERR_OUT"
	run_mustfail "dump of a $c stream" "$ENCIO" dump -f "$f"
	grep -qF "$hint dump)" <<<"$ERR_OUT" || _fail "dump: no $c hint: $ERR_OUT"
	[ ! -e "$DST/s1" ] || _fail "a $c stream was received"
done
[ $tried -gt 0 ] || _not_run "needs zstd, gzip, xz or bzip2"
c=$(for c in zstd gzip xz bzip2; do command -v $c >/dev/null && echo $c && break; done)
$c -dc "$T/s1.stream.$c" | "$ENCIO" -q receive "$DST" || _fail "the decompressed stream is not received"
diff -r "$SRC/s1" "$DST/s1" || _fail "received s1 differs"
echo "PASS: $TEST_NAME"
