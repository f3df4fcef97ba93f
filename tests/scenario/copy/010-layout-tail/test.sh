#!/bin/bash
# The layout around a partial last block is kept: prealloc covering it
# stays prealloc, and a hole in it stays a hole when prealloc lies past
# EOF (copy and copy -r, compared with encio list).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M ""
SRC=$MNT
make_btrfs dst 256M ""
DST=$MNT
mkdir "$SRC/t"

# Data [0, 4K), prealloc [4K, 8K) covering EOF at 5000.
touch "$SRC/t/prealloc-tail"
fallocate -n -o 4096 -l 4096 "$SRC/t/prealloc-tail"
truncate -s 5000 "$SRC/t/prealloc-tail"
printf 'head' | dd of="$SRC/t/prealloc-tail" conv=notrunc status=none
# Data [0, 4K), a hole to EOF at 5000, prealloc [8K, 16K) past EOF.
touch "$SRC/t/hole-tail"
fallocate -n -o 8192 -l 8192 "$SRC/t/hole-tail"
random_bytes 4096 hole | dd of="$SRC/t/hole-tail" conv=notrunc status=none
truncate -s 5000 "$SRC/t/hole-tail"
sync

# layout FILE: offset, length and kind of each range.
layout()
{
	"$ENCIO" list "$1" | awk '$1 ~ /^[0-9]+$/ { print $1, $2, $5 }'
}

for f in prealloc-tail hole-tail; do
	layout "$SRC/t/$f" | grep -q prealloc || _fail "$f: no prealloc in the source"
done
mkdir "$DST/one"
for f in prealloc-tail hole-tail; do
	run_check "$ENCIO" -q copy "$SRC/t/$f" "$DST/one/"
done
run_check "$ENCIO" -q copy -r "$SRC/t" "$DST/tree"
sync
for d in one tree; do
	for f in prealloc-tail hole-tail; do
		cmp "$SRC/t/$f" "$DST/$d/$f" || _fail "$d/$f: content differs"
		a=$(layout "$SRC/t/$f")
		b=$(layout "$DST/$d/$f")
		[ "$a" = "$b" ] || _fail "$d/$f: layout differs: source
$a
copy
$b"
	done
done
echo "PASS: $TEST_NAME"
