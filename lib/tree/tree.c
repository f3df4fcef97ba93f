// SPDX-License-Identifier: GPL-2.0
/*
 * Copy whole trees through one pipeline.
 *
 * A walk yields the entries of each source tree in pre-order. Directories,
 * symlinks, FIFOs and device nodes are made at once; regular files become
 * jobs (struct copy_job) that share the one engine: up to max_files jobs
 * are open, the free slots go to the oldest job with work left, and a new
 * file is opened only when a slot is free and no open file has work to
 * issue, so the queue stays full across file boundaries. A completion finds
 * its job through req->priv; a job whose last request completed gets its
 * metadata and joins the batch of finished files, unnamed until synced.
 *
 * Encoded-write errors arrive late, so nothing gets its final name before
 * a syncfs() that succeeded. A source directory DEST lacks is built under a
 * staging name, its entries under their own names, and renamed into place
 * after the last sync (a stopped copy leaves it for a rerun to resume).
 * Into an existing directory, a file is written as an O_TMPFILE (or under a
 * hidden temporary name where there is none) and linked into place at a
 * checkpoint: after checkpoint_files files or CHECKPOINT_BYTES bytes, and at
 * the end. A checkpoint hands the batch to a renamer thread, which syncs
 * and links while the pipeline goes on; a failed sync stops the copy. Hard
 * links are made at the end, once their first name is made, and
 * directories get their mode, xattrs and times last, after everything
 * inside them is written.
 *
 * Three threads. The calling thread owns the ring and only does I/O on open
 * files and on DEST; a walker thread does every path operation on SRC
 * (readdir, stat, open, readlink, xattrs by path) and makes directories,
 * symlinks and device nodes, and hands opened files over through a queue.
 * An encoded read in flight holds its inode's lock until task work that
 * only the ring thread runs (in io_uring_enter) releases it; were the ring
 * thread to block in a path lookup on SRC, an unlink by another process
 * waiting for that inode lock while holding the directory lock would hang
 * both forever. So the ring thread never waits for anything but the ring
 * while requests are in flight, and waits on the queue only when idle.
 *
 * Plain reads of a file never overlap our own encoded reads of that file
 * (see job_issue() in copy.c); a probe runs only while the engine is idle.
 *
 * The walker thread is in tree_walk_thread.c, the walk of SRC in tree_walk.c;
 * tree_entry.c makes and places entries in DEST, tree_file.c opens and
 * makes regular files for the ring, tree_meta.c sets metadata, and
 * tree_report.c counts and reports; this file has the ring thread's side
 * of the files, the renamer thread, checkpoints, setup and tree_copy().
 * tree_internal.h has what they share.
 *
 * Where the decisions are made: whether a range a file shares with one
 * copied before is cloned or written, in lib/copy/copy_share.c
 * (copy_share_plan() when a job starts, copy_share_clone() when its writes
 * are done), on the index of shared source extents of lib/fs/share.c; whether a file DEST has is
 * complete and kept, in tree_file.c (tree_file_open_source()); which
 * subvolumes are left out, in tree_walk_thread.c; where a tree is staged and
 * when it is put in place, in tree_entry.c (stage_root(),
 * tree_entry_unstage()).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tree/tree_internal.h"

/* ----- regular files on the ring ----- */

/* Ring thread: a finished file's descriptors go with the next submissions. */
static void tree_file_close(struct tree *t, struct tree_file *f)
{
	if (f->job.src_fd >= 0)
		engine_close(&t->ctx->engine, f->job.src_fd);
	if (f->job.dst_fd >= 0)
		engine_close(&t->ctx->engine, f->job.dst_fd);
	f->job.src_fd = f->job.dst_fd = -1;
}

static void tree_remove_active(struct tree *t, struct tree_file *f)
{
	unsigned int i;

	for (i = 0; i < t->nr_active; i++) {
		if (t->active[i] == f) {
			memmove(&t->active[i], &t->active[i + 1],
				(t->nr_active - i - 1) * sizeof(*t->active));
			t->nr_active--;
			return;
		}
	}
}

