#!/bin/bash
# encio copy of files of every awkward size, for each compression algorithm
# and each I/O mode: content, metadata and encoded bytes must match SRC.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize (btrfs-compsize)"

SIZES="0 1 4095 4096 131071 131072 131073"
make_btrfs src 1G compress-force=zstd
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT

# One directory per algorithm, written under its own compress-force.
for alg in zlib lzo zstd; do
	run_check mount -o remount,compress-force=$alg "$SRC"
	mkdir "$SRC/$alg"
	for s in $SIZES; do
		compressible "$s" >"$SRC/$alg/text-$s"
	done
	for i in 0 1 2 3 4; do
		compressible 1048576
		random_bytes 1048576 "$alg$i"
	done >"$SRC/$alg/mixed-10M"
	chmod 0640 "$SRC/$alg/mixed-10M"
	chown 1234:5678 "$SRC/$alg/text-131073"
	touch -d '2001-02-03 04:05:06.789' "$SRC/$alg/text-4095"
	sync
	# The source must really hold this algorithm, or the test proves nothing.
	compsize_bytes "$SRC/$alg" | grep -q "^$alg " || _fail "no $alg extents in source"
done

for mode in ioctl uring uring-fixed auto; do
	for alg in zlib lzo zstd; do
		out=$DST/$mode-$alg
		mkdir "$out"
		for f in "$SRC/$alg"/*; do
			run_check "$ENCIO" -q --io=$mode copy "$f" "$out/"
			check_same_file "$f" "$out/$(basename "$f")"
			a=$(compsize_bytes "$f")
			b=$(compsize_bytes "$out/$(basename "$f")")
			# A 1-byte lzo inline extent is larger encoded than plain:
			# the kernel refuses such an encoded write, so it is decoded.
			[ "$alg-$(basename "$f")" = lzo-text-1 ] && b=$a
			[ "$a" = "$b" ] || _fail "$mode $alg $(basename "$f"): compsize differs: '$a' vs '$b'"
		done
		# No temporary files left behind.
		[ -z "$(ls -A "$out" | grep '^\.')" ] || _fail "temporary left in $out"
	done
done

# The summary names the backends and counts encoded extents.
sum=$("$ENCIO" copy "$SRC/zstd/mixed-10M" "$DST/summary-check")
echo "$sum"
echo "$sum" | grep -q "io read ioctl, write ioctl" || _fail "auto did not read ioctl / write ioctl from a writable source"
btrfs subvolume snapshot -r "$SRC" "$SRC/ro" >/dev/null || _fail "snapshot"
sum=$("$ENCIO" copy "$SRC/ro/zstd/mixed-10M" "$DST/summary-check-ro")
echo "$sum"
echo "$sum" | grep -q "io read uring-fixed, write ioctl" || _fail "auto did not read uring-fixed / write ioctl from a read-only snapshot"
echo "$sum" | grep -q "fixed buffers: ignored by this kernel" || _fail "fixed-buffer probe result missing"
echo "$sum" | grep -qE "extents [1-9][0-9]* encoded" || _fail "no extent copied encoded"
json=$("$ENCIO" copy --format=json "$SRC/zstd/mixed-10M" "$DST/summary-json")
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 1 and d["extents_encoded"] > 0, d' ||
	_fail "bad JSON summary"
exit 0
