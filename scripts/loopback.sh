# SPDX-License-Identifier: GPL-2.0
# Sourced by the demo and the benchmarks: a work directory in /dev/shm and
# loopback btrfs images in it, all unmounted, detached and removed on exit.
#   loopback_init PREFIX                  creates $work
#   loopback_image NAME SIZE [MOUNT_OPTS] a fresh btrfs mounted at $work/NAME
#   loopback_tmpfs NAME SIZE              a tmpfs mounted at $work/NAME
#   loopback_reformat NAME                a fresh, empty filesystem on NAME's image
#   drop                                  sync and drop the page cache
#   now                                   seconds, with nanoseconds
#   cpu_busy                              CPU seconds all CPUs were busy since boot
#   median                                the median of the numbers on stdin
#   run_start, run_end KEY                time a benchmark run: caches dropped
#                                         first, sync included; its time and busy
#                                         CPU time are added to TIMES[KEY] and
#                                         CPUS[KEY] and left in RUN_T and RUN_C
#   med LIST                              the median of a list of numbers
#   round_ratios REF OTHER                OTHER/REF round by round (two lists
#                                         of times in the same round order),
#                                         then their median

_loopback_mounts=()
_loopback_loops=()
declare -A _loopback_dev _loopback_opts

_loopback_cleanup()
{
	local i l
	cd /
	for ((i = ${#_loopback_mounts[@]} - 1; i >= 0; i--)); do
		umount "${_loopback_mounts[i]}" 2>/dev/null || umount -l "${_loopback_mounts[i]}"
	done
	for l in "${_loopback_loops[@]}"; do losetup -d "$l"; done
	[ -n "${work:-}" ] && rm -rf "$work"
}

loopback_init()
{
	work=$(mktemp -d "/dev/shm/$1.XXXXXX") || exit 1
	trap _loopback_cleanup EXIT
	trap 'exit 130' INT TERM
}

loopback_image()
{
	local name=$1 size=$2 opts=${3:-} loop
	truncate -s "$size" "$work/$name.img"
	loop=$(losetup -f --show "$work/$name.img") || exit 1
	_loopback_loops+=("$loop")
	mkfs.btrfs -q -f "$loop" >/dev/null || exit 1
	mkdir "$work/$name"
	mount ${opts:+-o "$opts"} "$loop" "$work/$name" || exit 1
	_loopback_mounts+=("$work/$name")
	_loopback_dev[$name]=$loop
	_loopback_opts[$name]=$opts
}

# Deleting what a run wrote leaves the btrfs cleaner busy during the next
# one: benchmarks start each run on a new filesystem instead.
loopback_reformat()
{
	local name=$1 opts=${_loopback_opts[$1]}
	umount "$work/$name" || exit 1
	mkfs.btrfs -q -f "${_loopback_dev[$name]}" >/dev/null || exit 1
	mount ${opts:+-o "$opts"} "${_loopback_dev[$name]}" "$work/$name" || exit 1
}

loopback_tmpfs()
{
	mkdir "$work/$1"
	mount -t tmpfs -o "size=$2" tmpfs "$work/$1" || exit 1
	_loopback_mounts+=("$work/$1")
}

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
# user + nice + system + irq + softirq of all CPUs (steal is not ours)
cpu_busy() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A TIMES CPUS

run_start()
{
	drop
	_run_c0=$(cpu_busy)
	_run_t0=$(now)
}

run_end()
{
	sync
	RUN_T=$(awk -v a="$_run_t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
	RUN_C=$(awk -v a="$_run_c0" -v b="$(cpu_busy)" 'BEGIN { printf "%.2f", b - a }')
	TIMES[$1]+="$RUN_T "
	CPUS[$1]+="$RUN_C "
}

med() { echo $1 | tr ' ' '\n' | median; }

# The machine's speed drifts over minutes; the runs of one round are back to
# back, so the ratio within each round is the steadier comparison.
round_ratios()
{
	local ratios

	ratios=$(paste <(echo $1 | tr ' ' '\n') <(echo $2 | tr ' ' '\n') |
		awk '$1 > 0 { printf "%.2f ", $2 / $1 }')
	printf '%s(median %.2fx)' "${ratios//' '/x }" "$(med "$ratios")"
}
