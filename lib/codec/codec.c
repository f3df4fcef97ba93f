// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs-format extent codecs.
 *
 * The formats are those of fs/btrfs/{zlib,zstd,lzo}.c; the decoders accept
 * what the kernel's decoders accept, with one deliberate difference: data
 * that decodes to more than the extent's unencoded length is an error here
 * (-EOVERFLOW), where the kernel silently stops filling the extent's pages.
 * The kernel never writes such an extent, so it can only come from a
 * corrupted or forged one.
 *
 * zlib   A zlib stream. Like the kernel, the 2-byte header is checked and
 *        then skipped, and the data inflated raw: the adler32 trailer is not
 *        verified, and anything after the end of the deflate stream (the
 *        trailer, sector padding) is ignored.
 * zstd   One zstd frame, decoded with a window of at most
 *        2^BTRFS_ZSTD_MAX_WINDOWLOG bytes. Bytes after the frame (sector
 *        padding) are ignored, as the kernel does.
 * lzo    LE32 total length (counting itself), then segments: LE32 length
 *        plus lzo1x data decoding to at most one sector. A segment header
 *        never straddles a sector boundary of the encoded stream: when fewer
 *        than 4 bytes are left in the sector, they are zero padding. The
 *        sector size comes from the LZO_xK id. As the kernel, the total
 *        must lie within the input's last sector; stricter than the kernel,
 *        a segment must end within the total.
 *
 * Contexts and scratch memory live in struct codec and are reused: a call
 * allocates nothing, except what zlib and zstd grow lazily on first use or
 * on a change of level.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lzo1x.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/kernel.h"
#include "base/le_bytes.h"
#include "codec/codec.h"

/* fs/btrfs/lzo.c: LZO_LEN, the size of the total and segment headers. */
#define LZO_LEN 4
/* include/linux/lzo.h: lzo1x_worst_compress(), a segment's size limit. */
#define LZO_WORST(x) ((x) + (x) / 16 + 64 + 3 + 2)
#define LZO_MAX_SECTOR (64 * 1024)

/* fs/btrfs/zlib.c and zstd.c: the levels the kernel accepts and defaults. */
#define ZLIB_MIN_LEVEL 1
#define ZLIB_MAX_LEVEL 9
#define ZLIB_DEFAULT_LEVEL 3
#define ZSTD_MIN_LEVEL (-15)
#define ZSTD_MAX_LEVEL 15
#define ZSTD_DEFAULT_LEVEL 3

struct codec {
	ZSTD_DCtx *zstd_d;
	ZSTD_CCtx *zstd_c;
	z_stream inflate;
	z_stream deflate;
	int deflate_level;
	void *lzo_wrkmem;
	/* One lzo segment, decoded or encoded; also an overflow probe. */
	unsigned char scratch[LZO_WORST(LZO_MAX_SECTOR)];
};

struct codec *codec_new(void)
{
	struct codec *codec;

	if (lzo_init() != LZO_E_OK)
		return NULL;
	codec = calloc(1, sizeof(*codec));
	if (!codec)
		return NULL;
	codec->zstd_d = ZSTD_createDCtx();
	codec->zstd_c = ZSTD_createCCtx();
	codec->lzo_wrkmem = malloc(LZO1X_1_MEM_COMPRESS);
	if (!codec->zstd_d || !codec->zstd_c || !codec->lzo_wrkmem)
		goto fail;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(codec->zstd_d,
						ZSTD_d_windowLogMax,
						BTRFS_ZSTD_MAX_WINDOWLOG)))
		goto fail;
	/* Raw inflate: the zlib header is checked by hand, as the kernel. */
	if (inflateInit2(&codec->inflate, -MAX_WBITS) != Z_OK)
		goto fail;
	if (deflateInit(&codec->deflate, ZLIB_DEFAULT_LEVEL) != Z_OK) {
		inflateEnd(&codec->inflate);
		goto fail;
	}
	codec->deflate_level = ZLIB_DEFAULT_LEVEL;
	return codec;
