/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A pool of codec worker threads: the ring thread hands over chunks of
 * plain data, the workers encode them, the ring thread collects the results
 * and writes them. A fixed number of tasks (twice the workers, plus two)
 * bounds the memory: 2 x 128 KiB each.
 */
#ifndef ENCIO_CPOOL_H
#define ENCIO_CPOOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cpool_task {
	void *owner;	      /* the caller's (the job) */
	uint64_t offset;      /* file offset of the chunk */
	size_t len;	      /* file bytes */
	size_t unencoded_len; /* @len rounded up a sector, zero padded */
	int compression;      /* BTRFS_ENCODED_IO_COMPRESSION_* */
	int level;
	ssize_t res; /* codec_encode()'s */
	char *in;    /* unencoded_len bytes */
	char *out;
	struct cpool_task *next;
};

struct cpool {
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t done_cond;
	pthread_t *threads;
	unsigned int nr_threads;
	struct cpool_task *tasks;
	unsigned int nr_tasks;
	struct cpool_task *free;
	struct cpool_task *todo, **todo_tail;
	struct cpool_task *done;
	unsigned int busy; /* handed over, not yet collected */
	bool stop;
};

/* Start @threads workers (0: one per online CPU). Returns 0 or -errno. */
int cpool_init(struct cpool *pool, unsigned int threads);
void cpool_release(struct cpool *pool);

/* A free task; NULL when all are busy (collect results first). */
struct cpool_task *cpool_get(struct cpool *pool);
/* Return a collected task to the free list. */
void cpool_put(struct cpool *pool, struct cpool_task *task);
/* Hand over a task filled by the caller (in, len, unencoded_len, ...). */
void cpool_submit(struct cpool *pool, struct cpool_task *task);
/*
 * Take the encoded tasks (a list), waiting for at least one if @wait and
 * any are busy. NULL when none.
 */
struct cpool_task *cpool_collect(struct cpool *pool, bool wait);

static inline unsigned int cpool_busy(const struct cpool *pool)
{
	return pool->busy;
}

#endif
