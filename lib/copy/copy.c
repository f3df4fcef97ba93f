// SPDX-License-Identifier: GPL-2.0
/*
 * Copy one regular file through the engine.
 *
 * The file's extent map drives the work: compressed extents become encoded
 * reads whose completions (in any order) become encoded writes at the same
 * offset, or are decoded and written plain where the destination refuses
 * them; plain ranges are read in slot-sized pieces and written plain; holes
 * are skipped; prealloc ranges are fallocated. Every extent lands at its own
 * offset, so completion order does not matter.
 *
 * Where the decisions are made: which I/O path reads and which writes, in
 * copy_probe_fds() here on lib/io/engine.c's probe (per filesystem);
 * whether an encoded extent is written encoded, decoded or recompressed,
 * and whether a plain chunk is compressed (--compress), here when its read
 * completes; whether a range is cloned instead of written, in
 * copy_share.c; whether a source changed while it was copied, in
 * copy_job_has_work() here.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "codec/codec.h"
#include "copy/copy_internal.h"
#include "codec/cpool.h"
#include "fs/extents.h"
#include "base/fsutil.h"
#include "base/invariant.h"
#include "fs/meta.h"

static void copy_ctx_release(struct copy_ctx *ctx);

static int copy_ctx_init(struct copy_ctx *ctx, const struct copy_options *opts)
{
	struct engine_config config = {
		.depth = opts->depth,
		.force_backing = opts->force_backing,
	};
	int ret;

	memset(ctx, 0, sizeof(*ctx));
	ctx->opts = *opts;
	ctx->clone_fd = -1;
	ctx->holder_fd = -1;
	ret = engine_init(&ctx->engine, &config);
	if (ret)
		return ret;
	ctx->codec = codec_new();
	ctx->decode_buf = malloc(BTRFS_MAX_UNCOMPRESSED);
	ctx->chunk_buf = malloc(BTRFS_MAX_UNCOMPRESSED);
	ctx->encode_buf = malloc(BTRFS_MAX_UNCOMPRESSED);
	if (!ctx->codec || !ctx->decode_buf || !ctx->chunk_buf ||
	    !ctx->encode_buf) {
		copy_ctx_release(ctx);
		return -ENOMEM;
	}
	if (opts->verify) {
		ret = verify_ctx_init(&ctx->verify);
		if (ret) {
			copy_ctx_release(ctx);
			return ret;
		}
	}
	if (opts->compress.alg != BTRFS_COMPRESS_NONE ||
	    opts->recompress.alg != BTRFS_COMPRESS_NONE) {
		ret = cpool_init(&ctx->cpool, opts->threads);
		if (ret) {
			copy_ctx_release(ctx);
			return ret;
		}
		ctx->cpool_started = true;
	}
	return 0;
}

static void copy_ctx_release(struct copy_ctx *ctx)
{
	if (ctx->cpool_started)
		cpool_release(&ctx->cpool);
	engine_release(&ctx->engine);
	codec_free(ctx->codec);
	free(ctx->decode_buf);
	free(ctx->chunk_buf);
	free(ctx->encode_buf);
	verify_ctx_release(&ctx->verify);
	if (ctx->clone_fd >= 0)
		close(ctx->clone_fd);
	if (ctx->holder_fd >= 0)
		close(ctx->holder_fd);
	if (ctx->share_on)
		share_release(&ctx->share);
	memset(ctx, 0, sizeof(*ctx));
	ctx->clone_fd = -1;
	ctx->holder_fd = -1;
}

int copy_ctx_new(struct copy_ctx **ret, const struct copy_options *opts)
{
	struct copy_ctx *ctx = calloc(1, sizeof(*ctx));
	int err;

	*ret = NULL;
	if (!ctx)
		return -ENOMEM;
	err = copy_ctx_init(ctx, opts);
	if (err) {
		free(ctx);
		return err;
	}
	*ret = ctx;
	return 0;
}

void copy_ctx_free(struct copy_ctx *ctx)
{
	if (!ctx)
		return;
	copy_ctx_release(ctx);
	free(ctx);
}

const struct copy_stats *copy_ctx_stats(const struct copy_ctx *ctx)
{
	return &ctx->stats;
}

const struct encio_probe *copy_ctx_probe(const struct copy_ctx *ctx)
{
	return &ctx->probe;
}

const struct verify_stats *copy_ctx_verify_stats(const struct copy_ctx *ctx)
{
	return &ctx->verify.stats;
}

struct inode_flags_refused *copy_ctx_flags_refused(struct copy_ctx *ctx)
{
	return &ctx->flags_refused;
}

void copy_ctx_buffers(const struct copy_ctx *ctx, struct copy_buffers *b)
{
	const struct engine *engine = &ctx->engine;

	b->nr_slots = engine->pool.nr_slots;
	b->slot_size = engine->pool.slot_size;
	b->backing = bufpool_backing_name(engine->pool.backing);
	b->registered = engine->buffers_registered;
	b->registered_bytes = engine->registered_bytes;
	b->ring = engine->ring;
	b->defer_taskrun = engine->defer_taskrun;
}

int copy_probe_fds(struct copy_ctx *ctx, int src_fd, int dir_fd,
		   const char *src, const char *dst_dir, struct encio_error *e)
{
	struct statfs sfs;
	struct stat st;
	int ret;

	if (fstat(src_fd, &st))
		return encio_error_set(e, errno, "stat", src, false, 0);
	if (!ctx->read_probed || ctx->read_dev != st.st_dev) {
		ret = engine_probe_read(&ctx->engine, src_fd, ctx->opts.io_mode,
					&ctx->probe);
		if (ret)
			return encio_error_set(e, ret,
					       "read with the forced --io mode",
					       src, false, 0);
		if (fstatfs(src_fd, &sfs))
			return encio_error_set(e, errno, "statfs", src, false,
					       0);
		ctx->read_fs_type = sfs.f_type;
		ctx->read_probed = true;
		ctx->read_dev = st.st_dev;
	}
	if (fstat(dir_fd, &st))
		return encio_error_set(e, errno, "stat", dst_dir, false, 0);
	if (!ctx->write_probed || ctx->write_dev != st.st_dev) {
		ret = engine_probe_write(&ctx->engine, dir_fd,
					 ctx->opts.io_mode, &ctx->probe);
		if (ret)
			return encio_error_set(
				e, ret, "write with the forced --io mode",
				dst_dir, false, 0);
		if (fstatfs(dir_fd, &sfs))
			return encio_error_set(e, errno, "statfs", dst_dir,
					       false, 0);
		ctx->write_sectorsize = sfs.f_bsize;
		ctx->write_probed = true;
		ctx->write_dev = st.st_dev;
	}
	return 0;
}

/*
 * Encoded writes start on a sector of the destination and end on one or at
 * EOF; a source of smaller blocks (ext4 -b 1024) has data and holes between
 * them. Plain data to compress is widened to whole sectors, the zeros of a
 * hole it then covers read as data, never again from where the range before
 * it ended.
 */
