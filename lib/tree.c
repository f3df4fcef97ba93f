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
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "inline_files.h"
#include "kernel.h"
#include "prefetch.h"
#include "tree.h"

#define CHECKPOINT_FILES 4096
#define CHECKPOINT_BYTES (2ULL << 30)
#define XATTR_LIST_BYTES 65536
#define XATTR_VALUE_BYTES 65536

/*
 * A directory of DEST held open (O_PATH, or DEST's own fd): everything made
 * in it, renamed or linked there later, goes through it, so that a name of
 * DEST swapped for a symlink leads nowhere else. Shared by the entries made
 * in it until they are in place (walker, ring and renamer threads).
 */
struct dst_dir {
	int fd;
	unsigned int refs;
};

struct walk_level {
	DIR *dir;
	struct dst_dir *dst; /* its copy in DEST */
	dev_t dev;	     /* st_dev of the source directory */
	size_t prefix;	     /* length of rel before a child's name */
	bool fresh;	  /* its copy was made by this run: nothing to resume */
	bool acl_default; /* its copy has a default ACL: what is made in it
			      * inherits ACLs and has its mode masked */
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
	/*
	 * st holds only the type: a regular file is stat'ed once opened, a
	 * symlink when its items are not at hand
	 */
	bool st_pending;
	ino_t d_ino;	 /* the entry's inode number, from the directory */
	bool stat_files; /* stat regular files too (for their sizes) */
};

struct tree_file {
	struct copy_job job;
	struct encio_error e;
	struct stat st;
	bool redo_metadata;	 /* writes clear set-id bits and capabilities */
	bool no_xattrs;		 /* the source is known to have none */
	bool acl_inherited;	 /* made where a default ACL applies */
	struct inline_file *inl; /* the source from its items: not opened */
	struct copy_inline inline_data;
	int root;	/* with inl: its source root, and its path below it */
	size_t src_off; /* in src */
	char *src;
	char *dst;
	struct dst_dir *dir; /* DEST's directory it goes in */
	const char *name;    /* its name there, the end of dst */
	char *tmp;  /* its temporary name in dir; NULL: job.dst_fd is an
		     * O_TMPFILE, or named */
	bool named; /* made under its own name, in a staged tree */
};

/* A finished file, to sync and put in place: an O_TMPFILE, or a name. */
struct tree_done {
	int fd;	   /* the unnamed file to link, or -1 */
	char *tmp; /* else its temporary name in dir */
	char *dst;
	struct dst_dir *dir;
	const char *name; /* in dir, the end of dst */
};

/* Full paths; below t->dest_dir from t->root_off on. */
struct tree_link {
	char *target;
	char *dst;
};

struct tree_dir {
	char *src;
	char *dst;
	struct stat st;
	size_t src_off; /* its path below its source root, in src */
	int root;	/* its source root */
	dev_t dst_dev;	/* its copy, found again at the end */
	ino_t dst_ino;
	bool no_xattrs;	  /* the source is known to have none */
	bool fresh;	  /* made by this run, and given its owner then */
	bool acl_default; /* it has a default ACL (see walk_level) */
};

/* A tree built under a hidden name, renamed into place at the end. */
struct tree_stage {
	char *staging;
	size_t len; /* of staging */
	char *final;
};

struct xattr_buf {
	char *list;
	char *value;
	char *dst_list; /* DEST's, to compare or prune */
	char *dst_value;
	bool saw_caps; /* the last copy_xattrs() copied security.capability */
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
	char dst_final[PATH_MAX]; /* dst_root before staging: what users see */
	struct tree_stage *stages;
	size_t nr_stages;
	size_t cap_stages;
	bool have_root_id;
	dev_t root_dev;
	ino_t root_ino;
	int sync_fd;
	/*
	 * DEST (or its directory with one source not into it): sync_fd. The
	 * copy of each source root is its entry named at root_off of
	 * dst_root, and every path of DEST below it at root_off too.
	 */
	struct dst_dir *dest_dir;
	size_t root_off;
	bool dest_acl_default; /* dest_dir has a default ACL */
	int *src_roots;	       /* each source root directory, or -1 */
	dev_t dst_dev;

	struct walker walk;
	bool walk_done;		       /* under lock */
	struct meta_prefetch prefetch; /* of the source root being walked */
	uint64_t walked;	       /* entries the walker handled, atomic */
	struct inline_files inline_files; /* of a read-only source root */
	bool inline_ok;
	bool src_frozen; /* the source root is read-only: no atime moves */
	dev_t src_dev;	 /* the source root's */

	pthread_t walker;
	pthread_mutex_t lock; /* stats, queue, reports, fatal */
	pthread_cond_t cond;
	struct tree_file **queue; /* opened by the walker, for the ring */
	unsigned int q_head;
	unsigned int nr_queued;
	unsigned int outstanding; /* queued + active, <= max_files */

	struct tree_file **active;
	unsigned int nr_active;
	unsigned int max_files;

	struct tree_done *batch;
	size_t nr_batch;
	size_t cap_batch;
	/* the renamer thread's batch: synced, to rename into place */
	pthread_t renamer;
	bool renamer_started;
	pthread_cond_t r_cond;
	struct tree_done *r_batch;
	size_t r_nr;
	size_t r_cap;
	bool r_busy;
	bool r_quit;
	size_t checkpoint_files; /* batches hold an fd a file: a bound */
	bool named_temps;	 /* no O_TMPFILE in DEST */
	bool sync_failed;	 /* by the renamer only */
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

	struct xattr_buf ring_xattr; /* one per thread */
	struct xattr_buf walk_xattr;
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

/* Takes @fd; NULL (and @fd closed) without memory. */
static struct dst_dir *dst_dir_new(int fd)
{
	struct dst_dir *d = malloc(sizeof(*d));

	if (!d) {
		close(fd);
		return NULL;
	}
	d->fd = fd;
	d->refs = 1;
	return d;
}

static struct dst_dir *dst_dir_get(struct dst_dir *d)
{
	__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
	return d;
}

static void dst_dir_put(struct dst_dir *d)
{
	if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL))
		return;
	close(d->fd);
	free(d);
}

/*
 * Open @path below the directory @dirfd, through no symlink and never out
 * of it (not by "..", not by an absolute path): names of DEST and SRC met
 * again after the walk, which anyone who can write there may have swapped.
 */
static int openat2_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path[0] ? path : ".", &how,
			  sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* ----- the walk ----- */

static void walk_level_close(struct walk_level *lvl)
{
	closedir(lvl->dir);
	dst_dir_put(lvl->dst);
}

static void walk_reset(struct walker *w, const char *src_root)
{
	while (w->depth)
		walk_level_close(&w->levels[--w->depth]);
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
		w->st_pending = false;
		return lstat(w->src_root, &w->st) ? -errno : 1;
	}
	while (w->depth) {
		top = &w->levels[w->depth - 1];
		errno = 0;
		de = readdir(top->dir);
		if (!de) {
			int err = errno;

			walk_level_close(top);
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
		w->d_ino = de->d_ino;
		w->st_pending =
			(de->d_type == DT_REG || de->d_type == DT_LNK) &&
			!w->stat_files;
		if (w->st_pending) {
			memset(&w->st, 0, sizeof(w->st));
			w->st.st_mode = DTTOIF(de->d_type);
			return 1;
		}
		if (fstatat(dirfd(top->dir), de->d_name, &w->st,
			    AT_SYMLINK_NOFOLLOW))
			return -errno;
		return 1;
	}
	return 0;
}

/*
 * An entry by its name in an open directory, its source's or its copy's:
 * no path walk from the root for each entry, and nothing above that
 * directory resolved again. @name "" is the entry @dir itself (an O_PATH
 * fd); @name NULL, the open file @dir. A source root has only its path,
 * named by the user: AT_FDCWD.
 */
struct entry_at {
	int dir;
	const char *name;
};

/* The entry the last walk_next() returned, in its source directory. */
static struct entry_at walk_src_at(const struct walker *w, const char *path)
{
	if (!w->depth)
		return (struct entry_at){ AT_FDCWD, path };
	return (struct entry_at){ dirfd(w->levels[w->depth - 1].dir),
				  w->rel + w->name_at };
}

