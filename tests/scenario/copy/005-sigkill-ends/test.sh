#!/bin/bash
# SIGKILL ends encio copy at once, whatever is in flight: killed over and
# over mid-copy of files with thousands of small compressed extents (each
# encoded read locks a 128 KiB range, so neighbouring reads overlap), with
# auto reads, with reads forced through io_uring, from a read-only
# snapshot, as copy and copy -r, and while another process writes the
# source, the process is gone within seconds every time, never stuck in D
# state, and both filesystems unmount afterwards. auto reads a writable
# source through the ioctl and a read-only snapshot through the ring.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 1G noatime
DST=$MNT

# many_extents FILE N: N compressed extents of 8 KiB, 12 KiB apart (holes
# between them keep them apart), different data in each.
many_extents()
{
	perl -e '
		my ($path, $n) = @ARGV;
		open(my $f, "+>", $path) or die "$path: $!";
		for my $i (0 .. $n - 1) {
			my $line = sprintf("extent %08d of %s ", $i, $path);
			my $buf = substr($line x (8192 / length($line) + 1), 0, 8192);
			sysseek($f, $i * 12288, 0) or die;
			syswrite($f, $buf) == 8192 or die "write: $!";
		}
		close($f) or die;
	' "$1" "$2" || _fail "writing $1"
}

many_extents "$SRC/big" 8000
mkdir -p "$SRC/tree/a" "$SRC/tree/b"
for i in 0 1 2; do
	many_extents "$SRC/tree/a/f$i" 3000
	many_extents "$SRC/tree/b/g$i" 3000
done
sync
n=$("$ENCIO" list "$SRC/big" | grep -c zstd)
[ "$n" -ge 7000 ] || _fail "only $n compressed extents in $SRC/big"
echo "$SRC/big: $n zstd extents"

# stat_state PID: the process state letter (R, S, D, Z...), empty once gone
stat_state()
{
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	echo "${s%% *}"
}

# kill_midway DELAY ARGS...: start encio ARGS, SIGKILL it after DELAY
# seconds, and require it to be gone (or a zombie) within 5 seconds.
kill_midway()
{
	local delay=$1 pid state t
	shift
	"$ENCIO" "$@" >/dev/null 2>&1 &
	pid=$!
	disown $pid
	sleep "$delay"
	kill -KILL $pid 2>/dev/null && KILLED=$((KILLED + 1))
	for t in $(seq 50); do
		state=$(stat_state $pid)
		[ -z "$state" ] || [ "$state" = Z ] && break
		sleep 0.1
	done
	if [ -n "$state" ] && [ "$state" != Z ]; then
		grep -H . /proc/$pid/task/*/comm /proc/$pid/task/*/stat /proc/$pid/task/*/wchan 2>/dev/null | head -20
		_fail "encio $* still there 5 s after SIGKILL (state $state) at ${delay}s"
	fi
	wait $pid 2>/dev/null
	echo "killed at ${delay}s: gone: encio $*"
}

# The modes under test: auto on a writable source (reads through the
# ioctl), reads forced through the ring on it (one read per file at a time)
# and auto on a read-only snapshot (ring reads spread over the file).
btrfs subvolume snapshot -r "$SRC" "$SRC/snap" >/dev/null || _fail "snapshot"
out=$("$ENCIO" -v copy "$SRC/big" "$DST/probe" 2>&1) || _fail "copy: $out"
echo "$out" | grep -q "chosen: read ioctl" ||
	_fail "auto reads a writable source through the ring: $(echo "$out" | grep chosen)"
out=$("$ENCIO" -v copy "$SRC/snap/big" "$DST/probe2" 2>&1) || _fail "copy: $out"
echo "$out" | grep -q "probe uring-fixed read: *works" ||
	_not_run "encoded reads through io_uring do not work here"
echo "$out" | grep -q "chosen: read uring" ||
	_fail "auto reads a read-only snapshot through the ioctl: $(echo "$out" | grep chosen)"

# clear: a fresh destination and no cached source data
clear()
{
	rm -rf "${DST:?}"/* "$DST"/.[!.]* 2>/dev/null
	echo 3 >/proc/sys/vm/drop_caches
}

KILLED=0
delays="0.05 0.1 0.15 0.2 0.08 0.12 0.3 0.03 0.25 0.18 0.06 0.4"
_log "copy of one file, SIGKILL midway, ${delays// /, } s"
for d in $delays; do
	clear
	kill_midway "$d" copy "$SRC/big" "$DST/big"
	clear
	kill_midway "$d" --io=uring-fixed copy "$SRC/big" "$DST/big"
	clear
	kill_midway "$d" copy "$SRC/snap/big" "$DST/big"
done

_log "copy -r of a tree, SIGKILL midway"
for d in $delays; do
	clear
	kill_midway "$d" --io=uring-fixed copy -r "$SRC/tree" "$DST/tree"
	clear
	kill_midway "$d" copy -r "$SRC/snap/tree" "$DST/tree"
done

_log "reads forced through the ring while another process writes the file"
perl -e '
	open(my $f, "+<", $ARGV[0]) or die "$ARGV[0]: $!";
	for (my $i = 0; ; $i++) {
		sysseek($f, (($i * 7919) % 8000) * 12288 + 4096, 0);
		syswrite($f, "w" x 4096);
		select(undef, undef, undef, 0.0002);
	}' "$SRC/big" &
writer=$!
for d in 0.1 0.2 0.05 0.3 0.15 0.25; do
	clear
	kill_midway "$d" --io=uring-fixed copy "$SRC/big" "$DST/big"
done
kill $writer
wait $writer 2>/dev/null

echo "$KILLED copies killed before they finished"
[ "$KILLED" -ge 50 ] || _fail "only $KILLED of 66 copies were still running when killed"

_log "a whole copy still matches"
clear
run_check "$ENCIO" -q copy "$SRC/snap/big" "$DST/big"
cmp "$SRC/snap/big" "$DST/big" || _fail "copy differs"
_log "both filesystems unmount"
for m in "$DST" "$SRC"; do
	umount "$m" || _fail "$m does not unmount: $(fuser -vm "$m" 2>&1 | head -5)"
done
echo PASS
