// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/fs/share.c, the index of shared source extents: what a
 * file range of an extent written before becomes (clones, writes), on an
 * index whose source filesystem is set up by hand (no btrfs needed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/kernel.h"
#include "fs/share.h"

#define KiB 1024ULL

struct fixture {
	struct share_index si;
	struct share_plan plan;
	uint32_t a, b;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	share_init(&f->si);
	f->si.fs = calloc(1, sizeof(*f->si.fs));
	assert_non_null(f->si.fs);
	f->si.nr_fs = 1;
	f->si.fs[0].all = true;
	f->si.fs[0].prepared = true;
	assert_int_equal(share_file_new(&f->si, &f->a), 0);
	assert_int_equal(share_file_new(&f->si, &f->b), 0);
	share_file_get(&f->si, f->a)->state = SHARE_READY;
	share_file_get(&f->si, f->b)->state = SHARE_READY;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	share_plan_release(&f->plan);
	share_release(&f->si);
	free(f);
	return 0;
}

static struct file_extent regular(uint64_t offset, uint64_t len,
				  uint64_t bytenr, uint64_t extent_offset,
				  int compression)
{
	return (struct file_extent){
		.offset = offset,
		.len = len,
		.disk_bytenr = bytenr,
		.disk_bytes = 128 * KiB,
		.ram_bytes = 1024 * KiB,
		.extent_offset = extent_offset,
		.kind = EXTENT_REGULAR,
		.compression = compression,
	};
}

/* Plan @fe, all of it, in a file of @size written to @file. */
static void plan(struct fixture *f, const struct file_extent *fe, uint64_t size,
		 uint32_t file)
{
	f->plan.nr = 0;
	assert_int_equal(
		share_plan_range(
			&f->si, 0, fe, fe->offset, fe->offset + fe->len, size,
			fe->compression != 0 ? SHARE_CUT_WHOLE : SHARE_CUT_ANY,
			file, &f->plan),
		0);
}

static void assert_piece(const struct share_piece *p, uint64_t off,
			 uint64_t len, bool clone, uint32_t file,
			 uint64_t src_off)
{
	assert_int_equal(p->off, off);
	assert_int_equal(p->len, len);
	assert_int_equal(p->clone, clone);
	if (clone) {
		assert_int_equal(p->file, file);
		assert_int_equal(p->src_off, src_off);
	}
}

static void test_first_written_then_cloned(void **state)
{
	struct fixture *f = *state;
	struct file_extent fe = regular(0, 128 * KiB, 1 << 20, 0, 0);

	plan(f, &fe, 1 << 20, f->a);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 0, 128 * KiB, false, 0, 0);
	/* the same extent elsewhere in another file */
	fe.offset = 512 * KiB;
	plan(f, &fe, 1 << 20, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 512 * KiB, 128 * KiB, true, f->a, 0);
	/* a part of it */
	fe = regular(4096, 32 * KiB, 1 << 20, 64 * KiB, 0);
	plan(f, &fe, 1 << 20, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 4096, 32 * KiB, true, f->a, 64 * KiB);
}

static void test_plain_split_around_written(void **state)
{
	struct fixture *f = *state;
	struct file_extent part =
		regular(1 << 20, 32 * KiB, 8 << 20, 32 * KiB, 0);
	struct file_extent whole = regular(0, 128 * KiB, 8 << 20, 0, 0);

	plan(f, &part, 2 << 20, f->a);
	plan(f, &whole, 2 << 20, f->b);
	assert_int_equal(f->plan.nr, 3);
	assert_piece(&f->plan.p[0], 0, 32 * KiB, false, 0, 0);
	assert_piece(&f->plan.p[1], 32 * KiB, 32 * KiB, true, f->a, 1 << 20);
	assert_piece(&f->plan.p[2], 64 * KiB, 64 * KiB, false, 0, 0);
	/* what b wrote is remembered: all of it is covered now */
	whole.offset = 256 * KiB;
	plan(f, &whole, 2 << 20, f->a);
	assert_int_equal(f->plan.nr, 3);
	assert_true(f->plan.p[0].clone && f->plan.p[1].clone &&
		    f->plan.p[2].clone);
	assert_int_equal(f->plan.p[0].file, f->b);
	assert_int_equal(f->plan.p[1].file, f->a);
}

static void test_compressed_whole_or_nothing(void **state)
{
	struct fixture *f = *state;
	struct file_extent part =
		regular(0, 64 * KiB, 16 << 20, 0, BTRFS_COMPRESS_ZSTD);
	struct file_extent whole =
		regular(0, 128 * KiB, 16 << 20, 0, BTRFS_COMPRESS_ZSTD);

	plan(f, &part, 1 << 20, f->a);
	plan(f, &whole, 1 << 20, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 0, 128 * KiB, false, 0, 0);
	/* the part is covered by either */
	part.offset = 512 * KiB;
	plan(f, &part, 1 << 20, f->a);
	assert_int_equal(f->plan.nr, 1);
	assert_true(f->plan.p[0].clone && f->plan.p[0].whole);
}

