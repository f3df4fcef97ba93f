/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Metadata read ahead of a walk: a thread reads a btrfs subvolume's tree in
 * key order with BTRFS_IOC_TREE_SEARCH_V2, so the walk finds inode,
 * directory, xattr and extent items in memory instead of waiting for one
 * cold tree block at a time.
 */
#ifndef ENCIO_PREFETCH_H
#define ENCIO_PREFETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* How many inodes the reading may run ahead of the entries walked. */
#define PREFETCH_LEAD_INODES 65536
/* At most this many inodes with xattrs are remembered (8 bytes each). */
#define PREFETCH_MAX_XATTR_INODES (1U << 20)

struct meta_prefetch {
	pthread_t thread;
	int fd; /* the thread's */
	bool running;
	bool stop;		/* atomic */
	const uint64_t *walked; /* entries the walk has handled, atomic */
	uint64_t walked_base;	/* *walked at the start */
	uint64_t inodes;	/* inode items read so far */
	/*
	 * On a read-only subvolume nothing changes while it is read, so the
	 * items seen tell which inodes have xattrs: the walk need not ask
	 * the others.
	 */
	bool track_xattrs;
	dev_t dev; /* the subvolume's */
	pthread_mutex_t xattr_lock;
	uint64_t *xattr_inos; /* ascending */
	size_t nr_xattr_inos;
	size_t cap_xattr_inos;
	uint64_t read_below; /* atomic: every inode below it read whole */
	uint64_t from;	     /* and above this one */
};

/*
 * Start reading the tree of a walk's root, @path under @dir_fd with stat
 * @st, when it is a whole subvolume's root directory; not for a directory
 * inside one, whose subvolume may hold much more than the walk. It is only
 * a hint: where it cannot start or its search fails (not btrfs, no
 * CAP_SYS_ADMIN), the walk goes on as without it. @walked is read to keep
 * the reading at most PREFETCH_LEAD_INODES ahead. It reads from inode
 * @from on (0: all), and knows nothing of those before.
 */
void meta_prefetch_start(struct meta_prefetch *p, int dir_fd, const char *path,
			 const struct stat *st, const uint64_t *walked,
			 uint64_t from);

/*
 * Whether the inode of @st has xattrs: 1 or 0 where the reading knows (a
 * read-only subvolume, the inode read already), else -1.
 */
int meta_prefetch_has_xattrs(struct meta_prefetch *p, const struct stat *st);

/* The walk has handled one more entry. */
static inline void meta_prefetch_walked(uint64_t *walked)
{
	__atomic_store_n(walked, *walked + 1, __ATOMIC_RELAXED);
}

/* Stop the reading (if it runs) and wait for it; zeroed @p is fine. */
void meta_prefetch_stop(struct meta_prefetch *p);

#endif
