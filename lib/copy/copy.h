/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio copy, the public API: one file at a time through the engine
 * (copy_file()), and the verification of copies (verify_*()). The context
 * is opaque; lib/copy/copy_internal.h has it and the copy jobs tree
 * drives. Regular files are copied with compressed extents read and
 * written encoded, decoded where the destination cannot take them, plain
 * data copied plain, holes kept, prealloc kept, metadata preserved, a name
 * at the end.
 *
 * Verification of copies: every byte of each copied file compared with its
 * source, and whole trees walked side by side (types, symlink targets,
 * device numbers, entries missing from or added to the copy).
 *
 * The copy is read with encoded reads where its filesystem allows them, so
 * what is compared is what lies on disk: its compressed extents are
 * decoded in user space (or found byte-identical to the source's encoded
 * extent at the same offset), its other ranges come back as plain bytes.
 * Where encoded reads are impossible (not btrfs, no CAP_SYS_ADMIN) the copy
 * is read plain. Ranges that are holes in both files are equal without
 * reading; a hole and written zeros are equal content. Memory is a few
 * fixed buffers, whatever the files' sizes.
 */
#ifndef ENCIO_COPY_H
#define ENCIO_COPY_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "codec/compress.h"
#include "io/engine.h"
#include "base/error.h"
#include "fs/inode_flags.h"

struct codec;
struct copy_ctx;
struct copy_stats;

struct copy_options {
	enum encio_io_mode io_mode;
	unsigned int depth;
	int force_backing;		 /* -1, BUFPOOL_THP or BUFPOOL_NORMAL */
	struct compress_spec compress;	 /* plain data; alg NONE: kept plain */
	struct compress_spec recompress; /* compressed extents; NONE: kept */
	bool verify; /* compare each copy with its source, every byte */
	unsigned int threads; /* codec workers, 0: one per CPU */
	/* set by a signal handler: copy_file() stops, -EINTR */
	const volatile sig_atomic_t *stop;
	/* called by copy_file() each time requests complete; may be NULL */
	void (*progress)(void *arg, const struct copy_stats *stats);
	void *progress_arg;
};

/*
 * The error (struct encio_error's err) of a file that changed while it was
 * copied (see copy_job_has_work()): what was read may be neither the old
 * nor the new content. Beyond every errno.
 */
#define COPY_ESRCCHANGED 1000

struct copy_stats {
	uint64_t files;
	uint64_t logical_bytes;	  /* file data written (holes excluded) */
	uint64_t encoded_bytes;	  /* encoded bytes moved without decoding */
	uint64_t extents_encoded; /* read encoded, written encoded */
	uint64_t extents_decoded; /* read encoded, decoded in user space */
	uint64_t ranges_plain;	  /* plain data ranges (uncompressed, inline) */
	uint64_t holes;
	uint64_t prealloc;
	uint64_t bytes_done; /* of the files' sizes: data, holes, prealloc */
	uint64_t encoded_logical;	/* file bytes written encoded */
	uint64_t chunks_compressed;	/* chunks encoded in user space */
	uint64_t chunks_incompressible; /* chunks written plain: no gain */
	uint64_t extents_recompressed;	/* decoded and encoded again */
	uint64_t extents_verified;	/* compressed extents of the copies */
	uint64_t clones;      /* ranges cloned from data written before */
	uint64_t clone_bytes; /* file bytes they stand for, not written */
};

/*
 * The bytes of data a copy of the file of @st moves, for progress totals:
 * its size less its holes, as far as st_blocks tells (data and prealloc,
 * by sector).
 */
static inline uint64_t copy_data_bytes(const struct stat *st)
{
	uint64_t allocated = (uint64_t)st->st_blocks * 512;

	return allocated < (uint64_t)st->st_size ? allocated :
						   (uint64_t)st->st_size;
}

/*
 * A context for copies with @opts: the engine, the codecs, the share
 * index. 0 and *@ret, or -errno.
 */
int copy_ctx_new(struct copy_ctx **ret, const struct copy_options *opts);
void copy_ctx_free(struct copy_ctx *ctx);

/* What the copies so far did. */
const struct copy_stats *copy_ctx_stats(const struct copy_ctx *ctx);
/* The probe of the last source and destination, and what it chose. */
const struct encio_probe *copy_ctx_probe(const struct copy_ctx *ctx);
/* With opts.verify: what the verification of the copies found. */
const struct verify_stats *copy_ctx_verify_stats(const struct copy_ctx *ctx);
/* The inode flags DEST refused, for one warning. */
struct inode_flags_refused *copy_ctx_flags_refused(struct copy_ctx *ctx);

