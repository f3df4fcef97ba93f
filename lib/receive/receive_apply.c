// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the commands that make, move, remove and write the entries of a
 * subvolume, applied through the descriptors receive_path.c opens.
 */
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "codec/payload.h"
#include "receive/receive_internal.h"

static const int mk_cmd[] = {
	[MK_FILE] = BTRFS_SEND_C_MKFILE, [MK_DIR] = BTRFS_SEND_C_MKDIR,
	[MK_NOD] = BTRFS_SEND_C_MKNOD,	 [MK_FIFO] = BTRFS_SEND_C_MKFIFO,
	[MK_SOCK] = BTRFS_SEND_C_MKSOCK, [MK_SYMLINK] = BTRFS_SEND_C_SYMLINK,
};

static void report_progress(struct receive_ctx *ctx)
{
	if (!ctx->progress)
		return;
	ctx->stats.stream_bytes = ctx->reader->offset;
	ctx->stats.stream_total = ctx->reader->sender_total;
	ctx->progress(&ctx->stats, ctx->progress_arg);
}

/*
 * A command refused by an append-only or immutable flag (EPERM) is
 * applied again once rcv_flags_lift() lifted them on what it touches.
 */
static bool lifted(struct receive_ctx *ctx, int ret, const char *path,
		   const char *path2)
{
	return ret == -EPERM && rcv_flags_lift(ctx, path, path2) > 0;
}

/* The file @path open for its data, its flags lifted if they refuse it. */
static int write_fd_lifted(struct receive_ctx *ctx, const char *path)
{
	int fd = rcv_write_fd_get(ctx, path);

	return lifted(ctx, fd, path, NULL) ? rcv_write_fd_get(ctx, path) : fd;
}

/* Creating names. */

/*
 * A mk* command: checked now (a path beneath the subvolume, a name not
 * there yet) so that errors name this command, created at the next one.
 */
static int make_node_at(struct receive_ctx *ctx, const char *path,
			enum mk_kind kind, mode_t type, dev_t rdev,
			const char *target)
{
	struct pending_node *p = &ctx->pending;
	char last[NAME_MAX + 1];
	struct stat st;
	size_t len;
	int pfd;

	pfd = rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	/* mkdir of "a/" makes "a", as the kernel's does. */
	len = strlen(path);
	if (kind == MK_DIR && len && path[len - 1] == '/')
		ctx->path_buf[0][len - 1] = '\0';
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	if (strlen(path) >= sizeof(p->path) ||
	    (target && strlen(target) >= sizeof(p->target)))
		return rcv_path_create_node(ctx, path, kind, type, rdev,
					    target);
	if (!fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW))
		return -EEXIST;
	if (errno != ENOENT)
		return -errno;
	p->active = true;
	p->refused = false;
	p->kind = kind;
	p->type = type;
	p->rdev = rdev;
	strcpy(p->path, path);
	strcpy(p->target, target ? target : "");
	return 0;
}

static int make_node(struct receive_ctx *ctx, const char *path,
		     enum mk_kind kind, mode_t type, dev_t rdev,
		     const char *target)
{
	int ret;

	begin_cmd(ctx, mk_cmd[kind], path, target);
	ret = make_node_at(ctx, path, kind, type, rdev, target);
	if (lifted(ctx, ret, path, NULL))
		ret = make_node_at(ctx, path, kind, type, rdev, target);
	return ret;
}

static int rcv_mkfile(const char *path, void *arg)
{
	return make_node(arg, path, MK_FILE, 0, 0, NULL);
}

static int rcv_mkdir(const char *path, void *arg)
{
	return make_node(arg, path, MK_DIR, 0, 0, NULL);
}

static int rcv_mknod(const char *path, uint64_t mode, uint64_t rdev, void *arg)
{
	mode_t type = mode & S_IFMT;

	if (type != S_IFCHR && type != S_IFBLK && type != S_IFIFO &&
	    type != S_IFSOCK)
		return fail(arg, EINVAL, "mknod of a type that is no node");
	return make_node(arg, path, MK_NOD, type, (dev_t)rdev, NULL);
}

static int rcv_mkfifo(const char *path, void *arg)
{
	return make_node(arg, path, MK_FIFO, S_IFIFO, 0, NULL);
}

