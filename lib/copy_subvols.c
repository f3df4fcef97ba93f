// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes. Each subvolume below SRC goes through send and
 * receive run in process, joined by a pipe: the sender on a thread of its
 * own, the receiver on the caller's. Subvolumes are taken in the order of
 * their generations, a subvolume always after the one it sits in. One whose
 * family (subvolumes joined by snapshot relations) has a read-only member
 * in DEST already is sent as the kernel's difference from the closest of
 * them in generation, with every read-only subvolume copied before as a
 * clone source: the receiver snapshots that member's copy and applies the
 * changes. Each copy is received under .NAME.encio-partial beside its
 * final name and renamed into place when complete, so that a rerun can
 * tell a complete copy (at its name, marked received as expected) from
 * one in flight when the copy stopped (under the partial name: deleted and
 * redone).
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "copy_subvols.h"
#include "kernel.h"
#include "receive.h"
#include "send.h"
#include "subvol_ahead.h"
#include "subvol_plan.h"

struct subvols {
	struct copy_ctx *ctx;
	const struct tree_options *caller; /* its callbacks, relayed */
	struct tree_options topts;	   /* for tree_copy(), arg: this */
	uint64_t logical_before; /* ctx's logical_bytes before a tree copy */
	const struct subvols_options *opts;
	struct subvols_stats *stats;
	struct encio_error *e;
	struct timespec synced_at; /* SRC synced before its snapshots */
	/* the directory descriptor a copy is made through, named in errors */
	char fd_dir[32];
	struct subvol_plan plan;
	char dst[PATH_MAX];  /* SRC's copy */
	const char **clones; /* read-only subvolumes in DEST, by SRC path */
	uint64_t *clone_ids; /* and by the ids they were listed with */
	/* the subvolume read at hand, by its descriptor: /proc/self/fd/N */
	char src_proc[32];
	const char *src_name; /* its path, for messages while it is copied */
	struct receive_ctx *rcv;
	struct subvol_ahead *ahead; /* NULL: each pass made at its turn */
	uint64_t bytes_before; /* bytes_written before the subvolume at hand */
};

struct placement {
	int dir_fd; /* the directory the copy goes in */
	char name[NAME_MAX + 1];
	char partial[NAME_MAX + 1];
	char dst[PATH_MAX];
	bool placeholder; /* an empty directory holds the name */
};

static int set_name(struct placement *p, const char *name)
{
	size_t len = strlen(name);

	if (len >= sizeof(p->name))
		return -ENAMETOOLONG;
	memcpy(p->name, name, len + 1);
	return 0;
}

static int placement_open(struct subvols *s, const struct subvol_entry *en,
			  struct placement *p, int top_fd)
{
	char dir[PATH_MAX], *slash;
	int n;

	/* below a mount point's "DEST/.", its entries are named DEST/NAME */
	n = strlen(s->dst);
	if (n >= 2 && !strcmp(s->dst + n - 2, "/."))
		n -= 2;
	n = en->rel[0] ? snprintf(p->dst, sizeof(p->dst), "%.*s/%s", n, s->dst,
				  en->rel) :
			 snprintf(p->dst, sizeof(p->dst), "%s", s->dst);
	if (n < 0 || n >= (int)sizeof(p->dst))
		return encio_error_set(s->e, ENAMETOOLONG, "copy", en->src,
				       false, 0);
	if (en->rel[0]) {
		snprintf(dir, sizeof(dir), "%s", en->rel);
		slash = strrchr(dir, '/');
		if (set_name(p, slash ? slash + 1 : dir))
			return encio_error_set(s->e, ENAMETOOLONG, "copy",
					       en->src, false, 0);
		if (slash)
			*slash = 0;
		else
			dir[0] = 0;
		p->dir_fd = subvol_open_beneath(top_fd, dir,
						O_RDONLY | O_DIRECTORY);
	} else {
		snprintf(dir, sizeof(dir), "%s", p->dst);
		if (set_name(p, basename(dir)))
			return encio_error_set(s->e, ENAMETOOLONG, "copy",
					       en->src, false, 0);
		snprintf(dir, sizeof(dir), "%s", p->dst);
		p->dir_fd =
			open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (p->dir_fd < 0)
			p->dir_fd = -errno;
	}
	if (p->dir_fd < 0)
		return encio_error_set(s->e, p->dir_fd, "open the directory of",
				       p->dst, false, 0);
	if (snprintf(p->partial, sizeof(p->partial), ".%s" PARTIAL_SUFFIX,
		     p->name) >= (int)sizeof(p->partial)) {
		close(p->dir_fd);
		return encio_error_set(s->e, ENAMETOOLONG, "copy", en->src,
				       false, 0);
	}
	return 0;
}

static bool dir_empty(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *d;
	bool empty = true;
	DIR *dir;

	if (fd < 0)
		return false;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return false;
	}
	while (empty && (d = readdir(dir)))
		empty = !strcmp(d->d_name, ".") || !strcmp(d->d_name, "..");
	closedir(dir);
	return empty;
}

#define CHANGED_SEARCH_BYTES (64U << 10)

static bool key_next(struct btrfs_ioctl_search_key *k,
		     const struct btrfs_ioctl_search_header *last)
{
	k->min_objectid = last->objectid;
	k->min_type = last->type;
	k->min_offset = last->offset + 1;
	if (last->offset != UINT64_MAX)
		return true;
	k->min_offset = 0;
	if (++k->min_type)
		return true;
	return ++k->min_objectid != 0;
}

/*
 * The directories of a subvolume that held encio's snapshots of the
 * writable subvolumes in them: making and deleting those moved their
 * ctime, and their mtime was put back, so an entry made or removed there
 * since shows in their mtime.
 */
struct held_dirs {
	uint64_t ino[16];
	size_t nr;
};

static bool held(const struct held_dirs *h, uint64_t ino)
{
	size_t i;

	for (i = 0; h && i < h->nr; i++)
		if (h->ino[i] == ino)
			return true;
	return false;
}

/*
 * Whether the inode item @item (@len bytes) of inode @ino changed after
 * @since: its ctime, or its mtime for a directory of @h.
 */