static void job_align_range(struct copy_job *job, uint64_t *start,
			    uint64_t *end)
{
	uint64_t ss = job->sectorsize;

	*start -= *start % ss;
	if (*start < job->aligned_to)
		*start = job->aligned_to;
	if (*end % ss)
		*end += ss - *end % ss;
	if (*end > job->size)
		*end = job->size;
	if (*end > job->aligned_to)
		job->aligned_to = *end;
}

/* [start, end) less the ranges the job clones, as pending ranges. */
static int job_push_uncloned(struct copy_job *job, uint64_t start, uint64_t end,
			     bool whole)
{
	const struct share_piece *c;
	int ret;

	while (job->next_clone < job->clones.nr && start < end) {
		c = &job->clones.p[job->next_clone];
		if (c->off >= end)
			break;
		if (c->off > start) {
			ret = copy_job_push_range(job, start, c->off, whole);
			if (ret)
				return ret;
		}
		if (c->off + c->len > start)
			start = c->off + c->len;
		/* a clone merged across extents goes on into the next range */
		if (c->off + c->len > end)
			break;
		job->next_clone++;
	}
	return start < end ? copy_job_push_range(job, start, end, whole) : 0;
}

/* Turn the next map entries into pending ranges; false when none are left. */
static bool job_refill(struct copy_job *job)
{
	uint64_t start;
	bool whole;

	while (!job->nr_pending && job->next_extent < job->map.nr) {
		const struct file_extent *fe =
			&job->map.ext[job->next_extent++];
		uint64_t end = fe->offset + fe->len;

		switch (fe->kind) {
		case EXTENT_HOLE:
			/* not data: progress totals leave holes out too */
			job->ctx->stats.holes++;
			continue;
		case EXTENT_PREALLOC:
			continue; /* made by job_prealloc() */
		default:
			break;
		}
		if (end > job->size)
			end = job->size;
		start = fe->offset;
		whole = fe->compression != BTRFS_COMPRESS_NONE;
		if (!whole &&
		    job->ctx->opts.compress.alg != BTRFS_COMPRESS_NONE)
			job_align_range(job, &start, &end);
		if (start >= end)
			continue;
		/*
		 * Compressed inline extents go encoded too: an encoded write at
		 * offset 0 of at most a sector is stored inline again.
		 */
		if (job_push_uncloned(job, start, end, whole))
			return copy_job_fail(job, ENOMEM, "map", false, start),
			       false;
	}
	return job->nr_pending > 0;
}

/* The inline extent in memory, handed in as the answer of an encoded read. */
static void job_issue_inline(struct copy_job *job, struct engine_req *req)
{
	const struct copy_inline *in = job->inline_data;
	struct btrfs_ioctl_encoded_io_args *a = &req->args;

	job->inline_data = NULL;
	memcpy(engine_req_buf(&job->ctx->engine, req), in->data, in->data_len);
	memset(a, 0, sizeof(*a));
	/* The fields the kernel's encoded read of the extent returns. */
	a->len = job->size;
	a->compression = in->compression;
	a->unencoded_len = in->compression ? in->ram_bytes : job->size;
	engine_encoded_read_answered(&job->ctx->engine, req, job->src_fd, 0,
				     in->compression ? in->data_len :
						       job->size);
	req->priv = job;
	req->cookie = job->size;
	job->inflight++;
}

