/* SPDX-License-Identifier: GPL-2.0 */
/*
 * encio send, inside: the context shared by the tree walk (send.c), its
 * data (send_data.c, send_share.c) and the kernel's streams relayed
 * (send_kernel.c, send_pass.c). Not an API: lib/send/send.h is. Each file
 * calls only those above it:
 *
 *   send_estimate.c  the stream's size from metadata, for progress
 *   send_cmd.c       errors, a stop asked for, a command's end, progress
 *   send_output.c    -f FILE: the stream's file, named once whole
 *   send_roots.c     the parent and clone sources, chosen
 *   send_snapshot.c  --snapshot: the read-only snapshot sent from
 *   send_pass.c      the kernel's pass on a thread, kept ahead
 *   send_kernel.c    the kernel's streams relayed
 *   send_meta.c      an inode's metadata as commands
 *   send_piece.c     the pieces data ranges are read in, their commands
 *   send_walk.c      the names of a full send, in inode order
 *   send_share.c     which pieces are sent as CLONE (decides)
 *   send_data.c      a file's data: reads and writes what share decided
 *   send.c           the run: the walk, subvolume by subvolume
 */
#ifndef ENCIO_SEND_INTERNAL_H
#define ENCIO_SEND_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/fsutil.h"
#include "base/kernel.h"
#include "fs/extents.h"
#include "fs/prefetch.h"
#include "fs/share.h"
#include "io/engine.h"
#include "send/send.h"
#include "stream/stream.h"

/* btrfs receive's v2 buffer is 16 KiB + 128 KiB: data of a WRITE fits it. */
#define SEND_WRITE_MAX (128 * 1024)
/* A v1 WRITE's data is one attribute, below 64 KiB: btrfs send's 48 KiB. */
#define SEND_WRITE_MAX_V1 (48 * 1024)
/* The sector size assumed for preallocated ranges at EOF. */
#define SEND_BLOCK 4096ULL

/* An entry of the tree a full send walks (send_walk.c). */
struct send_node {
	uint64_t ino;
	uint32_t parent; /* its directory's node; SEND_NODE_NONE: the root */
	uint32_t seq;	 /* its place in the directory's readdir order */
	char *name;
	unsigned char type; /* DT_*; DT_UNKNOWN: left out */
	bool created;	    /* a directory made in the stream */
	bool orphan;	    /* made, under its orphan name in the root */
};

#define SEND_NODE_NONE UINT32_MAX
/* Directories of the walk kept open. */
#define SEND_DIR_CACHE 64

struct send_dir_slot {
	uint32_t node;
	int fd;
	uint64_t used; /* 0: free; else when last used */
};

struct send_walk {
	char *root; /* its path, for messages */
	int root_fd;
	struct send_node *nodes; /* [0] is the root */
	size_t nr, cap;
	uint32_t *order; /* nodes but the root, by inode then link order */
	size_t nr_order;
	uint32_t *root_names; /* the root's entries, by name */
	size_t nr_root_names;
	struct send_dir_slot cache[SEND_DIR_CACHE];
	uint64_t tick;
};

struct send_piece {
	uint64_t start;
	uint64_t end;
	bool whole;   /* one encoded read of a (compressed) extent */
	bool clone;   /* a CLONE of (file, src_off): nothing read */
	bool plain;   /* pread at its turn: part of a compressed extent */
	bool counted; /* its read estimated from its extent, not made */
	uint32_t file;
	uint64_t src_off;
	struct file_extent fe; /* the extent it is read from (not a clone) */
	struct engine_req *req;
};

/* A subvolume of the stream, as its SUBVOL command named it. */
struct send_subvol_id {
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid;
};

/*
 * send_estimate.c: send_estimate_start() estimates, on a thread, the
 * stream of the @nr subvolumes @roots (of what changed after generation
 * @since, 0: all of it; from @opts' parent, by encio diff's difference,
 * where it can be had, its data cloned as the kernel clones it from the
 * parent and the clone sources; after SEND_ESTIMATE_DELAY_SECONDS unless
 * @opts says it is reported), which must live until send_estimate_end(); a
 * tree that is no subvolume's root counted by @count, -n's walk;
 * send_estimate_bytes() is 0 until it is known; send_estimate_end() stops
 * the thread if it still runs.
 */
