#!/bin/bash
# A stream cut on its way to a file resumes in the file: encio stream-cut
# cuts it after its last whole command and prints the token, and encio
# send -t TOKEN >> FILE appends the rest, no header and no resume command,
# so that the joined file is byte for byte the uncut stream, which encio
# receive -f and btrfs receive -f both apply. A full send (a walked tree,
# skipped to the point) and an incremental one (the kernel's), cut at
# several bytes; send -f stopped by ENOSPC keeps what it wrote as
# FILE.encio-partial with the command that goes on; stream-cut refuses a
# file another process holds locked, and a cut before any subvolume.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
mkdir -p "$V/a/b" "$V/c"
for i in $(seq 1 30); do compressible $((i * 7000)) >"$V/a/f$i"; done
random_bytes 3000000 r1 >"$V/c/rand"
compressible 2000000 >"$V/a/b/text"
cp --reflink=always "$V/c/rand" "$V/a/rand-clone"
ln "$V/a/f1" "$V/c/hard"
ln -s ../c/rand "$V/a/link"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
random_bytes 900000 r2 >"$V/a/new"
echo more >>"$V/a/f3"
mv "$V/a/b" "$V/c/b-moved"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

# check NAME CUT SEND-ARGS...: the stream of SEND-ARGS cut at byte CUT,
# resumed in its file, equals the uncut one and receives as it does
check()
{
	local name=$1 cut=$2 token
	shift 2
	cp "$T/$name.whole" "$T/$name.part"
	truncate -s "$cut" "$T/$name.part"
	token=$("$ENCIO" stream-cut "$T/$name.part") || _fail "$name at $cut: stream-cut failed"
	"$ENCIO" -q send -t "$token" "$@" >>"$T/$name.part" || _fail "$name at $cut: send -t failed"
	cmp -s "$T/$name.part" "$T/$name.whole" ||
		_fail "$name at $cut: the joined file is not the uncut stream ($(stat -c %s "$T/$name.part") of $(stat -c %s "$T/$name.whole") bytes)"
}

"$ENCIO" -q send -f "$T/full.whole" "$SRC/s1" || _fail "send failed"
"$ENCIO" -q send -f "$T/incr.whole" -p "$SRC/s1" "$SRC/s2" || _fail "send -p failed"
full=$(stat -c %s "$T/full.whole")
incr=$(stat -c %s "$T/incr.whole")
for cut in 200 $((full / 3)) $((full / 2 + 7)) $((full - 10)) "$full"; do
	check full "$cut" "$SRC/s1"
done
for cut in 300 $((incr / 2)) $((incr - 3)); do
	check incr "$cut" -p "$SRC/s1" "$SRC/s2"
done
_log "full stream $full B, incremental $incr B: every cut resumed to the uncut stream"

# the joined files, through both receivers
check full $((full / 2)) "$SRC/s1"
check incr $((incr / 2)) -p "$SRC/s1" "$SRC/s2"
mkdir "$DST/encio" "$DST/progs"
run_check "$ENCIO" -q receive -f "$T/full.part" "$DST/encio"
run_check "$ENCIO" -q receive -f "$T/incr.part" "$DST/encio"
run_check btrfs -q receive -f "$T/full.part" "$DST/progs"
run_check btrfs -q receive -f "$T/incr.part" "$DST/progs"
for s in s1 s2; do
	diff -r --no-dereference "$SRC/$s" "$DST/encio/$s" >/dev/null || _fail "encio receive of the joined $s differs"
	diff -r --no-dereference "$SRC/$s" "$DST/progs/$s" >/dev/null || _fail "btrfs receive of the joined $s differs"
done

# refusals: a cut before the first command is whole, a locked file
cp "$T/full.whole" "$T/short"
truncate -s 20 "$T/short"
run_mustfail "a cut before any subvolume" "$ENCIO" stream-cut "$T/short"
grep -q "send it whole again" <<<"$ERR_OUT" || _fail "no advice: $ERR_OUT"
cp "$T/full.whole" "$T/locked"
flock "$T/locked" sleep 30 &
locker=$!
sleep 0.5
run_mustfail "a locked file" "$ENCIO" stream-cut "$T/locked"
grep -q "another encio" <<<"$ERR_OUT" || _fail "locked: $ERR_OUT"
kill "$locker"
wait "$locker" 2>/dev/null

# send -f stopped by ENOSPC: what it wrote kept, and the command said
make_tmpfs out 2M
OUT=$MNT
"$ENCIO" -q send -f "$OUT/s1.stream" "$SRC/s1" 2>"$T/err" && _fail "send -f into 2 MiB did not fail"
_log "send said: $(cat "$T/err")"
[ ! -e "$OUT/s1.stream" ] || _fail "a cut send -f gave FILE its name"
[ -s "$OUT/s1.stream.encio-partial" ] || _fail "no partial kept: $(ls -a "$OUT")"
grep -q "encio stream-cut '$OUT/s1.stream.encio-partial'" "$T/err" || _fail "no resume command said"
grep -q "'$SRC/s1' >> '$OUT/s1.stream.encio-partial' && mv" "$T/err" || _fail "the command lacks the PATH or the append"
mv "$OUT/s1.stream.encio-partial" "$T/kept"
token=$("$ENCIO" stream-cut "$T/kept") || _fail "stream-cut of the kept partial failed"
"$ENCIO" -q send -t "$token" "$SRC/s1" >>"$T/kept" || _fail "send -t of the kept partial failed"
cmp -s "$T/kept" "$T/full.whole" || _fail "the kept partial resumed is not the uncut stream"
_log "ok"
