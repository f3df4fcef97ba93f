#!/bin/bash
# --compress from a file system of 1 KiB blocks, whose data and holes do
# not start on 4 KiB sectors: the copy (and copy -r) has the source's
# content, compressed, where a plain copy of the same file works too.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v mkfs.ext4 >/dev/null || _not_run "needs mkfs.ext4 (e2fsprogs)"

setup_tmp
truncate -s 64M "$TEST_TMP/ext4.img"
loop=$(losetup -f --show "$TEST_TMP/ext4.img") || _fail "losetup"
_LOOPS+=("$loop")
mkfs.ext4 -q -F -b 1024 "$loop" || _fail "mkfs.ext4"
SRC=$TEST_TMP/ext4
mkdir "$SRC"
mount "$loop" "$SRC" || _fail "mount ext4"
_MOUNTS+=("$SRC")
make_btrfs dst 256M ""
DST=$MNT

# Data at [0, 1K), [5K, 8K) and [10K, 210944), size 400000.
mkdir "$SRC/t"
f=$SRC/t/holes
compressible 1024 | dd of="$f" bs=1024 status=none
compressible 3072 | dd of="$f" bs=1024 seek=5 conv=notrunc status=none
compressible $((210944 - 10240)) | dd of="$f" bs=1024 seek=10 conv=notrunc status=none
truncate -s 400000 "$f"
sync
[ "$(filefrag -v "$f" | grep -c '^ *[0-9]*:')" -ge 3 ] || _fail "the source has no holes"

for alg in zstd zlib lzo; do
	_log "copy --compress=$alg"
	run_check "$ENCIO" -q copy --compress=$alg "$f" "$DST/holes-$alg"
	cmp "$f" "$DST/holes-$alg" || _fail "$alg: content differs"
	compsize_bytes "$DST/holes-$alg" | grep -q "^$alg " || _fail "$alg: not compressed"
done
_log "copy -r --compress=zstd"
run_check "$ENCIO" -q copy -r --compress=zstd "$SRC/t" "$DST/tree"
cmp "$f" "$DST/tree/holes" || _fail "copy -r: content differs"
_log "a plain copy"
run_check "$ENCIO" -q copy "$f" "$DST/plain"
cmp "$f" "$DST/plain" || _fail "plain: content differs"
echo "PASS: $TEST_NAME"
