/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A send stream's commands as text (dump_stream.c): encio dump and
 * encio receive --dump.
 */
#ifndef ENCIO_CMD_DUMP_STREAM_H
#define ENCIO_CMD_DUMP_STREAM_H

#include <stdio.h>

#include "base/error.h"

/*
 * A send stream (one or several concatenated) read from @fd (@name for
 * messages), each command printed to @out as btrfs receive --dump prints
 * it; the caller flushes @out. 0, or -errno with @e filled (-EIO for a
 * write error on @out).
 */
int dump_stream(int fd, const char *name, FILE *out, struct encio_error *e);

#endif