fail:
	ZSTD_freeDCtx(codec->zstd_d);
	ZSTD_freeCCtx(codec->zstd_c);
	free(codec->lzo_wrkmem);
	free(codec);
	return NULL;
}

void codec_free(struct codec *codec)
{
	if (!codec)
		return;
	ZSTD_freeDCtx(codec->zstd_d);
	ZSTD_freeCCtx(codec->zstd_c);
	inflateEnd(&codec->inflate);
	deflateEnd(&codec->deflate);
	free(codec->lzo_wrkmem);
	free(codec);
}

/* Sector size of an LZO_xK id, or 0 if @compression is not lzo. */
static size_t lzo_sector(int compression)
{
	int shift = compression - BTRFS_ENCODED_IO_COMPRESSION_LZO_4K;

	if (shift < 0 || compression > BTRFS_ENCODED_IO_COMPRESSION_LZO_64K)
		return 0;
	return (size_t)4096 << shift;
}

/* ---- names ---- */

/* The one table of compression names, by on-disk BTRFS_COMPRESS_* id. */
static const char *const alg_names[] = {
	[BTRFS_COMPRESS_NONE] = "none",
	[BTRFS_COMPRESS_ZLIB] = "zlib",
	[BTRFS_COMPRESS_LZO] = "lzo",
	[BTRFS_COMPRESS_ZSTD] = "zstd",
};

#define NR_ALGS ((int)(sizeof(alg_names) / sizeof(alg_names[0])))

const char *codec_alg_name(int alg)
{
	if (alg < 0 || alg >= NR_ALGS)
		return "unknown";
	return alg_names[alg];
}

int codec_alg_parse(const char *name, size_t len)
{
	int alg;

	for (alg = 0; alg < NR_ALGS; alg++)
		if (strlen(alg_names[alg]) == len &&
		    !strncmp(name, alg_names[alg], len))
			return alg;
	return -EINVAL;
}

const char *codec_name(int compression)
{
	switch (compression) {
	case BTRFS_ENCODED_IO_COMPRESSION_NONE:
		return alg_names[BTRFS_COMPRESS_NONE];
	case BTRFS_ENCODED_IO_COMPRESSION_ZLIB:
		return alg_names[BTRFS_COMPRESS_ZLIB];
	case BTRFS_ENCODED_IO_COMPRESSION_ZSTD:
		return alg_names[BTRFS_COMPRESS_ZSTD];
	case BTRFS_ENCODED_IO_COMPRESSION_LZO_4K ... BTRFS_ENCODED_IO_COMPRESSION_LZO_64K:
		return alg_names[BTRFS_COMPRESS_LZO];
	}
	return NULL;
}

/* The LZO_xK id whose segments are @sectorsize bytes. */
static int lzo_id(uint32_t sectorsize, uint32_t *compression)
{
	int id;

	for (id = BTRFS_ENCODED_IO_COMPRESSION_LZO_4K;
	     id <= BTRFS_ENCODED_IO_COMPRESSION_LZO_64K; id++) {
		if (lzo_sector(id) == sectorsize) {
			*compression = id;
			return 0;
		}
	}
	return -EINVAL;
}

/* "lzo4k" .. "lzo64k", the names encio write accepted before "lzo". */
static int lzo_sized_parse(const char *name, uint32_t *compression)
{
	unsigned long k;
	char *end;

	if (strncmp(name, "lzo", 3) || name[3] < '1' || name[3] > '9')
		return -EINVAL;
	k = strtoul(name + 3, &end, 10);
	if (strcmp(end, "k") || k > 64)
		return -EINVAL;
	return lzo_id(k * 1024, compression);
}

