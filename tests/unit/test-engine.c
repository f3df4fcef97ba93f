// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the buffer pool and of the engine's request preparation:
 * every iovec handed to the kernel lies inside the request's own slot, which
 * is the registered buffer named by buf_index.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/compat.h"
#include "io/engine.h"

static void test_bufpool_slots(void **state)
{
	struct bufpool pool;
	int seen[8] = { 0 };
	int i, slot;

	(void)state;
	assert_int_equal(bufpool_init(&pool, 8, 128 * 1024, BUFPOOL_NORMAL), 0);
	assert_int_equal(pool.backing, BUFPOOL_NORMAL);
	for (i = 0; i < 8; i++) {
		slot = bufpool_get_slot(&pool);
		assert_in_range(slot, 0, 7);
		assert_int_equal(seen[slot], 0);
		seen[slot] = 1;
		memset(bufpool_slot_addr(&pool, slot), i, pool.slot_size);
	}
	assert_int_equal(bufpool_get_slot(&pool), -1);
	bufpool_put_slot(&pool, 3);
	assert_int_equal(bufpool_get_slot(&pool), 3);
	bufpool_release(&pool);
}

static void test_bufpool_thp_or_better(void **state)
{
	struct bufpool pool;

	(void)state;
	assert_int_equal(bufpool_init(&pool, 32, 128 * 1024, -1), 0);
	assert_true(pool.map_len >= 32 * 128 * 1024);
	assert_int_equal((uintptr_t)pool.base % (2 * 1024 * 1024), 0);
	bufpool_release(&pool);
}

/* An unlinked file on a filesystem that is not btrfs. */
static int scratch_fd(void)
{
	char name[] = "/dev/shm/encio-test-engine.XXXXXX";
	int fd = mkstemp(name);

	assert_true(fd >= 0);
	unlink(name);
	return fd;
}

static void assert_iovecs_in_slot(const struct engine *engine,
				  const struct engine_req *req,
				  size_t expect_len)
{
	const char *lo = bufpool_slot_addr(&engine->pool, req->slot);
	const char *hi = lo + engine->pool.slot_size;
	size_t total = 0;
	unsigned int i;

	assert_ptr_equal(req->args.iov, req->iov);
	assert_in_range(req->args.iovcnt, 1, ENGINE_IOVS_PER_SLOT);
	for (i = 0; i < req->args.iovcnt; i++) {
		const char *base = req->iov[i].iov_base;

		assert_true(base >= lo);
		assert_true(base + req->iov[i].iov_len <= hi);
		total += req->iov[i].iov_len;
	}
	assert_int_equal(total, expect_len);
}

static struct io_uring_sqe *last_sqe(struct engine *engine)
{
	struct io_uring_sq *sq = &engine->ring->sq;

	return &sq->sqes[(sq->sqe_tail - 1) & *sq->kring_mask];
}

static void drain(struct engine *engine)
{
	struct engine_req *req;
	int err;

	while (engine_inflight(engine)) {
		req = engine_reap(engine, true, &err);
		assert_int_equal(err, 0);
		assert_non_null(req);
		/* The scratch file is not on btrfs: every encoded request fails. */
		assert_true(req->res < 0);
		engine_put_req(engine, req);
	}
}

static void test_fixed_requests_stay_in_their_slot(void **state)
{
	static const size_t write_lens[] = { 1,	    4096,   32768,
					     32769, 100000, 131072 };
	/* reads of one file far apart: each goes into the ring at once */
	struct engine_config config = { .depth = 8,
					.force_backing = -1,
					.concurrent_inode_reads = true };
	struct engine engine;
	struct engine_req *req;
	struct io_uring_sqe *sqe;
	unsigned int i;
	int fd;

	(void)state;
	fd = scratch_fd();
	assert_int_equal(engine_init(&engine, &config), 0);
	if (!engine.ring || !engine.buffers_registered) {
		engine_release(&engine);
		close(fd);
		skip();
	}
	for (i = 0; i < sizeof(write_lens) / sizeof(write_lens[0]); i++) {
		req = engine_get_req(&engine);
		assert_non_null(req);
		if (i % 2) {
			engine_encoded_read(&engine, req, ENCIO_IO_URING_FIXED,
					    fd, (uint64_t)i << 20);
			assert_iovecs_in_slot(&engine, req,
					      engine.pool.slot_size);
		} else {
			memset(&req->args, 0, sizeof(req->args));
			req->args.compression =
				BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
			engine_encoded_write(&engine, req, ENCIO_IO_URING_FIXED,
					     fd, 0, write_lens[i]);
			assert_iovecs_in_slot(&engine, req, write_lens[i]);
		}
		sqe = last_sqe(&engine);
		assert_int_equal(sqe->opcode, IORING_OP_URING_CMD);
		assert_int_equal(sqe->uring_cmd_flags, IORING_URING_CMD_FIXED);
		assert_int_equal(sqe->buf_index, req->slot);
		assert_int_equal(sqe->addr, (uintptr_t)&req->args);
		assert_ptr_equal(sqe->fd, fd);
	}
	drain(&engine);
	engine_release(&engine);
	close(fd);
}

