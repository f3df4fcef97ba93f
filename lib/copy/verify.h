/* SPDX-License-Identifier: GPL-2.0 */
/*
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
#ifndef ENCIO_VERIFY_H
#define ENCIO_VERIFY_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

struct codec;

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
