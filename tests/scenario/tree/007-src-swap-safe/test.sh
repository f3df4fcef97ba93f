#!/bin/bash
# encio copy -r gives each directory the xattrs of the source directory it
# walked, read when everything inside is written: with a directory of SRC
# replaced by a symlink to a directory outside SRC while the copy runs
# (encio stopped at that moment), no xattr from outside SRC reaches DEST,
# and the copy says which directory it could not finish.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT

S=$SRC/S
# walked in the order made: a/b before z
mkdir -p "$S/a/b/c"
setfattr -n user.inside -v yes "$S/a/b"
setfattr -n user.inside -v yes "$S/a/b/c"
echo data >"$S/a/b/file"
mkdir "$S/z"
for i in $(seq 10 29); do
	random_bytes 4000000 "z$i" >"$S/z/f$i"
done
OUT=$SRC/outside
mkdir -p "$OUT/b/c"
setfattr -n user.secret -v leaked "$OUT/b"
setfattr -n user.secret -v leaked "$OUT/b/c"

# stopped_run DEST [OPTION]: stopped while it reads z; a is swapped for a
# symlink to OUT, then the copy goes on.
stopped_run()
{
	local dest=$1 pid rc
	"$ENCIO" -q copy -r -j 1 -d 1 ${2:+"$2"} "$S" "$dest" >"$TEST_TMP/out" 2>&1 &
	pid=$!
	stop_when_open $pid "$S/z"
	mv "$S/a" "$SRC/a.moved"
	ln -s "$OUT" "$S/a"
	kill -CONT $pid
	wait $pid
	rc=$?
	cat "$TEST_TMP/out"
	echo "exit status $rc"
	rm "$S/a"
	mv "$SRC/a.moved" "$S/a"
	# a before z again in the walk
	mv "$S/z" "$SRC/z.moved"
	mv "$SRC/z.moved" "$S/z"
	getfattr -R -d -m - "$dest" 2>/dev/null
	! getfattr -R -d -m - "$dest" 2>/dev/null | grep -q secret ||
		_fail "xattrs from outside SRC in DEST"
	[ "$rc" = 1 ] || _fail "exit status $rc, not 1"
	grep -q "$S/a" "$TEST_TMP/out" || _fail "no message naming $S/a"
}

_log "a new tree (staged)"
stopped_run "$DST/new"
[ -d "$DST/new/a/b/c" ] || _fail "the tree was not copied"
_log "into a DEST that has the tree"
run_check timeout 120 "$ENCIO" -q copy -r -T "$S" "$DST/new"
[ "$(getfattr --only-values -n user.inside "$DST/new/a/b/c")" = yes ] || _fail "rerun: xattr of a/b/c missing"
setfattr -x user.inside "$DST/new/a/b" "$DST/new/a/b/c"
touch "$S/z"/f*
stopped_run "$DST/new" -T
_log "PASS"
