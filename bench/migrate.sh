#!/bin/bash
# Benchmark moving a snapshot history to another btrfs filesystem, between
# two loopback images in /dev/shm mounted compress-force=zstd
# (bench/corpus.sh). The history: the "many" corpus as a writable
# subvolume hist/@data, and 20 read-only snapshots of it, hist/snaps/
# data.YYYYMMDD, with churn of about 2% of the files before each one after
# the first (each time 0.5% rewritten in the middle, 0.5% appended, 0.4%
# renamed, 0.4% removed, 0.2% new), and as much churn again after the last.
# Methods, on a fresh destination filesystem each run:
#   encio        encio copy -rT --subvolumes --final SRC/hist DEST/hist (a
#                move done in one run: it keeps no base in SRC)
#   encio-pipe   encio send --subvolumes SRC/hist | encio receive DEST/hist
#                (what goes to another host; it keeps a base of @data)
#   btrfs-chain  what btrfs-clone's chronological strategy runs: btrfs send
#                --compressed-data of the first snapshot, then -p each
#                previous one for each next, each piped to btrfs receive;
#                @data from a temporary read-only snapshot sent -p the last,
#                then made writable (btrfs property set -f ro false)
#   btrbk        btrbk archive SRC/hist/snaps DEST/hist/snaps (btrbk's own
#                chain of send -p | receive; it archives the snapshots only,
#                not the writable @data, so it has less to do)
# For each run: the time (caches dropped first, the final sync included),
# the busy CPU time of the machine, and DEST's disk usage (compsize Disk
# Usage TOTAL of the copied subvolumes, each extent counted once, at its
# size on disk) against the same subvolumes' in SRC. The last snapshot and
# @data are checked against SRC by a manifest (as bench/shared.sh: type,
# mode, owner, links, size, symlink target, CRC-32 of each file) after each
# run; every subvolume's read-only flag and a parent UUID on every snapshot
# but the first are checked too.
#   encio-base   with ENCIO_BASE=PATH, another encio build's copy, timed in
#                the same rounds (METHODS=... picks the methods), without
#                --final (older builds have none: each keeps no base)
# The methods take turns for ROUNDS rounds, the order rotating each round;
# the table gives medians and the time's ratio to encio's.
# Then second runs (SECOND=0 leaves them out), the nightly backup: for
# each method and round, a fresh destination filled by a first run (not
# timed; encio's without --final, so that it keeps its base), then churn
# of @data and a new snapshot of it in SRC (which the rounds after carry
# too), then the same method again, timed: encio copy -rT --subvolumes;
# encio receive --state | encio send --subvolumes --state | encio receive;
# btrfs send -p of the new snapshot from the one before and of @data from
# it, the old @data's copy deleted; btrbk archive (the new snapshot).
# Target: encio at least 2x faster than btrfs-chain, with DEST's disk usage
# within 2% of SRC's.
#
# usage: bench/migrate.sh [ENCIO] [ROUNDS]   (needs root, compsize and
#                                             btrbk; ~12 GiB of free memory;
#                                             ROUNDS 2)
# Environment: CORPUS_MB=N builds "many" from an N MiB sample (see
# bench/corpus.sh), SNAPSHOTS=N takes N snapshots instead of 20.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ENCIO=${1:-$top/build/encio}
ROUNDS=${2:-2}
SNAPSHOTS=${SNAPSHOTS:-20}

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number" >&2; exit 2; }
[[ $SNAPSHOTS =~ ^[1-9][0-9]*$ ]] && ((SNAPSHOTS <= 28)) || { echo "SNAPSHOTS must be 1..28" >&2; exit 2; }
for p in compsize btrbk; do
	command -v $p >/dev/null || { echo "needs $p (scripts/deps.sh installs it)" >&2; exit 1; }
done

source "$top/bench/corpus.sh"
set -o pipefail

declare -A DISK FAILED
ENCIO_BASE=${ENCIO_BASE:-}
METHODS=${METHODS:-encio encio-pipe btrfs-chain btrbk${ENCIO_BASE:+ encio-base}}
SECOND=${SECOND:-1}
NEXT=0 # snapshots added in SRC for the second runs
case " $METHODS " in *" encio-base "*) [ -x "$ENCIO_BASE" ] || { echo "encio-base needs ENCIO_BASE" >&2; exit 2; } ;; esac
HIST=$SRC/hist

snap_name() { printf 'data.202601%02d' "$1"; }

