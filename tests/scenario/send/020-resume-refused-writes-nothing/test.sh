#!/bin/bash
# encio send -t whose token names none of the PATHs given is refused and
# writes nothing, not even a stream header; nor does one whose stream
# regenerated differs (--proto 1). Where the PATH is the token's snapshot
# the rest is sent and received.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 20); do random_bytes 50000 "f$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/other"
whole=$("$ENCIO" -q send "$SRC/s1" | wc -c)
"$ENCIO" -q send "$SRC/s1" 2>/dev/null | head -c $((whole / 2)) |
	"$ENCIO" -q receive -s --checkpoint 64K "$DST" 2>/dev/null && _fail "a cut stream received"
tok=$("$ENCIO" receive --resume-token "$DST/s1") || _fail "no token"

# refused SEND_ARGS...: exit 1, nothing on stdout (a pipe and a file)
refused()
{
	local n rc
	"$ENCIO" -q send -t "$tok" "$@" 2>"$T/err" | cat >"$T/piped"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 1 ] || _fail "send -t $*: exit $rc"
	cat "$T/err"
	n=$(stat -c %s "$T/piped")
	[ "$n" = 0 ] || _fail "send -t $* refused, but wrote $n bytes to a pipe"
	"$ENCIO" -q send -t "$tok" "$@" >"$T/file" 2>/dev/null && _fail "send -t $* to a file succeeded"
	n=$(stat -c %s "$T/file")
	[ "$n" = 0 ] || _fail "send -t $* refused, but wrote $n bytes to a file"
}

_log "a token for another subvolume"
refused "$SRC/other"
grep -q 'no PATH is its snapshot' "$T/err" || _fail "message: $(cat "$T/err")"
_log "a stream regenerated otherwise"
refused --proto 1 "$SRC/s1"
grep -q 'send it whole again' "$T/err" || _fail "message: $(cat "$T/err")"

_log "the token's own PATH"
"$ENCIO" -q send -t "$tok" "$SRC/s1" >"$T/rest" || _fail "send -t s1"
run_check "$ENCIO" -q receive -s -f "$T/rest" "$DST"
diff -r "$SRC/s1" "$DST/s1" || _fail "s1 differs"
