// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: the pieces a file's data ranges are read in, their reads and
 * their commands (WRITE, ENCODED_WRITE). Below sharing: send_share.c cuts
 * a file's map into pieces here, send_data.c decides which are read and
 * emits them in order; nothing here asks either.
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
 * Data counted, not read (send -n, or before a resume point), reached a
 * command the writer does write: its data must be read from ctx->data_from.
 */
#define SEND_DATA_WANTED 2

/*
 * The data of a command about to be put: whether it is there, or, counted
 * (@data NULL) where the writer no longer drops it, wanted from @offset.
 */
static int data_wanted(struct send_ctx *ctx, const void *data, uint64_t offset)
{
	if (data || stream_writer_drops(&ctx->w))
		return 0;
	ctx->data_from = offset;
	return SEND_DATA_WANTED;
}

/*
 * WRITE commands of ctx->write_max bytes at most; @data NULL: counted
 * (SEND_DATA_WANTED where it is needed).
 */
static int send_write(struct send_ctx *ctx, const char *path, const char *data,
		      size_t len, uint64_t offset)
{
	bool sent;
	int ret;

	while (len) {
		size_t n = len < ctx->write_max ? len : ctx->write_max;

		ret = data_wanted(ctx, data, offset);
		if (ret)
			return ret;
		sent = !ctx->w.skip;
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_WRITE);
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_FILE_OFFSET, offset);
		stream_put_data(&ctx->w, data, n);
		ret = send_end_cmd(ctx);
		if (ret)
			return ret;
		if (sent)
			ctx->stats->bytes_logical += n;
		if (data)
			data += n;
		len -= n;
		offset += n;
	}
	return 0;
}

/*
 * An encoded read's extent as ENCODED_WRITE, standing for @len bytes;
 * @counted: the read was not made (SEND_DATA_WANTED where it is needed).
 */
static int send_encoded(struct send_ctx *ctx, const char *path,
			const struct engine_req *req, uint64_t len,
			bool counted)
{
	const struct btrfs_ioctl_encoded_io_args *a = &req->args;
	int ret = data_wanted(ctx, counted ? NULL : req, req->offset);

	if (ret)
		return ret;
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_ENCODED_WRITE);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_FILE_OFFSET, req->offset);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_UNENCODED_FILE_LEN, len);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_UNENCODED_LEN, a->unencoded_len);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_UNENCODED_OFFSET,
		       a->unencoded_offset);
	stream_put_u32(&ctx->w, BTRFS_SEND_A_COMPRESSION, a->compression);
	/* optional, and left out when none, as the kernel's send does */
	if (a->encryption)
		stream_put_u32(&ctx->w, BTRFS_SEND_A_ENCRYPTION, a->encryption);
	stream_put_data(&ctx->w,
			counted ? NULL : engine_req_buf(&ctx->engine, req),
			req->res);
	ctx->stats->bytes_logical += len;
	ctx->stats->bytes_encoded += req->res;
	ctx->stats->extents_encoded++;
	return send_end_cmd(ctx);
}

/*
 * Emit a completed encoded read, no further than @limit (a read returns
 * the rest of its extent, which may reach past the range asked for);
 * *@covered gets the bytes of the file it stood for (0 at EOF). A
 * compressed extent is cut at @limit where that is a sector boundary.
 */
static int send_read_result(struct send_ctx *ctx, const char *path,
			    const struct engine_req *req, uint64_t limit,
			    bool counted, uint64_t *covered)
{
	uint64_t len;

	*covered = 0;
	if (req->res < 0)
		return send_fail(ctx, req->res, "encoded read", req->offset,
				 true);
	if (req->res == 0)
		return 0;
	if (req->args.compression == BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		len = req->res;
		if (req->offset + len > limit && limit > req->offset)
			len = limit - req->offset;
		*covered = len;
		return send_write(ctx, path,
				  counted ? NULL :
					    engine_req_buf(&ctx->engine, req),
				  len, req->offset);
	}
	len = req->args.len;
	if (req->offset + len > limit && limit > req->offset &&
	    !(limit % SEND_BLOCK))
		len = limit - req->offset;
	*covered = len;
	return send_encoded(ctx, path, req, len, counted);
}

