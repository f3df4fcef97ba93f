#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# encio's decoders against the kernel's: for each compress-force algorithm
# and a few levels, write a mix of files on a loopback btrfs, read every
# extent encoded and check that codec_decode() gives what the kernel gives.

source "$(dirname "$0")/../../../common.sh"

CHECK=$TOP_BUILDDIR/tests/unit/codec-kernel-check

require_root
command -v openssl >/dev/null || _not_run "needs openssl (random_bytes)"
[ -x "$CHECK" ] || _fail "$CHECK not built (make check builds it)"

# Text that compresses, but less than one repeated line does.
licence_text()
{
	local i
	for i in $(seq 1 40); do
		sed "s/^/$i: /" "$TOP_SRCDIR/COPYING"
	done | head -c "$1"
}

write_files()
{
	local d=$1 i

	compressible 1048576 >"$d/text"
	licence_text 524288 >"$d/licence"
	# Every 128 KiB extent half random, half text.
	for i in $(seq 0 7); do
		random_bytes 65536 "mixed$i"
		licence_text 65536
	done >"$d/mixed"
	compressible 1 >"$d/one"
	compressible 4095 >"$d/f4095"
	compressible 131073 >"$d/f131073"
	compressible 10485760 >"$d/big"
	# Bookends: extents partly overwritten, read from an inner offset.
	licence_text 524288 >"$d/bookend"
	sync
	for i in 100 300 301; do
		random_bytes 4096 "bookend$i" |
			dd of="$d/bookend" bs=4096 seek=$((i / 4)) conv=notrunc status=none
	done
	# A hole between compressed extents.
	compressible 200000 >"$d/sparse"
	compressible 200000 | dd of="$d/sparse" bs=1M seek=5 status=none
	sync
}

# check_alg OPTION: fails unless the checker is happy and saw extents of
# the option's algorithm (and only of it).
check_alg()
{
	local opt=$1 alg=${1%%:*} out rc counts zlib zstd lzo n

	_log "compress-force=$opt"
	make_btrfs "codec-${opt/:/-}" 512M "compress-force=$opt"
	write_files "$MNT"
	echo "+ $CHECK $MNT/*"
	out=$("$CHECK" "$MNT"/*)
	rc=$?
	echo "$out"
	[ $rc -eq 0 ] || _fail "compress-force=$opt: codec-kernel-check exit $rc"
	counts=$(sed -n 's/.* (zlib \([0-9]*\), zstd \([0-9]*\), lzo \([0-9]*\)).*/\1 \2 \3/p' <<<"$out")
	read -r zlib zstd lzo <<<"$counts"
	[ -n "$lzo" ] || _fail "compress-force=$opt: no summary line"
	n=${!alg}
	[ "$n" -ge 50 ] || _fail "compress-force=$opt: only $n $alg extents checked"
	[ $((zlib + zstd + lzo)) -eq "$n" ] ||
		_fail "compress-force=$opt: extents of another algorithm: $counts"
}

for opt in zlib zlib:1 zlib:9 lzo zstd zstd:1 zstd:15; do
	check_alg "$opt"
done
echo "PASS: $TEST_NAME"
