#!/bin/bash
# A difference from a later snapshot as the parent (copy --subvolumes
# takes the closest one, which may come after), of a file the parent has
# cut short inside a sector: btrfs cuts it without rewriting that sector,
# so the parent's and the snapshot's file share its extent, and the
# kernel's send sends nothing of it but a TRUNCATE that grows the file.
# The bytes past the parent's size must come as the snapshot has them,
# not as zeros (btrfs send -p | btrfs receive gives zeros), through btrfs
# receive and encio receive alike, with a parent received by either.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
random_bytes 26529 a >"$SRC/v/cut"
random_bytes 300000 b >"$SRC/v/other"
random_bytes 8191 c >"$SRC/v/small"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
truncate -s 25396 "$SRC/v/cut"
truncate -s 299999 "$SRC/v/other"
truncate -s 4097 "$SRC/v/small"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
# what makes the case: the cut sector's extent shared by both snapshots
[ "$(filefrag -v "$SRC/s1/cut" | awk '$1 == "0:" { print $4 }')" = \
	"$(filefrag -v "$SRC/s2/cut" | awk '$1 == "0:" { print $4 }')" ] ||
	_log "the kernel rewrote the cut sector: the case does not arise here"

# receive_with btrfs|encio DEST < STREAM
receive_with()
{
	if [ "$1" = btrfs ]; then
		btrfs receive -q "$2" 2>&1
	else
		"$ENCIO" -q receive "$2"
	fi
}

for recv in btrfs encio; do
	mkdir "$DST/$recv"
	"$ENCIO" -q send "$SRC/s2" | receive_with "$recv" "$DST/$recv" || _fail "$recv: the parent"
	"$ENCIO" -q send -p "$SRC/s2" "$SRC/s1" | receive_with "$recv" "$DST/$recv" ||
		_fail "$recv: the difference from the later snapshot"
	for f in cut other small; do
		cmp "$SRC/s1/$f" "$DST/$recv/s1/$f" || _fail "$recv: s1/$f differs"
		check_same_file "$SRC/s1/$f" "$DST/$recv/s1/$f"
	done
done
echo "PASS: $TEST_NAME"