static int rcv_mksock(const char *path, void *arg)
{
	return make_node(arg, path, MK_SOCK, S_IFSOCK, 0, NULL);
}

static int rcv_symlink(const char *path, const char *target, void *arg)
{
	return make_node(arg, path, MK_SYMLINK, 0, 0, target);
}

/* Moving and removing names: none follows the last component. */

static int apply_rename(struct receive_ctx *ctx, const char *from,
			const char *to)
{
	char last_from[NAME_MAX + 1], last_to[NAME_MAX + 1];
	int pfrom, pto, ret;

	ret = rcv_path_resolve(ctx, &from, ctx->path_buf[0]) ?:
		      rcv_path_resolve(ctx, &to, ctx->path_buf[1]);
	if (ret)
		return ret;
	if (ctx->pending.active && !strcmp(ctx->pending.path, from)) {
		ret = rcv_pending_create_at(ctx, to);
		if (ret != -EEXIST)
			return ret;
	}
	pfrom = rcv_path_open_parent(ctx, from, last_from);
	if (pfrom < 0)
		return pfrom;
	pto = rcv_path_open_parent(ctx, to, last_to);
	if (pto < 0)
		return pto;
	ret = renameat(pfrom, last_from, pto, last_to) ? -errno : 0;
	ctx->fresh_valid = false;
	rcv_dir_cache_forget(ctx, from);
	rcv_dir_cache_forget(ctx, to);
	if (ctx->write_fd >= 0 && !ret && !strcmp(ctx->write_path, from))
		snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", to);
	else if (ctx->write_fd >= 0 &&
		 (rcv_path_within(ctx->write_path, from) ||
		  rcv_path_within(ctx->write_path, to)))
		ret = rcv_write_fd_close(ctx) ?: ret;
	return ret;
}

static int rcv_rename(const char *from, const char *to, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_RENAME, from, to);
	ret = apply_rename(ctx, from, to);
	if (lifted(ctx, ret, from, to))
		ret = apply_rename(ctx, from, to);
	return ret;
}

static int apply_link(struct receive_ctx *ctx, const char *path,
		      const char *target)
{
	char last[NAME_MAX + 1], last_target[NAME_MAX + 1];
	int pfd, ptarget;

	pfd = rcv_path_resolve(ctx, &path, ctx->path_buf[0]) ?:
		      rcv_path_resolve(ctx, &target, ctx->path_buf[1]);
	if (pfd)
		return pfd;
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	/* The target is a stream path too, so it is beneath the subvolume. */
	ptarget = rcv_path_open_parent(ctx, target, last_target);
	if (ptarget < 0)
		return ptarget;
	return linkat(ptarget, last_target, pfd, last, 0) ? -errno : 0;
}

static int rcv_link(const char *path, const char *target, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_LINK, path, target);
	ret = apply_link(ctx, path, target);
	if (lifted(ctx, ret, path, target))
		ret = apply_link(ctx, path, target);
	return ret;
}

static int apply_remove(struct receive_ctx *ctx, const char *path, int flags)
{
	char last[NAME_MAX + 1];
	int pfd, ret;

	ret = rcv_pending_flush(ctx) ?:
		      rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	ctx->fresh_valid = false;
	if (ctx->write_fd >= 0 && rcv_path_within(ctx->write_path, path)) {
		ret = rcv_write_fd_close(ctx);
		if (ret)
			return fail(ctx, ret, "close the previous file");
	}
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	ret = unlinkat(pfd, last, flags) ? -errno : 0;
	rcv_dir_cache_forget(ctx, path);
	return ret;
}

static int remove_name(struct receive_ctx *ctx, const char *path, int flags)
{
	int ret;

	begin_cmd(ctx,
		  (flags & AT_REMOVEDIR) ? BTRFS_SEND_C_RMDIR :
					   BTRFS_SEND_C_UNLINK,
		  path, NULL);
	ret = apply_remove(ctx, path, flags);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_remove(ctx, path, flags);
	return ret;
}

static int rcv_unlink(const char *path, void *arg)
{
	return remove_name(arg, path, 0);
}

static int rcv_rmdir(const char *path, void *arg)
{
	return remove_name(arg, path, AT_REMOVEDIR);
}

