#!/bin/bash
# encio copy -r --subvolumes moves a filesystem with its history: two
# writable subvolumes (one nested in the other), ten read-only snapshots of
# each with churn between them (renames, reflinks, deletes, appends,
# xattrs), snapshots received from another filesystem by btrbk, a plain
# file, and a default subvolume. In DEST: every subvolume a subvolume at
# its path, content and metadata equal, read-only flags kept, received
# UUIDs as encio-copy(8) says, snapshots made as snapshots (a parent UUID),
# the default subvolume kept, disk usage within 2% of SRC's. btrbk, pointed
# at the moved backups, goes on incrementally. One branch (a writable
# subvolume and the one in it) copies alone. A copy interrupted (SIGINT,
# SIGKILL, out of space) and run again completes, skipping what was
# complete and leaving nothing half made read-only or marked received.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root
for p in compsize getfattr btrbk; do
	command -v $p >/dev/null || _not_run "needs $p"
done
command -v python3 >/dev/null || _not_run "needs python3"
export TZ=UTC
RANDOM=96

make_btrfs origin 512M compress-force=zstd,noatime
ORIGIN=$MNT
make_btrfs src 1G compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 1G noatime
DST=$MNT
make_btrfs dst2 1G noatime
DST2=$MNT
make_btrfs dst3 512M noatime
DST3=$MNT

# churn DIR N: rename, reflink, delete, append, xattrs, new files
churn()
{
	local d=$1 n=$2 f
	mkdir -p "$d/dir"
	random_bytes $((200000 + RANDOM * 10)) "r$n$d" >"$d/dir/new$n"
	compressible $((300000 + RANDOM * 5)) >"$d/text$n"
	f=$(ls "$d" | grep '^text' | head -1)
	[ -n "$f" ] && compressible 50000 >>"$d/$f"
	[ -e "$d/dir/new$((n - 1))" ] && cp --reflink=always "$d/dir/new$((n - 1))" "$d/reflink$n"
	[ -e "$d/text$((n - 2))" ] && mv "$d/text$((n - 2))" "$d/dir/moved$n"
	[ -e "$d/reflink$((n - 3))" ] && rm "$d/reflink$((n - 3))"
	setfattr -n user.n -v "$n" "$d/dir"
	[ -e "$d/dir/moved$((n - 1))" ] && setfattr -n user.m -v "$RANDOM" "$d/dir/moved$((n - 1))"
	touch -d "@$((1600000000 + n * 1000))" "$d/dir/new$n"
	sync
}

_log "a filesystem with its history"
run_check btrfs -q subvolume create "$SRC/@data"
run_check btrfs -q subvolume create "$SRC/@data/inner"
mkdir "$SRC/snaps" "$SRC/backups"
echo "not in a subvolume" >"$SRC/plain"
for n in $(seq 1 10); do
	churn "$SRC/@data" "$n"
	churn "$SRC/@data/inner" "$n"
	btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/data.$n" || _fail snapshot
	btrfs -q subvolume snapshot -r "$SRC/@data/inner" "$SRC/snaps/inner.$n" || _fail snapshot
done
churn "$SRC/@data" 11
run_check btrfs subvolume set-default "$SRC/@data"

_log "snapshots received from another filesystem, by btrbk"
run_check btrfs -q subvolume create "$ORIGIN/home"
mkdir "$ORIGIN/snapshots"
cat >"$TEST_TMP/btrbk.conf" <<END
timestamp_format long-iso
snapshot_preserve_min all
target_preserve_min all
lockfile $TEST_TMP/btrbk.lock
volume $ORIGIN
  snapshot_dir snapshots
  subvolume home
    target $SRC/backups
END
btrbk_run()
{
	btrbk -c "$TEST_TMP/btrbk.conf" -l debug run >"$TEST_TMP/btrbk$1.log" 2>&1 || {
		cat "$TEST_TMP/btrbk$1.log"
		_fail "btrbk run $1"
	}
}
for n in 1 2 3; do
	churn "$ORIGIN/home" "$n"
	btrbk_run "$n"
	sleep 1 # btrbk names snapshots to the second
done
sync

