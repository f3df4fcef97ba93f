#!/bin/bash
# encio send -p gives what btrfs send -p gives on the histories where a
# difference filled in outside the kernel went wrong: a file grown by
# fallocate past EOF keeps its new size; a directory inode number that
# btrfs reuses after a remount (a new generation) does not lead a file to
# another file's data, nor stops the send; a clone past the EOF of a file
# with a compressed inline extent is sent as a stream both receivers take.
# Each step goes into btrfs receive and into encio receive, and its stream
# is no larger than btrfs send --compressed-data's, but for the zeros of
# inline extents' tails.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
SRC_IMG=$TEST_TMP/src.img
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e" "$TEST_TMP/streams"

snap() { run_check btrfs -q subvolume snapshot -r "$SRC/$1" "$SRC/$2"; }

remount_src()
{
	run_check umount "$SRC"
	run_check mount -o compress-force=zstd "${_LOOPS[0]}" "$SRC"
}

# same_tree A B: content, types, sizes, modes, owners, mtimes
same_tree()
{
	diff -r --no-dereference "$1" "$2" || _fail "content differs: $1 $2"
	diff <(cd "$1" && find . -printf '%y %s %m %U %G %T@ %p\n' | LC_ALL=C sort) \
		<(cd "$2" && find . -printf '%y %s %m %U %G %T@ %p\n' | LC_ALL=C sort) ||
		_fail "metadata differs: $1 $2"
}

# step PARENT SNAP: encio send -p into both receivers, compared with SNAP
step()
{
	local parent=$1 snap=$2 s=$TEST_TMP/streams zeros
	run_check "$ENCIO" -q send ${parent:+-p "$SRC/$parent"} -f "$s/$snap.encio" "$SRC/$snap"
	run_check btrfs -q send --compressed-data ${parent:+-p "$SRC/$parent"} -f "$s/$snap.btrfs" "$SRC/$snap"
	run_check btrfs -q receive -f "$s/$snap.encio" "$DST/b"
	run_check "$ENCIO" -q receive -f "$s/$snap.encio" "$DST/e"
	same_tree "$SRC/$snap" "$DST/b/$snap"
	same_tree "$SRC/$snap" "$DST/e/$snap"
	# but for the zeros of inline tails (test 128): a FALLOCATE each, 46
	# bytes and its path
	zeros=$(btrfs receive --dump -f "$s/$snap.encio" |
		awk -v p="./$snap/" '/^fallocate .*mode=3 / { n += 46 + length(substr($2, length(p) + 1)) } END { print n + 0 }')
	[ "$(stat -c %s "$s/$snap.encio")" -le "$(($(stat -c %s "$s/$snap.btrfs") + zeros))" ] ||
		_fail "$snap: encio's stream $(stat -c %s "$s/$snap.encio") B, btrfs send's $(stat -c %s "$s/$snap.btrfs") B (+$zeros B of zeros)"
}

_log "fallocate past EOF grows the file"
run_check btrfs -q subvolume create "$SRC/sv"
: >"$SRC/sv/f"
head -c 65536 /dev/zero | tr '\0' a >"$SRC/sv/g"
snap sv p1
run_check fallocate -o 24576 -l 4096 "$SRC/sv/f"
run_check fallocate -o 69632 -l 4096 "$SRC/sv/g"
snap sv c1
step "" p1
step p1 c1
[ "$(stat -c %s "$DST/e/c1/f")" = 28672 ] || _fail "f: $(stat -c %s "$DST/e/c1/f") bytes"

_log "a directory inode number reused after a remount"
run_check btrfs -q subvolume create "$SRC/d"
random_bytes 30000 z >"$SRC/d/z"
random_bytes 30000 x >"$SRC/d/x"
random_bytes 5000 w >"$SRC/d/w"
mkdir "$SRC/d/D"
mv "$SRC/d/x" "$SRC/d/D/f"
snap d s1
mv "$SRC/d/D/f" "$SRC/d/y"
rmdir "$SRC/d/D"
random_bytes 10000 more >>"$SRC/d/y"
remount_src
mkdir "$SRC/d/E" "$SRC/d/F"
mv "$SRC/d/z" "$SRC/d/E/f"
mv "$SRC/d/w" "$SRC/d/F/other"
snap d s2
step "" s1
step s1 s2
[ "$(stat -c %s "$DST/e/s2/y")" = 40000 ] || _fail "y: $(stat -c %s "$DST/e/s2/y") bytes"

_log "a clone past the EOF of a file with a compressed inline extent"
run_check btrfs -q subvolume create "$SRC/i"
head -c 100 /dev/zero | tr '\0' b >"$SRC/i/f"
random_bytes 262144 src >"$SRC/i/src"
sync
snap i i1
run_check xfs_io -c "reflink $SRC/i/src 0 196608 65536" "$SRC/i/f"
snap i i2
step "" i1
step i1 i2
