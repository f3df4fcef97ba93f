#!/bin/bash
# encio send leaves nothing behind when it fails or is stopped: the
# temporary snapshot of --snapshot is deleted on SIGINT, on SIGTERM and when
# the reader goes away (EPIPE, exit 1), the exit status being the signal's;
# a stream of -f FILE gets FILE's name only when whole, so a send stopped or
# failing midway leaves no FILE (an older FILE stays as it was) and no
# temporary, but what it wrote as FILE.encio-partial, for encio stream-cut
# (one that wrote nothing leaves nothing). A FILE that is not a regular
# file is written itself. An
# incremental send (the kernel's stream relayed) stops alike.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root
[ "$(cat /proc/sys/fs/leases-enable 2>/dev/null)" = 1 ] || _not_run "needs file leases"
env --default-signal=INT true 2>/dev/null || _not_run "needs env --default-signal (coreutils 8.31)"

make_btrfs src 256M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
compressible 1000000 >"$V/a-text"
# more than a pipe and the stream writer's buffer hold
random_bytes 24000000 big >"$V/b-big"
echo last >"$V/c-last"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"

no_snapshot_left()
{
	if btrfs subvolume list "$SRC" | grep encio-send || ls -a "$SRC" | grep encio-send; then
		_fail "snapshot left behind: $1"
	fi
}

# wait_for FILE WHAT: bounded.
wait_for()
{
	local n=0
	until [ -e "$1" ]; do
		n=$((n + 1))
		[ $n -lt 1000 ] || _fail "timed out waiting for $2"
		sleep 0.02
	done
}

# stop_snapshot_send SIG STATUS: send --snapshot into a pipe nobody reads
# yet (it cannot finish), signal encio once its snapshot exists, then let
# the reader drain the pipe.
stop_snapshot_send()
{
	local sig=$1 want=$2 rc=0 pid reader n=0
	rm -f "$TEST_TMP/go" "$TEST_TMP/pipe"
	mkfifo "$TEST_TMP/pipe"
	(
		until [ -e "$TEST_TMP/go" ]; do sleep 0.02; done
		cat >/dev/null
	) <"$TEST_TMP/pipe" &
	reader=$!
	env --default-signal=INT "$ENCIO" send --snapshot "$V" >"$TEST_TMP/pipe" 2>"$TEST_TMP/err" &
	pid=$!
	until ls -a "$SRC" | grep -q encio-send; do
		n=$((n + 1))
		[ $n -lt 1000 ] || { touch "$TEST_TMP/go"; _fail "no snapshot seen"; }
		sleep 0.01
	done
	kill -"$sig" $pid
	touch "$TEST_TMP/go"
	wait $pid || rc=$?
	wait $reader
	cat "$TEST_TMP/err"
	[ $rc = "$want" ] || _fail "send --snapshot stopped by SIG$sig: exit $rc, not $want"
	no_snapshot_left "SIG$sig"
}

_log "--snapshot stopped by SIGINT, by SIGTERM"
stop_snapshot_send INT 130
stop_snapshot_send TERM 143

_log "--snapshot stopped by SIGTERM while it waits on a reader that reads nothing"
rm -f "$TEST_TMP/pipe"
mkfifo "$TEST_TMP/pipe"
sleep 60 <"$TEST_TMP/pipe" &
sleeper=$!
"$ENCIO" send --snapshot "$V" >"$TEST_TMP/pipe" 2>"$TEST_TMP/err" &
pid=$!
# The pipe fills at once (64 KiB): encio then waits in write().
n=0
until grep -q pipe_w "/proc/$pid/wchan" 2>/dev/null || [ $n -ge 500 ]; do
	n=$((n + 1))
	sleep 0.01
done
kill -TERM $pid
n=0
while kill -0 $pid 2>/dev/null && [ $n -lt 100 ]; do
	n=$((n + 1))
	sleep 0.05
done
kill -0 $pid 2>/dev/null && { kill -KILL $pid $sleeper; _fail "send blocked on a full pipe ignored SIGTERM"; }
rc=0
wait $pid || rc=$?
kill $sleeper 2>/dev/null
wait $sleeper 2>/dev/null
cat "$TEST_TMP/err"
[ $rc = 143 ] || _fail "send blocked on a full pipe, stopped by SIGTERM: exit $rc, not 143"
no_snapshot_left "SIGTERM on a full pipe"

_log "--snapshot into a reader that goes away"
rc=0
"$ENCIO" send --snapshot "$V" 2>"$TEST_TMP/err" | head -c 1000 >/dev/null
rc=${PIPESTATUS[0]}
cat "$TEST_TMP/err"
[ "$rc" = 1 ] || _fail "send --snapshot | head: exit $rc, not 1"
grep -q "Broken pipe" "$TEST_TMP/err" || _fail "no EPIPE reported"
no_snapshot_left "EPIPE"

