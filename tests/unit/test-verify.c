// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/verify on a filesystem without encoded reads (the
 * test directory, tmpfs where possible): every byte compared, the first
 * difference named, holes equal to zeros, a write-only copy read anyway,
 * trees named as copy -r names them, entries missing and extra.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "copy/copy.h"

#define SIZE (1024 * 1024 + 4097)

static char dir[64];

static void path_of(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

/* @size bytes of a pattern no two 128 KiB pieces share, at @offset. */
static void write_data(const char *name, uint64_t offset, size_t size)
{
	char path[PATH_MAX];
	unsigned char *buf = malloc(size);
	size_t i;
	int fd;

	assert_non_null(buf);
	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)((offset + i) * 2654435761U >> 13);
	path_of(path, name);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, size, offset), (ssize_t)size);
	close(fd);
	free(buf);
}

static void set_size(const char *name, off_t size)
{
	char path[PATH_MAX];
	int fd;

	path_of(path, name);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

/* Change the byte at @offset (it may be a zero of a hole). */
static void poke(const char *name, off_t offset)
{
	char path[PATH_MAX];
	unsigned char byte;
	int fd;

	path_of(path, name);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &byte, 1, offset), 1);
	byte ^= 0xff;
	assert_int_equal(pwrite(fd, &byte, 1, offset), 1);
	close(fd);
}

/* verify_file_fds() of two names in the test directory. */
static int verify_names(struct verify_ctx *v, const char *src, const char *dst,
			int dst_flags, struct encio_error *e)
{
	char sp[PATH_MAX], dp[PATH_MAX];
	int sfd, dfd, ret;

	path_of(sp, src);
	path_of(dp, dst);
	sfd = open(sp, O_RDONLY);
	dfd = open(dp, dst_flags);
	assert_true(sfd >= 0 && dfd >= 0);
	ret = verify_file_fds(v, sfd, dfd, sp, dp, e);
	close(sfd);
	close(dfd);
	return ret;
}

