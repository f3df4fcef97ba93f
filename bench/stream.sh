#!/bin/bash
# Benchmark send streams between two btrfs filesystems on loopback images in
# tmpfs (both compress-force=zstd), on the corpora of bench/copy.sh:
#   encio send | encio receive      against  btrfs send --compressed-data | btrfs receive
#   encio receive -f STREAM         against  btrfs receive -f STREAM
#   encio send | encio receive -s   against  encio send | encio receive
#                                   (the cost of resumable receives' checkpoints)
#   encio send --progress | encio receive  against  the same with -q
#                                   (the cost of progress and its estimate)
# (STREAM saved once from btrfs send --compressed-data). Each run starts on
# a fresh destination filesystem with caches dropped, times include the
# final sync, every result is checked with diff -r. The methods take turns
# for ROUNDS rounds; the table gives median times, ratios (btrfs-progs /
# encio) and the median busy CPU time of the whole machine, then the peak
# RSS of each encio side, and each round's ratios (its runs are back to
# back: the steadier view on a machine whose speed drifts over minutes).
#
# usage: bench/stream.sh [ENCIO] [ROUNDS]   (needs root; ~10 GiB of free
#                                            memory; ROUNDS defaults to 3)
# Environment: ENCIO_BASE=PATH times another encio build's send | receive
# and send --progress | receive in the same rounds too (base-pipe,
# base-progress: a change against the version before). METHODS="M..." runs
# only those methods (encio-pipe always: the others are put against it).
# CHECKPOINT_OFTEN=SIZE times receive -s --checkpoint SIZE too (often:
# many checkpoints, whose number the receive's -v lines give, so that
# the cost of one is measured, and with it the bound at 1 GiB or 10 s).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
ENCIO_BASE=${ENCIO_BASE:-}
[ -z "$ENCIO_BASE" ] || [ -x "$ENCIO_BASE" ] || { echo "no encio at ENCIO_BASE=$ENCIO_BASE" >&2; exit 2; }
CHECKPOINT_OFTEN=${CHECKPOINT_OFTEN:-}
ALL_METHODS="encio-pipe btrfs-pipe encio-file btrfs-file encio-resumable encio-progress${ENCIO_BASE:+ base-pipe base-progress}${CHECKPOINT_OFTEN:+ encio-often}"
METHODS=${METHODS:-$ALL_METHODS}
for m in $METHODS; do
	[[ " $ALL_METHODS " == *" $m "* ]] || { echo "unknown method $m (methods: $ALL_METHODS)" >&2; exit 2; }
done
[[ " $METHODS " == *" encio-pipe "* ]] || METHODS="encio-pipe $METHODS"
has_method() { [[ " $METHODS " == *" $1 "* ]]; }

source "$top/bench/corpus.sh"
declare -A CKPTS

run_one()
{
	local corpus=$1 method=$2 snap=$SRC/$1-snap stream=$work/$1.stream
	loopback_reformat dst
	run_start
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
	base-pipe)
		"$ENCIO_BASE" -q send "$snap" | "$ENCIO_BASE" -q receive "$DST" ||
			echo "base encio send|receive failed" >&2
		;;
	base-progress)
		"$ENCIO_BASE" send --progress "$snap" 2>/dev/null | "$ENCIO_BASE" -q receive "$DST" ||
			echo "base encio send --progress|receive failed" >&2
		;;
	encio-resumable)
		"$ENCIO" -q send "$snap" | "$ENCIO" -q receive -s "$DST" ||
			echo "encio send|receive -s failed" >&2
		;;
	encio-progress)
		"$ENCIO" send --progress "$snap" 2>/dev/null | "$ENCIO" -q receive "$DST" ||
			echo "encio send --progress|receive failed" >&2
		;;
	encio-often)
		"$ENCIO" -q send "$snap" |
			"$ENCIO" -q receive -s --checkpoint "$CHECKPOINT_OFTEN" --format=json "$DST" \
				>"$work/often.json" || echo "encio send|receive -s --checkpoint failed" >&2
		;;
	encio-file)
		/usr/bin/time -f %M -o "$work/rss-file" "$ENCIO" -q receive -f "$stream" "$DST" ||
			echo "encio receive -f failed" >&2
		;;
	btrfs-file)
		btrfs -q receive -f "$stream" "$DST" || echo "btrfs receive -f failed" >&2
		;;
	esac
	run_end "$corpus-$method"
	[ "$method" != encio-often ] ||
		CKPTS[$corpus]+="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoints"])' \
			"$work/often.json") "
	case $method in
	encio-pipe) RSS+=("$corpus send $(cat "$work/rss-send") KiB, receive $(cat "$work/rss-recv") KiB") ;;
	encio-file) RSS+=("$corpus receive -f $(cat "$work/rss-file") KiB") ;;
	esac
	diff -r --no-dereference "$snap" "$DST/$corpus-snap" >/dev/null ||
		echo "  WARNING: $method on $corpus: result differs from SRC" >&2
	printf '  %-6s %-12s %7s s   cpu %7s s\n' "$corpus" "$method" "$RUN_T" "$RUN_C"
}

