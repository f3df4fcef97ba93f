/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copy -r --subvolumes: every subvolume below a source root recreated as a
 * subvolume in DEST, snapshots as snapshots of the copies made before them,
 * so that what SRC's subvolumes share stays shared.
 */
#ifndef ENCIO_COPY_SUBVOLS_H
#define ENCIO_COPY_SUBVOLS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "copy/copy.h"
#include "io/engine.h"
#include "base/error.h"
#include "tree/tree.h"

/*
 * A subvolume of SRC this run did not copy, and why: its copy failed, or
 * it is left out because it lies in the copy of one that failed.
 */
struct subvols_problem {
	char *dst;	      /* its copy's path in DEST */
	struct encio_error e; /* failed: what failed; e.err 0: left out */
	const char *inside;   /* left out: the dst of the failed one */
};

/*
 * A subvolume of the copy in DEST at a path where SRC has none (--final),
 * and whether it was deleted (--delete-extra).
 */
struct subvols_extra {
	char *dst;
	/*
	 * Why it stays (NULL: deleted): not proved a copy encio made of a
	 * subvolume SRC no longer has, or the error deleting it (@err).
	 */
	const char *kept;
	int err;
};

struct subvols_stats {
	uint64_t total;	      /* subvolumes below SRC, SRC's own included */
	uint64_t copied;      /* copied by this run */
	uint64_t incremental; /* of those, made as snapshots of copies */
	uint64_t ahead;	      /* of those, from a difference made ahead */
	uint64_t skipped;     /* complete in DEST already */
	uint64_t replaced;    /* in DEST, SRC changed since: copied again */
	uint64_t resumed; /* of those copied, gone on with from a stopped run */
	uint64_t complete_entries; /* found complete in the partials resumed */
	uint64_t bytes_written;	   /* file data written (logical) */
	uint64_t encoded_bytes;	   /* of it, written without decoding */
	uint64_t clones;	   /* ranges cloned from data written before */
	uint64_t stream_bytes;	   /* commands passed from send to receive */
	uint64_t bases;		   /* snapshots kept in SRC for the next run */
	uint64_t failed;	   /* subvolumes whose copy failed */
	uint64_t left_out;	   /* not copied: in the copy of a failed one */
	/* the failed and left out, in the copy order */
	struct subvols_problem *problems;
	size_t nr_problems;
	/* --final: what the copy holds that SRC does not (any more) */
	struct subvols_extra *extras;
	size_t nr_extras;
	uint64_t extras_deleted;
	/* stopped: the copy in flight kept for a rerun to go on with */
	bool kept;
	/* the subvolume being copied: its path in DEST, data written so far */
	const char *current;
	uint64_t current_bytes;
	bool current_resumed; /* gone on with from a stopped run's copy */
};

/* How a subvolume is brought into DEST. */
enum subvols_how {
	SUBVOLS_FULL,	     /* copied whole */
	SUBVOLS_INCREMENTAL, /* a snapshot of @parent's copy, then changed */
	SUBVOLS_SKIPPED,     /* complete in DEST already */
};

struct subvols_options {
	enum encio_io_mode io_mode;
	unsigned int depth;
	bool no_target_dir; /* DEST is SRC's copy even if it exists (cp -T) */
	/*
	 * The last run of a move: the snapshots kept in SRC as the bases of
	 * the next run's differences (.NAME.encio-base) are deleted at its end
	 */
	bool final;
	/*
	 * With @final, the read-only subvolumes of the copy that encio made
	 * of subvolumes SRC no longer has are deleted (--delete-extra)
	 */
	bool delete_extra;
	/* a difference's checkpoints, every so much stream (0: 1 GiB) or 10 s */
	uint64_t checkpoint_bytes;
	bool no_root_nocow; /* receive_options' */
	/* set by a signal handler: stop, the subvolume in flight kept */
	volatile sig_atomic_t *stop;
	/*
	 * Each subvolume as it is begun: @dst its path in DEST, @parent the
	 * source of the snapshot it is made from (SUBVOLS_INCREMENTAL).
	 */
	void (*begin)(void *arg, const char *dst, enum subvols_how how,
		      const char *parent, const struct subvols_stats *stats);
	/* called often while data is written: throttle in the callee */
	void (*progress)(void *arg, const struct subvols_stats *stats);
	void *arg;
};

/*
 * Copy the tree @src to @dest as copy -r does (into @dest/basename(SRC)
 * when @dest is an existing directory, but with opts->no_target_dir), its
 * subvolumes as subvolumes: in the order of their generations, each read-
 * only one from the subvolume itself, each writable one from a temporary
 * read-only snapshot of it, through send and receive in process; a
 * snapshot whose relative was copied before is made as a snapshot of that
 * copy and brought to its content by the kernel's difference. What is not
 * in a subvolume below SRC is copied by tree_copy() with @ctx and @topts.
 * Read-only flags, received UUIDs and the default subvolume are kept (see
 * encio-copy(8)). Subvolumes complete in DEST are skipped, so a rerun
 * resumes. A subvolume whose copy fails is recorded in stats->problems,
 * with those left out because they lie in its copy, and the others are
 * copied; ENOSPC, EDQUOT, EROFS, ENOMEM, a failure of SRC's own copy and
 * opts->stop stop it all. Returns 0 or -errno with @e filled (-EINTR:
 * opts->stop; -EIO when it went on past failed subvolumes, which
 * stats->problems name). stats' lists are freed by
 * subvols_stats_release().
 */
int subvols_copy(struct copy_ctx *ctx, const struct tree_options *topts,
		 const struct subvols_options *opts, const char *src,
		 const char *dest, struct subvols_stats *stats,
		 struct tree_stats *tstats, struct encio_error *e);

void subvols_stats_release(struct subvols_stats *stats);

/*
 * copy --abort: what a stopped copy --subvolumes kept of its copy at @dst
 * (DEST/NAME) to go on with, deleted: a whole copy's partial subvolume
 * (.NAME.encio-partial, ours and marked as only root can mark it) and a
 * difference's partial receive (as receive_partial_abort() drops it);
 * nothing else. 0, or -errno with @e filled: -ENOENT where there is
 * none, -EBUSY where a receive of it runs (its pid in *@holder).
 */
int subvols_partial_abort(const char *dst, pid_t *holder,
			  struct encio_error *e);

#endif
