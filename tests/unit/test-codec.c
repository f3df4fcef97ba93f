// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/codec/codec.c: round trips, kernel-written extents
 * (tests/data/codec), malformed and hostile input. Buffers handed to the
 * codec are allocated at their exact size, so that the sanitizers see any
 * access past them.
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
#include <lzo1x.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "codec/codec.h"
#include "base/kernel.h"
#include "codec-fixtures.h"

#define ZLIB BTRFS_ENCODED_IO_COMPRESSION_ZLIB
#define ZSTD BTRFS_ENCODED_IO_COMPRESSION_ZSTD
#define LZO_4K BTRFS_ENCODED_IO_COMPRESSION_LZO_4K
#define LZO_64K BTRFS_ENCODED_IO_COMPRESSION_LZO_64K
#define MAX_LEN BTRFS_MAX_UNCOMPRESSED

enum data_kind { COMPRESSIBLE, BARELY, RANDOM };

static const size_t sizes[] = { 1, 4095, 4096, 4097, 65536, 131072 };

/* ---- helpers ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill(unsigned char *buf, size_t len, enum data_kind kind,
		 uint64_t seed)
{
	char line[80];
	size_t i, n;

	rng_state = seed * 2654435761u + 1;
	for (i = 0; i < len;) {
		if (kind == RANDOM) {
			buf[i++] = rng();
		} else if (kind == BARELY) {
			/* 6 bits of entropy per byte: only an entropy coder wins. */
			buf[i++] = 0x40 | (rng() & 0x3f);
		} else {
			n = snprintf(line, sizeof(line),
				     "encio %06zu the quick brown fox %u\n",
				     i / 40, (unsigned)(rng() % 1000));
			if (n > len - i)
				n = len - i;
			memcpy(buf + i, line, n);
			i += n;
		}
	}
}

static void *dup_exact(const void *p, size_t len)
{
	void *q = malloc(len ? len : 1);

	assert_non_null(q);
	if (len)
		memcpy(q, p, len);
	return q;
}

/* Decode with exact-size copies; returns what codec_decode returned. */
static ssize_t decode_exact(struct codec *c, int comp, const void *in,
			    size_t in_len, void *out, size_t out_len)
{
	void *i = dup_exact(in, in_len), *o = malloc(out_len ? out_len : 1);
	ssize_t ret;

	assert_non_null(o);
	memset(o, 0xaa, out_len);
	ret = codec_decode(c, comp, i, in_len, out_len ? o : NULL, out_len);
	if (out && out_len)
		memcpy(out, o, out_len);
	free(i);
	free(o);
	return ret;
}

static int setup(void **state)
{
	*state = codec_new();
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	codec_free(*state);
	return 0;
}

/* ---- round trips ---- */

static void roundtrip_one(struct codec *c, int comp, int level,
			  enum data_kind kind, size_t len)
{
	unsigned char *in = malloc(len), *enc = malloc(len - 1 ? len - 1 : 1);
	unsigned char *out = malloc(len);
	ssize_t ret, dec;

	assert_non_null(in);
	assert_non_null(enc);
	assert_non_null(out);
	fill(in, len, kind, len + level);
	ret = codec_encode(c, comp, level, in, len, enc, len - 1);
	if (kind == RANDOM || len == 1 || (kind == BARELY && ret == -E2BIG)) {
		if (ret != -E2BIG)
			fail_msg("%s level %d kind %d len %zu: %zd, not -E2BIG",
				 codec_name(comp), level, kind, len, ret);
		goto out;
	}
	if (ret <= 0 || (size_t)ret >= len)
		fail_msg("%s level %d kind %d len %zu: encode %zd",
			 codec_name(comp), level, kind, len, ret);
	dec = decode_exact(c, comp, enc, ret, out, len);
	if (dec != (ssize_t)len || memcmp(in, out, len))
		fail_msg("%s level %d kind %d len %zu: decode %zd",
			 codec_name(comp), level, kind, len, dec);
out:
	free(in);
	free(enc);
	free(out);
}

static void roundtrip_all(struct codec *c, int comp, int level)
{
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		roundtrip_one(c, comp, level, COMPRESSIBLE, sizes[i]);
		roundtrip_one(c, comp, level, BARELY, sizes[i]);
		roundtrip_one(c, comp, level, RANDOM, sizes[i]);
	}
}

