#!/bin/bash
# A single-file copy stopped by SIGINT or SIGTERM removes its temporary,
# says so and dies of the signal; a later copy to the same name removes the
# temporaries that copies killed outright left behind, and only those.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G ""
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT
random_bytes $((384 << 20)) big >"$SRC/big"
sync

# temp_size: the size of the copy's temporary in DST, empty while none.
temp_size()
{
	find "$DST" -maxdepth 1 -name '.big.encio-*' -printf '%s\n' | head -1
}

for sig in INT TERM; do
	_log "SIG$sig during a copy"
	# A background job of a script starts with SIGINT ignored: not this one.
	env --default-signal=INT "$ENCIO" -q copy "$SRC/big" "$DST/" 2>"$TEST_TMP/err" &
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
	kill -$sig $pid
	kill -CONT $pid
	wait $pid
	rc=$?
	cat "$TEST_TMP/err"
	[ $rc -eq $((128 + $(kill -l $sig))) ] || _fail "exit $rc after SIG$sig, not death by it"
	grep -q "interrupted" "$TEST_TMP/err" || _fail "no message after SIG$sig"
	left=$(find "$DST" -maxdepth 1 -name '*big*')
	[ -z "$left" ] || _fail "left after SIG$sig: $left"
done

_log "a rerun removes the temporaries of dead copies"
true &
dead=$!
wait $dead
sleep 1000 &
live=$!
echo stale >"$DST/.big.encio-$dead-0"
echo stale >"$DST/.big.encio-$dead-17"
echo live >"$DST/.big.encio-$live-0"
echo other >"$DST/.other.encio-$dead-0"
mkdir "$DST/.big.encio-$dead-3"
run_check "$ENCIO" -q copy "$SRC/big" "$DST/"
cmp "$SRC/big" "$DST/big" || _fail "copy differs"
kill $live
wait $live 2>/dev/null
[ ! -e "$DST/.big.encio-$dead-0" ] && [ ! -e "$DST/.big.encio-$dead-17" ] ||
	_fail "stale temporaries kept: $(ls -a "$DST")"
[ -e "$DST/.big.encio-$live-0" ] || _fail "a live copy's temporary removed"
[ -e "$DST/.other.encio-$dead-0" ] || _fail "another name's temporary removed"
[ -d "$DST/.big.encio-$dead-3" ] || _fail "a directory removed"
echo "PASS: $TEST_NAME"