/* The engine's buffers and ring, for -v. */
struct copy_buffers {
	unsigned int nr_slots;
	size_t slot_size;
	const char *backing; /* bufpool_backing_name() */
	bool registered;     /* with io_uring, as fixed buffers */
	size_t registered_bytes;
	bool ring;
	bool defer_taskrun;
};

void copy_ctx_buffers(const struct copy_ctx *ctx, struct copy_buffers *b);

/*
 * Before the first of several copy_file() into DEST named @dest (a
 * directory, or a file in one) from @srcs: a range of a source extent
 * the files share is written once and cloned everywhere else (see
 * copy_share_begin() in copy_internal.h).
 */
int copy_share_begin_path(struct copy_ctx *ctx, const char *dest,
			  const char *const *srcs, int nr);

/*
 * Probe encoded I/O for reading @src and writing to @dst as copy_file()
 * would (cached per filesystem; copy_file() probes by itself too). Returns
 * 0 or -errno with @e filled.
 */
int copy_probe(struct copy_ctx *ctx, const char *src, const char *dst,
	       struct encio_error *e);

/*
 * Copy the regular file @src to @dst (a file name, or an existing directory
 * to copy into). Returns 0 or -errno with @e filled; on error nothing is
 * left under the destination's name that was not there before.
 */
int copy_file(struct copy_ctx *ctx, const char *src, const char *dst,
	      struct encio_error *e);

/*
 * A difference between a copy and its source is reported with this errno,
 * encio_error.op saying what differs (e.g. "content differs from the
 * source") and encio_error.path naming the copy; anything else is an error
 * that stopped the check (an unreadable file, an extent that does not
 * decode).
 */
#define VERIFY_DIFFERS EBADMSG

struct verify_stats {
	uint64_t files;		    /* regular files found equal */
	uint64_t bytes;		    /* file content compared, holes included */
	uint64_t hole_bytes;	    /* of @bytes: holes in both, not read */
	uint64_t extents_identical; /* compressed extents of the copies whose
				       encoded bytes are the source's */
	uint64_t extents_decoded;   /* compressed extents of the copies
				       decoded and compared */
	uint64_t files_plain;	    /* copies read plain: no encoded reads */
	uint64_t dirs;
	uint64_t symlinks; /* targets compared */
	uint64_t specials; /* FIFOs, sockets, devices (with their numbers) */
	uint64_t failed;   /* differences and errors, each reported */
};

struct verify_ctx {
	struct codec *codec;
	void *src_buf;	 /* the source, read plain */
	void *dst_buf;	 /* the copy: encoded or plain bytes */
	void *src_enc;	 /* the source's encoded extent */
	void *plain_buf; /* a decoded extent of the copy */
	/* set by the caller (a signal handler): stop with -EINTR */
	volatile sig_atomic_t *stop;
	struct verify_stats stats;
};

int verify_ctx_init(struct verify_ctx *v);
void verify_ctx_release(struct verify_ctx *v);

/*
 * Compare the whole content of the regular files @src_fd and @dst_fd (the
 * copy). Call it only when nothing of either file is in flight. Returns 0
 * when equal; -VERIFY_DIFFERS with @e naming @dst_path and the offset of
 * the first difference (or where the shorter file ends); or -errno with @e
 * filled (@src_path names the source in errors reading it; NULL: the
 * message names the copy's source by @dst_path).
 */
int verify_file_fds(struct verify_ctx *v, int src_fd, int dst_fd,
		    const char *src_path, const char *dst_path,
		    struct encio_error *e);

struct verify_tree_options {
	/* trees: directories are walked, the root is not followed (cp -r) */
	bool recursive;
	bool no_target_dir; /* DEST is the copy even if it exists (cp -T) */
	/* a difference or an error, with the walk going on */
	void (*report)(void *arg, const struct encio_error *e);
	void *arg;
};

/*
 * Compare the copies of @srcs in @dest, named as encio copy names them:
 * @dest/basename(SRC) when @dest is an existing directory (and not
 * opts->no_target_dir), else @dest itself (one source only). Each
 * difference and each error goes to opts->report and is counted in
 * v->stats.failed. Returns 0 when every entry was looked at, or -errno with
 * @e filled when the check could not run or stopped (-EINTR on v->stop).
 */
int verify_trees(struct verify_ctx *v, const struct verify_tree_options *opts,
		 char *const *srcs, int nr_srcs, const char *dest,
		 struct encio_error *e);

#endif
