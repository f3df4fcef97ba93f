#!/bin/bash
# copy -r of a read-only snapshot makes its small files from their inode
# and inline extent items: each ends with its own flags, not its
# directory's (a root made nocow after the file was written), and keeps
# its own (noatime).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs src 256M compress=zstd
SRC=$MNT
make_btrfs dst 256M
DST=$MNT

run_check btrfs -q subvolume create "$SRC/v"
random_bytes 1918 k >"$SRC/v/plain"
compressible 981 >"$SRC/v/noatime"
chattr +A "$SRC/v/noatime"
sync
chattr +C "$SRC/v"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s"
run_check "$ENCIO" -q copy -r "$SRC/s" "$DST/s"
for f in plain noatime; do
	cmp "$SRC/s/$f" "$DST/s/$f" || _fail "$f differs"
	want=$(lsattr -d "$SRC/s/$f" | cut -d' ' -f1 | tr -cd 'CcA')
	got=$(lsattr -d "$DST/s/$f" | cut -d' ' -f1 | tr -cd 'CcA')
	[ "$want" = "$got" ] || _fail "$f: flags '$got', the source's '$want'"
done
[ -n "$(lsattr -d "$DST/s" | cut -d' ' -f1 | tr -cd 'C')" ] || _fail "the root lost its nocow"