build_history()
{
	local i

	mkdir -p "$HIST/snaps"
	btrfs -q subvolume snapshot "$SRC/many" "$HIST/@data" >/dev/null || exit 1
	for ((i = 1; i <= SNAPSHOTS; i++)); do
		((i > 1)) && churn "$HIST/@data" "$i"
		btrfs -q subvolume snapshot -r "$HIST/@data" "$HIST/snaps/$(snap_name "$i")" >/dev/null || exit 1
	done
	churn "$HIST/@data" $((SNAPSHOTS + 1))
	echo "  history: @data and $SNAPSHOTS snapshots, about 2% of $(find "$HIST/@data" -type f | wc -l) files changed between each"
}

# the subvolumes a method copies, relative to hist/
subvols_of()
{
	local i
	for ((i = 1; i <= SNAPSHOTS; i++)); do echo "snaps/$(snap_name "$i")"; done
	for ((i = 1; i <= NEXT; i++)); do echo "snaps/$(next_name "$i")"; done
	[ "$1" = btrbk ] || echo @data
}

next_name() { printf 'data.202602%02d' "$1"; }

# the last snapshot in SRC's history
last_snap()
{
	if ((NEXT)); then next_name "$NEXT"; else snap_name "$SNAPSHOTS"; fi
}

label()
{
	case $1 in
	encio) echo "encio copy -r --subvolumes" ;;
	encio-base) echo "encio copy -r --subvolumes (ENCIO_BASE)" ;;
	encio-pipe) echo "encio send --subvolumes \\| encio receive" ;;
	btrfs-chain) echo "btrfs send --compressed-data -p chain \\| btrfs receive" ;;
	btrbk) echo "btrbk archive (snapshots only)" ;;
	esac
}

btrfs_chain()
{
	local i prev= s tmp=$HIST/.data.migrate

	mkdir -p "$DST/hist/snaps" || return 1
	for ((i = 1; i <= SNAPSHOTS + NEXT; i++)); do
		if ((i <= SNAPSHOTS)); then
			s=$HIST/snaps/$(snap_name "$i")
		else
			s=$HIST/snaps/$(next_name $((i - SNAPSHOTS)))
		fi
		btrfs -q send --compressed-data ${prev:+-p "$prev"} "$s" | btrfs -q receive "$DST/hist/snaps" || return 1
		prev=$s
	done
	btrfs -q subvolume snapshot -r "$HIST/@data" "$tmp" >/dev/null || return 1
	btrfs -q send --compressed-data -p "$prev" "$tmp" | btrfs -q receive "$DST/hist" || return 1
	btrfs -q subvolume delete "$tmp" >/dev/null || return 1
	mv "$DST/hist/.data.migrate" "$DST/hist/@data" &&
		btrfs property set -f "$DST/hist/@data" ro false
}

# btrbk archive needs a configuration; it schedules nothing with this one
btrbk_archive()
{
	cat >"$work/btrbk.conf" <<END
timestamp_format short
archive_preserve_min all
lockfile $work/btrbk.lock
END
	mkdir -p "$DST/hist/snaps" &&
		btrbk -q -c "$work/btrbk.conf" archive "$HIST/snaps" "$DST/hist/snaps" >"$work/btrbk.log" 2>&1
}

check_result()
{
	local method=$1 p show ok=1 first=1

	for p in "snaps/$(last_snap)" @data; do
		[ "$method" = btrbk ] && [ "$p" = @data ] && continue
		if ! manifest "$DST/hist/$p" >"$work/dst.manifest" 2>/dev/null ||
			! cmp -s "$work/dst.manifest" "$work/$(basename "$p").manifest"; then
			echo "  WARNING: $method: $p differs from SRC, first differences:" >&2
			diff "$work/$(basename "$p").manifest" "$work/dst.manifest" 2>&1 | head -6 | sed 's/^/    /' >&2
			ok=0
		fi
	done
	for p in $(subvols_of "$method"); do
		show=$(btrfs subvolume show "$DST/hist/$p" 2>/dev/null) || { echo "  WARNING: $method: no subvolume $p" >&2; ok=0; continue; }
		case $p in
		@data) echo "$show" | grep -qE 'Flags:.*readonly' && { echo "  WARNING: $method: @data read-only" >&2; ok=0; } ;;
		*) echo "$show" | grep -qE 'Flags:.*readonly' || { echo "  WARNING: $method: $p writable" >&2; ok=0; } ;;
		esac
		if ((first)); then
			first=0
		elif ! echo "$show" | grep -qE 'Parent UUID:[[:space:]]+[0-9a-f-]{36}'; then
			echo "  WARNING: $method: $p not a snapshot" >&2
			ok=0
		fi
	done
	return $((1 - ok))
}

