#!/bin/bash
# encio copy fails loudly and safely: ENOSPC, read-only destination, missing
# source, a directory without -r, copy onto itself, a FIFO. Exit 1, the
# error names the file, and nothing is left under DEST's name or as a
# temporary. Files of procfs and sysfs are copied as they read.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs small 120M ""
SMALL=$MNT

random_bytes 300000000 enospc >"$SRC/big-random"
compressible 1000000 >"$SRC/text"
mkdir "$SRC/dir"
sync

_log "ENOSPC"
run_mustfail "copy to a full filesystem" "$ENCIO" copy "$SRC/big-random" "$SMALL/dest"
echo "$ERR_OUT" | grep -q "No space left on device" || _fail "ENOSPC not reported"
echo "$ERR_OUT" | grep -q "$SMALL/dest" || _fail "error does not name the destination"
[ ! -e "$SMALL/dest" ] || _fail "a file was left under DEST's name"
[ -z "$(ls -A "$SMALL")" ] || _fail "temporary file left: $(ls -A "$SMALL")"

_log "read-only destination"
run_check mount -o remount,ro "$SMALL"
run_mustfail "copy to a read-only filesystem" "$ENCIO" copy "$SRC/text" "$SMALL/text"
echo "$ERR_OUT" | grep -q "Read-only file system" || _fail "EROFS not reported"
run_check mount -o remount,rw "$SMALL"

_log "missing source"
run_mustfail "missing source" "$ENCIO" copy "$SRC/nonexistent" "$SMALL/"
echo "$ERR_OUT" | grep -q "$SRC/nonexistent.*No such file" || _fail "ENOENT not reported with the path"

_log "directory without -r"
run_mustfail "directory" "$ENCIO" copy "$SRC/dir" "$SMALL/"
echo "$ERR_OUT" | grep -q "is a directory" || _fail "directory not reported"

_log "onto itself"
run_mustfail "copy onto itself" "$ENCIO" copy "$SRC/text" "$SRC/text"
cmp "$SRC/text" <(compressible 1000000) || _fail "source damaged by copy onto itself"

_log "a FIFO: refused at once, not waited on for a writer"
mkfifo "$SRC/fifo"
run_mustfail "copy a FIFO" timeout 20 "$ENCIO" copy "$SRC/fifo" "$SMALL/fifo"
echo "$ERR_OUT" | grep -q "cannot copy (not a regular file) '$SRC/fifo'" || _fail "FIFO not refused"
[ -z "$(ls -A "$SMALL")" ] || _fail "files left behind: $(ls -A "$SMALL")"
rm "$SRC/fifo"

_log "files of procfs and sysfs (size 0, content made up when read) are copied as read"
run_check "$ENCIO" -q copy /proc/version "$SRC/version"
cmp /proc/version "$SRC/version" || _fail "/proc/version copied as $(stat -c %s "$SRC/version") bytes"
thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -e "$thp" ]; then
	run_check "$ENCIO" -q copy "$thp" "$SRC/thp"
	cmp "$thp" "$SRC/thp" || _fail "$thp not copied as read"
fi
run_check "$ENCIO" -q copy -r /proc/sys/kernel/random "$SRC/"
for f in poolsize boot_id; do
	cmp "/proc/sys/kernel/random/$f" "$SRC/random/$f" || _fail "random/$f not copied as read"
done
rm -rf "$SRC/version" "$SRC/thp" "$SRC/random"

_log "usage errors exit 2"
"$ENCIO" copy "$SRC/text" >/dev/null 2>&1
[ $? = 2 ] || _fail "missing DEST is not a usage error"
"$ENCIO" --io=bogus copy "$SRC/text" "$SMALL/" >/dev/null 2>&1
[ $? = 2 ] || _fail "unknown --io is not a usage error"
[ -z "$(ls -A "$SMALL")" ] || _fail "files left behind: $(ls -A "$SMALL")"
exit 0
