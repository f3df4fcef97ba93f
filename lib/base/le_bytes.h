/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Little-endian integers at any address, as btrfs, its send stream, the
 * compressed formats and encio's records hold them.
 */
#ifndef ENCIO_LE_BYTES_H
#define ENCIO_LE_BYTES_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t le_get16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le_get32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le_get64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void le_put16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le_put32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le_put64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

#endif
