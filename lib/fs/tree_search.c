// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "fs/tree_search.h"

int tree_search_init(struct tree_search *s, size_t buf_size)
{
	s->args = malloc(sizeof(*s->args) + buf_size);
	s->buf_size = buf_size;
	return s->args ? 0 : -ENOMEM;
}

void tree_search_release(struct tree_search *s)
{
	free(s->args);
	s->args = NULL;
}

/* The key after the last one a search returned; false: none is left */
static bool key_next(struct btrfs_ioctl_search_key *k,
		     const struct btrfs_ioctl_search_header *sh)
{
	k->min_objectid = sh->objectid;
	k->min_type = sh->type;
	k->min_offset = sh->offset + 1;
	if (sh->offset == UINT64_MAX) {
		k->min_offset = 0;
		k->min_type = sh->type + 1;
		if (sh->type == UINT8_MAX) {
			if (sh->objectid == UINT64_MAX)
				return false;
			k->min_type = 0;
			k->min_objectid = sh->objectid + 1;
		}
	}
	return k->min_objectid <= k->max_objectid;
}

int tree_search_run(struct tree_search *s, int fd,
		    const struct btrfs_ioctl_search_key *key, uint64_t since,
		    tree_search_fn fn, void *arg)
{
	struct btrfs_ioctl_search_key *k = &s->args->key;
	struct btrfs_ioctl_search_header sh;
	int ret;

	*k = *key;
	k->tree_id = 0;
	k->min_transid = since ? since + 1 : 0;
	k->max_transid = UINT64_MAX;
	do {
		size_t pos = 0;
		uint32_t i;

		k->nr_items = UINT32_MAX;
		s->args->buf_size = s->buf_size;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, s->args) < 0)
			return -errno;
		if (!k->nr_items)
			return 0;
		for (i = 0; i < k->nr_items; i++) {
			memcpy(&sh, s->args->buf + pos, sizeof(sh));
			pos += sizeof(sh);
			ret = fn(arg, &sh, (const uint8_t *)s->args->buf + pos);
			if (ret)
				return ret;
			pos += sh.len;
		}
	} while (key_next(k, &sh));
	return 0;
}
