# SPDX-License-Identifier: GPL-2.0
# Shared helpers for scenario tests: source this from tests/scenario/*/test.sh.
#
# Every test makes its own loopback images under a temporary directory on
# tmpfs, and the EXIT trap unmounts, detaches and removes them whatever
# happens. Exit codes follow automake: 0 pass, 1 fail, 77 skip.

set -u

: "${ENCIO:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/encio}"
: "${TOP_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${TOP_BUILDDIR:=$TOP_SRCDIR}"

TEST_NAME=$(basename "$(dirname "$0")")
TEST_TMP=
_MOUNTS=()
_LOOPS=()

_cleanup()
{
	local rc=$? m l i
	cd /
	for ((i = ${#_MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${_MOUNTS[i]}
		mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	for l in "${_LOOPS[@]}"; do
		losetup -d "$l" 2>/dev/null
	done
	[ -n "$TEST_TMP" ] && rm -rf "$TEST_TMP"
	exit $rc
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

_not_run()
{
	echo "SKIP: $TEST_NAME: $*"
	exit 77
}

_fail()
{
	echo "FAIL: $TEST_NAME: $*" >&2
	exit 1
}

_log()
{
	echo "== $*"
}

# Run a command that must succeed; show it and its output.
run_check()
{
	echo "+ $*"
	"$@" || _fail "command failed ($?): $*"
}

# Run a command that must fail with exit status 1; keep its stderr in $ERR_OUT.
ERR_OUT=
run_mustfail()
{
	local msg=$1 rc
	shift
	echo "+ (must fail) $*"
	ERR_OUT=$("$@" 2>&1 >/dev/null)
	rc=$?
	echo "$ERR_OUT"
	[ $rc -eq 1 ] || _fail "$msg: expected exit 1, got $rc: $*"
}

require_root()
{
	[ "$(id -u)" = 0 ] || _not_run "needs root"
	command -v mkfs.btrfs >/dev/null || _not_run "needs mkfs.btrfs (btrfs-progs)"
	losetup -f >/dev/null 2>&1 || _not_run "needs loop devices"
}

setup_tmp()
{
	local base=/dev/shm
	[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
	TEST_TMP=$(mktemp -d "$base/encio-test.XXXXXX") || _fail "mktemp"
}

# make_btrfs NAME SIZE [MOUNT_OPTIONS [MKFS_OPTIONS...]]: sets MNT.
make_btrfs()
{
	local name=$1 size=$2 opts=${3:-} img loop
	shift 3 2>/dev/null || shift $#
	[ -n "$TEST_TMP" ] || setup_tmp
	img=$TEST_TMP/$name.img
	truncate -s "$size" "$img" || _fail "truncate $img"
	loop=$(losetup -f --show "$img") || _fail "losetup $img"
	_LOOPS+=("$loop")
	mkfs.btrfs -q -f "$@" "$loop" >/dev/null || _fail "mkfs.btrfs $loop"
	MNT=$TEST_TMP/$name
	mkdir -p "$MNT"
	mount ${opts:+-o "$opts"} "$loop" "$MNT" || _fail "mount $loop"
	_MOUNTS+=("$MNT")
}

# make_tmpfs NAME [SIZE]: sets MNT.
make_tmpfs()
{
	[ -n "$TEST_TMP" ] || setup_tmp
	MNT=$TEST_TMP/$1
	mkdir -p "$MNT"
	mount -t tmpfs -o "size=${2:-256M}" tmpfs "$MNT" || _fail "mount tmpfs"
	_MOUNTS+=("$MNT")
}

# Data helpers: deterministic, so failures reproduce.
# compressible BYTES > FILE: text that compresses well.
compressible()
{
	yes "encio test line: the quick brown fox jumps over the lazy dog 0123456789" |
		head -c "$1"
}

# random_bytes BYTES SEED > FILE
random_bytes()
{
	openssl enc -aes-128-ctr -pass "pass:$2" -nosalt -pbkdf2 </dev/zero 2>/dev/null |
		head -c "$1"
}

# tree_stat DIR: the stat fields of every entry under DIR, by relative path
# (type, mode, size, owner, device numbers, atime and mtime to the
# nanosecond, links), one line each, sorted.
tree_stat()
{
	(cd "$1" && find . -printf '%P\n' | LC_ALL=C sort | while read -r p; do
		[ -z "$p" ] && p=.
		stat -c "$p %F %f %s %u %g %t %T %X.%x %Y.%y %h" -- "$p" | sed 's/ [0-9.]*\.\([0-9-]* [0-9:.]* [+-][0-9]*\)/ \1/g'
	done)
}

# tree_xattrs DIR: every xattr of every entry under DIR (getfattr, hex).
tree_xattrs()
{
	(cd "$1" && find . | LC_ALL=C sort | while read -r p; do
		getfattr -h -d -m- -e hex -- "$p" 2>/dev/null
	done)
}

# Compare two files: content, size, mode, owner, mtime.
check_same_file()
{
	local a=$1 b=$2
	cmp "$a" "$b" || _fail "content differs: $a $b"
	[ "$(stat -c '%s %f %u %g %Y' "$a")" = "$(stat -c '%s %f %u %g %Y' "$b")" ] ||
		_fail "metadata differs: $(stat -c '%s %f %u %g %Y' "$a") vs $(stat -c '%s %f %u %g %Y' "$b")"
}

# Disk usage line of compsize for a file: "TYPE DISK UNCOMP REFD" in bytes.
compsize_bytes()
{
	compsize -b "$@" 2>/dev/null | awk '$1 != "Processed" && $1 != "Type" && NF == 5 { print $1, $3, $4, $5 }'
}

cd "$(dirname "$0")" || exit 1

# Stop process PID (SIGSTOP) once it holds PATH open; the test cannot run
# (skip) if it ends or never opens PATH first.
stop_when_open()
{
	local pid=$1 path=$2 n=0
	until ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "-> $path\$"; do
		n=$((n + 1))
		if [ $n -gt 20000 ] || ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			_not_run "process $pid never held $path open"
		fi
	done
	kill -STOP "$pid"
}
