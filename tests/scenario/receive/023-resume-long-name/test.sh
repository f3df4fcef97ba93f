#!/bin/bash
# receive -s of a subvolume whose name is 235 bytes long (btrfs receive
# takes up to 255): received whole, and cut and resumed, with nothing of
# encio's left after.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
random_bytes 3000000 v1 >"$SRC/v/f"
n=$(printf 'n%.0s' $(seq 1 235))
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/$n"

mkdir "$DST/a" "$DST/b"
"$ENCIO" -q send "$SRC/$n" | "$ENCIO" -q receive -s "$DST/a" || _fail "receive -s of a 235-byte name"
diff -r "$SRC/$n" "$DST/a/$n" || _fail "the subvolume differs"
[ "$(ls -A "$DST/a")" = "$n" ] || _fail "DEST holds $(ls -A "$DST/a")"

size=$("$ENCIO" -q send "$SRC/$n" | wc -c)
"$ENCIO" -q send "$SRC/$n" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/b" 2>/dev/null && _fail "a cut stream received"
token=$("$ENCIO" receive --resume-token "$DST/b/$n") || _fail "no token"
"$ENCIO" -q send -t "$token" "$SRC/$n" | "$ENCIO" -q receive -s "$DST/b" || _fail "the resume failed"
diff -r "$SRC/$n" "$DST/b/$n" || _fail "the resumed subvolume differs"
[ "$(ls -A "$DST/b")" = "$n" ] || _fail "DEST holds $(ls -A "$DST/b")"
exit 0
