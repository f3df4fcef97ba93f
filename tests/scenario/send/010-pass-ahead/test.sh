#!/bin/bash
# The kernel's pass made ahead (as copy -r --subvolumes makes the next
# subvolume's while it copies the current one) is read by the send it was
# made for when nothing it depends on changed: the stream is the one a
# send asking the kernel then writes. When the subvolume sent, its parent
# or a clone source changed in between (made writable, changed, read-only
# again), the send asks the kernel again, and the stream gives the
# subvolume as it is now.
source "$(dirname "$0")/../../../common.sh"
require_root
PASS_CHECK=$(dirname "$ENCIO")/tests/unit/pass-check
[ -x "$PASS_CHECK" ] || make -C "$(dirname "$ENCIO")" -s tests/unit/pass-check >/dev/null 2>&1 ||
	_not_run "needs tests/unit/pass-check (make check builds it)"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

# step N: changes in @d, then the read-only snapshot sN
step()
{
	local n=$1
	random_bytes $((100000 + n * 3000)) "new$n" >"$SRC/@d/new$n"
	compressible 200000 >>"$SRC/@d/text"
	[ -e "$SRC/@d/new$((n - 1))" ] && mv "$SRC/@d/new$((n - 1))" "$SRC/@d/moved$n"
	sync
	run_check btrfs -q subvolume snapshot -r "$SRC/@d" "$SRC/s$n"
}

# change SUBVOL: made writable, changed, made read-only again
change()
{
	run_check btrfs -q property set -f "$1" ro false
	echo "changed after the pass" >"$1/changed"
	compressible 50000 >>"$1/text"
	sync
	run_check btrfs -q property set "$1" ro true
}

# pass_send OUT CHANGED...: the pass of s3 from s2, clone sources s1 and
# s2; CHANGED changed after it is made; the send; REUSED the N of "reused N"
REUSED=
pass_send()
{
	local out=$1 word n s
	shift
	coproc PC { "$PASS_CHECK" "$SRC/s3" "$SRC/s2" "$out" "$SRC/s1" "$SRC/s2"; }
	read -r -u "${PC[0]}" word n || _fail "pass-check made no pass"
	[ "$word" = made ] && [ "$n" -gt 0 ] || _fail "pass-check: $word $n"
	for s in "$@"; do change "$SRC/$s"; done
	echo go >&"${PC[1]}"
	read -r -u "${PC[0]}" word n || _fail "pass-check did not send"
	wait "$PC_PID" || _fail "pass-check failed"
	[ "$word" = reused ] || _fail "pass-check: $word $n"
	REUSED=$n
}

# receive_chain DIR OUT: s1 and s2 sent now, then OUT, received into DIR;
# the copy of s3 compared with it
receive_chain()
{
	local dir=$1 out=$2
	mkdir "$dir"
	"$ENCIO" -q send "$SRC/s1" | "$ENCIO" -q receive "$dir" || _fail "s1 not received"
	"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | "$ENCIO" -q receive "$dir" || _fail "s2 not received"
	run_check "$ENCIO" -q receive -f "$out" "$dir"
	diff -r "$SRC/s3" "$dir/s3" || _fail "$out: s3 received differs"
	[ "$(tree_stat "$SRC/s3")" = "$(tree_stat "$dir/s3")" ] || _fail "$out: s3's metadata differs"
}

run_check btrfs -q subvolume create "$SRC/@d"
for n in 1 2 3; do step "$n"; done

_log "nothing changed: the pass is read, the stream is the kernel's now"
pass_send "$TEST_TMP/same"
[ "$REUSED" = 1 ] || _fail "the pass made ahead was not read"
"$ENCIO" -q send -p "$SRC/s2" -c "$SRC/s1" -c "$SRC/s2" "$SRC/s3" >"$TEST_TMP/now" ||
	_fail "send -p failed"
cmp "$TEST_TMP/same" "$TEST_TMP/now" || _fail "the stream from the pass differs from the kernel's now"
receive_chain "$DST/same" "$TEST_TMP/same"

_log "the subvolume sent changed after its pass: asked again"
pass_send "$TEST_TMP/root" s3
[ "$REUSED" = 0 ] || _fail "a pass of a changed subvolume was read"
receive_chain "$DST/root" "$TEST_TMP/root"
grep -q "changed after the pass" "$DST/root/s3/changed" || _fail "the change is not in the copy"

_log "the parent changed after the pass: asked again"
pass_send "$TEST_TMP/parent" s2
[ "$REUSED" = 0 ] || _fail "a pass from a changed parent was read"
receive_chain "$DST/parent" "$TEST_TMP/parent"

_log "a clone source changed after the pass: asked again"
pass_send "$TEST_TMP/clone" s1
[ "$REUSED" = 0 ] || _fail "a pass with a changed clone source was read"
receive_chain "$DST/clone" "$TEST_TMP/clone"

_log "a pass of a writable subvolume is refused"
run_mustfail "a pass of a writable subvolume" "$PASS_CHECK" "$SRC/@d" "$SRC/s3" "$TEST_TMP/writable" </dev/null
