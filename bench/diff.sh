#!/bin/bash
# Benchmark encio diff on the "many" corpus of bench/corpus.sh (loopback
# images in /dev/shm, compress-force=zstd): churn touching about 2% of its
# files (a 4 KiB block rewritten in place, appended, renamed, removed, new
# ones next to them) and one directory tree moved, then a second read-only
# snapshot. Timed, between the two snapshots:
#   encio diff                      (text, like zfs diff)
#   encio diff -0                   (the NUL-separated list restic takes)
#   encio diff -v --format=json     (with the changed data ranges)
#   btrfs send --no-data -p | btrfs receive --dump
#                                   the kernel's difference, what a tool
#                                   reading it runs today
#   btrfs subvolume find-new        the child's leaves newer than the
#                                   parent's otransid: a lower bound, it
#                                   sees no removals or renames
# each to /dev/null, caches dropped before each run. The methods take turns
# for ROUNDS rounds; the table gives median times and ratios to encio diff
# (the median of the rounds' ratios), then how many lines encio diff
# printed and how many commands the kernel's difference holds.
#
# usage: bench/diff.sh [ENCIO] [ROUNDS]   (needs root; ~10 GiB of free
#                                          memory; ROUNDS defaults to 3)
# Environment: ENCIO_BASE=PATH times another encio build's diff in the same
# rounds too (base-diff: a change against the version before it).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
ENCIO_BASE=${ENCIO_BASE:-}
[ -z "$ENCIO_BASE" ] || [ -x "$ENCIO_BASE" ] || { echo "no encio at ENCIO_BASE=$ENCIO_BASE" >&2; exit 2; }
METHODS="encio-diff encio-diff-0 encio-diff-v kernel-dump find-new${ENCIO_BASE:+ base-diff}"

# Before the corpora are built: a build without the command fails fast.
has_diff()
{
	[ -x "$1" ] || { echo "no encio at $1 (bash scripts/build.sh build)" >&2; exit 1; }
	if "$1" diff --help 2>&1 >/dev/null | grep -q "unknown command"; then
		echo "$1 has no diff command (encio diff PARENT CHILD)" >&2
		exit 2
	fi
}
has_diff "$ENCIO"
[ -z "$ENCIO_BASE" ] || has_diff "$ENCIO_BASE"

source "$top/bench/corpus.sh"

# A fixed pseudo-random order, so runs churn the same files.
seeded() { openssl enc -aes-128-ctr -pass "pass:$1" -nosalt -pbkdf2 </dev/zero 2>/dev/null; }

churn_many()
{
	local dir=$SRC/many list=$work/many.files n i=0 f
	(cd "$dir" && find usr -type f ! -path 'usr/share/doc/*' -size +0) |
		shuf --random-source=<(seeded diff) >"$list"
	n=$(($(wc -l <"$list") / 250)) # 0.4% each of five kinds
	[ "$n" -gt 0 ] || n=1
	while read -r f; do
		case $((i / n)) in
		0) dd if=/dev/urandom of="$dir/$f" bs=4096 count=1 seek=$(($(stat -c %s "$dir/$f") / 8192)) \
			conv=notrunc status=none ;;
		1) yes "appended line $i of the diff benchmark" | head -c 20000 >>"$dir/$f" ;;
		2) mv "$dir/$f" "$dir/$f.renamed" ;;
		3) rm "$dir/$f" ;;
		4) yes "new file $i of the diff benchmark" | head -c $((i % 50000 + 100)) >"$dir/$f.new" ;;
		*) break ;;
		esac
		i=$((i + 1))
	done <"$list"
	mv "$dir/usr/share/doc" "$dir/usr/doc-moved"
	echo "  many: $((5 * n)) files churned of $(wc -l <"$list"), usr/share/doc moved"
}

echo "== churn, second snapshot"
churn_many
sync
btrfs -q subvolume snapshot -r "$SRC/many" "$SRC/many-snap2" >/dev/null
PARENT=$SRC/many-snap CHILD=$SRC/many-snap2
OTRANSID=$(btrfs subvolume show "$PARENT" | awk '/Gen at creation:/ { print $4 }')
[ -n "$OTRANSID" ] || { echo "no otransid for $PARENT" >&2; exit 1; }
sync

echo "== checking each method once"
for args in "" "-0" "-v --format=json"; do
	# shellcheck disable=SC2086 # the options are words
	"$ENCIO" diff $args "$PARENT" "$CHILD" >"$work/diff.out" 2>"$work/diff.err"
	rc=$?
	[ "$rc" = 0 ] || { cat "$work/diff.err" >&2; echo "encio diff $args failed (exit $rc)" >&2; exit 1; }
	case $args in
	"") LINES=$(wc -l <"$work/diff.out") ;;
	-0) PATHS=$(tr -cd '\0' <"$work/diff.out" | wc -c) ;;
	-v*) sed 's/^/  encio diff -v: /' "$work/diff.err" ;;
	esac
