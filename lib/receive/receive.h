/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Receive a send stream into subvolumes under a destination directory, as
 * 'btrfs receive' does: every path confined beneath the subvolume being
 * received, encoded writes through the engine (decoded where refused), and
 * the subvolume marked received and read-only only once it synced cleanly.
 */
#ifndef ENCIO_RECEIVE_H
#define ENCIO_RECEIVE_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "fs/inode_flags.h"
#include "io/engine.h"
#include "stream/resume.h"
#include "stream/stream.h"

struct receive_options {
	enum encio_io_mode io_mode;
	bool force_decompress; /* decode every encoded write */
	/*
	 * Where parents and clone sources are looked up from (-m): a
	 * directory of the destination's filesystem; NULL for the root of
	 * the mount holding the destination.
	 */
	const char *root_mount;
	bool honor_end; /* stop after the first END (-e), not at end of input */
	bool chroot;	/* chroot into the destination before applying (-C) */
	/* Stop at this many failed commands (-E); 0 never stops early. */
	uint64_t max_errors;
	bool verify; /* decode each encoded extent, check its length */
	/*
	 * -s: a subvolume is received under a name of its own and keeps
	 * checkpoints, every @checkpoint_bytes of stream (0: 1 GiB) or 10 s:
	 * a stream that stops short leaves the last one, for encio send -t.
	 */
	bool resumable;
	/*
	 * With @resumable: a command that fails for want of space leaves the
	 * subvolume at the last command applied, to go on from once there is
	 * room (receive -s), not at its last checkpoint.
	 */
	bool keep_on_enospc;
	uint64_t checkpoint_bytes;
	/*
	 * No checkpoint as a subvolume begins, only after the interval: one
	 * received in less keeps none (copy --subvolumes makes it again, and
	 * a snapshot per subvolume would cost more than that).
	 */
	bool checkpoint_late;
	/*
	 * No nocow on a subvolume's root directory: btrfs receive makes its
	 * new files there first, and they would take it, then refuse a clone
	 * from a file without it.
	 */
	bool no_root_nocow;
	/*
	 * Without @resumable: a subvolume not finished is deleted, not left
	 * writable at its name as btrfs receive leaves it (in process, for a
	 * caller that sends it again)
	 */
	bool drop_unfinished;
	/* set by a signal handler: the stream stops at its next read */
	const volatile sig_atomic_t *stop;
};

struct receive_stats {
	uint64_t subvols; /* received completely */
	uint64_t commands;
	uint64_t bytes_written; /* file data (logical), cloned included */
	/*
	 * Of it: what WRITE and ENCODED_WRITE carried (logical), what CLONE
	 * shared (or copied, where it could not share); and the bytes this
	 * receive wrote itself: data and clones copied, not those shared.
	 */
	uint64_t data_bytes;
	uint64_t clone_bytes;
	uint64_t written_bytes;
	uint64_t encoded_bytes;	  /* written without decoding */
	uint64_t extents_encoded; /* encoded writes that stayed encoded */
	uint64_t extents_decoded; /* encoded writes decoded in user space */
	uint64_t stream_bytes;
	/* the stream's size as encio send estimated it, for progress; 0: untold */
	uint64_t stream_total;
	uint64_t errors; /* failed commands, those passed by included */
	/* What DEST did not take of FILEATTRs, for a warning */
	struct inode_flags_refused flags_refused;
	/* -s: the subvolume whose partial was kept when the receive stopped */
	char partial_kept[NAME_MAX + 1];
	/* -s: the subvolume refused because a partial of it is kept */
	char partial_refused[NAME_MAX + 1];
	/*
	 * Without -s: the subvolume a stream that stopped short left under
	 * its name, writable and not received; nothing kept to resume
	 */
	char left_unfinished[NAME_MAX + 1];
	uint64_t checkpoints;
};

/* What the receive tells its caller while it runs; any may be NULL. */
struct receive_events {
	/*
	 * A subvolume was started: @parent_uuid is NULL for a full stream,
	 * the parent's received UUID (or UUID) for a snapshot.
	 */
	void (*subvol)(const char *name, const uint8_t *uuid, uint64_t ctransid,
		       const uint8_t *parent_uuid, uint64_t parent_ctransid,
		       void *arg);
	/*
	 * A command failed and the receive goes on (max_errors not reached):
	 * @summary is as for receive_error_summary().
	 */
	void (*error)(const struct encio_error *e, const char *summary,
		      void *arg);
	/* Something worth saying under -v, such as a parent's other transid */
	void (*note)(const char *what, void *arg);
	/*
	 * The partial receive -s kept of @name was dropped: a receive
	 * without -s received @name whole.
	 */
	void (*partial_dropped)(const char *name, void *arg);
	void *arg;
};

struct receive_ctx;

void receive_set_events(struct receive_ctx *ctx,
			const struct receive_events *events);

/* Called after each data command; the callee throttles. */
typedef void (*receive_progress_fn)(const struct receive_stats *stats,
				    void *arg);

/* Returns 0 or -errno with @e filled; *@ctx is NULL on failure. */
int receive_ctx_new(struct receive_ctx **ctx,
		    const struct receive_options *opts, struct encio_error *e);
void receive_ctx_free(struct receive_ctx *ctx);