static bool inode_changed(uint64_t ino, const void *item, uint32_t len,
			  const struct timespec *since,
			  const struct held_dirs *h)
{
	struct btrfs_inode_item ii;
	uint64_t sec;
	uint32_t nsec;

	if (len < sizeof(ii))
		return false;
	memcpy(&ii, item, sizeof(ii));
	sec = le64toh(held(h, ino) ? ii.mtime.sec : ii.ctime.sec);
	nsec = le32toh(held(h, ino) ? ii.mtime.nsec : ii.ctime.nsec);
	return sec > (uint64_t)since->tv_sec ||
	       (sec == (uint64_t)since->tv_sec && nsec > since->tv_nsec);
}

/*
 * Whether an inode of the subvolume open at @fd changed after @since, by
 * its ctime: a look at a directory or file updates its atime, and with it
 * the subvolume's ctransid, but no ctime. Only the leaves written after
 * transaction @transid are read. 1, 0 or -errno.
 */
static int changed_since(int fd, uint64_t transid, const struct timespec *since,
			 const struct held_dirs *h)
{
	struct btrfs_ioctl_search_args_v2 *args;
	struct btrfs_ioctl_search_header sh;
	size_t used;
	uint32_t i;
	int ret = 0;

	args = calloc(1, sizeof(*args) + CHANGED_SEARCH_BYTES);
	if (!args)
		return -ENOMEM;
	args->key.max_objectid = UINT64_MAX;
	args->key.min_type = BTRFS_INODE_ITEM_KEY;
	args->key.max_type = BTRFS_INODE_ITEM_KEY;
	args->key.max_offset = UINT64_MAX;
	args->key.min_transid = transid + 1;
	args->key.max_transid = UINT64_MAX;
	for (;;) {
		args->key.nr_items = UINT32_MAX;
		args->buf_size = CHANGED_SEARCH_BYTES;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0) {
			ret = -errno;
			break;
		}
		if (!args->key.nr_items)
			break;
		for (i = 0, used = 0; i < args->key.nr_items; i++) {
			memcpy(&sh, (char *)args->buf + used, sizeof(sh));
			used += sizeof(sh);
			if (sh.type == BTRFS_INODE_ITEM_KEY &&
			    inode_changed(sh.objectid, (char *)args->buf + used,
					  sh.len, since, h))
				ret = 1;
			used += sh.len;
		}
		if (ret || !key_next(&args->key, &sh))
			break;
	}
	free(args);
	return ret;
}

/*
 * Whether @en changed in SRC since the moment its copy (@info) holds, or
 * only its ctransid moved (atimes): an inode changed after the snapshot
 * was begun (stime; 0 where a stopped run made the snapshot: anything in
 * a leaf written since counts), in a leaf written after it.
 */
static int src_changed(const struct subvols *s, const struct subvol_entry *en,
		       const struct btrfs_util_subvolume_info *info)
{
	int fd = subvol_entry_open(&s->plan, en, false), dir_fd, ret;
	struct held_dirs h = { .nr = 0 };
	struct stat root, st;
	size_t i;

	if (fd < 0)
		return fd;
	if (fstat(fd, &root)) {
		close(fd);
		return -errno;
	}
	for (i = 0; i < s->plan.nr; i++) {
		const struct subvol_entry *in = &s->plan.v[i];

		if (in->read_only || in == en)
			continue;
		dir_fd = subvol_entry_dir_open(&s->plan, in);
		if (dir_fd < 0)
			continue;
		ret = fstat(dir_fd, &st);
		close(dir_fd);
		if (ret || st.st_dev != root.st_dev)
			continue;
		if (h.nr == sizeof(h.ino) / sizeof(h.ino[0])) {
			/* too many to tell apart: taken as changed */
			close(fd);
			return 1;
		}
		h.ino[h.nr++] = st.st_ino;
	}
	ret = changed_since(fd, info->stransid, &info->stime, &h);
	close(fd);
	return ret;
}

/*
 * A writable subvolume's finished copy records the moment of SRC it holds
 * where SRC has no received UUID of its own: its stransid is SRC's
 * ctransid then (its received UUID stays none, so btrfs send names it by
 * its own UUID). Its rtransid, the transaction that marked it, is where
 * its ctransid stays until anyone changes it.
 */
static int writable_copy_state(const struct subvols *s,
			       const struct subvol_entry *en, int fd,
			       const struct btrfs_util_subvolume_info *info)
{
	int changed;

	if (subvol_uuid_set(en->info.received_uuid))
		return !memcmp(info->received_uuid, en->info.received_uuid,
			       BTRFS_UUID_SIZE) ?
			       1 :
			       -EEXIST;
	/* none of encio's: no mark, or received from something */
	if (subvol_uuid_set(info->received_uuid) || !info->stransid)
		return -EEXIST;
	/* SRC now, not the snapshot: one a stopped run left may be older */
	if (info->stransid == en->info.ctransid)
		return 1;
	changed = src_changed(s, en, info);
	if (changed <= 0)
		return changed ?: 1;
	/* SRC changed since: copied again, unless the copy changed too */
	if (info->ctransid <= info->rtransid)
		return 2;
	changed = changed_since(fd, info->rtransid, &info->rtime, NULL);
	return changed < 0 ? changed : changed ? -ESTALE : 2;
}

/*
 * What DEST holds at @en's name: nothing (0), its complete copy (1), a
 * copy SRC changed since, to be replaced (2), an empty directory (0,
 * p->placeholder), a copy both changed since (-ESTALE), or something else
 * (-EEXIST).
 */
static int dest_state(const struct subvols *s, struct subvol_entry *en,
		      struct placement *p)
{
	struct btrfs_util_subvolume_info info;
	struct stat st;
	int fd, ret;

