// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the inode flags of FILEATTR, in the order copy sets them.
 *
 * nocow, compress, nocompress, noatime and nodump are set when FILEATTR
 * comes: encio send puts a file's right after its MKFILE, while it is
 * empty, the only time btrfs takes nocow; a file the kernel's stream gives
 * nocow (or takes it from) after its data is written again. Sync, append-only and immutable
 * wait for the end of the subvolume, just before it is made read-only:
 * sync would make every later write synchronous, and the other two refuse
 * what later commands do to the inode (its data, times, xattrs, entries
 * of a directory). They are kept by file handle, which renames later in
 * the stream do not change. A flag DEST does not take is noted in the
 * receive's stats, for a warning.
 *
 * What a directory passes on to the inodes made in it (its nocow, compress
 * and nocompress flags, its btrfs.compression property, its default ACL)
 * waits for the end too: btrfs send makes every new inode under an orphan
 * name in the subvolume's root and moves it after, and a flag or property
 * of the root or of the directory set before would be taken by the new
 * inode. At the end the flags go first, then the xattrs: btrfs refuses the
 * compression property of a nocow inode; append-only and immutable go last
 * of all, after the xattrs and the root directory's times they refuse.
 *
 * An inode of the parent snapshot may carry append-only or immutable,
 * which refuse what a difference does to it or to the entries of a
 * directory (EPERM). A command is tried first: where no inode carries
 * them, as in most chains, that costs nothing, while finding them before
 * would mean reading the flags of every inode of the parent. On EPERM the
 * flags of what the command touches are lifted, kept by handle like the
 * late ones, and put back at the end unless a FILEATTR of the inode came
 * after, and set before those of a FILEATTR that came earlier: the stream
 * says what it has.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/pack.h"
#include "receive/receive_internal.h"

/* The flags set at the end of the subvolume. */
#define FLAGS_LATE (FS_SYNC_FL | INODE_FLAGS_LATE)

static void refuse(struct receive_ctx *ctx, unsigned int flags)
{
	ctx->stats.flags_refused.flags |= flags;
}

/* The xattrs a directory passes on to new inodes. */
static const char *const inherited_xattrs[] = { "btrfs.compression",
						"system.posix_acl_default" };

void rcv_flags_forget(struct receive_ctx *ctx)
{
	size_t i;

	free(ctx->late);
	ctx->late = NULL;
	ctx->nr_late = ctx->cap_late = ctx->nr_lifted = 0;
	ctx->pending.refused = false;
	for (i = 0; i < ctx->nr_late_x; i++)
		free(ctx->late_x[i].value);
	free(ctx->late_x);
	ctx->late_x = NULL;
	ctx->nr_late_x = ctx->cap_late_x = 0;
}

static int handle_of(int fd, union late_handle *h)
{
	int mount_id;

	h->fh.handle_bytes = LATE_HANDLE_MAX;
	return name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) ?
		       -errno :
		       0;
}

static bool same_handle(const union late_handle *a, const union late_handle *b)
{
	return a->fh.handle_type == b->fh.handle_type &&
	       a->fh.handle_bytes == b->fh.handle_bytes &&
	       !memcmp(a->fh.f_handle, b->fh.f_handle, a->fh.handle_bytes);
}

/* Kept by lift_inode(): those of FILEATTR always have the sync flag. */
static bool is_lifted(const struct late_flags *l)
{
	return l->mask == INODE_FLAGS_LATE;
}

/*
 * Keep @flags of @mask of the inode open at @fd for rcv_flags_finish(): 1, 0
 * where it has no handle (no way back to it at the end), or -errno.
 */
static int late_push(struct receive_ctx *ctx, int fd, unsigned int flags,
		     unsigned int mask)
{
	struct late_flags *l, *grown;
	size_t cap;

	if (ctx->nr_late == ctx->cap_late) {
		cap = ctx->cap_late ? ctx->cap_late * 2 : 64;
		grown = realloc(ctx->late, cap * sizeof(*grown));
		if (!grown)
			return fail(ctx, ENOMEM, "keep the inode flags");
		ctx->late = grown;
		ctx->cap_late = cap;
	}
	l = &ctx->late[ctx->nr_late];
	if (handle_of(fd, &l->handle))
		return 0;
	l->flags = flags;
	l->mask = mask;
	ctx->nr_late++;
	ctx->nr_lifted += is_lifted(l);
	return 1;
}

