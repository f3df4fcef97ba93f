// SPDX-License-Identifier: GPL-2.0
/*
 * encio receive: apply a send stream beneath a destination directory.
 *
 * The context, the run over the stream's commands, -C, -E and -e; the
 * commands are applied by the files receive_internal.h lists.
 *
 * Where the decisions are made: whether a parent or clone source found
 * by UUID is trusted (encio's mark, the owner, one in DEST), in
 * receive_lookup.c (rcv_lookup_open_subvol_by_uuid()); whether an
 * ENCODED_WRITE is written encoded or decoded first, in receive_apply.c
 * (apply_encoded_write(): decoded where the kernel refuses it), and
 * whether a CLONE is copied instead (rcv_clone(): nocow and copy-on-write
 * files cannot share); when append-only or immutable are lifted and put
 * back, in receive_flags.c (rcv_flags_lift(), rcv_flags_finish()); where
 * a subvolume is built and when it gets its name, in receive_resume.c
 * (rcv_resume_subvol_begin(), rcv_resume_subvol_finish()), and when a
 * checkpoint is taken (rcv_resume_applied()); whether a subvolume is
 * finished, marked and made read-only, in receive_subvol.c.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

#include "receive/receive_internal.h"

/* One request for the synchronous encoded write, one for the probe. */
#define RECEIVE_ENGINE_DEPTH 2

int receive_ctx_new(struct receive_ctx **ret,
		    const struct receive_options *opts, struct encio_error *e)
{
	struct engine_config config = { .depth = RECEIVE_ENGINE_DEPTH,
					.force_backing = -1 };
	struct receive_ctx *ctx;
	int err, i;

	*ret = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return encio_error_set(e, ENOMEM, "allocate", "receive", false,
				       0);
	ctx->opts = *opts;
	ctx->dest_fd = ctx->mnt_fd = ctx->subvol_fd = ctx->write_fd = -1;
	ctx->clone_src_fd = -1;
	ctx->part.state_fd = ctx->part.name_fd = ctx->part.lock_fd = -1;
	ctx->euid = geteuid();
	ctx->egid = getegid();
	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		ctx->dirs[i].fd = -1;
	err = engine_init(&ctx->engine, &config);
	if (err) {
		receive_ctx_free(ctx);
		return encio_error_set(e, err, "set up", "the I/O engine",
				       false, 0);
	}
	ctx->engine_ready = true;
	ctx->codec = codec_new();
	ctx->decode_buf = malloc(BTRFS_MAX_UNCOMPRESSED);
	if (!ctx->codec || !ctx->decode_buf) {
		receive_ctx_free(ctx);
		return encio_error_set(e, ENOMEM, "allocate", "the decoder",
				       false, 0);
	}
	*ret = ctx;
	return 0;
}

void receive_ctx_free(struct receive_ctx *ctx)
{
	if (!ctx)
		return;
	close_fd(&ctx->write_fd);
	rcv_subvol_close(ctx);
	close_fd(&ctx->clone_src_fd);
	close_fd(&ctx->mnt_fd);
	close_fd(&ctx->dest_fd);
	if (ctx->engine_ready)
		engine_release(&ctx->engine);
	codec_free(ctx->codec);
	free(ctx->decode_buf);
	free(ctx);
}

void receive_set_events(struct receive_ctx *ctx,
			const struct receive_events *events)
{
	ctx->events = *events;
}

void receive_set_progress(struct receive_ctx *ctx, receive_progress_fn fn,
			  void *arg)
{
	ctx->progress = fn;
	ctx->progress_arg = arg;
}

void receive_set_read_only(struct receive_ctx *ctx, bool read_only)
{
	ctx->leave_writable = !read_only;
}

void receive_set_name(struct receive_ctx *ctx, const char *name)
{
	snprintf(ctx->given_name, sizeof(ctx->given_name), "%s", name ?: "");
}

void receive_set_resumable(struct receive_ctx *ctx, bool resumable)
{
	ctx->opts.resumable = resumable;
}

const struct receive_stats *receive_get_stats(const struct receive_ctx *ctx)
{
	return &ctx->stats;
}

const struct encio_probe *receive_get_probe(const struct receive_ctx *ctx)
{
	return ctx->probed ? &ctx->probe : NULL;
}

/*
 * chroot() into the destination (-C), as btrfs receive does: the mount's
 * root is opened before, so parents are found as without -C, and every
 * later access is through descriptors. The working directory is left in
 * /proc/self/fd, which names them for the calls that take a path.
 */
static int enter_dest(struct receive_ctx *ctx, struct encio_error *e)
{
	int ret, proc;

	ret = rcv_lookup_open_mount_root(ctx);
	if (ret)
		return encio_error_set(e, ret, ctx->why, "the destination",
				       false, 0);
	proc = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0)
		return encio_error_set(e, errno, "open", "/proc/self/fd", false,
				       0);
	ret = fchdir(ctx->dest_fd) || chroot(".") || fchdir(proc) ? -errno : 0;
	close(proc);
	if (ret)
		return encio_error_set(e, ret, "chroot into the destination",
				       "the destination", false, 0);
	ctx->chrooted = true;
	return 0;
}

