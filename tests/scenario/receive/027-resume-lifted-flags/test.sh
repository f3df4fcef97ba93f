#!/bin/bash
# A receive -s cut after it lifted the immutable flag of a directory of
# the parent snapshot (an entry moved into it) and before the directory's
# FILEATTR (SRC cleared +i), then resumed: the flags put back at the
# subvolume's end are SRC's. The directory stays without +i (the record
# must say its flag was lifted, for the FILEATTR to drop it); a +i file and
# a +a log that keep theirs get them back. Cut at three points of the
# stream (EOF: the working subvolume kept), the resume cut again (its last
# checkpoint, taken while the flags were lifted, kept), then resumed whole.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP

flags() # FILE: its chattr flags
{
	lsattr -d -- "$1" | awk '{ print $1 }'
}

run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
# by inode number: a moved into d, then big's data, then d's FILEATTR
echo a >"$V/a"
random_bytes 1000 big0 >"$V/big"
mkdir "$V/d"
echo b >"$V/d/b"
random_bytes 3000000 f1 >"$V/freed"
random_bytes 3000000 k1 >"$V/kept"
echo "line 1" >"$V/log"
chattr +i "$V/d" "$V/freed" "$V/kept"
chattr +a "$V/log"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
chattr -i "$V/d" "$V/freed" "$V/kept"
mv "$V/a" "$V/d/a"
random_bytes 8000000 big1 >"$V/big"
random_bytes 3000000 f2 | dd of="$V/freed" bs=4096 seek=10 conv=notrunc status=none
random_bytes 3000000 k2 | dd of="$V/kept" bs=4096 seek=10 conv=notrunc status=none
chattr +i "$V/kept"
echo "line 2" >>"$V/log"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

check() # DIR
{
	local f
	for f in d d/a d/b freed kept log big; do
		[ -d "$SRC/s2/$f" ] || cmp "$SRC/s2/$f" "$1/s2/$f" || _fail "$f differs in $1"
		[ "$(flags "$1/s2/$f")" = "$(flags "$SRC/s2/$f")" ] ||
			_fail "$1/s2/$f has flags $(flags "$1/s2/$f"), SRC $(flags "$SRC/s2/$f")"
	done
}

"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" >"$T/inc"
len=$(stat -c %s "$T/inc")
for at in 30 50 70; do
	_log "cut at $at%"
	D=$DST/c$at
	mkdir "$D"
	run_check "$ENCIO" -q receive -f <("$ENCIO" -q send "$SRC/s1") "$D"
	head -c $((len * at / 100)) "$T/inc" |
		"$ENCIO" -q receive -s --checkpoint 64K "$D" 2>/dev/null &&
		_fail "a cut stream received"
	token=$("$ENCIO" receive --resume-token "$D/s2") || _fail "no token"
	run_check "$ENCIO" -q send -t "$token" >"$T/res"
	# a resume cut too: it goes back to its last checkpoint
	head -c $(($(stat -c %s "$T/res") / 3)) "$T/res" |
		"$ENCIO" -q receive -s --checkpoint 64K "$D" 2>/dev/null
	token=$("$ENCIO" receive --resume-token "$D/s2") || _fail "no token after the second cut"
	"$ENCIO" -q send -t "$token" | run_check "$ENCIO" -q receive -s "$D"
	check "$D"
done