static int late_add(struct receive_ctx *ctx, int fd, unsigned int flags,
		    unsigned int mask)
{
	int ret = late_push(ctx, fd, flags, mask);

	if (!ret)
		refuse(ctx, flags);
	return ret < 0 ? ret : 0;
}

/* A FILEATTR of the inode open at @fd says what it has: not what it had. */
static void lifted_drop(struct receive_ctx *ctx, int fd)
{
	union late_handle h;
	size_t i, kept = 0;

	if (!ctx->nr_lifted || handle_of(fd, &h))
		return;
	for (i = 0; i < ctx->nr_late; i++) {
		if (is_lifted(&ctx->late[i]) &&
		    same_handle(&ctx->late[i].handle, &h))
			ctx->nr_lifted--;
		else
			ctx->late[kept++] = ctx->late[i];
	}
	ctx->nr_late = kept;
}

/*
 * The append-only and immutable flags of the regular file or directory
 * open at @fd (O_PATH or not) lifted and kept: 1 where it had them, 0
 * where not, or -errno.
 */
static int lift_inode(struct receive_ctx *ctx, int fd)
{
	struct inode_flags_refused ignored = { 0 };
	unsigned int had;
	char proc[64];
	struct stat st;
	int rfd, ret;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return 0;
	rcv_path_of_fd(ctx, proc, sizeof(proc), fd, NULL);
	rfd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	had = inode_flags_get(rfd) & INODE_FLAGS_LATE;
	ret = had ? late_push(ctx, rfd, had, INODE_FLAGS_LATE) : 0;
	if (ret > 0) {
		ret = inode_flags_set(rfd, 0, INODE_FLAGS_LATE, &ignored);
		if (ret < 0 || inode_flags_get(rfd) & INODE_FLAGS_LATE) {
			/* not lifted (no CAP_LINUX_IMMUTABLE): as it was */
			inode_flags_set(rfd, had, INODE_FLAGS_LATE, &ignored);
			ctx->nr_late--;
			ctx->nr_lifted--;
			ret = ret < 0 ? ret : 0;
		} else {
			ret = 1;
		}
	}
	close(rfd);
	return ret;
}

/*
 * The directory of @path and, with @inode, the inode it names: how many
 * had their flags lifted, or -errno.
 */
static int lift_path(struct receive_ctx *ctx, const char *path, bool inode)
{
	char buf[PATH_MAX];
	const char *name;
	int dfd, fd, ret, n;

	ret = rcv_path_resolve(ctx, &path, buf);
	if (ret)
		return ret;
	dfd = open_parent_resolve(ctx->subvol_fd, path, O_PATH | O_DIRECTORY,
				  RESOLVE_IN_SUBVOL, &name);
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	n = lift_inode(ctx, dfd);
	ret = 0;
	if (n >= 0 && inode && *name) {
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		ret = fd < 0 ? (errno == ENOENT ? 0 : -errno) :
			       lift_inode(ctx, fd);
		if (fd >= 0)
			close(fd);
	}
	close(dfd);
	return n < 0 ? n : ret < 0 ? ret : n + ret;
}

int rcv_flags_lift(struct receive_ctx *ctx, const char *path, const char *path2)
{
	struct pending_node *p = &ctx->pending;
	int n, ret = 0;

	n = lift_path(ctx, path, true);
	if (n >= 0 && path2)
		ret = lift_path(ctx, path2, true);
	n = ret < 0 ? ret : n + ret;
	ret = n >= 0 && p->refused ? lift_path(ctx, p->path, false) : 0;
	n = ret < 0 ? ret : n + ret;
	if (n > 0 && p->refused) {
		p->refused = false;
		p->active = true;
	}
	return n;
}

/*
 * The regular file or directory @path open for its flags: the write fd
 * when it is that file (*@own false), else opened here. -EINVAL for
 * another type, which has no flags.
 */
static int open_inode(struct receive_ctx *ctx, const char *path, bool *own)
{
	char last[NAME_MAX + 1], proc[64];
	struct stat st;
	int pfd, opath, fd;

	*own = false;
	if (rcv_write_fd_holds(ctx, path))
		return ctx->write_fd;
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	opath = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (opath < 0)
		return -errno;
	if (fstat(opath, &st)) {
		fd = -errno;
	} else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		fd = -EINVAL;
	} else {
		/* the inode the O_PATH open found, not a second lookup */
		rcv_path_of_fd(ctx, proc, sizeof(proc), opath, NULL);
		fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	}
	close(opath);
	*own = fd >= 0;
	return fd;
}

