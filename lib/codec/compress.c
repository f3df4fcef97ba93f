// SPDX-License-Identifier: GPL-2.0
/*
 * Compression in user space for encoded writes: specs, chunking, checks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/kernel.h"
#include "codec/codec.h"
#include "codec/compress.h"

int compress_spec_parse(const char *s, struct compress_spec *spec)
{
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	int max;
	char *end;
	long level;

	switch (codec_alg_parse(s, n)) {
	case BTRFS_COMPRESS_ZSTD:
		spec->alg = BTRFS_COMPRESS_ZSTD;
		max = 15;
		break;
	case BTRFS_COMPRESS_ZLIB:
		spec->alg = BTRFS_COMPRESS_ZLIB;
		max = 9;
		break;
	case BTRFS_COMPRESS_LZO:
		spec->alg = BTRFS_COMPRESS_LZO;
		max = 0;
		break;
	default:
		return -EINVAL;
	}
	spec->level = max ? 3 : 0;
	if (!colon)
		return 0;
	level = strtol(colon + 1, &end, 10);
	if (!max || !colon[1] || *end || level < 1 || level > max)
		return -EINVAL;
	spec->level = level;
	return 0;
}

int compress_encoded_id(const struct compress_spec *spec, uint32_t sectorsize)
{
	int id = BTRFS_ENCODED_IO_COMPRESSION_LZO_4K;
	uint32_t s;

	switch (spec->alg) {
	case BTRFS_COMPRESS_ZLIB:
		return BTRFS_ENCODED_IO_COMPRESSION_ZLIB;
	case BTRFS_COMPRESS_ZSTD:
		return BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
	case BTRFS_COMPRESS_LZO:
		for (s = 4096; s < sectorsize &&
			       id < BTRFS_ENCODED_IO_COMPRESSION_LZO_64K;
		     s *= 2)
			id++;
		return s == sectorsize ? id : -EINVAL;
	}
	return -EINVAL;
}

uint64_t compress_chunk_len(uint64_t offset, uint64_t end)
{
	uint64_t boundary = (offset / COMPRESS_CHUNK + 1) * COMPRESS_CHUNK;

	if (end <= offset)
		return 0;
	return (end < boundary ? end : boundary) - offset;
}

uint64_t compress_unencoded_len(uint64_t len, uint32_t sectorsize)
{
	return (len + sectorsize - 1) / sectorsize * sectorsize;
}

uint64_t compress_chunk_unencoded_len(uint64_t offset, uint64_t len,
				      uint64_t size, uint32_t sectorsize)
{
	if (offset == 0 && len == size && len < sectorsize)
		return len;
	return compress_unencoded_len(len, sectorsize);
}

bool compress_worth(uint64_t encoded_len, uint64_t unencoded_len,
		    uint32_t sectorsize)
{
	if (unencoded_len < sectorsize)
		return encoded_len < unencoded_len;
	return compress_unencoded_len(encoded_len, sectorsize) < unencoded_len;
}