/* -n's count of the tree @root, added to *@sum: 0 or -errno. */
typedef int (*send_count_fn)(const char *root, void *arg, uint64_t *sum);

struct send_estimate {
	send_count_fn count;
	void *count_arg;
	const char *const *roots;
	size_t nr;
	const char *parent;	   /* of an incremental stream; NULL: none */
	const char *const *clones; /* its clone sources but the parent */
	size_t nr_clones;
	bool delayed; /* SEND_ESTIMATE_DELAY_SECONDS before it starts */
	bool v1;      /* the kernel's stream is version 1 */
	int root_fd;
	uint64_t sum;
	uint64_t since;
	uint32_t write_max;
	uint64_t bytes; /* atomic */
	bool stop;	/* atomic */
	int err;
	pthread_t thread;
	bool started;
	double start;
	bool hurried; /* at the normal priority again */
};

/* The estimate runs SCHED_IDLE for this long, then as the send does. */
#define SEND_ESTIMATE_IDLE_SECONDS 1.0
/* An incremental's estimate not reported starts after this long. */
#define SEND_ESTIMATE_DELAY_SECONDS 2.0

struct send_ctx {
	struct stream_writer w;
	struct engine engine;
	bool engine_ok;
	struct encio_probe probe;
	bool probed;
	dev_t probe_dev;
	long probe_fs_type; /* of probe_dev */
	const char *out_name;
	struct stat out_st; /* the stream file, if it is in a tree sent */
	dev_t root_dev;
	struct send_options opts;
	struct send_stats *stats;
	struct encio_error *e;
	struct send_walk walk; /* of the tree being sent */
	char src[PATH_MAX];    /* full source path of the entry at hand */
	/*
	 * The entry at hand for its xattrs, as /proc/self/fd/DIRFD/NAME (or
	 * /proc/self/fd/FD/. for the root): resolved in a directory already
	 * open, never by the full source path, which a directory swapped for
	 * a symlink in a live tree would lead elsewhere.
	 */
	char xattr_at[64 + NAME_MAX];
	char *buf;	  /* SEND_WRITE_MAX bytes for pread */
	size_t write_max; /* data bytes of one WRITE */
	char *xattr_buf;  /* XATTR_SIZE_MAX bytes */
	struct send_piece *pieces;
	size_t nr_pieces;
	size_t cap_pieces;
	struct meta_prefetch prefetch; /* of the subvolume being walked */
	uint64_t walked;	       /* entries the walk reached, atomic */
	/* with share_on (the walk): data sent before is sent as CLONE */
	struct share_index share;
	bool share_on;
	uint32_t walk_node; /* the node being sent; SEND_NODE_NONE: none */
	/* share file -> walk node + 1 (0: none) while its subvolume is walked */
	uint32_t *share_nodes;
	size_t nr_share_nodes, cap_share_nodes;
	struct send_subvol_id *subvols; /* of the stream so far */
	size_t nr_subvols;
	/*
	 * The clones of the window being written are checked against what
	 * the file and its sources hold now (send_clone_checked()): their
	 * maps, made at the first clone of the window.
	 */
	struct extent_map check_map; /* of the file being sent */
	bool check_map_made;
	struct extent_map check_src_map; /* of the last clone source */
	uint32_t check_src;		 /* its share file + 1; 0: none */
	/* counted data reached the resume point: read from this offset */
	uint64_t data_from;
	/* commands that made an inode, in the subvolume's stream so far */
	uint64_t creates;
	/* a resume going to its anchor: the walk's names, nothing put */
	bool names_only;
	/* progress: the stream's size, estimated beside the send */
	struct send_estimate est;
};

/*
 * The files of send, from the top: send.c (the walk's driver) and
 * send_kernel.c (the kernel's streams relayed) call send_meta.c,
 * send_data.c, send_share.c, send_walk.c, send_roots.c, send_output.c,
 * send_snapshot.c and send_pass.c; send_data.c asks send_share.c which
 * ranges are clones; send_share.c cuts maps into send_piece.c's pieces;
 * all of them call send_cmd.c, which calls only send_estimate.c.
 *
 * send_cmd.c: -errno, with ctx->e naming ctx->src, @op and the offset if
 * @has_off.
 */
