#!/bin/bash
# Full sends of a snapshot full of shared extents while a balance moves
# every data extent to new places, again and again: each stream is taken
# by btrfs receive and encio receive and gives the snapshot exactly. A
# clone is sent only where the file and its source share the data when it
# is written; where the extents moved since the choice, the data goes.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 2G
DST=$MNT

run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
for i in $(seq 200); do
	if [ $((i % 2)) = 0 ]; then compressible $((20000 + (i % 50) * 4096)); else random_bytes $((20000 + (i % 50) * 4096)) "f$i"; fi >"$V/f$i"
done
sync
for i in $(seq 200); do
	cp --reflink=always "$V/f$i" "$V/r$i"
	remap clone "$V/f$(( (i % 200) + 1 ))" 0 16384 "$V/r$i" 32768
done
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"
# the extents of these go and come: their places are reused by others'
run_check btrfs -q subvolume create "$SRC/churn"

balance_loop()
{
	local n=0
	while [ ! -e "$TEST_TMP/stop" ]; do
		random_bytes 3000000 "churn$n" >"$SRC/churn/c$((n % 3))"
		sync
		btrfs balance start -d --full-balance "$SRC" >/dev/null 2>&1
		n=$((n + 1))
	done
}
balance_loop &
loop=$!
trap 'rc=$?; touch "$TEST_TMP/stop"; wait $loop; (exit $rc); _cleanup' EXIT

for round in $(seq 4); do
	_log "round $round"
	"$ENCIO" -q send -f "$TEST_TMP/s.stream" "$SRC/snap" || _fail "send failed"
	for into in b e; do
		mkdir -p "$DST/$into$round"
		if [ $into = b ]; then
			btrfs -q receive -f "$TEST_TMP/s.stream" "$DST/$into$round"
		else
			"$ENCIO" -q receive -f "$TEST_TMP/s.stream" "$DST/$into$round"
		fi || _fail "round $round: $into refused the stream"
		diff -r "$SRC/snap" "$DST/$into$round/snap" || _fail "round $round: $into's copy differs"
	done
	btrfs -q subvolume delete "$DST/b$round/snap" "$DST/e$round/snap" >/dev/null
done
touch "$TEST_TMP/stop"
wait $loop
_log "with no balance, every clone is sent as one"
"$ENCIO" -q send -f "$TEST_TMP/s.stream" "$SRC/snap" || _fail "send failed"
clones=$("$ENCIO" dump -f "$TEST_TMP/s.stream" | grep -c '^clone')
[ "$clones" -ge 400 ] || _fail "only $clones clones in the stream"
