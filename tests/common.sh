# SPDX-License-Identifier: GPL-2.0
# Shared helpers for scenario tests: source this from tests/scenario/AREA/NNN-name/test.sh.
#
# Every test makes its own loopback images under a temporary directory on
# tmpfs, and the EXIT trap unmounts, detaches and removes them whatever
# happens. Exit codes follow automake: 0 pass, 1 fail, 77 skip.

set -u

: "${ENCIO:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/encio}"
: "${TOP_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${TOP_BUILDDIR:=$TOP_SRCDIR}"

# A pyenv shim runs pyenv at each start (about 0.4 s here, against 0.04 s
# for the interpreter); the tests start python3 often, so they call the
# interpreter the shim names.
case $(command -v python3) in
*/shims/python3)
	_py=$(pyenv which python3 2>/dev/null) && PATH=${_py%/*}:$PATH
	;;
esac

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

# require_stream_gen: sets GEN, tests/unit/stream-gen of the build under
# test (made if missing); the test cannot run without it
require_stream_gen()
{
	GEN=$(dirname "$ENCIO")/tests/unit/stream-gen
	[ -x "$GEN" ] || make -C "$(dirname "$ENCIO")" -s tests/unit/stream-gen >/dev/null 2>&1 ||
		_not_run "needs tests/unit/stream-gen (make check builds it)"
}

require_root()
{
	[ "$(id -u)" = 0 ] || _not_run "needs root"
	command -v mkfs.btrfs >/dev/null || _not_run "needs mkfs.btrfs (btrfs-progs)"
	losetup -f >/dev/null 2>&1 || _not_run "needs loop devices"
}

# as_user CMD...: CMD as an unprivileged user (uid and gid 4321, no
# groups), for tests of what other users can do to SRC or DEST
as_user()
{
	setpriv --reuid=4321 --regid=4321 --clear-groups "$@"
}

require_setpriv()
{
	command -v setpriv >/dev/null || _not_run "needs setpriv (util-linux)"
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

# umount_settled DIR: unmount DIR after a process on it was SIGKILLed:
# its io_uring is torn down after it dies, holding its files a moment
# (umount then says busy), so a few tries, 5 s at most.
umount_settled()
{
	local i
	for ((i = 0; i < 50; i++)); do
		umount "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	umount "$1"
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

# check_made_ahead OUT N: copy -r --subvolumes -v's summary in OUT counts
# at least N-2 of N differences made ahead (a pass the copy overtook is
# asked of the kernel at its turn: a margin of 2)
check_made_ahead()
{
	local ahead
	ahead=$(sed -n 's/^subvolumes: .* \([0-9]*\) differences made ahead.*/\1/p' "$1")
	[ "${ahead:-0}" -ge $(($2 - 2)) ] || _fail "only ${ahead:-0} of $2 differences made ahead"
}

# uuid_of PATH [Parent|Received]: the subvolume's UUID, or that one of
# its UUIDs, as btrfs subvolume show prints it ("-" for none)
uuid_of()
{
	btrfs subvolume show "$1" | awk -v f="${2:-}" '
		f == "" && $1 == "UUID:" { print $2 }
		f != "" && $1 == f && $2 == "UUID:" { print $3 }'
}

# strace_calls OUT SYSCALLS CMD...: CMD under strace -f, its calls of
# SYSCALLS (as strace's -e trace= takes them) written to OUT; with
# --seccomp-bpf only those stop it. LeakSanitizer cannot run under
# ptrace: it is off for CMD.
strace_calls()
{
	local out=$1 calls=$2
	shift 2
	env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f --seccomp-bpf -qq -e trace="$calls" -o "$out" "$@"
}

# random_bytes BYTES SEED > FILE
random_bytes()
{
	openssl enc -aes-128-ctr -pass "pass:$2" -nosalt -pbkdf2 </dev/zero 2>/dev/null |
		head -c "$1"
}

# tree_stat DIR: the stat fields of every entry under DIR, by relative path
# (type, mode, size, owner, device numbers, atime and mtime to the
# nanosecond, links), one line each, sorted. One stat for many entries:
# a stat per entry made this the slowest part of several tests.
tree_stat()
{
	(cd "$1" && find . -print0 | xargs -0r stat -c '%n %F %f %s %u %g %t %T %x %y %h' -- |
		LC_ALL=C sort)
}

