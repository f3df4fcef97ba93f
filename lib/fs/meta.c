// SPDX-License-Identifier: GPL-2.0
/*
 * Metadata of an entry, by descriptor: owners, modes, times and xattrs
 * (ACLs and file capabilities among them), set on an open file or on an
 * entry named in an open directory, and on a rerun only what differs from
 * the source. The single-file copy and copy -r (lib/tree/tree_meta.c, which
 * adds what a tree's walk knows) both set theirs here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/meta.h"

#define XATTR_LIST_BYTES 65536
#define XATTR_VALUE_BYTES 65536

static bool xattr_wanted(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9) ||
	       !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/*
 * Wanted, and DEST's to remove where the source lacks it: not a label the
 * security module of DEST gives what is made there, nor a mark of encio's
 * (trusted.encio.*: a partial's source, a received subvolume's proof),
 * which goes where its owner says (a partial's only once it is marked
 * received: a run stopped in between would leave it unproved).
 */
static bool xattr_prunable(const char *name)
{
	return xattr_wanted(name) &&
	       (strncmp(name, "security.", 9) ||
		!strcmp(name, "security.capability")) &&
	       strncmp(name, "trusted.encio.", 14);
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
int meta_copy_xattrs(struct xattr_buf *b, struct entry_at src,
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
	ret = meta_copy_xattrs(b, src, dst, how, op);
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
