/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs-format extent codecs: zlib streams, single zstd frames the kernel's
 * decoder accepts, and btrfs' segmented lzo format.
 */
#ifndef ENCIO_CODEC_H
#define ENCIO_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct codec;

struct codec *codec_new(void);
void codec_free(struct codec *codec);

/*
 * Decode one extent as returned by BTRFS_IOC_ENCODED_READ.
 *
 * @compression: BTRFS_ENCODED_IO_COMPRESSION_* (1 zlib, 2 zstd, 3..7 lzo with
 *               a sector of 4K..64K).
 * @in, @in_len: the encoded bytes (may carry zero padding up to a sector).
 * @out, @out_len: room for the whole unencoded extent (unencoded_len).
 *
 * Returns the number of bytes decoded, the rest of @out being zeroed as the
 * kernel does, or -EINVAL for data that does not decode (bad, truncated),
 * -EOVERFLOW when it decodes to more than @out_len (the kernel would silently
 * stop there; it never writes such an extent), -EOPNOTSUPP for NONE or an
 * unknown compression. Never reads past @in + @in_len nor writes past
 * @out + @out_len, whatever the data. Bytes after the end of the zlib stream,
 * the zstd frame or the lzo total length (within its sector) are ignored, as
 * by the kernel; so is the zlib adler32 trailer.
 */
ssize_t codec_decode(struct codec *codec, int compression, const void *in,
		     size_t in_len, void *out, size_t out_len);

/*
 * Encode @in_len (1..128 KiB) bytes into the format the kernel stores for
 * @compression (BTRFS_ENCODED_IO_COMPRESSION_*) at @level (0: the kernel's
 * default, 3; zlib 1..9, zstd -15..15, ignored for lzo). zstd frames use a
 * window of at most 2^BTRFS_ZSTD_MAX_WINDOWLOG; lzo uses the sector size of
 * the LZO_xK id, which must be the destination's sector size.
 *
 * Returns the encoded size, which is always < @in_len (what
 * BTRFS_IOC_ENCODED_WRITE demands), or -E2BIG when the result would not be
 * smaller than the input (the kernel then stores the data plain), -ENOSPC
 * when it is smaller but does not fit in @out_cap (an @out_cap of
 * @in_len - 1 is always enough), -EINVAL for a bad length or level,
 * -EOPNOTSUPP for NONE or an unknown compression.
 */
ssize_t codec_encode(struct codec *codec, int compression, int level,
		     const void *in, size_t in_len, void *out, size_t out_cap);

/*
 * Compression names, one spelling everywhere: "none", "zlib", "lzo", "zstd",
 * as btrfs-progs and compsize print them. lzo's encoded-I/O ids (LZO_4K ..
 * LZO_64K) all print as "lzo": the sector size they carry is the file
 * system's, and the numeric id says it where it matters.
 *
 * codec_alg_name() names an on-disk BTRFS_COMPRESS_* id, "unknown" for
 * others; codec_alg_parse() returns the BTRFS_COMPRESS_* id of the first
 * @len bytes of @name, or -EINVAL.
 */
const char *codec_alg_name(int alg);
int codec_alg_parse(const char *name, size_t len);

/*
 * The name of an encoded-I/O compression id (BTRFS_ENCODED_IO_COMPRESSION_*),
 * NULL for an id that has none.
 */
const char *codec_name(int compression);

/*
 * An encoded-I/O compression id for @name: a name as above ("lzo" with
 * @sectorsize segments), "lzo4k" .. "lzo64k" (lzo with the segment size
 * given), or a decimal number (passed through unchecked, so the kernel can
 * refuse it). Returns 0 or -EINVAL.
 */
int codec_parse(const char *name, uint32_t sectorsize, uint32_t *compression);

#endif
