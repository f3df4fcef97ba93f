// SPDX-License-Identifier: GPL-2.0
/*
 * copy and copy -r keep data shared: a range of a source extent that the
 * run meets more than once (reflinks, snapshots, deduplication) is written
 * the first time and cloned from that copy every other time.
 *
 * Order: a job plans its clones when it starts, so a file only ever clones
 * from files that started before it (or from itself), and waits for none
 * that waits for it. It clones once its own writes are done and its source
 * was found unchanged; only then are the ranges it wrote offered to others,
 * so what they clone is what was read while the source held still.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "copy/copy_internal.h"
#include "fs/inode_flags.h"
#include "base/kernel.h"

/*
 * A directory in the same subvolume as @path: itself, or the directory of
 * a file (a regular file is never a subvolume's root), so that no source
 * file is opened, nor a FIFO or device whose open has effects.
 */
static int open_source(const char *path)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd;

	if (lstat(path, &st))
		return -errno;
	snprintf(dir, sizeof(dir), "%s", path);
	fd = open(S_ISDIR(st.st_mode) ? path : dirname(dir),
		  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * The holder of the compressed extents files use in parts: an unnamed
 * file in DEST's directory, copy-on-write whatever that passes on (a
 * clone between nocow and copy-on-write files is refused), gone with the
 * run, its extents kept by the parts cloned from it. None where DEST
 * takes no O_TMPFILE: those parts are written each.
 */
static void holder_open(struct copy_ctx *ctx, int dest_fd)
{
	int fd;

	if (ctx->opts.recompress.alg != BTRFS_COMPRESS_NONE)
		return;
	fd = inode_tmpfile_cow_open(dest_fd);
	if (fd < 0)
		return;
	ctx->holder_fd = fd;
	ctx->share.holder_on = true;
	ctx->share.holder_end = 0;
}

int copy_share_begin(struct copy_ctx *ctx, int dest_fd, const char *const *srcs,
		     int nr)
{
	struct statfs sfs;
	int i, fd, ret;

	if (ctx->clone_fd >= 0)
		close(ctx->clone_fd);
	ctx->clone_fd = -1;
	/* what an earlier copy with @ctx indexed names other files */
	if (ctx->share_on)
		share_release(&ctx->share);
	ctx->share_on = false;
	if (ctx->holder_fd >= 0)
		close(ctx->holder_fd);
	ctx->holder_fd = -1;
	if (fstatfs(dest_fd, &sfs))
		return -errno;
	if (sfs.f_type != BTRFS_SUPER_MAGIC)
		return 0;
	share_init(&ctx->share);
	for (i = 0; i < nr; i++) {
		fd = open_source(srcs[i]);
		if (fd < 0)
			continue; /* the copy itself says what is wrong */
		ret = share_add_source(&ctx->share, fd);
		close(fd);
		/* else that source's filesystem shares nothing */
		if (ret == -ENOMEM) {
			share_release(&ctx->share);
			return ret;
		}
	}
	ctx->share_on = ctx->share.nr_fs > 0;
	if (!ctx->share_on)
		share_release(&ctx->share);
	else
		holder_open(ctx, dest_fd);
	return 0;
}

