/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compression in user space for encoded writes: the algorithm and level
 * asked for, how plain data is cut into chunks, when a chunk is worth
 * writing encoded, and the check that an encoded chunk decodes back.
 */
#ifndef ENCIO_COMPRESS_H
#define ENCIO_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct codec;

/* Chunks of plain data are at most this long and never cross a multiple. */
#define COMPRESS_CHUNK (128 * 1024)

struct compress_spec {
	int alg;   /* BTRFS_COMPRESS_ZLIB/LZO/ZSTD, NONE when off */
	int level; /* 0 for lzo */
};

/*
 * Parse "zstd[:1..15]", "zlib[:1..9]" or "lzo" (default level 3). Returns 0
 * or -EINVAL.
 */
int compress_spec_parse(const char *s, struct compress_spec *spec);

/*
 * The BTRFS_ENCODED_IO_COMPRESSION_* id of @spec for a filesystem of
 * @sectorsize (lzo's id names the sector size), or -EINVAL.
 */
int compress_encoded_id(const struct compress_spec *spec, uint32_t sectorsize);

/* Bytes of the chunk that starts at @offset of data ending at @end. */
uint64_t compress_chunk_len(uint64_t offset, uint64_t end);

/* @len rounded up to a multiple of @sectorsize. */
uint64_t compress_unencoded_len(uint64_t len, uint32_t sectorsize);

/*
 * The unencoded_len to write the chunk of @len bytes at @offset of a file of
 * @size bytes with: a whole file smaller than a sector is an inline
 * candidate, written with unencoded_len == len (the kernel then stores it
 * inline, compressed); any other chunk is rounded up a sector.
 */
uint64_t compress_chunk_unencoded_len(uint64_t offset, uint64_t len,
				      uint64_t size, uint32_t sectorsize);

/*
 * Whether @encoded_len bytes are worth writing encoded in place of
 * @unencoded_len: like the kernel, only when it saves at least a sector;
 * for an inline candidate (less than a sector), when it is smaller.
 */
bool compress_worth(uint64_t encoded_len, uint64_t unencoded_len,
		    uint32_t sectorsize);

#endif