int receive_stream_open(struct receive_ctx *ctx, struct stream_reader *r,
			int stream_fd, const char *stream_name,
			struct encio_error *e)
{
	int ret;

	memset(e, 0, sizeof(*e));
	ctx->summary[0] = '\0';
	stream_fd_tune(stream_fd);
	ret = stream_reader_init(r, stream_fd, stream_name, e);
	r->stop = ctx->opts.stop;
	if (ret) {
		rcv_summary_build(ctx, r, e);
		stream_reader_release(r);
	}
	return ret;
}

int receive_run(struct receive_ctx *ctx, int stream_fd, const char *stream_name,
		const char *dest, struct encio_error *e)
{
	return receive_run_reader(ctx, NULL, stream_fd, stream_name, dest, e);
}

int receive_run_reader(struct receive_ctx *ctx, struct stream_reader *opened,
		       int stream_fd, const char *stream_name, const char *dest,
		       struct encio_error *e)
{
	struct stream_reader own, *rp = opened ?: &own;
	uint64_t errors = 0, resume_at;
	bool after_end = false;
	struct statfs sfs;
	int ret;

	memset(e, 0, sizeof(*e));
	ctx->summary[0] = '\0';
	if (!opened)
		stream_fd_tune(stream_fd);
	ctx->dest_fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ctx->dest_fd < 0)
		return encio_error_set(e, errno, "open the destination", dest,
				       false, 0);
	/* Said before the stream is read: a subvolume needs btrfs. */
	if (!fstatfs(ctx->dest_fd, &sfs) && sfs.f_type != BTRFS_SUPER_MAGIC) {
		close_fd(&ctx->dest_fd);
		if (opened)
			stream_reader_release(opened);
		return encio_error_set(e, EOPNOTSUPP,
				       "receive (not a btrfs filesystem) into",
				       dest, false, 0);
	}
	ctx->why = NULL;
	ctx->finishing = false;
	ctx->ended = false;
	ctx->stats.partial_kept[0] = '\0';
	ctx->stats.partial_refused[0] = '\0';
	ctx->stats.left_unfinished[0] = '\0';
	ctx->subvol_errors = 0;
	ctx->cmd = BTRFS_SEND_C_UNSPEC;
	ctx->cmd_end = 0;
	ret = ctx->opts.chroot ? enter_dest(ctx, e) : 0;
	if (ret) {
		close_fd(&ctx->mnt_fd);
		close_fd(&ctx->dest_fd);
		if (opened)
			stream_reader_release(opened);
		return ret;
	}
	ctx->reader = rp;
	if (!opened) {
		ret = stream_reader_init(rp, stream_fd, stream_name, e);
		rp->stop = ctx->opts.stop;
		if (ret) {
			rcv_summary_build(ctx, rp, e);
			goto out;
		}
	}
	for (;;) {
		resume_at = rp->offset;
		ret = stream_process(rp, &rcv_apply_ops, ctx, e);
		if (!ret || ctx->ended ||
		    (after_end && e->offset == resume_at && e->err == EBADMSG &&
		     rp->eof && rp->buf_pos == rp->buf_len)) {
			/*
			 * The end of the input; an END that stops the
			 * receive (-e, or failed commands before it), the
			 * rest not read; or no END after a failed last one.
			 */
			memset(e, 0, sizeof(*e));
			ret = errors ? 1 : 0;
			ctx->summary[0] = '\0';
			break;
		}
		rcv_summary_describe_error(ctx, e);
		rcv_summary_build(ctx, rp, e);
		ctx->stats.errors++;
		errors++;
		/*
		 * A failed command was read whole: the next one can be
		 * applied. A stream that failed to read cannot go on.
		 */
		if (!(e->has_offset && e->offset < rp->offset) ||
		    !ctx->events.error ||
		    (ctx->opts.max_errors && errors >= ctx->opts.max_errors))
			break;
		ctx->events.error(e, receive_error_summary(ctx),
				  ctx->events.arg);
		ctx->subvol_errors++;
		/*
		 * An END that failed may be the input's last command: the
		 * reader then finds no END after it, which is no error.
		 */
		after_end = ctx->cmd == BTRFS_SEND_C_END &&
			    ctx->cmd_end == rp->offset;
		ctx->why = NULL;
		ctx->finishing = false;
	}
out:
	ctx->stats.stream_bytes = rp->offset;
	ctx->stats.stream_total = rp->sender_total;
	/* a read failed: every command before it was applied whole */
	if (ret)
		rcv_resume_stopped(ctx,
				   !(e->has_offset && e->offset < rp->offset),
				   e->err);
	/* A subvolume not finished stays writable and not received. */
	close_fd(&ctx->write_fd);
	rcv_subvol_close(ctx);
	rcv_resume_release(ctx);
	close_fd(&ctx->clone_src_fd);
	close_fd(&ctx->mnt_fd);
	close_fd(&ctx->dest_fd);
	ctx->reader = NULL;
	stream_reader_release(rp);
	return ret;
}
