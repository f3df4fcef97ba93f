#!/bin/bash
# A FILEATTR that keeps compress (c) on a file whose btrfs.compression
# property is lzo leaves the property lzo on a DEST mounted without
# compress=. Where compressing did not pay, btrfs marks the copy nocompress
# by itself (here while receive -s takes a checkpoint in the middle of a
# difference that writes the file), which hides c from
# FS_IOC_GETFLAGS; encio receive set c back through FS_IOC_SETFLAGS, and
# that gave the copy the mount's default, zlib. The random tester's seed
# 267 found it (the source history and method h, receive -s with
# checkpoints every 64 KiB); its history is replayed here.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
for t in python3 setfacl setfattr chattr fallocate unshare; do
	command -v $t >/dev/null || _not_run "needs $t"
done

"$TOP_SRCDIR/tests/random/difftest.py" --encio "$ENCIO" --seed 267 --methods d,h
rc=$?
[ $rc -eq 0 ] || _fail "seed 267 (method h): the copy's properties differ from the source's"
