// SPDX-License-Identifier: GPL-2.0
/*
 * The I/O engine: encoded reads and writes through io_uring URING_CMD on
 * registered slots ("uring-fixed"), plain URING_CMD ("uring") or the ioctls,
 * behind one submit/reap interface. Requests complete in any order; each
 * owns its args struct, iovec vector and slot until it is reaped.
 *
 * Where the decisions are made: which path `auto` takes for reads and
 * for writes, in probe_choose() after engine_probe_read() and
 * engine_probe_write() tried each on the file and directory at hand
 * (uring encoded writes punted to io-wq workers lose to the ioctl);
 * whether registered buffers are honoured, in the fixed-buffer probe;
 * the buffers' backing (hugetlb, THP, plain pages), in lib/io/bufpool.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/invariant.h"
#include "codec/codec.h"
#include "fs/extents.h"
#include "fs/inode_flags.h"
#include "io/compat.h"
#include "io/engine.h"

static const char *const io_mode_names[ENCIO_IO_NR_MODES] = {
	[ENCIO_IO_AUTO] = "auto",   [ENCIO_IO_URING_FIXED] = "uring-fixed",
	[ENCIO_IO_URING] = "uring", [ENCIO_IO_IOCTL] = "ioctl",
	[ENCIO_IO_NONE] = "none",
};

const char *encio_io_mode_name(enum encio_io_mode mode)
{
	return mode < ENCIO_IO_NR_MODES ? io_mode_names[mode] : "?";
}

int encio_io_mode_parse(const char *name, enum encio_io_mode *mode)
{
	int i;

	for (i = 0; i < ENCIO_IO_NR_MODES; i++) {
		if (strcmp(name, io_mode_names[i]) == 0) {
			*mode = i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *encio_fixed_state_desc(enum encio_fixed_state state)
{
	switch (state) {
	case ENCIO_FIXED_HONOURED:
		return "honoured by this kernel";
	case ENCIO_FIXED_IGNORED:
		return "ignored by this kernel";
	default:
		return "not probed";
	}
}

/*
 * SINGLE_ISSUER|DEFER_TASKRUN run completions in our own task when we wait,
 * measured ~25% faster for deep-queue encoded reads; older kernels refuse
 * the flags with EINVAL, so retry without.
 */
static int engine_setup_ring(struct engine *engine)
{
	struct io_uring_params params;
	int ret;

	engine->ring = calloc(1, sizeof(*engine->ring));
	if (!engine->ring)
		return -ENOMEM;
	memset(&params, 0, sizeof(params));
	if (engine->ring_setup == ENGINE_RING_DEFER_TASKRUN)
		params.flags = IORING_SETUP_SINGLE_ISSUER |
			       IORING_SETUP_DEFER_TASKRUN;
	ret = io_uring_queue_init_params(engine->depth, engine->ring, &params);
	if (ret == -EINVAL && params.flags) {
		memset(&params, 0, sizeof(params));
		ret = io_uring_queue_init_params(engine->depth, engine->ring,
						 &params);
	}
	if (ret) {
		free(engine->ring);
		engine->ring = NULL;
		return ret;
	}
	engine->ring_flags = params.flags;
	/* a close needs no completion only where the kernel can skip it */
	engine->ring_closes = params.features & IORING_FEAT_CQE_SKIP;
	engine->defer_taskrun = params.flags & IORING_SETUP_DEFER_TASKRUN;
	if (engine->iowq_workers) {
		/* [0] bounded (regular files), [1] unbounded; 0 leaves as is */
		unsigned int workers[2] = { engine->iowq_workers, 0 };

		if (io_uring_register_iowq_max_workers(engine->ring, workers))
			engine->iowq_workers = 0;
	}
	return 0;
}

static void engine_register_buffers(struct engine *engine)
{
	struct iovec *iov = bufpool_iovecs(&engine->pool);

	if (!iov)
		return;
	if (io_uring_register_buffers(engine->ring, iov,
				      engine->pool.nr_slots) == 0) {
		engine->buffers_registered = true;
		engine->registered_bytes =
			(size_t)engine->pool.nr_slots * engine->pool.slot_size;
	}
	free(iov);
}

