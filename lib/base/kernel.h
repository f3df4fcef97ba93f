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
#include <stdint.h>

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

/*
 * include/uapi/linux/btrfs_tree.h: btrfs_inode_item flags, which older
 * headers lack. A send stream's FILEATTR carries them as a u64, the
 * inode's read-only flags (BTRFS_INODE_RO_*) in its upper half.
 */
#ifndef BTRFS_INODE_NODATASUM
#define BTRFS_INODE_NODATASUM (1U << 0)
#define BTRFS_INODE_NODATACOW (1U << 1)
#define BTRFS_INODE_READONLY (1U << 2)
#define BTRFS_INODE_NOCOMPRESS (1U << 3)
#define BTRFS_INODE_PREALLOC (1U << 4)
#define BTRFS_INODE_SYNC (1U << 5)
#define BTRFS_INODE_IMMUTABLE (1U << 6)
#define BTRFS_INODE_APPEND (1U << 7)
#define BTRFS_INODE_NODUMP (1U << 8)
#define BTRFS_INODE_NOATIME (1U << 9)
#define BTRFS_INODE_DIRSYNC (1U << 10)
#define BTRFS_INODE_COMPRESS (1U << 11)
#define BTRFS_INODE_ROOT_ITEM_INIT (1U << 31)
#define BTRFS_INODE_RO_VERITY (1U << 0)
#endif

/* include/uapi/linux/magic.h */
#ifndef BTRFS_SUPER_MAGIC
#define BTRFS_SUPER_MAGIC 0x9123683E
#endif

/*
 * Send stream format: fs/btrfs/send.h, documented in btrfs-progs
 * Documentation/dev/dev-send-stream.rst. Integers little endian; command
 * header u32 len (body only), u16 cmd, u32 crc32c (seed 0, no inversion,
 * over header with crc zeroed + body); TLV header u16 type, u16 len, except
 * that from version 2 the DATA attribute has only its u16 type and runs to
 * the end of the command.
 */
#define BTRFS_SEND_STREAM_MAGIC "btrfs-stream"
#define BTRFS_SEND_STREAM_MAGIC_LEN 13 /* with its NUL */
#define BTRFS_SEND_STREAM_HEADER_LEN (BTRFS_SEND_STREAM_MAGIC_LEN + 4)
#define BTRFS_SEND_CMD_HEADER_LEN 10
#define BTRFS_SEND_TLV_HEADER_LEN 4

enum btrfs_send_cmd {
	BTRFS_SEND_C_UNSPEC = 0,
	BTRFS_SEND_C_SUBVOL = 1,
	BTRFS_SEND_C_SNAPSHOT = 2,
	BTRFS_SEND_C_MKFILE = 3,
	BTRFS_SEND_C_MKDIR = 4,
	BTRFS_SEND_C_MKNOD = 5,
	BTRFS_SEND_C_MKFIFO = 6,
	BTRFS_SEND_C_MKSOCK = 7,
	BTRFS_SEND_C_SYMLINK = 8,
	BTRFS_SEND_C_RENAME = 9,
	BTRFS_SEND_C_LINK = 10,
	BTRFS_SEND_C_UNLINK = 11,
	BTRFS_SEND_C_RMDIR = 12,
	BTRFS_SEND_C_SET_XATTR = 13,
	BTRFS_SEND_C_REMOVE_XATTR = 14,
	BTRFS_SEND_C_WRITE = 15,
	BTRFS_SEND_C_CLONE = 16,
	BTRFS_SEND_C_TRUNCATE = 17,
	BTRFS_SEND_C_CHMOD = 18,
	BTRFS_SEND_C_CHOWN = 19,
	BTRFS_SEND_C_UTIMES = 20,
	BTRFS_SEND_C_END = 21,
	BTRFS_SEND_C_UPDATE_EXTENT = 22,
	/* version 2 */
	BTRFS_SEND_C_FALLOCATE = 23,
	BTRFS_SEND_C_FILEATTR = 24,
	BTRFS_SEND_C_ENCODED_WRITE = 25,
	/* version 3 */
	BTRFS_SEND_C_ENABLE_VERITY = 26,
	BTRFS_SEND_C_MAX = 26,
};

enum btrfs_send_attr {
	BTRFS_SEND_A_UNSPEC = 0,
	BTRFS_SEND_A_UUID = 1,
	BTRFS_SEND_A_CTRANSID = 2,
	BTRFS_SEND_A_INO = 3,
	BTRFS_SEND_A_SIZE = 4,
	BTRFS_SEND_A_MODE = 5,
	BTRFS_SEND_A_UID = 6,
	BTRFS_SEND_A_GID = 7,
	BTRFS_SEND_A_RDEV = 8,
	BTRFS_SEND_A_CTIME = 9,
	BTRFS_SEND_A_MTIME = 10,
	BTRFS_SEND_A_ATIME = 11,
	BTRFS_SEND_A_OTIME = 12,
	BTRFS_SEND_A_XATTR_NAME = 13,
	BTRFS_SEND_A_XATTR_DATA = 14,
	BTRFS_SEND_A_PATH = 15,
	BTRFS_SEND_A_PATH_TO = 16,
	BTRFS_SEND_A_PATH_LINK = 17,
	BTRFS_SEND_A_FILE_OFFSET = 18,
	BTRFS_SEND_A_DATA = 19,
	BTRFS_SEND_A_CLONE_UUID = 20,
	BTRFS_SEND_A_CLONE_CTRANSID = 21,
	BTRFS_SEND_A_CLONE_PATH = 22,
	BTRFS_SEND_A_CLONE_OFFSET = 23,
	BTRFS_SEND_A_CLONE_LEN = 24,
	/* version 2 */
	BTRFS_SEND_A_FALLOCATE_MODE = 25,
	BTRFS_SEND_A_FILEATTR = 26,
	BTRFS_SEND_A_UNENCODED_FILE_LEN = 27,
	BTRFS_SEND_A_UNENCODED_LEN = 28,
	BTRFS_SEND_A_UNENCODED_OFFSET = 29,
	BTRFS_SEND_A_COMPRESSION = 30,
	BTRFS_SEND_A_ENCRYPTION = 31,
	/* version 3 */
	BTRFS_SEND_A_VERITY_ALGORITHM = 32,
	BTRFS_SEND_A_VERITY_BLOCK_SIZE = 33,
	BTRFS_SEND_A_VERITY_SALT_DATA = 34,
	BTRFS_SEND_A_VERITY_SIG_DATA = 35,
	BTRFS_SEND_A_MAX = 35,
};

/*
 * fs/btrfs/export.h: the file handle of an inode by number, subvolume
 * and generation (struct btrfs_fid's first three fields, packed), of
 * type FILEID_BTRFS_WITHOUT_PARENT.
 */
#define BTRFS_FID_TYPE_WITHOUT_PARENT 0x4d
struct btrfs_fid_without_parent {
	uint64_t objectid;
	uint64_t root_objectid;
	uint32_t gen;
} __attribute__((packed));

#endif
