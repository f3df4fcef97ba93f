// SPDX-License-Identifier: GPL-2.0
/*
 * Encoded I/O compression names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/compression.h"
#include "base/kernel.h"

static const char *const names[] = {
	[BTRFS_ENCODED_IO_COMPRESSION_NONE] = "none",
	[BTRFS_ENCODED_IO_COMPRESSION_ZLIB] = "zlib",
	[BTRFS_ENCODED_IO_COMPRESSION_ZSTD] = "zstd",
	[BTRFS_ENCODED_IO_COMPRESSION_LZO_4K] = "lzo4k",
	[BTRFS_ENCODED_IO_COMPRESSION_LZO_8K] = "lzo8k",
	[BTRFS_ENCODED_IO_COMPRESSION_LZO_16K] = "lzo16k",
	[BTRFS_ENCODED_IO_COMPRESSION_LZO_32K] = "lzo32k",
	[BTRFS_ENCODED_IO_COMPRESSION_LZO_64K] = "lzo64k",
};

const char *encoded_compression_name(uint32_t compression)
{
	if (compression < sizeof(names) / sizeof(names[0]))
		return names[compression];
	return NULL;
}

int encoded_compression_parse(const char *name, uint32_t sectorsize,
			      uint32_t *compression)
{
	unsigned long value;
	uint32_t i;
	char *end;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0) {
			*compression = i;
			return 0;
		}
	}
	if (strcmp(name, "lzo") == 0) {
		/* LZO_4K + log2(sectorsize / 4K) */
		for (i = BTRFS_ENCODED_IO_COMPRESSION_LZO_4K;
		     i <= BTRFS_ENCODED_IO_COMPRESSION_LZO_64K; i++) {
			if (4096U << (i -
				      BTRFS_ENCODED_IO_COMPRESSION_LZO_4K) ==
			    sectorsize) {
				*compression = i;
				return 0;
			}
		}
		return -EINVAL;
	}
	if (name[0] < '0' || name[0] > '9')
		return -EINVAL;
	errno = 0;
	value = strtoul(name, &end, 10);
	if (errno || *end || value > UINT32_MAX)
		return -EINVAL;
	*compression = value;
	return 0;
}