	if (fstatat(p->dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return -EEXIST;
	if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID) {
		p->placeholder = dir_empty(p->dir_fd, p->name);
		return p->placeholder ? 0 : -EEXIST;
	}
	fd = openat(p->dir_fd, p->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = subvol_util_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	if (ret) {
		close(fd);
		return ret;
	}
	if (en->read_only) {
		en->parent_ok = !memcmp(info.received_uuid,
					subvol_expected_received(en),
					BTRFS_UUID_SIZE);
		ret = en->parent_ok ? 1 : -EEXIST;
	} else if (info.flags & BTRFS_ROOT_SUBVOL_RDONLY) {
		ret = -EEXIST;
	} else {
		/* copied from the snapshot beside it, not finished yet */
		en->parent_ok = en->snap_made &&
				!memcmp(info.received_uuid, en->snap_uuid,
					BTRFS_UUID_SIZE);
		ret = en->parent_ok ? 1 : writable_copy_state(s, en, fd, &info);
	}
	close(fd);
	return ret;
}

/*
 * The directory a snapshot is made in or deleted from, opened beneath
 * SRC, its times saved: that directory is SRC's, and may be in a
 * subvolume copied (or to be).
 */
static int snapshot_dir_open(struct subvols *s, const struct subvol_entry *en,
			     struct timespec times[2])
{
	struct stat st;
	int fd = subvol_entry_dir_open(&s->plan, en);

	if (fd < 0)
		return encio_error_set(s->e, fd, "open the directory of",
				       en->src, false, 0);
	if (fstat(fd, &st)) {
		close(fd);
		return encio_error_set(s->e, errno, "open the directory of",
				       en->src, false, 0);
	}
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	return fd;
}

/* Its times put back: making the snapshot changed nothing else in it. */
static void snapshot_dir_close(int fd, const struct timespec times[2])
{
	futimens(fd, times);
	close(fd);
}

/* What SRC's subvolume @en is now: -ESTALE named, if not what was listed. */
static int entry_open(struct subvols *s, const struct subvol_entry *en,
		      bool snap)
{
	int fd = subvol_entry_open(&s->plan, en, snap);

	if (fd == -ESTALE)
		return encio_error_set(
			s->e, ESTALE,
			snap ? "copy (the snapshot is another since it was made)" :
			       "copy (another subvolume is at its path since it was listed)",
			snap ? en->snap : en->src, false, 0);
	if (fd < 0)
		return encio_error_set(s->e, fd, "open",
				       snap ? en->snap : en->src, false, 0);
	return fd;
}

/*
 * The snapshot at @en's snapshot name in @dir_fd, made now or by a run
 * that stopped: taken only if it is a read-only snapshot of @en,
 * and its root has @en's owner, so that a subvolume planted at encio's
 * name is never taken for the copy.
 */
static int snapshot_take(struct subvols *s, struct subvol_entry *en, int dir_fd,
			 int src_fd)
{
	struct btrfs_util_subvolume_info info;
	struct stat st, src_st;
	int fd, ret = 0;

	fd = openat(dir_fd, en->snap_name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT :
					 encio_error_set(s->e, errno, "look at",
							 en->snap, false, 0);
	if (fstat(fd, &st) || fstat(src_fd, &src_st))
		ret = -errno;
	else if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		ret = -EEXIST;
	else
		ret = subvol_util_errno(
			btrfs_util_subvolume_info_fd(fd, 0, &info));
	close(fd);
	if (ret == -EEXIST ||
	    (!ret && !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY)))
		return encio_error_set(s->e, EEXIST,
				       "snapshot (not a read-only snapshot)",
				       en->snap, false, 0);
	if (ret)
		return encio_error_set(s->e, ret, "look at", en->snap, false,
				       0);
	if (memcmp(info.parent_uuid, en->info.uuid, BTRFS_UUID_SIZE) ||
	    st.st_uid != src_st.st_uid || st.st_gid != src_st.st_gid)
		return encio_error_set(
			s->e, EEXIST,
			"use (not a snapshot of the subvolume beside it, or not its owner's)",
			en->snap, false, 0);
	memcpy(en->snap_uuid, info.uuid, BTRFS_UUID_SIZE);
	en->snap_id = info.id;
	en->snap_ctransid = info.ctransid;
	en->snap_made = true;
	return 0;
}

/*
 * The read-only snapshot a writable subvolume is copied from, left by a
 * run that stopped (its copy may be complete), or made now: by
 * descriptors (BTRFS_IOC_SNAP_CREATE_V2), of the subvolume listed, in the
 * directory it is in.
 */
static int snapshot_find(struct subvols *s, struct subvol_entry *en)
{
	struct timespec times[2];
	int dir_fd, src_fd, ret;

	if (!en->snap)
		return 0;
	src_fd = entry_open(s, en, false);
	if (src_fd < 0)
		return src_fd;
	dir_fd = snapshot_dir_open(s, en, times);
	if (dir_fd < 0) {
		close(src_fd);
		return dir_fd;
	}
	ret = snapshot_take(s, en, dir_fd, src_fd);
	if (ret == -ENOENT) {
		en->snap_before = s->synced_at;
		if (btrfs_util_create_snapshot_fd2(
			    src_fd, dir_fd, en->snap_name,
			    BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY, NULL, NULL))
			ret = encio_error_set(s->e, errno ?: EIO, "snapshot",
					      en->snap, false, 0);
		else
			ret = snapshot_take(s, en, dir_fd, src_fd);
		if (ret == -ENOENT)
			ret = encio_error_set(s->e, ENOENT, "snapshot",
					      en->snap, false, 0);
	}
	snapshot_dir_close(dir_fd, times);
	close(src_fd);
	return ret;
}

/* The snapshot deleted by its id: whatever its name holds by now. */
static int snapshot_delete(struct subvols *s, struct subvol_entry *en)
{
	struct timespec times[2];
	int dir_fd, ret = 0;

	dir_fd = snapshot_dir_open(s, en, times);
	if (dir_fd < 0)
		return dir_fd;
	if (btrfs_util_delete_subvolume_by_id_fd(dir_fd, en->snap_id))
		ret = encio_error_set(s->e, errno ?: EIO, "delete the snapshot",
				      en->snap, false, 0);
	snapshot_dir_close(dir_fd, times);
	return ret;
}

/* A copy left in flight by an earlier run: deleted, to be made again. */
static int partial_remove(struct subvols *s, struct placement *p)
{
	struct stat st;

	if (fstatat(p->dir_fd, p->partial, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 :
					 encio_error_set(s->e, errno, "look at",
							 p->partial, false, 0);
	if (!S_ISDIR(st.st_mode) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		return encio_error_set(s->e, EEXIST,
				       "make the copy (not a subvolume)",
				       p->partial, false, 0);
	if (btrfs_util_delete_subvolume_fd(p->dir_fd, p->partial, 0))
		return encio_error_set(s->e, errno ?: EIO,
				       "delete the copy left in flight",
				       p->partial, false, 0);
	return 0;
}

/*
 * Subvolume @rel of the copy a rerun replaces moved into its replacement
 * at the same path, where that has the directory and not the name; the
 * directory's times kept.
 */
static int carry_nested(int old_fd, int new_fd, const char *rel)
{
	char dir[PATH_MAX], *slash;
	const char *name = rel;
	struct stat st;
	int from, to, ret = 0;

	snprintf(dir, sizeof(dir), "%s", rel);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		name = slash + 1;
	}
	from = subvol_open_beneath(old_fd, slash ? dir : "",
				   O_RDONLY | O_DIRECTORY);
	if (from < 0)
		return from;
	to = subvol_open_beneath(new_fd, slash ? dir : "",
				 O_RDONLY | O_DIRECTORY);
	if (to < 0) {
		close(from);
		return to == -ENOENT || to == -ENOTDIR ? 0 : to;
	}
	if (fstat(to, &st))
		ret = -errno;
	else if (renameat2(from, name, to, name, RENAME_NOREPLACE))
		ret = errno == EEXIST ? 0 : -errno;
	else if (futimens(to, (struct timespec[2]){ st.st_atim, st.st_mtim }))
		ret = -errno;
	close(to);
	close(from);
	return ret;
}

/* The paths of the subvolumes directly below @fd's, in @out (to free). */
static int nested_list(int fd, char ***out, size_t *nr)
{
	struct btrfs_util_subvolume_iterator *iter;
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	char *rel, **v = NULL, **grown;
	uint64_t id;
	size_t n = 0;

	*out = NULL;
	*nr = 0;
	err = btrfs_util_subvolume_id_fd(fd, &id);
	if (!err)
		err = btrfs_util_create_subvolume_iterator_fd(fd, 0, 0, &iter);
	if (err)
		return subvol_util_errno(err);
	while (!(err = btrfs_util_subvolume_iterator_next_info(iter, &rel,
							       &info))) {
		if (info.parent_id != id) {
			free(rel);
			continue;
		}
		grown = realloc(v, (n + 1) * sizeof(*v));
		if (!grown) {
			free(rel);
			err = BTRFS_UTIL_ERROR_NO_MEMORY;
			errno = ENOMEM;
			break;
		}
		v = grown;
		v[n++] = rel;
	}
	btrfs_util_destroy_subvolume_iterator(iter);
	*out = v;
	*nr = n;
	return err == BTRFS_UTIL_ERROR_STOP_ITERATION ? 0 :
							subvol_util_errno(err);
}

/* Whether a subvolume of SRC is copied to @rel below DEST's top. */
static bool planned(const struct subvols *s, const char *dir, const char *rel)
{
	size_t i, n = strlen(dir);

	for (i = 0; i < s->plan.nr; i++) {
		const char *r = s->plan.v[i].rel;

		if (n ? !strncmp(r, dir, n) && r[n] == '/' &&
				    !strcmp(r + n + 1, rel) :
			!strcmp(r, rel))
			return true;
	}
	return false;
}

/*
 * The copy a rerun replaces, deleted once its replacement is complete.
 * The copies of the subvolumes nested in it that SRC still has at their
 * path are moved into the replacement first, where it has their
 * directory, so that their own turns find them, complete or to update,
 * instead of copying them again; the others go with it.
 */
static int replace_copy(struct subvols *s, const struct subvol_entry *en,
			struct placement *p)
{
	int old_fd, new_fd, ret;
	char **nested;
	size_t i, nr;

	old_fd = openat(p->dir_fd, p->name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (old_fd < 0)
		return encio_error_set(s->e, errno, "open", p->dst, false, 0);
	new_fd = openat(p->dir_fd, p->partial,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (new_fd < 0) {
		close(old_fd);
		return encio_error_set(s->e, errno, "open the new copy of",
				       p->dst, false, 0);
	}
	ret = nested_list(old_fd, &nested, &nr);
	for (i = 0; i < nr; i++) {
		if (!ret && planned(s, en->rel, nested[i]))
			ret = carry_nested(old_fd, new_fd, nested[i]);
		free(nested[i]);
	}
	free(nested);
	close(new_fd);
	close(old_fd);
	if (ret)
		return encio_error_set(
			s->e, ret,
			"move the subvolumes nested in it into the new copy of",
			p->dst, false, 0);
	if (btrfs_util_delete_subvolume_fd(
		    p->dir_fd, p->name, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE))
		return encio_error_set(
			s->e, errno ?: EIO,
			"replace the copy (its source changed since) of",
			p->dst, false, 0);
	return 0;
}

struct sender {
	const char *path;
	const char *stream; /* the stream's name in messages: the subvolume */
	struct send_options opts;
	int fd;
	struct send_stats stats;
	struct encio_error e;
	int ret;
};

/*
 * SIGPIPE is blocked: a receiver that stopped makes the writes fail with
 * EPIPE. Signals asking to stop go to the caller's thread, which sets
 * opts.stop.
 */
static void *sender_run(void *arg)
{
	struct sender *t = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	t->ret = send_run(&t->path, 1, t->fd, t->stream, &t->opts, &t->stats,
			  &t->e);
	close(t->fd);
	return NULL;
}

static void received_progress(const struct receive_stats *rs, void *arg)
{
	struct subvols *s = arg;

	s->stats->current_bytes = rs->bytes_written - s->bytes_before;
	if (s->opts->progress)
		s->opts->progress(s->opts->arg, s->stats);
}

/*
 * An error of the receiver names a path below @from, the descriptor of
 * the directory the copy @dst is made in: named below @dst's directory.
 */
static void error_path_rebase(struct encio_error *e, const char *from,
			      const char *dst)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", dst);
	encio_error_rebase(e, from, dirname(dir));
}

/* The stream of @en (from @parent) received in p->dir_fd as p->partial. */
static int transfer(struct subvols *s, const struct subvol_entry *en,
		    const struct subvol_entry *parent, struct placement *p)
{
	struct sender t = { .path = s->src_proc, .stream = en->src };
	const struct receive_stats *rs;
	char dest[64];
	pthread_t thread;
	uint64_t encoded;
	int fds[2], ret, src_fd;
	size_t nr;

	/* sent from a descriptor: what its path names may change */
	src_fd = entry_open(s, en, en->snap != NULL);
	if (src_fd < 0)
		return src_fd;
	if (pipe2(fds, O_CLOEXEC)) {
		close(src_fd);
		return encio_error_set(s->e, errno, "make a pipe for", en->src,
				       false, 0);
	}
	snprintf(s->src_proc, sizeof(s->src_proc), "/proc/self/fd/%d", src_fd);
	nr = subvol_plan_clones(&s->plan, NULL, s->clones, s->clone_ids);
	t.opts = (struct send_options){
		.io_mode = s->opts->io_mode,
		.depth = s->opts->depth,
		.parent = subvol_source(parent),
		.parent_id = subvol_source_id(parent),
		.clones = s->clones,
		.clone_ids = s->clone_ids,
		.nr_clones = nr,
		.name = p->partial,
		.stop = s->opts->stop,
		.pass = subvol_ahead_take(s->ahead, en, subvol_source(parent),
					  s->clones, nr),
	};
	t.fd = fds[1];
	ret = pthread_create(&thread, NULL, sender_run, &t);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
		close(src_fd);
		subvol_ahead_done(s->ahead, t.opts.pass);
		return encio_error_set(s->e, ret, "start the sender of",
				       en->src, false, 0);
	}
	receive_set_read_only(s->rcv, en->read_only && !en->contains);
	rs = receive_get_stats(s->rcv);
	s->bytes_before = rs->bytes_written;
	encoded = rs->encoded_bytes;
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d", p->dir_fd);
	ret = receive_run(s->rcv, fds[0], en->src, dest, s->e);
	close(fds[0]);
	pthread_join(thread, NULL);
	close(src_fd);
	subvol_ahead_done(s->ahead, t.opts.pass);
	encio_error_rebase(&t.e, s->src_proc, subvol_source(en));
	/*
	 * The sender's error is the cause, the receiver saw a stream cut;
	 * but a closed pipe, which is the receiver's failure.
	 */
	if (t.ret && !(t.e.err == EPIPE && ret < 0)) {
		*s->e = t.e;
		ret = t.ret;
	} else if (ret > 0) {
		ret = encio_error_set(s->e, EIO, "receive", p->dst, false, 0);
	} else if (ret < 0) {
		error_path_rebase(s->e, dest, p->dst);
	}
	s->stats->bytes_written += rs->bytes_written - s->bytes_before;
	s->stats->encoded_bytes += rs->encoded_bytes - encoded;
	s->stats->current_bytes = 0;
	s->stats->clones += t.stats.clones;
	s->stats->stream_bytes += t.stats.stream_bytes;
	s->stats->ahead += t.stats.passes_reused;
	return ret;
}

/*
 * A writable subvolume's copy, marked received from the snapshot it was
 * copied from for the snapshots made of it: SRC's received UUID, or none;
 * the snapshot deleted.
 */
static int finish_writable(struct subvols *s, struct subvol_entry *en,
			   int top_fd)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	int fd, ret = 0;

	fd = en->rel[0] ? subvol_open_beneath(top_fd, en->rel,
					      O_RDONLY | O_DIRECTORY) :
			  dup(top_fd);
	if (fd < 0)
		return encio_error_set(s->e, fd < -1 ? fd : errno, "open",
				       en->rel, false, 0);
	if (subvol_uuid_set(en->info.received_uuid)) {
		memcpy(rs.uuid, en->info.received_uuid, BTRFS_UUID_SIZE);
		rs.stransid = en->info.stransid;
		rs.rtransid = en->info.rtransid;
	} else {
		/* the moment it holds: writable_copy_state() */
		rs.stransid = en->snap_ctransid;
		rs.stime.sec = en->snap_before.tv_sec;
		rs.stime.nsec = en->snap_before.tv_nsec;
		/* all of the copy in transactions before the mark's */
		if (syncfs(fd))
			ret = encio_error_set(s->e, errno, "sync", en->rel,
					      false, 0);
	}
	if (!ret && ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, &rs))
		ret = encio_error_set(s->e, errno, "set the received UUID of",
				      en->src, false, 0);
	close(fd);
	return ret ?: snapshot_delete(s, en);
}

static int finish_writables(struct subvols *s, int top_fd)
{
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < s->plan.nr; i++)
		if (s->plan.v[i].snap_made && s->plan.v[i].in_dest)
			ret = finish_writable(s, &s->plan.v[i], top_fd);
	return ret;
}

/*
 * The copy renamed to its name, over an empty directory standing for it
 * (a subvolume below a subvolume shows as one), and the times of the
 * directory it lands in put back to its source's.
 */
static int place(struct subvols *s, const struct subvol_entry *en,
		 struct placement *p)
{
	struct stat st;
	bool restore = false;
	int dir_fd;