void receive_set_progress(struct receive_ctx *ctx, receive_progress_fn fn,
			  void *arg);

/*
 * Apply the stream (one or several concatenated) read from @stream_fd
 * (@stream_name for messages) beneath the directory @dest. Returns 0 or
 * -errno with @e naming the command's offset in the stream; a subvolume
 * not finished is left writable and not marked received. A failed command
 * stops the receive once max_errors commands failed; before that it goes
 * to the error event and the receive goes on with the next command (a
 * stream that cannot be read on stops it at once); the END of a subvolume
 * with such failures stops it too, leaving that subvolume writable and
 * not marked received. Returns 1 when the receive ended (at the end of
 * the stream or such an END) after commands failed, each given to the
 * error event.
 */
int receive_run(struct receive_ctx *ctx, int stream_fd, const char *stream_name,
		const char *dest, struct encio_error *e);

/*
 * The stream's header read from @stream_fd into @r, so that its caller
 * can tell a stream of encio send --subvolumes (r->subvolumes) before
 * giving any other to receive_run_reader(). 0, or -errno with @e filled
 * and receive_error_summary() said (nothing to release then).
 */
int receive_stream_open(struct receive_ctx *ctx, struct stream_reader *r,
			int stream_fd, const char *stream_name,
			struct encio_error *e);
/*
 * receive_run() of the stream @opened (receive_stream_open()), released
 * here; NULL: opened here from @stream_fd.
 */
int receive_run_reader(struct receive_ctx *ctx, struct stream_reader *opened,
		       int stream_fd, const char *stream_name, const char *dest,
		       struct encio_error *e);

const struct receive_stats *receive_get_stats(const struct receive_ctx *ctx);
/*
 * Whether the subvolumes finished from now on are made read-only (the
 * default, as btrfs receive does) or, with @read_only false, synced and
 * marked received but left writable for the caller to finish.
 */
void receive_set_read_only(struct receive_ctx *ctx, bool read_only);
/*
 * In process: the subvolumes received from now on are named @name in
 * DEST, whatever their stream names them; NULL: as the stream names them.
 */
void receive_set_name(struct receive_ctx *ctx, const char *name);
/* In process: the next subvolumes received as -s says, or not. */
void receive_set_resumable(struct receive_ctx *ctx, bool resumable);
/*
 * Whether -s can keep a partial of a subvolume named @name: its working,
 * checkpoint and record names fit in a name.
 */
bool receive_name_resumable(const char *name);
/*
 * The parent or clone source a stream names as @uuid at @transid is the
 * subvolume open at @fd, whatever UUIDs it has: a copy its caller checked
 * holds that moment (a writable one, which no received UUID may name).
 * Up to RECEIVE_KNOWN_MAX are known at once (-ENOSPC past them). The
 * caller keeps @fd open while it is known; -1 forgets them all. 0 or
 * -errno.
 */
#define RECEIVE_KNOWN_MAX 16
int receive_set_known_subvol(struct receive_ctx *ctx, const uint8_t *uuid,
			     uint64_t transid, int fd);

/*
 * The error last returned or passed to the error event in the words
 * 'btrfs receive' uses for it ("creating subvolume NAME failed: File
 * exists"), which scripts match; valid until the next receive_run().
 */
const char *receive_error_summary(const struct receive_ctx *ctx);

/*
 * The token of the partial receive -s kept for @path (DEST/NAME), into
 * @token (RESUME_TOKEN_MAX bytes): checked against the partial, which must
 * not have changed since. 0 or -errno with @e filled.
 */
int receive_resume_token(const char *path, char *token, struct encio_error *e);

/*
 * The resume point of the partial receive -s kept in @dir_fd for the
 * subvolume @name, checked as receive_resume_token() checks it: 0,
 * -ENOENT where there is none, -ESTALE where it changed, or -errno.
 */
int receive_partial_point(int dir_fd, const char *name,
			  struct resume_point *point);

/*
 * What a receive -s of @name left in @dir_fd (its record, checkpoints,
 * working subvolume and directory), deleted under @name's lock. 0 (none
 * there too) or -errno (-EBUSY: a receive holds it).
 */
int receive_partial_drop(int dir_fd, const char *name);

/*
 * receive --abort: the partial receive -s kept for @path (DEST/NAME)
 * dropped as receive_partial_drop() drops it; nothing at DEST/NAME is
 * touched. 0 or -errno with @e filled (-ENOENT: none; -EBUSY: a receive
 * holds NAME's lock, its pid in *@holder).
 */
int receive_partial_abort(const char *path, pid_t *holder,
			  struct encio_error *e);

/* A partial receive -s kept, as receive_partials_each() gives it. */
struct receive_partial {
	const char *name;
	/* 0, or -ESTALE where it changed since its record, or -errno */
	int err;
	uint64_t position; /* the stream's bytes it received */
	char token[RESUME_TOKEN_MAX];
};

/*
 * Each partial receive -s kept in the directory @dest, given to @fn,
 * which returns 0 or -errno to stop (returned, @e filled).
 */
int receive_partials_each(const char *dest,
			  int (*fn)(const struct receive_partial *partial,
				    void *arg),
			  void *arg, struct encio_error *e);

/* The probe of the destination (valid once a subvolume was created). */
const struct encio_probe *receive_get_probe(const struct receive_ctx *ctx);

#endif
