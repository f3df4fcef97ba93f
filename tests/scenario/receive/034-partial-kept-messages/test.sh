#!/bin/bash
# A receive of NAME while a partial receive -s of NAME is kept. With -s,
# full or incremental, it is refused in one line that says so (no "File
# exists": NAME does not exist) and how to resume or drop it. Without -s,
# NAME is received whole and the stale partial is dropped under its lock,
# with a note; --resume-token then says there is none, where it used to
# hand out a token whose resume failed.
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
for i in $(seq 1 20); do random_bytes 200000 "g$i" >"$SRC/v/g$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
T=$TEST_TMP

# cut ARGS...: a receive -s of send ARGS... into DST cut by the sender's
# side going away (killed), as a dropped link does
cut()
{
	( "$ENCIO" -q send "$@" | python3 "$HERE/throttle.py" 4e6 |
		"$ENCIO" -q receive -s --checkpoint 128K "$DST" ) 2>/dev/null &
	sleep 0.8
	pkill -KILL -f "throttle.py 4e6"
	wait
}

# refused_once WHAT: $T/err holds one line, the refusal of a receive -s
refused_once()
{
	cat "$T/err"
	grep -q "File exists" "$T/err" && _fail "$1: File exists said"
	[ "$(grep -c "^ERROR: " "$T/err")" = 1 ] || _fail "$1: not one line"
	grep -q "a partial receive of $2 is kept in $DST" "$T/err" || _fail "$1: does not say a partial is kept"
	grep -qF "encio receive --abort $DST/$2" "$T/err" || _fail "$1: no --abort"
	grep -qF "encio send -t" "$T/err" || _fail "$1: no send -t"
}

_log "a full stream"
cut "$SRC/s1"
"$ENCIO" receive --resume-token "$DST/s1" >/dev/null || _fail "nothing kept of s1"
"$ENCIO" -q send "$SRC/s1" >"$T/s1.stream"
"$ENCIO" receive -s -f "$T/s1.stream" "$DST" 2>"$T/err" && _fail "received onto a partial"
refused_once "full" s1
[ -e "$DST/s1" ] && _fail "s1 made"

_log "an incremental stream"
mkdir "$DST/inc"
run_check "$ENCIO" -q receive -f "$T/s1.stream" "$DST/inc"
DST0=$DST
DST=$DST/inc
cut -p "$SRC/s1" "$SRC/s2"
"$ENCIO" receive --resume-token "$DST/s2" >/dev/null || _fail "nothing kept of s2"
"$ENCIO" receive -s -f <("$ENCIO" -q send -p "$SRC/s1" "$SRC/s2") "$DST" 2>"$T/err" &&
	_fail "received onto a partial"
refused_once "incremental" s2
grep -q "creating snapshot" "$T/err" && _fail "creating snapshot said"
DST=$DST0

_log "a receive without -s drops the stale partial"
"$ENCIO" receive -f "$T/s1.stream" "$DST" 2>"$T/err" || _fail "the receive without -s failed: $(cat "$T/err")"
cat "$T/err"
grep -q "^note: s1 received whole: its partial receive (receive -s) kept in $DST dropped" "$T/err" ||
	_fail "no note of the partial dropped"
diff -r "$SRC/s1" "$DST/s1" || _fail "s1 differs"
run_mustfail "a token of a dropped partial" "$ENCIO" receive --resume-token "$DST/s1"
grep -q "no partial receive" <<<"$ERR_OUT" || _fail "does not say there is none: $ERR_OUT"
[ -z "$(ls -A "$DST" | grep encio-receive)" ] || _fail "private state left: $(ls -AR "$DST" | head)"
# -q: no note
"$ENCIO" -q receive -f <("$ENCIO" -q send -p "$SRC/s1" "$SRC/s2") "$DST/inc" 2>"$T/err" ||
	_fail "the receive of s2 without -s failed"
[ -s "$T/err" ] && _fail "-q said: $(cat "$T/err")"
exit 0
