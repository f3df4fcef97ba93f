#!/bin/bash
# Files with nocompress (+m) in a nocow (+C) directory, moved there from
# elsewhere, and a nocow file in a nocompress directory keep their flags
# through copy --subvolumes and copy -r: a file made in DEST's directory
# inherits its flag, and btrfs refuses nocompress on a nocow inode (and the
# reverse) until the inherited one is cleared.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

# tree_flags DIR: the chattr flags of every file and directory under DIR
tree_flags()
{
	(cd "$1" && find . \( -type f -o -type d \) -print0 | LC_ALL=C sort -z |
		xargs -0r lsattr -d -- | awk '{ print $2, $1 }')
}

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
mkdir "$V/nocow" "$V/nocomp"
chattr +C "$V/nocow"
chattr +m "$V/nocomp"
: >"$V/empty"
random_bytes 100000 data >"$V/data"
chattr +m "$V/empty" "$V/data"
mv "$V/empty" "$V/data" "$V/nocow/"
random_bytes 5000 plain >"$V/nocow/plain"
: >"$V/nocomp/cow"
chattr -m "$V/nocomp/cow"
chattr +C "$V/nocomp/cow"
random_bytes 70000 cow >>"$V/nocomp/cow"
[ "$(lsattr -d "$V/nocow/data" | cut -d' ' -f1 | tr -cd 'mC')" = m ] ||
	_fail "SRC: the moved file lost +m"
[ "$(lsattr -d "$V/nocomp/cow" | cut -d' ' -f1 | tr -cd 'mC')" = C ] ||
	_fail "SRC: the file did not take +C"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

check()
{
	local from=$1 to=$2
	diff -r "$from" "$to" || _fail "$to: content differs"
	[ "$(tree_flags "$from")" = "$(tree_flags "$to")" ] || {
		diff <(tree_flags "$from") <(tree_flags "$to")
		_fail "$to: flags differ"
	}
}

_log "copy --subvolumes"
mkdir "$DST/c"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/c"
check "$SRC/sv" "$DST/c/sv"
check "$SRC/s1" "$DST/c/s1"

_log "copy -r"
run_check "$ENCIO" -q copy -r "$SRC/s1" "$DST/r"
check "$SRC/s1" "$DST/r"
