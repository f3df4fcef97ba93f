#!/bin/bash
# copy -r of files that use compressed extents in parts (a reflinked file
# overwritten 4 KiB in the middle of each 128 KiB extent, as a database
# or an image written in place does): each extent is written once, whole,
# and every part is cloned from it, so DEST takes the room SRC takes;
# before, each part wrote the whole extent again. Data equal, every file
# with shared extents.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
mkdir "$SRC/t"
compressible 4194304 >"$SRC/t/a"
cp --reflink=always "$SRC/t/a" "$SRC/t/b"
sync
for i in $(seq 0 31); do
	random_bytes 4096 "o$i" | dd of="$SRC/t/a" bs=4096 seek=$((i * 32 + 16)) conv=notrunc status=none
done
# a third file using a part of one extent only, and one using two parts
# of the same extent at other offsets
touch "$SRC/t/c" "$SRC/t/d"
remap clone "$SRC/t/b" 8192 32768 "$SRC/t/c" 0
remap clone "$SRC/t/b" 0 8192 "$SRC/t/d" 0
remap clone "$SRC/t/b" 65536 16384 "$SRC/t/d" 8192
sync

make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -r "$SRC/t" "$DST/t"
sync
for f in a b c d; do
	cmp "$SRC/t/$f" "$DST/t/$f" || _fail "$f differs"
done
src=$(disk "$SRC/t") dst=$(disk "$DST/t")
_log "disk: SRC $src, DEST $dst"
within "$dst" "$src" || _fail "the copy takes $dst bytes on disk, SRC $src"
for f in a b c d; do
	[ "$(shared_extents "$DST/t/$f")" -gt 0 ] || _fail "$f shares nothing"
done