/* A request of the holder's: its index in job->holders, marked. */
#define HOLDER_COOKIE (1ULL << 63)

/*
 * The next extent to write whole into the holder: read encoded from the
 * part this file uses (the kernel returns the whole extent). Where
 * encoded I/O cannot do it, the parts are written as they come instead.
 */
static bool job_issue_holder(struct copy_job *job, struct engine_req *req)
{
	const struct share_piece *h;

	while (job->next_holder < job->holders.nr) {
		h = &job->holders.p[job->next_holder++];
		if (job->read_mode == ENCIO_IO_NONE ||
		    job->write_mode == ENCIO_IO_NONE) {
			share_file_settle(&job->ctx->share, h->file,
					  SHARE_FAILED);
			continue;
		}
		engine_encoded_read(&job->ctx->engine, req, job->read_mode,
				    job->src_fd, h->off);
		req->priv = job;
		req->cookie = HOLDER_COOKIE | (job->next_holder - 1);
		job->inflight++;
		return true;
	}
	return false;
}

/*
 * The extent read for the holder, written there whole at its offset: the
 * read's args say where this part starts in it, the write takes all of
 * it. An extent that changed since it was mapped (another size, plain
 * bytes) is not the one the index names: the holder's range fails, and
 * the parts are written instead.
 */
static bool job_holder_read_done(struct copy_job *job, struct engine_req *req)
{
	const struct share_piece *h =
		&job->holders.p[req->cookie & ~HOLDER_COOKIE];
	struct btrfs_ioctl_encoded_io_args *a = &req->args;

	if (req->res <= 0 ||
	    a->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE ||
	    a->unencoded_offset > a->unencoded_len) {
		share_file_settle(&job->ctx->share, h->file, SHARE_FAILED);
		return false;
	}
	a->len = a->unencoded_len;
	a->unencoded_offset = 0;
	engine_encoded_write(&job->ctx->engine, req, job->write_mode,
			     job->ctx->holder_fd, h->src_off, req->res);
	return true;
}

static void job_holder_write_done(struct copy_job *job, struct engine_req *req)
{
	const struct share_piece *h =
		&job->holders.p[req->cookie & ~HOLDER_COOKIE];

	if (req->res < 0) {
		share_file_settle(&job->ctx->share, h->file, SHARE_FAILED);
		return;
	}
	job->ctx->stats.extents_encoded++;
	job->ctx->stats.encoded_bytes += req->len;
	share_file_settle(&job->ctx->share, h->file, SHARE_READY);
}

/*
 * Issue the next piece of work into @req.
 *
 * Where encoded reads work, plain data is read with encoded reads too (the
 * kernel returns it as compression NONE): a buffered read of the same file
 * can deadlock against our own encoded reads in flight. Their extent locks
 * are released by task work that only this thread runs, while readahead of
 * a neighbouring range blocks this thread on one of those locks.
 */
bool copy_job_issue(struct copy_job *job, struct engine_req *req)
{
	struct engine *engine = &job->ctx->engine;
	struct copy_range *r;
	uint64_t len;

	if (job->err)
		return false;
	if (job->inline_data) {
		job_issue_inline(job, req);
		return true;
	}
	if (job_issue_holder(job, req))
		return true;
	if (!job_refill(job))
		return false;
	r = &job->pending[job->nr_pending - 1];
	len = r->end - r->start;
	if (!r->whole && len > engine->pool.slot_size)
		len = engine->pool.slot_size;
	if (!r->whole && job->ctx->opts.compress.alg != BTRFS_COMPRESS_NONE)
		len = compress_chunk_len(r->start, r->start + len);
	if (job->read_mode != ENCIO_IO_NONE)
		engine_encoded_read(engine, req, job->read_mode, job->src_fd,
				    r->start);
	else
		engine_read(engine, req, job->plain_mode, job->src_fd, r->start,
			    len);
	req->priv = job;
	req->cookie = r->start + len;
	job->inflight++;
	r->start += len;
	if (r->start == r->end)
		job->nr_pending--;
	return true;
}

static void job_write_plain(struct copy_job *job, const void *buf, size_t len,
			    uint64_t offset)
{
	int ret = pwrite_all(job->dst_fd, buf, len, offset);

	if (ret) {
		copy_job_fail(job, ret, "write", true, offset);
		return;
	}
	job->ctx->stats.logical_bytes += len;
	copy_job_progress(job, offset, offset + len);
}

/*
 * Write one chunk the workers encoded: encoded, or plain where it does not
 * save a sector, as the kernel does.
 */
static void job_write_encoded_chunk(struct copy_job *job,
				    const struct cpool_task *t)
{
	struct copy_ctx *ctx = job->ctx;
	int ret;

	if (t->res == -E2BIG ||
	    (t->res >= 0 &&
	     !compress_worth(t->res, t->unencoded_len, job->sectorsize))) {
		ctx->stats.chunks_incompressible++;
		job_write_plain(job, t->in, t->len, t->offset);
		return;
	}
	if (t->res < 0) {
		copy_job_fail(job, t->res, "compress", false, t->offset);
		return;
	}
	ret = encoded_write_ioctl(job->dst_fd, t->out, t->res, t->offset,
				  t->len, t->unencoded_len, 0, t->compression);
	if (ret) {
		copy_job_fail(job, ret, "encoded write", true, t->offset);
		return;
	}
	ctx->stats.chunks_compressed++;
	ctx->stats.encoded_bytes += t->res;
	ctx->stats.encoded_logical += t->len;
	ctx->stats.logical_bytes += t->len;
	copy_job_progress(job, t->offset, t->offset + t->len);
}

