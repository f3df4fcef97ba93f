#!/bin/bash
# A rerun of copy -rT --subvolumes updates a writable subvolume with no
# read-only snapshot of its own as the kernel's difference from the
# snapshot the earlier run copied it from, kept beside it in SRC as
# .NAME.encio-base: it writes what changed, not the whole subvolume again.
# A snapshot at that name that is not the moment the copy holds is not
# used; one not of the subvolume stops the move, one made before the
# subvolume changed owner serves; --final deletes the base.
# A snapshot a killed run left at .NAME.encio-snapshot, with no copy made
# from it, is deleted: the rerun copies the subvolume as it is at its start.
# A writable subvolume with a received UUID of its own (it keeps no base)
# that changed since its copy is copied again, not taken as complete.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/@w"
head -c 32M /dev/urandom >"$SRC/@w/big"
mkdir "$SRC/@w/d"
echo one >"$SRC/@w/d/f"

make_btrfs dst 1G
DST=$MNT
move()
{
	"$ENCIO" copy -rT --subvolumes --format=json "$@" "$SRC" "$DST/m" \
		>"$TEST_TMP/move.json" 2>"$TEST_TMP/move.err"
	local rc=$?
	cat "$TEST_TMP/move.json" "$TEST_TMP/move.err"
	return $rc
}
field()
{
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
		"$TEST_TMP/move.json" "$1"
}
base_uuid()
{
	btrfs subvolume show "$SRC/.@w.encio-base" | awk '$1 == "UUID:" {print $2}'
}

move || _fail "the move failed"
diff -r "$SRC/@w" "$DST/m/@w" || _fail "@w differs"
[ -d "$SRC/.@w.encio-base" ] || _fail "no base kept in SRC"
[ "$(field subvolume_bases)" = 1 ] || _fail "the summary does not count the base"
"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/m" | grep -q '^bases: 1 snapshots kept in SRC' ||
	_fail "the text summary does not say the base is kept"
[ "$(btrfs property get -ts "$SRC/.@w.encio-base" ro)" = ro=true ] ||
	_fail "the base is not read-only"
wuuid=$(btrfs subvolume show "$SRC/@w" | awk '$1 == "UUID:" {print $2}')
btrfs subvolume show "$SRC/.@w.encio-base" | grep -q "Parent UUID:.*$wuuid" ||
	_fail "the base is not a snapshot of @w"
[ ! -e "$SRC/.@w.encio-snapshot" ] || _fail "the snapshot is left"
first=$(base_uuid)

_log "rerun after 4 KiB of the 32 MiB file changed"
head -c 4096 /dev/urandom | dd of="$SRC/@w/big" bs=4096 seek=100 conv=notrunc status=none
echo two >"$SRC/@w/d/g"
sleep 1
move || _fail "the rerun failed"
diff -r "$SRC/@w" "$DST/m/@w" || _fail "@w is stale in DEST"
[ "$(field subvolumes_replaced)" = 1 ] || _fail "the copy was not updated"
[ "$(field subvolumes_incremental)" = 1 ] || _fail "the update is not a difference"
written=$(field subvolume_bytes)
_log "written: $written bytes"
[ "$written" -lt $((1 << 20)) ] || _fail "the update wrote $written bytes"
[ "$(base_uuid)" != "$first" ] || _fail "the base is not the new moment"
move || _fail "the unchanged rerun failed"
[ "$(field subvolumes_skipped)" = 1 ] || _fail "the unchanged copy is not complete"

_log "a base that is another moment of @w is not used"
run_check btrfs -q subvolume delete "$SRC/.@w.encio-base"
echo three >"$SRC/@w/d/h"
run_check btrfs -q subvolume snapshot -r "$SRC/@w" "$SRC/.@w.encio-base"
sync
move || _fail "the rerun with another base failed"
diff -r "$SRC/@w" "$DST/m/@w" || _fail "@w is wrong after another base"
[ "$(field subvolumes_incremental)" = 0 ] || _fail "a base the copy does not hold was used"

_log "a base that is not a snapshot of @w"
run_check btrfs -q subvolume delete "$SRC/.@w.encio-base"
run_check btrfs -q subvolume create "$SRC/.@w.encio-base"
echo planted >"$SRC/.@w.encio-base/f"
run_check btrfs property set -ts "$SRC/.@w.encio-base" ro true
echo four >"$SRC/@w/d/i"
if move; then
	_fail "a base not of @w was taken"
