// SPDX-License-Identifier: GPL-2.0
/*
 * receive -s: a subvolume received so that a stream which stops short can
 * be resumed (resume.h).
 *
 * The subvolume is made under .NAME.encio-receiving, and only its END
 * gives it NAME. Every so much stream or time, after a command, the
 * receive takes a checkpoint: a writable snapshot of it,
 * .NAME.encio-partial.SEQ (a snapshot flushes the data written before it
 * and commits it with the transaction), then the record
 * .NAME.encio-partial.resume, written whole and flushed before the
 * checkpoint before it is deleted. The record holds the resume point
 * reached and what the receive keeps for the subvolume's END (the flags
 * and inherited xattrs set last, the root's times), by inode number and
 * generation, which a snapshot keeps. So whatever stops the receive, a
 * crash too, the record names a checkpoint that holds exactly what the
 * stream made up to its point.
 *
 * A stream that stopped in a read (EOF, a broken pipe, a signal between
 * two commands) gets a last checkpoint at the last command applied; one a
 * command failed in keeps the one before. The working subvolume is then
 * deleted: what it has past the checkpoint is not known to be whole.
 *
 * A resumed stream begins with ENCIO_RESUME: the point is checked against
 * the record, and the checkpoint against its UUID and ctransid (it must
 * not have changed); a new working subvolume is snapshotted from it, and
 * the stream goes on from there.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "fsutil.h"
#include "receive_internal.h"

#define WORK_SUFFIX ".encio-receiving"
#define PARTIAL_SUFFIX ".encio-partial"
#define RECORD_MAGIC "encio-resume-record-1"
#define CHECKPOINT_BYTES (1ULL << 30)
#define CHECKPOINT_SECONDS 10.0
/* a record past this is no record of ours */
#define RECORD_MAX (64 * 1024 * 1024)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int name_of(char *out, const char *name, const char *suffix,
		   uint64_t seq)
{
	int n = seq ? snprintf(out, NAME_MAX + 1, ".%s%s.%llu", name, suffix,
			       (unsigned long long)seq) :
		      snprintf(out, NAME_MAX + 1, ".%s%s", name, suffix);

	return n < 0 || n > NAME_MAX ? -ENAMETOOLONG : 0;
}

/* The record, in memory: the point and the checkpoint it was taken in. */
struct record {
	struct resume_point point;
	uint64_t seq;
	uint8_t ckpt_uuid[BTRFS_UUID_SIZE];
	uint64_t ckpt_ctransid;
	uint8_t *state; /* what the END needs, packed (see state_pack()) */
	size_t state_len;
};

struct buf {
	uint8_t *p;
	size_t len, cap;
	bool failed;
};

