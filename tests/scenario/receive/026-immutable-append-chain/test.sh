#!/bin/bash
# Immutable (+i) and append-only (+a) inodes kept on a backup do not stop
# the next incremental: a +a log grown, +i files whose content, owner,
# times or xattrs change or which are unlinked, renamed or linked (chattr
# -i; edit; chattr +i in SRC: the stream has no FILEATTR, their flags did
# not change), +i and +a directories whose entries change, an immutable
# subvolume root, and a +i file only read (its atime moves). encio receive
# lifts the flags that refuse a command and puts back SRC's at the
# subvolume's end, unless the stream gave the inode flags of its own
# (a +a directory made +ia, whose times the stream sets); streams of encio send -p and of btrfs send -p, compared
# with SRC: content, stat, xattrs and flags (i, a, d, A, S).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v setfattr >/dev/null || _not_run "needs setfattr (attr)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/e" "$DST/b"

# tree_flags DIR: the chattr flags of every file and directory under DIR
tree_flags()
{
	(cd "$1" && find . \( -type f -o -type d \) -print0 | LC_ALL=C sort -z |
		xargs -0r lsattr -d -- | awk '{ print $2, $1 }')
}

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
mkdir "$V/di" "$V/da" "$V/other"
echo "log line 1" >"$V/log"
random_bytes 200000 imm >"$V/imm"
setfattr -n user.x -v 1 "$V/imm"
random_bytes 5000 gone >"$V/gone"
random_bytes 5000 moved >"$V/moved"
random_bytes 5000 linked >"$V/linked"
random_bytes 70000 edit >"$V/edit"
random_bytes 3000 read >"$V/read"
random_bytes 3000 sync >"$V/sync"
echo a >"$V/di/a"
echo b >"$V/di/b"
echo x >"$V/da/x"
sync
# btrfs send's full stream sends no flags: its chain takes them from s1's
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s0"
chattr +a "$V/log" "$V/da"
chattr +d "$V/log"
chattr +i "$V/imm" "$V/gone" "$V/moved" "$V/linked" "$V/edit" "$V/read" "$V/di"
chattr +A "$V/read"
chattr +S "$V/sync"
chattr +i "$V"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

_log "s2: everything changed under the same flags"
chattr -i "$V"
echo "log line 2" >>"$V/log"
chattr -i "$V/imm"
random_bytes 9000 imm2 | dd of="$V/imm" bs=4096 seek=3 conv=notrunc status=none
chown 1000:1000 "$V/imm"
setfattr -x user.x "$V/imm"
setfattr -n user.y -v 2 "$V/imm"
touch -d "2020-01-02 03:04:05.123456789" "$V/imm"
chattr +i "$V/imm"
chattr -i "$V/gone" && rm "$V/gone"
chattr -i "$V/moved" && mv "$V/moved" "$V/other/moved" && chattr +i "$V/other/moved"
chattr -i "$V/linked" && ln "$V/linked" "$V/other/link" && chattr +i "$V/linked"
chattr -i "$V/edit"
random_bytes 80000 edit2 >"$V/edit"
chattr +i "$V/edit"
cat "$V/read" >/dev/null
echo more >>"$V/sync"
chattr -i "$V/di"
rm "$V/di/a"
mv "$V/di/b" "$V/da/b"
echo c >"$V/di/c"
chattr +i "$V/di"
chattr -a "$V/da" && rm "$V/da/x" && chattr +a "$V/da"
echo y >"$V/da/y"
echo new >"$V/new"
chattr +i "$V"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

_log "s3: flags lifted and set in SRC"
chattr -i "$V" "$V/imm" "$V/di"
chattr -a "$V/log"
echo "log line 3" >>"$V/log"
chattr +a "$V/new"
rm "$V/di/c"
echo z >"$V/da/z"
chattr +i "$V/da"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s3"

check()
{
	local into=$1 s
	for s in s0 s1 s2 s3; do
		[ -d "$DST/$into/$s" ] || continue
		diff -r --no-dereference "$SRC/$s" "$DST/$into/$s" || _fail "$into/$s: content differs"
		[ "$(tree_stat "$SRC/$s")" = "$(tree_stat "$DST/$into/$s")" ] || {
			diff <(tree_stat "$SRC/$s") <(tree_stat "$DST/$into/$s")
			_fail "$into/$s: stat differs"
		}
		[ "$(tree_xattrs "$SRC/$s")" = "$(tree_xattrs "$DST/$into/$s")" ] ||
			_fail "$into/$s: xattrs differ"
		[ "$(tree_flags "$SRC/$s")" = "$(tree_flags "$DST/$into/$s")" ] || {
			diff <(tree_flags "$SRC/$s") <(tree_flags "$DST/$into/$s")
			_fail "$into/$s: flags differ"
		}
	done
}

_log "encio send -p | encio receive"
"$ENCIO" -q send "$SRC/s0" | "$ENCIO" -q receive "$DST/e" || _fail "receive of s0 failed"
"$ENCIO" -q send -p "$SRC/s0" "$SRC/s1" | "$ENCIO" -q receive "$DST/e" ||
	_fail "receive of s1 failed"
"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/e" ||
	_fail "receive of s2 failed"
"$ENCIO" -q send -p "$SRC/s2" "$SRC/s3" | "$ENCIO" -q receive "$DST/e" ||
	_fail "receive of s3 failed"
check e

_log "btrfs send -p | encio receive"
btrfs -q send --compressed-data "$SRC/s0" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive of s0 failed"
btrfs -q send --compressed-data -p "$SRC/s0" "$SRC/s1" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive of s1 failed"
btrfs -q send --compressed-data -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive of s2 failed"
btrfs -q send --compressed-data -p "$SRC/s2" "$SRC/s3" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive of s3 failed"
check b