/* Write what the workers encoded; with @wait, at least one if any is busy. */
static void ctx_collect_chunks(struct copy_ctx *ctx, bool wait)
{
	struct cpool_task *t, *next;
	struct copy_job *job;

	if (!ctx->cpool_started)
		return;
	for (t = cpool_collect(&ctx->cpool, wait); t; t = next) {
		next = t->next;
		job = t->owner;
		job->chunks--;
		if (!job->err)
			job_write_encoded_chunk(job, t);
		cpool_put(&ctx->cpool, t);
	}
}

void copy_ctx_poll_chunks(struct copy_ctx *ctx)
{
	ctx_collect_chunks(ctx, false);
}

void copy_ctx_wait_chunks(struct copy_ctx *ctx)
{
	ctx_collect_chunks(ctx, true);
}

unsigned int copy_ctx_chunks_busy(const struct copy_ctx *ctx)
{
	return ctx->cpool_started ? cpool_busy(&ctx->cpool) : 0;
}

/* Hand one chunk (within one COMPRESS_CHUNK window) to the workers. */
static void job_submit_chunk(struct copy_job *job,
			     const struct compress_spec *spec, const void *buf,
			     size_t len, uint64_t offset)
{
	struct copy_ctx *ctx = job->ctx;
	int id = compress_encoded_id(spec, job->sectorsize);
	struct cpool_task *t;

	if (id < 0) {
		copy_job_fail(job, EINVAL, "compress (sector size)", true,
			      offset);
		return;
	}
	while (!(t = cpool_get(&ctx->cpool)))
		copy_ctx_wait_chunks(ctx);
	t->owner = job;
	t->offset = offset;
	t->len = len;
	t->unencoded_len = compress_chunk_unencoded_len(offset, len, job->size,
							job->sectorsize);
	t->compression = id;
	t->level = spec->level;
	memcpy(t->in, buf, len);
	job->chunks++;
	cpool_submit(&ctx->cpool, t);
}

/* Plain file data: compressed in chunks with --compress, else written. */
static void job_write_data(struct copy_job *job,
			   const struct compress_spec *spec, const char *buf,
			   size_t len, uint64_t offset)
{
	uint64_t n;

	if (spec->alg == BTRFS_COMPRESS_NONE) {
		job_write_plain(job, buf, len, offset);
		return;
	}
	while (len && !job->err) {
		n = compress_chunk_len(offset, offset + len);
		job_submit_chunk(job, spec, buf, n, offset);
		buf += n;
		len -= n;
		offset += n;
	}
}

/* Decode the encoded extent in @req's slot and write its range plain. */
static void job_write_decoded(struct copy_job *job, struct engine_req *req,
			      const struct compress_spec *spec)
{
	struct copy_ctx *ctx = job->ctx;
	const struct btrfs_ioctl_encoded_io_args *a = &req->args;
	ssize_t n;

	if (a->unencoded_len > BTRFS_MAX_UNCOMPRESSED ||
	    a->unencoded_offset > a->unencoded_len ||
	    a->len > a->unencoded_len - a->unencoded_offset) {
		copy_job_fail(job, EINVAL, "decode (extent sizes)", false,
			      req->offset);
		return;
	}
	n = codec_decode(ctx->codec, a->compression,
			 engine_req_buf(&ctx->engine, req),
			 req->op == ENGINE_OP_ENCODED_WRITE ? req->len :
							      (size_t)req->res,
			 ctx->decode_buf, a->unencoded_len);
	if (n < 0) {
		copy_job_fail(job, n, "decode", false, req->offset);
		return;
	}
	job_write_data(job, spec, (char *)ctx->decode_buf + a->unencoded_offset,
		       a->len, req->offset);
	if (spec->alg != BTRFS_COMPRESS_NONE)
		ctx->stats.extents_recompressed++;
	else
		ctx->stats.extents_decoded++;
}

/* The destination refused the encoded write for a reason decoding avoids. */
static bool write_refusal(int err)
{
	return err == EINVAL || err == EOPNOTSUPP || err == ENOTTY ||
	       err == EPERM;
}

/* An encoded read came back shorter than the range: issue the rest. */
static void job_requeue_rest(struct copy_job *job, struct engine_req *req,
			     uint64_t done_to)
{
	uint64_t end = req->cookie;

	if (done_to < end && copy_job_push_range(job, done_to, end, false))
		copy_job_fail(job, ENOMEM, "map", false, done_to);
}

static const struct compress_spec none_spec = { BTRFS_COMPRESS_NONE, 0 };

/*
 * Plain bytes an encoded read returned, up to the end of the piece asked
 * for: the kernel returns up to the end of the extent, and what follows
 * the piece is another's (a clone's, or a range written on its own; with
 * --compress, the next chunk). Written here, a clone would later replace
 * it and leave the extent written partly unused on disk.
 */