static void test_roundtrip_zlib(void **state)
{
	int level;

	for (level = 0; level <= 9; level++)
		roundtrip_all(*state, ZLIB, level);
	/* Level changes back and forth on the one reused stream. */
	roundtrip_all(*state, ZLIB, 1);
}

static void test_roundtrip_zstd(void **state)
{
	int level;

	for (level = 0; level <= 15; level++)
		roundtrip_all(*state, ZSTD, level);
	roundtrip_all(*state, ZSTD, -1);
	roundtrip_all(*state, ZSTD, -15);
}

static void test_roundtrip_lzo(void **state)
{
	int comp;

	for (comp = LZO_4K; comp <= LZO_64K; comp++)
		roundtrip_all(*state, comp, 0);
}

/* Interleave algorithms on one codec: contexts must not leak state. */
static void test_roundtrip_interleaved(void **state)
{
	static const int comps[] = { ZLIB, ZSTD, LZO_4K, ZSTD, ZLIB, LZO_64K };
	size_t i;

	for (i = 0; i < 3 * sizeof(comps) / sizeof(comps[0]); i++)
		roundtrip_one(*state, comps[i % 6], i % 4 + 1, COMPRESSIBLE,
			      65536 + i);
}

/* Encoded output padded to a sector, as encoded reads return it. */
static void test_padding_ignored(void **state)
{
	static const int comps[] = { ZLIB, ZSTD, LZO_4K, LZO_64K };
	unsigned char *in = malloc(MAX_LEN), *enc = calloc(1, MAX_LEN);
	unsigned char *out = malloc(MAX_LEN);
	ssize_t ret;
	size_t i, padded;

	fill(in, MAX_LEN, COMPRESSIBLE, 7);
	for (i = 0; i < 4; i++) {
		memset(enc, 0, MAX_LEN);
		ret = codec_encode(*state, comps[i], 0, in, MAX_LEN, enc,
				   MAX_LEN);
		assert_true(ret > 0);
		padded = (ret + 4095) / 4096 * 4096;
		assert_int_equal(decode_exact(*state, comps[i], enc, padded,
					      out, MAX_LEN),
				 MAX_LEN);
		assert_memory_equal(in, out, MAX_LEN);
	}
	free(in);
	free(enc);
	free(out);
}

/* Output shorter than out_len: the rest is zeroed. */
static void test_zero_fill(void **state)
{
	static const int comps[] = { ZLIB, ZSTD, LZO_4K };
	unsigned char in[5000], enc[5000], out[8192];
	ssize_t ret;
	size_t i, j;

	fill(in, sizeof(in), COMPRESSIBLE, 3);
	for (i = 0; i < 3; i++) {
		ret = codec_encode(*state, comps[i], 0, in, sizeof(in), enc,
				   sizeof(enc));
		assert_true(ret > 0);
		memset(out, 0xaa, sizeof(out));
		assert_int_equal(codec_decode(*state, comps[i], enc, ret, out,
					      sizeof(out)),
				 sizeof(in));
		assert_memory_equal(in, out, sizeof(in));
		for (j = sizeof(in); j < sizeof(out); j++)
			assert_int_equal(out[j], 0);
	}
}

/* ---- kernel-written extents ---- */

static void test_kernel_fixtures(void **state)
{
	struct fixture fx[64];
	unsigned char *enc, *out = malloc(MAX_LEN);
	int n, i, seen[8] = { 0 };
	size_t enc_len, j;
	ssize_t ret;

	n = fixtures_load_all(fx, 64);
	for (i = 0; i < n; i++) {
		enc = fixture_data(&fx[i], &enc_len);
		ret = decode_exact(*state, fx[i].comp, enc, enc_len, out,
				   fx[i].unencoded_len);
		if (ret < (ssize_t)(fx[i].unencoded_offset + fx[i].len))
			fail_msg("%s: decode %zd", fx[i].file, ret);
		if (crc32(0, out + fx[i].unencoded_offset, fx[i].len) !=
		    fx[i].crc)
			fail_msg("%s: crc mismatch", fx[i].file);
		for (j = ret; j < fx[i].unencoded_len; j++)
			assert_int_equal(out[j], 0);
		/* One byte short of room: too much output. */
		assert_int_equal(decode_exact(*state, fx[i].comp, enc, enc_len,
					      NULL, ret - 1),
				 -EOVERFLOW);
		seen[fx[i].comp]++;
		free(enc);
	}
	assert_true(seen[ZLIB] && seen[ZSTD] && seen[LZO_4K]);
	free(out);
}

