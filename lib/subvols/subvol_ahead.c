// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes, ahead. Each subvolume after the first of its
 * family is sent as the kernel's difference from a copied relative, and
 * that pass costs about as much as the rest of its copy (the kernel walks
 * both trees). It needs nothing from DEST: so while one subvolume is
 * received, and while the first is copied whole, a thread of its own has
 * the kernel make the passes of those to come, in the copy order, kept in
 * memory (a few hundred KiB each for a small change, without file data).
 *
 * Which parent and clone sources a subvolume gets depends on which ones
 * are copied by its turn: the plan is read as if all before it were.
 * That holds unless a copy fails, which ends the run, or a rerun finds
 * one of them in DEST already under a received UUID that does not fit;
 * a subvolume whose turn finds other ones is sent as before, by the
 * kernel then, and so is one whose pass was not made in time or whose
 * subvolumes changed since (send_pass_open() checks).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "subvols/copy_subvols_internal.h"

/*
 * Passes made and not taken yet: the bytes bound the memory, the count the
 * open memory files. A pass not made when its turn comes holds up that
 * step, so the count lets the thread run ahead of a long history.
 */
#define AHEAD_MAX_PASSES 64
#define AHEAD_MAX_BYTES (256ULL << 20)
/* A pass larger than this is given up: its turn asks the kernel again. */
#define AHEAD_PASS_MAX_BYTES (64ULL << 20)

enum ahead_state {
	AHEAD_WAITING,
	AHEAD_MAKING,
	AHEAD_MADE,
	AHEAD_TAKEN,
	AHEAD_NONE, /* not made, or of no more use */
};

struct ahead_job {
	size_t pos;	  /* in the copy order */
	const char *root; /* strings of the plan */
	const char *parent;
	const char **clones;
	size_t nr_clones;
	enum ahead_state state;
	struct send_pass pass;
};

struct subvol_ahead {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ahead_job *jobs;
	size_t nr_jobs;
	size_t reached; /* the copy's position */
	size_t nr_made; /* passes made, not given back */
	uint64_t bytes; /* their size */
	/* set by subvols_ahead_end(): a pass under way stops too */
	volatile sig_atomic_t quit;
	/* the copy's: set, a wait for a pass ends, and the pass under way */
	const volatile sig_atomic_t *stop;
};

static int plan_jobs(struct subvol_ahead *a, struct subvol_plan *plan)
{
	const struct subvol_entry *en, *parent;
	struct ahead_job *j;
	bool *copied;
	size_t pos;
	int ret = 0;

	copied = calloc(plan->nr ?: 1, sizeof(*copied));
	a->jobs = calloc(plan->nr_order ?: 1, sizeof(*a->jobs));
	if (!copied || !a->jobs) {
		free(copied);
		return -ENOMEM;
	}
	for (pos = 0; !ret && pos < plan->nr_order; pos++) {
		en = &plan->v[plan->order[pos]];
		parent = subvol_plan_nearest(plan, en, copied);
		if (parent) {
			j = &a->jobs[a->nr_jobs++];
			j->pos = pos;
			j->root = subvol_source(en);
			j->parent = subvol_source(parent);
			j->pass.fd = -1;
			j->clones = calloc(plan->nr ?: 1, sizeof(*j->clones));
			if (!j->clones)
				ret = -ENOMEM;
			else
				j->nr_clones = subvol_plan_clones(
					plan, en, copied, j->clones, NULL);
		}
		copied[plan->order[pos]] = true;
	}
	free(copied);
	return ret;
}

static struct ahead_job *next_job(struct subvol_ahead *a)
{
	size_t i;

	for (i = 0; i < a->nr_jobs; i++)
		if (a->jobs[i].state == AHEAD_WAITING &&
		    a->jobs[i].pos >= a->reached)
			return &a->jobs[i];
	return NULL;
}

