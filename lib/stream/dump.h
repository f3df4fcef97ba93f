/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A send stream's commands as text, one line each, in the layout of
 * 'btrfs receive --dump': shared by 'encio dump' and 'encio receive --dump'.
 */
#ifndef ENCIO_DUMP_H
#define ENCIO_DUMP_H

#include <limits.h>
#include <stdio.h>

#include "base/error.h"
#include "stream/stream.h"

/* Subvolume path and stream path are each below PATH_MAX. */
#define DUMP_PATH_MAX (2 * PATH_MAX + 2)

struct dump_ctx {
	FILE *out;
	char subvol[DUMP_PATH_MAX]; /* "./NAME" of the current subvolume */
};

/* The callbacks, each printing its command to the dump_ctx's out. */
extern const struct stream_ops dump_ops;

/*
 * Read the stream (one or several concatenated) from @fd (@name for
 * messages) and print each command to @out, which the caller flushes.
 * Returns 0 or -errno with @e filled; a write error on @out is -EIO.
 */
int dump_stream(int fd, const char *name, FILE *out, struct encio_error *e);

#endif