int copy_share_begin_path(struct copy_ctx *ctx, const char *dest,
			  const char *const *srcs, int nr)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd, ret;

	snprintf(dir, sizeof(dir), "%s", dest);
	if (stat(dest, &st) || !S_ISDIR(st.st_mode))
		snprintf(dir, sizeof(dir), "%s", dirname(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* the copy says what is wrong with DEST */
	ret = copy_share_begin(ctx, fd, srcs, nr);
	close(fd);
	return ret;
}

/* Whether the file of @map, @fd and @st, is in a source that may share. */
static bool share_source(struct copy_ctx *ctx, const struct extent_map *map,
			 int fd, const struct stat *st, uint32_t *fs)
{
	return map->source == EXTENT_SOURCE_TREE_SEARCH &&
	       ctx->opts.compress.alg == BTRFS_COMPRESS_NONE &&
	       !share_fs_of(&ctx->share, fd, st, fs);
}

int copy_share_plan(struct copy_job *job)
{
	struct share_index *si = &job->ctx->share;
	struct share_plan plan = { 0 };
	uint32_t fs;
	size_t i, j;
	int ret = 0;

	if (!share_source(job->ctx, &job->map, job->src_fd, &job->src_st, &fs))
		return 0;
	ret = share_file_new(si, &job->share_file);
	if (ret)
		return ret;
	job->share = true;
	for (i = 0; i < job->map.nr; i++) {
		const struct file_extent *fe = &job->map.ext[i];
		uint64_t end = fe->offset + fe->len;

		/* a prealloc range too: cloned, it stays one extent */
		if ((fe->kind != EXTENT_REGULAR &&
		     fe->kind != EXTENT_PREALLOC) ||
		    fe->offset >= job->size)
			continue;
		if (end > job->size)
			end = job->size;
		plan.nr = 0;
		ret = share_plan_range(si, fs, fe, fe->offset, end, job->size,
				       fe->compression != BTRFS_COMPRESS_NONE ?
					       SHARE_CUT_WHOLE :
					       SHARE_CUT_ANY,
				       job->share_file, &plan);
		for (j = 0; !ret && j < plan.nr; j++) {
			if (plan.p[j].holder) {
				ret = share_plan_push(&job->holders,
						      &plan.p[j]);
				continue;
			}
			if (!plan.p[j].clone)
				continue;
			plan.p[j].prealloc = fe->kind == EXTENT_PREALLOC;
			ret = share_plan_add_clone(&job->clones, &plan.p[j]);
		}
		if (ret)
			break;
	}
	share_plan_release(&plan);
	return ret;
}

void copy_share_note_complete(struct copy_ctx *ctx, int src_fd,
			      const struct stat *st,
			      const struct extent_map *map, int dst_fd,
			      bool private_tree)
{
	struct share_index *si = &ctx->share;
	uint32_t fs, id;
	size_t i;
	int ret;

	if (!share_source(ctx, map, src_fd, st, &fs) || share_file_new(si, &id))
		return;
	share_file_get(si, id)->owner = st->st_uid;
	share_file_get(si, id)->mode = st->st_mode;
	share_file_get(si, id)->private_tree = private_tree;
	ret = share_file_keep_handle(share_file_get(si, id), dst_fd);
	for (i = 0; !ret && i < map->nr; i++) {
		const struct file_extent *fe = &map->ext[i];
		uint64_t end = fe->offset + fe->len;

		if ((fe->kind != EXTENT_REGULAR &&
		     fe->kind != EXTENT_PREALLOC) ||
		    fe->offset >= (uint64_t)st->st_size)
			continue;
		if (end > (uint64_t)st->st_size)
			end = st->st_size;
		ret = share_note_range(si, fs, fe, fe->offset, end, id);
	}
	share_file_set_state(si, id, ret ? SHARE_FAILED : SHARE_READY);
}

/* Others may clone what this job wrote: it is written and was checked. */
static void job_offer(struct copy_job *job)
{
	struct share_file *sf =
		share_file_get(&job->ctx->share, job->share_file);

	if (sf->state != SHARE_PENDING)
		return;
	sf->owner = job->src_st.st_uid;
	sf->mode = job->src_st.st_mode;
	sf->private_tree = job->dst_private;
	share_file_set_state(&job->ctx->share, job->share_file,
			     share_file_keep_handle(sf, job->dst_fd) ?
				     SHARE_FAILED :
				     SHARE_READY);
}

bool copy_share_writers_only(const struct stat *st, uid_t owner)
{
	return S_ISREG(st->st_mode) && !(st->st_mode & (S_IWGRP | S_IWOTH)) &&
	       (st->st_uid == 0 || st->st_uid == owner ||
		st->st_uid == geteuid());
}

/*
 * A descriptor of the DEST file @id to read from, found by its handle
 * (which names the inode and its generation, never a path: a name swapped
 * meanwhile leads nowhere else, a file removed is ESTALE). The job's own
 * file too: its descriptor is opened for writing only.
 */
static int clone_source(struct copy_job *job, uint32_t id)
{
	struct copy_ctx *ctx = job->ctx;
	struct stat st;
	int fd;

	if (share_file_get(&ctx->share, id)->handle_type == SHARE_HOLDER_HANDLE)
		return ctx->holder_fd;
	if (ctx->clone_fd >= 0 && ctx->clone_file == id) {
		fd = ctx->clone_fd;
	} else {
		fd = share_file_open(share_file_get(&ctx->share, id),
				     job->dst_fd);
		if (fd < 0)
			return fd;
		if (ctx->clone_fd >= 0)
			close(ctx->clone_fd);
		ctx->clone_fd = fd;
		ctx->clone_file = id;
	}
	/*
	 * Once its owner may write it, its bytes go into that owner's files
	 * only (and into itself: whoever may write it may write the copy).
	 * Judged by what it has now and by what it gets from SRC, so that
	 * whether its metadata was set yet (timing) changes nothing. One in
	 * a tree nobody else could ever reach holds what this run (or the
	 * stopped one it goes on from) wrote there: it goes anywhere.
	 */
	if (id == job->share_file ||
	    share_file_get(&ctx->share, id)->private_tree)
		return fd;
	if (fstat(fd, &st))
		return -errno;
	if (!copy_share_writers_only(&st, job->src_st.st_uid))
		return -EPERM;
	st.st_uid = share_file_get(&ctx->share, id)->owner;
	st.st_mode = share_file_get(&ctx->share, id)->mode;
	return copy_share_writers_only(&st, job->src_st.st_uid) ? fd : -EPERM;
}

static int clone_piece(struct copy_job *job, const struct share_piece *c)
{
	struct file_clone_range r = {
		.src_offset = c->src_off,
		.src_length = c->len,
		.dest_offset = c->off,
	};
	int fd = clone_source(job, c->file);

	if (fd < 0)
		return fd;
	r.src_fd = fd;
	return ioctl(job->dst_fd, FICLONERANGE, &r) ? -errno : 0;
}

bool copy_share_clone(struct copy_job *job)
{
	struct share_index *si = &job->ctx->share;
	struct copy_stats *stats = &job->ctx->stats;
	bool pushed = false;
	size_t i;

	job_offer(job);
	/* waiting, and no file's state changed since it looked: still waiting */
	if (job->share_wait && job->share_gen == si->state_gen)
		return false;
	job->share_gen = si->state_gen;
	job->share_wait = false;
	for (i = 0; i < job->clones.nr && !job->err; i++) {
		struct share_piece *c = &job->clones.p[i];
		const struct share_file *sf;

		if (!c->len)
			continue;
		sf = share_file_get(si, c->file);
		if (sf->state == SHARE_PENDING) {
			job->share_wait = true;
			continue;
		}
		if (sf->state == SHARE_READY && !clone_piece(job, c)) {
			stats->clones++;
			stats->clone_bytes += c->len;
			copy_job_progress(job, c->off, c->off + c->len);
		} else if (c->prealloc) {
			copy_job_fallocate(job, c->off, c->off + c->len);
		} else if (copy_job_push_range(job, c->off, c->off + c->len,
					       c->whole)) {
			job->err = encio_error_set(job->e, ENOMEM, "copy",
						   job->src_path, false, 0);
		} else {
			pushed = true;
		}
		c->len = 0;
	}
	return pushed;
}

void copy_share_end(struct copy_job *job)
{
	size_t i;

	if (job->share) {
		share_file_settle(&job->ctx->share, job->share_file,
				  SHARE_FAILED);
		job->share = false;
	}
	/* holder ranges it never wrote: those waiting for them write */
	for (i = 0; i < job->holders.nr; i++)
		share_file_settle(&job->ctx->share, job->holders.p[i].file,
				  SHARE_FAILED);
	share_plan_release(&job->holders);
	job->next_holder = 0;
	share_plan_release(&job->clones);
	job->next_clone = 0;
	job->share_wait = false;
}
