#!/bin/bash
# Resumed receives at random moments: for RESUME_SEEDS seeds (default 40;
# A-B for those),
# a stream (a full one, an incremental one, or three subvolumes in one)
# goes into encio receive -s and is cut at a random byte (EOF), or its
# receiver is SIGKILLed at a random moment (DEST then mounted again in one
# of two), up to three times, each time resumed with encio send -t from
# the token. Every result equals the source and the uninterrupted receive
# of the same stream, and nothing of encio's is left beside it.
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests
# RESUME_SEEDS: N (seeds 1 to N) or A-B
SEEDS=${RESUME_SEEDS:-40}
case $SEEDS in
*-*) FIRST=${SEEDS%-*} SEEDS=${SEEDS#*-} ;;
*) FIRST=1 ;;
esac

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 2G
DST=$MNT
DST_LOOP=${_LOOPS[1]}
run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
mkdir -p "$V/a/b" "$V/c"
for i in $(seq 1 60); do compressible $((i * 1500)) >"$V/a/f$i"; done
random_bytes 3000000 r1 >"$V/c/rand"
compressible 2000000 >"$V/a/b/text"
cp --reflink=always "$V/c/rand" "$V/a/rand-clone"
ln -s ../c/rand "$V/a/link"
ln "$V/a/f1" "$V/c/hard"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
random_bytes 1500000 r2 >"$V/a/new"
for i in $(seq 1 20); do echo "changed $i" >>"$V/a/f$((i * 3))"; done
mv "$V/a/b" "$V/c/b-moved"
rm "$V/a/f2"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"
compressible 700000 >"$V/c/b-moved/more"
rm -r "$V/a/rand-clone"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s3"

# the stream of KIND, and what it makes
stream() # KIND
{
	case $1 in
	full) "$ENCIO" -q send "$SRC/s1" ;;
	incr) "$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" ;;
	three) "$ENCIO" -q send "$SRC/s1" "$SRC/s2" "$SRC/s3" ;;
	esac
}
made() # KIND
{
	case $1 in
	full) echo s1 ;;
	incr) echo s2 ;;
	three) echo s1 s2 s3 ;;
	esac
}
resume_cmd() # KIND TOKEN
{
	case $1 in
	full | incr) "$ENCIO" -q send -t "$2" ;;
	three) "$ENCIO" -q send -t "$2" "$SRC/s1" "$SRC/s2" "$SRC/s3" ;;
	esac
}

# the subvolumes of KIND not in DIR yet, sent as what DIR has would take them
rest_again() # KIND DIR
{
	local s have=() rest=()
	for s in $(made "$1"); do
		if [ -e "$2/$s" ]; then have+=(-c "$SRC/$s"); else rest+=("$SRC/$s"); fi
	done
	case $1 in
	incr) "$ENCIO" -q send -p "$SRC/s1" "${rest[@]}" ;;
	*) "$ENCIO" -q send "${have[@]}" "${rest[@]}" ;;
	esac
}

mkdir "$DST/whole-full" "$DST/whole-incr" "$DST/whole-three"
stream full | "$ENCIO" -q receive "$DST/whole-full" || _fail "whole full"
stream full | "$ENCIO" -q receive "$DST/whole-incr" || _fail "whole parent"
stream incr | "$ENCIO" -q receive "$DST/whole-incr" || _fail "whole incr"
stream three | "$ENCIO" -q receive "$DST/whole-three" || _fail "whole three"

