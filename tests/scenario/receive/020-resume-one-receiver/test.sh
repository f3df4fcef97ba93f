#!/bin/bash
# One receive -s per subvolume name at a time. While a receiver of NAME
# lives on, blocked reading a link that died (as after an ssh link drops),
# a resume of NAME, or a new receive -s of it, is refused at once, naming
# the holder's pid, and changes nothing; --resume-token still reads the
# partial. Once the old receiver sees EOF, it keeps its partial for the
# resume, which then completes.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 60); do random_bytes 60000 "f$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
T=$TEST_TMP
"$ENCIO" -q send "$SRC/s1" >"$T/s1.stream" || _fail "send"
size=$(stat -c %s "$T/s1.stream")

mkfifo "$T/link"
"$ENCIO" -q receive -s --checkpoint 64K "$DST" <"$T/link" 2>"$T/old.err" &
old=$!
exec 3>"$T/link"
# a third of the stream, then the link hangs: fd 3 stays open
head -c $((size / 3)) "$T/s1.stream" >&3
for i in $(seq 1 100); do
	"$ENCIO" receive --resume-token "$DST/s1" >"$T/token" 2>/dev/null && break
	sleep 0.1
done
token=$(cat "$T/token")
[ -n "$token" ] || _fail "no token while the old receiver lives"
"$ENCIO" -q send -t "$token" "$SRC/s1" >"$T/resumed" || _fail "send -t"
run_mustfail "a resume while another receiver lives" \
	"$ENCIO" -q receive -s -f "$T/resumed" "$DST"
grep -q "another encio receive (pid $old) is receiving s1" <<<"$ERR_OUT" ||
	_fail "the refusal does not name the holder $old: $ERR_OUT"
grep -q "apply encio_resume of 's1'" <<<"$ERR_OUT" ||
	_fail "the refusal does not name the command: $ERR_OUT"
run_mustfail "a new receive while another receiver lives" \
	"$ENCIO" -q receive -s -f "$T/s1.stream" "$DST"
grep -q "pid $old" <<<"$ERR_OUT" || _fail "the refusal does not name the holder: $ERR_OUT"
kill -0 $old || _fail "the old receiver ended"
# the old link's end is noticed
exec 3>&-
wait $old && _fail "the old receiver of a cut stream exited 0"
token=$("$ENCIO" receive --resume-token "$DST/s1") || _fail "no token after the old receiver"
"$ENCIO" -q send -t "$token" "$SRC/s1" | "$ENCIO" -q receive -s "$DST" || _fail "the resume failed"
diff -r "$SRC/s1" "$DST/s1" || _fail "s1 differs"
[ "$(ls -A "$DST")" = s1 ] || _fail "DEST holds $(ls -A "$DST")"
exit 0
