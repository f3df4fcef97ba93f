#!/bin/bash
# Run xfstests' send group with encio standing in for btrfs send and btrfs
# receive, or (--peer) with btrfs-progs alone, on loopback devices made here.
#
#   tests/xfstests/run-send-group.sh [--peer] [--results DIR] [--img-dir DIR]
#       [--size SIZE] XFSTESTS_DIR [ENCIO] [-- CHECK_ARGS...]
#
# CHECK_ARGS go to xfstests' ./check in place of "-g send" (e.g. btrfs/252).
# Needs root, loop devices and a built xfstests tree. See README here.
set -u

usage() {
	sed -n '4,6p' "$0" | sed 's/^# \{0,3\}//' >&2
	exit 2
}

peer=false
results=
img_dir=${ENCIO_XFSTESTS_IMG_DIR:-/dev/shm}
size=8G
while [ $# -gt 0 ]; do
	case $1 in
	--peer) peer=true ;;
	--results) results=$2; shift ;;
	--results=*) results=${1#*=} ;;
	--img-dir) img_dir=$2; shift ;;
	--img-dir=*) img_dir=${1#*=} ;;
	--size) size=$2; shift ;;
	--size=*) size=${1#*=} ;;
	-h|--help) usage ;;
	--) break ;;
	-*) echo "unknown option: $1" >&2; usage ;;
	*) break ;;
	esac
	shift
done
[ $# -ge 1 ] && [ "$1" != -- ] || usage
xfstests=$(realpath "$1") || exit 2
shift
encio=
if [ $# -gt 0 ] && [ "$1" != -- ]; then
	encio=$1
	shift
fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
check_args=("$@")
[ ${#check_args[@]} -gt 0 ] || check_args=(-g send)

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 2; }
[ -x "$xfstests/check" ] && [ -x "$xfstests/src/fssum" ] || {
	echo "$xfstests: not a built xfstests tree (no check or src/fssum)" >&2
	exit 2
}
# Resolved now, before anything named btrfs can come first in PATH.
real_btrfs=${BTRFS_PROG:-$(command -v btrfs)} || {
	echo "btrfs-progs not found" >&2
	exit 2
}
if ! $peer; then
	if [ -z "$encio" ]; then
		here=$(dirname "$(realpath "$0")")
		for c in "$here/../../build/encio" "$here/../../encio"; do
			[ -x "$c" ] && { encio=$c; break; }
		done
		[ -n "$encio" ] || encio=$(command -v encio) || {
			echo "no encio binary: give ENCIO" >&2
			exit 2
		}
	fi
	encio=$(realpath "$encio") && [ -x "$encio" ] || {
		echo "$encio: not executable" >&2
		exit 2
	}
fi
label=encio
$peer && label=btrfs-progs
[ -n "$results" ] || results=$xfstests/results/send-$label
mkdir -p "$results" && results=$(realpath "$results") || exit 2

tmp=
test_loop=
scratch_loop=
cleanup() {
	local m
	for m in "$tmp/test" "$tmp/scratch"; do
		mountpoint -q "$m" 2>/dev/null && { umount "$m" || umount -l "$m"; }
	done
	[ -n "$test_loop" ] && losetup -d "$test_loop"
	[ -n "$scratch_loop" ] && losetup -d "$scratch_loop"
	# Never rm -r: a mount point that would not unmount must not be emptied.
	if [ -n "$tmp" ]; then
		rm -f "$tmp/btrfs" "$tmp/btrfs-send" "$tmp/btrfs-receive" \
			"$tmp/local.config"
		rmdir "$tmp/test" "$tmp/scratch" "$tmp"
	fi
	rm -f "$img_dir/encio-xfstests.$$.test.img" \
		"$img_dir/encio-xfstests.$$.scratch.img"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Mount points must live on a real directory tree (xfstests checks them
# with mountpoint and df), so the whole temporary tree goes under /mnt.
tmp=$(mktemp -d /mnt/encio-xfstests.XXXXXX) || exit 1
# Tests run the wrapper as fsgqa too (btrfs/339: receive --dump as a user).
chmod 755 "$tmp" || exit 1
mkdir "$tmp/test" "$tmp/scratch" || exit 1
for d in test scratch; do
	img=$img_dir/encio-xfstests.$$.$d.img
	truncate -s "$size" "$img" || exit 1
	dev=$(losetup -f --show "$img") || exit 1
	if [ $d = test ]; then test_loop=$dev; else scratch_loop=$dev; fi
done
mkfs.btrfs -q -f "$test_loop" >/dev/null || exit 1

prog=$real_btrfs
if ! $peer; then
	prog=$tmp/btrfs
	# btrfs-progs takes global options before the command; for send and
	# receive -v and -q mean what the command's own -v and -q mean, so they
	# move behind it, where encio reads them with btrfs' meaning (encio's
	# global -v is about its I/O probe, not about what was sent).
	# --format has no effect on send or receive in btrfs-progs: dropped.
	cat >"$prog" <<WRAP
#!/bin/bash
real=$(printf %q "$real_btrfs")
links=$(printf %q "$tmp")
log=$(printf %q "$results/encio-calls.log")
WRAP
	cat >>"$prog" <<'WRAP'
args=("$@")
opts=()
i=0
while [ $i -lt ${#args[@]} ]; do
	case ${args[$i]} in
	-v|--verbose) opts+=(-v) ;;
	-q|--quiet) opts+=(-q) ;;
	--log=quiet) opts+=(-q) ;;
	--log=info|--log=verbose|--log=debug) opts+=(-v) ;;
	--log=*|--format=*) ;;
	--log|--format)
		case ${args[$((i + 1))]:-} in
		quiet) opts+=(-q) ;;
		info|verbose|debug) opts+=(-v) ;;
		esac
		i=$((i + 1)) ;;
	*) break ;;
	esac
	i=$((i + 1))
