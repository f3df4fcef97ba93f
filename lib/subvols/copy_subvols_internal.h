/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copy -r --subvolumes within lib/: the state of a move, shared by its
 * SRC side (copy_subvols_src.c: the snapshots of writable subvolumes,
 * their bases and the marks of their finished copies, and what changed in
 * SRC since a copy), its DEST side (copy_subvols_dest.c: what DEST holds
 * at each name, and putting copies in place), which takes from the SRC
 * side and never the reverse, the copy in flight a run left, which both
 * look at (copy_subvols_partial.c, also where each copy goes), and the
 * transfers between them (copy_subvols.c). Each file calls only those
 * above it:
 *
 *   subvol_ahead.c          the kernel's passes made ahead, on a thread
 *   copy_subvols_partial.c  the copy in flight a run left; where copies go
 *   copy_subvols_src.c      SRC's side
 *   copy_subvols_dest.c     DEST's side, taking from SRC's
 *   subvols_run_dir.c       a receive's directory beside DEST
 *   subvols_state.c         what a DEST received holds (receive --state)
 *   copy_subvols_extra.c    --final: what SRC no longer has
 *   copy_subvols.c          the move, subvolume by subvolume
 *   send_subvols.c          send --subvolumes: SRC's side in a stream
 *   receive_subvols.c       its receive: DEST's side from a stream
 */
#ifndef ENCIO_COPY_SUBVOLS_INTERNAL_H
#define ENCIO_COPY_SUBVOLS_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols.h"
#include "receive/receive.h"
#include "send/send.h"
#include "plan/subvol_plan.h"

/*
 * subvol_ahead.c: the kernel's difference passes of the subvolumes to
 * come, made on a thread of their own while copy_subvols.c copies those
 * before them. A pass depends on SRC only, so the next one needs nothing
 * the current copy makes.
 */
struct subvol_ahead;

/*
 * Start making the passes of @plan's subvolumes, in the copy order, each
 * from the parent and with the clone sources the copy would give it if
 * every subvolume before it were copied. A writable subvolume's pass is of
 * its snapshot, which must exist by then. Returns 0 or -errno; *@a is
 * NULL, and nothing is made, on an error or with no pass to make. @stop
 * (or NULL): the copy's flag, which ends a wait for a pass and the pass.
 */
int subvols_ahead_start(struct subvol_ahead **a, struct subvol_plan *plan,
			const volatile sig_atomic_t *stop);
/*
 * The copy is at @pos in the copy order: passes of those before are of no
 * more use.
 */
void subvols_ahead_reach(struct subvol_ahead *a, size_t pos);
/*
 * The pass of @en from @parent with @clones, waited for if it is being
 * made; NULL if none was made for that (the caller asks the kernel).
 * Given back with subvols_ahead_done().
 */
const struct send_pass *subvols_ahead_take(struct subvol_ahead *a,
					   const struct subvol_entry *en,
					   const char *parent,
					   const char *const *clones,
					   size_t nr_clones);
void subvols_ahead_done(struct subvol_ahead *a, const struct send_pass *pass);
/* Stop making passes, wait for the thread, free what is left. */
void subvols_ahead_end(struct subvol_ahead *a);

/* A subvolume's stream sent to a pipe on a thread of its own. */
struct subvols_sender_thread {
	const char *path;
	const char *stream; /* the stream's name in messages: the subvolume */
	struct send_options opts;
	int fd; /* the pipe, closed when the send ends */
	struct send_stats stats;
	struct encio_error e;
	int ret;
};

/* The thread's function (copy_subvols.c): send_run() of @arg. */
void *subvols_sender_run(void *arg);