/* The data of @from written to @to, holes left out, up to @size. */
static int data_copy(int from, int to, off_t size, void *buf, size_t len)
{
	off_t data, hole, at;
	ssize_t got;

	for (data = 0; data < size; data = hole) {
		data = lseek(from, data, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : -errno;
		hole = lseek(from, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		for (at = data; at < hole; at += got) {
			got = pread(from, buf,
				    (size_t)hole - at < len ?
					    (size_t)(hole - at) :
					    len,
				    at);
			if (got <= 0)
				return got ? -errno : -EIO;
			if (pwrite(to, buf, (size_t)got, at) != got)
				return errno ? -errno : -EIO;
		}
	}
	return 0;
}

/* An unnamed file in the subvolume, with the nocow flag of @like. */
static int twin_open(struct receive_ctx *ctx, int like)
{
	struct inode_flags_refused ignored = { 0 };
	int fd = openat(ctx->subvol_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
			0600);

	if (fd < 0)
		return -errno;
	if (inode_flags_set(fd, inode_flags_get(like), FS_NOCOW_FL, &ignored) <
	    0) {
		close(fd);
		return -EIO;
	}
	return fd;
}

#define TURN_BUF (1U << 20)

/*
 * btrfs turns nocow on or off only while a file is empty, and the kernel
 * sends an existing file's FILEATTR after its data: the file @fd, of
 * @size, is emptied, given @want's nocow, and given its data back, held
 * meanwhile by a clone in an unnamed file (a clone between a nocow and a
 * copy-on-write file is refused, so the way back is plain writes). The
 * inode stays the same, and so do its links.
 */
static int nocow_turn(struct receive_ctx *ctx, int fd, unsigned int want,
		      off_t size)
{
	int rw, twin, ret;
	void *buf = NULL;

	rw = inode_reopen_rw(fd);
	if (rw < 0)
		return rw;
	twin = twin_open(ctx, rw);
	if (twin < 0) {
		close(rw);
		return twin;
	}
	buf = malloc(TURN_BUF);
	ret = buf ? 0 : -ENOMEM;
	if (!ret && ioctl(twin, FICLONE, rw))
		ret = data_copy(rw, twin, size, buf, TURN_BUF);
	if (!ret)
		ret = ftruncate(rw, 0) ? -errno : 0;
	if (!ret)
		ret = inode_flags_set(rw, want, FS_NOCOW_FL,
				      &ctx->stats.flags_refused);
	if (ret >= 0)
		ret = data_copy(twin, rw, size, buf, TURN_BUF);
	if (!ret)
		ret = ftruncate(rw, size) ? -errno : 0;
	free(buf);
	close(twin);
	close(rw);
	return ret;
}

int rcv_flags_fileattr(struct receive_ctx *ctx, const char *path, uint64_t attr)
{
	unsigned int want = inode_flags_from_btrfs(attr);
	unsigned int late = want & FLAGS_LATE, mask = FLAGS_LATE;
	struct stat st;
	bool own;
	int fd, ret;

	ret = rcv_pending_flush(ctx) ?:
		      rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	fd = open_inode(ctx, path, &own);
	if (fd == -EINVAL) {
		refuse(ctx, want);
		return 0;
	}
	if (fd < 0)
		return fd;
	lifted_drop(ctx, fd);
	if (!fstat(fd, &st) && S_ISDIR(st.st_mode)) {
		if (ctx->opts.no_root_nocow &&
		    st.st_ino == BTRFS_FIRST_FREE_OBJECTID)
			want &= ~FS_NOCOW_FL;
		late = want & (FLAGS_LATE | INODE_FLAGS_EARLY);
		mask |= INODE_FLAGS_EARLY;
	}
	/*
	 * Late flags not wanted go now: they would refuse what follows, or
	 * pass on what they should not.
	 */
	ret = inode_flags_set(fd, want, INODE_FLAGS_KEPT & ~late,
			      &ctx->stats.flags_refused);
	if (ret < 0) {
		ret = fail(ctx, ret, "set the inode flags");
		goto out;
	}
	if (S_ISREG(st.st_mode) && st.st_size &&
	    (want ^ inode_flags_get(fd)) & FS_NOCOW_FL) {
		ret = nocow_turn(ctx, fd, want, st.st_size);
		if (ret < 0) {
			ret = fail(ctx, ret, "turn nocow on or off");
			goto out;
		}
	}
	refuse(ctx, want & ~late & ~inode_flags_get(fd));
	ret = late ? late_add(ctx, fd, late, mask) : 0;
out:
	if (own)
		close(fd);
	return ret;
}

static const char *flags_inherited_xattr(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(inherited_xattrs) / sizeof(*inherited_xattrs);
	     i++)
		if (!strcmp(name, inherited_xattrs[i]))
			return inherited_xattrs[i];
	return NULL;
}

/*
 * Forget what was kept of @name for the directory @h, which is removed:
 * whether there was any.
 */
static bool late_xattr_drop(struct receive_ctx *ctx, const union late_handle *h,
			    const char *name)
{
	size_t i, kept = 0;
	bool dropped;

	for (i = 0; i < ctx->nr_late_x; i++) {
		struct late_xattr *x = &ctx->late_x[i];

		if (x->name == name && same_handle(&x->handle, h)) {
			free(x->value);
			continue;
		}
		ctx->late_x[kept++] = *x;
	}
	dropped = kept < ctx->nr_late_x;
	ctx->nr_late_x = kept;
	return dropped;
}

static int late_xattr_add(struct receive_ctx *ctx, const union late_handle *h,
			  const char *name, const void *data, size_t len)
{
	struct late_xattr *x, *grown;
	size_t cap;

	if (ctx->nr_late_x == ctx->cap_late_x) {
		cap = ctx->cap_late_x ? ctx->cap_late_x * 2 : 16;
		grown = realloc(ctx->late_x, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		ctx->late_x = grown;
		ctx->cap_late_x = cap;
	}
	x = &ctx->late_x[ctx->nr_late_x];
	x->value = malloc(len ? len : 1);
	if (!x->value)
		return -ENOMEM;
	memcpy(x->value, data, len);
	x->len = len;
	x->name = name;
	x->handle = *h;
	ctx->nr_late_x++;
	return 0;
}

int rcv_flags_xattr(struct receive_ctx *ctx, const char *path, const char *name,
		    const void *data, size_t len)
{
	const char *kept = flags_inherited_xattr(name);
	union late_handle h;
	struct stat st;
	bool own, dir;
	int fd, ret;

	if (!kept)
		return 0;
	ret = rcv_pending_flush(ctx) ?:
		      rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	fd = open_inode(ctx, path, &own);
	if (fd == -EINVAL)
		return 0;
	if (fd < 0)
		return fd;
	dir = !fstat(fd, &st) && S_ISDIR(st.st_mode);
	/* no handle, no way back to it at the end: now, then */
	if (!dir || handle_of(fd, &h)) {
		ret = 0;
	} else if (!data) {
		/* removed before it was set: nothing to remove now */
		ret = late_xattr_drop(ctx, &h, kept) &&
		      fgetxattr(fd, kept, NULL, 0) < 0 && errno == ENODATA;
	} else {
		late_xattr_drop(ctx, &h, kept);
		ret = late_xattr_add(ctx, &h, kept, data, len);
		ret = ret ? fail(ctx, ret, "keep the xattr") : 1;
	}
	if (own)
		close(fd);
	return ret;
}

/* The directories' inherited xattrs, in the stream's order. */
static int xattrs_finish(struct receive_ctx *ctx)
{
	size_t i;
	int fd, ret;

	for (i = 0; i < ctx->nr_late_x; i++) {
		struct late_xattr *x = &ctx->late_x[i];

		fd = open_by_handle_at(ctx->subvol_fd, &x->handle.fh,
				       O_RDONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 && (errno == ESTALE || errno == ENOENT))
			continue;
		if (fd < 0)
			return fail(ctx, errno,
				    "open a directory to set its xattrs");
		ret = fsetxattr(fd, x->name, x->value, x->len, 0) ? -errno : 0;
		if (ret == -EPERM && lift_inode(ctx, fd) > 0)
			ret = fsetxattr(fd, x->name, x->value, x->len, 0) ?
				      -errno :
				      0;
		close(fd);
		if (ret)
			return fail(ctx, ret, "set a directory's xattr");
	}
	return 0;
}

/* @mask of the flags @l keeps, set on its inode. */
static int late_set(struct receive_ctx *ctx, struct late_flags *l,
		    unsigned int mask)
{
	int fd, ret;

	fd = open_by_handle_at(ctx->subvol_fd, &l->handle.fh,
			       O_RDONLY | O_NOCTTY | O_CLOEXEC);
	/* removed later in the stream */
	if (fd < 0 && (errno == ESTALE || errno == ENOENT))
		return 0;
	if (fd < 0 && errno == EPERM) {
		refuse(ctx, l->flags & mask);
		return 0;
	}
	if (fd < 0)
		return fail(ctx, errno, "open an inode to set its flags");
	ret = inode_flags_set(fd, l->flags, mask, &ctx->stats.flags_refused);
	close(fd);
	return ret < 0 ? fail(ctx, ret, "set the inode flags") : 0;
}

/*
 * The root directory's times as its parent had them (receive_subvol.c
 * keeps them), set before its append-only or immutable flag is put back:
 * lifted for that where the parent's root had one.
 */
static int root_times_finish(struct receive_ctx *ctx)
{
	int ret;

	if (!ctx->root_times_kept)
		return 0;
	ret = futimens(ctx->subvol_fd, ctx->root_times) ? -errno : 0;
	if (ret == -EPERM && lift_inode(ctx, ctx->subvol_fd) > 0)
		ret = futimens(ctx->subvol_fd, ctx->root_times) ? -errno : 0;
	if (ret)
		return fail(ctx, ret, "set the times of the root directory");
	ctx->root_times_kept = false;
	return 0;
}

/*
 * Append-only and immutable as lifted (the parent's), then as FILEATTR
 * gave them: an inode lifted after its FILEATTR (the stream sets the times
 * of a directory the parent made append-only) takes what the stream says.
 */
static int late_flags_finish(struct receive_ctx *ctx, bool lifted)
{
	struct late_flags *l;
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < ctx->nr_late; i++) {
		l = &ctx->late[i];
		if (is_lifted(l) == lifted && l->flags & INODE_FLAGS_LATE)
			ret = late_set(ctx, l, INODE_FLAGS_LATE);
	}
	return ret;
}

/*
 * A later FILEATTR of the same inode does not cancel what an earlier one
 * kept: senders send one per inode.
 */
int rcv_flags_finish(struct receive_ctx *ctx)
{
	struct late_flags *l;
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < ctx->nr_late; i++) {
		l = &ctx->late[i];
		if (!is_lifted(l))
			ret = late_set(ctx, l, l->mask & ~INODE_FLAGS_LATE);
	}
	ret = ret				   ?:
		      xattrs_finish(ctx)	   ?:
		      root_times_finish(ctx)	   ?:
		      late_flags_finish(ctx, true) ?:
		      late_flags_finish(ctx, false);
	if (ret)
		return ret;
	rcv_flags_forget(ctx);
	return 0;
}

