/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio send: a btrfs send stream (version 2) of a directory tree or
 * subvolume, compressed extents read encoded and sent as ENCODED_WRITE.
 */
#ifndef ENCIO_SEND_H
#define ENCIO_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"

struct send_stats;

/* Called after each file and each window of reads. */
typedef void (*send_progress_fn)(const struct send_stats *stats, void *arg);

struct send_options {
	enum encio_io_mode io_mode; /* for encoded reads; AUTO by default */
	unsigned int depth;	    /* reads in flight per file; 0 default */
	bool snapshot; /* send from a temporary read-only snapshot */
	/* with a callback, the tree is walked first for bytes_total */
	send_progress_fn progress;
	void *progress_arg;
};

struct send_stats {
	uint64_t files;
	uint64_t dirs;
	uint64_t others;	  /* symlinks, links, special files */
	uint64_t bytes_logical;	  /* file data sent, as unencoded bytes */
	uint64_t bytes_encoded;	  /* ENCODED_WRITE payload bytes */
	uint64_t extents_encoded; /* ENCODED_WRITE commands */
	uint64_t stream_bytes;
	uint64_t bytes_total; /* file sizes (a hard-linked inode once) */
	uint64_t bytes_done;  /* of bytes_total */
	enum encio_io_mode read_mode; /* NONE: plain reads */
};

/*
 * Write the stream of the @nr trees @paths, one subvolume each, to @out_fd
 * (@out_name for messages): one header, a SUBVOL and its tree per path, one
 * END, as btrfs send writes several subvolumes. Returns 0 or -errno with
 * @e filled; @stats is filled either way.
 */
int send_run(const char *const *paths, size_t nr, int out_fd,
	     const char *out_name, const struct send_options *opts,
	     struct send_stats *stats, struct encio_error *e);

#endif
