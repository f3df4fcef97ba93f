/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to encio diff (lib/diff/): one inode's items as a tree holds
 * them, and the functions the files call across. Not an API:
 * lib/diff/diff.h is. Each file calls only those above it:
 *
 *   diff_items.c   tree searches: the inodes whose leaves are newer than
 *                  a transid, one inode's items read and parsed
 *   diff_data.c    the data ranges a modified file's extents give
 *   diff_kernel.c  the kernel's difference (BTRFS_IOC_SEND), where a
 *                  balance moved the trees while they were searched
 *   diff.c         the two trees compared inode by inode, paths, entries
 */
#ifndef ENCIO_DIFF_INTERNAL_H
#define ENCIO_DIFF_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diff/diff.h"
#include "fs/tree_search.h"

/* a search buffer: any item fits (a leaf is at most 64 KiB) */
#define DIFF_SEARCH_BUF (256 * 1024)

struct diff_ref {
	uint64_t dir;
	char *name;
	uint16_t len;
};

struct diff_xattr {
	char *name;
	uint16_t name_len;
	uint16_t value_len;
	uint8_t *value; /* follows name in the same allocation */
};

struct diff_extent {
	uint64_t offset;   /* the key's: file offset */
	uint64_t leaf_gen; /* generation of the leaf holding it */
	uint8_t *raw;	   /* the item */
	uint32_t raw_len;
	uint8_t type; /* BTRFS_FILE_EXTENT_* */
	uint64_t gen;
	uint64_t ram_bytes;
	uint64_t disk_bytenr; /* 0 for an inline item */
	uint64_t data_offset;
	uint64_t num_bytes;
};

struct diff_dirent {
	uint64_t index;	 /* the DIR_INDEX key's offset */
	uint64_t target; /* an inode; 0: a subvolume's, left out */
	uint32_t name;	 /* offset in the inode's names */
	uint16_t len;
};

/* One inode as one tree holds it */
struct diff_inode {
	bool present;
	uint8_t item[160]; /* struct btrfs_inode_item */
	uint64_t gen;
	uint64_t size;
	uint32_t nlink, uid, gid, mode;
	bool whole;	       /* its entries and extents read too */
	uint64_t max_leaf_gen; /* the newest leaf any of its items is in */
	struct diff_ref *ref;
	size_t nr_refs, cap_refs;
	struct diff_xattr *xattr;
	size_t nr_xattrs, cap_xattrs;
	struct diff_extent *extent;
	size_t nr_extents, cap_extents;
	struct diff_dirent *dirent; /* in index order */
	size_t nr_dirents, cap_dirents;
	char *names; /* the entries' names, one after another */
	size_t names_len, names_cap;
};

/*
 * The inodes to compare: a set, in the order they were added, with the
 * mode the child's inode item gave where it was seen (0: not seen). The
 * child's search fills it on a thread of its own while the comparison
 * takes from it; the comparison adds what directories lead to.
 */
struct diff_inoset {
	pthread_mutex_t lock;
	pthread_cond_t added;
	uint64_t *slot; /* hash slots, 0 free */
	size_t cap, nr;
	uint64_t *list;
	uint32_t *mode;
	size_t list_nr, list_cap;
	size_t next;	   /* the next to compare */
	unsigned int open; /* searches still adding */
	int err;	   /* the first of theirs */
};

/* diff_items.c */
int diff_inoset_init(struct diff_inoset *s, unsigned int searches);
int diff_inoset_add(struct diff_inoset *s, uint64_t ino, uint32_t mode);
void diff_inoset_close(struct diff_inoset *s, int err);
/* the next inode to compare, waiting for it: 1, 0 when none is left, or -errno */
int diff_inoset_next(struct diff_inoset *s, uint64_t *ino, uint32_t *mode);
void diff_inoset_free(struct diff_inoset *s);
/*
 * What stops a difference's threads: one of them failed, or the caller
 * asked (diff_snapshots_cancel()'s @cancel, NULL: never).
 */
struct diff_stop {
	bool failed;
	const bool *cancel;
};

static inline bool diff_stopped(const struct diff_stop *s)
{
	return __atomic_load_n(&s->failed, __ATOMIC_RELAXED) ||
	       (s->cancel && __atomic_load_n(s->cancel, __ATOMIC_RELAXED));
}

/* inodes whose inode item was written after @since */
int diff_items_touched(int fd, uint64_t since, uint64_t from, uint64_t to,
		       struct diff_inoset *set, const struct diff_stop *stop);
/* the highest inode number the tree holds an item of */
int diff_items_last_ino(int fd, uint64_t *ino);
/* its items but directory entries and extents, or (@whole) all */
int diff_inode_read(struct tree_search *ts, int fd, uint64_t ino, bool whole,
		    struct diff_inode *in);
int diff_inode_read_rest(struct tree_search *ts, int fd, uint64_t ino,
			 struct diff_inode *in);
void diff_inode_free(struct diff_inode *in);
uint64_t diff_extent_end(const struct diff_extent *e, uint32_t sectorsize);

/* diff_data.c */
struct diff_ranges {
	struct diff_range *r;
	size_t nr, cap;
};
int diff_ranges_add(struct diff_ranges *rs, uint64_t start, uint64_t end);
void diff_ranges_merge(struct diff_ranges *rs);
/* a new file's data */
int diff_data_new(const struct diff_inode *c, uint32_t sectorsize,
		  struct diff_ranges *rs);
/* a modified file's: the extents of leaves newer than @since compared */
int diff_data_changed(const struct diff_inode *p, const struct diff_inode *c,
		      uint64_t since, uint32_t sectorsize,
		      struct diff_ranges *rs);

/* diff_kernel.c */
struct diff_kernel;
int diff_kernel_run(int parent_fd, int child_fd, struct diff_inoset *todo,
		    struct diff_kernel **out);
int diff_kernel_ranges(struct diff_kernel *k, uint64_t ino,
		       struct diff_ranges *rs);
void diff_kernel_free(struct diff_kernel *k);

#endif