int engine_init(struct engine *engine, const struct engine_config *config)
{
	unsigned int i;
	int ret;

	memset(engine, 0, sizeof(*engine));
	engine->depth = config->depth ? config->depth : ENGINE_DEFAULT_DEPTH;
	engine->ring_setup = config->ring_setup;
	engine->iowq_workers = config->iowq_workers;
	engine->concurrent_inode_reads = config->concurrent_inode_reads;
	engine->ro_dev_ans = -1;
	engine->done_tail = &engine->done;
	engine->held_tail = &engine->held;
	ret = bufpool_init(&engine->pool, engine->depth,
			   config->slot_size ? config->slot_size :
					       ENGINE_SLOT_SIZE,
			   config->force_backing);
	if (ret)
		return ret;
	engine->reqs = calloc(engine->depth, sizeof(*engine->reqs));
	if (!engine->reqs) {
		bufpool_release(&engine->pool);
		return -ENOMEM;
	}
	for (i = 0; i < engine->depth; i++)
		engine->reqs[i].slot = i;
	/* Without io_uring (disabled, seccomp, old kernel) ioctls remain. */
	if (engine_setup_ring(engine) == 0)
		engine_register_buffers(engine);
	return 0;
}

void engine_release(struct engine *engine)
{
	if (engine->ring) {
		/* the slots are unmapped below: nothing may still target them */
		engine_cancel_all(engine);
		ENCIO_ASSERT(!engine->in_ring && !engine->nr_held);
		io_uring_queue_exit(engine->ring);
		free(engine->ring);
	}
	free(engine->reqs);
	bufpool_release(&engine->pool);
	memset(engine, 0, sizeof(*engine));
}

struct engine_req *engine_get_req(struct engine *engine)
{
	struct engine_req *req;
	int slot = bufpool_get_slot(&engine->pool);

	if (slot < 0)
		return NULL;
	req = &engine->reqs[slot];
	ENCIO_ASSERT(!req->owned && !req->in_flight);
	req->owned = true;
	req->next = NULL;
	req->priv = NULL;
	req->cookie = 0;
	req->res = 0;
	return req;
}

void engine_put_req(struct engine *engine, struct engine_req *req)
{
	ENCIO_ASSERT(req->owned && !req->in_flight);
	req->owned = false;
	bufpool_put_slot(&engine->pool, req->slot);
}

unsigned int engine_inflight(const struct engine *engine)
{
	const struct engine_req *req;
	unsigned int n = engine->in_ring + engine->nr_held;

	for (req = engine->done; req; req = req->next)
		n++;
	ENCIO_ASSERT(n <= engine->depth);
	return n;
}

/* Cut @len bytes of the request's own slot into a vector of iovecs. */
static unsigned int req_fill_iovecs(struct engine *engine,
				    struct engine_req *req, size_t len)
{
	size_t piece = engine->pool.slot_size / ENGINE_IOVS_PER_SLOT;
	char *buf = engine_req_buf(engine, req);
	unsigned int n = 0;

	while (len && n < ENGINE_IOVS_PER_SLOT) {
		size_t this = len < piece || n == ENGINE_IOVS_PER_SLOT - 1 ?
				      len :
				      piece;

		req->iov[n].iov_base = buf;
		req->iov[n].iov_len = this;
		buf += this;
		len -= this;
		n++;
	}
	return n;
}

/* @req is queued: the caller got it and has no other operation on it. */
static void engine_req_queued(struct engine_req *req)
{
	ENCIO_ASSERT(req->owned && !req->in_flight);
	req->in_flight = true;
}

/* @req goes back to its caller with its result. */
static struct engine_req *engine_req_reaped(struct engine_req *req)
{
	ENCIO_ASSERT(req->in_flight && !req->in_ring);
	req->in_flight = false;
	return req;
}

static void engine_done_append(struct engine *engine, struct engine_req *req)
{
	req->next = NULL;
	*engine->done_tail = req;
	engine->done_tail = &req->next;
}

static void engine_complete_now(struct engine *engine, struct engine_req *req,
				ssize_t res)
{
	req->res = res < 0 ? -errno : res;
	engine_done_append(engine, req);
}

static struct io_uring_sqe *engine_get_sqe(struct engine *engine)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(engine->ring);

	if (!sqe) {
		io_uring_submit(engine->ring);
		engine->to_submit = 0;
		sqe = io_uring_get_sqe(engine->ring);
	}
	return sqe;
}

/* The one place a btrfs encoded I/O uring command is prepared. */
static void engine_queue_uring_cmd(struct engine *engine,
				   struct engine_req *req, unsigned int cmd_op,
				   bool fixed, unsigned int buf_index)
{
	struct io_uring_sqe *sqe = engine_get_sqe(engine);

	if (!sqe) {
		errno = EBUSY;
		engine_complete_now(engine, req, -1);
		return;
	}
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = req->fd;
	sqe->cmd_op = cmd_op;
	sqe->addr = (unsigned long)&req->args;
	if (fixed) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = buf_index;
	}
	io_uring_sqe_set_data(sqe, req);
	ENCIO_ASSERT(!req->in_ring && engine->in_ring < engine->depth);
	req->in_ring = true;
	engine->in_ring++;
	engine->to_submit++;
}

