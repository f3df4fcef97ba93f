#!/bin/bash
# A destination directory with the nocow flag (chattr +C) passes it on to
# the unnamed files encio makes there to try encoded writes and to hold
# the extents files use in parts: a nocow file refuses encoded writes
# (EINVAL). Judged by such a file, a copy or a receive into that directory
# found encoded writes impossible and wrote every compressed extent
# decoded, then plain (random seed 168: copy --subvolumes of a snapshot
# whose root is nocow took 6% more room than SRC). The files the copy makes
# lose the inherited flag where SRC's have none: so does the probe's.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
command -v chattr >/dev/null || _not_run "needs chattr (e2fsprogs)"

make_btrfs src 256M compress=zstd
SRC=$MNT
make_btrfs dst 256M
DST=$MNT

# encoded OUT: the summary in OUT wrote its extents encoded, none decoded
encoded()
{
	grep -q "encoded writes impossible" "$1" && _fail "$2: $(grep -m1 'encoded writes impossible' "$1")"
	grep -q "extents [1-9][0-9]* encoded, 0 decoded" "$1" ||
		_fail "$2 decoded: $(grep extents "$1")"
}

run_check btrfs -q subvolume create "$SRC/sv"
mkdir "$SRC/sv/dir"
compressible 2M >"$SRC/sv/text"
compressible 1M >"$SRC/sv/dir/more"
# the root nocow after its files: they stay compressed
chattr +C "$SRC/sv"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/sv.1"
compressible 3M >"$SRC/sv/dir/new"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/sv.2"
sync -f "$SRC"

mkdir "$DST/nocow"
chattr +C "$DST/nocow"
"$ENCIO" copy "$SRC/sv/text" "$DST/nocow/text" >"$TEST_TMP/out" 2>&1 ||
	_fail "copy: $(cat "$TEST_TMP/out")"
encoded "$TEST_TMP/out" "copy into a nocow directory"
"$ENCIO" copy -r "$SRC/sv.1" "$DST/nocow/tree" >"$TEST_TMP/out" 2>&1 ||
	_fail "copy -r: $(cat "$TEST_TMP/out")"
encoded "$TEST_TMP/out" "copy -r into a nocow directory"
check_same_file "$SRC/sv/text" "$DST/nocow/text"
sync -f "$DST"
within "$(disk "$DST/nocow/text")" "$(disk "$SRC/sv/text")" ||
	_fail "the copy takes $(disk "$DST/nocow/text") bytes, SRC $(disk "$SRC/sv/text")"

# an incremental receive: its snapshot of sv.1's copy has a nocow root
mkdir "$DST/recv"
"$ENCIO" -q send "$SRC/sv.1" | "$ENCIO" -q receive "$DST/recv" || _fail "receive sv.1"
"$ENCIO" -q send -p "$SRC/sv.1" "$SRC/sv.2" | "$ENCIO" receive "$DST/recv" \
	>"$TEST_TMP/out" 2>&1 || _fail "receive sv.2: $(cat "$TEST_TMP/out")"
encoded "$TEST_TMP/out" "receive onto a nocow root"
diff -r "$SRC/sv.2" "$DST/recv/sv.2" || _fail "sv.2 received differs"

# copy --subvolumes: sv.1 whole, sv.2 as its difference, sv
make_btrfs moved 256M
MOVED=$MNT
"$ENCIO" copy -rT --subvolumes "$SRC" "$MOVED" >"$TEST_TMP/out" 2>&1 ||
	_fail "copy --subvolumes: $(cat "$TEST_TMP/out")"
grep -q "encoded writes impossible" "$TEST_TMP/out" && _fail "copy --subvolumes: $(head -1 "$TEST_TMP/out")"
sync -f "$MOVED"
src_du=$(disk "$SRC/sv" "$SRC/sv.1" "$SRC/sv.2")
dst_du=$(disk "$MOVED/sv" "$MOVED/sv.1" "$MOVED/sv.2")
within "$dst_du" "$src_du" || _fail "copy --subvolumes takes $dst_du bytes, SRC $src_du"
echo "PASS: $TEST_NAME"