	if (en->rel[0]) {
		dir_fd = subvol_entry_dir_open(&s->plan, en);
		restore = dir_fd >= 0 && !fstat(dir_fd, &st);
		if (dir_fd >= 0)
			close(dir_fd);
	}
	if (p->placeholder && unlinkat(p->dir_fd, p->name, AT_REMOVEDIR))
		return encio_error_set(s->e, errno, "remove the directory",
				       p->dst, false, 0);
	if (renameat2(p->dir_fd, p->partial, p->dir_fd, p->name,
		      RENAME_NOREPLACE))
		return encio_error_set(s->e, errno, "rename the copy to",
				       p->dst, false, 0);
	if (restore) {
		const struct timespec times[2] = { st.st_atim, st.st_mtim };

		if (futimens(p->dir_fd, times))
			return encio_error_set(s->e, errno, "set the times of",
					       p->dst, false, 0);
	}
	return 0;
}

static void relay_report(void *arg, const struct encio_error *e)
{
	struct subvols *s = arg;
	struct encio_error named = *e;

	if (s->fd_dir[0])
		error_path_rebase(&named, s->fd_dir, s->stats->current);
	if (s->src_name)
		encio_error_rebase(&named, s->src_proc, s->src_name);
	if (s->caller->report)
		s->caller->report(s->caller->arg, &named);
}

static void relay_probed(void *arg)
{
	struct subvols *s = arg;

	if (s->caller->probed)
		s->caller->probed(s->caller->arg);
}

static void relay_kept(void *arg, const char *staging, const char *final)
{
	struct subvols *s = arg;

	if (s->caller->kept)
		s->caller->kept(s->caller->arg, staging, final);
}

static void relay_progress(void *arg, const struct tree_stats *t,
			   const struct copy_stats *c)
{
	struct subvols *s = arg;

	(void)t;
	s->stats->current_bytes = c->logical_bytes - s->logical_before;
	if (s->opts->progress)
		s->opts->progress(s->opts->arg, s->stats);
}

/*
 * tree_copy() of @src to @dest: SRC's plain part as the caller asked, or
 * with @subvol a subvolume into the new one @dest, which is under its
 * partial name until place(), so nothing in it needs a checkpoint.
 */
static int copy_tree(struct subvols *s, const char *src, const char *dest,
		     bool subvol, struct tree_stats *ts)
{
	char *srcs[1] = { (char *)src };
	const struct copy_stats *c = &s->ctx->stats;
	uint64_t encoded = c->encoded_bytes, clones = c->clones;
	int ret;

	s->topts.no_target_dir = subvol || s->opts->no_target_dir;
	s->topts.dest_unpublished = subvol;
	s->logical_before = c->logical_bytes;
	ret = tree_copy(s->ctx, &s->topts, srcs, 1, dest, ts, s->e);
	if (!ret && ts->failed)
		ret = encio_error_set(s->e, EIO, "copy", src, false, 0);
	s->stats->bytes_written += c->logical_bytes - s->logical_before;
	s->stats->encoded_bytes += c->encoded_bytes - encoded;
	s->stats->clones += c->clones - clones;
	s->stats->current_bytes = 0;
	return ret;
}

/*
 * Marked received as a full stream of @en would have it received (btrfs
 * send's UUID and transid), so that the snapshots sent from it find it.
 */
static int mark_received(struct subvols *s, const struct subvol_entry *en,
			 int fd)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };

	/* btrfs send names a subvolume by its ctransid, received or not */
	if (en->snap) {
		memcpy(rs.uuid, en->snap_uuid, BTRFS_UUID_SIZE);
		rs.stransid = en->snap_ctransid;
	} else {
		memcpy(rs.uuid, subvol_expected_received(en), BTRFS_UUID_SIZE);
		rs.stransid = en->info.ctransid;
	}
	if (ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, &rs))
		return encio_error_set(s->e, errno, "set the received UUID of",
				       en->src, false, 0);
	return 0;
}

