// SPDX-License-Identifier: GPL-2.0
/*
 * Each ENCIO_ASSERT() trips: a child breaks one invariant through the real
 * functions (misuse, or state forged as a bug would leave it) and must die
 * of SIGABRT with the assert's condition on its stderr. Built without
 * ENCIO_ASSERTS the asserts are compiled out and every test is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy/copy_internal.h"
#include "io/engine.h"
#include "receive/receive_internal.h"

/* after receive_internal.h, whose fail() cmocka's fail macro would take */
#include <cmocka.h>

/* Run @fn in a child; it must abort with @cond quoted on stderr. */
static void expect_abort(void (*fn)(void), const char *cond)
{
	char out[4096], want[512];
	size_t len = 0;
	ssize_t n;
	int pipefd[2], status;
	pid_t pid;

#ifndef ENCIO_ASSERTS
	(void)fn;
	(void)cond;
	skip();
#endif
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pipefd[0]);
		dup2(pipefd[1], STDERR_FILENO);
		fn();
		_exit(0);
	}
	close(pipefd[1]);
	while (len < sizeof(out) - 1 &&
	       (n = read(pipefd[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += n;
	out[len] = '\0';
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		skip(); /* no io_uring here */
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("child status %#x, stderr: %s", status, out);
	snprintf(want, sizeof(want), "assertion '%s' failed", cond);
	if (!strstr(out, want))
		fail_msg("no \"%s\" in: %s", want, out);
}

/* ---- the engine ---- */

static struct engine engine;

static void engine_up(bool need_ring)
{
	struct engine_config config = { .depth = 4,
					.force_backing = -1,
					.slot_size = 4096 };

	if (engine_init(&engine, &config))
		_exit(2);
	if (need_ring && !engine.ring)
		_exit(3);
}

static int scratch_fd(void)
{
	char name[] = "/dev/shm/encio-test-invariants.XXXXXX";
	int fd = mkstemp(name);

	if (fd < 0)
		_exit(4);
	unlink(name);
	return fd;
}

static void put_twice(void)
{
	struct engine_req *req;

	engine_up(false);
	req = engine_get_req(&engine);
	engine_put_req(&engine, req);
	engine_put_req(&engine, req);
}

static void test_engine_put_twice(void **state)
{
	(void)state;
	expect_abort(put_twice, "req->owned && !req->in_flight");
}

static void got_twice(void)
{
	struct engine_req *req;

	engine_up(false);
	req = engine_get_req(&engine);
	/* its slot freed behind the engine's back: handed out again */
	bufpool_put_slot(&engine.pool, req->slot);
	engine_get_req(&engine);
}

static void test_engine_got_twice(void **state)
{
	(void)state;
	expect_abort(got_twice, "!req->owned && !req->in_flight");
}

static void queued_twice(void)
{
	struct engine_req *req;
	int fd = scratch_fd();

	engine_up(false);
	req = engine_get_req(&engine);
	engine_read(&engine, req, ENCIO_IO_IOCTL, fd, 0, 512);
	engine_read(&engine, req, ENCIO_IO_IOCTL, fd, 0, 512);
}

static void test_engine_queued_twice(void **state)
{
	(void)state;
	expect_abort(queued_twice, "req->owned && !req->in_flight");
}

static void put_in_flight(void)
{
	struct engine_req *req;

	engine_up(false);
	req = engine_get_req(&engine);
	engine_read(&engine, req, ENCIO_IO_IOCTL, scratch_fd(), 0, 512);
	engine_put_req(&engine, req);
}

static void test_engine_put_in_flight(void **state)
{
	(void)state;
	expect_abort(put_in_flight, "req->owned && !req->in_flight");
}

static void reaped_not_in_flight(void)
{
	struct engine_req *req;
	int err;

	engine_up(false);
	req = engine_get_req(&engine);
	engine_read(&engine, req, ENCIO_IO_IOCTL, scratch_fd(), 0, 512);
	req->in_flight = false;
	engine_reap(&engine, false, &err);
}

static void test_engine_reaped_not_in_flight(void **state)
{
	(void)state;
	expect_abort(reaped_not_in_flight, "req->in_flight && !req->in_ring");
}

static void ring_done_not_in_ring(void)
{
	struct engine_req *req;
	int err;

	engine_up(true);
	req = engine_get_req(&engine);
	engine_read(&engine, req, ENCIO_IO_URING, scratch_fd(), 0, 512);
	req->in_ring = false;
	engine_reap(&engine, true, &err);
}

static void test_engine_ring_done_not_in_ring(void **state)
{
	(void)state;
	expect_abort(ring_done_not_in_ring,
		     "req->in_ring && engine->in_ring > 0");
}

static void ring_over_depth(void)
{
	struct engine_req *req;

	engine_up(true);
	req = engine_get_req(&engine);
	engine.in_ring = engine.depth;
	engine_read(&engine, req, ENCIO_IO_URING, scratch_fd(), 0, 512);
}

static void test_engine_ring_over_depth(void **state)
{
	(void)state;
	expect_abort(ring_over_depth,
		     "!req->in_ring && engine->in_ring < engine->depth");
}

static void inflight_over_depth(void)
{
	engine_up(false);
	engine.nr_held = engine.depth + 1;
	engine_inflight(&engine);
}

static void test_engine_inflight_over_depth(void **state)
{
	(void)state;
	expect_abort(inflight_over_depth, "n <= engine->depth");
}

static void release_in_flight(void)
{
	engine_up(true);
	/* a held read counted but lost from the list: never given back */
	engine.nr_held = 1;
	engine_release(&engine);
}

static void test_engine_release_in_flight(void **state)
{
	(void)state;
	expect_abort(release_in_flight, "!engine->in_ring && !engine->nr_held");
}

/* ---- copy jobs ---- */

static void job_release_busy(void)
{
	struct copy_job job = { .inflight = 1, .src_fd = -1, .dst_fd = -1 };

	copy_job_release(&job);
}

static void test_job_release_busy(void **state)
{
	(void)state;
	expect_abort(job_release_busy, "copy_job_idle(job)");
}

static void job_complete_foreign(void)
{
	struct copy_job job = { .inflight = 1, .src_fd = -1, .dst_fd = -1 };
	struct engine_req req = { .priv = NULL };

	copy_job_complete(&job, &req);
}

static void test_job_complete_foreign(void **state)
{
	(void)state;
	expect_abort(job_complete_foreign,
		     "req->priv == job && job->inflight > 0");
}

static void job_complete_idle(void)
{
	struct copy_job job = { .src_fd = -1, .dst_fd = -1 };
	struct engine_req req = { .priv = &job };

	copy_job_complete(&job, &req);
}

static void test_job_complete_idle(void **state)
{
	(void)state;
	expect_abort(job_complete_idle,
		     "req->priv == job && job->inflight > 0");
}

static void job_empty_range(void)
{
	struct copy_job job = { .src_fd = -1, .dst_fd = -1 };

	copy_job_push_range(&job, 8192, 8192, false);
}

static void test_job_empty_range(void **state)
{
	(void)state;
	expect_abort(job_empty_range, "start < end");
}

/* ---- receive's directory cache ---- */

static struct receive_ctx *rcv_ctx(void)
{
	struct receive_ctx *ctx = calloc(1, sizeof(*ctx));
	int i;

	if (!ctx)
		_exit(2);
	ctx->subvol_fd = open("/", O_RDONLY | O_DIRECTORY);
	ctx->write_fd = -1;
	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		ctx->dirs[i].fd = -1;
	return ctx;
}

static void dirs_cleared_in_use(void)
{
	struct receive_ctx *ctx = rcv_ctx();

	ctx->last_dir = &ctx->dirs[0];
	rcv_dir_cache_clear(ctx);
}

static void test_dirs_cleared_in_use(void **state)
{
	(void)state;
	expect_abort(dirs_cleared_in_use, "!ctx->last_dir");
}

static void dirs_last_outside(void)
{
	struct receive_ctx *ctx = rcv_ctx();
	static struct dir_slot stray;
	char last[NAME_MAX + 1];

	ctx->last_dir = &stray;
	rcv_path_open_parent(ctx, "a/b", last);
}

static void test_dirs_last_outside(void **state)
{
	(void)state;
	expect_abort(dirs_last_outside,
		     "!ctx->last_dir || (ctx->last_dir >= ctx->dirs && "
		     "ctx->last_dir < ctx->dirs + DIR_CACHE_SLOTS)");
}

static void dirs_miss_takes_last(void)
{
	struct receive_ctx *ctx = rcv_ctx();
	char last[NAME_MAX + 1];
	int i;

	/* the slot handed out last forged as the least recently used */
	for (i = 0; i < DIR_CACHE_SLOTS; i++) {
		ctx->dirs[i].fd = open("/", O_RDONLY | O_DIRECTORY);
		snprintf(ctx->dirs[i].path, sizeof(ctx->dirs[i].path), "d%d",
			 i);
		ctx->dirs[i].used = i + 1;
	}
	ctx->dir_clock = DIR_CACHE_SLOTS;
	ctx->last_dir = &ctx->dirs[0];
	rcv_path_open_parent(ctx, "new/x", last);
}

static void test_dirs_miss_takes_last(void **state)
{
	(void)state;
	expect_abort(dirs_miss_takes_last,
		     "slot != ctx->last_dir || slot->fd < 0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_put_twice),
		cmocka_unit_test(test_engine_got_twice),
		cmocka_unit_test(test_engine_queued_twice),
		cmocka_unit_test(test_engine_put_in_flight),
		cmocka_unit_test(test_engine_reaped_not_in_flight),
		cmocka_unit_test(test_engine_ring_done_not_in_ring),
		cmocka_unit_test(test_engine_ring_over_depth),
		cmocka_unit_test(test_engine_inflight_over_depth),
		cmocka_unit_test(test_engine_release_in_flight),
		cmocka_unit_test(test_job_release_busy),
		cmocka_unit_test(test_job_complete_foreign),
		cmocka_unit_test(test_job_complete_idle),
		cmocka_unit_test(test_job_empty_range),
		cmocka_unit_test(test_dirs_cleared_in_use),
		cmocka_unit_test(test_dirs_last_outside),
		cmocka_unit_test(test_dirs_miss_takes_last),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);

#ifndef ENCIO_ASSERTS
	/* every test skipped: the harness says SKIP, not PASS */
	if (!failed)
		return 77;
#endif
	return failed;
}
