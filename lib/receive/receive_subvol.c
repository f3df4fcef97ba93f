// SPDX-License-Identifier: GPL-2.0
/*
 * receive: the subvolumes. SUBVOL creates one, SNAPSHOT snapshots its
 * parent, and END finishes it.
 *
 * A subvolume is marked received (received UUID, stransid) and made
 * read-only only at its END, after the inode flags kept for it were set
 * and syncfs() reported no error.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "fs/received_mark.h"
#include "receive/receive_internal.h"

static int check_name(struct receive_ctx *ctx, const char *name)
{
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strlen(name) > NAME_MAX)
		return fail(ctx, EINVAL,
			    "the subvolume name is not a plain name");
	return 0;
}

/* Sync, mark received, make read-only: only a complete subvolume. */
static int finish_subvol(struct receive_ctx *ctx)
{
	struct btrfs_ioctl_received_subvol_args rs;
	int ret;

	if (ctx->subvol_fd < 0)
		return 0;
	ctx->finishing = true;
	ret = rcv_pending_flush(ctx);
	if (ret)
		return ret;
	ret = rcv_write_fd_close(ctx);
	if (ret)
		return fail(ctx, ret, "close the last file written");
	ret = rcv_flags_finish(ctx);
	if (ret)
		return ret;
	if (ctx->root_times_kept && futimens(ctx->subvol_fd, ctx->root_times))
		return fail(ctx, errno, "set the times of the root directory");
	if (syncfs(ctx->subvol_fd))
		return fail(ctx, errno, "sync the filesystem");
	memset(&rs, 0, sizeof(rs));
	memcpy(rs.uuid, ctx->uuid, BTRFS_UUID_SIZE);
	rs.stransid = ctx->ctransid;
	ret = received_mark_set(ctx->subvol_fd, &rs);
	if (ret)
		return fail(ctx, ret, "set the received UUID");
	/* a read-only subvolume cannot move to another directory */
	ret = rcv_resume_subvol_finish(ctx);
	if (ret)
		return ret;
	ret = ctx->leave_writable ? 0 : received_mark_seal(ctx->subvol_fd, &rs);
	if (ret)
		return fail(ctx, ret, "make it read-only");
	rcv_resume_subvol_done(ctx);
	rcv_subvol_close(ctx);
	ctx->finishing = false;
	ctx->stats.subvols++;
	return 0;
}

/*
 * The subvolume before the next one of a stream of several: finished if
 * complete; one some commands failed in (-E) is left writable and not
 * received, as at its END, and the next one is received all the same.
 */
static int leave_subvol(struct receive_ctx *ctx)
{
	if (!ctx->subvol_errors)
		return finish_subvol(ctx);
	close_fd(&ctx->write_fd);
	rcv_subvol_close(ctx);
	rcv_resume_subvol_leave(ctx);
	ctx->subvol_errors = 0;
	return 0;
}

/*
 * SUBVOL or SNAPSHOT of *@name: the subvolume before it left, *@name the
 * one its caller gave (receive_set_name()) or the stream's, checked.
 */
static int subvol_cmd_begin(struct receive_ctx *ctx, int cmd, const char **name)
{
	if (ctx->given_name[0])
		*name = ctx->given_name;
	begin_cmd(ctx, cmd, *name, NULL);
	return leave_subvol(ctx) ?: check_name(ctx, *name);
}

/*
 * Where the subvolume @name is made (@made in @dir: see
 * rcv_resume_subvol_begin()), and the caller told it begins.
 */
static int subvol_place(struct receive_ctx *ctx, const char *name,
			const uint8_t *uuid, uint64_t ctransid,
			const uint8_t *parent_uuid, uint64_t parent_ctransid,
			char *made, int *dir)
{
	int ret = rcv_resume_subvol_begin(ctx, name, made, dir);

	if (!ret && ctx->events.subvol)
		ctx->events.subvol(name, uuid, ctransid, parent_uuid,
				   parent_ctransid, ctx->events.arg);
	return ret;
}

/*
 * A new subvolume's root takes the compression property and the nocow,
 * compress and nocompress flags of the directory it is made in (btrfs
 * passes them on): none of them the stream's, whose own come with its
 * commands. Dropped.
 */
static int root_uninherit(struct receive_ctx *ctx)
{
	struct inode_flags_refused ignored = { 0 };
	int ret;

	if (fremovexattr(ctx->subvol_fd, "btrfs.compression") &&
	    errno != ENODATA)
		return fail(
			ctx, errno,
			"drop the compression property the new subvolume took from its directory");
	ret = inode_flags_set(ctx->subvol_fd, 0,
			      FS_COMPR_FL | FS_NOCOMP_FL | FS_NOCOW_FL,
			      &ignored);
	return ret < 0 ?
		       fail(ctx, -ret,
			    "drop the flags the new subvolume took from its directory") :
		       0;
}

