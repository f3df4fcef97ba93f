/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Copy of whole trees: a directory walk feeding one pipeline of many files
 * in flight on one engine, entries of every type, metadata, hard links,
 * staging of new trees, checkpoints (syncfs, then rename into place) and
 * resume.
 */
#ifndef ENCIO_TREE_H
#define ENCIO_TREE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "copy/copy.h"

#define TREE_DEFAULT_FILES 256 /* files in flight */
#define TREE_MAX_FILES 1024

struct tree_stats {
	uint64_t files;	    /* regular files copied */
	uint64_t dirs;	    /* directories created or reused */
	uint64_t symlinks;  /* symbolic links created */
	uint64_t specials;  /* FIFOs, sockets and device nodes created */
	uint64_t hardlinks; /* names linked to a file copied before */
	uint64_t skipped;   /* entries already complete in DEST (resume) */
	uint64_t meta_updated; /* complete in DEST but for their metadata, now set */
	uint64_t failed;       /* entries not copied, each reported */
	uint64_t entries_done;
	uint64_t checkpoints;	 /* syncfs + renames */
	uint64_t bytes_skipped;	 /* sizes of the files skipped */
	unsigned int peak_files; /* most files in flight at once */
	uint64_t ring_waits;	 /* the ring thread idle, waiting for files */
	uint64_t walker_waits;	 /* the walker waiting for room in flight */
	/* from the counting walk (tree_options.count_first), else 0 */
	uint64_t total_entries;
	uint64_t total_bytes;
	uint64_t total_dirs;
};

struct tree_options {
	unsigned int max_files; /* files in flight, 0 for the default */
	bool count_first;	/* walk once first, for totals */
	bool no_target_dir;	/* DEST is the copy even if it exists (cp -T) */
	/* subvolumes below a source root are left out, for their own copy */
	bool skip_subvolumes;
	/*
	 * DEST (with no_target_dir) is not in place yet: the caller made it
	 * empty, under a name of its own, and renames it when the copy is
	 * complete. Everything in it is made under its own name, as in a
	 * staged tree, with no checkpoint before the last sync.
	 */
	bool dest_unpublished;
	/* set by the caller (a signal handler): stop cleanly at once */
	volatile sig_atomic_t *stop;
	/* an entry failed; the copy goes on */
	void (*report)(void *arg, const struct encio_error *e);
	/* the first probe of encoded I/O is done (ctx->probe) */
	void (*probed)(void *arg);
	/* the copy stopped: a staged tree stays for a rerun to resume */
	void (*kept)(void *arg, const char *staging, const char *final);
	/* called often while the copy runs: throttle in the callee */
	void (*progress)(void *arg, const struct tree_stats *stats,
			 const struct copy_stats *copy);
	void *arg;
};

/*
 * Copy the trees @srcs (directories, or entries of any type) to @dest as
 * cp -r does: into @dest/basename(SRC) when @dest is an existing directory,
 * else to @dest itself (one source only). Entries already complete and
 * identical in DEST are skipped. Errors of one entry go to opts->report and
 * are counted in stats->failed. Returns 0, or -errno with @e filled when the
 * copy stopped: -EINTR when opts->stop was set, -ENOSPC, or a sync error.
 */
int tree_copy(struct copy_ctx *ctx, const struct tree_options *opts,
	      char *const *srcs, int nr_srcs, const char *dest,
	      struct tree_stats *stats, struct encio_error *e);

#endif