/* Metadata: every call works on the name itself, never what it points to. */

/* "/proc/self/fd/N/LAST" for the l*xattr() calls, which do not follow it. */
static int xattr_path(struct receive_ctx *ctx, const char *path, char *out,
		      size_t len, int *pfd)
{
	char last[NAME_MAX + 1];
	int ret;

	ret = rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	*pfd = rcv_path_open_parent(ctx, path, last);
	if (*pfd < 0)
		return *pfd;
	rcv_path_of_fd(ctx, out, len, *pfd, last);
	return 0;
}

static int apply_set_xattr(struct receive_ctx *ctx, const char *path,
			   const char *name, const void *data, size_t len)
{
	char full[NAME_MAX + 64];
	int pfd, ret;

	ret = rcv_flags_xattr(ctx, path, name, data, len);
	if (ret)
		return ret < 0 ? ret : 0;
	ret = xattr_path(ctx, path, full, sizeof(full), &pfd);
	if (ret)
		return ret;
	/* a later chown removes security.capability: do not skip it */
	ctx->fresh_valid = false;
	return lsetxattr(full, name, data, len, 0) ? -errno : 0;
}

static int rcv_set_xattr(const char *path, const char *name, const void *data,
			 size_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_SET_XATTR, path, name);
	rcv_dir_cache_inherits_forget(ctx);
	ret = apply_set_xattr(ctx, path, name, data, len);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_set_xattr(ctx, path, name, data, len);
	return ret;
}

static int apply_remove_xattr(struct receive_ctx *ctx, const char *path,
			      const char *name)
{
	char full[NAME_MAX + 64];
	int pfd, ret;

	ret = rcv_flags_xattr(ctx, path, name, NULL, 0);
	if (ret)
		return ret < 0 ? ret : 0;
	ret = xattr_path(ctx, path, full, sizeof(full), &pfd);
	if (ret)
		return ret;
	return lremovexattr(full, name) ? -errno : 0;
}

static int rcv_remove_xattr(const char *path, const char *name, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_REMOVE_XATTR, path, name);
	rcv_dir_cache_inherits_forget(ctx);
	ret = apply_remove_xattr(ctx, path, name);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_remove_xattr(ctx, path, name);
	return ret;
}

static int apply_chmod(struct receive_ctx *ctx, const char *path, uint64_t mode)
{
	char last[NAME_MAX + 1], proc[64];
	int pfd, fd, ret;
	struct stat st;

	ret = rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	if (rcv_write_fd_holds(ctx, path))
		return fchmod(ctx->write_fd, mode & 07777) ? -errno : 0;
	pfd = rcv_path_open_parent(ctx, path, last);
	/* after the open, which may cache the directory's mode of before */
	rcv_dir_cache_setgid_forget(ctx, path);
	if (pfd < 0)
		return pfd;
	/*
	 * What fchmodat(AT_SYMLINK_NOFOLLOW) does in glibc, but through
	 * rcv_path_of_fd(), which works under -C, where /proc is out of reach.
	 */
	fd = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = fstat(fd, &st) ? -errno : 0;
	/* A symlink's mode Linux cannot change: nothing to do. */
	if (!ret && !S_ISLNK(st.st_mode)) {
		rcv_path_of_fd(ctx, proc, sizeof(proc), fd, NULL);
		ret = chmod(proc, mode & 07777) ? -errno : 0;
	}
	close(fd);
	return ret;
}

static int rcv_chmod(const char *path, uint64_t mode, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_CHMOD, path, NULL);
	ret = apply_chmod(ctx, path, mode);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_chmod(ctx, path, mode);
	return ret;
}

