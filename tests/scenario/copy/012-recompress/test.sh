#!/bin/bash
# encio copy from a compress-force=zlib btrfs: --compress keeps compressed
# extents as they are (zlib) and compresses the plain ones; --recompress=zstd
# decodes the zlib extents and encodes them with zstd.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize (btrfs-compsize)"

# The extent types of a file, sorted: "none zstd".
types()
{
	compsize_bytes "$1" | awk '$1 != "TOTAL" { print $1 }' | sort | xargs
}

make_btrfs src 1G compress-force=zlib
SRC=$MNT
make_btrfs plain 1G ""
PSRC=$MNT
make_btrfs dst 1G ""
DST=$MNT

mkdir "$SRC/z"
for s in 1 4097 131073 5000000; do
	compressible "$s" >"$SRC/z/text-$s"
done
sync
compsize_bytes "$SRC/z/text-5000000" | grep -q "^zlib " || _fail "no zlib extents in source"
compressible 3000000 >"$PSRC/text"
sync
[ "$(types "$PSRC/text")" = none ] || _fail "source $PSRC/text not plain"

_log "--compress keeps zlib extents, compresses plain ones"
run_check "$ENCIO" copy -r --compress=zstd "$SRC/z" "$PSRC" "$DST/"
diff -r "$SRC/z" "$DST/z" && cmp "$PSRC/text" "$DST/plain/text" || _fail "copy differs"
[ "$(types "$DST/z/text-5000000")" = zlib ] ||
	_fail "zlib extents not kept: $(compsize_bytes "$DST/z/text-5000000")"
[ "$(types "$DST/plain/text")" = zstd ] ||
	_fail "plain btrfs extents not compressed: $(compsize_bytes "$DST/plain/text")"

_log "--recompress=zstd:15"
sum=$("$ENCIO" copy -r --recompress=zstd:15 "$SRC/z" "$DST/re")
echo "$sum"
diff -r "$SRC/z" "$DST/re" || _fail "recompressed copy differs"
echo "$sum" | grep -qE "[1-9][0-9]* extents recompressed" || _fail "nothing recompressed"
# text-131073 ends with a 1-byte chunk: no sector to save, written plain.
for s in 4097 131073 5000000; do
	want=zstd
	[ $s = 131073 ] && want="none zstd"
	[ "$(types "$DST/re/text-$s")" = "$want" ] ||
		_fail "text-$s not zstd: $(compsize_bytes "$DST/re/text-$s")"
done

_log "--recompress, single file, verified"
run_check "$ENCIO" copy --verify --recompress=lzo "$SRC/z/text-5000000" "$DST/one"
cmp "$SRC/z/text-5000000" "$DST/one" || _fail "single file differs"
[ "$(types "$DST/one")" = lzo ] || _fail "not lzo: $(compsize_bytes "$DST/one")"
exit 0
