#!/bin/bash
# encio send DIR of a directory that is not a subvolume and holds only
# nested subvolumes (the arguments swapped: encio send /snapshots) is
# refused, naming DIR and why, with exit 1 and nothing written, as btrfs
# send refuses it; so is such a directory in a read-only snapshot, where
# the subvolumes are empty directories standing for them, and send -n of
# it. A plain directory is still sent otherwise: empty, or holding a
# subvolume beside a file (the subvolume left out).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
echo data >"$SRC/v/f"
mkdir "$SRC/snaps" "$SRC/empty" "$SRC/mixed"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/snaps/s1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/snaps/s2"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/mixed/s1"
echo beside >"$SRC/mixed/g"
run_check btrfs -q subvolume snapshot -r "$SRC" "$SRC/top"

btrfs send "$SRC/snaps" >/dev/null 2>"$T/btrfs.err" && _fail "btrfs send of a plain directory succeeded"
_log "btrfs send says: $(cat "$T/btrfs.err")"

# refused DIR [ARGS...]
refused()
{
	local dir=$1 n rc
	shift
	"$ENCIO" send "$@" "$dir" 2>"$T/err" | cat >"$T/out"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 1 ] || _fail "send $* $dir: exit $rc"
	cat "$T/err"
	grep -q "^ERROR: .*nested subvolumes.*'$dir'" "$T/err" || _fail "message: $(cat "$T/err")"
	n=$(stat -c %s "$T/out")
	[ "$n" = 0 ] || _fail "send $* $dir refused, but wrote $n bytes"
}
refused "$SRC/snaps"
refused "$SRC/top/snaps"
refused "$SRC/snaps" -n
refused "$SRC/snaps" --progress

_log "plain directories still sent"
mkdir "$DST/r"
"$ENCIO" -q send "$SRC/empty" 2>/dev/null | "$ENCIO" -q receive "$DST/r" || _fail "send | receive of an empty directory"
[ -z "$(ls -A "$DST/r/empty")" ] || _fail "empty: $(ls -A "$DST/r/empty")"
"$ENCIO" -q send "$SRC/top/mixed" | "$ENCIO" -q receive "$DST/r" || _fail "send | receive of mixed"
[ "$(ls -A "$DST/r/mixed")" = g ] || _fail "mixed: $(ls -A "$DST/r/mixed")"