static size_t job_plain_len(struct engine_req *req)
{
	uint64_t len = req->res;

	if (req->offset + len > req->cookie)
		len = req->cookie - req->offset;
	return len;
}

static bool job_encoded_read_done(struct copy_job *job, struct engine_req *req)
{
	struct btrfs_ioctl_encoded_io_args *a = &req->args;

	if (req->cookie & HOLDER_COOKIE)
		return job_holder_read_done(job, req);
	if (req->res < 0) {
		copy_job_fail(job, req->res, "encoded read", false,
			      req->offset);
		return false;
	}
	if (req->res == 0)
		return false; /* EOF: the file shrank under us */
	job_requeue_rest(job, req, req->offset + a->len);
	if (a->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		/* Plain bytes (the range was rewritten since it was mapped). */
		job_write_data(job, &job->ctx->opts.compress,
			       engine_req_buf(&job->ctx->engine, req),
			       job_plain_len(req), req->offset);
		job->ctx->stats.ranges_plain++;
		return false;
	}
	if (job->write_mode == ENCIO_IO_NONE) {
		job_write_decoded(job, req, &none_spec);
		return false;
	}
	if (job->ctx->opts.recompress.alg != BTRFS_COMPRESS_NONE) {
		job_write_decoded(job, req, &job->ctx->opts.recompress);
		return false;
	}
	engine_encoded_write(&job->ctx->engine, req, job->write_mode,
			     job->dst_fd, req->offset, req->res);
	return true;
}

static void job_encoded_write_done(struct copy_job *job, struct engine_req *req)
{
	if (req->cookie & HOLDER_COOKIE) {
		job_holder_write_done(job, req);
		return;
	}
	if (req->res >= 0) {
		job->ctx->stats.extents_encoded++;
		job->ctx->stats.encoded_bytes += req->len;
		job->ctx->stats.encoded_logical += req->args.len;
		job->ctx->stats.logical_bytes += req->args.len;
		copy_job_progress(job, req->offset,
				  req->offset + req->args.len);
		return;
	}
	if (write_refusal(-req->res)) {
		job_write_decoded(job, req, &none_spec);
		return;
	}
	copy_job_fail(job, req->res, "encoded write", true, req->offset);
}

static void job_read_done(struct copy_job *job, struct engine_req *req)
{
	if (req->res < 0) {
		copy_job_fail(job, req->res, "read", false, req->offset);
		return;
	}
	if (req->res == 0)
		return;
	job_requeue_rest(job, req, req->offset + req->res);
	job_write_data(job, &job->ctx->opts.compress,
		       engine_req_buf(&job->ctx->engine, req), req->res,
		       req->offset);
	job->ctx->stats.ranges_plain++;
}

/* Handle one completion; false once @req is free again. */
static bool job_complete(struct copy_job *job, struct engine_req *req)
{
	if (job->err)
		return false;
	switch (req->op) {
	case ENGINE_OP_ENCODED_READ:
		return job_encoded_read_done(job, req);
	case ENGINE_OP_ENCODED_WRITE:
		job_encoded_write_done(job, req);
		break;
	case ENGINE_OP_READ:
		job_read_done(job, req);
		break;
	}
	return false;
}

