#!/bin/bash
# Peak memory of keeping data shared, on a tree with a million shared
# references: 1000 files of 125 separate 4 KiB extents each (random data,
# a hole between extents so that none merge), and 7 reflinked copies of
# each, in one subvolume snapshotted read-only (125,000 extents, 1,000,000
# references). Prints encio copy -r's and encio send's peak RSS
# (/usr/bin/time %M), their times, and DEST's disk usage against SRC's
# (compsize). Not a timed test: the figure is memory, with time beside it.
#
# usage: bench/shared-rss.sh [ENCIO]   (needs root, compsize, ~2 GiB of
#                                       free memory)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO" >&2; exit 1; }
command -v compsize >/dev/null || { echo "needs compsize" >&2; exit 1; }
source "$top/scripts/loopback.sh"

loopback_init encio-bench-rss
loopback_image src 3G compress-force=zstd
loopback_image dst 3G compress-force=zstd
SRC=$work/src DST=$work/dst

echo "== 1000 files x 125 extents, 7 reflinked copies of each"
btrfs -q subvolume create "$SRC/sv" >/dev/null
python3 - "$SRC/sv" <<'PY'
import os, sys
d = sys.argv[1]
block = os.urandom(8192)
for i in range(1000):
    fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT, 0o644)
    for j in range(125):
        os.pwrite(fd, block[j * 8:j * 8 + 4096], j * 8192)
    os.close(fd)
PY
sync
for i in $(seq 0 999); do
	for k in 1 2 3 4 5 6 7; do
		cp --reflink=always "$SRC/sv/f$i" "$SRC/sv/f$i.r$k"
	done
done
sync
btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/snap" >/dev/null
refs=$("$ENCIO" list -r --format=json "$SRC/snap" 2>/dev/null |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["refs"])' 2>/dev/null || echo "?")
echo "  references: $refs"

disk() { compsize -b "$1" | awk '$1 == "TOTAL" { print $3 }'; }
drop
/usr/bin/time -f "%M %e" -o "$work/copy.t" "$ENCIO" -q copy -r "$SRC/snap" "$DST/" ||
	echo "copy failed" >&2
sync
diff -r "$SRC/snap" "$DST/snap" >/dev/null || echo "  WARNING: the copy differs from SRC" >&2
read -r rss secs <"$work/copy.t"
printf '  encio copy -r: peak RSS %s KiB, %s s; disk %s of SRC'"'"'s %s bytes\n' \
	"$rss" "$secs" "$(disk "$DST/snap")" "$(disk "$SRC/snap")"
drop
/usr/bin/time -f "%M %e" -o "$work/send.t" "$ENCIO" -q send -f "$work/stream" "$SRC/snap" ||
	echo "send failed" >&2
read -r rss secs <"$work/send.t"
printf '  encio send: peak RSS %s KiB, %s s; stream %s bytes\n' "$rss" "$secs" \
	"$(stat -c %s "$work/stream")"
