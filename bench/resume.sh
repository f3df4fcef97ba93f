#!/bin/bash
# Benchmark resumed transfers on the corpora of bench/copy.sh (loopback
# images in /dev/shm, compress-force=zstd). For each corpus and round:
#   whole:    encio send | encio receive -s, uninterrupted;
#   send:     encio send > /dev/null, the full stream's sending alone;
# and for each cut (50% and 90% of the stream, CUTS to change them):
#   cut:      the stream cut there (head -c), into encio receive -s;
#   send -t:  encio send -t TOKEN > /dev/null, the resume's sending alone;
#   resume:   encio send -t TOKEN | encio receive -s, after the cut.
# Each transfer on a fresh destination (a cut and its resume on the same
# one), every run with caches dropped, receives with their sync, every
# result checked with diff -r. The table gives median times, the bytes the
# resume moved against the whole stream, the resume's sending against a
# full one's and the resumed transfer against the whole one. The cost of
# -s's checkpoints themselves is measured by bench/stream.sh.
#
# usage: bench/resume.sh [ENCIO] [ROUNDS]   (needs root; ~10 GiB of free
#                                            memory; ROUNDS defaults to 3)
# Environment: ENCIO_BASE=PATH runs another encio build's send -t (and
# its cut, with its own receive) in the same rounds too: a change against
# the version before it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
CUTS=${CUTS:-50 90}
ENCIO_BASE=${ENCIO_BASE:-}
[ -z "$ENCIO_BASE" ] || [ -x "$ENCIO_BASE" ] || { echo "no encio at ENCIO_BASE=$ENCIO_BASE" >&2; exit 2; }

source "$top/bench/corpus.sh"
declare -A BYTES

# run_cut CORPUS CUT SIZE ENCIO KEY: with ENCIO, the stream cut at CUT%,
# its send -t alone, and the resume (times under KEY)
run_cut()
{
	local corpus=$1 cut=$2 snap=$SRC/$1-snap size=$3 e=$4 k=$5 token
	loopback_reformat dst
	run_start
	"$e" -q send "$snap" 2>/dev/null | head -c $((size * cut / 100)) |
		"$e" -q receive -s "$DST" 2>/dev/null && echo "the cut stream was received" >&2
	run_end "$corpus-${k}cut$cut"
	printf '  %-6s %-16s %7s s\n' "$corpus" "${k}cut $cut%" "$RUN_T"
	token=$("$e" receive --resume-token "$DST/$corpus-snap") || { echo "no token" >&2; return; }
	run_start
	"$e" -q send -t "$token" >/dev/null || echo "send -t failed" >&2
	run_end "$corpus-${k}sendt$cut"
	printf '  %-6s %-16s %7s s\n' "$corpus" "${k}send -t $cut%" "$RUN_T"
	run_start
	"$e" -q send -t "$token" | tee >(wc -c >"$work/resumed-bytes") |
		"$e" -q receive -s "$DST" || echo "resume failed" >&2
	run_end "$corpus-${k}resume$cut"
	sleep 0.2
	[ -n "$k" ] ||
		BYTES[$corpus-$cut]+="$(awk -v r="$(cat "$work/resumed-bytes")" -v s="$size" 'BEGIN { printf "%.4f", r / s }') "
	printf '  %-6s %-16s %7s s   %s of %s stream bytes\n' "$corpus" "${k}resume $cut%" "$RUN_T" "$(cat "$work/resumed-bytes")" "$size"
	diff -r --no-dereference "$snap" "$DST/$corpus-snap" >/dev/null ||
		echo "  WARNING: $corpus: the receive resumed at $cut% ($e) differs from SRC" >&2
}

run_one()
{
	local corpus=$1 snap=$SRC/$1-snap size cut
	size=$("$ENCIO" -q send "$snap" | wc -c)
	loopback_reformat dst
	run_start
	"$ENCIO" -q send "$snap" | "$ENCIO" -q receive -s "$DST" || echo "whole receive failed" >&2
	run_end "$corpus-whole"
	printf '  %-6s %-12s %7s s\n' "$corpus" whole "$RUN_T"
	run_start
	"$ENCIO" -q send "$snap" >/dev/null || echo "send failed" >&2
	run_end "$corpus-send"
	printf '  %-6s %-12s %7s s\n' "$corpus" send "$RUN_T"
	for cut in $CUTS; do
		run_cut "$corpus" "$cut" "$size" "$ENCIO" ""
		[ -z "$ENCIO_BASE" ] || run_cut "$corpus" "$cut" "$size" "$ENCIO_BASE" base-
	done
}

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (caches dropped before each run, receives' sync included)"
for c in many big; do
	for ((r = 0; r < ROUNDS; r++)); do
		run_one "$c"
	done
done

echo
echo "Median of $ROUNDS rounds."
echo
echo "| corpus | cut at | send (full) | send -t | send -t / send | whole (receive -s) | cut | resume | resume / whole | resumed bytes / whole stream |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in many big; do
	for cut in $CUTS; do
		awk -v c="$c" -v k="$cut" -v s="$(med "${TIMES[$c-send]}")" -v t="$(med "${TIMES[$c-sendt$cut]}")" \
			-v w="$(med "${TIMES[$c-whole]}")" -v x="$(med "${TIMES[$c-cut$cut]}")" \
			-v r="$(med "${TIMES[$c-resume$cut]}")" -v b="$(med "${BYTES[$c-$cut]}")" \
			'BEGIN { printf "| %s | %s%% | %.2f s | %.2f s | %.0f%% | %.2f s | %.2f s | %.2f s | %.0f%% | %.1f%% |\n", c, k, s, t, t / s * 100, w, x, r, r / w * 100, b * 100 }'
	done
done
if [ -n "$ENCIO_BASE" ]; then
	echo
	echo "ENCIO_BASE in the same rounds (its send -t and resume against this build's full send and whole):"
	echo
	echo "| corpus | cut at | base send -t | / send | base resume | / whole |"
	echo "|---|---|---|---|---|---|"
	for c in many big; do
		for cut in $CUTS; do
			awk -v c="$c" -v k="$cut" -v s="$(med "${TIMES[$c-send]}")" -v t="$(med "${TIMES[$c-base-sendt$cut]}")" \
				-v w="$(med "${TIMES[$c-whole]}")" -v r="$(med "${TIMES[$c-base-resume$cut]}")" \
				'BEGIN { printf "| %s | %s%% | %.2f s | %.0f%% | %.2f s | %.0f%% |\n", c, k, t, t / s * 100, r, r / w * 100 }'
		done
	done
fi
