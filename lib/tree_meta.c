// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, metadata: owners, modes, times and xattrs (ACLs among them) of
 * the copies, set by fd or by name in an open directory; on a rerun, only
 * what differs from the source.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "meta.h"
#include "tree_internal.h"

#define XATTR_LIST_BYTES 65536
#define XATTR_VALUE_BYTES 65536

static bool xattr_wanted(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9) ||
	       !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/* The read-ahead of the source saw that this entry has no xattrs. */
bool meta_src_no_xattrs(struct tree *t, const struct stat *st)
{
	return meta_prefetch_has_xattrs(&t->prefetch, st) == 0;
}

/*
 * Wanted, and DEST's to remove where the source lacks it: not a label the
 * security module of DEST gives what is made there.
 */
static bool xattr_prunable(const char *name)
{
	return xattr_wanted(name) && (strncmp(name, "security.", 9) ||
				      !strcmp(name, "security.capability"));
}

/*
 * The xattr calls have no *at form before Linux 6.13: an entry named in a
 * directory is reached through that directory's /proc/self/fd link, which
 * resolves nothing above it again, with the l* calls; an O_PATH entry
 * through its own link, followed. Sets *follow; NULL for an open file.
 */
static const char *xattr_path(struct entry_at a, char *buf, size_t size,
			      bool *follow)
{
	*follow = false;
	if (!a.name)
		return NULL;
	if (a.dir == AT_FDCWD)
		return a.name;
	if (!a.name[0]) {
		*follow = true;
		snprintf(buf, size, "/proc/self/fd/%d", a.dir);
	} else {
		snprintf(buf, size, "/proc/self/fd/%d/%s", a.dir, a.name);
	}
	return buf;
}

static ssize_t at_listxattr(struct entry_at a, char *list, size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return flistxattr(a.dir, list, size);
	return follow ? listxattr(path, list, size) :
			llistxattr(path, list, size);
}

static ssize_t at_getxattr(struct entry_at a, const char *name, void *value,
			   size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fgetxattr(a.dir, name, value, size);
	return follow ? getxattr(path, name, value, size) :
			lgetxattr(path, name, value, size);
}

static int at_setxattr(struct entry_at a, const char *name, const void *value,
		       size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fsetxattr(a.dir, name, value, size, 0);
	return follow ? setxattr(path, name, value, size, 0) :
			lsetxattr(path, name, value, size, 0);
}

static int at_removexattr(struct entry_at a, const char *name)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fremovexattr(a.dir, name);
	return follow ? removexattr(path, name) : lremovexattr(path, name);
}

