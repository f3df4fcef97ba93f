// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/codec/payload.c: kernel-written extents (tests/data/codec)
 * pass; truncated, garbage, oversized-window, oversized-content-size,
 * bad zlib header and bad lzo lengths fail. Payloads are copied to buffers
 * of their exact size, so that the sanitizers see any read past them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "codec/codec.h"
#include "base/kernel.h"
#include "codec/payload.h"
#include "codec-fixtures.h"

#define ZLIB BTRFS_ENCODED_IO_COMPRESSION_ZLIB
#define ZSTD BTRFS_ENCODED_IO_COMPRESSION_ZSTD
#define LZO_4K BTRFS_ENCODED_IO_COMPRESSION_LZO_4K

/* payload_check() on an exact-size copy of @len bytes of @data. */
static int check(int comp, const void *data, size_t len, uint64_t unencoded_len,
		 const char **why)
{
	void *copy = malloc(len ? len : 1);
	int ret;

	assert_non_null(copy);
	memcpy(copy, data, len);
	ret = payload_check(comp, copy, len, unencoded_len, why);
	free(copy);
	return ret;
}

static void expect_invalid(int comp, const void *data, size_t len,
			   uint64_t unencoded_len, const char *why_part)
{
	const char *why = NULL;

	assert_int_equal(check(comp, data, len, unencoded_len, &why), -EINVAL);
	assert_non_null(why);
	if (!strstr(why, why_part))
		fail_msg("expected a reason with '%s', got '%s'", why_part,
			 why);
}

static void test_kernel_extents_pass(void **state)
{
	struct fixture fx[64];
	unsigned char *data;
	const char *why;
	size_t len;
	int i, n;

	(void)state;
	n = fixtures_load_all(fx, 64);
	for (i = 0; i < n; i++) {
		data = fixture_data(&fx[i], &len);
		why = NULL;
		if (check(fx[i].comp, data, len, fx[i].unencoded_len, &why))
			fail_msg("%s refused: %s", fx[i].file, why);
		free(data);
	}
}

static void test_truncated(void **state)
{
	static const char *const names[] = { "zstd-text-0.bin",
					     "zlib-text-0.bin",
					     "lzo-text-0.bin" };
	struct fixture fx;
	unsigned char *data;
	const char *why;
	size_t len, i, cut;

	(void)state;
	for (i = 0; i < 3; i++) {
		data = fixture_load(names[i], &fx, &len);
		/* Cut within the header. */
		for (cut = 0; cut < 3; cut++)
			assert_int_equal(check(fx.comp, data, cut,
					       fx.unencoded_len, &why),
					 -EINVAL);
		free(data);
	}
	/* lzo: cut within the segments, its total length then past it. */
	data = fixture_load("lzo-text-0.bin", &fx, &len);
	expect_invalid(fx.comp, data, len / 2, fx.unencoded_len,
		       "total length past the payload");
	free(data);
	/* zstd: cut within its blocks, then before its checksum. */
	data = fixture_load("zstd-text-0.bin", &fx, &len);
	expect_invalid(fx.comp, data, len / 2, fx.unencoded_len,
		       "frame truncated");
	free(data);
	/* zstd: the frame header alone, without a block. */
	data = fixture_load("zstd-small-0.bin", &fx, &len);
	expect_invalid(fx.comp, data, 6, fx.unencoded_len, "zstd");
	free(data);
}

static void test_garbage(void **state)
{
	static const unsigned char garbage[64] =
		"this is not an encoded extent "
		"at all, only text.....";

	(void)state;
	expect_invalid(ZSTD, garbage, sizeof(garbage), 65536,
		       "no frame header");
	expect_invalid(ZLIB, garbage, sizeof(garbage), 65536, "zlib");
	expect_invalid(LZO_4K, garbage, sizeof(garbage), 65536, "lzo");
}

