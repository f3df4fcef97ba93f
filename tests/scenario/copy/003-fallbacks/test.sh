#!/bin/bash
# Where encoded I/O is impossible encio decodes or copies plain, and says so:
# btrfs -> tmpfs (decoded), tmpfs -> btrfs (plain), no CAP_SYS_ADMIN (plain
# with one warning), hugetlb-backed buffers when the pool has pages.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M ""
DST=$MNT
make_tmpfs tmp 256M
TMP=$MNT

for alg in zlib lzo zstd; do
	run_check mount -o remount,compress-force=$alg "$SRC"
	for i in 0 1 2; do
		compressible 1048576
		random_bytes 65536 "$alg$i"
	done >"$SRC/$alg"
	compressible 3000 >"$SRC/$alg-small"
done
sync

_log "btrfs -> tmpfs: decoded in user space"
for alg in zlib lzo zstd; do
	out=$("$ENCIO" copy "$SRC/$alg" "$TMP/" 2>&1) || _fail "copy to tmpfs: $out"
	echo "$out"
	echo "$out" | grep -q "not btrfs" || _fail "no warning about decoding"
	echo "$out" | grep -qE "[1-9][0-9]* decoded" || _fail "$alg: nothing decoded"
	check_same_file "$SRC/$alg" "$TMP/$alg"
	run_check "$ENCIO" -q copy "$SRC/$alg-small" "$TMP/"
	check_same_file "$SRC/$alg-small" "$TMP/$alg-small"
done

_log "tmpfs -> btrfs: plain data"
truncate -s 8M "$TMP/sparse"
compressible 100000 | dd of="$TMP/sparse" bs=4K seek=100 conv=notrunc status=none
out=$("$ENCIO" copy "$TMP/sparse" "$DST/" 2>&1) || _fail "copy from tmpfs: $out"
echo "$out"
check_same_file "$TMP/sparse" "$DST/sparse"
[ "$(du -k "$DST/sparse" | cut -f1)" -lt 1024 ] || _fail "sparse file from tmpfs became dense"

_log "without CAP_SYS_ADMIN: plain copy, one warning"
command -v setpriv >/dev/null || _not_run "needs setpriv"
out=$(setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
	"$ENCIO" copy "$SRC/zstd" "$SRC/zlib" "$DST/" 2>&1) || _fail "copy without CAP_SYS_ADMIN: $out"
echo "$out"
[ "$(echo "$out" | grep -c WARNING)" = 1 ] || _fail "expected exactly one warning"
echo "$out" | grep -q "encoded reads impossible" || _fail "warning does not say why"
check_same_file "$SRC/zstd" "$DST/zstd"
check_same_file "$SRC/zlib" "$DST/zlib"

_log "io_uring disabled: auto falls back to ioctl, a forced ring mode is an error"
if [ -w /proc/sys/kernel/io_uring_disabled ]; then
	old=$(cat /proc/sys/kernel/io_uring_disabled)
	echo 2 >/proc/sys/kernel/io_uring_disabled
	out=$("$ENCIO" copy "$SRC/zstd" "$DST/no-ring" 2>&1)
	rc=$?
	forced=$("$ENCIO" --io=uring-fixed copy "$SRC/zstd" "$DST/no-ring-forced" 2>&1)
	frc=$?
	echo "$old" >/proc/sys/kernel/io_uring_disabled
	echo "$out"
	echo "$forced"
	[ $rc = 0 ] || _fail "auto copy without io_uring failed"
	echo "$out" | grep -q "io read ioctl, write ioctl" || _fail "auto did not fall back to ioctl"
	check_same_file "$SRC/zstd" "$DST/no-ring"
	[ $frc = 1 ] || _fail "forced uring-fixed without io_uring: exit $frc"
	echo "$forced" | grep -q "forced --io mode" || _fail "forced mode error unclear"
	[ ! -e "$DST/no-ring-forced" ] || _fail "forced failure left a file"
fi

_log "hugetlb pages back the buffers when the pool has them"
old=$(cat /proc/sys/vm/nr_hugepages)
echo 8 >/proc/sys/vm/nr_hugepages
got=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
out=$("$ENCIO" -v copy "$SRC/zstd" "$DST/huge" 2>&1)
rc=$?
echo "$old" >/proc/sys/vm/nr_hugepages
echo "$out"
[ $rc = 0 ] || _fail "copy with hugepages failed"
if [ "$got" -ge 2 ]; then
	echo "$out" | grep -q "on hugetlb 2MiB pages" || _fail "hugetlb pages free but not used"
else
	echo "$out" | grep -qE "on (transparent huge pages|normal pages)" || _fail "buffer backing not reported"
fi
echo "$out" | grep -q "registered with io_uring" || _fail "registered bytes not reported"
check_same_file "$SRC/zstd" "$DST/huge"
exit 0
