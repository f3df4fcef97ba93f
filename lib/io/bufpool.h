/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A pool of equal buffer slots in one mapping, backed by hugetlb pages where
 * the system has them, else by THP, else by normal pages, prefaulted so the
 * kernel never touches fresh memory on the data path.
 */
#ifndef ENCIO_BUFPOOL_H
#define ENCIO_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum bufpool_backing {
	BUFPOOL_HUGETLB,
	BUFPOOL_THP,
	BUFPOOL_NORMAL,
};

struct bufpool {
	void *base;
	size_t map_len;
	size_t slot_size;
	unsigned int nr_slots;
	unsigned int nr_free;
	unsigned int *free_stack;
	enum bufpool_backing backing;
};

/* @force: BUFPOOL_NORMAL / BUFPOOL_THP to skip the better backings, or -1. */
int bufpool_init(struct bufpool *pool, unsigned int nr_slots, size_t slot_size,
		 int force);
void bufpool_release(struct bufpool *pool);

/* A free slot index, or -1 when all are in use. */
int bufpool_get_slot(struct bufpool *pool);
void bufpool_put_slot(struct bufpool *pool, unsigned int slot);

static inline void *bufpool_slot_addr(const struct bufpool *pool,
				      unsigned int slot)
{
	return (char *)pool->base + (size_t)slot * pool->slot_size;
}

/* One iovec per slot, for io_uring_register_buffers(); caller frees. */
struct iovec *bufpool_iovecs(const struct bufpool *pool);

const char *bufpool_backing_name(enum bufpool_backing backing);

#endif
