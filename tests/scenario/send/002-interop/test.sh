#!/bin/bash
# encio send writes v2 streams that btrfs receive and encio receive apply,
# giving trees equal to the source in content, metadata, xattrs and encoded
# bytes; btrfs receive --dump and encio dump read them alike; a read-only
# snapshot, --snapshot and a plain directory (procfs too) as the source.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v compsize >/dev/null || _not_run "needs compsize"
command -v setpriv >/dev/null || _not_run "needs setpriv"
command -v setcap >/dev/null || _not_run "needs setcap (libcap2-bin)"
export TZ=UTC

make_btrfs src 512M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
compressible 600000 >"$V/text"
compressible 6000000 >"$V/big-text" # more extents than one window of reads
random_bytes 1000000 send >"$V/random"
mkdir -p "$V/dir/sub" "$V/empty" "$V/other"
ln "$V/text" "$V/dir/hardlink"
ln "$V/random" "$V/other/random-link"
ln -s ../text "$V/dir/symlink"
ln -s /nonexistent/outside "$V/dangling"
mkfifo "$V/fifo"
mknod "$V/chardev" c 1 3
truncate -s 4M "$V/sparse"
compressible 8192 | dd of="$V/sparse" bs=4K seek=300 conv=notrunc status=none
random_bytes 5000 tail | dd of="$V/sparse" bs=4K seek=10 conv=notrunc status=none
fallocate -l 1M "$V/prealloc"
echo hi >"$V/prealloc-past-eof"
fallocate -n -o 65536 -l 1M "$V/prealloc-past-eof"
random_bytes 100000 mixed >"$V/prealloc-tail"
fallocate -o 200000 -l 300000 "$V/prealloc-tail"
echo tiny >"$V/inline"
compressible 3000 >"$V/inline-compressed"
: >"$V/empty-file"
setfattr -n user.note -v "some text" "$V/text"
setfattr -n user.bin -v 0x00ff01 "$V/dir"
setfattr -n user.root -v top "$V"
touch "$V/name with spaces"
chown 1000:1000 "$V/random"
chown -h 1001:1002 "$V/dir/symlink"
chown 1003:1004 "$V/fifo" "$V/dir/sub"
# A capability of a file not root's: a chown after it would clear it.
echo capable >"$V/capable"
chown 1005:1005 "$V/capable"
setcap cap_net_raw+ep "$V/capable"
chmod 4755 "$V/random"
chmod 0600 "$V/text"
chmod 0710 "$V/dir/sub"
chmod 0750 "$V"
touch -d '2001-02-03 04:05:06.789' "$V/random" "$V/dir/sub" "$V/fifo"
touch -h -d '2002-02-03 04:05:06' "$V/dir/symlink"
touch -d '2003-02-03 04:05:06.123456789' "$V/dir" "$V"
# What is sent: a read-only snapshot of it, named like it.
mkdir "$SRC/ro"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/ro/vol"
R=$SRC/ro/vol

# Everything a tree holds but atimes, without following symlinks.
tree_state()
{
	(cd "$1" && find . -printf '%p %y %m %U %G %s %T@ %l\n' | LC_ALL=C sort &&
		find . -print0 | LC_ALL=C sort -z | xargs -0 getfattr -h -d -m "$XATTRS" 2>/dev/null)
}

compare_trees()
{
	local a=$1 b=$2 out
	out=$(diff -r --no-dereference "$a" "$b" 2>&1 |
		grep -vE '^File .* is a (fifo|character special file) while file .* is a (fifo|character special file)$')
	[ -z "$out" ] || _fail "trees differ: $a $b: $out"
	diff <(tree_state "$a") <(tree_state "$b") || _fail "metadata differs: $a $b"
	[ ! -e "$a/chardev" ] || [ "$(stat -c %t:%T "$b/chardev")" = 1:3 ] ||
		_fail "device node wrong in $b"
	[ ! -e "$a/text" ] ||
		[ "$(stat -c %i "$b/text")" = "$(stat -c %i "$b/dir/hardlink")" ] ||
		_fail "hard link lost in $b"
}

zstd_disk()
{
	compsize_bytes "$1" | awk '$1 == "zstd" { print $2 }'
}