int send_fail(struct send_ctx *ctx, int err, const char *op, uint64_t off,
	      bool has_off);
/* -EINTR if a signal asked to stop, else 0. */
int send_stopped(struct send_ctx *ctx);
/*
 * Finish the command being built; -errno naming the stream on error. The
 * command that reaches a resume point starts the stats again.
 */
int send_end_cmd(struct send_ctx *ctx);
/*
 * encio's layout of a walked tree's stream: raised whenever the stream of
 * one tree with the same options changes (commands, their order, their
 * attributes, how data is cut), so that no resume mixes two layouts.
 */
#define SEND_LAYOUT_VERSION 1
/*
 * The layout of a walked subvolume's stream (stream.h: STREAM_A_LAYOUT):
 * SEND_LAYOUT_VERSION and the options that shape it; never 0. The
 * kernel's streams go as it wrote them, with none: a resume of one is
 * bound by the fingerprint of the bytes up to its point, and one of the
 * other kind is refused by the layout that differs.
 */
uint64_t send_layout(const struct send_ctx *ctx);

int send_estimate_start(struct send_estimate *est, const char *const *roots,
			size_t nr, const struct send_options *opts,
			uint64_t since, uint32_t write_max, send_count_fn count,
			void *count_arg);
uint64_t send_estimate_bytes(const struct send_estimate *est);
/*
 * An estimate not made after SEND_ESTIMATE_IDLE_SECONDS (a machine with no
 * CPU to spare) made at the send's priority, so that progress gets it.
 */
void send_estimate_hurry(struct send_estimate *est);
/* send_estimate_wait(): the thread let finish; _end(): stopped first. */
void send_estimate_wait(struct send_estimate *est);
void send_estimate_end(struct send_estimate *est);

/* send_meta.c */
int send_file_fileattr(struct send_ctx *ctx, int dirfd, int fd,
		       const char *name, const char *path,
		       const struct stat *st);
int send_inode_meta(struct send_ctx *ctx, const char *path,
		    const struct stat *st, unsigned int flags);

/* send_snapshot.c */
/* send --snapshot's temporary, held by descriptors */
struct temp_snapshot {
	int dir_fd; /* the directory it is made in, the subvolume's */
	int fd;
	uint64_t id;
	char path[PATH_MAX]; /* its name, in messages */
	char proc[32];	     /* /proc/self/fd/N of fd: what is sent */
};

int send_snapshot_create(const char *path, struct temp_snapshot *t,
			 struct encio_error *e);
int send_snapshot_delete(struct temp_snapshot *t, struct encio_error *e,
			 int ret);
/* Progress: the stream so far, to the callback. */
void send_progress(struct send_ctx *ctx);
/* The estimate, if known now, taken as the total (stats, the stream). */
void send_progress_estimate(struct send_ctx *ctx);
/* A file of procfs and the like: size 0, its content what reads return. */
int send_data_to_eof(struct send_ctx *ctx, int fd, const char *path);
/*
 * FALLOCATE for the preallocated ranges of @map: those below the size with
 * mode 0, before the data (so each one grows the file from below, where
 * btrfs zeroes, and so writes, no partial last block); or (@past_eof) those
 * beyond the size with FALLOC_FL_KEEP_SIZE, after the truncate.
 */
int send_prealloc(struct send_ctx *ctx, const char *path,
		  const struct extent_map *map, bool past_eof);
/*
 * The data ranges of @map (holes and prealloc skipped) as WRITE and
 * ENCODED_WRITE, by deep-queue encoded reads, or by pread (plain).
 */
int send_data_encoded(struct send_ctx *ctx, int fd, const char *path,
		      const struct extent_map *map);
int send_data_plain(struct send_ctx *ctx, int fd, const char *path,
		    const struct extent_map *map);

/*
 * List the tree at @root_fd (@root, @st) into ctx->walk, nested subvolumes
 * and mounts left out, in send order.
 */
