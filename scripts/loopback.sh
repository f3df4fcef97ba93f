# SPDX-License-Identifier: GPL-2.0
# Sourced by the demo and the benchmarks: a work directory in /dev/shm and
# loopback btrfs images in it, all unmounted, detached and removed on exit.
#   loopback_init PREFIX                  creates $work
#   loopback_image NAME SIZE [MOUNT_OPTS] a fresh btrfs mounted at $work/NAME
#   loopback_tmpfs NAME SIZE              a tmpfs mounted at $work/NAME
#   drop                                  sync and drop the page cache
#   now                                   seconds, with nanoseconds

_loopback_mounts=()
_loopback_loops=()

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
}

loopback_tmpfs()
{
	mkdir "$work/$1"
	mount -t tmpfs -o "size=$2" tmpfs "$work/$1" || exit 1
	_loopback_mounts+=("$work/$1")
}

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