int codec_parse(const char *name, uint32_t sectorsize, uint32_t *compression)
{
	unsigned long value;
	char *end;
	int alg;

	alg = codec_alg_parse(name, strlen(name));
	switch (alg) {
	case BTRFS_COMPRESS_NONE:
		*compression = BTRFS_ENCODED_IO_COMPRESSION_NONE;
		return 0;
	case BTRFS_COMPRESS_ZLIB:
		*compression = BTRFS_ENCODED_IO_COMPRESSION_ZLIB;
		return 0;
	case BTRFS_COMPRESS_ZSTD:
		*compression = BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
		return 0;
	case BTRFS_COMPRESS_LZO:
		return lzo_id(sectorsize, compression);
	}
	if (!lzo_sized_parse(name, compression))
		return 0;
	if (name[0] < '0' || name[0] > '9')
		return -EINVAL;
	errno = 0;
	value = strtoul(name, &end, 10);
	if (errno || *end || value > UINT32_MAX)
		return -EINVAL;
	*compression = value;
	return 0;
}

/* ---- zlib ---- */

/*
 * The header check of fs/btrfs/zlib.c: deflate method, a valid FCHECK and no
 * preset dictionary. A larger window than CINFO says is harmless for a raw
 * inflate into one flat buffer, so the stream keeps its 32 KiB window.
 */
static int zlib_header_ok(const unsigned char *in, size_t in_len)
{
	if (in_len < 2)
		return 0;
	if ((in[0] & 0x0f) != Z_DEFLATED || (in[0] >> 4) > 7)
		return 0;
	if (in[1] & 0x20)
		return 0;
	return ((in[0] << 8) + in[1]) % 31 == 0;
}

static ssize_t zlib_decode(struct codec *codec, const unsigned char *in,
			   size_t in_len, unsigned char *out, size_t out_len)
{
	z_stream *s = &codec->inflate;
	int overflow = 0;
	int ret;

	if (!zlib_header_ok(in, in_len))
		return -EINVAL;
	if (inflateReset(s) != Z_OK)
		return -EINVAL;
	s->next_in = (unsigned char *)in + 2;
	s->avail_in = in_len - 2;
	s->next_out = out;
	s->avail_out = out_len;
	if (!out_len) {
		/* zlib refuses a NULL next_out, even with no room. */
		overflow = 1;
		s->next_out = codec->scratch;
		s->avail_out = 1;
	}
	for (;;) {
		ret = inflate(s, Z_NO_FLUSH);
		if (ret == Z_STREAM_END)
			break;
		if (ret == Z_MEM_ERROR)
			return -ENOMEM;
		if (ret != Z_OK && ret != Z_BUF_ERROR)
			return -EINVAL;
		if (overflow && s->avail_out == 0)
			return -EOVERFLOW;
		if (s->avail_out == 0) {
			/* Full: does the stream end here or carry on? */
			overflow = 1;
			s->next_out = codec->scratch;
			s->avail_out = 1;
			continue;
		}
		if (s->avail_in == 0 || ret == Z_BUF_ERROR)
			return -EINVAL; /* truncated */
	}
	if (overflow && s->avail_out == 0)
		return -EOVERFLOW;
	return overflow ? out_len : out_len - s->avail_out;
}

static int zlib_set_level(struct codec *codec, int level)
{
	if (level == 0)
		level = ZLIB_DEFAULT_LEVEL;
	if (level < ZLIB_MIN_LEVEL || level > ZLIB_MAX_LEVEL)
		return -EINVAL;
	if (deflateReset(&codec->deflate) != Z_OK)
		return -EINVAL;
	if (level == codec->deflate_level)
		return 0;
	if (deflateParams(&codec->deflate, level, Z_DEFAULT_STRATEGY) != Z_OK)
		return -EINVAL;
	codec->deflate_level = level;
	return 0;
}

static ssize_t zlib_encode(struct codec *codec, int level,
			   const unsigned char *in, size_t in_len,
			   unsigned char *out, size_t limit)
{
	z_stream *s = &codec->deflate;
	int ret;

	ret = zlib_set_level(codec, level);
	if (ret)
		return ret;
	s->next_in = (unsigned char *)in;
	s->avail_in = in_len;
	s->next_out = out;
	s->avail_out = limit;
	ret = deflate(s, Z_FINISH);
	if (ret == Z_STREAM_END)
		return limit - s->avail_out;
	if (ret == Z_OK || ret == Z_BUF_ERROR)
		return -ENOSPC;
	return -EINVAL;
}