# cut_once SEED DIR FEED...: the stream FEED prints, cut or its receiver
# killed; 0 if the receive completed all the same
cut_once()
{
	local seed=$1 dir=$2 size how at
	shift 2
	size=$("$@" | wc -c)
	at=$((RANDOM * 32768 + RANDOM))
	at=$((at % size))
	how=$((RANDOM % 3))
	if [ $how -lt 2 ]; then
		echo "seed $seed: cut at $at of $size" >&2
		"$@" | head -c "$at" | "$ENCIO" -q receive -s --checkpoint 64K "$dir" 2>/dev/null
		return
	fi
	at=$((RANDOM % 400))
	echo "seed $seed: receiver killed after ${at} ms of $size" >&2
	("$@" | python3 "$HERE/throttle.py" 20e6 |
		"$ENCIO" -q receive -s --checkpoint 64K "$dir") 2>/dev/null &
	sleep "0.$(printf '%03d' "$at")"
	pkill -KILL -f "receive -s --checkpoint 64K $dir\$"
	wait
	if [ $((RANDOM % 2)) = 0 ]; then
		umount_settled "$DST" && mount "$DST_LOOP" "$DST" || _fail "remount"
	fi
	# done before the kill came
	[ -e "$dir/$LAST" ] && ! ls -A "$dir" | grep -q encio
}

for seed in $(seq "$FIRST" "$SEEDS"); do
	RANDOM=$seed
	kinds=(full incr three)
	kind=${kinds[$((RANDOM % 3))]}
	dir=$DST/t$seed
	LAST=$(made "$kind" | awk '{ print $NF }')
	mkdir "$dir"
	[ "$kind" = incr ] && { stream full | "$ENCIO" -q receive "$dir" || _fail "parent"; }
	done=false
	cut_once "$seed" "$dir" stream "$kind" && done=true
	for round in 1 2 3; do
		$done && break
		# the subvolume whose partial has a record
		name=$(find "$dir" -mindepth 3 -maxdepth 3 -path "$dir/.encio-receive.*/*/record" |
			awk -F/ '{ print $(NF - 1) }')
		if [ -z "$name" ]; then
			# stopped before a subvolume's first checkpoint: nothing
			# kept of it; what is not received yet is sent again,
			# from what is (as clone sources)
			rest_again "$kind" "$dir" | "$ENCIO" -q receive -s "$dir" && done=true
			continue
		fi
		if ! token=$("$ENCIO" receive --resume-token "$dir/$name" 2>"$TEST_TMP/err"); then
			# killed as it finished NAME: complete, the partial
			# dropped (left writable: the user's to check)
			grep -q "before making it read-only" "$TEST_TMP/err" &&
				btrfs property set -ts "$dir/$name" ro true
			grep -q -e "before making it read-only" -e "was complete when it stopped" "$TEST_TMP/err" ||
				_fail "seed $seed: no token for $name: $(cat "$TEST_TMP/err")"
			[ -e "$dir/$LAST" ] && done=true
			continue
		fi
		if [ $round -lt 3 ] && [ $((RANDOM % 3)) = 0 ]; then
			cut_once "$seed" "$dir" resume_cmd "$kind" "$token" && done=true
		else
			resume_cmd "$kind" "$token" | "$ENCIO" -q receive -s "$dir" ||
				_fail "seed $seed ($kind): the resume failed"
			done=true
		fi
	done
	$done || _fail "seed $seed: not complete after three resumes: $(ls -A "$dir" | tr "\n" " ")"
	for s in $(made "$kind"); do
		diff -r --no-dereference "$SRC/$s" "$dir/$s" >/dev/null ||
			_fail "seed $seed ($kind): $s differs from SRC"
		diff -r --no-dereference "$DST/whole-$kind/$s" "$dir/$s" >/dev/null ||
			_fail "seed $seed ($kind): $s differs from the uninterrupted receive"
		python3 "$TOP_SRCDIR/tests/random/difftest.py" compare "$SRC/$s" "$dir/$s" ||
			_fail "seed $seed ($kind): $s metadata differs"
	done
	ls -A "$dir" | grep -q encio && _fail "seed $seed: left $(ls -A "$dir")"
	btrfs -q subvolume delete "$dir"/s* >/dev/null
	rmdir "$dir"
done
_log "seeds $FIRST to $SEEDS resumed"