# The extent layout (offset, length, kind) of the preallocated files.
prealloc_layout()
{
	local f
	for f in prealloc prealloc-past-eof prealloc-tail; do
		"$ENCIO" list "$1/$f" | awk '$NF ~ /^(regular|prealloc|hole|inline)$/ { print $1, $2, $NF }'
	done
}

check_prealloc()
{
	diff <(prealloc_layout "$1") <(prealloc_layout "$2") || _fail "preallocated ranges differ: $1 $2"
	prealloc_layout "$2" | grep -q prealloc || _fail "no prealloc in $2"
}

make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e" "$DST/s" "$DST/p" "$DST/n"
S=$TEST_TMP/streams
mkdir "$S"

_log "encio send | btrfs receive"
"$ENCIO" send "$R" 2>"$TEST_TMP/err" | btrfs receive "$DST/b" >/dev/null ||
	_fail "encio send | btrfs receive: $(cat "$TEST_TMP/err")"
cat "$TEST_TMP/err"
grep -qE "encoded in [1-9][0-9]* extents" "$TEST_TMP/err" || _fail "nothing sent encoded"
compare_trees "$R" "$DST/b/vol"
check_prealloc "$R" "$DST/b/vol"
[ "$(zstd_disk "$R")" = "$(zstd_disk "$DST/b/vol")" ] ||
	_fail "encoded bytes differ: $(zstd_disk "$R") vs $(zstd_disk "$DST/b/vol")"
[ "$(uuid_of "$DST/b/vol" Received)" = "$(uuid_of "$R")" ] || _fail "received UUID is not the source's"

_log "encio send -f | encio receive -f, dumps"
run_check "$ENCIO" -q send -f "$S/vol" "$R"
run_check "$ENCIO" -q receive -f "$S/vol" "$DST/e"
compare_trees "$R" "$DST/e/vol"
check_prealloc "$R" "$DST/e/vol"
[ "$(zstd_disk "$R")" = "$(zstd_disk "$DST/e/vol")" ] || _fail "encoded bytes differ (encio receive)"
btrfs receive --dump -f "$S/vol" >"$S/vol.btrfs" || _fail "btrfs receive --dump"
"$ENCIO" dump -f "$S/vol" >"$S/vol.encio" || _fail "encio dump"
# btrfs receive --dump prints xattr data as a C string (cut at the NUL),
# encio dump escapes it: the binary xattrs' lines differ by design.
diff -u <(grep -vE "name=(user.bin|security.capability) " "$S/vol.btrfs") <(grep -vE "name=(user.bin|security.capability) " "$S/vol.encio") ||
	_fail "dumps differ"
grep -q "^encoded_write" "$S/vol.btrfs" || _fail "no encoded_write in the dump"
[ "$(grep -c '^link ' "$S/vol.btrfs")" = 2 ] || _fail "not two links in the dump"
[ "$(tail -n1 "$S/vol.btrfs" | awk '{ print $1 }')" = utimes ] || _fail "root utimes not last"

_log "progress on a terminal"
if command -v script >/dev/null; then
	script -qec "$ENCIO send -f $S/tty $R" /dev/null >"$TEST_TMP/tty" || _fail "send on a terminal"
	grep -qE "[0-9.]+[KMG]?i?B of [0-9.]+[KMG]?i?B, .*/s, ETA" "$TEST_TMP/tty" ||
		_fail "no progress: $(cat -v "$TEST_TMP/tty")"
	btrfs receive --dump -f "$S/tty" >/dev/null || _fail "stream sent with progress"
fi

_log "--snapshot"
run_check "$ENCIO" -q send --snapshot -f "$S/snap" "$V"
ls -a "$SRC" | grep -q encio-send && _fail "snapshot left behind"
run_check btrfs receive -f "$S/snap" "$DST/s"
compare_trees "$V" "$DST/s/vol"
ruuid=$(uuid_of "$DST/s/vol" Received)
[ -n "$ruuid" ] && [ "$ruuid" != "$(uuid_of "$V")" ] || _fail "--snapshot: UUID '$ruuid' not the snapshot's"
run_mustfail "--snapshot of a plain directory" "$ENCIO" send --snapshot -f "$S/bad" "$V/dir"
ls -a "$V" | grep -q encio-send && _fail "snapshot left behind after an error"
run_mustfail "--snapshot to a full output" "$ENCIO" send --snapshot -f /dev/full "$V"
echo "$ERR_OUT" | grep -q "/dev/full.*No space left" || _fail "no ENOSPC naming the file: $ERR_OUT"
ls -a "$SRC" | grep -q encio-send && _fail "snapshot left behind after a write error"
run_mustfail "send of a missing path" "$ENCIO" send -f "$S/bad" "$SRC/missing"
echo "$ERR_OUT" | grep -q "missing" || _fail "error does not name the path: $ERR_OUT"

