#!/bin/bash
# Benchmark whole-tree copies between two btrfs filesystems on loopback
# images in tmpfs, both mounted compress-force=zstd:
#   encio copy -r, btrfs send --compressed-data | btrfs receive,
#   btrfs send | btrfs receive (v1), cp -a
# on two corpora: "many files" (copies of /usr/share, /usr/bin and
# /usr/lib/x86_64-linux-gnu) and "big files" (a tar of that corpus and a
# 3 GiB sparse file holding 200 MiB of data). Caches are dropped before
# each run, each result is checked against the source (diff -r), times
# include the final sync. Prints a table: time, ratio to encio, and
# encio's peak RSS (/usr/bin/time -f %M).
#
# usage: bench/copy.sh [ENCIO]   (needs root; ~6 GiB of free memory)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO (bash scripts/build.sh build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

source "$top/bench/corpus.sh"

declare -A T
RSS=()
clear_dst() { rm -rf "${DST:?}"/* 2>/dev/null; btrfs -q subvolume delete "$DST"/*-snap >/dev/null 2>&1; rm -rf "${DST:?}"/*; sync; }

run_one()
{
	local corpus=$1 method=$2 t0 t1 out
	clear_dst
	drop
	t0=$(now)
	case $method in
	encio)
		/usr/bin/time -f %M -o "$work/rss" "$ENCIO" -q copy -r "$SRC/$corpus-snap" "$DST/" || echo "encio failed" >&2
		out=$DST/$corpus-snap
		;;
	send-compressed)
		btrfs -q send --compressed-data "$SRC/$corpus-snap" 2>/dev/null | btrfs -q receive "$DST" || echo "receive failed" >&2
		out=$DST/$corpus-snap
		;;
	send-v1)
		btrfs -q send "$SRC/$corpus-snap" 2>/dev/null | btrfs -q receive "$DST" || echo "receive failed" >&2
		out=$DST/$corpus-snap
		;;
	cp-a)
		cp -a "$SRC/$corpus-snap" "$DST/"
		out=$DST/$corpus-snap
		;;
	esac
	sync
	t1=$(now)
	T[$corpus-$method]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	[ "$method" = encio ] && RSS+=("$corpus $(cat "$work/rss") KiB")
	diff -r --no-dereference "$SRC/$corpus-snap" "$out" >/dev/null || echo "  WARNING: $method on $corpus: result differs from SRC" >&2
	printf '  %-6s %-16s %7s s\n' "$corpus" "$method" "${T[$corpus-$method]}"
}

methods="encio send-compressed send-v1 cp-a"
echo "== timing (caches dropped before each, sync included)"
for c in many big; do
	for m in $methods; do
		run_one "$c" "$m"
	done
done

echo
echo "| method | many files (s) | ratio | big files (s) | ratio |"
echo "|---|---|---|---|---|"
for m in $methods; do
	awk -v m="$m" -v a="${T[many-$m]}" -v ea="${T[many-encio]}" -v b="${T[big-$m]}" -v eb="${T[big-encio]}" \
		'BEGIN { printf "| %s | %.2f | %.2fx | %.2f | %.2fx |\n", m, a, a / ea, b, b / eb }'
done
echo
echo "encio peak RSS: ${RSS[*]}"
