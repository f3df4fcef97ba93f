#!/bin/bash
# Benchmark incremental send streams on the corpora of bench/corpus.sh
# (loopback images in /dev/shm, compress-force=zstd):
#   many: churn touching about 5% of the files (modified in place, appended,
#         renamed, removed, new ones) and one directory tree moved;
#   big:  1% of the tar rewritten in place, in 64 KiB pieces;
# then a second read-only snapshot of each. Timed, for each corpus:
#   encio send -p | encio receive   against  btrfs send --compressed-data -p | btrfs receive
#   encio send -p >/dev/null        against  btrfs send --compressed-data -p >/dev/null
#   encio send -n -p (the estimate) against  btrfs send --no-data -p >/dev/null
#   encio send --progress -p, into the pipe and to /dev/null, against -q
#                                   (the cost of progress and its estimate)
#   encio send --progress --format=json -p >/dev/null against -q (the
#                                   estimate made at once and waited for:
#                                   its whole cost, and its accuracy)
# and, for reference, btrfs send --no-data -p >/dev/null: the kernel's
# part of encio send -p (its difference without data), a bound for it;
# encio diff -0 >/dev/null: encio's own difference of the two; encio
# receive -f of encio send -p's stream saved beforehand: the receiving
# side alone, a bound for any sender's send | receive;
# with the parent received once beforehand (by btrfs receive; both
# receivers find it by UUID), each run receiving into a new directory, the
# received snapshot deleted and cleaned up after it, caches dropped, sync
# included, every result checked with diff -r. The methods take turns for
# ROUNDS rounds; the table gives median times and ratios (btrfs-progs /
# encio), then the stream sizes.
#
# usage: bench/incremental.sh [ENCIO] [ROUNDS]   (needs root; ~10 GiB of
#                                                 free memory; ROUNDS 3)
# Environment: ENCIO_BASE=PATH times another encio build in the same rounds
# too (base-pipe, base-null: a change against the version before it);
# METHODS="encio-null encio-json-null ..." times those only.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
ENCIO_BASE=${ENCIO_BASE:-}
[ -z "$ENCIO_BASE" ] || [ -x "$ENCIO_BASE" ] || { echo "no encio at ENCIO_BASE=$ENCIO_BASE" >&2; exit 2; }
METHODS=${METHODS:-"encio-pipe btrfs-pipe encio-null btrfs-null kernel-null encio-diff encio-receive-file encio-estimate encio-progress encio-progress-null encio-json-null${ENCIO_BASE:+ base-pipe base-null}"}

SIZES=()
source "$top/bench/corpus.sh"

# A fixed pseudo-random order, so runs churn the same files.
seeded() { openssl enc -aes-128-ctr -pass "pass:$1" -nosalt -pbkdf2 </dev/zero 2>/dev/null; }

churn_many()
{
	local dir=$SRC/many list=$work/many.files n i=0 f
	(cd "$dir" && find usr -type f ! -path 'usr/share/doc/*' -size +0) |
		shuf --random-source=<(seeded churn) >"$list"
	n=$(($(wc -l <"$list") / 100)) # 1% each of five kinds
	while read -r f; do
		case $((i / n)) in
		0) dd if=/dev/urandom of="$dir/$f" bs=4096 count=1 conv=notrunc status=none ;;
		1) yes "appended line $i of the incremental benchmark" | head -c 20000 >>"$dir/$f" ;;
		2) mv "$dir/$f" "$dir/$f.renamed" ;;
		3) rm "$dir/$f" ;;
		4) yes "new file $i of the incremental benchmark" | head -c $((i % 50000 + 100)) >"$dir/$f.new" ;;
		*) break ;;
		esac
		i=$((i + 1))
	done <"$list"
	mv "$dir/usr/share/doc" "$dir/usr/doc-moved"
	echo "  many: $((5 * n)) files churned of $(wc -l <"$list"), usr/share/doc moved"
}

churn_big()
{
	local tar=$SRC/big/corpus.tar blocks pieces i
	blocks=$(($(stat -c %s "$tar") / 65536))
	pieces=$((blocks / 100))
	# each piece gets another part of the tar: still compressible
	for ((i = 0; i < pieces; i++)); do
		dd if="$tar" of="$tar" bs=64K count=1 skip=$(((i * 7919 + 13) % blocks)) \
			seek=$(((i * 104729) % blocks)) conv=notrunc status=none
	done
	echo "  big: $pieces of $blocks 64 KiB blocks of the tar rewritten"
}

echo "== churn, second snapshots"
churn_many
churn_big
sync
for c in many big; do
	btrfs -q subvolume snapshot -r "$SRC/$c" "$SRC/$c-snap2" >/dev/null
done

