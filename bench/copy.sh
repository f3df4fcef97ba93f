#!/bin/bash
# Benchmark whole-tree copies between two btrfs filesystems on loopback
# images in tmpfs, both mounted compress-force=zstd:
#   encio copy -r, btrfs send --compressed-data | btrfs receive,
#   btrfs send | btrfs receive (v1), cp -a
# on two corpora: "many files" (copies of /usr/share, /usr/bin and
# /usr/lib/x86_64-linux-gnu) and "big files" (a tar of that corpus and a
# 3 GiB sparse file holding 200 MiB of data). Each run starts on a fresh
# destination filesystem with caches dropped, times include the final
# sync, each result is checked against the source (diff -r). Before the
# rounds of a corpus, one untimed btrfs send of it reads its source once
# (the first read of the image after it was written was the slow one in
# earlier runs, and it fell on whichever method came first). The methods
# take turns for ROUNDS rounds, the order rotating each round so that no
# method always follows the same one. The table gives the median time, its
# ratio to encio copy -r, and the median CPU time the whole machine was busy
# (all threads, kernel workers included): on a machine whose cores are all
# busy, that CPU time over the number of cores is the floor for the time.
# Then each round's ratios: its runs are back to back, the steadier view on
# a machine whose speed drifts over minutes.
# Also encio's peak RSS (/usr/bin/time -f %M).
#
# usage: bench/copy.sh [ENCIO] [ROUNDS]   (needs root; ~6 GiB of free memory;
#                                          ROUNDS defaults to 3)
# Environment: ENCIO_BASE=PATH adds "encio-base", another encio build timed
# in the same rounds (a change against the version before it); METHODS
# picks the methods (default: encio send-compressed send-v1 cp-a, plus
# encio-base when ENCIO_BASE is set).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}

source "$top/bench/corpus.sh"

run_one()
{
	local corpus=$1 method=$2 out=$DST/$1-snap
	loopback_reformat dst
	run_start
	case $method in
	encio)
		/usr/bin/time -f %M -o "$work/rss" "$ENCIO" -q copy -r "$SRC/$corpus-snap" "$DST/" || echo "encio failed" >&2
		;;
	encio-base)
		"$ENCIO_BASE" -q copy -r "$SRC/$corpus-snap" "$DST/" || echo "encio-base failed" >&2
		;;
	send-compressed)
		btrfs -q send --compressed-data "$SRC/$corpus-snap" 2>/dev/null | btrfs -q receive "$DST" || echo "receive failed" >&2
		;;
	send-v1)
		btrfs -q send "$SRC/$corpus-snap" 2>/dev/null | btrfs -q receive "$DST" || echo "receive failed" >&2
		;;
	cp-a)
		cp -a "$SRC/$corpus-snap" "$DST/"
		;;
	esac
	run_end "$corpus-$method"
	[ "$method" = encio ] && RSS+=("$corpus $(cat "$work/rss") KiB")
	diff -r --no-dereference "$SRC/$corpus-snap" "$out" >/dev/null || echo "  WARNING: $method on $corpus: result differs from SRC" >&2
	printf '  %-6s %-16s %7s s   cpu %7s s\n' "$corpus" "$method" "$RUN_T" "$RUN_C"
}

ENCIO_BASE=${ENCIO_BASE:-}
methods=${METHODS:-encio send-compressed send-v1 cp-a${ENCIO_BASE:+ encio-base}}
case " $methods " in *" encio "*) ;; *) echo "METHODS must include encio (ratios are to it)" >&2; exit 2 ;; esac
case " $methods " in *" encio-base "*) [ -x "$ENCIO_BASE" ] || { echo "encio-base needs ENCIO_BASE" >&2; exit 2; } ;; esac
echo "== timing: $ROUNDS rounds, $(nproc) CPUs (fresh destination, caches dropped, sync included, order rotating)"
read -ra method_list <<<"$methods"
nr_methods=${#method_list[@]}
for c in many big; do
	drop
	btrfs -q send --compressed-data "$SRC/$c-snap" 2>/dev/null >/dev/null
	for ((r = 0; r < ROUNDS; r++)); do
		for ((i = 0; i < nr_methods; i++)); do
			run_one "$c" "${method_list[(r + i) % nr_methods]}"
		done
	done
done

echo
echo "Median of $ROUNDS rounds; cpu: busy CPU time of the whole machine during the run."
echo
echo "| method | many files | ratio | cpu | big files | ratio | cpu |"
echo "|---|---|---|---|---|---|---|"
for m in $methods; do
	awk -v m="$m" -v a="$(med "${TIMES[many-$m]}")" -v ea="$(med "${TIMES[many-encio]}")" \
		-v ca="$(med "${CPUS[many-$m]}")" -v cb="$(med "${CPUS[big-$m]}")" \
		-v b="$(med "${TIMES[big-$m]}")" -v eb="$(med "${TIMES[big-encio]}")" \
		'BEGIN { printf "| %s | %.2f s | %.2fx | %.2f s | %.2f s | %.2fx | %.2f s |\n", m, a, a / ea, ca, b, b / eb, cb }'
done
echo
echo "Ratio to encio copy -r within each round, round by round:"
for m in $methods; do
	[ "$m" = encio ] && continue
	for c in many big; do
		printf '  %-16s %-5s %s\n' "$m" "$c" "$(round_ratios "${TIMES[$c-encio]}" "${TIMES[$c-$m]}")"
	done
done
echo
echo "encio peak RSS: ${RSS[*]}"
