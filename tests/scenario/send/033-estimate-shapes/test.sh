#!/bin/bash
# send --progress's estimate of the stream (JSON estimated_bytes) is
# within 10% of it where the data's shape decides what is sent: a full
# send of files that refer to parts of one extent at other offsets (each
# part sent once, then cloned), and incremental sends, whose estimate
# comes from encio diff's difference, of a hole punched (FALLOCATE, or
# WRITEs of zeros on a filesystem that keeps hole items), preallocated
# ranges brought within a file's size (WRITEs of zeros), a preallocated
# file made, and data older than the parent reflinked into a changed file
# (CLONE). On both kinds of filesystem. A new file with two names is
# made once and linked once.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v xfs_io >/dev/null || _not_run "needs xfs_io (xfsprogs)"

field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }

# within NAME SEND-ARGS...: the estimate within 10% of the stream
within()
{
	local name=$1 json est real
	shift
	json=$("$ENCIO" send --progress --format=json -f "$TEST_TMP/s.stream" "$@" 2>/dev/null) ||
		_fail "$name: send --progress failed"
	est=$(field estimated_bytes <<<"$json")
	real=$(field stream_bytes <<<"$json")
	_log "$name: estimated $est, stream $real bytes"
	[ -n "$est" ] && awk -v e="$est" -v r="$real" \
		'BEGIN { d = e - r; if (d < 0) d = -d; exit !(d <= r / 10) }' ||
		_fail "$name: the estimate $est is not within 10% of the stream's $real bytes"
}

n=0
for mkfs in "" "-O ^no-holes"; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	make_btrfs "fs$n" 1G compress=zstd $mkfs
	SRC=$MNT
	run_check btrfs -q subvolume create "$SRC/v"
	V=$SRC/v
	random_bytes 1048576 "a$n" >"$V/a"
	run_check cp --reflink=always "$V/a" "$V/b"
	random_bytes 8192 "b$n" | dd of="$V/b" bs=4096 seek=128 conv=notrunc status=none
	compressible 1500000 >"$V/c"
	random_bytes 800000 "p$n" >"$V/punch"
	echo grow >"$V/grow"
	run_check fallocate -n -o 1048576 -l 1048576 "$V/grow"
	run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

	run_check fallocate -p -o 131072 -l 262144 "$V/punch"
	run_check truncate -s 3M "$V/grow"
	run_check xfs_io -c "reflink $V/c 0 524288 262144" "$V/punch"
	run_check fallocate -l 300000 "$V/pre"
	run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

	within "full${mkfs:+ $mkfs}" "$SRC/s1"
	within "incremental${mkfs:+ $mkfs}" -p "$SRC/s1" "$SRC/s2"
done

# a new file with two names, another's between them in path order: made
# once, linked once (a small stream, where one command more is 10%)
mkdir "$V/a" "$V/z"
echo one >"$V/a/f"
ln "$V/a/f" "$V/z/f"
echo two >"$V/m"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s3"
within "a new file's two names" -p "$SRC/s2" "$SRC/s3"

