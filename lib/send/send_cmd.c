// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: what every file of send calls, at the bottom of the family:
 * its errors, a stop asked by a signal, the end of a command, progress,
 * the layout a subvolume's stream is given.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "send/send.h"
#include "send/send_internal.h"
#include "stream/stream.h"

int send_fail(struct send_ctx *ctx, int err, const char *op, uint64_t off,
	      bool has_off)
{
	return encio_error_set(ctx->e, err, op, ctx->src, has_off, off);
}

/* A signal asked to stop: the send ends where it is. */
int send_stopped(struct send_ctx *ctx)
{
	if (ctx->opts.stop && *ctx->opts.stop)
		return send_fail(ctx, EINTR, "send (interrupted)", 0, false);
	return 0;
}

/*
 * The resume point reached: the stats from now on are of the stream
 * written, the part before it having been sent by the run that was cut.
 */
static void send_resumed(struct send_ctx *ctx)
{
	struct send_stats *st = ctx->stats;

	st->resumed_at = ctx->w.skip_pos;
	st->files = st->dirs = st->others = 0;
	st->bytes_logical = st->bytes_encoded = st->extents_encoded = 0;
	st->clones = st->clone_bytes = 0;
}

int send_end_cmd(struct send_ctx *ctx)
{
	bool skipping = ctx->w.skip;
	int ret = stream_end_cmd(&ctx->w);

	if (ret)
		return encio_error_set(ctx->e, ret, "write stream to",
				       ctx->out_name, false, 0);
	if (skipping && !ctx->w.skip)
		send_resumed(ctx);
	return 0;
}

uint64_t send_layout(const struct send_ctx *ctx)
{
	uint64_t h = resume_fingerprint_add(0, SEND_LAYOUT_VERSION,
					    ctx->w.version,
					    (uint32_t)ctx->write_max);

	h = resume_fingerprint_add(h, ctx->opts.one_stream, 0, 0);
	return h ?: 1;
}

/*
 * The estimate, once known: the total from now on, and carried to the
 * receiver by the next command that can (stream.h). A resumed stream's is
 * of what follows its point.
 */
void send_progress_estimate(struct send_ctx *ctx)
{
	uint64_t bytes = send_estimate_bytes(&ctx->est);
	uint64_t from = ctx->opts.resume ? ctx->opts.resume->position : 0;

	if (!bytes) {
		send_estimate_hurry(&ctx->est);
		return;
	}
	bytes = bytes > from ? bytes - from : 1;
	ctx->stats->bytes_estimated = bytes;
	if (ctx->stats->bytes_total)
		return;
	ctx->stats->bytes_total = bytes;
	ctx->w.total = bytes;
}

void send_progress(struct send_ctx *ctx)
{
	if (!ctx->opts.progress)
		return;
	if (!ctx->stats->bytes_estimated)
		send_progress_estimate(ctx);
	ctx->stats->bytes_done = ctx->w.written + ctx->w.len;
	ctx->opts.progress(ctx->stats, ctx->opts.progress_arg);
}
