#!/bin/bash
# copy --subvolumes makes its snapshot, base and partial beside a
# subvolume as .NAME.encio-snapshot, .NAME.encio-base and
# .NAME.encio-partial: for a name near 255 bytes those are no names, and
# the move failed (File name too long). Such a name is cut and given a
# hash of the whole (the same for the same name): the move and its rerun
# go on, and the temporaries are still left out of the copy.
source "$(dirname "$0")/../../../common.sh"
require_root

long=$(printf 'L%.0s' $(seq 1 250))
make_btrfs src 512M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/$long"
echo one >"$SRC/$long/f"
run_check btrfs -q subvolume snapshot -r "$SRC/$long" "$SRC/snap"
make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST"
diff -r "$SRC/$long" "$DST/$long" || _fail "the long-named subvolume differs"
ls -a "$SRC" | grep -q "~[0-9a-f]\{16\}\.encio-base$" || _fail "no base kept under a cut name"
echo two >>"$SRC/$long/f"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST"
diff -r "$SRC/$long" "$DST/$long" || _fail "the rerun's copy differs"
# the base is encio's, not copied as a subvolume of its own
! ls -a "$DST" | grep -q "encio" || _fail "a temporary copied: $(ls -a "$DST" | grep encio)"
run_check "$ENCIO" -q copy -rT --subvolumes --final "$SRC" "$DST"
! ls -a "$SRC" | grep -q "encio" || _fail "a temporary left in SRC after --final"
