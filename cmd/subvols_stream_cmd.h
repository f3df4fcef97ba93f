/* SPDX-License-Identifier: GPL-2.0 */
/* encio send --subvolumes and encio receive of its stream: cmd/'s side. */
#ifndef ENCIO_SUBVOLS_STREAM_CMD_H
#define ENCIO_SUBVOLS_STREAM_CMD_H

#include <stdbool.h>

#include "receive/receive.h"
#include "stream/stream.h"

/*
 * The stream of SRC's subvolumes to -f @file (NULL: stdout), but those
 * the state in the file @state (NULL: none) says DEST holds; with
 * @delete_extra, DEST's copies SRC no longer has named for deleting.
 * Exit status.
 */
int send_subvolumes(const char *src, const char *file, const char *state,
		    bool delete_extra);

/* receive --state DEST: the state of the copy at @dest. Exit status. */
int print_subvolumes_state(const char *dest);

/*
 * The stream of encio send --subvolumes, its header read into @r,
 * received into @dest with @ropts and @events. Exit status.
 */
int receive_subvolumes(struct stream_reader *r, const char *dest,
		       const struct receive_options *ropts,
		       const struct receive_events *events);

#endif