static int apply_chown(struct receive_ctx *ctx, const char *path, uint64_t uid,
		       uint64_t gid)
{
	char last[NAME_MAX + 1];
	int pfd;

	pfd = rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	if (ctx->fresh_valid && uid == ctx->euid && gid == ctx->egid &&
	    !strcmp(path, ctx->fresh_path))
		return 0;
	ctx->fresh_valid = false;
	if (rcv_write_fd_holds(ctx, path))
		return fchown(ctx->write_fd, uid, gid) ? -errno : 0;
	pfd = rcv_path_open_parent(ctx, path, last);
	rcv_dir_cache_setgid_forget(ctx, path);
	if (pfd < 0)
		return pfd;
	return fchownat(pfd, last, uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int rcv_chown(const char *path, uint64_t uid, uint64_t gid, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_CHOWN, path, NULL);
	ret = apply_chown(ctx, path, uid, gid);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_chown(ctx, path, uid, gid);
	return ret;
}

static int apply_utimes(struct receive_ctx *ctx, const char *path,
			const struct timespec ts[2])
{
	char last[NAME_MAX + 1];
	int pfd;

	pfd = rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	if (!*path)
		ctx->root_times_kept = false;
	if (rcv_write_fd_holds(ctx, path))
		return futimens(ctx->write_fd, ts) ? -errno : 0;
	pfd = rcv_path_open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	return utimensat(pfd, last, ts, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int rcv_utimes(const char *path, const struct timespec *atime,
		      const struct timespec *mtime,
		      const struct timespec *ctime, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct timespec ts[2] = { *atime, *mtime };
	int ret;

	(void)ctime;
	begin_cmd(ctx, BTRFS_SEND_C_UTIMES, path, NULL);
	ret = apply_utimes(ctx, path, ts);
	if (lifted(ctx, ret, path, NULL))
		ret = apply_utimes(ctx, path, ts);
	return ret;
}

static int rcv_fileattr(const char *path, uint64_t attr, void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_FILEATTR, path, NULL);
	rcv_dir_cache_inherits_forget(ctx);
	ret = rcv_flags_fileattr(ctx, path, attr);
	if (lifted(ctx, ret, path, NULL))
		ret = rcv_flags_fileattr(ctx, path, attr);
	return ret;
}

static int rcv_update_extent(const char *path, uint64_t offset, uint64_t len,
			     void *arg)
{
	struct receive_ctx *ctx = arg;

	/* Only sent with --no-data: nothing to do. */
	(void)offset;
	(void)len;
	begin_cmd(ctx, BTRFS_SEND_C_UPDATE_EXTENT, path, NULL);
	return 0;
}

/* Data. */

static int write_plain(struct receive_ctx *ctx, int fd, const void *data,
		       size_t len, uint64_t offset)
{
	int ret = pwrite_all(fd, data, len, offset);

	if (ret)
		return ret;
	ctx->stats.bytes_written += len;
	ctx->stats.written_bytes += len;
	report_progress(ctx);
	return 0;
}

static int rcv_write(const char *path, uint64_t offset, const void *data,
		     size_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	int fd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_WRITE, path, NULL);
	fd = write_fd_lifted(ctx, path);
	if (fd < 0)
		return fd;
	ret = write_plain(ctx, fd, data, len, offset);
	if (!ret)
		ctx->stats.data_bytes += len;
	return ret;
}

#define CLONE_COPY_BUF (1U << 20)

/*
 * The @len bytes at @src_off of @src written at @off of @fd: btrfs clones
 * nothing between a nocow and a copy-on-write file, and the flags a stream
 * gives after data (encio receive turns them, btrfs receive does not) can
 * leave the two files of a CLONE the source had alike unalike here.
 */
static int clone_by_copy(struct receive_ctx *ctx, int fd, int src, uint64_t off,
			 uint64_t src_off, uint64_t len)
{
	char *buf = malloc(CLONE_COPY_BUF);
	ssize_t got;
	int ret = buf ? 0 : -ENOMEM;

	while (!ret && len) {
		got = pread(src, buf,
			    len < CLONE_COPY_BUF ? len : CLONE_COPY_BUF,
			    src_off);
		if (got <= 0) {
			ret = got ? -errno : -ENODATA;
			break;
		}
		ret = write_plain(ctx, fd, buf, got, off);
		off += got;
		src_off += got;
		len -= got;
	}
	free(buf);
	if (!ret && ctx->events.note)
		ctx->events.note(
			"a clone between a nocow and a copy-on-write file was copied",
			ctx->events.arg);
	return ret;
}

static bool nocow_unalike(int a, int b)
{
	return (inode_flags_get(a) ^ inode_flags_get(b)) & FS_NOCOW_FL;
}

static int rcv_clone(const char *path, uint64_t offset, uint64_t len,
		     const uint8_t *clone_uuid, uint64_t clone_ctransid,
		     const char *clone_path, uint64_t clone_offset, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct file_clone_range range;
	int fd, dir, src, ret;

	begin_cmd(ctx, BTRFS_SEND_C_CLONE, path, NULL);
	fd = write_fd_lifted(ctx, path);
	if (fd < 0)
		return fd;
	ret = rcv_path_resolve(ctx, &clone_path, ctx->path_buf[1]);
	if (ret)
		return ret;
	dir = rcv_lookup_clone_source(ctx, clone_uuid, clone_ctransid);
	if (dir < 0)
		return dir;
	src = rcv_path_open_regular_beneath(ctx, dir, clone_path, O_RDONLY);
	if (src < 0) {
		ctx->why = ctx->why ?: "open the clone source";
		return src;
	}
	range = (struct file_clone_range){ .src_fd = src,
					   .src_offset = clone_offset,
					   .src_length = len,
					   .dest_offset = offset };
	ret = ioctl(fd, FICLONERANGE, &range) ? -errno : 0;
	if (ret == -EINVAL && nocow_unalike(fd, src)) {
		ret = clone_by_copy(ctx, fd, src, offset, clone_offset, len);
		close(src);
		if (!ret)
			ctx->stats.clone_bytes += len;
		return ret ? fail(ctx, ret, "copy the range to clone") : 0;
	}
	close(src);
	if (ret)
		return fail(ctx, ret, "clone the range");
	ctx->stats.clone_bytes += len;
	ctx->stats.bytes_written += len;
	report_progress(ctx);
	return 0;
}

static int rcv_truncate(const char *path, uint64_t size, void *arg)
{
	struct receive_ctx *ctx = arg;
	int fd;

	begin_cmd(ctx, BTRFS_SEND_C_TRUNCATE, path, NULL);
	fd = write_fd_lifted(ctx, path);
	if (fd < 0)
		return fd;
	if (size > INT64_MAX)
		return fail(ctx, EFBIG, "size past the largest file");
	return ftruncate(fd, (off_t)size) ? -errno : 0;
}

/*
 * A hole punched within the file's size, KEEP_SIZE. Past EOF it changes
 * no byte, but btrfs zeroes the rest of the EOF block all the same,
 * writing it again (an inline extent would become a regular one): not
 * done. encio send punches inline tails (put_tail_zeros()), which may lie
 * past EOF here, and zero_inline_tail() punches them itself.
 */
static int punch_within_size(struct receive_ctx *ctx, int fd,
			     const struct stat *st, uint64_t offset,
			     uint64_t len)
{
	if (offset >= (uint64_t)st->st_size)
		return 0;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)offset, (off_t)len))
		return fail(ctx, errno, "punch a hole");
	return 0;
}

