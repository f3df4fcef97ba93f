#!/bin/bash
# encio copy --abort DEST/NAME drops what a stopped copy --subvolumes kept
# of its copy at DEST/NAME to go on with, and nothing else: a whole copy's
# partial subvolume (.NAME.encio-partial, marked as only root can mark it)
# and a difference's partial receive (in DEST's private directory). The
# stop (SIGINT) names the copy kept and the --abort that
# drops it. Something at
# the partial's name that encio did not mark stays, an error; a copy with
# nothing kept is an error. After an abort the same copy makes it anew.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/r"
for i in $(seq -w 1 400); do random_bytes 100000 "r$i" >"$SRC/v/r/r$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
mkdir "$SRC/v/n"
for i in $(seq -w 1 400); do random_bytes 100000 "n$i" >"$SRC/v/n/n$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
run_check btrfs -q subvolume delete "$SRC/v"
sync

# stop_when SIGNAL COND OUT CMD...: run CMD, send it SIGNAL once the
# shell test COND holds
stop_when()
{
	local sig=$1 cond=$2 out=$3 pid
	shift 3
	# a background job of a script starts with SIGINT ignored
	env --default-signal=INT "$@" >"$out" 2>&1 &
	pid=$!
	until eval "$cond"; do
		kill -0 "$pid" 2>/dev/null && continue
		wait "$pid"
		_not_run "$* ended before $cond"
	done
	kill "-$sig" "$pid"
	wait "$pid"
	cat "$out"
	return 0
}

# ckpt DIR NAME: the receive of NAME's copy into DIR has a checkpoint
ckpt()
{
	local f
	for f in "$1"/.encio-receive.*/".$2.encio-partial"/ckpt.*; do
		[ -e "$f" ] && return 0
	done
	return 1
}

_log "a whole copy stopped, then abandoned"
stop_when INT '[ -e "$DST/a/.s1.encio-partial/r/r100" ]' "$T/a.out" \
	"$ENCIO" copy -rT --subvolumes "$SRC" "$DST/a"
[ -d "$DST/a/.s1.encio-partial" ] || _fail "no partial kept: $(ls -A "$DST/a")"
grep -qF "partial copy of '$DST/a/s1' kept" "$T/a.out" || _fail "the stop does not name the copy kept"
grep -qF "encio copy --abort '$DST/a/s1'" "$T/a.out" || _fail "the stop does not say how to drop it"
run_check "$ENCIO" copy --abort "$DST/a/s1"
[ -e "$DST/a/.s1.encio-partial" ] && _fail "the partial copy stays"
run_mustfail "nothing kept" "$ENCIO" copy --abort "$DST/a/s1"
grep -q "find a partial copy" <<<"$ERR_OUT" || _fail "unclear: $ERR_OUT"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/a"
diff -r "$SRC/s1" "$DST/a/s1" || _fail "s1 differs"
diff -r "$SRC/s2" "$DST/a/s2" || _fail "s2 differs"

_log "a difference stopped, then abandoned"
stop_when INT 'ckpt "$DST/b" s2' "$T/b.out" \
	"$ENCIO" copy -rT --subvolumes --checkpoint 256K "$SRC" "$DST/b"
ls -d "$DST"/b/.encio-receive.*/.s2.encio-partial >/dev/null 2>&1 || _fail "no partial receive kept"
grep -qF "partial copy of '$DST/b/s2' kept" "$T/b.out" || _fail "the stop does not name the copy kept"
grep -qF "encio copy --abort '$DST/b/s2'" "$T/b.out" || _fail "the stop does not say how to drop it"
run_check "$ENCIO" copy --abort "$DST/b/s2"
ls -A "$DST/b" | grep -q encio && _fail "encio's names left: $(ls -A "$DST/b")"
diff -r "$SRC/s1" "$DST/b/s1" || _fail "s1's copy was touched"

_log "what encio did not mark stays"
run_check btrfs -q subvolume create "$DST/b/.s2.encio-partial"
echo mine >"$DST/b/.s2.encio-partial/file"
run_mustfail "not encio's" "$ENCIO" copy --abort "$DST/b/s2"
grep -q "no partial of encio's" <<<"$ERR_OUT" || _fail "unclear: $ERR_OUT"
[ "$(cat "$DST/b/.s2.encio-partial/file")" = mine ] || _fail "a subvolume not encio's deleted"
exit 0
