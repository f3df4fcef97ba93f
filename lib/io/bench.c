// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark passes: the extent list of a file driven through the engine in
 * one mode, without the copy machinery (no plain data, no fallbacks), so
 * the time measured is the encoded I/O itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/extents.h"
#include "io/bench.h"

int bench_target_build(int fd, struct bench_target *t)
{
	struct extent_map map;
	size_t i;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = extent_map_build(fd, &map);
	if (ret)
		return ret;
	t->size = map.size;
	t->offsets = calloc(map.nr ? map.nr : 1, sizeof(*t->offsets));
	if (!t->offsets) {
		extent_map_release(&map);
		return -ENOMEM;
	}
	for (i = 0; i < map.nr; i++) {
		const struct file_extent *fe = &map.ext[i];

		if (fe->kind != EXTENT_REGULAR && fe->kind != EXTENT_INLINE)
			continue;
		if (fe->compression == BTRFS_COMPRESS_NONE ||
		    fe->offset >= map.size)
			continue;
		t->offsets[t->nr++] = fe->offset;
	}
	extent_map_release(&map);
	return 0;
}

void bench_target_release(struct bench_target *t)
{
	free(t->offsets);
	memset(t, 0, sizeof(*t));
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 31);
}

uint64_t bench_extent_sum(uint64_t offset,
			  const struct btrfs_ioctl_encoded_io_args *a,
			  const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i;

	h = mix(h, offset);
	h = mix(h, a->len);
	h = mix(h, a->unencoded_len);
	h = mix(h, a->unencoded_offset);
	h = mix(h, (uint64_t)a->compression << 32 | a->encryption);
	h = mix(h, len);
	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = mix(h, w);
	}
	for (; i < len; i++)
		h = mix(h, p[i]);
	return h;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void pass_fail(struct bench_pass *p, int err, const char *op,
		      uint64_t offset)
{
	if (p->err)
		return;
	p->err = err < 0 ? -err : err;
	p->err_op = op;
	p->err_offset = offset;
}

/* An encoded read came back: count it; true when it is to be written. */
static bool pass_read_done(struct engine *engine, struct engine_req *req,
			   struct bench_pass *p)
{
	size_t idx = (uintptr_t)req->priv;

	if (req->res < 0) {
		pass_fail(p, req->res, "encoded read", req->offset);
		return false;
	}
	if (req->res == 0)
		return false; /* the file shrank under us */
	if (req->args.compression == BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		p->plain++;
		return false;
	}
	p->extents++;
	p->logical += req->args.len;
	p->encoded += req->res;
	if (p->sums)
		p->sums[idx] = bench_extent_sum(req->offset, &req->args,
						engine_req_buf(engine, req),
						req->res);
	return true;
}

/*
 * The loop of both passes: keep every slot busy while targets remain;
 * after an error stop issuing but reap all in flight (the kernel still
 * writes into those slots).
 */
static void pass_run(struct engine *engine, enum encio_io_mode read_mode,
		     enum encio_io_mode write_mode, int src_fd, int dst_fd,
		     const struct bench_target *t, struct bench_pass *p)
{
	struct engine_req *req;
	size_t next = 0;
	int err;

	for (;;) {
		while (!p->err && next < t->nr &&
		       (req = engine_get_req(engine))) {
			engine_encoded_read(engine, req, read_mode, src_fd,
					    t->offsets[next]);
			req->priv = (void *)(uintptr_t)next++;
		}
		if (!engine_inflight(engine))
			break;
		req = engine_reap(engine, true, &err);
		if (err) {
			pass_fail(p, err, "io_uring wait", 0);
			if (!req)
				break;
		}
		if (!req)
			continue;
		if (req->op == ENGINE_OP_ENCODED_WRITE) {
			if (req->res < 0)
				pass_fail(p, req->res, "encoded write",
					  req->offset);
		} else if (pass_read_done(engine, req, p) && dst_fd >= 0 &&
			   !p->err) {
			engine_encoded_write(engine, req, write_mode, dst_fd,
					     req->offset, req->res);
			continue;
		}
		engine_put_req(engine, req);
	}
}

int bench_read_pass(struct engine *engine, enum encio_io_mode mode, int fd,
		    const struct bench_target *t, struct bench_pass *p)
{
	uint64_t *sums = p->sums;

	memset(p, 0, sizeof(*p));
	p->sums = sums;
	pass_run(engine, mode, ENCIO_IO_NONE, fd, -1, t, p);
	return -p->err;
}

int bench_copy_pass(struct engine *engine, enum encio_io_mode read_mode,
		    enum encio_io_mode write_mode, int src_fd, int dst_fd,
		    const struct bench_target *t, struct bench_pass *p)
{
	uint64_t *sums = p->sums;

	memset(p, 0, sizeof(*p));
	p->sums = sums;
	if (ftruncate(dst_fd, t->size)) {
		pass_fail(p, errno, "truncate", 0);
		return -p->err;
	}
	pass_run(engine, read_mode, write_mode, src_fd, dst_fd, t, p);
	if (!p->err && fsync(dst_fd))
		pass_fail(p, errno, "sync", 0);
	return -p->err;
}