static void buf_put(struct buf *b, const void *data, size_t len)
{
	uint8_t *grown;
	size_t cap;

	if (b->failed)
		return;
	if (b->len + len > b->cap) {
		cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len)
			cap *= 2;
		grown = realloc(b->p, cap);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->p = grown;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void buf_u64(struct buf *b, uint64_t v)
{
	v = htole64(v);
	buf_put(b, &v, sizeof(v));
}

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
static int state_pack(struct receive_ctx *ctx, struct buf *b)
{
	uint64_t ino;
	uint32_t gen;
	size_t i;

	buf_u64(b, ctx->root_times_kept);
	for (i = 0; i < 2; i++) {
		buf_u64(b, (uint64_t)ctx->root_times[i].tv_sec);
		buf_u64(b, (uint64_t)ctx->root_times[i].tv_nsec);
	}
	buf_u64(b, ctx->nr_late);
	for (i = 0; i < ctx->nr_late; i++) {
		if (handle_ino(&ctx->late[i].handle, &ino, &gen))
			return -EINVAL;
		buf_u64(b, ino);
		buf_u64(b, gen);
		buf_u64(b, ctx->late[i].flags);
		buf_u64(b, ctx->late[i].mask);
	}
	buf_u64(b, ctx->nr_late_x);
	for (i = 0; i < ctx->nr_late_x; i++) {
		const struct late_xattr *x = &ctx->late_x[i];
		size_t name_len = strlen(x->name);

		if (handle_ino(&x->handle, &ino, &gen))
			return -EINVAL;
		buf_u64(b, ino);
		buf_u64(b, gen);
		buf_u64(b, name_len);
		buf_put(b, x->name, name_len);
		buf_u64(b, x->value ? x->len : UINT64_MAX);
		if (x->value)
			buf_put(b, x->value, x->len);
	}
	return b->failed ? -ENOMEM : 0;
}

struct reader {
	const uint8_t *p;
	size_t len;
	bool bad;
};

static uint64_t rd_u64(struct reader *r)
{
	uint64_t v = 0;

	if (r->len < sizeof(v)) {
		r->bad = true;
		return 0;
	}
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	r->len -= sizeof(v);
	return le64toh(v);
}

static const uint8_t *rd_bytes(struct reader *r, uint64_t len)
{
	const uint8_t *p = r->p;

	if (r->bad || r->len < len) {
		r->bad = true;
		return NULL;
	}
	r->p += len;
	r->len -= len;
	return p;
}

static int late_flags_unpack(struct receive_ctx *ctx, struct reader *r,
			     uint64_t root)
{
	uint64_t n = rd_u64(r), i, ino, gen;

	if (r->bad || n > r->len / 32)
		return -EINVAL;
	ctx->late = calloc(n ? n : 1, sizeof(*ctx->late));
	if (!ctx->late)
		return -ENOMEM;
	ctx->cap_late = n ? n : 1;
	for (i = 0; i < n; i++) {
		struct late_flags *l = &ctx->late[i];

		ino = rd_u64(r);
		gen = rd_u64(r);
		l->flags = (unsigned int)rd_u64(r);
		l->mask = (unsigned int)rd_u64(r);
		handle_make(&l->handle, ino, (uint32_t)gen, root);
	}
	ctx->nr_late = n;
	return r->bad ? -EINVAL : 0;
}

static int late_xattrs_unpack(struct receive_ctx *ctx, struct reader *r,
			      uint64_t root)
{
	uint64_t n = rd_u64(r), i, ino, gen, len;
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

		ino = rd_u64(r);
		gen = rd_u64(r);
		len = rd_u64(r);
		data = rd_bytes(r, len);
		if (!data || len > XATTR_NAME_MAX)
			return -EINVAL;
		memcpy(name, data, len);
		name[len] = '\0';
		x->name = flags_inherited_xattr(name);
		len = rd_u64(r);
		if (!x->name || r->bad)
			return -EINVAL;
		handle_make(&x->handle, ino, (uint32_t)gen, root);
		ctx->nr_late_x = i + 1;
		if (len == UINT64_MAX)
			continue;
		data = rd_bytes(r, len);
		if (!data || !(x->value = malloc(len ? len : 1)))
			return data ? -ENOMEM : -EINVAL;
		memcpy(x->value, data, len);
		x->len = len;
	}
	return 0;
}

/* The END's state back into @ctx, handles made for the subvolume @root. */
static int state_unpack(struct receive_ctx *ctx, const uint8_t *p, size_t len,
			uint64_t root)
{
	struct reader r = { .p = p, .len = len };
	size_t i;
	int ret;

	flags_forget(ctx);
	ctx->root_times_kept = rd_u64(&r) != 0;
	for (i = 0; i < 2; i++) {
		ctx->root_times[i].tv_sec = (time_t)rd_u64(&r);
		ctx->root_times[i].tv_nsec = (long)rd_u64(&r);
	}
	ret = late_flags_unpack(ctx, &r, root) ?:
		      late_xattrs_unpack(ctx, &r, root);
	if (!ret && (r.bad || r.len))
		ret = -EINVAL;
	return ret;
}