static void engine_queue_read(struct engine *engine, struct engine_req *req)
{
	struct io_uring_sqe *sqe = engine_get_sqe(engine);
	void *buf = engine_req_buf(engine, req);

	if (!sqe) {
		errno = EBUSY;
		engine_complete_now(engine, req, -1);
		return;
	}
	if (engine->buffers_registered)
		io_uring_prep_read_fixed(sqe, req->fd, buf, req->len,
					 req->offset, req->slot);
	else
		io_uring_prep_read(sqe, req->fd, buf, req->len, req->offset);
	io_uring_sqe_set_data(sqe, req);
	ENCIO_ASSERT(!req->in_ring && engine->in_ring < engine->depth);
	req->in_ring = true;
	engine->in_ring++;
	engine->to_submit++;
}

/* Put @req into the ring now; its fields say what it is. */
static void engine_ring_issue(struct engine *engine, struct engine_req *req)
{
	bool fixed = req->mode == ENCIO_IO_URING_FIXED;

	switch (req->op) {
	case ENGINE_OP_ENCODED_READ:
		engine_queue_uring_cmd(engine, req, BTRFS_IOC_ENCODED_READ,
				       fixed, req->slot);
		if (req->in_ring) {
			req->holds_lock = true;
			engine->nr_locks++;
		}
		break;
	case ENGINE_OP_ENCODED_WRITE:
		engine_queue_uring_cmd(engine, req, BTRFS_IOC_ENCODED_WRITE,
				       fixed, req->slot);
		break;
	case ENGINE_OP_READ:
		engine_queue_read(engine, req);
		break;
	}
}

/*
 * btrfs' uring encoded read locks the inode's extent range from the offset
 * rounded down to the sector size, for the largest extent there could be,
 * and holds it, and the inode lock shared, until the completion runs as
 * task work in this task. A request that finds them taken (another read of
 * an overlapping range, a writer waiting for the inode lock, writeback
 * whose completion needs the range) is punted to an io-wq worker that
 * blocks there. If the task is killed meanwhile, its exit waits for that
 * worker before any completion runs: the task, the writer and both
 * filesystems hang until reboot.
 *
 * So one encoded read per inode is in the ring: nothing a worker of ours
 * can wait for is then held by a completion of ours. Where nobody can
 * write the file (a read-only mount or subvolume, such as a snapshot to
 * back up) or with concurrent_inode_reads, reads of one inode share the
 * ring as long as their locked ranges are apart. Either way a read that
 * would wait is held here until the read in its way is reaped. Plain
 * (buffered) reads lock what readahead reads too, beyond their own range:
 * they wait for every encoded read of the same inode.
 */
#define BTRFS_MAX_SECTORSIZE 65536

static bool req_lock_conflict(const struct engine *engine,
			      const struct engine_req *req)
{
	unsigned int i;

	if (!engine->nr_locks)
		return false;
	for (i = 0; i < engine->depth; i++) {
		const struct engine_req *other = &engine->reqs[i];

		if (other->holds_lock && other->ino == req->ino &&
		    other->dev == req->dev &&
		    other->lock_start <= req->lock_end &&
		    req->lock_start <= other->lock_end)
			return true;
	}
	return false;
}

/* Whether the files of device @dev cannot be written: asked once a device. */
static bool engine_dev_read_only(struct engine *engine, int fd, dev_t dev)
{
	long fs_type;
	bool read_only;

	if (engine->ro_dev_ans >= 0 && engine->ro_dev == dev)
		return engine->ro_dev_ans;
	if (extent_fs_kind(fd, &fs_type, &read_only))
		read_only = false;
	engine->ro_dev = dev;
	engine->ro_dev_ans = read_only;
	return read_only;
}

