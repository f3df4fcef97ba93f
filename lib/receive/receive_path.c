// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the paths of the stream, beneath the subvolume being received.
 *
 * Confinement: a stream is untrusted. Every path is relative to the
 * subvolume being received; absolute paths and ".." components are refused
 * before anything is touched. Parent directories are opened with openat2()
 * beneath the subvolume's directory, following no symlink and crossing no
 * mount, and the last component is handled with *at() calls that never
 * follow it. Files are written only after an O_PATH open showed a regular
 * file, so no write goes through a symlink, a device or a fifo.
 *
 * The parent directories and the file written last are kept open by their
 * path in the stream, and a node the stream made is created when the next
 * command needs the tree as the stream says.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "base/invariant.h"
#include "receive/receive_internal.h"

/* @path is @top or beneath it, as stream paths go. */
bool rcv_path_within(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

void rcv_dir_cache_clear(struct receive_ctx *ctx)
{
	int i;

	ENCIO_ASSERT(!ctx->last_dir);
	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		close_fd(&ctx->dirs[i].fd);
}

/* What @path names may have changed: so may what names beneath it. */
void rcv_dir_cache_forget(struct receive_ctx *ctx, const char *path)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		if (ctx->dirs[i].fd >= 0 &&
		    rcv_path_within(ctx->dirs[i].path, path))
			close_fd(&ctx->dirs[i].fd);
}

/* @path's mode may change: a cached directory's set-gid bit is unknown. */
void rcv_dir_cache_setgid_forget(struct receive_ctx *ctx, const char *path)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		if (!strcmp(ctx->dirs[i].path, path))
			ctx->dirs[i].setgid_known = false;
}

void rcv_dir_cache_inherits_forget(struct receive_ctx *ctx)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		ctx->dirs[i].inherits_known = false;
}

/* Paths. */

static int resolve_failed(struct receive_ctx *ctx, int err)
{
	if (err == -ELOOP)
		return fail(ctx, err, "the path passes through a symlink");
	if (err == -EXDEV)
		return fail(ctx, err, "the path leaves the subvolume");
	return err;
}

/* Refuse what could lead out of the subvolume, before touching anything. */
static int check_path(struct receive_ctx *ctx, const char *path)
{
	const char *p = path;
	size_t n;

	if (ctx->subvol_fd < 0)
		return fail(ctx, EINVAL,
			    "no subvolume or snapshot command first");
	if (path[0] == '/')
		return fail(ctx, EINVAL, "absolute path");
	while (*p) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return fail(ctx, EINVAL,
				    "the path has a '..' component");
		p += n;
		p += strspn(p, "/");
	}
	return 0;
}

/*
 * A stream path as the kernel resolves it, in @buf (PATH_MAX): empty and
 * '.' components dropped, so that one entry has one spelling wherever
 * receive compares or caches paths ("./a" is "a"). A path that ends in
 * '/' or '/.' keeps one '/': it names that directory itself. Absolute
 * paths and '..' are refused by check_path() on the original.
 */
int rcv_path_resolve(struct receive_ctx *ctx, const char **path, char *buf)
{
	const char *p = *path;
	size_t n, len = 0;
	bool dir_itself = false;
	int ret;

	ret = check_path(ctx, p);
	if (ret)
		return ret;
	while (*p) {
		n = strcspn(p, "/");
		dir_itself = n == 0 || (n == 1 && *p == '.');
		if (!dir_itself) {
			if (len)
				buf[len++] = '/';
			memcpy(buf + len, p, n);
			len += n;
		}
		p += n;
		if (*p == '/') {
			p++;
			dir_itself = true;
		}
	}
	if (dir_itself && len)
		buf[len++] = '/';
	buf[len] = '\0';
	*path = buf;
	return 0;
}

/*
 * The parent directory of @path beneath the subvolume, with the last
 * component put in @last ("." for the subvolume itself): an O_PATH fd
 * that the directory cache owns (callers do not close it). The slot used
 * last is never the one a miss takes, so the fds of two calls in a row
 * (rename, link) are both valid.
 */
