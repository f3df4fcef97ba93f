#!/bin/bash
# What send's summary says is true of the stream it wrote: an incremental
# of metadata changes only (modes, owners, times, xattrs, removals) creates
# nothing but is not empty: its text line and JSON count its commands and
# removals. A resumed send (-t) reports the point it resumed at
# (resumed_at) and counts, like its stream, only what follows it: its
# total_bytes and done_bytes are its stream_bytes. send -n sends nothing:
# its done_bytes is 0, its total_bytes the stream's size. send -n -f is a
# usage error (exit 2).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/d"
for i in $(seq 1 200); do echo "$i" >"$SRC/v/d/f$i"; done
random_bytes 3000000 r >"$SRC/v/rand"
compressible 2000000 >"$SRC/v/text"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
for i in $(seq 1 150); do chmod 600 "$SRC/v/d/f$i"; done
for i in $(seq 151 180); do touch -d @1000000 "$SRC/v/d/f$i"; done
setfattr -n user.k -v v "$SRC/v/d/f190"
rm "$SRC/v/d/f200" "$SRC/v/d/f199"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }

# metadata only: nothing created, the commands and removals counted
"$ENCIO" send -p "$SRC/s1" "$SRC/s2" 2>"$T/text" >"$T/incr" || _fail "send -p failed"
line=$(grep '^sent ' "$T/text")
_log "$line"
grep -q '^sent 0 files, 0 directories, 0 other new, 2 removed, in [1-9][0-9]* commands:' <<<"$line" ||
	_fail "the summary does not say what the incremental changed: $line"
j=$("$ENCIO" -q send --format=json -p "$SRC/s1" "$SRC/s2" 2>&1 >/dev/null) || _fail "send -p --format=json failed"
cmds=$(field commands <<<"$j")
[ "$(field removed <<<"$j")" = 2 ] || _fail "JSON removed is not 2: $j"
# every CHMOD, UTIMES, SET_XATTR and UNLINK is one
[ "${cmds:-0}" -ge 183 ] || _fail "JSON commands $cmds, fewer than the changes: $j"
# one a command, END left out, as dump lists them
[ "$cmds" = "$("$ENCIO" dump -f "$T/incr" | wc -l)" ] ||
	_fail "JSON commands $cmds, the stream has $("$ENCIO" dump -f "$T/incr" | wc -l) commands before END"

# -n: nothing done
n=$("$ENCIO" -q send -n --format=json "$SRC/s1") || _fail "send -n failed"
[ "$(field done_bytes <<<"$n")" = 0 ] || _fail "send -n's done_bytes is not 0: $n"
[ "$(field total_bytes <<<"$n")" = "$(field stream_bytes <<<"$n")" ] || _fail "send -n's total is not its stream's: $n"
"$ENCIO" send -n -f "$T/x" "$SRC/s1" 2>"$T/err"
rc=$?
[ $rc = 2 ] || _fail "send -n -f exits $rc, not 2 (a usage error)"
grep -q -- "-n writes no stream" "$T/err" || _fail "send -n -f: $(cat "$T/err")"

# resumed: the rest counted, the point said
for args in "$SRC/s1" "-p $SRC/s1 $SRC/s2"; do
	# shellcheck disable=SC2086
	"$ENCIO" -q send -f "$T/whole" $args || _fail "send $args failed"
	size=$(stat -c %s "$T/whole")
	cp "$T/whole" "$T/part"
	truncate -s $((size * 2 / 3)) "$T/part"
	token=$("$ENCIO" stream-cut "$T/part") || _fail "stream-cut failed"
	kept=$(stat -c %s "$T/part")
	# shellcheck disable=SC2086
	r=$("$ENCIO" -q send --format=json -t "$token" $args 2>&1 >>"$T/part") || _fail "send -t $args failed"
	_log "$r"
	cmp -s "$T/part" "$T/whole" || _fail "$args: the resumed stream does not join"
	rest=$((size - kept))
	[ "$(field resumed_at <<<"$r")" = "$kept" ] || _fail "$args: resumed_at is not $kept: $r"
	for f in stream_bytes total_bytes done_bytes; do
		[ "$(field $f <<<"$r")" = "$rest" ] || _fail "$args: $f is not the rest's $rest bytes: $r"
	done
done
# the full send resumed: fewer files than the whole
w=$("$ENCIO" -q send --format=json -f "$T/w2" "$SRC/s1") || _fail "send failed"
[ "$(field logical_bytes <<<"$r")" -le "$(field logical_bytes <<<"$w")" ] || _fail "resumed counts exceed the whole's"
n=$("$ENCIO" -q send --format=json -f "$T/w3" "$SRC/s1") || _fail "send failed"
[ "$(field resumed_at <<<"$n")" = 0 ] || _fail "a send not resumed has resumed_at: $n"
echo "PASS: $TEST_NAME"