static int record_write(struct receive_ctx *ctx, const struct record *rec)
{
	uint8_t point[RESUME_POINT_PACKED_MAX];
	char name[NAME_MAX + 1], tmp[NAME_MAX + 1];
	struct buf b = { 0 };
	uint32_t crc;
	int fd, ret;

	buf_put(&b, RECORD_MAGIC, sizeof(RECORD_MAGIC));
	buf_put(&b, point, resume_point_pack(&rec->point, point));
	buf_u64(&b, rec->seq);
	buf_put(&b, rec->ckpt_uuid, BTRFS_UUID_SIZE);
	buf_u64(&b, rec->ckpt_ctransid);
	ret = state_pack(ctx, &b);
	crc = htole32(crc32c(0, b.p, b.len));
	buf_put(&b, &crc, sizeof(crc));
	if (!ret && b.failed)
		ret = -ENOMEM;
	if (!ret)
		ret = name_of(name, ctx->rs.final, PARTIAL_SUFFIX ".resume", 0);
	if (!ret)
		ret = name_of(tmp, ctx->rs.final, PARTIAL_SUFFIX ".resume-new",
			      0);
	if (ret) {
		free(b.p);
		return ret;
	}
	fd = openat(ctx->dest_fd, tmp,
		    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		free(b.p);
		return -errno;
	}
	ret = pwrite_all(fd, b.p, b.len, 0);
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	free(b.p);
	if (!ret && renameat(ctx->dest_fd, tmp, ctx->dest_fd, name))
		ret = -errno;
	if (!ret && fsync(ctx->dest_fd))
		ret = -errno;
	if (ret)
		unlinkat(ctx->dest_fd, tmp, 0);
	return ret;
}

