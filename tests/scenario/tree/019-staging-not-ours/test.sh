#!/bin/bash
# copy -r builds a new tree under DEST/.NAME.encio-partial and a rerun
# goes on in it. Another user who may write DEST can make that name
# first, with a file of SRC's size and mtime but its own bytes: the copy
# took the file as complete and put the user's bytes under NAME, owned by
# SRC's owner. Now a staging directory is gone on with only where it is
# root's, private (0700) and marked with its source; anything else there
# is left alone, and the copy is made at NAME directly. One a stopped copy
# left stays private and marked, and the rerun goes on in it.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs fs 1G
SRC=$MNT/src
mkdir -p "$SRC/d"
random_bytes 200000 a >"$SRC/d/secret"
echo small >"$SRC/small"
touch -d @1700000000 "$SRC/d/secret"
DEST=$MNT/dest
mkdir "$DEST"
chmod 1777 "$DEST"
chmod 0755 "$TEST_TMP"

# the user plants the staging name with a forged "complete" file
as_user mkdir -p "$DEST/.t.encio-partial/d"
as_user sh -c "head -c 200000 /dev/zero >'$DEST/.t.encio-partial/d/secret'"
as_user touch -d @1700000000 "$DEST/.t.encio-partial/d/secret"
run_check "$ENCIO" -q copy -r "$SRC" "$DEST/t"
cmp "$SRC/d/secret" "$DEST/t/d/secret" || _fail "the copy holds the user's bytes"
[ "$(stat -c %u "$DEST/.t.encio-partial")" = 4321 ] || _fail "the user's directory was taken"
[ -f "$DEST/.t.encio-partial/d/secret" ] || _fail "the user's file was deleted"
getfattr --absolute-names -n trusted.encio.staging "$DEST/t" >/dev/null 2>&1 &&
	_fail "the copy keeps the staging mark"
[ "$(stat -c %a "$DEST/t")" = "$(stat -c %a "$SRC")" ] || _fail "the copy's root has another mode"

# a staging directory of encio's, stopped in: private and marked; the
# rerun goes on in it and puts it in place with SRC's mode
for i in $(seq 1 40); do random_bytes 3000000 "b$i" >"$SRC/d/f$i"; done
env --default-signal=INT "$ENCIO" -q copy -r "$SRC" "$DEST/u" &
pid=$!
until [ -d "$DEST/.u.encio-partial/d" ] || ! kill -0 $pid 2>/dev/null; do sleep 0.01; done
kill -INT $pid 2>/dev/null
wait $pid && _fail "the copy was not stopped"
[ -d "$DEST/.u.encio-partial" ] || _fail "no staging directory kept"
[ "$(stat -c %a "$DEST/.u.encio-partial")" = 700 ] || _fail "the kept staging directory is not private"
getfattr --absolute-names -n trusted.encio.staging "$DEST/.u.encio-partial" >/dev/null 2>&1 ||
	_fail "the kept staging directory is not marked"
run_check "$ENCIO" copy -r "$SRC" "$DEST/u" >"$TEST_TMP/rerun.out"
cat "$TEST_TMP/rerun.out"
diff -r "$SRC" "$DEST/u" || _fail "the rerun's copy differs"
[ ! -e "$DEST/.u.encio-partial" ] || _fail "the staging directory is left"
[ "$(stat -c %a "$DEST/u")" = "$(stat -c %a "$SRC")" ] || _fail "the rerun's root has another mode"
