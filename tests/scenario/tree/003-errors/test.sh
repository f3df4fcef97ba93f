#!/bin/bash
# encio copy -r when things go wrong: an entry that cannot be copied is
# reported with its path and the rest is copied (exit 1); files removed
# while the copy runs, or replaced by FIFOs (never waited on); ENOSPC
# midway stops cleanly; a directory copied into or onto itself is refused
# before anything is made. Never a temporary left, never a file under a
# final name that differs from SRC.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT
make_btrfs small 150M ""
SMALL=$MNT

# Every regular file under a final name in $2 equals the one in $1.
check_partial()
{
	local a=$1 b=$2 f n=0
	[ -z "$(find "$b" -mindepth 1 -name '.*.encio-*')" ] || _fail "temporaries left in $b: $(find "$b" -mindepth 1 -name '.*.encio-*' | head)"
	while read -r f; do
		# removed from SRC after it was copied: fine
		[ -n "${3:-}" ] && [ ! -e "$a/$f" ] && continue
		cmp "$a/$f" "$b/$f" || _fail "$b/$f differs from SRC"
		n=$((n + 1))
	done < <(cd "$b" && find . -type f -printf '%P\n')
	echo "$n files in $b, all equal to SRC"
}

_log "one entry fails (a directory in DEST where SRC has a file), the rest is copied"
mkdir -p "$SRC/t1/sub"
for i in 1 2 3 4 5; do compressible $((i * 100000)) >"$SRC/t1/sub/f$i"; done
compressible 1000 >"$SRC/t1/clash"
mkdir -p "$DST/t1/clash"
run_mustfail "entry error" timeout 120 "$ENCIO" -q copy -r "$SRC/t1" "$DST"
echo "$ERR_OUT" | grep -q "$DST/t1/clash" || _fail "error does not name the entry"
[ "$(echo "$ERR_OUT" | grep -c ERROR)" = 1 ] || _fail "expected one error"
diff -r "$SRC/t1/sub" "$DST/t1/sub" || _fail "other files not copied"
check_partial "$SRC/t1" "$DST/t1"

_log "files removed while the copy runs"
mkdir -p "$SRC/t2"
python3 - "$SRC/t2" <<'PY'
import os, sys
line = b"encio test line: the quick brown fox jumps over the lazy dog 0123456789\n"
for d in range(20):
    os.makedirs(os.path.join(sys.argv[1], "d%02d" % d))
    for f in range(100):
        with open(os.path.join(sys.argv[1], "d%02d" % d, "f%03d" % f), "wb") as fh:
            fh.write(line * (1000 + f * 20) + os.urandom(4096))
PY
sync
echo 3 >/proc/sys/vm/drop_caches
timeout 120 "$ENCIO" -q copy -r -j 4 "$SRC/t2" "$DST/t2" 2>"$TEST_TMP/err" &
pid=$!
sleep 0.02
for d in 19 18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2; do
	rm -f "$SRC"/t2/d$(printf %02d $d)/f0[0-8]*
done
wait $pid
rc=$?
cat "$TEST_TMP/err" | head
[ $rc = 0 ] || [ $rc = 1 ] || _fail "exit status $rc"
[ $rc = 0 ] || grep -q "No such file" "$TEST_TMP/err" || _fail "failure without a vanished file"
check_partial "$SRC/t2" "$DST/t2" removed-ok
n=$(grep -c "No such file" "$TEST_TMP/err")
echo "$n files vanished during the copy, reported"

_log "files replaced by FIFOs while the copy runs: reported, never waited on"
mkdir -p "$SRC/t5"
for i in $(seq 0 1999); do echo "file $i" >"$SRC/t5/f$i"; done
sync
# Swaps all files for FIFOs and back, over and over: a file seen regular
# by readdir is often a FIFO when it is opened.
python3 - "$SRC/t5" <<'PY' &
import os, sys
d = sys.argv[1]
while True:
    for i in range(2000):
        p = os.path.join(d, "f%d" % i)
        os.mkfifo(p + ".x")
        os.rename(p + ".x", p)
    for i in range(2000):
        p = os.path.join(d, "f%d" % i)
        with open(p + ".y", "w") as fh:
            fh.write("file %d\n" % i)
        os.rename(p + ".y", p)
PY
swapper=$!
n=0
until [ -p "$SRC/t5/f1999" ]; do
	n=$((n + 1))
	[ $n -lt 1000 ] || { kill $swapper; _fail "the FIFO swapper did not start"; }
	sleep 0.01