static void test_failed_file_not_cloned(void **state)
{
	struct fixture *f = *state;
	struct file_extent fe = regular(0, 128 * KiB, 32 << 20, 0, 0);

	plan(f, &fe, 1 << 20, f->a);
	share_file_get(&f->si, f->a)->state = SHARE_FAILED;
	plan(f, &fe, 1 << 20, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_false(f->plan.p[0].clone);
}

static void test_unaligned_tail(void **state)
{
	struct fixture *f = *state;
	/* a file of 10,000 bytes: its extent used up to its EOF */
	struct file_extent fe = regular(0, 12288, 64 << 20, 0, 0);
	struct file_extent longer = regular(0, 12288, 64 << 20, 0, 0);

	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &fe, 0, 10000, 10000,
					  SHARE_CUT_ANY, f->a, &f->plan),
			 0);
	/* the same tail at the EOF of another file: cloned to its end */
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &fe, 0, 10000, 10000,
					  SHARE_CUT_ANY, f->b, &f->plan),
			 0);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 0, 10000, true, f->a, 0);
	/* not at its EOF: the whole sectors cloned, the rest written */
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &longer, 0, 12288, 1 << 20,
					  SHARE_CUT_ANY, f->b, &f->plan),
			 0);
	assert_int_equal(f->plan.nr, 2);
	assert_piece(&f->plan.p[0], 0, 8192, true, f->a, 0);
	assert_piece(&f->plan.p[1], 8192, 4096, false, 0, 0);
}

static void test_short_file_of_a_longer_ones_extent(void **state)
{
	struct fixture *f = *state;
	struct file_extent fe = regular(0, 32768, 96 << 20, 0, 0);
	struct file_extent cz =
		regular(0, 32768, 97 << 20, 0, BTRFS_COMPRESS_ZSTD);

	/* a: 30,462 bytes; b: its first 7,615, ending at b's EOF only */
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &fe, 0, 30462, 30462,
					  SHARE_CUT_ANY, f->a, &f->plan),
			 0);
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &fe, 0, 7615, 7615,
					  SHARE_CUT_ANY, f->b, &f->plan),
			 0);
	assert_int_equal(f->plan.nr, 2);
	assert_piece(&f->plan.p[0], 0, 4096, true, f->a, 0);
	assert_piece(&f->plan.p[1], 4096, 3519, false, 0, 0);
	/* under a sector: all of it written */
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &fe, 0, 100, 100,
					  SHARE_CUT_ANY, f->b, &f->plan),
			 0);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 0, 100, false, 0, 0);
	/* a compressed extent, cloned whole or not at all */
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &cz, 0, 30462, 30462,
					  SHARE_CUT_WHOLE, f->a, &f->plan),
			 0);
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, &cz, 0, 7615, 7615,
					  SHARE_CUT_WHOLE, f->b, &f->plan),
			 0);
	assert_int_equal(f->plan.nr, 1);
	assert_false(f->plan.p[0].clone);
}

/* Plan all of @fe in a file of @size written to @file, cut as @cut. */
static void plan_cut(struct fixture *f, const struct file_extent *fe,
		     uint64_t size, enum share_cut cut, uint32_t file)
{
	f->plan.nr = 0;
	assert_int_equal(share_plan_range(&f->si, 0, fe, fe->offset,
					  fe->offset + fe->len, size, cut, file,
					  &f->plan),
			 0);
}