int rcv_path_open_parent(struct receive_ctx *ctx, const char *path, char *last)
{
	struct dir_slot *slot = &ctx->dirs[0];
	const char *slash, *name;
	struct stat st;
	size_t len;
	int fd, ret, i;

	ENCIO_ASSERT(!ctx->last_dir ||
		     (ctx->last_dir >= ctx->dirs &&
		      ctx->last_dir < ctx->dirs + DIR_CACHE_SLOTS));
	ret = rcv_pending_flush(ctx) ?: check_path(ctx, path);
	if (ret)
		return ret;
	slash = strrchr(path, '/');
	name = slash ? slash + 1 : path;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	snprintf(last, NAME_MAX + 1, "%s", *name ? name : ".");
	len = slash ? (size_t)(slash - path) : 0;
	for (i = 0; i < DIR_CACHE_SLOTS; i++) {
		struct dir_slot *d = &ctx->dirs[i];

		if (d->fd >= 0 && !strncmp(d->path, path, len) &&
		    d->path[len] == '\0') {
			d->used = ++ctx->dir_clock;
			ctx->last_dir = d;
			return d->fd;
		}
		if (d->fd < 0 || (slot->fd >= 0 && d->used < slot->used))
			slot = d;
	}
	ENCIO_ASSERT(slot != ctx->last_dir || slot->fd < 0);
	close_fd(&slot->fd);
	memcpy(slot->path, path, len);
	slot->path[len] = '\0';
	/* not O_PATH: dir_inherits() asks its flags and xattrs */
	fd = openat2_resolve(ctx->subvol_fd, len ? slot->path : ".",
			     O_RDONLY | O_DIRECTORY, RESOLVE_IN_SUBVOL);
	if (fd < 0)
		return resolve_failed(ctx, fd);
	slot->fd = fd;
	slot->used = ++ctx->dir_clock;
	slot->setgid_known = !fstat(fd, &st);
	slot->setgid = slot->setgid_known && (st.st_mode & S_ISGID);
	slot->inherits_known = false;
	ctx->last_dir = slot;
	return fd;
}

/*
 * The path of the descriptor @fd (and of @last beneath it, when not NULL)
 * in /proc/self/fd, for the calls that take no descriptor.
 */
void rcv_path_of_fd(const struct receive_ctx *ctx, char *out, size_t len,
		    int fd, const char *last)
{
	snprintf(out, len, "%s%d%s%s", ctx->chrooted ? "" : "/proc/self/fd/",
		 fd, last ? "/" : "", last ? last : "");
}

/*
 * Open a regular file beneath @dirfd for I/O: an O_PATH open that follows
 * nothing shows what is there, and only a regular file is reopened, so a
 * symlink, device or fifo the stream made is never opened through.
 */