done
if [ -n "$ENCIO_BASE" ]; then
	"$ENCIO_BASE" diff "$PARENT" "$CHILD" >/dev/null || { echo "ENCIO_BASE diff failed" >&2; exit 1; }
fi
# btrfs receive --dump stops at the stream's end command, at times before
# btrfs send has exited: its SIGPIPE (141) then is no failure.
btrfs -q send --proto 2 --no-data -p "$PARENT" "$CHILD" | btrfs receive --dump >"$work/dump.out"
st=("${PIPESTATUS[@]}")
[[ ${st[0]} =~ ^(0|141)$ && ${st[1]} = 0 ]] ||
	{ echo "btrfs send --no-data -p | btrfs receive --dump failed (exit ${st[*]})" >&2; exit 1; }
COMMANDS=$(wc -l <"$work/dump.out")
FOUND=$(btrfs subvolume find-new "$CHILD" "$OTRANSID" | wc -l)

run_one()
{
	local method=$1
	run_start
	case $method in
	encio-diff)
		"$ENCIO" diff "$PARENT" "$CHILD" >/dev/null || echo "encio diff failed" >&2
		;;
	encio-diff-0)
		"$ENCIO" diff -0 "$PARENT" "$CHILD" >/dev/null || echo "encio diff -0 failed" >&2
		;;
	encio-diff-v)
		"$ENCIO" diff -v --format=json "$PARENT" "$CHILD" >/dev/null 2>&1 ||
			echo "encio diff -v --format=json failed" >&2
		;;
	base-diff)
		"$ENCIO_BASE" diff "$PARENT" "$CHILD" >/dev/null || echo "base encio diff failed" >&2
		;;
	kernel-dump)
		btrfs -q send --proto 2 --no-data -p "$PARENT" "$CHILD" | btrfs receive --dump >/dev/null ||
			echo "btrfs send --no-data -p | btrfs receive --dump failed" >&2
		;;
	find-new)
		btrfs subvolume find-new "$CHILD" "$OTRANSID" >/dev/null || echo "btrfs subvolume find-new failed" >&2
		;;
	esac
	run_end "$method"
	printf '  %-14s %7s s   cpu %7s s\n' "$method" "$RUN_T" "$RUN_C"
}

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (caches dropped before each run)"
for ((r = 0; r < ROUNDS; r++)); do
	for m in $METHODS; do
		run_one "$m"
	done
done

# REF OTHER: the median of OTHER/REF over the rounds, as round_ratios gives it
ratio() { round_ratios "$1" "$2" | sed 's/.*(median \(.*\)x)$/\1/'; }

cell() { awk -v t="$(med "${TIMES[$1]}")" -v c="$(med "${CPUS[$1]}")" 'BEGIN { printf "%.3f s (cpu %.2f)", t, c }'; }

echo
echo "Median of $ROUNDS rounds; cpu: busy CPU time of the whole machine during the run;"
echo "ratios: the median of the rounds' ratios."
echo
echo "| encio diff | encio diff -0 | encio diff -v --format=json | send --no-data -p \\| receive --dump | find-new | dump / diff | dump / diff -0 | find-new / diff |"
echo "|---|---|---|---|---|---|---|---|"
printf '| %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx |\n' \
	"$(cell encio-diff)" "$(cell encio-diff-0)" "$(cell encio-diff-v)" "$(cell kernel-dump)" "$(cell find-new)" \
	"$(ratio "${TIMES[encio-diff]}" "${TIMES[kernel-dump]}")" \
	"$(ratio "${TIMES[encio-diff-0]}" "${TIMES[kernel-dump]}")" \
	"$(ratio "${TIMES[encio-diff]}" "${TIMES[find-new]}")"
echo
echo "encio diff printed $LINES lines (-0: $PATHS paths); btrfs receive --dump printed $COMMANDS commands;" \
	"find-new $FOUND lines (newer than the parent's otransid $OTRANSID)"
if [ -n "$ENCIO_BASE" ]; then
	echo
	printf 'ENCIO_BASE diff %s\n' "$(cell base-diff)"
	printf '  base / diff   %s\n' "$(round_ratios "${TIMES[encio-diff]}" "${TIMES[base-diff]}")"
fi
echo
echo "Ratio to encio diff within each round, round by round:"
printf '  dump / diff      %s\n' "$(round_ratios "${TIMES[encio-diff]}" "${TIMES[kernel-dump]}")"
printf '  dump / diff -0   %s\n' "$(round_ratios "${TIMES[encio-diff-0]}" "${TIMES[kernel-dump]}")"
printf '  find-new / diff  %s\n' "$(round_ratios "${TIMES[encio-diff]}" "${TIMES[find-new]}")"
