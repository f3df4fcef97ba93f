/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to receive (receive_run(), lib/receive/): the context the
 * stream's commands are applied with, and the functions the files call
 * across. Not an API: lib/receive/receive.h is. Each file calls only
 * those above it:
 *
 *   receive_path.c     paths confined beneath the subvolume, the
 *                      directories and the file held open, the node
 *                      not created yet
 *   receive_lookup.c   parents and clone sources found by UUID
 *   receive_flags.c    inode flags (FILEATTR), some kept for the end
 *   receive_target.c   the subvolume being received, opened and closed
 *   receive_state.c    receive -s: DEST's private directory, NAME's lock
 *   receive_resume.c   receive -s: checkpoints, the record, resumes
 *   receive_subvol.c   subvolumes begun and finished (SUBVOL, SNAPSHOT, END)
 *   receive_apply.c    the other commands, applied
 *   receive_summary.c  a failure in the words btrfs receive uses
 *   receive.c          the context, the run over the stream, -C, -E, -e
 */
#ifndef ENCIO_RECEIVE_INTERNAL_H
#define ENCIO_RECEIVE_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/fsutil.h"
#include "codec/codec.h"
#include "fs/inode_flags.h"
#include "receive/receive.h"
#include "stream/stream.h"

/* A callback's cause: two paths cut to 256 bytes and their words. */
#define RECEIVE_WHY_LEN 768
#define RECEIVE_WHAT_LEN (STREAM_WHAT_LEN + RECEIVE_WHY_LEN)

#define DIR_CACHE_SLOTS 8

enum mk_kind { MK_FILE, MK_DIR, MK_NOD, MK_FIFO, MK_SOCK, MK_SYMLINK };

/* A summary: two paths cut to 256 bytes, a UUID and the words. */
#define RECEIVE_SUMMARY_LEN 768

/*
 * A node the stream made, not created yet. btrfs send makes every new inode
 * under an orphan name (oINO-GEN-0) and renames it into place in the next
 * command: created at its final name directly, it costs one create instead
 * of a create and a rename. That is only done where the inode comes out
 * the same, the directories of both names passing nothing on to a new
 * inode (btrfs gives it its directory's nocow, compress and nocompress
 * flags, its btrfs.compression property, and its default ACL); else, and
 * for any other command, it is created where the stream said, as btrfs
 * receive does.
 */
struct pending_node {
	bool active;
	enum mk_kind kind;
	mode_t type;
	dev_t rdev;
	char path[PATH_MAX];
	char target[PATH_MAX];
	/* its creation was refused (EPERM): made again if rcv_flags_lift() lifts */
	bool refused;
	/* its creation failed: the command that made it pending is undone */
	bool failed;
};

/* btrfs' handles are 20 bytes; 40 with a parent, which is not asked for */
#define LATE_HANDLE_MAX 40

union late_handle {
	struct file_handle fh;
	char bytes[sizeof(struct file_handle) + LATE_HANDLE_MAX];
};

/*
 * Flags of an inode set when its subvolume is finished (receive_flags.c):
 * @flags of @mask. A @mask of INODE_FLAGS_LATE alone keeps the append-only
 * and immutable flags it had, lifted for a command they refused.
 */
struct late_flags {
	unsigned int flags;
	unsigned int mask;
	union late_handle handle;
};

/* An xattr a directory passes on, set when its subvolume is finished. */
struct late_xattr {
	const char *name; /* one of receive_flags.c's inherited xattrs */
	void *value;
	size_t len;
	union late_handle handle;
};

/*
 * receive -s: the directory of a subvolume NAME being received, in DEST's
 * private one (receive_state.c), and NAME's lock.
 */
struct partial_dir {
	int state_fd;
	char state_name[NAME_MAX + 1];
	int name_fd;
	int lock_fd;
	char name[NAME_MAX + 1];
};

struct receive_ctx {
	struct receive_options opts;
	bool leave_writable; /* receive_set_read_only() */
	/* receive_set_name(): the next subvolume's name, "" the stream's */
	char given_name[NAME_MAX + 1];
	struct engine engine;
	bool engine_ready;
	struct codec *codec;
	void *decode_buf;
	struct encio_probe probe;
	bool probed;
	dev_t probed_dev;
	enum encio_io_mode write_mode;

