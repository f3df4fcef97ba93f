// SPDX-License-Identifier: GPL-2.0
/*
 * encio's own records, packed and read back within bounds (pack.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/le_bytes.h"
#include "base/pack.h"

void pack_put(struct pack_buf *b, const void *data, size_t len)
{
	uint8_t *grown;
	size_t cap;

	if (b->failed)
		return;
	if (b->len + len > b->cap) {
		cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len)
			cap *= 2;
		grown = realloc(b->p, cap);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->p = grown;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

void pack_u64(struct pack_buf *b, uint64_t v)
{
	uint8_t le[sizeof(v)];

	le_put64(le, v);
	pack_put(b, le, sizeof(le));
}

uint64_t unpack_u64(struct pack_reader *r)
{
	const uint8_t *p = unpack_bytes(r, sizeof(uint64_t));

	return p ? le_get64(p) : 0;
}

const uint8_t *unpack_bytes(struct pack_reader *r, uint64_t len)
{
	const uint8_t *p = r->p;

	if (r->bad || r->len < len) {
		r->bad = true;
		return NULL;
	}
	r->p += len;
	r->len -= len;
	return p;
}
