// SPDX-License-Identifier: GPL-2.0
/*
 * Codec worker threads: encode chunks while the ring thread does the I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/kernel.h"
#include "codec/codec.h"
#include "codec/cpool.h"

static void cpool_encode(struct codec *codec, struct cpool_task *t)
{
	memset(t->in + t->len, 0, t->unencoded_len - t->len);
	t->res = codec_encode(codec, t->compression, t->level, t->in,
			      t->unencoded_len, t->out, t->unencoded_len - 1);
}

static void *cpool_worker(void *arg)
{
	struct cpool *pool = arg;
	struct codec *codec = codec_new();
	struct cpool_task *t;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->stop && !pool->todo)
			pthread_cond_wait(&pool->work, &pool->lock);
		if (pool->stop)
			break;
		t = pool->todo;
		pool->todo = t->next;
		if (!pool->todo)
			pool->todo_tail = &pool->todo;
		pthread_mutex_unlock(&pool->lock);
		if (codec)
			cpool_encode(codec, t);
		else
			t->res = -ENOMEM;
		pthread_mutex_lock(&pool->lock);
		t->next = pool->done;
		pool->done = t;
		pthread_cond_signal(&pool->done_cond);
	}
	pthread_mutex_unlock(&pool->lock);
	codec_free(codec);
	return NULL;
}

static int cpool_alloc_tasks(struct cpool *pool, unsigned int nr)
{
	unsigned int i;

	pool->tasks = calloc(nr, sizeof(*pool->tasks));
	if (!pool->tasks)
		return -ENOMEM;
	pool->nr_tasks = nr;
	for (i = 0; i < nr; i++) {
		struct cpool_task *t = &pool->tasks[i];

		t->in = malloc(BTRFS_MAX_UNCOMPRESSED);
		t->out = malloc(BTRFS_MAX_UNCOMPRESSED);
		if (!t->in || !t->out)
			return -ENOMEM;
		t->next = pool->free;
		pool->free = t;
	}
	return 0;
}

int cpool_init(struct cpool *pool, unsigned int threads)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i;
	int ret;

	memset(pool, 0, sizeof(*pool));
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->work, NULL);
	pthread_cond_init(&pool->done_cond, NULL);
	pool->todo_tail = &pool->todo;
	if (!threads)
		threads = cpus > 0 ? cpus : 1;
	ret = cpool_alloc_tasks(pool, 2 * threads + 2);
	pool->threads = calloc(threads, sizeof(*pool->threads));
	if (!ret && !pool->threads)
		ret = -ENOMEM;
	for (i = 0; !ret && i < threads; i++) {
		ret = -pthread_create(&pool->threads[i], NULL, cpool_worker,
				      pool);
		if (!ret)
			pool->nr_threads++;
	}
	if (ret)
		cpool_release(pool);
	return ret;
}

void cpool_release(struct cpool *pool)
{
	unsigned int i;

	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);
	for (i = 0; i < pool->nr_threads; i++)
		pthread_join(pool->threads[i], NULL);
	for (i = 0; pool->tasks && i < pool->nr_tasks; i++) {
		free(pool->tasks[i].in);
		free(pool->tasks[i].out);
	}
	free(pool->tasks);
	free(pool->threads);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->work);
	pthread_cond_destroy(&pool->done_cond);
	memset(pool, 0, sizeof(*pool));
}

struct cpool_task *cpool_get(struct cpool *pool)
{
	struct cpool_task *t = pool->free;

	if (t)
		pool->free = t->next;
	return t;
}

void cpool_put(struct cpool *pool, struct cpool_task *task)
{
	task->next = pool->free;
	pool->free = task;
}

void cpool_submit(struct cpool *pool, struct cpool_task *task)
{
	task->next = NULL;
	pthread_mutex_lock(&pool->lock);
	*pool->todo_tail = task;
	pool->todo_tail = &task->next;
	pool->busy++;
	pthread_cond_signal(&pool->work);
	pthread_mutex_unlock(&pool->lock);
}

struct cpool_task *cpool_collect(struct cpool *pool, bool wait)
{
	struct cpool_task *list, *t;

	pthread_mutex_lock(&pool->lock);
	while (wait && pool->busy && !pool->done)
		pthread_cond_wait(&pool->done_cond, &pool->lock);
	list = pool->done;
	pool->done = NULL;
	for (t = list; t; t = t->next)
		pool->busy--;
	pthread_mutex_unlock(&pool->lock);
	return list;
}
