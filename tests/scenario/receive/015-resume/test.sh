#!/bin/bash
# encio receive -s keeps what a stream that stops short received, and
# encio send -t sends only the rest: for a full stream cut by EOF, an
# incremental one whose receiver is SIGKILLed (DEST unmounted and mounted
# again before the resume), a stream of two subvolumes cut in the second,
# a receive stopped by SIGINT, and one stopped by ENOSPC. Each result equals the source and an
# uninterrupted receive, and the resumed stream is smaller than the
# whole one. Refused, with nothing written: a corrupt token, a token whose
# snapshot changed since, a partial changed since its record, a resumed
# stream given to a receive without -s or without the partial, a stream
# of another layout (--proto 1), and a fresh stream where a partial
# is kept.
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
DST_LOOP=${_LOOPS[1]}
run_check btrfs -q subvolume create "$SRC/v"
mkdir -p "$SRC/v/d/e"
for i in $(seq 1 40); do compressible $((i * 7000)) >"$SRC/v/d/t$i"; done
random_bytes 20000000 r1 >"$SRC/v/rand"
compressible 9000000 >"$SRC/v/e/big"
cp --reflink=always "$SRC/v/rand" "$SRC/v/d/e/rand-clone"
ln -s ../rand "$SRC/v/d/link"
run_check chattr +i "$SRC/v/d/t3"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check chattr -i "$SRC/v/d/t3"
random_bytes 15000000 r2 >"$SRC/v/rand2"
rm "$SRC/v/d/t5"
mv "$SRC/v/e" "$SRC/v/d/e/moved"
echo more >>"$SRC/v/d/t7"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
T=$TEST_TMP

same() # SNAP DIR
{
	diff -r --no-dereference "$SRC/$1" "$2/$1" || _fail "$1 differs in $2"
	python3 "$TOP_SRCDIR/tests/random/difftest.py" compare "$SRC/$1" "$2/$1" ||
		_fail "$1: metadata differs in $2"
	btrfs subvolume show "$2/$1" | grep -Eq 'Received UUID:[[:space:]]+[0-9a-f]{8}-' ||
		_fail "$1 in $2 is not marked received"
	ls -A "$2" | grep -q encio && _fail "$2 keeps encio's names: $(ls -A "$2")"
	return 0
}

# where receive -s keeps the partial of $2 in DEST $1
partial_dir()
{
	ls -d "$1"/.encio-receive.*/"$2" 2>/dev/null | head -1
}

# the uninterrupted receives, to compare with
mkdir "$DST/whole"
run_check "$ENCIO" -q receive -f <("$ENCIO" -q send "$SRC/s1") "$DST/whole"
run_check "$ENCIO" -q receive -f <("$ENCIO" -q send -p "$SRC/s1" "$SRC/s2") "$DST/whole"
same s1 "$DST/whole"
same s2 "$DST/whole"
full=$("$ENCIO" -q send "$SRC/s1" | wc -c)

_log "a full stream cut at 45% (EOF)"
mkdir "$DST/a"
"$ENCIO" -q send "$SRC/s1" | head -c $((full * 45 / 100)) |
	"$ENCIO" receive -s --checkpoint 256K "$DST/a" 2>"$T/a.err" && _fail "a cut stream received"
grep -q 'encio receive --resume-token' "$T/a.err" || _fail "no resume hint: $(cat "$T/a.err")"
ls -A "$DST/a" | grep -q '^s1$' && _fail "the partial has the subvolume's name"
# cut between two commands: the working subvolume itself is kept, read-only
pa=$(partial_dir "$DST/a" s1)
[ -e "$pa/record" ] || _fail "no record: $(ls -AR "$DST/a")"
[ "$(btrfs property get -t subvol "$pa/work" ro)" = "ro=true" ] ||
	_fail "the working subvolume was not kept read-only: $(ls -A "$pa")"
