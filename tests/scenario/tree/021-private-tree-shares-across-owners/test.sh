#!/bin/bash
# A file of DEST is a clone source for another user's file only where no
# one else could have changed it; but a fresh copy -r builds its tree in a
# staging directory only root can reach until the copy ends, so what it
# wrote there is SRC's: a user's file shares its extents with root's and
# other users' files there as in SRC. (Each was written again: a reflink
# of alice's file into root's took twice the room.) A rerun into a copy
# in place still keeps the rule (test 146).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs fs 1G
S=$MNT/src
mkdir -p "$S/alice" "$S/bob"
chown 4321:4321 "$S/alice"
chown 4322:4322 "$S/bob"
random_bytes 8000000 a >"$S/alice/A"
chown 4321:4321 "$S/alice/A"
cp --reflink=always "$S/alice/A" "$S/root-copy"
cp --reflink=always "$S/alice/A" "$S/bob/B"
chown 4322:4322 "$S/bob/B"
run_check btrfs filesystem sync "$MNT"

first_extent() { filefrag -v "$1" | awk '$1 == "0:" { print $4 }'; }
run_check "$ENCIO" -q copy -r "$S" "$MNT/dst"
cmp "$S/alice/A" "$MNT/dst/alice/A" || _fail "alice's copy differs"
cmp "$S/alice/A" "$MNT/dst/root-copy" || _fail "root's copy differs"
cmp "$S/alice/A" "$MNT/dst/bob/B" || _fail "bob's copy differs"
a=$(first_extent "$MNT/dst/alice/A")
[ -n "$a" ] || _fail "no extent read"
[ "$(first_extent "$MNT/dst/root-copy")" = "$a" ] || _fail "root's file does not share alice's extents"
[ "$(first_extent "$MNT/dst/bob/B")" = "$a" ] || _fail "bob's file does not share alice's extents"
