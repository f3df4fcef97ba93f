#!/bin/bash
# copy -rT --subvolumes of a writable subvolume with subvolumes nested in
# it and snapshots of it: a snapshot shows each nested subvolume as an
# empty directory that btrfs send leaves out. The copies leave it out too,
# so the kernel's differences apply to them: a later snapshot in which the
# directory that held one is gone (rm -rf of the directory and the
# subvolume in it) is copied, and so is one made after the copy, sent
# with btrfs send -p into the moved filesystem by btrfs receive.
source "$(dirname "$0")/../../../common.sh"
require_root

# every entry but the empty directories standing for nested subvolumes
# (a directory's size counts its entries' names: not compared)
listing() {
	(cd "$1" && find . -xdev ! -inum 2 \( -type d -printf '%p %y %m\n' \
		-o -printf '%p %y %s %m\n' \) | sort)
}

make_btrfs src 512M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/d" "$SRC/vol/keep" "$SRC/snaps"
random_bytes 40000 a >"$SRC/vol/a"
random_bytes 20000 f >"$SRC/vol/d/f"
run_check btrfs -q subvolume create "$SRC/vol/d/n"
random_bytes 5000 in >"$SRC/vol/d/n/in"
run_check btrfs -q subvolume create "$SRC/vol/keep/m"
random_bytes 5000 m >"$SRC/vol/keep/m/in"
# the nested subvolumes' last change before the snapshots: vol, which they
# sit in, is copied first, and the snapshots are made from its copy
sync
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s1"
rm -rf "$SRC/vol/d"
random_bytes 30000 b >"$SRC/vol/b"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s2"
random_bytes 10000 c >"$SRC/vol/keep/c"

make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -rT --subvolumes --final "$SRC" "$DST"
for p in snaps/s1 snaps/s2 vol vol/keep/m; do
	[ "$(listing "$SRC/$p")" = "$(listing "$DST/$p")" ] || {
		diff <(listing "$SRC/$p") <(listing "$DST/$p")
		_fail "$p differs"
	}
	diff -r --no-dereference -x n -x m "$SRC/$p" "$DST/$p" ||
		_fail "$p: contents differ"
done
for p in snaps/s1 snaps/s2; do
	[ -z "$(cd "$DST/$p" && find . -inum 2)" ] ||
		_fail "$p: the copy has what stands for a nested subvolume"
done
[ "$(stat -c %i "$DST/vol/keep/m")" = 256 ] ||
	_fail "vol/keep/m is not a subvolume in the copy"

# the moved filesystem goes on with btrfs send -p | btrfs receive
rm -f "$SRC/vol/a"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s3"
btrfs send -q -p "$SRC/snaps/s2" "$SRC/snaps/s3" |
	run_check btrfs receive -q "$DST/snaps"
[ "$(listing "$SRC/snaps/s3")" = "$(listing "$DST/snaps/s3")" ] ||
	_fail "s3, received into the copy, differs"
diff -r --no-dereference -x m "$SRC/snaps/s3" "$DST/snaps/s3" ||
	_fail "s3: contents differ"
