// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes, SRC's side: each writable subvolume is copied
 * from a read-only snapshot of it, made beside it by descriptors and
 * checked before use; its finished copy is marked with the moment it
 * holds and the snapshot kept as its base, the parent of the next run's
 * difference; a rerun tells whether it changed since that moment.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "fs/inode_flags.h"
#include "fs/received_mark.h"
#include "base/kernel.h"

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
int subvols_changed_since(int fd, uint64_t transid,
			  const struct timespec *since,
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
 * Whether @en changed in SRC since the moment its copy holds, or only its
 * ctransid moved (atimes): an inode changed after the snapshot was begun
 * (@stime; 0 where a stopped run made the snapshot: anything in a leaf
 * written since counts), in a leaf written after transaction @transid.
 */
int subvols_src_changed(const struct subvols *s, const struct subvol_entry *en,
			uint64_t transid, const struct timespec *stime)
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
	ret = subvols_changed_since(fd, transid, stime, &h);
	close(fd);
	return ret;
}

bool subvols_on_btrfs(int fd)
{
	struct statfs sfs;

	return !fstatfs(fd, &sfs) && sfs.f_type == BTRFS_SUPER_MAGIC;
}

int subvols_src_open(struct subvols *s, const char *src, const char *not_btrfs)
{
	uint64_t id = 0;
	int fd;

	snprintf(s->plan.src, sizeof(s->plan.src), "%.*s",
		 (int)(path_trimmed_len(src) ?: 1), src);
	fd = open(s->plan.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open", s->plan.src, false,
				       0);
	if (!subvols_on_btrfs(fd)) {
		close(fd);
		return encio_error_set(s->e, EOPNOTSUPP, not_btrfs, s->plan.src,
				       false, 0);
	}
	s->plan.src_is_subvol = !btrfs_util_is_subvolume_fd(fd) &&
				!btrfs_util_subvolume_id_fd(fd, &id) &&
				id != BTRFS_FS_TREE_OBJECTID;
	s->plan.e = s->e;
	/* the generations the order goes by, of data written already */
	if (syncfs(fd)) {
		close(fd);
		return encio_error_set(s->e, errno, "sync", s->plan.src, false,
				       0);
	}
	return fd;
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
int subvols_entry_open(struct subvols *s, const struct subvol_entry *en,
		       bool snap)
{
	int fd = subvol_entry_open(&s->plan, en, snap);

	if (fd == -ESTALE)
		return encio_error_set(
			s->e, ESTALE,
			snap ? "copy (the snapshot is another since it was made)" :
			       "copy (another subvolume is at its path since it was listed)",
			snap ? en->snap.path : en->src, false, 0);
	if (fd < 0)
		return encio_error_set(s->e, fd, "open",
				       snap ? en->snap.path : en->src, false,
				       0);
	return fd;
}

/*
 * The snapshot of @en at @name in @dir_fd (@path in messages), made by
 * this run or an earlier one: taken only if it is a read-only snapshot of
 * @en, so that a subvolume planted at encio's name is never taken for a
 * copy or a parent; the kernel lets only @en's owner or root snapshot it.
 * With @owner, its root has @en's owner too: the snapshot just made, which
 * has it unless another took its name. One an earlier run made may have
 * @en's owner before a chown; what is used of it is pinned by its
 * ctransid (a base) or its UUID (a copy made from it). -ENOENT: none.
 */
static int snapshot_check(struct subvols *s, const struct subvol_entry *en,
			  int dir_fd, int src_fd, const char *name,
			  const char *path, bool owner,
			  struct btrfs_util_subvolume_info *info)
{
	struct stat st, src_st;
	int fd, ret = 0;

	fd = openat(dir_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT :
					 encio_error_set(s->e, errno, "look at",
							 path, false, 0);
	if (fstat(fd, &st) || fstat(src_fd, &src_st))
		ret = -errno;
	else if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		ret = -EEXIST;
	else
		ret = btrfsutil_errno(
			btrfs_util_subvolume_info_fd(fd, 0, info));
	close(fd);
	if (ret == -EEXIST ||
	    (!ret && !(info->flags & BTRFS_ROOT_SUBVOL_RDONLY)))
		return encio_error_set(s->e, EEXIST,
				       "use (not a read-only snapshot)", path,
				       false, 0);
	if (ret)
		return encio_error_set(s->e, ret, "look at", path, false, 0);
	if (memcmp(info->parent_uuid, en->info.uuid, BTRFS_UUID_SIZE) ||
	    (owner &&
	     (st.st_uid != src_st.st_uid || st.st_gid != src_st.st_gid)))
		return encio_error_set(
			s->e, EEXIST,
			"use (not a snapshot of the subvolume beside it, or not its owner's)",
			path, false, 0);
	return 0;
}

/* @snap of @en held, if snapshot_check() finds it is one. */
static int snapshot_hold(struct subvols *s, const struct subvol_entry *en,
			 int dir_fd, int src_fd, bool owner,
			 struct subvol_snapshot *snap)
{
	struct btrfs_util_subvolume_info info;
	int ret = snapshot_check(s, en, dir_fd, src_fd, snap->name, snap->path,
				 owner, &info);

	if (ret)
		return ret;
	memcpy(snap->uuid, info.uuid, BTRFS_UUID_SIZE);
	snap->id = info.id;
	snap->ctransid = info.ctransid;
	snap->held = true;
	return 0;
}

/* @snap of @en deleted by its id: whatever its name holds by now. */
static int snapshot_delete(struct subvols *s, struct subvol_entry *en,
			   struct subvol_snapshot *snap, const char *what)
{
	struct timespec times[2];
	int dir_fd, ret = 0;

	dir_fd = snapshot_dir_open(s, en, times);
	if (dir_fd < 0)
		return dir_fd;
	ret = subvols_delete_id(dir_fd, snap->id);
	if (ret)
		ret = encio_error_set(s->e, -ret, what, snap->path, false, 0);
	else
		snap->held = false;
	snapshot_dir_close(dir_fd, times);
	return ret;
}

static int subvols_snapshot_delete(struct subvols *s, struct subvol_entry *en)
{
	return snapshot_delete(s, en, &en->snap, "delete the snapshot");
}

/*
 * The snapshot @en's finished copy was made from, kept as the base of the
 * next run's difference in place of the one before (deleted by its id);
 * or deleted where no base can serve: @en has a received UUID, so its
 * copy records no moment of its own (writable_copy_state()). The base is
 * checked again before any use, so the rename by name does no harm if
 * another took the name meanwhile; found another, it is an error.
 */
int subvols_snapshot_keep(struct subvols *s, struct subvol_entry *en)
{
	struct btrfs_util_subvolume_info info;
	struct timespec times[2];
	int dir_fd, fd, ret = 0;

	if (subvol_uuid_set(en->info.received_uuid))
		return subvols_snapshot_delete(s, en);
	dir_fd = snapshot_dir_open(s, en, times);
	if (dir_fd < 0)
		return dir_fd;
	if (en->base.held && (ret = subvols_delete_id(dir_fd, en->base.id)))
		ret = encio_error_set(s->e, -ret, "delete the earlier base",
				      en->base.path, false, 0);
	else if ((ret = inode_flags_lifted_rename(dir_fd, en->snap.name, dir_fd,
						  en->base.name)))
		ret = encio_error_set(
			s->e, -ret, "keep the snapshot as the next run's base",
			en->base.path, false, 0);
	en->base.held = false;
	if (!ret) {
		fd = openat(dir_fd, en->base.name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || btrfs_util_subvolume_info_fd(fd, 0, &info) ||
		    info.id != en->snap.id)
			ret = encio_error_set(
				s->e, ESTALE,
				"keep the snapshot as the next run's base (another took its name)",
				en->base.path, false, 0);
		if (fd >= 0)
			close(fd);
	}
	if (!ret) {
		memcpy(en->base.uuid, en->snap.uuid, BTRFS_UUID_SIZE);
		en->base.id = en->snap.id;
		en->base.ctransid = en->snap.ctransid;
		en->base.held = true;
		en->snap.held = false;
	}
	snapshot_dir_close(dir_fd, times);
	return ret;
}

/*
 * The subvolume at @en's path in DEST (below @top_fd), opened, its info in
 * @info: the fd, -ENOENT where DEST has none there, or -errno.
 */
static int dest_copy_open(const struct subvol_entry *en, int top_fd,
			  struct btrfs_util_subvolume_info *info)
{
	struct stat st;
	int fd, ret;

	fd = en->rel[0] ? open_beneath(top_fd, en->rel,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
			  fcntl(top_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return fd == -ENOTDIR ? -ENOENT : fd;
	if (fstat(fd, &st))
		ret = -errno;
	else if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		ret = -ENOENT;
	else
		ret = btrfsutil_errno(
			btrfs_util_subvolume_info_fd(fd, 0, info));
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * Whether writable @en's copy in DEST (below @top_fd) was received from
 * its snapshot (en->snap.uuid) and not finished: 1, 0 or -errno.
 */
static int dest_made_from(const struct subvol_entry *en, int top_fd)
{
	struct btrfs_util_subvolume_info info;
	int fd = dest_copy_open(en, top_fd, &info);

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	close(fd);
	return !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY) &&
	       !memcmp(info.received_uuid, en->snap.uuid, BTRFS_UUID_SIZE);
}

/*
 * Writable @en's copy in DEST (below @top_fd), opened where it holds its
 * base as finish_writable() marked it (no received UUID of its own: one of
 * SRC's would give no moment) and nobody changed it since (encio's mark,
 * its ctransid not past it): the subvolume *@id, or any where *@id is 0,
 * then set to the one found. The fd, -ESTALE where it is not, or -errno.
 */
int subvols_dest_base_open(const struct subvol_entry *en, int top_fd,
			   uint64_t *id)
{
	struct btrfs_util_subvolume_info info;
	int fd = dest_copy_open(en, top_fd, &info);

	if (fd < 0)
		return fd == -ENOENT ? -ESTALE : fd;
	if (!en->base.held || subvol_uuid_set(en->info.received_uuid) ||
	    (*id && info.id != *id) || info.flags & BTRFS_ROOT_SUBVOL_RDONLY ||
	    subvol_uuid_set(info.received_uuid) ||
	    info.stransid != en->base.ctransid ||
	    !received_mark_own(fd, &info)) {
		close(fd);
		return -ESTALE;
	}
	*id = info.id;
	return fd;
}

/*
 * Whether writable @en's copy in DEST holds its base: then the base
 * stands for it as a clone source of the differences of its family sent
 * before its turn (subvol_plan_base_clones()). A run stopped after its
 * copy sends the snapshots it planned after it before it, from an older
 * relative (random seed 168: a snapshot as the live subvolume is sent as
 * the difference from the one before): they clone what its copy holds.
 */
static void dest_base_note(struct subvol_entry *en, int top_fd)
{
	int fd;

	en->base_copy_id = 0;
	fd = subvols_dest_base_open(en, top_fd, &en->base_copy_id);
	en->base_in_dest = fd >= 0;
	if (fd >= 0)
		close(fd);
}

/*
 * A writable subvolume's copy, marked received from the snapshot it was
 * copied from for the snapshots made of it (SRC's received UUID, or
 * none) and with the moment it holds (writable_copy_state() in
 * copy_subvols_dest.c), its snapshot kept as its base.
 */
static int finish_writable(struct subvols *s, struct subvol_entry *en,
			   int top_fd)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	int fd, ret = 0;

	fd = en->rel[0] ? open_beneath(top_fd, en->rel,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
			  dup(top_fd);
	if (fd < 0)
		return encio_error_set(s->e, fd < -1 ? fd : errno, "open",
				       en->rel, false, 0);
	if (subvol_uuid_set(en->info.received_uuid)) {
		memcpy(rs.uuid, en->info.received_uuid, BTRFS_UUID_SIZE);
		rs.stransid = en->info.stransid;
	} else {
		rs.stransid = en->snap.ctransid;
	}
	/* the moment it holds: writable_copy_state() */
	rs.stime.sec = en->snap_before.tv_sec;
	rs.stime.nsec = en->snap_before.tv_nsec;
	/* all of the copy in transactions before the mark's */
	if (syncfs(fd))
		ret = encio_error_set(s->e, errno, "sync", en->rel, false, 0);
	if (!ret && (ret = received_mark_set(fd, &rs)))
		ret = encio_error_set(s->e, ret, "set the received UUID of",
				      en->src, false, 0);
	close(fd);
	return ret ?: subvols_snapshot_keep(s, en);
}

/*
 * A snapshot an earlier run left at the snapshot name: that run stopped.
 * If @en's copy in DEST (@top_fd, -1 where there is none yet) was made
 * from it, the copy is complete and is finished now, the snapshot kept as
 * its base; where a copy in flight from it is there to go on with, it is
 * kept for that copy (which then holds the stopped run's moment); else it
 * is deleted, and a new one made, so that the copy holds this run's.
 */
static int snapshot_left(struct subvols *s, struct subvol_entry *en, int dir_fd,
			 int src_fd, int top_fd)
{
	int ret = snapshot_hold(s, en, dir_fd, src_fd, false, &en->snap);

	if (ret)
		return ret == -ENOENT ? 0 : ret;
	if (top_fd >= 0 && dest_made_from(en, top_fd) > 0)
		return finish_writable(s, en, top_fd);
	if (subvols_partial_of_left(s, en, top_fd))
		return 0;
	en->snap.held = false;
	ret = subvols_delete_id(dir_fd, en->snap.id);
	if (ret)
		return encio_error_set(
			s->e, -ret,
			"delete the snapshot left by a run that stopped",
			en->snap.path, false, 0);
	return 0;
}

struct snapshot_arg {
	int src_fd;
	const char *name;
};

static int snapshot_create_op(int dir_fd, void *arg)
{
	const struct snapshot_arg *a = arg;

	return btrfs_util_create_snapshot_fd2(
		       a->src_fd, dir_fd, a->name,
		       BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY, NULL, NULL) ?
		       -(errno ?: EIO) :
		       0;
}

/*
 * The read-only snapshot of @src_fd as @name in @dir_fd, the directory of
 * the writable subvolume: its append-only or immutable lifted for that.
 */
static int snapshot_create(int src_fd, int dir_fd, const char *name)
{
	struct snapshot_arg a = { src_fd, name };

	return inode_flags_lifted_for(dir_fd, snapshot_create_op, &a);
}

/*
 * The read-only snapshot a writable subvolume is copied from, made now
 * by descriptors (BTRFS_IOC_SNAP_CREATE_V2), of the subvolume listed, in
 * the directory it is in; and the base an earlier run kept, the parent of
 * the difference if the copy in DEST holds it.
 */
static int snapshot_find(struct subvols *s, struct subvol_entry *en, int top_fd)
{
	struct timespec times[2];
	int dir_fd, src_fd, ret;

	if (!en->snap.path)
		return 0;
	src_fd = subvols_entry_open(s, en, false);
	if (src_fd < 0)
		return src_fd;
	dir_fd = snapshot_dir_open(s, en, times);
	if (dir_fd < 0) {
		close(src_fd);
		return dir_fd;
	}
	/*
	 * The base first: a copy finished from a snapshot left replaces it
	 * (subvols_snapshot_keep()), by its id.
	 */
	ret = snapshot_hold(s, en, dir_fd, src_fd, false, &en->base);
	ret = ret == -ENOENT ? 0 : ret;
	if (!ret)
		ret = snapshot_left(s, en, dir_fd, src_fd, top_fd);
	if (!ret && top_fd >= 0)
		dest_base_note(en, top_fd);
	/* kept by snapshot_left() for the copy in flight from it */
	if (!ret && !en->snap.held) {
		en->snap_before = s->synced_at;
		ret = snapshot_create(src_fd, dir_fd, en->snap.name);
		if (ret)
			ret = encio_error_set(s->e, -ret, "snapshot",
					      en->snap.path, false, 0);
		else
			ret = snapshot_hold(s, en, dir_fd, src_fd, true,
					    &en->snap);
		if (ret == -ENOENT)
			ret = encio_error_set(s->e, ENOENT, "snapshot",
					      en->snap.path, false, 0);
	}
	snapshot_dir_close(dir_fd, times);
	close(src_fd);
	return ret;
}

/* After the last run of a move (--final): no base is kept. */
int subvols_bases_drop(struct subvols *s)
{
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < s->plan.nr; i++)
		if (s->plan.v[i].base.held)
			ret = snapshot_delete(s, &s->plan.v[i],
					      &s->plan.v[i].base,
					      "delete the base");
	return ret;
}

/* A writable subvolume's ctransid, read again after the sync. */
static int src_refresh(struct subvols *s, struct subvol_entry *en)
{
	struct btrfs_util_subvolume_info info;
	int fd, ret;

	if (en->read_only)
		return 0;
	fd = subvols_entry_open(s, en, false);
	if (fd < 0)
		return fd;
	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	close(fd);
	if (ret)
		return encio_error_set(s->e, ret, "read the subvolume", en->src,
				       false, 0);
	en->info.ctransid = info.ctransid;
	return 0;
}

/*
 * The snapshots of the writable subvolumes, made before any copy, in the
 * copy order (one inside another is made after it, so not in it): the
 * passes ahead read them, and they give every writable subvolume one
 * moment. Those left by a run that stopped are settled first
 * (snapshot_left()).
 */
int subvols_snapshots_make(struct subvols *s)
{
	struct timespec tick;
	size_t i;
	int fd, top_fd, ret = 0;

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
	/* where a stopped run's copies are found: none if it made no copy */
	top_fd = open(s->dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (i = 0; !ret && i < s->plan.nr_order; i++)
		ret = src_refresh(s, &s->plan.v[s->plan.order[i]]) ?:
			      snapshot_find(s, &s->plan.v[s->plan.order[i]],
					    top_fd);
	if (top_fd >= 0)
		close(top_fd);
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
void subvols_snapshots_drop(struct subvols *s, int top_fd)
{
	struct encio_error first = *s->e;
	struct subvol_entry *en;
	size_t i;
	int ret;

	for (i = 0; i < s->plan.nr; i++) {
		en = &s->plan.v[i];
		/* kept with the copy in flight from it, for the rerun */
		if (!en->snap.held || en->partial_kept)
			continue;
		ret = en->in_dest && top_fd >= 0 ?
			      finish_writable(s, en, top_fd) :
			      subvols_snapshot_delete(s, en);
		if (ret && s->caller->report)
			s->caller->report(s->caller->arg, s->e);
	}
	*s->e = first;
}

int subvols_finish_writables(struct subvols *s, int top_fd)
{
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < s->plan.nr; i++)
		if (s->plan.v[i].snap.held && s->plan.v[i].in_dest)
			ret = finish_writable(s, &s->plan.v[i], top_fd);
	return ret;
}
