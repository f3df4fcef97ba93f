#!/bin/bash
# Benchmark copies that must keep data shared (shared extents cloned, not
# copied again), between two btrfs filesystems on loopback
# images in /dev/shm, both mounted compress-force=zstd (bench/corpus.sh).
# Two corpora:
#   vm:    a VM image store: the "big" tar of bench/corpus.sh and 4
#          reflinked copies of it (cp --reflink=always), each with 1% of its
#          bytes rewritten in place with random data, in 4 KiB..64 KiB pieces
#          at random 4 KiB-aligned offsets (a fixed seed per copy), all in one
#          subvolume, snapshotted read-only (vm-snap);
#   snaps: the "many" corpus as a subvolume, read-only snapshot snap1, then
#          churn (5% of the files: 2% rewritten in the middle, 1% appended,
#          1% renamed, 1% removed; and a few new ones), read-only snapshot
#          snap2; both snapshots are copied in one run.
# Methods, on a fresh destination filesystem each run:
#   encio-copy   encio copy -r SRC... DEST/            (snaps: snap1 snap2)
#   encio-pipe   encio send SNAP... | encio receive DEST (snaps: one
#                `encio send snap1 snap2`)
#   btrfs-best   btrfs send --compressed-data | btrfs receive, the best
#                btrfs-progs does: vm a full send of vm-snap (a full send
#                clones within its snapshot); snaps `btrfs send snap1`, then
#                `btrfs send -p snap1 snap2`
#   btrfs-dup    (snaps only, for reference) btrfs send --compressed-data
#                snap1 snap2 in one stream without -p: both sent in full, the
#                second duplicating the first
# For each run: the time (caches dropped first, the final sync included),
# the busy CPU time of the whole machine, and DEST's disk usage against
# SRC's. Disk usage is compsize's "Disk Usage" TOTAL of the copied trees,
# and of the same trees in SRC: compsize walks the trees' file extent
# items and counts each extent once however many files, offsets or
# snapshots reference it, at its size on disk (compressed), whole even
# where only part of it is still referenced: what the data costs on disk,
# comparable between SRC and DEST. `btrfs filesystem du` is not used: it
# sums FIEMAP lengths, the uncompressed sizes, so it overstates compressed
# data. `btrfs filesystem usage`'s data used covers a whole filesystem
# (SRC's holds the other corpora too), so it is shown for DEST only, a
# fresh filesystem each run, as a cross-check ("data used": also every
# extent a method wrote and still holds, none of inline data).
# Each result is checked against its source by a manifest (every entry's
# type, mode, owner, link count, size and symlink target, and a CRC-32 of
# every regular file, cksum) made of SRC once and of DEST after each run:
# it checks more than diff -r --no-dereference (modes, owners, hard links)
# and reads SRC once instead of in every run (vm is 5 times the tar
# logically; reading and decompressing both sides each run would take
# longer than the runs). CRC-32 is there to catch a wrong copy, not an
# adversary.
# The methods take turns for ROUNDS rounds, the order rotating each round
# (as bench/copy.sh); the tables give medians, the time's ratio to encio
# copy -r, the disk usage's ratio to SRC's, then each round's time ratios.
# Targets: DEST's disk usage at most 1.5% above SRC's, and encio at least
# 2x faster than btrfs send | btrfs receive (btrfs-best) on both corpora.
# A build that does not keep the sharing shows a disk ratio above 1.
#
# usage: bench/shared.sh [ENCIO] [ROUNDS]   (needs root and compsize; ~12 GiB
#                                            of free memory; ROUNDS 3)
# Environment: CORPUS_MB=N builds the corpora from an N MiB sample (see
# bench/corpus.sh; e.g. CORPUS_MB=100 to try the script), CORPORA picks
# the corpora (default "vm snaps").
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-3}
CORPORA=${CORPORA:-vm snaps}

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number" >&2; exit 2; }
for c in $CORPORA; do
	case $c in vm | snaps) ;; *) echo "CORPORA: unknown corpus '$c' (vm, snaps)" >&2; exit 2 ;; esac
done
command -v compsize >/dev/null || { echo "needs compsize (apt-get install btrfs-compsize)" >&2; exit 1; }

source "$top/bench/corpus.sh"
set -o pipefail

declare -A DISK DATA FAILED PEAK