/*
 * Truncated at many points: an error, or (only padding or a trailer the
 * kernel ignores was cut) the same output as the whole extent.
 */
static void truncate_check(struct codec *c, const struct fixture *fx,
			   const unsigned char *enc, size_t enc_len,
			   const unsigned char *good, ssize_t good_len)
{
	unsigned char *out = malloc(fx->unencoded_len);
	size_t cut, step = enc_len / 200 + 1;
	ssize_t ret;

	for (cut = 0; cut < enc_len;
	     cut += cut < 64 || cut + 64 > enc_len ? 1 : step) {
		ret = decode_exact(c, fx->comp, enc, cut, out,
				   fx->unencoded_len);
		if (ret == -EINVAL)
			continue;
		if (ret != good_len || memcmp(out, good, fx->unencoded_len))
			fail_msg("%s cut at %zu: %zd", fx->file, cut, ret);
		/* lzo states its length: no cut before it can decode. */
		assert_false(
			fx->comp >= LZO_4K &&
			cut < (size_t)(enc[0] | enc[1] << 8 | enc[2] << 16));
		/* zstd: nothing cut from the frame itself. */
		if (fx->comp == ZSTD)
			assert_true(cut >=
				    ZSTD_findFrameCompressedSize(enc, enc_len));
	}
	free(out);
}

static void test_kernel_truncated(void **state)
{
	struct fixture fx[64];
	unsigned char *enc, *good = malloc(MAX_LEN);
	size_t enc_len;
	ssize_t good_len;
	int n, i;

	n = fixtures_load_all(fx, 64);
	for (i = 0; i < n; i++) {
		enc = fixture_data(&fx[i], &enc_len);
		good_len = codec_decode(*state, fx[i].comp, enc, enc_len, good,
					fx[i].unencoded_len);
		assert_true(good_len > 0);
		truncate_check(*state, &fx[i], enc, enc_len, good, good_len);
		free(enc);
	}
	free(good);
}

/* Bit flips: no crash, no access out of bounds, a sane return value. */
static void flip_check(struct codec *c, int comp, const unsigned char *enc,
		       size_t enc_len, size_t out_len, int rounds)
{
	unsigned char *bad = dup_exact(enc, enc_len);
	size_t pos;
	ssize_t ret;
	int r, k;

	for (r = 0; r < rounds; r++) {
		memcpy(bad, enc, enc_len);
		for (k = 0; k <= r % 4; k++) {
			/* Headers are where it hurts: aim there half the time. */
			pos = rng() %
			      (r % 2 ? enc_len : (enc_len < 16 ? enc_len : 16));
			bad[pos] ^= 1 << (rng() % 8);
		}
		ret = decode_exact(c, comp, bad, enc_len, NULL, out_len);
		if (ret != -EINVAL && ret != -EOVERFLOW &&
		    (ret < 0 || (size_t)ret > out_len))
			fail_msg("%s round %d: %zd", codec_name(comp), r, ret);
	}
	free(bad);
}

static void test_kernel_bitflips(void **state)
{
	struct fixture fx[64];
	unsigned char *enc;
	size_t enc_len;
	int n, i;

	n = fixtures_load_all(fx, 64);
	rng_state = 42;
	for (i = 0; i < n; i++) {
		enc = fixture_data(&fx[i], &enc_len);
		flip_check(*state, fx[i].comp, enc, enc_len,
			   fx[i].unencoded_len, 300);
		free(enc);
	}
}

static void test_encoded_bitflips(void **state)
{
	static const int comps[] = { ZLIB, ZSTD, LZO_4K, LZO_64K };
	unsigned char *in = malloc(MAX_LEN), *enc = malloc(MAX_LEN);
	ssize_t ret;
	size_t i;

	fill(in, MAX_LEN, COMPRESSIBLE, 11);
	for (i = 0; i < 4; i++) {
		ret = codec_encode(*state, comps[i], 0, in, MAX_LEN, enc,
				   MAX_LEN);
		assert_true(ret > 0);
		rng_state = 99 + i;
		flip_check(*state, comps[i], enc, ret, MAX_LEN, 500);
		/* Less room than the data needs, flipped or not. */
		flip_check(*state, comps[i], enc, ret, 4096, 100);
	}
	free(in);
	free(enc);
}

