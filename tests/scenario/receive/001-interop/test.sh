#!/bin/bash
# encio receive applies what btrfs send writes (v1, v2 with compressed data,
# incremental, concatenated): trees equal to the source in content,
# metadata, xattrs and encoded bytes; subvolumes read-only and received.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
compressible 600000 >"$V/text"
random_bytes 300000 recv >"$V/random"
mkdir -p "$V/dir/sub" "$V/empty"
ln "$V/text" "$V/dir/hardlink"
ln -s ../text "$V/dir/symlink"
ln -s /nonexistent/outside "$V/dangling"
mkfifo "$V/fifo"
mknod "$V/chardev" c 1 3
truncate -s 4M "$V/sparse"
compressible 8192 | dd of="$V/sparse" bs=4K seek=300 conv=notrunc status=none
fallocate -l 1M "$V/prealloc"
echo tiny >"$V/inline"
compressible 3000 >"$V/inline-compressed"
setfattr -n user.note -v "some text" "$V/text"
setfattr -n user.bin -v 0x00ff01 "$V/dir"
touch "$V/name with spaces"
chown 1000:1000 "$V/random"
chown -h 1001:1002 "$V/dir/symlink"
chmod 4755 "$V/random"
chmod 0600 "$V/text"
touch -d '2001-02-03 04:05:06.789' "$V/random" "$V/dir/sub"
touch -h -d '2002-02-03 04:05:06' "$V/dir/symlink"
mkdir -p "$V/left/deep" "$V/right" "$V/gone"
echo left >"$V/left/deep/f"
echo right >"$V/right/f"
echo gone >"$V/gone/f"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap1"

# Changes for an incremental stream: renames, unlinks, clone, truncate, xattrs.
mv "$V/dir/sub" "$V/dir/moved"
mv "$V/random" "$V/random-renamed"
rm "$V/fifo" "$V/dir/hardlink"
rmdir "$V/empty"
cp --reflink=always "$V/text" "$V/clone"
truncate -s 100000 "$V/random-renamed"
setfattr -x user.note "$V/text"
setfattr -n user.new -v new "$V/inline"
compressible 5000 >>"$V/text"
random_bytes 70000 more | dd of="$V/sparse" bs=4K seek=10 conv=notrunc status=none
# Directories that swap names, and one replaced by a new one of the same
# name: what a path names changes under receive's cache of directories.
mv "$V/left" "$V/tmp" && mv "$V/right" "$V/left" && mv "$V/tmp" "$V/right"
echo new >"$V/left/new"
echo deeper >"$V/right/deep/g"
rm -r "$V/gone" && mkdir "$V/gone" && echo again >"$V/gone/f2"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap2"

S=$TEST_TMP/streams
mkdir "$S"
run_check btrfs -q send --proto 2 --compressed-data -f "$S/v2c" "$SRC/snap1"
run_check btrfs -q send --proto 2 --compressed-data -p "$SRC/snap1" -f "$S/v2c-incr" "$SRC/snap2"
run_check btrfs -q send --proto 1 -f "$S/v1" "$SRC/snap1"
run_check btrfs -q send --proto 1 -p "$SRC/snap1" -f "$S/v1-incr" "$SRC/snap2"
run_check btrfs -q send --proto 2 --compressed-data -f "$S/two" "$SRC/snap1" "$SRC/snap2"

# Everything a tree holds, without following symlinks.
tree_state()
{
	(cd "$1" && find . -printf '%p %y %m %U %G %s %TY-%Tm-%Td_%TT %l\n' | LC_ALL=C sort &&
		getfattr -R -h -d -m "$XATTRS" . 2>/dev/null)
}

compare_trees()
{
	local a=$1 b=$2
	local out
	# diff reports special files it cannot compare: tree_state does.
	out=$(diff -r --no-dereference "$a" "$b" 2>&1 |
		grep -vE '^File .* is a (fifo|character special file) while file .* is a (fifo|character special file)$')
	[ -z "$out" ] || _fail "trees differ: $a $b: $out"
	diff <(tree_state "$a") <(tree_state "$b") || _fail "metadata differs: $a $b"
	[ "$(stat -c %t:%T "$b/chardev" 2>/dev/null)" = 1:3 ] ||
		[ ! -e "$a/chardev" ] || _fail "device node wrong in $b"
}

check_received()
{
	local src=$1 dst=$2 uuid ruuid
	uuid=$(uuid_of "$src")
	ruuid=$(uuid_of "$dst" Received)
	[ -n "$uuid" ] && [ "$uuid" = "$ruuid" ] || _fail "received UUID of $dst: '$ruuid', want '$uuid'"
	[ "$(btrfs property get -ts "$dst" ro)" = "ro=true" ] || _fail "$dst not read-only"
}

zstd_disk()
{
	compsize_bytes "$1" | awk '$1 == "zstd" { print $2 }'
}

make_btrfs dst 512M
DST=$MNT
mkdir "$DST/c" "$DST/p" "$DST/cat"

_log "v2 --compressed-data, full then incremental"
run_check "$ENCIO" receive -f "$S/v2c" "$DST/c" 2>&1 | tee "$TEST_TMP/out"
grep -q "received 1 subvolume:" "$TEST_TMP/out" || _fail "no summary"
grep -qE "extents [1-9][0-9]* encoded, 0 decoded" "$TEST_TMP/out" || _fail "extents not written encoded"
compare_trees "$SRC/snap1" "$DST/c/snap1"
check_received "$SRC/snap1" "$DST/c/snap1"
[ "$(zstd_disk "$SRC/snap1")" = "$(zstd_disk "$DST/c/snap1")" ] ||
	_fail "encoded bytes differ: $(zstd_disk "$SRC/snap1") vs $(zstd_disk "$DST/c/snap1")"
"$ENCIO" receive <"$S/v2c-incr" "$DST/c" || _fail "incremental v2c"
compare_trees "$SRC/snap2" "$DST/c/snap2"
check_received "$SRC/snap2" "$DST/c/snap2"
[ "$(zstd_disk "$SRC/snap2")" = "$(zstd_disk "$DST/c/snap2")" ] ||
	_fail "encoded bytes differ (incremental)"

_log "v1, full then incremental"
btrfs send -q --proto 1 "$SRC/snap1" | "$ENCIO" receive "$DST/p" || _fail "v1 through a pipe"
compare_trees "$SRC/snap1" "$DST/p/snap1"
check_received "$SRC/snap1" "$DST/p/snap1"
run_check "$ENCIO" -q receive -f "$S/v1-incr" "$DST/p"
compare_trees "$SRC/snap2" "$DST/p/snap2"
check_received "$SRC/snap2" "$DST/p/snap2"

_log "two streams in one"
run_check "$ENCIO" receive -f "$S/two" "$DST/cat" 2>&1 | tee "$TEST_TMP/out"
grep -q "received 2 subvolumes" "$TEST_TMP/out" || _fail "not two subvolumes"
grep -q "io write ioctl" "$TEST_TMP/out" || _fail "auto did not write through the ioctl"
compare_trees "$SRC/snap1" "$DST/cat/snap1"
compare_trees "$SRC/snap2" "$DST/cat/snap2"
check_received "$SRC/snap2" "$DST/cat/snap2"

_log "a name that exists"
run_mustfail "receive over an existing subvolume" "$ENCIO" receive -f "$S/v2c" "$DST/c"
echo "$ERR_OUT" | grep -q "File exists" || _fail "no EEXIST"
exit 0