/*
 * A subvolume copied whole, by copy -r's engine into a new subvolume
 * (faster than a stream): synced, marked received, made read-only.
 */
static int copy_whole(struct subvols *s, const struct subvol_entry *en,
		      struct placement *p)
{
	char dest[64 + NAME_MAX];
	struct tree_stats ts;
	int fd, ret, src_fd;

	src_fd = entry_open(s, en, en->snap != NULL);
	if (src_fd < 0)
		return src_fd;
	if (btrfs_util_create_subvolume_fd(p->dir_fd, p->partial, 0, NULL,
					   NULL)) {
		close(src_fd);
		return encio_error_set(s->e, errno ?: EIO,
				       "create the subvolume", p->dst, false,
				       0);
	}
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d/%s", p->dir_fd,
		 p->partial);
	snprintf(s->fd_dir, sizeof(s->fd_dir), "/proc/self/fd/%d", p->dir_fd);
	/*
	 * Read from a descriptor: what its path names may change. The tree
	 * engine looks at its root without following it: "." in it.
	 */
	snprintf(s->src_proc, sizeof(s->src_proc), "/proc/self/fd/%d/.",
		 src_fd);
	s->src_name = subvol_source(en);
	ret = copy_tree(s, s->src_proc, dest, true, &ts);
	if (ret) {
		error_path_rebase(s->e, s->fd_dir, p->dst);
		encio_error_rebase(s->e, s->src_proc, s->src_name);
	}
	s->fd_dir[0] = '\0';
	s->src_name = NULL;
	close(src_fd);
	if (ret)
		return ret;
	fd = openat(p->dir_fd, p->partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open", p->dst, false, 0);
	ret = mark_received(s, en, fd);
	if (!ret && en->read_only && !en->contains &&
	    btrfs_util_set_subvolume_read_only_fd(fd, true))
		ret = encio_error_set(s->e, errno ?: EIO, "make read-only",
				      p->dst, false, 0);
	close(fd);
	return ret;
}