/* Into the ring now, or held until an overlapping encoded read is reaped. */
static void engine_ring_read(struct engine *engine, struct engine_req *req)
{
	struct stat st;

	if (fstat(req->fd, &st)) {
		engine_complete_now(engine, req, -1);
		return;
	}
	req->dev = st.st_dev;
	req->ino = st.st_ino;
	if (req->op == ENGINE_OP_ENCODED_READ &&
	    (engine->concurrent_inode_reads ||
	     engine_dev_read_only(engine, req->fd, st.st_dev))) {
		req->lock_start = req->offset &
				  ~(uint64_t)(BTRFS_MAX_SECTORSIZE - 1);
		req->lock_end = req->offset + BTRFS_MAX_UNCOMPRESSED - 1;
	} else {
		req->lock_start = 0;
		req->lock_end = UINT64_MAX;
	}
	if (!req_lock_conflict(engine, req)) {
		engine_ring_issue(engine, req);
		return;
	}
	req->next = NULL;
	*engine->held_tail = req;
	engine->held_tail = &req->next;
	ENCIO_ASSERT(engine->nr_held < engine->depth);
	engine->nr_held++;
}

/* Issue, in order, the held reads nothing in the ring overlaps any more. */
static void engine_release_held(struct engine *engine)
{
	struct engine_req **link = &engine->held;
	struct engine_req *req;

	engine->held_tail = &engine->held;
	while ((req = *link)) {
		if (req_lock_conflict(engine, req)) {
			link = &req->next;
			engine->held_tail = link;
			continue;
		}
		*link = req->next;
		engine->nr_held--;
		engine_ring_issue(engine, req);
	}
}

/* The kernel gave @req back (its completion was reaped). */
static void engine_ring_done(struct engine *engine, struct engine_req *req)
{
	ENCIO_ASSERT(req->in_ring && engine->in_ring > 0);
	req->in_ring = false;
	engine->in_ring--;
	if (req->holds_lock) {
		req->holds_lock = false;
		engine->nr_locks--;
		engine_release_held(engine);
	}
}

static void engine_issue_encoded(struct engine *engine, struct engine_req *req,
				 unsigned int cmd_op)
{
	switch (req->mode) {
	case ENCIO_IO_URING_FIXED:
	case ENCIO_IO_URING:
		if (!engine->ring)
			break;
		if (req->op == ENGINE_OP_ENCODED_READ)
			engine_ring_read(engine, req);
		else
			engine_ring_issue(engine, req);
		return;
	case ENCIO_IO_IOCTL:
		engine_complete_now(engine, req,
				    ioctl(req->fd, cmd_op, &req->args));
		return;
	default:
		break;
	}
	errno = EOPNOTSUPP;
	engine_complete_now(engine, req, -1);
}

void engine_encoded_read(struct engine *engine, struct engine_req *req,
			 enum encio_io_mode mode, int fd, uint64_t offset)
{
	engine_req_queued(req);
	req->op = ENGINE_OP_ENCODED_READ;
	req->mode = mode;
	req->fd = fd;
	req->offset = offset;
	req->len = engine->pool.slot_size;
	memset(&req->args, 0, sizeof(req->args));
	req->args.iov = req->iov;
	req->args.iovcnt = req_fill_iovecs(engine, req, engine->pool.slot_size);
	req->args.offset = offset;
	engine_issue_encoded(engine, req, BTRFS_IOC_ENCODED_READ);
}

void engine_encoded_read_answered(struct engine *engine, struct engine_req *req,
				  int fd, uint64_t offset, size_t res)
{
	engine_req_queued(req);
	req->op = ENGINE_OP_ENCODED_READ;
	req->mode = ENCIO_IO_NONE;
	req->fd = fd;
	req->offset = offset;
	req->len = engine->pool.slot_size;
	req->args.offset = offset;
	engine_complete_now(engine, req, res);
}

void engine_encoded_write(struct engine *engine, struct engine_req *req,
			  enum encio_io_mode mode, int fd, uint64_t offset,
			  size_t encoded_len)
{
	engine_req_queued(req);
	req->op = ENGINE_OP_ENCODED_WRITE;
	req->mode = mode;
	req->fd = fd;
	req->offset = offset;
	req->len = encoded_len;
	req->args.iov = req->iov;
	req->args.iovcnt = req_fill_iovecs(engine, req, encoded_len);
	req->args.offset = offset;
	req->args.flags = 0;
	memset(req->args.reserved, 0, sizeof(req->args.reserved));
	engine_issue_encoded(engine, req, BTRFS_IOC_ENCODED_WRITE);
}

void engine_read(struct engine *engine, struct engine_req *req,
		 enum encio_io_mode mode, int fd, uint64_t offset, size_t len)
{
	void *buf = engine_req_buf(engine, req);