/*
 * The END's state in a resume record (receive_resume.c): the flags and
 * xattrs kept and the root's times, the inodes by number and generation
 * (a handle is made again for the subvolume the resume opens).
 */
/* The inode a kept handle names, as (number, generation). */
static int handle_ino(const union late_handle *h, uint64_t *ino, uint32_t *gen)
{
	struct btrfs_fid_without_parent fid;

	if (h->fh.handle_type != BTRFS_FID_TYPE_WITHOUT_PARENT ||
	    h->fh.handle_bytes < sizeof(fid))
		return -EINVAL;
	memcpy(&fid, h->fh.f_handle, sizeof(fid));
	*ino = fid.objectid;
	*gen = fid.gen;
	return 0;
}

static void handle_make(union late_handle *h, uint64_t ino, uint32_t gen,
			uint64_t root)
{
	struct btrfs_fid_without_parent fid = { .objectid = ino,
						.root_objectid = root,
						.gen = gen };

	h->fh.handle_type = BTRFS_FID_TYPE_WITHOUT_PARENT;
	h->fh.handle_bytes = sizeof(fid);
	memcpy(h->fh.f_handle, &fid, sizeof(fid));
}

/* What the subvolume's END needs that the tree does not hold. */
int rcv_flags_state_pack(const struct receive_ctx *ctx, struct pack_buf *b)
{
	uint64_t ino;
	uint32_t gen;
	size_t i;

	pack_u64(b, ctx->root_times_kept);
	for (i = 0; i < 2; i++) {
		pack_u64(b, (uint64_t)ctx->root_times[i].tv_sec);
		pack_u64(b, (uint64_t)ctx->root_times[i].tv_nsec);
	}
	pack_u64(b, ctx->nr_late);
	for (i = 0; i < ctx->nr_late; i++) {
		if (handle_ino(&ctx->late[i].handle, &ino, &gen))
			return -EINVAL;
		pack_u64(b, ino);
		pack_u64(b, gen);
		pack_u64(b, ctx->late[i].flags);
		pack_u64(b, ctx->late[i].mask);
	}
	pack_u64(b, ctx->nr_late_x);
	for (i = 0; i < ctx->nr_late_x; i++) {
		const struct late_xattr *x = &ctx->late_x[i];
		size_t name_len = strlen(x->name);

		if (handle_ino(&x->handle, &ino, &gen))
			return -EINVAL;
		pack_u64(b, ino);
		pack_u64(b, gen);
		pack_u64(b, name_len);
		pack_put(b, x->name, name_len);
		pack_u64(b, x->value ? x->len : UINT64_MAX);
		if (x->value)
			pack_put(b, x->value, x->len);
	}
	return b->failed ? -ENOMEM : 0;
}

