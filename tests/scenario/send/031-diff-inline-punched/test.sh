#!/bin/bash
# encio diff of a file whose inline extent, its data starting with zero
# bytes, was punched away: the parent had data there, so the range is a
# change, as the kernel's difference says (an inline item's first data
# bytes are no disk address, and zeros there do not make it a hole).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
{ head -c 16 /dev/zero; head -c 1514 /dev/urandom; } >"$SRC/v/f"
echo other >"$SRC/v/g"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/a"
run_check fallocate -p -o 0 -l 5470 "$SRC/v/f"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/b"

out=$("$ENCIO" diff -v "$SRC/a" "$SRC/b") || _fail "encio diff failed"
echo "$out"
grep -qxE "M	F	$SRC/b/f	data 0\+1530(,times)?" <<<"$out" || _fail "the punched inline data is not a change: $out"
run_check python3 "$TOP_SRCDIR/tests/random/difftest.py" diff-compare "$ENCIO" "$SRC/a" "$SRC/b"
_log "ok"
