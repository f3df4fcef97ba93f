// SPDX-License-Identifier: GPL-2.0
/*
 * encio send of what the kernel computes: BTRFS_IOC_SEND writes the whole
 * stream of a subvolume, or of its difference from a parent, with the
 * data itself (BTRFS_SEND_FLAG_COMPRESSED from version 2 on: compressed
 * extents as ENCODED_WRITE, as btrfs send --compressed-data makes it), or
 * without it under --no-data. The kernel knows which inode each command
 * names and which data each range holds, also across renames, reused
 * inode numbers and a concurrent balance; nothing of that is rebuilt
 * here. Each command is relayed as it comes, but the SUBVOL or SNAPSHOT
 * command, which takes the name asked for, and END, which is ours to
 * place when several subvolumes make one stream.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel.h"
#include "send_priv.h"

struct relay {
	struct send_ctx *ctx;
	const char *name; /* the subvolume's name in the stream, or NULL */
};

static uint64_t attr_u64(const struct stream_cmd *cmd, unsigned int attr)
{
	const struct stream_attr *a = &cmd->attr[attr];
	uint64_t v = 0;

	if (a->present && a->len == sizeof(v))
		memcpy(&v, a->data, sizeof(v));
	return le64toh(v);
}

/* SUBVOL or SNAPSHOT, under the name asked for. */
static int put_subvol(struct relay *r, const struct stream_cmd *cmd)
{
	struct stream_writer *w = &r->ctx->w;
	unsigned int a;

	if (!r->name)
		return stream_put_cmd(w, cmd);
	stream_begin_cmd(w, cmd->type);
	stream_put_string(w, BTRFS_SEND_A_PATH, r->name);
	for (a = BTRFS_SEND_A_UUID; a <= BTRFS_SEND_A_MAX; a++)
		if (a != BTRFS_SEND_A_PATH && cmd->attr[a].present)
			stream_put_bytes(w, a, cmd->attr[a].data,
					 cmd->attr[a].len);
	return stream_end_cmd(w);
}

/* The summary's counts, from the commands as they pass. */
static void count_cmd(struct send_stats *st, const struct stream_cmd *cmd)
{
	switch (cmd->type) {
	case BTRFS_SEND_C_MKFILE:
		st->files++;
		break;
	case BTRFS_SEND_C_MKDIR:
		st->dirs++;
		break;
	case BTRFS_SEND_C_MKNOD:
	case BTRFS_SEND_C_MKFIFO:
	case BTRFS_SEND_C_MKSOCK:
	case BTRFS_SEND_C_SYMLINK:
	case BTRFS_SEND_C_LINK:
		st->others++;
		break;
	case BTRFS_SEND_C_WRITE:
		st->bytes_logical += cmd->attr[BTRFS_SEND_A_DATA].len;
		break;
	case BTRFS_SEND_C_ENCODED_WRITE:
		st->bytes_logical +=
			attr_u64(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN);
		st->bytes_encoded += cmd->attr[BTRFS_SEND_A_DATA].len;
		st->extents_encoded++;
		break;
	case BTRFS_SEND_C_CLONE:
		st->clones++;
		st->clone_bytes += attr_u64(cmd, BTRFS_SEND_A_CLONE_LEN);
		break;
	default:
		break;
	}
}

static int relay_cmd(struct relay *r, const struct stream_cmd *cmd)
{
	struct send_ctx *ctx = r->ctx;
	int ret;

	if (cmd->type == BTRFS_SEND_C_END)
		return 0;
	count_cmd(ctx->stats, cmd);
	if (cmd->type == BTRFS_SEND_C_SUBVOL ||
	    cmd->type == BTRFS_SEND_C_SNAPSHOT)
		ret = put_subvol(r, cmd);
	else
		ret = stream_put_cmd(&ctx->w, cmd);
	if (ret)
		return encio_error_set(ctx->e, -ret, "write stream to",
				       ctx->out_name, false, 0);
	return 0;
}

static int relay_stream(struct relay *r, int read_fd)
{
	struct send_ctx *ctx = r->ctx;
	struct stream_reader rd;
	struct stream_cmd cmd;
	int ret;

	ret = stream_reader_init(&rd, read_fd, "the kernel's send stream",
				 ctx->e);
	if (ret)
		return ret;
	if (rd.version != ctx->w.version) {
		ret = encio_error_set(
			ctx->e, EPROTO,
			"send (the kernel's stream has another version)",
			ctx->src, false, 0);
		goto out;
	}
	while ((ret = stream_read_cmd(&rd, &cmd, ctx->e)) > 0) {
		ret = send_stopped(ctx) ?: relay_cmd(r, &cmd);
		if (ret)
			break;
	}
out:
	stream_reader_release(&rd);
	return ret;
}

/* The kernel's send run now, its stream relayed as it comes. */
static int relay_kernel(struct relay *r, struct kernel_send *ks,
			const char *root)
{
	struct send_ctx *ctx = r->ctx;
	pthread_t thread;
	int read_fd, ret;

	ret = send_kernel_start(ks, &thread, &read_fd);
	if (ret)
		return send_fail(ctx, ret, "start the send of", 0, false);
	ret = relay_stream(r, read_fd);
	/* a relay stopped early: the kernel's next write fails, EPIPE */
	close(read_fd);
	pthread_join(thread, NULL);
	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	if (ks->err && ks->err != EPIPE)
		ret = send_fail(ctx, ks->err, "send (BTRFS_IOC_SEND)", 0,
				false);
	return ret;
}

int send_kernel_tree(struct send_ctx *ctx, const char *root, const char *name,
		     uint64_t parent_id, const uint64_t *clone_ids,
		     size_t nr_clone_ids, bool end)
{
	struct relay r = { .ctx = ctx, .name = name };
	struct kernel_send ks;
	int root_fd, pass_fd = -ESTALE, ret;

	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return send_fail(ctx, errno, "open", 0, false);
	send_kernel_init(&ks, root_fd, parent_id, clone_ids, nr_clone_ids,
			 ctx->w.version, ctx->opts.no_data);
	/* a pass made before, if made for this: else the kernel's, now */
	if (ctx->opts.pass)
		pass_fd = send_pass_open(ctx->opts.pass, &ks);
	if (pass_fd >= 0) {
		ctx->stats->passes_reused++;
		ret = relay_stream(&r, pass_fd);
		close(pass_fd);
	} else {
		ret = relay_kernel(&r, &ks, root);
	}
	if (!ret && end) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_END);
		ret = send_end_cmd(ctx);
	}
	close(root_fd);
	return ret;
}
