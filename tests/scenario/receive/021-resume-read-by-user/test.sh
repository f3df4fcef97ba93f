#!/bin/bash
# What receive -s keeps for a resume is private to root and read-only, so
# that another user's reads (ls, find, du: atime updates) cannot change it
# and make the partial unusable: after a cut, and after a kill, an
# unprivileged user reads all of DEST they can, and the resume works. A
# partial that did change is refused with what to do, and neither a
# receive without -s of the same subvolume nor another subvolume's
# receive -s is refused because of it.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
HERE=$TOP_SRCDIR/tests

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/d"
for i in $(seq 1 40); do random_bytes 100000 "f$i" >"$SRC/v/d/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
T=$TEST_TMP
chmod 0755 "$T" "$DST"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)

# read DIR: an unprivileged user reads all of DIR they may
read_all()
{
	as_user ls -laR "$1" >/dev/null 2>&1
	as_user find "$1" -exec cat {} + >/dev/null 2>&1
	as_user du -s "$1" >/dev/null 2>&1
	return 0
}

_log "cut between two commands"
mkdir "$DST/a"
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/a" 2>/dev/null && _fail "a cut stream received"
read_all "$DST/a"
token=$("$ENCIO" receive --resume-token "$DST/a/s1") || _fail "a user's read made the partial unusable"
"$ENCIO" -q send -t "$token" "$SRC/s1" | "$ENCIO" -q receive -s "$DST/a" || _fail "the resume failed"
diff -r "$SRC/s1" "$DST/a/s1" || _fail "s1 differs"

_log "killed"
mkdir "$DST/b"
( "$ENCIO" -q send "$SRC/s1" | python3 "$HERE/throttle.py" 4e6 |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/b" ) 2>/dev/null &
sleep 0.6
pkill -KILL -f "receive -s --checkpoint 256K $DST/b\$"
wait
read_all "$DST/b"
token=$("$ENCIO" receive --resume-token "$DST/b/s1") || _fail "a user's read made the partial unusable"
"$ENCIO" -q send -t "$token" "$SRC/s1" | "$ENCIO" -q receive -s "$DST/b" || _fail "the resume failed"
diff -r "$SRC/s1" "$DST/b/s1" || _fail "s1 differs"

_log "a partial changed since its record"
mkdir "$DST/c"
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/c" 2>/dev/null && _fail "a cut stream received"
work=$(ls -d "$DST"/c/.encio-receive.*/s1/work)
run_check btrfs property set -f "$work" ro false
touch "$work/changed"
run_check btrfs property set -f "$work" ro true
run_mustfail "a changed partial" "$ENCIO" receive --resume-token "$DST/c/s1"
run_mustfail "a fresh receive -s onto a kept partial" \
	"$ENCIO" -q receive -s -f <("$ENCIO" -q send "$SRC/s1") "$DST/c"
grep -q "a partial receive of s1 is kept in $DST/c: .*encio receive --abort $DST/c/s1" <<<"$ERR_OUT" ||
	_fail "the refusal does not say what to do: $ERR_OUT"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
"$ENCIO" -q send "$SRC/s2" | "$ENCIO" -q receive -s "$DST/c" || _fail "another subvolume's receive -s"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" -q receive "$DST/c" || _fail "a receive without -s"
diff -r "$SRC/s1" "$DST/c/s1" || _fail "s1 differs"
exit 0
