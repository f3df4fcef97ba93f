#!/bin/bash
# encio send -p sends what changed between snapshots of a chain: renames as
# renames, shared data as CLONE, unchanged files not at all, punched holes
# as holes; btrfs receive and encio receive apply each step, giving trees
# equal to the snapshots. --proto 1 writes v1 streams (data decoded),
# --no-data is the kernel's stream as btrfs send --no-data writes it.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v python3 >/dev/null || _not_run "needs python3"
export TZ=UTC

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
mkdir "$DST/b" "$DST/e" "$DST/b1" "$DST/e1" "$SRC/ro"
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol

# clone_range SRC SRC_OFF DST DST_OFF LEN: FICLONERANGE
clone_range()
{
	python3 - "$@" <<'PY' || _fail "clone range $*"
import fcntl, os, struct, sys
src, soff, dst, doff, n = sys.argv[1], *map(int, sys.argv[2:3]), sys.argv[3], *map(int, sys.argv[4:6])
s = os.open(src, os.O_RDONLY)
d = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
fcntl.ioctl(d, 0x4020940d, struct.pack("=qQQQ", s, soff, n, doff))
PY
}

# Everything the trees hold: content, types, modes, owners, sizes, device
# numbers, times, links, xattrs.
compare_trees()
{
	local a=$1 b=$2 out
	diff <(tree_stat "$a") <(tree_stat "$b") || _fail "metadata differs: $a $b"
	diff <(tree_xattrs "$a") <(tree_xattrs "$b") || _fail "xattrs differ: $a $b"
	out=$(diff -r --no-dereference "$a" "$b" 2>&1 |
		grep -vE '^File .* is a (fifo|character special file|block special file) while file .* is a (fifo|character special file|block special file)$')
	[ -z "$out" ] || _fail "trees differ: $a $b: $out"
}

snap()
{
	run_check btrfs -q subvolume snapshot -r "$V" "$SRC/ro/$1"
}

_log "s1: the first tree"
compressible 3000000 >"$V/text"
random_bytes 2000000 plain >"$V/random"
compressible 500000 >"$V/append"
random_bytes 300000 modify >"$V/modify"
compressible 1000000 >"$V/holes"
compressible 900000 >"$V/truncate"
random_bytes 1000000 reflink-src >"$V/reflink-src"
compressible 2000000 >"$V/clone-src"
mkdir -p "$V/parent/child/grand" "$V/swap" "$V/keep"
echo a >"$V/swap/a"
echo b >"$V/swap/b"
echo inner >"$V/parent/child/grand/file"
echo outer >"$V/parent/file"
echo becomes-dir >"$V/replaced"
echo linked >"$V/keep/linked"
ln "$V/keep/linked" "$V/keep/link-1"
ln "$V/keep/linked" "$V/keep/link-2"
mkfifo "$V/fifo"
mknod "$V/chardev" c 1 3
fallocate -l 1M "$V/prealloc"
setfattr -n user.keep -v one "$V/text"
setfattr -n user.drop -v two "$V/text"
chown 1234:5678 "$V/modify"
chmod 0640 "$V/append"
touch -d '2001-02-03 04:05:06.123456789' "$V/keep/linked"
snap s1

_log "s2: modify, append, rename, move a directory under its child, swap, replace, links, holes, truncate, reflink, xattrs, owner, mode"
dd if=/dev/urandom of="$V/modify" bs=4096 seek=10 count=3 conv=notrunc status=none
compressible 70000 >>"$V/append"
mv "$V/text" "$V/text-renamed"
mv "$V/parent/child" "$V/child"
mv "$V/parent" "$V/child/parent"
echo "changed where it moved" >>"$V/child/parent/file"
compressible 200000 >>"$V/child/grand/file"
mv "$V/swap/a" "$V/swap/tmp"
mv "$V/swap/b" "$V/swap/a"
mv "$V/swap/tmp" "$V/swap/b"
rm "$V/replaced"
mkdir "$V/replaced"
echo now-a-dir >"$V/replaced/inside"
ln "$V/keep/linked" "$V/keep/link-3"
rm "$V/keep/link-1"
fallocate -p -o 131072 -l 262144 "$V/holes"
truncate -s 300000 "$V/truncate"
cp --reflink=always "$V/reflink-src" "$V/reflinked"
clone_range "$V/clone-src" 524288 "$V/cloned-range" 0 262144
setfattr -x user.drop "$V/text-renamed"
setfattr -n user.new -v three "$V/text-renamed"
chown 4321:8765 "$V/append"
chmod 0600 "$V/modify"
touch -d '2005-06-07 08:09:10.5' "$V/swap"
snap s2