echo "== the parents on the destination, and the stream sizes"
mkdir "$DST/base"
for c in many big; do
	btrfs -q send --compressed-data "$SRC/$c-snap" 2>/dev/null | btrfs -q receive "$DST/base" || exit 1
	"$ENCIO" -q send -p "$SRC/$c-snap" "$SRC/$c-snap2" >"$work/$c.incremental" || exit 1
	e=$(stat -c %s "$work/$c.incremental")
	b=$(btrfs -q send --compressed-data -p "$SRC/$c-snap" "$SRC/$c-snap2" 2>/dev/null | wc -c)
	f=$(btrfs -q send --compressed-data "$SRC/$c-snap2" 2>/dev/null | wc -c)
	n=$("$ENCIO" -q send -n --format=json -p "$SRC/$c-snap" "$SRC/$c-snap2" |
		sed -n 's/.*"stream_bytes": \([0-9]*\).*/\1/p')
	SIZES+=("| $c | $e | $b | $(awk -v e="$e" -v b="$b" 'BEGIN { printf "%.3f", e / b }') | $n | $(awk -v e="$e" -v n="$n" 'BEGIN { printf "%+.3f%%", (n - e) * 100 / e }') | $f |")
done

run_one()
{
	local corpus=$1 method=$2 parent=$SRC/$1-snap snap=$SRC/$1-snap2 to=$DST/run
	mkdir "$to"
	run_start
	case $method in
	encio-pipe)
		"$ENCIO" -q send -p "$parent" "$snap" | "$ENCIO" -q receive "$to" ||
			echo "encio send -p | encio receive failed" >&2
		;;
	btrfs-pipe)
		btrfs -q send --compressed-data -p "$parent" "$snap" 2>/dev/null | btrfs -q receive "$to" ||
			echo "btrfs send -p | btrfs receive failed" >&2
		;;
	encio-null)
		"$ENCIO" -q send -p "$parent" "$snap" >/dev/null || echo "encio send -p failed" >&2
		;;
	base-pipe)
		"$ENCIO_BASE" -q send -p "$parent" "$snap" | "$ENCIO_BASE" -q receive "$to" ||
			echo "base encio send -p | receive failed" >&2
		;;
	base-null)
		"$ENCIO_BASE" -q send -p "$parent" "$snap" >/dev/null || echo "base encio send -p failed" >&2
		;;
	btrfs-null)
		btrfs -q send --compressed-data -p "$parent" "$snap" >/dev/null 2>&1 ||
			echo "btrfs send -p failed" >&2
		;;
	kernel-null)
		btrfs -q send --proto 2 --no-data -p "$parent" "$snap" >/dev/null 2>&1 ||
			echo "btrfs send --no-data -p failed" >&2
		;;
	encio-diff)
		"$ENCIO" diff -0 "$parent" "$snap" >/dev/null || echo "encio diff failed" >&2
		;;
	encio-receive-file)
		"$ENCIO" -q receive -f "$work/$corpus.incremental" "$to" ||
			echo "encio receive -f failed" >&2
		;;
	encio-estimate)
		"$ENCIO" -q send -n -p "$parent" "$snap" >/dev/null ||
			echo "encio send -n -p failed" >&2
		;;
	encio-progress)
		"$ENCIO" send --progress -p "$parent" "$snap" 2>/dev/null | "$ENCIO" -q receive "$to" ||
			echo "encio send --progress -p | encio receive failed" >&2
		;;
	encio-progress-null)
		"$ENCIO" send --progress -p "$parent" "$snap" 2>/dev/null >/dev/null ||
			echo "encio send --progress -p failed" >&2
		;;
	encio-json-null)
		"$ENCIO" send --progress --format=json -p "$parent" "$snap" 2>"$work/$corpus.json" >/dev/null ||
			echo "encio send --progress --format=json -p failed" >&2
		;;
	esac
	run_end "$corpus-$method"
	if [ -e "$to/$corpus-snap2" ]; then
		diff -r --no-dereference "$snap" "$to/$corpus-snap2" >/dev/null ||
			echo "  WARNING: $method on $corpus: result differs from SRC" >&2
		btrfs -q subvolume delete "$to/$corpus-snap2" >/dev/null
		btrfs subvolume sync "$DST" >/dev/null
	fi
	rmdir "$to"
	printf '  %-6s %-12s %7s s   cpu %7s s\n' "$corpus" "$method" "$RUN_T" "$RUN_C"
}

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (caches dropped, sync included)"
for c in many big; do
	for ((r = 0; r < ROUNDS; r++)); do
		for m in $METHODS; do
			run_one "$c" "$m"
		done
	done
done

# ran METHOD...: whether each was timed (METHODS may leave some out)
ran() { local m; for m; do [[ " $METHODS " == *" $m "* ]] || return 1; done; }

