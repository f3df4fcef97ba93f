// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: the subvolumes a stream is computed against, its parent and
 * its clone sources, and the parent chosen among them as btrfs send
 * chooses it.
 */
#include <btrfsutil.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "send/send_internal.h"

int send_roots_add(struct send_roots *r, const char *path,
		   struct encio_error *e)
{
	enum btrfs_util_error err;
	uint64_t id;

	if (btrfs_util_is_subvolume(path) != BTRFS_UTIL_OK)
		return encio_error_set(e, errno == ENOENT ? ENOENT : EINVAL,
				       "send from (not a subvolume)", path,
				       false, 0);
	err = btrfs_util_subvolume_id(path, &id);
	if (err)
		return encio_error_set(e, btrfsutil_errno(err),
				       "find the subvolume id of", path, false,
				       0);
	r->root[r->nr] = (struct send_root){ id, path };
	r->ids[r->nr++] = id;
	return 0;
}

static void send_roots_add_id(struct send_roots *r, uint64_t id,
			      const char *name)
{
	r->root[r->nr] = (struct send_root){ id, name };
	r->ids[r->nr++] = id;
}

/*
 * The parent btrfs send picks among the clone sources for @root when -p
 * is not given: the subvolume @root was snapshotted from if it is one of
 * them, else the one snapshotted from the same subvolume whose ctransid is
 * closest to that subvolume's. -ENOENT when there is none.
 */
int send_find_parent(const char *root, const struct send_roots *r,
		     const struct send_root **found)
{
	struct btrfs_util_subvolume_info info, origin, c;
	struct btrfs_util_subvolume_iterator *it;
	uint64_t best_diff = UINT64_MAX, diff;
	bool have_origin = false;
	size_t i;
	char *p;

	*found = NULL;
	if (btrfs_util_subvolume_info(root, 0, &info))
		return errno ? -errno : -EIO;
	if (btrfs_util_create_subvolume_iterator(root, BTRFS_FS_TREE_OBJECTID,
						 0, &it))
		return errno ? -errno : -EIO;
	while (!have_origin &&
	       !btrfs_util_subvolume_iterator_next_info(it, &p, &origin)) {
		have_origin = !memcmp(origin.uuid, info.parent_uuid,
				      sizeof(origin.uuid));
		free(p);
	}
	btrfs_util_destroy_subvolume_iterator(it);
	if (!have_origin)
		return -ENOENT;
	for (i = 0; i < r->nr; i++)
		if (r->root[i].id == origin.id) {
			*found = &r->root[i];
			return 0;
		}
	for (i = 0; i < r->nr; i++) {
		if (btrfs_util_subvolume_info(r->root[i].path, 0, &c) ||
		    memcmp(c.parent_uuid, origin.uuid, sizeof(c.parent_uuid)))
			continue;
		diff = c.ctransid > origin.ctransid ?
			       c.ctransid - origin.ctransid :
			       origin.ctransid - c.ctransid;
		if (diff < best_diff) {
			best_diff = diff;
			*found = &r->root[i];
		}
	}
	return *found ? 0 : -ENOENT;
}

/* The kernel's stream of @root (read-only), against @r's parent. */
/*
 * The parent and the clone sources as btrfs send passes them: the parent
 * is a clone source too; without -p each subvolume sent becomes one for
 * those after it (room is made for them).
 */
int send_roots_init(struct send_roots *r, const struct send_options *opts,
		    size_t nr_paths, const struct send_root **parent,
		    struct encio_error *e)
{
	size_t cap = opts->nr_clones + 1 + nr_paths, i;
	int ret;

	*parent = NULL;
	r->nr = 0;
	r->root = calloc(cap, sizeof(*r->root));
	r->ids = calloc(cap, sizeof(*r->ids));
	if (!r->root || !r->ids)
		return encio_error_set(e, ENOMEM, "start", "send", false, 0);
	for (i = 0; i < opts->nr_clones; i++) {
		if (opts->clone_ids) {
			send_roots_add_id(r, opts->clone_ids[i],
					  opts->clones[i]);
			continue;
		}
		ret = send_roots_add(r, opts->clones[i], e);
		if (ret)
			return ret;
	}
	if (!opts->parent)
		return 0;
	if (opts->parent_id) {
		send_roots_add_id(r, opts->parent_id, opts->parent);
	} else {
		ret = send_roots_add(r, opts->parent, e);
		if (ret)
			return ret;
	}
	*parent = &r->root[r->nr - 1];
	return 0;
}

void send_roots_release(struct send_roots *r)
{
	free(r->root);
	free(r->ids);
}
