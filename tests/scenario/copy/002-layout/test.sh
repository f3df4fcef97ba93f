#!/bin/bash
# Holes, prealloc and inline extents keep their layout through encio copy,
# and the extent list of DEST equals that of SRC.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M ""
DST=$MNT

# Holes at start, middle and end around compressed data.
truncate -s 4M "$SRC/holes"
compressible 262144 | dd of="$SRC/holes" bs=64K seek=8 conv=notrunc status=none
compressible 131072 | dd of="$SRC/holes" bs=64K seek=32 conv=notrunc status=none
# A file that is all hole.
truncate -s 1G "$SRC/empty-sparse"
# Prealloc inside and past EOF, next to data.
compressible 65536 >"$SRC/prealloc"
fallocate -o 1M -l 1M "$SRC/prealloc"
fallocate -n -o 4M -l 512K "$SRC/prealloc"
# Inline: compressed and (written where compression is off) plain.
compressible 300 >"$SRC/inline-zstd"
run_check mount -o remount,compress-force=zstd "$SRC"
btrfs property set "$SRC" compression none >/dev/null 2>&1
mkdir "$SRC/plain"
chattr +m "$SRC/plain" 2>/dev/null || true
head -c 1000 /etc/services >"$SRC/plain/inline-none"
# A bookend: a compressed extent partly overwritten, so a reference starts
# inside its extent (unencoded_offset != 0).
compressible 131072 >"$SRC/bookend"
sync
dd if=/dev/zero of="$SRC/bookend" bs=4K seek=10 count=1 conv=notrunc status=none
sync

mkdir "$DST/plain"
for f in holes empty-sparse prealloc inline-zstd plain/inline-none bookend; do
	run_check "$ENCIO" -q copy "$SRC/$f" "$DST/$f"
	check_same_file "$SRC/$f" "$DST/$f"
	a=$("$ENCIO" list "$SRC/$f" | awk 'NF==5 && $1 ~ /^[0-9]+$/ {print $1, $2, $4, $5}')
	b=$("$ENCIO" list "$DST/$f" | awk 'NF==5 && $1 ~ /^[0-9]+$/ {print $1, $2, $4, $5}')
	echo "$a"
	[ -n "$a" ] || _fail "$f: empty extent list"
	[ "$a" = "$b" ] || _fail "$f: extent layout differs: '$a' vs '$b'"
	# Each reference to a partly overwritten extent is written as its own
	# extent (documented in encio-copy.8), so a bookend may use more disk.
	[ "$f" = bookend ] && continue
	[ "$(du -k "$SRC/$f" | cut -f1)" = "$(du -k "$DST/$f" | cut -f1)" ] ||
		_fail "$f: disk usage differs"
done
"$ENCIO" list "$DST/holes" | grep -q ' hole$' || _fail "holes lost"
"$ENCIO" list "$DST/prealloc" | grep -q ' prealloc$' || _fail "prealloc lost"
"$ENCIO" list "$DST/inline-zstd" | grep -q 'zstd *inline$' || _fail "compressed inline lost"
"$ENCIO" list "$SRC/bookend" | awk '$4 == "zstd"' | grep -q . || _fail "bookend source has no zstd extent"
exit 0