int rcv_subvol(const char *name, const uint8_t *uuid, uint64_t ctransid,
	       void *arg)
{
	struct receive_ctx *ctx = arg;
	char made[NAME_MAX + 1];
	enum btrfs_util_error err;
	int ret, dir;

	ret = subvol_cmd_begin(ctx, BTRFS_SEND_C_SUBVOL, &name) ?:
		      subvol_place(ctx, name, uuid, ctransid, NULL, 0, made,
				   &dir);
	if (ret)
		return ret;
	err = btrfs_util_create_subvolume_fd(dir, made, 0, NULL, NULL);
	if (err)
		return fail(ctx, btrfsutil_errno(err), "create the subvolume");
	rcv_resume_subvol_identity(ctx, uuid, ctransid, NULL, 0);
	return rcv_subvol_start_at(ctx, dir, made, uuid, ctransid) ?:
		       root_uninherit(ctx);
}

/*
 * The entry standing for subvolume @rel of the parent in its snapshot (an
 * empty directory numbered BTRFS_EMPTY_SUBVOL_DIR_OBJECTID), removed
 * without changing the times of the directory it is in.
 */
static int drop_stand_in(struct receive_ctx *ctx, const char *rel)
{
	struct stat st, dst;
	const char *name;
	int fd, ret = 0;

	fd = open_parent_resolve(ctx->subvol_fd, rel, O_RDONLY | O_DIRECTORY,
				 RESOLVE_IN_SUBVOL, &name);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISDIR(st.st_mode) ||
	    st.st_ino != BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		goto out;
	if (fstat(fd, &dst)) {
		ret = -errno;
		goto out;
	}
	ret = unlinkat(fd, name, AT_REMOVEDIR) ? -errno : 0;
	/* the directory append-only or immutable: lifted to the end */
	if (ret == -EPERM && rcv_flags_lift(ctx, rel, NULL) > 0)
		ret = unlinkat(fd, name, AT_REMOVEDIR) ? -errno : 0;
	if (!ret &&
	    futimens(fd, (struct timespec[2]){ dst.st_atim, dst.st_mtim }))
		ret = -errno;
out:
	close(fd);
	return ret;
}

/*
 * A snapshot of a parent that has subvolumes nested in it (a writable
 * subvolume's copy, with the others placed in it) holds an entry standing
 * for each. The stream's sender had none (btrfs send leaves them out, and
 * its differences never name them): removed, so that the snapshot is the
 * sender's and a directory that held one can be removed.
 */
static int drop_stand_ins(struct receive_ctx *ctx, int parent)
{
	char **nested;
	size_t i, nr;
	int ret = subvol_children(parent, &nested, &nr);

	if (ret)
		return fail(ctx, ret,
			    "list the subvolumes in the parent subvolume");
	for (i = 0; i < nr; i++) {
		if (!ret)
			ret = drop_stand_in(ctx, nested[i]);
		free(nested[i]);
	}
	free(nested);
	return ret ? fail(ctx, ret,
			  "remove what stands for a nested subvolume") :
		     0;
}

static int keep_root_times(struct receive_ctx *ctx)
{
	struct stat st;

	if (fstat(ctx->subvol_fd, &st))
		return fail(ctx, errno, "look at the new snapshot");
	ctx->root_times[0] = st.st_atim;
	ctx->root_times[1] = st.st_mtim;
	ctx->root_times_kept = true;
	return 0;
}

int rcv_snapshot(const char *name, const uint8_t *uuid, uint64_t ctransid,
		 const uint8_t *parent_uuid, uint64_t parent_ctransid,
		 void *arg)
{
	struct receive_ctx *ctx = arg;
	char made[NAME_MAX + 1];
	enum btrfs_util_error err;
	int ret, parent, dir;

	ret = subvol_cmd_begin(ctx, BTRFS_SEND_C_SNAPSHOT, &name);
	if (ret)
		return ret;
	parent = rcv_lookup_open_subvol_by_uuid(ctx, "parent", parent_uuid,
						parent_ctransid);
	if (parent < 0)
		return parent;
	ret = subvol_place(ctx, name, uuid, ctransid, parent_uuid,
			   parent_ctransid, made, &dir);
	if (ret) {
		close(parent);
		return ret;
	}
	err = btrfs_util_create_snapshot_fd2(parent, dir, made, 0, NULL, NULL);
	ret = btrfsutil_errno(err);
	if (ret) {
		close(parent);
		return fail(ctx, ret, "snapshot the parent subvolume");
	}
	ret = rcv_subvol_start_at(ctx, dir, made, uuid, ctransid) ?:
		      drop_stand_ins(ctx, parent)		  ?:
		      keep_root_times(ctx);
	close(parent);
	if (!ret)
		rcv_resume_subvol_identity(ctx, uuid, ctransid, parent_uuid,
					   parent_ctransid);
	return ret;
}

int rcv_end(void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_END, ctx->subvol_name, NULL);
	/*
	 * A subvolume some commands failed in (-E) is not complete: it is
	 * left writable and not received, and the receive ends with it, as
	 * btrfs receive's does.
	 */
	if (ctx->subvol_errors) {
		ret = rcv_pending_flush(ctx);
		if (ret)
			return ret;
		ctx->ended = true;
		return -ECANCELED;
	}
	ret = finish_subvol(ctx);
	if (ret || !ctx->opts.honor_end)
		return ret;
	/* Stops the reader; receive_run() tells this from a failure. */
	ctx->ended = true;
	return -ECANCELED;
}