	engine_req_queued(req);
	req->op = ENGINE_OP_READ;
	req->mode = mode;
	req->fd = fd;
	req->offset = offset;
	if (len > engine->pool.slot_size)
		len = engine->pool.slot_size;
	req->len = len;
	if (!engine->ring ||
	    (mode != ENCIO_IO_URING && mode != ENCIO_IO_URING_FIXED)) {
		engine_complete_now(engine, req, pread(fd, buf, len, offset));
		return;
	}
	engine_ring_read(engine, req);
}

static struct engine_req *engine_pop_done(struct engine *engine)
{
	struct engine_req *req = engine->done;

	if (!req)
		return NULL;
	engine->done = req->next;
	if (!engine->done)
		engine->done_tail = &engine->done;
	req->next = NULL;
	return engine_req_reaped(req);
}

static bool ring_wait_transient(int ret)
{
	return ret == -EINTR || ret == -EAGAIN || ret == -EBUSY ||
	       ret == -ETIME;
}

/* Take the completions posted; false when there were none. */
static bool engine_take_cqes(struct engine *engine)
{
	struct io_uring_cqe *cqe;
	struct engine_req *req;
	bool any = false;

	while (io_uring_peek_cqe(engine->ring, &cqe) == 0 && cqe) {
		req = io_uring_cqe_get_data(cqe);
		if (req) {
			req->res = cqe->res;
			engine_done_append(engine, req);
		}
		io_uring_cqe_seen(engine->ring, cqe);
		if (req)
			engine_ring_done(engine, req);
		any = true;
	}
	return any;
}

/*
 * Make the kernel give every request back: held reads never went in and
 * complete as cancelled, io-wq work not started yet is cancelled, and the
 * rest is waited for; every request ends on the done list. A wait that
 * fails is retried (after a pause when it is no signal), with no limit:
 * the kernel may write into the args and slots until it posts their
 * completions. (A ring that dropped completions, -EBADR, would wait
 * forever here, killable, rather than hand out memory still in use.)
 */
static int engine_quiesce(struct engine *engine)
{
	struct io_uring_sqe *sqe;
	struct engine_req *req;
	bool cancel_sent = false;
	int ret, first_err = 0;

	while ((req = engine->held)) {
		engine->held = req->next;
		engine->nr_held--;
		req->res = -ECANCELED;
		engine_done_append(engine, req);
	}
	engine->held_tail = &engine->held;
	if (!engine->ring)
		return 0;
	while (engine->in_ring) {
		if (!cancel_sent) {
			sqe = engine_get_sqe(engine);
			if (sqe) {
				/* its completion names no request */
				io_uring_prep_cancel64(sqe, 0,
						       IORING_ASYNC_CANCEL_ANY);
				io_uring_sqe_set_data(sqe, NULL);
				cancel_sent = true;
			}
		}
		if (engine_take_cqes(engine))
			continue;
		ret = io_uring_submit_and_wait(engine->ring, 1);
		engine->to_submit = 0;
		if (ret < 0 && !ring_wait_transient(ret)) {
			if (!first_err)
				first_err = ret;
			usleep(1000);
		}
	}
	return first_err;
}

struct engine_req *engine_reap(struct engine *engine, bool wait, int *err)
{
	struct io_uring_cqe *cqe = NULL;
	struct engine_req *req;
	int ret;

	*err = 0;
	req = engine_pop_done(engine);
	if (req)
		return req;
	if (!engine->ring || !engine->in_ring)
		return NULL;
	/*
	 * Completions already posted are taken without a syscall; the SQEs
	 * prepared meanwhile go in one batch once the ring runs dry.
	 */
	if (io_uring_peek_cqe(engine->ring, &cqe) == 0 && cqe)
		goto got;
	if (wait)
		ret = io_uring_submit_and_wait(engine->ring, 1);
	else
		ret = io_uring_submit_and_get_events(engine->ring);
	if (ret < 0 && !ring_wait_transient(ret))
		goto failed;
	engine->to_submit = 0;
	ret = io_uring_peek_cqe(engine->ring, &cqe);
	if (ret == -EAGAIN && wait)
		ret = io_uring_wait_cqe(engine->ring, &cqe);
	if (ret && !ring_wait_transient(ret))
		goto failed;
	if (ret || !cqe)
		return NULL;
got:
	req = io_uring_cqe_get_data(cqe);
	if (!req) {
		/* a close that failed, or a cancel: nothing waits for it */
		io_uring_cqe_seen(engine->ring, cqe);
		return engine_reap(engine, wait, err);
	}
	req->res = cqe->res;
	io_uring_cqe_seen(engine->ring, cqe);
	engine_ring_done(engine, req);
	return engine_req_reaped(req);
failed:
	/* Report it once the kernel holds none of our requests. */
	*err = ret;
	engine_quiesce(engine);
	return engine_pop_done(engine);
}

