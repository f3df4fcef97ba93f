// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: what every file of send calls, at the bottom of the family:
 * its errors, a stop asked by a signal, the end of a command, progress.
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

int send_end_cmd(struct send_ctx *ctx)
{
	int ret = stream_end_cmd(&ctx->w);

	if (ret)
		return encio_error_set(ctx->e, ret, "write stream to",
				       ctx->out_name, false, 0);
	return 0;
}

void send_progress(struct send_ctx *ctx)
{
	if (!ctx->opts.progress)
		return;
	ctx->stats->bytes_done = ctx->w.written + ctx->w.len;
	ctx->opts.progress(ctx->stats, ctx->opts.progress_arg);
}
