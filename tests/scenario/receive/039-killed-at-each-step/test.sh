#!/bin/bash
# receive -s killed at each of its last steps (SIGKILL at the Nth ioctl,
# unlink or rename, through strace's fault injection): whatever it
# leaves is either the subvolume complete (with what is left of its
# partial, no record, for --abort), or a partial whose token resumes it
# to the whole, or nothing of encio's at all. Never a record
# of a partial that names a checkpoint gone (the receive finishing
# dropped its last checkpoint before the record, and a kill between the
# two left a partial no token could resume: "the partial changed since
# its record"); a partial whose subvolume already has its name is
# complete, and the token says so (and, left writable, that it is the
# user's to check).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v strace >/dev/null || _not_run "needs strace"

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/d"
for i in $(seq 1 8); do compressible $((i * 30000)) >"$SRC/v/d/f$i"; done
random_bytes 200000 r1 >"$SRC/v/rand"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
"$ENCIO" -q send -f "$TEST_TMP/stream" "$SRC/s1" || _fail "send"
CALLS=ioctl,unlinkat,renameat,renameat2

# receive -s of the stream into DIR, killed at its Nth call of CALLS
# (none: N 0), the calls it made written to LOG
receive_killed() # DIR N LOG
{
	local inject=()
	[ "$2" -gt 0 ] && inject=(-e inject="$CALLS":signal=KILL:when="$2")
	env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f -qq -e trace="$CALLS" "${inject[@]}" -o "$3" \
		"$ENCIO" -q receive -s --checkpoint 64K -f "$TEST_TMP/stream" "$1" 2>"$TEST_TMP/kill.err"
}

mkdir "$DST/clean"
receive_killed "$DST/clean" 0 "$TEST_TMP/clean.log" || _fail "the receive without a kill failed"
total=$(grep -cv -e '^[0-9]* +++' -e '^[0-9]* ---' "$TEST_TMP/clean.log")
[ "$total" -gt 20 ] || _fail "only $total calls traced"
btrfs -q subvolume delete "$DST/clean/s1" >/dev/null

# the steps of the end: placing, the last checkpoint, the record
resumed=0 placed=0 named=0 whole=0 none=0
for n in $(seq $((total - 24)) "$total"); do
	dir=$DST/k$n
	mkdir "$dir"
	receive_killed "$dir" "$n" "$TEST_TMP/k.log" 2>/dev/null
	name=$(find "$dir" -mindepth 3 -maxdepth 3 -path "$dir/.encio-receive.*/*/record" |
		awk -F/ '{ print $(NF - 1) }')
	if [ -n "$name" ] && ! token=$("$ENCIO" receive --resume-token "$dir/$name" 2>"$TEST_TMP/err"); then
		# killed as it finished: the token says so, and drops the
		# partial; a subvolume left writable is the user's to check
		if grep -q "before making it read-only" "$TEST_TMP/err"; then
			[ "$(btrfs property get -ts "$dir/s1" ro)" = "ro=false" ] ||
				_fail "killed at call $n: said writable, is not"
			btrfs property set -ts "$dir/s1" ro true
			named=$((named + 1))
		else
			grep -q "the receive was complete" "$TEST_TMP/err" ||
				_fail "killed at call $n of $total: a record no token resumes: $(cat "$TEST_TMP/err")"
			placed=$((placed + 1))
		fi
	elif [ -n "$name" ]; then
		"$ENCIO" -q send -t "$token" | "$ENCIO" -q receive -s "$dir" 2>"$TEST_TMP/err" ||
			_fail "killed at call $n: the resume failed: $(cat "$TEST_TMP/err")"
		resumed=$((resumed + 1))
	elif [ -e "$dir/s1" ]; then
		# killed as it dropped its partial, record gone: what is left
		# of it goes with --abort
		if ls -A "$dir" | grep -q encio; then
			"$ENCIO" receive --abort "$dir/s1" ||
				_fail "killed at call $n: --abort of what the partial left"
		fi
		whole=$((whole + 1))
	else
		none=$((none + 1))
		"$ENCIO" -q receive -f "$TEST_TMP/stream" "$dir" || _fail "killed at call $n: receive again"
	fi
	[ "$(btrfs property get -ts "$dir/s1" ro)" = "ro=true" ] ||
		_fail "killed at call $n: s1 not read-only"
	diff -r --no-dereference "$SRC/s1" "$dir/s1" >/dev/null ||
		_fail "killed at call $n: s1 differs from SRC"
	ls -A "$dir" | grep -q encio && _fail "killed at call $n: left $(ls -A "$dir")"
	btrfs -q subvolume delete "$dir/s1" >/dev/null
	rmdir "$dir"
done
_log "$total calls; killed at the last 25: $resumed resumed, $placed complete as the token found, $named left writable at their name, $whole whole, $none left nothing"
echo "PASS: $TEST_NAME"