struct subvols {
	struct copy_ctx *ctx;
	const struct tree_options *caller; /* its callbacks, relayed */
	struct tree_options topts;	   /* for tree_copy(), arg: this */
	uint64_t logical_before; /* ctx's logical_bytes before a tree copy */
	const struct subvols_options *opts;
	struct subvols_stats *stats;
	struct encio_error *e;
	struct timespec synced_at; /* SRC synced before its snapshots */
	/* the directory descriptor a copy is made through, named in errors */
	char fd_dir[32];
	struct subvol_plan plan;
	char dst[PATH_MAX];  /* SRC's copy */
	const char **clones; /* read-only subvolumes in DEST, by SRC path */
	uint64_t *clone_ids; /* and by the ids they were listed with */
	/* the subvolume read at hand, by its descriptor: /proc/self/fd/N */
	char src_proc[32];
	const char *src_name; /* its path, for messages while it is copied */
	struct receive_ctx *rcv;
	struct subvol_ahead *ahead; /* NULL: each pass made at its turn */
	uint64_t bytes_before; /* bytes_written before the subvolume at hand */
	int top_fd; /* DEST's copy of SRC in the copy's loop, -1 before */
};

struct placement {
	int dir_fd; /* the directory the copy goes in */
	char name[NAME_MAX + 1];
	char partial[NAME_MAX + 1];
	char dst[PATH_MAX];
	bool placeholder; /* an empty directory holds the name */
	/* a writable copy at the name: its id and the moment it holds */
	uint64_t copy_id;
	uint64_t copy_stransid;
	/*
	 * What an earlier run left of the copy in flight, to go on with: the
	 * partial copied whole so far, or the point a received one reached.
	 */
	bool resume_whole;
	bool resume_stream;
	struct resume_point point;
};

/*
 * The directories of a subvolume that held encio's snapshots of the
 * writable subvolumes in them: making and deleting those moved their
 * ctime, and their mtime was put back, so an entry made or removed there
 * since shows in their mtime.
 */
struct held_dirs {
	uint64_t ino[16];
	size_t nr;
};

/* Whether @rel (below SRC) is below @dir, a subvolume's rel ("": SRC). */
static inline bool subvol_rel_below(const char *rel, const char *dir)
{
	size_t n = strlen(dir);

	return n ? !strncmp(rel, dir, n) && rel[n] == '/' : rel[0] != '\0';
}

/* SRC: copy_subvols_src.c */
/* Whether @fd is on btrfs: subvolumes need it, on both sides. */
bool subvols_on_btrfs(int fd);
/*
 * SRC (@src) opened, s->plan.src set, checked to be on btrfs (else
 * EOPNOTSUPP, "cannot @not_btrfs"), whether it is a subvolume of its own
 * told, and synced: its descriptor, or -errno with s->e filled.
 */
int subvols_src_open(struct subvols *s, const char *src, const char *not_btrfs);
int subvols_changed_since(int fd, uint64_t transid,
			  const struct timespec *since,
			  const struct held_dirs *h);
int subvols_src_changed(const struct subvols *s, const struct subvol_entry *en,
			uint64_t transid, const struct timespec *stime);
int subvols_entry_open(struct subvols *s, const struct subvol_entry *en,
		       bool snap);
int subvols_bases_drop(struct subvols *s);
int subvols_finish_writables(struct subvols *s, int top_fd);
int subvols_snapshots_make(struct subvols *s);
/*
 * Writable @en's copy in DEST (below @top_fd) where it holds en->base,
 * unchanged since encio marked it: subvolume *@id, or any where *@id is 0
 * (then set). The fd, -ESTALE, or -errno.
 */
int subvols_dest_base_open(const struct subvol_entry *en, int top_fd,
			   uint64_t *id);
/*
 * The snapshot @en's finished copy was made from, kept as the base of the
 * next run's difference in place of the one before (deleted by its id);
 * or deleted where no base can serve: @en has a received UUID, so its
 * copy records no moment of its own. 0 or -errno with s->e filled.
 */
int subvols_snapshot_keep(struct subvols *s, struct subvol_entry *en);
void subvols_snapshots_drop(struct subvols *s, int top_fd);

/* DEST: copy_subvols_dest.c */
int subvols_dest_name(struct subvols *s, const char *dest);
int subvols_dest_check(struct subvols *s);
int subvols_dest_state(const struct subvols *s, struct subvol_entry *en,
		       struct placement *p);
int subvols_replace_copy(struct subvols *s, const struct subvol_entry *en,
			 struct placement *p);