static int copy_entry(struct subvols *s, struct subvol_entry *en, int top_fd)
{
	const struct subvol_entry *parent;
	struct placement p = { 0 };
	bool replace;
	int ret;

	ret = placement_open(s, en, &p, top_fd);
	if (ret)
		return ret;
	s->stats->current = p.dst;
	s->stats->current_bytes = 0;
	ret = dest_state(s, en, &p);
	if (ret == -ESTALE) {
		ret = encio_error_set(
			s->e, ESTALE,
			"update (it and its source changed since it was copied: move it away to copy it again)",
			p.dst, false, 0);
		goto out;
	}
	if (ret < 0) {
		ret = encio_error_set(s->e, ret, "copy the subvolume to", p.dst,
				      false, 0);
		goto out;
	}
	replace = ret == 2;
	if (replace)
		ret = 0;
	if (ret == 1) {
		s->stats->skipped++;
		if (s->opts->begin)
			s->opts->begin(s->opts->arg, p.dst, SUBVOLS_SKIPPED,
				       NULL, s->stats);
		en->in_dest = true;
		ret = 0;
		goto out;
	}
	ret = partial_remove(s, &p);
	if (ret)
		goto out;
	parent = subvol_plan_nearest(&s->plan, en, NULL);
	if (s->opts->begin)
		s->opts->begin(s->opts->arg, p.dst,
			       parent ? SUBVOLS_INCREMENTAL : SUBVOLS_FULL,
			       parent ? parent->src : NULL, s->stats);
	ret = parent ? transfer(s, en, parent, &p) : copy_whole(s, en, &p);
	if (!ret && replace)
		ret = replace_copy(s, en, &p);
	if (!ret)
		ret = place(s, en, &p);
	if (ret) {
		/* nothing half-made stays: a rerun would delete it anyway */
		btrfs_util_delete_subvolume_fd(p.dir_fd, p.partial, 0);
		goto out;
	}
	en->in_dest = en->parent_ok = true;
	s->stats->copied++;
	if (parent)
		s->stats->incremental++;
	if (replace)
		s->stats->replaced++;
out:
	s->stats->current = NULL;
	close(p.dir_fd);
	return ret;
}

/*
 * The read-only subvolumes left writable for those below them, now made
 * read-only, the innermost first.
 */