/* ---- zstd ---- */

static int zstd_errno(size_t ret)
{
	switch (ZSTD_getErrorCode(ret)) {
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	case ZSTD_error_dstSize_tooSmall:
		return -ENOSPC;
	default:
		return -EINVAL;
	}
}

static ssize_t zstd_decode(struct codec *codec, const unsigned char *in,
			   size_t in_len, unsigned char *out, size_t out_len)
{
	ZSTD_inBuffer src = { in, in_len, 0 };
	ZSTD_outBuffer dst = { out, out_len, 0 };
	size_t ret, in_pos, out_pos;
	int overflow = 0;

	ZSTD_DCtx_reset(codec->zstd_d, ZSTD_reset_session_only);
	for (;;) {
		in_pos = src.pos;
		out_pos = dst.pos;
		ret = ZSTD_decompressStream(codec->zstd_d, &dst, &src);
		/* Even "dst too small" means the frame lied about a size. */
		if (ZSTD_isError(ret))
			return zstd_errno(ret) == -ENOMEM ? -ENOMEM : -EINVAL;
		if (overflow && dst.pos)
			return -EOVERFLOW;
		if (ret == 0)
			break; /* end of frame; the rest is padding */
		if (!overflow && dst.pos == dst.size) {
			/* Full: does the frame end here or carry on? */
			overflow = 1;
			dst = (ZSTD_outBuffer){ codec->scratch, 1, 0 };
			continue;
		}
		if (src.pos == src.size)
			return -EINVAL; /* truncated */
		if (src.pos == in_pos && dst.pos == out_pos)
			return -EINVAL;
	}
	return overflow ? out_len : dst.pos;
}

static ssize_t zstd_encode(struct codec *codec, int level,
			   const unsigned char *in, size_t in_len,
			   unsigned char *out, size_t limit)
{
	ZSTD_CCtx *c = codec->zstd_c;
	size_t ret;

	if (level == 0)
		level = ZSTD_DEFAULT_LEVEL;
	if (level < ZSTD_MIN_LEVEL || level > ZSTD_MAX_LEVEL)
		return -EINVAL;
	ZSTD_CCtx_reset(c, ZSTD_reset_session_only);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel,
						level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog,
						BTRFS_ZSTD_MAX_WINDOWLOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(c, in_len)))
		return -EINVAL;
	ret = ZSTD_compress2(c, out, limit, in, in_len);
	return ZSTD_isError(ret) ? zstd_errno(ret) : (ssize_t)ret;
}

/* ---- lzo ---- */

/* Skip the zero padding when a header would straddle a sector boundary. */
static size_t lzo_skip_pad(size_t pos, size_t sector)
{
	size_t left = sector - pos % sector;

	return left < LZO_LEN ? pos + left : pos;
}

/*
 * Decode one segment to @out + @pos. Where less than a sector of room is
 * left, decode to scratch first so that too much output is told apart
 * (-EOVERFLOW) from bad data (-EINVAL).
 */
static ssize_t lzo_segment(struct codec *codec, const unsigned char *seg,
			   size_t seg_len, size_t sector, unsigned char *out,
			   size_t room)
{
	unsigned char *dst = room >= sector ? out : codec->scratch;
	lzo_uint dst_len = sector;
	int ret;

	ret = lzo1x_decompress_safe(seg, seg_len, dst, &dst_len, NULL);
	if (ret != LZO_E_OK)
		return -EINVAL;
	if (dst_len > room)
		return -EOVERFLOW;
	if (dst != out && dst_len)
		memcpy(out, dst, dst_len);
	return dst_len;
}