int send_walk_list(struct send_ctx *ctx, int root_fd, const char *root,
		   const struct stat *st);
void send_walk_release(struct send_walk *w);
/*
 * The path of @node in the stream now (under the orphan name of a directory
 * above it not in place yet), into @buf of PATH_MAX bytes.
 */
int send_walk_path(const struct send_walk *w, uint32_t node, char *buf);
/* The links of the inode at @pos of w->order: it and those after it. */
size_t send_walk_links(const struct send_walk *w, size_t pos);
/*
 * Directory node @dir, open (kept by the walk: not closed by the caller,
 * valid until the next directory opened); -errno with ctx->e set.
 */
int send_walk_dirfd(struct send_ctx *ctx, uint32_t dir);
/* ctx->src made the source path of @node. */
int send_walk_set_src(struct send_ctx *ctx, uint32_t node);

/* A subvolume sent, a parent or a clone source: its id and its path. */
struct send_root {
	uint64_t id;
	const char *path;
};

struct send_roots {
	struct send_root *root;
	size_t nr;
	uint64_t *ids; /* for BTRFS_IOC_SEND */
};

/*
 * lib/send/send_roots.c: send_roots_init() makes room for the parent, the
 * clone sources and the PATHs (parent: the parent's entry or NULL);
 * send_roots_add() adds the subvolume @path; send_find_parent() picks the
 * parent of @root among @r as btrfs send does (-ENOENT: none).
 */
int send_roots_init(struct send_roots *r, const struct send_options *opts,
		    size_t nr_paths, const struct send_root **parent,
		    struct encio_error *e);
int send_roots_add(struct send_roots *r, const char *path,
		   struct encio_error *e);
int send_find_parent(const char *root, const struct send_roots *r,
		     const struct send_root **found);
void send_roots_release(struct send_roots *r);

/*
 * Sharing in the walk (lib/send/send_share.c): send_share_begin() before the
 * first PATH, with all of them; send_share_subvol() for each SUBVOL
 * command sent; send_share_batchable() whether a file with @map can be
 * read in a batch (no extent it may share: batches map before they know
 * the stream's path); send_share_map() send_map_pieces() for the file
 * @fd (@st) sent as @path, whose ranges sent before become CLONE pieces;
 * send_clone() the CLONE command of such a piece.
 */
int send_share_begin(struct send_ctx *ctx, const char *const *paths, size_t nr);
void send_share_end(struct send_ctx *ctx);
int send_share_subvol(struct send_ctx *ctx, const uint8_t *uuid,
		      uint64_t ctransid);
bool send_share_batchable(struct send_ctx *ctx, int fd, const struct stat *st,
			  const struct extent_map *map);
int send_share_map(struct send_ctx *ctx, int fd, const char *path,
		   const struct extent_map *map);
/*
 * A file sent before a resume point: what send_share_map() remembers of
 * it, and no piece.
 */
int send_share_note(struct send_ctx *ctx, int fd, const char *path,
		    const struct extent_map *map);
/*
 * The inodes below @below of the subvolume at @root_fd (@root_st) that
 * have an extent send_share_map() may remember, ascending, into *@inos
 * (to free): those a resume must open before its point. From one tree
 * search of their extent items; none where sharing is off or nothing of
 * the filesystem is shared. 0 or -errno (a search refused: not known).
 */
int send_share_candidates(struct send_ctx *ctx, int root_fd,
			  const struct stat *root_st, uint64_t below,
			  uint64_t **inos, size_t *nr);
/*
 * send_share_candidates() on a thread, while the walk lists the tree
 * (which touches nothing of the share index); _wait() its result.
 */
struct share_candidates {
	struct send_ctx *ctx;
	int fd;
	struct stat st;
	uint64_t below;
	uint64_t *inos;
	size_t nr;
	int ret;
	pthread_t thread;
	bool started;
};

void send_share_candidates_start(struct share_candidates *c,
				 struct send_ctx *ctx, int root_fd,
				 const struct stat *root_st, uint64_t below);
int send_share_candidates_wait(struct share_candidates *c);
/*
 * The walk of a subvolume ends: the files it sent are named by their final
 * paths from now on. -ENOMEM, else 0.
 */
