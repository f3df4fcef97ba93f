// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/compress: chunking arithmetic, the worth-it rule,
 * algorithm specs, and the verify comparison with good and bad extents.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/codec.h"
#include "codec/compress.h"
#include "codec/cpool.h"
#include "base/kernel.h"

#define K 1024ULL

static void test_chunk_len(void **state)
{
	(void)state;
	assert_int_equal(compress_chunk_len(0, 1), 1);
	assert_int_equal(compress_chunk_len(0, 4097), 4097);
	assert_int_equal(compress_chunk_len(0, 128 * K), 128 * K);
	assert_int_equal(compress_chunk_len(0, 128 * K + 1), 128 * K);
	assert_int_equal(compress_chunk_len(128 * K, 128 * K + 1), 1);
	assert_int_equal(compress_chunk_len(0, 10 * 1024 * K), 128 * K);
	/* An unaligned start ends at the next 128 KiB boundary. */
	assert_int_equal(compress_chunk_len(4 * K, 1024 * K), 124 * K);
	assert_int_equal(compress_chunk_len(132 * K, 200 * K), 68 * K);
	assert_int_equal(compress_chunk_len(100, 100), 0);
	assert_int_equal(compress_chunk_len(100, 50), 0);
}

static void test_unencoded_len(void **state)
{
	(void)state;
	assert_int_equal(compress_unencoded_len(1, 4096), 4096);
	assert_int_equal(compress_unencoded_len(4096, 4096), 4096);
	assert_int_equal(compress_unencoded_len(4097, 4096), 8192);
	assert_int_equal(compress_unencoded_len(128 * K, 4096), 128 * K);
	assert_int_equal(compress_unencoded_len(1, 65536), 65536);
	assert_int_equal(compress_unencoded_len(65537, 65536), 128 * K);
}

static void test_chunk_unencoded_len(void **state)
{
	(void)state;
	/* A whole file under a sector: an inline candidate, not rounded. */
	assert_int_equal(compress_chunk_unencoded_len(0, 3000, 3000, 4096),
			 3000);
	assert_int_equal(compress_chunk_unencoded_len(0, 1, 1, 4096), 1);
	/* A sector or more, not the whole file, or not at 0: rounded. */
	assert_int_equal(compress_chunk_unencoded_len(0, 4096, 4096, 4096),
			 4096);
	assert_int_equal(compress_chunk_unencoded_len(0, 4097, 4097, 4096),
			 8192);
	assert_int_equal(compress_chunk_unencoded_len(128 * K, 1, 128 * K + 1,
						      4096),
			 4096);
	assert_int_equal(compress_chunk_unencoded_len(0, 128 * K, 128 * K + 1,
						      4096),
			 128 * K);
}

static void test_worth(void **state)
{
	(void)state;
	/* Inline candidates: a byte saved is enough. */
	assert_true(compress_worth(2999, 3000, 4096));
	assert_false(compress_worth(3000, 3000, 4096));
	/* A sector must be saved. */
	assert_false(compress_worth(1, 4096, 4096));
	assert_true(compress_worth(1, 8192, 4096));
	assert_true(compress_worth(4096, 8192, 4096));
	assert_false(compress_worth(4097, 8192, 4096));
	assert_true(compress_worth(124 * K, 128 * K, 4096));
	assert_false(compress_worth(124 * K + 1, 128 * K, 4096));
}

static void test_spec(void **state)
{
	struct compress_spec s;

	(void)state;
	assert_int_equal(compress_spec_parse("zstd", &s), 0);
	assert_int_equal(s.alg, BTRFS_COMPRESS_ZSTD);
	assert_int_equal(s.level, 3);
	assert_int_equal(compress_spec_parse("zstd:15", &s), 0);
	assert_int_equal(s.level, 15);
	assert_int_equal(compress_spec_parse("zlib:9", &s), 0);
	assert_int_equal(s.alg, BTRFS_COMPRESS_ZLIB);
	assert_int_equal(s.level, 9);
	assert_int_equal(compress_spec_parse("lzo", &s), 0);
	assert_int_equal(s.alg, BTRFS_COMPRESS_LZO);
	assert_int_equal(compress_spec_parse("zstd:16", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("zstd:0", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("zstd:", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("zstd:3x", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("zlib:10", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("lzo:1", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("zstdx", &s), -EINVAL);
	assert_int_equal(compress_spec_parse("", &s), -EINVAL);
}

static void test_encoded_id(void **state)
{
	struct compress_spec s = { BTRFS_COMPRESS_LZO, 0 };

	(void)state;
	assert_int_equal(compress_encoded_id(&s, 4096),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_4K);
	assert_int_equal(compress_encoded_id(&s, 65536),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_64K);
	assert_int_equal(compress_encoded_id(&s, 3000), -EINVAL);
	s.alg = BTRFS_COMPRESS_ZSTD;
	assert_int_equal(compress_encoded_id(&s, 4096),
			 BTRFS_ENCODED_IO_COMPRESSION_ZSTD);
	s.alg = BTRFS_COMPRESS_NONE;
	assert_int_equal(compress_encoded_id(&s, 4096), -EINVAL);
}

/*
 * The worker pool: many more chunks than tasks, each a different pattern
 * (compressible, the last one incompressible), every result decodes to its
 * own input, all tasks come back, nothing is lost when the caller waits.
 */
static void test_cpool(void **state)
{
	struct codec *codec = codec_new();
	char *scratch = malloc(128 * K);
	struct cpool pool;
	struct cpool_task *t, *next;
	unsigned int submitted = 0, collected = 0, incompressible = 0, i;
	const unsigned int nr = 100;

	(void)state;
	assert_int_equal(cpool_init(&pool, 2), 0);
	assert_int_equal(pool.nr_tasks, 6);
	while (collected < nr) {
		while (submitted < nr && (t = cpool_get(&pool))) {
			t->owner = NULL;
			t->offset = submitted * 128 * K;
			t->len = 4097 + submitted * 1000;
			t->unencoded_len = compress_unencoded_len(t->len, 4096);
			t->compression = BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
			t->level = 1 + submitted % 15;
			for (i = 0; i < t->len; i++)
				t->in[i] =
					submitted == nr - 1 ?
						(char)(i * 2654435761u >> 13) :
						"0123456789"[(i + submitted) %
							     (submitted % 9 +
							      2)];
			cpool_submit(&pool, t);
			submitted++;
		}
		for (t = cpool_collect(&pool, true); t; t = next) {
			unsigned int n = t->offset / (128 * K);

			next = t->next;
			if (t->res == -E2BIG) {
				incompressible++;
			} else {
				assert_true(t->res > 0);
				assert_true(codec_decode(codec, t->compression,
							 t->out, t->res,
							 scratch,
							 t->unencoded_len) >=
					    (ssize_t)t->len);
				assert_memory_equal(scratch, t->in, t->len);
				assert_int_equal(t->len, 4097 + n * 1000);
			}
			collected++;
			cpool_put(&pool, t);
		}
	}
	assert_int_equal(cpool_busy(&pool), 0);
	assert_null(cpool_collect(&pool, true));
	assert_true(incompressible <= 1);
	for (i = 0; (t = cpool_get(&pool)); i++)
		;
	assert_int_equal(i, 6);
	cpool_release(&pool);
	codec_free(codec);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunk_len),
		cmocka_unit_test(test_unencoded_len),
		cmocka_unit_test(test_chunk_unencoded_len),
		cmocka_unit_test(test_worth),
		cmocka_unit_test(test_spec),
		cmocka_unit_test(test_encoded_id),
		cmocka_unit_test(test_cpool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