/* A file handed over by the walker is finished: room for another. */
static void file_done(struct tree *t)
{
	pthread_mutex_lock(&t->lock);
	t->outstanding--;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* The job's last request completed: metadata, then into the batch. */
static void tree_file_finish(struct tree *t, struct tree_file *f)
{
	struct tree_done *d;
	const char *op;
	int ret;

	tree_remove_active(t, f);
	/* Every request of this file completed: plain reads of it are safe. */
	if (!f->job.err && t->ctx->opts.verify)
		f->job.err = copy_verify_fds(t->ctx, f->job.src_fd,
					     f->job.dst_fd, f->dst, &f->e);
	if (!f->job.err) {
		ret = tree_meta_file_metadata(t, f, &op);
		if (ret)
			f->job.err = encio_error_set(&f->e, ret, op, f->dst,
						     false, 0);
	}
	d = f->job.err || f->named ?
		    NULL :
		    vec_grow(t->batch, t->nr_batch, &t->cap_batch, sizeof(*d));
	if (!f->job.err && !f->named && !d)
		f->job.err = encio_error_set(&f->e, ENOMEM, "finish", f->dst,
					     false, 0);
	if (f->job.err) {
		tree_file_discard(f);
		t->ctx->stats.bytes_done += f->st.st_size - f->job.done;
		tree_report(t, &f->e);
		tree_file_free(f);
		file_done(t);
		return;
	}
	if (d) {
		t->batch = d;
		d = &t->batch[t->nr_batch++];
		d->fd = f->tmp ? -1 : f->job.dst_fd;
		d->tmp = f->tmp;
		d->dst = f->dst;
		d->dir = f->dir;
		d->name = f->name;
		if (!f->tmp)
			f->job.dst_fd = -1;
		f->tmp = f->dst = NULL;
		f->dir = NULL;
		t->batch_bytes += f->st.st_size;
	}
	tree_file_close(t, f);
	pthread_mutex_lock(&t->lock);
	t->stats->files++;
	t->stats->entries_done++;
	t->outstanding--;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (t->nr_batch >= t->checkpoint_files ||
	    t->batch_bytes >= CHECKPOINT_BYTES)
		t->checkpoint_due = true;
	tree_file_free(f);
}

/* Probe encoded I/O for this file's filesystems if not done; idle engine. */
static int tree_probe(struct tree *t, struct tree_file *f)
{
	struct copy_ctx *ctx = t->ctx;
	int ret;

	if (ctx->read_probed && ctx->read_dev == f->st.st_dev &&
	    ctx->write_probed && ctx->write_dev == t->dst_dev)
		return 0;
	ret = copy_probe_fds(ctx, f->job.src_fd, t->fs_fd, f->src, t->dest,
			     &f->e);
	if (ret)
		return ret;
	if (!t->probed_once && t->opts->probed)
		t->opts->probed(t->opts->arg);
	t->probed_once = true;
	return 0;
}

/*
 * The probe reads the source: open one the walker did not need to, below
 * its source root through no symlink, and the same inode the items told.
 */
static int tree_probe_source(struct tree *t, struct tree_file *f)
{
	const int flags = O_RDONLY | O_NOFOLLOW;
	const char *name;
	struct stat st;
	int dir, fd;

	if (f->job.src_fd >= 0)
		return 0;
	dir = open_parent_resolve(t->src_roots[f->root], f->src + f->src_off,
				  O_PATH | O_DIRECTORY, RESOLVE_CONFINED,
				  &name);
	if (dir < 0)
		return encio_error_set(&f->e, dir, "open", f->src, false, 0);
	fd = open_regular_at(dir, name, flags | O_NOATIME, 0, &st);
	if (fd == -EPERM) /* someone else's */
		fd = open_regular_at(dir, name, flags, 0, &st);
	close(dir);
	if (fd >= 0 &&
	    (st.st_dev != f->st.st_dev || st.st_ino != f->st.st_ino)) {
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0)
		return encio_error_set(&f->e, fd, "open", f->src, false, 0);
	f->job.src_fd = fd;
	return 0;
}

static bool probe_needed(struct tree *t, const struct stat *st)
{
	const struct copy_ctx *ctx = t->ctx;

	return !ctx->read_probed || ctx->read_dev != st->st_dev ||
	       !ctx->write_probed || ctx->write_dev != t->dst_dev;
}

/* The next opened file, or NULL; @wait only with nothing in flight. */
static struct tree_file *queue_pop(struct tree *t, bool wait)
{
	struct tree_file *f = NULL;

	pthread_mutex_lock(&t->lock);
	if (wait && !t->nr_queued && !t->walk_done)
		t->stats->ring_waits++;
	while (wait && !t->nr_queued && !t->walk_done && !t->stopping)
		pthread_cond_wait(&t->cond, &t->lock);
	if (t->nr_queued) {
		f = t->queue[t->q_head];
		t->q_head = (t->q_head + 1) % t->max_files;
		t->nr_queued--;
	}
	pthread_mutex_unlock(&t->lock);
	return f;
}

static void tree_drain(struct tree *t);

/* Ring thread: make a queued file a job (probing first if due). */
static void tree_file_begin(struct tree *t, struct tree_file *f)
{
	struct copy_ctx *ctx = t->ctx;

	if (f->complete) {
		copy_share_note_complete(ctx, f->job.src_fd, &f->st,
					 &f->job.map, f->job.dst_fd,
					 f->private_tree);
		tree_file_free(f);
		file_done(t);
		return;
	}

	if (probe_needed(t, &f->st)) {
		tree_drain(t);
		if (tree_probe_source(t, f) || tree_probe(t, f)) {
			tree_stop(t, &f->e);
			tree_file_discard(f);
			tree_file_free(f);
			file_done(t);
			return;
		}
	}
	f->job.ctx = ctx;
	f->job.src_path = f->src;
	f->job.dst_path = f->dst;
	f->job.read_mode = ctx->probe.read_mode;
	f->job.write_mode = ctx->probe.write_mode;
	f->job.plain_mode = ctx->engine.ring ? ENCIO_IO_URING_FIXED :
					       ENCIO_IO_IOCTL;
	f->job.e = &f->e;
	f->job.owner = f;
	f->job.dst_private = f->private_tree;
	t->active[t->nr_active++] = f;
	/* The map and the size here: the walker is the busier thread. */
	if (f->inl)
		copy_job_start_inline(&f->job, &f->st, &f->inline_data);
	else
		copy_job_start(&f->job, &f->st);
	if (t->nr_active > t->stats->peak_files)
		t->stats->peak_files = t->nr_active;
}

/* ----- the pipeline ----- */

/* The oldest job with work to issue; finished idle jobs are finished. */
static struct copy_job *tree_pick(struct tree *t)
{
	unsigned int i = 0;

	while (i < t->nr_active) {
		struct copy_job *job = &t->active[i]->job;

		if (copy_job_has_work(job))
			return job;
		if (copy_job_idle(job) && !copy_job_waiting(job)) {
			tree_file_finish(t, t->active[i]);
			continue;
		}
		i++;
	}
	return NULL;
}

/* Give every free slot work, taking opened files from the walker. */
static void tree_fill(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;
	struct engine_req *req;
	struct copy_job *job;
	struct tree_file *f;

	while (!tree_stop_requested(t) && !t->checkpoint_due) {
		job = tree_pick(t);
		if (job) {
			req = engine_get_req(engine);
			if (!req)
				return;
			if (!copy_job_issue(job, req))
				engine_put_req(engine, req);
			continue;
		}
		if (t->nr_active >= t->max_files || !engine->pool.nr_free)
			return;
		f = queue_pop(t, false);
		if (!f)
			return;
		tree_file_begin(t, f);
	}
}

static void tree_reap(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;
	struct engine_req *req;
	struct copy_job *job;
	struct encio_error e;
	int err;

	req = engine_reap(engine, true, &err);
	if (err) {
		encio_error_set(&e, err, "wait for io_uring", t->dest, false,
				0);
		tree_stop(t, &e);
	}
	if (!req)
		return;
	job = req->priv;
	if (!copy_job_complete(job, req))
		engine_put_req(engine, req);
	copy_ctx_poll_chunks(t->ctx);
	if (copy_job_idle(job) && (job->err || !copy_job_has_work(job)) &&
	    !copy_job_waiting(job))
		tree_file_finish(t, job->owner);
}

/*
 * Every request back from the kernel before a job is freed: engine_reap()
 * reports a ring error only after cancelling and collecting all of them,
 * so this ends once the kernel owns none of our memory.
 */
static void tree_drain(struct tree *t)
{
	while (engine_inflight(&t->ctx->engine) ||
	       copy_ctx_chunks_busy(t->ctx)) {
		if (!engine_inflight(&t->ctx->engine)) {
			copy_ctx_wait_chunks(t->ctx);
			continue;
		}
		tree_reap(t);
	}
}

/* The renamer thread: renames synced batches while the ring goes on. */
/* Let go of a finished file; @drop: its data too (if not in place). */
static void tree_done_release(struct tree_done *d, bool drop)
{
	if (d->fd >= 0)
		close(d->fd);
	else if (drop)
		unlinkat(d->dir->fd, d->tmp, 0);
	dst_dir_put(d->dir);
	free(d->tmp);
	free(d->dst);
}

static int link_fd(int fd, int dir, const char *name)
{
	char proc[32];

	if (!linkat(fd, "", dir, name, AT_EMPTY_PATH))
		return 0;
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc does not */
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dir, name, AT_SYMLINK_FOLLOW) ? -errno :
								      0;
}

