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
# made once and linked once. Data ending inside a block, and the clones
# the kernel does not make; old data from a snapshot that is not the
# parent, written, or cloned where it is a clone source (-c); a directory
# removed with its files (through its orphan name); new files given inode
# flags (FILEATTR); a file reflinked whole, to its EOF off a block (CLONE);
# times changed (UTIMES with the otime); files removed.
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


# files whose data ends inside a block: what is past their size is not
# written, and a later file clones them only up to their last whole block
# (a file of 5000 bytes was counted 8192 written, +60% on small files)
W=$SRC/w
run_check btrfs -q subvolume create "$W"
for i in $(seq 1 20); do
	random_bytes 5000 "w$i" >"$W/f$i"
done
touch "$W/short"
random_bytes 16384 short >"$W/whole"
run_check xfs_io -c "reflink $W/whole 0 0 8192" "$W/short"
run_check truncate -s 5531 "$W/short"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w1"
within "full: data ending inside a block" "$SRC/w1"

# ... but a file reflinked whole clones the other to its EOF
for i in $(seq 1 20); do
	run_check cp --reflink=always "$W/f$i" "$W/g$i"
done
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w1c"
within "full: files reflinked whole" "$SRC/w1c"

# the kernel's clones: a one-sector file reflinked whole is written (a
# clone from offset 0 of one sector is never sent)
random_bytes 4096 sector >"$W/sector"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w2"
for i in $(seq 1 8); do
	run_check cp --reflink=always "$W/sector" "$W/sector$i"
done
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w3"
within "incremental: one-sector files reflinked" -p "$SRC/w2" "$SRC/w3"

# ... and a new extent whose start no earlier file refers to is written
# whole, though an earlier file refers to its end
touch "$W/tail"
random_bytes 524288 head >"$W/head"
run_check xfs_io -c "reflink $W/head 262144 0 262144" "$W/tail"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w4"
within "incremental: an extent's end reflinked first" -p "$SRC/w3" "$SRC/w4"

# data older than the parent that the parent does not hold (reflinked
# from an older snapshot, after the parent was taken) is written: the
# kernel clones only from the parent and the snapshot sent
random_bytes 1048576 gone >"$W/gone"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w5"
rm "$W/gone"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w6"
run_check cp --reflink=always "$SRC/w5/gone" "$W/back"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w7"
within "incremental: old data the parent lacks" -p "$SRC/w6" "$SRC/w7"

# ... unless a clone source (-c) holds it: cloned from there
within "incremental: old data a clone source holds" -p "$SRC/w6" -c "$SRC/w5" "$SRC/w7"

# a directory removed with the files in it made after it: the kernel
# renames it to its orphan name first, and removes them through it
mkdir "$W/d"
for i in $(seq 1 40); do
	: >"$W/d/f$i"
done
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w8"
rm -r "$W/d"
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w9"
within "incremental: a directory removed with its files" -p "$SRC/w8" "$SRC/w9"

# new files with inode flags: each made, then given them (FILEATTR)
for i in $(seq 1 20); do
	: >"$W/n$i"
	chattr +A "$W/n$i"
done
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w10"
within "incremental: new files with flags" -p "$SRC/w9" "$SRC/w10"

# times changed only: each a UTIMES, which has the otime in a v2 stream
touch "$W"/g*
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w11"
within "incremental: times changed" -p "$SRC/w10" "$SRC/w11"

# files removed, no directory among them (no orphan name to look up)
rm "$W"/g1 "$W"/g2
run_check btrfs -q subvolume snapshot -r "$W" "$SRC/w12"
within "incremental: files removed" -p "$SRC/w11" "$SRC/w12"
