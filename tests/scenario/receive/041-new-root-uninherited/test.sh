#!/bin/bash
# A subvolume received whole into a directory with a compression property
# (or nocow) does not take them on its root: btrfs passes them on to a
# subvolume made there, and the stream sent none. Its root has what
# SRC's has, in a plain receive and in send --subvolumes | receive,
# where a nested writable subvolume lands in its copied container.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"

make_btrfs src 256M
SRC=$MNT
make_btrfs dst 256M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/sv"
run_check btrfs -q subvolume create "$SRC/sv/nested"
echo data >"$SRC/sv/nested/file"
# set after the nested one was made: it took none
run_check btrfs property set "$SRC/sv" compression lzo
run_check btrfs -q subvolume snapshot -r "$SRC/sv/nested" "$SRC/snap"
mkdir "$DST/lzo" "$DST/nocow" "$DST/tree"
run_check btrfs property set "$DST/lzo" compression lzo
chattr +C "$DST/nocow"

# root_of DIR: its root's flags and compression property
root_of()
{
	echo "$(lsattr -d "$1" | cut -d' ' -f1) $(getfattr --only-values -n btrfs.compression "$1" 2>/dev/null)"
}

want=$(root_of "$SRC/snap")
for d in lzo nocow; do
	"$ENCIO" -q send "$SRC/snap" | "$ENCIO" -q receive "$DST/$d" || _fail "receive into $d"
	[ "$(root_of "$DST/$d/snap")" = "$want" ] ||
		_fail "received into $d: its root has '$(root_of "$DST/$d/snap")', SRC's '$want'"
done
"$ENCIO" -q send --subvolumes "$SRC/sv" | "$ENCIO" -q receive "$DST/tree/sv" ||
	_fail "send --subvolumes | receive"
[ "$(root_of "$DST/tree/sv/nested")" = "$(root_of "$SRC/sv/nested")" ] ||
	_fail "the nested copy's root has '$(root_of "$DST/tree/sv/nested")', SRC's '$(root_of "$SRC/sv/nested")'"
[ "$(root_of "$DST/tree/sv")" = "$(root_of "$SRC/sv")" ] ||
	_fail "the copy's root has '$(root_of "$DST/tree/sv")', SRC's '$(root_of "$SRC/sv")'"
echo "PASS: $TEST_NAME"
