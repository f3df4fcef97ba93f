#!/bin/bash
# The owner of a backup encio received can clear read-only, change it and
# set read-only back (marking it received again too): the next
# incremental receive refuses it as parent, saying it changed. A chain of
# root's backups begun by btrfs receive goes on with encio receive.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"
mkdir "$DST/e" "$DST/anew" "$DST/b"

# tamper SUBVOL [anew]: as the user, SUBVOL made writable (its received
# UUID kept), its file words rewritten, then (anew: marked received again
# with the same UUID and stransid, as btrfs receive would) read-only again
tamper()
{
	as_user /usr/bin/python3 - "$@" <<'PY' || _fail "tamper with $1"
import fcntl, os, struct, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDONLY)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 0))
with open(os.path.join(path, "words"), "r+") as f:
    f.write("the user's words")
os.fsync(os.open(path, os.O_RDONLY))
if len(sys.argv) > 2:
    args = bytearray(200)
    # BTRFS_IOC_SUBVOL_GETFLAGS does not give the received UUID: the
    # caller passes it in the environment
    import uuid
    struct.pack_into("16sQ", args, 0, uuid.UUID(os.environ["RCV"]).bytes, int(os.environ["STRANSID"]))
    fcntl.ioctl(fd, 0xC0C89425, args)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 2))
PY
}

run_check btrfs -q subvolume create "$SRC/sv"
random_bytes 300000 a >"$SRC/sv/a"
echo "the owner's own words" >"$SRC/sv/words"
chown -R 4321:4321 "$SRC/sv"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s1"
random_bytes 100000 b >"$SRC/sv/b"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s2"
run_check "$ENCIO" -q send -f "$TEST_TMP/s1.stream" "$SRC/s1"
run_check "$ENCIO" -q send -p "$SRC/s1" -f "$TEST_TMP/s2.stream" "$SRC/s2"

_log "the owner changes the backup: refused"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s1.stream" "$DST/e"
[ "$(stat -c %u "$DST/e/s1")" = 4321 ] || _fail "the backup is not the user's"
tamper "$DST/e/s1"
[ "$(btrfs property get "$DST/e/s1" ro)" = "ro=true" ] || _fail "not read-only again"
run_mustfail "a changed parent" "$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/e"
echo "$ERR_OUT" | grep -q "e/s1' is not taken: it was changed since encio received it" ||
	_fail "the refusal does not say the parent changed"
[ -e "$DST/e/s2" ] && _fail "s2 was left"

_log "the owner changes it and marks it received again: refused"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s1.stream" "$DST/anew"
RCV=$(uuid_of "$SRC/s1")
STRANSID=$(btrfs subvolume show "$DST/anew/s1" | awk '/Send transid:/ { print $3 }')
run_check btrfs -q subvolume delete "$DST/e/s1"
RCV=$RCV STRANSID=$STRANSID tamper "$DST/anew/s1" anew
run_mustfail "a parent marked again" "$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/anew"
echo "$ERR_OUT" | grep -q "anew/s1' is not taken: it was marked received again" ||
	_fail "the refusal does not say the parent was marked again"

_log "root's chain begun by btrfs receive goes on with encio receive"
run_check btrfs -q subvolume delete "$DST/anew/s1"
chown -R 0:0 "$SRC/sv"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/r1"
echo more >>"$SRC/sv/a"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/r2"
run_check "$ENCIO" -q send -f "$TEST_TMP/r1.stream" "$SRC/r1"
run_check "$ENCIO" -q send -p "$SRC/r1" -f "$TEST_TMP/r2.stream" "$SRC/r2"
run_check btrfs -q receive -f "$TEST_TMP/r1.stream" "$DST/b"
run_check "$ENCIO" -q receive -f "$TEST_TMP/r2.stream" "$DST/b"
diff -r "$SRC/r2" "$DST/b/r2" || _fail "r2 differs from SRC's"
_log "ok"