fi
grep -q 'encio-base' "$TEST_TMP/move.err" || _fail "the error does not name the base"
[ "$(cat "$SRC/.@w.encio-base/f")" = planted ] || _fail "the planted subvolume was changed"
btrfs property set -ts "$SRC/.@w.encio-base" ro false
run_check btrfs -q subvolume delete "$SRC/.@w.encio-base"

_log "a base made before the subvolume changed owner"
move || _fail "the rerun failed"
chown 1234:1234 "$SRC/@w"
echo seven >"$SRC/@w/d/l"
sleep 1
move || _fail "the rerun after a chown failed"
[ "$(field subvolumes_incremental)" = 1 ] || _fail "the base made before the chown was not used"
diff -r "$SRC/@w" "$DST/m/@w" || _fail "@w is stale after the chown"
[ "$(stat -c %u:%g "$DST/m/@w")" = 1234:1234 ] || _fail "the owner was not copied"

_log "--final"
echo five >"$SRC/@w/d/j"
sleep 1
move --final || _fail "the final run failed"
[ "$(field subvolumes_incremental)" = 1 ] || _fail "the final run is not a difference"
[ "$(field subvolume_bases)" = 0 ] || _fail "the summary counts a base after --final"
diff -r "$SRC/@w" "$DST/m/@w" || _fail "@w is stale after --final"
leftovers=$(btrfs subvolume list -o "$SRC" | grep encio || true)
[ -z "$leftovers" ] || _fail "left in SRC: $leftovers"
if "$ENCIO" copy -r --final "$SRC/@w" "$DST/x" 2>"$TEST_TMP/usage.err"; then
	_fail "--final without --subvolumes was taken"
fi
grep -q -- '--final' "$TEST_TMP/usage.err" || _fail "the usage error does not name --final"

_log "a snapshot a killed run left, its copy not made"
run_check btrfs -q subvolume snapshot -r "$SRC/@w" "$SRC/.@w.encio-snapshot"
echo six >"$SRC/@w/d/k"
sync
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/n" || _fail "the copy after a killed run failed"
diff -r "$SRC/@w" "$DST/n/@w" || _fail "the copy holds the killed run's moment"
[ ! -e "$SRC/.@w.encio-snapshot" ] || _fail "the killed run's snapshot is left"

_log "a writable subvolume with a received UUID, changed since its copy"
make_btrfs src2 1G
SRC2=$MNT
run_check btrfs -q subvolume create "$SRC2/x"
echo one >"$SRC2/x/f"
run_check btrfs -q subvolume snapshot -r "$SRC2/x" "$SRC2/x.1"
mkdir "$SRC2/r"
btrfs send -q "$SRC2/x.1" | btrfs receive -q "$SRC2/r" || _fail "btrfs receive failed"
# writable, its received UUID kept (BTRFS_IOC_SUBVOL_SETFLAGS)
python3 - "$SRC2/r/x.1" <<'PY' || _fail "make r/x.1 writable"
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x4008941a, struct.pack("Q", 0))
PY
btrfs subvolume show "$SRC2/r/x.1" | grep -qE 'Received UUID:[[:space:]]+[0-9a-f-]{36}' ||
	_fail "r/x.1 has no received UUID"
"$ENCIO" -q copy -rT --subvolumes "$SRC2" "$DST/o" || _fail "the move of SRC2 failed"
echo two >"$SRC2/r/x.1/g"
sleep 1
"$ENCIO" copy -rT --subvolumes --format=json "$SRC2" "$DST/o" >"$TEST_TMP/move.json" ||
	_fail "the rerun of SRC2 failed"
diff -r "$SRC2/r/x.1" "$DST/o/r/x.1" || _fail "r/x.1 is stale in DEST"
[ "$(field subvolumes_replaced)" = 1 ] || _fail "r/x.1 was not copied again"
"$ENCIO" copy -rT --subvolumes --format=json "$SRC2" "$DST/o" >"$TEST_TMP/move.json" ||
	_fail "the unchanged rerun of SRC2 failed"
[ "$(field subvolumes_replaced)" = 0 ] || _fail "the unchanged r/x.1 was copied again"
