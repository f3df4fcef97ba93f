#!/bin/bash
# A rerun of copy -rT --subvolumes copies a new snapshot as the difference
# from the copy of an older one in DEST only if no one but root can have
# changed that copy since it was made: its owner may clear read-only,
# change it and set read-only back. The new snapshot's copy is SRC's.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"

run_check btrfs -q subvolume create "$SRC/@home"
random_bytes 300000 a >"$SRC/@home/a"
echo "the owner's words" >"$SRC/@home/words"
chown -R 4321:4321 "$SRC/@home"
mkdir "$SRC/snaps"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/1"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m"
[ "$(stat -c %u "$DST/m/snaps/1")" = 4321 ] || _fail "the copy is not the user's"

_log "the owner changes the copy of snapshot 1"
as_user /usr/bin/python3 - "$DST/m/snaps/1" <<'PY' || _fail "the owner's change"
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 0))
with open(os.path.join(sys.argv[1], "words"), "r+") as f:
    f.write("the user's words")
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 2))
PY

_log "snapshot 2 copied by a rerun"
echo more >>"$SRC/@home/a"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/2"
echo later >"$SRC/@home/later"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/m"
diff -r "$SRC/snaps/2" "$DST/m/snaps/2" || _fail "snapshot 2's copy holds the owner's change"
diff -r "$SRC/@home" "$DST/m/@home" || _fail "@home's copy differs"
_log "ok"