/* The record of @final in @dir_fd; rec->state to be freed. -ENOENT: none. */
static int record_read(int dir_fd, const char *final, struct record *rec)
{
	char name[NAME_MAX + 1];
	const uint8_t *uuid;
	uint8_t *data = NULL;
	struct reader r;
	struct stat st;
	uint32_t crc;
	size_t used;
	int fd, ret;

	memset(rec, 0, sizeof(*rec));
	ret = name_of(name, final, PARTIAL_SUFFIX ".resume", 0);
	if (ret)
		return ret;
	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* ours only: another user could plant one naming a subvolume of theirs */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 8 ||
	    st.st_size > RECORD_MAX || st.st_uid != geteuid() ||
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
		rd_bytes(&r, used);
		rec->seq = rd_u64(&r);
		uuid = rd_bytes(&r, BTRFS_UUID_SIZE);
		if (uuid)
			memcpy(rec->ckpt_uuid, uuid, BTRFS_UUID_SIZE);
		rec->ckpt_ctransid = rd_u64(&r);
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

/*
 * The checkpoint @rec names, opened beneath @dir_fd and checked: its UUID
 * the record's, its ctransid not moved since (nothing changed it), once
 * what was written in it is committed.
 */
static int checkpoint_open(int dir_fd, const struct record *rec,
			   struct btrfs_util_subvolume_info *info)
{
	char name[NAME_MAX + 1];
	enum btrfs_util_error err;
	int fd, ret;

	ret = name_of(name, rec->point.name, PARTIAL_SUFFIX, rec->seq);
	if (ret)
		return ret;
	fd = openat2_resolve(dir_fd, name, O_RDONLY | O_DIRECTORY,
			     RESOLVE_CONFINED);
	if (fd < 0)
		return fd == -ENOENT ? -ENOENT : fd;
	/* a change not committed yet has not moved the ctransid */
	if (syncfs(fd)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	err = btrfs_util_subvolume_info_fd(fd, 0, info);
	if (err) {
		ret = btrfsutil_errno(err);
		close(fd);
		return ret;
	}
	if (memcmp(info->uuid, rec->ckpt_uuid, BTRFS_UUID_SIZE) ||
	    info->ctransid != rec->ckpt_ctransid) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* A subvolume of ours at @name in @dir_fd, deleted: none there is fine. */
static int drop_subvol_at(int dir_fd, const char *name)
{
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	int fd, ret = 0;

	fd = openat2_resolve(dir_fd, name, O_RDONLY | O_DIRECTORY,
			     RESOLVE_CONFINED);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	err = btrfs_util_subvolume_info_fd(fd, 0, &info);
	close(fd);
	if (err)
		return btrfsutil_errno(err);
	err = btrfs_util_delete_subvolume_by_id_fd(dir_fd, info.id);
	if (err)
		ret = btrfsutil_errno(err);
	return ret;
}

static int take_checkpoint(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;
	struct btrfs_util_subvolume_info info;
	struct record rec = { .point = rs->point, .seq = rs->ckpt_seq + 1 };
	char name[NAME_MAX + 1];
	enum btrfs_util_error err;
	uint64_t old_id = rs->ckpt_id;
	int fd, ret;

	/* the name may hold one a crash left before its record was written */
	ret = pending_flush(ctx)					?:
		      name_of(name, rs->final, PARTIAL_SUFFIX, rec.seq) ?:
		      drop_subvol_at(ctx->dest_fd, name);
	if (ret)
		return ret;
	err = btrfs_util_create_snapshot_fd2(ctx->subvol_fd, ctx->dest_fd, name,
					     0, NULL, NULL);
	if (err)
		return btrfsutil_errno(err);
	fd = openat2_resolve(ctx->dest_fd, name, O_RDONLY | O_DIRECTORY,
			     RESOLVE_CONFINED);
	if (fd < 0)
		return fd;
	err = btrfs_util_subvolume_info_fd(fd, 0, &info);
	close(fd);
	if (err)
		return btrfsutil_errno(err);
	memcpy(rec.ckpt_uuid, info.uuid, BTRFS_UUID_SIZE);
	rec.ckpt_ctransid = info.ctransid;
	ret = record_write(ctx, &rec);
	if (ret) {
		btrfs_util_delete_subvolume_by_id_fd(ctx->dest_fd, info.id);
		return ret;
	}
	rs->ckpt_seq = rec.seq;
	rs->ckpt_id = info.id;
	rs->ckpt_pos = rs->point.position;
	rs->ckpt_time = now();
	ctx->stats.checkpoints++;
	if (old_id)
		btrfs_util_delete_subvolume_by_id_fd(ctx->dest_fd, old_id);
	return 0;
}

static int checkpoint(struct receive_ctx *ctx)
{
	int ret = take_checkpoint(ctx);

	return ret ? fail(ctx, ret, "take a checkpoint (receive -s)") : 0;
}

/*
 * Every checkpoint of @final in DEST, by name (a killed receive may have
 * left one its record no longer names), deleted.
 */
static void drop_checkpoints(int dir_fd, const char *final)
{
	char prefix[NAME_MAX + 2];
	struct dirent *de;
	size_t len;
	DIR *dir;

	if (name_of(prefix, final, PARTIAL_SUFFIX ".", 0))
		return;
	len = strlen(prefix);
	dir = dir_stream_of(dir_fd);
	if (!dir)
		return;
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, prefix, len) && de->d_name[len] &&
		    strspn(de->d_name + len, "0123456789") ==
			    strlen(de->d_name + len))
			drop_subvol_at(dir_fd, de->d_name);
	closedir(dir);
}

/* The record and every checkpoint of @final: its receive is complete. */
static void drop_partial(int dir_fd, const char *final)
{
	char name[NAME_MAX + 1];

	drop_checkpoints(dir_fd, final);
	if (!name_of(name, final, PARTIAL_SUFFIX ".resume", 0))
		unlinkat(dir_fd, name, 0);
	/* a record being written when a receive was killed */
	if (!name_of(name, final, PARTIAL_SUFFIX ".resume-new", 0))
		unlinkat(dir_fd, name, 0);
}

int resume_subvol_begin(struct receive_ctx *ctx, const char *name, char *made)
{
	struct record rec;
	struct stat st;
	int ret;

	if (!ctx->opts.resumable) {
		snprintf(made, NAME_MAX + 1, "%s", name);
		return 0;
	}
	ret = name_of(made, name, WORK_SUFFIX, 0);
	if (ret)
		return fail(ctx, ret, "name the subvolume being received");
	if (!fstatat(ctx->dest_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return fail(ctx, EEXIST, "create the subvolume");
	ret = record_read(ctx->dest_fd, name, &rec);
	free(rec.state);
	if (ret != -ENOENT) {
		snprintf(
			ctx->why_buf, sizeof(ctx->why_buf),
			"a partial receive of it is kept (.%s" PARTIAL_SUFFIX
			".*): resume it with encio send -t, or delete it and its record",
			name);
		return fail(ctx, EEXIST, ctx->why_buf);
	}
	/* what a killed receive left without a record */
	ret = drop_subvol_at(ctx->dest_fd, made);
	if (ret)
		return fail(ctx, ret, "delete the working subvolume left");
	drop_checkpoints(ctx->dest_fd, name);
	memset(&ctx->rs, 0, sizeof(ctx->rs));
	snprintf(ctx->rs.final, sizeof(ctx->rs.final), "%s", name);
	return 0;
}

void resume_subvol_identity(struct receive_ctx *ctx, const uint8_t *uuid,
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

/* After the subvolume was marked received: it gets its own name. */
int resume_subvol_finish(struct receive_ctx *ctx)
{
	struct resume_state *rs = &ctx->rs;

	if (!ctx->opts.resumable || !rs->active)
		return 0;
	if (renameat2(ctx->dest_fd, ctx->subvol_name, ctx->dest_fd, rs->final,
		      RENAME_NOREPLACE))
		return fail(ctx, errno, "give the subvolume its name");
	snprintf(ctx->subvol_name, sizeof(ctx->subvol_name), "%s", rs->final);
	drop_partial(ctx->dest_fd, rs->final);
	rs->ckpt_id = 0;
	rs->active = false;
	return 0;
}

int resume_applied(const struct stream_cmd *cmd, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct resume_state *rs = &ctx->rs;
	uint64_t every = ctx->opts.checkpoint_bytes ?: CHECKPOINT_BYTES;
	uint32_t len, crc;
	bool first;

	if (!rs->active || ctx->subvol_fd < 0 || ctx->subvol_errors)
		return 0;
	first = cmd->type == BTRFS_SEND_C_SUBVOL ||
		cmd->type == BTRFS_SEND_C_SNAPSHOT;
	if (cmd->type == STREAM_C_ENCIO_RESUME) {
		rs->base = ctx->reader->offset - rs->point.position;
		return 0;
	}
	len = cmd->len;
	crc = cmd->crc;
	/* the point is of the stream as send -t regenerates it: no total */
	if (first) {
		stream_cmd_without_total(cmd, &len, &crc);
		rs->base = cmd->offset + (cmd->len - len);
	}
	rs->point.fingerprint = resume_fingerprint_add(rs->point.fingerprint,
						       cmd->type, len, crc);
	rs->point.commands++;
	rs->point.position = ctx->reader->offset - rs->base;
	if (first && ctx->opts.checkpoint_late)
		rs->ckpt_time = now();
	else if (first || rs->point.position - rs->ckpt_pos >= every ||
		 now() - rs->ckpt_time >= CHECKPOINT_SECONDS)
		return checkpoint(ctx);
	return 0;
}

void resume_stopped(struct receive_ctx *ctx, bool read_failed)
{
	struct resume_state *rs = &ctx->rs;

	if (!ctx->opts.resumable || !rs->active || ctx->subvol_fd < 0)
		return;
	if (read_failed && !ctx->subvol_errors &&
	    rs->point.position > rs->ckpt_pos)
		take_checkpoint(ctx);
	if (!rs->ckpt_seq)
		return;
	snprintf(ctx->stats.partial_kept, sizeof(ctx->stats.partial_kept), "%s",
		 rs->final);
	close_fd(&ctx->write_fd);
	subvol_close(ctx);
	drop_subvol_at(ctx->dest_fd, ctx->subvol_name);
	rs->active = false;
}

/* The checkpoint @rec names, snapshotted as the new working subvolume. */
static int resume_from(struct receive_ctx *ctx, const struct record *rec)
{
	struct btrfs_util_subvolume_info info;
	char made[NAME_MAX + 1];
	enum btrfs_util_error err;
	uint64_t root;
	int ckpt, ret;

	ckpt = checkpoint_open(ctx->dest_fd, rec, &info);
	if (ckpt == -ESTALE)
		return fail(
			ctx, ESTALE,
			"the partial changed since its record: receive the whole stream again");
	if (ckpt < 0)
		return fail(ctx, ckpt, "open the partial subvolume");
	ret = name_of(made, rec->point.name, WORK_SUFFIX, 0) ?:
		      drop_subvol_at(ctx->dest_fd, made);
	if (!ret) {
		err = btrfs_util_create_snapshot_fd2(ckpt, ctx->dest_fd, made,
						     0, NULL, NULL);
		ret = btrfsutil_errno(err);
	}
	close(ckpt);
	if (ret)
		return fail(ctx, ret, "snapshot the partial subvolume");
	ret = subvol_start_at(ctx, made, rec->point.uuid, rec->point.ctransid);
	if (ret)
		return ret;
	if (btrfs_util_subvolume_id_fd(ctx->subvol_fd, &root))
		return fail(ctx, errno ?: EIO, "look up the subvolume resumed");
	ret = state_unpack(ctx, rec->state, rec->state_len, root);
	if (ret)
		return fail(ctx, ret, "the partial's record is not whole");
	ctx->rs.point = rec->point;
	ctx->rs.ckpt_seq = rec->seq;
	ctx->rs.ckpt_id = info.id;
	ctx->rs.ckpt_pos = rec->point.position;
	ctx->rs.ckpt_time = now();
	ctx->rs.active = true;
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
	       a->fingerprint == b->fingerprint && a->commands == b->commands;
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
	ret = record_read(ctx->dest_fd, p->name, &rec);
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
	char longest[NAME_MAX + 1];

	/* a checkpoint's sequence number has at most 20 digits */
	return !name_of(longest, name, PARTIAL_SUFFIX ".resume-new", 0) &&
	       !name_of(longest, name, WORK_SUFFIX, 0) &&
	       !name_of(longest, name, PARTIAL_SUFFIX, UINT64_MAX);
}

int receive_partial_point(int dir_fd, const char *name,
			  struct resume_point *point)
{
	struct btrfs_util_subvolume_info info;
	struct record rec;
	int fd;

	fd = record_read(dir_fd, name, &rec);
	free(rec.state);
	if (!fd)
		fd = checkpoint_open(dir_fd, &rec, &info);
	if (fd < 0)
		return fd;
	close(fd);
	*point = rec.point;
	return 0;
}

int receive_partial_drop(int dir_fd, const char *name)
{
	char work[NAME_MAX + 1];
	int ret;

	ret = name_of(work, name, WORK_SUFFIX, 0) ?:
						    drop_subvol_at(dir_fd, work);
	if (!ret)
		drop_partial(dir_fd, name);
	return ret;
}

int receive_resume_token(const char *path, char *token, struct encio_error *e)
{
	struct resume_point point;
	char dir[PATH_MAX], *slash, *final;
	int dir_fd, ret;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return encio_error_set(e, ENAMETOOLONG, "resolve", path, false,
				       0);
	while ((slash = strrchr(dir, '/')) && slash > dir && !slash[1])
		*slash = '\0';
	slash = strrchr(dir, '/');
	final = slash ? slash + 1 : dir;
	if (slash == dir)
		dir_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (slash) {
		*slash = '\0';
		dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		dir_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (dir_fd < 0)
		return encio_error_set(e, errno, "open the directory of", path,
				       false, 0);
	ret = receive_partial_point(dir_fd, final, &point);
	close(dir_fd);
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
