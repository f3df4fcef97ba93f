#!/bin/bash
# Benchmark resumed receives on the corpora of bench/copy.sh (loopback
# images in /dev/shm, compress-force=zstd). For each corpus and round:
#   whole:   encio send | encio receive -s, uninterrupted;
#   cut:     the same stream cut at 50% (head -c), into encio receive -s;
#   resume:  encio send -t TOKEN | encio receive -s, after the cut.
# Each on a fresh destination (the cut and its resume on the same one),
# caches dropped, sync included, every result checked with diff -r. The
# table gives the median times, the bytes the resume moved against the
# whole stream, and cut + resume against the whole transfer. The cost of
# -s's checkpoints themselves is measured by bench/stream.sh.
#
# usage: bench/resume.sh [ENCIO] [ROUNDS]   (needs root; ~10 GiB of free
#                                            memory; ROUNDS defaults to 3)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}

source "$top/bench/corpus.sh"
declare -A BYTES

run_one()
{
	local corpus=$1 snap=$SRC/$1-snap size token
	size=$("$ENCIO" -q send "$snap" | wc -c)
	loopback_reformat dst
	run_start
	"$ENCIO" -q send "$snap" | "$ENCIO" -q receive -s "$DST" || echo "whole receive failed" >&2
	run_end "$corpus-whole"
	printf '  %-6s %-8s %7s s\n' "$corpus" whole "$RUN_T"
	loopback_reformat dst
	run_start
	"$ENCIO" -q send "$snap" 2>/dev/null | head -c $((size / 2)) |
		"$ENCIO" -q receive -s "$DST" 2>/dev/null && echo "the cut stream was received" >&2
	run_end "$corpus-cut"
	printf '  %-6s %-8s %7s s\n' "$corpus" cut "$RUN_T"
	token=$("$ENCIO" receive --resume-token "$DST/$corpus-snap") || { echo "no token" >&2; return; }
	run_start
	"$ENCIO" -q send -t "$token" | tee >(wc -c >"$work/resumed-bytes") |
		"$ENCIO" -q receive -s "$DST" || echo "resume failed" >&2
	run_end "$corpus-resume"
	sleep 0.2
	BYTES[$corpus]+="$(awk -v r="$(cat "$work/resumed-bytes")" -v s="$size" 'BEGIN { printf "%.4f", r / s }') "
	printf '  %-6s %-8s %7s s   %s of %s stream bytes\n' "$corpus" resume "$RUN_T" "$(cat "$work/resumed-bytes")" "$size"
	diff -r --no-dereference "$snap" "$DST/$corpus-snap" >/dev/null ||
		echo "  WARNING: $corpus: the resumed receive differs from SRC" >&2
}

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (fresh destination, caches dropped, sync included)"
for c in many big; do
	for ((r = 0; r < ROUNDS; r++)); do
		run_one "$c"
	done
done

echo
echo "Median of $ROUNDS rounds."
echo
echo "| corpus | whole (receive -s) | cut at 50% | resume | resumed bytes / whole stream | cut + resume / whole |"
echo "|---|---|---|---|---|---|"
for c in many big; do
	awk -v c="$c" -v w="$(med "${TIMES[$c-whole]}")" -v x="$(med "${TIMES[$c-cut]}")" \
		-v r="$(med "${TIMES[$c-resume]}")" -v b="$(med "${BYTES[$c]}")" \
		'BEGIN { printf "| %s | %.2f s | %.2f s | %.2f s | %.1f%% | %.2fx |\n", c, w, x, r, b * 100, (x + r) / w }'
done