/* A zstd frame of @len compressible bytes, window 2^@window_log. */
static size_t zstd_frame(unsigned char *out, size_t cap, size_t len,
			 int window_log, int content_size)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	unsigned char *in = malloc(len);
	size_t i, n;

	assert_non_null(cctx);
	assert_non_null(in);
	for (i = 0; i < len; i++)
		in[i] = "abcdefgh"[(i / 7) % 8];
	assert_false(ZSTD_isError(
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, window_log)));
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(
		cctx, ZSTD_c_contentSizeFlag, content_size)));
	/* Unknown size: the window is declared, not the content size. */
	n = ZSTD_compress2(cctx, out, cap, in, len);
	assert_false(ZSTD_isError(n));
	ZSTD_freeCCtx(cctx);
	free(in);
	return n;
}

static void test_zstd_oversized_window(void **state)
{
	static unsigned char frame[65536];
	unsigned char header[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00,
				   /* an empty last raw block */
				   0x01, 0x00, 0x00 };
	size_t n;

	(void)state;
	/* Window descriptor: exponent 8 (2^18), then 2^17 exactly. */
	header[5] = 8 << 3;
	expect_invalid(ZSTD, header, sizeof(header), 131072,
		       "window larger than 128 KiB");
	header[5] = 7 << 3;
	assert_int_equal(check(ZSTD, header, sizeof(header), 131072,
			       &(const char *){ NULL }),
			 0);
	/* 2^17 plus an eighth: the mantissa counts too. */
	header[5] = 7 << 3 | 1;
	expect_invalid(ZSTD, header, sizeof(header), 131072,
		       "window larger than 128 KiB");
	/* A frame zstd made with a 1 MiB window, not single-segment. */
	n = zstd_frame(frame, sizeof(frame), 1 << 20, 20, 0);
	expect_invalid(ZSTD, frame, n, 131072, "window larger than 128 KiB");
}

static void test_zstd_oversized_content_size(void **state)
{
	unsigned char frame[4096];
	const char *why;
	size_t n;

	(void)state;
	n = zstd_frame(frame, sizeof(frame), 8192, 17, 1);
	assert_int_equal(check(ZSTD, frame, n, 8192, &why), 0);
	expect_invalid(ZSTD, frame, n, 8191, "content size larger");
}

static void test_zstd_dictionary_and_skippable(void **state)
{
	/* Dictionary ID flag 1 (one byte, id 7), window 2^17. */
	static const unsigned char dict[] = { 0x28,   0xb5, 0x2f, 0xfd, 0x01,
					      7 << 3, 0x07, 0x01, 0x00, 0x00 };
	static const unsigned char skippable[] = { 0x50, 0x2a, 0x4d, 0x18,
						   0x00, 0x00, 0x00, 0x00 };

	(void)state;
	expect_invalid(ZSTD, dict, sizeof(dict), 4096, "dictionary");
	expect_invalid(ZSTD, skippable, sizeof(skippable), 4096, "skippable");
}

static void test_zstd_blocks(void **state)
{
	/* Window 2^17, checksum flag; one last raw block of 2 bytes. */
	unsigned char frame[] = { 0x28,	  0xb5, 0x2f, 0xfd, 0x04,
				  7 << 3, 0x11, 0x00, 0x00, 'h',
				  'i',	  0xaa, 0xbb, 0xcc, 0xdd };
	const char *why;

	(void)state;
	assert_int_equal(check(ZSTD, frame, sizeof(frame), 4096, &why), 0);
	/* Without its checksum, or without its data. */
	expect_invalid(ZSTD, frame, sizeof(frame) - 1, 4096, "frame truncated");
	expect_invalid(ZSTD, frame, 10, 4096, "frame truncated");
	/* Not the last block, and nothing after it. */
	frame[6] = 0x10;
	expect_invalid(ZSTD, frame, 11, 4096, "frame truncated");
	/* The reserved block type. */
	frame[6] = 0x17;
	expect_invalid(ZSTD, frame, sizeof(frame), 4096, "reserved block type");
	/* A block larger than the 128 KiB window. */
	frame[6] = 0x01;
	frame[7] = 0x00;
	frame[8] = 0x11; /* raw, 0x110000 >> 3 = 136 KiB */
	expect_invalid(ZSTD, frame, sizeof(frame), 131072,
		       "block larger than allowed");
}

