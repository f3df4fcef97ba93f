#!/bin/bash
# Encoded I/O per mode, and encio copy against encio --io=ioctl copy, on
# tmpfs-backed loopback btrfs images (in /dev/shm): the figures behind
# what --io=auto chooses.
#   bench/modes.sh [ROUNDS]      (default 5; needs root)
# Builds encio in build/, makes a compress-force=zstd image holding a 1 GiB
# file (a tar of /usr/share and /usr/lib/x86_64-linux-gnu, cut to 1 GiB)
# in a read-only snapshot, as a backup reads it (auto reads a writable
# source through the ioctl: see SIGKILL AND IO_URING in encio(8)),
# runs `encio bench --write` on its original (the scratch file of
# --write needs a writable directory), times both copies into a second image
# (each on a fresh destination filesystem with caches dropped, median of
# ROUNDS, and the ratio within each round), prints the ratios against
# the targets (reads >= 3x ioctl, copy >= 2x --io=ioctl copy), cleans up.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
[ "$(id -u)" = 0 ] || { echo "bench/modes.sh needs root (loop devices, mounts, drop_caches)" >&2; exit 1; }
bash "$top/scripts/build.sh" build || exit 1
ENCIO=$top/build/encio

source "$top/scripts/loopback.sh"
loopback_init encio-modes

loopback_image src 4G compress-force=zstd
loopback_image dst 4G
SRC=$work/src/data.tar DST=$work/dst

echo "== a 1 GiB file on a compress-force=zstd image"
tar -cf - -C / usr/share usr/lib/x86_64-linux-gnu 2>/dev/null | head -c 1G >"$SRC"
sync
[ "$(stat -c %s "$SRC")" = 1073741824 ] || echo "note: the corpus is only $(stat -c %s "$SRC") bytes"
btrfs subvolume snapshot -r "$work/src" "$work/src/snap" >/dev/null || exit 1
SRC=$work/src/snap/data.tar
"$ENCIO" list "$SRC" | sed -n '/^Processed/,$p'
"$ENCIO" features "$SRC" | grep -E '^(kernel|fixed buffer flag|uring writes on io-wq|defer taskrun|buffer backing|hugetlb pages):'

echo
echo "== encio bench --write -r $rounds"
# --write needs a scratch file beside the file: the writable original,
# whose extents are the snapshot's
out=$(timeout 1800 "$ENCIO" bench -r "$rounds" --write "$work/src/data.tar") ||
	{ echo "$out"; echo "encio bench failed" >&2; exit 1; }
echo "$out"
# The read table's "x ioctl" column, by its position under the header.
ratios=$(echo "$out" | awk '/^encoded reads/ {t = 1; next} /^$/ {t = 0}
	t && /^mode/ {p = index($0, "x ioctl"); next}
	t && p {v = substr($0, p - 1, 8); gsub(/ /, "", v); print v "\t" substr($0, 1, 26)}')
best=$(echo "$ratios" | grep -v '^-' | sort -g | tail -1 | cut -f1)
bestrow=$(echo "$ratios" | grep -v '^-' | sort -g | tail -1 | cut -f2 | sed 's/ *$//')

echo
echo "== encio copy vs encio --io=ioctl copy (1 GiB, caches dropped, fsync included, median of $rounds)"
for ((r = 0; r < rounds; r++)); do
	for mode in auto ioctl; do
		loopback_reformat dst
		run_start
		timeout 600 "$ENCIO" -q --io=$mode copy "$SRC" "$DST/copy.tar" || { echo "copy ($mode) failed" >&2; exit 1; }
		run_end "$mode"
		[ $r = 0 ] && { cmp "$SRC" "$DST/copy.tar" || { echo "copy ($mode) differs" >&2; exit 1; }; }
	done
done
ta=$(med "${TIMES[auto]}")
ti=$(med "${TIMES[ioctl]}")
ca=$(med "${CPUS[auto]}")
ci=$(med "${CPUS[ioctl]}")
printf '  encio copy (auto)       %.3f s   (%s)\n' "$ta" "${TIMES[auto]}"
printf '  encio --io=ioctl copy   %.3f s   (%s)\n' "$ti" "${TIMES[ioctl]}"
printf '  ratio within each round: %s\n' "$(round_ratios "${TIMES[auto]}" "${TIMES[ioctl]}")"
# Busy CPU time of the whole machine (kernel workers and the loop device
# included) over the number of CPUs: no copy can take less time than that.
ncpu=$(nproc)
printf '  busy CPU time, whole machine: auto %.2f s, ioctl %.2f s; over %d CPUs: auto cannot beat %.3f s\n' \
	"$ca" "$ci" "$ncpu" "$(awk -v c="$ca" -v n="$ncpu" 'BEGIN {print c / n}')"
"$ENCIO" -v copy "$SRC" "$DST/summary.tar" 2>&1 | grep -E '^(chosen|ring|buffers)|^copied'

echo
echo "== ratios (targets: reads >= 3x ioctl one at a time; copy >= 2x --io=ioctl copy)"
printf '  best encoded read mode (%s): %sx ioctl\n' "$bestrow" "$best"
awk -v a="$ta" -v i="$ti" -v c="$ca" -v n="$ncpu" 'BEGIN {printf "  encio copy: %.2fx encio --io=ioctl copy (at most %.2fx with this CPU time on %d CPUs)\n", i / a, i / (c / n), n}'
echo "  upstream reference (fixed vectored buffers honoured): 0.599 s -> 0.540 s = 1.11x"
