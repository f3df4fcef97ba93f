#!/bin/bash
# A rerun of encio copy -r clones from a file it finds complete in DEST
# only into files of its owner (or from root's own files): a user who
# rewrites her copy in DEST and puts its mtime back reaches neither
# another user's file nor root's that share its extent in SRC. Sharing
# from root's files, and within one user's files, is kept.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
command -v filefrag >/dev/null || _not_run "needs filefrag (e2fsprogs)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
chmod 0755 "$TEST_TMP" "$SRC" "$DST"

# other USER CMD...: CMD as a second unprivileged user, beside as_user's
other()
{
	setpriv --reuid=4322 --regid=4322 --clear-groups "$@"
}

S=$SRC/S
mkdir -p "$S/alice" "$S/bob" "$S/log"
chown 4321:4321 "$S/alice"
chown 4322:4322 "$S/bob"
random_bytes 1048576 a >"$S/alice/A"
chown 4321:4321 "$S/alice/A"
other cp --reflink=always "$S/alice/A" "$S/bob/B" || _fail "bob's copy"
as_user cp --reflink=always "$S/alice/A" "$S/alice/A2" || _fail "alice's copy"
random_bytes 300000 log >"$S/log/root.log"
chmod 644 "$S/log/root.log"
as_user cp --reflink=always "$S/log/root.log" "$S/alice/log-copy" ||
	_fail "alice's copy of root's log"
mkdir "$S/etc"
random_bytes 300000 conf >"$S/etc/conf"
cp --reflink=always "$S/etc/conf" "$S/etc/conf.new"
sync

D=$DST/D
run_check "$ENCIO" -q copy -rT "$S" "$D"

# SRC's copies change after their first extent (appended in place)
echo "bob's line" | other tee -a "$S/bob/B" >/dev/null
echo "alice's line" | as_user tee -a "$S/alice/A2" >/dev/null
echo "root's line" >>"$S/log/root.log"
echo "root's line" >>"$S/etc/conf.new"
for f in A log-copy; do
	mt=$(stat -c %y "$D/alice/$f")
	as_user sh -c "printf INJECTED | dd of='$D/alice/$f' bs=1 conv=notrunc status=none; touch -d '$mt' '$D/alice/$f'" ||
		_fail "alice's edit of $f"
done
sync
run_check "$ENCIO" -q copy -rT "$S" "$D"

cmp -s "$S/bob/B" "$D/bob/B" || _fail "bob's file holds what alice wrote into hers: $(head -c 8 "$D/bob/B")"
cmp -s "$S/log/root.log" "$D/log/root.log" ||
	_fail "root's file holds what alice wrote into hers: $(head -c 8 "$D/log/root.log")"
cmp -s "$S/etc/conf.new" "$D/etc/conf.new" || _fail "conf.new differs"
# alice's own copy may hold what she wrote; the rest of it is SRC's
cmp -s <(tail -c +9 "$S/alice/A2") <(tail -c +9 "$D/alice/A2") || _fail "alice's A2 differs"
sync
[ "$(shared_extents "$D/etc/conf.new")" -gt 0 ] || _fail "root's files no longer share"
[ "$(shared_extents "$D/alice/A2")" -gt 0 ] || _fail "alice's files no longer share"
_log "ok"