bool copy_job_complete(struct copy_job *job, struct engine_req *req)
{
	ENCIO_ASSERT(req->priv == job && job->inflight > 0);
	if (job_complete(job, req))
		return true;
	job->inflight--;
	return false;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * A writer the copy cannot stop may have truncated, extended or rewritten
 * the source meanwhile: then the copy holds parts of two versions. Writes
 * and truncates move mtime and ctime; ctime alone catches a write whose
 * mtime was set back. A link or unlink moves ctime too, and changes no
 * byte: a ctime move with the link count changed is not taken as a write.
 */
static void job_check_source(struct copy_job *job)
{
	const struct stat *old = &job->src_st;
	struct stat st;

	if (!job->check_src || job->err)
		return;
	job->check_src = false;
	if (fstat(job->src_fd, &st)) {
		copy_job_fail(job, errno, "stat", false, 0);
		return;
	}
	if (st.st_size != old->st_size ||
	    !same_time(&st.st_mtim, &old->st_mtim) ||
	    (!same_time(&st.st_ctim, &old->st_ctim) &&
	     st.st_nlink == old->st_nlink))
		job->err = encio_error_set(job->e, COPY_ESRCCHANGED, "copy",
					   job->src_path, false, 0);
}

bool copy_job_has_work(struct copy_job *job)
{
	if (job->err)
		return false;
	if (job->inline_data || job->next_holder < job->holders.nr ||
	    job_refill(job))
		return true;
	if (!copy_job_idle(job))
		return false;
	job_check_source(job);
	if (job->err || !job->share)
		return false;
	if (!copy_share_clone(job))
		return false;
	/* ranges that could not be cloned, read now: checked again after */
	job->check_src = !fs_files_sizeless(job->ctx->read_fs_type);
	return job_refill(job);
}

void copy_job_release(struct copy_job *job)
{
	ENCIO_ASSERT(copy_job_idle(job));
	copy_share_end(job);
	extent_map_release(&job->map);
	free(job->pending);
	job->pending = NULL;
	job->nr_pending = job->cap_pending = 0;
}

/*
 * Keep every slot busy while work remains; after an error stop issuing but
 * reap everything in flight: the kernel still writes into those slots.
 */
static void job_run(struct copy_job *job)
{
	const volatile sig_atomic_t *stop = job->ctx->opts.stop;
	struct engine *engine = &job->ctx->engine;
	struct engine_req *req;
	int err;

	for (;;) {
		if (stop && *stop)
			copy_job_fail(job, EINTR, "copy (interrupted)", false,
				      0);
		copy_ctx_poll_chunks(job->ctx);
		while (!job->err && (req = engine_get_req(engine))) {
			if (!copy_job_issue(job, req)) {
				engine_put_req(engine, req);
				break;
			}
		}
		if (!engine_inflight(engine)) {
			if (!copy_ctx_chunks_busy(job->ctx))
				break;
			copy_ctx_wait_chunks(job->ctx);
			continue;
		}
		req = engine_reap(engine, true, &err);
		if (err) {
			copy_job_fail(job, err, "io_uring wait", false, 0);
			if (!req)
				break;
		}
		if (req && !copy_job_complete(req->priv, req))
			engine_put_req(engine, req);
		if (job->ctx->opts.progress)
			job->ctx->opts.progress(job->ctx->opts.progress_arg,
						&job->ctx->stats);
	}
}

/* Where the copy goes: DEST itself, or DEST/basename(SRC) for a directory. */
static int resolve_dest(const char *src, const char *dst, char *dir, char *name,
			struct encio_error *e)
{
	char tmp[PATH_MAX];
	struct stat st;

	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(tmp, sizeof(tmp), "%s", src);
		snprintf(dir, PATH_MAX, "%s", dst);
		snprintf(name, NAME_MAX + 1, "%s", basename(tmp));
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s", dst);
	snprintf(name, NAME_MAX + 1, "%s", basename(tmp));
	snprintf(tmp, sizeof(tmp), "%s", dst);
	snprintf(dir, PATH_MAX, "%s", dirname(tmp));
	if (!name[0] || strcmp(name, "/") == 0 || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return encio_error_set(e, EINVAL, "destination name", dst,
				       false, 0);
	return 0;
}

/* A fresh, hidden name beside the final one, opened exclusively. */
static int create_temp(int dir_fd, const char *name, char *tmp_name)
{
	static unsigned int counter;
	unsigned int tries;
	int fd;

	for (tries = 0; tries < 100; tries++) {
		snprintf(tmp_name, NAME_MAX + 1, ".%.200s.encio-%d-%u", name,
			 (int)getpid(), counter++);
		fd = openat(dir_fd, tmp_name,
			    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -errno : fd;
	}
	return -EEXIST;
}

/*
 * Temporaries of @name (create_temp()'s names) whose process is gone: a
 * copy killed before it could remove its own. A live process's, even one
 * that reused the PID, are left alone.
 */
static void remove_stale_temps(int dir_fd, const char *name)
{
	char prefix[NAME_MAX + 1];
	struct dirent *de;
	struct stat st;
	char *end;
	long pid;
	int len;
	DIR *dir;

	len = snprintf(prefix, sizeof(prefix), ".%.200s.encio-", name);
	dir = dir_stream_of(dir_fd);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, prefix, len) ||
		    !isdigit((unsigned char)de->d_name[len]))
			continue;
		pid = strtol(de->d_name + len, &end, 10);
		if (*end != '-' || !isdigit((unsigned char)end[1]))
			continue;
		strtoul(end + 1, &end, 10);
		if (*end || pid <= 0 || pid == getpid() || !kill(pid, 0) ||
		    errno != ESRCH)
			continue;
		if (!fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode))
			unlinkat(dir_fd, de->d_name, 0);
	}
	closedir(dir);
}

/*
 * Owner, xattrs, mode and times as copy -r sets them, then the sync flag
 * (see copy_flags_early()).
 */
static int copy_metadata(struct copy_job *job, const struct stat *st,
			 unsigned int src_flags, const char **op)
{
	int ret = meta_copy_file(job->src_fd, job->dst_fd, st, op);

	if (ret || !(src_flags & FS_SYNC_FL))
		return ret;
	*op = "set inode flags of";
	ret = inode_flags_set(job->dst_fd, src_flags, FS_SYNC_FL,
			      &job->ctx->flags_refused);
	return ret < 0 ? ret : 0;
}

/*
 * Before the data, on the empty file: nocow and compression (the flags,
 * then the btrfs.compression property) decide how the data is stored; the
 * other flags but sync, append-only and immutable with them.
 */
static int copy_flags_early(struct copy_job *job, unsigned int src_flags)
{
	struct inode_flags_refused *r = &job->ctx->flags_refused;
	int ret;

	ret = inode_flags_set(job->dst_fd, src_flags & ~FS_SYNC_FL,
			      INODE_FLAGS_KEPT & ~INODE_FLAGS_LATE, r);
	if (ret >= 0)
		ret = inode_prop_copy(job->src_fd, job->dst_fd, r);
	return ret < 0 ? ret : 0;
}

