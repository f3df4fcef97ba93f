#!/bin/bash
# encio send --progress puts its estimate of the stream in the stream (a
# SIZE attribute of the first SUBVOL or SNAPSHOT command, or of the first
# UTIMES after the estimate was made), so that encio
# receive --progress behind a pipe shows a total and ends at 100%: for a
# full and an incremental stream, and for a resumed one (ENCIO_RESUME
# carries it). btrfs receive applies such streams as any other; a stream
# sent without progress carries nothing. A partial received from a stream
# with the total resumes from a stream without it, and the reverse.
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
mkdir -p "$SRC/v/d"
for i in $(seq 1 30); do compressible $((i * 9000)) >"$SRC/v/d/t$i"; done
random_bytes 12000000 r1 >"$SRC/v/rand"
truncate -s 50M "$SRC/v/sparse"
echo tail >>"$SRC/v/sparse"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
random_bytes 8000000 r2 >"$SRC/v/rand2"
rm "$SRC/v/d/t4"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
T=$TEST_TMP

same() # SNAP DIR
{
	diff -r --no-dereference "$SRC/$1" "$2/$1" || _fail "$1 differs in $2"
	python3 "$TOP_SRCDIR/tests/random/difftest.py" compare "$SRC/$1" "$2/$1" ||
		_fail "$1: metadata differs in $2"
	return 0
}

# lines FILE: the progress lines of FILE, one a line (not the summary)
lines() { tr '\r' '\n' <"$1" | sed 's/\x1b\[K//' | grep -v -e '^$' -e '^received '; }

# bytes SIZE: a pretty size (as progress prints it) in bytes, rounded
bytes()
{
	python3 -c '
import sys
s = sys.argv[1]
for n, m in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
    if s.endswith(n):
        print(int(float(s[:-3]) * m)); break
else:
    print(int(s.rstrip("B")))' "$1"
}

# slow [SECONDS]: a reader that starts late (after a second). The
# sender's estimate runs on the CPU it leaves (SCHED_IDLE): while it waits
# on the full pipe, the estimate is made, before the stream's end, as a
# larger stream gives it time to. An incremental's starts two seconds in.
slow() { sleep "${1:-1}"; cat; }

# near A B PCT: A is within PCT percent of B
near() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= b * p / 100) }'; }

# check_received ERRFILE STREAM_BYTES: once a line of receive's progress
# names a total (the sender's estimate, which may come after the first
# command), every line after it does, within 10% of the stream, the last
# one the stream's size read of that size, i.e. 100%
check_received()
{
	local err=$1 size=$2 last tot got n=0 told=
	while read -r line; do
		tot=$(sed -n 's/^[^ ]* of \([^ ]*\) read,.*/\1/p' <<<"$line")
		[ -n "$tot" ] || [ -z "$told" ] || _fail "a receive progress line without a total after one with: $line"
		[ -n "$tot" ] || continue
		told=1
		near "$(bytes "$tot")" "$size" 10 || _fail "total $tot, the stream has $size B: $line"
		n=$((n + 1))
	done < <(lines "$err" | grep ' written, ')
	[ $n -gt 0 ] || _fail "no progress line: $(cat -v "$err")"
	last=$(lines "$err" | grep ' written, ' | tail -1)
	got=$(sed -n 's/^\([^ ]*\) of \([^ ]*\) read,.*/\1 \2/p' <<<"$last")
	[ "${got% *}" = "${got#* }" ] || _fail "the last line is not 100%: $last"
	near "$(bytes "${got% *}")" "$size" 0.1 || _fail "the last line reads $got of $size B"
}

_log "a full stream over a pipe"
mkdir "$DST/a"
"$ENCIO" send --progress "$SRC/s1" 2>"$T/a.send" | slow | tee "$T/a.stream" |
	"$ENCIO" receive --progress "$DST/a" 2>"$T/a.recv" || _fail "receive failed: $(cat "$T/a.recv")"
check_received "$T/a.recv" "$(stat -c %s "$T/a.stream")"
same s1 "$DST/a"
"$ENCIO" dump -f "$T/a.stream" >/dev/null || _fail "dump refuses the stream"