done
# btrfs-progs accepts any unambiguous prefix of a command name.
case ${args[$i]:-} in
se|sen|send) cmd=send ;;
rec|rece|recei|receiv|receive) cmd=receive ;;
*) exec "$real" "$@" ;;
esac
# Best effort: a test running this as an unprivileged user cannot write the
# log, and a message about it would land in the test's golden output.
{ echo "$cmd ${opts[*]} ${args[*]:$((i + 1))}" >>"$log"; } 2>/dev/null
exec "$links/btrfs-$cmd" "${opts[@]}" "${args[@]:$((i + 1))}"
WRAP
	chmod +x "$prog"
	# encio as btrfs-send and btrfs-receive prints what btrfs-progs prints
	ln -s "$encio" "$tmp/btrfs-send" && ln -s "$encio" "$tmp/btrfs-receive" || exit 1
	: >"$results/encio-calls.log"
fi

# A config of our own (HOST_OPTIONS) leaves the tree's local.config alone.
cat >"$tmp/local.config" <<CONF
export FSTYP=btrfs
export TEST_DEV=$test_loop
export TEST_DIR=$tmp/test
export SCRATCH_DEV=$scratch_loop
export SCRATCH_MNT=$tmp/scratch
export RESULT_BASE=$results
export BTRFS_UTIL_PROG=$prog
CONF
cp "$tmp/local.config" "$results/local.config"

echo "xfstests: $xfstests ($(git -C "$xfstests" describe --always 2>/dev/null || echo ?))"
if $peer; then
	echo "send/receive: $("$real_btrfs" --version)"
else
	echo "send/receive: $encio ($("$encio" --version 2>&1 | head -1)); other commands: $("$real_btrfs" --version)"
fi
echo "kernel: $(uname -r); results: $results"
start=$(date +%s)
(cd "$xfstests" && HOST_OPTIONS=$tmp/local.config ./check "${check_args[@]}") 2>&1 |
	tee "$results/check.out"
rc=${PIPESTATUS[0]}
secs=$(($(date +%s) - start))
# Another program on the machine detaching loop devices it does not own
# turns every later test into a failure that says nothing about send.
lost=
for dev in "$test_loop" "$scratch_loop"; do
	losetup "$dev" 2>/dev/null | grep -q "encio-xfstests\.$$\." || lost="$lost $dev"
done

# check's "Ran:" counts tests that were not run too.
line() { grep "^$1" "$results/check.out" | tail -1 | sed "s/^$1 *//"; }
ran=$(line 'Ran:')
notrun=$(line 'Not run:')
failed=$(line 'Failures:')
passed=$(for t in $ran; do
	case " $notrun $failed " in *" $t "*) ;; *) echo "$t" ;; esac
done | tr '\n' ' ')
count() { set -- $1; echo $#; }
echo
echo "=== send group, $label, $((secs / 60))m$((secs % 60))s"
echo "passed:  $(count "$passed") $passed"
echo "failed:  $(count "$failed") $failed"
echo "not run: $(count "$notrun") $notrun"
echo "results: $results"
if [ -n "$lost" ]; then
	echo "WARNING: loop device(s)$lost detached during the run by something else; results not valid"
	test_loop=; scratch_loop=
	exit 1
fi
[ $rc -eq 0 ] && [ -z "$failed" ]
