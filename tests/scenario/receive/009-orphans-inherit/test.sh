#!/bin/bash
# A new inode that the stream makes under its orphan name and then moves
# into a directory flagged nocow (chattr +C) or compress (chattr +c) ends
# with its source's flags and compression property, not the directory's:
# encio receive makes it where btrfs receive makes it, so a CLONE into it
# from a copy-on-write file succeeds. Streams of btrfs send (full and -p)
# and of encio send (full and -p), each against its source.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e"

# flags_of TREE: each entry's nocow, compress, noatime flags and property
flags_of()
{
	(cd "$1" && find . -mindepth 1 ! -type l | LC_ALL=C sort | while read -r p; do
		printf '%s %s %s\n' "$p" \
			"$(lsattr -d "$p" 2>/dev/null | cut -d' ' -f1 | tr -cd 'CcA')" \
			"$(getfattr --only-values -n btrfs.compression "$p" 2>/dev/null)"
	done)
}

check()
{
	local snap=$1 into=$2
	diff -r --no-dereference "$SRC/$snap" "$DST/$into/$snap" || _fail "$snap: content differs"
	diff <(flags_of "$SRC/$snap") <(flags_of "$DST/$into/$snap") ||
		_fail "$snap in $into: flags differ from the source's"
}

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
random_bytes 200000 z >"$V/z"
mkdir "$V/nocow" "$V/comp"
chattr +C "$V/nocow"
chattr +c "$V/comp"
random_bytes 70000 early >"$V/early"
mv "$V/early" "$V/comp/early"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

_log "s2: a reflinked file and a plain one moved into the flagged directories"
cp --reflink=always "$V/z" "$V/g"
mv "$V/g" "$V/nocow/g"
random_bytes 50000 late >"$V/late"
mv "$V/late" "$V/comp/late"
mkdir "$V/sub"
mv "$V/sub" "$V/comp/sub"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

_log "encio send | encio receive"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
check s1 e
"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
check s2 e

_log "btrfs send | encio receive"
btrfs -q send --compressed-data "$SRC/s1" | "$ENCIO" -q receive "$DST/b" || _fail "receive failed"
btrfs -q send --compressed-data -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$DST/b" || _fail "receive failed"
for p in z g late sub; do
	f=$(find "$DST/b/s2" -name "$p")
	[ -z "$(lsattr -d "$f" | cut -d' ' -f1 | tr -cd 'Cc')" ] || _fail "$f took its directory's flags"
	[ -z "$(getfattr --only-values -n btrfs.compression "$f" 2>/dev/null)" ] ||
		_fail "$f took its directory's compression property"
done
cmp "$SRC/s2/nocow/g" "$DST/b/s2/nocow/g" || _fail "g differs"

_log "the root flagged nocow in the stream, before a reflinked file is made"
run_check btrfs -q subvolume create "$SRC/r"
random_bytes 65536 a >"$SRC/r/a"
run_check btrfs -q subvolume snapshot -r "$SRC/r" "$SRC/r1"
cp --reflink=always "$SRC/r/a" "$SRC/r/b"
chattr +C "$SRC/r"
run_check btrfs -q subvolume snapshot -r "$SRC/r" "$SRC/r2"
btrfs -q send --compressed-data "$SRC/r1" | "$ENCIO" -q receive "$DST/b" || _fail "receive failed"
btrfs -q send --compressed-data -p "$SRC/r1" "$SRC/r2" | "$ENCIO" -q receive "$DST/b" ||
	_fail "the clone into a file made in the nocow root failed"
cmp "$SRC/r2/b" "$DST/b/r2/b" || _fail "r2/b differs"
[ -z "$(lsattr -d "$DST/b/r2/b" | cut -d' ' -f1 | tr -cd 'C')" ] || _fail "r2/b took the root's nocow"
[ -n "$(lsattr -d "$DST/b/r2" | cut -d' ' -f1 | tr -cd 'C')" ] || _fail "r2 lost its nocow"

_log "a directory made in a compress directory, its property removed"
run_check btrfs -q subvolume create "$SRC/c"
chattr +c "$SRC/c"
mkdir "$SRC/c/n"
run_check btrfs -q subvolume snapshot -r "$SRC/c" "$SRC/c1"
mkdir "$SRC/c/n/w"
btrfs property set "$SRC/c/n/w" compression ''
random_bytes 5000 p >"$SRC/c/plain"
btrfs property set "$SRC/c/plain" compression ''
run_check btrfs -q subvolume snapshot -r "$SRC/c" "$SRC/c2"
"$ENCIO" -q send "$SRC/c1" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
"$ENCIO" -q send -p "$SRC/c1" "$SRC/c2" | "$ENCIO" -q receive "$DST/e" || _fail "receive failed"
check c2 e
