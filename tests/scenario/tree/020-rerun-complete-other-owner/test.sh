#!/bin/bash
# copy -r's rerun keeps a file it finds complete in DEST (same size, mtime
# and extent layout). A user rewrote its own file in DEST and put its mtime
# back; SRC gave the file to another owner since. The rerun kept the
# user's bytes and gave the file that owner: root's or another user's file
# held them. A file found complete is kept only where nobody but who may
# write the copy it becomes could have written it; the rest is copied.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs fs 1G
chmod 0755 "$TEST_TMP"
SRC=$MNT/src
mkdir -p "$SRC/u"
chown 4321:4321 "$SRC/u"
random_bytes 100000 a >"$SRC/u/f"
random_bytes 100000 b >"$SRC/u/g"
chown 4321:4321 "$SRC/u/f" "$SRC/u/g"
DEST=$MNT/dest
run_check "$ENCIO" -q copy -r "$SRC" "$DEST"
[ "$(stat -c %u "$DEST/u/f")" = 4321 ] || _fail "the copy's owner"

# the user rewrites both copies, mtimes put back; SRC gives f to root
for x in f g; do
	mt=$(stat -c %y "$DEST/u/$x")
	as_user sh -c "printf INJECTED | dd of='$DEST/u/$x' bs=1 conv=notrunc status=none; touch -d '$mt' '$DEST/u/$x'" ||
		_fail "the user's edit of $x"
done
chown 0:0 "$SRC/u/f"
run_check "$ENCIO" -q copy -rT "$SRC" "$DEST"
cmp "$SRC/u/f" "$DEST/u/f" || _fail "root's file holds the user's bytes"
[ "$(stat -c %u "$DEST/u/f")" = 0 ] || _fail "f is not root's"
# its own file, still its own, is as it left it (a rerun is no verify)
grep -q INJECTED "$DEST/u/g" || _fail "the user's own file was copied again"
