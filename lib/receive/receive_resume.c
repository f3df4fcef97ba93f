// SPDX-License-Identifier: GPL-2.0
/*
 * receive -s: a subvolume received so that a stream which stops short can
 * be resumed (resume.h).
 *
 * DEST may be writable by other users, so nothing of this lives at a name
 * of DEST that they could make, rename onto or read: the working state is
 * in a directory of DEST's, .encio-receive.XXXXXX, that only root can
 * have made (owned by root, mode 0700, marked with a trusted xattr), and
 * in it one directory per subvolume NAME being received:
 *
 *   lock      held (flock) for the whole receive of NAME, with its pid
 *   work      the working subvolume; only its END gives it NAME in DEST
 *   ckpt.SEQ  checkpoints: read-only snapshots of it
 *   record    the resume point and what it is to be resumed from
 *   reserve   room for the record, given back when DEST is full
 *   new       a plain receive's subvolume (no -s), private as "work" is
 *             until its END, which gives it NAME
 *
 * Every so much stream or time, after a command, the receive takes a
 * checkpoint (a snapshot flushes the data written before it and commits it
 * with the transaction), then writes the record, whole and flushed, before
 * the checkpoint before is deleted. The record holds the resume point and
 * what the receive keeps for the subvolume's END (the flags and inherited
 * xattrs set last, the root's times), by inode number and generation,
 * which a snapshot keeps. So whatever stops the receive, a crash too, the
 * record names a checkpoint that holds exactly what the stream made up to
 * its point.
 *
 * A stream that stopped in a read (EOF, a broken pipe, a signal between
 * two commands) leaves the working subvolume itself, synced and made
 * read-only, as what the record names: the resume goes on in it, so the
 * subvolume received has the Parent UUID an uncut receive gives; so does
 * a command that failed for want of space (failed_whole()). After another
 * failed command the last checkpoint is kept and the working subvolume
 * deleted: what it has past the checkpoint is not known to be whole.
 *
 * A resumed stream begins with ENCIO_RESUME: the point is checked against
 * the record, and what the record names against its UUID and ctransid; a
 * checkpoint is snapshotted as the new working subvolume, and the stream
 * goes on from there.
 *
 * Only root can make anything in the private directory, and the lock says
 * that no receive is using what is in NAME's: there, under the lock, what
 * a killed receive left is deleted whatever it is. Everything else is
 * deleted by the id and UUID this run or the record knows. A partial not
 * to be resumed goes the same way, under its lock (receive --abort); a
 * plain receive that gives NAME its subvolume drops NAME's, stale. The
 * directories and the lock are receive_state.c's; the checkpoints, the
 * record and the resume are this file's.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/crc32c.h"
#include "base/fsutil.h"
#include "base/pack.h"
#include "fs/received_mark.h"
#include "receive/receive_internal.h"

#define RECORD_MAGIC "encio-resume-record-3"
#define CHECKPOINT_BYTES (1ULL << 30)
#define CHECKPOINT_SECONDS 10.0
/* a record past this is no record of ours */
#define RECORD_MAX (64 * 1024 * 1024)

/*
 * The record, in memory: the point and what it is resumed from, a
 * checkpoint (@seq) or, @parked, the working subvolume itself.
 */
struct record {
	struct resume_point point;
	uint64_t seq;
	bool parked;
	uint8_t base_uuid[BTRFS_UUID_SIZE];
	uint64_t base_ctransid;
	uint8_t *state; /* what the END needs, packed (see rcv_flags_state_pack()) */
	size_t state_len;
};

static int record_write(struct receive_ctx *ctx, const struct record *rec)
{
	uint8_t point[RESUME_POINT_PACKED_MAX];
	int dir = ctx->part.name_fd;
	struct pack_buf b = { 0 };
	uint32_t crc;
	int fd, ret = 0;

	pack_put(&b, RECORD_MAGIC, sizeof(RECORD_MAGIC));
	pack_put(&b, point, resume_point_pack(&rec->point, point));
	pack_u64(&b, rec->seq);
	pack_u64(&b, rec->parked);
	pack_put(&b, rec->base_uuid, BTRFS_UUID_SIZE);
	pack_u64(&b, rec->base_ctransid);
	if (rec->state)
		pack_put(&b, rec->state, rec->state_len);
	else
		ret = rcv_flags_state_pack(ctx, &b);
	crc = htole32(crc32c(0, b.p, b.len));
	pack_put(&b, &crc, sizeof(crc));
	if (!ret && b.failed)
		ret = -ENOMEM;
	if (ret) {
		free(b.p);
		return ret;
	}
	/* one a killed receive left half written */
	unlinkat(dir, RECORD_NEW, 0);
	fd = openat(dir, RECORD_NEW,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(b.p);
		return -errno;
	}
	ret = pwrite_all(fd, b.p, b.len, 0);
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	free(b.p);
	if (!ret && renameat(dir, RECORD_NEW, dir, RECORD_NAME))
		ret = -errno;
	if (!ret && fsync(dir))
		ret = -errno;
	if (ret)
		unlinkat(dir, RECORD_NEW, 0);
	return ret;
}

