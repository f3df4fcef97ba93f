#!/bin/bash
# encio copy -r into a DEST that holds the tree already, with a directory
# of DEST replaced by a symlink to a directory outside DEST while the copy
# runs (encio stopped at that moment): nothing is created, linked or
# renamed outside DEST, and the outside directory keeps its mode. Files go
# to the directory encio opened, wherever it was moved.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT

S=$SRC/S
mkdir -p "$S/sub"
for i in $(seq 10 29); do
	random_bytes 4000000 "f$i" >"$S/sub/f$i"
done
mkfifo "$S/sub/fifo"
ln -s f10 "$S/sub/link"
ln "$S/sub/f10" "$S/sub/hard"
chmod 0777 "$S/sub"

D=$DST/d
mkdir "$D"
run_check timeout 120 "$ENCIO" -q copy -r "$S" "$D/"
OUT=$DST/outside
mkdir -m 0755 "$OUT"

# stopped_run NAME: a copy whose files all need copying again, stopped
# once it has entered DEST's copy of sub; sub is swapped for a symlink to
# OUT, then the copy goes on.
stopped_run()
{
	local name=$1 pid rc
	touch -d "2011-01-0$((RANDOM % 9 + 1))" "$S"/sub/f* "$S/sub/fifo"
	touch -h -d 2011-01-01 "$S/sub/link"
	# one file and one request in flight: sub is open in DEST for long
	"$ENCIO" -q copy -r -j 1 -d 1 "$S" "$D/" >"$TEST_TMP/out.$name" 2>&1 &
	pid=$!
	stop_when_open $pid "$D/S/sub"
	mv "$D/S/sub" "$D/S/sub.$name"
	ln -s "$OUT" "$D/S/sub"
	kill -CONT $pid
	wait $pid
	rc=$?
	cat "$TEST_TMP/out.$name"
	echo "exit status $rc"
	[ -z "$(ls -A "$OUT")" ] || _fail "entries appeared outside DEST: $(ls -A "$OUT" | head -5 | tr '\n' ' ')"
	[ "$(stat -c %a "$OUT")" = 755 ] || _fail "the outside directory's mode changed to $(stat -c %a "$OUT")"
	[ -L "$D/S/sub" ] || _fail "the symlink in DEST was replaced"
	# files copied after the swap went to the directory moved away
	[ "$(stat -c %Y "$D/S/sub.$name/f29")" = "$(stat -c %Y "$S/sub/f29")" ] ||
		_fail "f29 not put in the directory the copy opened"
	cmp "$S/sub/f29" "$D/S/sub.$name/f29" || _fail "f29 differs"
	rm "$D/S/sub"
	mv "$D/S/sub.$name" "$D/S/sub"
}

_log "files made with O_TMPFILE, linked into place at the end"
stopped_run tmpfile
_log "the copy in DEST is what the copy opened"
run_check timeout 120 "$ENCIO" -q copy -r "$S" "$D/"
diff -r --no-dereference -x fifo "$S" "$D/S" || _fail "DEST differs from SRC after a rerun"
_log "again"
stopped_run again

_log "PASS"
