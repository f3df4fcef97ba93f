// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the inode flags of FILEATTR, in the order copy sets them.
 *
 * nocow, compress, nocompress, noatime and nodump are set when FILEATTR
 * comes: encio send puts a file's right after its MKFILE, while it is
 * empty, the only time btrfs takes nocow. Sync, append-only and immutable
 * wait for the end of the subvolume, just before it is made read-only:
 * sync would make every later write synchronous, and the other two refuse
 * what later commands do to the inode (its data, times, xattrs, entries
 * of a directory). They are kept by file handle, which renames later in
 * the stream do not change. A flag DEST does not take is noted in the
 * receive's stats, for a warning.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "receive_internal.h"

/* The flags set at the end of the subvolume. */
#define FLAGS_LATE (FS_SYNC_FL | INODE_FLAGS_LATE)

static void refuse(struct receive_ctx *ctx, unsigned int flags)
{
	ctx->stats.flags_refused.flags |= flags;
}

void flags_forget(struct receive_ctx *ctx)
{
	free(ctx->late);
	ctx->late = NULL;
	ctx->nr_late = ctx->cap_late = 0;
}

/* Keep @flags of the inode open at @fd for flags_finish(). */
static int late_add(struct receive_ctx *ctx, int fd, unsigned int flags)
{
	struct late_flags *l, *grown;
	struct file_handle *fh;
	size_t cap;
	int mount_id;

	if (ctx->nr_late == ctx->cap_late) {
		cap = ctx->cap_late ? ctx->cap_late * 2 : 64;
		grown = realloc(ctx->late, cap * sizeof(*grown));
		if (!grown)
			return fail(ctx, ENOMEM, "keep the inode flags");
		ctx->late = grown;
		ctx->cap_late = cap;
	}
	l = &ctx->late[ctx->nr_late];
	fh = &l->handle.fh;
	fh->handle_bytes = LATE_HANDLE_MAX;
	if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH)) {
		/* no handle, no way back to the inode at the end */
		refuse(ctx, flags);
		return 0;
	}
	l->flags = flags;
	ctx->nr_late++;
	return 0;
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
	if (write_fd_holds(ctx, path))
		return ctx->write_fd;
	pfd = path_open_parent(ctx, path, last);
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
		path_of_fd(ctx, proc, sizeof(proc), opath, NULL);
		fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	}
	close(opath);
	*own = fd >= 0;
	return fd;
}

int flags_fileattr(struct receive_ctx *ctx, const char *path, uint64_t attr)
{
	unsigned int want = inode_flags_from_btrfs(attr);
	unsigned int late = want & FLAGS_LATE;
	bool own;
	int fd, ret;

	ret = pending_flush(ctx) ?: path_resolve(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	fd = open_inode(ctx, path, &own);
	if (fd == -EINVAL) {
		refuse(ctx, want);
		return 0;
	}
	if (fd < 0)
		return fd;
	/* Late flags not wanted go now: they would refuse what follows. */
	ret = inode_flags_set(fd, want, INODE_FLAGS_KEPT & ~late,
			      &ctx->stats.flags_refused);
	if (ret < 0) {
		ret = fail(ctx, ret, "set the inode flags");
		goto out;
	}
	/* btrfs leaves nocow off a file with data, and says nothing */
	refuse(ctx, want & ~late & ~inode_flags_get(fd));
	ret = late ? late_add(ctx, fd, late) : 0;
out:
	if (own)
		close(fd);
	return ret;
}

/*
 * A later FILEATTR of the same inode does not cancel what an earlier one
 * kept: senders send one per inode.
 */
int flags_finish(struct receive_ctx *ctx)
{
	struct late_flags *l;
	size_t i;
	int fd, ret;

	for (i = 0; i < ctx->nr_late; i++) {
		l = &ctx->late[i];
		fd = open_by_handle_at(ctx->subvol_fd, &l->handle.fh,
				       O_RDONLY | O_NOCTTY | O_CLOEXEC);
		/* removed later in the stream */
		if (fd < 0 && (errno == ESTALE || errno == ENOENT))
			continue;
		if (fd < 0 && errno == EPERM) {
			refuse(ctx, l->flags);
			continue;
		}
		if (fd < 0)
			return fail(ctx, errno,
				    "open an inode to set its flags");
		ret = inode_flags_set(fd, l->flags, FLAGS_LATE,
				      &ctx->stats.flags_refused);
		close(fd);
		if (ret < 0)
			return fail(ctx, ret, "set the inode flags");
	}
	flags_forget(ctx);
	return 0;
}
