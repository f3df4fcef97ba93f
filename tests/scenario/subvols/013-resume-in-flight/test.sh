#!/bin/bash
# copy -r --subvolumes goes on with the subvolume in flight when a run
# stopped, instead of making it again: a read-only subvolume copied whole
# (killed), a snapshot received as a difference (killed after a
# checkpoint, DEST unmounted and mounted again), a writable subvolume's
# difference (SIGINT; its snapshot is kept for the rerun). Files complete
# in a resumed whole copy still share their extents with the files after
# them. Made again instead: a partial someone made reachable (its root's
# mode changed), and one whose source is another snapshot now. A rerun
# after a run killed once a writable subvolume's copy was complete, with
# the base an earlier run kept, finishes (it failed: "File exists").
# Snapshots with names too long for the checkpoints' are copied as before.
# Every result equals its source and an uninterrupted copy, and nothing
# of encio's is left in DEST.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 2G compress=zstd
SRC=$MNT
make_btrfs dst 3G
DST=$MNT
DST_LOOP=${_LOOPS[1]}
T=$TEST_TMP

run_check btrfs -q subvolume create "$SRC/v"
mkdir -p "$SRC/v/d" "$SRC/v/r"
for i in $(seq -w 1 1200); do
	compressible $((20000 + 10#$i * 37)) >"$SRC/v/d/f$i"
done
for i in $(seq -w 1 200); do
	random_bytes 200000 "r$i" >"$SRC/v/r/r$i"
done
# more than the files in flight (256) between them and their reflinks
mkdir "$SRC/v/g"
for i in $(seq -w 1 400); do
	echo "$i" >"$SRC/v/g/g$i"
done
sync
# reflinks made after their sources: in the walk, after them
mkdir "$SRC/v/z"
for i in $(seq -w 1 200); do
	cp --reflink=always "$SRC/v/r/r$i" "$SRC/v/z/z$i"
done
ln "$SRC/v/d/f0001" "$SRC/v/z/hard"
ln -s ../d/f0002 "$SRC/v/z/link"
setfattr -n user.note -v kept "$SRC/v/d/f0003"
run_check chattr +i "$SRC/v/d/f0004"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check chattr -i "$SRC/v/d/f0004"
mkdir "$SRC/v/n"
for i in $(seq -w 1 300); do
	random_bytes 200000 "n$i" >"$SRC/v/n/n$i"
done
rm "$SRC/v/d/f0010"
mv "$SRC/v/d/f0011" "$SRC/v/n/moved"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
mkdir "$SRC/v/w"
for i in $(seq -w 1 200); do
	random_bytes 200000 "w$i" >"$SRC/v/w/w$i"
done
sync

# kill_when COND OUT CMD...: run CMD, SIGKILL it once the shell test COND
# holds
kill_when()
{
	local cond=$1 out=$2 pid
	shift 2
	"$@" >"$out" 2>&1 &
	pid=$!
	until eval "$cond"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			_fail "$* ended before $cond: $(cat "$out")"
		fi
	done
	kill -KILL "$pid"
	wait "$pid"
	return 0
}

# full FILE SIZE: FILE has SIZE bytes
full()
{
	[ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]
}

# json OUT KEY: a number from copy's JSON summary
json()
{
	sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" "$1"
}

same() # NAME DEST
{
	diff -r --no-dereference "$SRC/$1" "$2/$1" >/dev/null ||
		_fail "$2/$1 differs from its source"
	python3 "$TOP_SRCDIR/tests/random/difftest.py" compare --copy \
		"$SRC/$1" "$2/$1" || _fail "$2/$1: metadata differs"
}

# ckpt DIR NAME N: the receive of NAME's copy into DIR has its Nth
# checkpoint or a later one (a checkpoint lives only until the next one: a
# loaded machine can miss the Nth)
ckpt()
{
	local f
	# no fork
	for f in "$1"/.encio-receive.*/".$2.encio-partial/ckpt."*; do
		[ -e "$f" ] && [ "${f##*.}" -ge "$3" ] && return 0
	done
	return 1
}

clean_dest() # DEST: no partial, checkpoint, record or working copy left
{
	local left
	left=$(find "$1" -maxdepth 1 -name '*.encio-*')
	[ -z "$left" ] || _fail "encio's names left in $1: $left"
}

_log "the uninterrupted copy"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/u"
for n in s1 s2 v; do same $n "$DST/u"; done
whole=$(disk "$DST/u")
# gone before the copies below, whose receives would find its subvolumes
# by their received UUIDs too
btrfs -q subvolume delete "$DST/u/v" "$DST/u/s2" "$DST/u/s1" >/dev/null
rmdir "$DST/u"

_log "a whole copy killed, resumed"
# the files before r120 written, the reflinks to them not yet made
kill_when 'full "$DST/a/.s1.encio-partial/r/r120" 200000' "$T/a.out" \
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/a"
[ -d "$DST/a/.s1.encio-partial" ] || _fail "no partial kept: $(ls -A "$DST/a")"
[ -e "$DST/a/.s1.encio-partial/z/z001" ] && _not_run "the walk ran ahead to z001"
run_check "$ENCIO" copy --format=json -rT --subvolumes "$SRC" "$DST/a" >"$T/a2.out"
[ "$(json "$T/a2.out" subvolumes_resumed)" = 1 ] ||
	_fail "s1's whole copy was not resumed: $(cat "$T/a2.out")"
n=$(json "$T/a2.out" subvolume_entries_complete)
_log "$n entries found complete"
[ "$n" -ge 1100 ] || _fail "s1's rerun found $n entries complete"
for n in s1 s2 v; do same $n "$DST/a"; done
clean_dest "$DST/a"
got=$(disk "$DST/a")
_log "disk: resumed copy $got B, uninterrupted $whole B"
# the files found complete shared what the reflinks after them have
within "$got" "$whole" || _fail "the resumed copy takes $got B, the uninterrupted $whole B"
btrfs -q subvolume delete "$DST/a/v" "$DST/a/s2" "$DST/a/s1" >/dev/null

_log "a difference killed after a checkpoint, DEST mounted again"
kill_when 'ckpt "$DST/m" s2 3' "$T/b.out" \
	"$ENCIO" copy -rT --subvolumes --checkpoint 2M "$SRC" "$DST/m"
umount_settled "$DST"
mount "$DST_LOOP" "$DST" || _fail "mount $DST again"
same s1 "$DST/m"

_log "SIGINT in the writable subvolume's difference"
env --default-signal=INT "$ENCIO" -v copy -rT --subvolumes --checkpoint 2M "$SRC" "$DST/m" \
	>"$T/c.out" 2>"$T/c.err" &
pid=$!
until ckpt "$DST/m" v 2; do
	kill -0 "$pid" 2>/dev/null || _fail "the copy ended before v's checkpoint: $(cat "$T/c.err")"
done
kill -INT "$pid"
wait "$pid" && _fail "an interrupted copy exited 0"
grep -q 'the one in flight as far as it was made' "$T/c.err" ||
	_fail "no word of the kept copy: $(cat "$T/c.err")"
grep -q "s2': a snapshot of the copy of .*, gone on with from a stopped run" "$T/c.err" ||
	_fail "s2's difference was not resumed: $(cat "$T/c.err")"
[ -d "$SRC/.v.encio-snapshot" ] || _fail "v's snapshot not kept for the rerun"
same s2 "$DST/m"

_log "the rerun"
run_check "$ENCIO" copy --format=json -rT --subvolumes "$SRC" "$DST/m" >"$T/d.out"
[ "$(json "$T/d.out" subvolumes_resumed)" = 1 ] ||
	_fail "v's difference was not resumed: $(cat "$T/d.out")"
for n in s1 s2 v; do same $n "$DST/m"; done
clean_dest "$DST/m"
got=$(disk "$DST/m")
_log "disk: resumed copy $got B, uninterrupted $whole B"
within "$got" "$whole" || _fail "the resumed copy takes $got B, the uninterrupted $whole B"

_log "a partial made reachable is made again"
kill_when 'full "$DST/n/.s1.encio-partial/r/r100" 200000' "$T/e.out" \
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/n"
chmod 755 "$DST/n/.s1.encio-partial"
run_check "$ENCIO" copy --format=json -rT --subvolumes "$SRC" "$DST/n" >"$T/e2.out"
[ "$(json "$T/e2.out" subvolumes_resumed)" = 0 ] || _fail "a reachable partial was resumed"
for n in s1 s2 v; do same $n "$DST/n"; done
clean_dest "$DST/n"

_log "a partial of a snapshot made again since is made again"
kill_when 'ckpt "$DST/o" s2 2' "$T/f.out" \
	"$ENCIO" copy -rT --subvolumes --checkpoint 2M "$SRC" "$DST/o"
btrfs -q subvolume delete "$SRC/s2" >/dev/null
echo changed >"$SRC/v/n/n001"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
run_check "$ENCIO" copy --format=json -rT --subvolumes "$SRC" "$DST/o" >"$T/f2.out"
[ "$(json "$T/f2.out" subvolumes_resumed)" = 0 ] ||
	_fail "a partial of another snapshot was resumed: $(cat "$T/f2.out")"
for n in s1 s2 v; do same $n "$DST/o"; done
clean_dest "$DST/o"

_log "killed after the writable copy was complete, with a base kept"
# o's v has a base; v changes, and a new subvolume comes after it
echo more >>"$SRC/v/d/f0020"
run_check btrfs -q subvolume create "$SRC/x"
for i in $(seq -w 1 300); do
	random_bytes 200000 "x$i" >"$SRC/x/x$i"
done
sync
kill_when 'full "$DST/o/.x.encio-partial/x150" 200000' "$T/g.out" \
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/o"
run_check "$ENCIO" copy --format=json -rT --subvolumes "$SRC" "$DST/o" >"$T/g2.out"
[ "$(json "$T/g2.out" subvolumes_resumed)" = 1 ] ||
	_fail "x's whole copy was not resumed: $(cat "$T/g2.out")"
for n in s1 s2 v x; do same $n "$DST/o"; done
clean_dest "$DST/o"
left=$(ls -A "$SRC" | grep encio | sort | xargs)
[ "$left" = ".v.encio-base .x.encio-base" ] || _fail "SRC keeps $left"

_log "snapshots whose names leave no room for the checkpoints' names"
long=$(printf 'l%.0s' $(seq 1 228))
run_check btrfs -q subvolume create "$SRC/lv"
echo one >"$SRC/lv/f"
run_check btrfs -q subvolume snapshot -r "$SRC/lv" "$SRC/${long}1"
echo two >>"$SRC/lv/f"
run_check btrfs -q subvolume snapshot -r "$SRC/lv" "$SRC/${long}2"
run_check "$ENCIO" -q copy -rT --subvolumes --final "$SRC" "$DST/p"
for n in s1 s2 v x "${long}1" "${long}2"; do same "$n" "$DST/p"; done
clean_dest "$DST/p"
exit 0
