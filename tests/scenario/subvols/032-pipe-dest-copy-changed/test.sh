#!/bin/bash
# A writable subvolume's copy in DEST that someone changed after encio
# received it is no base for the next send --subvolumes | receive: the
# state leaves it out, the copy is made again from a read-only relative
# (or whole) and replaces it, and the receive says so; the next run made
# the new copy from the changed one before, keeping the change (DEST no
# longer SRC's), and said nothing. What encio itself changes in a copy
# (nested subvolumes placed, carried into a replacement) is no such
# change, in a run cut before its end too; nor are reads that move atimes
# (DEST mounted strictatime).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M strictatime
DST=$MNT
T=$TEST_TMP
D=$DST/copy

run_check btrfs -q subvolume create "$SRC/@data"
run_check btrfs -q subvolume create "$SRC/@data/inner"
mkdir "$SRC/snaps"
for i in $(seq 1 20); do
	random_bytes 50000 "f$i" >"$SRC/@data/f$i"
	compressible 50000 >"$SRC/@data/inner/g$i"
done
run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/s1"
sync

# run [RECEIVE OPTIONS...]: send --subvolumes with DEST's state | receive
run()
{
	local state=()

	"$ENCIO" receive --state "$D" >"$T/state" 2>/dev/null && state=(--state "$T/state")
	"$ENCIO" -q send --subvolumes "${state[@]}" "$SRC" 2>"$T/send.err" |
		"$ENCIO" receive "$@" "$D" 2>"$T/receive.err"
}

same()
{
	diff -r -x "*.encio-send-base" "$SRC/@data" "$D/@data" >/dev/null || _fail "@data differs from SRC: $(diff -r -x "*.encio-send-base" "$SRC/@data" "$D/@data" | head -3)"
	diff -r "$SRC/@data/inner" "$D/@data/inner" >/dev/null || _fail "@data/inner differs from SRC"
	diff -r -x inner "$SRC/snaps" "$D/snaps" >/dev/null || _fail "snaps differ from SRC"
}

_log "first run, then a second with SRC changed and DEST's copies read"
run || _fail "the first run failed: $(cat "$T/receive.err")"
same
echo changed >"$SRC/@data/f1"
echo changed >"$SRC/@data/inner/g1"
cat "$D/@data/f2" "$D/@data/inner/g2" >/dev/null
sync
# atimes moved (the copies' ctransid with them), no ctime: still bases
[ "$("$ENCIO" receive --state "$D" | grep -c ' rw @data')" = 2 ] ||
	_fail "reads made the copies look changed: $("$ENCIO" receive --state "$D")"
run || _fail "the second run failed: $(cat "$T/receive.err")"
same

_log "a run cut before its end (the copies replaced, the nested carried), then the next"
echo again >"$SRC/@data/f3"
sync
"$ENCIO" receive --state "$D" >"$T/state"
"$ENCIO" -q send --subvolumes --state "$T/state" -f "$T/stream" "$SRC" || _fail "send -f failed"
size=$(stat -c %s "$T/stream")
head -c $((size - 12)) "$T/stream" | "$ENCIO" -q receive "$D" 2>/dev/null && _fail "a cut stream received"
run || _fail "the run after the cut failed: $(cat "$T/receive.err")"
same

_log "a file changed in DEST's copy: not the base of the next run's copy"
echo "edited in DEST" >"$D/@data/f4"
echo more >"$SRC/@data/f5"
sync
"$ENCIO" receive --state "$D" >"$T/state"
grep -q ' @data$' "$T/state" && _fail "the state names the changed copy: $(cat "$T/state")"
grep -q ' @data/inner$' "$T/state" || _fail "the state lost the unchanged nested copy: $(cat "$T/state")"
run || _fail "the run after a change in DEST failed: $(cat "$T/receive.err")"
grep -q "1 writable copy in $D changed since encio received it, replaced by SRC's" "$T/receive.err" ||
	_fail "the replacement of a changed copy is not said: $(cat "$T/receive.err")"
same

_log "the same in a nested copy, and a directory's entry removed in DEST"
echo "edited in DEST" >"$D/@data/inner/g4"
rm "$D/@data/f6"
echo more >"$SRC/@data/inner/g5"
sync
run || _fail "the run after changes in DEST failed: $(cat "$T/receive.err")"
grep -q "2 writable copies in $D changed since encio received them" "$T/receive.err" ||
	_fail "the replacements are not said: $(cat "$T/receive.err")"
same
run || _fail "a run with nothing changed failed: $(cat "$T/receive.err")"
grep -q "changed since encio received" "$T/receive.err" && _fail "unchanged copies said changed: $(cat "$T/receive.err")"
same
echo "PASS: $TEST_NAME"
