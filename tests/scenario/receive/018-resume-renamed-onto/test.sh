#!/bin/bash
# A user who may write DEST cannot delete root's received snapshots, but
# can rename them onto the names receive -s used for its working state
# (.NAME.encio-receiving, .NAME.encio-partial.N), or make a directory like
# its private one, with NAME's directory in it. Root's receive -s of NAME,
# cut and resumed, deletes none of them, and leaves nothing of its own.
# The same for copy --subvolumes: a snapshot renamed onto the name of a
# copy's partial (.NAME.encio-partial) is left where the user put it.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in 1 2 3 4; do
	random_bytes 3000000 "v$i" >"$SRC/v/f$i"
	run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s$i"
done

chmod 0755 "$TEST_TMP" "$DST"
mkdir "$DST/u"
chown 4321:4321 "$DST/u"
for i in 1 2 3; do
	"$ENCIO" -q send "$SRC/s$i" | "$ENCIO" -q receive "$DST/u" || _fail "receive s$i"
done
as_user btrfs subvolume delete "$DST/u/s1" >/dev/null 2>&1 && _fail "the user deleted root's s1"
as_user mv "$DST/u/s1" "$DST/u/.s4.encio-receiving" || _fail "rename s1"
as_user mv "$DST/u/s2" "$DST/u/.s4.encio-partial.1" || _fail "rename s2"
as_user mkdir -p "$DST/u/.encio-receive.AAAAAA/s4/work" || _fail "mkdir"
id1=$(btrfs inspect-internal rootid "$DST/u/.s4.encio-receiving")
id2=$(btrfs inspect-internal rootid "$DST/u/.s4.encio-partial.1")

full=$("$ENCIO" -q send "$SRC/s4" | wc -c)
"$ENCIO" -q send "$SRC/s4" | head -c $((full / 2)) |
	"$ENCIO" -q receive -s --checkpoint 256K "$DST/u" 2>/dev/null && _fail "a cut stream received"
token=$("$ENCIO" receive --resume-token "$DST/u/s4") || _fail "no token"
"$ENCIO" -q send -t "$token" "$SRC/s4" | "$ENCIO" -q receive -s "$DST/u" || _fail "the resume failed"
diff -r "$SRC/s4" "$DST/u/s4" || _fail "s4 differs"
[ "$(btrfs inspect-internal rootid "$DST/u/.s4.encio-receiving" 2>/dev/null)" = "$id1" ] ||
	_fail "root's s1, renamed to .s4.encio-receiving, was deleted"
[ "$(btrfs inspect-internal rootid "$DST/u/.s4.encio-partial.1" 2>/dev/null)" = "$id2" ] ||
	_fail "root's s2, renamed to .s4.encio-partial.1, was deleted"
[ -d "$DST/u/.encio-receive.AAAAAA/s4/work" ] || _fail "the user's directory was changed"
left=$(ls -A "$DST/u" | xargs)
[ "$left" = ".encio-receive.AAAAAA .s4.encio-partial.1 .s4.encio-receiving s3 s4" ] ||
	_fail "DEST holds $left"

_log "copy --subvolumes: a snapshot renamed onto a partial's name"
mkdir "$DST/c"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/c"
chown 4321:4321 "$DST/c"
random_bytes 3000000 v5 >"$SRC/v/f5"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s5"
as_user mv "$DST/c/s1" "$DST/c/.s5.encio-partial" || _fail "rename s1"
id=$(btrfs inspect-internal rootid "$DST/c/.s5.encio-partial")
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/c" 2>"$TEST_TMP/c.err"
cat "$TEST_TMP/c.err"
[ "$(btrfs inspect-internal rootid "$DST/c/.s5.encio-partial" 2>/dev/null)" = "$id" ] ||
	_fail "root's copy of s1, renamed onto s5's partial name, was deleted"
exit 0