static void *ahead_run(void *arg)
{
	struct subvol_ahead *a = arg;
	struct send_options opts = { .stop = &a->quit };
	struct encio_error e;
	struct ahead_job *j;
	int ret;

	pthread_mutex_lock(&a->lock);
	while (!a->quit) {
		if (a->nr_made >= AHEAD_MAX_PASSES ||
		    a->bytes >= AHEAD_MAX_BYTES) {
			pthread_cond_wait(&a->cond, &a->lock);
			continue;
		}
		j = next_job(a);
		if (!j)
			break;
		j->state = AHEAD_MAKING;
		opts.parent = j->parent;
		opts.clones = j->clones;
		opts.nr_clones = j->nr_clones;
		pthread_mutex_unlock(&a->lock);
		/* failures are the kernel's to say again, at its turn */
		ret = send_pass_make(&j->pass, j->root, &opts,
				     AHEAD_PASS_MAX_BYTES, &e);
		pthread_mutex_lock(&a->lock);
		j->state = ret ? AHEAD_NONE : AHEAD_MADE;
		if (!ret) {
			a->nr_made++;
			a->bytes += j->pass.bytes;
		}
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* Every pass given back or never made: its jobs freed, and it. */
static void ahead_free(struct subvol_ahead *a)
{
	size_t i;

	for (i = 0; i < a->nr_jobs; i++) {
		send_pass_release(&a->jobs[i].pass);
		free(a->jobs[i].clones);
	}
	free(a->jobs);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

int subvols_ahead_start(struct subvol_ahead **ret_a, struct subvol_plan *plan,
			const volatile sig_atomic_t *stop)
{
	struct subvol_ahead *a;
	sigset_t block, old;
	int ret;

	*ret_a = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->stop = stop;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	ret = plan_jobs(a, plan);
	if (!ret && a->nr_jobs) {
		/* signals asking to stop go to the copy's thread */
		sigemptyset(&block);
		sigaddset(&block, SIGINT);
		sigaddset(&block, SIGTERM);
		sigaddset(&block, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		ret = -pthread_create(&a->thread, NULL, ahead_run, a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (ret || !a->nr_jobs) {
		ahead_free(a);
		return ret;
	}
	*ret_a = a;
	return 0;
}

static void job_drop(struct subvol_ahead *a, struct ahead_job *j)
{
	if (j->state == AHEAD_MADE || j->state == AHEAD_TAKEN) {
		a->nr_made--;
		a->bytes -= j->pass.bytes;
		send_pass_release(&j->pass);
	}
	j->state = AHEAD_NONE;
}

void subvols_ahead_reach(struct subvol_ahead *a, size_t pos)
{
	size_t i;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->reached = pos;
	for (i = 0; i < a->nr_jobs; i++)
		if (a->jobs[i].pos < pos && a->jobs[i].state != AHEAD_MAKING)
			job_drop(a, &a->jobs[i]);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

static bool job_fits(const struct ahead_job *j, const char *parent,
		     const char *const *clones, size_t nr_clones)
{
	size_t i;

	if (strcmp(j->parent, parent) || j->nr_clones != nr_clones)
		return false;
	for (i = 0; i < nr_clones; i++)
		if (strcmp(j->clones[i], clones[i]))
			return false;
	return true;
}

static bool stopped(const struct subvol_ahead *a)
{
	return a->stop && *a->stop;
}

/*
 * A signal asking to stop sets the copy's flag and wakes no condition
 * variable: the wait looks at it every tenth of a second.
 */
static void wait_a_while(struct subvol_ahead *a)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 100 * 1000 * 1000;
	if (until.tv_nsec >= 1000 * 1000 * 1000) {
		until.tv_sec++;
		until.tv_nsec -= 1000 * 1000 * 1000;
	}
	pthread_cond_timedwait(&a->cond, &a->lock, &until);
}

const struct send_pass *subvols_ahead_take(struct subvol_ahead *a,
					   const struct subvol_entry *en,
					   const char *parent,
					   const char *const *clones,
					   size_t nr_clones)
{
	struct ahead_job *j = NULL;
	size_t i;

	if (!a)
		return NULL;
	pthread_mutex_lock(&a->lock);
	for (i = 0; !j && i < a->nr_jobs; i++)
		if (a->jobs[i].root == subvol_source(en))
			j = &a->jobs[i];
	while (j && j->state == AHEAD_MAKING && !stopped(a))
		wait_a_while(a);
	if (stopped(a))
		a->quit = 1;
	if (j && j->state == AHEAD_MADE &&
	    job_fits(j, parent, clones, nr_clones)) {
		j->state = AHEAD_TAKEN;
	} else if (j) {
		job_drop(a, j);
		j = NULL;
	}
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return j ? &j->pass : NULL;
}

void subvols_ahead_done(struct subvol_ahead *a, const struct send_pass *pass)
{
	size_t i;

	if (!a || !pass)
		return;
	pthread_mutex_lock(&a->lock);
	for (i = 0; i < a->nr_jobs; i++)
		if (&a->jobs[i].pass == pass)
			job_drop(a, &a->jobs[i]);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void subvols_ahead_end(struct subvol_ahead *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->quit = 1;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	ahead_free(a);
}