_log "-p stopped by SIGTERM while it waits on a reader that reads nothing, and into a reader that goes away"
random_bytes 24000000 new >"$V/d-new"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap2"
rm -f "$TEST_TMP/pipe"
mkfifo "$TEST_TMP/pipe"
sleep 60 <"$TEST_TMP/pipe" &
sleeper=$!
"$ENCIO" send -p "$SRC/snap" "$SRC/snap2" >"$TEST_TMP/pipe" 2>"$TEST_TMP/err" &
pid=$!
n=0
until grep -q pipe_w "/proc/$pid/wchan" 2>/dev/null || [ $n -ge 500 ]; do
	n=$((n + 1))
	sleep 0.01
done
kill -TERM $pid
n=0
while kill -0 $pid 2>/dev/null && [ $n -lt 100 ]; do
	n=$((n + 1))
	sleep 0.05
done
kill -0 $pid 2>/dev/null && { kill -KILL $pid $sleeper; _fail "send -p blocked on a full pipe ignored SIGTERM"; }
rc=0
wait $pid || rc=$?
kill $sleeper 2>/dev/null
wait $sleeper 2>/dev/null
cat "$TEST_TMP/err"
[ $rc = 143 ] || _fail "send -p blocked on a full pipe, stopped by SIGTERM: exit $rc, not 143"
"$ENCIO" send -p "$SRC/snap" "$SRC/snap2" 2>"$TEST_TMP/err" | head -c 1000 >/dev/null
rc=${PIPESTATUS[0]}
cat "$TEST_TMP/err"
[ "$rc" = 1 ] || _fail "send -p | head: exit $rc, not 1"
grep -q "Broken pipe" "$TEST_TMP/err" || _fail "send -p: no EPIPE reported"

_log "-f FILE stopped by SIGTERM midway"
# A write lease on the last file makes send's open of it wait: encio is
# stopped there, with most of the stream written.
cat >"$TEST_TMP/lease.py" <<'PY'
import fcntl, os, signal, sys, time
path, marker, release = sys.argv[1:4]
fd = os.open(path, os.O_RDONLY)
signal.signal(signal.SIGIO, lambda sig, frame: open(marker, "w").close())
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
open(marker + ".held", "w").close()
while not os.path.exists(release):
	time.sleep(0.02)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
