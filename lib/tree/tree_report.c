// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, errors and progress, from every thread (under t->lock): an
 * entry that failed is reported and the copy goes on; a stop (ENOSPC,
 * EROFS, a failed sync, an interrupt) ends it.
 */
#include <errno.h>

#include "tree/tree_internal.h"

static void stop_locked(struct tree *t, const struct encio_error *e)
{
	if (!t->fatal) {
		t->fatal = -e->err;
		*t->e = *e;
	}
	__atomic_store_n(&t->stopping, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&t->cond);
}

void tree_stop(struct tree *t, const struct encio_error *e)
{
	pthread_mutex_lock(&t->lock);
	stop_locked(t, e);
	pthread_mutex_unlock(&t->lock);
}

/* Counters shared by both threads. */
void tree_stat_add(struct tree *t, uint64_t *counter, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	*counter += n;
	pthread_mutex_unlock(&t->lock);
}

/*
 * One entry failed: report it and go on. A full or read-only destination
 * stops the copy: every entry after would fail the same way.
 */
void tree_report(struct tree *t, const struct encio_error *e)
{
	pthread_mutex_lock(&t->lock);
	t->stats->failed++;
	t->stats->entries_done++;
	if (e->err == ENOSPC || e->err == EROFS)
		stop_locked(t, e);
	else if (t->opts->report && !t->fatal)
		t->opts->report(t->opts->arg, e);
	pthread_mutex_unlock(&t->lock);
}

void tree_entry_error(struct tree *t, int err, const char *op, const char *path)
{
	struct encio_error e;

	encio_error_set(&e, err, op, path, false, 0);
	tree_report(t, &e);
}

void tree_progress(struct tree *t)
{
	if (!t->opts->progress)
		return;
	pthread_mutex_lock(&t->lock);
	t->opts->progress(t->opts->arg, t->stats, &t->ctx->stats);
	pthread_mutex_unlock(&t->lock);
}

bool tree_stop_requested(struct tree *t)
{
	struct encio_error e;

	if (__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE))
		return true;
	if (t->opts->stop && *t->opts->stop) {
		encio_error_set(&e, EINTR, "finish (interrupted)", t->dest,
				false, 0);
		tree_stop(t, &e);
	}
	return __atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE);
}

/* Count an entry DEST had complete; @updated: but for metadata, now set. */
void tree_count_complete(struct tree *t, bool updated, uint64_t bytes)
{
	pthread_mutex_lock(&t->lock);
	if (updated)
		t->stats->meta_updated++;
	else
		t->stats->skipped++;
	t->stats->entries_done++;
	t->stats->bytes_skipped += bytes;
	pthread_mutex_unlock(&t->lock);
}
