#!/bin/bash
# Two sources that would land on the same name in the destination directory
# are refused before anything is made, naming both: copy and copy -r, files
# and directories; sources of distinct names are copied.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M ""
SRC=$MNT
make_btrfs dst 256M ""
DST=$MNT
mkdir -p "$SRC/a" "$SRC/b" "$SRC/x/foo/sub" "$SRC/y/foo" "$SRC/y/bar" "$DST/out"
echo a >"$SRC/a/f"
echo b >"$SRC/b/f"
echo x >"$SRC/x/foo/sub/xf"
echo y >"$SRC/y/foo/yf"
echo bar >"$SRC/y/bar/bf"

# refused A B ARGS...: encio copy ARGS exits 1 naming the sources A and B,
# and $DST/out stays empty.
refused()
{
	local a=$1 b=$2
	shift 2
	run_mustfail "same name" "$ENCIO" -q copy "$@"
	grep -q "will not copy both '$a' and '$b' to '$DST/out/" <<<"$ERR_OUT" ||
		_fail "the message does not name both sources: $ERR_OUT"
	[ -z "$(ls -A "$DST/out")" ] || _fail "made: $(ls -A "$DST/out")"
}

# The options after the sources: copy's operands are SRC... DEST.
_log "files of the same name"
refused "$SRC/a/f" "$SRC/b/f" "$SRC/a/f" "$SRC/b/f" "$DST/out/"
refused "$SRC/a/f" "$SRC/b/f" "$SRC/a/f" "$SRC/b/f" "$DST/out" -r
_log "directories of the same name"
refused "$SRC/x/foo" "$SRC/y/foo" "$SRC/x/foo" "$SRC/y/foo" "$DST/out" -r
refused "$SRC/x/foo/" "$SRC/y/foo" "$SRC/x/foo/" "$SRC/y/foo" "$DST/out" -r
_log "one name among others"
refused "$SRC/x/foo" "$SRC/y/foo" "$SRC/y/bar" "$SRC/x/foo" "$SRC/y/foo" "$DST/out" -r

_log "distinct names are copied"
run_check "$ENCIO" -q copy -r "$SRC/x/foo" "$SRC/y/bar" "$DST/out"
cmp "$SRC/x/foo/sub/xf" "$DST/out/foo/sub/xf" || _fail "foo differs"
cmp "$SRC/y/bar/bf" "$DST/out/bar/bf" || _fail "bar differs"
echo "PASS: $TEST_NAME"