int rcv_path_open_regular_beneath(struct receive_ctx *ctx, int dirfd,
				  const char *path, int flags)
{
	char proc[64];
	struct stat st;
	int pfd, fd;

	pfd = openat2_resolve(dirfd, path, O_PATH | O_NOFOLLOW,
			      RESOLVE_IN_SUBVOL);
	if (pfd < 0)
		return resolve_failed(ctx, pfd);
	if (fstat(pfd, &st)) {
		fd = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		fd = fail(ctx, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			  "not a regular file");
		goto out;
	}
	rcv_path_of_fd(ctx, proc, sizeof(proc), pfd, NULL);
	fd = open(proc, flags | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		fd = -errno;
out:
	close(pfd);
	return fd;
}

int rcv_write_fd_close(struct receive_ctx *ctx)
{
	int fd = ctx->write_fd;

	ctx->write_fd = -1;
	if (fd >= 0 && close(fd))
		return -errno;
	return 0;
}

int rcv_write_fd_get(struct receive_ctx *ctx, const char *path)
{
	int ret, fd;

	ret = rcv_pending_flush(ctx) ?:
		      rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	if (ctx->write_fd >= 0 && strcmp(ctx->write_path, path) == 0)
		return ctx->write_fd;
	ret = rcv_write_fd_close(ctx);
	if (ret)
		return fail(ctx, ret, "close the previous file");
	fd = rcv_path_open_regular_beneath(ctx, ctx->subvol_fd, path, O_WRONLY);
	if (fd < 0)
		return fd;
	ctx->write_fd = fd;
	snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", path);
	return fd;
}

/* The file just made, open for its data: the write fd for @path. */
static void write_fd_keep(struct receive_ctx *ctx, int fd, const char *path)
{
	close_fd(&ctx->write_fd);
	ctx->write_fd = fd;
	snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", path);
}

/* @path is the regular file open for writing: its metadata by fd. */
bool rcv_write_fd_holds(const struct receive_ctx *ctx, const char *path)
{
	return ctx->write_fd >= 0 && !strcmp(ctx->write_path, path);
}

/* Creating names. */

/* @path was just created in ctx->last_dir: owned by us unless set-gid. */
static void fresh_set(struct receive_ctx *ctx, const char *path)
{
	const struct dir_slot *d = ctx->last_dir;

	ctx->fresh_valid = d && d->setgid_known && !d->setgid &&
			   strlen(path) < sizeof(ctx->fresh_path);
	if (ctx->fresh_valid)
		strcpy(ctx->fresh_path, path);
}

static bool xattr_present(int fd, const char *name)
{
	return fgetxattr(fd, name, NULL, 0) >= 0 || errno != ENODATA;
}

/*
 * Whether the directory @d passes anything on to an inode made in it: true
 * where that cannot be told.
 */
static bool dir_inherits(struct dir_slot *d)
{
	unsigned int flags = 0;
	ssize_t names;

	if (d->inherits_known)
		return d->inherits;
	/* most directories have no xattr at all: one call tells */
	names = flistxattr(d->fd, NULL, 0);
	d->inherits = ioctl(d->fd, FS_IOC_GETFLAGS, &flags) ||
		      (flags & (FS_NOCOW_FL | FS_COMPR_FL | FS_NOCOMP_FL)) ||
		      names < 0 ||
		      (names > 0 &&
		       (xattr_present(d->fd, "btrfs.compression") ||
			xattr_present(d->fd, "system.posix_acl_default")));
	d->inherits_known = true;
	return d->inherits;
}

/*
 * A device, fifo or socket cannot be opened to be changed: its xattrs are
 * removed through the magic link of a descriptor that holds it (O_PATH),
 * which names that very inode, whatever its name names by then.
 */
static void strip_inherited_node(int pfd, const char *last)
{
	char proc[64];
	int fd = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	removexattr(proc, "btrfs.compression");
	removexattr(proc, "system.posix_acl_access");
	close(fd);
}

/*
 * The file or directory just made at @last in @pfd (open at @fd, or -1),
 * which its directory passed flags, a compression property or ACLs on
 * to: without them. The stream says what the inode has (the xattrs btrfs
 * send sends, the flags encio send sends); where it says nothing the
 * inode has nothing, as the source's. ENODATA is what most removals give.
 */
static void strip_inherited(struct receive_ctx *ctx, int pfd, const char *last,
			    enum mk_kind kind, int fd)
{
	int own = -1;

	if (kind == MK_SYMLINK)
		return; /* a symlink inherits neither */
	if (kind != MK_FILE && kind != MK_DIR) {
		strip_inherited_node(pfd, last);
		return;
	}
	if (fd < 0) {
		own = openat(pfd, last,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (own < 0)
			return;
		fd = own;
	}
	inode_flags_set(fd, 0, INODE_FLAGS_EARLY, &ctx->stats.flags_refused);
	fremovexattr(fd, "btrfs.compression");
	fremovexattr(fd, "system.posix_acl_access");
	if (kind == MK_DIR)
		fremovexattr(fd, "system.posix_acl_default");
	if (own >= 0)
		close(own);
}

int rcv_path_create_node(struct receive_ctx *ctx, const char *path,
			 enum mk_kind kind, mode_t type, dev_t rdev,
			 const char *target)
{
	char last[NAME_MAX + 1];
	int pfd, fd, ret = 0;

	ctx->fresh_valid = false;
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	switch (kind) {
	case MK_FILE:
		/* Kept: its data, owner, mode and times usually follow. */
		fd = openat(pfd, last,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0600);
		ret = fd < 0 ? -1 : 0;
		if (fd >= 0)
			write_fd_keep(ctx, fd, path);
		break;
	case MK_DIR:
		ret = mkdirat(pfd, last, 0700);
		break;
	case MK_NOD:
	case MK_FIFO:
	case MK_SOCK:
		ret = mknodat(pfd, last, type | 0600, rdev);
		break;
	case MK_SYMLINK:
		/* Never followed: only *at() calls without follow use it. */
		ret = symlinkat(target, pfd, last);
		break;
	}
	if (ret)
		return -errno;
	if (ctx->last_dir && dir_inherits(ctx->last_dir))
		strip_inherited(ctx, pfd, last, kind,
				kind == MK_FILE ? ctx->write_fd : -1);
	fresh_set(ctx, path);
	return 0;
}

/* Create the pending node where the stream made it. */
int rcv_pending_flush(struct receive_ctx *ctx)
{
	struct pending_node *p = &ctx->pending;

	int ret;

	if (!p->active)
		return 0;
	p->active = false;
	ret = rcv_path_create_node(ctx, p->path, p->kind, p->type, p->rdev,
				   p->target);
	p->refused = ret == -EPERM;
	p->failed = ret != 0;
	return ret;
}

/* A node made at @to comes out as one made at @from. */
static bool made_alike(struct receive_ctx *ctx, const char *from,
		       const char *to)
{
	const char *sf = strrchr(from, '/'), *st = strrchr(to, '/');
	size_t lf = sf ? (size_t)(sf - from) : 0,
	       lt = st ? (size_t)(st - to) : 0;
	char last[NAME_MAX + 1];

	if (lf == lt && !strncmp(from, to, lf))
		return true;
	if (rcv_path_open_parent(ctx, to, last) < 0 ||
	    dir_inherits(ctx->last_dir))
		return false;
	return rcv_path_open_parent(ctx, from, last) >= 0 &&
	       !dir_inherits(ctx->last_dir);
}

/*
 * Create the pending node at @to, the name its rename gives it: -EEXIST
 * (still pending) where @to exists, which the rename would replace, or
 * where the node would not come out as the stream's (made_alike()).
 */
int rcv_pending_create_at(struct receive_ctx *ctx, const char *to)
{
	struct pending_node *p = &ctx->pending;
	int ret;

	p->active = false;
	if (!made_alike(ctx, p->path, to)) {
		p->active = true;
		return -EEXIST;
	}
	ret = rcv_path_create_node(ctx, to, p->kind, p->type, p->rdev,
				   p->target);
	if (ret == -EEXIST)
		p->active = true;
	else
		rcv_dir_cache_forget(ctx, to);
	p->refused = ret == -EPERM;
	p->failed = ret != 0;
	return ret;
}
