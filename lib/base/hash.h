/* SPDX-License-Identifier: GPL-2.0 */
/* A 64-bit mix (murmur3's finalizer), for open-addressed tables of inode
 * numbers and disk addresses. */
#ifndef ENCIO_HASH_H
#define ENCIO_HASH_H

#include <stdint.h>

static inline uint64_t hash64(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return v;
}

#endif
