// SPDX-License-Identifier: GPL-2.0
/*
 * Encoded payload checks: headers and lengths only, never a decode.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "base/kernel.h"
#include "base/le_bytes.h"
#include "codec/payload.h"

/* fs/btrfs/lzo.c: the size of the total and segment length headers. */
#define LZO_LEN 4
/* lzo1x_worst_compress(): the largest segment a sector compresses to. */
#define LZO_WORST(sector) ((sector) + (sector) / 16 + 64 + 3)

static int invalid(const char **why, const char *what)
{
	*why = what;
	return -EINVAL;
}

/*
 * The frame's blocks, by their 3-byte headers alone (RFC 8878 3.1.1.2):
 * each within the payload and the block size limit, up to the last one
 * and the checksum after it. This is what tells a frame cut short.
 */
static int check_zstd_blocks(const unsigned char *data, size_t len,
			     const ZSTD_frameHeader *fh, const char **why)
{
	size_t pos = fh->headerSize, size;
	uint32_t header;
	bool last;

	do {
		if (len - pos < 3)
			return invalid(why, "zstd: frame truncated");
		header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16;
		pos += 3;
		last = header & 1;
		size = header >> 3;
		if ((header >> 1 & 3) == 3)
			return invalid(why, "zstd: reserved block type");
		if (size > fh->blockSizeMax)
			return invalid(why, "zstd: block larger than allowed");
		/* An RLE block holds one byte, repeated size times. */
		if ((header >> 1 & 3) == 1)
			size = 1;
		if (len - pos < size)
			return invalid(why, "zstd: frame truncated");
		pos += size;
	} while (!last);
	if (fh->checksumFlag && len - pos < 4)
		return invalid(why, "zstd: frame truncated");
	return 0;
}

static int check_zstd(const unsigned char *data, size_t len,
		      uint64_t unencoded_len, const char **why)
{
	ZSTD_frameHeader fh;
	size_t ret;

	ret = ZSTD_getFrameHeader(&fh, data, len);
	if (ZSTD_isError(ret))
		return invalid(why, "zstd: no frame header");
	if (ret > 0)
		return invalid(why, "zstd: frame header truncated");
	if (fh.frameType != ZSTD_frame)
		return invalid(why, "zstd: a skippable frame");
	if (fh.dictID)
		return invalid(why, "zstd: frame needs a dictionary");
	if (fh.windowSize > (1ULL << BTRFS_ZSTD_MAX_WINDOWLOG))
		return invalid(why, "zstd: window larger than 128 KiB");
	if (fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN &&
	    fh.frameContentSize > unencoded_len)
		return invalid(why,
			       "zstd: content size larger than the extent");
	return check_zstd_blocks(data, len, &fh, why);
}

/* RFC 1950: CMF and FLG. */
static int check_zlib(const unsigned char *data, size_t len, const char **why)
{
	if (len < 3)
		return invalid(why, "zlib: stream truncated");
	if ((data[0] & 0x0f) != 8 || data[0] >> 4 > 7)
		return invalid(
			why,
			"zlib: not deflate with a window of 32 KiB or less");
	if ((data[0] << 8 | data[1]) % 31)
		return invalid(why, "zlib: header check fails");
	if (data[1] & 0x20)
		return invalid(why, "zlib: stream needs a preset dictionary");
	return 0;
}

static int check_lzo(const unsigned char *data, size_t len, size_t sector,
		     const char **why)
{
	size_t total, pos = LZO_LEN, seg_len;

	if (len < LZO_LEN)
		return invalid(why, "lzo: total length truncated");
	total = le_get32(data);
	if (total < LZO_LEN || total > len)
		return invalid(why, "lzo: total length past the payload");
	/* The kernel reads the extent's sectors; all must hold the stream. */
	if (len - total >= sector)
		return invalid(
			why,
			"lzo: payload a sector longer than its total length");
	for (;;) {
		/* A header never straddles a sector: the rest is padding. */
		if (sector - pos % sector < LZO_LEN)
			pos += sector - pos % sector;
		if (pos >= total)
			return 0;
		if (total - pos < LZO_LEN)
			return invalid(
				why,
				"lzo: segment header past the total length");
		seg_len = le_get32(data + pos);
		pos += LZO_LEN;
		if (seg_len == 0 || seg_len > LZO_WORST(sector))
			return invalid(
				why,
				"lzo: segment length 0 or past the worst case of a sector");
		if (seg_len > total - pos)
			return invalid(why,
				       "lzo: segment past the total length");
		pos += seg_len;
	}
}

int payload_check(int compression, const void *data, size_t len,
		  uint64_t unencoded_len, const char **why)
{
	*why = NULL;
	switch (compression) {
	case BTRFS_ENCODED_IO_COMPRESSION_NONE:
		return 0;
	case BTRFS_ENCODED_IO_COMPRESSION_ZLIB:
		return check_zlib(data, len, why);
	case BTRFS_ENCODED_IO_COMPRESSION_ZSTD:
		return check_zstd(data, len, unencoded_len, why);
	case BTRFS_ENCODED_IO_COMPRESSION_LZO_4K ... BTRFS_ENCODED_IO_COMPRESSION_LZO_64K:
		return check_lzo(
			data, len,
			(size_t)4096 << (compression -
					 BTRFS_ENCODED_IO_COMPRESSION_LZO_4K),
			why);
	}
	*why = "unknown compression";
	return -EOPNOTSUPP;
}