static ssize_t lzo_decode(struct codec *codec, size_t sector,
			  const unsigned char *in, size_t in_len,
			  unsigned char *out, size_t out_len)
{
	size_t total, pos = LZO_LEN, done = 0, seg_len;
	ssize_t ret;

	if (in_len < LZO_LEN)
		return -EINVAL;
	total = le_get32(in);
	if (total < LZO_LEN || total > in_len || total > BTRFS_MAX_COMPRESSED)
		return -EINVAL;
	/* As the kernel: all the sectors of the extent are used. */
	if (in_len - total >= sector)
		return -EINVAL;
	for (;;) {
		pos = lzo_skip_pad(pos, sector);
		if (pos >= total)
			break;
		if (total - pos < LZO_LEN)
			return -EINVAL;
		seg_len = le_get32(in + pos);
		pos += LZO_LEN;
		if (seg_len > LZO_WORST(sector) || seg_len > total - pos)
			return -EINVAL;
		ret = lzo_segment(codec, in + pos, seg_len, sector, out + done,
				  out_len - done);
		if (ret < 0)
			return ret;
		done += ret;
		pos += seg_len;
	}
	return done;
}

/*
 * As fs/btrfs/lzo.c: one segment per sector of input, and zero padding after
 * a segment that leaves less than a header's room in its sector.
 */
static ssize_t lzo_encode(struct codec *codec, size_t sector,
			  const unsigned char *in, size_t in_len,
			  unsigned char *out, size_t limit)
{
	size_t pos = LZO_LEN, done = 0, chunk, next;
	lzo_uint seg_len;

	if (limit < LZO_LEN)
		return -ENOSPC;
	while (done < in_len) {
		chunk = in_len - done < sector ? in_len - done : sector;
		if (lzo1x_1_compress(in + done, chunk, codec->scratch, &seg_len,
				     codec->lzo_wrkmem) != LZO_E_OK)
			return -EINVAL;
		if (limit - pos < LZO_LEN + seg_len)
			return -ENOSPC;
		le_put32(out + pos, seg_len);
		memcpy(out + pos + LZO_LEN, codec->scratch, seg_len);
		pos += LZO_LEN + seg_len;
		done += chunk;
		next = lzo_skip_pad(pos, sector);
		if (next > limit)
			return -ENOSPC;
		memset(out + pos, 0, next - pos);
		pos = next;
	}
	le_put32(out, pos);
	return pos;
}

/* ---- entry points ---- */

ssize_t codec_decode(struct codec *codec, int compression, const void *in,
		     size_t in_len, void *out, size_t out_len)
{
	size_t sector = lzo_sector(compression);
	ssize_t ret;

	if (in_len > UINT_MAX || out_len > UINT_MAX)
		return -EINVAL;
	if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZLIB)
		ret = zlib_decode(codec, in, in_len, out, out_len);
	else if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZSTD)
		ret = zstd_decode(codec, in, in_len, out, out_len);
	else if (sector)
		ret = lzo_decode(codec, sector, in, in_len, out, out_len);
	else
		return -EOPNOTSUPP;
	if (ret >= 0 && (size_t)ret < out_len)
		memset((unsigned char *)out + ret, 0, out_len - ret);
	return ret;
}

ssize_t codec_encode(struct codec *codec, int compression, int level,
		     const void *in, size_t in_len, void *out, size_t out_cap)
{
	size_t sector = lzo_sector(compression);
	size_t limit;
	ssize_t ret;

	if (compression != BTRFS_ENCODED_IO_COMPRESSION_ZLIB &&
	    compression != BTRFS_ENCODED_IO_COMPRESSION_ZSTD && !sector)
		return -EOPNOTSUPP;
	if (in_len == 0 || in_len > BTRFS_MAX_UNCOMPRESSED)
		return -EINVAL;
	limit = in_len - 1;
	if (out_cap < limit)
		limit = out_cap;
	if (limit == 0)
		return limit == in_len - 1 ? -E2BIG : -ENOSPC;
	if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZLIB)
		ret = zlib_encode(codec, level, in, in_len, out, limit);
	else if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZSTD)
		ret = zstd_encode(codec, level, in, in_len, out, limit);
	else
		ret = lzo_encode(codec, sector, in, in_len, out, limit);
	/* Not smaller than the input: the kernel would store it plain. */
	if (ret == -ENOSPC && limit == in_len - 1)
		return -E2BIG;
	return ret;
}
