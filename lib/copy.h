/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Copy of regular files: compressed extents read and written encoded,
 * decoded where the destination cannot take them, plain data copied plain,
 * holes kept, prealloc kept, metadata preserved, rename at the end.
 */
#ifndef ENCIO_COPY_H
#define ENCIO_COPY_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine.h"
#include "error.h"

struct codec;

struct copy_options {
	enum encio_io_mode io_mode;
	unsigned int depth;
	int force_backing; /* -1, BUFPOOL_THP or BUFPOOL_NORMAL */
};

struct copy_stats {
	uint64_t files;
	uint64_t logical_bytes;	  /* file data written (holes excluded) */
	uint64_t encoded_bytes;	  /* encoded bytes moved without decoding */
	uint64_t extents_encoded; /* read encoded, written encoded */
	uint64_t extents_decoded; /* read encoded, decoded in user space */
	uint64_t ranges_plain;	  /* plain data ranges (uncompressed, inline) */
	uint64_t holes;
	uint64_t prealloc;
};

struct copy_ctx {
	struct copy_options opts;
	struct engine engine;
	struct codec *codec;
	void *decode_buf;
	struct copy_stats stats;
	struct encio_probe probe; /* of the last source / destination probed */
	dev_t read_dev;
	dev_t write_dev;
	bool read_probed;
	bool write_probed;
};

int copy_ctx_init(struct copy_ctx *ctx, const struct copy_options *opts);
void copy_ctx_release(struct copy_ctx *ctx);

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

#endif