/* The DEST directory the walk's current entry is made in. */
static struct dst_dir *entry_dst_dir(const struct tree *t)
{
	const struct walker *w = &t->walk;

	return w->depth ? w->levels[w->depth - 1].dst : t->dest_dir;
}

/* The walk's current entry in its directory's copy. */
static struct entry_at entry_dst_at(const struct tree *t)
{
	const struct walker *w = &t->walk;
	const char *root = t->dst_root + t->root_off;

	if (w->depth)
		return (struct entry_at){ w->levels[w->depth - 1].dst->fd,
					  w->rel + w->name_at };
	return (struct entry_at){ t->dest_dir->fd, *root ? root : "." };
}

/*
 * Open the regular file the last walk_next() returned, its stat in @st.
 * It may have been replaced since readdir: a directory is -EISDIR,
 * anything else but a regular file -EINVAL (a FIFO put there must not
 * block the walk).
 */
static int walk_open_file(const struct walker *w, const char *path,
			  struct stat *st)
{
	const int flags = O_RDONLY | O_NOFOLLOW;
	struct entry_at at = walk_src_at(w, path);
	int fd = open_regular_at(at.dir, at.name, flags | O_NOATIME, 0, st);

	if (fd == -EPERM) /* O_NOATIME on someone else's */
		fd = open_regular_at(at.dir, at.name, flags, 0, st);
	return fd;
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
	lvl->dst = NULL;
	lvl->dev = w->st.st_dev;
	lvl->prefix = len;
	lvl->fresh = false;
	lvl->acl_default = false;
	w->depth++;
	return 0;
}

/* ----- errors, progress ----- */

static void stop_locked(struct tree *t, const struct encio_error *e)
{
	if (!t->fatal) {
		t->fatal = -e->err;
		*t->e = *e;
	}
	__atomic_store_n(&t->stopping, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&t->cond);
}

static void tree_stop(struct tree *t, const struct encio_error *e)
{
	pthread_mutex_lock(&t->lock);
	stop_locked(t, e);
	pthread_mutex_unlock(&t->lock);
}

/* Counters shared by both threads. */
static void stat_add(struct tree *t, uint64_t *counter, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	*counter += n;
	pthread_mutex_unlock(&t->lock);
}

/* One entry failed: report it and go on; ENOSPC stops the copy. */
static void tree_report(struct tree *t, const struct encio_error *e)
{
	pthread_mutex_lock(&t->lock);
	t->stats->failed++;
	t->stats->entries_done++;
	if (e->err == ENOSPC)
		stop_locked(t, e);
	else if (t->opts->report && !t->fatal)
		t->opts->report(t->opts->arg, e);
	pthread_mutex_unlock(&t->lock);
}

static void entry_error(struct tree *t, int err, const char *op,
			const char *path)
{
	struct encio_error e;

	encio_error_set(&e, err, op, path, false, 0);
	tree_report(t, &e);
}

static void tree_progress(struct tree *t)
{
	if (!t->opts->progress)
		return;
	pthread_mutex_lock(&t->lock);
	t->opts->progress(t->opts->arg, t->stats, &t->ctx->stats);
	pthread_mutex_unlock(&t->lock);
}

static bool stop_requested(struct tree *t)
{
	struct encio_error e;

	if (__atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE))
		return true;
	if (t->opts->stop && *t->opts->stop) {
		encio_error_set(&e, EINTR, "finish (interrupted)", t->dest,
				false, 0);
		tree_stop(t, &e);
	}
	return __atomic_load_n(&t->stopping, __ATOMIC_ACQUIRE);
}

/* ----- metadata ----- */

static bool xattr_wanted(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9) ||
	       !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/* The read-ahead of the source saw that this entry has no xattrs. */
static bool src_no_xattrs(struct tree *t, const struct stat *st)
{
	return meta_prefetch_has_xattrs(&t->prefetch, st) == 0;
}

/*
 * Wanted, and DEST's to remove where the source lacks it: not a label the
 * security module of DEST gives what is made there.
 */
static bool xattr_prunable(const char *name)
{
	return xattr_wanted(name) && (strncmp(name, "security.", 9) ||
				      !strcmp(name, "security.capability"));
}

/*
 * The xattr calls have no *at form before Linux 6.13: an entry named in a
 * directory is reached through that directory's /proc/self/fd link, which
 * resolves nothing above it again, with the l* calls; an O_PATH entry
 * through its own link, followed. Sets *follow; NULL for an open file.
 */
static const char *xattr_path(struct entry_at a, char *buf, size_t size,
			      bool *follow)
{
	*follow = false;
	if (!a.name)
		return NULL;
	if (a.dir == AT_FDCWD)
		return a.name;
	if (!a.name[0]) {
		*follow = true;
		snprintf(buf, size, "/proc/self/fd/%d", a.dir);
	} else {
		snprintf(buf, size, "/proc/self/fd/%d/%s", a.dir, a.name);
	}
	return buf;
}

static ssize_t at_listxattr(struct entry_at a, char *list, size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return flistxattr(a.dir, list, size);
	return follow ? listxattr(path, list, size) :
			llistxattr(path, list, size);
}

static ssize_t at_getxattr(struct entry_at a, const char *name, void *value,
			   size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fgetxattr(a.dir, name, value, size);
	return follow ? getxattr(path, name, value, size) :
			lgetxattr(path, name, value, size);
}

static int at_setxattr(struct entry_at a, const char *name, const void *value,
		       size_t size)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fsetxattr(a.dir, name, value, size, 0);
	return follow ? setxattr(path, name, value, size, 0) :
			lsetxattr(path, name, value, size, 0);
}

static int at_removexattr(struct entry_at a, const char *name)
{
	char buf[64 + NAME_MAX];
	bool follow;
	const char *path = xattr_path(a, buf, sizeof(buf), &follow);

	if (!path)
		return fremovexattr(a.dir, name);
	return follow ? removexattr(path, name) : lremovexattr(path, name);
}