run_one()
{
	local method=$1 ok=1 du

	loopback_reformat dst
	# the temporary snapshots deleted by the run before are dropped first
	btrfs subvolume sync "$SRC" >/dev/null
	: >"$work/err"
	run_start
	case $method in
	encio) "$ENCIO" -q copy -rT --subvolumes --final "$HIST" "$DST/hist" 2>>"$work/err" || ok=0 ;;
	encio-pipe) "$ENCIO" -q send --subvolumes "$HIST" 2>>"$work/err" |
		"$ENCIO" -q receive "$DST/hist" 2>>"$work/err" || ok=0 ;;
	encio-base) "$ENCIO_BASE" -q copy -rT --subvolumes "$HIST" "$DST/hist" 2>>"$work/err" || ok=0 ;;
	btrfs-chain) btrfs_chain 2>>"$work/err" || ok=0 ;;
	btrbk) btrbk_archive 2>>"$work/err" || ok=0 ;;
	esac
	run_end "$method"
	check_result "$method" || ok=0
	du=$(disk_usage $(subvols_of "$method" | sed "s|^|$DST/hist/|"))
	if ((ok == 0)); then
		FAILED[$method]=$((${FAILED[$method]:-0} + 1))
		[ -s "$work/err" ] && sed 's/^/    /' "$work/err" | head -10 >&2
		[ "$method" = btrbk ] && sed 's/^/    /' "$work/btrbk.log" | head -10 >&2
		echo "  WARNING: $method failed" >&2
	fi
	DISK[$method]+="${du:-0} "
	awk -v m="$method" -v t="$RUN_T" -v cpu="$RUN_C" -v d="${du:-0}" -v s="${SRC_DISK[$method]}" \
		'BEGIN { printf "  %-12s %8.3f s   cpu %7.2f s   disk %9.1f MiB  %.3fx SRC\n", m, t, cpu, d / 1048576, d / s }'
}

# A method's second run, DEST filled by its first run: the time only.
second_run()
{
	local m=$1 prev new tmp=$HIST/.data.migrate

	case $m in
	encio | encio-base) "$ENCIO" -q copy -rT --subvolumes "$HIST" "$DST/hist" ;;
	encio-pipe)
		"$ENCIO" receive --state "$DST/hist" >"$work/state" &&
			"$ENCIO" -q send --subvolumes --state "$work/state" "$HIST" |
			"$ENCIO" -q receive "$DST/hist"
		;;
	btrfs-chain)
		prev=$HIST/snaps/$( ((NEXT > 1)) && next_name $((NEXT - 1)) || snap_name "$SNAPSHOTS")
		new=$HIST/snaps/$(next_name "$NEXT")
		btrfs -q send --compressed-data -p "$prev" "$new" | btrfs -q receive "$DST/hist/snaps" &&
			btrfs -q subvolume snapshot -r "$HIST/@data" "$tmp" >/dev/null &&
			btrfs -q send --compressed-data -p "$new" "$tmp" | btrfs -q receive "$DST/hist" &&
			btrfs -q subvolume delete "$tmp" >/dev/null &&
			btrfs -q subvolume delete "$DST/hist/@data" >/dev/null &&
			mv "$DST/hist/.data.migrate" "$DST/hist/@data" &&
			btrfs property set -f "$DST/hist/@data" ro false
		;;
	btrbk) btrbk -q -c "$work/btrbk.conf" archive "$HIST/snaps" "$DST/hist/snaps" >"$work/btrbk.log" 2>&1 ;;
	esac
}

# A second run of @method: a first run (not timed), churn and a new
# snapshot in SRC, the second run timed and checked.
run_second()
{
	local method=$1 ok=1

	loopback_reformat dst
	btrfs subvolume sync "$SRC" >/dev/null
	: >"$work/err"
	run_first_untimed "$method" 2>>"$work/err" || ok=0
	NEXT=$((NEXT + 1))
	churn "$HIST/@data" $((100 + NEXT))
	btrfs -q subvolume snapshot -r "$HIST/@data" "$HIST/snaps/$(next_name "$NEXT")" >/dev/null || exit 1
	churn "$HIST/@data" $((200 + NEXT))
	manifest "$HIST/snaps/$(next_name "$NEXT")" >"$work/$(next_name "$NEXT").manifest" || exit 1
	manifest "$HIST/@data" >"$work/@data.manifest" || exit 1
	run_start
	second_run "$method" 2>>"$work/err" || ok=0
	run_end "2-$method"
	check_result "$method" || ok=0
	if ((ok == 0)); then
		FAILED[2-$method]=$((${FAILED[2-$method]:-0} + 1))
		[ -s "$work/err" ] && sed 's/^/    /' "$work/err" | head -10 >&2
		echo "  WARNING: $method's second run failed" >&2
	fi
	awk -v m="$method" -v t="$RUN_T" -v cpu="$RUN_C" \
		'BEGIN { printf "  %-12s %8.3f s   cpu %7.2f s   (second run)\n", m, t, cpu }'
}

