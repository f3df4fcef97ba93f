#!/bin/bash
# A file that existed empty in the parent, made nocow (chattr +C) and then
# written, and a nocow file emptied, made copy-on-write and written again,
# keep their flag through an incremental stream: the kernel's stream sends
# their FILEATTR after their data, which btrfs takes only on an empty
# file, and encio receive writes such a file again under the new flag.
# Its content, holes, size and hard links stay; streams of encio send -p
# and of btrfs send -p.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/e" "$DST/b"

nocow_of()
{
	lsattr -d "$1" | cut -d' ' -f1 | tr -cd 'C'
}

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
: >"$V/turned"
ln "$V/turned" "$V/turned-link"
touch "$V/back"
chattr +C "$V/back"
random_bytes 300000 back0 >"$V/back"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

chattr +C "$V/turned"
random_bytes 200000 t1 >"$V/turned"
dd if=/dev/urandom of="$V/turned" bs=4096 seek=100 count=3 conv=notrunc status=none
truncate -s 1000000 "$V/turned"
: >"$V/back"
chattr -C "$V/back"
random_bytes 150000 back1 >"$V/back"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"
[ "$(nocow_of "$SRC/s2/turned")" = C ] || _not_run "btrfs did not take nocow on the empty file"

check()
{
	local into=$1
	diff -r --no-dereference "$SRC/s2" "$DST/$into/s2" || _fail "$into: content differs"
	[ "$(nocow_of "$DST/$into/s2/turned")" = C ] || _fail "$into: turned lost its nocow"
	[ -z "$(nocow_of "$DST/$into/s2/back")" ] || _fail "$into: back kept its nocow"
	[ "$(stat -c %s "$DST/$into/s2/turned")" = 1000000 ] || _fail "$into: turned has another size"
	[ "$(stat -c %i "$DST/$into/s2/turned")" = "$(stat -c %i "$DST/$into/s2/turned-link")" ] ||
		_fail "$into: turned and its link are two inodes"
	[ "$(stat -c %b "$DST/$into/s2/turned")" -lt 1000 ] || _fail "$into: turned lost its holes"
}

_log "encio send -p | encio receive"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
check e

_log "btrfs send -p | encio receive"
btrfs -q send --compressed-data "$SRC/s1" | "$ENCIO" -q receive "$DST/b" || _fail "receive failed"
btrfs -q send --compressed-data -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive failed"
check b

_log "a clone between files the stream left unalike: copied"
# Files made in a nocow root are nocow; btrfs send's full stream does not
# say so, its later FILEATTR of one of them does, and the next snapshot
# clones between the two: encio receive copies what it cannot clone.
run_check btrfs -q subvolume create "$SRC/r"
chattr +C "$SRC/r"
random_bytes 131072 ra >"$SRC/r/a"
random_bytes 131072 rb >"$SRC/r/b"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/r" "$SRC/r1"
chattr +A "$SRC/r/a"
run_check btrfs -q subvolume snapshot -r "$SRC/r" "$SRC/r2"
run_check xfs_io -c "reflink $SRC/r/b 0 65536 65536" "$SRC/r/a" >/dev/null
run_check btrfs -q subvolume snapshot -r "$SRC/r" "$SRC/r3"
btrfs -q send --compressed-data "$SRC/r1" | "$ENCIO" -q receive "$DST/b" || _fail "receive failed"
btrfs -q send --compressed-data -p "$SRC/r1" "$SRC/r2" | "$ENCIO" -q receive "$DST/b" ||
	_fail "receive failed"
btrfs -q send --compressed-data -p "$SRC/r2" "$SRC/r3" | "$ENCIO" -q receive "$DST/b" ||
	_fail "the clone between a nocow and a copy-on-write file failed"
diff -r "$SRC/r3" "$DST/b/r3" || _fail "r3 differs"
[ "$(nocow_of "$DST/b/r3/a")" = C ] || _fail "r3/a lost its nocow"