static int setup(void **state)
{
	const char *base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";

	(void)state;
	snprintf(dir, sizeof(dir), "%s/test-verify.XXXXXX", base);
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

static void test_file_every_byte(void **state)
{
	struct verify_ctx v;
	struct encio_error e;

	(void)state;
	assert_int_equal(verify_ctx_init(&v), 0);
	write_data("a", 0, SIZE);
	write_data("b", 0, SIZE);
	assert_int_equal(verify_names(&v, "a", "b", O_RDONLY, &e), 0);
	assert_int_equal(v.stats.files, 1);
	assert_int_equal(v.stats.bytes, SIZE);
	assert_int_equal(v.stats.files_plain, 1);

	/* Anywhere: the first and the last byte, one in the middle. */
	poke("b", 300001);
	assert_int_equal(verify_names(&v, "a", "b", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_true(e.has_offset);
	assert_int_equal(e.offset, 300001);
	assert_non_null(strstr(e.path, "/b"));
	assert_non_null(strstr(e.op, "content differs"));
	write_data("b", 0, SIZE);
	poke("b", SIZE - 1);
	assert_int_equal(verify_names(&v, "a", "b", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, SIZE - 1);
	write_data("b", 0, SIZE);
	poke("b", 0);
	assert_int_equal(verify_names(&v, "a", "b", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, 0);

	/* A size that differs, either way. */
	write_data("b", 0, SIZE);
	set_size("b", SIZE - 10);
	assert_int_equal(verify_names(&v, "a", "b", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, SIZE - 10);
	assert_non_null(strstr(e.op, "size differs"));
	assert_int_equal(verify_names(&v, "b", "a", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, SIZE - 10);
	assert_int_equal(v.stats.files, 1);
	verify_ctx_release(&v);
}

static void test_file_holes(void **state)
{
	struct verify_ctx v;
	struct encio_error e;
	char zeros[65536] = { 0 };
	char path[PATH_MAX];
	int fd, i;

	(void)state;
	assert_int_equal(verify_ctx_init(&v), 0);
	/* Sparse: data at 4 MiB of 8 MiB. */
	set_size("sparse1", 8 << 20);
	write_data("sparse1", 4 << 20, 100000);
	set_size("sparse2", 8 << 20);
	write_data("sparse2", 4 << 20, 100000);
	assert_int_equal(verify_names(&v, "sparse1", "sparse2", O_RDONLY, &e),
			 0);
	assert_int_equal(v.stats.bytes, 8 << 20);
	assert_true(v.stats.hole_bytes >= (8 << 20) - (1 << 20));

	/* The same content with its holes written as zeros. */
	path_of(path, "dense");
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	for (i = 0; i < 128; i++)
		assert_int_equal(write(fd, zeros, sizeof(zeros)),
				 sizeof(zeros));
	close(fd);
	write_data("dense", 4 << 20, 100000);
	assert_int_equal(verify_names(&v, "sparse1", "dense", O_RDONLY, &e), 0);
	assert_int_equal(verify_names(&v, "dense", "sparse1", O_RDONLY, &e), 0);
	poke("dense", 6 << 20);
	assert_int_equal(verify_names(&v, "sparse1", "dense", O_RDONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, 6 << 20);
	verify_ctx_release(&v);
}

/* A copy being written is open write-only: it is read anyway. */
static void test_file_write_only(void **state)
{
	struct verify_ctx v;
	struct encio_error e;

	(void)state;
	assert_int_equal(verify_ctx_init(&v), 0);
	write_data("w1", 0, 200000);
	write_data("w2", 0, 200000);
	assert_int_equal(verify_names(&v, "w1", "w2", O_WRONLY, &e), 0);
	poke("w2", 150000);
	assert_int_equal(verify_names(&v, "w1", "w2", O_WRONLY, &e),
			 -VERIFY_DIFFERS);
	assert_int_equal(e.offset, 150000);
	verify_ctx_release(&v);
}

struct reports {
	int n;
	char what[8][128];
	char path[8][PATH_MAX];
};

static void record(void *arg, const struct encio_error *e)
{
	struct reports *r = arg;

	if (r->n < 8) {
		snprintf(r->what[r->n], sizeof(r->what[0]), "%s", e->op);
		snprintf(r->path[r->n], sizeof(r->path[0]), "%s", e->path);
	}
	r->n++;
}

static void make_tree(const char *name)
{
	char path[PATH_MAX], file[64];

	path_of(path, name);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(file, sizeof(file), "%s/sub", name);
	path_of(path, file);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(file, sizeof(file), "%s/sub/data", name);
	write_data(file, 0, 50000);
	snprintf(file, sizeof(file), "%s/link", name);
	path_of(path, file);
	assert_int_equal(symlink("sub/data", path), 0);
}

static int run_trees(struct verify_ctx *v, bool no_target_dir, const char *src,
		     const char *dest, struct reports *r)
{
	struct verify_tree_options opts = {
		.recursive = true,
		.no_target_dir = no_target_dir,
		.report = record,
		.arg = r,
	};
	char sp[PATH_MAX], dp[PATH_MAX];
	char *srcs[] = { sp };
	struct encio_error e;

	path_of(sp, src);
	path_of(dp, dest);
	memset(r, 0, sizeof(*r));
	memset(&v->stats, 0, sizeof(v->stats));
	return verify_trees(v, &opts, srcs, 1, dp, &e);
}

static void test_trees(void **state)
{
	struct verify_ctx v;
	struct reports r;
	char path[PATH_MAX], other[PATH_MAX];

	(void)state;
	assert_int_equal(verify_ctx_init(&v), 0);
	make_tree("t");
	path_of(path, "d");
	assert_int_equal(mkdir(path, 0755), 0);
	make_tree("d/t");

	/* DEST a directory: its copy is DEST/t; with -T, DEST itself. */
	assert_int_equal(run_trees(&v, false, "t", "d", &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(v.stats.files, 1);
	assert_int_equal(v.stats.dirs, 2);
	assert_int_equal(v.stats.symlinks, 1);
	assert_int_equal(v.stats.bytes, 50000);
	assert_int_equal(run_trees(&v, true, "t", "d/t", &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(run_trees(&v, false, "t", "d/t", &r), 0);
	assert_int_equal(r.n, 1);
	assert_non_null(strstr(r.what[0], "missing in the copy"));
	assert_non_null(strstr(r.path[0], "/d/t/t"));
	assert_int_equal(v.stats.failed, 1);

	/* Another byte, another target. */
	poke("d/t/sub/data", 4444);
	path_of(path, "d/t/link");
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("sub/datb", path), 0);
	assert_int_equal(run_trees(&v, true, "t", "d/t", &r), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(v.stats.failed, 2);
	assert_int_equal(v.stats.files, 0);

	/* Missing, extra. */
	path_of(path, "d/t/sub/data");
	path_of(other, "d/t/extra");
	assert_int_equal(rename(path, other), 0);
	path_of(path, "d/t/link");
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("sub/data", path), 0);
	assert_int_equal(run_trees(&v, true, "t", "d/t", &r), 0);
	assert_int_equal(r.n, 2);
	assert_non_null(strstr(r.what[0], "missing in the copy"));
	assert_non_null(strstr(r.path[0], "d/t/sub/data"));
	assert_non_null(strstr(r.what[1], "not in the source"));
	assert_non_null(strstr(r.path[1], "d/t/extra"));
	verify_ctx_release(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_every_byte),
		cmocka_unit_test(test_file_holes),
		cmocka_unit_test(test_file_write_only),
		cmocka_unit_test(test_trees),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