# meta_of DIR SNAPSHOT: type, mode, size, owner, times to the nanosecond
# and links of every entry of DIR (one find: 25 subvolumes, twice), but
# for the empty directories SNAPSHOT shows for the subvolumes below its
# source, whose times are made up when they are looked at (a copy has real
# directories there)
meta_of()
{
	local empty
	empty=$(cd "$2" && find . -xdev -mindepth 1 -type d -inum 2 -printf './%P\n')
	# a directory's size counts the names in it, those left out too
	(cd "$1" && find . -printf './%P %y %#m %s %U %G %A@ %T@ %n\n') | LC_ALL=C sort |
		awk -v skip="$empty" 'BEGIN { n = split(skip, a, "\n"); for (i = 1; i <= n; i++) s[a[i]] = 1 }
			!($1 in s) { if ($2 == "d") $4 = "-"; print }'
}

# content_diff SRC DEST: diff -r but for what stands for a nested
# subvolume in SRC (a snapshot's empty directory), which copies leave out
content_diff()
{
	local x=() name
	while read -r name; do
		x+=(-x "$name")
	done < <(cd "$1" && find . -xdev -mindepth 1 -type d -inum 2 -printf '%f\n')
	diff -r --no-dereference "${x[@]}" "$1" "$2"
}

# xattrs_of DIR: every xattr of every entry, one line per entry, sorted
xattrs_of()
{
	(cd "$1" && getfattr -R -h -d -m "$XATTRS" -e hex . 2>/dev/null) |
		awk 'BEGIN { RS = "" } { gsub("\n", " "); print }' | LC_ALL=C sort
}

