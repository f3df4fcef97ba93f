#!/bin/bash
# copy -r --subvolumes of a snapshot whose new nocow file shares its data
# with a nocow file of the subvolume copied before: the new file is made
# nocow before the clone into it (a clone between a nocow and a
# copy-on-write file fails), so the move completes with the file nocow
# and its data shared.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v filefrag >/dev/null || _not_run "needs filefrag"

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
touch "$SRC/v/f"
chattr +C "$SRC/v/f"
random_bytes 1000000 f >"$SRC/v/f"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
touch "$SRC/v/g"
chattr +C "$SRC/v/g"
cp --reflink=always "$SRC/v/f" "$SRC/v/g"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

make_btrfs dst 1G
DST=$MNT
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m"
for p in s1/f s2/f s2/g v/g; do
	cmp "$SRC/$p" "$DST/m/$p" || _fail "$p differs"
	[ "$(lsattr "$DST/m/$p" | cut -d' ' -f1 | tr -cd C)" = C ] || _fail "$p is not nocow"
done
[ "$(shared_extents "$DST/m/s2/g")" -gt 0 ] || _fail "s2/g shares nothing"
