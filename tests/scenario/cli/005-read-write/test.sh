#!/bin/bash
# encio read / encio write: zlib, zstd and lzo extents read raw from a
# compress-force file and written into a fresh file with the printed
# parameters give the same data and the same extent list; each documented
# kernel error comes back verbatim (errno name and message, exit 1).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
SIZE=300000

# The parameters of one "key=value ..." line as shell variables.
parse() { eval "$(echo "$1" | tr ' ' '\n' | grep -E '^[a-z_]+=[0-9a-z]+$' | sed 's/^/p_/')"; }
extents() { "$ENCIO" list "$1" | awk 'NF == 5 && $1 ~ /^[0-9]+$/ {print $1, $2, $3, $4, $5}'; }

for alg in zlib zstd lzo; do
	_log "$alg round trip"
	run_check mount -o remount,compress-force=$alg "$SRC"
	compressible $SIZE >"$SRC/$alg"
	sync
	extents "$SRC/$alg" | grep -q " $alg " || _fail "no $alg extents in the source"
	for mode in ioctl uring uring-fixed auto; do
		dst=$SRC/$alg-copy-$mode
		for off in $(extents "$SRC/$alg" | awk '{print $1}'); do
			params=$(timeout 30 "$ENCIO" --io=$mode read -o "$off" -O "$TEST_TMP/ext" "$SRC/$alg") ||
				_fail "read $alg at $off ($mode)"
			echo "$params"
			parse "$params"
			[ "$p_bytes" = "$(stat -c %s "$TEST_TMP/ext")" ] || _fail "bytes= differs from the output size"
			[ "$p_offset" = "$off" ] && [ "$p_encryption" = 0 ] || _fail "offset/encryption"
			[ "$p_compression" = $alg ] || _fail "compression printed as $p_compression"
			# lzo is also accepted with its segment size, as "lzo4k".
			c=$p_compression
			[ $alg = lzo ] && [ $mode = auto ] && c=lzo4k
			run_check timeout 30 "$ENCIO" --io=$mode write -o "$off" -c $c -u "$p_unencoded_len" \
				-U "$p_unencoded_offset" -l "$p_len" "$dst" <"$TEST_TMP/ext"
		done
		cmp "$SRC/$alg" "$dst" || _fail "$alg $mode: data differs"
		[ "$(extents "$SRC/$alg")" = "$(extents "$dst")" ] ||
			_fail "$alg $mode: extent list differs: $(extents "$dst")"
	done
done

_log "JSON parameters"
json=$(timeout 30 "$ENCIO" read --format=json -o 131072 "$SRC/zstd" 2>&1 >/dev/null) || _fail "read --format=json"
echo "$json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["offset"] == 131072 and d["compression_name"] == "zstd" and d["compression"] == 2, d
assert d["len"] == 131072 and d["bytes"] > 0 and d["encryption"] == 0, d
' || _fail "JSON parameters"
# Raw bytes on stdout (parameters on stderr) equal those written with -O.
timeout 30 "$ENCIO" read "$SRC/zstd" >"$TEST_TMP/e1" 2>"$TEST_TMP/p1" || _fail "read to stdout"
timeout 30 "$ENCIO" read -O "$TEST_TMP/e0" "$SRC/zstd" >/dev/null || _fail "read -O"
cmp "$TEST_TMP/e0" "$TEST_TMP/e1" || _fail "stdout and -O differ"
grep -q "^offset=0 len=" "$TEST_TMP/p1" || _fail "parameters not on stderr"
out=$(timeout 30 "$ENCIO" read -o 10000000 -O "$TEST_TMP/eof" "$SRC/zstd") || _fail "read past EOF"
echo "$out" | grep -q "bytes=0" || _fail "past EOF is not bytes=0"

_log "errors"
timeout 30 "$ENCIO" read -O "$TEST_TMP/ext" "$SRC/zstd" >"$TEST_TMP/params" || _fail "read"
parse "$(cat "$TEST_TMP/params")"
run_mustfail "misaligned offset" timeout 30 "$ENCIO" write -o 100 -c zstd -u "$p_unencoded_len" "$SRC/bad" <"$TEST_TMP/ext"
echo "$ERR_OUT" | grep -q "EINVAL (Invalid argument)" || _fail "misaligned offset: no EINVAL"
head -c 4096 /dev/urandom >"$TEST_TMP/4k"
run_mustfail "encoded not smaller" timeout 30 "$ENCIO" write -o 0 -c zstd -u 4096 "$SRC/bad" <"$TEST_TMP/4k"
echo "$ERR_OUT" | grep -q "EINVAL" || _fail "encoded length == unencoded: no EINVAL"
for mode in ioctl uring uring-fixed; do
	run_mustfail "small buffer" timeout 30 "$ENCIO" --io=$mode read -b 1024 "$SRC/zstd"
	echo "$ERR_OUT" | grep -q "ENOBUFS (No buffer space available)" || _fail "small buffer ($mode): no ENOBUFS"
done
# Past RLIMIT_FSIZE (SIGXFSZ ignored, so the error is returned): EFBIG.
efbig() { (trap '' XFSZ; ulimit -f 100; "$@"); }
run_mustfail "file too big" efbig timeout 30 "$ENCIO" write -o 1M -c zstd -u "$p_unencoded_len" "$SRC/bad" <"$TEST_TMP/ext"
echo "$ERR_OUT" | grep -q "EFBIG (File too large)" || _fail "past RLIMIT_FSIZE: no EFBIG"
run_mustfail "unknown algorithm number" timeout 30 "$ENCIO" write -o 0 -c 9 -u "$p_unencoded_len" "$SRC/bad" <"$TEST_TMP/ext"
echo "$ERR_OUT" | grep -q "EINVAL" || _fail "compression 9: no EINVAL"
mkfifo "$TEST_TMP/fifo"
run_mustfail "read a FIFO" timeout 20 "$ENCIO" read "$TEST_TMP/fifo"
echo "$ERR_OUT" | grep -q "cannot open '$TEST_TMP/fifo': not a regular file" || _fail "read: FIFO not refused"
run_mustfail "write a FIFO" timeout 20 "$ENCIO" write -o 0 -c zstd -u "$p_unencoded_len" "$TEST_TMP/fifo" <"$TEST_TMP/ext"
echo "$ERR_OUT" | grep -q "cannot open '$TEST_TMP/fifo': not a regular file" || _fail "write: FIFO not refused"
command -v setpriv >/dev/null || _not_run "needs setpriv"
noadmin() { setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin "$@"; }
run_mustfail "read without CAP_SYS_ADMIN" noadmin timeout 30 "$ENCIO" read "$SRC/zstd"
echo "$ERR_OUT" | grep -q "EPERM (Operation not permitted)" || _fail "read: no EPERM"
run_mustfail "write without CAP_SYS_ADMIN" noadmin timeout 30 "$ENCIO" write -o 0 -c zstd -u "$p_unencoded_len" "$SRC/bad" <"$TEST_TMP/ext"
echo "$ERR_OUT" | grep -q "EPERM (Operation not permitted)" || _fail "write: no EPERM"
"$ENCIO" write -o 0 -c nonsense -u 4096 "$SRC/bad" </dev/null >/dev/null 2>&1
[ $? = 2 ] || _fail "unknown algorithm name is not a usage error"
exit 0