static int make_fd_link(void *arg, int dir, const char *tmp)
{
	return link_fd(*(int *)arg, dir, tmp);
}

/*
 * Give a finished file its name: link the unnamed file, or rename the
 * temporary. A name already there (an older copy, on a rerun) is replaced
 * atomically, through a temporary name.
 */
static int place_file(struct tree_done *d)
{
	struct entry_at at = { d->dir->fd, d->name };
	char tmp[NAME_MAX + 1];
	int ret;

	if (d->fd < 0)
		return renameat(at.dir, d->tmp, at.dir, at.name) ? -errno : 0;
	ret = link_fd(d->fd, at.dir, at.name);
	if (ret != -EEXIST)
		return ret;
	ret = tree_entry_make_temp(at, tmp, make_fd_link, &d->fd);
	if (ret)
		return ret;
	if (renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		unlinkat(at.dir, tmp, 0);
	}
	return ret;
}

/* A batch whose sync failed, or that follows one: its files are lost. */
static void tree_batch_drop(struct tree *t, struct tree_done *batch, size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++)
		tree_done_release(&batch[i], true);
	pthread_mutex_lock(&t->lock);
	t->stats->files -= nr;
	t->stats->failed += nr;
	pthread_mutex_unlock(&t->lock);
}

static void tree_batch_rename(struct tree *t, struct tree_done *batch,
			      size_t nr)
{
	size_t i;
	int ret;

	for (i = 0; i < nr; i++) {
		ret = place_file(&batch[i]);
		if (ret) {
			tree_stat_add(t, &t->stats->files, -1);
			tree_stat_add(t, &t->stats->entries_done, -1);
			tree_entry_error(t, -ret, "put into place",
					 batch[i].dst);
		}
		tree_done_release(&batch[i], ret != 0);
	}
}