int engine_cancel_all(struct engine *engine)
{
	struct engine_req *req;
	int ret = engine_quiesce(engine);

	while ((req = engine_pop_done(engine)))
		engine_put_req(engine, req);
	return ret;
}

void engine_close(struct engine *engine, int fd)
{
	/* A full SQ (closes only, nothing else submitted) is sent to make room. */
	struct io_uring_sqe *sqe =
		engine->ring_closes ? engine_get_sqe(engine) : NULL;

	if (!sqe) {
		close(fd);
		return;
	}
	io_uring_prep_close(sqe, fd);
	io_uring_sqe_set_data(sqe, NULL);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	engine->to_submit++;
}

void engine_flush(struct engine *engine)
{
	if (engine->ring && engine->to_submit) {
		io_uring_submit(engine->ring);
		engine->to_submit = 0;
	}
}

ssize_t engine_wait(struct engine *engine, struct engine_req *req)
{
	struct engine_req *done;
	int err, first_err = 0;

	do {
		done = engine_reap(engine, true, &err);
		if (err && !first_err)
			first_err = err;
		if (!done && !engine_inflight(engine))
			return first_err ? first_err : -EIO;
	} while (done != req);
	return first_err ? first_err : req->res;
}

static void probe_reset(int *errs)
{
	int i;

	for (i = 0; i < ENCIO_IO_NR_MODES; i++)
		errs[i] = -1;
}

static int engine_probe_read_mode(struct engine *engine, struct engine_req *req,
				  int fd, enum encio_io_mode mode)
{
	ssize_t res;

	if (mode != ENCIO_IO_IOCTL && !engine->ring)
		return ENOSYS;
	if (mode == ENCIO_IO_URING_FIXED && !engine->buffers_registered)
		return ENOSYS;
	engine_encoded_read(engine, req, mode, fd, 0);
	res = engine_wait(engine, req);
	return res < 0 ? -res : 0;
}

/*
 * A kernel that honours IORING_URING_CMD_FIXED imports the iovecs from the
 * registered buffer named by buf_index and must refuse an index past the
 * table; one that ignores the flag imports plain user memory and succeeds.
 */
static enum encio_fixed_state
engine_probe_fixed_honoured(struct engine *engine, struct engine_req *req,
			    int fd)
{
	ssize_t res;

	engine_req_queued(req);
	req->op = ENGINE_OP_ENCODED_READ;
	req->mode = ENCIO_IO_URING_FIXED;
	req->fd = fd;
	memset(&req->args, 0, sizeof(req->args));
	req->args.iov = req->iov;
	req->args.iovcnt = req_fill_iovecs(engine, req, engine->pool.slot_size);
	engine_queue_uring_cmd(engine, req, BTRFS_IOC_ENCODED_READ, true,
			       engine->pool.nr_slots + 7);
	res = engine_wait(engine, req);
	if (res >= 0)
		return ENCIO_FIXED_IGNORED;
	if (res == -EFAULT || res == -EINVAL)
		return ENCIO_FIXED_HONOURED;
	return ENCIO_FIXED_UNKNOWN;
}

static enum encio_io_mode probe_choose(const int *errs, enum encio_io_mode want,
				       const enum encio_io_mode *order,
				       int *err)
{
	int i;

	*err = 0;
	if (want != ENCIO_IO_AUTO) {
		if (errs[want] == 0)
			return want;
		*err = errs[want];
		return ENCIO_IO_NONE;
	}
	for (i = 0; order[i] != ENCIO_IO_NONE; i++) {
		if (errs[order[i]] == 0)
			return order[i];
	}
	*err = errs[ENCIO_IO_IOCTL];
	return ENCIO_IO_NONE;
}

int engine_probe_read(struct engine *engine, int fd, enum encio_io_mode want,
		      struct encio_probe *probe)
{
	static const enum encio_io_mode order[] = { ENCIO_IO_URING_FIXED,
						    ENCIO_IO_URING,
						    ENCIO_IO_IOCTL,
						    ENCIO_IO_NONE };
	struct engine_req *req = engine_get_req(engine);
	struct stat st;
	int err;

