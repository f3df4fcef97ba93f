#!/bin/bash
# A copy started with SIGINT ignored (a background job of a script, nohup)
# leaves it ignored, as send and receive do: a SIGINT during the copy does
# not stop it, and the copy completes. SIGTERM still stops it.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G ""
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT
random_bytes $((384 << 20)) big >"$SRC/big"
sync

temp_size()
{
	find "$DST" -maxdepth 1 -name '.big.encio-*' -printf '%s\n' | head -1
}

# Starts a copy with SIGINT ignored and stops it (SIGSTOP) mid-way: $pid.
copy_stopped_midway()
{
	env --ignore-signal=INT "$ENCIO" -q copy "$SRC/big" "$DST/" 2>"$TEST_TMP/err" &
	pid=$!
	for ((i = 0; i < 2000; i++)); do
		s=$(temp_size)
		[ -n "$s" ] && [ "$s" -gt 0 ] && break
		sleep 0.005
	done
	kill -STOP $pid
	s=$(temp_size)
	[ -n "$s" ] && [ "$s" -lt $((384 << 20)) ] ||
		{ kill -CONT $pid; wait $pid; _fail "the copy ended before it could be stopped"; }
}

_log "SIGINT, ignored when the copy started"
copy_stopped_midway
kill -INT $pid
kill -CONT $pid
wait $pid
rc=$?
cat "$TEST_TMP/err"
[ $rc -eq 0 ] || _fail "exit $rc after an ignored SIGINT"
cmp "$SRC/big" "$DST/big" || _fail "the copy differs"
rm -f "$DST/big"

_log "SIGTERM still stops it"
copy_stopped_midway
kill -TERM $pid
kill -CONT $pid
wait $pid
rc=$?
[ $rc -eq $((128 + 15)) ] || _fail "exit $rc after SIGTERM, not death by it"
[ -z "$(find "$DST" -maxdepth 1 -name '*big*')" ] || _fail "SIGTERM left the copy behind"
echo "PASS: $TEST_NAME"