# A first run of @method, not timed (encio's without --final).
run_first_untimed()
{
	case $1 in
	encio) "$ENCIO" -q copy -rT --subvolumes "$HIST" "$DST/hist" ;;
	encio-base) "$ENCIO_BASE" -q copy -rT --subvolumes "$HIST" "$DST/hist" ;;
	encio-pipe) "$ENCIO" -q send --subvolumes "$HIST" | "$ENCIO" -q receive "$DST/hist" ;;
	btrfs-chain) btrfs_chain ;;
	btrbk) btrbk_archive ;;
	esac
}

echo "== the history"
build_history
declare -A SRC_DISK
for m in $METHODS; do
	SRC_DISK[$m]=$(disk_usage $(subvols_of "$m" | sed "s|^|$HIST/|"))
	[ -n "${SRC_DISK[$m]}" ] || { echo "compsize failed on SRC" >&2; exit 1; }
done
awk -v d="${SRC_DISK[encio]}" 'BEGIN { printf "  on disk in SRC: %.1f MiB (compsize)\n", d / 1048576 }'
manifest "$HIST/snaps/$(last_snap)" >"$work/$(last_snap).manifest" || exit 1
manifest "$HIST/@data" >"$work/@data.manifest" || exit 1

echo "== timing: $ROUNDS rounds, $(nproc) CPUs (fresh destination, caches dropped, sync included, order rotating)"
read -ra method_list <<<"$METHODS"
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#method_list[@]}; i++)); do
		run_one "${method_list[(r + i) % ${#method_list[@]}]}"
	done
done

echo
echo "Median of $ROUNDS rounds; ratio: time over encio's; cpu: busy CPU time of the machine"
echo "during the run; disk: compsize Disk Usage of the copied subvolumes, / SRC: over the"
echo "same subvolumes' in SRC."
echo
echo "| method | time | ratio | cpu | disk | / SRC |"
echo "|---|---:|---:|---:|---:|---:|"
for m in $METHODS; do
	awk -v l="$(label "$m")" -v a="$(med "${TIMES[$m]}")" -v e="$(med "${TIMES[encio]}")" \
		-v cpu="$(med "${CPUS[$m]}")" -v d="$(med "${DISK[$m]}")" -v s="${SRC_DISK[$m]}" \
		-v f="${FAILED[$m]:-0}" -v r="$ROUNDS" \
		'BEGIN { printf "| %s%s | %.2f s | %.2fx | %.2f s | %.1f MiB | %.3f |\n",
			l, f ? (" (FAILED in " f " of " r " runs)") : "", a, a / e, cpu, d / 1048576, d / s }'
done
echo
echo "Time over encio's within each round, round by round:"
for m in $METHODS; do
	[ "$m" = encio ] && continue
	printf '  %-12s %s\n' "$m" "$(round_ratios "${TIMES[encio]}" "${TIMES[$m]}")"
done
echo
if ((SECOND)); then
	echo "== second runs: $ROUNDS rounds (each after a first run, churn and a new snapshot)"
	for ((r = 0; r < ROUNDS; r++)); do
		for ((i = 0; i < ${#method_list[@]}; i++)); do
			run_second "${method_list[(r + i) % ${#method_list[@]}]}"
		done
	done
	echo
	echo "Second runs, median of $ROUNDS rounds; ratio: time over encio's."
	echo
	echo "| method | time | ratio | cpu |"
	echo "|---|---:|---:|---:|"
	for m in $METHODS; do
		awk -v l="$(label "$m")" -v a="$(med "${TIMES[2-$m]}")" -v e="$(med "${TIMES[2-encio]}")" \
			-v cpu="$(med "${CPUS[2-$m]}")" -v f="${FAILED[2-$m]:-0}" -v r="$ROUNDS" \
			'BEGIN { printf "| %s%s | %.2f s | %.2fx | %.2f s |\n",
				l, f ? (" (FAILED in " f " of " r " runs)") : "", a, a / e, cpu }'
	done
	echo
fi
case " $METHODS " in *" btrfs-chain "*) ;; *) exit 0 ;; esac
awk -v a="$(med "${TIMES[encio]}")" -v b="$(med "${TIMES[btrfs-chain]}")" \
	-v d="$(med "${DISK[encio]}")" -v s="${SRC_DISK[encio]}" -v f="${FAILED[encio]:-0}" \
	'BEGIN { if (f) { print "Target: encio FAILED: not measured"; exit }
		printf "Target: at least 2x faster than btrfs-chain: %.2fx (%s); disk within 2%% of SRC: %.3fx (%s)\n",
			b / a, (b / a >= 2) ? "met" : "missed", d / s, (d / s <= 1.02) ? "met" : "missed" }'