/*
 * The renamer thread: syncs the destination, then renames a batch of
 * finished files into place. Off the ring thread, so that the pipeline
 * goes on while the sync waits for writeback. A failed sync stops the copy
 * (encoded-write errors arrive late, and cannot be told apart by file):
 * that batch and every later one are dropped.
 */
static void *tree_renamer(void *arg)
{
	struct tree *t = arg;
	struct encio_error e;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		while (!t->r_busy && !t->r_quit)
			pthread_cond_wait(&t->r_cond, &t->lock);
		if (!t->r_busy)
			break;
		pthread_mutex_unlock(&t->lock);
		if (!t->sync_failed && syncfs(t->fs_fd)) {
			encio_error_set(&e, errno, "sync", t->dest, false, 0);
			t->sync_failed = true;
			tree_stop(t, &e);
		}
		if (t->sync_failed)
			tree_batch_drop(t, t->r_batch, t->r_nr);
		else
			tree_batch_rename(t, t->r_batch, t->r_nr);
		pthread_mutex_lock(&t->lock);
		t->r_nr = 0;
		t->r_busy = false;
		pthread_cond_broadcast(&t->r_cond);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/*
 * Hand the batch of finished files to the renamer thread, once it is done
 * with the one before. Files still in flight need not be drained: the sync
 * covers what finished before it started, and a failed sync stops it all.
 */
static void tree_checkpoint(struct tree *t)
{
	struct tree_done *swap;
	size_t cap;

	t->checkpoint_due = false;
	if (!t->nr_batch)
		return;
	pthread_mutex_lock(&t->lock);
	while (t->r_busy)
		pthread_cond_wait(&t->r_cond, &t->lock);
	swap = t->r_batch;
	cap = t->r_cap;
	t->r_batch = t->batch;
	t->r_cap = t->cap_batch;
	t->r_nr = t->nr_batch;
	t->batch = swap;
	t->cap_batch = cap;
	t->r_busy = true;
	t->stats->checkpoints++;
	pthread_cond_broadcast(&t->r_cond);
	pthread_mutex_unlock(&t->lock);
	t->nr_batch = 0;
	t->batch_bytes = 0;
}

/* Stopped: the files in flight or queued lose their temporaries. */
static void tree_abort_active(struct tree *t)
{
	struct tree_file *f;

	tree_drain(t);
	while (t->nr_active) {
		f = t->active[--t->nr_active];
		tree_file_discard(f);
		tree_file_free(f);
		file_done(t);
	}
	while ((f = queue_pop(t, false))) {
		tree_file_discard(f);
		tree_file_free(f);
		file_done(t);
	}
}

static bool walk_finished(struct tree *t)
{
	bool done;

	pthread_mutex_lock(&t->lock);
	done = t->walk_done && !t->nr_queued;
	pthread_mutex_unlock(&t->lock);
	return done;
}

/* The ring thread's loop; it blocks on the walker only when idle. */
static void tree_run(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;
	struct tree_file *f;

	while (!tree_stop_requested(t)) {
		tree_fill(t);
		if (t->checkpoint_due) {
			tree_checkpoint(t);
			continue;
		}
		if (engine_inflight(engine)) {
			tree_reap(t);
			tree_progress(t);
			continue;
		}
		if (copy_ctx_chunks_busy(t->ctx)) {
			copy_ctx_wait_chunks(t->ctx);
			tree_progress(t);
			continue;
		}
		if (t->nr_active)
			continue;
		f = queue_pop(t, true);
		if (f)
			tree_file_begin(t, f);
		else if (walk_finished(t))
			break;
	}
	tree_abort_active(t);
	engine_flush(&t->ctx->engine);
	tree_checkpoint(t);
}

/* ----- setup ----- */

static void count_tree(struct tree *t, const char *src)
{
	struct walker w = { .stat_files = true };
	struct tree_stats *s = t->stats;
	int ret;

	tree_walk_reset(&w, src);
	while ((ret = tree_walk_next(&w)) != 0) {
		if (ret < 0)
			continue;
		if (S_ISDIR(w.st.st_mode)) {
			s->total_dirs++;
			tree_walk_descend(&w);
			continue;
		}
		s->total_entries++;
		if (S_ISREG(w.st.st_mode))
			s->total_bytes +=
				copy_data_bytes(&w.st) / w.st.st_nlink;
		if (tree_stop_requested(t))
			break;
	}
	tree_walk_release(&w);
}

/*
 * Files a batch may hold: each keeps its unnamed file open until it is
 * linked, and the directory it goes in (shared, at worst one a file), and
 * two batches exist at once (one filling, one being synced), beside three
 * fds a file in flight. Raise the soft fd limit to the hard one for that,
 * and make batches smaller where the limit stays low.
 */
static size_t checkpoint_files(unsigned int max_files)
{
	struct rlimit rl;
	rlim_t room;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 64;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	room = rl.rlim_cur > 3 * max_files + 64 ?
		       (rl.rlim_cur - 3 * max_files - 64) / 4 :
		       0;
	if (room > CHECKPOINT_FILES)
		return CHECKPOINT_FILES;
	return room < 16 ? 16 : room;
}

static int tree_setup(struct tree *t, struct encio_error *e)
{
	char tmp[PATH_MAX];
	struct stat st;
	unsigned int max = t->opts->max_files;
	int i;

	t->max_files = max ? max : TREE_DEFAULT_FILES;
	if (t->max_files > TREE_MAX_FILES)
		t->max_files = TREE_MAX_FILES;
	t->checkpoint_files = checkpoint_files(t->max_files);
	t->active = calloc(t->max_files, sizeof(*t->active));
	t->queue = calloc(t->max_files, sizeof(*t->queue));
	t->src_roots = malloc(t->nr_srcs * sizeof(*t->src_roots));
	if (!t->active || !t->queue || !t->src_roots ||
	    xattr_buf_init(&t->ring_xattr) || xattr_buf_init(&t->walk_xattr))
		return encio_error_set(e, ENOMEM, "copy to", t->dest, false, 0);
	for (i = 0; i < t->nr_srcs; i++)
		t->src_roots[i] = -1;
	t->dest_is_dir = !t->opts->no_target_dir && stat(t->dest, &st) == 0 &&
			 S_ISDIR(st.st_mode);
	if (!t->dest_is_dir && t->nr_srcs > 1)
		return encio_error_set(e, ENOTDIR, "copy several trees to",
				       t->dest, false, 0);
	/* DEST's directory, or DEST itself: syncfs and write probes use it. */
	snprintf(tmp, sizeof(tmp), "%s", t->dest);
	t->sync_fd = open(t->dest_is_dir ? t->dest : dirname(tmp),
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->sync_fd < 0)
		return encio_error_set(e, errno, "open directory", t->dest,
				       false, 0);
	t->dest_dir = dst_dir_new(t->sync_fd);
	if (!t->dest_dir) {
		t->sync_fd = -1;
		return encio_error_set(e, ENOMEM, "copy to", t->dest, false, 0);
	}
	t->fs_fd = t->sync_fd;
	if (!t->dest_is_dir && !stat(t->dest, &st) && S_ISDIR(st.st_mode)) {
		t->fs_fd = open(t->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (t->fs_fd < 0) {
			t->fs_fd = t->sync_fd;
			return encio_error_set(e, errno, "open directory",
					       t->dest, false, 0);
		}
	}
	if (fstat(t->fs_fd, &st))
		return encio_error_set(e, errno, "stat", t->dest, false, 0);
	t->dst_dev = st.st_dev;
	t->dest_acl_default = meta_has_default_acl(t->sync_fd);
	return 0;
}

static void tree_release(struct tree *t)
{
	size_t i;

	tree_walk_release(&t->walk);
	for (i = 0; i < t->nr_links; i++)
		free(t->links[i].dst);
	for (i = 0; i < t->cap_inodes; i++)
		free(t->inodes[i].dst);
	for (i = 0; i < t->nr_dirs; i++) {
		free(t->dirs[i].src);
		free(t->dirs[i].dst);
	}
	for (i = 0; i < t->nr_stages; i++) {
		free(t->stages[i].staging);
		free(t->stages[i].final);
	}
	free(t->stages);
	free(t->links);
	free(t->inodes);
	free(t->dirs);
	free(t->batch);
	free(t->r_batch);
	free(t->active);
	free(t->queue);
	xattr_buf_release(&t->ring_xattr);
	xattr_buf_release(&t->walk_xattr);
	for (i = 0; t->src_roots && i < (size_t)t->nr_srcs; i++)
		if (t->src_roots[i] >= 0)
			close(t->src_roots[i]);
	free(t->src_roots);
	if (t->fs_fd >= 0 && t->fs_fd != t->sync_fd)
		close(t->fs_fd);
	if (t->dest_dir)
		dst_dir_put(t->dest_dir);
	else if (t->sync_fd >= 0)
		close(t->sync_fd);
}

/* Let the renamer finish its batch and end. */
static void tree_stop_renamer(struct tree *t)
{
	if (!t->renamer_started)
		return;
	pthread_mutex_lock(&t->lock);
	t->r_quit = true;
	pthread_cond_broadcast(&t->r_cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->renamer, NULL);
	t->renamer_started = false;
}

/* Signals go to the ring thread: its waits return EINTR. */
static int tree_start_walker(struct tree *t)
{
	sigset_t block, old;
	int ret;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	ret = pthread_create(&t->renamer, NULL, tree_renamer, t);
	if (!ret) {
		t->renamer_started = true;
		ret = pthread_create(&t->walker, NULL, tree_walk_thread, t);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -ret;
}

int tree_copy(struct copy_ctx *ctx, const struct tree_options *opts,
	      char *const *srcs, int nr_srcs, const char *dest,
	      struct tree_stats *stats, struct encio_error *e)
{
	struct tree t = {
		.ctx = ctx,
		.opts = opts,
		.stats = stats,
		.e = e,
		.srcs = srcs,
		.nr_srcs = nr_srcs,
		.dest = dest,
		.sync_fd = -1,
		.fs_fd = -1,
	};
	struct encio_error se;
	int i, ret;

	memset(stats, 0, sizeof(*stats));
	pthread_mutex_init(&t.lock, NULL);
	pthread_cond_init(&t.cond, NULL);
	tree_meta_ids_init();
	pthread_cond_init(&t.r_cond, NULL);
	ret = tree_setup(&t, e);
	if (ret)
		goto out;
	ret = copy_share_begin(ctx, t.fs_fd, (const char *const *)srcs,
			       nr_srcs);
	if (ret) {
		encio_error_set(e, -ret, "copy to", dest, false, 0);
		goto out;
	}
	if (opts->count_first) {
		for (i = 0; i < nr_srcs && !tree_stop_requested(&t); i++)
			count_tree(&t, srcs[i]);
	}
	ret = tree_start_walker(&t);
	if (ret) {
		encio_error_set(e, ret, "start the walker for", srcs[0], false,
				0);
		goto out;
	}
	tree_run(&t);
	pthread_join(t.walker, NULL);
	tree_abort_active(&t); /* anything queued after a stop */
	tree_stop_renamer(&t);
	tree_entry_make_links(&t);
	tree_entry_dirs_finish(&t);
	/* The renames, links and directory metadata, durable too. */
	if (syncfs(t.fs_fd)) {
		encio_error_set(&se, errno, "sync", dest, false, 0);
		tree_stop(&t, &se);
	}
	tree_entry_root_finish(&t);
	tree_entry_unstage(&t);
	tree_progress(&t);
	ret = t.fatal;
out:
	tree_stop_renamer(&t);
	tree_release(&t);
	pthread_cond_destroy(&t.r_cond);
	pthread_cond_destroy(&t.cond);
	pthread_mutex_destroy(&t.lock);
	return ret;
}