static int finish_containers(struct subvols *s, int top_fd)
{
	struct subvol_entry *en;
	size_t i;
	int fd;

	for (i = s->plan.nr_order; i-- > 0;) {
		en = &s->plan.v[s->plan.order[i]];
		if (!en->contains || !en->read_only || !en->in_dest)
			continue;
		fd = en->rel[0] ? subvol_open_beneath(top_fd, en->rel,
						      O_RDONLY | O_DIRECTORY) :
				  dup(top_fd);
		if (fd < 0)
			return encio_error_set(s->e, fd, "open", en->rel, false,
					       0);
		if (btrfs_util_set_subvolume_read_only_fd(fd, true)) {
			close(fd);
			return encio_error_set(s->e, errno ?: EIO,
					       "make read-only", s->dst, false,
					       0);
		}
		close(fd);
	}
	return 0;
}

/* SRC's default subvolume, if it is one of those copied, is DEST's. */
static int keep_default(struct subvols *s, int top_fd)
{
	uint64_t id;
	size_t i;
	int fd, ret = 0;

	if (btrfs_util_get_default_subvolume(s->plan.src, &id))
		return 0;
	for (i = 0; i < s->plan.nr && s->plan.v[i].info.id != id; i++)
		;
	if (i == s->plan.nr || !s->plan.v[i].in_dest)
		return 0;
	fd = s->plan.v[i].rel[0] ? subvol_open_beneath(top_fd, s->plan.v[i].rel,
						       O_RDONLY | O_DIRECTORY) :
				   dup(top_fd);
	if (fd < 0)
		return encio_error_set(s->e, fd, "open", s->plan.v[i].rel,
				       false, 0);
	if (btrfs_util_set_default_subvolume_fd(fd, 0))
		ret = encio_error_set(s->e, errno ?: EIO,
				      "make the default subvolume", s->dst,
				      false, 0);
	close(fd);
	return ret;
}

/*
 * Whether the directory @path is the root of a mounted filesystem (its
 * parent is on another device), which cannot be replaced: it is filled in
 * place, as "@path/." is.
 */
static bool mount_root(const char *path)
{
	char parent[PATH_MAX];
	struct stat st, up;

	if (snprintf(parent, sizeof(parent), "%s/..", path) >=
	    (int)sizeof(parent))
		return false;
	return !stat(path, &st) && S_ISDIR(st.st_mode) && !stat(parent, &up) &&
	       (st.st_dev != up.st_dev || st.st_ino == up.st_ino);
}

/*
 * SRC's copy: DEST, or DEST/basename(SRC) into an existing directory;
 * DEST/. where DEST is a mount point.
 */
static int copy_root_name(struct subvols *s, const char *dest)
{
	char base[PATH_MAX];
	struct stat st;
	size_t len = tree_dest_len(dest);
	int n;

	snprintf(base, sizeof(base), "%s", s->plan.src);
	if (!s->opts->no_target_dir && !stat(dest, &st) && S_ISDIR(st.st_mode))
		n = snprintf(s->dst, sizeof(s->dst), "%.*s/%s", (int)len, dest,
			     basename(base));
	else
		n = snprintf(s->dst, sizeof(s->dst), "%.*s", (int)(len ?: 1),
			     dest);
	if (n > 0 && n < (int)sizeof(s->dst) && mount_root(s->dst))
		n = snprintf(s->dst + n, sizeof(s->dst) - n, "%s",
			     s->dst[n - 1] == '/' ? "." : "/.") +
		    n;
	return n < 0 || n >= (int)sizeof(s->dst) ?
		       encio_error_set(s->e, ENAMETOOLONG, "copy to", dest,
				       false, 0) :
		       0;
}

static bool on_btrfs(int fd)
{
	struct statfs sfs;

	return !fstatfs(fd, &sfs) && sfs.f_type == BTRFS_SUPER_MAGIC;
}

/* The directory SRC's copy goes in: subvolumes need btrfs there. */
static int dest_check(struct subvols *s)
{
	char dir[PATH_MAX];
	int fd;
	bool ok;

	snprintf(dir, sizeof(dir), "%s", s->dst);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open the directory of",
				       s->dst, false, 0);
	ok = on_btrfs(fd);
	/* changes not committed yet show in no ctransid (dest_state()) */
	if (ok && syncfs(fd)) {
		close(fd);
		return encio_error_set(s->e, errno, "sync", dir, false, 0);
	}
	close(fd);
	return ok ? 0 :
		    encio_error_set(s->e, EOPNOTSUPP,
				    "make subvolumes in (not btrfs)", dir,
				    false, 0);
}

static int subvols_begin(struct subvols *s, const char *src, const char *dest)
{
	uint64_t id = 0;
	int fd, ret;

	snprintf(s->plan.src, sizeof(s->plan.src), "%.*s",
		 (int)(tree_dest_len(src) ?: 1), src);
	fd = open(s->plan.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open", s->plan.src, false,
				       0);
	if (!on_btrfs(fd)) {
		close(fd);
		return encio_error_set(s->e, EOPNOTSUPP,
				       "copy the subvolumes of (not btrfs)",
				       s->plan.src, false, 0);
	}
	s->plan.src_is_subvol = !btrfs_util_is_subvolume_fd(fd) &&
				!btrfs_util_subvolume_id_fd(fd, &id) &&
				id != BTRFS_FS_TREE_OBJECTID;
	s->plan.e = s->e;
	/* the generations the copy order goes by, of data written already */
	if (syncfs(fd)) {
		close(fd);
		return encio_error_set(s->e, errno, "sync", s->plan.src, false,
				       0);
	}
	ret = copy_root_name(s, dest) ?:
		      dest_check(s)   ?:
					subvol_plan_build(&s->plan, fd);
	if (!ret) {
		s->clones = calloc(s->plan.nr ?: 1, sizeof(*s->clones));
		s->clone_ids = calloc(s->plan.nr ?: 1, sizeof(*s->clone_ids));
		if (!s->clones || !s->clone_ids)
			ret = encio_error_set(s->e, ENOMEM, "plan the copy of",
					      s->plan.src, false, 0);
	}
	close(fd);
	s->stats->total = s->plan.nr;
	return ret;
}

/*
 * The snapshots of the writable subvolumes, made before any copy, in the
 * copy order (one inside another is made after it, so not in it): the
 * passes ahead read them, and they give every writable subvolume one
 * moment. Those left by a run that stopped are taken again.
 */
