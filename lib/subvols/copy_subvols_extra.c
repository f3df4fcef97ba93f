// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes --final: the subvolumes of the copy in DEST at
 * paths where SRC has none, reported; with --delete-extra, those proved
 * encio's copies of subvolumes SRC no longer has are deleted by their id.
 * Anyone who may write DEST may have made, received or renamed a
 * subvolume there: all that is not proved is left alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "base/kernel.h"
#include "fs/received_mark.h"

/* A subvolume below the copy's top, as listed. */
struct dest_subvol {
	char *rel; /* below the copy's top */
	struct btrfs_util_subvolume_info info;
	bool of_src; /* the copy of a subvolume SRC has */
	bool linked; /* of the snapshot families of those, by parent UUID */
	bool extra;
};

struct dest_list {
	struct dest_subvol *v;
	size_t nr;
};

static void dest_list_free(struct dest_list *l)
{
	size_t i;

	for (i = 0; i < l->nr; i++)
		free(l->v[i].rel);
	free(l->v);
}

/*
 * The path of the directory @fd within its subvolume ("" for the
 * subvolume's root), with a '/' at its end otherwise.
 */
static int path_in_subvol(int fd, char *out, size_t len)
{
	struct btrfs_ioctl_ino_lookup_args args = { 0 };
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	args.objectid = st.st_ino;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args))
		return -errno;
	return snprintf(out, len, "%s", args.name) >= (int)len ? -ENAMETOOLONG :
								 0;
}

/* Not a subvolume of the copy: one in flight, kept for a rerun. */
static bool in_flight(const char *rel)
{
	const char *c = rel, *end;
	size_t n, sl = strlen(PARTIAL_SUFFIX);

	for (; *c; c = *end ? end + 1 : end) {
		end = strchrnul(c, '/');
		n = end - c;
		if (!strncmp(c, ".encio-receive.", 15) ||
		    (c[0] == '.' && n > sl &&
		     !strncmp(c + n - sl, PARTIAL_SUFFIX, sl)))
			return true;
	}
	return false;
}

static const struct subvol_entry *planned_at(const struct subvols *s,
					     const char *rel)
{
	size_t i;

	for (i = 0; i < s->plan.nr; i++)
		if (!strcmp(s->plan.v[i].rel, rel))
			return &s->plan.v[i];
	return NULL;
}

/* The subvolumes below @top_fd, the copy's top, in pre-order. */
static int dest_list(struct subvols *s, int top_fd, struct dest_list *l)
{
	struct btrfs_util_subvolume_iterator *iter;
	struct btrfs_util_subvolume_info info;
	const struct subvol_entry *en;
	enum btrfs_util_error err;
	char top[PATH_MAX], *path;
	struct dest_subvol *v;
	const char *rel;
	uint64_t id;
	int ret;

	ret = path_in_subvol(top_fd, top, sizeof(top));
	if (ret)
		return ret;
	/* "dir/": its subvolumes' paths are "dir/NAME" */
	if (top[0] && top[strlen(top) - 1] == '/')
		top[strlen(top) - 1] = '\0';
	/* the id, not 0: the top need not be a subvolume's root */
	err = btrfs_util_subvolume_id_fd(top_fd, &id);
	if (!err)
		err = btrfs_util_create_subvolume_iterator_fd(top_fd, id, 0,
							      &iter);
	if (err)
		return btrfsutil_errno(err);
	while (!(err = btrfs_util_subvolume_iterator_next_info(iter, &path,
							       &info))) {
		rel = path_beneath(path, top);
		if (!rel || !strcmp(rel, ".") || in_flight(rel)) {
			free(path);
			continue;
		}
		v = realloc(l->v, (l->nr + 1) * sizeof(*v));
		if (!v) {
			free(path);
			err = BTRFS_UTIL_ERROR_NO_MEMORY;
			errno = ENOMEM;
			break;
		}
		l->v = v;
		v = &l->v[l->nr];
		*v = (struct dest_subvol){ .info = info };
		v->rel = strdup(rel);
		free(path);
		if (!v->rel) {
			err = BTRFS_UTIL_ERROR_NO_MEMORY;
			errno = ENOMEM;
			break;
		}
		en = planned_at(s, v->rel);
		v->of_src = en && en->in_dest;
		v->linked = v->of_src;
		v->extra = !en;
		l->nr++;
	}
	btrfs_util_destroy_subvolume_iterator(iter);
	return err == BTRFS_UTIL_ERROR_STOP_ITERATION ? 0 :
							btrfsutil_errno(err);
}

static bool snapshot_of(const struct dest_subvol *a,
			const struct dest_subvol *b)
{
	return subvol_uuid_set(a->info.parent_uuid) &&
	       !memcmp(a->info.parent_uuid, b->info.uuid, BTRFS_UUID_SIZE);
}

/*
 * The extras joined to the copies of SRC's subvolumes by parent UUIDs
 * (one a snapshot of the other, in DEST), through other extras too: the
 * copies of SRC's snapshots deleted since are; a subvolume received or
 * made in DEST from elsewhere is not.
 */