_log "s3: files of new data (more reads than one batch), prealloc, FIFOs and devices, more churn"
mkdir "$V/many"
for i in $(seq 1 50); do compressible $((i * 3000)) >"$V/many/f$i"; done
compressible 6000000 >"$V/big-new"
random_bytes 400000 new >"$V/new-plain"
chattr +m "$V/new-plain" 2>/dev/null
compressible 1500000 >"$V/new-text"
fallocate -o 0 -l 262144 "$V/new-prealloc"
mkfifo "$V/fifo-2"
mknod "$V/blockdev" b 7 200
rm "$V/fifo"
dd if=/dev/urandom of="$V/text-renamed" bs=4096 seek=100 count=1 conv=notrunc status=none
fallocate -p -o 0 -l 65536 "$V/random"
mv "$V/child" "$V/moved-child"
rm -r "$V/swap"
rm "$V/keep/link-2"
truncate -s 5000000 "$V/truncate"
snap s3

_log "s4: swap a file and a directory, remove a reflink source"
mv "$V/replaced" "$V/tmp"
mv "$V/new-text" "$V/replaced"
mv "$V/tmp" "$V/new-text"
rm "$V/reflink-src"
compressible 100000 | dd of="$V/holes" bs=4096 seek=40 conv=notrunc status=none
snap s4

_log "full send of s1, incremental sends of s2..s4, to both receivers, and btrfs send's to encio receive"
mkdir -p "$DST/k"
"$ENCIO" -q send "$SRC/ro/s1" | btrfs receive "$DST/b" >/dev/null || _fail "full send | btrfs receive"
"$ENCIO" -q send "$SRC/ro/s1" | "$ENCIO" -q receive "$DST/e" || _fail "full send | encio receive"
btrfs -q send --compressed-data "$SRC/ro/s1" | "$ENCIO" -q receive "$DST/k" ||
	_fail "btrfs send | encio receive"
prev=s1
for s in s2 s3 s4; do
	run_check "$ENCIO" -q send -p "$SRC/ro/$prev" -f "$TEST_TMP/$s.stream" "$SRC/ro/$s"
	btrfs receive -f "$TEST_TMP/$s.stream" "$DST/b" >/dev/null || _fail "btrfs receive of $s"
	"$ENCIO" -q send -p "$SRC/ro/$prev" "$SRC/ro/$s" | "$ENCIO" -q receive "$DST/e" ||
		_fail "encio send -p | encio receive of $s"
	btrfs -q send --compressed-data -p "$SRC/ro/$prev" "$SRC/ro/$s" | "$ENCIO" -q receive "$DST/k" ||
		_fail "btrfs send -p | encio receive of $s"
	compare_trees "$SRC/ro/$s" "$DST/b/$s"
	compare_trees "$SRC/ro/$s" "$DST/e/$s"
	compare_trees "$SRC/ro/$s" "$DST/k/$s"
	prev=$s
done

_log "--snapshot -p: the writable subvolume's difference from a snapshot, named after it"
echo "after s4" >"$V/after-s4"
snap s5 # what the sends see of it, kept from reads that change its atimes
"$ENCIO" -q send --snapshot -p "$SRC/ro/s4" "$V" | btrfs receive "$DST/b" >/dev/null || _fail "send --snapshot -p | btrfs receive"
"$ENCIO" -q send --snapshot -p "$SRC/ro/s4" "$V" | "$ENCIO" -q receive "$DST/e" || _fail "send --snapshot -p | encio receive"
compare_trees "$SRC/ro/s5" "$DST/b/vol"
compare_trees "$SRC/ro/s5" "$DST/e/vol"
btrfs subvolume list "$SRC" | grep -q encio-send && _fail "snapshot left behind"