_log "a plain directory"
run_check "$ENCIO" -q send -f "$S/dir" "$V/dir"
run_check btrfs receive -f "$S/dir" "$DST/p"
compare_trees "$V/dir" "$DST/p/dir"
ruuid=$(uuid_of "$DST/p/dir" Received)
[ -n "$ruuid" ] && [ "$ruuid" != - ] || _fail "no fresh UUID for a directory"

_log "a directory of procfs: files of size 0 sent as they read"
mkdir "$DST/proc"
run_check "$ENCIO" -q send -f "$S/proc" /proc/sys/kernel/random
run_check btrfs receive -f "$S/proc" "$DST/proc"
for f in poolsize boot_id; do
	cmp "/proc/sys/kernel/random/$f" "$DST/proc/random/$f" || _fail "random/$f not sent as read"
done

_log "plain reads (no CAP_SYS_ADMIN: no encoded reads)"
setpriv --bounding-set -sys_admin --inh-caps -sys_admin "$ENCIO" send "$R" 2>"$TEST_TMP/err" | "$ENCIO" -q receive "$DST/n" ||
	_fail "send without CAP_SYS_ADMIN: $(cat "$TEST_TMP/err")"
grep -q "io read none" "$TEST_TMP/err" || _fail "not read plain: $(cat "$TEST_TMP/err")"
compare_trees "$R" "$DST/n/vol"
_log "several paths: a stream each, or with -e one stream of two subvolumes"
mkdir "$DST/two" "$DST/two-e" "$DST/one" "$DST/one-e" "$V/dir2"
ln "$V/dir/hardlink" "$V/dir2/third-link"
run_check "$ENCIO" -q send -f "$S/two" "$V/dir" "$V/dir2"
[ "$(grep -ao btrfs-stream "$S/two" | wc -l)" = 2 ] || _fail "not two streams"
[ "$(btrfs receive --dump -f "$S/two" | grep -c '^subvol ')" = 1 ] || _fail "not one subvol in the first stream"
run_check "$ENCIO" -q send -e -f "$S/one" "$V/dir" "$V/dir2"
[ "$(grep -ao btrfs-stream "$S/one" | wc -l)" = 1 ] || _fail "-e: not one stream"
[ "$(btrfs receive --dump -f "$S/one" | grep -c '^subvol ')" = 2 ] || _fail "-e: not two subvols in the stream"
run_check btrfs receive -f "$S/two" "$DST/two"
run_check "$ENCIO" -q receive -f "$S/two" "$DST/two-e"
run_check btrfs receive -e -f "$S/one" "$DST/one"
run_check "$ENCIO" -q receive -f "$S/one" "$DST/one-e"
for d in "$DST/two" "$DST/two-e" "$DST/one" "$DST/one-e"; do
	compare_trees "$V/dir" "$d/dir"
	compare_trees "$V/dir2" "$d/dir2"
done
rm -r "$V/dir2"

_log "a nested subvolume is left out, as btrfs send leaves it out"
run_check btrfs -q subvolume create "$SRC/outer"
run_check btrfs -q subvolume create "$SRC/outer/inner"
echo data >"$SRC/outer/inner/file"
echo top >"$SRC/outer/top"
run_check btrfs property set -ts "$SRC/outer" ro true
mkdir "$DST/nest"
"$ENCIO" -q send "$SRC/outer" | btrfs receive "$DST/nest" >/dev/null || _fail "nested send"
[ ! -e "$DST/nest/outer/inner" ] || _fail "the nested subvolume is in the copy"
cmp "$SRC/outer/top" "$DST/nest/outer/top" || _fail "nested: top differs"
exit 0