static int rcv_fallocate(const char *path, uint32_t mode, uint64_t offset,
			 uint64_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct stat st;
	int fd;

	begin_cmd(ctx, BTRFS_SEND_C_FALLOCATE, path, NULL);
	fd = write_fd_lifted(ctx, path);
	if (fd < 0)
		return fd;
	if (offset > INT64_MAX || len > INT64_MAX)
		return fail(ctx, EFBIG, "range past the largest file");
	if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		return fstat(fd, &st) ?
			       fail(ctx, errno, "stat") :
			       punch_within_size(ctx, fd, &st, offset, len);
	return fallocate(fd, (int)mode, (off_t)offset, (off_t)len) ? -errno : 0;
}

/* The destination refused the encoded write for a reason decoding avoids. */
static bool write_refusal(int err)
{
	return err == EINVAL || err == EOPNOTSUPP || err == ENOTTY ||
	       err == EPERM;
}

/* One encoded write through the engine, waited for: streams are serial. */
static int write_encoded(struct receive_ctx *ctx, int fd,
			 const struct stream_encoded_write *ew)
{
	struct engine *engine = &ctx->engine;
	struct engine_req *req, *done;
	ssize_t res;
	int err;

	/* From the stream's buffer: no copy into a slot. */
	if (ctx->write_mode == ENCIO_IO_IOCTL)
		return encoded_write_ioctl(fd, ew->data, ew->len, ew->offset,
					   ew->unencoded_file_len,
					   ew->unencoded_len,
					   ew->unencoded_offset,
					   ew->compression);
	req = engine_get_req(engine);
	if (!req)
		return -EBUSY;
	memcpy(engine_req_buf(engine, req), ew->data, ew->len);
	memset(&req->args, 0, sizeof(req->args));
	req->args.len = ew->unencoded_file_len;
	req->args.unencoded_len = ew->unencoded_len;
	req->args.unencoded_offset = ew->unencoded_offset;
	req->args.compression = ew->compression;
	engine_encoded_write(engine, req, ctx->write_mode, fd, ew->offset,
			     ew->len);
	do {
		done = engine_reap(engine, true, &err);
		if (err && !done) {
			engine_put_req(engine, req);
			return err < 0 ? err : -err;
		}
	} while (done != req);
	res = req->res;
	engine_put_req(engine, req);
	return res < 0 ? (int)res : 0;
}

