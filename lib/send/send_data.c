// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: a file's data as stream commands. Data ranges are read in
 * windows of up to the engine's depth: compressed extents whole, by encoded
 * reads (ENCODED_WRITE), plain ranges in slot-sized pieces (by encoded reads
 * too, which return them as compression NONE, or by pread where encoded
 * reads are impossible; WRITE). Every read of a window is reaped before its
 * commands are written, in file-offset order. Which ranges are clones is
 * send_share.c's decision, asked here; the pieces and their reads are
 * send_piece.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/extents.h"
#include "send/send.h"
#include "send/send_internal.h"
#include "stream/stream.h"

/*
 * Emit pieces [first, last) of @fd, read already, in order (@ret: the
 * reaping's error, which only releases them).
 */
int send_emit_pieces(struct send_ctx *ctx, int fd, const char *path,
		     size_t first, size_t last, bool *eof, int ret)
{
	size_t i;

	for (i = first; i < last; i++) {
		struct send_piece *p = &ctx->pieces[i];

		if (p->clone || p->plain) {
			if (!ret && !*eof)
				ret = p->clone ? send_clone_checked(ctx, fd,
								    path, p) :
						 send_range_plain(ctx, fd, path,
								  p->start,
								  p->end);
			*eof |= ret == 1;
			ret = ret == 1 ? 0 : ret;
			continue;
		}
		if (!ret && !*eof)
			ret = send_piece_emit_read(ctx, fd, path, p, eof);
		if (p->req)
			engine_put_req(&ctx->engine, p->req);
		p->req = NULL;
	}
	send_clone_checks_end(ctx);
	return ret;
}

/* Issue pieces [first, last), reap them all, and emit them in order. */
static int send_window(struct send_ctx *ctx, int fd, const char *path,
		       size_t first, size_t last, bool *eof)
{
	send_issue_pieces(ctx, fd, first, last);
	return send_emit_pieces(ctx, fd, path, first, last, eof,
				send_reap_all(ctx));
}

int send_data_encoded(struct send_ctx *ctx, int fd, const char *path,
		      const struct extent_map *map)
{
	size_t depth = ctx->engine.depth, i, last;
	bool eof = false;
	int ret;

	ctx->nr_pieces = 0;
	ret = send_share_map(ctx, fd, path, map);
	if (ret)
		return send_fail(ctx, ret, "map extents of", 0, false);
	for (i = 0; i < ctx->nr_pieces && !eof; i = last) {
		last = i + depth < ctx->nr_pieces ? i + depth : ctx->nr_pieces;
		ret = send_stopped(ctx) ?:
			      send_window(ctx, fd, path, i, last, &eof);
		if (ret)
			return ret;
		send_progress(ctx);
	}
	return 0;
}

/* Without encoded reads: pread the data ranges, nothing else in flight. */
int send_data_plain(struct send_ctx *ctx, int fd, const char *path,
		    const struct extent_map *map)
{
	size_t i;
	int ret = 0;

	for (i = 0; i < map->nr && !ret; i++) {
		const struct file_extent *fe = &map->ext[i];
		uint64_t end = fe->offset + fe->len;

		if (fe->kind == EXTENT_HOLE || fe->kind == EXTENT_PREALLOC)
			continue;
		ret = send_range_plain(ctx, fd, path, fe->offset,
				       end < map->size ? end : map->size);
	}
	return ret < 0 ? ret : 0;
}

int send_data_to_eof(struct send_ctx *ctx, int fd, const char *path)
{
	int ret = send_range_plain(ctx, fd, path, 0, UINT64_MAX);

	return ret < 0 ? ret : 0;
}

int send_prealloc(struct send_ctx *ctx, const char *path,
		  const struct extent_map *map, bool past_eof)
{
	uint64_t eof_block = (map->size + SEND_BLOCK - 1) & ~(SEND_BLOCK - 1);
	size_t i;
	int ret;

	for (i = 0; i < map->nr; i++) {
		const struct file_extent *fe = &map->ext[i];
		uint64_t start = fe->offset, end = fe->offset + fe->len;

		if (fe->kind != EXTENT_PREALLOC)
			continue;
		/* The block holding EOF is the mode 0 range's: whole blocks. */
		if (past_eof && start < eof_block)
			start = eof_block;
		if (!past_eof && end > map->size)
			end = map->size;
		if (start >= end)
			continue;
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_FALLOCATE);
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
		stream_put_u32(&ctx->w, BTRFS_SEND_A_FALLOCATE_MODE,
			       past_eof ? FALLOC_FL_KEEP_SIZE : 0);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_FILE_OFFSET, start);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_SIZE, end - start);
		ret = send_end_cmd(ctx);
		if (ret)
			return ret;
	}
	return 0;
}