/* ---- malformed input ---- */

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* A valid one-segment LZO_4K extent of 4096 compressible bytes. */
static size_t lzo_valid(struct codec *c, unsigned char *enc, size_t cap)
{
	unsigned char in[4096];
	ssize_t ret;

	fill(in, sizeof(in), COMPRESSIBLE, 5);
	ret = codec_encode(c, LZO_4K, 0, in, sizeof(in), enc, cap);
	assert_true(ret > 8);
	return ret;
}

static void test_lzo_bad_headers(void **state)
{
	unsigned char enc[8192], bad[8192];
	size_t len = lzo_valid(*state, enc, sizeof(enc));
	uint32_t seg = enc[4] | enc[5] << 8;

	assert_int_equal(enc[0] | enc[1] << 8, len);
	/* Fewer than 4 bytes. */
	assert_int_equal(decode_exact(*state, LZO_4K, enc, 3, NULL, 4096),
			 -EINVAL);
	/* Total length beyond the input, below its own size, huge. */
	memcpy(bad, enc, len);
	put32(bad, len + 1);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	put32(bad, 3);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	put32(bad, 0xffffffff);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	/* Segment length beyond the total, beyond lzo's worst case. */
	memcpy(bad, enc, len);
	put32(bad + 4, seg + 1);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	put32(bad + 4, 0x7fffffff);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	/* A segment one byte short. */
	put32(bad + 4, seg - 1);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	/* A total that ends inside a segment header. */
	memcpy(bad, enc, len);
	memset(bad + len, 0, 2);
	put32(bad, len + 2);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len + 2, NULL, 8192),
			 -EINVAL);
	/* A segment that runs past the total (within the input). */
	memcpy(bad, enc, len);
	put32(bad, len - 1);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, len, NULL, 4096),
			 -EINVAL);
	/* Only the header: nothing to decode, all zeros. */
	put32(bad, 4);
	assert_int_equal(decode_exact(*state, LZO_4K, bad, 4, NULL, 4096), 0);
}

/* A segment decoding to more than a sector, and a segment too long. */
static void test_lzo_segment_too_big(void **state)
{
	static unsigned char in[65536], wrk[LZO1X_1_MEM_COMPRESS];
	unsigned char enc[8192];
	lzo_uint clen;

	fill(in, sizeof(in), COMPRESSIBLE, 9);
	assert_int_equal(lzo1x_1_compress(in, 8192, enc + 8, &clen, wrk),
			 LZO_E_OK);
	put32(enc, 8 + clen);
	put32(enc + 4, clen);
	/* Fine with 8K sectors, an error with 4K ones. */
	assert_int_equal(decode_exact(*state, LZO_4K + 1, enc, 8 + clen, NULL,
				      8192),
			 8192);
	assert_int_equal(decode_exact(*state, LZO_4K, enc, 8 + clen, NULL,
				      65536),
			 -EINVAL);
	/* A bomb: 64K of zeros in one segment, for 4K sectors. */
	memset(in, 0, sizeof(in));
	assert_int_equal(lzo1x_1_compress(in, sizeof(in), enc + 8, &clen, wrk),
			 LZO_E_OK);
	put32(enc, 8 + clen);
	put32(enc + 4, clen);
	assert_int_equal(decode_exact(*state, LZO_4K, enc, 8 + clen, NULL,
				      MAX_LEN),
			 -EINVAL);
}

