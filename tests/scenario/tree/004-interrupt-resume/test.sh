#!/bin/bash
# SIGINT / SIGTERM / SIGKILL midway stop encio copy -r cleanly: a new tree
# is built in DEST/.NAME.encio-partial and nothing exists under its final
# name; after SIGINT and SIGTERM that staging directory holds only complete
# files. A rerun onto the same DEST resumes: complete entries are skipped,
# the rest is copied, the tree is renamed into place and equals SRC.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
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

staging_of() { echo "$(dirname "$1")/.$(basename "$1").encio-partial"; }

# After an interrupt: nothing under DEST's final name, no temporaries in the
# staging directory, and (unless killed) every file there equals SRC.
check_partial()
{
	local a=$1 dest=$2 sig=$3 b f n=0
	b=$(staging_of "$dest")
	[ ! -e "$dest" ] || _fail "$dest exists after SIG$sig"
	[ -d "$b" ] || _fail "no staging directory $b"
	[ -z "$(find "$b" -mindepth 1 -name '.*.encio-*')" ] || _fail "temporaries left: $(find "$b" -mindepth 1 -name '.*.encio-*' | head -3)"
	[ "$sig" = KILL ] && return
	while read -r f; do
		cmp "$a/$f" "$b/$f" || _fail "$b/$f differs from SRC"
		n=$((n + 1))
	done < <(cd "$b" && find . -type f -printf '%P\n')
	echo "$n complete files in $b"
}

interrupt()
{
	local sig=$1 dest=$2 pid cpid rc n staging
	staging=$(staging_of "$dest")
	echo 3 >/proc/sys/vm/drop_caches
	# one file and two requests in flight: slow enough to interrupt
	timeout 120 "$ENCIO" copy -r -T -j 1 -d 2 "$T" "$dest" >"$TEST_TMP/out" 2>&1 &
	pid=$!
	# Interrupt once two files are complete: with -j 1 the walker makes
	# a file only after the one before the one in flight finished, so
	# four files made means two complete. A fixed sleep was either too
	# early to resume anything or too late.
	n=0
	while kill -0 $pid 2>/dev/null &&
		[ "$(find "$staging" -type f 2>/dev/null | wc -l)" -lt 4 ]; do
		n=$((n + 1))
		[ $n -lt 20000 ] || _fail "no files appeared in $staging"
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
	[ "$sig" = KILL ] || grep -q "kept in '$staging'" "$TEST_TMP/out" ||
		_fail "no message naming the staging directory"
	check_partial "$T" "$dest" "$sig"
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
[ -z "$(find "$DST" -name '.*.encio-*')" ] || _fail "temporaries left"

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

_log "the final name made by someone else meanwhile: kept apart, not merged"
timeout 120 "$ENCIO" -q copy -r -T -j 1 -d 2 "$T" "$DST/w" 2>"$TEST_TMP/err" &
pid=$!
n=0
until [ -d "$DST/.w.encio-partial" ] || ! kill -0 $pid 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 20000 ] || _fail "no staging directory appeared"
done
mkdir "$DST/w"
wait $pid
rc=$?
cat "$TEST_TMP/err"
[ $rc = 0 ] && _fail "copy succeeded over a directory made meanwhile"
grep -q "put into place '$DST/w': File exists" "$TEST_TMP/err" || _fail "rename conflict not reported"
[ -z "$(ls -A "$DST/w")" ] || _fail "$DST/w was written"
diff -r --no-dereference "$T" "$DST/.w.encio-partial" || _fail "staging incomplete"
rm -rf "$DST/w" "$DST/.w.encio-partial"

# A copy that dies leaves its partial files in the staging directory only,
# the one in flight incomplete (its mtime not yet set): a rerun resumes.
_log "SIGKILL midway"
interrupt KILL "$DST/z"
run_check timeout 120 "$ENCIO" -q copy -r -T "$T" "$DST/z"
diff -r --no-dereference "$T" "$DST/z" || _fail "diff -r after resume"
[ -z "$(find "$DST" -name '.*.encio-*')" ] || _fail "temporaries left"

# Into an existing directory (a merge, as on a rerun after a finished copy),
# files are unnamed until synced: a killed copy leaves no temporaries.
_log "SIGKILL while merging into an existing tree"
rm -f "$DST"/z/a/r1[0-9] "$DST"/z/b/c/t*
echo 3 >/proc/sys/vm/drop_caches
timeout 120 "$ENCIO" -q copy -r -T -j 1 -d 2 "$T" "$DST/z" &
pid=$!
n=0
while kill -0 $pid 2>/dev/null &&
	[ "$(ls -l /proc/"$(pgrep -P $pid)"/fd 2>/dev/null | grep -c '/#[0-9]* (deleted)$')" -lt 3 ]; do
	n=$((n + 1))
	[ $n -lt 20000 ] || _fail "no unnamed files appeared in $DST/z"
done
kill -KILL "$(pgrep -P $pid)" 2>/dev/null
wait $pid
[ $? = 137 ] || _not_run "the merge finished before SIGKILL"
[ -z "$(find "$DST" -name '.*.encio-*')" ] || _fail "temporaries left"
while read -r f; do
	cmp "$T/$f" "$DST/z/$f" || _fail "$DST/z/$f differs from SRC"
done < <(cd "$DST/z" && find . -type f -printf '%P\n')
run_check timeout 120 "$ENCIO" -q copy -r -T "$T" "$DST/z"
diff -r --no-dereference "$T" "$DST/z" || _fail "diff -r after resume"
exit 0
