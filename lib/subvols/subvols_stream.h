/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio send --subvolumes | encio receive: a tree of subvolumes in one
 * stream (stream.h, STREAM_VERSION_SUBVOLUMES), planned as copy
 * --subvolumes plans it (lib/plan/subvol_plan.c) and put in place as it
 * places its copies.
 */
#ifndef ENCIO_SUBVOLS_STREAM_H
#define ENCIO_SUBVOLS_STREAM_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <btrfsutil.h>

#include "base/error.h"
#include "io/engine.h"
#include "receive/receive.h"
#include "stream/stream.h"

/*
 * What a DEST holds of a stream's subvolumes, for the next send's
 * differences (encio receive --state, encio send --subvolumes --state):
 * each read-only subvolume below DEST that encio received and no one
 * changed since, by the received UUID and stransid a stream of its source
 * names it by, and its path below DEST.
 */
struct subvols_state_entry {
	uint8_t received_uuid[BTRFS_UUID_SIZE];
	uint64_t stransid;
	char *rel;
	/*
	 * The copy is read-only: a writable one holds a writable subvolume's
	 * base, or is a read-only one's that a stopped run left before it
	 * was sealed, which the next run sends again
	 */
	bool read_only;
};

struct subvols_state {
	struct subvols_state_entry *v;
	size_t nr;
	/*
	 * The partial receive -s kept of the subvolume in flight when a
	 * receive stopped: its path below DEST (NULL: none), and the point
	 * its stream is resumed at
	 */
	char *resume_rel;
	struct resume_point resume;
};

#define SUBVOLS_STATE_MAGIC "encio-subvolumes-state 2"
/* what an encio that did not say which copies are read-only printed */
#define SUBVOLS_STATE_MAGIC_1 "encio-subvolumes-state 1"

/* The state of the copy at @dest. 0 or -errno with @e filled. */
int subvols_state_read(const char *dest, struct subvols_state *st,
		       struct encio_error *e);
/*
 * The state as text: SUBVOLS_STATE_MAGIC, then a line per subvolume,
 * "UUID STRANSID ro|rw PATH" (PATH with %, controls and spaces as %XX), and
 * "resume TOKEN PATH" for a partial (TOKEN as receive --resume-token
 * prints one). Into *@text (malloc'ed). 0 or -ENOMEM.
 */
int subvols_state_format(const struct subvols_state *st, char **text);
/*
 * The text of subvols_state_format() parsed (or of SUBVOLS_STATE_MAGIC_1,
 * whose lines have no ro|rw: taken as read-only). 0 or -EINVAL, -ENOMEM.
 */
int subvols_state_parse(const char *text, struct subvols_state *st);
void subvols_state_release(struct subvols_state *st);

struct subvols_send_stats {
	uint64_t total;	      /* subvolumes sent, SRC's own included */
	uint64_t incremental; /* of those, as differences */
	uint64_t in_dest;     /* not sent: DEST holds them (the state) */
	/*
	 * The state's subvolumes at paths where SRC has none (below DEST),
	 * named to delete with opts->delete_extra; freed by
	 * subvols_send_stats_release()
	 */
	char **extras;
	size_t nr_extras;
	uint64_t stream_bytes;
	/*
	 * The state's partial resumed (1) or not (0), and the bytes of its
	 * subvolume's stream not sent again
	 */
	uint64_t resumed;
	uint64_t resumed_at;
};

struct subvols_send_options {
	enum encio_io_mode io_mode;
	unsigned int depth;
	/* set by a signal handler: stop, -EINTR, the snapshots deleted */
	volatile sig_atomic_t *stop;
	/* what DEST holds (NULL: nothing), not sent again */
	const struct subvols_state *state;
	/*
	 * The state's subvolumes at paths where SRC has none are named in
	 * the stream, for the receiver to delete (where encio received them
	 * and no one changed them since)
	 */
	bool delete_extra;
	/*
	 * Each subvolume as it is begun: @rel its path below SRC ("." for
	 * SRC), @parent the subvolume its difference is from (NULL: whole).
	 */
	void (*begin)(void *arg, const char *rel, const char *parent);
	void *arg;
};

/*
 * The stream of the subvolumes below @src (its own first when it is a
 * subvolume, else its part in no subvolume below it, as a tree): in the
 * order copy --subvolumes copies them, each as the kernel's difference
 * from the closest relative sent before it where there is one, every
 * subvolume sent before a clone source; writable ones from read-only
 * snapshots made beside them for the run. Written to @out_fd (@out_name
 * in messages). 0 or -errno with @e filled.
 */
int subvols_send(const char *src, int out_fd, const char *out_name,
		 const struct subvols_send_options *opts,
		 struct subvols_send_stats *stats, struct encio_error *e);
void subvols_send_stats_release(struct subvols_send_stats *stats);

struct subvols_receive_stats {
	uint64_t total;	  /* subvolumes received */
	uint64_t in_dest; /* found in DEST as its state said */
	/* extras (STREAM_SUBVOL_EXTRA) deleted, and kept: not provably ours */
	uint64_t extras_deleted;
	uint64_t extras_kept;
	uint64_t bytes_written;
	uint64_t encoded_bytes;
	uint64_t stream_bytes;
	struct inode_flags_refused flags_refused;
	/* the subvolume being received, below DEST ("." for DEST) */
	const char *current;
	/* subvolumes whose stream resumed a partial receive -s kept */
	uint64_t resumed;
	/*
	 * writable copies replaced that someone changed since encio received
	 * them: the changes went with them
	 */
	uint64_t replaced_changed;
	/*
	 * -s: the subvolume (below DEST) whose partial was kept when the
	 * receive stopped, to resume; "": none
	 */
	char partial_kept[PATH_MAX];
};

struct subvols_receive_options {
	/*
	 * io_mode, stop, verify...; resumable (-s): each subvolume received
	 * so that a stop leaves a partial for the next run to resume, which
	 * subvols_state_read() names
	 */
	struct receive_options receive;
	const struct receive_events *events; /* of each subvolume's receive */
	/* each subvolume as it begins: @rel below DEST, whether a snapshot */
	void (*begin)(void *arg, const char *rel, bool read_only);
	void *arg;
};

/*
 * A stream of subvols_send() read from @r (receive_stream_open(), its
 * header read; released here) made into @dest, which becomes SRC's copy
 * as with copy -rT --subvolumes: a subvolume at @dest that must not
 * exist, or, where SRC was no subvolume, a directory filled as copy -r
 * fills one. Each subvolume is received (receive_run()) in the directory
 * of its path, opened beneath @dest, following no symlink; the read-only
 * ones that hold others are made read-only at the stream's END. 0 or
 * -errno with @e filled.
 */
int subvols_receive(struct stream_reader *r, const char *dest,
		    const struct subvols_receive_options *opts,
		    struct subvols_receive_stats *stats, struct encio_error *e);

#endif