/*
 * Decode the extent into ctx->decode_buf, zero-filled past its data as the
 * kernel reads it. With @verify it must decode to at least the bytes the
 * file takes from it: what is missing would read back as zeroes. Returns
 * the decoded length or -errno.
 */
static ssize_t decode_extent(struct receive_ctx *ctx,
			     const struct stream_encoded_write *ew, bool verify)
{
	ssize_t n;

	if (ew->unencoded_len > BTRFS_MAX_UNCOMPRESSED)
		return fail(ctx, EINVAL, "unencoded length past 128 KiB");
	n = codec_decode(ctx->codec, ew->compression, ew->data, ew->len,
			 ctx->decode_buf, ew->unencoded_len);
	if (n < 0)
		return fail(ctx, n, "the data does not decode");
	if (verify &&
	    (uint64_t)n < ew->unencoded_offset + ew->unencoded_file_len) {
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "the data decodes to %zd bytes, the file uses %llu", n,
			 (unsigned long long)(ew->unencoded_offset +
					      ew->unencoded_file_len));
		return fail(ctx, EINVAL, ctx->why_buf);
	}
	return n;
}

/* Write the decoded extent; @decoded: ctx->decode_buf holds it already. */
static int write_decoded(struct receive_ctx *ctx, int fd,
			 const struct stream_encoded_write *ew, bool decoded)
{
	ssize_t n;
	int ret;

	if (!decoded) {
		n = decode_extent(ctx, ew, false);
		if (n < 0)
			return n;
	}
	ret = write_plain(ctx, fd,
			  (const char *)ctx->decode_buf + ew->unencoded_offset,
			  ew->unencoded_file_len, ew->offset);
	if (ret)
		return ret;
	ctx->stats.extents_decoded++;
	return 0;
}

/*
 * An inline extent (btrfs has them at offset 0 only) stands for its whole
 * sector, zeros past its data. The kernel's compressed send sends its
 * data alone (see note_inline_tail() in send_kernel.c), so in an
 * incremental stream the rest of the sector would keep the parent's
 * bytes: they are zeroed here, within the file's size. Whatever a later
 * command writes there comes after, as in SRC.
 */
static int zero_inline_tail(struct receive_ctx *ctx, int fd,
			    const struct stream_encoded_write *ew)
{
	uint64_t end = ew->unencoded_file_len, sector;
	struct stat st;

	if (ew->offset)
		return 0;
	if (fstat(fd, &st))
		return fail(ctx, errno, "stat");
	sector = st.st_blksize > 0 ? (uint64_t)st.st_blksize : 0;
	if (!sector || end % sector == 0)
		return 0;
	return punch_within_size(ctx, fd, &st, end, sector - end % sector);
}

static int apply_encoded_write(struct receive_ctx *ctx, int fd,
			       const struct stream_encoded_write *ew,
			       bool decoded)
{
	int ret;

	if (ew->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		if (ew->len < ew->unencoded_offset ||
		    ew->len - ew->unencoded_offset < ew->unencoded_file_len)
			return fail(ctx, EINVAL,
				    "the data is shorter than its range");
		return write_plain(
			ctx, fd, (const char *)ew->data + ew->unencoded_offset,
			ew->unencoded_file_len, ew->offset);
	}
	if (ctx->write_mode != ENCIO_IO_NONE) {
		ret = write_encoded(ctx, fd, ew);
		if (ret == 0) {
			ctx->stats.extents_encoded++;
			ctx->stats.encoded_bytes += ew->len;
			ctx->stats.bytes_written += ew->unencoded_file_len;
			ctx->stats.written_bytes += ew->unencoded_file_len;
			report_progress(ctx);
			return 0;
		}
		if (!write_refusal(-ret))
			return fail(ctx, ret, "encoded write");
	}
	return write_decoded(ctx, fd, ew, decoded);
}