	int dest_fd;
	int mnt_fd; /* where parents and clone sources are opened from */
	char mnt_path[PATH_MAX]; /* its path from the top-level subvolume */
	int subvol_fd; /* the subvolume being received, -1 between two */
	char subvol_name[NAME_MAX + 1];
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid;
	/*
	 * A snapshot's root directory times as its parent had them, put back
	 * at its END unless the stream set them: the kernel's differences
	 * make orphans in the root, and send no UTIMES for a root that only
	 * they passed through (its inode did not change).
	 */
	struct timespec root_times[2];
	bool root_times_kept;

	/* Streams send many writes to one file in a row. */
	int write_fd;
	char write_path[PATH_MAX];

	/*
	 * The parent directories last resolved, by their path in the stream:
	 * the commands for one entry come in a row, and each resolution is
	 * an openat2() and a close() otherwise. Forgotten when a rename or a
	 * removal could change what a path names, and with the subvolume.
	 */
	struct dir_slot {
		int fd;
		uint64_t used;
		bool setgid_known; /* setgid: its mode had S_ISGID when opened */
		bool setgid;
		/* inherits: what it passes to inodes made in it, if known */
		bool inherits_known;
		bool inherits;
		char path[PATH_MAX];
	} dirs[DIR_CACHE_SLOTS];
	uint64_t dir_clock;
	struct dir_slot *last_dir; /* the last rcv_path_open_parent() gave */

	struct pending_node pending;

	/*
	 * For the subvolume's end: its sync, append-only and immutable
	 * flags, and what its directories pass on to new inodes.
	 */
	struct late_flags *late;
	size_t nr_late;
	size_t cap_late;
	size_t nr_lifted; /* of them, lifted */
	struct late_xattr *late_x;
	size_t nr_late_x;
	size_t cap_late_x;

	/* The paths of the command being applied, resolved. */
	char path_buf[2][PATH_MAX];

	/*
	 * The node created last, while its owner is still ours: streams chown
	 * every new node, and to root when root receives. Such a chown
	 * changes nothing but costs a transaction.
	 */
	bool fresh_valid;
	uid_t euid; /* the owner of what we create, read once */
	gid_t egid;
	char fresh_path[PATH_MAX];

	struct receive_stats stats;
	struct receive_events events;
	const struct stream_reader *reader;

	/*
	 * The command being applied, for the summary of its failure: its
	 * paths are copied, the stream's buffers are gone by then. @cmd_end
	 * is the reader's offset when it began, to tell a failed command
	 * from a stream that failed to read after it.
	 */
	int cmd;
	uint64_t cmd_end;
	char cmd_path[PATH_MAX];
	char cmd_path2[PATH_MAX];
	/* A parent or clone source that was not found, for the summary. */
	bool lookup_failed;
	bool lookup_unreachable;
	uint8_t lookup_uuid[BTRFS_UUID_SIZE];
	bool ended; /* an END stops the receive: -e, or errors before it */
	uint64_t subvol_errors; /* failed commands passed by in this one */
	/*
	 * Under -C the working directory is /proc/self/fd, opened before
	 * the chroot hid it: descriptors are named relative to it.
	 */
	bool chrooted;
	char summary[RECEIVE_SUMMARY_LEN];
	receive_progress_fn progress;
	void *progress_arg;

	/* The last clone source found by UUID: clones come in runs. */
	int clone_src_fd;
	uint8_t clone_src_uuid[BTRFS_UUID_SIZE];
	uint64_t clone_src_transid;
	/* receive -s: the subvolume in flight, its checkpoints (resume.h) */
	struct resume_state {
		bool active;
		char final[NAME_MAX + 1];  /* the name it gets at its END */
		struct resume_point point; /* up to the last command applied */
		uint64_t base;	   /* stream offset of its first command */
		uint64_t ckpt_pos; /* position of the last checkpoint */
		double ckpt_time;
		uint64_t ckpt_seq; /* 0: none yet */
		uint64_t ckpt_id;  /* 0: none to delete */
		uint8_t ckpt_uuid[BTRFS_UUID_SIZE];
		/* given its name: its partial goes once it is read-only */
		bool placed;
	} rs;
	struct partial_dir part;
	/*
	 * A plain receive's subvolume is made in the private directory too
	 * (nobody else can reach into it while it is received), and gets its
	 * name at its END: true until then.
	 */
	bool placing;
	/* receive_set_known_subvol(): the caller's fds, not closed here */
	struct {
		int fd;
		uint8_t uuid[BTRFS_UUID_SIZE];
		uint64_t transid;
	} known[RECEIVE_KNOWN_MAX];
	int nr_known;