/* Owner, mode and times of an open file, an O_PATH one, or a name in one. */
static int at_chown(struct entry_at a, uid_t uid, gid_t gid)
{
	if (!a.name)
		return fchown(a.dir, uid, gid);
	return fchownat(a.dir, a.name, uid, gid,
			a.name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

static int at_chmod(struct entry_at a, mode_t mode)
{
	char proc[32];

	if (!a.name)
		return fchmod(a.dir, mode);
	if (a.name[0])
		return fchmodat(a.dir, a.name, mode, AT_SYMLINK_NOFOLLOW);
	/* fchmod() refuses O_PATH fds; their /proc link does not */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", a.dir);
	return chmod(proc, mode);
}

static int at_utimens(struct entry_at a, const struct timespec times[2])
{
	if (!a.name)
		return futimens(a.dir, times);
	return utimensat(a.dir, a.name, times,
			 a.name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

/* Whether DEST's directory @fd has a default ACL, which entries inherit. */
static bool has_default_acl(int fd)
{
	return at_getxattr((struct entry_at){ fd, "" },
			   "system.posix_acl_default", NULL, 0) >= 0;
}

/* copy_xattrs(), set_metadata() flags */
#define META_NO_XATTRS (1U << 0) /* the source is known to have none */
#define META_OWNED (1U << 1)	 /* the copy has the source's owner already */
#define META_COMPARE (1U << 2)	 /* DEST has some: set only what differs */
#define META_PRUNE (1U << 3)	 /* remove DEST's xattrs the source lacks */

static bool list_has(const char *list, ssize_t len, const char *name)
{
	const char *p;

	for (p = list; p < list + len; p += strlen(p) + 1)
		if (!strcmp(p, name))
			return true;
	return false;
}

/* DEST's xattrs that the source (its list in b->list) lacks go. */
static int prune_xattrs(struct xattr_buf *b, ssize_t src_len,
			struct entry_at dst, const char **op)
{
	ssize_t len;
	char *name;
	int removed = 0;

	*op = "list xattrs of";
	len = at_listxattr(dst, b->dst_list, XATTR_LIST_BYTES);
	if (len < 0)
		return errno == ENOTSUP ? 0 : -errno;
	*op = "remove xattrs of";
	for (name = b->dst_list; name < b->dst_list + len;
	     name += strlen(name) + 1) {
		if (!xattr_prunable(name) || list_has(b->list, src_len, name))
			continue;
		if (at_removexattr(dst, name) && errno != ENODATA)
			return -errno;
		removed++;
	}
	return removed;
}

/*
 * Copy the wanted xattrs raw; none to copy where the source is known to
 * have none (META_NO_XATTRS). @how: META_* flags. Returns the number of
 * xattrs set or removed, or -errno with *op set.
 */
static int copy_xattrs(struct xattr_buf *b, struct entry_at src,
		       struct entry_at dst, unsigned int how, const char **op)
{
	ssize_t len = 0, vlen, dlen;
	int changed = 0, ret;
	char *name;

	*op = "list xattrs of";
	b->saw_caps = false;
	if (!(how & META_NO_XATTRS)) {
		len = at_listxattr(src, b->list, XATTR_LIST_BYTES);
		if (len < 0 && errno != ENOTSUP)
			return -errno;
	}
	if (len < 0)
		len = 0;
	for (name = b->list; name < b->list + len; name += strlen(name) + 1) {
		if (!xattr_wanted(name))
			continue;
		if (!strcmp(name, "security.capability"))
			b->saw_caps = true;
		*op = "read xattrs of";
		vlen = at_getxattr(src, name, b->value, XATTR_VALUE_BYTES);
		if (vlen < 0 && errno == ENODATA)
			continue;
		if (vlen < 0)
			return -errno;
		if (how & META_COMPARE) {
			dlen = at_getxattr(dst, name, b->dst_value,
					   XATTR_VALUE_BYTES);
			if (dlen == vlen &&
			    !memcmp(b->dst_value, b->value, vlen))
				continue;
		}
		*op = "set xattrs of";
		if (at_setxattr(dst, name, b->value, vlen))
			return -errno;
		changed++;
	}
	if (!(how & META_PRUNE))
		return changed;
	ret = prune_xattrs(b, len, dst, op);
	return ret < 0 ? ret : changed + ret;
}

/* The current entry's directory was made by this run: DEST has nothing. */
static bool parent_fresh(const struct tree *t)
{
	return t->walk.depth && t->walk.levels[t->walk.depth - 1].fresh;
}

/* The current entry's directory in DEST has a default ACL. */
static bool parent_acl_default(const struct tree *t)
{
	return t->walk.depth ? t->walk.levels[t->walk.depth - 1].acl_default :
			       t->dest_acl_default;
}

/* The process umask and ids, read once before the threads start. */
static mode_t t_umask;
static uid_t t_euid;
static gid_t t_egid;

/* What we make has our ids (in a directory without set-gid). */
static bool ids_ours(const struct stat *st)
{
	return st->st_uid == t_euid && st->st_gid == t_egid;
}

/*
 * Owner first (chown clears set-id bits), xattrs, mode; by fd. @made_ours:
 * the file was just made by us in a directory without set-gid, so it is
 * ours already, and with the mode asked for where no default ACL masked
 * it (which also gave it ACLs the source may lack).
 */
static int file_owner_mode(struct xattr_buf *b, struct tree_file *f,
			   bool made_ours, const char **op)
{
	struct entry_at src = { f->job.src_fd, NULL };
	struct entry_at dst = { f->job.dst_fd, NULL };
	int ret;

	*op = "set owner of";
	if (!(made_ours && ids_ours(&f->st)) &&
	    fchown(f->job.dst_fd, f->st.st_uid, f->st.st_gid) && errno != EPERM)
		return -errno;
	ret = copy_xattrs(b, src, dst,
			  (f->no_xattrs ? META_NO_XATTRS : 0) |
				  (f->acl_inherited ? META_PRUNE : 0),
			  op);
	if (ret < 0)
		return ret;
	*op = "set mode of";
	if ((!made_ours || f->acl_inherited ||
	     ((f->st.st_mode & 0777) & ~t_umask) != (f->st.st_mode & 07777)) &&
	    fchmod(f->job.dst_fd, f->st.st_mode & 07777))
		return -errno;
	return 0;
}

/*
 * After the data: the times (writes set the mtime), and owner, xattrs and
 * mode again only where the writes cleared something (set-id bits, file
 * capabilities); the walker set them when it made the file, off the data
 * path.
 */
static int file_metadata(struct tree *t, struct tree_file *f, const char **op)
{
	struct timespec times[2] = { f->st.st_atim, f->st.st_mtim };
	int ret;

	if (f->redo_metadata) {
		ret = file_owner_mode(&t->ring_xattr, f, false, op);
		if (ret)
			return ret;
	}
	*op = "set times of";
	if (futimens(f->job.dst_fd, times))
		return -errno;
	return 0;
}

/*
 * An entry made by us in a directory this run made (never set-gid while
 * the walk runs) has our ids: where the source's are the same, no chown.
 */
static bool made_with_owner(const struct tree *t, const struct stat *st)
{
	return parent_fresh(t) && ids_ours(st);
}

/*
 * Owner, xattrs, mode and times of @dst (see struct entry_at: never
 * following a symlink) from @st and @src's xattrs. @how: META_* flags.
 * @cur: what @dst has now, where it exists already (a rerun): then only
 * what differs is set, and the number of changes returned; else 0 or
 * -errno.
 */
static int set_metadata(struct xattr_buf *b, struct entry_at src,
			struct entry_at dst, const struct stat *st,
			const struct stat *cur, unsigned int how,
			const char **op)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	int changed = 0, ret;

	*op = "set owner of";
	if (!(how & META_OWNED) &&
	    (!cur || cur->st_uid != st->st_uid || cur->st_gid != st->st_gid)) {
		if (!at_chown(dst, st->st_uid, st->st_gid))
			changed += !!cur;
		else if (errno != EPERM)
			return -errno;
	}
	ret = copy_xattrs(b, src, dst, how, op);
	if (ret < 0)
		return ret;
	changed += ret;
	*op = "set mode of";
	if (!S_ISLNK(st->st_mode) &&
	    (!cur || changed ||
	     (cur->st_mode & 07777) != (st->st_mode & 07777))) {
		if (at_chmod(dst, st->st_mode & 07777))
			return -errno;
		changed += cur &&
			   (cur->st_mode & 07777) != (st->st_mode & 07777);
	}
	if (cur && !changed)
		return 0;
	*op = "set times of";
	if (at_utimens(dst, times))
		return -errno;
	return cur ? changed : 0;
}

/* A hidden name beside @at for @make to create in @at.dir; 0 or -errno. */
static int make_temp(struct entry_at at, char tmp[NAME_MAX + 1],
		     int (*make)(void *arg, int dir, const char *tmp),
		     void *arg)
{
	static unsigned int counter;
	static int pid;
	int tries, ret;

	for (tries = 0; tries < 100; tries++) {
		snprintf(tmp, NAME_MAX + 1, ".%.200s.encio-%d-%u", at.name,
			 pid ? pid : (pid = getpid()),
			 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
		ret = make(arg, at.dir, tmp);
		if (ret != -EEXIST)
			return ret;
	}
	return -EEXIST;
}

struct make_file_arg {
	int fd;
	mode_t mode;
};

static int make_file(void *arg, int dir, const char *tmp)
{
	struct make_file_arg *a = arg;

	a->fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		       a->mode);
	return a->fd < 0 ? -errno : 0;
}

/*
 * An unnamed file in directory @dir, linked into place at a checkpoint:
 * about the cost of a named temporary and a rename (measured: the orphan
 * item replaces the temporary name), and nothing left behind by a copy
 * that dies. -EOPNOTSUPP or -EISDIR where the file system has no O_TMPFILE.
 */
static int make_unnamed(int dir, struct make_file_arg *a)
{
	a->fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, a->mode);
	return a->fd < 0 ? -errno : 0;
}

/* @path lies in a staging directory: nothing there is final yet. */
static bool in_stage(const struct tree *t, const char *path)
{
	const struct tree_stage *s;

	for (s = t->stages; s < t->stages + t->nr_stages; s++)
		if (!strncmp(path, s->staging, s->len) && path[s->len] == '/')
			return true;
	return false;
}

/*
 * In a staging directory, what an interrupted run left under a name
 * (found incomplete) goes before the entry is made under it again.
 */
static int clear_name(struct entry_at at)
{
	return unlinkat(at.dir, at.name, 0) && errno != ENOENT ? -errno : 0;
}

/*
 * In a staged tree a file is made under its own name: nothing there is
 * final until the whole tree is renamed into place.
 */
static int make_named(struct entry_at at, bool fresh, struct make_file_arg *a)
{
	int ret = fresh ? 0 : clear_name(at);

	if (ret)
		return ret;
	a->fd = openat(at.dir, at.name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		       a->mode);
	return a->fd < 0 ? -errno : 0;
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
	ret = make_temp(at, tmp, make_fd_link, &d->fd);
	if (ret)
		return ret;
	if (renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		unlinkat(at.dir, tmp, 0);
	}
	return ret;
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

/* @path of DEST below t->dest_dir: "" for dest_dir itself. */
static const char *dst_rel(const struct tree *t, const char *path)
{
	return strlen(path) > t->root_off ? path + t->root_off : "";
}

/*
 * The directory of @rel, opened below @base through no symlink, and its
 * last component in *name; -errno.
 */
static int open_parent_beneath(int base, const char *rel, const char **name)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(rel, '/');

	*name = slash ? slash + 1 : rel;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
	return openat2_beneath(base, dir, O_PATH | O_DIRECTORY);
}

/* The same for DEST's @path, below t->dest_dir. */
static int open_dst_parent(const struct tree *t, const char *path,
			   const char **name)
{
	return open_parent_beneath(t->dest_dir->fd, dst_rel(t, path), name);
}

static int make_link(void *arg, int dir, const char *tmp)
{
	const struct entry_at *target = arg;

	return linkat(target->dir, target->name, dir, tmp, 0) ? -errno : 0;
}

/* Link @target as @at: under its own name in a staged tree, else a new
 * name renamed over what is there. */
static int link_at(struct tree *t, struct entry_at target, struct entry_at at,
		   const char *dst)
{
	char tmp[NAME_MAX + 1];
	int ret;

	if (in_stage(t, dst)) {
		ret = clear_name(at);
		if (!ret && linkat(target.dir, target.name, at.dir, at.name, 0))
			ret = -errno;
		return ret;
	}
	ret = make_temp(at, tmp, make_link, &target);
	if (!ret && renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		unlinkat(at.dir, tmp, 0);
	}
	return ret;
}

/*
 * One queued hard link: 1 made, 0 there already, -errno with *op and
 * *path set (path: l->target where the first name is missing). Both names
 * are found again below DEST, through no symlink.
 */
static int make_one_link(struct tree *t, const struct tree_link *l,
			 const char **op, const char **path)
{
	struct entry_at target, at;
	struct stat a, b;
	int ret;

	*op = "link to";
	*path = l->target;
	target.dir = open_dst_parent(t, l->target, &target.name);
	if (target.dir < 0)
		return target.dir;
	ret = -ENOENT;
	if (fstatat(target.dir, target.name, &a, AT_SYMLINK_NOFOLLOW)) {
		ret = -errno;
		goto out;
	}
	*op = "link";
	*path = l->dst;
	at.dir = open_dst_parent(t, l->dst, &at.name);
	if (at.dir < 0) {
		ret = at.dir;
		goto out;
	}
	if (!fstatat(at.dir, at.name, &b, AT_SYMLINK_NOFOLLOW) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		ret = 0;
	else
		ret = link_at(t, target, at, l->dst) ?: 1;
	close(at.dir);
out:
	close(target.dir);
	return ret;
}

/* Make the queued hard links whose first name is in place. */
static void tree_make_links(struct tree *t)
{
	const char *op, *path;
	size_t i;
	int ret;

	for (i = 0; i < t->nr_links; i++) {
		struct tree_link *l = &t->links[i];

		t->stats->entries_done++;
		ret = make_one_link(t, l, &op, &path);
		if (ret < 0) {
			/* a first name missing after a stop is no news */
			if (path == l->target && t->stopping)
				continue;
			t->stats->entries_done--;
			entry_error(t, -ret, op, path);
			continue;
		}
		if (ret)
			t->stats->hardlinks++;
		else
			t->stats->skipped++;
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

/*
 * DEST's file @dst open, with its stat in @st, where it has the data of
 * the source already (same size, mtime and layout); else -1.
 */
static int file_complete(int src_fd, const struct stat *src,
			 struct entry_at dst, struct stat *st)
{
	struct extent_map ma = { 0 }, mb = { 0 };
	bool same = false;
	int fd;

	if (fstatat(dst.dir, dst.name, st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISREG(st->st_mode) || st->st_size != src->st_size ||
	    st->st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st->st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return -1;
	fd = openat(dst.dir, dst.name,
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0)
		return -1;
	if (!fstat(fd, st) && !extent_map_build(src_fd, &ma) &&
	    !extent_map_build(fd, &mb))
		same = same_layout(&ma, &mb);
	extent_map_release(&ma);
	extent_map_release(&mb);
	if (!same) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ----- regular files ----- */

/* A file that will not be finished: its temporary (or staged name) goes. */
static void tree_file_discard(struct tree_file *f)
{
	if (f->tmp)
		unlinkat(f->dir->fd, f->tmp, 0);
	else if (f->named)
		unlinkat(f->dir->fd, f->name, 0);
}

static void tree_file_free(struct tree_file *f)
{
	if (f->job.src_fd >= 0)
		close(f->job.src_fd);
	if (f->job.dst_fd >= 0)
		close(f->job.dst_fd);
	copy_job_release(&f->job);
	dst_dir_put(f->dir);
	free(f->inl);
	free(f->src);
	free(f->dst);
	free(f->tmp);
	free(f);
}

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
		ret = file_metadata(t, f, &op);
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
	ret = copy_probe_fds(ctx, f->job.src_fd, t->sync_fd, f->src, t->dest,
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
	dir = open_parent_beneath(t->src_roots[f->root], f->src + f->src_off,
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

/* Hand an opened file to the ring thread; waits while max_files are out. */
static void queue_push(struct tree *t, struct tree_file *f)
{
	pthread_mutex_lock(&t->lock);
	if (t->outstanding >= t->max_files)
		t->stats->walker_waits++;
	while (t->outstanding >= t->max_files && !t->stopping)
		pthread_cond_wait(&t->cond, &t->lock);
	if (t->stopping) {
		pthread_mutex_unlock(&t->lock);
		tree_file_discard(f);
		tree_file_free(f);
		return;
	}
	t->queue[(t->q_head + t->nr_queued) % t->max_files] = f;
	t->nr_queued++;
	t->outstanding++;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
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

/* Outside a staged tree: an unnamed file, else a hidden temporary name. */
static int make_unnamed_or_temp(struct tree *t, struct tree_file *f,
				struct entry_at at, struct make_file_arg *mf)
{
	char tmp[NAME_MAX + 1];
	int ret;

	ret = t->named_temps ? -EOPNOTSUPP : make_unnamed(at.dir, mf);
	if (ret != -EOPNOTSUPP && ret != -EISDIR)
		return ret;
	t->named_temps = true;
	ret = make_temp(at, tmp, make_file, mf);
	if (!ret && !(f->tmp = strdup(tmp))) {
		unlinkat(at.dir, tmp, 0);
		close(mf->fd);
		mf->fd = -1;
		ret = -ENOMEM;
	}
	return ret;
}

/* The current entry is in the source root's read-only subvolume or mount. */
static bool entry_frozen(const struct tree *t)
{
	return t->src_frozen && t->walk.depth &&
	       t->walk.levels[t->walk.depth - 1].dev == t->src_dev;
}

/*
 * Walker: the current entry from the items of a read-only source (see
 * inline_files.h), or NULL.
 */
static struct inline_file *walk_inline_file(struct tree *t)
{
	const struct walk_level *lvl;

	if (!t->inline_ok || !t->walk.depth)
		return NULL;
	lvl = &t->walk.levels[t->walk.depth - 1];
	if (lvl->dev != t->src_dev)
		return NULL;
	return inline_files_get(&t->inline_files, dirfd(lvl->dir), lvl->dev,
				t->walk.d_ino);
}

static void inline_file_stat(const struct tree *t,
			     const struct inline_file *inl, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = t->src_dev;
	st->st_ino = inl->ino;
	st->st_mode = inl->mode;
	st->st_nlink = 1;
	st->st_uid = inl->uid;
	st->st_gid = inl->gid;
	st->st_size = inl->size;
	st->st_atim = inl->atime;
	st->st_mtim = inl->mtime;
}

/*
 * Walker: a small file of a read-only source needs no open: its inode item
 * has the metadata, its one inline extent the data, both found by a tree
 * search that serves the files after it too. Only into a directory this
 * run made: a file to resume is compared with what DEST has by its extent
 * map, which needs it open.
 */
static bool tree_file_from_items(struct tree *t, struct tree_file *f)
{
	struct inline_file *inl;

	if (!parent_fresh(t))
		return false;
	inl = walk_inline_file(t);
	if (inl && !S_ISREG(inl->mode)) {
		free(inl);
		inl = NULL;
	}
	if (!inl)
		return false;
	f->inl = inl;
	f->root = t->root;
	f->src_off = strlen(t->walk.src_root) + 1;
	inline_file_stat(t, inl, &f->st);
	f->no_xattrs = true;
	f->inline_data = (struct copy_inline){
		.compression = inl->compression,
		.ram_bytes = inl->ram_bytes,
		.data = inl->data,
		.data_len = inl->data_len,
	};
	return true;
}

/* Count an entry DEST had complete; @updated: but for metadata, now set. */
static void count_complete(struct tree *t, bool updated, uint64_t bytes)
{
	pthread_mutex_lock(&t->lock);
	if (updated)
		t->stats->meta_updated++;
	else
		t->stats->skipped++;
	t->stats->entries_done++;
	t->stats->bytes_skipped += bytes;
	pthread_mutex_unlock(&t->lock);
}

/*
 * Walker: DEST has the file's data already (@fd, @cur): its owner, xattrs,
 * mode and times become the source's where they differ. @fd is closed.
 * 1 (nothing left to do), or -1 with f->e set.
 */
static int file_refresh(struct tree *t, struct tree_file *f, int fd,
			const struct stat *cur)
{
	const char *op;
	int ret;

	ret = set_metadata(
		&t->walk_xattr, (struct entry_at){ f->job.src_fd, NULL },
		(struct entry_at){ fd, NULL }, &f->st, cur,
		META_COMPARE | META_PRUNE | (f->no_xattrs ? META_NO_XATTRS : 0),
		&op);
	close(fd);
	if (ret < 0) {
		encio_error_set(&f->e, ret, op, f->dst, false, 0);
		return -1;
	}
	count_complete(t, ret > 0, f->st.st_size);
	return 1;
}

/*
 * Walker: open the source and stat it. 0 to go on, 1 when nothing is left
 * to do (a hard link to one seen, or complete in DEST), -1 with f->e set.
 */
static int tree_file_open_source(struct tree *t, struct tree_file *f,
				 const char *src, const char *dst,
				 struct entry_at at)
{
	struct stat cur;
	int ret;

	ret = walk_open_file(&t->walk, src, &f->st);
	if (ret == -EINVAL || ret == -EISDIR) {
		encio_error_set(&f->e, EAGAIN, "copy (replaced while read)",
				src, false, 0);
		return -1;
	}
	if (ret < 0) {
		encio_error_set(&f->e, ret, "open", src, false, 0);
		return -1;
	}
	f->job.src_fd = ret;
	if (t->walk.st_pending && link_seen(t, &f->st, dst))
		return 1;
	f->no_xattrs = src_no_xattrs(t, &f->st);
	if (parent_fresh(t))
		return 0;
	ret = file_complete(f->job.src_fd, &f->st, at, &cur);
	return ret < 0 ? 0 : file_refresh(t, f, ret, &cur);
}

/*
 * Walker: open a regular file, skip it if DEST has it complete, create it
 * (unnamed, or named in a staged tree) and queue it for the ring thread.
 */
static void tree_file_prepare(struct tree *t, const char *src, const char *dst,
			      struct entry_at at)
{
	struct make_file_arg mf = { .fd = -1 };
	struct tree_file *f;
	const char *op;
	int ret;

	if (!t->walk.st_pending && link_seen(t, &t->walk.st, dst))
		return;
	f = calloc(1, sizeof(*f));
	if (!f) {
		entry_error(t, ENOMEM, "copy", src);
		return;
	}
	f->job.src_fd = f->job.dst_fd = -1;
	f->src = strdup(src);
	f->dst = strdup(dst);
	if (!f->src || !f->dst) {
		encio_error_set(&f->e, ENOMEM, "copy", src, false, 0);
		goto fail;
	}
	f->dir = dst_dir_get(entry_dst_dir(t));
	f->name = f->dst + strlen(f->dst) - strlen(at.name);
	f->acl_inherited = parent_acl_default(t);
	if (!tree_file_from_items(t, f)) {
		ret = tree_file_open_source(t, f, src, dst, at);
		if (ret < 0)
			goto fail;
		if (ret > 0) {
			tree_file_free(f);
			return;
		}
	}
	/*
	 * In a directory this run made, create with the final permissions:
	 * where the umask leaves them whole and no default ACL masks them, no
	 * chmod.
	 */
	mf.mode = parent_fresh(t) ? f->st.st_mode & 0777 : 0600;
	f->named = in_stage(t, dst);
	if (f->named)
		ret = make_named(at, parent_fresh(t), &mf);
	else
		ret = make_unnamed_or_temp(t, f, at, &mf);
	if (ret)
		f->named = false;
	f->job.dst_fd = mf.fd;
	if (ret) {
		encio_error_set(&f->e, ret, "create", dst, false, 0);
		goto fail;
	}
	/* Metadata here, off the ring thread's path. */
	ret = file_owner_mode(&t->walk_xattr, f, parent_fresh(t), &op);
	if (ret) {
		encio_error_set(&f->e, ret, op, dst, false, 0);
		goto fail_tmp;
	}
	f->redo_metadata = (f->st.st_mode & (S_ISUID | S_ISGID)) ||
			   t->walk_xattr.saw_caps;
	queue_push(t, f);
	return;
fail_tmp:
	tree_file_discard(f);
fail:
	tree_report(t, &f->e);
	tree_file_free(f);
}

static void tree_drain(struct tree *t);

/* Ring thread: make a queued file a job (probing first if due). */
static void tree_file_begin(struct tree *t, struct tree_file *f)
{
	struct copy_ctx *ctx = t->ctx;

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
	t->active[t->nr_active++] = f;
	/* The map and the size here: the walker is the busier thread. */
	if (f->inl)
		copy_job_start_inline(&f->job, &f->st, &f->inline_data);
	else
		copy_job_start(&f->job, &f->st);
	if (t->nr_active > t->stats->peak_files)
		t->stats->peak_files = t->nr_active;
}

/* ----- other entries ----- */

struct special_arg {
	const struct stat *st;
	const char *target;
};

static int make_special_at(const struct special_arg *a, struct entry_at at)
{
	int ret;

	if (S_ISLNK(a->st->st_mode))
		ret = symlinkat(a->target, at.dir, at.name);
	else
		ret = mknodat(at.dir, at.name, (a->st->st_mode & S_IFMT) | 0600,
			      a->st->st_rdev);
	return ret ? -errno : 0;
}

static int make_special(void *arg, int dir, const char *tmp)
{
	return make_special_at(arg, (struct entry_at){ dir, tmp });
}

/* DEST has the entry (its stat in @st), but for metadata perhaps. */
static bool special_complete(const struct stat *src, const char *target,
			     struct entry_at dst, struct stat *st, char *buf)
{
	ssize_t n;

	if (fstatat(dst.dir, dst.name, st, AT_SYMLINK_NOFOLLOW) ||
	    (st->st_mode & S_IFMT) != (src->st_mode & S_IFMT) ||
	    st->st_rdev != src->st_rdev ||
	    st->st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st->st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return false;
	if (!S_ISLNK(st->st_mode))
		return true;
	n = readlinkat(dst.dir, dst.name, buf, PATH_MAX);
	return n >= 0 && (size_t)n == strlen(target) && !memcmp(buf, target, n);
}

/* @here: made in the directory being walked, not beside a name in DEST. */
static unsigned int special_meta_flags(struct tree *t, bool here)
{
	const struct stat *st = &t->walk.st;

	return (src_no_xattrs(t, st) ? META_NO_XATTRS : 0) |
	       (here && made_with_owner(t, st) ? META_OWNED : 0) |
	       (parent_acl_default(t) ? META_PRUNE : 0);
}

/* In a staged tree, under its own name (an incomplete one replaced). */
static int special_named(struct tree *t, struct entry_at src,
			 struct entry_at at, struct special_arg *arg,
			 const char **op)
{
	int ret;

	*op = "create";
	ret = parent_fresh(t) ? 0 : clear_name(at);
	if (ret)
		return ret;
	ret = make_special_at(arg, at);
	if (ret)
		return ret;
	ret = set_metadata(&t->walk_xattr, src, at, &t->walk.st, NULL,
			   special_meta_flags(t, true), op);
	if (ret)
		unlinkat(at.dir, at.name, 0);
	return ret;
}

/* Elsewhere made whole under a hidden name, then renamed into place. */
static int special_temp(struct tree *t, struct entry_at src, struct entry_at at,
			struct special_arg *arg, const char **op)
{
	char tmp[NAME_MAX + 1];
	int ret;

	*op = "create";
	ret = make_temp(at, tmp, make_special, arg);
	if (ret)
		return ret;
	ret = set_metadata(&t->walk_xattr, src,
			   (struct entry_at){ at.dir, tmp }, &t->walk.st, NULL,
			   special_meta_flags(t, false), op);
	if (!ret && renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		*op = "rename into place";
	}
	if (ret)
		unlinkat(at.dir, tmp, 0);
	return ret;
}

/*
 * Walker: a symlink of a read-only source from its items: its metadata
 * and its target, the data of its inline extent (never compressed), into
 * t->walk.st and t->link_buf.
 */
static bool symlink_from_items(struct tree *t)
{
	struct inline_file *inl = walk_inline_file(t);
	bool ok;

	if (!inl)
		return false;
	ok = S_ISLNK(inl->mode) &&
	     inl->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE &&
	     inl->size < sizeof(t->link_buf) && inl->data_len >= inl->size &&
	     !memchr(inl->data, '\0', inl->size);
	if (ok) {
		inline_file_stat(t, inl, &t->walk.st);
		memcpy(t->link_buf, inl->data, inl->size);
		t->link_buf[inl->size] = '\0';
	}
	free(inl);
	return ok;
}

/* Symlinks, FIFOs, sockets, device nodes: made whole at once. */
static void tree_special(struct tree *t, const char *src, const char *dst,
			 struct entry_at at)
{
	struct special_arg arg = { .st = &t->walk.st, .target = NULL };
	struct entry_at src_at = walk_src_at(&t->walk, src);
	char cur[PATH_MAX];
	const char *op;
	struct stat st;
	ssize_t n;
	int ret;

	if (t->walk.st_pending && symlink_from_items(t)) {
		arg.target = t->link_buf;
	} else if (t->walk.st_pending &&
		   fstatat(src_at.dir, src_at.name, &t->walk.st,
			   AT_SYMLINK_NOFOLLOW)) {
		entry_error(t, errno, "read", src);
		return;
	}
	t->walk.st_pending = false;
	if (link_seen(t, &t->walk.st, dst))
		return;
	if (S_ISLNK(t->walk.st.st_mode) && !arg.target) {
		n = readlinkat(src_at.dir, src_at.name, t->link_buf,
			       sizeof(t->link_buf) - 1);
		if (n < 0) {
			entry_error(t, errno, "read link", src);
			return;
		}
		t->link_buf[n] = '\0';
		arg.target = t->link_buf;
		/* readlink may have updated the atime (relatime): take it */
		if (!entry_frozen(t) &&
		    !fstatat(src_at.dir, src_at.name, &st,
			     AT_SYMLINK_NOFOLLOW) &&
		    st.st_ino == t->walk.st.st_ino)
			t->walk.st = st;
	}
	if (!parent_fresh(t) &&
	    special_complete(&t->walk.st, arg.target, at, &st, cur)) {
		ret = set_metadata(&t->walk_xattr, src_at, at, &t->walk.st, &st,
				   special_meta_flags(t, false) | META_COMPARE |
					   META_PRUNE,
				   &op);
		if (ret < 0)
			entry_error(t, -ret, op, dst);
		else
			count_complete(t, ret > 0, 0);
		return;
	}
	if (in_stage(t, dst))
		ret = special_named(t, src_at, at, &arg, &op);
	else
		ret = special_temp(t, src_at, at, &arg, &op);
	if (ret) {
		entry_error(t, ret, op, dst);
		return;
	}
	stat_add(t,
		 S_ISLNK(t->walk.st.st_mode) ? &t->stats->symlinks :
					       &t->stats->specials,
		 1);
	stat_add(t, &t->stats->entries_done, 1);
}

/*
 * A source directory whose copy DEST lacks is built under a hidden name
 * beside it, .NAME.encio-partial, and renamed into place at the end, once
 * everything in it is written and synced. Its entries are made under their
 * own names (no unnamed file and link for each file), an interrupted copy
 * leaves nothing under the final name, and a rerun resumes in the staging
 * directory. t->dst_root becomes the staging name; it stays where DEST has
 * the copy already (a rerun merges into it) or the name would be too long.
 */
static int stage_root(struct tree *t)
{
	char *dst = t->dst_root;
	char staging[PATH_MAX];
	struct tree_stage *s;
	struct stat st;
	const char *name = dst + t->root_off;
	int n;

	if (!fstatat(t->dest_dir->fd, *name ? name : ".", &st,
		     AT_SYMLINK_NOFOLLOW))
		return 0;
	if (errno != ENOENT)
		return -errno;
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    strlen(name) + sizeof(".encio-partial") > NAME_MAX)
		return 0;
	n = snprintf(staging, sizeof(staging), "%.*s.%s.encio-partial",
		     (int)t->root_off, dst, name);
	if (n < 0 || n >= (int)sizeof(staging))
		return 0;
	s = vec_grow(t->stages, t->nr_stages, &t->cap_stages, sizeof(*s));
	if (!s)
		return -ENOMEM;
	t->stages = s;
	s = &t->stages[t->nr_stages];
	s->staging = strdup(staging);
	s->len = n;
	s->final = strdup(dst);
	if (!s->staging || !s->final) {
		free(s->staging);
		free(s->final);
		return -ENOMEM;
	}
	t->nr_stages++;
	memcpy(t->dst_root, staging, n + 1);
	return 0;
}

/*
 * Staged trees into place, after the last sync; where the copy stopped,
 * they stay for a rerun to resume.
 */
static void tree_unstage(struct tree *t)
{
	struct encio_error e;
	size_t i;
	bool renamed = false;

	for (i = 0; i < t->nr_stages; i++) {
		struct tree_stage *s = &t->stages[i];
		int dir = t->dest_dir->fd;

		if (!t->fatal &&
		    renameat2(dir, dst_rel(t, s->staging), dir,
			      dst_rel(t, s->final), RENAME_NOREPLACE)) {
			encio_error_set(&e, errno, "put into place", s->final,
					false, 0);
			tree_stop(t, &e);
		}
		if (t->fatal && t->opts->kept)
			t->opts->kept(t->opts->arg, s->staging, s->final);
		renamed |= !t->fatal;
	}
	if (renamed && syncfs(t->sync_fd)) {
		encio_error_set(&e, errno, "sync", t->dest, false, 0);
		tree_stop(t, &e);
	}
}

/*
 * The copy of the directory the walk is at, opened (O_PATH) at @at; made
 * first where DEST lacks it (*fresh). Its stat in @cur. -errno with *op.
 */
static int dir_open_or_make(struct tree *t, struct entry_at at, bool *fresh,
			    struct stat *cur, const char **op)
{
	const int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = -1;

	*op = "make directory";
	*fresh = parent_fresh(t);
	if (!*fresh) {
		fd = openat(at.dir, at.name, flags);
		if (fd < 0 && errno == ENOTDIR) {
			*op = "make directory (not a directory)";
			return -EEXIST;
		}
		if (fd < 0 && errno != ENOENT)
			return -errno;
		*fresh = fd < 0;
	}
	if (*fresh) {
		if (mkdirat(at.dir, at.name, 0700))
			return -errno;
		/* a name swapped in since fails: not a directory */
		fd = openat(at.dir, at.name, flags);
		if (fd < 0)
			return -errno;
	}
	if (fstat(fd, cur)) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * A directory just made: owner now, through its fd; mode, xattrs and
 * times at the end. In a set-gid directory of DEST it got that group and
 * the set-gid bit, which everything made inside would inherit: entries
 * made in it must have our ids. Its mode comes from the source at the end.
 */
static int dir_fresh_owner(struct tree *t, int fd, const struct stat *cur,
			   const char **op)
{
	const struct stat *st = &t->walk.st;
	struct entry_at self = { fd, "" };

	*op = "set mode of";
	if (!parent_fresh(t) && (cur->st_mode & S_ISGID) &&
	    at_chmod(self, 0700))
		return -errno;
	*op = "set owner of";
	if (!made_with_owner(t, st) && at_chown(self, st->st_uid, st->st_gid) &&
	    errno != EPERM)
		return -errno;
	return 0;
}

/* Remember a directory for its metadata at the end. */
static int dir_remember(struct tree *t, const char *src, const char *dst,
			const struct stat *cur, bool fresh, bool acl_default)
{
	const struct stat *st = &t->walk.st;
	struct tree_dir *d;

	d = vec_grow(t->dirs, t->nr_dirs, &t->cap_dirs, sizeof(*d));
	if (!d)
		return -ENOMEM;
	t->dirs = d;
	d = &t->dirs[t->nr_dirs];
	d->src = strdup(src);
	d->dst = strdup(dst);
	d->st = *st;
	d->src_off = t->walk.rel[0] ? strlen(t->walk.src_root) + 1 :
				      strlen(src);
	d->root = t->root;
	d->dst_dev = cur->st_dev;
	d->dst_ino = cur->st_ino;
	d->no_xattrs = src_no_xattrs(t, st);
	d->fresh = fresh;
	d->acl_default = acl_default;
	if (!d->src || !d->dst) {
		free(d->src);
		free(d->dst);
		return -ENOMEM;
	}
	t->nr_dirs++;
	return 0;
}

/* A directory: made (owner now; mode, xattrs, times at the end), entered. */
static void tree_dir(struct tree *t, const char *src, const char *dst,
		     struct entry_at at)
{
	const struct stat *st = &t->walk.st;
	struct dst_dir *dir;
	struct walk_level *lvl;
	bool fresh, acl_default;
	struct stat cur;
	const char *op;
	int ret, fd;

	if (t->have_root_id && st->st_dev == t->root_dev &&
	    st->st_ino == t->root_ino) {
		entry_error(t, EINVAL, "copy a directory into itself, as",
			    t->dst_final);
		return;
	}
	if (!t->walk.rel[0]) {
		ret = stage_root(t);
		if (ret) {
			entry_error(t, ret, "make directory", dst);
			return;
		}
		dst = t->dst_root;
		at = entry_dst_at(t);
	}
	fd = dir_open_or_make(t, at, &fresh, &cur, &op);
	if (fd < 0) {
		entry_error(t, -fd, op, dst);
		return;
	}
	ret = fresh ? dir_fresh_owner(t, fd, &cur, &op) : 0;
	if (ret) {
		close(fd);
		entry_error(t, -ret, op, dst);
		return;
	}
	/* made in a directory with a default ACL, it has one too */
	acl_default = fresh && parent_fresh(t) ? parent_acl_default(t) :
						 has_default_acl(fd);
	if (!t->walk.rel[0]) {
		t->have_root_id = true;
		t->root_dev = cur.st_dev;
		t->root_ino = cur.st_ino;
	}
	ret = dir_remember(t, src, dst, &cur, fresh, acl_default);
	if (ret) {
		close(fd);
		entry_error(t, -ret, "copy", src);
		return;
	}
	stat_add(t, &t->stats->dirs, 1);
	/* Its entries are made through it. */
	dir = dst_dir_new(fd);
	ret = dir ? walk_descend(&t->walk) : -ENOMEM;
	if (ret) {
		dst_dir_put(dir);
		entry_error(t, -ret, "read directory", src);
		return;
	}
	lvl = &t->walk.levels[t->walk.depth - 1];
	lvl->fresh = fresh;
	lvl->dst = dir;
	lvl->acl_default = acl_default;
	if (!t->walk.rel[0] && t->src_roots[t->root] < 0)
		t->src_roots[t->root] =
			fcntl(dirfd(lvl->dir), F_DUPFD_CLOEXEC, 0);
}

/*
 * Open a directory remembered during the walk again, below @base through
 * no symlink (@rel: its path there), and check it is the same: a name
 * swapped since for one elsewhere, or for a symlink, is refused. Opened
 * for reading where we may, else O_PATH; *at tells which (see entry_at).
 * 0 or -errno.
 */
static int dir_reopen(int base, const char *rel, dev_t dev, ino_t ino,
		      struct entry_at *at)
{
	struct stat st;
	int fd = openat2_beneath(base, rel, O_RDONLY | O_DIRECTORY);

	*at = (struct entry_at){ fd, NULL };
	if (fd == -EACCES) {
		fd = openat2_beneath(base, rel, O_PATH | O_DIRECTORY);
		*at = (struct entry_at){ fd, "" };
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		at->dir = -1;
		return -ESTALE;
	}
	return 0;
}

/* A directory's metadata, at the end; -errno with *op and *path set. */
static int dir_finish(struct tree *t, const struct tree_dir *d, const char **op,
		      const char **path)
{
	struct entry_at src = { -1, NULL }, dst;
	unsigned int how;
	int ret;

	*op = "set metadata of (moved or replaced during the copy)";
	*path = d->dst;
	ret = dir_reopen(t->dest_dir->fd, dst_rel(t, d->dst), d->dst_dev,
			 d->dst_ino, &dst);
	if (ret)
		return ret;
	if (!d->no_xattrs && !d->src[d->src_off] && t->src_roots[d->root] < 0) {
		/* a source root the walk could not enter: the user named it */
		src = (struct entry_at){ AT_FDCWD, d->src };
	} else if (!d->no_xattrs) {
		ret = dir_reopen(t->src_roots[d->root], d->src + d->src_off,
				 d->st.st_dev, d->st.st_ino, &src);
		if (ret) {
			*op = "read xattrs of (moved or replaced during the copy)";
			*path = d->src;
			goto out;
		}
	}
	how = (d->no_xattrs ? META_NO_XATTRS : 0) |
	      (d->fresh ? META_OWNED : META_COMPARE | META_PRUNE) |
	      (d->acl_default ? META_PRUNE : 0);
	ret = set_metadata(&t->walk_xattr, src, dst, &d->st, NULL, how, op);
out:
	if (src.dir >= 0)
		close(src.dir);
	close(dst.dir);
	return ret;
}

/* Directories last, deepest first: xattrs, mode and times. */
static void tree_dirs_finish(struct tree *t)
{
	const char *op, *path;
	size_t i;
	int ret;

	for (i = t->nr_dirs; i-- > 0;) {
		ret = dir_finish(t, &t->dirs[i], &op, &path);
		if (ret && !t->stopping)
			entry_error(t, -ret, op, path);
	}
}

/* ----- the pipeline ----- */

/*
 * Whether directory @fd is the directory (@dev, @ino) or below it, by
 * climbing ".." to the top. @fd is closed.
 */
static bool dir_within(int fd, dev_t dev, ino_t ino)
{
	struct stat cur, up;
	bool within = false;
	int parent;

	while (fd >= 0 && !fstat(fd, &cur)) {
		if (cur.st_dev == dev && cur.st_ino == ino) {
			within = true;
			break;
		}
		parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = parent;
		if (fd < 0 || fstat(fd, &up) ||
		    (up.st_dev == cur.st_dev && up.st_ino == cur.st_ino))
			break;
	}
	if (fd >= 0)
		close(fd);
	return within;
}

/*
 * Refuse a source root that DEST's copy would land on or inside of, before
 * anything is made: copying a directory onto itself changes nothing it
 * could report, and into itself never ends.
 */
static int root_target_check(struct tree *t)
{
	const struct stat *st = &t->walk.st;
	struct entry_at at = entry_dst_at(t);
	struct stat cur;

	if (!fstatat(at.dir, at.name, &cur, AT_SYMLINK_NOFOLLOW) &&
	    cur.st_dev == st->st_dev && cur.st_ino == st->st_ino) {
		entry_error(t, EINVAL, "copy onto itself", t->dst_final);
		return -EINVAL;
	}
	if (!S_ISDIR(st->st_mode))
		return 0;
	/* DEST's copy is made in dest_dir */
	if (dir_within(openat(at.dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
		       st->st_dev, st->st_ino)) {
		entry_error(t, EINVAL, "copy a directory into itself, as",
			    t->dst_final);
		return -EINVAL;
	}
	return 0;
}

/*
 * Walker: handle the walk's current entry, made in DEST through @at (its
 * name in its directory's copy; @dst for messages).
 */
static void tree_entry(struct tree *t)
{
	char src[PATH_MAX], dst[PATH_MAX];
	mode_t type = t->walk.st.st_mode & S_IFMT;
	struct entry_at at;

	if (join_path(src, t->walk.src_root, t->walk.rel) ||
	    join_path(dst, t->dst_root, t->walk.rel)) {
		entry_error(t, ENAMETOOLONG, "copy", t->walk.rel);
		return;
	}
	if (!t->walk.rel[0] && root_target_check(t))
		return;
	at = entry_dst_at(t);
	switch (type) {
	case S_IFDIR:
		tree_dir(t, src, dst, at);
		break;
	case S_IFREG:
		tree_file_prepare(t, src, dst, at);
		break;
	default:
		tree_special(t, src, dst, at);
		break;
	}
}

/* DEST's length without trailing slashes, for names made under it. */
static size_t dest_len(const char *dest)
{
	size_t len = strlen(dest);

	while (len > 1 && dest[len - 1] == '/')
		len--;
	return len == 1 && dest[0] == '/' ? 0 : len;
}

static int tree_root_begin(struct tree *t)
{
	char tmp[PATH_MAX];
	const char *src = t->srcs[t->root];
	int n;

	snprintf(tmp, sizeof(tmp), "%s", src);
	if (t->dest_is_dir)
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%.*s/%s",
			     (int)dest_len(t->dest), t->dest, basename(tmp));
	else
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%.*s",
			     (int)(dest_len(t->dest) ?: 1), t->dest);
	if (n < 0 || n >= (int)sizeof(t->dst_root))
		return -ENAMETOOLONG;
	/* the copy's name in dest_dir, DEST's directory (tree_setup()) */
	if (t->dest_is_dir)
		t->root_off = dest_len(t->dest) + 1;
	else
		t->root_off =
			strrchr(t->dst_root, '/') ?
				strrchr(t->dst_root, '/') - t->dst_root + 1 :
				0;
	memcpy(t->dst_final, t->dst_root, n + 1);
	walk_reset(&t->walk, src);
	t->have_root_id = false;
	return 0;
}

/*
 * Whether the source root is read-only (a btrfs subvolume or a mount), and
 * then small files from the tree where it is btrfs; not with --verify,
 * which compares each copy with its source read plain.
 */
static void tree_source_begin(struct tree *t)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	long fs_type;
	bool frozen;
	int fd;

	t->inline_ok = t->src_frozen = false;
	t->src_dev = t->walk.st.st_dev;
	if (!S_ISDIR(t->walk.st.st_mode))
		return;
	fd = open(t->walk.src_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	t->src_frozen = !extent_fs_kind(fd, &fs_type, &frozen) && frozen;
	t->inline_ok = t->src_frozen && !t->ctx->opts.verify &&
		       fs_type == BTRFS_SUPER_MAGIC &&
		       !ioctl(fd, BTRFS_IOC_FS_INFO, &fi) &&
		       !inline_files_init(&t->inline_files, fi.sectorsize,
					  fi.nodesize);
	close(fd);
}

/* The walker thread: every source tree, entry by entry. */
static void *tree_walker(void *arg)
{
	struct tree *t = arg;
	char path[PATH_MAX];
	int ret;

	for (t->root = 0; t->root < t->nr_srcs; t->root++) {
		ret = tree_root_begin(t);
		if (ret) {
			entry_error(t, ret, "copy", t->srcs[t->root]);
			continue;
		}
		while (!stop_requested(t)) {
			ret = walk_next(&t->walk);
			if (ret == 0)
				break;
			if (ret > 0) {
				if (!t->walk.rel[0]) {
					meta_prefetch_start(&t->prefetch,
							    AT_FDCWD,
							    t->walk.src_root,
							    &t->walk.st,
							    &t->walked);
					tree_source_begin(t);
				}
				tree_entry(t);
				meta_prefetch_walked(&t->walked);
				continue;
			}
			if (join_path(path, t->walk.src_root, t->walk.rel))
				snprintf(path, sizeof(path), "%s", t->walk.rel);
			entry_error(t, ret, "read", path);
		}
		meta_prefetch_stop(&t->prefetch);
		inline_files_release(&t->inline_files);
		t->inline_ok = t->src_frozen = false;
	}
	pthread_mutex_lock(&t->lock);
	t->walk_done = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
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

/* Give every free slot work, taking opened files from the walker. */
static void tree_fill(struct tree *t)
{
	struct engine *engine = &t->ctx->engine;
	struct engine_req *req;
	struct copy_job *job;
	struct tree_file *f;

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
	if (copy_job_idle(job) && (job->err || !copy_job_has_work(job)))
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
			stat_add(t, &t->stats->files, -1);
			stat_add(t, &t->stats->entries_done, -1);
			entry_error(t, -ret, "put into place", batch[i].dst);
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
		if (!t->sync_failed && syncfs(t->sync_fd)) {
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

	while (!stop_requested(t)) {
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

static int xattr_buf_init(struct xattr_buf *b)
{
	b->list = malloc(XATTR_LIST_BYTES);
	b->value = malloc(XATTR_VALUE_BYTES);
	b->dst_list = malloc(XATTR_LIST_BYTES);
	b->dst_value = malloc(XATTR_VALUE_BYTES);
	return b->list && b->value && b->dst_list && b->dst_value ? 0 : -ENOMEM;
}

static void xattr_buf_release(struct xattr_buf *b)
{
	free(b->list);
	free(b->value);
	free(b->dst_list);
	free(b->dst_value);
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
	if (fstat(t->sync_fd, &st))
		return encio_error_set(e, errno, "stat", t->dest, false, 0);
	t->dst_dev = st.st_dev;
	t->dest_acl_default = has_default_acl(t->sync_fd);
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
		ret = pthread_create(&t->walker, NULL, tree_walker, t);
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
	};
	struct encio_error se;
	int i, ret;

	memset(stats, 0, sizeof(*stats));
	pthread_mutex_init(&t.lock, NULL);
	pthread_cond_init(&t.cond, NULL);
	t_umask = umask(0);
	umask(t_umask);
	t_euid = geteuid();
	t_egid = getegid();
	pthread_cond_init(&t.r_cond, NULL);
	ret = tree_setup(&t, e);
	if (ret)
		goto out;
	if (opts->count_first) {
		for (i = 0; i < nr_srcs && !stop_requested(&t); i++)
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
	tree_make_links(&t);
	tree_dirs_finish(&t);
	/* The renames, links and directory metadata, durable too. */
	if (syncfs(t.sync_fd)) {
		encio_error_set(&se, errno, "sync", dest, false, 0);
		tree_stop(&t, &se);
	}
	tree_unstage(&t);
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