done
# three copies: each meets a few swapped files, the three a dozen or more
rc=0
for i in 1 2 3; do
	timeout -k 5 60 "$ENCIO" -q copy -r -j 4 "$SRC/t5" "$DST/t5-$i" 2>>"$TEST_TMP/err" || rc=$?
	[ $rc = 0 ] || [ $rc = 1 ] || break
done
src=0
timeout -k 5 60 "$ENCIO" -q send -f "$TEST_TMP/t5.stream" "$SRC/t5" 2>"$TEST_TMP/err-send" || src=$?
kill $swapper
wait $swapper 2>/dev/null
head -3 "$TEST_TMP/err" "$TEST_TMP/err-send"
[ $rc = 0 ] || [ $rc = 1 ] || _fail "copy -r: exit status $rc (124: it waited on a FIFO)"
[ $src = 0 ] || [ $src = 1 ] || _fail "send: exit status $src (124: it waited on a FIFO)"
# the swapper's temporary names come and go too: vanished, not replaced;
# one met while the swapper still writes it has changed as it was read
why="replaced while read|No such file|file changed as we read it"
[ $rc = 0 ] || grep -qE "$why" "$TEST_TMP/err" || _fail "copy -r failed for another reason"
[ $src = 0 ] || grep -qE "$why" "$TEST_TMP/err-send" || _fail "send failed for another reason"
[ -z "$(grep ERROR "$TEST_TMP/err" | grep -vE "$why")" ] || _fail "copy -r: other errors"
[ -z "$(find "$DST" -name '.*.encio-*')" ] || _fail "temporaries left"
echo "copy -r: $(grep -c "replaced while read" "$TEST_TMP/err") files reported replaced, exit $rc; send: exit $src"

_log "ENOSPC midway stops cleanly"
mkdir -p "$SRC/t3"
for i in 0 1 2 3 4 5 6 7 8 9; do random_bytes 30000000 "enospc$i" >"$SRC/t3/r$i"; done
compressible 100000 >"$SRC/t3/small"
sync
run_mustfail "copy to a full filesystem" timeout 120 "$ENCIO" -q copy -r "$SRC/t3" "$SMALL/t3"
echo "$ERR_OUT" | grep -q "No space left on device" || _fail "ENOSPC not reported"
[ "$(echo "$ERR_OUT" | grep -c "No space")" -le 2 ] || _fail "ENOSPC reported for every file"
# the new tree stays in its staging directory: nothing under the final name
[ ! -e "$SMALL/t3" ] || _fail "$SMALL/t3 exists after ENOSPC"
echo "$ERR_OUT" | grep -q "kept in '$SMALL/.t3.encio-partial'" || _fail "staging directory not named"
[ -z "$(find "$SMALL/.t3.encio-partial" -mindepth 1 -name '.*.encio-*')" ] || _fail "temporaries left"
check_partial "$SRC/t3" "$SMALL/.t3.encio-partial"

_log "a directory copied into or onto itself: refused before anything is made"
mkdir -p "$SRC/t4/sub/deep"
compressible 5000 >"$SRC/t4/sub/f"
before=$(cd "$SRC/t4" && find . | sort)
run_mustfail "into itself" timeout 60 "$ENCIO" -q copy -r "$SRC/t4" "$SRC/t4/sub/deep"
echo "$ERR_OUT" | grep -q "cannot copy a directory into itself, as '$SRC/t4/sub/deep/t4'" || _fail "into itself not named"
run_mustfail "into itself, DEST named" timeout 60 "$ENCIO" -q copy -r "$SRC/t4/" "$SRC/t4/sub/new"
run_mustfail "onto itself" timeout 60 "$ENCIO" -q copy -r "$SRC/t4" "$SRC//"
echo "$ERR_OUT" | grep -q "cannot copy onto itself '$SRC/t4'" || _fail "onto itself not named"
run_mustfail "a file onto itself" timeout 60 "$ENCIO" -q copy -r "$SRC/t4/sub/f" "$SRC/t4/sub"
[ "$(cd "$SRC/t4" && find . | sort)" = "$before" ] || _fail "entries made: $(cd "$SRC/t4" && find . | sort)"
[ -z "$(find "$SRC" -name '*.encio-partial')" ] || _fail "staging directory made"
"$ENCIO" -q copy -r "$SRC/t4/sub" "$SRC/t4/sub2" || _fail "a sibling copy refused"
diff -r "$SRC/t4/sub" "$SRC/t4/sub2" || _fail "sibling copy differs"
exit 0