/* Owner, mode and times of an open file, an O_PATH one, or a name in one. */
int meta_at_chown(struct entry_at a, uid_t uid, gid_t gid)
{
	if (!a.name)
		return fchown(a.dir, uid, gid);
	return fchownat(a.dir, a.name, uid, gid,
			a.name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

int meta_at_chmod(struct entry_at a, mode_t mode)
{
	char proc[32];

	if (!a.name)
		return fchmod(a.dir, mode);
	if (a.name[0])
		return fchmodat(a.dir, a.name, mode, AT_SYMLINK_NOFOLLOW);
	/* fchmod() refuses O_PATH fds; their /proc link does not */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", a.dir);
	return chmod(proc, mode);
}

static int at_utimens(struct entry_at a, const struct timespec times[2])
{
	if (!a.name)
		return futimens(a.dir, times);
	return utimensat(a.dir, a.name, times,
			 a.name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

/* Whether DEST's directory @fd has a default ACL, which entries inherit. */
bool meta_has_default_acl(int fd)
{
	return at_getxattr((struct entry_at){ fd, "" },
			   "system.posix_acl_default", NULL, 0) >= 0;
}

static bool list_has(const char *list, ssize_t len, const char *name)
{
	const char *p;

	for (p = list; p < list + len; p += strlen(p) + 1)
		if (!strcmp(p, name))
			return true;
	return false;
}

/* DEST's xattrs that the source (its list in b->list) lacks go. */
static int prune_xattrs(struct xattr_buf *b, ssize_t src_len,
			struct entry_at dst, const char **op)
{
	ssize_t len;
	char *name;
	int removed = 0;

	*op = "list xattrs of";
	len = at_listxattr(dst, b->dst_list, XATTR_LIST_BYTES);
	if (len < 0)
		return errno == ENOTSUP ? 0 : -errno;
	*op = "remove xattrs of";
	for (name = b->dst_list; name < b->dst_list + len;
	     name += strlen(name) + 1) {
		if (!xattr_prunable(name) || list_has(b->list, src_len, name))
			continue;
		if (at_removexattr(dst, name) && errno != ENODATA)
			return -errno;
		removed++;
	}
	return removed;
}

/*
 * Copy the wanted xattrs raw; none to copy where the source is known to
 * have none (META_NO_XATTRS). @how: META_* flags. Returns the number of
 * xattrs set or removed, or -errno with *op set.
 */
static int copy_xattrs(struct xattr_buf *b, struct entry_at src,
		       struct entry_at dst, unsigned int how, const char **op)
{
	ssize_t len = 0, vlen, dlen;
	int changed = 0, ret;
	char *name;

	*op = "list xattrs of";
	b->saw_caps = false;
	if (!(how & META_NO_XATTRS)) {
		len = at_listxattr(src, b->list, XATTR_LIST_BYTES);
		if (len < 0 && errno != ENOTSUP)
			return -errno;
	}
	if (len < 0)
		len = 0;
	for (name = b->list; name < b->list + len; name += strlen(name) + 1) {
		if (!xattr_wanted(name))
			continue;
		if (!strcmp(name, "security.capability"))
			b->saw_caps = true;
		*op = "read xattrs of";
		vlen = at_getxattr(src, name, b->value, XATTR_VALUE_BYTES);
		if (vlen < 0 && errno == ENODATA)
			continue;
		if (vlen < 0)
			return -errno;
		if (how & META_COMPARE) {
			dlen = at_getxattr(dst, name, b->dst_value,
					   XATTR_VALUE_BYTES);
			if (dlen == vlen &&
			    !memcmp(b->dst_value, b->value, vlen))
				continue;
		}
		*op = "set xattrs of";
		if (at_setxattr(dst, name, b->value, vlen))
			return -errno;
		changed++;
	}
	if (!(how & META_PRUNE))
		return changed;
	ret = prune_xattrs(b, len, dst, op);
	return ret < 0 ? ret : changed + ret;
}

/* The process umask and ids, read once before the threads start. */
static mode_t t_umask;
static uid_t t_euid;
static gid_t t_egid;

void meta_ids_init(void)
{
	t_umask = umask(0);
	umask(t_umask);
	t_euid = geteuid();
	t_egid = getegid();
}

/* What we make has our ids (in a directory without set-gid). */
bool meta_ids_ours(const struct stat *st)
{
	return st->st_uid == t_euid && st->st_gid == t_egid;
}

/*
 * Owner first (chown clears set-id bits), xattrs, mode; by fd. @made_ours:
 * the file was just made by us in a directory without set-gid, so it is
 * ours already, and with the mode asked for where no default ACL masked
 * it (which also gave it ACLs the source may lack).
 */
int meta_file_owner_mode(struct xattr_buf *b, struct tree_file *f,
			 bool made_ours, const char **op)
{
	struct entry_at src = { f->job.src_fd, NULL };
	struct entry_at dst = { f->job.dst_fd, NULL };
	int ret;

	*op = "set owner of";
	if (!(made_ours && meta_ids_ours(&f->st)) &&
	    fchown(f->job.dst_fd, f->st.st_uid, f->st.st_gid) && errno != EPERM)
		return -errno;
	ret = copy_xattrs(b, src, dst,
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
int meta_file_metadata(struct tree *t, struct tree_file *f, const char **op)
{
	struct timespec times[2] = { f->st.st_atim, f->st.st_mtim };
	int ret;

	if (f->redo_metadata) {
		ret = meta_file_owner_mode(&t->ring_xattr, f, false, op);
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
int meta_file_flags_early(struct tree *t, struct tree_file *f, int dst_fd,
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
 * Walker: append-only and immutable wait for the end (entry_dirs_finish()),
 * once the file is in place and its hard links are made: remember it.
 */
int meta_file_flags_late(struct tree *t, struct tree_file *f, int dst_fd,
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
int meta_flags_unlock(struct tree *t, int dst_fd, const char **op)
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
void meta_flags_unlock_at(struct tree *t, struct entry_at at)
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
			meta_flags_unlock(t, rfd, &op);
			close(rfd);
		}
	}
	close(fd);
}

/*
 * Owner, xattrs, mode and times of @dst (see struct entry_at: never
 * following a symlink) from @st and @src's xattrs. @how: META_* flags.
 * @cur: what @dst has now, where it exists already (a rerun): then only
 * what differs is set, and the number of changes returned; else 0 or
 * -errno.
 */
int meta_set_metadata(struct xattr_buf *b, struct entry_at src,
		      struct entry_at dst, const struct stat *st,
		      const struct stat *cur, unsigned int how, const char **op)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	int changed = 0, ret;

	*op = "set owner of";
	if (!(how & META_OWNED) &&
	    (!cur || cur->st_uid != st->st_uid || cur->st_gid != st->st_gid)) {
		if (!meta_at_chown(dst, st->st_uid, st->st_gid))
			changed += !!cur;
		else if (errno != EPERM)
			return -errno;
	}
	ret = copy_xattrs(b, src, dst, how, op);
	if (ret < 0)
		return ret;
	changed += ret;
	*op = "set mode of";
	if (!S_ISLNK(st->st_mode) &&
	    (!cur || changed ||
	     (cur->st_mode & 07777) != (st->st_mode & 07777))) {
		if (meta_at_chmod(dst, st->st_mode & 07777))
			return -errno;
		changed += cur &&
			   (cur->st_mode & 07777) != (st->st_mode & 07777);
	}
	if (cur && !changed)
		return 0;
	*op = "set times of";
	if (at_utimens(dst, times))
		return -errno;
	return cur ? changed : 0;
}

int xattr_buf_init(struct xattr_buf *b)
{
	b->list = malloc(XATTR_LIST_BYTES);
	b->value = malloc(XATTR_VALUE_BYTES);
	b->dst_list = malloc(XATTR_LIST_BYTES);
	b->dst_value = malloc(XATTR_VALUE_BYTES);
	return b->list && b->value && b->dst_list && b->dst_value ? 0 : -ENOMEM;
}

void xattr_buf_release(struct xattr_buf *b)
{
	free(b->list);
	free(b->value);
	free(b->dst_list);
	free(b->dst_value);
}

int meta_copy_file(int src_fd, int dst_fd, const struct stat *st,
		   const char **op)
{
	struct entry_at src = { src_fd, NULL }, dst = { dst_fd, NULL };
	struct xattr_buf b;
	int ret;

	*op = "set metadata of";
	ret = xattr_buf_init(&b) ?:
		      meta_set_metadata(&b, src, dst, st, NULL, META_PRUNE, op);
	xattr_buf_release(&b);
	return ret;
}
