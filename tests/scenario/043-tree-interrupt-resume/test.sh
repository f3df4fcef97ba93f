#!/bin/bash
# SIGINT / SIGTERM midway stop encio copy -r cleanly (temporaries removed,
# no file under a final name that differs from SRC), and a rerun onto the
# same DEST resumes: complete entries are skipped, the rest is copied, and
# the result equals SRC.
source "$(dirname "$0")/../../common.sh"
require_root

make_btrfs src 2G compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 2G noatime
DST=$MNT

T=$SRC/tree
mkdir -p "$T/a" "$T/b/c"
for i in $(seq 0 23); do
	random_bytes 12000000 "r$i" >"$T/a/r$i"
	compressible 4000000 >"$T/b/c/t$i"
done
ln "$T/a/r0" "$T/b/r0-link"
ln -s ../a/r1 "$T/b/sym"
touch -d '2005-05-05' "$T/a" "$T/b"
sync

check_partial()
{
	local a=$1 b=$2 f n=0
	[ -z "$(find "$b" -name '.*.encio-*')" ] || _fail "temporaries left: $(find "$b" -name '.*.encio-*' | head -3)"
	while read -r f; do
		cmp "$a/$f" "$b/$f" || _fail "$b/$f differs from SRC"
		n=$((n + 1))
	done < <(cd "$b" && find . -type f -printf '%P\n')
	echo "$n complete files in $b"
}

interrupt()
{
	local sig=$1 dest=$2 pid cpid rc n
	echo 3 >/proc/sys/vm/drop_caches
	# one file and two requests in flight: slow enough to interrupt
	timeout 120 "$ENCIO" copy -r -T -j 1 -d 2 "$T" "$dest" >"$TEST_TMP/out" 2>&1 &
	pid=$!
	# Interrupt once two files are complete: with -j 1 the walker makes
	# a file's unnamed O_TMPFILE only after the one before it finished,
	# and finished ones stay open until their checkpoint. A fixed sleep
	# was either too early to resume anything or too late.
	n=0
	while kill -0 $pid 2>/dev/null &&
		[ "$(ls -l /proc/"$(pgrep -P $pid)"/fd 2>/dev/null | grep -c '/#[0-9]* (deleted)$')" -lt 3 ]; do
		n=$((n + 1))
		[ $n -lt 20000 ] || _fail "no unnamed files appeared in $dest"
	done
	cpid=$(pgrep -P $pid)
	kill -"$sig" "${cpid:-$pid}"
	wait $pid
	rc=$?
	cat "$TEST_TMP/out"
	echo "exit status $rc"
	[ $rc = 0 ] && _not_run "the copy finished before SIG$sig"
	[ $rc = $((128 + $(kill -l "$sig"))) ] || _fail "SIG$sig: exit status $rc"
	[ "$sig" = KILL ] || grep -q interrupted "$TEST_TMP/out" ||
		_fail "no 'interrupted' message"
	check_partial "$T" "$dest"
}

_log "SIGINT midway"
interrupt INT "$DST/x"
_log "rerun: resumes"
out=$(timeout 120 "$ENCIO" copy -r -T --format=json "$T" "$DST/x") || _fail "rerun: $out"
echo "$out"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["skipped"] > 0 and d["files"] > 0 and d["failed"] == 0, d' ||
	_fail "rerun did not resume"
diff -r --no-dereference "$T" "$DST/x" || _fail "diff -r after resume"
[ "$(stat -c %i "$DST/x/a/r0")" = "$(stat -c %i "$DST/x/b/r0-link")" ] || _fail "hard link lost in resume"
[ "$(stat -c %Y "$DST/x/a")" = "$(stat -c %Y "$T/a")" ] || _fail "directory mtime"
[ -z "$(find "$DST/x" -name '.*.encio-*')" ] || _fail "temporaries left"

_log "a file changed in SRC since: copied again on rerun, the rest skipped"
echo changed >>"$T/b/c/t3"
out=$(timeout 120 "$ENCIO" copy -r -T --format=json "$T" "$DST/x") || _fail "rerun: $out"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 1 and d["skipped"] > 40, d' ||
	_fail "changed file not recopied alone: $out"
cmp "$T/b/c/t3" "$DST/x/b/c/t3" || _fail "changed file differs"

_log "SIGTERM midway"
interrupt TERM "$DST/y"
run_check timeout 120 "$ENCIO" -q copy -r -T "$T" "$DST/y"
diff -r --no-dereference "$T" "$DST/y" || _fail "diff -r after resume"

# Files not yet synced and linked are unnamed (O_TMPFILE): a copy that
# dies leaves neither temporaries nor partial files, and a rerun resumes.
_log "SIGKILL midway"
interrupt KILL "$DST/z"
run_check timeout 120 "$ENCIO" -q copy -r -T "$T" "$DST/z"
diff -r --no-dereference "$T" "$DST/z" || _fail "diff -r after resume"
exit 0