static void test_plain_uring_has_no_fixed_flag(void **state)
{
	struct engine_config config = { .depth = 4,
					.force_backing = BUFPOOL_NORMAL };
	struct engine engine;
	struct engine_req *req;
	struct io_uring_sqe *sqe;
	int fd;

	(void)state;
	fd = scratch_fd();
	assert_int_equal(engine_init(&engine, &config), 0);
	if (!engine.ring) {
		engine_release(&engine);
		close(fd);
		skip();
	}
	req = engine_get_req(&engine);
	engine_encoded_read(&engine, req, ENCIO_IO_URING, fd, 4096);
	sqe = last_sqe(&engine);
	assert_int_equal(sqe->uring_cmd_flags, 0);
	assert_int_equal(sqe->cmd_op, BTRFS_IOC_ENCODED_READ);
	assert_int_equal(req->args.offset, 4096);
	drain(&engine);
	engine_release(&engine);
	close(fd);
}

static void test_ioctl_completes_in_order_of_issue(void **state)
{
	struct engine_config config = { .depth = 4,
					.force_backing = BUFPOOL_NORMAL };
	struct engine engine;
	struct engine_req *a, *b, *got;
	int fd, err;

	(void)state;
	fd = scratch_fd();
	assert_int_equal(engine_init(&engine, &config), 0);
	a = engine_get_req(&engine);
	b = engine_get_req(&engine);
	engine_encoded_read(&engine, a, ENCIO_IO_IOCTL, fd, 0);
	engine_encoded_read(&engine, b, ENCIO_IO_IOCTL, fd, 0);
	assert_int_equal(engine_inflight(&engine), 2);
	got = engine_reap(&engine, false, &err);
	assert_ptr_equal(got, a);
	assert_true(a->res == -ENOTTY || a->res == -EOPNOTSUPP);
	got = engine_reap(&engine, false, &err);
	assert_ptr_equal(got, b);
	assert_null(engine_reap(&engine, false, &err));
	engine_put_req(&engine, a);
	engine_put_req(&engine, b);
	engine_release(&engine);
	close(fd);
}

/* An engine with a ring, or the test is skipped. */
static void ring_engine(struct engine *engine, struct engine_config *config)
{
	assert_int_equal(engine_init(engine, config), 0);
	if (!engine->ring) {
		engine_release(engine);
		skip();
	}
}

static struct engine_req *ring_read(struct engine *engine, int fd,
				    uint64_t offset)
{
	struct engine_req *req = engine_get_req(engine);

	assert_non_null(req);
	engine_encoded_read(engine, req, ENCIO_IO_URING, fd, offset);
	return req;
}

/*
 * A writable file: one encoded read of it in the ring at a time, the next
 * held until the one before is reaped; other files' reads go at once.
 */
static void test_reads_of_one_file_take_turns(void **state)
{
	struct engine_config config = { .depth = 4,
					.force_backing = BUFPOOL_NORMAL };
	struct engine engine;
	struct engine_req *a, *b, *c, *got;
	int fd = scratch_fd(), other = scratch_fd(), err;

	(void)state;
	ring_engine(&engine, &config);
	a = ring_read(&engine, fd, 0);
	b = ring_read(&engine, fd, 1 << 20);
	c = ring_read(&engine, other, 0);
	assert_true(a->in_ring);
	assert_false(b->in_ring);
	assert_true(c->in_ring);
	assert_int_equal(engine.nr_held, 1);
	assert_int_equal(engine_inflight(&engine), 3);
	do {
		got = engine_reap(&engine, true, &err);
		assert_int_equal(err, 0);
		assert_ptr_not_equal(got, b);
		engine_put_req(&engine, got);
	} while (got != a);
	assert_true(b->in_ring);
	assert_int_equal(engine.nr_held, 0);
	drain(&engine);
	assert_int_equal(engine.pool.nr_free, config.depth);
	engine_release(&engine);
	close(fd);
	close(other);
}

