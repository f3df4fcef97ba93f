#!/bin/bash
# encio receive --force-decompress decodes every encoded write of a
# 'btrfs send --compressed-data' stream (zlib, zstd, lzo, bookend extents)
# and gives the same content as the encoded receive; --io=uring and
# --io=ioctl write the same extents encoded. A destination that is not
# btrfs is refused before the stream is read.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"

make_btrfs src 256M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
V=$SRC/vol
for alg in zlib zstd lzo; do
	touch "$V/$alg"
	btrfs property set "$V/$alg" compression "$alg" || _fail "property $alg"
	compressible 1000000 >"$V/$alg"
done
# Bookend extents: overwrite the middle of compressed extents.
sync
random_bytes 4096 mid | dd of="$V/zstd" bs=4K seek=5 conv=notrunc status=none
random_bytes 8192 mid2 | dd of="$V/lzo" bs=4K seek=40 conv=notrunc status=none
compressible 3000 >"$V/inline"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"
S=$TEST_TMP/v2c
run_check btrfs -q send --proto 2 --compressed-data -f "$S" "$SRC/snap"
"$ENCIO" dump -f "$S" | grep -q 'unencoded_offset=[1-9]' || echo "(no bookend extent in the stream)"

make_btrfs dst 256M
DST=$MNT
for how in decode uring ioctl; do
	mkdir "$DST/$how"
	case $how in
	decode) cmd=("$ENCIO" receive --force-decompress) ;;
	*) cmd=("$ENCIO" "--io=$how" receive) ;;
	esac
	run_check "${cmd[@]}" -f "$S" "$DST/$how" 2>&1 | tee "$TEST_TMP/out"
	for f in zlib zstd lzo inline; do
		cmp "$SRC/snap/$f" "$DST/$how/snap/$f" || _fail "$how: $f differs"
	done
	if [ $how = decode ]; then
		grep -qE "extents 0 encoded, [1-9][0-9]* decoded" "$TEST_TMP/out" || _fail "not decoded"
		# The property came as an xattr: plain writes are compressed again.
		[ "$(btrfs property get "$DST/$how/snap/lzo" compression)" = compression=lzo ] ||
			_fail "compression property not received"
	else
		grep -qE "extents [1-9][0-9]* encoded, 0 decoded; io write $how" "$TEST_TMP/out" ||
			_fail "$how: not written encoded through $how"
		# Referenced bytes per compression equal the source's; disk usage is
		# larger: each part of a bookend extent arrives as a whole extent.
		diff <(compsize_bytes "$SRC/snap" | awk '{ print $1, $4 }') \
			<(compsize_bytes "$DST/$how/snap" | awk '{ print $1, $4 }') ||
			_fail "$how: compsize referenced bytes differ"
	fi
done

# No filesystem but btrfs holds a received subvolume: said before the
# stream is read, and nothing made there.
make_tmpfs notbtrfs 16M
run_mustfail "receive into tmpfs" "$ENCIO" receive -f "$S" "$MNT"
echo "$ERR_OUT" | grep -qF "not a btrfs filesystem" || _fail "no 'not a btrfs filesystem' error"
[ -z "$(ls -A "$MNT")" ] || _fail "receive made something on tmpfs"
exit 0