/*
 * Subvolume @rel of the copy open at @old_fd, which a new one (@new_fd)
 * replaces, moved into it at the same path, where that has the directory
 * and not the name (0 where it has not); the directory's times kept.
 */
int subvols_carry_nested(int old_fd, int new_fd, const char *rel);
/*
 * The times of the directory @dir_fd put back as @st had them, its
 * append-only or immutable flag lifted for that where it has one. 0 or
 * -errno.
 */
int subvols_times_restore(int dir_fd, const struct stat *st);
/*
 * The subvolumes still nested in the copy open at @fd (those not carried
 * into its replacement) deleted, the deepest first, each with the
 * directory it is in lifted of append-only or immutable for it: a
 * recursive delete of the copy fails on such a directory (EPERM).
 */
int subvols_drop_nested(int fd);
/*
 * Whether the writable copy open at @fd (@info) changed since it was
 * marked received: an inode's ctime after the mark (a look, which moves
 * only atimes, is none). 1, 0 or -errno.
 */
int subvols_copy_changed(int fd, const struct btrfs_util_subvolume_info *info);
int subvols_place(struct subvols *s, const struct subvol_entry *en,
		  struct placement *p);
int subvols_finish_containers(struct subvols *s, int top_fd);
int subvols_keep_default(struct subvols *s, int top_fd);

/* What DEST holds that SRC does not: copy_subvols_extra.c */
int subvols_extras(struct subvols *s, int top_fd);

/* The copy in flight and where copies go: copy_subvols_partial.c */
/*
 * A subvolume deleted by its id or a directory removed in @dir_fd:
 * append-only or immutable lifted from it for that alone where they
 * refuse it (renames: inode_flags_lifted_rename()). 0 or -errno.
 */
int subvols_delete_id(int dir_fd, uint64_t id);
int subvols_rmdir(int dir_fd, const char *name);
/* The path in DEST of the copy of @rel (below SRC): 0 or -ENAMETOOLONG. */
int subvols_dest_path(const struct subvols *s, const char *rel, char *out,
		      size_t len);
int subvols_placement_open(struct subvols *s, const struct subvol_entry *en,
			   struct placement *p, int top_fd);
int subvols_partial_mark(const struct subvol_entry *en, int fd);
int subvols_partial_unmark(int fd);
int subvols_partial_settle(struct subvols *s, const struct subvol_entry *en,
			   struct placement *p, bool whole);
bool subvols_partial_drop(struct subvols *s, const struct subvol_entry *en,
			  struct placement *p, bool whole);
bool subvols_partial_of_left(struct subvols *s, const struct subvol_entry *en,
			     int top_fd);

/* The receiver's directory beside DEST: subvols_run_dir.c */
#define SUBVOLS_TREE_PART_NAME "tree"
struct run_dir {
	int fd;	      /* locked where it was opened to create */
	int where_fd; /* the directory it is in */
	bool in_copy; /* that is the copy's root (a mount's) */
	char name[NAME_MAX + 1];
};
/*
 * The run directory of the copy @dst (as subvols_dest_name() gives it):
 * found, or with @create made, and then locked (-EBUSY: another receive
 * holds it). 0, -ENOENT where there is none, or -errno.
 */
int subvols_run_dir_open(const char *dst, bool create, struct run_dir *rd);
/* Closed; with @remove, its record of the subvolume in flight and it go. */
void subvols_run_dir_close(struct run_dir *rd, bool remove);
/*
 * The subvolume in flight: @rel below DEST, received as @name in the
 * directory of @rel. Written whole (a new file renamed). 0 or -errno.
 */
int subvols_inflight_write(const struct run_dir *rd, const char *rel,
			   const char *name);
/* Read into @rel (PATH_MAX) and @name (NAME_MAX + 1): -ENOENT: none. */
int subvols_inflight_read(const struct run_dir *rd, char *rel, char *name);
/*
 * The directory @rel (below the copy @dst, "." for it) is in, opened
 * beneath the copy following no symlink: its descriptor or -errno.
 */
int subvols_landing_open(const char *dst, const char *rel);

#endif