/* A segment header must not straddle a sector: the encoder pads. */
static void test_lzo_layout(void **state)
{
	unsigned char *in = malloc(MAX_LEN), *enc = malloc(MAX_LEN);
	size_t pos, total, seg, sector, segs;
	ssize_t ret;
	int comp, k;

	for (k = 0; k < 2; k++) {
		fill(in, MAX_LEN, k ? BARELY : COMPRESSIBLE, 13);
		for (comp = LZO_4K; comp <= LZO_64K; comp++) {
			sector = 4096 << (comp - LZO_4K);
			ret = codec_encode(*state, comp, 0, in, MAX_LEN, enc,
					   MAX_LEN);
			if (ret == -E2BIG)
				continue;
			assert_true(ret > 0);
			total = enc[0] | enc[1] << 8 | enc[2] << 16;
			assert_int_equal(total, ret);
			for (pos = 4, segs = 0; pos < total; segs++) {
				if (sector - pos % sector < 4) {
					for (; pos % sector; pos++)
						assert_int_equal(enc[pos], 0);
					continue;
				}
				seg = enc[pos] | enc[pos + 1] << 8 |
				      enc[pos + 2] << 16;
				pos += 4 + seg;
			}
			assert_int_equal(pos, total);
			assert_int_equal(segs, MAX_LEN / sector);
		}
	}
	free(in);
	free(enc);
}

/*
 * A segment header never straddles a sector boundary. Find a first sector
 * whose lzo1x output ends its segment 1..3 bytes before the boundary, build
 * the kernel's layout by hand (zero padding, second header at 4096) and
 * check that encio decodes it and encodes the same input to the same bytes.
 */
static size_t lzo_straddler(unsigned char *in, unsigned char *seg,
			    lzo_uint *seg_len)
{
	static unsigned char wrk[LZO1X_1_MEM_COMPRESS];
	size_t k;

	for (k = 0; k < 4096; k++) {
		fill(in, 4096, RANDOM, 31);
		memset(in, 'a', k);
		assert_int_equal(lzo1x_1_compress(in, 4096, seg, seg_len, wrk),
				 LZO_E_OK);
		if (4096 - (8 + *seg_len) % 4096 < 4)
			return k;
	}
	fail_msg("no lzo segment of 4085..4087 bytes found");
	return 0;
}

static void test_lzo_straddle(void **state)
{
	static unsigned char in[8192], seg[8192], hand[16384], enc[16384];
	unsigned char out[8192];
	lzo_uint seg_len, seg2_len;
	static unsigned char wrk[LZO1X_1_MEM_COMPRESS];
	size_t total;
	ssize_t ret;

	lzo_straddler(in, seg, &seg_len);
	fill(in + 4096, 4096, COMPRESSIBLE, 37);
	memset(hand, 0, sizeof(hand));
	put32(hand + 4, seg_len);
	memcpy(hand + 8, seg, seg_len);
	assert_int_equal(lzo1x_1_compress(in + 4096, 4096, hand + 4100,
					  &seg2_len, wrk),
			 LZO_E_OK);
	put32(hand + 4096, seg2_len);
	total = 4100 + seg2_len;
	put32(hand, total);
	assert_int_equal(decode_exact(*state, LZO_4K, hand, total, out, 8192),
			 8192);
	assert_memory_equal(in, out, 8192);
	ret = codec_encode(*state, LZO_4K, 0, in, sizeof(in), enc,
			   sizeof(in) - 1);
	assert_int_equal(ret, total);
	assert_memory_equal(enc, hand, total);
	/* Padded to the sector as an encoded read returns it. */
	assert_int_equal(decode_exact(*state, LZO_4K, hand, 8192, out, 8192),
			 8192);
	/* A sector more than the total: the kernel refuses it, so do we. */
	assert_int_equal(decode_exact(*state, LZO_4K, hand, 12288, out, 8192),
			 -EINVAL);
	/* A header in the padding is not one: garbage, but no harm. */
	put32(hand + 8 + seg_len, seg2_len);
	ret = decode_exact(*state, LZO_4K, hand, total, out, 8192);
	assert_true(ret == -EINVAL || (ret >= 0 && ret <= 8192));
}