PY
OUT=$TEST_TMP/out
mkdir "$OUT"
for older in "" "an older stream"; do
	rm -f "$OUT"/* "$TEST_TMP"/lease-*
	[ -z "$older" ] || echo "$older" >"$OUT/s.stream"
	python3 "$TEST_TMP/lease.py" "$SRC/snap/c-last" "$TEST_TMP/lease-broken" "$TEST_TMP/lease-release" &
	holder=$!
	wait_for "$TEST_TMP/lease-broken.held" "the lease"
	"$ENCIO" send -f "$OUT/s.stream" "$SRC/snap" 2>"$TEST_TMP/err" &
	pid=$!
	wait_for "$TEST_TMP/lease-broken" "send to open the leased file"
	kill -TERM $pid
	touch "$TEST_TMP/lease-release"
	rc=0
	wait $pid || rc=$?
	wait $holder
	cat "$TEST_TMP/err"
	[ $rc = 143 ] || _fail "send -f stopped by SIGTERM: exit $rc, not 143"
	if [ -z "$older" ]; then
		[ "$(ls -A "$OUT")" = s.stream.encio-partial ] || _fail "left after SIGTERM: $(ls -A "$OUT")"
	else
		[ "$(ls -A "$OUT")" = "$(printf 's.stream\ns.stream.encio-partial')" ] ||
			_fail "left after SIGTERM: $(ls -A "$OUT")"
		[ "$(cat "$OUT/s.stream")" = "$older" ] || _fail "the older FILE was changed"
	fi
	grep -q "encio stream-cut '$OUT/s.stream.encio-partial'" "$TEST_TMP/err" || _fail "no resume command said"
done

_log "-f FILE failing midway (no space left)"
make_tmpfs full 8M
FULL=$MNT
run_mustfail "send to a full file system" "$ENCIO" send -f "$FULL/s.stream" "$SRC/snap"
echo "$ERR_OUT" | grep -q "s.stream.*No space left" || _fail "no ENOSPC naming FILE: $ERR_OUT"
[ "$(ls -A "$FULL")" = s.stream.encio-partial ] || _fail "left after ENOSPC: $(ls -A "$FULL")"
rm "$FULL/s.stream.encio-partial"
echo "an older stream" >"$FULL/s.stream"
run_mustfail "send --snapshot to a full file system" "$ENCIO" send --snapshot -f "$FULL/s.stream" "$V"
[ "$(ls -A "$FULL")" = "$(printf 's.stream\ns.stream.encio-partial')" ] || _fail "left after ENOSPC: $(ls -A "$FULL")"
rm "$FULL/s.stream.encio-partial"
[ "$(cat "$FULL/s.stream")" = "an older stream" ] || _fail "the older FILE was changed by a failed send"
no_snapshot_left "ENOSPC"

_log "-f FILE where O_TMPFILE fails: a dot-name temporary, removed on failure"
if command -v strace >/dev/null; then
	# LeakSanitizer cannot run under ptrace
	no_lsan=ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
	rm -f "$FULL/s.stream"
	env "$no_lsan" strace -qq -e trace=openat -o "$TEST_TMP/strace.count" \
		"$ENCIO" -q send -f "$OUT/counted" "$SRC/snap" 2>/dev/null || _fail "send under strace"
	nth=$(grep -n O_TMPFILE "$TEST_TMP/strace.count" | head -1 | cut -d: -f1)
	[ -n "$nth" ] || _fail "no O_TMPFILE open seen"
	# the same opens, the O_TMPFILE one failing as where the file system has none
	without_tmpfile()
	{
		env "$no_lsan" strace -qq -e trace=openat -e inject=openat:error=EOPNOTSUPP:when="$nth" \
			-o "$TEST_TMP/strace.named" "$ENCIO" -q send "$@"
	}
	without_tmpfile -f "$OUT/named" "$SRC/snap" || _fail "send with a dot-name temporary"
	grep -q "openat([0-9]*, \"\.named\.encio-send-[0-9]*\", O_WRONLY|O_CREAT|O_EXCL" "$TEST_TMP/strace.named" ||
		_fail "no dot-name temporary made: $(grep -A1 O_TMPFILE "$TEST_TMP/strace.named")"
	cmp "$OUT/named" "$OUT/counted" || _fail "stream through a dot-name temporary differs"
	rc=0
	without_tmpfile -f "$FULL/s.stream" "$SRC/snap" 2>/dev/null || rc=$?
	[ $rc = 1 ] || _fail "send to a full file system with a dot-name temporary: exit $rc"
	grep -q "openat([0-9]*, \"\.s\.stream\.encio-send-[0-9]*\", O_WRONLY|O_CREAT|O_EXCL" "$TEST_TMP/strace.named" ||
		_fail "no dot-name temporary made on the full file system"
	[ "$(ls -A "$FULL")" = s.stream.encio-partial ] || _fail "left after ENOSPC: $(ls -A "$FULL")"
	rm -f "$OUT"/*
fi

_log "-f FILE that is not a regular file is written itself"
run_check "$ENCIO" -q send -f /dev/null "$SRC/snap"
rm -f "$OUT"/*
mkfifo "$OUT/fifo"
btrfs receive --dump <"$OUT/fifo" >"$TEST_TMP/dump" &
reader=$!
run_check "$ENCIO" -q send -f "$OUT/fifo" "$SRC/snap"
wait $reader || _fail "btrfs receive --dump of the FIFO"
grep -q "^write .*c-last" "$TEST_TMP/dump" || _fail "stream through the FIFO incomplete"
[ "$(ls -A "$OUT")" = fifo ] && [ -p "$OUT/fifo" ] || _fail "the FIFO was replaced: $(ls -A "$OUT")"

_log "a whole stream replaces an older FILE, which is not sent either"
make_tmpfs plain 64M
T=$MNT/tree
mkdir "$T"
echo data >"$T/file"
"$ENCIO" -q send -f "$T/s.stream" "$T" 2>/dev/null || _fail "send -f into the tree sent"
ino=$(stat -c %i "$T/s.stream")
"$ENCIO" -q send -f "$T/s.stream" "$T" 2>/dev/null || _fail "send -f over an older stream"
[ "$(stat -c %i "$T/s.stream")" != "$ino" ] || _fail "the older FILE was written over, not replaced"
btrfs receive --dump -f "$T/s.stream" >"$TEST_TMP/dump" || _fail "btrfs receive --dump"
grep -q "s.stream" "$TEST_TMP/dump" && _fail "a stream file was sent"
[ "$(ls -A "$T")" = "$(printf 'file\ns.stream')" ] || _fail "left in the tree: $(ls -A "$T")"
exit 0
