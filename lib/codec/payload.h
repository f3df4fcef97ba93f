/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Checks of an encoded extent's payload before it is written: the framing
 * each algorithm's kernel decoder relies on, read without decoding, so that
 * a stream cannot hand the filesystem an extent it would fail to read back.
 */
#ifndef ENCIO_PAYLOAD_H
#define ENCIO_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

/*
 * Check @len bytes of @data, an extent encoded with @compression
 * (BTRFS_ENCODED_IO_COMPRESSION_*) that decodes to @unencoded_len bytes:
 *  zstd: one frame (no dictionary) whose window is at most
 *        2^BTRFS_ZSTD_MAX_WINDOWLOG, whose declared content size, if
 *        any, is at most @unencoded_len, and whose block headers chain
 *        to a last block within @len;
 *  zlib: a stream header with method deflate, a window of at most 32 KiB,
 *        a valid header check and no preset dictionary;
 *  lzo:  btrfs' framing: a total length within @len whose sectors @len
 *        uses, then length-prefixed segments inside it, none larger than
 *        lzo's worst case for a sector, no segment header straddling a
 *        sector boundary (the sector size is the LZO_xK id's).
 * A zlib stream cut short, or any data that decodes wrong, passes: only
 * decoding tells. NONE is always well formed. Returns 0, or -EINVAL with *@why set to a
 * static description, -EOPNOTSUPP for an unknown compression.
 */
int payload_check(int compression, const void *data, size_t len,
		  uint64_t unencoded_len, const char **why);

#endif
