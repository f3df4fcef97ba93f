#!/bin/bash
# A move (copy -rT --subvolumes) goes on past a subvolume whose copy fails:
# the others are copied, a snapshot whose nearest relative failed is made
# from another relative's copy, the subvolume nested in the failed one is
# left out, the exit status is 1, and the summary (text and JSON) names the
# failed one with its error and the one left out with the failed one it
# is in. No snapshot of the run stays in SRC. Once the cause is put right,
# a rerun completes the move.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT

run_check btrfs -q subvolume create "$SRC/@a"
random_bytes 200000 a >"$SRC/@a/data"
run_check btrfs -q subvolume create "$SRC/@a/inner"
echo inner >"$SRC/@a/inner/f"
mkdir "$SRC/snaps"
run_check btrfs -q subvolume snapshot -r "$SRC/@a" "$SRC/snaps/a1"
run_check btrfs -q subvolume create "$SRC/@b"
echo b >"$SRC/@b/f"

move()
{
	"$ENCIO" copy -rT --subvolumes "$@" "$SRC" "$DST/m" >"$TEST_TMP/move.out" 2>"$TEST_TMP/move.err"
	local rc=$?
	cat "$TEST_TMP/move.out" "$TEST_TMP/move.err"
	return $rc
}
move || _fail "the first move failed"

_log "@a changes in SRC and its copy in DEST: its copy fails (ESTALE)"
echo changed >"$SRC/@a/x"
echo changed >"$SRC/@a/inner/g"
# a change within the clock tick the copy is marked with is taken for none
sleep 1
echo mine >"$DST/m/@a/mine"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/@a" "$SRC/snaps/a2"
echo more >"$SRC/@b/g"

move
rc=$?
[ $rc = 1 ] || _fail "exit status $rc after a failed subvolume, not 1"
grep -q "^failed: '$DST/m/@a': cannot update .*: Stale file handle" "$TEST_TMP/move.out" ||
	_fail "the summary does not name the failed subvolume and its error"
grep -q "^left out: '$DST/m/@a/inner': in the copy of '$DST/m/@a', which failed" "$TEST_TMP/move.out" ||
	_fail "the summary does not name the subvolume left out"
grep -q "1 subvolume failed, 1 left out" "$TEST_TMP/move.err" || _fail "no closing error"
diff -r "$SRC/@b" "$DST/m/@b" || _fail "@b was not copied past the failed one"
diff -r -x inner -x .inner.encio-base "$SRC/snaps/a2" "$DST/m/snaps/a2" || _fail "snapshot a2 was not copied"
[ "$(btrfs property get -ts "$DST/m/snaps/a2" ro)" = ro=true ] || _fail "a2's copy is not read-only"
[ "$(cat "$DST/m/@a/mine")" = mine ] || _fail "the change in DEST was lost"
[ ! -e "$DST/m/@a/x" ] || _fail "the failed copy was changed"
find "$SRC" -maxdepth 3 -name '*.encio-snapshot' | grep -q . && _fail "a snapshot of the run stayed in SRC"

_log "the same as JSON"
"$ENCIO" copy -rT --subvolumes --format=json "$SRC" "$DST/m" >"$TEST_TMP/move.json" 2>/dev/null
rc=$?
[ $rc = 1 ] || _fail "exit status $rc, not 1 (json)"
python3 - "$TEST_TMP/move.json" "$DST/m" <<'PY' || _fail "the JSON summary"
import json, sys
j = json.load(open(sys.argv[1]))
d = sys.argv[2]
f = j["subvolumes_failed"]
assert len(f) == 1 and f[0]["path"] == d + "/@a" and f[0]["errno"] == "ESTALE", f
assert "cannot update" in f[0]["error"], f
l = j["subvolumes_left_out"]
assert l == [{"path": d + "/@a/inner", "inside": d + "/@a"}], l
PY

_log "the copy of @a moved away: a rerun completes"
mv "$DST/m/@a" "$DST/aside"
move || _fail "the rerun failed"
grep -q "^failed\|^left out" "$TEST_TMP/move.out" && _fail "the rerun names failures"
diff -r -x .inner.encio-base "$SRC/@a" "$DST/m/@a" || _fail "@a differs after the rerun"
diff -r "$SRC/@b" "$DST/m/@b" || _fail "@b differs after the rerun"
_log "ok"
