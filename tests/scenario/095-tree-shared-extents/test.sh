#!/bin/bash
# Shared data stays shared: reflinked copies, a 64 KiB FICLONERANGE into
# the middle of another file, a file cloned into itself, a FIDEDUPERANGE'd
# pair, compressed and plain extents, an unaligned tail, and two snapshots
# of one subvolume given as two SRC. After encio copy (several files) and
# copy -r (one tree, two snapshots): content equal, DEST's disk usage
# (compsize) no more than 1.5% over SRC's, FIEMAP showing the shared extents, the
# clones counted. A destination that cannot clone (tmpfs) gets the data
# written; a source without sharing gets no clone.
source "$(dirname "$0")/../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
command -v filefrag >/dev/null || _not_run "needs filefrag"
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G compress-force=zstd
DST=$MNT
make_tmpfs plain 256M
PLAIN=$MNT

# clone SRC_FILE SRC_OFF LEN DST_FILE DST_OFF  (FICLONERANGE)
# dedupe SRC_FILE SRC_OFF LEN DST_FILE DST_OFF (FIDEDUPERANGE)
remap()
{
	python3 - "$@" <<'PY' || _fail "$1 $*"
import fcntl, os, struct, sys
op, src, soff, length, dst, doff = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
s = os.open(src, os.O_RDONLY)
d = os.open(dst, os.O_RDWR) if src != dst else s
if src == dst:
    os.close(s); s = d = os.open(src, os.O_RDWR)
if op == "clone":
    fcntl.ioctl(d, 0x4020940d, struct.pack("qQQQ", s, soff, length, doff))
else:
    buf = bytearray(struct.pack("QQHHI", soff, length, 1, 0, 0) + struct.pack("qQQiI", d, doff, 0, 0, 0))
    fcntl.ioctl(s, 0xC0189436, buf)
    status = struct.unpack_from("i", buf, 24 + 24)[0]
    if status != 0:
        sys.exit("dedupe status %d" % status)
PY
}

# disk DIR...: compsize's disk usage of DIR... together, in bytes
disk()
{
	compsize -b "$@" | awk '$1 == "TOTAL" { print $3 }'
}

# within A B: A at most 1.5% over B (less is right where B holds parts of
# extents no file uses any more: a copy writes only what files use)
within()
{
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b * 1.015) }'
}

# shared_extents FILE: extents FIEMAP flags shared
shared_extents()
{
	filefrag -v "$1" | grep -c shared
}

_log "a subvolume with every kind of sharing"
run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
compressible 3000000 >"$V/text"
random_bytes 2000000 base >"$V/random"
cat "$V/text" "$V/random" "$V/text" >"$V/mixed"      # cat reflinks what it can
cp --reflink=always "$V/text" "$V/text.reflink"
cp --reflink=always "$V/random" "$V/random.reflink"
{ compressible 500000; random_bytes 123457 tail; } >"$V/tail"   # unaligned size
cp --reflink=always "$V/tail" "$V/tail.reflink"
random_bytes 1048576 mid >"$V/middle"
remap clone "$V/random" 0 65536 "$V/middle" 262144
random_bytes 1048576 self >"$V/self"
remap clone "$V/self" 0 262144 "$V/self" 524288
random_bytes 786432 dup >"$V/dup1"
cp "$V/dup1" "$V/dup2"
sync
remap dedupe "$V/dup1" 0 786432 "$V/dup2" 0
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap1"
_log "churn, then a second snapshot"
dd if=/dev/urandom of="$V/text" bs=4096 count=4 seek=100 conv=notrunc status=none
dd if=/dev/urandom of="$V/random" bs=65536 count=1 seek=5 conv=notrunc status=none
rm "$V/dup2"
random_bytes 300000 new >"$V/new"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap2"
[ "$(shared_extents "$SRC/snap1/text.reflink")" -gt 0 ] || _fail "the source has no shared extents to keep"

_log "copy -r of one snapshot"
out=$("$ENCIO" copy -r --format=json "$SRC/snap1" "$DST/" 2>"$TEST_TMP/err") || _fail "copy -r: $(cat "$TEST_TMP/err")"
echo "$out"
diff -r "$SRC/snap1" "$DST/snap1" || _fail "copy -r: content differs"
sync
s=$(disk "$SRC/snap1") d=$(disk "$DST/snap1")
echo "disk usage: source $s, copy $d"
within "$d" "$s" || _fail "copy -r: disk usage $d against the source's $s"
clones=$(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["clones"], j["clone_bytes"])')
set -- $clones
[ "$1" -gt 0 ] && [ "$2" -gt 3000000 ] || _fail "copy -r: clones counted as $clones"
for f in text text.reflink mixed random.reflink middle self dup1 dup2 tail.reflink; do
	[ "$(shared_extents "$DST/snap1/$f")" -gt 0 ] || _fail "copy -r: $f has no shared extent in DEST"
done
cmp "$SRC/snap1/tail.reflink" "$DST/snap1/tail.reflink" || _fail "the unaligned tail"

_log "copy -r of two snapshots of one subvolume"
out=$("$ENCIO" -q copy -r "$SRC/snap1" "$SRC/snap2" "$DST/two/" 2>&1) ||
	{ mkdir -p "$DST/two" && out=$("$ENCIO" -q copy -r "$SRC/snap1" "$SRC/snap2" "$DST/two/" 2>&1); } ||
	_fail "copy -r of two snapshots: $out"
diff -r "$SRC/snap1" "$DST/two/snap1" || _fail "two: snap1 differs"
diff -r "$SRC/snap2" "$DST/two/snap2" || _fail "two: snap2 differs"
sync
s=$(disk "$SRC/snap1" "$SRC/snap2") d=$(disk "$DST/two/snap1" "$DST/two/snap2")
echo "disk usage: sources $s, copies $d"
within "$d" "$s" || _fail "two snapshots: disk usage $d against the sources' $s"

_log "encio copy of several files into a directory"
mkdir "$DST/files"
run_check "$ENCIO" -q copy "$SRC/snap1/text" "$SRC/snap1/text.reflink" "$SRC/snap1/mixed" "$SRC/snap1/self" "$DST/files/"
for f in text text.reflink mixed self; do
	cmp "$SRC/snap1/$f" "$DST/files/$f" || _fail "files: $f differs"
done
sync
s=$(disk "$SRC/snap1/text" "$SRC/snap1/text.reflink" "$SRC/snap1/mixed" "$SRC/snap1/self")
d=$(disk "$DST/files")
echo "disk usage: sources $s, copies $d"
within "$d" "$s" || _fail "several files: disk usage $d against the sources' $s"

_log "a destination that cannot clone gets the data"
out=$("$ENCIO" copy -r --format=json "$SRC/snap1" "$PLAIN/" 2>"$TEST_TMP/err") || _fail "copy -r to tmpfs: $(cat "$TEST_TMP/err")"
diff -r "$SRC/snap1" "$PLAIN/snap1" || _fail "tmpfs: content differs"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(j["clones"] != 0)' || _fail "clones counted on tmpfs"

_log "no sharing, no clone"
random_bytes 500000 alone >"$V/alone"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap3"
out=$("$ENCIO" copy --format=json "$SRC/snap3/alone" "$DST/alone" 2>"$TEST_TMP/err") || _fail "copy alone: $(cat "$TEST_TMP/err")"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(j["clones"] != 0)' || _fail "a clone without sharing"
cmp "$SRC/snap3/alone" "$DST/alone" || _fail "alone differs"
echo "PASS: $TEST_NAME"