/* The record in NAME's directory @dir; rec->state to be freed. */
static int record_read(int dir, const char *final, struct record *rec)
{
	const uint8_t *uuid;
	uint8_t *data = NULL;
	struct pack_reader r;
	struct stat st;
	uint32_t crc;
	size_t used;
	int fd, ret;

	memset(rec, 0, sizeof(*rec));
	fd = openat(dir, RECORD_NAME,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 8 ||
	    st.st_size > RECORD_MAX || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return -EINVAL;
	}
	data = malloc((size_t)st.st_size);
	ret = data ? pread_all(fd, data, (size_t)st.st_size, 0) : -ENOMEM;
	close(fd);
	if (!ret) {
		memcpy(&crc, data + st.st_size - 4, sizeof(crc));
		if (le32toh(crc) != crc32c(0, data, (size_t)st.st_size - 4) ||
		    memcmp(data, RECORD_MAGIC, sizeof(RECORD_MAGIC)))
			ret = -EINVAL;
	}
	r.p = data + sizeof(RECORD_MAGIC);
	r.len = (size_t)st.st_size - 4 - sizeof(RECORD_MAGIC);
	r.bad = false;
	if (!ret && resume_point_unpack(r.p, r.len, &rec->point, &used))
		ret = -EINVAL;
	if (!ret) {
		unpack_bytes(&r, used);
		rec->seq = unpack_u64(&r);
		rec->parked = unpack_u64(&r) != 0;
		uuid = unpack_bytes(&r, BTRFS_UUID_SIZE);
		if (uuid)
			memcpy(rec->base_uuid, uuid, BTRFS_UUID_SIZE);
		rec->base_ctransid = unpack_u64(&r);
		if (r.bad || strcmp(rec->point.name, final))
			ret = -EINVAL;
	}
	if (!ret) {
		rec->state = malloc(r.len ? r.len : 1);
		if (!rec->state)
			ret = -ENOMEM;
		else
			memcpy(rec->state, r.p, r.len);
		rec->state_len = r.len;
	}
	free(data);
	return ret;
}

static void ckpt_name(char *out, uint64_t seq)
{
	snprintf(out, NAME_MAX + 1, CKPT_PREFIX "%llu",
		 (unsigned long long)seq);
}

/*
 * What @rec resumes from, opened in NAME's directory @dir and checked: a
 * read-only subvolume, of the record's UUID and ctransid.
 */
static int base_open(int dir, const struct record *rec,
		     struct btrfs_util_subvolume_info *info)
{
	char name[NAME_MAX + 1] = WORK_NAME;
	int fd;

	if (!rec->parked)
		ckpt_name(name, rec->seq);
	fd = subvol_root_openat(dir, name, info);
	if (fd < 0)
		return fd == -ENOTDIR ? -ESTALE : fd;
	if (memcmp(info->uuid, rec->base_uuid, BTRFS_UUID_SIZE) ||
	    info->ctransid != rec->base_ctransid ||
	    !(info->flags & BTRFS_ROOT_SUBVOL_RDONLY)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The subvolume's id and UUID, open at @fd. */
static int subvol_identity(int fd, struct btrfs_util_subvolume_info *info)
{
	return btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, info));
}