# check_copy DEST: every subvolume of SRC as a subvolume in DEST, equal
check_copy()
{
	local dest=$1 p s d ss ds sro dro srcv dstv n=0
	[ "$(cat "$dest/plain")" = "not in a subvolume" ] || _fail "plain file not copied"
	while read -r p; do
		n=$((n + 1))
		s=$SRC/$p d=$dest/$p
		[ "$(stat -c %i "$d")" = 256 ] || _fail "$p: not a subvolume in DEST"
		diff <(meta_of "$s" "$s") <(meta_of "$d" "$s") || _fail "$p: metadata differs"
		diff <(xattrs_of "$s") <(xattrs_of "$d") || _fail "$p: xattrs differ"
		content_diff "$s" "$d" || _fail "$p: content differs"
		[ -z "$(cd "$d" && find . -xdev -type d -inum 2)" ] ||
			_fail "$p: the copy has what stands for a nested subvolume"
		ss=$(btrfs subvolume show "$s") ds=$(btrfs subvolume show "$d")
		sro=$(echo "$ss" | grep -c 'Flags:.*readonly')
		dro=$(echo "$ds" | grep -c 'Flags:.*readonly')
		[ "$sro" = "$dro" ] || _fail "$p: read-only $sro in SRC, $dro in DEST"
		srcv=$(echo "$ss" | sed -n 's/^[[:space:]]*Received UUID:[[:space:]]*//p')
		dstv=$(echo "$ds" | sed -n 's/^[[:space:]]*Received UUID:[[:space:]]*//p')
		# read-only: SRC's received UUID, or SRC's UUID; writable: SRC's
		if [ "$sro" = 1 ] && [ "$srcv" = - ]; then
			srcv=$(echo "$ss" | sed -n 's/^[[:space:]]*UUID:[[:space:]]*//p')
		fi
		[ "$srcv" = "$dstv" ] || _fail "$p: received UUID $dstv, expected $srcv"
		case $p in
		snaps/*.1 | backups/*) ;;
		snaps/* | @data)
			echo "$ds" | grep -qE 'Parent UUID:[[:space:]]+[0-9a-f-]{36}' ||
				_fail "$p: not made as a snapshot"
			;;
		esac
	done < <(btrfs subvolume list "$SRC" | awk '{print $NF}')
	[ $n = 25 ] || _fail "$n subvolumes compared, not 25"
	[ "$(btrfs subvolume get-default "$dest" | awk '{print $NF}')" = "${dest#"$(findmnt -no TARGET -T "$dest")/"}/@data" ] ||
		_fail "default subvolume: $(btrfs subvolume get-default "$dest")"
	s=$(disk "$SRC") d=$(disk "$dest")
	echo "disk usage: SRC $s, DEST $d"
	awk -v a="$d" -v b="$s" 'BEGIN { exit !(a <= b * 1.02) }' || _fail "DEST uses $d bytes on disk, SRC $s"
	! ls -a "$SRC" "$SRC"/@data "$SRC/snaps" | grep -q '\.encio-' || _fail "a temporary left in SRC"
	! find "$dest" -name '*.encio-partial' | grep -q . || _fail "a partial copy left in DEST"
}

# the comparisons below compare something
[ "$(meta_of "$SRC/snaps/data.10" "$SRC/snaps/data.10" | wc -l)" -gt 20 ] || _fail "meta_of lists too little"
xattrs_of "$SRC/snaps/data.10" | grep -q 'user.m=' || _fail "xattrs_of lists no xattrs"

_log "copy -r --subvolumes"
run_check "$ENCIO" -v copy -rT --subvolumes --final "$SRC" "$DST/all" >"$TEST_TMP/copy.out"
cat "$TEST_TMP/copy.out"
grep -q "subvolumes: 25 of 25 copied (22 as snapshots of copies, [0-9]* differences made ahead)" "$TEST_TMP/copy.out" ||
	_fail "summary: $(grep subvolumes: "$TEST_TMP/copy.out")"
# the writable subvolumes' snapshots are made first, so the differences of
# @data, of those after it and of @data/inner are made ahead too
check_made_ahead "$TEST_TMP/copy.out" 22
check_copy "$DST/all"

_log "btrbk, pointed at the moved backups, goes on incrementally"
sed -i "s|target $SRC/backups|target $DST/all/backups|" "$TEST_TMP/btrbk.conf"
churn "$ORIGIN/home" 4
btrbk_run 4
grep -E "btrfs send .*-p " "$TEST_TMP/btrbk4.log" >/dev/null || _fail "btrbk did not send incrementally"
latest=$(ls "$ORIGIN/snapshots" | tail -1)
diff -r "$ORIGIN/snapshots/$latest" "$DST/all/backups/$latest" || _fail "btrbk's backup differs"

_log "a copy run again changes nothing"
run_check "$ENCIO" copy -rT --subvolumes --final "$SRC" "$DST/all" >"$TEST_TMP/again.out"
grep -q "subvolumes: 0 of 25 copied (0 as snapshots of copies, 0 differences made ahead), 25 complete already" "$TEST_TMP/again.out" ||
	_fail "rerun: $(cat "$TEST_TMP/again.out")"

_log "one branch: @data and the subvolume in it"
mkdir "$DST/branch"
run_check "$ENCIO" copy -r --subvolumes --final "$SRC/@data" "$DST/branch/" >"$TEST_TMP/branch.out"
grep -q "subvolumes: 2 of 2 copied" "$TEST_TMP/branch.out" || _fail "branch: $(cat "$TEST_TMP/branch.out")"
for p in @data @data/inner; do
	[ "$(stat -c %i "$DST/branch/$p")" = 256 ] || _fail "branch: $p not a subvolume"
	diff <(meta_of "$SRC/$p" "$SRC/$p") <(meta_of "$DST/branch/$p" "$SRC/$p") || _fail "branch: $p differs"
	btrfs property get "$DST/branch/$p" ro | grep -q 'ro=false' || _fail "branch: $p read-only"
done

# interrupt SIGNAL: a copy into DST2, stopped (SIGSTOP) as it opens a file
# of a middle snapshot's copy, then sent SIGNAL. Every open on DST2 waits
# for a fanotify permission answer, given once the copy is stopped: it
# cannot pass that moment unseen.
interrupt()
{
	python3 - "$1" "$ENCIO" "$SRC" "$DST2/all" "$DST2" <<'PY'
import ctypes, os, re, select, signal, struct, subprocess, sys

sig = getattr(signal, "SIG" + sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64,
                               ctypes.c_int, ctypes.c_char_p]
FAN_CLOEXEC, FAN_CLASS_CONTENT, FAN_OPEN_PERM = 0x1, 0x4, 0x10000
FAN_MARK_ADD, FAN_MARK_FILESYSTEM, FAN_ALLOW = 0x1, 0x100, 0x1
fan = libc.fanotify_init(FAN_CLOEXEC | FAN_CLASS_CONTENT, os.O_RDONLY)
if fan < 0 or libc.fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                                 FAN_OPEN_PERM, -100, sys.argv[5].encode()):
    sys.exit("fanotify: " + os.strerror(ctypes.get_errno()))
p = subprocess.Popen([sys.argv[2], "-q", "copy", "-rT", "--subvolumes", sys.argv[3], sys.argv[4]])
want = re.compile(r"snaps/(\.encio-receive\.[^/]+/)?\.+data\.[3-9]\.encio-partial[^/]*/")
stopped = False
while p.poll() is None:
    if not select.select([fan], [], [], 0.1)[0]:
        continue
    buf = os.read(fan, 4096)
    while buf:
        length, _, _, _, _, fd, pid = struct.unpack_from("IBBHQii", buf)
        buf = buf[length:]
        if fd < 0:
            continue
        if not stopped and pid == p.pid and want.search(os.readlink("/proc/self/fd/%d" % fd)):
            p.send_signal(signal.SIGSTOP)
            stopped = True
        os.write(fan, struct.pack("iI", fd, FAN_ALLOW))
        os.close(fd)
    if stopped:
        break
os.close(fan)
if not stopped:
    sys.exit("the copy ended without opening a file of a middle snapshot")
p.send_signal(sig)
p.send_signal(signal.SIGCONT)
print("copy stopped by SIG%s: exit %d" % (sys.argv[1], p.wait()))
PY
	[ $? = 0 ] || _fail "interrupt $1"
}

