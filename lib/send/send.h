/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio send: a btrfs send stream (version 2) of a directory tree or
 * subvolume, compressed extents read encoded and sent as ENCODED_WRITE.
 */
#ifndef ENCIO_SEND_H
#define ENCIO_SEND_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/error.h"
#include "io/engine.h"
#include "stream/resume.h"

struct send_stats;
struct send_pass;

/* Called after each file and each window of reads. */
typedef void (*send_progress_fn)(const struct send_stats *stats, void *arg);

struct send_options {
	enum encio_io_mode io_mode; /* for encoded reads; AUTO by default */
	unsigned int depth;	    /* reads in flight per file; 0 default */
	bool snapshot; /* send from a temporary read-only snapshot */
	/*
	 * -p: send the difference from this read-only snapshot; -c: clone
	 * sources, data shared with them sent as CLONE. With clone sources
	 * but no parent, the parent is chosen among them as btrfs send does.
	 */
	const char *parent;
	const char *const *clones;
	size_t nr_clones;
	/* clone sources but no parent: sent whole, no parent chosen */
	bool whole;
	/*
	 * In process (copy --subvolumes): the parent and clone sources by
	 * the subvolume ids they were listed with, which paths may no longer
	 * name; the paths above only name them in messages.
	 */
	uint64_t parent_id;
	const uint64_t *clone_ids;
	uint32_t proto; /* stream version: 1, 2; 0 is 2 */
	bool no_data;	/* the kernel's stream without file data */
	/*
	 * -n: no stream written, its size and counts found (stats): the
	 * kernel's stream counted as it comes, a walked tree's from its
	 * extent maps, no file data read.
	 */
	bool estimate;
	/*
	 * -t: the stream resumed at this point, for the PATH whose subvolume
	 * it names (by UUID and ctransid): the PATHs before it are taken as
	 * received whole and not sent, its commands before the point not
	 * either, the rest and the PATHs after it are. A walked tree skips
	 * to the point from its metadata, no data read, and checks the
	 * commands' shape; the kernel's stream is regenerated and checked
	 * against the point's fingerprint (-ESTALE where they differ). A
	 * point of another layout (options, encio's stream layout) is
	 * refused, -EPROTO.
	 */
	const struct resume_point *resume;
	bool one_stream; /* -e: one header, END after the last PATH only */
	/*
	 * The PATH's part in no subvolume below it is what is wanted (send
	 * --subvolumes): walked live as copy -r walks it, even where it is
	 * a writable subvolume's root; a directory holding only nested
	 * subvolumes goes as an empty tree, not refused
	 */
	bool tree_part;
	/* one PATH only: its subvolume's name in the stream, NULL for its own */
	const char *name;
	/* set (by a signal handler): stop, -EINTR, snapshot deleted */
	const volatile sig_atomic_t *stop;
	/* a file the stream replaces when done: left out of it too */
	dev_t replaces_dev;
	ino_t replaces_ino;
	/*
	 * With a callback: bytes_total is the stream's size, estimated from
	 * metadata beside the send (0 until known), and bytes_done the
	 * stream written so far.
	 */
	send_progress_fn progress;
	void *progress_arg;
	/*
	 * The estimate is reported (stats' bytes_estimated, JSON): made
	 * from the start and waited for at the end. Without it, an
	 * incremental's starts SEND_ESTIMATE_DELAY_SECONDS in and a send
	 * done first does not wait for it.
	 */
	bool estimate_reported;
	/*
	 * The kernel's pass for the one PATH, made before with these
	 * options (send_pass_make()): read instead of asking the kernel
	 * again, unless a subvolume it depends on changed since.
	 */
	const struct send_pass *pass;
};

struct send_stats {
	uint64_t files;
	uint64_t dirs;
	uint64_t others;	  /* symlinks, links, special files */
	uint64_t bytes_logical;	  /* file data sent, as unencoded bytes */
	uint64_t bytes_encoded;	  /* ENCODED_WRITE payload bytes */
	uint64_t extents_encoded; /* ENCODED_WRITE commands */
	uint64_t clones;	  /* CLONE commands for data sent before */
	uint64_t clone_bytes;	  /* file bytes they stand for */
	uint64_t stream_bytes;
	uint64_t passes_reused;	  /* kernel passes read from opts->pass */
	uint64_t bytes_total;	  /* the stream's size: estimated, then real */
	uint64_t bytes_estimated; /* progress's estimate of it; 0: none yet */
	uint64_t bytes_done;	  /* of the stream, written */
	/*
	 * -t: the point the stream resumed at (the stats above are of the
	 * stream after it); 0: not resumed
	 */
	uint64_t resumed_at;
	/*
	 * Of the kernel's stream (an incremental send): its commands, and
	 * the names removed (UNLINK, RMDIR); 0 for a walked tree. What
	 * changed in place shows in them: files, dirs and others count what
	 * was created.
	 */
	uint64_t commands;
	uint64_t removed;
	enum encio_io_mode read_mode; /* NONE: plain reads */
	/*
	 * The probe of the walked tree's reads (why they are plain, what
	 * the kernel does with fixed buffers), where @probed
	 */
	struct encio_probe probe;
	bool probed;
};

