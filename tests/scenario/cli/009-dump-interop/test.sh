#!/bin/bash
# encio dump reads what btrfs send writes (v1, v2, compressed data,
# incremental, several subvolumes) and prints what 'btrfs receive --dump'
# prints; a damaged stream is an error naming the command's offset.
source "$(dirname "$0")/../../../common.sh"
require_root
export TZ=UTC

make_btrfs src 512M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
compressible 300000 >"$V/text"
random_bytes 200000 dump >"$V/random"
mkdir -p "$V/dir/sub"
ln "$V/text" "$V/dir/hardlink"
ln -s ../text "$V/dir/symlink"
mkfifo "$V/fifo"
mknod "$V/chardev" c 1 3
truncate -s 4M "$V/sparse"
compressible 8192 | dd of="$V/sparse" bs=4K seek=300 conv=notrunc status=none
fallocate -l 1M "$V/prealloc"
setfattr -n user.note -v "some text" "$V/text"
touch "$V/name with spaces"
chown 1000:1000 "$V/random"
chmod 4755 "$V/random"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap1"

# Changes for an incremental stream: rename, unlink, clone, truncate, xattrs.
mv "$V/dir/sub" "$V/dir/moved"
rm "$V/fifo"
cp --reflink=always "$V/text" "$V/clone"
truncate -s 100000 "$V/random"
setfattr -x user.note "$V/text"
compressible 5000 >>"$V/text"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap2"

S=$TEST_TMP/streams
mkdir "$S"
run_check btrfs -q send --proto 1 -f "$S/v1" "$SRC/snap1"
run_check btrfs -q send --proto 2 -f "$S/v2" "$SRC/snap1"
run_check btrfs -q send --proto 2 --compressed-data -f "$S/v2c" "$SRC/snap1"
run_check btrfs -q send --proto 2 --compressed-data -p "$SRC/snap1" -f "$S/incr" "$SRC/snap2"
run_check btrfs -q send --proto 2 --compressed-data -f "$S/two" "$SRC/snap1" "$SRC/snap2"

for s in v1 v2 v2c incr two; do
	btrfs receive --dump -f "$S/$s" >"$S/$s.btrfs" || _fail "btrfs receive --dump $s"
	"$ENCIO" dump -f "$S/$s" >"$S/$s.encio" || _fail "encio dump $s"
	# btrfs receive --dump stops at the first stream of a concatenation.
	head -n "$(wc -l <"$S/$s.btrfs")" "$S/$s.encio" | diff -u "$S/$s.btrfs" - ||
		_fail "dump of $s differs from btrfs receive --dump"
	echo "$s: $(wc -l <"$S/$s.encio") commands, identical"
done
[ "$(grep -cE '^(subvol|snapshot) ' "$S/two.encio")" = 2 ] || _fail "second stream of two not dumped"
cmp "$S/v2c.btrfs" "$S/v2c.encio" || _fail "v2c dump has extra lines"
grep -q '^encoded_write' "$S/v2c.encio" || _fail "no encoded_write in the compressed stream"
grep -q '^clone' "$S/incr.encio" || _fail "no clone in the incremental stream"
# Standard input works too.
"$ENCIO" dump <"$S/v2c" | cmp - "$S/v2c.encio" || _fail "dump from stdin differs"

_log "a damaged stream"
cp "$S/v2c" "$S/bad"
size=$(stat -c %s "$S/bad")
printf '\xff' | dd of="$S/bad" bs=1 seek=$((size / 2)) conv=notrunc status=none
run_mustfail "dump of a damaged stream" "$ENCIO" dump -f "$S/bad"
echo "$ERR_OUT" | grep -q "crc32c mismatch" || _fail "crc mismatch not reported"
echo "$ERR_OUT" | grep -qE "at offset [0-9]+" || _fail "no offset in the error"
head -c $((size - 7)) "$S/v2c" >"$S/cut"
run_mustfail "dump of a truncated stream" "$ENCIO" dump -f "$S/cut"
echo "$ERR_OUT" | grep -q "truncated" || _fail "truncation not reported"
exit 0
