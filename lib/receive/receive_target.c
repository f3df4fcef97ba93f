// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the subvolume being received, opened for the commands to
 * come (its write path probed once per device) and closed with what was
 * cached of it. Below resume and the commands that begin and end a
 * subvolume, which both open one.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "receive/receive_internal.h"

/* The cached directories are the subvolume's: they go with it. */
void rcv_subvol_close(struct receive_ctx *ctx)
{
	ctx->pending.active = false;
	ctx->fresh_valid = false;
	ctx->last_dir = NULL;
	rcv_dir_cache_clear(ctx);
	rcv_flags_forget(ctx);
	close_fd(&ctx->subvol_fd);
}

static int probe_dest(struct receive_ctx *ctx)
{
	struct stat st;
	int ret;

	if (ctx->opts.force_decompress) {
		ctx->write_mode = ENCIO_IO_NONE;
		return 0;
	}
	if (fstat(ctx->subvol_fd, &st))
		return -errno;
	if (ctx->probed && ctx->probed_dev == st.st_dev)
		return 0;
	ret = engine_probe_write(&ctx->engine, ctx->subvol_fd,
				 ctx->opts.io_mode, &ctx->probe);
	if (ret)
		return fail(ctx, ret, "write with the forced --io mode");
	ctx->probed = true;
	ctx->probed_dev = st.st_dev;
	/*
	 * Stream commands are applied one at a time, so a write is never
	 * overlapped with another: at depth 1 the ring only adds latency
	 * (design notes: 0.47 s against 0.28 s for the ioctl), whether or not
	 * the probe saw the write punted to io-wq. Auto takes the ioctl.
	 */
	if (ctx->opts.io_mode == ENCIO_IO_AUTO &&
	    ctx->probe.write_err[ENCIO_IO_IOCTL] == 0)
		ctx->probe.write_mode = ENCIO_IO_IOCTL;
	ctx->write_mode = ctx->probe.write_mode;
	return 0;
}

int rcv_subvol_start_at(struct receive_ctx *ctx, int dir, const char *name,
			const uint8_t *uuid, uint64_t ctransid)
{
	int fd;

	fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(ctx, errno, "open the new subvolume");
	rcv_subvol_close(ctx);
	ctx->subvol_fd = fd;
	ctx->root_times_kept = false;
	ctx->subvol_errors = 0;
	/* -s's working name is no name of DEST's: messages say the final */
	snprintf(ctx->subvol_name, sizeof(ctx->subvol_name), "%s",
		 dir == ctx->dest_fd ? name : ctx->rs.final);
	memcpy(ctx->uuid, uuid, BTRFS_UUID_SIZE);
	ctx->ctransid = ctransid;
	return probe_dest(ctx);
}
