#!/bin/bash
# encio receive takes a parent found by received UUID whose stransid is
# not the stream's parent ctransid, as btrfs receive takes it (a move with
# copy --subvolumes, a send on from a backup, a dedupe into the parent all
# leave one); -v says so. A parent found by no UUID is refused with a
# message naming the UUID sought and the received subvolumes there are.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$DST/b" "$DST/e"

# set_stransid SUBVOL N: its received UUID kept, its stransid set to N
# (BTRFS_IOC_SET_RECEIVED_SUBVOL, on the subvolume made writable for it by
# BTRFS_IOC_SUBVOL_SETFLAGS, which keeps the received UUID)
set_stransid()
{
	python3 - "$1" "$2" <<'PY' || _fail "set stransid of $1"
import fcntl, os, struct, subprocess, sys, uuid
path, stransid = sys.argv[1], int(sys.argv[2])
show = subprocess.run(["btrfs", "subvolume", "show", path], capture_output=True, text=True).stdout
rcv = [l.split()[-1] for l in show.splitlines() if l.strip().startswith("Received UUID:")][0]
args = bytearray(200)
struct.pack_into("16sQ", args, 0, uuid.UUID(rcv).bytes, stransid)
fd = os.open(path, os.O_RDONLY)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 0))
fcntl.ioctl(fd, 0xC0C89425, args)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 2))
PY
}

run_check btrfs -q subvolume create "$SRC/sv"
random_bytes 300000 a >"$SRC/sv/a"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s1"
random_bytes 100000 b >"$SRC/sv/b"
echo more >>"$SRC/sv/a"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s2"
run_check "$ENCIO" -q send -f "$TEST_TMP/s1.stream" "$SRC/s1"
run_check "$ENCIO" -q send -p "$SRC/s1" -f "$TEST_TMP/s2.stream" "$SRC/s2"

# received by btrfs receive (which marks nothing): root's, so taken by
# encio receive too, unlike one it marked and that was marked again since
run_check btrfs -q receive -f "$TEST_TMP/s1.stream" "$DST/b"
set_stransid "$DST/b/s1" 3

_log "btrfs receive takes the parent, and so does encio receive"
run_check btrfs -q receive -f "$TEST_TMP/s2.stream" "$DST/b"
out=$("$ENCIO" -v receive -f "$TEST_TMP/s2.stream" "$DST/e" 2>&1) || _fail "encio receive refused: $out"
echo "$out"
echo "$out" | grep -q "has transid 3, the stream's is" || _fail "-v does not say the transids differ"
diff -r "$SRC/s2" "$DST/e/s2" || _fail "s2 differs"
out=$("$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/b" 2>&1 >/dev/null)
echo "$out" | grep -q transid && _fail "the transids are mentioned without -v: $out"

_log "a parent no subvolume has: the UUID and the candidates named"
run_check btrfs -q subvolume delete "$DST/e/s2" "$DST/b/s1"
run_mustfail "a missing parent" "$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/e"
echo "$ERR_OUT" | grep -q "cannot find parent subvolume $(uuid_of "$SRC/s1")" ||
	_fail "not btrfs receive's words"
echo "$ERR_OUT" | grep -q "received subvolumes here: 'b/s2' (received UUID $(uuid_of "$SRC/s2"))" ||
	_fail "the candidates are not named"