static int rcv_encoded_write(const char *path,
			     const struct stream_encoded_write *ew, void *arg)
{
	struct receive_ctx *ctx = arg;
	bool decoded = false;
	const char *why;
	ssize_t n;
	int fd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_ENCODED_WRITE, path, NULL);
	if (ew->encryption != BTRFS_ENCODED_IO_ENCRYPTION_NONE)
		return fail(ctx, EOPNOTSUPP, "encrypted extent");
	/* Before the file is opened: nothing is written for a bad payload. */
	ret = payload_check(ew->compression, ew->data, ew->len,
			    ew->unencoded_len, &why);
	if (ret)
		return fail(ctx, ret, why);
	if (ctx->opts.verify &&
	    ew->compression != BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		n = decode_extent(ctx, ew, true);
		if (n < 0)
			return n;
		decoded = true;
	}
	fd = write_fd_lifted(ctx, path);
	if (fd < 0)
		return fd;
	ret = apply_encoded_write(ctx, fd, ew, decoded);
	if (ret)
		return ret;
	ctx->stats.data_bytes += ew->unencoded_file_len;
	return zero_inline_tail(ctx, fd, ew);
}

static int rcv_enable_verity(const char *path, uint8_t algorithm,
			     uint32_t block_size, const void *salt,
			     size_t salt_len, const void *sig, size_t sig_len,
			     void *arg)
{
	struct receive_ctx *ctx = arg;
	struct fsverity_enable_arg va = {
		.version = 1,
		.hash_algorithm = algorithm,
		.block_size = block_size,
		.salt_size = salt_len,
		.salt_ptr = (uintptr_t)salt,
		.sig_size = sig_len,
		.sig_ptr = (uintptr_t)sig,
	};
	int fd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_ENABLE_VERITY, path, NULL);
	/* fs-verity refuses a file that is open for writing. */
	ret = rcv_pending_flush(ctx)	      ?:
		      rcv_write_fd_close(ctx) ?:
		      rcv_path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	fd = rcv_path_open_regular_beneath(ctx, ctx->subvol_fd, path, O_RDONLY);
	if (fd < 0)
		return fd;
	ret = ioctl(fd, FS_IOC_ENABLE_VERITY, &va) ? -errno : 0;
	close(fd);
	if (ret == -EOPNOTSUPP || ret == -ENOTTY)
		return fail(
			ctx, ret,
			"fs-verity is not supported by this kernel or filesystem");
	if (ret)
		return fail(ctx, ret, "enable fs-verity");
	return 0;
}

const struct stream_ops rcv_apply_ops = {
	.resume = rcv_resume,
	.applied = rcv_resume_applied,
	.subvol = rcv_subvol,
	.snapshot = rcv_snapshot,
	.mkfile = rcv_mkfile,
	.mkdir = rcv_mkdir,
	.mknod = rcv_mknod,
	.mkfifo = rcv_mkfifo,
	.mksock = rcv_mksock,
	.symlink = rcv_symlink,
	.rename = rcv_rename,
	.link = rcv_link,
	.unlink = rcv_unlink,
	.rmdir = rcv_rmdir,
	.set_xattr = rcv_set_xattr,
	.remove_xattr = rcv_remove_xattr,
	.write = rcv_write,
	.clone = rcv_clone,
	.truncate = rcv_truncate,
	.chmod = rcv_chmod,
	.chown = rcv_chown,
	.utimes = rcv_utimes,
	.update_extent = rcv_update_extent,
	.fallocate = rcv_fallocate,
	.fileattr = rcv_fileattr,
	.encoded_write = rcv_encoded_write,
	.enable_verity = rcv_enable_verity,
	.end = rcv_end,
};
