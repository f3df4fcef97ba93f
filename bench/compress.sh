#!/bin/bash
# Benchmark compression on import: a "many files" corpus in tmpfs copied
#   - by encio copy -r --compress=zstd:L into a btrfs mounted without
#     compression (user-space compression on every core), versus
#   - by cp -a into a btrfs mounted compress-force=zstd:L (the kernel
#     compresses on the writing thread and its workers),
# for L = 3, 9, 15. Each run starts on a fresh destination filesystem with
# caches dropped; times include the final sync, "cpu" is the busy CPU time
# of the whole machine; each result is checked against the source (diff -r)
# and its ratio taken with compsize (disk usage / uncompressed). Prints a
# table.
#
# usage: bench/compress.sh [ENCIO] [CORPUS_DIR...]
#   (needs root and compsize; default corpus: /usr/share /usr/bin
#   /usr/lib/x86_64-linux-gnu, ~2.4 GiB: ~6 GiB of free memory)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
shift || true
CORPUS=("$@")
[ ${#CORPUS[@]} -gt 0 ] || CORPUS=(/usr/share /usr/bin /usr/lib/x86_64-linux-gnu)
LEVELS=${LEVELS:-"3 9 15"}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO (bash scripts/build.sh build)" >&2; exit 1; }
command -v compsize >/dev/null || { echo "needs compsize" >&2; exit 1; }

source "$top/scripts/loopback.sh"
loopback_init encio-bench
loopback_tmpfs src 8G
loopback_image dst 12G
SRC=$work/src/many DST=$work/dst

echo "== building the corpus: ${CORPUS[*]}"
mkdir "$SRC"
cp -a "${CORPUS[@]}" "$SRC/"
printf '  %s files, %s\n' "$(find "$SRC" -type f | wc -l)" "$(du -sh --apparent-size "$SRC" | cut -f1)"

ratio() { compsize -b "$1" 2>/dev/null | awk '$1 == "TOTAL" { printf "%.1f%%", 100 * $3 / $4 }'; }

declare -A R
run_one()
{
	local method=$1 level=$2 key=$1-$2
	loopback_reformat dst
	if [ "$method" = cp ]; then
		mount -o remount,compress-force=zstd:$level "$DST"
	else
		mount -o remount,compress=no,compress-force=no "$DST" 2>/dev/null ||
			mount -o remount,compress=no "$DST"
	fi
	run_start
	case $method in
	encio) "$ENCIO" -q copy -r --compress=zstd:$level "$SRC" "$DST/" || echo "encio failed" >&2 ;;
	cp) cp -a "$SRC" "$DST/" ;;
	esac
	run_end "$key"
	R[$key]=$(ratio "$DST/many")
	diff -r --no-dereference "$SRC" "$DST/many" >/dev/null || echo "  WARNING: $method zstd:$level: result differs" >&2
	printf '  %-6s zstd:%-3s %7s s  cpu %7s s  ratio %s\n' "$method" "$level" "$RUN_T" "$RUN_C" "${R[$key]}"
}

echo "== timing (sync included; $(nproc) CPUs)"
for l in $LEVELS; do
	run_one encio "$l"
	run_one cp "$l"
done
echo
echo "| level | encio --compress | cpu | ratio | cp -a into compress-force | cpu | ratio | speedup |"
echo "|---|---|---|---|---|---|---|---|"
for l in $LEVELS; do
	awk -v l="$l" -v a="$(med "${TIMES[encio-$l]}")" -v ra="${R[encio-$l]}" \
		-v b="$(med "${TIMES[cp-$l]}")" -v rb="${R[cp-$l]}" \
		-v ca="$(med "${CPUS[encio-$l]}")" -v cb="$(med "${CPUS[cp-$l]}")" \
		'BEGIN { printf "| zstd:%s | %.2f s | %.2f s | %s | %.2f s | %.2f s | %s | %.2fx |\n", l, a, ca, ra, b, cb, rb, b / a }'
done