static void test_compressed_cut_from_start(void **state)
{
	struct fixture *f = *state;
	/* a uses the first 64 KiB of a compressed extent of 128 KiB */
	struct file_extent head =
		regular(0, 64 * KiB, 98 << 20, 0, BTRFS_COMPRESS_ZSTD);
	struct file_extent all =
		regular(0, 128 * KiB, 98 << 20, 0, BTRFS_COMPRESS_ZSTD);

	plan_cut(f, &head, 65 * KiB, SHARE_CUT_FROM_START, f->a);
	assert_int_equal(f->plan.nr, 1);
	assert_false(f->plan.p[0].clone);
	/* b uses it all: the first half cloned, the rest to send */
	plan_cut(f, &all, 128 * KiB, SHARE_CUT_FROM_START, f->b);
	assert_int_equal(f->plan.nr, 2);
	assert_piece(&f->plan.p[0], 0, 64 * KiB, true, f->a, 0);
	assert_piece(&f->plan.p[1], 64 * KiB, 64 * KiB, false, 0, 0);
	/* cut whole, nothing written before covers all of it */
	plan_cut(f, &all, 128 * KiB, SHARE_CUT_WHOLE, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_false(f->plan.p[0].clone);
}

static void test_compressed_middle_not_cut(void **state)
{
	struct fixture *f = *state;
	/* a uses 64 KiB from 32 KiB on of a compressed extent of 128 KiB */
	struct file_extent mid =
		regular(0, 64 * KiB, 99 << 20, 32 * KiB, BTRFS_COMPRESS_ZSTD);
	struct file_extent all =
		regular(0, 128 * KiB, 99 << 20, 0, BTRFS_COMPRESS_ZSTD);

	plan_cut(f, &mid, 1 << 20, SHARE_CUT_FROM_START, f->a);
	/* b's start is not among what a sent: b is sent whole */
	plan_cut(f, &all, 128 * KiB, SHARE_CUT_FROM_START, f->b);
	assert_int_equal(f->plan.nr, 1);
	assert_piece(&f->plan.p[0], 0, 128 * KiB, false, 0, 0);
}

static void test_compressed_middle_cut_any(void **state)
{
	struct fixture *f = *state;
	struct file_extent mid =
		regular(0, 64 * KiB, 99 << 20, 32 * KiB, BTRFS_COMPRESS_ZSTD);
	struct file_extent all =
		regular(0, 128 * KiB, 99 << 20, 0, BTRFS_COMPRESS_ZSTD);

	plan_cut(f, &mid, 1 << 20, SHARE_CUT_ANY, f->a);
	plan_cut(f, &all, 128 * KiB, SHARE_CUT_ANY, f->b);
	assert_int_equal(f->plan.nr, 3);
	assert_piece(&f->plan.p[1], 32 * KiB, 64 * KiB, true, f->a, 0);
}

static void test_only_candidates_indexed(void **state)
{
	struct fixture *f = *state;
	uint64_t multi[] = { 1 << 30 };
	struct file_extent no = regular(0, 128 * KiB, 2ULL << 30, 0, 0);
	struct file_extent yes = regular(0, 128 * KiB, 1 << 30, 0, 0);

	f->si.fs[0].all = false;
	f->si.fs[0].multi = malloc(sizeof(multi));
	memcpy(f->si.fs[0].multi, multi, sizeof(multi));
	f->si.fs[0].nr_multi = 1;
	plan(f, &no, 1 << 20, f->a);
	plan(f, &no, 1 << 20, f->b);
	assert_false(f->plan.p[0].clone);
	assert_int_equal(f->si.nr_refs, 0);
	plan(f, &yes, 1 << 20, f->a);
	plan(f, &yes, 1 << 20, f->b);
	assert_true(f->plan.p[0].clone);
	assert_int_equal(f->si.nr_refs, 1);
}

static void test_many_extents(void **state)
{
	struct fixture *f = *state;
	uint64_t i;

	for (i = 0; i < 20000; i++) {
		struct file_extent fe =
			regular(i * 4096, 4096, (i + 1) * 4096, 0, 0);

		plan(f, &fe, 1ULL << 40, f->a);
	}
	for (i = 0; i < 20000; i++) {
		struct file_extent fe =
			regular(i * 4096, 4096, (i + 1) * 4096, 0, 0);

		plan(f, &fe, 1ULL << 40, f->b);
		assert_true(f->plan.p[0].clone);
		assert_int_equal(f->plan.p[0].src_off, i * 4096);
	}
	assert_int_equal(f->si.nr_refs, 20000);
	/* 40 bytes a range, half again to grow, a hash table under 3/4 full */
	assert_true(share_memory(&f->si) <
		    20000 * (40 * 3 / 2 + 4 * 8 / 3) +
			    256 * sizeof(struct share_file));
}

static void test_adjacent_clones_merge(void **state)
{
	struct fixture *f = *state;
	struct share_plan merged = { 0 };
	struct share_piece c = { .off = 0,
				 .len = 4096,
				 .clone = true,
				 .file = f->a,
				 .src_off = 8192 };

	assert_int_equal(share_plan_add_clone(&merged, &c), 0);
	c.off = 4096;
	c.src_off = 12288;
	assert_int_equal(share_plan_add_clone(&merged, &c), 0);
	assert_int_equal(merged.nr, 1);
	assert_int_equal(merged.p[0].len, 8192);
	c.off = 8192;
	c.src_off = 0; /* goes on here, not there */
	assert_int_equal(share_plan_add_clone(&merged, &c), 0);
	c.off = 12288;
	c.src_off = 4096;
	c.file = f->b;
	assert_int_equal(share_plan_add_clone(&merged, &c), 0);
	assert_int_equal(merged.nr, 3);
	share_plan_release(&merged);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_written_then_cloned,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_split_around_written,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_compressed_whole_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_file_not_cloned,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unaligned_tail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_short_file_of_a_longer_ones_extent, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_compressed_cut_from_start,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_compressed_middle_not_cut,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_compressed_middle_cut_any,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_only_candidates_indexed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_extents, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_adjacent_clones_merge,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
