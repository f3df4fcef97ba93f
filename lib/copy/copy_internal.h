/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to encio copy (lib/copy/): the context behind copy.h, the copy
 * jobs, sharing. copy -r (lib/tree/) drives the jobs on its own engine
 * loop: the one folder that may include this header (lib/LAYERS: shares
 * copy tree). Each file calls only those above it:
 *
 *   verify.c      copies compared with their sources
 *   copy_job.c    a job's errors, progress, ranges
 *   copy_share.c  which ranges are cloned (decides)
 *   copy.c        the context, the probe, the jobs, copy_file()
 */
#ifndef ENCIO_COPY_INTERNAL_H
#define ENCIO_COPY_INTERNAL_H

#include <sys/stat.h>

#include "codec/cpool.h"
#include "copy/copy.h"
#include "fs/extents.h"
#include "fs/share.h"

struct copy_ctx {
	struct copy_options opts;
	struct engine engine;
	struct codec *codec;
	struct cpool cpool; /* codec workers, with --compress/--recompress */
	bool cpool_started;
	void *decode_buf;
	void *chunk_buf; /* a chunk padded with zeros to its unencoded_len */
	void *encode_buf;
	struct verify_ctx verify; /* with opts.verify */
	struct copy_stats stats;
	struct encio_probe probe; /* of the last source / destination probed */
	dev_t read_dev;
	long read_fs_type; /* statfs f_type of read_dev */
	dev_t write_dev;
	uint32_t write_sectorsize; /* of write_dev */
	bool read_probed;
	bool write_probed;
	struct inode_flags_refused flags_refused; /* by DEST, for a warning */
	/* with share_on (copy_share_begin()): shared ranges cloned */
	struct share_index share;
	bool share_on;
	int clone_fd;	     /* the clone source opened last, or -1 */
	uint32_t clone_file; /* its share_file */
	int holder_fd;	     /* share.holder_on: the holder (O_TMPFILE) */
};

/*
 * One file in flight: its extent map, the ranges still to issue, and how
 * many requests it has in the engine. Several jobs can share one engine:
 * copy_job_issue() sets req->priv to the job, so a completion finds its file.
 */
struct copy_range {
	uint64_t start;
	uint64_t end;
	bool whole; /* a compressed extent, read whole */
};

/*
 * A file whose only extent is inline at offset 0 and already in memory
 * (read from the tree): the job writes it without reading the source.
 */
struct copy_inline {
	uint32_t compression; /* BTRFS_ENCODED_IO_COMPRESSION_* */
	uint64_t ram_bytes;   /* >= the file's size */
	const void *data;     /* the extent's bytes as stored */
	uint32_t data_len;
};

struct copy_job {
	struct copy_ctx *ctx;
	const char *src_path;
	const char *dst_path; /* for messages */
	int src_fd;
	int dst_fd;
	uint64_t size;
	uint32_t sectorsize; /* of the destination */
	struct extent_map map;
	size_t next_extent;
	const struct copy_inline *inline_data; /* not yet issued, or NULL */
	struct copy_range *pending;
	uint64_t aligned_to; /* end of the data ranges widened to sectors */
	size_t nr_pending;
	size_t cap_pending;
	enum encio_io_mode read_mode;
	enum encio_io_mode write_mode;
	enum encio_io_mode
		plain_mode;    /* for plain reads when read_mode is NONE */
	unsigned int inflight; /* requests in the engine */
	unsigned int chunks;   /* chunks with the codec workers */
	uint64_t done;	       /* bytes of the file done (bytes_done) */
	struct stat src_st;    /* the source when the job started */
	bool check_src;	       /* compare src_st with the source at the end */
	struct encio_error *e;
	int err;
	void *owner; /* the caller's */
	bool share;  /* its ranges are in ctx->share */
	/* written where only root can reach it until the copy ends */
	bool dst_private;
	uint32_t share_file;
	struct share_plan clones;  /* ranges to clone, in file order */
	size_t next_clone;	   /* where job_refill() is in clones */
	struct share_plan holders; /* extents to write into the holder */
	size_t next_holder;	   /* the next one to read */
	bool share_wait;    /* a clone waits for the writes of its source */
	uint64_t share_gen; /* ctx->share.state_gen when it last looked */
};

/*
 * Chunks are encoded by worker threads while the engine goes on; their
 * results are written by the thread that drives the engine: poll (write
 * what is ready) after each completion, wait (for at least one) when the
 * engine is idle but chunks are busy. A job is idle only when none of its
 * chunks is busy.
 */
void copy_ctx_poll_chunks(struct copy_ctx *ctx);
void copy_ctx_wait_chunks(struct copy_ctx *ctx);
unsigned int copy_ctx_chunks_busy(const struct copy_ctx *ctx);

