/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small files read from the btrfs tree instead of opened one by one.
 *
 * Most files of a system tree are smaller than a sector and btrfs keeps
 * their data inline, in the file extent item next to the inode item; a
 * symlink's target is kept the same way. One tree search returns the items
 * of dozens of consecutive inodes: for each regular file or symlink with
 * one link, no xattrs and a single inline extent that covers it, that is
 * all a copy needs (owner, mode, times, size and the data as stored, or
 * the target), without the lookup, open, stat, extent search, encoded read
 * and close (or the stat and readlink) it would otherwise cost.
 *
 * Only for a read-only subvolume or mount: nothing there can change between
 * the search and the copy.
 */
#ifndef ENCIO_INLINE_FILES_H
#define ENCIO_INLINE_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Larger inline extents are not taken (the kernel's limit is a sector). */
#define INLINE_FILE_MAX_DATA 4096

struct inline_file {
	uint64_t ino;
	uint64_t size;
	uint64_t ram_bytes; /* of the extent, >= size */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint32_t compression; /* BTRFS_ENCODED_IO_COMPRESSION_* */
	unsigned int flags;   /* its inode flags kept, as FS_*_FL */
	struct timespec atime;
	struct timespec mtime;
	uint32_t data_len; /* the extent's bytes as stored */
	unsigned char data[];
};

/* Where one search put a qualifying file's items. */
struct inline_entry {
	uint64_t ino;
	const void *inode_item;
	const void *extent_item;
	uint32_t extent_len;
};

/*
 * The inodes [lo, hi] of one subvolume, read by the last search: every
 * file among them that qualifies is in @ents (ascending).
 */
struct inline_files {
	void *search; /* struct btrfs_ioctl_search_args_v2 and its buffer */
	uint32_t sectorsize;
	uint32_t nodesize;
	dev_t dev;
	uint64_t lo;
	uint64_t hi; /* lo > hi: nothing read */
	struct inline_entry *ents;
	size_t nr;
	size_t cap;
	struct inline_entry cand; /* the inode being parsed */
	bool cand_ok;
	bool disabled; /* the search failed: not btrfs, no CAP_SYS_ADMIN */
};

/* For a file system with these sizes (BTRFS_IOC_FS_INFO); 0 or -ENOMEM. */
int inline_files_init(struct inline_files *w, uint32_t sectorsize,
		      uint32_t nodesize);
void inline_files_release(struct inline_files *w);

/*
 * The file @ino of the subvolume (st_dev @dev) that @fd is in, when it is
 * a small file as above: a copy the caller frees with free(). NULL when it
 * is not one, or where the tree cannot be searched; the caller then opens
 * the file. Searches from @ino on when @ino lies outside what the last
 * search read.
 */
struct inline_file *inline_files_get(struct inline_files *w, int fd, dev_t dev,
				     uint64_t ino);

/*
 * Parse one search's items (@nr_items of them in the @buf_len bytes at
 * @buf) that start at inode @ino; @complete: the search reached the end of
 * the tree. Items that would reach past @buf_len end the parse there, as
 * if the search had stopped before them. Public for tests.
 */
void inline_files_parse(struct inline_files *w, uint64_t ino, const void *buf,
			size_t buf_len, uint32_t nr_items, bool complete);

#endif
