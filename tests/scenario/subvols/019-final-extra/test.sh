#!/bin/bash
# copy -rT --subvolumes --final names the subvolumes of the move's copy
# that SRC no longer has (a snapshot deleted in SRC since the last run),
# and with --delete-extra deletes those encio made of them, and nothing
# else: not a subvolume another user made there and marked received as
# that snapshot, nor a read-only one root received there with btrfs
# receive from a snapshot SRC no longer has either.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"

run_check btrfs -q subvolume create "$SRC/@home"
random_bytes 100000 a >"$SRC/@home/a"
chown -R 4321:4321 "$SRC/@home"
mkdir -m 1777 "$SRC/snaps"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/1"
echo two >"$SRC/@home/b"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/2"
echo three >"$SRC/@home/c"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/3"

move()
{
	"$ENCIO" copy -rT --subvolumes "$@" "$SRC" "$DST/m" >"$TEST_TMP/move.out" 2>&1
	local rc=$?
	cat "$TEST_TMP/move.out"
	return $rc
}
move || _fail "the move failed"

_log "root receives a snapshot SRC then deletes, with btrfs receive"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/t"
btrfs send -q -p "$SRC/snaps/2" "$SRC/t" | btrfs receive "$DST/m/snaps" ||
	_fail "btrfs receive of t"
run_check btrfs -q subvolume delete "$SRC/t"

_log "snapshot 1 deleted in SRC"
uuid1=$(uuid_of "$SRC/snaps/1")
run_check btrfs -q subvolume delete "$SRC/snaps/1"

_log "the user snapshots the copy of @home and marks it received as snapshot 1"
as_user btrfs -q subvolume snapshot "$DST/m/@home" "$DST/m/snaps/u" || _fail "the user's snapshot"
as_user python3 - "$DST/m/snaps/u" "$uuid1" <<'PY' || _fail "the user's received UUID"
import fcntl, os, struct, sys, uuid
fd = os.open(sys.argv[1], os.O_RDONLY)
args = uuid.UUID(sys.argv[2]).bytes + struct.pack("=QQ", 5, 0) + bytes(200 - 32)
fcntl.ioctl(fd, 0xC0C89425, args)  # BTRFS_IOC_SET_RECEIVED_SUBVOL
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 2))  # read-only
PY

_log "--final names what SRC no longer has"
move --final || _fail "the final run failed"
grep -q "^extra: '$DST/m/snaps/1': not in SRC, kept: encio's copy .*--delete-extra deletes it" "$TEST_TMP/move.out" ||
	_fail "the copy of the deleted snapshot is not named"
grep -q "^extra: '$DST/m/snaps/t': not in SRC, kept" "$TEST_TMP/move.out" || _fail "t is not named"
grep -q "^extra: '$DST/m/snaps/u': not in SRC, kept" "$TEST_TMP/move.out" || _fail "u is not named"
[ -d "$DST/m/snaps/1" ] || _fail "deleted without --delete-extra"

_log "the same as JSON"
"$ENCIO" copy -rT --subvolumes --final --format=json "$SRC" "$DST/m" >"$TEST_TMP/move.json" ||
	_fail "the JSON run failed"
python3 - "$TEST_TMP/move.json" "$DST/m" <<'PY' || _fail "the JSON summary"
import json, sys
j = json.load(open(sys.argv[1]))
d = sys.argv[2]
x = {e["path"]: e for e in j["subvolumes_extra"]}
assert set(x) == {d + "/snaps/1", d + "/snaps/t", d + "/snaps/u"}, x
assert not any(e["deleted"] for e in x.values()), x
PY

_log "--delete-extra deletes encio's copy of snapshot 1, and nothing else"
move --final --delete-extra || _fail "the run with --delete-extra failed"
grep -q "^extra: '$DST/m/snaps/1': not in SRC, deleted" "$TEST_TMP/move.out" ||
	_fail "the copy of the deleted snapshot is not said deleted"
[ ! -e "$DST/m/snaps/1" ] || _fail "the copy of the deleted snapshot is still there"
grep -q "^extra: '$DST/m/snaps/t': not in SRC, kept: not proved encio's" "$TEST_TMP/move.out" ||
	_fail "t: not kept as not encio's"
grep -q "^extra: '$DST/m/snaps/u': not in SRC, kept: not proved encio's" "$TEST_TMP/move.out" ||
	_fail "u: not kept as not encio's"
[ -d "$DST/m/snaps/t" ] || _fail "root's received subvolume was deleted"
[ -d "$DST/m/snaps/u" ] || _fail "the user's subvolume was deleted"
diff -r "$SRC/snaps/2" "$DST/m/snaps/2" || _fail "snapshot 2's copy differs"
diff -r "$SRC/snaps/3" "$DST/m/snaps/3" || _fail "snapshot 3's copy differs"
diff -r "$SRC/@home" "$DST/m/@home" || _fail "@home's copy differs"
_log "ok"
