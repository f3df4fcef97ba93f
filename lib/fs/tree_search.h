/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every item of a key range of a subvolume's tree, in key order, by
 * BTRFS_IOC_TREE_SEARCH_V2 (CAP_SYS_ADMIN), handed to a callback: the one
 * loop of the readers that take a tree's items in bulk. A search bounded
 * by @since skips every subtree no newer than it (find-new's way).
 */
#ifndef ENCIO_TREE_SEARCH_H
#define ENCIO_TREE_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/kernel.h"

/* Its buffer, kept from one search to the next of one thread */
struct tree_search {
	struct btrfs_ioctl_search_args_v2 *args;
	size_t buf_size;
};

/* @item: @sh->len bytes. A return other than 0 stops the search. */
typedef int (*tree_search_fn)(void *arg,
			      const struct btrfs_ioctl_search_header *sh,
			      const uint8_t *item);

/* The key of every item of type @type of inode @ino. */
static inline struct btrfs_ioctl_search_key tree_search_key_items(uint64_t ino,
								  uint8_t type)
{
	struct btrfs_ioctl_search_key k = {
		.min_objectid = ino,
		.max_objectid = ino,
		.min_type = type,
		.max_type = type,
		.max_offset = UINT64_MAX,
		.max_transid = UINT64_MAX,
	};

	return k;
}

int tree_search_init(struct tree_search *s, size_t buf_size);
void tree_search_release(struct tree_search *s);

/*
 * The items from (@key's min_objectid, min_type, min_offset) to its max
 * ones, of the tree @fd is in, of leaves newer than @since (0: all).
 * Returns 0, what @fn returned to stop, or -errno.
 */
int tree_search_run(struct tree_search *s, int fd,
		    const struct btrfs_ioctl_search_key *key, uint64_t since,
		    tree_search_fn fn, void *arg);

#endif