_log "the incremental stream: renames, clones, no data for unchanged files"
full=$("$ENCIO" -q send "$SRC/ro/s2" | wc -c)
incr=$(stat -c %s "$TEST_TMP/s2.stream")
echo "full $full, incremental $incr"
[ "$incr" -lt $((full / 5)) ] || _fail "incremental stream of $incr bytes, full $full"
btrfs receive --dump -f "$TEST_TMP/s2.stream" >"$TEST_TMP/s2.dump" || _fail "dump s2"
grep -qE '^rename +\./s2/parent/child +dest=\./s2/child$' "$TEST_TMP/s2.dump" &&
	grep -qE '^rename +\./s2/parent +dest=\./s2/child/parent$' "$TEST_TMP/s2.dump" ||
	_fail "the directory moved under its child is not renamed"
grep -qE '^(rename|link) +\./s2/text-renamed +dest=(\./s2/)?text$|^rename +\./s2/text +dest=\./s2/text-renamed$' "$TEST_TMP/s2.dump" ||
	_fail "the renamed file is not renamed"
grep -qE '^clone +\./s2/reflinked .* from=\./s2/reflink-src ' "$TEST_TMP/s2.dump" || _fail "the reflink is not a clone"
grep -qE '^clone +\./s2/cloned-range .* from=\./s2/clone-src clone_offset=524288$' "$TEST_TMP/s2.dump" ||
	_fail "the cloned range is not a clone"
! grep -qE '^(write|encoded_write) +\./s2/(text-renamed|random|clone-src|reflink-src) ' "$TEST_TMP/s2.dump" ||
	_fail "unchanged data sent"
grep -qE '^fallocate +\./s2/holes .*mode=3' "$TEST_TMP/s2.dump" || _fail "the punched hole is not punched"
grep -qE '^encoded_write +\./s2/append ' "$TEST_TMP/s2.dump" || _fail "the appended text is not sent encoded"

_log "--proto 1: a v1 stream, data decoded, btrfs receive applies it"
mkdir "$DST/v1"
run_check "$ENCIO" -q send --proto 1 -f "$TEST_TMP/v1-full" "$SRC/ro/s1"
run_check "$ENCIO" -q send --proto 1 -p "$SRC/ro/s1" -f "$TEST_TMP/v1-incr" "$SRC/ro/s2"
[ "$(head -c 17 "$TEST_TMP/v1-incr" | od -An -tx1 -j13 | tr -d ' ')" = 01000000 ] || _fail "not a v1 stream"
! btrfs receive --dump -f "$TEST_TMP/v1-incr" | grep -qE '^(encoded_write|fallocate) ' || _fail "v1 stream with v2 commands"
run_check btrfs receive -f "$TEST_TMP/v1-full" "$DST/v1"
run_check btrfs receive -f "$TEST_TMP/v1-incr" "$DST/v1"
compare_trees "$SRC/ro/s2" "$DST/v1/s2"
run_mustfail "--compressed-data with --proto 1" "$ENCIO" send --proto 1 --compressed-data -f "$TEST_TMP/x" "$SRC/ro/s2"

_log "--no-data: the kernel's stream, as btrfs send --no-data writes it"
run_check "$ENCIO" -q send --no-data -p "$SRC/ro/s1" -f "$TEST_TMP/nodata" "$SRC/ro/s2"
run_check btrfs -q send --proto 2 --no-data -p "$SRC/ro/s1" -f "$TEST_TMP/nodata-btrfs" "$SRC/ro/s2"
cmp "$TEST_TMP/nodata" "$TEST_TMP/nodata-btrfs" || _fail "--no-data stream differs from btrfs send's"
run_check "$ENCIO" -q send --proto 1 --no-data -p "$SRC/ro/s1" -f "$TEST_TMP/nodata1" "$SRC/ro/s2"
run_check btrfs -q send --no-data -p "$SRC/ro/s1" -f "$TEST_TMP/nodata1-btrfs" "$SRC/ro/s2"
cmp "$TEST_TMP/nodata1" "$TEST_TMP/nodata1-btrfs" || _fail "--no-data --proto 1 stream differs from btrfs send's"

_log "refusals as btrfs send's"
run_mustfail "a writable parent" "$ENCIO" send -p "$V" -f "$TEST_TMP/x" "$SRC/ro/s2"
echo "$ERR_OUT" | grep -q "parent subvolume .* is not read-only" || _fail "message for a writable parent"
run_mustfail "two parents" "$ENCIO" send -p "$SRC/ro/s1" -p "$SRC/ro/s2" -f "$TEST_TMP/x" "$SRC/ro/s3"
[ ! -e "$TEST_TMP/x" ] || _fail "a refused send made its file"
