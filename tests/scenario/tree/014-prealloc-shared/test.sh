#!/bin/bash
# copy -r keeps a preallocated range shared by reflinks shared: the copy
# of a file reflinked from a preallocated one clones its prealloc range
# from the first copy instead of preallocating it again, and both stay
# unwritten (prealloc) in DEST.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 512M
SRC=$MNT
mkdir "$SRC/t"
run_check fallocate -l 8M "$SRC/t/pa"
cp --reflink=always "$SRC/t/pa" "$SRC/t/pb"
# a prealloc range inside data, shared too
random_bytes 1048576 d >"$SRC/t/mixed"
run_check fallocate -o 1048576 -l 4M "$SRC/t/mixed"
random_bytes 65536 e >>"$SRC/t/mixed"
cp --reflink=always "$SRC/t/mixed" "$SRC/t/mixed2"
sync

make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -r "$SRC/t" "$DST/t"
sync
for f in pa pb mixed mixed2; do
	cmp "$SRC/t/$f" "$DST/t/$f" || _fail "$f differs"
done
src=$(disk "$SRC/t") dst=$(disk "$DST/t")
_log "disk: SRC $src, DEST $dst"
within "$dst" "$src" || _fail "the copy takes $dst bytes on disk, SRC $src"
filefrag -v "$DST/t/pb" | grep -q "unwritten,shared" || _fail "pb's prealloc range is not shared"
[ "$(compsize_bytes "$DST/t" | awk '$1 == "prealloc" { print $2 }')" = 12582912 ] ||
	_fail "prealloc on disk: $(compsize_bytes "$DST/t")"