int send_share_walk_end(struct send_ctx *ctx);
/*
 * The clone piece @p of the file @fd: sent as CLONE if the file and its
 * source share that data now, else (a balance moved extents since the
 * choice was made, and their old places may hold other data) as the data
 * itself, read from @fd. 1: @fd ended before the piece.
 */
int send_clone_checked(struct send_ctx *ctx, int fd, const char *path,
		       const struct send_piece *p);
/* The maps of a window's clone checks, released. */
void send_clone_checks_end(struct send_ctx *ctx);
int send_push_piece(struct send_ctx *ctx, uint64_t start, uint64_t end,
		    bool whole);
/* pread [@pos, @end) of @fd, sent as WRITEs: 0, 1 where @fd ended first. */
int send_range_plain(struct send_ctx *ctx, int fd, const char *path,
		     uint64_t pos, uint64_t end);
/*
 * The pieces of the data range [@start, @end) of @fe: a compressed extent
 * read whole and sent encoded, unless the range holds fewer bytes than the
 * extent's encoded ones (a truncate, a partial overwrite, clone or dedupe
 * left a part of it): then sent as those bytes, as btrfs send sends them;
 * plain data in slot-sized pieces.
 */
int send_push_range(struct send_ctx *ctx, const struct file_extent *fe,
		    uint64_t start, uint64_t end);
/*
 * The read piece @p of @fd emitted: its request's result, as WRITE or
 * ENCODED_WRITE, and what it lacks read again. *@eof where @fd ended.
 */
int send_piece_emit_read(struct send_ctx *ctx, int fd, const char *path,
			 struct send_piece *p, bool *eof);
/*
 * The pieces of reads: send_map_pieces() appends the data ranges of @map
 * to ctx->pieces; send_issue_pieces() issues pieces [first, last) of @fd
 * (one engine request each: no more than the engine's depth in all);
 * send_reap_all() reaps every request in flight; send_emit_pieces() writes
 * them in order and releases them (@ret: an error before, which only
 * releases them).
 */
int send_map_pieces(struct send_ctx *ctx, const struct extent_map *map);
void send_issue_pieces(struct send_ctx *ctx, int fd, size_t first, size_t last);
int send_reap_all(struct send_ctx *ctx);
int send_emit_pieces(struct send_ctx *ctx, int fd, const char *path,
		     size_t first, size_t last, bool *eof, int ret);

/*
 * The read-only subvolume @root as the kernel's BTRFS_IOC_SEND writes it,
 * data included (compressed extents encoded from version 2 on; with
 * opts.no_data, UPDATE_EXTENT where data goes), END last if @end. @name:
 * the subvolume's name in the stream, NULL for the kernel's; @parent_id:
 * the parent's subvolume id, 0 for a full send; @clone_ids: the clone
 * sources' ids.
 */
int send_kernel_tree(struct send_ctx *ctx, const char *root, const char *name,
		     uint64_t parent_id, const uint64_t *clone_ids,
		     size_t nr_clone_ids, bool end);

/*
 * lib/send/send_pass.c: the kernel's pass (BTRFS_IOC_SEND) of
 * @root_fd from @parent_id (0: none) with the clone sources @ids, in
 * stream version @version, set up by send_kernel_init();
 * send_kernel_start() starts it on a thread of its own, writing into a
 * pipe whose read end is *@read_fd; the thread closes the write end when
 * done, ks->err its errno. send_pass_open(): a descriptor reading the
 * stream of @p from its start, if @p was made for the pass @ks would run
 * and none of the subvolumes it names changed since (-ESTALE: not).
 */
struct kernel_send {
	int root_fd;
	struct btrfs_ioctl_send_args args;
	int err;
};

void send_kernel_init(struct kernel_send *ks, int root_fd, uint64_t parent_id,
		      const uint64_t *ids, size_t nr_ids, uint32_t version,
		      bool no_data);
int send_kernel_start(struct kernel_send *ks, pthread_t *thread, int *read_fd);
int send_pass_open(const struct send_pass *p, const struct kernel_send *ks);

#endif