static void link_families(struct dest_list *l)
{
	struct dest_subvol *a, *b;
	bool grown = true;
	size_t i, j;

	while (grown) {
		grown = false;
		for (i = 0; i < l->nr; i++) {
			a = &l->v[i];
			for (j = 0; !a->linked && j < l->nr; j++) {
				b = &l->v[j];
				if (!b->linked)
					continue;
				a->linked = snapshot_of(a, b) ||
					    snapshot_of(b, a);
				grown |= a->linked;
			}
		}
	}
}

/*
 * Why @d, as listed, is no copy encio made of a subvolume SRC had and no
 * longer has; NULL if it is one.
 */
static const char *not_deletable(struct subvols *s, const struct dest_subvol *d)
{
	uint64_t id;
	size_t i;

	if (!(d->info.flags & BTRFS_ROOT_SUBVOL_RDONLY))
		return "writable: in use, maybe";
	if (!subvol_uuid_set(d->info.received_uuid))
		return "not received: not a copy encio made";
	for (i = 0; i < s->plan.nr; i++)
		if (!memcmp(d->info.received_uuid,
			    subvol_expected_received(&s->plan.v[i]),
			    BTRFS_UUID_SIZE))
			return "a copy of a subvolume SRC has, at another path";
	if (uuid_tree_ids(s->plan.src_fd, d->info.received_uuid,
			  BTRFS_UUID_KEY_SUBVOL, &id, 1) != 0)
		return "its source is still on SRC's filesystem";
	if (!d->linked)
		return "no snapshot relation to the copies of SRC's subvolumes";
	return NULL;
}

/*
 * @d opened beneath the copy's top and checked again on the descriptor:
 * the subvolume listed, read-only, and marked by encio when it received
 * it, unchanged since (only root can set the mark, and its owner can
 * neither change it nor mark it received again without undoing it).
 * Then deleted by its id, unless there is @keep, why it is not: NULL,
 * or why it stays.
 */
static const char *check_delete(int top_fd, const struct dest_subvol *d,
				const char *keep, int *err)
{
	struct btrfs_util_subvolume_info info;
	const char *why = NULL, *name;
	struct stat st;
	int dir_fd, fd;

	dir_fd = open_parent_resolve(top_fd, d->rel, O_RDONLY | O_DIRECTORY,
				     RESOLVE_CONFINED, &name);
	if (dir_fd < 0) {
		*err = -dir_fd;
		return "cannot be opened";
	}
	fd = openat(dir_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0) {
		*err = errno;
		close(dir_fd);
		return "cannot be opened";
	}
	if (fstat(fd, &st) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID ||
	    btrfs_util_subvolume_info_fd(fd, 0, &info) ||
	    info.id != d->info.id ||
	    memcmp(info.uuid, d->info.uuid, BTRFS_UUID_SIZE) ||
	    !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY))
		why = "another subvolume is at its path since it was listed";
	else if (!received_mark_own(fd, &info))
		why = "not proved encio's: no mark of encio's on it, or changed since it was received";
	else if (keep)
		why = keep;
	else if ((*err = -subvols_delete_id(dir_fd, info.id)))
		why = "cannot be deleted";
	close(fd);
	close(dir_fd);
	return why;
}

static int extra_add(struct subvols *s, const struct dest_subvol *d,
		     const char *kept, int err)
{
	struct subvols_stats *st = s->stats;
	struct subvols_extra *v;
	char dst[PATH_MAX];

	if (subvols_dest_path(s, d->rel, dst, sizeof(dst)))
		return -ENAMETOOLONG;
	v = realloc(st->extras, (st->nr_extras + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->extras = v;
	v[st->nr_extras] = (struct subvols_extra){ .kept = kept, .err = err };
	v[st->nr_extras].dst = strdup(dst);
	if (!v[st->nr_extras].dst)
		return -ENOMEM;
	st->nr_extras++;
	st->extras_deleted += !kept;
	return 0;
}

int subvols_extras(struct subvols *s, int top_fd)
{
	struct dest_list l = { 0 };
	const struct dest_subvol *d;
	const char *kept, *keep = NULL;
	size_t i;
	int err, ret;

	if (!s->opts->delete_extra)
		keep = "encio's copy of a subvolume SRC no longer has: --delete-extra deletes it";
	else if (s->stats->failed)
		keep = "encio's copy of a subvolume SRC no longer has: not deleted, as a subvolume failed";
	ret = dest_list(s, top_fd, &l);
	if (!ret)
		link_families(&l);
	/* the innermost first: a subvolume with others in it stays */
	for (i = l.nr; !ret && i-- > 0;) {
		d = &l.v[i];
		if (!d->extra)
			continue;
		err = 0;
		kept = not_deletable(s, d);
		if (!kept)
			kept = check_delete(top_fd, d, keep, &err);
		ret = extra_add(s, d, kept, err);
	}
	dest_list_free(&l);
	return ret ? encio_error_set(s->e, ret,
				     "list the subvolumes SRC does not have in",
				     s->dst, false, 0) :
		     0;
}
