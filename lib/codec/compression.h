/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Names of the encoded I/O compression ids (BTRFS_ENCODED_IO_COMPRESSION_*,
 * not the on-disk BTRFS_COMPRESS_* ids), as encio read prints them and
 * encio write parses them.
 */
#ifndef ENCIO_COMPRESSION_H
#define ENCIO_COMPRESSION_H

#include <stdint.h>

/* "none", "zlib", "zstd", "lzo4k" .. "lzo64k"; NULL for other ids. */
const char *encoded_compression_name(uint32_t compression);

/*
 * A name as above, "lzo" (lzo with @sectorsize pages), or a decimal number
 * (passed through unchecked, so the kernel can refuse it). Returns 0 or
 * -EINVAL.
 */
int encoded_compression_parse(const char *name, uint32_t sectorsize,
			      uint32_t *compression);

#endif