_log "interrupted by SIGINT, then by SIGKILL, then run again"
interrupt INT
# what SIGINT left of the subvolume in flight is kept for the rerun
# (encio-copy(8)), which must go on with it below
_log "kept after SIGINT: $(btrfs subvolume list -a "$DST2" | grep -c encio-partial) partial subvolume(s)"
interrupt KILL
run_check "$ENCIO" copy -rT --subvolumes --final "$SRC" "$DST2/all" >"$TEST_TMP/resume.out"
cat "$TEST_TMP/resume.out"
grep -qE "subvolumes: [0-9]+ of 25 copied .*, [1-9][0-9]* complete already" "$TEST_TMP/resume.out" ||
	_fail "resume: $(cat "$TEST_TMP/resume.out")"
check_copy "$DST2/all"

# no_half_made MNT: every copy not yet in place on the filesystem at MNT (a
# .NAME.encio-partial subvolume) is writable and marked received from
# nothing
no_half_made()
{
	local p show n=0
	while read -r p; do
		case $p in
		*.encio-partial)
			show=$(btrfs subvolume show "$1/$p") || _fail "$p: no subvolume show"
			echo "$show" | grep -q 'Flags:.*readonly' && _fail "$p: half made and read-only"
			echo "$show" | grep -qE 'Received UUID:[[:space:]]+-$' || _fail "$p: half made and marked received"
			n=$((n + 1))
			;;
		esac
	done < <(btrfs subvolume list "$1" | awk '{print $NF}')
	echo "$n half-made subvolumes left, writable and not marked received"
}

_log "out of space midway (ENOSPC), then run again with space"
# all but 4 MiB of DEST's data space taken by a filler; the copy needs
# about 9 MiB
dd if=/dev/urandom of="$DST3/filler" bs=1M status=none 2>/dev/null
sync
truncate -s -4M "$DST3/filler"
sync
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST3/all" 2>"$TEST_TMP/enospc.err"
rc=$?
cat "$TEST_TMP/enospc.err"
[ $rc = 1 ] || _fail "out of space: exit $rc, not 1"
grep -q "No space left on device" "$TEST_TMP/enospc.err" || _fail "out of space: no message says so"
grep -q "$SRC/snaps/" "$TEST_TMP/enospc.err" || _fail "out of space: the message names no subvolume of SRC"
no_half_made "$DST3"
rm "$DST3/filler"
sync
run_check "$ENCIO" copy -rT --subvolumes --final "$SRC" "$DST3/all" >"$TEST_TMP/enospc.out"
cat "$TEST_TMP/enospc.out"
grep -qE "subvolumes: [0-9]+ of 25 copied .*, [1-9][0-9]* complete already" "$TEST_TMP/enospc.out" ||
	_fail "resume after ENOSPC: $(cat "$TEST_TMP/enospc.out")"
check_copy "$DST3/all"
echo "PASS: $TEST_NAME"