# FILE SEED: 1% of FILE's bytes rewritten in place with random data, in
# pieces of 4 KiB..64 KiB at 4 KiB-aligned offsets drawn from SEED.
rewrite_percent()
{
	local file=$1 off len pieces=0 bytes=0

	while read -r off len; do
		dd if=/dev/urandom of="$file" bs=4096 seek="$off" count="$len" conv=notrunc status=none || exit 1
		pieces=$((pieces + 1)) bytes=$((bytes + len * 4096))
	done < <(awk -v seed="$2" -v size="$(stat -c %s "$file")" 'BEGIN {
		srand(seed)
		blocks = int(size / 4096)
		for (done = 0; blocks > 0 && done < size / 100; done += len * 4096) {
			len = 1 + int(rand() * 16)
			if (len > blocks) len = blocks
			printf "%d %d\n", int(rand() * (blocks - len + 1)), len
		}
	}')
	echo "$pieces $bytes"
}

build_vm()
{
	local dir=$SRC/vm i out

	btrfs -q subvolume create "$dir" >/dev/null || exit 1
	cp --reflink=always "$SRC/big/corpus.tar" "$dir/disk0.img" || exit 1
	for ((i = 1; i <= 4; i++)); do
		cp --reflink=always "$dir/disk0.img" "$dir/disk$i.img" || exit 1
		out=$(rewrite_percent "$dir/disk$i.img" "$i") || exit 1
		echo "  vm: disk$i.img: ${out% *} pieces, ${out#* } bytes rewritten"
	done
	sync
	btrfs -q subvolume snapshot -r "$dir" "$SRC/vm-snap" >/dev/null || exit 1
}

# snap1 of "many", churn, snap2. A fixed pseudo-random order (awk's
# generator with a fixed seed), so runs churn the same files.
build_snaps()
{
	local dir=$SRC/many list=$work/churn.files n k new i=0 f size

	btrfs -q subvolume snapshot -r "$dir" "$SRC/snap1" >/dev/null || exit 1
	(cd "$dir" && find usr -type f -size +0) |
		awk 'BEGIN { srand(18) } { printf "%.9f\t%s\n", rand(), $0 }' | LC_ALL=C sort | cut -f2- >"$list"
	n=$(wc -l <"$list")
	k=$((n / 100)) new=$((n / 500))
	((k > 0)) || k=1
	((new >= 5)) || new=5
	while read -r f; do
		if ((i < 2 * k)); then # 4 KiB in the middle (bookends of a shared extent)
			size=$(stat -c %s "$dir/$f")
			dd if=/dev/urandom of="$dir/$f" bs=4096 count=1 seek=$((size / 8192)) conv=notrunc status=none
		elif ((i < 3 * k)); then
			yes "appended line $i of the shared-extents benchmark" | head -c 20000 >>"$dir/$f"
		elif ((i < 4 * k)); then
			mv "$dir/$f" "$dir/$f.renamed"
		elif ((i < 5 * k)); then
			rm "$dir/$f"
		elif ((i < 5 * k + new)); then
			yes "new file $i of the shared-extents benchmark" | head -c $((i % 50000 + 100)) >"$dir/$f.new"
		else
			break
		fi
		i=$((i + 1))
	done <"$list"
	echo "  snaps: $((5 * k)) of $n files changed, renamed or removed, $new new"
	sync
	btrfs -q subvolume snapshot -r "$dir" "$SRC/snap2" >/dev/null || exit 1
}

# the data used of the filesystem holding PATH, in bytes
data_used()
{
	btrfs filesystem usage -b "$1" 2>/dev/null |
		awk '/^Data,/ { for (i = 1; i <= NF; i++) if ($i ~ /^Used:/) { v = $i; sub(/^Used:/, "", v); sub(/,$/, "", v); print v } }'
}

trees_of() { case $1 in vm) echo vm-snap ;; snaps) echo snap1 snap2 ;; esac; }
methods_of() { case $1 in vm) echo encio-copy encio-pipe btrfs-best ;; snaps) echo encio-copy encio-pipe btrfs-best btrfs-dup ;; esac; }
label()
{
	case $1-$2 in
	*-encio-copy) echo "encio copy -r" ;;
	*-encio-pipe) echo "encio send \\| encio receive" ;;
	vm-btrfs-best) echo "btrfs send --compressed-data \\| btrfs receive" ;;
	snaps-btrfs-best) echo "btrfs send --compressed-data snap1; -p snap1 snap2 \\| btrfs receive" ;;
	snaps-btrfs-dup) echo "btrfs send --compressed-data snap1 snap2 (no -p) \\| btrfs receive" ;;
	esac
}

