#!/bin/bash
# copy -rT --subvolumes leaves out only what is verifiably its own
# temporary: a read-only snapshot of the subvolume beside it, named for
# it. A user's subvolumes named like encio's temporaries are copied; a
# subvolume planted at a writable subvolume's snapshot name that is no
# snapshot of it stops the move, naming it, and is neither copied as that
# subvolume nor deleted; encio's own snapshot left by a stopped run is
# used and not copied. A move into itself is refused in one message.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/data"
echo data >"$SRC/data/f"
run_check btrfs -q subvolume create "$SRC/.x.encio-snapshot"
echo x >"$SRC/.x.encio-snapshot/f"
run_check btrfs -q subvolume create "$SRC/y.encio-partial"
echo y >"$SRC/y.encio-partial/f"
run_check btrfs -q subvolume create "$SRC/.z.encio-send-123"
echo z >"$SRC/.z.encio-send-123/f"
run_check btrfs -q subvolume create "$SRC/ro"
echo ro >"$SRC/ro/f"
run_check btrfs -q subvolume snapshot -r "$SRC/ro" "$SRC/.ro.encio-snapshot.kept"
run_check btrfs -q subvolume snapshot -r "$SRC/ro" "$SRC/.ro.encio-send-77"

make_btrfs dst 1G
DST=$MNT
"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/a" >"$TEST_TMP/a.out" 2>&1 ||
	{ cat "$TEST_TMP/a.out"; _fail "the move failed"; }
for p in data .x.encio-snapshot y.encio-partial .z.encio-send-123 ro .ro.encio-snapshot.kept; do
	diff -r "$SRC/$p" "$DST/a/$p" || _fail "$p not copied"
done
# send --snapshot's temporary of ro, a snapshot of it: left out
[ ! -e "$DST/a/.ro.encio-send-77" ] || _fail "encio send's temporary was copied"
run_check btrfs -q subvolume delete "$SRC/.ro.encio-send-77"

_log "a subvolume planted at data's snapshot name"
run_check btrfs -q subvolume create "$SRC/evil"
echo planted >"$SRC/evil/f"
run_check btrfs -q subvolume snapshot -r "$SRC/evil" "$SRC/.data.encio-snapshot"
if "$ENCIO" copy -rT --subvolumes "$SRC" "$DST/b" >"$TEST_TMP/b.out" 2>&1; then
	cat "$TEST_TMP/b.out"
	_fail "the move took the planted subvolume"
fi
cat "$TEST_TMP/b.out"
grep -q "\.data\.encio-snapshot" "$TEST_TMP/b.out" || _fail "the error does not name the planted subvolume"
[ -d "$SRC/.data.encio-snapshot" ] || _fail "the planted subvolume was deleted"
! grep -rqs planted "$DST/b/data" || _fail "the planted content was copied as data"
run_check btrfs -q subvolume delete "$SRC/.data.encio-snapshot" "$SRC/evil"

_log "encio's own snapshot of data, left by a stopped run"
run_check btrfs -q subvolume snapshot -r "$SRC/data" "$SRC/.data.encio-snapshot"
"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/c" >"$TEST_TMP/c.out" 2>&1 ||
	{ cat "$TEST_TMP/c.out"; _fail "the move with encio's snapshot failed"; }
diff -r "$SRC/data" "$DST/c/data" || _fail "data differs"
[ ! -e "$DST/c/.data.encio-snapshot" ] || _fail "encio's snapshot was copied"

_log "a move into itself: refused, in one message"
if "$ENCIO" copy -r --subvolumes "$SRC" "$SRC/data/inside" >"$TEST_TMP/self.out" 2>&1; then
	_fail "a move into itself was not refused"
fi
cat "$TEST_TMP/self.out"
grep -q "into itself" "$TEST_TMP/self.out" || _fail "the refusal does not say why"
[ "$(grep -c '^ERROR' "$TEST_TMP/self.out")" = 1 ] || _fail "more than one error for one refusal"
