/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to copy -r (tree_copy(), lib/tree/): the state the walker,
 * ring and renamer threads share, and the functions the files call across.
 * Not an API: lib/tree/tree.h is. Each file calls only those above it:
 *
 *   tree_report.c       errors, a stop, progress, from every thread
 *   tree_meta.c         an entry's metadata and kept inode flags
 *   tree_walk.c         the walk of a source tree, entry by entry
 *   tree_entry.c        entries made and placed in DEST
 *   tree_file.c         regular files, the walker's side
 *   tree_walk_thread.c  the walker thread
 *   tree.c              the run, the ring thread, the renamer
 */
#ifndef ENCIO_TREE_INTERNAL_H
#define ENCIO_TREE_INTERNAL_H

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "fs/inline_files.h"
#include "fs/inode_flags.h"
#include "fs/meta.h"
#include "fs/prefetch.h"
#include "copy/copy_internal.h"
#include "tree/tree.h"

#define CHECKPOINT_FILES 4096
#define CHECKPOINT_BYTES (2ULL << 30)

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

/* Takes @fd; NULL (and @fd closed) without memory. */
static inline struct dst_dir *dst_dir_new(int fd)
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

static inline struct dst_dir *dst_dir_get(struct dst_dir *d)
{
	__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
	return d;
}

static inline void dst_dir_put(struct dst_dir *d)
{
	if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL))
		return;
	close(d->fd);
	free(d);
}

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
	/* in a staged tree, which only root can reach until the copy ends */
	bool private_tree;
	/* complete in DEST already: only offered to the share index */
	bool complete;
	unsigned int src_flags; /* the source's kept inode flags */
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
	bool no_xattrs;		/* the source is known to have none */
	bool fresh;		/* made by this run, and given its owner then */
	bool acl_default;	/* it has a default ACL (see walk_level) */
	unsigned int src_flags; /* the source's kept inode flags */
};

/* A file to make append-only or immutable once every link is in place. */
struct tree_late_flags {
	char *dst;
	dev_t dev;
	ino_t ino;
	unsigned int flags; /* of INODE_FLAGS_LATE */
};

/* A tree built under a hidden name, renamed into place at the end. */
struct tree_stage {
	char *staging;
	size_t len; /* of staging */
	char *final;
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
	 * The filesystem written to, for syncfs, the probes and the share
	 * index: DEST where it is a directory (with -T, a mount point's
	 * parent is another filesystem), else sync_fd.
	 */
	int fs_fd;
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
	struct tree_late_flags *late_flags; /* the walker's */
	size_t nr_late_flags;
	size_t cap_late_flags;
	struct inode_slot *inodes;
	size_t nr_inodes;
	size_t cap_inodes; /* power of two */

	struct xattr_buf ring_xattr; /* one per thread */
	struct xattr_buf walk_xattr;
	char link_buf[PATH_MAX];
};

static inline void *vec_grow(void *arr, size_t nr, size_t *cap, size_t size)
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

/* tree_report.c: errors, progress */
void tree_stop(struct tree *t, const struct encio_error *e);
void tree_stat_add(struct tree *t, uint64_t *counter, uint64_t n);
void tree_report(struct tree *t, const struct encio_error *e);
void tree_entry_error(struct tree *t, int err, const char *op,
		      const char *path);
void tree_progress(struct tree *t);
bool tree_stop_requested(struct tree *t);
void tree_count_complete(struct tree *t, bool updated, uint64_t bytes);

/* tree_walk.c: the walk */
void tree_walk_reset(struct walker *w, const char *src_root);
void tree_walk_release(struct walker *w);
int tree_walk_next(struct walker *w);
struct entry_at tree_walk_src_at(const struct walker *w, const char *path);
int tree_walk_open_file(const struct walker *w, const char *path,
			struct stat *st);
int tree_walk_descend(struct walker *w);
struct inline_file *tree_walk_inline_file(struct tree *t);
void tree_walk_inline_file_stat(const struct tree *t,
				const struct inline_file *inl, struct stat *st);

/* tree_meta.c: metadata */
bool tree_meta_src_no_xattrs(struct tree *t, const struct stat *st);
void tree_meta_ids_init(void);
bool tree_meta_ids_ours(const struct stat *st);
int tree_meta_file_owner_mode(struct xattr_buf *b, struct tree_file *f,
			      bool made_ours, const char **op);
int tree_meta_file_metadata(struct tree *t, struct tree_file *f,
			    const char **op);
int tree_meta_file_flags_early(struct tree *t, struct tree_file *f, int dst_fd,
			       const char **op);
int tree_meta_file_flags_late(struct tree *t, struct tree_file *f, int dst_fd,
			      const char **op);
int tree_meta_flags_unlock(struct tree *t, int dst_fd, const char **op);
void tree_meta_flags_unlock_at(struct tree *t, struct entry_at at);

/* tree_entry.c: making and placing entries */
struct dst_dir *tree_entry_dst_dir(const struct tree *t);
struct entry_at tree_entry_dst_at(const struct tree *t);
bool tree_entry_parent_fresh(const struct tree *t);
bool tree_entry_parent_acl_default(const struct tree *t);
int tree_entry_make_temp(struct entry_at at, char tmp[NAME_MAX + 1],
			 int (*make)(void *arg, int dir, const char *tmp),
			 void *arg);
bool tree_entry_in_stage(const struct tree *t, const char *path);
int tree_entry_clear_name(struct entry_at at);
bool tree_entry_link_seen(struct tree *t, const struct stat *st,
			  const char *dst);
void tree_entry_make_links(struct tree *t);
void tree_entry_special(struct tree *t, const char *src, const char *dst,
			struct entry_at at);
void tree_entry_unstage(struct tree *t);
void tree_entry_dir(struct tree *t, const char *src, const char *dst,
		    struct entry_at at);
void tree_entry_dirs_finish(struct tree *t);
void tree_entry_root_finish(struct tree *t);

/* tree_file.c: regular files, the walker's side */
void tree_file_discard(struct tree_file *f);
void tree_file_free(struct tree_file *f);
void tree_file_prepare(struct tree *t, const char *src, const char *dst,
		       struct entry_at at);

/* tree_walk_thread.c: the walker thread */
void *tree_walk_thread(void *arg);

#endif