run_one()
{
	local corpus=$1 method=$2 key=$1-$2 t ok=1 du dused
	local -a trees srcs
	read -ra trees <<<"$(trees_of "$corpus")"
	srcs=("${trees[@]/#/$SRC/}")

	loopback_reformat dst
	: >"$work/err"
	run_start
	case $method in
	encio-copy)
		/usr/bin/time -f %M -o "$work/rss" "$ENCIO" -q copy -r "${srcs[@]}" "$DST/" 2>>"$work/err" || ok=0
		;;
	encio-pipe)
		/usr/bin/time -f %M -o "$work/rss-send" "$ENCIO" -q send "${srcs[@]}" 2>>"$work/err" |
			/usr/bin/time -f %M -o "$work/rss-recv" "$ENCIO" -q receive "$DST" 2>>"$work/err" || ok=0
		;;
	btrfs-best)
		btrfs -q send --compressed-data "${srcs[0]}" 2>>"$work/err" | btrfs -q receive "$DST" 2>>"$work/err" || ok=0
		if ((${#srcs[@]} > 1)); then
			btrfs -q send --compressed-data -p "${srcs[0]}" "${srcs[1]}" 2>>"$work/err" |
				btrfs -q receive "$DST" 2>>"$work/err" || ok=0
		fi
		;;
	btrfs-dup)
		btrfs -q send --compressed-data "${srcs[@]}" 2>>"$work/err" | btrfs -q receive "$DST" 2>>"$work/err" || ok=0
		;;
	esac
	run_end "$key"
	case $method in
	encio-copy) PEAK[$corpus copy -r]+="$(tail -1 "$work/rss") " ;;
	encio-pipe)
		PEAK[$corpus send]+="$(tail -1 "$work/rss-send") "
		PEAK[$corpus receive]+="$(tail -1 "$work/rss-recv") "
		;;
	esac
	for t in "${trees[@]}"; do
		if ! manifest "$DST/$t" >"$work/dst.manifest" 2>/dev/null ||
			! cmp -s "$work/dst.manifest" "$work/$t.manifest"; then
			echo "  WARNING: $method on $corpus: $t differs from SRC, first differences:" >&2
			diff "$work/$t.manifest" "$work/dst.manifest" 2>&1 | head -6 | sed 's/^/    /' >&2
			ok=0
		fi
	done
	du=$(disk_usage "${trees[@]/#/$DST/}")
	dused=$(data_used "$DST")
	if ((ok == 0)); then
		FAILED[$key]=$((${FAILED[$key]:-0} + 1))
		[ -s "$work/err" ] && sed 's/^/    /' "$work/err" | head -10 >&2
		echo "  WARNING: $method on $corpus failed" >&2
	fi
	DISK[$key]+="${du:-0} "
	DATA[$key]+="${dused:-0} "
	awk -v c="$corpus" -v m="$method" -v t="$RUN_T" -v cpu="$RUN_C" -v d="${du:-0}" -v s="${SRC_DISK[$corpus]}" \
		'BEGIN { printf "  %-6s %-11s %8.3f s   cpu %7.2f s   disk %9.1f MiB  %.3fx SRC\n", c, m, t, cpu, d / 1048576, d / s }'
}

echo "== the shared corpora"
declare -A SRC_DISK
for c in $CORPORA; do
	"build_$c"
done
sync
for c in $CORPORA; do
	read -ra trees <<<"$(trees_of "$c")"
	SRC_DISK[$c]=$(disk_usage "${trees[@]/#/$SRC/}")
	[ -n "${SRC_DISK[$c]}" ] || { echo "compsize failed on SRC's $c" >&2; exit 1; }
	compsize -b "${trees[@]/#/$SRC/}" | awk -v c="$c" -v t="${trees[*]}" '$1 == "TOTAL" {
		printf "  %-5s %s: %.1f MiB referenced, %.1f MiB uncompressed, %.1f MiB on disk (compsize)\n",
			c, t, $5 / 1048576, $4 / 1048576, $3 / 1048576 }'
	for t in "${trees[@]}"; do
		manifest "$SRC/$t" >"$work/$t.manifest" || { echo "cannot read SRC's $t" >&2; exit 1; }
	done