/* A writable subvolume's ctransid, read again after the sync. */
static int src_refresh(struct subvols *s, struct subvol_entry *en)
{
	struct btrfs_util_subvolume_info info;
	int fd, ret;

	if (en->read_only)
		return 0;
	fd = entry_open(s, en, false);
	if (fd < 0)
		return fd;
	ret = subvol_util_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	close(fd);
	if (ret)
		return encio_error_set(s->e, ret, "read the subvolume", en->src,
				       false, 0);
	en->info.ctransid = info.ctransid;
	return 0;
}

static int snapshots_make(struct subvols *s)
{
	struct timespec tick;
	size_t i;
	int fd, ret = 0;

	/*
	 * Data written before a snapshot completes in the transaction after
	 * it, and moves its source's ctransid although the snapshot holds
	 * it: synced first, a source's ctransid moves only with a change
	 * the snapshot lacks (writable_copy_state()).
	 */
	/*
	 * What a snapshot made after the sync lacks changed after it began:
	 * a ctime later than this tells a change in SRC from a mere atime
	 * update. ctimes come from the coarse clock: read on it, one tick
	 * earlier.
	 */
	clock_gettime(CLOCK_REALTIME_COARSE, &s->synced_at);
	clock_getres(CLOCK_REALTIME_COARSE, &tick);
	s->synced_at.tv_nsec -= tick.tv_nsec;
	if (s->synced_at.tv_nsec < 0) {
		s->synced_at.tv_nsec += 1000 * 1000 * 1000;
		s->synced_at.tv_sec--;
	}
	fd = open(s->plan.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd))
		ret = encio_error_set(s->e, errno, "sync", s->plan.src, false,
				      0);
	for (i = 0; !ret && i < s->plan.nr_order; i++)
		ret = src_refresh(s, &s->plan.v[s->plan.order[i]]) ?:
			      snapshot_find(s, &s->plan.v[s->plan.order[i]]);
	/* the directories' times put back, on disk where they are compared */
	if (!ret && syncfs(fd))
		ret = encio_error_set(s->e, errno, "sync", s->plan.src, false,
				      0);
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * A run that failed or was stopped leaves no snapshot of its own in SRC:
 * a writable subvolume whose copy is complete has it finished (marked
 * with the moment it holds, so that a rerun takes it as complete or
 * updates it), the other snapshots are deleted. What cannot be undone is
 * reported; the failure that stopped the run stays the error.
 */
static void snapshots_drop(struct subvols *s, int top_fd)
{
	struct encio_error first = *s->e;
	struct subvol_entry *en;
	size_t i;
	int ret;

	for (i = 0; i < s->plan.nr; i++) {
		en = &s->plan.v[i];
		if (!en->snap_made)
			continue;
		ret = en->in_dest && top_fd >= 0 ?
			      finish_writable(s, en, top_fd) :
			      snapshot_delete(s, en);
		if (ret && s->caller->report)
			s->caller->report(s->caller->arg, s->e);
	}
	*s->e = first;
}

static int copy_all(struct subvols *s)
{
	struct receive_options ro = { .io_mode = s->opts->io_mode,
				      .max_errors = 1 };
	struct subvol_entry *en;
	int top_fd = -1, ret;
	size_t i;

	ret = snapshots_make(s) ?: receive_ctx_new(&s->rcv, &ro, s->e);
	if (ret) {
		snapshots_drop(s, -1);
		return ret;
	}
	receive_set_progress(s->rcv, received_progress, s);
	/* without it, each pass is made at its turn: no error */
	subvol_ahead_start(&s->ahead, &s->plan, s->opts->stop);
	for (i = 0; !ret && i <= s->plan.nr_order; i++) {
		subvol_ahead_reach(s->ahead, i);
		if (s->opts->stop && *s->opts->stop) {
			ret = encio_error_set(s->e, EINTR, "copy", s->plan.src,
					      false, 0);
			break;
		}
		en = i < s->plan.nr_order ? &s->plan.v[s->plan.order[i]] : NULL;
		/* SRC's copy first: the directories the others go in */
		if (top_fd < 0 && (!en || en->rel[0])) {
			top_fd = open(s->dst, O_RDONLY | O_DIRECTORY |
						      O_NOFOLLOW | O_CLOEXEC);
			if (top_fd < 0)
				ret = encio_error_set(s->e, errno, "open",
						      s->dst, false, 0);
		}
		if (!ret && en)
			ret = copy_entry(s, en, top_fd);
	}
	/* no pass left in flight on SRC's subvolumes while they are finished */
	subvol_ahead_end(s->ahead);
	s->ahead = NULL;
	if (!ret)
		ret = finish_containers(s, top_fd)	  ?:
			      finish_writables(s, top_fd) ?:
			      keep_default(s, top_fd);
	else
		snapshots_drop(s, top_fd);
	if (top_fd >= 0)
		close(top_fd);
	receive_ctx_free(s->rcv);
	return ret;
}

static void subvols_release(struct subvols *s)
{
	subvol_plan_release(&s->plan);
	free(s->clones);
	free(s->clone_ids);
}

int subvols_copy(struct copy_ctx *ctx, const struct tree_options *topts,
		 const struct subvols_options *opts, const char *src,
		 const char *dest, struct subvols_stats *stats,
		 struct tree_stats *tstats, struct encio_error *e)
{
	struct subvols s = {
		.ctx = ctx,
		.caller = topts,
		.opts = opts,
		.stats = stats,
		.e = e,
	};
	int ret;

	s.plan.src_fd = -1;
	s.topts = *topts;
	s.topts.skip_subvolumes = true;
	s.topts.count_first = false;
	s.topts.report = relay_report;
	s.topts.probed = relay_probed;
	s.topts.kept = relay_kept;
	s.topts.progress = relay_progress;
	s.topts.arg = &s;
	memset(stats, 0, sizeof(*stats));
	memset(tstats, 0, sizeof(*tstats));
	ret = subvols_begin(&s, src, dest);
	/* SRC's part in no subvolume below it, with the directories they go in */
	if (!ret && !s.plan.src_is_subvol)
		ret = copy_tree(&s, s.plan.src, dest, false, tstats);
	if (!ret)
		ret = copy_all(&s);
	subvols_release(&s);
	return ret;
}
