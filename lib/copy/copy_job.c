// SPDX-License-Identifier: GPL-2.0
/*
 * A copy job's own state, at the bottom of copy: its first error, the
 * ranges it has still to read and write, its progress, its preallocated
 * ranges. copy.c (the data) and copy_share.c (which ranges are cloned)
 * both change it; nothing here calls either.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "copy/copy_internal.h"
#include "base/error.h"
#include "base/invariant.h"

int copy_job_fail(struct copy_job *job, int err, const char *op, bool on_dst,
		  uint64_t offset)
{
	if (!job->err)
		job->err = encio_error_set(
			job->e, err, op, on_dst ? job->dst_path : job->src_path,
			true, offset);
	return job->err;
}

int copy_job_push_range(struct copy_job *job, uint64_t start, uint64_t end,
			bool whole)
{
	struct copy_range *r;

	ENCIO_ASSERT(start < end);
	if (job->nr_pending == job->cap_pending) {
		size_t cap = job->cap_pending ? job->cap_pending * 2 : 16;

		r = realloc(job->pending, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		job->pending = r;
		job->cap_pending = cap;
	}
	job->pending[job->nr_pending++] =
		(struct copy_range){ start, end, whole };
	return 0;
}

/* Count [start, end) clipped at EOF as done, for progress. */
void copy_job_progress(struct copy_job *job, uint64_t start, uint64_t end)
{
	if (end > job->size)
		end = job->size;
	if (start >= end)
		return;
	job->done += end - start;
	job->ctx->stats.bytes_done += end - start;
}

int copy_job_fallocate(struct copy_job *job, uint64_t start, uint64_t end)
{
	if (start < end &&
	    fallocate(job->dst_fd, FALLOC_FL_KEEP_SIZE, start, end - start) &&
	    errno != EOPNOTSUPP)
		return copy_job_fail(job, errno, "fallocate", true, start);
	return 0;
}
