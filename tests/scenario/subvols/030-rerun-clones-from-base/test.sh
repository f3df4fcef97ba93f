#!/bin/bash
# copy -r --subvolumes stopped while it copies a subvolume nested in a
# writable one (vol/w), after vol's copy: the snapshots it made in vol for
# that run moved vol's ctransid, so the rerun plans s2 (taken of vol as it
# is) before vol, as the difference from s1: the data s2 and vol share went
# into DEST twice, once in vol's copy and once in s2's (random seed 168:
# +2.9%, cut at 0.357 s). vol's copy holds its base, unchanged since
# marked: the base is a clone source of s2's difference, the receiver told
# of the copy that holds it. DEST then takes what SRC takes.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
random_bytes 4000000 old >"$SRC/vol/old"
run_check btrfs -q subvolume create "$SRC/vol/w"
for i in $(seq -w 1 300); do random_bytes 60000 "w$i" >"$SRC/vol/w/f$i"; done
mkdir "$SRC/snaps"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s1"
sync
random_bytes 6000000 new >"$SRC/vol/new"
# vol's last change in s2's transaction: planned together, vol first
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s2"
sync

_log "the first run, killed while it copies vol/w"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" &
pid=$!
until [ -e "$DST/vol/.w.encio-partial/f010" ]; do
	kill -0 $pid 2>/dev/null && continue
	wait $pid
	_not_run "the copy ended before vol/w was under way"
done
kill -KILL $pid
wait $pid
[ -e "$DST/snaps/s2" ] && _not_run "s2 was copied before the kill"

"$ENCIO" copy -rT --subvolumes -v "$SRC" "$DST" >"$TEST_TMP/out" 2>&1 ||
	_fail "the rerun: $(cat "$TEST_TMP/out")"
cat "$TEST_TMP/out"
for f in old new; do
	cmp "$SRC/snaps/s2/$f" "$DST/snaps/s2/$f" || _fail "s2/$f differs"
	cmp "$SRC/vol/$f" "$DST/vol/$f" || _fail "vol/$f differs"
done
sync -f "$SRC"
sync -f "$DST"
src_du=$(disk "$SRC/vol" "$SRC/vol/w" "$SRC/snaps/s1" "$SRC/snaps/s2")
dst_du=$(disk "$DST/vol" "$DST/vol/w" "$DST/snaps/s1" "$DST/snaps/s2")
within "$dst_du" "$src_du" || _fail "DEST takes $dst_du bytes, SRC $src_du"
echo "PASS: $TEST_NAME"