/* What a PATH to send is, for what its stream can promise. */
enum send_source {
	/* a read-only subvolume, or in one or on a read-only mount */
	SEND_SOURCE_FROZEN,
	/* the root of a writable subvolume: refused, as btrfs send does */
	SEND_SOURCE_WRITABLE_SUBVOL,
	/* a directory that may change while it is sent */
	SEND_SOURCE_LIVE,
};

int send_source_kind(const char *path, enum send_source *kind,
		     struct encio_error *e);
/*
 * -EINVAL for a directory that is not a subvolume and holds only nested
 * subvolumes: its stream would be an empty subvolume.
 */
int send_check_path(const char *path, struct encio_error *e);

/*
 * Where the stream of -f FILE goes: an unnamed file (or, without
 * O_TMPFILE, a dot-name) in FILE's directory, given FILE's name by
 * send_output_commit() only; or FILE itself when it exists and is not a
 * regular file (/dev/null, a FIFO), as btrfs send writes it.
 */
struct send_output {
	int fd;
	int dir_fd;		 /* -1: FILE itself is written */
	char name[NAME_MAX + 1]; /* FILE's last component */
	char tmp[NAME_MAX + 1];	 /* the temporary's name, "" while unnamed */
	bool replaces;		 /* a regular FILE is there to be replaced */
	struct stat replaced;	 /* its stat */
};

int send_output_open(struct send_output *out, const char *file,
		     struct encio_error *e);
/* Flush the stream to disk and give it FILE's name (then closed). */
int send_output_commit(struct send_output *out, const char *file,
		       struct encio_error *e);
/* Close and remove the temporary: FILE stays as it was. */
void send_output_abort(struct send_output *out);
/*
 * The send stopped short: what it wrote, flushed, kept beside FILE as
 * FILE.encio-partial (its name into @kept, NAME_MAX + 1 bytes), replacing
 * one there, for encio stream-cut; FILE stays as it was. -ENOENT where
 * FILE itself was written (not a regular file).
 */
#define SEND_PARTIAL_SUFFIX ".encio-partial"
int send_output_keep(struct send_output *out, char *kept);

/*
 * Write the stream of the @nr trees @paths, one subvolume each, to @out_fd
 * (@out_name for messages): a stream (header to END) per path, or with
 * opts->one_stream one header and one END, as btrfs send writes several
 * subvolumes. The root of a writable subvolume is refused (-EINVAL) but
 * with opts->snapshot, which sends from a read-only snapshot of it, deleted
 * before returning whatever happened. A full send of version 2 walks the
 * tree; with a parent, clone sources, --no-data or version 1 the kernel
 * writes the stream, data included (BTRFS_IOC_SEND with
 * BTRFS_SEND_FLAG_COMPRESSED from version 2 on), and it is relayed.
 * Returns 0 or -errno with @e filled (-EINTR: *opts->stop was set); @stats
 * is filled either way.
 */
int send_run(const char *const *paths, size_t nr, int out_fd,
	     const char *out_name, const struct send_options *opts,
	     struct send_stats *stats, struct encio_error *e);

/*
 * The kernel's pass for the read-only subvolume @root with @opts (parent,
 * clone sources, version): its stream (BTRFS_IOC_SEND, data included)
 * kept in memory, for a send_run() of @root later, so that a caller may
 * have the kernel compute one subvolume's difference while it receives
 * another. What the stream depends on is recorded: the ids and ctransids
 * of @root and of every parent and clone source. A stream of more than
 * @max_bytes is given up (-EFBIG); *opts->stop set stops it (-EINTR).
 * Returns 0 or -errno with @e filled.
 */
struct send_pass {
	int fd; /* the stream, in an unnamed memory file */
	uint64_t bytes;
	uint32_t version;
	uint64_t flags; /* BTRFS_SEND_FLAG_* */
	uint64_t root_id, root_ctransid;
	uint64_t parent_id;
	uint64_t *ids; /* the clone sources given to the kernel */
	uint64_t *ctransids;
	size_t nr_ids;
};

int send_pass_make(struct send_pass *p, const char *root,
		   const struct send_options *opts, uint64_t max_bytes,
		   struct encio_error *e);
void send_pass_release(struct send_pass *p);

#endif
