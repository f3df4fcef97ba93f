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
 * metadata and joins the batch of files written under temporary names.
 *
 * Encoded-write errors arrive late, so a file is only renamed into place
 * after a syncfs() that succeeded. That happens at checkpoints: after
 * CHECKPOINT_FILES files or CHECKPOINT_BYTES bytes, and at the end. A
 * checkpoint first lets the requests in flight complete (the engine is then
 * idle), syncs, and renames the batch. Hard links are made at the end, once
 * their first name is in place, and directories get their mode, xattrs and
 * times last, after everything inside them is written.
 *
 * Plain reads of a file never overlap our own encoded reads of that file
 * (see job_issue() in copy.c); a probe runs only while the engine is idle.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tree.h"

#define CHECKPOINT_FILES 4096
#define CHECKPOINT_BYTES (2ULL << 30)
#define XATTR_LIST_BYTES 65536
#define XATTR_VALUE_BYTES 65536

struct walk_level {
	DIR *dir;
	size_t prefix; /* length of rel before a child's name */
};

struct walker {
	const char *src_root;
	struct walk_level *levels;
	size_t depth;
	size_t cap;
	bool root_done;
	size_t name_at; /* the current entry's name in rel */
	char rel[PATH_MAX];
	struct stat st;
};

struct tree_file {
	struct copy_job job;
	struct encio_error e;
	struct stat st;
	char *src;
	char *dst;
	char *tmp;
};

struct tree_done {
	char *tmp;
	char *dst;
};

struct tree_link {
	char *target;
	char *dst;
};

struct tree_dir {
	char *src;
	char *dst;
	struct stat st;
};

struct inode_slot {
	dev_t dev;
	ino_t ino;
	char *dst; /* NULL: free */
};

struct tree {
	struct copy_ctx *ctx;
	const struct tree_options *opts;
	struct tree_stats *stats;
	struct encio_error *e;
	int fatal;
	bool stopping;
	bool probed_once;
	bool checkpoint_due;

	char *const *srcs;
	int nr_srcs;
	int root;
	const char *dest;
	bool dest_is_dir;
	char dst_root[PATH_MAX];
	bool have_root_id;
	dev_t root_dev;
	ino_t root_ino;
	int sync_fd;
	dev_t dst_dev;

	struct walker walk;
	bool walk_done;
	bool have_entry;

	struct tree_file **active;
	unsigned int nr_active;
	unsigned int max_files;

	struct tree_done *batch;
	size_t nr_batch;
	size_t cap_batch;
	uint64_t batch_bytes;
	struct tree_link *links;
	size_t nr_links;
	size_t cap_links;
	struct tree_dir *dirs;
	size_t nr_dirs;
	size_t cap_dirs;
	struct inode_slot *inodes;
	size_t nr_inodes;
	size_t cap_inodes; /* power of two */

	char *xattr_list;
	char *xattr_value;
	char link_buf[PATH_MAX];
};

static void *vec_grow(void *arr, size_t nr, size_t *cap, size_t size)
{
	size_t new_cap;
	void *p;

	if (nr < *cap)
		return arr;
	new_cap = *cap ? *cap * 2 : 64;
	p = realloc(arr, new_cap * size);
	if (p)
		*cap = new_cap;
	return p;
}