/* --compress and --recompress need encoded writes and the sector size. */
static int job_check_compress(struct copy_job *job)
{
	const struct copy_options *o = &job->ctx->opts;

	if (o->compress.alg == BTRFS_COMPRESS_NONE &&
	    o->recompress.alg == BTRFS_COMPRESS_NONE)
		return 0;
	if (job->write_mode == ENCIO_IO_NONE)
		return job->err = encio_error_set(
			       job->e, EOPNOTSUPP,
			       "compress (no encoded writes possible) into",
			       job->dst_path, false, 0);
	job->sectorsize = job->ctx->write_sectorsize;
	return 0;
}

static int job_copy_to_eof(struct copy_job *job)
{
	char buf[16384];
	uint64_t off = 0;
	ssize_t n, w;
	size_t done;

	for (;;) {
		n = pread(job->src_fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return copy_job_fail(job, errno, "read", false, off);
		if (!n)
			break;
		for (done = 0; done < (size_t)n; done += w) {
			w = pwrite(job->dst_fd, buf + done, n - done,
				   off + done);
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				return copy_job_fail(job, errno, "write", true,
						     off + done);
		}
		off += n;
	}
	if (off) {
		job->ctx->stats.logical_bytes += off;
		job->ctx->stats.ranges_plain++;
	}
	return 0;
}

/*
 * The prealloc ranges, while the new file is still empty: btrfs' fallocate
 * past an i_size inside a block writes zeros to the rest of that block,
 * which turns a hole or prealloc there into a data extent. Those the job
 * clones from a copy made before are left to the clone.
 */
static int job_prealloc(struct copy_job *job)
{
	const struct file_extent *fe;
	const struct share_piece *c;
	uint64_t start, end;
	size_t i, k = 0;
	int ret;

	for (i = 0; i < job->map.nr; i++) {
		fe = &job->map.ext[i];
		if (fe->kind != EXTENT_PREALLOC)
			continue;
		job->ctx->stats.prealloc++;
		copy_job_progress(job, fe->offset, fe->offset + fe->len);
		start = fe->offset;
		end = fe->offset + fe->len;
		for (; k < job->clones.nr; k++) {
			c = &job->clones.p[k];
			if (c->off >= end)
				break;
			if (!c->prealloc || c->off + c->len <= start)
				continue;
			ret = copy_job_fallocate(job, start, c->off);
			if (ret)
				return ret;
			start = c->off + c->len;
		}
		ret = copy_job_fallocate(job, start, end);
		if (ret)
			return ret;
	}
	return 0;
}

int copy_job_start(struct copy_job *job, const struct stat *st)
{
	int ret;

	ret = job_check_compress(job);
	if (ret)
		return ret;
	job->size = st->st_size;
	job->src_st = *st;
	job->check_src = !fs_files_sizeless(job->ctx->read_fs_type);
	ret = extent_map_build_stat(job->src_fd, st, job->ctx->read_fs_type,
				    &job->map);
	if (ret)
		return job->err = encio_error_set(job->e, ret, "map extents of",
						  job->src_path, false, 0);
	if (job->ctx->share_on) {
		ret = copy_share_plan(job);
		if (ret)
			return copy_job_fail(job, -ret, "plan the clones of",
					     false, 0);
	}
	ret = job_prealloc(job);
	if (ret)
		return ret;
	/*
	 * The new file grows with its writes: only a trailing hole or
	 * prealloc range needs the size set (a transaction of its own).
	 */
	if (extent_map_data_end(&job->map) < job->size &&
	    ftruncate(job->dst_fd, job->size))
		return job->err = encio_error_set(job->e, errno, "truncate",
						  job->dst_path, false, 0);
	if (!job->size && fs_files_sizeless(job->ctx->read_fs_type))
		return job_copy_to_eof(job);
	return 0;
}

int copy_job_start_inline(struct copy_job *job, const struct stat *st,
			  const struct copy_inline *in)
{
	int ret;

	ret = job_check_compress(job);
	if (ret)
		return ret;
	if (in->data_len > job->ctx->engine.pool.slot_size ||
	    in->ram_bytes < (uint64_t)st->st_size ||
	    (!in->compression && in->data_len < st->st_size))
		return job->err = encio_error_set(job->e, EUCLEAN,
						  "copy (inline extent sizes)",
						  job->src_path, false, 0);
	job->size = st->st_size;
	job->inline_data = in;
	return 0;
}

int copy_verify_fds(struct copy_ctx *ctx, int src_fd, int dst_fd,
		    const char *dst_path, struct encio_error *e)
{
	struct verify_stats *s = &ctx->verify.stats;
	int ret;

	ret = verify_file_fds(&ctx->verify, src_fd, dst_fd, NULL, dst_path, e);
	ctx->stats.extents_verified = s->extents_identical + s->extents_decoded;
	return ret;
}

static int copy_fds(struct copy_ctx *ctx, struct copy_job *job,
		    const struct stat *st, unsigned int src_flags)
{
	const char *op;
	int ret;

	ret = copy_flags_early(job, src_flags);
	if (ret)
		return encio_error_set(job->e, ret, "set inode flags of",
				       job->dst_path, false, 0);
	ret = copy_job_start(job, st);
	if (ret)
		return ret;
	do
		job_run(job);
	while (copy_job_has_work(job));
	/* earlier files are all done: nothing can be waited for */
	if (copy_job_waiting(job))
		copy_job_fail(job, EDEADLK, "clone", true, 0);
	job_check_source(job);
	if (job->err)
		return job->err;
	/* Encoded-write errors arrive late: only fsync tells. */
	if (fsync(job->dst_fd))
		return encio_error_set(job->e, errno, "sync", job->dst_path,
				       false, 0);
	if (ctx->opts.verify) {
		ret = copy_verify_fds(ctx, job->src_fd, job->dst_fd,
				      job->dst_path, job->e);
		if (ret)
			return ret;
	}
	ret = copy_metadata(job, st, src_flags, &op);
	if (ret)
		return encio_error_set(job->e, ret, op, job->dst_path, false,
				       0);
	ctx->stats.files++;
	return 0;
}

static int copy_open_src(const char *src, struct stat *st,
			 struct encio_error *e)
{
	int fd = open_regular(src, O_RDONLY, 0, st);

	if (fd < 0)
		return encio_error_set(e, -fd,
				       fd == -EISDIR || fd == -EINVAL ?
					       "copy (not a regular file)" :
					       "open",
				       src, false, 0);
	return fd;
}

static int same_file(int dir_fd, const char *name, const struct stat *src_st)
{
	struct stat st;

	return fstatat(dir_fd, name, &st, 0) == 0 &&
	       st.st_dev == src_st->st_dev && st.st_ino == src_st->st_ino;
}

int copy_probe(struct copy_ctx *ctx, const char *src, const char *dst,
	       struct encio_error *e)
{
	char dir[PATH_MAX], name[NAME_MAX + 1];
	struct stat st;
	int src_fd, dir_fd, ret;

	ret = resolve_dest(src, dst, dir, name, e);
	if (ret)
		return ret;
	src_fd = copy_open_src(src, &st, e);
	if (src_fd < 0)
		return src_fd;
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		ret = encio_error_set(e, errno, "open directory", dir, false,
				      0);
	else
		ret = copy_probe_fds(ctx, src_fd, dir_fd, src, dir, e);
	if (dir_fd >= 0)
		close(dir_fd);
	close(src_fd);
	return ret;
}

int copy_file(struct copy_ctx *ctx, const char *src, const char *dst,
	      struct encio_error *e)
{
	char dir[PATH_MAX], name[NAME_MAX + 1], tmp_name[NAME_MAX + 1];
	char dst_path[PATH_MAX + NAME_MAX + 2];
	struct copy_job job = {
		.ctx = ctx, .src_path = src, .e = e, .src_fd = -1, .dst_fd = -1
	};
	struct stat st;
	unsigned int src_flags;
	int dir_fd = -1, ret;

	ret = resolve_dest(src, dst, dir, name, e);
	if (ret)
		return ret;
	job.src_fd = copy_open_src(src, &st, e);
	if (job.src_fd < 0)
		return job.src_fd;
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0) {
		ret = encio_error_set(e, errno, "open directory", dir, false,
				      0);
		goto out;
	}
	if (same_file(dir_fd, name, &st)) {
		ret = encio_error_set(e, EINVAL, "copy onto itself", src, false,
				      0);
		goto out;
	}
	ret = copy_probe_fds(ctx, job.src_fd, dir_fd, src, dir, e);
	if (ret)
		goto out;
	job.read_mode = ctx->probe.read_mode;
	job.write_mode = ctx->probe.write_mode;
	job.plain_mode = ctx->engine.ring ? ENCIO_IO_URING_FIXED :
					    ENCIO_IO_IOCTL;

	/* Messages name the final path; the data goes to a hidden temporary. */
	snprintf(dst_path, sizeof(dst_path), "%s/%s", dir, name);
	job.dst_path = dst_path;
	remove_stale_temps(dir_fd, name);
	job.dst_fd = create_temp(dir_fd, name, tmp_name);
	if (job.dst_fd < 0) {
		ret = encio_error_set(e, job.dst_fd, "create", dst_path, false,
				      0);
		goto out;
	}
	src_flags = inode_flags_get(job.src_fd);
	ret = copy_fds(ctx, &job, &st, src_flags);
	if (!ret && renameat(dir_fd, tmp_name, dir_fd, name))
		ret = encio_error_set(e, errno, "rename into place", dst_path,
				      false, 0);
	if (ret) {
		unlinkat(dir_fd, tmp_name, 0);
		goto out;
	}
	/* in place: an immutable file could not be renamed */
	ret = inode_flags_set(job.dst_fd, src_flags, INODE_FLAGS_LATE,
			      &ctx->flags_refused);
	ret = ret < 0 ? encio_error_set(e, ret, "set inode flags of", dst_path,
					false, 0) :
			0;
out:
	if (job.dst_fd >= 0)
		close(job.dst_fd);
	if (dir_fd >= 0)
		close(dir_fd);
	close(job.src_fd);
	copy_job_release(&job);
	return ret;
}