	const char *why; /* the cause of a callback's failure */
	char why_buf[RECEIVE_WHY_LEN];
	bool finishing; /* the failure came from finishing a subvolume */
};

/* What every file of receive does: a callback's cause, the command begun. */
static inline int fail(struct receive_ctx *ctx, int err, const char *why)
{
	ctx->why = why;
	return err < 0 ? err : -err;
}

static inline void begin_cmd(struct receive_ctx *ctx, int cmd, const char *path,
			     const char *path2)
{
	ctx->stats.commands++;
	ctx->cmd = cmd;
	ctx->cmd_end = ctx->reader->offset;
	ctx->lookup_failed = false;
	snprintf(ctx->cmd_path, sizeof(ctx->cmd_path), "%s", path);
	if (path2)
		snprintf(ctx->cmd_path2, sizeof(ctx->cmd_path2), "%s", path2);
	else
		ctx->cmd_path2[0] = '\0';
}

static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* receive_path.c */
bool rcv_path_within(const char *path, const char *top);
/* beneath the subvolume received, never into another mount */
#define RESOLVE_IN_SUBVOL (RESOLVE_CONFINED | RESOLVE_NO_XDEV)
int rcv_path_resolve(struct receive_ctx *ctx, const char **path, char *buf);
int rcv_path_open_parent(struct receive_ctx *ctx, const char *path, char *last);
void rcv_path_of_fd(const struct receive_ctx *ctx, char *out, size_t len,
		    int fd, const char *last);
int rcv_path_open_regular_beneath(struct receive_ctx *ctx, int dirfd,
				  const char *path, int flags);
void rcv_dir_cache_clear(struct receive_ctx *ctx);
void rcv_dir_cache_forget(struct receive_ctx *ctx, const char *path);
void rcv_dir_cache_setgid_forget(struct receive_ctx *ctx, const char *path);
/* Flags or xattrs may change: what cached directories pass on is unknown. */
void rcv_dir_cache_inherits_forget(struct receive_ctx *ctx);
int rcv_write_fd_close(struct receive_ctx *ctx);
int rcv_write_fd_get(struct receive_ctx *ctx, const char *path);
bool rcv_write_fd_holds(const struct receive_ctx *ctx, const char *path);
int rcv_path_create_node(struct receive_ctx *ctx, const char *path,
			 enum mk_kind kind, mode_t type, dev_t rdev,
			 const char *target);
int rcv_pending_flush(struct receive_ctx *ctx);
int rcv_pending_create_at(struct receive_ctx *ctx, const char *to);

/* receive_lookup.c */
int rcv_lookup_open_mount_root(struct receive_ctx *ctx);
void rcv_lookup_uuid_format(const uint8_t *u,
			    char out[BTRFS_UUID_UNPARSED_SIZE]);
int rcv_lookup_open_subvol_by_uuid(struct receive_ctx *ctx, const char *role,
				   const uint8_t *uuid, uint64_t transid);
int rcv_lookup_clone_source(struct receive_ctx *ctx, const uint8_t *uuid,
			    uint64_t transid);

/* receive_flags.c */
int rcv_flags_fileattr(struct receive_ctx *ctx, const char *path,
		       uint64_t attr);
/*
 * SET_XATTR or REMOVE_XATTR (@data NULL) of @name on @path: 1 where it is
 * kept for the end (an xattr a directory passes on), 0 where it is the
 * caller's to apply now, or -errno.
 */
int rcv_flags_xattr(struct receive_ctx *ctx, const char *path, const char *name,
		    const void *data, size_t len);
/*
 * After EPERM: the append-only and immutable flags of the inodes at @path
 * and @path2 (or NULL), of their directories and of the directory of a
 * node whose creation they refused, lifted until the subvolume's end. 1
 * where one was, to apply the command again; 0 where none was; or -errno.
 */
int rcv_flags_lift(struct receive_ctx *ctx, const char *path,
		   const char *path2);
