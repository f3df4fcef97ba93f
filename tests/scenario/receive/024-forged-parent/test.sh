#!/bin/bash
# Any user can give a subvolume of theirs any received UUID and make it
# read-only. encio receive takes as parent (or clone source) a subvolume
# found by received UUID only if it received it (its trusted.* mark) or
# root owns it: a user's forged parent is passed over for the genuine
# one, or refused alone. Of two genuine ones, the one in the destination
# is taken; with neither there, both are refused, named.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"
mkdir "$DST/r" "$DST/twice" "$DST/again" "$DST/u" "$DST/elsewhere"
chown 4321:4321 "$DST/u"

# forge SUBVOL UUID STRANSID: as the user, SUBVOL's received UUID set
# (BTRFS_IOC_SET_RECEIVED_SUBVOL) and SUBVOL made read-only
forge()
{
	as_user /usr/bin/python3 - "$@" <<'PY' || _fail "forge $1"
import fcntl, os, struct, sys, uuid
path, rcv, stransid = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = bytearray(200)
struct.pack_into("16sQ", args, 0, uuid.UUID(rcv).bytes, stransid)
fd = os.open(path, os.O_RDONLY)
fcntl.ioctl(fd, 0xC0C89425, args)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 2))
PY
}

run_check btrfs -q subvolume create "$SRC/sv"
random_bytes 300000 a >"$SRC/sv/a"
echo "root's words" >"$SRC/sv/words"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s1"
random_bytes 100000 b >"$SRC/sv/b"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/s2"
run_check "$ENCIO" -q send -f "$TEST_TMP/s1.stream" "$SRC/s1"
run_check "$ENCIO" -q send -p "$SRC/s1" -f "$TEST_TMP/s2.stream" "$SRC/s2"
S1=$(uuid_of "$SRC/s1")

# the stransid a receive of s1 records, that the forgery copies
run_check "$ENCIO" -q receive -f "$TEST_TMP/s1.stream" "$DST/again"
stransid=$(btrfs subvolume show "$DST/again/s1" | awk '/Send transid:/ { print $3 }')
run_check btrfs -q subvolume delete "$DST/again/s1"

_log "the user's forgery, alone: refused"
as_user btrfs -q subvolume create "$DST/u/fake" || _fail "the user's subvolume"
as_user cp -a "$SRC/s1/." "$DST/u/fake/" || _fail "the user's copy"
echo "the user's words" | as_user tee "$DST/u/fake/words" >/dev/null
forge "$DST/u/fake" "$S1" "$stransid"
run_mustfail "a forged parent" "$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/r"
echo "$ERR_OUT" | grep -q "u/fake' is not taken: its owner is not root" ||
	_fail "the refusal does not say why"
[ -e "$DST/r/s2" ] && _fail "s2 was left"

_log "the forgery beside the genuine parent: the genuine one taken"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s1.stream" "$DST/r"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s2.stream" "$DST/r"
diff -r "$SRC/s2" "$DST/r/s2" || _fail "s2 differs from SRC's"

_log "two genuine parents: the one in the destination taken"
run_check btrfs -q subvolume delete "$DST/r/s2"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s1.stream" "$DST/twice"
run_check "$ENCIO" -q receive -f "$TEST_TMP/s2.stream" "$DST/r"
diff -r "$SRC/s2" "$DST/r/s2" || _fail "s2 differs from SRC's"

_log "two genuine parents, neither in the destination: refused, both named"
run_mustfail "two parents" "$ENCIO" receive -f "$TEST_TMP/s2.stream" "$DST/elsewhere"
echo "$ERR_OUT" | grep -q "two subvolumes have it as received UUID, '[^']*r/s1' and '[^']*twice/s1'\|two subvolumes have it as received UUID, '[^']*twice/s1' and '[^']*r/s1'" ||
	_fail "the two are not named"
_log "ok"
