// SPDX-License-Identifier: GPL-2.0
/*
 * Buffer pool: one prefaulted mapping cut into equal slots.
 *
 * The kernel's first touch of a fresh 4 KiB page costs microseconds per
 * page on every encoded write (design notes: 1 s vs 0.28 s for 1 GiB), so
 * slots are reused and the mapping is populated up front, on 2 MiB pages
 * where possible.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "io/bufpool.h"

#define HUGE_PAGE_SIZE (2UL * 1024 * 1024)

static size_t round_up(size_t value, size_t align)
{
	return (value + align - 1) / align * align;
}

static void *map_hugetlb(size_t len)
{
	void *addr =
		mmap(NULL, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE,
		     -1, 0);

	return addr == MAP_FAILED ? NULL : addr;
}

/* Map 2 MiB-aligned memory so THP can back it, and trim the slack. */
static void *map_aligned(size_t len, enum bufpool_backing *backing)
{
	size_t over = len + HUGE_PAGE_SIZE;
	char *raw, *addr;
	size_t head;

	raw = mmap(NULL, over, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	addr = (char *)round_up((uintptr_t)raw, HUGE_PAGE_SIZE);
	head = addr - raw;
	if (head)
		munmap(raw, head);
	munmap(addr + len, over - head - len);

	if (*backing == BUFPOOL_THP && madvise(addr, len, MADV_HUGEPAGE))
		*backing = BUFPOOL_NORMAL;
	/* Prefault: MAP_POPULATE would fault before madvise took effect. */
	memset(addr, 0, len);
	return addr;
}

int bufpool_init(struct bufpool *pool, unsigned int nr_slots, size_t slot_size,
		 int force)
{
	unsigned int i;

	memset(pool, 0, sizeof(*pool));
	pool->slot_size = slot_size;
	pool->nr_slots = nr_slots;
	pool->map_len = round_up((size_t)nr_slots * slot_size, HUGE_PAGE_SIZE);
	pool->free_stack = calloc(nr_slots, sizeof(*pool->free_stack));
	if (!pool->free_stack)
		return -ENOMEM;

	pool->backing = BUFPOOL_HUGETLB;
	if (force < 0 || force == BUFPOOL_HUGETLB)
		pool->base = map_hugetlb(pool->map_len);
	if (!pool->base) {
		pool->backing = force == BUFPOOL_NORMAL ? BUFPOOL_NORMAL :
							  BUFPOOL_THP;
		pool->base = map_aligned(pool->map_len, &pool->backing);
	}
	if (!pool->base) {
		free(pool->free_stack);
		pool->free_stack = NULL;
		return -ENOMEM;
	}
	/* Hand out low slots first: they share the first huge page. */
	for (i = 0; i < nr_slots; i++)
		pool->free_stack[i] = nr_slots - 1 - i;
	pool->nr_free = nr_slots;
	return 0;
}

void bufpool_release(struct bufpool *pool)
{
	if (pool->base)
		munmap(pool->base, pool->map_len);
	free(pool->free_stack);
	memset(pool, 0, sizeof(*pool));
}

int bufpool_get_slot(struct bufpool *pool)
{
	if (!pool->nr_free)
		return -1;
	return pool->free_stack[--pool->nr_free];
}

void bufpool_put_slot(struct bufpool *pool, unsigned int slot)
{
	pool->free_stack[pool->nr_free++] = slot;
}

struct iovec *bufpool_iovecs(const struct bufpool *pool)
{
	struct iovec *iov = calloc(pool->nr_slots, sizeof(*iov));
	unsigned int i;

	if (!iov)
		return NULL;
	for (i = 0; i < pool->nr_slots; i++) {
		iov[i].iov_base = bufpool_slot_addr(pool, i);
		iov[i].iov_len = pool->slot_size;
	}
	return iov;
}

const char *bufpool_backing_name(enum bufpool_backing backing)
{
	switch (backing) {
	case BUFPOOL_HUGETLB:
		return "hugetlb 2MiB pages";
	case BUFPOOL_THP:
		return "transparent huge pages";
	case BUFPOOL_NORMAL:
		return "normal pages";
	}
	return "?";
}
