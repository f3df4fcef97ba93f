// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: an inode's metadata as stream commands (xattrs, FILEATTR,
 * owner, mode, capabilities, times), in the order btrfs send gives them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/inode_flags.h"
#include "send/send_internal.h"

static int send_xattr(struct send_ctx *ctx, const char *path, const char *name)
{
	ssize_t vlen =
		lgetxattr(ctx->xattr_at, name, ctx->xattr_buf, XATTR_SIZE_MAX);

	if (vlen < 0)
		return errno == ENODATA ?
			       0 :
			       send_fail(ctx, errno, "read xattr", 0, false);
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_SET_XATTR);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_string(&ctx->w, BTRFS_SEND_A_XATTR_NAME, name);
	stream_put_bytes(&ctx->w, BTRFS_SEND_A_XATTR_DATA, ctx->xattr_buf,
			 vlen);
	return send_end_cmd(ctx);
}

/*
 * The entry's xattrs but file capabilities, which send_inode_meta() sends
 * after the owner (*@caps: the entry has them). @st: the source entry's,
 * which the read-ahead may know has none.
 */
static int send_xattrs(struct send_ctx *ctx, const char *path,
		       const struct stat *st, bool *caps)
{
	char *names = NULL, *name;
	ssize_t len;
	int ret = 0;

	*caps = false;
	if (!meta_prefetch_has_xattrs(&ctx->prefetch, st))
		return 0;
	len = llistxattr(ctx->xattr_at, NULL, 0);
	if (len <= 0)
		return len < 0 && errno != ENOTSUP ?
			       send_fail(ctx, errno, "list xattrs", 0, false) :
			       0;
	names = malloc(len);
	if (!names) {
		ret = send_fail(ctx, ENOMEM, "list xattrs", 0, false);
		goto out;
	}
	len = llistxattr(ctx->xattr_at, names, len);
	if (len < 0) {
		ret = send_fail(ctx, errno, "list xattrs", 0, false);
		goto out;
	}
	for (name = names; name < names + len; name += strlen(name) + 1) {
		if (!strcmp(name, "security.capability")) {
			*caps = true;
			continue;
		}
		ret = send_xattr(ctx, path, name);
		if (ret)
			goto out;
	}
out:
	free(names);
	return ret;
}

/*
 * FILEATTR: the kept inode flags @flags of a regular file or directory
 * (@st), when it has some and the stream version has the command.
 */
static int send_fileattr(struct send_ctx *ctx, const char *path,
			 const struct stat *st, unsigned int flags)
{
	if (!flags || ctx->w.version < 2)
		return 0;
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_FILEATTR);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_FILEATTR,
		       inode_flags_to_btrfs(flags, S_ISREG(st->st_mode)));
	return send_end_cmd(ctx);
}

/*
 * A regular file's FILEATTR, right after its creation: nocow, which btrfs
 * takes only on an empty file, and compression decide how the receiver
 * stores the data. The file (@name in @dirfd, @st) is open at @fd, but
 * for a hard link's first name: that one is opened here (the data's open
 * reports what fails).
 */
int send_file_fileattr(struct send_ctx *ctx, int dirfd, int fd,
		       const char *name, const char *path,
		       const struct stat *st)
{
	unsigned int flags;
	struct stat opened;

	if (ctx->w.version < 2)
		return 0;
	if (fd >= 0)
		return send_fileattr(ctx, path, st, inode_flags_get(fd));
	fd = open_regular_at(dirfd, name, O_RDONLY | O_NOFOLLOW, 0, &opened);
	if (fd < 0)
		return 0;
	flags = opened.st_ino == st->st_ino && opened.st_dev == st->st_dev ?
			inode_flags_get(fd) :
			0;
	close(fd);
	return send_fileattr(ctx, path, st, flags);
}

/*
 * A directory's FILEATTR (@flags) first, then xattrs, owner before mode
 * (chown clears set-id bits), then file capabilities (chown clears them
 * too), times last: the order of btrfs send. The directory's flags come
 * after its entries, which would inherit its nocow and compression.
 */
int send_inode_meta(struct send_ctx *ctx, const char *path,
		    const struct stat *st, unsigned int flags)
{
	bool caps;
	int ret;

	ret = send_fileattr(ctx, path, st, flags);
	if (ret)
		return ret;
	ret = send_xattrs(ctx, path, st, &caps);
	if (ret)
		return ret;
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_CHOWN);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_UID, st->st_uid);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_GID, st->st_gid);
	ret = send_end_cmd(ctx);
	if (ret)
		return ret;
	if (!S_ISLNK(st->st_mode)) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_CHMOD);
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_MODE, st->st_mode & 07777);
		ret = send_end_cmd(ctx);
		if (ret)
			return ret;
	}
	if (caps) {
		ret = send_xattr(ctx, path, "security.capability");
		if (ret)
			return ret;
	}
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_UTIMES);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_timespec(&ctx->w, BTRFS_SEND_A_ATIME, &st->st_atim);
	stream_put_timespec(&ctx->w, BTRFS_SEND_A_MTIME, &st->st_mtim);
	stream_put_timespec(&ctx->w, BTRFS_SEND_A_CTIME, &st->st_ctim);
	return send_end_cmd(ctx);
}