# tree_xattrs DIR: every xattr of every entry under DIR (getfattr, hex).
# The xattrs trees are compared by (getfattr -m): all but the mark encio
# receive sets on the root of a subvolume it received (trusted.encio.*).
XATTRS='^([^t]|trusted\.[^e])'

tree_xattrs()
{
	(cd "$1" && find . -print0 | LC_ALL=C sort -z | xargs -0r getfattr -h -d -m "$XATTRS" -e hex -- 2>/dev/null)
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

# clone SRC_FILE SRC_OFF LEN DST_FILE DST_OFF  (FICLONERANGE)
# dedupe SRC_FILE SRC_OFF LEN DST_FILE DST_OFF (FIDEDUPERANGE)
remap()
{
	python3 - "$@" <<'PY' || _fail "$*"
import fcntl, os, struct, sys
op, src, soff, length, dst, doff = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
d = os.open(dst, os.O_RDWR)
s = d if src == dst else os.open(src, os.O_RDONLY)
if op == "clone":
    fcntl.ioctl(d, 0x4020940d, struct.pack("qQQQ", s, soff, length, doff))
else:
    buf = bytearray(struct.pack("QQHHI", soff, length, 1, 0, 0) + struct.pack("qQQiI", d, doff, 0, 0, 0))
    fcntl.ioctl(s, 0xC0189436, buf)
    status = struct.unpack_from("i", buf, 24 + 24)[0]
    if status != 0:
        sys.exit("dedupe status %d" % status)
PY
}

# disk DIR...: compsize's disk usage of DIR... together, in bytes
disk()
{
	compsize -b "$@" | awk '$1 == "TOTAL" { print $3 }'
}

# within A B: A at most 1.5% over B (less is right where B holds parts of
# extents no file uses any more: a copy writes only what files use)
within()
{
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b * 1.015) }'
}

# shared_extents FILE: the extents of FILE that FIEMAP flags shared
shared_extents()
{
	filefrag -v "$1" | grep -c shared
}

# make_shared_tree FS: in FS, subvolume sv with every kind of sharing
# (cat's reflinks, cp --reflink, 64 KiB cloned into the middle of a file,
# a file cloned into itself, a deduplicated pair, compressed and plain
# extents, an unaligned tail), read-only snapshot snap1, some churn, and
# read-only snapshot snap2.
make_shared_tree()
{
	local V
	_log "a subvolume with every kind of sharing"
	run_check btrfs -q subvolume create "$1/sv"
	V=$1/sv
	compressible 3000000 >"$V/text"
	random_bytes 2000000 base >"$V/random"
	cat "$V/text" "$V/random" "$V/text" >"$V/mixed"      # cat reflinks what it can
	cp --reflink=always "$V/text" "$V/text.reflink"
	cp --reflink=always "$V/random" "$V/random.reflink"
	{ compressible 500000; random_bytes 123457 tail; } >"$V/tail"   # unaligned size
	cp --reflink=always "$V/tail" "$V/tail.reflink"
	random_bytes 1048576 mid >"$V/middle"
	remap clone "$V/random" 0 65536 "$V/middle" 262144
	random_bytes 1048576 self >"$V/self"
	remap clone "$V/self" 0 262144 "$V/self" 524288
	random_bytes 786432 dup >"$V/dup1"
	cp "$V/dup1" "$V/dup2"
	sync
	remap dedupe "$V/dup1" 0 786432 "$V/dup2" 0
	sync
	run_check btrfs -q subvolume snapshot -r "$V" "$1/snap1"
	_log "churn, then a second snapshot"
	dd if=/dev/urandom of="$V/text" bs=4096 count=4 seek=100 conv=notrunc status=none
	dd if=/dev/urandom of="$V/random" bs=65536 count=1 seek=5 conv=notrunc status=none
	rm "$V/dup2"
	random_bytes 300000 new >"$V/new"
	sync
	run_check btrfs -q subvolume snapshot -r "$V" "$1/snap2"
}

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