static void test_zlib_bad_header(void **state)
{
	struct fixture fx;
	unsigned char *data;
	const char *why;
	size_t len;

	(void)state;
	data = fixture_load("zlib-text-0.bin", &fx, &len);
	assert_int_equal(check(ZLIB, data, len, fx.unencoded_len, &why), 0);
	data[1] ^= 1;
	expect_invalid(ZLIB, data, len, fx.unencoded_len, "header check");
	data[1] ^= 1;
	data[0] = (data[0] & 0xf0) | 7; /* not deflate */
	expect_invalid(ZLIB, data, len, fx.unencoded_len, "not deflate");
	data[0] = 0x88; /* window 2^16 */
	expect_invalid(ZLIB, data, len, fx.unencoded_len, "not deflate");
	/* A valid check with the preset dictionary flag. */
	data[0] = 0x78;
	data[1] = 0xbb;
	expect_invalid(ZLIB, data, len, fx.unencoded_len, "preset dictionary");
	free(data);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static void test_lzo_bad_lengths(void **state)
{
	struct fixture fx;
	unsigned char *data, *big;
	size_t len, total;
	const char *why;

	(void)state;
	data = fixture_load("lzo-text-0.bin", &fx, &len);
	total = data[0] | data[1] << 8 | data[2] << 16;
	assert_int_equal(check(LZO_4K, data, len, fx.unencoded_len, &why), 0);

	/* Total length past the payload, and below its own header. */
	put_le32(data, len + 1);
	expect_invalid(LZO_4K, data, len, fx.unencoded_len,
		       "total length past the payload");
	put_le32(data, 3);
	expect_invalid(LZO_4K, data, len, fx.unencoded_len,
		       "total length past the payload");
	put_le32(data, total);

	/* Past lzo's worst case for a 4 KiB sector. */
	put_le32(data + 4, 4096 + 256 + 64 + 3 + 1);
	expect_invalid(LZO_4K, data, len, fx.unencoded_len, "worst case");
	put_le32(data + 4, 0);
	expect_invalid(LZO_4K, data, len, fx.unencoded_len, "worst case");
	free(data);

	/* A payload a whole sector longer than the total length. */
	data = fixture_load("lzo-small-0.bin", &fx, &len);
	big = calloc(1, len + 4096);
	assert_non_null(big);
	memcpy(big, data, len);
	expect_invalid(LZO_4K, big, len + 4096, fx.unencoded_len,
		       "a sector longer");
	free(big);
	free(data);

	/* A segment's length past the total length. */
	big = calloc(1, 100);
	assert_non_null(big);
	put_le32(big, 100);
	put_le32(big + 4, 200);
	expect_invalid(LZO_4K, big, 100, 4096, "segment past the total length");
	put_le32(big + 4, 92);
	assert_int_equal(check(LZO_4K, big, 100, 4096, &why), 0);
	free(big);

	/*
	 * A segment header that would straddle the first sector boundary:
	 * the padding rule puts the next header at 4096, so a segment that
	 * ends at 4094 and a total length that ends at 4098 leave no room.
	 */
	big = calloc(1, 4098);
	assert_non_null(big);
	put_le32(big, 4098);
	put_le32(big + 4, 4094 - 8);
	expect_invalid(LZO_4K, big, 4098, 8192,
		       "segment header past the total length");
	free(big);
}

static void test_none_and_unknown(void **state)
{
	const char *why;

	(void)state;
	assert_int_equal(payload_check(BTRFS_ENCODED_IO_COMPRESSION_NONE, "x",
				       1, 1, &why),
			 0);
	assert_int_equal(payload_check(99, "x", 1, 1, &why), -EOPNOTSUPP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_extents_pass),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_zstd_oversized_window),
		cmocka_unit_test(test_zstd_oversized_content_size),
		cmocka_unit_test(test_zstd_dictionary_and_skippable),
		cmocka_unit_test(test_zstd_blocks),
		cmocka_unit_test(test_zlib_bad_header),
		cmocka_unit_test(test_lzo_bad_lengths),
		cmocka_unit_test(test_none_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
