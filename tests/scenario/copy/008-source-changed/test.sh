#!/bin/bash
# A source truncated, extended or rewritten (its mtime set back or not)
# while copy or copy -r reads it fails with "file changed as we read it"
# and exit 1, and leaves no copy of it; a rerun copies it.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

SIZE=$((256 << 20))
make_btrfs src 1G ""
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT

# temp_size: the size of the copy of "big" in the making (a temporary, or
# in copy -r's staging directory), empty while none.
temp_size()
{
	find "$DST" -path '*encio-*' -name '*big*' -type f -printf '%s\n' | head -1
}

# changed_copy HOW ARGS...: run encio ARGS, stop it once it has written
# part of the copy, change $SRC/t/big as HOW says, let it go on.
changed_copy()
{
	local how=$1 pid s i rc
	shift
	"$ENCIO" -q "$@" 2>"$TEST_TMP/err" &
	pid=$!
	for ((i = 0; i < 2000; i++)); do
		s=$(temp_size)
		[ -n "$s" ] && [ "$s" -gt 0 ] && break
		sleep 0.005
	done
	kill -STOP $pid
	s=$(temp_size)
	[ -n "$s" ] && [ "$s" -lt $((SIZE / 2)) ] ||
		{ kill -CONT $pid; wait $pid; _fail "the copy ended before it could be stopped"; }
	# In the background: a truncate waits for the reads encio has in
	# flight, which finish only once it runs again.
	case $how in
	truncate) truncate -s $((SIZE / 3)) "$SRC/t/big" & ;;
	append) echo more >>"$SRC/t/big" & ;;
	rewrite) printf 'rewritten' | dd of="$SRC/t/big" bs=1 seek=$((SIZE - 100)) conv=notrunc status=none & ;;
	rewrite-mtime-kept)
		m=$(stat -c %y "$SRC/t/big")
		{
			printf 'rewritten' | dd of="$SRC/t/big" bs=1 seek=$((SIZE - 100)) conv=notrunc status=none
			touch -d "$m" "$SRC/t/big"
		} &
		;;
	esac
	sleep 0.2
	kill -CONT $pid
	wait $!
	wait $pid
	rc=$?
	cat "$TEST_TMP/err"
	[ $rc -eq 1 ] || _fail "$how: exit $rc, not 1"
	grep -q "cannot copy '$SRC/t/big': file changed as we read it" "$TEST_TMP/err" ||
		_fail "$how: no message naming the changed file"
}

for how in truncate append rewrite rewrite-mtime-kept; do
	rm -rf "$SRC/t" "$DST"/*
	mkdir "$SRC/t"
	random_bytes $SIZE "$how" >"$SRC/t/big"
	echo small >"$SRC/t/small"
	sync

	_log "copy, source $how"
	changed_copy $how copy "$SRC/t/big" "$DST/"
	left=$(find "$DST" -name '*big*')
	[ -z "$left" ] || _fail "copy, $how: left $left"

	_log "copy -r, source $how"
	random_bytes $SIZE "$how" >"$SRC/t/big"
	sync
	changed_copy $how copy -r "$SRC/t" "$DST/tree"
	left=$(find "$DST" -name '*big*')
	[ -z "$left" ] || _fail "copy -r, $how: left $left"
	# A rerun into the copy (-T) completes it.
	run_check "$ENCIO" -q copy -r -T "$SRC/t" "$DST/tree"
	cmp "$SRC/t/big" "$DST/tree/big" || _fail "copy -r, $how: rerun differs"
	cmp "$SRC/t/small" "$DST/tree/small" || _fail "copy -r, $how: small differs"
done
echo "PASS: $TEST_NAME"