	if (!req)
		return -EBUSY;
	probe_reset(probe->read_err);
	probe->fixed = ENCIO_FIXED_UNKNOWN;
	probe->read_err[ENCIO_IO_IOCTL] =
		engine_probe_read_mode(engine, req, fd, ENCIO_IO_IOCTL);
	if (probe->read_err[ENCIO_IO_IOCTL] == 0) {
		probe->read_err[ENCIO_IO_URING] =
			engine_probe_read_mode(engine, req, fd, ENCIO_IO_URING);
		probe->read_err[ENCIO_IO_URING_FIXED] = engine_probe_read_mode(
			engine, req, fd, ENCIO_IO_URING_FIXED);
		if (probe->read_err[ENCIO_IO_URING_FIXED] == 0)
			probe->fixed =
				engine_probe_fixed_honoured(engine, req, fd);
	}
	engine_put_req(engine, req);

	probe->read_mode = probe_choose(probe->read_err, want, order, &err);
	probe->read_none_err = err;
	probe->read_source_writable = false;
	if (want == ENCIO_IO_AUTO && probe->read_mode != ENCIO_IO_IOCTL &&
	    probe->read_mode != ENCIO_IO_NONE &&
	    !engine->concurrent_inode_reads && fstat(fd, &st) == 0 &&
	    !engine_dev_read_only(engine, fd, st.st_dev)) {
		/*
		 * One ring read per inode at a time (see engine_ring_read())
		 * was measured slower than the ioctl: where the file can be
		 * written, the safe choice is also the faster one.
		 */
		probe->read_mode = ENCIO_IO_IOCTL;
		probe->read_source_writable = true;
	}
	/* No encoded reads at all (EPERM, not btrfs) is not a refused mode. */
	if (probe->read_mode == ENCIO_IO_NONE && want != ENCIO_IO_AUTO &&
	    probe->read_err[ENCIO_IO_IOCTL] == 0)
		return -err;
	return 0;
}

static unsigned int count_iowq_workers(void)
{
	char path[300], comm[32];
	unsigned int n = 0;
	struct dirent *de;
	DIR *dir;

	dir = opendir("/proc/self/task");
	if (!dir)
		return 0;
	while ((de = readdir(dir))) {
		int fd;
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (len > 0 && strncmp(comm, "iou-wrk", 7) == 0)
			n++;
	}
	closedir(dir);
	return n;
}

/* One small zstd extent: a sector of zeros, as the kernel would store it. */
static ssize_t probe_write_payload(void *buf, size_t cap, size_t sector)
{
	struct codec *codec = codec_new();
	void *zeros = calloc(1, sector);
	ssize_t len = -ENOMEM;

	if (codec && zeros)
		len = codec_encode(codec, BTRFS_ENCODED_IO_COMPRESSION_ZSTD, 1,
				   zeros, sector, buf, cap);
	free(zeros);
	codec_free(codec);
	return len;
}

static int engine_probe_write_mode(struct engine *engine,
				   struct engine_req *req, int fd,
				   enum encio_io_mode mode, size_t payload_len,
				   size_t sector)
{
	ssize_t res;

	if (mode != ENCIO_IO_IOCTL && !engine->ring)
		return ENOSYS;
	if (mode == ENCIO_IO_URING_FIXED && !engine->buffers_registered)
		return ENOSYS;
	memset(&req->args, 0, sizeof(req->args));
	req->args.len = sector;
	req->args.unencoded_len = sector;
	req->args.compression = BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
	engine_encoded_write(engine, req, mode, fd, 0, payload_len);
	res = engine_wait(engine, req);
	return res < 0 ? -res : 0;
}

int engine_probe_write(struct engine *engine, int dirfd,
		       enum encio_io_mode want, struct encio_probe *probe)
{
	static const enum encio_io_mode order[] = { ENCIO_IO_URING_FIXED,
						    ENCIO_IO_URING,
						    ENCIO_IO_IOCTL,
						    ENCIO_IO_NONE };
	static const enum encio_io_mode order_punted[] = { ENCIO_IO_IOCTL,
							   ENCIO_IO_NONE };
	struct engine_req *req = NULL;
	struct statfs sfs;
	ssize_t payload;
	size_t sector;
	int fd = -1, err;

