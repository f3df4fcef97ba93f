#!/bin/bash
# Benchmark send streams between two btrfs filesystems on loopback images in
# tmpfs (both compress-force=zstd), on the corpora of bench/copy.sh:
#   encio send | encio receive      against  btrfs send --compressed-data | btrfs receive
#   encio receive -f STREAM         against  btrfs receive -f STREAM
# (STREAM saved once from btrfs send --compressed-data). Caches are dropped
# before each run, times include the final sync, every result is checked
# with diff -r. Prints a table with ratios (btrfs-progs / encio) and the
# peak RSS of each encio side.
#
# usage: bench/stream.sh [ENCIO]   (needs root; ~10 GiB of free memory)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO (bash scripts/build.sh build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

source "$top/bench/corpus.sh"

declare -A T
RSS=()
clear_dst()
{
	local v
	for v in "$DST"/*; do
		[ -e "$v" ] || continue
		btrfs property set -ts "$v" ro false 2>/dev/null
		btrfs -q subvolume delete "$v" >/dev/null 2>&1 || rm -rf "$v"
	done
	sync
}

run_one()
{
	local corpus=$1 method=$2 snap=$SRC/$1-snap stream=$work/$1.stream t0 t1
	clear_dst
	drop
	t0=$(now)
	case $method in
	encio-pipe)
		/usr/bin/time -f %M -o "$work/rss-send" "$ENCIO" -q send "$snap" |
			/usr/bin/time -f %M -o "$work/rss-recv" "$ENCIO" -q receive "$DST" ||
			echo "encio send|receive failed" >&2
		;;
	btrfs-pipe)
		btrfs -q send --compressed-data "$snap" 2>/dev/null | btrfs -q receive "$DST" ||
			echo "btrfs send|receive failed" >&2
		;;
	encio-file)
		/usr/bin/time -f %M -o "$work/rss-file" "$ENCIO" -q receive -f "$stream" "$DST" ||
			echo "encio receive -f failed" >&2
		;;
	btrfs-file)
		btrfs -q receive -f "$stream" "$DST" || echo "btrfs receive -f failed" >&2
		;;
	esac
	sync
	t1=$(now)
	T[$corpus-$method]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	case $method in
	encio-pipe) RSS+=("$corpus send $(cat "$work/rss-send") KiB, receive $(cat "$work/rss-recv") KiB") ;;
	encio-file) RSS+=("$corpus receive -f $(cat "$work/rss-file") KiB") ;;
	esac
	diff -r --no-dereference "$snap" "$DST/$corpus-snap" >/dev/null ||
		echo "  WARNING: $method on $corpus: result differs from SRC" >&2
	printf '  %-6s %-12s %7s s\n' "$corpus" "$method" "${T[$corpus-$method]}"
}

echo "== saving the btrfs send --compressed-data streams"
for c in many big; do
	btrfs -q send --compressed-data -f "$work/$c.stream" "$SRC/$c-snap" 2>/dev/null || exit 1
	printf '  %-5s %s\n' "$c" "$(du -h "$work/$c.stream" | cut -f1)"
done

echo "== timing (caches dropped before each, sync included)"
for c in many big; do
	for m in encio-pipe btrfs-pipe encio-file btrfs-file; do
		run_one "$c" "$m"
	done
done

echo
echo "| corpus | encio send\\|receive | btrfs send\\|receive | ratio | encio receive -f | btrfs receive -f | ratio |"
echo "|---|---|---|---|---|---|---|"
for c in many big; do
	awk -v c="$c" -v a="${T[$c-encio-pipe]}" -v b="${T[$c-btrfs-pipe]}" \
		-v e="${T[$c-encio-file]}" -v f="${T[$c-btrfs-file]}" \
		'BEGIN { printf "| %s | %.2f s | %.2f s | %.2fx | %.2f s | %.2f s | %.2fx |\n", c, a, b, b / a, e, f, f / e }'
done
echo
echo "encio peak RSS: ${RSS[*]}"
