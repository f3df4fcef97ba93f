/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Inode flags (lsattr/chattr) a copy keeps: which, read from the source,
 * set on DEST at the moment each must be, and those DEST refused.
 */
#ifndef ENCIO_INODE_FLAGS_H
#define ENCIO_INODE_FLAGS_H

#include <linux/fs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* nocow and compression decide how the data is stored: set while empty */
#define INODE_FLAGS_EARLY (FS_NOCOW_FL | FS_COMPR_FL | FS_NOCOMP_FL)
/* append-only and immutable refuse what comes after: set last */
#define INODE_FLAGS_LATE (FS_APPEND_FL | FS_IMMUTABLE_FL)
/*
 * The others go on a new file before its data too (one call for all, which
 * also clears what it inherited), but sync, which would make every write
 * synchronous: that one after the data.
 */
#define INODE_FLAGS_KEPT                                                       \
	(INODE_FLAGS_EARLY | INODE_FLAGS_LATE | FS_NOATIME_FL | FS_NODUMP_FL | \
	 FS_SYNC_FL)

/* What DEST refused during a run, for one warning each (atomic). */
struct inode_flags_refused {
	unsigned int flags;
	bool compression_prop; /* the btrfs.compression property */
};

/* The kept flags of the file open at @fd; 0 where it has none. */
unsigned int inode_flags_get(int fd);

/*
 * Make the flags of @fd in @mask those of @want. A flag DEST refuses
 * (EOPNOTSUPP, EINVAL, ENOTTY, EPERM of a flag it cannot have) is left
 * out and noted in @refused. 1 when something changed, 0 when nothing
 * had to, or -errno.
 */
int inode_flags_set(int fd, unsigned int want, unsigned int mask,
		    struct inode_flags_refused *refused);

/*
 * An unnamed file (O_TMPFILE, 0600) in the directory @dir_fd, copy-on-write
 * whatever the directory passes on: a nocow file refuses encoded writes
 * (EINVAL) and clones with copy-on-write files, so a probe or an extent
 * holder that inherited nocow would judge DEST by a file unlike the
 * copies it makes. The fd, or -errno.
 */
int inode_tmpfile_cow_open(int dir_fd);

/*
 * @op(@dir_fd, @arg), a change of the entries of the directory @dir_fd
 * (O_PATH too: a subvolume or an entry made, renamed or removed): where
 * append-only or immutable refuse it (-EPERM), run again with them lifted
 * from the directory, and put back right after. Returns what @op returns:
 * 0 or -errno.
 */
int inode_flags_lifted_for(int dir_fd, int (*op)(int dir_fd, void *arg),
			   void *arg);
/*
 * renameat2(@from_dir, @from, @to_dir, @to, RENAME_NOREPLACE), with
 * either directory's append-only or immutable lifted where they refuse it,
 * as inode_flags_lifted_for(). 0 or -errno.
 */
int inode_flags_lifted_rename(int from_dir, const char *from, int to_dir,
			      const char *to);
/*
 * inode_flags_lifted_rename() of the directory open at @fd (a subvolume's
 * root), its own late flags (append-only, immutable, ...) lifted for it
 * and put back: a rename moves no such inode. 0 or -errno.
 */
int inode_flags_lifted_rename_self(int fd, int from_dir, const char *from,
				   int to_dir, const char *to);

/* An O_PATH fd opened again for reading (flags and xattrs need it). */
int inode_reopen(int fd);
/* A regular file's fd opened again for reading and writing. */
int inode_reopen_rw(int fd);

/*
 * The btrfs.compression property (zstd, zlib, lzo) of @dst_fd made that of
 * @src_fd (set, or removed). After the flags: +c gives a file a property of
 * its own. Refused by DEST: noted in @refused. 1 when it changed, 0 when
 * nothing had to, or -errno.
 */
int inode_prop_copy(int src_fd, int dst_fd,
		    struct inode_flags_refused *refused);

/* chattr's letters of @flags, in @buf (at least 16 bytes). */
const char *inode_flags_letters(unsigned int flags, char *buf);

/*
 * A send stream's FILEATTR carries btrfs inode flags (BTRFS_INODE_*).
 * The value of the kept @flags of a regular file (@reg) or a directory
 * is what btrfs stores for them: nocow turns a file's checksums off too.
 */
uint64_t inode_flags_to_btrfs(unsigned int flags, bool reg);
/* The kept flags of FILEATTR's @attr: its other bits have no chattr flag. */
unsigned int inode_flags_from_btrfs(uint64_t attr);
/* The names of @attr's bits, comma-separated, unknown ones in hex. */
const char *inode_btrfs_flags_names(uint64_t attr, char *buf, size_t len);

#endif
