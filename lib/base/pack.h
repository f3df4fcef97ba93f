/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio's own records, packed: a growing buffer of little-endian fields,
 * and a reader that never reads past its end (a record on disk is input).
 */
#ifndef ENCIO_PACK_H
#define ENCIO_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pack_buf {
	uint8_t *p;
	size_t len, cap;
	bool failed; /* out of memory: every later put is dropped */
};

void pack_put(struct pack_buf *b, const void *data, size_t len);
void pack_u64(struct pack_buf *b, uint64_t v);

struct pack_reader {
	const uint8_t *p;
	size_t len;
	bool bad; /* read past the end: every later read gives 0 or NULL */
};

uint64_t unpack_u64(struct pack_reader *r);
/* @len bytes in place, or NULL past the end. */
const uint8_t *unpack_bytes(struct pack_reader *r, uint64_t len);

#endif