echo
echo "Median of $ROUNDS rounds; cpu: busy CPU time of the whole machine during the run."
ran encio-pipe btrfs-pipe encio-null btrfs-null && {
echo
echo "| corpus | encio send -p\\|receive | btrfs send -p\\|receive | ratio | encio send -p >null | btrfs send -p >null | ratio |"
echo "|---|---|---|---|---|---|---|"
for c in many big; do
	awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v b="$(med "${TIMES[$c-btrfs-pipe]}")" \
		-v e="$(med "${TIMES[$c-encio-null]}")" -v f="$(med "${TIMES[$c-btrfs-null]}")" \
		-v ca="$(med "${CPUS[$c-encio-pipe]}")" -v cb="$(med "${CPUS[$c-btrfs-pipe]}")" \
		-v ce="$(med "${CPUS[$c-encio-null]}")" -v cf="$(med "${CPUS[$c-btrfs-null]}")" \
		'BEGIN { printf "| %s | %.2f s (cpu %.2f) | %.2f s (cpu %.2f) | %.2fx | %.2f s (cpu %.2f) | %.2f s (cpu %.2f) | %.2fx |\n", c, a, ca, b, cb, b / a, e, ce, f, cf, f / e }'
done
}
ran kernel-null encio-estimate && echo && for c in many big; do
	printf '%s: btrfs send --no-data -p >/dev/null (the kernel'"'"'s part) %.2f s; encio send -n -p (the estimate) %.2f s\n' "$c" "$(med "${TIMES[$c-kernel-null]}")" "$(med "${TIMES[$c-encio-estimate]}")"
done
ran encio-diff encio-receive-file btrfs-pipe && echo && for c in many big; do
	awk -v c="$c" -v d="$(med "${TIMES[$c-encio-diff]}")" -v r="$(med "${TIMES[$c-encio-receive-file]}")" \
		-v b="$(med "${TIMES[$c-btrfs-pipe]}")" \
		'BEGIN { printf "%s: encio diff -0 %.2f s; encio receive -f of the stream %.2f s, %.0f%% of btrfs send -p | btrfs receive (2x needs 50%%)\n", c, d, r, r * 100 / b }'
done
ran encio-pipe encio-progress encio-null encio-progress-null && echo && for c in many big; do
	awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v b="$(med "${TIMES[$c-encio-progress]}")" \
		-v e="$(med "${TIMES[$c-encio-null]}")" -v f="$(med "${TIMES[$c-encio-progress-null]}")" \
		'BEGIN { printf "%s: --progress (its estimate beside the send) into the pipe %.2f s, %+.1f%% against -q; to /dev/null %.2f s, %+.1f%%\n", c, b, (b - a) * 100 / a, f, (f - e) * 100 / e }'
	printf '  %-5s progress pipe %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-pipe]}" "${TIMES[$c-encio-progress]}")"
	printf '  %-5s progress null %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-null]}" "${TIMES[$c-encio-progress-null]}")"
done
echo
for c in many big; do
	ran encio-null encio-json-null || continue
	tail -n 1 "$work/$c.json" | sed 's/[{},]/\n/g' |
		awk -v c="$c" -v e="$(med "${TIMES[$c-encio-null]}")" -v j="$(med "${TIMES[$c-encio-json-null]}")" -F': ' \
			'/"estimated_bytes"/ { est = $2 } /"stream_bytes"/ { real = $2 }
			END { printf "%s: --format=json (its estimate made at once and waited for) to /dev/null %.2f s, %+.1f%% against -q; estimated %d of %d bytes (%+.2f%%)\n", c, j, (j - e) * 100 / e, est, real, (est - real) * 100 / real }'
	printf '  %-5s json null %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-null]}" "${TIMES[$c-encio-json-null]}")"
done
if [ -n "$ENCIO_BASE" ]; then
	echo
	for c in many big; do
		awk -v c="$c" -v a="$(med "${TIMES[$c-encio-pipe]}")" -v b="$(med "${TIMES[$c-base-pipe]}")" \
			-v e="$(med "${TIMES[$c-encio-null]}")" -v f="$(med "${TIMES[$c-base-null]}")" \
			'BEGIN { printf "%s: ENCIO_BASE send -p | receive %.2f s (%.2fx encio'"'"'s), send -p >null %.2f s (%.2fx)\n", c, b, b / a, f, f / e }'
		printf '  %-5s base pipe %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-pipe]}" "${TIMES[$c-base-pipe]}")"
	done
fi
echo
echo "Ratio to encio within each round, round by round:"
for c in many big; do
	! ran encio-pipe btrfs-pipe ||
		printf '  %-5s pipe     %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-pipe]}" "${TIMES[$c-btrfs-pipe]}")"
	! ran encio-null btrfs-null ||
		printf '  %-5s null     %s\n' "$c" "$(round_ratios "${TIMES[$c-encio-null]}" "${TIMES[$c-btrfs-null]}")"
done
echo
echo "Stream bytes (incremental; encio / btrfs send --compressed-data; a full send for scale):"
echo
echo "| corpus | encio send -p | btrfs send --compressed-data -p | ratio | encio send -n -p | estimate off by | btrfs full |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${SIZES[@]}"
