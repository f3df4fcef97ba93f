#!/bin/bash
# Incremental receives run at once into one filesystem (as xfstests'
# btrfs/152 runs them, quotas on) all finish: each marks its subvolume
# received in a transaction it names, committing the one before, and
# marks at once committed each other's until they gave up (EAGAIN).
source "$(dirname "$0")/../../../common.sh"
require_root
make_btrfs fs 2G ""
M=$MNT
btrfs quota enable "$M"
for s in s1 s2 r1 r2 r3 r4; do btrfs -q subvolume create "$M/$s"; done
mkdir "$M/s1/.snap" "$M/s2/.snap"
touch "$M/s1/foo" "$M/s2/foo"
btrfs -q subvolume snapshot -r "$M/s1" "$M/s1/.snap/1"
btrfs -q subvolume snapshot -r "$M/s2" "$M/s2/.snap/1"
for r in r1 r2; do "$ENCIO" -q send "$M/s1/.snap/1" | "$ENCIO" -q receive "$M/$r" || _fail "first receive"; done
for r in r3 r4; do "$ENCIO" -q send "$M/s2/.snap/1" | "$ENCIO" -q receive "$M/$r" || _fail "first receive"; done
fails=0
for i in $(seq 1 10); do
	n=$((i + 1))
	btrfs -q subvolume snapshot -r "$M/s1" "$M/s1/.snap/$n"
	btrfs -q subvolume snapshot -r "$M/s2" "$M/s2/.snap/$n"
	pids=
	for r in r1 r2; do ("$ENCIO" -q send -p "$M/s1/.snap/$i" "$M/s1/.snap/$n" | "$ENCIO" -q receive "$M/$r") & pids="$pids $!"; done
	for r in r3 r4; do ("$ENCIO" -q send -p "$M/s2/.snap/$i" "$M/s2/.snap/$n" | "$ENCIO" -q receive "$M/$r") & pids="$pids $!"; done
	for p in $pids; do wait $p || fails=$((fails + 1)); done
done
echo "failed receives: $fails"
[ "$fails" -eq 0 ] || _fail "$fails of 40 parallel receives failed"