_log "an incremental stream (the kernel's, relayed) over a pipe"
"$ENCIO" send --progress -p "$SRC/s1" "$SRC/s2" 2>/dev/null | slow 3 | tee "$T/b.stream" |
	"$ENCIO" receive --progress "$DST/a" 2>"$T/b.recv" || _fail "receive failed: $(cat "$T/b.recv")"
check_received "$T/b.recv" "$(stat -c %s "$T/b.stream")"
same s2 "$DST/a"

_log "btrfs receive applies both"
mkdir "$DST/p"
run_check btrfs receive -f "$T/a.stream" "$DST/p"
run_check btrfs receive -f "$T/b.stream" "$DST/p"
same s1 "$DST/p"
same s2 "$DST/p"

_log "without progress the stream carries no total, and is 12 bytes shorter"
plain=$("$ENCIO" -q send "$SRC/s1" | wc -c)
[ "$plain" -eq $(($(stat -c %s "$T/a.stream") - 12)) ] ||
	_fail "plain stream $plain B, with the total $(stat -c %s "$T/a.stream") B"
mkdir "$DST/n"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" receive --progress "$DST/n" 2>"$T/n.recv" ||
	_fail "receive failed: $(cat "$T/n.recv")"
lines "$T/n.recv" | grep -q ' read,' && _fail "a total where the sender told none: $(lines "$T/n.recv" | tail -1)"
lines "$T/n.recv" | grep -q ' written, ' || _fail "no progress line: $(cat -v "$T/n.recv")"

# cut STREAMFILE DIR: DIR gets the partial of the first 45% of STREAMFILE
cut_at()
{
	head -c $(($(stat -c %s "$1") * 45 / 100)) "$1" |
		"$ENCIO" -q receive -s --checkpoint 256K "$2" 2>/dev/null && _fail "a cut stream received"
	ls "$2"/.encio-receive.*/*/record >/dev/null 2>&1 || _fail "nothing kept in $2: $(ls -AR "$2")"
}

# resume DIR SNAP SEND_OPTION: DIR's partial of SNAP resumed by send -t
# with SEND_OPTION (-q, or --progress: the rest's size in the stream)
resume()
{
	local token
	token=$("$ENCIO" receive --resume-token "$1/$2") || _fail "no token in $1"
	"$ENCIO" send "$3" -t "$token" 2>/dev/null | "$ENCIO" -q receive -s "$1" ||
		_fail "the resume into $1 failed"
	same "$2" "$1"
}

_log "cut with the total, resumed with progress: the rest's total"
mkdir "$DST/r1"
cut_at "$T/a.stream" "$DST/r1"
token=$("$ENCIO" receive --resume-token "$DST/r1/s1") || _fail "no token"
"$ENCIO" send --progress -t "$token" 2>/dev/null | slow | tee "$T/r1.stream" |
	"$ENCIO" receive -s --progress "$DST/r1" 2>"$T/r1.recv" || _fail "resume failed: $(cat "$T/r1.recv")"
check_received "$T/r1.recv" "$(stat -c %s "$T/r1.stream")"
same s1 "$DST/r1"

_log "cut with the total, resumed without"
mkdir "$DST/r2"
cut_at "$T/a.stream" "$DST/r2"
resume "$DST/r2" s1 -q

_log "cut without the total, resumed with progress"
mkdir "$DST/r3"
"$ENCIO" -q send "$SRC/s1" >"$T/c.stream"
cut_at "$T/c.stream" "$DST/r3"
resume "$DST/r3" s1 --progress

_log "an incremental stream with the total, cut and resumed"
mkdir "$DST/r4"
run_check "$ENCIO" -q receive -f "$T/c.stream" "$DST/r4"
cut_at "$T/b.stream" "$DST/r4"
resume "$DST/r4" s2 --progress

_log "receive's JSON counts the checkpoints of -s"
mkdir "$DST/j"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" receive -s --checkpoint 1M --format=json "$DST/j" >"$T/j.json" ||
	_fail "receive -s failed"
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoints"])' "$T/j.json")
[ "$n" -ge 10 ] || _fail "$n checkpoints in a stream of $plain B every 1M: $(cat "$T/j.json")"
"$ENCIO" -q send "$SRC/s2" | "$ENCIO" receive --format=json "$DST/j" >"$T/j2.json" || _fail "receive failed"
grep -q '"checkpoints": 0,' "$T/j2.json" || _fail "checkpoints without -s: $(cat "$T/j2.json")"
