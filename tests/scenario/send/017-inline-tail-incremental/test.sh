#!/bin/bash
# An inline extent at the start of a larger file stands for its whole
# sector, zeros past its data. In an incremental send where that file had
# other data there in the parent, the kernel's compressed stream carries
# the inline data alone, and the rest of the sector kept the parent's
# bytes: wrong data, exit 0. encio send adds the zeros (a hole punched
# within the file's size) for any receiver; encio receive zeroes them
# itself in a stream of btrfs send --compressed-data. A compressed extent
# that ends inside a sector at EOF gets no such hole: punched there, the
# block would be written again.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

make_btrfs src 512M compress-force=lzo
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/bb" "$DST/be" "$DST/eb" "$DST/ee" "$TEST_TMP/s"

run_check btrfs -q subvolume create "$SRC/sv"
random_bytes 16384 f >"$SRC/sv/f"
random_bytes 8192 g >"$SRC/sv/g"
compressible 20000 >"$SRC/sv/e"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/p1"
# the same inode, now an inline extent of 595 bytes, then g's data at 4K
: >"$SRC/sv/f"
head -c 595 /dev/zero | tr '\0' x >"$SRC/sv/f"
sync
run_check xfs_io -c "reflink $SRC/sv/g 0 4096 8192" "$SRC/sv/f"
# e: a compressed extent ending inside its last sector, at EOF
compressible 30001 >"$SRC/sv/e"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/c1"
filefrag -v "$SRC/c1/f" | grep -q 'inline' || _fail "f has no inline extent in SRC"
[ "$(stat -c %s "$SRC/c1/f")" -eq 12288 ] || _fail "f is not 12 KiB in SRC"

S=$TEST_TMP/s
run_check btrfs -q send -f "$S/p1" "$SRC/p1"
run_check btrfs -q send --compressed-data -p "$SRC/p1" -f "$S/c1.btrfs" "$SRC/c1"
run_check "$ENCIO" -q send -p "$SRC/p1" -f "$S/c1.encio" "$SRC/c1"
grep -q . <(btrfs receive --dump -f "$S/c1.btrfs" | grep 'encoded_write.*/f .*offset=0 ') ||
	_fail "btrfs send sends f's inline extent otherwise: the case is not made"
punches=$(btrfs receive --dump -f "$S/c1.encio" | grep -c '^fallocate .*mode=3 ')
[ "$punches" -eq 1 ] || _fail "encio's stream punches $punches holes, 1 expected (f's)"

# receive STREAM INTO RECEIVER
receive()
{
	case $3 in
	btrfs) run_check btrfs -q receive -f "$S/p1" "$2" &&
		run_check btrfs -q receive -f "$1" "$2" ;;
	encio) run_check "$ENCIO" -q receive -f "$S/p1" "$2" &&
		run_check "$ENCIO" -q receive -f "$1" "$2" ;;
	esac
	cmp "$SRC/c1/f" "$2/c1/f" || _fail "f differs: $1 into $3 receive"
	cmp "$SRC/c1/g" "$2/c1/g" || _fail "g differs: $1 into $3 receive"
	cmp "$SRC/c1/e" "$2/c1/e" || _fail "e differs: $1 into $3 receive"
}
receive "$S/c1.btrfs" "$DST/be" encio
receive "$S/c1.encio" "$DST/eb" btrfs
receive "$S/c1.encio" "$DST/ee" encio
btrfs -q receive -f "$S/p1" "$DST/bb" && btrfs -q receive -f "$S/c1.btrfs" "$DST/bb" &&
	! cmp -s "$SRC/c1/f" "$DST/bb/c1/f" &&
	_log "btrfs send --compressed-data -p | btrfs receive gives f wrong, as known"
true