static void test_zlib_kernel_compat(void **state)
{
	unsigned char in[8192], enc[8192], bad[8192], out[8192];
	ssize_t len;

	fill(in, sizeof(in), COMPRESSIBLE, 17);
	len = codec_encode(*state, ZLIB, 0, in, sizeof(in), enc, sizeof(enc));
	assert_true(len > 6);
	/* The kernel skips the adler32 trailer: so does encio. */
	memcpy(bad, enc, len);
	bad[len - 1] ^= 0xff;
	assert_int_equal(decode_exact(*state, ZLIB, bad, len, out, sizeof(out)),
			 sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	/* Bad header checksum, not deflate, preset dictionary. */
	memcpy(bad, enc, len);
	bad[1] ^= 1;
	assert_int_equal(decode_exact(*state, ZLIB, bad, len, out, sizeof(out)),
			 -EINVAL);
	memcpy(bad, enc, len);
	bad[0] = (bad[0] & 0xf0) | 7;
	assert_int_equal(decode_exact(*state, ZLIB, bad, len, out, sizeof(out)),
			 -EINVAL);
	bad[0] = 0x78;
	bad[1] = 0x20;
	bad[1] += 31 - ((0x78 << 8) + bad[1]) % 31;
	assert_int_equal(decode_exact(*state, ZLIB, bad, len, out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(decode_exact(*state, ZLIB, enc, 1, out, sizeof(out)),
			 -EINVAL);
}

static void test_zlib_bomb(void **state)
{
	unsigned long blen = compressBound(1 << 24);
	unsigned char *zeros = calloc(1, 1 << 24), *bomb = malloc(blen);

	assert_int_equal(compress2(bomb, &blen, zeros, 1 << 24, 9), Z_OK);
	assert_int_equal(decode_exact(*state, ZLIB, bomb, blen, NULL, MAX_LEN),
			 -EOVERFLOW);
	free(zeros);
	free(bomb);
}

/* Frames the kernel cannot decode (window > 128K) and bombs. */
static void test_zstd_window_and_bomb(void **state)
{
	size_t big = 1 << 24, cap = ZSTD_compressBound(big), len;
	unsigned char *zeros = calloc(1, big), *enc = malloc(cap);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	/* Content size 16M in a single segment: a 16M window. */
	len = ZSTD_compressCCtx(cctx, enc, cap, zeros, big, 3);
	assert_false(ZSTD_isError(len));
	assert_int_equal(decode_exact(*state, ZSTD, enc, len, NULL, MAX_LEN),
			 -EINVAL);
	/* No content size, window 2^20. */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 20);
	len = ZSTD_compress2(cctx, enc, cap, zeros, big);
	assert_false(ZSTD_isError(len));
	assert_int_equal(decode_exact(*state, ZSTD, enc, len, NULL, MAX_LEN),
			 -EINVAL);
	/* No content size, window 2^17: decodes until the room is gone. */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 17);
	len = ZSTD_compress2(cctx, enc, cap, zeros, big);
	assert_false(ZSTD_isError(len));
	assert_int_equal(decode_exact(*state, ZSTD, enc, len, NULL, MAX_LEN),
			 -EOVERFLOW);
	/* ... and a small one without content size decodes fine. */
	len = ZSTD_compress2(cctx, enc, cap, zeros, 1000);
	assert_int_equal(decode_exact(*state, ZSTD, enc, len, NULL, 4096),
			 1000);
	ZSTD_freeCCtx(cctx);
	free(zeros);
	free(enc);
}

/* encio's frames fit the kernel's decoder: window <= 128K. */
static void test_zstd_frame_params(void **state)
{
	unsigned char *in = malloc(MAX_LEN), *enc = malloc(MAX_LEN);
	ZSTD_frameHeader zfh;
	ssize_t len;
	int level;

	fill(in, MAX_LEN, COMPRESSIBLE, 21);
	for (level = 1; level <= 15; level++) {
		len = codec_encode(*state, ZSTD, level, in, MAX_LEN, enc,
				   MAX_LEN);
		assert_true(len > 0);
		assert_int_equal(ZSTD_getFrameHeader(&zfh, enc, len), 0);
		assert_true(zfh.windowSize <= 1u << BTRFS_ZSTD_MAX_WINDOWLOG);
		assert_int_equal(ZSTD_findFrameCompressedSize(enc, len), len);
	}
	free(in);
	free(enc);
}

static void test_out_too_small(void **state)
{
	static const int comps[] = { ZLIB, ZSTD, LZO_4K, LZO_64K };
	unsigned char *in = malloc(MAX_LEN), *enc = malloc(MAX_LEN);
	static const size_t rooms[] = { 0, 1, 4095, 4096, 65535, MAX_LEN - 1 };
	ssize_t len;
	size_t i, j;

	fill(in, MAX_LEN, COMPRESSIBLE, 23);
	for (i = 0; i < 4; i++) {
		len = codec_encode(*state, comps[i], 0, in, MAX_LEN, enc,
				   MAX_LEN);
		assert_true(len > 0);
		for (j = 0; j < sizeof(rooms) / sizeof(rooms[0]); j++)
			assert_int_equal(decode_exact(*state, comps[i], enc,
						      len, NULL, rooms[j]),
					 -EOVERFLOW);
	}
	free(in);
	free(enc);
}

static void test_unknown(void **state)
{
	static const int ids[] = { BTRFS_ENCODED_IO_COMPRESSION_NONE, 8, 100,
				   -1 };
	unsigned char buf[64] = { 0 }, out[64];
	size_t i;

	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		assert_int_equal(codec_decode(*state, ids[i], buf, sizeof(buf),
					      out, sizeof(out)),
				 -EOPNOTSUPP);
		assert_int_equal(codec_encode(*state, ids[i], 0, buf,
					      sizeof(buf), out, sizeof(out)),
				 -EOPNOTSUPP);
	}
}