done

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (fresh destination, caches dropped, sync included, order rotating)"
for c in $CORPORA; do
	read -ra trees <<<"$(trees_of "$c")"
	read -ra method_list <<<"$(methods_of "$c")"
	nr_methods=${#method_list[@]}
	drop
	for t in "${trees[@]}"; do # read each source once, untimed (as bench/copy.sh)
		btrfs -q send --compressed-data "$SRC/$t" >/dev/null 2>&1
	done
	for ((r = 0; r < ROUNDS; r++)); do
		for ((i = 0; i < nr_methods; i++)); do
			run_one "$c" "${method_list[(r + i) % nr_methods]}"
		done
	done
done

echo
echo "Median of $ROUNDS rounds; ratio: time over encio copy -r's; cpu: busy CPU time of the"
echo "whole machine during the run; disk: compsize Disk Usage of the copied trees, / SRC:"
echo "over the same trees' in SRC; data used: DEST's btrfs filesystem usage data used."
echo
echo "| corpus | method | time | ratio | cpu | disk | / SRC | data used |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for c in $CORPORA; do
	awk -v c="$c" -v t="$(trees_of "$c")" -v s="${SRC_DISK[$c]}" \
		'BEGIN { printf "| %s | SRC (%s) | | | | %.1f MiB | 1.000 | |\n", c, t, s / 1048576 }'
	for m in $(methods_of "$c"); do
		k=$c-$m
		awk -v c="$c" -v l="$(label "$c" "$m")" -v a="$(med "${TIMES[$k]}")" -v e="$(med "${TIMES[$c-encio-copy]}")" \
			-v cpu="$(med "${CPUS[$k]}")" -v d="$(med "${DISK[$k]}")" -v s="${SRC_DISK[$c]}" \
			-v u="$(med "${DATA[$k]}")" -v f="${FAILED[$k]:-0}" -v r="$ROUNDS" \
			'BEGIN { printf "| %s | %s%s | %.2f s | %.2fx | %.2f s | %.1f MiB | %.3f | %.1f MiB |\n",
				c, l, f ? (" (FAILED in " f " of " r " runs)") : "", a, a / e, cpu, d / 1048576, d / s, u / 1048576 }'
	done
done
echo
echo "Time over encio copy -r's within each round, round by round:"
for c in $CORPORA; do
	for m in $(methods_of "$c"); do
		[ "$m" = encio-copy ] && continue
		printf '  %-5s %-11s %s\n' "$c" "$m" "$(round_ratios "${TIMES[$c-encio-copy]}" "${TIMES[$c-$m]}")"
	done
done
echo
echo "Targets: DEST disk usage at most 1.5% above SRC's; encio at least 2x"
echo "faster than btrfs-best (btrfs send --compressed-data [-p] | btrfs receive):"
for c in $CORPORA; do
	for m in encio-copy encio-pipe; do
		k=$c-$m
		awk -v c="$c" -v m="$m" -v d="$(med "${DISK[$k]}")" -v s="${SRC_DISK[$c]}" -v f="${FAILED[$k]:-0}" \
			-v a="$(med "${TIMES[$k]}")" -v b="$(med "${TIMES[$c-btrfs-best]}")" -v r="$ROUNDS" \
			-v fb="${FAILED[$c-btrfs-best]:-0}" \
			'BEGIN { dr = d / s; sp = b / a
				if (f) printf "  %-5s %-11s FAILED in %d of %d runs: not measured\n", c, m, f, r
				else if (fb) printf "  %-5s %-11s disk %.3fx SRC (%s), btrfs-best FAILED in %d of %d runs\n", c, m,
					dr, (dr <= 1.015) ? "met" : "missed", fb, r
				else printf "  %-5s %-11s disk %.3fx SRC (%s), btrfs-best / %s %.2fx (%s)\n", c, m,
					dr, (dr <= 1.015) ? "met" : "missed", m, sp, (sp >= 2) ? "met" : "missed" }'
	done
done
echo
echo "encio peak RSS (KiB, lowest to highest of the runs):"
for c in $CORPORA; do
	for k in "$c copy -r" "$c send" "$c receive"; do
		echo "${PEAK[$k]:-}" | tr ' ' '\n' | sort -n | awk -v k="$k" 'NF { v[++n] = $1 }
			END { if (n) printf "  %-16s %s..%s\n", k, v[1], v[n] }'
	done
done
