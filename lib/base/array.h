/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Arrays that grow by doubling, as the readers of a tree's items fill
 * them, and sorted ones looked up.
 */
#ifndef ENCIO_ARRAY_H
#define ENCIO_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * @p (of *@cap elements of @size, @nr used) with room for one more: @p
 * itself while there is, else reallocated to twice as many (at least 4),
 * *@cap raised; NULL, @p untouched, when memory runs out.
 */
static inline void *array_grow(void *p, size_t *cap, size_t nr, size_t size)
{
	size_t n;
	void *q;

	if (nr < *cap)
		return p;
	n = *cap ? *cap * 2 : 4;
	q = realloc(p, n * size);
	if (q)
		*cap = n;
	return q;
}

/* Whether the ascending array @a of @nr values holds @v. */
static inline bool array_has_u64(const uint64_t *a, size_t nr, uint64_t v)
{
	size_t lo = 0, hi = nr, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (a[mid] == v)
			return true;
		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

#endif
