/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Constants and layouts that come from the kernel, in one place.
 *
 * Sources: include/uapi/linux/btrfs.h and btrfs_tree.h (installed by
 * linux-libc-dev: encoded I/O args, ioctl numbers, tree search, file extent
 * items) and fs/btrfs/compression.h (on-disk compression ids, not in uapi).
 */
#ifndef ENCIO_KERNEL_H
#define ENCIO_KERNEL_H

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

/* fs/btrfs/compression.h: enum btrfs_compression_type, as stored on disk. */
#define BTRFS_COMPRESS_NONE 0
#define BTRFS_COMPRESS_ZLIB 1
#define BTRFS_COMPRESS_LZO 2
#define BTRFS_COMPRESS_ZSTD 3
/* encio's own: FIEMAP says "encoded" but not which algorithm. */
#define ENCIO_COMPRESS_UNKNOWN 255

/* fs/btrfs/compression.h: BTRFS_MAX_COMPRESSED, BTRFS_MAX_UNCOMPRESSED. */
#define BTRFS_MAX_COMPRESSED (128 * 1024)
#define BTRFS_MAX_UNCOMPRESSED (128 * 1024)

/* fs/btrfs/zstd.c: ZSTD_BTRFS_MAX_WINDOWLOG, the decoder's window limit. */
#define BTRFS_ZSTD_MAX_WINDOWLOG 17

/* include/uapi/linux/magic.h */
#ifndef BTRFS_SUPER_MAGIC
#define BTRFS_SUPER_MAGIC 0x9123683E
#endif

#endif
