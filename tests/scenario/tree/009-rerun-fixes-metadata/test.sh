#!/bin/bash
# A rerun of encio copy -r onto a complete copy whose source changed only
# in metadata (mode, owner, xattrs added, changed or removed) sets that
# metadata on the copies in place: no data copied again, nothing skipped
# as complete that is not; files, directories, symlinks and FIFOs.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v setfacl >/dev/null || _not_run "needs setfacl (acl)"

make_btrfs src 512M compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 512M noatime
DST=$MNT

S=$SRC/S
mkdir -p "$S/sub"
for f in a b c d e acl; do
	compressible 50000 >"$S/$f"
done
setfattr -n user.old -v 1 "$S/d"
setfattr -n user.k -v old "$S/e"
setfattr -n user.dx -v 1 "$S/sub"
echo inner >"$S/sub/inner"
ln -s a "$S/link"
mkfifo "$S/fifo"
echo same >"$S/same"

# meta DIR: what must agree (atimes aside: reading changes them).
meta()
{
	(cd "$1" && find . -printf '%P\n' | LC_ALL=C sort | while read -r p; do
		[ -z "$p" ] && p=.
		stat -c '%n %F %a %u %g %s %Y' -- "$p"
		getfattr -h -d -m- -e hex -- "$p" 2>/dev/null | grep -v '^# file'
	done)
}

D=$DST/D
run_check timeout 120 "$ENCIO" -q copy -r "$S" "$D"
diff <(meta "$S") <(meta "$D") || _fail "first copy differs"

chmod 600 "$S/a"
chown 1234:1234 "$S/b"
setfattr -n user.k -v v "$S/c"
setfattr -x user.old "$S/d"
setfattr -n user.k -v new "$S/e"
setfacl -m u:1234:rw "$S/acl"
chown -h 1234:1234 "$S/link"
chown 1234:1234 "$S/fifo"
chmod 0600 "$S/fifo"
chmod 0700 "$S/sub"
chown 99:98 "$S/sub"
setfattr -x user.dx "$S/sub"
setfattr -n user.dy -v 2 "$S/sub"
inodes()
{
	stat -c '%n %i' "$D"/a "$D"/b "$D"/c "$D"/d "$D"/e "$D"/acl "$D"/link "$D"/fifo "$D"/same
}
before=$(inodes)

_log "rerun: metadata set in place"
run_check timeout 120 "$ENCIO" copy -r -T --format=json "$S" "$D" >"$TEST_TMP/out"
cat "$TEST_TMP/out"
diff <(meta "$S") <(meta "$D") || _fail "rerun left stale metadata"
[ "$(inodes)" = "$before" ] || _fail "files copied again instead of updated"
grep -q '"files": 0,' "$TEST_TMP/out" || _fail "files copied again"
grep -q '"skipped": 2,' "$TEST_TMP/out" || _fail "not 2 entries skipped (same, sub/inner)"
grep -qE '"meta_updated": [1-9]' "$TEST_TMP/out" || _fail "entries updated in place not counted"

_log "a third run changes nothing"
run_check timeout 120 "$ENCIO" copy -r -T --format=json "$S" "$D" >"$TEST_TMP/out"
cat "$TEST_TMP/out"
grep -q '"skipped": 10,' "$TEST_TMP/out" || _fail "not everything skipped"
diff <(meta "$S") <(meta "$D") || _fail "third run changed metadata"
_log "PASS"
