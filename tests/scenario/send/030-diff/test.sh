#!/bin/bash
# encio diff PARENT CHILD: the changes between two read-only snapshots,
# each with its type and what changed, in text (-v: the data ranges and
# the xattrs' names), -0
# (CHILD's paths for restic --files-from-raw) and JSON; the difference is
# the kernel's (btrfs send --no-data -p) both ways, and on a pair that btrfs
# receive made (a parent written after its snapshot was taken); --kernel
# (the kernel's difference) and a run during a balance give the same. Refused:
# writable subvolumes, subvolumes that are not snapshots of one, paths that
# are no subvolume's root, a wrong number of arguments.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
mkdir -p "$V/d/sub" "$V/e"
compressible 300000 >"$V/f1"
echo two >"$V/f2"
echo three >"$V/f3"
echo kept >"$V/d/sub/k"
ln -s f1 "$V/link"
mkfifo "$V/fifo"
echo hard >"$V/h"
ln "$V/h" "$V/h2"
setfattr -n user.a -v 1 "$V/f1"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s0"

compressible 5000 >>"$V/f1"
mv "$V/f2" "$V/f2b"
rm "$V/f3"
echo new >"$V/d/f4"
mv "$V/d/sub" "$V/e/sub"
chmod 600 "$V/e/sub/k"
chown -h 1234:5678 "$V/link"
setfattr -n user.b -v 2 "$V/f1"
ln "$V/h" "$V/h3"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
S0=$SRC/s0 S1=$SRC/s1

out=$("$ENCIO" diff "$S0" "$S1") || _fail "encio diff failed"
# (times where a clock tick passed since the snapshot before: it may not)
for want in "R	F	$S0/f2 -> $S1/f2b" "-	F	$S0/f3" "\+	F	$S1/d/f4	data" \
	"R	/	$S0/d/sub -> $S1/e/sub" "\+	F	$S1/h3" "M	F	$S1/f1	data,size(,times)?,xattrs" \
	"M	@	$S1/link	owner(,times)?" "M	F	$S1/e/sub/k	mode(,times)?" "M	F	$S1/h	(times,)?links"; do
	grep -qxE -e "$want" <<<"$out" || _fail "no line '$want' in: $out"
done
grep -q "fifo" <<<"$out" && _fail "the unchanged fifo is listed: $out"

out=$("$ENCIO" diff -v "$S0" "$S1") || _fail "encio diff -v failed"
grep -qE "^M	F	$S1/f1	data( [0-9]+\+[0-9]+)+,size(,times)?,xattrs user.b$" <<<"$out" ||
	_fail "f1's changes: $(grep "/f1" <<<"$out")"
grep -qxE "M	@	$S1/link	owner(,times)?" <<<"$out" || _fail "link's changes: $(grep link <<<"$out")"
grep -qxE "M	F	$S1/h	(times,)?links" <<<"$out" || _fail "h's changes: $(grep "/h" <<<"$out")"

# -0: CHILD's paths of what came or changed, no directory, no removal
"$ENCIO" diff -0 "$S0" "$S1" | tr '\0' '\n' | sort >"$TEST_TMP/list" || _fail "diff -0 failed"
printf '%s\n' "$S1/d/f4" "$S1/e/sub/k" "$S1/f1" "$S1/f2b" "$S1/h" "$S1/h3" "$S1/link" | sort >"$TEST_TMP/want"
diff -u "$TEST_TMP/want" "$TEST_TMP/list" || _fail "diff -0 lists other paths"

out=$("$ENCIO" diff --format=json "$S0" "$S1") || _fail "encio diff --format=json failed"
python3 - "$out" <<'PY' || _fail "bad JSON: $out"
import json, sys
j = json.loads(sys.argv[1])
e = {(x["change"], x["path"]): x for x in j["entries"]}
assert e[("R", "f2b")]["old_path"] == "f2", e
assert "user.b" in e[("M", "f1")]["xattrs"], e
assert e[("M", "f1")]["data"], e
PY

# the kernel's difference, both ways
for pair in "$S0 $S1" "$S1 $S0"; do
	# shellcheck disable=SC2086
	run_check python3 "$TOP_SRCDIR/tests/random/difftest.py" diff-compare "$ENCIO" $pair
done

# the kernel's difference (what a balance during the run falls back to)
# gives the same lines
"$ENCIO" diff -v "$S0" "$S1" >"$TEST_TMP/searched" 2>/dev/null || _fail "diff -v failed"
"$ENCIO" diff -v --kernel "$S0" "$S1" >"$TEST_TMP/kernel" 2>"$TEST_TMP/kernel.err" || _fail "diff --kernel failed"
diff -u "$TEST_TMP/searched" "$TEST_TMP/kernel" || _fail "diff --kernel differs"
grep -q "from the kernel's difference" "$TEST_TMP/kernel.err" || _fail "-v said: $(cat "$TEST_TMP/kernel.err")"

# a balance during the run: the same lines, taken from the kernel's
# difference where it moved the trees
for i in 1 2 3; do
	btrfs balance start --full-balance "$SRC" >/dev/null 2>&1 &
	bal=$!
	"$ENCIO" diff -v "$S0" "$S1" >"$TEST_TMP/bal" 2>"$TEST_TMP/bal.err" || _fail "diff during a balance failed: $(cat "$TEST_TMP/bal.err")"
	wait $bal
	diff -u "$TEST_TMP/searched" "$TEST_TMP/bal" || _fail "diff during a balance differs"
	cat "$TEST_TMP/bal.err"
done

# a pair btrfs receive made: the child a snapshot of the received parent
btrfs -q send "$S0" 2>/dev/null | btrfs -q receive "$DST" || _fail "btrfs receive of s0"
btrfs -q send -p "$S0" "$S1" 2>/dev/null | btrfs -q receive "$DST" || _fail "btrfs receive of s1"
run_check python3 "$TOP_SRCDIR/tests/random/difftest.py" diff-compare "$ENCIO" "$DST/s0" "$DST/s1"

# refusals
run_mustfail "a writable subvolume" "$ENCIO" diff "$S0" "$V"
grep -q "must be read-only snapshots" <<<"$ERR_OUT" || _fail "writable: $ERR_OUT"
run_check btrfs -q subvolume create "$SRC/other"
run_check btrfs -q property set "$SRC/other" ro true
run_mustfail "unrelated subvolumes" "$ENCIO" diff "$S0" "$SRC/other"
grep -q "are not snapshots of one subvolume" <<<"$ERR_OUT" || _fail "unrelated: $ERR_OUT"
run_mustfail "a directory in a snapshot" "$ENCIO" diff "$S0" "$S1/d"
grep -q "must be subvolumes of one btrfs filesystem" <<<"$ERR_OUT" || _fail "not a root: $ERR_OUT"
"$ENCIO" diff "$S0" >/dev/null 2>&1
[ $? -eq 2 ] || _fail "one argument: not exit 2"
_log "ok"
