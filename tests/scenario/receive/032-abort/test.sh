#!/bin/bash
# encio receive --abort DEST/NAME drops NAME's partial receive -s (its
# working subvolume, checkpoints, record and directory in DEST's private
# directory) and nothing else: not DEST/NAME, not another NAME's partial,
# not a look-alike private directory another made. It is refused while a
# receive of NAME holds its lock (the message names the pid), and a NAME
# with no partial is an error; after it, a receive -s of NAME starts anew.
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 30); do random_bytes 200000 "f$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)

# cut NAME: a receive -s of SRC/NAME cut at half, a checkpoint kept beside
cut()
{
	"$ENCIO" -q send "$SRC/$1" | head -c $((size / 2)) |
		"$ENCIO" -q receive -s --checkpoint 128K "$DST" 2>/dev/null &&
		_fail "a cut stream of $1 received"
	[ -e "$(ls -d "$DST"/.encio-receive.*/"$1")/record" ] || _fail "no partial of $1 kept"
}

nsubvols()
{
	btrfs subvolume list "$DST" | wc -l
}

cut s1
cut s2
# what abort must leave: DEST/s1 made since, and a look-alike private
# directory (not marked as receive -s marks its own) holding an s1
mkdir "$DST/s1"
echo mine >"$DST/s1/file"
mkdir -p "$DST/.encio-receive.Zz9999/s1"
run_check btrfs -q subvolume create "$DST/.encio-receive.Zz9999/s1/work"
touch "$DST/.encio-receive.Zz9999/s1/record"
before=$(nsubvols)
state=$(ls -d "$DST"/.encio-receive.* | grep -v Zz9999)

_log "abort s1"
run_check "$ENCIO" receive --abort "$DST/s1" 2>"$TEST_TMP/abort.err"
cat "$TEST_TMP/abort.err"
[ "$(wc -l <"$TEST_TMP/abort.err")" = 1 ] || _fail "not one line: $(cat "$TEST_TMP/abort.err")"
[ -e "$state/s1" ] && _fail "s1's directory kept: $(ls -A "$state/s1")"
[ "$(cat "$DST/s1/file")" = mine ] || _fail "DEST/s1 was touched"
[ -e "$DST/.encio-receive.Zz9999/s1/work" ] && [ -e "$DST/.encio-receive.Zz9999/s1/record" ] ||
	_fail "the look-alike directory was touched"
after=$(nsubvols)
[ "$after" -lt "$before" ] || _fail "no subvolume deleted ($before, then $after)"
run_mustfail "s1's token after the abort" "$ENCIO" receive --resume-token "$DST/s1"
token=$("$ENCIO" receive --resume-token "$DST/s2") || _fail "s2's partial went with s1's"

_log "an absent partial"
run_mustfail "abort of no partial" "$ENCIO" receive --abort "$DST/s1"
grep -q "find a partial receive" <<<"$ERR_OUT" || _fail "unclear: $ERR_OUT"
run_mustfail "abort of DEST/.." "$ENCIO" receive --abort "$DST/.."

_log "refused while a receive of s2 runs"
( "$ENCIO" -q send -t "$token" | python3 "$HERE/throttle.py" 1e6 |
	"$ENCIO" -q receive -s "$DST" ) 2>/dev/null &
for i in $(seq 1 50); do
	pid=$(pgrep -f "encio -q receive -s $DST\$") && break
	sleep 0.1
done
sleep 0.5
run_mustfail "abort while received" "$ENCIO" receive --abort "$DST/s2"
grep -q "pid $pid" <<<"$ERR_OUT" || _fail "the message does not name pid $pid: $ERR_OUT"
wait
[ -e "$DST/s2" ] || _fail "the receive of s2 did not end whole"
diff -r "$SRC/s2" "$DST/s2" || _fail "s2 differs"

_log "abort s2's partial, then received anew with -s"
run_check btrfs -q subvolume delete "$DST/s2"
cut s2
run_check "$ENCIO" -q receive --abort "$DST/s2"
[ -z "$(ls -d "$DST"/.encio-receive.* | grep -v Zz9999)" ] ||
	_fail "private state left: $(ls -AR "$DST" | head)"
"$ENCIO" -q send "$SRC/s2" | "$ENCIO" -q receive -s "$DST" || _fail "receive -s after the abort"
diff -r "$SRC/s2" "$DST/s2" || _fail "s2 differs"
exit 0
