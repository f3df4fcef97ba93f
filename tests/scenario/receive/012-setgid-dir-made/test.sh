#!/bin/bash
# A directory made set-gid by the stream, then a file made in it: the file
# takes the directory's group when it is made, and the stream's chown gives
# it its own; encio receive, knowing the file fresh, must not take it for
# one of its own group (it skipped the chown when it read the directory's
# mode before the chmod).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M
SRC=$MNT
make_btrfs dst 256M
DST=$MNT
mkdir "$DST/b" "$DST/e"

run_check btrfs -q subvolume create "$SRC/v"
chown -h 65534:100 "$SRC/v"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
random_bytes 5000 n >"$SRC/v/n"
mkdir "$SRC/v/d"
chmod 2750 "$SRC/v"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

for sender in btrfs encio; do
	into=$DST/${sender:0:1}
	if [ $sender = btrfs ]; then
		btrfs -q send --compressed-data "$SRC/s1" >"$TEST_TMP/s1"
		btrfs -q send --compressed-data -p "$SRC/s1" "$SRC/s2" >"$TEST_TMP/s2"
	else
		"$ENCIO" -q send -f "$TEST_TMP/s1" "$SRC/s1"
		"$ENCIO" -q send -p "$SRC/s1" -f "$TEST_TMP/s2" "$SRC/s2"
	fi || _fail "$sender send failed"
	run_check "$ENCIO" -q receive -f "$TEST_TMP/s1" "$into"
	run_check "$ENCIO" -q receive -f "$TEST_TMP/s2" "$into"
	for f in . n d; do
		want=$(stat -c '%u:%g %a' "$SRC/s2/$f") got=$(stat -c '%u:%g %a' "$into/s2/$f")
		[ "$want" = "$got" ] || _fail "$sender: $f is $got, the source's $want"
	done
done
