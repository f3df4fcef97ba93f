/* SPDX-License-Identifier: GPL-2.0 */
/* encio send --subvolumes and encio receive of its stream: cmd/'s side. */
#ifndef ENCIO_SUBVOLS_STREAM_CMD_H
#define ENCIO_SUBVOLS_STREAM_CMD_H

#include <stdbool.h>
#include <stdio.h>

#include "receive/receive.h"
#include "send/send.h"
#include "stream/stream.h"

/*
 * Where send's JSON summary goes: standard output unless the stream does
 * (no -f, or a FILE that is standard output itself, /dev/stdout of a
 * pipe), else standard error. Asked while the stream is open: a FILE
 * committed is closed. (cmd/send.c)
 */
FILE *send_json_output(const struct send_output *out, const char *file);

/*
 * The stream of SRC's subvolumes to -f @file (NULL: stdout), but those
 * the state in the file @state (NULL: none) says DEST holds; with
 * @delete_extra, DEST's copies SRC no longer has named for deleting; the
 * summary as one JSON object with @json. Exit status.
 */
int send_subvolumes(const char *src, const char *file, const char *state,
		    bool delete_extra, bool json);

/* receive --state DEST: the state of the copy at @dest. Exit status. */
int print_subvolumes_state(const char *dest);

/*
 * The stream of encio send --subvolumes, its header read into @r,
 * received into @dest with @ropts and @events; the summary as one JSON
 * object on standard output with @json. Exit status.
 */
int receive_subvolumes(struct stream_reader *r, const char *dest,
		       const struct receive_options *ropts,
		       const struct receive_events *events, bool json);

#endif