/*
 * With opts.verify: verify_file_fds() on ctx->verify, the copy @dst_fd
 * against its source @src_fd, every byte (the engine is not used). Call it
 * only when nothing of either file is in flight. Returns 0, or -errno with
 * @e naming @dst_path and the offset of the first difference
 * (-VERIFY_DIFFERS).
 */
int copy_verify_fds(struct copy_ctx *ctx, int src_fd, int dst_fd,
		    const char *dst_path, struct encio_error *e);

/* copy_probe() on open files; the engine must be idle (nothing in flight). */
int copy_probe_fds(struct copy_ctx *ctx, int src_fd, int dir_fd,
		   const char *src, const char *dst_dir, struct encio_error *e);

/*
 * The per-file steps, for pipelines of many files on one engine:
 * copy_job_start() maps @job->src_fd and sizes @job->dst_fd (the modes and
 * paths are set by the caller, after copy_probe_fds() for its source and
 * destination); copy_job_issue() puts the job's next piece
 * of work into @req (false when it has none to issue now);
 * copy_job_complete() handles a completion of @req (req->priv == job) and
 * returns true when @req went back into the engine, false when the caller
 * must put it. A job is finished when it is idle and has no work left
 * (!copy_job_has_work()), or has job->err set and is idle. The first call
 * of copy_job_has_work() that finds the job idle with no work left checks
 * that the source did not change since copy_job_start() (size, mtime,
 * ctime unless a link or unlink moved it), and fails the job with
 * COPY_ESRCCHANGED if it did.
 */
int copy_job_start(struct copy_job *job, const struct stat *st);
/*
 * copy_job_start() for a file whose data is @in (kept by the caller until
 * the job is finished); job->src_fd may be -1.
 */
int copy_job_start_inline(struct copy_job *job, const struct stat *st,
			  const struct copy_inline *in);
bool copy_job_issue(struct copy_job *job, struct engine_req *req);
bool copy_job_complete(struct copy_job *job, struct engine_req *req);
bool copy_job_has_work(struct copy_job *job);
void copy_job_release(struct copy_job *job);

static inline bool copy_job_idle(const struct copy_job *job)
{
	return job->inflight == 0 && job->chunks == 0;
}

/*
 * An idle job with no work to issue that is not finished either: a range
 * it clones from another file waits for that file's writes (see
 * copy_job_has_work()).
 */
static inline bool copy_job_waiting(const struct copy_job *job)
{
	return !job->err && job->share_wait;
}

/*
 * Sharing (lib/copy/copy_share.c). copy_share_begin() before the first file of
 * a run whose sources are @srcs and whose destination is the directory
 * @dest_fd: if DEST is btrfs, a range of a source extent referenced more
 * than once is written once and cloned (FICLONERANGE) everywhere else.
 * copy_share_plan() at a job's start: the ranges written before become
 * its clones, its others are remembered. copy_share_clone() once its
 * writes are done and its source was checked: it makes its written ranges
 * available to others, then clones what it can; what cannot be cloned
 * (a source failed, a destination that refuses) is handed back as ranges
 * to write (true), and what waits on a source still being written sets
 * job->share_wait. copy_share_end() when the job is released.
 */
int copy_share_begin(struct copy_ctx *ctx, int dest_fd, const char *const *srcs,
		     int nr);
int copy_share_plan(struct copy_job *job);
/*
 * Whether no one but root, the user running the copy and @owner can write
 * the file of @st (the group bits of a file with an ACL are its mask, so
 * they bound every entry but the owner's): a file of DEST offered as a
 * clone source, or cloned from into a file of @owner, must be. A file a
 * rerun found complete is offered only if its stat as found passes with
 * its own source's owner, so that it was not someone else's to change.
 */
bool copy_share_writers_only(const struct stat *st, uid_t owner);
/*
 * A file a rerun found complete in DEST (@dst_fd, of the source @src_fd,
 * @st, @map; in a tree only root could ever reach: @private_tree): its
 * ranges offered as if this run wrote them, so that the files sharing
 * their extents clone them instead of writing them again.
 */
void copy_share_note_complete(struct copy_ctx *ctx, int src_fd,
			      const struct stat *st,
			      const struct extent_map *map, int dst_fd,
			      bool private_tree);
bool copy_share_clone(struct copy_job *job);
void copy_share_end(struct copy_job *job);
/*
 * copy_job.c: the job's first error (@err, naming the destination if
 * @on_dst, else the source, at @offset), returned as -errno
 */
int copy_job_fail(struct copy_job *job, int err, const char *op, bool on_dst,
		  uint64_t offset);
/* [start, end) of the file done (clipped at EOF), for progress */
void copy_job_progress(struct copy_job *job, uint64_t start, uint64_t end);
/* [start, end) of the file preallocated (KEEP_SIZE), or -errno */
int copy_job_fallocate(struct copy_job *job, uint64_t start, uint64_t end);
/* a range of the file to read and write again */
int copy_job_push_range(struct copy_job *job, uint64_t start, uint64_t end,
			bool whole);

#endif
