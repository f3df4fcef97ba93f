#!/bin/bash
# A move whose snapshot cannot be copied (another user made a directory
# at its name in DEST) copies the snapshot taken after it all the same,
# as a snapshot of the copy of another relative, and names the failed one
# (EEXIST). Once the directory is gone, a rerun copies it.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"

run_check btrfs -q subvolume create "$SRC/@home"
random_bytes 300000 a >"$SRC/@home/a"
mkdir -m 1777 "$SRC/snaps"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/s1"

move()
{
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/m" >"$TEST_TMP/move.out" 2>&1
	local rc=$?
	cat "$TEST_TMP/move.out"
	return $rc
}
move || _fail "the first move failed"

echo two >"$SRC/@home/b"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/s2"
echo three >>"$SRC/@home/a"
run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/snaps/s3"
_log "another user makes a directory at s2's name in DEST"
as_user mkdir "$DST/m/snaps/s2" || _fail "the user's directory"
as_user touch "$DST/m/snaps/s2/mine" || _fail "the user's file"

move
rc=$?
[ $rc = 1 ] || _fail "exit status $rc, not 1"
grep -q "^failed: '$DST/m/snaps/s2': .*File exists" "$TEST_TMP/move.out" ||
	_fail "the summary does not name s2 and its error"
diff -r "$SRC/snaps/s3" "$DST/m/snaps/s3" || _fail "s3 was not copied past s2"
diff -r "$SRC/@home" "$DST/m/@home" || _fail "@home was not copied past s2"
parent=$(btrfs subvolume show "$DST/m/snaps/s3" | awk '$1 == "Parent" { print $3 }')
[ -n "$parent" ] && [ "$parent" != - ] || _fail "s3 was not made as a snapshot of a copy"
[ -e "$DST/m/snaps/s2/mine" ] || _fail "the user's directory was touched"

_log "the directory gone, a rerun copies s2"
rm -r "$DST/m/snaps/s2"
move || _fail "the rerun failed"
diff -r "$SRC/snaps/s2" "$DST/m/snaps/s2" || _fail "s2 differs"
[ "$(btrfs property get -ts "$DST/m/snaps/s2" ro)" = ro=true ] || _fail "s2's copy is not read-only"
_log "ok"
