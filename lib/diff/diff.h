/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio diff: what changed between two read-only snapshots of one
 * subvolume, from their metadata alone. The difference is the one
 * BTRFS_IOC_SEND computes for an incremental stream (btrfs send
 * --no-data -p PARENT CHILD): the same inodes created, removed, renamed
 * and modified, the same data ranges and xattr names; it is found with
 * tree searches bounded by the transaction the two trees parted at.
 */
#ifndef ENCIO_DIFF_H
#define ENCIO_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum diff_change {
	DIFF_CREATED = '+',
	DIFF_REMOVED = '-',
	DIFF_RENAMED = 'R',
	DIFF_MODIFIED = 'M',
};

/* What a modification changed (diff_entry.what) */
#define DIFF_DATA (1u << 0)
#define DIFF_MODE (1u << 1)
#define DIFF_OWNER (1u << 2)
#define DIFF_SIZE (1u << 3)
#define DIFF_TIMES (1u << 4)
#define DIFF_FLAGS (1u << 5)
#define DIFF_XATTRS (1u << 6)
#define DIFF_LINKS (1u << 7)

struct diff_range {
	uint64_t offset;
	uint64_t len;
};

/*
 * One path's change. An inode modified has one 'M' entry, which carries
 * what changed; an inode created carries its data and xattrs on the '+'
 * entry of its first name. A name an inode kept, lost or gained is '+',
 * '-' or, one name for another, 'R'.
 */
struct diff_entry {
	char change; /* enum diff_change */
	char type;   /* zfs diff's: F / @ | = B C */
	uint64_t ino;
	char *path; /* relative to the snapshot: CHILD's, PARENT's for '-' */
	char *old_path; /* 'R': PARENT's */
	unsigned int what;
	struct diff_range *range;
	size_t nr_ranges;
	char **xattr;
	size_t nr_xattrs;
};

struct diff_result {
	struct diff_entry *entry;
	size_t nr;
	size_t cap;
	uint64_t since;	 /* the searches' lower bound (a transid) */
	uint64_t inodes; /* inodes compared */
	bool kernel;	 /* the kernel's difference */
	bool moved;	 /* ... taken because a balance moved the trees */
};

/*
 * The difference from the snapshot open at @parent_fd to the one at
 * @child_fd (each its subvolume's root directory), entries sorted by path.
 * Returns 0; -EINVAL if either is no subvolume's root or they are on two
 * filesystems; -EROFS if one is writable; -ENOTSUP if they are not
 * snapshots of one subvolume; -EAGAIN if a balance runs (the kernel's
 * difference, taken where one moved the trees while they were searched,
 * cannot be had while it does); other -errno.
 */
#define DIFF_KERNEL (1u << 0) /* take the kernel's difference */

int diff_snapshots(int parent_fd, int child_fd, unsigned int flags,
		   struct diff_result *res);
/*
 * diff_snapshots(), given up with -ECANCELED soon after *@cancel is set
 * (by another thread) while the trees are searched and compared.
 */
int diff_snapshots_cancel(int parent_fd, int child_fd, unsigned int flags,
			  const bool *cancel, struct diff_result *res);
void diff_result_free(struct diff_result *res);

/* "data", "mode", ... for the bit @what */
const char *diff_what_name(unsigned int what);

#endif
