#!/bin/bash
# copy -r --subvolumes stopped by a full DEST while it copies a subvolume
# whole: the partial it leaves stays private (0700) and marked with its
# source, so that the same command, with room made, goes on with it. The
# root of the partial got SRC's mode at the stop and lost its mark, and
# the rerun refused it as "no partial of encio's".
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@whole"
chmod 0755 "$SRC/@whole"
mkdir "$SRC/@whole/d"
for i in 1 2 3 4; do random_bytes 40000000 "w$i" >"$SRC/@whole/d/f$i"; done
echo small >"$SRC/@whole/a"

make_btrfs dst 400M
DST=$MNT
# leave room for about half of the subvolume
run_check btrfs filesystem sync "$DST"
free=$(df -B1 --output=avail "$DST" | tail -1)
run_check fallocate -l $((free - 90000000)) "$DST/ballast"
if "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m" >"$TEST_TMP/first.out" 2>&1; then
	_fail "the first run fit in DEST"
fi
cat "$TEST_TMP/first.out"
grep -q "No space left on device" "$TEST_TMP/first.out" || _fail "the first run did not stop on ENOSPC"
partial="$DST/m/.@whole.encio-partial"
[ -d "$partial" ] || _fail "no partial left"
mode=$(stat -c %a "$partial")
[ "$mode" = 700 ] || _fail "the stopped partial's root has mode $mode, not 700"
getfattr --absolute-names -n trusted.encio.copy-of "$partial" >/dev/null 2>&1 ||
	_fail "the stopped partial lost its mark"

rm "$DST/ballast"
run_check btrfs filesystem sync "$DST"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m"
diff -r "$SRC/@whole" "$DST/m/@whole" || _fail "@whole differs after the rerun"
mode=$(stat -c %a "$DST/m/@whole")
[ "$mode" = 755 ] || _fail "the copy's root has mode $mode, not SRC's 755"
! getfattr --absolute-names -n trusted.encio.copy-of "$DST/m/@whole" >/dev/null 2>&1 ||
	_fail "the finished copy keeps the partial's mark"
[ ! -e "$partial" ] || _fail "the partial is left after the rerun"
