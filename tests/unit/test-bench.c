// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the pure logic behind encio bench, read and write: the
 * median, the per-extent checksum, and the encoded compression names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "io/bench.h"
#include "codec/codec.h"

static void test_median(void **state)
{
	double odd[] = { 3, 1, 2 };
	double even[] = { 4, 1, 3, 2 };
	double one[] = { 7 };

	(void)state;
	assert_true(bench_median(odd, 3) == 2);
	assert_true(odd[0] == 1 && odd[2] == 3); /* sorted: [0] is the min */
	assert_true(bench_median(even, 4) == 2.5);
	assert_true(bench_median(one, 1) == 7);
	assert_true(bench_median(NULL, 0) == 0);
}

static void test_extent_sum(void **state)
{
	struct btrfs_ioctl_encoded_io_args a = { .len = 131072,
						 .unencoded_len = 131072,
						 .compression = 2 };
	struct btrfs_ioctl_encoded_io_args b = a;
	char buf[4099];
	uint64_t sum;

	(void)state;
	memset(buf, 'x', sizeof(buf));
	sum = bench_extent_sum(0, &a, buf, sizeof(buf));
	assert_true(sum == bench_extent_sum(0, &b, buf, sizeof(buf)));
	/* Every parameter and every byte counts, the tail bytes too. */
	assert_true(sum != bench_extent_sum(4096, &a, buf, sizeof(buf)));
	b.unencoded_offset = 4096;
	assert_true(sum != bench_extent_sum(0, &b, buf, sizeof(buf)));
	b = a;
	b.compression = 1;
	assert_true(sum != bench_extent_sum(0, &b, buf, sizeof(buf)));
	buf[4098] = 'y';
	assert_true(sum != bench_extent_sum(0, &a, buf, sizeof(buf)));
	buf[4098] = 'x';
	buf[17] = 'y';
	assert_true(sum != bench_extent_sum(0, &a, buf, sizeof(buf)));
	assert_true(sum != bench_extent_sum(0, &a, buf, sizeof(buf) - 1));
}

static void test_compression_names(void **state)
{
	uint32_t c;

	(void)state;
	assert_string_equal(codec_name(0), "none");
	assert_string_equal(codec_name(1), "zlib");
	assert_string_equal(codec_name(2), "zstd");
	assert_string_equal(codec_name(3), "lzo");
	assert_string_equal(codec_name(7), "lzo");
	assert_null(codec_name(8));

	assert_int_equal(codec_parse("zstd", 4096, &c), 0);
	assert_int_equal(c, 2);
	assert_int_equal(codec_parse("lzo", 4096, &c), 0);
	assert_int_equal(c, 3);
	assert_int_equal(codec_parse("lzo", 65536, &c), 0);
	assert_int_equal(c, 7);
	assert_int_equal(codec_parse("lzo", 2048, &c), -EINVAL);
	assert_int_equal(codec_parse("lzo16k", 4096, &c), 0);
	assert_int_equal(c, 5);
	assert_int_equal(codec_parse("lzo4k", 65536, &c), 0);
	assert_int_equal(c, 3);
	assert_int_equal(codec_parse("lzo64k", 4096, &c), 0);
	assert_int_equal(c, 7);
	assert_int_equal(codec_parse("lzo3k", 4096, &c), -EINVAL);
	assert_int_equal(codec_parse("lzo128k", 4096, &c),
			 -EINVAL);
	assert_int_equal(codec_parse("lzo04k", 4096, &c),
			 -EINVAL);
	/* Numbers pass through unchecked: the kernel decides. */
	assert_int_equal(codec_parse("9", 4096, &c), 0);
	assert_int_equal(c, 9);
	assert_int_equal(codec_parse("gzip", 4096, &c), -EINVAL);
	assert_int_equal(codec_parse("2x", 4096, &c), -EINVAL);
	assert_int_equal(codec_parse("", 4096, &c), -EINVAL);
	assert_int_equal(codec_parse("-1", 4096, &c), -EINVAL);
	/* Every name parses back to its id, lzo's with the sector size. */
	for (c = 0; codec_name(c); c++) {
		uint32_t sectorsize = c >= 3 ? 4096U << (c - 3) : 4096;
		uint32_t back;

		assert_int_equal(
			codec_parse(codec_name(c),
						  sectorsize, &back),
			0);
		assert_int_equal(back, c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_median),
		cmocka_unit_test(test_extent_sum),
		cmocka_unit_test(test_compression_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