/* One encoded read of @fd at @offset alone (nothing else in flight). */
static int read_one(struct send_ctx *ctx, int fd, const char *path,
		    uint64_t offset, uint64_t limit, uint64_t *covered)
{
	struct engine_req *req = engine_get_req(&ctx->engine);
	int ret;

	if (!req)
		return send_fail(ctx, EBUSY, "encoded read", offset, true);
	engine_encoded_read(&ctx->engine, req, ctx->probe.read_mode, fd,
			    offset);
	if (engine_wait(&ctx->engine, req) < 0 && engine_inflight(&ctx->engine))
		return send_fail(ctx, EIO, "io_uring wait", offset, true);
	ret = send_read_result(ctx, path, req, limit, false, covered);
	engine_put_req(&ctx->engine, req);
	return ret;
}

int send_push_piece(struct send_ctx *ctx, uint64_t start, uint64_t end,
		    bool whole)
{
	if (ctx->nr_pieces == ctx->cap_pieces) {
		size_t cap = ctx->cap_pieces ? ctx->cap_pieces * 2 : 64;
		struct send_piece *p = realloc(ctx->pieces, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ctx->pieces = p;
		ctx->cap_pieces = cap;
	}
	ctx->pieces[ctx->nr_pieces++] = (struct send_piece){ .start = start,
							     .end = end,
							     .whole = whole };
	return 0;
}

int send_push_range(struct send_ctx *ctx, const struct file_extent *fe,
		    uint64_t start, uint64_t end)
{
	size_t slot = ctx->engine.pool.slot_size;
	bool plain = false;
	int ret;

	if (fe->compression != BTRFS_COMPRESS_NONE) {
		if (end - start >= fe->disk_bytes || fe->disk_bytes == 0) {
			ret = send_push_piece(ctx, start, end, true);
			if (!ret)
				ctx->pieces[ctx->nr_pieces - 1].fe = *fe;
			return ret;
		}
		plain = true;
	}
	for (; start < end; start += slot) {
		ret = send_push_piece(ctx, start,
				      end - start < slot ? end : start + slot,
				      false);
		if (ret)
			return ret;
		ctx->pieces[ctx->nr_pieces - 1].plain = plain;
		ctx->pieces[ctx->nr_pieces - 1].fe = *fe;
	}
	return 0;
}

/*
 * Data ranges of @map as pieces, in file order, appended to ctx->pieces;
 * holes and prealloc left out.
 */
int send_map_pieces(struct send_ctx *ctx, const struct extent_map *map)
{
	size_t i;
	int ret;

	for (i = 0; i < map->nr; i++) {
		const struct file_extent *fe = &map->ext[i];
		uint64_t start = fe->offset, end = fe->offset + fe->len;

		if (fe->kind == EXTENT_HOLE || fe->kind == EXTENT_PREALLOC)
			continue;
		if (end > map->size)
			end = map->size;
		if (start >= end)
			continue;
		ret = send_push_range(ctx, fe, start, end);
		if (ret)
			return ret;
	}
	return 0;
}

/* Reap every request of the window; the first error wins. */
int send_reap_all(struct send_ctx *ctx)
{
	struct engine_req *req;
	int err, ret = 0;

	while (engine_inflight(&ctx->engine)) {
		req = engine_reap(&ctx->engine, true, &err);
		if (err && !ret)
			ret = send_fail(ctx, err, "io_uring wait", 0, false);
		if (!req && err)
			return ret;
	}
	return ret;
}

/*
 * -n, or before a resume point: what the encoded read of @p would return,
 * from its extent, nothing read: a compressed extent whole (the kernel
 * returns its bytes on disk), plain data as the piece's bytes of
 * compression NONE.
 */
static void estimate_read(struct send_ctx *ctx, struct send_piece *p)
{
	const struct file_extent *fe = &p->fe;
	struct engine_req *req = engine_get_req(&ctx->engine);

	memset(&req->args, 0, sizeof(req->args));
	req->offset = p->start;
	req->args.len = p->end - p->start;
	req->res = (ssize_t)(p->end - p->start);
	if (p->whole && fe->compression != BTRFS_COMPRESS_NONE) {
		req->res = (ssize_t)fe->disk_bytes;
		req->args.unencoded_len = fe->ram_bytes;
		req->args.unencoded_offset =
			fe->extent_offset + (p->start - fe->offset);
		req->args.compression = (uint32_t)extent_encoded_io_compression(
			fe->compression, SEND_BLOCK);
	}
	p->req = req;
	p->counted = true;
}

void send_issue_pieces(struct send_ctx *ctx, int fd, size_t first, size_t last)
{
	size_t i;

	for (i = first; i < last; i++) {
		struct send_piece *p = &ctx->pieces[i];

		p->counted = false;
		if (p->clone || p->plain)
			continue;
		if (stream_writer_drops(&ctx->w)) {
			estimate_read(ctx, p);
			continue;
		}
		p->req = engine_get_req(&ctx->engine);
		engine_encoded_read(&ctx->engine, p->req, ctx->probe.read_mode,
				    fd, p->start);
	}
}

/*
 * pread [@pos, @end) and send it as WRITEs: 0, 1 where the file ended
 * before @end, or an error.
 */
int send_range_plain(struct send_ctx *ctx, int fd, const char *path,
		     uint64_t pos, uint64_t end)
{
	struct stat st;
	uint64_t stop;
	int ret;

	/* counted: the WRITEs of the range as the file's size bounds it */
	if (stream_writer_drops(&ctx->w)) {
		if (fstat(fd, &st))
			return send_fail(ctx, errno, "stat", 0, false);
		stop = end < (uint64_t)st.st_size ? end : (uint64_t)st.st_size;
		ret = send_write(ctx, path, NULL, stop > pos ? stop - pos : 0,
				 pos);
		if (ret != SEND_DATA_WANTED)
			return ret ?: stop < end;
		/* the resume point: read from there on */
		pos = ctx->data_from;
	}
	while (pos < end) {
		size_t want = end - pos < ctx->write_max ? end - pos :
							   ctx->write_max;
		ssize_t n;

		ret = send_stopped(ctx);
		if (ret)
			return ret;
		n = pread(fd, ctx->buf, want, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return send_fail(ctx, errno, "read", pos, true);
		if (n == 0)
			return 1;
		ret = send_write(ctx, path, ctx->buf, n, pos);
		if (ret)
			return ret;
		pos += n;
	}
	return 0;
}

/*
 * A plain encoded read stops at the end of the kernel's cached extent map,
 * which depends on writeback timing: the rest of the piece is read with
 * pread (nothing is in flight), so that its commands are framed by the
 * piece, whatever the read returned, and a snapshot always gives the same
 * stream.
 */
static int top_up_plain(struct send_ctx *ctx, int fd, struct engine_req *req,
			uint64_t end)
{
	char *buf = engine_req_buf(&ctx->engine, req);
	uint64_t pos = req->offset + req->res;
	ssize_t n;

	if (req->res <= 0 ||
	    req->args.compression != BTRFS_ENCODED_IO_COMPRESSION_NONE)
		return 0;
	if (end > req->offset + ctx->engine.pool.slot_size)
		end = req->offset + ctx->engine.pool.slot_size;
	while (pos < end) {
		n = pread(fd, buf + (pos - req->offset), end - pos, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return send_fail(ctx, errno, "read", pos, true);
		if (n == 0)
			break;
		pos += n;
	}
	req->res = pos - req->offset;
	return 0;
}

/*
 * The counted piece @p reached the resume point at ctx->data_from: read
 * from there, its commands cut as the whole piece's would be (plain data
 * in WRITEs of write_max from the piece's start, pread to fill them; a
 * compressed extent read whole).
 */
static int emit_wanted(struct send_ctx *ctx, int fd, const char *path,
		       struct send_piece *p, bool *eof)
{
	bool plain = p->req->args.compression ==
		     BTRFS_ENCODED_IO_COMPRESSION_NONE;
	uint64_t covered = 1, pos = ctx->data_from;
	int ret = 0;

	engine_put_req(&ctx->engine, p->req);
	p->req = NULL;
	if (plain) {
		ret = send_range_plain(ctx, fd, path, pos, p->end);
		*eof |= ret == 1;
		return ret == 1 ? 0 : ret;
	}
	for (; !ret && covered && pos < p->end; pos += covered)
		ret = read_one(ctx, fd, path, pos, p->end, &covered);
	*eof |= !covered;
	return ret;
}

int send_piece_emit_read(struct send_ctx *ctx, int fd, const char *path,
			 struct send_piece *p, bool *eof)
{
	uint64_t covered, pos;
	int ret;

	ret = p->counted ? 0 : top_up_plain(ctx, fd, p->req, p->end);
	if (ret)
		return ret;
	ret = send_read_result(ctx, path, p->req, p->end, p->counted, &covered);
	if (ret == SEND_DATA_WANTED)
		return emit_wanted(ctx, fd, path, p, eof);
	if (!covered)
		*eof = true;
	/* Shorter than mapped (the file changed): the rest. */
	for (pos = p->start + covered; !ret && covered && pos < p->end;
	     pos += covered)
		ret = read_one(ctx, fd, path, pos, p->end, &covered);
	return ret;
}
