#!/bin/bash
# copy -r --subvolumes makes a whole copy's partial subvolume
# (.NAME.encio-partial), then makes it private and marks it with its
# source; at the end the mark goes and the copy is marked received. A run
# killed between making and marking, or between the mark's going and the
# received mark, left a subvolume no mark named encio's, which every rerun
# refused as "no partial of encio's" (random seed 168, method sub, killed
# at 0.03 s and at 0.05 s). An empty subvolume root's and nobody else's to
# fill is taken as the first's leftover; the copy is marked received before
# the partial's mark goes (and again after). A user's subvolume at the
# name, or root's with something in it, stays, an error.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
command -v strace >/dev/null || _not_run "needs strace"

make_btrfs src 256M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
random_bytes 300000 a >"$SRC/v/a"
mkdir "$SRC/v/d"
echo small >"$SRC/v/d/b"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check btrfs -q subvolume delete "$SRC/v"

# copy_into NAME: a fresh DEST for one case, in $DST
copy_into()
{
	make_btrfs "$1" 256M
	DST=$MNT
}

_log "an empty subvolume of root's, as a run killed before the mark left it"
copy_into dst-killed
run_check btrfs -q subvolume create "$DST/.s1.encio-partial"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" ||
	_fail "the rerun refused what the killed run left"
cmp "$SRC/s1/a" "$DST/s1/a" || _fail "s1/a differs"
cmp "$SRC/s1/d/b" "$DST/s1/d/b" || _fail "s1/d/b differs"
[ "$(btrfs property get -ts "$DST/s1" ro)" = "ro=true" ] || _fail "s1 not read-only"
[ -z "$(find "$DST" -name '*encio*')" ] || _fail "left: $(find "$DST" -name '*encio*')"

_log "killed at each removal of an xattr: the rerun completes the copy"
for n in 1 2 3 4; do
	copy_into "dst-kill-$n"
	strace -f -qq -o /dev/null -e trace=fremovexattr \
		-e inject=fremovexattr:signal=KILL:when=$n \
		"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" && break
	"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" ||
		_fail "the rerun after a kill at the call $n of fremovexattr failed"
	cmp "$SRC/s1/a" "$DST/s1/a" || _fail "s1/a differs after a kill at call $n"
	[ -z "$(find "$DST" -name '*encio*')" ] || _fail "left: $(find "$DST" -name '*encio*')"
done

_log "a user's empty subvolume at the name"
copy_into dst-user
chmod 0755 "$TEST_TMP"
chmod 1777 "$DST"
as_user btrfs -q subvolume create "$DST/.s1.encio-partial" || _fail "user's subvolume create"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err" &&
	_fail "a user's subvolume at the partial's name taken"
grep -q "no partial of encio's" "$TEST_TMP/err" || _fail "message: $(cat "$TEST_TMP/err")"
[ "$(stat -c '%u %a' "$DST/.s1.encio-partial")" = "4321 755" ] ||
	_fail "the user's subvolume changed: $(stat -c '%u %a' "$DST/.s1.encio-partial")"

_log "root's subvolume at the name, not empty"
copy_into dst-full
run_check btrfs -q subvolume create "$DST/.s1.encio-partial"
echo kept >"$DST/.s1.encio-partial/file"
"$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST" 2>"$TEST_TMP/err" &&
	_fail "root's subvolume holding a file taken"
grep -q "no partial of encio's" "$TEST_TMP/err" || _fail "message: $(cat "$TEST_TMP/err")"
[ "$(cat "$DST/.s1.encio-partial/file")" = kept ] || _fail "its file is gone"
echo "PASS: $TEST_NAME"