if has_method encio-file || has_method btrfs-file; then
	echo "== saving the btrfs send --compressed-data streams"
	for c in many big; do
		btrfs -q send --compressed-data -f "$work/$c.stream" "$SRC/$c-snap" 2>/dev/null || exit 1
		printf '  %-5s %s\n' "$c" "$(du -h "$work/$c.stream" | cut -f1)"
	done
fi

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (fresh destination, caches dropped, sync included)"
# every other round runs the methods in the reverse order: the run after
# a destination was emptied and one after another run differ by more than
# the checkpoints this measures
for c in many big; do
	for ((r = 0; r < ROUNDS; r++)); do
		order=$METHODS
		((r % 2)) && order=$(tr ' ' '\n' <<<"$METHODS" | tac | tr '\n' ' ')
		for m in $order; do
			run_one "$c" "$m"
		done
	done
done

echo
echo "Median of $ROUNDS rounds; cpu: busy CPU time of the whole machine during the run."
if has_method btrfs-pipe && has_method encio-file && has_method btrfs-file; then
	echo
	echo "| corpus | encio send\\|receive | btrfs send\\|receive | ratio | encio receive -f | btrfs receive -f | ratio |"
	echo "|---|---|---|---|---|---|---|"
	for c in many big; do
		awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v b="$(med "${TIMES[$c-btrfs-pipe]}")" \
			-v e="$(med "${TIMES[$c-encio-file]}")" -v f="$(med "${TIMES[$c-btrfs-file]}")" \
			-v ca="$(med "${CPUS[$c-encio-pipe]}")" -v cb="$(med "${CPUS[$c-btrfs-pipe]}")" \
			-v ce="$(med "${CPUS[$c-encio-file]}")" -v cf="$(med "${CPUS[$c-btrfs-file]}")" \
			'BEGIN { printf "| %s | %.2f s (cpu %.2f) | %.2f s (cpu %.2f) | %.2fx | %.2f s (cpu %.2f) | %.2f s (cpu %.2f) | %.2fx |\n", c, a, ca, b, cb, b / a, e, ce, f, cf, f / e }'
	done
fi
echo
# against encio send | encio receive: METHOD LABEL WHAT
against_pipe()
{
	local m=$1 label=$2 what=$3 c

	has_method "$m" || return 0
	for c in many big; do
		awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v s="$(med "${TIMES[$c-$m]}")" -v w="$what" \
			'BEGIN { printf "%s: %s %.2f s, %+.1f%% against encio send | encio receive\n", c, w, s, (s - a) * 100 / a }'
		printf '  %-5s %-13s %s\n' "$c" "$label" "$(round_ratios "${TIMES[$c-encio-pipe]}" "${TIMES[$c-$m]}")"
	done
}
against_pipe encio-resumable "-s" "encio send | encio receive -s (the checkpoints)"
against_pipe encio-progress progress "encio send --progress | encio receive (the progress and its estimate)"
against_pipe base-pipe "base pipe" "ENCIO_BASE send | receive"
against_pipe base-progress "base progress" "ENCIO_BASE send --progress | receive"
if [ -n "$CHECKPOINT_OFTEN" ]; then
	echo
	for c in many big; do
		# per round: (often - plain) / checkpoints, in ms
		per=$(paste <(echo ${TIMES[$c-encio-pipe]} | tr ' ' '\n') \
			<(echo ${TIMES[$c-encio-often]} | tr ' ' '\n') <(echo ${CKPTS[$c]} | tr ' ' '\n') |
			awk '$3 > 0 { printf "%.1f ", ($2 - $1) * 1000 / $3 }')
		awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v s="$(med "${TIMES[$c-encio-often]}")" \
			-v n="$(med "${CKPTS[$c]}")" -v p="$(med "$per")" -v k="$CHECKPOINT_OFTEN" \
			'BEGIN { printf "%s: receive -s --checkpoint %s %.2f s with %d checkpoints, %+.1f%%: %.1f ms a checkpoint (rounds: ", c, k, s, n, (s - a) * 100 / a, p }'
		printf '%s ms)\n' "${per% }"
	done
fi
if has_method btrfs-pipe && has_method encio-file && has_method btrfs-file; then
	echo
	echo "Ratio to encio within each round, round by round:"
	for c in many big; do
		printf '  %-5s pipe     %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-pipe]}" "${TIMES[$c-btrfs-pipe]}")"
		printf '  %-5s file     %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-file]}" "${TIMES[$c-btrfs-file]}")"
	done
fi
echo
echo "encio peak RSS: ${RSS[*]}"