ls -A "$pa" | grep -q '^ckpt\.' && _fail "a checkpoint was kept beside it: $(ls -A "$pa")"
[ "$(stat -c %a.%u "${pa%/*}")" = 700.0 ] || _fail "the state directory is not root's own"
btrfs subvolume show "$pa/work" |
	grep -Eq 'Received UUID:[[:space:]]+[0-9a-f]{8}-' && _fail "the partial is marked received"
token=$("$ENCIO" receive --resume-token "$DST/a/s1") || _fail "no token"
_log "token $token"
# the snapshot found by UUID: no PATH
"$ENCIO" -q send -t "$token" >"$T/a.resumed" || _fail "send -t failed"
resumed=$(stat -c %s "$T/a.resumed")
_log "whole stream $full B, resumed $resumed B"
[ "$resumed" -lt $((full * 60 / 100)) ] || _fail "the resumed stream is $resumed B of $full B"
est=$("$ENCIO" -q send -n --format=json -t "$token" | sed -n 's/.*"stream_bytes": \([0-9]*\).*/\1/p')
[ "$est" = "$resumed" ] || _fail "send -n -t says $est B, the resumed stream has $resumed B"
run_check "$ENCIO" -q receive -s -f "$T/a.resumed" "$DST/a"
same s1 "$DST/a"

_log "an incremental stream, its receiver killed, DEST mounted again"
mkdir "$DST/b"
run_check "$ENCIO" -q receive -f <("$ENCIO" -q send "$SRC/s1") "$DST/b"
( "$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | python3 "$HERE/throttle.py" 8e6 |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/b" ) 2>/dev/null &
sleep 1.2
pkill -KILL -f "receive -s --checkpoint 256K $DST/b"
wait
[ -e "$(partial_dir "$DST/b" s2)/record" ] || _fail "nothing kept: $(ls -AR "$DST/b")"
run_check umount_settled "$DST"
run_check mount "$DST_LOOP" "$DST"
token=$("$ENCIO" receive --resume-token "$DST/b/s2") || _fail "no token after the kill"
# the parent found by UUID too
"$ENCIO" -q send -t "$token" | "$ENCIO" -q receive -s "$DST/b" || _fail "the resume failed"
same s2 "$DST/b"

_log "SIGINT: the working subvolume kept at the last command applied, and the hint"
mkdir "$DST/i"
( "$ENCIO" -q send "$SRC/s1" | python3 "$HERE/throttle.py" 8e6 |
	"$ENCIO" -q receive -s --checkpoint 64M "$DST/i" ) 2>"$T/i.err" &
sleep 1
pkill -INT -f "receive -s --checkpoint 64M $DST/i"
wait
grep -q 'encio receive --resume-token' "$T/i.err" || _fail "no hint after SIGINT: $(cat "$T/i.err")"
# the working subvolume, read-only, instead of the first command's checkpoint
pi=$(partial_dir "$DST/i" s1)
[ "$(btrfs property get -t subvol "$pi/work" ro 2>/dev/null)" = "ro=true" ] ||
	_fail "the working subvolume was not kept at the stop: $(ls -A "$pi")"
ls -A "$pi" | grep -q '^ckpt\.' && _fail "the checkpoint was not deleted: $(ls -A "$pi")"
token=$("$ENCIO" receive --resume-token "$DST/i/s1") || _fail "no token after SIGINT"
"$ENCIO" -q send -t "$token" | "$ENCIO" -q receive -s "$DST/i" || _fail "the resume after SIGINT failed"
same s1 "$DST/i"

_log "two subvolumes in one stream, cut in the second"
mkdir "$DST/c"
two=$("$ENCIO" -q send "$SRC/s1" "$SRC/s2" | wc -c)
"$ENCIO" -q send "$SRC/s1" "$SRC/s2" | head -c $((two - 3000000)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/c" 2>/dev/null && _fail "a cut stream received"
token=$("$ENCIO" receive --resume-token "$DST/c/s2") || _fail "no token for s2"
"$ENCIO" -q send -t "$token" "$SRC/s1" "$SRC/s2" >"$T/c.resumed" || _fail "send -t s1 s2 failed"
[ "$(stat -c %s "$T/c.resumed")" -lt 4000000 ] || _fail "s1 sent again: $(stat -c %s "$T/c.resumed") B"
run_check "$ENCIO" -q receive -s -f "$T/c.resumed" "$DST/c"
same s1 "$DST/c"
same s2 "$DST/c"

_log "refusals"
mkdir "$DST/r" "$DST/r2"
"$ENCIO" -q send "$SRC/s1" | head -c $((full / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/r" 2>/dev/null
token=$("$ENCIO" receive --resume-token "$DST/r/s1") || _fail "no token"
bad=${token%?}0
[ "$bad" != "$token" ] || bad=${token%?}1
run_mustfail "a corrupt token" "$ENCIO" send -t "$bad" -f "$T/x" "$SRC/s1"
[ ! -e "$T/x" ] || _fail "a corrupt token wrote a stream"
run_mustfail "another protocol" "$ENCIO" send --proto 1 -t "$token" -f "$T/x" "$SRC/s1"
grep -q 'other options' <<<"$ERR_OUT" || _fail "--proto 1: $ERR_OUT"
[ ! -e "$T/x" ] || _fail "a stream regenerated otherwise was written"
"$ENCIO" -q send -t "$token" "$SRC/s1" >"$T/r.resumed" || _fail "send -t failed"
run_mustfail "without -s" "$ENCIO" receive -f "$T/r.resumed" "$DST/r"
run_mustfail "without the partial" "$ENCIO" receive -s -f "$T/r.resumed" "$DST/r2"
[ -z "$(ls -A "$DST/r2")" ] || _fail "a refused resume left $(ls -A "$DST/r2")"
run_mustfail "a fresh stream onto a partial" "$ENCIO" receive -s -f <("$ENCIO" -q send "$SRC/s1") "$DST/r"
grep -q 'partial' <<<"$ERR_OUT" || _fail "fresh stream onto a partial: $ERR_OUT"
# the partial changed since its record
pr=$(partial_dir "$DST/r" s1)
run_check btrfs property set -f "$pr/work" ro false
touch "$pr/work/changed"
run_check btrfs property set -f "$pr/work" ro true
run_mustfail "a changed partial" "$ENCIO" receive --resume-token "$DST/r/s1"
run_mustfail "a changed partial" "$ENCIO" receive -s -f "$T/r.resumed" "$DST/r"
grep -q 'changed since' <<<"$ERR_OUT" || _fail "changed partial: $ERR_OUT"
# the snapshot changed since the token
run_check btrfs property set -f "$SRC/s1" ro false
touch "$SRC/s1/changed"
run_check btrfs property set -f "$SRC/s1" ro true
run_mustfail "a changed snapshot" "$ENCIO" send -t "$token" -f "$T/x" "$SRC/s1"
run_mustfail "a changed snapshot, found by UUID" "$ENCIO" send -t "$token" -f "$T/x"
[ ! -e "$T/x" ] || _fail "a changed snapshot wrote a stream"
rm "$SRC/s1/changed" 2>/dev/null || true

_log "ENOSPC, then room made"
make_btrfs small 300M
SMALL=$MNT
# full but for 12 MiB
dd if=/dev/zero of="$SMALL/filler" bs=1M status=none 2>/dev/null
sync
truncate -s -12M "$SMALL/filler"
sync
"$ENCIO" -q send "$SRC/s2" | "$ENCIO" receive -s --checkpoint 256K "$SMALL" 2>"$T/e.err" &&
	_fail "received into a full filesystem"
grep -q 'resume-token' "$T/e.err" || _fail "no resume hint after ENOSPC: $(cat "$T/e.err")"
rm "$SMALL/filler"
sync
token=$("$ENCIO" receive --resume-token "$SMALL/s2") || _fail "no token after ENOSPC"
"$ENCIO" -q send -t "$token" "$SRC/s2" | "$ENCIO" -q receive -s "$SMALL" || _fail "resume after ENOSPC"
diff -r --no-dereference "$SRC/s2" "$SMALL/s2" || _fail "s2 differs after ENOSPC"