/* Reads of one file may share the ring only with their locked ranges apart. */
static void test_concurrent_reads_keep_their_ranges_apart(void **state)
{
	struct engine_config config = { .depth = 4,
					.force_backing = BUFPOOL_NORMAL,
					.concurrent_inode_reads = true };
	struct engine engine;
	struct engine_req *a, *b, *c;
	int fd = scratch_fd();

	(void)state;
	ring_engine(&engine, &config);
	a = ring_read(&engine, fd, 0);
	b = ring_read(&engine, fd, 64 * 1024);
	c = ring_read(&engine, fd, 128 * 1024);
	assert_true(a->in_ring);
	assert_false(b->in_ring);
	assert_true(c->in_ring);
	drain(&engine);
	engine_release(&engine);
	close(fd);
}

/*
 * Reads of an empty pipe stay in the kernel until cancelled: after
 * engine_cancel_all() nothing is in flight, every slot is free, and the
 * engine works on.
 */
static void test_cancel_all_gives_every_slot_back(void **state)
{
	struct engine_config config = { .depth = 4,
					.force_backing = BUFPOOL_NORMAL };
	struct engine engine;
	struct engine_req *req;
	int pipefd[2], i;

	(void)state;
	assert_int_equal(pipe(pipefd), 0);
	ring_engine(&engine, &config);
	for (i = 0; i < 4; i++) {
		req = engine_get_req(&engine);
		assert_non_null(req);
		engine_read(&engine, req, ENCIO_IO_URING, pipefd[0], 0, 100);
	}
	engine_flush(&engine);
	assert_null(engine_get_req(&engine));
	assert_int_equal(engine_inflight(&engine), 4);
	assert_int_equal(engine_cancel_all(&engine), 0);
	assert_int_equal(engine_inflight(&engine), 0);
	assert_int_equal(engine.pool.nr_free, 4);

	req = engine_get_req(&engine);
	assert_non_null(req);
	assert_int_equal(write(pipefd[1], "data", 4), 4);
	engine_read(&engine, req, ENCIO_IO_URING, pipefd[0], 0, 100);
	assert_int_equal(engine_wait(&engine, req), 4);
	assert_memory_equal(engine_req_buf(&engine, req), "data", 4);
	engine_put_req(&engine, req);
	engine_release(&engine);
	close(pipefd[0]);
	close(pipefd[1]);
}

static void test_mode_names(void **state)
{
	enum encio_io_mode mode;

	(void)state;
	assert_int_equal(encio_io_mode_parse("uring-fixed", &mode), 0);
	assert_int_equal(mode, ENCIO_IO_URING_FIXED);
	assert_int_equal(encio_io_mode_parse("ioctl", &mode), 0);
	assert_int_equal(mode, ENCIO_IO_IOCTL);
	assert_int_equal(encio_io_mode_parse("fast", &mode), -EINVAL);
	assert_string_equal(encio_io_mode_name(ENCIO_IO_URING), "uring");
	assert_string_equal(encio_fixed_state_desc(ENCIO_FIXED_IGNORED),
			    "ignored by this kernel");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bufpool_slots),
		cmocka_unit_test(test_bufpool_thp_or_better),
		cmocka_unit_test(test_fixed_requests_stay_in_their_slot),
		cmocka_unit_test(test_plain_uring_has_no_fixed_flag),
		cmocka_unit_test(test_ioctl_completes_in_order_of_issue),
		cmocka_unit_test(test_reads_of_one_file_take_turns),
		cmocka_unit_test(test_concurrent_reads_keep_their_ranges_apart),
		cmocka_unit_test(test_cancel_all_gives_every_slot_back),
		cmocka_unit_test(test_mode_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
