// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, metadata: what the walk knows of an entry (the read-ahead saw
 * no xattrs, a file's directory passed on an ACL, the process's ids and
 * umask) and the inode flags kept, on top of lib/fs/meta.c's primitives.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/meta.h"
#include "tree/tree_internal.h"

/* The read-ahead of the source saw that this entry has no xattrs. */
bool tree_meta_src_no_xattrs(struct tree *t, const struct stat *st)
{
	return meta_prefetch_has_xattrs(&t->prefetch, st) == 0;
}

/* The process umask and ids, read once before the threads start. */
static mode_t t_umask;
static uid_t t_euid;
static gid_t t_egid;

void tree_meta_ids_init(void)
{
	t_umask = umask(0);
	umask(t_umask);
	t_euid = geteuid();
	t_egid = getegid();
}

/* What we make has our ids (in a directory without set-gid). */
bool tree_meta_ids_ours(const struct stat *st)
{
	return st->st_uid == t_euid && st->st_gid == t_egid;
}

/*
 * Owner first (chown clears set-id bits), xattrs, mode; by fd. @made_ours:
 * the file was just made by us in a directory without set-gid, so it is
 * ours already, and with the mode asked for where no default ACL masked
 * it (which also gave it ACLs the source may lack).
 */
int tree_meta_file_owner_mode(struct xattr_buf *b, struct tree_file *f,
			      bool made_ours, const char **op)
{
	struct entry_at src = { f->job.src_fd, NULL };
	struct entry_at dst = { f->job.dst_fd, NULL };
	int ret;

	*op = "set owner of";
	if (!(made_ours && tree_meta_ids_ours(&f->st)) &&
	    fchown(f->job.dst_fd, f->st.st_uid, f->st.st_gid) && errno != EPERM)
		return -errno;
	ret = meta_copy_xattrs(b, src, dst,
			       (f->no_xattrs ? META_NO_XATTRS : 0) |
				       (f->acl_inherited ? META_PRUNE : 0),
			       op);
	if (ret < 0)
		return ret;
	*op = "set mode of";
	if ((!made_ours || f->acl_inherited ||
	     ((f->st.st_mode & 0777) & ~t_umask) != (f->st.st_mode & 07777)) &&
	    fchmod(f->job.dst_fd, f->st.st_mode & 07777))
		return -errno;
	return 0;
}

/*
 * After the data: the times (writes set the mtime), and owner, xattrs and
 * mode again only where the writes cleared something (set-id bits, file
 * capabilities); the walker set them when it made the file, off the data
 * path.
 */
int tree_meta_file_metadata(struct tree *t, struct tree_file *f,
			    const char **op)
{
	struct timespec times[2] = { f->st.st_atim, f->st.st_mtim };
	int ret;

	if (f->redo_metadata) {
		ret = tree_meta_file_owner_mode(&t->ring_xattr, f, false, op);
		if (ret)
			return ret;
	}
	*op = "set times of";
	if (futimens(f->job.dst_fd, times))
		return -errno;
	if (!(f->src_flags & FS_SYNC_FL))
		return 0;
	*op = "set inode flags of";
	ret = inode_flags_set(f->job.dst_fd, f->src_flags, FS_SYNC_FL,
			      &t->ctx->flags_refused);
	return ret < 0 ? ret : 0;
}

/*
 * Walker, on the file just made, before its data: nocow and compression
 * (flags, then the btrfs.compression property) decide how it is stored;
 * the other flags but sync, append-only and immutable with them. A file
 * made from the source's items (no source fd) has the flags of its inode
 * item and no xattrs: nothing its directory passed on stays.
 */
int tree_meta_file_flags_early(struct tree *t, struct tree_file *f, int dst_fd,
			       const char **op)
{
	struct inode_flags_refused *r = &t->ctx->flags_refused;
	int ret;

	*op = "set inode flags of";
	if (f->job.src_fd < 0) {
		ret = inode_flags_set(dst_fd, f->src_flags & ~FS_SYNC_FL,
				      INODE_FLAGS_KEPT & ~INODE_FLAGS_LATE, r);
		if (ret < 0)
			return ret;
		*op = "remove btrfs.compression of";
		if (fremovexattr(dst_fd, "btrfs.compression") &&
		    errno != ENODATA)
			return -errno;
		return 0;
	}
	f->src_flags = inode_flags_get(f->job.src_fd);
	ret = inode_flags_set(dst_fd, f->src_flags & ~FS_SYNC_FL,
			      INODE_FLAGS_KEPT & ~INODE_FLAGS_LATE, r);
	if (ret < 0)
		return ret;
	*op = "set btrfs.compression of";
	ret = inode_prop_copy(f->job.src_fd, dst_fd, r);
	return ret < 0 ? ret : 0;
}

/*
 * Walker: append-only and immutable wait for the end (tree_entry_dirs_finish()),
 * once the file is in place and its hard links are made: remember it.
 */
int tree_meta_file_flags_late(struct tree *t, struct tree_file *f, int dst_fd,
			      const char **op)
{
	struct tree_late_flags *l;
	struct stat st;

	if (!(f->src_flags & INODE_FLAGS_LATE))
		return 0;
	*op = "remember inode flags of";
	if (fstat(dst_fd, &st))
		return -errno;
	l = vec_grow(t->late_flags, t->nr_late_flags, &t->cap_late_flags,
		     sizeof(*l));
	if (!l)
		return -ENOMEM;
	t->late_flags = l;
	l = &t->late_flags[t->nr_late_flags];
	l->dst = strdup(f->dst);
	if (!l->dst)
		return -ENOMEM;
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->flags = f->src_flags & INODE_FLAGS_LATE;
	t->nr_late_flags++;
	return 0;
}

/*
 * An entry DEST has already (a rerun): append-only or immutable would
 * refuse its metadata, its entries, its replacement; they come back last.
 * @dst_fd: open, not O_PATH.
 */
int tree_meta_flags_unlock(struct tree *t, int dst_fd, const char **op)
{
	int ret;

	if (!(inode_flags_get(dst_fd) & INODE_FLAGS_LATE))
		return 0;
	*op = "clear append-only and immutable of";
	ret = inode_flags_set(dst_fd, 0, INODE_FLAGS_LATE,
			      &t->ctx->flags_refused);
	return ret < 0 ? ret : 0;
}

/*
 * DEST's regular file at @at, of an earlier run, about to be replaced (a
 * rename over it): not if append-only or immutable. Where that fails, the
 * replacement reports it.
 */
void tree_meta_flags_unlock_at(struct tree *t, struct entry_at at)
{
	struct stat st;
	const char *op;
	int fd, rfd;

	fd = openat(at.dir, at.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode)) {
		rfd = inode_reopen(fd);
		if (rfd >= 0) {
			tree_meta_flags_unlock(t, rfd, &op);
			close(rfd);
		}
	}
	close(fd);
}