	probe_reset(probe->write_err);
	probe->write_punted = false;
	if (fstatfs(dirfd, &sfs))
		return -errno;
	if (sfs.f_type != BTRFS_SUPER_MAGIC) {
		probe->write_err[ENCIO_IO_IOCTL] = ENOTTY;
		goto choose;
	}
	sector = sfs.f_bsize;
	fd = inode_tmpfile_cow_open(dirfd);
	if (fd < 0) {
		probe->write_err[ENCIO_IO_IOCTL] = -fd;
		goto choose;
	}
	req = engine_get_req(engine);
	if (!req) {
		err = EBUSY;
		goto out;
	}
	payload = probe_write_payload(engine_req_buf(engine, req),
				      engine->pool.slot_size, sector);
	if (payload < 0) {
		err = -payload;
		goto out;
	}
	probe->write_err[ENCIO_IO_IOCTL] = engine_probe_write_mode(
		engine, req, fd, ENCIO_IO_IOCTL, payload, sector);
	if (probe->write_err[ENCIO_IO_IOCTL] == 0) {
		/*
		 * Only punted work starts io-wq workers in this process (our
		 * reads complete asynchronously in btrfs), so a worker present
		 * after a ring write, new or left from an earlier probe, means
		 * encoded writes are punted here.
		 */
		probe->write_err[ENCIO_IO_URING] = engine_probe_write_mode(
			engine, req, fd, ENCIO_IO_URING, payload, sector);
		probe->write_punted = count_iowq_workers() > 0;
		probe->write_err[ENCIO_IO_URING_FIXED] =
			engine_probe_write_mode(engine, req, fd,
						ENCIO_IO_URING_FIXED, payload,
						sector);
		probe->write_punted |= count_iowq_workers() > 0;
	}
choose:
	/*
	 * Encoded writes that io_uring punts to io-wq workers were measured
	 * slower than the ioctl (design notes: 0.33 s vs 0.28 s for 1 GiB), so
	 * auto writes through the ioctl then, and through the ring otherwise.
	 */
	probe->write_mode =
		probe_choose(probe->write_err, want,
			     probe->write_punted ? order_punted : order, &err);
	probe->write_none_err = err;
	err = 0;
	/* A forced mode the kernel lacks, where encoded writes work at all. */
	if (probe->write_mode == ENCIO_IO_NONE && want != ENCIO_IO_AUTO &&
	    probe->write_err[ENCIO_IO_IOCTL] == 0)
		err = probe->write_none_err;
out:
	if (req)
		engine_put_req(engine, req);
	if (fd >= 0)
		close(fd);
	return -err;
}

int engine_probe_scratch(struct engine *engine, int dirfd, int *write_err)
{
	struct engine_req *req;
	struct statfs sfs;
	ssize_t payload;
	int fd;

	*write_err = 0;
	if (fstatfs(dirfd, &sfs))
		return -errno;
	fd = inode_tmpfile_cow_open(dirfd);
	if (fd < 0)
		return fd;
	req = engine_get_req(engine);
	if (!req) {
		close(fd);
		return -EBUSY;
	}
	payload = probe_write_payload(engine_req_buf(engine, req),
				      engine->pool.slot_size, sfs.f_bsize);
	if (payload < 0)
		*write_err = -payload;
	else
		*write_err = engine_probe_write_mode(
			engine, req, fd, ENCIO_IO_IOCTL, payload, sfs.f_bsize);
	engine_put_req(engine, req);
	return fd;
}

int engine_probe_one(struct engine *engine, int fd, enum encio_io_mode mode,
		     bool write)
{
	struct engine_req *req;
	struct statfs sfs;
	ssize_t payload;
	int err;

	if (!write) {
		req = engine_get_req(engine);
		if (!req)
			return EBUSY;
		err = engine_probe_read_mode(engine, req, fd, mode);
		engine_put_req(engine, req);
		return err;
	}
	if (fstatfs(fd, &sfs))
		return errno;
	req = engine_get_req(engine);
	if (!req)
		return EBUSY;
	payload = probe_write_payload(engine_req_buf(engine, req),
				      engine->pool.slot_size, sfs.f_bsize);
	if (payload < 0)
		err = -payload;
	else
		err = engine_probe_write_mode(engine, req, fd, mode, payload,
					      sfs.f_bsize);
	engine_put_req(engine, req);
	return err;
}

int encoded_write_ioctl(int fd, const void *buf, size_t n, uint64_t offset,
			uint64_t len, uint64_t unencoded_len,
			uint64_t unencoded_offset, int compression)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
	struct btrfs_ioctl_encoded_io_args a = {
		.iov = &iov,
		.iovcnt = 1,
		.offset = offset,
		.len = len,
		.unencoded_len = unencoded_len,
		.unencoded_offset = unencoded_offset,
		.compression = compression,
	};

	while (ioctl(fd, BTRFS_IOC_ENCODED_WRITE, &a) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}