static int late_flags_unpack(struct receive_ctx *ctx, struct pack_reader *r,
			     uint64_t root)
{
	uint64_t n = unpack_u64(r), i, ino, gen;

	if (r->bad || n > r->len / 32)
		return -EINVAL;
	ctx->late = calloc(n ? n : 1, sizeof(*ctx->late));
	if (!ctx->late)
		return -ENOMEM;
	ctx->cap_late = n ? n : 1;
	for (i = 0; i < n; i++) {
		struct late_flags *l = &ctx->late[i];

		ino = unpack_u64(r);
		gen = unpack_u64(r);
		l->flags = (unsigned int)unpack_u64(r);
		l->mask = (unsigned int)unpack_u64(r);
		handle_make(&l->handle, ino, (uint32_t)gen, root);
		/* a FILEATTR of the inode after the resume drops it */
		ctx->nr_lifted += is_lifted(l);
	}
	ctx->nr_late = n;
	return r->bad ? -EINVAL : 0;
}

static int late_xattrs_unpack(struct receive_ctx *ctx, struct pack_reader *r,
			      uint64_t root)
{
	uint64_t n = unpack_u64(r), i, ino, gen, len;
	const uint8_t *data;
	char name[XATTR_NAME_MAX + 1];

	if (r->bad || n > r->len / 32)
		return -EINVAL;
	ctx->late_x = calloc(n ? n : 1, sizeof(*ctx->late_x));
	if (!ctx->late_x)
		return -ENOMEM;
	ctx->cap_late_x = n ? n : 1;
	for (i = 0; i < n; i++) {
		struct late_xattr *x = &ctx->late_x[i];

		ino = unpack_u64(r);
		gen = unpack_u64(r);
		len = unpack_u64(r);
		data = unpack_bytes(r, len);
		if (!data || len > XATTR_NAME_MAX)
			return -EINVAL;
		memcpy(name, data, len);
		name[len] = '\0';
		x->name = flags_inherited_xattr(name);
		len = unpack_u64(r);
		if (!x->name || r->bad)
			return -EINVAL;
		handle_make(&x->handle, ino, (uint32_t)gen, root);
		ctx->nr_late_x = i + 1;
		if (len == UINT64_MAX)
			continue;
		data = unpack_bytes(r, len);
		if (!data || !(x->value = malloc(len ? len : 1)))
			return data ? -ENOMEM : -EINVAL;
		memcpy(x->value, data, len);
		x->len = len;
	}
	return 0;
}

/* The END's state back into @ctx, handles made for the subvolume @root. */
int rcv_flags_state_unpack(struct receive_ctx *ctx, const uint8_t *p,
			   size_t len, uint64_t root)
{
	struct pack_reader r = { .p = p, .len = len };
	size_t i;
	int ret;

	rcv_flags_forget(ctx);
	ctx->root_times_kept = unpack_u64(&r) != 0;
	for (i = 0; i < 2; i++) {
		ctx->root_times[i].tv_sec = (time_t)unpack_u64(&r);
		ctx->root_times[i].tv_nsec = (long)unpack_u64(&r);
	}
	ret = late_flags_unpack(ctx, &r, root) ?:
		      late_xattrs_unpack(ctx, &r, root);
	if (!ret && (r.bad || r.len))
		ret = -EINVAL;
	return ret;
}