static void test_encode_errors(void **state)
{
	unsigned char *in = calloc(1, MAX_LEN + 1), out[256];

	assert_int_equal(codec_encode(*state, ZSTD, 0, in, 0, out, 256),
			 -EINVAL);
	assert_int_equal(codec_encode(*state, ZSTD, 0, in, MAX_LEN + 1, out,
				      256),
			 -EINVAL);
	assert_int_equal(codec_encode(*state, ZLIB, 10, in, 4096, out, 256),
			 -EINVAL);
	assert_int_equal(codec_encode(*state, ZLIB, -1, in, 4096, out, 256),
			 -EINVAL);
	assert_int_equal(codec_encode(*state, ZSTD, 16, in, 4096, out, 256),
			 -EINVAL);
	/* Compressible, but not into this little room: -ENOSPC. */
	fill(in, 65536, COMPRESSIBLE, 1);
	assert_int_equal(codec_encode(*state, ZLIB, 0, in, 65536, out, 16),
			 -ENOSPC);
	assert_int_equal(codec_encode(*state, ZSTD, 0, in, 65536, out, 16),
			 -ENOSPC);
	assert_int_equal(codec_encode(*state, LZO_4K, 0, in, 65536, out, 16),
			 -ENOSPC);
	assert_int_equal(codec_encode(*state, LZO_4K, 0, in, 65536, out, 2),
			 -ENOSPC);
	free(in);
}

static void test_garbage(void **state)
{
	unsigned char *junk = malloc(MAX_LEN);
	size_t lens[] = { 1, 2, 3, 4, 5, 16, 4096, MAX_LEN };
	int comp;
	size_t i;

	for (comp = ZLIB; comp <= LZO_64K; comp++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			fill(junk, lens[i], RANDOM, comp * 100 + i);
			assert_int_equal(decode_exact(*state, comp, junk,
						      lens[i], NULL, MAX_LEN),
					 -EINVAL);
			memset(junk, 0, lens[i]);
			assert_int_equal(decode_exact(*state, comp, junk,
						      lens[i], NULL, MAX_LEN),
					 -EINVAL);
		}
	}
	free(junk);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(codec_name(0), "none");
	assert_string_equal(codec_name(ZLIB), "zlib");
	assert_string_equal(codec_name(ZSTD), "zstd");
	assert_string_equal(codec_name(LZO_4K), "lzo");
	assert_string_equal(codec_name(LZO_64K), "lzo");
	assert_null(codec_name(8));
	assert_null(codec_name(-1));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		T(test_roundtrip_zlib),
		T(test_roundtrip_zstd),
		T(test_roundtrip_lzo),
		T(test_roundtrip_interleaved),
		T(test_padding_ignored),
		T(test_zero_fill),
		T(test_kernel_fixtures),
		T(test_kernel_truncated),
		T(test_kernel_bitflips),
		T(test_encoded_bitflips),
		T(test_lzo_bad_headers),
		T(test_lzo_segment_too_big),
		T(test_lzo_layout),
		T(test_lzo_straddle),
		T(test_zlib_kernel_compat),
		T(test_zlib_bomb),
		T(test_zstd_window_and_bomb),
		T(test_zstd_frame_params),
		T(test_out_too_small),
		T(test_unknown),
		T(test_encode_errors),
		T(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
