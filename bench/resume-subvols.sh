#!/bin/bash
# Benchmark what receive -s costs and saves for encio send --subvolumes |
# encio receive, on a history of the "many" corpus (bench/corpus.sh,
# loopback images in /dev/shm, compress-force=zstd): hist/@data and
# SNAPSHOTS read-only snapshots of it (4 by default) with bench/corpus.sh's
# churn between them. For each round, on a fresh destination each:
#   whole:     encio send --subvolumes | encio receive, uninterrupted;
#   whole -s:  the same received with -s (no checkpoint until 1 GiB or
#              10 s of a subvolume's stream);
# and for each cut (CUTS, percent of the stream's bytes; 50 and 90):
#   rerun:     the stream cut there (head -c of it sent to a file, neither
#              timed) into encio receive, then the run that completes it,
#              timed: encio receive --state, encio send --subvolumes
#              --state | encio receive; it sends the subvolume in flight
#              again;
#   resume:    the same with receive -s: the run resumes the subvolume in
#              flight at the byte the cut reached.
# Caches dropped before each timed run, the receive's sync included; the
# last snapshot and @data checked against SRC by manifest after each. The
# table gives median times against whole's and the bytes each completing
# run sent against the whole stream.
#
# usage: bench/resume-subvols.sh [ENCIO] [ROUNDS]   (needs root; ~12 GiB
#                                                    of free memory;
#                                                    ROUNDS 3)
# Environment: CORPUS_MB=N builds "many" from an N MiB sample.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
CUTS=${CUTS:-50 90}
SNAPSHOTS=${SNAPSHOTS:-4}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number" >&2; exit 2; }
[[ $SNAPSHOTS =~ ^[1-9][0-9]*$ ]] || { echo "SNAPSHOTS must be a positive number" >&2; exit 2; }

source "$top/bench/corpus.sh"
set -o pipefail
declare -A BYTES
HIST=$SRC/hist

echo "== the history"
mkdir -p "$HIST/snaps"
btrfs -q subvolume snapshot "$SRC/many" "$HIST/@data" >/dev/null || exit 1
for ((i = 1; i <= SNAPSHOTS; i++)); do
	((i > 1)) && churn "$HIST/@data" "$i"
	btrfs -q subvolume snapshot -r "$HIST/@data" "$HIST/snaps/s$i" >/dev/null || exit 1
done
churn "$HIST/@data" $((SNAPSHOTS + 1))
manifest "$HIST/snaps/s$SNAPSHOTS" >"$work/last.manifest" || exit 1
manifest "$HIST/@data" >"$work/data.manifest" || exit 1
echo "  @data and $SNAPSHOTS snapshots"

check()
{
	manifest "$DST/hist/snaps/s$SNAPSHOTS" | cmp -s - "$work/last.manifest" &&
		manifest "$DST/hist/@data" | cmp -s - "$work/data.manifest" ||
		echo "  WARNING: $1: DEST differs from SRC" >&2
}

# whole [OPT]: an uninterrupted run, received with OPT
whole()
{
	local key=whole${1:+-s}

	loopback_reformat dst
	btrfs subvolume sync "$SRC" >/dev/null
	run_start
	"$ENCIO" -q send --subvolumes "$HIST" | "$ENCIO" -q receive ${1:+"$1"} "$DST/hist" ||
		echo "  WARNING: $key failed" >&2
	run_end "$key"
	printf '  %-14s %7s s\n' "$key" "$RUN_T"
	check "$key"
}

# cut_and_complete CUT [OPT]: the stream cut at CUT%, received with OPT
# (not timed), and the run that completes it (timed)
cut_and_complete()
{
	local cut=$1 key=${2:+resume} size
	key=${key:-rerun}$1

	loopback_reformat dst
	btrfs subvolume sync "$SRC" >/dev/null
	"$ENCIO" -q send --subvolumes -f "$work/stream" "$HIST" || exit 1
	size=$(stat -c %s "$work/stream")
	head -c $((size * cut / 100)) "$work/stream" |
		"$ENCIO" -q receive ${2:+"$2"} "$DST/hist" 2>/dev/null && echo "  WARNING: a cut stream was received" >&2
	rm -f "$work/stream"
	btrfs subvolume sync "$SRC" >/dev/null
	run_start
	"$ENCIO" receive --state "$DST/hist" >"$work/state" &&
		"$ENCIO" -q send --subvolumes --state "$work/state" "$HIST" | tee >(wc -c >"$work/bytes") |
		"$ENCIO" -q receive ${2:+"$2"} "$DST/hist" || echo "  WARNING: $key failed" >&2
	run_end "$key"
	sleep 0.2
	BYTES[$key]+="$(awk -v r="$(cat "$work/bytes")" -v s="$size" 'BEGIN { printf "%.4f", r / s }') "
	printf '  %-14s %7s s   %s of %s stream bytes\n' "$key" "$RUN_T" "$(cat "$work/bytes")" "$size"
	check "$key"
}

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (caches dropped before each timed run, sync included)"
for ((r = 0; r < ROUNDS; r++)); do
	whole
	whole -s
	for cut in $CUTS; do
		cut_and_complete "$cut"
		cut_and_complete "$cut" -s
	done
done

echo
echo "Median of $ROUNDS rounds; / whole: time over the uninterrupted run's (without -s);"
echo "bytes: what the completing run sent, over the whole stream."
echo
echo "| run | time | / whole | bytes |"
echo "|---|---:|---:|---:|"
w=$(med "${TIMES[whole]}")
awk -v t="$w" 'BEGIN { printf "| whole | %.2f s | 1.00 | 100%% |\n", t }'
awk -v t="$(med "${TIMES[whole-s]}")" -v w="$w" 'BEGIN { printf "| whole, receive -s | %.2f s | %.2f | 100%% |\n", t, t / w }'
for cut in $CUTS; do
	for k in rerun resume; do
		awk -v k="$k" -v c="$cut" -v t="$(med "${TIMES[$k$cut]}")" -v w="$w" -v b="$(med "${BYTES[$k$cut]}")" \
			'BEGIN { printf "| cut at %s%%, %s | %.2f s | %.2f | %.1f%% |\n", c,
				k == "rerun" ? "the next run (subvolume in flight again)" : "the next run resuming (-s)",
				t, t / w, b * 100 }'
	done
done
echo
echo "receive -s over plain receive, round by round: $(round_ratios "${TIMES[whole]}" "${TIMES[whole-s]}")"
