// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the summary of a failure, in the words btrfs receive prints, and
 * the cause a callback gave added to the error's operation.
 */
#include <string.h>

#include "receive/receive_internal.h"

/*
 * The error's operation, the cause a callback gave added: it outlives the
 * reader and the context, since copy -r --subvolumes frees its receiver
 * before the error is printed. One per thread: an error is reported on the
 * thread that received.
 */
static __thread char error_op[RECEIVE_WHAT_LEN];

/*
 * The reader's message lives in the reader: copy it out, with the cause a
 * callback gave ("apply mkfile of 'x' (absolute path) from").
 */
void rcv_summary_describe_error(struct receive_ctx *ctx, struct encio_error *e)
{
	const char *op = e->op ? e->op : "receive";
	size_t len = strlen(op);
	static const char from[] = " from";
	size_t from_len = sizeof(from) - 1;

	if (ctx->finishing)
		snprintf(error_op, sizeof(error_op),
			 "finish subvolume '%s' (%s) from", ctx->subvol_name,
			 ctx->why ? ctx->why : "end");
	else if (ctx->why && len > from_len &&
		 strcmp(op + len - from_len, from) == 0)
		snprintf(error_op, sizeof(error_op), "%.*s (%s)%s",
			 (int)(len - from_len), op, ctx->why, from);
	else if (ctx->why)
		snprintf(error_op, sizeof(error_op), "%s (%s)", op, ctx->why);
	else
		snprintf(error_op, sizeof(error_op), "%s", op);
	e->op = error_op;
}

/* The words btrfs receive uses for a command that failed. */
static void summarize_cmd(struct receive_ctx *ctx, const char *err)
{
	char *out = ctx->summary;
	size_t len = sizeof(ctx->summary);
	const char *p = ctx->cmd_path, *p2 = ctx->cmd_path2;
	char uuid[BTRFS_UUID_UNPARSED_SIZE];

	if (ctx->lookup_failed) {
		rcv_lookup_uuid_format(ctx->lookup_uuid, uuid);
		if (ctx->lookup_unreachable &&
		    ctx->cmd == BTRFS_SEND_C_SNAPSHOT)
			snprintf(
				out, len,
				"parent subvol is not reachable from inside the root subvol");
		else if (ctx->lookup_unreachable)
			snprintf(out, len,
				 "clone: source subvol %s unreachable", uuid);
		else if (ctx->cmd == BTRFS_SEND_C_SNAPSHOT)
			snprintf(
				out, len,
				"snapshot receive: cannot find parent subvolume %s",
				uuid);
		else
			snprintf(out, len,
				 "clone: cannot find source subvol %s", uuid);
		return;
	}
	if (ctx->finishing) {
		snprintf(out, len, "finishing subvolume %.256s failed: %s",
			 ctx->subvol_name, err);
		return;
	}
	switch (ctx->cmd) {
	case BTRFS_SEND_C_SUBVOL:
		snprintf(out, len, "creating subvolume %.256s failed: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_SNAPSHOT:
		snprintf(out, len, "creating snapshot %.256s failed: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_SYMLINK:
	case BTRFS_SEND_C_RENAME:
	case BTRFS_SEND_C_LINK:
		snprintf(out, len, "%s %.256s -> %.256s failed: %s",
			 stream_cmd_name(ctx->cmd), p, p2, err);
		break;
	case BTRFS_SEND_C_MKSOCK:
		snprintf(out, len, "mknod %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_SET_XATTR:
		snprintf(out, len, "lsetxattr %.256s %.256s failed: %s", p, p2,
			 err);
		break;
	case BTRFS_SEND_C_REMOVE_XATTR:
		snprintf(out, len, "lremovexattr %.256s %.256s failed: %s", p,
			 p2, err);
		break;
	case BTRFS_SEND_C_WRITE:
		snprintf(out, len, "writing to %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_ENCODED_WRITE:
		snprintf(out, len,
			 "encoded_write: writing to %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_CLONE:
		snprintf(out, len, "failed to clone extents to %.256s: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_FALLOCATE:
		snprintf(out, len, "fallocate: fallocate on %.256s failed: %s",
			 p, err);
		break;
	case BTRFS_SEND_C_FILEATTR:
		snprintf(out, len,
			 "fileattr: set file attributes on %.256s failed: %s",
			 p, err);
		break;
	case BTRFS_SEND_C_ENABLE_VERITY:
		snprintf(out, len, "failed to enable verity on %.256s: %s", p,
			 err);
		break;
	default:
		snprintf(out, len, "%s %.256s failed: %s",
			 stream_cmd_name(ctx->cmd), p, err);
		break;
	}
}

/*
 * The summary of @e. A command failed when the error is at an offset the
 * reader is past and the callback of the command read last began;
 * otherwise the stream itself failed to read or parse. The reader's own
 * messages are told apart by their words.
 */
void rcv_summary_build(struct receive_ctx *ctx, const struct stream_reader *r,
		       const struct encio_error *e)
{
	const char *op = e->op ? e->op : "";

	ctx->summary[0] = '\0';
	if (!e->has_offset)
		return;
	if (e->offset < r->offset && ctx->cmd_end == r->offset) {
		summarize_cmd(ctx, strerror(e->err));
		return;
	}
	if (ctx->cmd == BTRFS_SEND_C_END && ctx->cmd_end == e->offset &&
	    e->offset == r->offset && e->err != EPROTONOSUPPORT)
		/* After an END comes a stream header or nothing. */
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "unexpected header");
	else if (e->err == EPROTONOSUPPORT)
		snprintf(
			ctx->summary, sizeof(ctx->summary),
			"stream version %u not supported, please use newer version",
			r->version);
	else if (strstr(op, "magic"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "unexpected header");
	else if (e->offset == 0 && r->buf_len == 0)
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "empty stream is not considered valid");
	else if (strstr(op, "crc32c"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "crc32 mismatch in command");
	else if (strstr(op, "truncated") || strstr(op, "ended without"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "short read from stream");
}

const char *receive_error_summary(const struct receive_ctx *ctx)
{
	return ctx->summary[0] ? ctx->summary : NULL;
}
