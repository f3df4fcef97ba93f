#!/bin/bash
# A subvolume whose receive -s was cut between two commands (EOF, SIGINT)
# and resumed has the Parent UUID an uncut receive gives it: its parent's
# copy for an incremental stream, none for a full one. So btrfs send -c
# (and encio send -c) from the receiving side finds the parent, as on an
# uncut receive's copy.
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 20); do random_bytes 100000 "a$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
for i in $(seq 21 40); do random_bytes 100000 "b$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

pu() { btrfs subvolume show "$1" | awk '$1 == "Parent" && $2 == "UUID:" { print $3 }'; }
su() { btrfs subvolume show "$1" | awk '$1 == "UUID:" { print $2; exit }'; }

# check DIR: DIR's s1 and s2 are related as an uncut receive's
check()
{
	[ "$(pu "$1/s1")" = - ] || _fail "$1/s1 has Parent UUID $(pu "$1/s1")"
	[ "$(pu "$1/s2")" = "$(su "$1/s1")" ] ||
		_fail "$1/s2's Parent UUID $(pu "$1/s2") is not s1's $(su "$1/s1")"
	btrfs send -q -c "$1/s1" "$1/s2" >/dev/null || _fail "btrfs send -c s1 s2 in $1"
	"$ENCIO" -q send -c "$1/s1" "$1/s2" >/dev/null || _fail "encio send -c s1 s2 in $1"
	diff -r "$SRC/s2" "$1/s2" || _fail "$1/s2 differs"
}

# resume DIR SEND_ARGS...: DIR's partial of the last of SEND_ARGS resumed
resume()
{
	local dir=$1 token
	shift
	token=$("$ENCIO" receive --resume-token "$dir/$(basename "${*: -1}")") || _fail "no token in $dir"
	"$ENCIO" -q send -t "$token" "$@" | "$ENCIO" -q receive -s "$dir" || _fail "the resume in $dir"
}

_log "cut by EOF"
mkdir "$DST/e"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/e" 2>/dev/null && _fail "a cut stream received"
resume "$DST/e" "$SRC/s1"
size=$("$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | wc -c)
"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/e" 2>/dev/null && _fail "a cut stream received"
resume "$DST/e" -p "$SRC/s1" "$SRC/s2"
check "$DST/e"
btrfs -q subvolume delete "$DST/e/s2" >/dev/null

_log "stopped by SIGINT"
( "$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | python3 "$HERE/throttle.py" 2e6 |
	"$ENCIO" -q receive -s --checkpoint 64M "$DST/e" ) 2>/dev/null &
sleep 0.5
pkill -INT -f "receive -s --checkpoint 64M $DST/e\$"
wait
[ -e "$DST/e/s2" ] && _not_run "the receive ended before SIGINT"
resume "$DST/e" -p "$SRC/s1" "$SRC/s2"
check "$DST/e"
exit 0