static int join_path(char *buf, const char *root, const char *rel)
{
	int n = rel[0] ? snprintf(buf, PATH_MAX, "%s/%s", root, rel) :
			 snprintf(buf, PATH_MAX, "%s", root);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* ----- the walk ----- */

static void walk_reset(struct walker *w, const char *src_root)
{
	while (w->depth)
		closedir(w->levels[--w->depth].dir);
	w->src_root = src_root;
	w->root_done = false;
	w->rel[0] = '\0';
	w->name_at = 0;
}

static void walk_release(struct walker *w)
{
	walk_reset(w, NULL);
	free(w->levels);
	w->levels = NULL;
	w->cap = 0;
}

/*
 * The next entry into w->rel and w->st: 1, 0 at the end of the tree, or
 * -errno for an entry (or directory) that could not be read, w->rel naming
 * it. Directories are entered only by walk_descend().
 */
static int walk_next(struct walker *w)
{
	struct walk_level *top;
	struct dirent *de;
	size_t len;

	if (!w->root_done) {
		w->root_done = true;
		w->rel[0] = '\0';
		w->name_at = 0;
		return lstat(w->src_root, &w->st) ? -errno : 1;
	}
	while (w->depth) {
		top = &w->levels[w->depth - 1];
		errno = 0;
		de = readdir(top->dir);
		if (!de) {
			int err = errno;

			closedir(top->dir);
			w->depth--;
			if (err) {
				w->rel[top->prefix ? top->prefix - 1 : 0] =
					'\0';
				return -err;
			}
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		len = strlen(de->d_name);
		if (top->prefix + len >= sizeof(w->rel)) {
			snprintf(w->rel + top->prefix,
				 sizeof(w->rel) - top->prefix, "%s",
				 de->d_name);
			return -ENAMETOOLONG;
		}
		memcpy(w->rel + top->prefix, de->d_name, len + 1);
		w->name_at = top->prefix;
		if (fstatat(dirfd(top->dir), de->d_name, &w->st,
			    AT_SYMLINK_NOFOLLOW))
			return -errno;
		return 1;
	}
	return 0;
}

/* Enter the directory the last walk_next() returned. */
static int walk_descend(struct walker *w)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	size_t len = strlen(w->rel);
	struct walk_level *lvl;
	int fd;

	if (len + 2 >= sizeof(w->rel))
		return -ENAMETOOLONG;
	if (w->depth)
		fd = openat(dirfd(w->levels[w->depth - 1].dir),
			    w->rel + w->name_at, flags | O_NOATIME);
	else
		fd = open(w->src_root, flags | O_NOATIME);
	if (fd < 0 && errno == EPERM) /* O_NOATIME on someone else's */
		fd = w->depth ? openat(dirfd(w->levels[w->depth - 1].dir),
				       w->rel + w->name_at, flags) :
				open(w->src_root, flags);
	if (fd < 0)
		return -errno;
	lvl = vec_grow(w->levels, w->depth, &w->cap, sizeof(*lvl));
	if (!lvl) {
		close(fd);
		return -ENOMEM;
	}
	w->levels = lvl;
	lvl = &w->levels[w->depth];
	lvl->dir = fdopendir(fd);
	if (!lvl->dir) {
		close(fd);
		return -errno;
	}
	if (len) {
		w->rel[len] = '/';
		w->rel[len + 1] = '\0';
		len++;
	}
	lvl->prefix = len;
	w->depth++;
	return 0;
}

/* ----- errors, progress ----- */

static void tree_stop(struct tree *t, const struct encio_error *e)
{
	if (!t->fatal) {
		t->fatal = -e->err;
		*t->e = *e;
	}
	t->stopping = true;
}

/* One entry failed: report it and go on; ENOSPC stops the copy. */
static void tree_report(struct tree *t, const struct encio_error *e)
{
	t->stats->failed++;
	t->stats->entries_done++;
	if (e->err == ENOSPC) {
		tree_stop(t, e);
		return;
	}
	if (t->opts->report && !(t->fatal && t->stopping))
		t->opts->report(t->opts->arg, e);
}

static void entry_error(struct tree *t, int err, const char *op,
			const char *path)
{
	struct encio_error e;

	encio_set_error(&e, err, op, path, false, 0);
	tree_report(t, &e);
}

static void tree_progress(struct tree *t)
{
	if (t->opts->progress)
		t->opts->progress(t->opts->arg, t->stats, &t->ctx->stats);
}

static bool stop_requested(struct tree *t)
{
	struct encio_error e;

	if (t->stopping)
		return true;
	if (t->opts->stop && *t->opts->stop) {
		encio_set_error(&e, EINTR, "finish (interrupted)", t->dest,
				false, 0);
		tree_stop(t, &e);
	}
	return t->stopping;
}

/* ----- metadata ----- */

static bool xattr_wanted(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9) ||
	       !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/*
 * Copy the wanted xattrs raw, by fd where there is one, else by path
 * without following a symlink. Returns 0 or -errno with *op set.
 */
static int copy_xattrs(struct tree *t, int src_fd, const char *src, int dst_fd,
		       const char *dst, const char **op)
{
	ssize_t len, vlen;
	char *name;

	*op = "list xattrs of";
	len = src_fd >= 0 ?
		      flistxattr(src_fd, t->xattr_list, XATTR_LIST_BYTES) :
		      llistxattr(src, t->xattr_list, XATTR_LIST_BYTES);
	if (len < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (name = t->xattr_list; name < t->xattr_list + len;
	     name += strlen(name) + 1) {
		if (!xattr_wanted(name))
			continue;
		*op = "read xattrs of";
		vlen = src_fd >= 0 ? fgetxattr(src_fd, name, t->xattr_value,
					       XATTR_VALUE_BYTES) :
				     lgetxattr(src, name, t->xattr_value,
					       XATTR_VALUE_BYTES);
		if (vlen < 0 && errno == ENODATA)
			continue;
		if (vlen < 0)
			return -errno;
		*op = "set xattrs of";
		if (dst_fd >= 0 ?
			    fsetxattr(dst_fd, name, t->xattr_value, vlen, 0) :
			    lsetxattr(dst, name, t->xattr_value, vlen, 0))
			return -errno;
	}
	return 0;
}

/* Owner first (chown clears set-id bits), xattrs, mode, times last. */
static int file_metadata(struct tree *t, struct tree_file *f, const char **op)
{
	struct timespec times[2] = { f->st.st_atim, f->st.st_mtim };
	int ret;

	*op = "set owner of";
	if (fchown(f->job.dst_fd, f->st.st_uid, f->st.st_gid) && errno != EPERM)
		return -errno;
	ret = copy_xattrs(t, f->job.src_fd, f->src, f->job.dst_fd, f->dst, op);
	if (ret)
		return ret;
	*op = "set mode of";
	if (fchmod(f->job.dst_fd, f->st.st_mode & 07777))
		return -errno;
	*op = "set times of";
	if (futimens(f->job.dst_fd, times))
		return -errno;
	return 0;
}

/* The same by path, for entries without data: never follows a symlink. */
static int path_metadata(struct tree *t, const char *src, const char *dst,
			 const struct stat *st, const char **op)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	int ret;

	*op = "set owner of";
	if (lchown(dst, st->st_uid, st->st_gid) && errno != EPERM)
		return -errno;
	ret = copy_xattrs(t, -1, src, -1, dst, op);
	if (ret)
		return ret;
	*op = "set mode of";
	if (!S_ISLNK(st->st_mode) && chmod(dst, st->st_mode & 07777))
		return -errno;
	*op = "set times of";
	if (utimensat(AT_FDCWD, dst, times, AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

/* A hidden name beside @dst for @make to create; 0 or -errno. */
static int make_temp(const char *dst, char *tmp,
		     int (*make)(void *arg, const char *tmp), void *arg)
{
	static unsigned int counter;
	const char *slash = strrchr(dst, '/');
	int dir_len = slash ? (int)(slash - dst + 1) : 0;
	const char *name = dst + dir_len;
	int tries, ret;

	for (tries = 0; tries < 100; tries++) {
		if (snprintf(tmp, PATH_MAX, "%.*s.%.200s.encio-%d-%u", dir_len,
			     dst, name, (int)getpid(), counter++) >= PATH_MAX)
			return -ENAMETOOLONG;
		ret = make(arg, tmp);
		if (ret != -EEXIST)
			return ret;
	}
	return -EEXIST;
}

static int make_file(void *arg, const char *tmp)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	*(int *)arg = fd;
	return 0;
}

/* ----- hard links ----- */

static size_t inode_hash(dev_t dev, ino_t ino, size_t mask)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	return (h ^ (h >> 29)) & mask;
}

static struct inode_slot *inode_find(struct tree *t, dev_t dev, ino_t ino)
{
	size_t mask = t->cap_inodes - 1, i;

	if (!t->cap_inodes)
		return NULL;
	for (i = inode_hash(dev, ino, mask); t->inodes[i].dst;
	     i = (i + 1) & mask) {
		if (t->inodes[i].dev == dev && t->inodes[i].ino == ino)
			return &t->inodes[i];
	}
	return &t->inodes[i];
}

static int inode_grow(struct tree *t)
{
	struct inode_slot *old = t->inodes, *slot;
	size_t old_cap = t->cap_inodes, i;

	t->cap_inodes = old_cap ? old_cap * 2 : 256;
	t->inodes = calloc(t->cap_inodes, sizeof(*t->inodes));
	if (!t->inodes) {
		t->inodes = old;
		t->cap_inodes = old_cap;
		return -ENOMEM;
	}
	for (i = 0; i < old_cap; i++) {
		if (!old[i].dst)
			continue;
		slot = inode_find(t, old[i].dev, old[i].ino);
		*slot = old[i];
	}
	free(old);
	return 0;
}

/*
 * For an entry with more than one link: true when its inode was copied
 * before (a link to make at the end was queued), else its first name is
 * remembered and false returned.
 */
static bool link_seen(struct tree *t, const struct stat *st, const char *dst)
{
	struct inode_slot *slot;
	struct tree_link *l;

	if (st->st_nlink < 2 || S_ISDIR(st->st_mode))
		return false;
	slot = inode_find(t, st->st_dev, st->st_ino);
	if (slot && slot->dst) {
		l = vec_grow(t->links, t->nr_links, &t->cap_links, sizeof(*l));
		if (!l)
			goto nomem;
		t->links = l;
		l = &t->links[t->nr_links];
		l->target = slot->dst;
		l->dst = strdup(dst);
		if (!l->dst)
			goto nomem;
		t->nr_links++;
		return true;
	}
	if ((t->nr_inodes + 1) * 2 > t->cap_inodes && inode_grow(t))
		goto nomem;
	slot = inode_find(t, st->st_dev, st->st_ino);
	slot->dev = st->st_dev;
	slot->ino = st->st_ino;
	slot->dst = strdup(dst);
	if (slot->dst)
		t->nr_inodes++;
	return false;
nomem:
	entry_error(t, ENOMEM, "remember the hard link", dst);
	return true;
}

static int make_link(void *arg, const char *tmp)
{
	return link(arg, tmp) ? -errno : 0;
}

/* Make the queued hard links whose first name is in place. */
static void tree_make_links(struct tree *t)
{
	char tmp[PATH_MAX];
	struct stat a, b;
	size_t i;
	int ret;

	for (i = 0; i < t->nr_links; i++) {
		struct tree_link *l = &t->links[i];

		t->stats->entries_done++;
		if (lstat(l->target, &a)) {
			if (!t->stopping) {
				t->stats->entries_done--;
				entry_error(t, errno, "link to", l->target);
			}
			continue;
		}
		if (!lstat(l->dst, &b) && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			t->stats->skipped++;
			continue;
		}
		ret = make_temp(l->dst, tmp, make_link, l->target);
		if (!ret && rename(tmp, l->dst)) {
			ret = -errno;
			unlink(tmp);
		}
		if (ret) {
			t->stats->entries_done--;
			entry_error(t, ret, "link", l->dst);
			continue;
		}
		t->stats->hardlinks++;
	}
}

/* ----- resume: is DEST's entry already complete? ----- */

/* The next run of equal (kind, compression) at or after *i. */
static bool next_run(const struct extent_map *m, size_t *i,
		     struct file_extent *run)
{
	if (*i >= m->nr)
		return false;
	*run = m->ext[(*i)++];
	while (*i < m->nr && m->ext[*i].kind == run->kind &&
	       m->ext[*i].compression == run->compression &&
	       m->ext[*i].offset == run->offset + run->len &&
	       run->compression == BTRFS_COMPRESS_NONE) {
		run->len += m->ext[*i].len;
		(*i)++;
	}
	if (run->offset < m->size && run->offset + run->len > m->size)
		run->len = m->size - run->offset;
	return true;
}

/*
 * Same layout: the same holes, prealloc and inline ranges, the same
 * compressed extents at the same offsets; runs of plain data compare as a
 * whole (the kernel may split them differently).
 */
static bool same_layout(const struct extent_map *a, const struct extent_map *b)
{
	struct file_extent ra, rb;
	size_t i = 0, j = 0;
	bool more_a, more_b;

	for (;;) {
		more_a = next_run(a, &i, &ra);
		more_b = next_run(b, &j, &rb);
		if (!more_a || !more_b)
			return more_a == more_b;
		if (ra.offset != rb.offset || ra.len != rb.len ||
		    ra.kind != rb.kind || ra.compression != rb.compression)
			return false;
	}
}

static bool file_complete(int src_fd, const struct stat *src, const char *dst)
{
	struct extent_map ma = { 0 }, mb = { 0 };
	struct stat st;
	bool same = false;
	int fd;

	if (lstat(dst, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size != src->st_size ||
	    st.st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return false;
	fd = open(dst, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0)
		return false;
	if (!extent_map_build(src_fd, &ma) && !extent_map_build(fd, &mb))
		same = same_layout(&ma, &mb);
	extent_map_release(&ma);
	extent_map_release(&mb);
	close(fd);
	return same;
}

/* ----- regular files ----- */

static void tree_file_free(struct tree_file *f)
{
	if (f->job.src_fd >= 0)
		close(f->job.src_fd);
	if (f->job.dst_fd >= 0)
		close(f->job.dst_fd);
	copy_job_release(&f->job);
	free(f->src);
	free(f->dst);
	free(f->tmp);
	free(f);
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

/* The job's last request completed: metadata, then into the batch. */
static void tree_file_finish(struct tree *t, struct tree_file *f)
{
	struct tree_done *d;
	const char *op;
	int ret;

	tree_remove_active(t, f);
	if (!f->job.err) {
		ret = file_metadata(t, f, &op);
		if (ret)
			f->job.err = encio_set_error(&f->e, ret, op, f->dst,
						     false, 0);
	}
	d = f->job.err ?
		    NULL :
		    vec_grow(t->batch, t->nr_batch, &t->cap_batch, sizeof(*d));
	if (!f->job.err && !d)
		f->job.err = encio_set_error(&f->e, ENOMEM, "finish", f->dst,
					     false, 0);
	if (f->job.err) {
		unlink(f->tmp);
		t->ctx->stats.bytes_done += f->st.st_size - f->job.done;
		tree_report(t, &f->e);
		tree_file_free(f);
		return;
	}
	t->batch = d;
	d = &t->batch[t->nr_batch++];
	d->tmp = f->tmp;
	d->dst = f->dst;
	f->tmp = f->dst = NULL;
	t->batch_bytes += f->st.st_size;
	t->stats->files++;
	t->stats->entries_done++;
	if (t->nr_batch >= CHECKPOINT_FILES ||
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
	ret = copy_probe_fds(ctx, f->job.src_fd, t->sync_fd, f->src, t->dest,
			     &f->e);
	if (ret)
		return ret;
	if (!t->probed_once && t->opts->probed)
		t->opts->probed(t->opts->arg);
	t->probed_once = true;
	return 0;
}

static bool probe_needed(struct tree *t, const struct stat *st)
{
	const struct copy_ctx *ctx = t->ctx;

	return !ctx->read_probed || ctx->read_dev != st->st_dev ||
	       !ctx->write_probed || ctx->write_dev != t->dst_dev;
}

static int open_src(const char *src)
{
	int fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * Open a regular file and make it a job. Returns 1 when a job started, 0
 * when the entry was handled otherwise, -EBUSY to be called again once the
 * engine is idle (a probe is due).
 */
static int tree_file_start(struct tree *t, const char *src, const char *dst)
{
	struct copy_ctx *ctx = t->ctx;
	struct tree_file *f;
	char tmp[PATH_MAX];
	int ret;

	if (probe_needed(t, &t->walk.st) && engine_inflight(&ctx->engine))
		return -EBUSY;
	if (link_seen(t, &t->walk.st, dst))
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f) {
		entry_error(t, ENOMEM, "copy", src);
		return 0;
	}
	f->job.src_fd = f->job.dst_fd = -1;
	f->src = strdup(src);
	f->dst = strdup(dst);
	if (!f->src || !f->dst) {
		ret = encio_set_error(&f->e, ENOMEM, "copy", src, false, 0);
		goto fail;
	}
	ret = open_src(src);
	if (ret < 0) {
		encio_set_error(&f->e, ret, "open", src, false, 0);
		goto fail;
	}
	f->job.src_fd = ret;
	if (fstat(f->job.src_fd, &f->st)) {
		encio_set_error(&f->e, errno, "stat", src, false, 0);
		goto fail;
	}
	ret = tree_probe(t, f);
	if (ret) {
		tree_stop(t, &f->e);
		tree_file_free(f);
		return 0;
	}
	if (file_complete(f->job.src_fd, &f->st, dst)) {
		t->stats->skipped++;
		t->stats->entries_done++;
		ctx->stats.bytes_done += f->st.st_size;
		tree_file_free(f);
		return 0;
	}
	ret = make_temp(dst, tmp, make_file, &f->job.dst_fd);
	if (ret) {
		encio_set_error(&f->e, ret, "create", dst, false, 0);
		goto fail;
	}
	f->tmp = strdup(tmp);
	if (!f->tmp) {
		unlink(tmp);
		encio_set_error(&f->e, ENOMEM, "copy", src, false, 0);
		goto fail;
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
	t->active[t->nr_active++] = f;
	if (t->nr_active > t->stats->peak_files)
		t->stats->peak_files = t->nr_active;
	copy_job_start(&f->job, &f->st);
	return 1;
fail:
	tree_report(t, &f->e);
	tree_file_free(f);
	return 0;
}

/* ----- other entries ----- */

struct special_arg {
	const struct stat *st;
	const char *target;
};

static int make_special(void *arg, const char *tmp)
{
	const struct special_arg *a = arg;
	int ret;

	if (S_ISLNK(a->st->st_mode))
		ret = symlink(a->target, tmp);
	else
		ret = mknod(tmp, (a->st->st_mode & S_IFMT) | 0600,
			    a->st->st_rdev);
	return ret ? -errno : 0;
}

static bool special_complete(const struct stat *src, const char *target,
			     const char *dst, char *buf)
{
	struct stat st;
	ssize_t n;

	if (lstat(dst, &st) ||
	    (st.st_mode & S_IFMT) != (src->st_mode & S_IFMT) ||
	    st.st_rdev != src->st_rdev ||
	    st.st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return false;
	if (!S_ISLNK(st.st_mode))
		return true;
	n = readlink(dst, buf, PATH_MAX);
	return n >= 0 && (size_t)n == strlen(target) && !memcmp(buf, target, n);
}

/* Symlinks, FIFOs, sockets, device nodes: made whole, renamed at once. */
static void tree_special(struct tree *t, const char *src, const char *dst)
{
	struct special_arg arg = { .st = &t->walk.st, .target = NULL };
	char tmp[PATH_MAX], cur[PATH_MAX];
	const char *op = "create";
	struct stat st;
	ssize_t n;
	int ret;

	if (link_seen(t, &t->walk.st, dst))
		return;
	if (S_ISLNK(t->walk.st.st_mode)) {
		n = readlink(src, t->link_buf, sizeof(t->link_buf) - 1);
		if (n < 0) {
			entry_error(t, errno, "read link", src);
			return;
		}
		t->link_buf[n] = '\0';
		arg.target = t->link_buf;
		/* readlink may have updated the atime (relatime): take it */
		if (!lstat(src, &st) && st.st_ino == t->walk.st.st_ino)
			t->walk.st = st;
	}
	if (special_complete(&t->walk.st, arg.target, dst, cur)) {
		t->stats->skipped++;
		t->stats->entries_done++;
		return;
	}
	ret = make_temp(dst, tmp, make_special, &arg);
	if (ret) {
		entry_error(t, ret, op, dst);
		return;
	}
	ret = path_metadata(t, src, tmp, &t->walk.st, &op);
	if (!ret && rename(tmp, dst)) {
		ret = -errno;
		op = "rename into place";
	}
	if (ret) {
		unlink(tmp);
		entry_error(t, ret, op, dst);
		return;
	}
	if (S_ISLNK(t->walk.st.st_mode))
		t->stats->symlinks++;
	else
		t->stats->specials++;
	t->stats->entries_done++;
}

/* A directory: made (owner now; mode, xattrs, times at the end), entered. */
static void tree_dir(struct tree *t, const char *src, const char *dst)
{
	const struct stat *st = &t->walk.st;
	struct tree_dir *d;
	struct stat cur;
	int ret;

	if (t->have_root_id && st->st_dev == t->root_dev &&
	    st->st_ino == t->root_ino) {
		entry_error(t, EINVAL, "copy a directory into itself", src);
		return;
	}
	if (lstat(dst, &cur)) {
		if (errno != ENOENT || mkdir(dst, 0700) || lstat(dst, &cur)) {
			entry_error(t, errno, "make directory", dst);
			return;
		}
		if (lchown(dst, st->st_uid, st->st_gid) && errno != EPERM) {
			entry_error(t, errno, "set owner of", dst);
			return;
		}
	} else if (!S_ISDIR(cur.st_mode)) {
		entry_error(t, EEXIST, "make directory (not a directory)", dst);
		return;
	}
	if (!t->walk.rel[0]) {
		t->have_root_id = true;
		t->root_dev = cur.st_dev;
		t->root_ino = cur.st_ino;
	}
	d = vec_grow(t->dirs, t->nr_dirs, &t->cap_dirs, sizeof(*d));
	if (!d) {
		entry_error(t, ENOMEM, "copy", src);
		return;
	}
	t->dirs = d;
	d = &t->dirs[t->nr_dirs];
	d->src = strdup(src);
	d->dst = strdup(dst);
	d->st = *st;
	if (!d->src || !d->dst) {
		free(d->src);
		free(d->dst);
		entry_error(t, ENOMEM, "copy", src);
		return;
	}
	t->nr_dirs++;
	t->stats->dirs++;
	ret = walk_descend(&t->walk);
	if (ret)
		entry_error(t, ret, "read directory", src);
}

/* Directories last, deepest first: xattrs, mode and times. */
static void tree_dirs_finish(struct tree *t)
{
	const char *op;
	size_t i;
	int ret;

	for (i = t->nr_dirs; i-- > 0;) {
		struct tree_dir *d = &t->dirs[i];

		ret = path_metadata(t, d->src, d->dst, &d->st, &op);
		if (ret && !t->stopping)
			entry_error(t, ret, op, d->dst);
	}
}

/* ----- the pipeline ----- */

/*
 * Handle the walk's current entry: 1 when a file job started, 0 when the
 * entry was handled, -EBUSY to retry once the engine is idle.
 */
static int tree_entry(struct tree *t)
{
	char src[PATH_MAX], dst[PATH_MAX];
	mode_t type = t->walk.st.st_mode & S_IFMT;

	if (join_path(src, t->walk.src_root, t->walk.rel) ||
	    join_path(dst, t->dst_root, t->walk.rel)) {
		entry_error(t, ENAMETOOLONG, "copy", t->walk.rel);
		return 0;
	}
	switch (type) {
	case S_IFDIR:
		tree_dir(t, src, dst);
		return 0;
	case S_IFREG:
		return tree_file_start(t, src, dst);
	default:
		tree_special(t, src, dst);
		return 0;
	}
}

static int tree_root_begin(struct tree *t)
{
	char tmp[PATH_MAX];
	const char *src = t->srcs[t->root];
	int n;

	snprintf(tmp, sizeof(tmp), "%s", src);
	if (t->dest_is_dir)
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%s/%s", t->dest,
			     basename(tmp));
	else
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%s", t->dest);
	if (n < 0 || n >= (int)sizeof(t->dst_root))
		return -ENAMETOOLONG;
	walk_reset(&t->walk, src);
	t->have_root_id = false;
	return 0;
}

/* Walk on until a file job starts; false at the end or when waiting. */
static bool tree_advance(struct tree *t)
{
	int ret;

	while (!stop_requested(t)) {
		if (!t->have_entry) {
			ret = t->walk_done ? 0 : walk_next(&t->walk);
			if (ret < 0) {
				char path[PATH_MAX];

				if (join_path(path, t->walk.src_root,
					      t->walk.rel))
					snprintf(path, sizeof(path), "%s",
						 t->walk.rel);
				entry_error(t, ret, "read", path);
				continue;
			}
			if (ret == 0) {
				if (t->walk_done || ++t->root >= t->nr_srcs) {
					t->walk_done = true;
					return false;
				}
				ret = tree_root_begin(t);
				if (ret)
					entry_error(t, ret, "copy",
						    t->srcs[t->root]);
				continue;
			}
			t->have_entry = true;
		}
		ret = tree_entry(t);
		if (ret == -EBUSY)
			return false;
		t->have_entry = false;
		tree_progress(t);
		if (ret == 1)
			return true;
	}
	return false;
}

/* The oldest job with work to issue; finished idle jobs are finished. */
static struct copy_job *tree_pick(struct tree *t)
{
	unsigned int i = 0;

	while (i < t->nr_active) {
		struct copy_job *job = &t->active[i]->job;

		if (copy_job_has_work(job))
			return job;
		if (copy_job_idle(job)) {
			tree_file_finish(t, t->active[i]);
			continue;
		}
		i++;
	}
	return NULL;
}

/* Give every free slot work, opening files as needed. */
static void tree_fill(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;
	struct engine_req *req;
	struct copy_job *job;

	while (!stop_requested(t) && !t->checkpoint_due) {
		job = tree_pick(t);
		if (job) {
			req = engine_get_req(engine);
			if (!req)
				return;
			if (!copy_job_issue(job, req))
				engine_put_req(engine, req);
			continue;
		}
		if (t->nr_active >= t->max_files || !engine->pool.nr_free ||
		    !tree_advance(t))
			return;
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
		encio_set_error(&e, err, "wait for io_uring", t->dest, false,
				0);
		tree_stop(t, &e);
	}
	if (!req)
		return;
	job = req->priv;
	if (!copy_job_complete(job, req))
		engine_put_req(engine, req);
	if (copy_job_idle(job) && (job->err || !copy_job_has_work(job)))
		tree_file_finish(t, job->owner);
}

static void tree_drain(struct tree *t)
{
	unsigned int spins = 0;

	while (engine_inflight(&t->ctx->engine)) {
		tree_reap(t);
		/* an io_uring wait error with requests left: give up */
		if (t->fatal && ++spins > 100000)
			break;
	}
}

/* Sync the destination, then rename the batch into place. */
static void tree_checkpoint(struct tree *t)
{
	struct encio_error e;
	size_t i;
	int err = 0;

	tree_drain(t);
	t->checkpoint_due = false;
	if (!t->nr_batch)
		return;
	if (syncfs(t->sync_fd)) {
		err = errno;
		encio_set_error(&e, err, "sync", t->dest, false, 0);
		tree_stop(t, &e);
	}
	for (i = 0; i < t->nr_batch; i++) {
		struct tree_done *d = &t->batch[i];

		if (err) {
			unlink(d->tmp);
			t->stats->files--;
			t->stats->failed++;
		} else if (rename(d->tmp, d->dst)) {
			t->stats->files--;
			t->stats->entries_done--;
			entry_error(t, errno, "rename into place", d->dst);
			unlink(d->tmp);
		}
		free(d->tmp);
		free(d->dst);
	}
	t->nr_batch = 0;
	t->batch_bytes = 0;
	t->stats->checkpoints++;
}

/* Stopped: the files still in flight lose their temporaries. */
static void tree_abort_active(struct tree *t)
{
	tree_drain(t);
	while (t->nr_active) {
		struct tree_file *f = t->active[--t->nr_active];

		unlink(f->tmp);
		tree_file_free(f);
	}
}

static void tree_run(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;

	while (!stop_requested(t)) {
		tree_fill(t);
		if (t->checkpoint_due) {
			tree_checkpoint(t);
			continue;
		}
		if (!engine_inflight(engine)) {
			if (t->walk_done && !t->nr_active)
				break;
			continue;
		}
		tree_reap(t);
		tree_progress(t);
	}
	tree_abort_active(t);
	tree_checkpoint(t);
}

/* ----- setup ----- */

static void count_tree(struct tree *t, const char *src)
{
	struct walker w = { 0 };
	struct tree_stats *s = t->stats;
	int ret;

	walk_reset(&w, src);
	while ((ret = walk_next(&w)) != 0) {
		if (ret < 0)
			continue;
		if (S_ISDIR(w.st.st_mode)) {
			s->total_dirs++;
			walk_descend(&w);
			continue;
		}
		s->total_entries++;
		if (S_ISREG(w.st.st_mode))
			s->total_bytes += w.st.st_size / w.st.st_nlink;
		if (stop_requested(t))
			break;
	}
	walk_release(&w);
}

static int tree_setup(struct tree *t, struct encio_error *e)
{
	char tmp[PATH_MAX];
	struct stat st;
	unsigned int max = t->opts->max_files;

	t->max_files = max ? max : TREE_DEFAULT_FILES;
	if (t->max_files > TREE_MAX_FILES)
		t->max_files = TREE_MAX_FILES;
	t->active = calloc(t->max_files, sizeof(*t->active));
	t->xattr_list = malloc(XATTR_LIST_BYTES);
	t->xattr_value = malloc(XATTR_VALUE_BYTES);
	if (!t->active || !t->xattr_list || !t->xattr_value)
		return encio_set_error(e, ENOMEM, "copy to", t->dest, false, 0);
	t->dest_is_dir = !t->opts->no_target_dir && stat(t->dest, &st) == 0 &&
			 S_ISDIR(st.st_mode);
	if (!t->dest_is_dir && t->nr_srcs > 1)
		return encio_set_error(e, ENOTDIR, "copy several trees to",
				       t->dest, false, 0);
	/* DEST's directory, or DEST itself: syncfs and write probes use it. */
	snprintf(tmp, sizeof(tmp), "%s", t->dest);
	t->sync_fd = open(t->dest_is_dir ? t->dest : dirname(tmp),
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->sync_fd < 0)
		return encio_set_error(e, errno, "open directory", t->dest,
				       false, 0);
	if (fstat(t->sync_fd, &st))
		return encio_set_error(e, errno, "stat", t->dest, false, 0);
	t->dst_dev = st.st_dev;
	return 0;
}

static void tree_release(struct tree *t)
{
	size_t i;

	walk_release(&t->walk);
	for (i = 0; i < t->nr_links; i++)
		free(t->links[i].dst);
	for (i = 0; i < t->cap_inodes; i++)
		free(t->inodes[i].dst);
	for (i = 0; i < t->nr_dirs; i++) {
		free(t->dirs[i].src);
		free(t->dirs[i].dst);
	}
	free(t->links);
	free(t->inodes);
	free(t->dirs);
	free(t->batch);
	free(t->active);
	free(t->xattr_list);
	free(t->xattr_value);
	if (t->sync_fd >= 0)
		close(t->sync_fd);
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
	};
	struct encio_error se;
	int i, ret;

	memset(stats, 0, sizeof(*stats));
	ret = tree_setup(&t, e);
	if (ret)
		goto out;
	if (opts->count_first) {
		for (i = 0; i < nr_srcs && !stop_requested(&t); i++)
			count_tree(&t, srcs[i]);
	}
	ret = tree_root_begin(&t);
	if (ret) {
		encio_set_error(e, ret, "copy", srcs[0], false, 0);
		goto out;
	}
	tree_run(&t);
	tree_make_links(&t);
	tree_dirs_finish(&t);
	/* The renames, links and directory metadata, durable too. */
	if (syncfs(t.sync_fd)) {
		encio_set_error(&se, errno, "sync", dest, false, 0);
		tree_stop(&t, &se);
	}
	tree_progress(&t);
	ret = t.fatal;
out:
	tree_release(&t);
	return ret;
}