static int take_checkpoint(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;
	struct btrfs_util_subvolume_info info;
	struct record rec = { .point = rs->point, .seq = rs->ckpt_seq + 1 };
	int dir = ctx->part.name_fd;
	char name[NAME_MAX + 1];
	enum btrfs_util_error err;
	int fd, ret;

	ckpt_name(name, rec.seq);
	/* the name may hold one a crash left before its record was written */
	ret = rcv_pending_flush(ctx) ?: rcv_drop_subvol(dir, name, NULL, 0);
	if (ret)
		return ret;
	err = btrfs_util_create_snapshot_fd2(
		ctx->subvol_fd, dir, name, BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY,
		NULL, NULL);
	if (err)
		return btrfsutil_errno(err);
	fd = openat(dir, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = subvol_identity(fd, &info);
	close(fd);
	if (ret)
		return ret;
	memcpy(rec.base_uuid, info.uuid, BTRFS_UUID_SIZE);
	rec.base_ctransid = info.ctransid;
	ret = record_write(ctx, &rec);
	if (ret) {
		rcv_drop_subvol(dir, name, info.uuid, info.id);
		return ret;
	}
	if (rs->ckpt_id) {
		ckpt_name(name, rs->ckpt_seq);
		rcv_drop_subvol(dir, name, rs->ckpt_uuid, rs->ckpt_id);
	}
	rs->ckpt_seq = rec.seq;
	rs->ckpt_id = info.id;
	memcpy(rs->ckpt_uuid, info.uuid, BTRFS_UUID_SIZE);
	rs->ckpt_pos = rs->point.position;
	rs->ckpt_time = clock_now();
	ctx->stats.checkpoints++;
	return 0;
}

static int checkpoint(struct receive_ctx *ctx)
{
	int ret = take_checkpoint(ctx);

	return ret ? fail(ctx, ret, "take a checkpoint (receive -s)") : 0;
}

/*
 * Room for the record where the receive runs out of space: a file of
 * RESERVE_BYTES in NAME's directory, made when the receive of NAME starts
 * (if there is room), removed to write the record when nothing else can.
 */
#define RESERVE_BYTES (1024 * 1024)

static void reserve_make(struct receive_ctx *ctx)
{
	int fd;

	unlinkat(ctx->part.name_fd, RESERVE_NAME, 0);
	fd = openat(ctx->part.name_fd, RESERVE_NAME,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (fallocate(fd, 0, 0, RESERVE_BYTES))
		unlinkat(ctx->part.name_fd, RESERVE_NAME, 0);
	close(fd);
}

/* The reserve given back, its space free once the transaction commits. */
static int reserve_release(struct receive_ctx *ctx)
{
	if (unlinkat(ctx->part.name_fd, RESERVE_NAME, 0) ||
	    syncfs(ctx->part.name_fd))
		return -errno;
	return 0;
}

/*
 * The stream stopped between two commands: the working subvolume, synced
 * and made read-only, is what the record names from now on.
 */
static int park(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;
	struct btrfs_util_subvolume_info info;
	struct record rec = { .point = rs->point,
			      .seq = rs->ckpt_seq,
			      .parked = true };
	enum btrfs_util_error err;
	char name[NAME_MAX + 1];
	int ret;

	ret = rcv_pending_flush(ctx) ?: rcv_write_fd_close(ctx);
	if (ret)
		return ret;
	if (syncfs(ctx->subvol_fd))
		return -errno;
	err = btrfs_util_set_subvolume_read_only_fd(ctx->subvol_fd, true);
	if (err)
		return btrfsutil_errno(err);
	ret = subvol_identity(ctx->subvol_fd, &info);
	if (!ret) {
		memcpy(rec.base_uuid, info.uuid, BTRFS_UUID_SIZE);
		rec.base_ctransid = info.ctransid;
		ret = record_write(ctx, &rec);
		if (ret == -ENOSPC && !reserve_release(ctx))
			ret = record_write(ctx, &rec);
	}
	if (ret) {
		btrfs_util_set_subvolume_read_only_fd(ctx->subvol_fd, false);
		return ret;
	}
	if (rs->ckpt_id) {
		ckpt_name(name, rs->ckpt_seq);
		rcv_drop_subvol(ctx->part.name_fd, name, rs->ckpt_uuid,
				rs->ckpt_id);
	}
	rs->ckpt_id = 0;
	return 0;
}

/* The working subvolume this run made or resumed in, open at subvol_fd. */
static void drop_work(struct receive_ctx *ctx)
{
	struct btrfs_util_subvolume_info info;

	if (!subvol_identity(ctx->subvol_fd, &info))
		rcv_drop_subvol(ctx->part.name_fd, WORK_NAME, info.uuid,
				info.id);
}

static int refuse_busy(struct receive_ctx *ctx, const char *name, pid_t holder)
{
	snprintf(
		ctx->why_buf, sizeof(ctx->why_buf),
		"another encio receive (pid %d) is receiving %s: wait for it to end or stop it",
		(int)holder, name);
	return fail(ctx, EBUSY, ctx->why_buf);
}

/* NAME's directory of the receive, locked; made with @create. */
static int part_open(struct receive_ctx *ctx, const char *name, bool create)
{
	pid_t holder;
	int ret;

	rcv_pd_close(ctx->dest_fd, &ctx->part, false);
	rcv_pd_init(&ctx->part);
	snprintf(ctx->part.name, sizeof(ctx->part.name), "%s", name);
	ret = rcv_pd_open_locked(ctx->dest_fd, &ctx->part, create, &holder);
	if (ret == -EBUSY)
		return refuse_busy(ctx, name, holder);
	if (ret == -ENOENT && !create)
		return fail(
			ctx, ENOENT,
			"no partial receive of this subvolume here to resume");
	return ret ? fail(ctx, ret,
			  "make the directory of the partial receive") :
		     0;
}

int rcv_resume_subvol_begin(struct receive_ctx *ctx, const char *name,
			    char *made, int *dir)
{
	struct stat st;
	int ret;

	*dir = ctx->dest_fd;
	snprintf(made, NAME_MAX + 1, "%s", name);
	ctx->stats.partial_refused[0] = '\0';
	ret = part_open(ctx, name, true);
	if (ret)
		return ret;
	/* under the lock: a receive of NAME that held it gave it its name */
	if (!fstatat(ctx->dest_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return fail(ctx, EEXIST, "create the subvolume");
	memset(&ctx->rs, 0, sizeof(ctx->rs));
	snprintf(ctx->rs.final, sizeof(ctx->rs.final), "%s", name);
	*dir = ctx->part.name_fd;
	if (!ctx->opts.resumable) {
		/* a partial kept goes once this one has NAME */
		ret = rcv_drop_subvol(ctx->part.name_fd, PLACE_NAME, NULL, 0);
		if (ret)
			return fail(ctx, -ret, "create the subvolume");
		snprintf(made, NAME_MAX + 1, PLACE_NAME);
		ctx->placing = true;
		return 0;
	}
	if (rcv_pd_has_record(&ctx->part)) {
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "a partial receive of it is kept (in %s/%s)",
			 ctx->part.state_name, name);
		snprintf(ctx->stats.partial_refused,
			 sizeof(ctx->stats.partial_refused), "%s", name);
		rcv_pd_close(ctx->dest_fd, &ctx->part, false);
		return fail(ctx, EEXIST, ctx->why_buf);
	}
	/* what a killed receive left without a record */
	rcv_pd_clear(&ctx->part);
	reserve_make(ctx);
	snprintf(made, NAME_MAX + 1, WORK_NAME);
	return 0;
}

void rcv_resume_subvol_identity(struct receive_ctx *ctx, const uint8_t *uuid,
				uint64_t ctransid, const uint8_t *parent_uuid,
				uint64_t parent_ctransid)
{
	struct resume_point *p = &ctx->rs.point;

	if (!ctx->opts.resumable)
		return;
	snprintf(p->name, sizeof(p->name), "%s", ctx->rs.final);
	memcpy(p->uuid, uuid, BTRFS_UUID_SIZE);
	p->ctransid = ctransid;
	if (parent_uuid)
		memcpy(p->parent_uuid, parent_uuid, BTRFS_UUID_SIZE);
	p->parent_ctransid = parent_ctransid;
	p->version = ctx->reader->version;
	ctx->rs.active = true;
}

/*
 * The subvolume @from of NAME's directory (@fd: its root) renamed to NAME
 * in DEST; the append-only or immutable its root has, which refuse that,
 * lifted for it, and DEST's (a copy of SRC's directory in a move) where
 * they refuse it.
 */
static int place_subvol(struct receive_ctx *ctx, int fd, const char *from)
{
	return inode_flags_lifted_rename_self(fd, ctx->part.name_fd, from,
					      ctx->dest_fd, ctx->rs.final);
}

/* Once marked received, before read-only: the subvolume gets its name. */
int rcv_resume_subvol_finish(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;
	const char *from = ctx->placing ? PLACE_NAME : WORK_NAME;
	struct stat st, at;
	int ret;

	if (!ctx->placing && (!ctx->opts.resumable || !rs->active))
		return 0;
	/* the working subvolume is the one received: the same device */
	if (fstat(ctx->subvol_fd, &st) ||
	    fstatat(ctx->part.name_fd, from, &at, AT_SYMLINK_NOFOLLOW))
		return fail(ctx, errno, "give the subvolume its name");
	if (st.st_dev != at.st_dev || st.st_ino != at.st_ino)
		return fail(ctx, ESTALE, "give the subvolume its name");
	ret = place_subvol(ctx, ctx->subvol_fd, from);
	if (ret)
		return fail(ctx, -ret, "give the subvolume its name");
	snprintf(ctx->subvol_name, sizeof(ctx->subvol_name), "%s", rs->final);
	/* a plain receive's, under the lock: the partial kept is stale */
	if (ctx->placing && rcv_pd_has_record(&ctx->part) &&
	    ctx->events.partial_dropped)
		ctx->events.partial_dropped(rs->final, ctx->events.arg);
	ctx->placing = false;
	rs->active = false;
	rs->placed = true;
	return 0;
}

/*
 * Once read-only: the partial goes, its record first, so that a kill
 * from here on leaves no record naming a checkpoint gone. Killed before,
 * the record and the subvolume at its name are both there (see
 * receive_resume_token()).
 */
void rcv_resume_subvol_done(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;
	char name[NAME_MAX + 1];

	if (!rs->placed)
		return;
	rs->placed = false;
	if (!unlinkat(ctx->part.name_fd, RECORD_NAME, 0))
		fsync(ctx->part.name_fd);
	if (rs->ckpt_id) {
		ckpt_name(name, rs->ckpt_seq);
		rcv_drop_subvol(ctx->part.name_fd, name, rs->ckpt_uuid,
				rs->ckpt_id);
	}
	rcv_pd_close(ctx->dest_fd, &ctx->part, true);
	rs->ckpt_id = 0;
}

void rcv_resume_subvol_leave(struct receive_ctx *ctx)
{
	int fd;

	if (!ctx->placing)
		return;
	ctx->placing = false;
	fd = ctx->opts.drop_unfinished ?
		     -1 :
		     openat(ctx->part.name_fd, PLACE_NAME,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ctx->opts.drop_unfinished || place_subvol(ctx, fd, PLACE_NAME))
		rcv_drop_subvol(ctx->part.name_fd, PLACE_NAME, NULL, 0);
	if (fd >= 0)
		close(fd);
	/* a partial kept of NAME stays: this one did not get NAME */
	rcv_pd_close(ctx->dest_fd, &ctx->part, !rcv_pd_has_record(&ctx->part));
}

int rcv_resume_applied(const struct stream_cmd *cmd, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct resume_state *rs = &ctx->rs;
	uint64_t every = ctx->opts.checkpoint_bytes ?: CHECKPOINT_BYTES;
	bool first;

	if (!rs->active || ctx->subvol_fd < 0 || ctx->subvol_errors)
		return 0;
	first = cmd->type == BTRFS_SEND_C_SUBVOL ||
		cmd->type == BTRFS_SEND_C_SNAPSHOT;
	if (cmd->type == STREAM_C_ENCIO_RESUME) {
		rs->base = ctx->reader->offset - rs->point.position;
		return 0;
	}
	stream_point_add(&rs->point, &rs->base, cmd, ctx->reader->offset);
	if (first && ctx->opts.checkpoint_late)
		rs->ckpt_time = clock_now();
	else if (first || rs->point.position - rs->ckpt_pos >= every ||
		 clock_now() - rs->ckpt_time >= CHECKPOINT_SECONDS)
		return checkpoint(ctx);
	return 0;
}

/*
 * A command that failed for want of space changed nothing the resume does
 * not do again: btrfs reserves what an operation needs before it makes
 * it, and what encio's commands do in several steps (a WRITE's writes, a
 * CLONE's ranges) gives the same bytes done twice. Not so a node made
 * late for an earlier command (rcv_pending_flush()): that command would
 * be taken as applied.
 */
static bool failed_whole(struct receive_ctx *ctx, int err)
{
	return err == ENOSPC && ctx->opts.keep_on_enospc &&
	       !ctx->pending.failed;
}

void rcv_resume_stopped(struct receive_ctx *ctx, bool read_failed, int err)
{
	struct resume_state *rs = &ctx->rs;
	bool cut = ctx->placing && read_failed;
	struct stat st;
	bool kept;

	rcv_resume_subvol_leave(ctx);
	if (cut && !fstatat(ctx->dest_fd, rs->final, &st, AT_SYMLINK_NOFOLLOW))
		snprintf(ctx->stats.left_unfinished,
			 sizeof(ctx->stats.left_unfinished), "%s", rs->final);
	if (!ctx->opts.resumable || !rs->active || ctx->subvol_fd < 0)
		return;
	if ((read_failed || failed_whole(ctx, err)) && !ctx->subvol_errors &&
	    !park(ctx)) {
		kept = true;
	} else {
		kept = rs->ckpt_seq != 0;
		close_fd(&ctx->write_fd);
		drop_work(ctx);
	}
	rs->active = false;
	close_fd(&ctx->write_fd);
	rcv_subvol_close(ctx);
	if (kept)
		snprintf(ctx->stats.partial_kept,
			 sizeof(ctx->stats.partial_kept), "%s", rs->final);
}

void rcv_resume_release(struct receive_ctx *ctx)
{
	rcv_resume_subvol_leave(ctx);
	if (ctx->part.name_fd >= 0)
		rcv_pd_close(ctx->dest_fd, &ctx->part,
			     ctx->part.lock_fd >= 0 &&
				     !rcv_pd_has_record(&ctx->part));
	rcv_pd_close(ctx->dest_fd, &ctx->part, false);
}

/*
 * A parked working subvolume @base goes on as it is: a checkpoint of it
 * first, recorded, so that a crash from now on leaves one that did not
 * change since. @rec and @info then name that checkpoint.
 */
static int unpark(struct receive_ctx *ctx, int base, struct record *rec,
		  struct btrfs_util_subvolume_info *info)
{
	int dir = ctx->part.name_fd;
	char name[NAME_MAX + 1];
	enum btrfs_util_error err;
	int fd, ret;

	rec->seq++;
	rec->parked = false;
	ckpt_name(name, rec->seq);
	ret = rcv_drop_subvol(dir, name, NULL, 0);
	if (ret)
		return fail(ctx, ret, "take a checkpoint (receive -s)");
	err = btrfs_util_create_snapshot_fd2(
		base, dir, name, BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY, NULL,
		NULL);
	if (err)
		return fail(ctx, btrfsutil_errno(err),
			    "take a checkpoint (receive -s)");
	fd = openat(dir, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	ret = fd < 0 ? -errno : subvol_identity(fd, info);
	if (fd >= 0)
		close(fd);
	if (!ret) {
		memcpy(rec->base_uuid, info->uuid, BTRFS_UUID_SIZE);
		rec->base_ctransid = info->ctransid;
		ret = record_write(ctx, rec);
	}
	if (ret)
		return fail(ctx, ret, "take a checkpoint (receive -s)");
	err = btrfs_util_set_subvolume_read_only_fd(base, false);
	return err ? fail(ctx, btrfsutil_errno(err),
			  "make the partial subvolume writable") :
		     0;
}

/* The checkpoint open at @base, snapshotted as the working subvolume. */
static int work_from(struct receive_ctx *ctx, int base)
{
	int dir = ctx->part.name_fd;
	enum btrfs_util_error err;
	int ret;

	ret = rcv_drop_subvol(dir, WORK_NAME, NULL, 0);
	if (!ret) {
		err = btrfs_util_create_snapshot_fd2(base, dir, WORK_NAME, 0,
						     NULL, NULL);
		ret = btrfsutil_errno(err);
	}
	return ret ? fail(ctx, ret, "snapshot the partial subvolume") : 0;
}

/* What @rec names, the working subvolume from now on. */
static int resume_from(struct receive_ctx *ctx, const struct record *rec)
{
	struct btrfs_util_subvolume_info info;
	struct record from = *rec;
	uint64_t root;
	int base, ret;

	base = base_open(ctx->part.name_fd, rec, &info);
	if (base == -ESTALE || base == -ENOENT)
		return fail(
			ctx, ESTALE,
			"the partial changed since its record: receive the whole stream again");
	if (base < 0)
		return fail(ctx, base, "open the partial subvolume");
	ret = rec->parked ? unpark(ctx, base, &from, &info) :
			    work_from(ctx, base);
	close(base);
	if (ret)
		return ret;
	ret = rcv_subvol_start_at(ctx, ctx->part.name_fd, WORK_NAME,
				  rec->point.uuid, rec->point.ctransid);
	if (ret)
		return ret;
	if (btrfs_util_subvolume_id_fd(ctx->subvol_fd, &root))
		return fail(ctx, errno ?: EIO, "look up the subvolume resumed");
	ret = rcv_flags_state_unpack(ctx, rec->state, rec->state_len, root);
	if (ret)
		return fail(ctx, ret, "the partial's record is not whole");
	ctx->rs.point = rec->point;
	ctx->rs.ckpt_seq = from.seq;
	ctx->rs.ckpt_id = info.id;
	memcpy(ctx->rs.ckpt_uuid, info.uuid, BTRFS_UUID_SIZE);
	ctx->rs.ckpt_pos = rec->point.position;
	ctx->rs.ckpt_time = clock_now();
	ctx->rs.active = true;
	reserve_make(ctx);
	return 0;
}

static bool same_point(const struct resume_point *a,
		       const struct resume_point *b)
{
	return !strcmp(a->name, b->name) &&
	       !memcmp(a->uuid, b->uuid, BTRFS_UUID_SIZE) &&
	       a->ctransid == b->ctransid &&
	       !memcmp(a->parent_uuid, b->parent_uuid, BTRFS_UUID_SIZE) &&
	       a->parent_ctransid == b->parent_ctransid &&
	       a->version == b->version && a->position == b->position &&
	       a->fingerprint == b->fingerprint && a->shape == b->shape &&
	       a->commands == b->commands && a->layout == b->layout;
}

int rcv_resume(const struct resume_point *p, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct record rec;
	int ret;

	begin_cmd(ctx, STREAM_C_ENCIO_RESUME, p->name, NULL);
	if (!ctx->opts.resumable)
		return fail(
			ctx, EPROTO,
			"a resumed stream (encio send -t) needs receive -s");
	if (ctx->subvol_fd >= 0)
		return fail(ctx, EPROTO,
			    "a resume point in the middle of a subvolume");
	if (!*p->name || strchr(p->name, '/') || !strcmp(p->name, ".") ||
	    !strcmp(p->name, ".."))
		return fail(ctx, EINVAL,
			    "the subvolume name is not a plain name");
	ret = part_open(ctx, p->name, false);
	if (ret)
		return ret;
	ret = record_read(ctx->part.name_fd, p->name, &rec);
	if (ret == -ENOENT)
		return fail(
			ctx, ENOENT,
			"no partial receive of this subvolume here to resume");
	if (ret)
		return fail(ctx, ret, "read the partial's record");
	memset(&ctx->rs, 0, sizeof(ctx->rs));
	snprintf(ctx->rs.final, sizeof(ctx->rs.final), "%s", p->name);
	if (!same_point(p, &rec.point))
		ret = fail(
			ctx, ESTALE,
			"the stream resumes another point than the partial's record");
	else
		ret = resume_from(ctx, &rec);
	free(rec.state);
	return ret;
}

bool receive_name_resumable(const char *name)
{
	return strlen(name) <= NAME_MAX;
}

int receive_partial_point(int dir_fd, const char *name,
			  struct resume_point *point)
{
	struct btrfs_util_subvolume_info info;
	struct partial_dir pd;
	struct record rec;
	int fd;

	rcv_pd_init(&pd);
	snprintf(pd.name, sizeof(pd.name), "%s", name);
	fd = rcv_pd_open(dir_fd, &pd, false);
	if (!fd) {
		fd = record_read(pd.name_fd, name, &rec);
		free(rec.state);
	}
	if (!fd) {
		fd = base_open(pd.name_fd, &rec, &info);
		if (fd == -ENOENT)
			fd = -ESTALE;
	}
	rcv_pd_close(dir_fd, &pd, false);
	if (fd < 0)
		return fd;
	close(fd);
	*point = rec.point;
	return 0;
}

/*
 * NAME's directory in DEST's private directory, what is in it and it
 * deleted under NAME's lock: what is there can only be root's (receive
 * -s's), the checkpoints and working subvolume by the id each has.
 */
static int partial_drop(int dir_fd, const char *name, pid_t *holder)
{
	struct partial_dir pd;
	int ret;

	rcv_pd_init(&pd);
	snprintf(pd.name, sizeof(pd.name), "%s", name);
	ret = rcv_pd_open_locked(dir_fd, &pd, false, holder);
	if (ret)
		return ret;
	rcv_pd_close(dir_fd, &pd, true);
	return 0;
}

int receive_partial_drop(int dir_fd, const char *name)
{
	pid_t holder;
	int ret = partial_drop(dir_fd, name, &holder);

	return ret == -ENOENT ? 0 : ret;
}

/*
 * The directory of @path (DEST/NAME) opened, NAME into @final: a plain
 * name, else "." or ".." would open the private directory or DEST itself
 * as NAME's directory.
 */
static int dest_of(const char *path, char *buf, size_t len, const char **final,
		   struct encio_error *e)
{
	char *slash;
	int dir_fd;

	if (snprintf(buf, len, "%s", path) >= (int)len)
		return encio_error_set(e, ENAMETOOLONG, "resolve", path, false,
				       0);
	while ((slash = strrchr(buf, '/')) && slash > buf && !slash[1])
		*slash = '\0';
	slash = strrchr(buf, '/');
	*final = slash ? slash + 1 : buf;
	if (!**final || !strcmp(*final, ".") || !strcmp(*final, ".."))
		return encio_error_set(
			e, EINVAL,
			"take DEST/NAME (NAME a subvolume's name) from", path,
			false, 0);
	if (slash == buf)
		dir_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (slash) {
		*slash = '\0';
		dir_fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		dir_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (dir_fd < 0)
		return encio_error_set(e, errno, "open the directory of", path,
				       false, 0);
	return dir_fd;
}

/*
 * Whether NAME in @dir_fd is the subvolume @point's partial became: a
 * receive killed after it gave the subvolume its name and before it
 * dropped the record leaves both. encio marks a subvolume received (its
 * own mark, naming the subvolume's UUID) only once complete. 0: not that
 * one; -EALREADY: it, read-only; -EROFS: it, still writable, so nothing
 * proves that no one changed it since (it is not made read-only here).
 */
static int partial_placed(int dir_fd, const char *name,
			  const struct resume_point *point)
{
	struct btrfs_util_subvolume_info info;
	int fd, ret = 0;

	fd = subvol_root_openat(dir_fd, name, &info);
	if (fd < 0)
		return 0;
	if (!memcmp(info.received_uuid, point->uuid, BTRFS_UUID_SIZE) &&
	    info.stransid == point->ctransid) {
		if (!(info.flags & BTRFS_ROOT_SUBVOL_RDONLY))
			ret = received_mark_names(fd, &info) ? -EROFS : 0;
		else if (received_mark_own(fd, &info))
			ret = -EALREADY;
	}
	close(fd);
	return ret;
}

int receive_resume_token(const char *path, char *token, struct encio_error *e)
{
	struct resume_point point;
	char dir[PATH_MAX];
	const char *final;
	pid_t holder;
	int dir_fd, ret;

	dir_fd = dest_of(path, dir, sizeof(dir), &final, e);
	if (dir_fd < 0)
		return dir_fd;
	ret = receive_partial_point(dir_fd, final, &point);
	if (!ret)
		ret = partial_placed(dir_fd, final, &point);
	if (ret == -EALREADY || ret == -EROFS)
		partial_drop(dir_fd, final, &holder);
	close(dir_fd);
	if (ret == -EROFS)
		return encio_error_set(
			e, EEXIST,
			"resume (the receive had given the subvolume its name when it stopped, before making it read-only: check it and make it read-only, or delete it and receive it again)",
			path, false, 0);
	if (ret == -EALREADY)
		return encio_error_set(
			e, EALREADY,
			"resume (the receive was complete when it stopped)",
			path, false, 0);
	if (ret == -ENOENT)
		return encio_error_set(e, ENOENT,
				       "find a partial receive (receive -s) of",
				       path, false, 0);
	if (ret == -ESTALE)
		return encio_error_set(
			e, ESTALE,
			"resume (the partial changed since its record)", path,
			false, 0);
	if (ret)
		return encio_error_set(e, -ret, "read the partial receive of",
				       path, false, 0);
	resume_token_encode(&point, token);
	return 0;
}

int receive_partial_abort(const char *path, pid_t *holder,
			  struct encio_error *e)
{
	char dir[PATH_MAX];
	const char *final;
	int dir_fd, ret;

	*holder = 0;
	dir_fd = dest_of(path, dir, sizeof(dir), &final, e);
	if (dir_fd < 0)
		return dir_fd;
	ret = partial_drop(dir_fd, final, holder);
	close(dir_fd);
	if (ret == -ENOENT)
		return encio_error_set(e, ENOENT,
				       "find a partial receive (receive -s) of",
				       path, false, 0);
	if (ret)
		return encio_error_set(e, -ret, "drop the partial receive of",
				       path, false, 0);
	return 0;
}

/* What receive_partials_each() walks with. */
struct partials_walk {
	int dest_fd;
	int (*fn)(const struct receive_partial *partial, void *arg);
	void *arg;
};

static int partial_of(const char *name, void *arg)
{
	struct partials_walk *w = arg;
	struct receive_partial p = { .name = name };
	struct resume_point point;

	p.err = receive_partial_point(w->dest_fd, name, &point);
	/* no record: a receive begun, or killed before its first one */
	if (p.err == -ENOENT)
		return 0;
	if (!p.err) {
		p.position = point.position;
		resume_token_encode(&point, p.token);
	}
	return w->fn(&p, w->arg);
}

int receive_partials_each(const char *dest,
			  int (*fn)(const struct receive_partial *partial,
				    void *arg),
			  void *arg, struct encio_error *e)
{
	struct partials_walk w = { .fn = fn, .arg = arg };
	int ret;

	w.dest_fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w.dest_fd < 0)
		return encio_error_set(e, errno, "open", dest, false, 0);
	ret = rcv_pd_names_each(w.dest_fd, partial_of, &w);
	close(w.dest_fd);
	return ret ? encio_error_set(e, -ret, "list the partial receives in",
				     dest, false, 0) :
		     0;
}
