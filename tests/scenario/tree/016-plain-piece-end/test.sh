#!/bin/bash
# copy -r writes a plain range it does not clone up to its end, and no
# further: a file whose plain extent other files share in parts, copied
# after them, clones those parts and writes the rest, and the copy takes
# no more room on disk than its source. An encoded read returns data up to
# the extent's end, past the range asked for; written whole, the parts
# cloned over it afterwards stayed allocated and unused in DEST.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 512M
SRC=$MNT
mkdir "$SRC/t" "$SRC/t/y"
# y/b and y/c come first in the copy (a subdirectory before the files
# beside it); a holds the extent they share
random_bytes 65536 b >"$SRC/t/y/b"
random_bytes 16384 c >"$SRC/t/y/c"
random_bytes 229376 a >"$SRC/t/a"
sync
random_bytes 200000 d >>"$SRC/t/a"
sync
# b shares a's [0, 48K) and [180K, 224K); c shares a's [96K, 132K)
python3 - "$SRC/t/a" "$SRC/t/y/b" "$SRC/t/y/c" <<'PY' || _fail "clone ranges"
import fcntl, os, struct, sys
FICLONERANGE = 0x4020940d
a = os.open(sys.argv[1], os.O_RDONLY)
def clone(dst, src_off, length, dst_off):
    fd = os.open(dst, os.O_WRONLY)
    fcntl.ioctl(fd, FICLONERANGE, struct.pack("qQQQ", a, src_off, length, dst_off))
    os.close(fd)
clone(sys.argv[2], 0, 49152, 0)
clone(sys.argv[2], 184320, 45056, 184320)
clone(sys.argv[3], 98304, 36864, 16384)
PY
sync
filefrag -v "$SRC/t/a" | grep -q shared || _fail "a shares nothing in SRC"

make_btrfs dst 512M
DST=$MNT
run_check "$ENCIO" -q copy -r "$SRC/t" "$DST/t"
sync
for f in y/b y/c a; do
	cmp "$SRC/t/$f" "$DST/t/$f" || _fail "$f differs"
done
src=$(disk "$SRC/t") dst=$(disk "$DST/t")
_log "disk: SRC $src, DEST $dst"
[ "$dst" -le "$src" ] || _fail "the copy takes $dst bytes on disk, SRC $src"