int rcv_flags_finish(struct receive_ctx *ctx);
void rcv_flags_forget(struct receive_ctx *ctx);
struct pack_buf;
/* What the subvolume's END needs, in and out of a resume record. */
int rcv_flags_state_pack(const struct receive_ctx *ctx, struct pack_buf *b);
int rcv_flags_state_unpack(struct receive_ctx *ctx, const uint8_t *p,
			   size_t len, uint64_t root);

/*
 * receive_resume.c: receive -s, the partial kept for encio send -t; and
 * the private directory every receive makes a subvolume in
 */
/* The subvolume @name is made as @made in *@dir, the private one. */
int rcv_resume_subvol_begin(struct receive_ctx *ctx, const char *name,
			    char *made, int *dir);
void rcv_resume_subvol_identity(struct receive_ctx *ctx, const uint8_t *uuid,
				uint64_t ctransid, const uint8_t *parent_uuid,
				uint64_t parent_ctransid);
/* Once marked received, before read-only: the subvolume gets its name. */
int rcv_resume_subvol_finish(struct receive_ctx *ctx);
/* Once read-only: the partial of its receive goes, record first. */
void rcv_resume_subvol_done(struct receive_ctx *ctx);
/*
 * A subvolume of a plain receive left unfinished (a failed command, -E):
 * it gets its name all the same, writable and not received, as btrfs
 * receive leaves it (deleted where the name is taken since).
 */
void rcv_resume_subvol_leave(struct receive_ctx *ctx);
int rcv_resume_applied(const struct stream_cmd *cmd, void *arg);
int rcv_resume(const struct resume_point *p, void *arg);
void rcv_resume_stopped(struct receive_ctx *ctx, bool read_failed, int err);
/* The receive is over: NAME's lock let go, what is no partial removed. */
void rcv_resume_release(struct receive_ctx *ctx);

/* receive_target.c: the subvolume being received */
void rcv_subvol_close(struct receive_ctx *ctx);
/* The subvolume @name just made in @dir, received from now on. */
int rcv_subvol_start_at(struct receive_ctx *ctx, int dir, const char *name,
			const uint8_t *uuid, uint64_t ctransid);

/* receive_state.c: receive -s, DEST's private directory, NAME's, its lock */
#define WORK_NAME "work"
/* a plain receive's subvolume until its END */
#define PLACE_NAME "new"
#define CKPT_PREFIX "ckpt."
#define RECORD_NAME "record"
#define RECORD_NEW "record.new"
#define RESERVE_NAME "reserve"
void rcv_pd_init(struct partial_dir *pd);
/* NAME's directory opened (made if @create) in DEST @dest_fd, not locked. */
int rcv_pd_open(int dest_fd, struct partial_dir *pd, bool create);
/* NAME's directory opened and locked; *@holder the pid of a receive on it. */
int rcv_pd_open_locked(int dest_fd, struct partial_dir *pd, bool create,
		       pid_t *holder);
int rcv_drop_subvol(int dir_fd, const char *name, const uint8_t *uuid,
		    uint64_t id);
void rcv_pd_clear(struct partial_dir *pd);
void rcv_pd_close(int dest_fd, struct partial_dir *pd, bool remove);
bool rcv_pd_has_record(const struct partial_dir *pd);
/*
 * The names of the NAME directories in DEST's private directories, each
 * given to @fn until it returns an error (returned).
 */
int rcv_pd_names_each(int dest_fd, int (*fn)(const char *name, void *arg),
		      void *arg);

/* receive_subvol.c: the commands that begin and end a subvolume */
int rcv_subvol(const char *name, const uint8_t *uuid, uint64_t ctransid,
	       void *arg);
int rcv_snapshot(const char *name, const uint8_t *uuid, uint64_t ctransid,
		 const uint8_t *parent_uuid, uint64_t parent_ctransid,
		 void *arg);
int rcv_end(void *arg);

/* receive_apply.c */
extern const struct stream_ops rcv_apply_ops;

/* receive_summary.c */
void rcv_summary_describe_error(struct receive_ctx *ctx, struct encio_error *e);
void rcv_summary_build(struct receive_ctx *ctx, const struct stream_reader *r,
		       const struct encio_error *e);

#endif
