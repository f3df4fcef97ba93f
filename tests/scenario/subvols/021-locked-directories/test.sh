#!/bin/bash
# Writable subvolumes in append-only (+a) and immutable (+i) directories,
# nested in a subvolume: copy --subvolumes makes, renames and deletes its
# snapshots and bases beside them in SRC, puts their copies in place in
# DEST (whose directories have SRC's flags), replaces a copy whose source
# changed and removes what stands for a nested subvolume in a snapshot.
# Each of those lifts the directory's flag for that change alone and puts
# it back. Found by the random tester (seeds 220 and 227: "cannot delete
# the snapshot", "cannot snapshot", "cannot rename the copy", EPERM).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/app" "$SRC/vol/imm"
run_check btrfs -q subvolume create "$SRC/vol/app/w"
run_check btrfs -q subvolume create "$SRC/vol/imm/x"
random_bytes 70000 w >"$SRC/vol/app/w/f"
random_bytes 70000 x >"$SRC/vol/imm/x/f"
echo kept >"$SRC/vol/app/log"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s1"
chattr +a "$SRC/vol/app"
chattr +i "$SRC/vol/imm"

# flags_of DIR: the i and a flags of app and imm below DIR
flags_of()
{
	lsattr -d "$1/app" "$1/imm" | awk '{ print $1 }' | tr -cd 'ia\n'
}

run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST"
for s in vol/app/w vol/imm/x; do
	diff -r "$SRC/$s" "$DST/$s" || _fail "$s differs after the move"
done
cmp "$SRC/s1/app/log" "$DST/s1/app/log" || _fail "s1's file differs"
[ "$(flags_of "$DST/vol")" = "$(flags_of "$SRC/vol")" ] ||
	_fail "DEST's flags: $(flags_of "$DST/vol"), SRC's: $(flags_of "$SRC/vol")"
[ "$(flags_of "$SRC/vol")" = "$(printf 'a\ni')" ] ||
	_fail "SRC's flags changed: $(flags_of "$SRC/vol")"

# the writable subvolumes change: the rerun replaces their copies
echo more >>"$SRC/vol/app/w/f"
random_bytes 5000 x2 >"$SRC/vol/imm/x/g"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST"
for s in vol/app/w vol/imm/x; do
	diff -r "$SRC/$s" "$DST/$s" || _fail "$s differs after the rerun"
done
run_check "$ENCIO" -q copy -rT --subvolumes --final "$SRC" "$DST"
[ -z "$(find "$SRC" "$DST" -name '*encio*')" ] ||
	_fail "left behind: $(find "$SRC" "$DST" -name '*encio*')"
[ "$(flags_of "$SRC/vol")" = "$(printf 'a\ni')" ] ||
	_fail "SRC's flags changed: $(flags_of "$SRC/vol")"
[ "$(flags_of "$DST/vol")" = "$(printf 'a\ni')" ] ||
	_fail "DEST's flags: $(flags_of "$DST/vol")"
chattr -a -i "$SRC/vol/app" "$SRC/vol/imm" "$DST/vol/app" "$DST/vol/imm"
