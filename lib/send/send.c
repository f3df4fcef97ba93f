// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: walk a tree (never following symlinks) and write it as a btrfs
 * send stream, version 2; the streams the kernel makes are relayed by
 * send_kernel.c, a file's data commands made in send_data.c, its metadata's
 * in send_meta.c, -f FILE in send_output.c, --snapshot's temporary in
 * send_snapshot.c.
 *
 * Small files are read in batches (see struct send_pending); a bigger
 * file's data in windows (send_data.c). Every read of a window or batch is
 * reaped before its commands are written in file-offset order, and before
 * any other path operation in the source: a buffered read or a path lookup
 * while our own encoded reads are in flight can deadlock against the
 * extent locks they hold until this thread reaps them.
 *
 * Where the decisions are made: whether encio walks the tree or the kernel
 * computes the stream, here (kernel_computes(): a parent, clone sources,
 * --no-data or v1), and which parent a PATH after the first gets
 * (send_walked()); which parent the kernel is given, in send_roots.c
 * (send_find_parent(), as btrfs send chooses); whether a range is sent as
 * a CLONE of one sent before, in send_share.c (send_share_map() cuts the
 * file's map, send_clone_checked() confirms the source still holds it);
 * which ranges are read and in which windows, in send_data.c, each piece
 * read encoded or plain in send_piece.c (plain only where encoded reads
 * are impossible); in which order inodes go, in send_walk.c
 * (inode-number order, the kernel's).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/array.h"
#include "fs/extents.h"
#include "fs/inode_flags.h"
#include "fs/prefetch.h"
#include "send/send.h"
#include "send/send_internal.h"
#include "stream/stream.h"

/* @st is the stream file, or the file it replaces: not sent. */
static bool is_stream_file(const struct send_ctx *ctx, const struct stat *st)
{
	if (st->st_dev == ctx->out_st.st_dev &&
	    st->st_ino == ctx->out_st.st_ino)
		return true;
	return ctx->opts.replaces_ino && st->st_dev == ctx->opts.replaces_dev &&
	       st->st_ino == ctx->opts.replaces_ino;
}

/* The kernel's new_encode_dev(), as btrfs send puts it in RDEV. */
static uint64_t encode_dev(dev_t dev)
{
	uint64_t ma = major(dev), mi = minor(dev);

	return (mi & 0xff) | (ma << 8) | ((mi & ~0xffULL) << 12);
}

/* Probe encoded reads on @fd's file system once per device. */
static int send_probe_file(struct send_ctx *ctx, int fd, const struct stat *st)
{
	struct statfs sfs;
	int ret;

	if (ctx->probed && ctx->probe_dev == st->st_dev)
		return 0;
	ret = engine_probe_read(&ctx->engine, fd, ctx->opts.io_mode,
				&ctx->probe);
	if (ret)
		return send_fail(ctx, ret, "read with the forced --io mode", 0,
				 false);
	if (fstatfs(fd, &sfs))
		return send_fail(ctx, errno, "statfs", 0, false);
	ctx->probe_fs_type = sfs.f_type;
	ctx->probed = true;
	ctx->probe_dev = st->st_dev;
	ctx->stats->read_mode = ctx->probe.read_mode;
	return 0;
}

/*
 * Open and map a regular file, @st made the opened file's; a path
 * operation: nothing in flight.
 */
static int file_open_map(struct send_ctx *ctx, int dirfd, const char *name,
			 struct stat *st, struct extent_map *map)
{
	int fd, ret;

	fd = open_regular_at(dirfd, name, O_RDONLY | O_NOFOLLOW, 0, st);
	if (fd == -EINVAL || fd == -EISDIR)
		return send_fail(ctx, EAGAIN, "send (replaced while read)", 0,
				 false);
	if (fd < 0)
		return send_fail(ctx, fd, "open", 0, false);
	ret = send_probe_file(ctx, fd, st);
	if (!ret) {
		ret = extent_map_build_stat(fd, st, ctx->probe_fs_type, map);
		if (ret)
			ret = send_fail(ctx, ret, "map extents of", 0, false);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The data commands of a regular file. With @read, its pieces [first,
 * last) were read already (and are released here whatever happens); @ret
 * an error that came before.
 */
static int file_emit(struct send_ctx *ctx, int fd, const char *path,
		     const struct extent_map *map, size_t first, size_t last,
		     bool read, int ret)
{
	bool eof = false;

	ret = ret ?: send_prealloc(ctx, path, map, false);
	if (read)
		ret = send_emit_pieces(ctx, fd, path, first, last, &eof, ret);
	else if (!ret && ctx->probe.read_mode == ENCIO_IO_NONE)
		ret = send_data_plain(ctx, fd, path, map);
	else if (!ret)
		ret = send_data_encoded(ctx, fd, path, map);
	if (!ret && !map->size && fs_files_sizeless(ctx->probe_fs_type))
		ret = send_data_to_eof(ctx, fd, path);
	if (ret)
		return ret;
	/* The writes make the size, but for a hole or prealloc at the end. */
	if (extent_map_data_end(map) < map->size) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_TRUNCATE);
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_SIZE, map->size);
		ret = send_end_cmd(ctx);
	}
	ret = ret ?: send_prealloc(ctx, path, map, true);
	send_progress(ctx);
	return ret;
}

static int send_file_data(struct send_ctx *ctx, int dirfd, const char *name,
			  const char *path, const struct stat *st)
{
	struct extent_map map = { 0 };
	struct stat opened = *st;
	int fd, ret;

	fd = file_open_map(ctx, dirfd, name, &opened, &map);
	if (fd < 0)
		return fd;
	ret = file_emit(ctx, fd, path, &map, 0, 0, false, 0);
	extent_map_release(&map);
	close(fd);
	return ret;
}

static int send_create(struct send_ctx *ctx, const char *path,
		       const struct stat *st, const char *target)
{
	uint16_t cmd;

	switch (st->st_mode & S_IFMT) {
	case S_IFREG:
		cmd = BTRFS_SEND_C_MKFILE;
		break;
	case S_IFDIR:
		cmd = BTRFS_SEND_C_MKDIR;
		break;
	case S_IFLNK:
		cmd = BTRFS_SEND_C_SYMLINK;
		break;
	case S_IFIFO:
		cmd = BTRFS_SEND_C_MKFIFO;
		break;
	case S_IFSOCK:
		cmd = BTRFS_SEND_C_MKSOCK;
		break;
	default:
		cmd = BTRFS_SEND_C_MKNOD;
		break;
	}
	ctx->creates++;
	if (ctx->names_only)
		return 0;
	if (stream_writer_blind(&ctx->w) &&
	    ctx->creates == ctx->w.skip->anchor.creates)
		stream_writer_at_anchor(&ctx->w, st->st_ino);
	stream_begin_cmd(&ctx->w, cmd);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_INO, st->st_ino);
	if (target)
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH_LINK, target);
	if (cmd == BTRFS_SEND_C_MKNOD || cmd == BTRFS_SEND_C_MKFIFO ||
	    cmd == BTRFS_SEND_C_MKSOCK) {
		stream_put_u64(&ctx->w, BTRFS_SEND_A_MODE, st->st_mode);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_RDEV,
			       encode_dev(st->st_rdev));
	}
	return send_end_cmd(ctx);
}

static int send_symlink(struct send_ctx *ctx, int dirfd, const char *name,
			const char *path, const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);

	if (n < 0)
		return send_fail(ctx, errno, "read link", 0, false);
	target[n] = '\0';
	return send_create(ctx, path, st, target);
}

/* LINK or RENAME (@cmd) of @from to @to. */
static int send_two_paths(struct send_ctx *ctx, uint16_t cmd, const char *path,
			  const char *other)
{
	if (ctx->names_only)
		return 0;
	stream_begin_cmd(&ctx->w, cmd);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_string(&ctx->w,
			  cmd == BTRFS_SEND_C_LINK ? BTRFS_SEND_A_PATH_LINK :
						     BTRFS_SEND_A_PATH_TO,
			  other);
	return send_end_cmd(ctx);
}

static int node_path(struct send_ctx *ctx, uint32_t node, char *path)
{
	if (send_walk_path(&ctx->walk, node, path))
		return send_fail(ctx, ENAMETOOLONG, "make the stream path of",
				 0, false);
	return 0;
}

/*
 * Directory node @dir made in the stream where it is not yet: under its
 * orphan name in the root, as btrfs send makes a directory an entry needs
 * before its turn comes (it has a higher inode number); renamed into place
 * at its turn (send_dir_node()). Its times, flags and the rest come at the
 * end of the tree (send_dirs_meta()), after its entries.
 */
static int mkdir_node(struct send_ctx *ctx, uint32_t dir)
{
	struct stat st = { .st_mode = S_IFDIR };
	char path[PATH_MAX];
	int ret;

	st.st_ino = ctx->walk.nodes[dir].ino;
	ret = node_path(ctx, dir, path) ?: send_create(ctx, path, &st, NULL);
	ctx->walk.nodes[dir].created = !ret;
	return ret;
}

static int place_dir(struct send_ctx *ctx, uint32_t dir)
{
	if (ctx->walk.nodes[dir].created)
		return 0;
	ctx->walk.nodes[dir].orphan = true;
	return mkdir_node(ctx, dir);
}

/* Directory node @dir at its turn: made, or moved from its orphan name. */
static int send_dir_node(struct send_ctx *ctx, uint32_t dir)
{
	struct send_node *n = &ctx->walk.nodes[dir];
	char from[PATH_MAX], to[PATH_MAX];
	int ret;

	ctx->stats->dirs++;
	ret = place_dir(ctx, n->parent);
	if (ret)
		return ret;
	if (!n->created)
		return mkdir_node(ctx, dir);
	if (!n->orphan)
		return 0;
	ret = node_path(ctx, dir, from);
	if (ret)
		return ret;
	n->orphan = false;
	return node_path(ctx, dir, to) ?:
		       send_two_paths(ctx, BTRFS_SEND_C_RENAME, from, to);
}

/*
 * Small files are sent in batches, so that their reads overlap instead of
 * waiting one round trip each: the entries of a batch, of one directory,
 * are stat'ed, and its regular files opened and mapped (path operations,
 * with nothing in flight); then the encoded reads of the files small
 * enough are issued and reaped; then every entry is sent in order (path
 * operations again: nothing in flight).
 */
struct send_pending {
	uint32_t node;	 /* the inode's first link */
	size_t link;	 /* its place in ctx->walk.order */
	size_t nr_links; /* the links that follow it there */
	int dirfd;	 /* its directory, kept by the walk; or -errno */
	struct stat st;
	bool have_st;
	int fd; /* a regular file opened and mapped, or -1 */
	struct extent_map map;
	bool read; /* its pieces [first, last) of ctx->pieces are read */
	size_t first, last;
};

/*
 * The directories of the inode's links made (under orphan names where
 * their turn is to come), the link with the shortest path now into *@best:
 * the inode's data goes there, never under a longer path than btrfs send
 * writes it under (the link of its first inode ref, in the same state of
 * the tree).
 */
static int place_links(struct send_ctx *ctx, const struct send_pending *p,
		       uint32_t *best)
{
	size_t i, len, best_len = SIZE_MAX;
	char path[PATH_MAX];
	uint32_t link;
	int ret;

	for (i = 0; i < p->nr_links; i++) {
		link = ctx->walk.order[p->link + i];
		ret = place_dir(ctx, ctx->walk.nodes[link].parent) ?:
			      node_path(ctx, link, path);
		if (ret)
			return ret;
		len = strlen(path);
		if (len < best_len) {
			best_len = len;
			*best = link;
		}
	}
	return 0;
}

/* The links of the inode but @best, to @at. */
static int send_links(struct send_ctx *ctx, const struct send_pending *p,
		      uint32_t best, const char *at)
{
	char path[PATH_MAX];
	uint32_t link;
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < p->nr_links; i++) {
		link = ctx->walk.order[p->link + i];
		if (link == best)
			continue;
		ctx->stats->others++;
		ret = node_path(ctx, link, path) ?:
			      send_two_paths(ctx, BTRFS_SEND_C_LINK, path, at);
	}
	return ret;
}

static int send_inode_data(struct send_ctx *ctx, struct send_pending *p,
			   const char *at)
{
	const char *name = ctx->walk.nodes[p->node].name;
	const struct stat *st = &p->st;
	int ret;

	ctx->stats->files++;
	ret = send_file_fileattr(ctx, p->dirfd, p->fd, name, at, st);
	if (ret)
		return ret;
	if (p->fd >= 0)
		return file_emit(ctx, p->fd, at, &p->map, p->first, p->last,
				 p->read, 0);
	return send_file_data(ctx, p->dirfd, name, at, st);
}

static int send_inode(struct send_ctx *ctx, struct send_pending *p)
{
	const char *name = ctx->walk.nodes[p->node].name;
	const struct stat *st = &p->st;
	uint32_t best = p->node;
	char at[PATH_MAX];
	int ret;

	ret = place_links(ctx, p, &best) ?: node_path(ctx, best, at);
	if (ret)
		return ret;
	if (S_ISLNK(st->st_mode))
		ret = send_symlink(ctx, p->dirfd, name, at, st);
	else
		ret = send_create(ctx, at, st, NULL);
	if (ret)
		return ret;
	ctx->walk_node = best;
	if (S_ISREG(st->st_mode))
		ret = send_inode_data(ctx, p, at);
	else
		ctx->stats->others++;
	ctx->walk_node = SEND_NODE_NONE;
	ret = ret ?: send_links(ctx, p, best, at);
	if (ret)
		return ret;
	snprintf(ctx->xattr_at, sizeof(ctx->xattr_at), "/proc/self/fd/%d/%s",
		 p->dirfd, name);
	return send_inode_meta(ctx, at, st, 0);
}

static int send_entry(struct send_ctx *ctx, struct send_pending *p)
{
	const struct send_node *n = &ctx->walk.nodes[p->node];

	meta_prefetch_walked(&ctx->walked);
	send_walk_set_src(ctx, p->node);
	if (p->dirfd < 0)
		return p->dirfd;
	if (!p->have_st &&
	    fstatat(p->dirfd, n->name, &p->st, AT_SYMLINK_NOFOLLOW))
		return send_fail(ctx, errno, "stat", 0, false);
	if (p->st.st_ino != n->ino)
		return send_fail(ctx, EAGAIN, "send (replaced while read)", 0,
				 false);
	if (is_stream_file(ctx, &p->st))
		return 0;
	if (S_ISDIR(p->st.st_mode))
		return send_dir_node(ctx, p->node);
	return send_inode(ctx, p);
}

#define SEND_BATCH 32

/*
 * Take the inode at @pos of the walk's order into the batch @b (*@nr
 * entries), its links *@taken more; whether more can follow. A regular
 * file is read with the batch when its pieces fit in the engine with those
 * before; one that does not (it is streamed by windows, which reuse
 * ctx->pieces), a directory, a hard-linked inode or an error ends the
 * batch, and an entry of another directory starts the next one.
 * send_entry() reports errors.
 */
static bool batch_take(struct send_ctx *ctx, size_t pos, struct send_pending *b,
		       size_t *nr, size_t *taken)
{
	struct send_walk *w = &ctx->walk;
	uint32_t node = w->order[pos];
	const struct send_node *n = &w->nodes[node];
	size_t before = ctx->nr_pieces, links;
	struct send_pending *p;

	if (*nr && n->parent != w->nodes[b[0].node].parent)
		return false;
	links = send_walk_links(w, pos);
	p = &b[(*nr)++];
	*taken += links;
	memset(p, 0, sizeof(*p));
	p->node = node;
	p->link = pos;
	p->nr_links = links;
	p->fd = -1;
	p->dirfd = send_walk_dirfd(ctx, n->parent);
	if (p->dirfd < 0 || links > 1 ||
	    fstatat(p->dirfd, n->name, &p->st, AT_SYMLINK_NOFOLLOW))
		return false;
	p->have_st = true;
	if (S_ISDIR(p->st.st_mode) || is_stream_file(ctx, &p->st) ||
	    p->st.st_ino != n->ino ||
	    (S_ISREG(p->st.st_mode) && p->st.st_nlink > 1))
		return false;
	if (!S_ISREG(p->st.st_mode))
		return *nr < SEND_BATCH;
	p->fd = file_open_map(ctx, p->dirfd, n->name, &p->st, &p->map);
	if (p->fd < 0)
		return false;
	if (ctx->probe.read_mode != ENCIO_IO_NONE &&
	    send_share_batchable(ctx, p->fd, &p->st, &p->map) &&
	    !send_map_pieces(ctx, &p->map) &&
	    ctx->nr_pieces <= ctx->engine.depth) {
		p->read = true;
		p->first = before;
		p->last = ctx->nr_pieces;
		return *nr < SEND_BATCH;
	}
	ctx->nr_pieces = before;
	return false;
}

/*
 * Send the batch @b of @nr entries: read, then each in order. Pieces an
 * error left unsent are released at the end.
 */
static int send_batch(struct send_ctx *ctx, struct send_pending *b, size_t nr)
{
	size_t i;
	int ret;

	for (i = 0; i < nr; i++)
		if (b[i].read)
			send_issue_pieces(ctx, b[i].fd, b[i].first, b[i].last);
	ret = send_reap_all(ctx);
	for (i = 0; i < nr; i++) {
		ret = ret ?: send_stopped(ctx) ?: send_entry(ctx, &b[i]);
		if (b[i].fd >= 0) {
			extent_map_release(&b[i].map);
			close(b[i].fd);
		}
	}
	for (i = 0; i < ctx->nr_pieces; i++) {
		if (ctx->pieces[i].req)
			engine_put_req(&ctx->engine, ctx->pieces[i].req);
		ctx->pieces[i].req = NULL;
	}
	ctx->nr_pieces = 0;
	return ret;
}

/*
 * The directories' FILEATTR, xattrs, owner, mode and times, once their
 * entries are all made (entries would inherit their nocow, compression and
 * default ACL, and change their times); the root last.
 */
static int send_dirs_meta(struct send_ctx *ctx)
{
	struct send_walk *w = &ctx->walk;
	char path[PATH_MAX];
	struct stat st;
	size_t i;
	uint32_t node;
	int fd, ret = 0;

	for (i = 0; !ret && i <= w->nr_order; i++) {
		node = i < w->nr_order ? w->order[i] : 0;
		if (!w->nodes[node].created)
			continue;
		send_walk_set_src(ctx, node);
		fd = send_walk_dirfd(ctx, node);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st))
			return send_fail(ctx, errno, "stat", 0, false);
		snprintf(ctx->xattr_at, sizeof(ctx->xattr_at),
			 "/proc/self/fd/%d/.", fd);
		ret = node_path(ctx, node, path) ?:
						   send_inode_meta(ctx, path, &st,
								   inode_flags_get(fd));
	}
	return ret;
}

/*
 * The read-ahead thread takes no SIGINT or SIGTERM: they are for this
 * thread, whose waits they interrupt.
 */
static void prefetch_start(struct send_ctx *ctx, int fd, const struct stat *st,
			   uint64_t from)
{
	sigset_t block, old;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	meta_prefetch_start(&ctx->prefetch, fd, ".", st, &ctx->walked, from);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * The commands that make an inode in the group of the inode at @pos of
 * the walk's order (@links links): directories made under orphan names
 * for it, and its own.
 */
static uint64_t group_creates(const struct send_walk *w, size_t pos,
			      size_t links)
{
	const struct send_node *n = &w->nodes[w->order[pos]];
	uint32_t dir;
	uint64_t c = 1;
	size_t i, j;

	if (n->type == DT_DIR)
		return !w->nodes[n->parent].created + !n->created;
	for (i = 0; i < links; i++) {
		dir = w->nodes[w->order[pos + i]].parent;
		for (j = 0; j < i; j++)
			if (w->nodes[w->order[pos + j]].parent == dir)
				break;
		c += j == i && !w->nodes[dir].created;
	}
	return c;
}

/*
 * A regular file before the resume point that may share: opened, mapped
 * and remembered as sent (under its link @best) as the walk would have.
 */
static int note_sent_file(struct send_ctx *ctx, uint32_t node, uint32_t best)
{
	const struct send_node *n = &ctx->walk.nodes[node];
	struct extent_map map;
	char at[PATH_MAX];
	struct stat st;
	int dirfd, fd, ret;

	send_walk_set_src(ctx, node);
	dirfd = send_walk_dirfd(ctx, n->parent);
	if (dirfd < 0)
		return dirfd;
	fd = file_open_map(ctx, dirfd, n->name, &st, &map);
	if (fd < 0)
		return fd;
	if (st.st_ino != n->ino)
		ret = send_fail(ctx, EAGAIN, "send (replaced while read)", 0,
				false);
	else
		ret = node_path(ctx, best, at);
	if (!ret && ctx->probe.read_mode != ENCIO_IO_NONE) {
		ctx->walk_node = best;
		ret = send_share_note(ctx, fd, at, &map);
		ctx->walk_node = SEND_NODE_NONE;
		if (ret)
			ret = send_fail(ctx, ret, "map extents of", 0, false);
	}
	extent_map_release(&map);
	close(fd);
	return ret;
}

/*
 * The group of the inode at @pos (@links links) as sent before the resume
 * point: its directories marked made, and, a regular file listed in
 * @shared, remembered as sent.
 */
static int pass_group(struct send_ctx *ctx, size_t pos, size_t links,
		      const uint64_t *shared, size_t nr_shared)
{
	const struct send_walk *w = &ctx->walk;
	const struct send_node *n = &w->nodes[w->order[pos]];
	struct send_pending p = { .node = w->order[pos],
				  .link = pos,
				  .nr_links = links };
	uint32_t best = p.node;
	int ret;

	if (n->type == DT_DIR)
		return send_dir_node(ctx, p.node);
	ret = place_links(ctx, &p, &best);
	ctx->creates++; /* its own MKFILE, SYMLINK...: send_create() not called */
	if (ret || n->type != DT_REG ||
	    !array_has_u64(shared, nr_shared, n->ino))
		return ret;
	return note_sent_file(ctx, p.node, best);
}

/*
 * Whether the subvolume being sent is a resume's, with an anchor, and
 * cannot hold the stream's own file (which the walk leaves out, by stat).
 */
static bool may_go_to_anchor(const struct send_ctx *ctx)
{
	return ctx->w.skip && resume_point_anchored(ctx->w.skip) &&
	       ctx->out_st.st_dev != ctx->root_dev;
}

/*
 * A resume whose point has an anchor (resume.h) goes there from the
 * walk's names: the groups of inodes before the one that makes the anchor
 * are passed without a command put, their files unread but those that may
 * share, and the writer drops what comes after uncounted up to the
 * anchor. *@from: the place in the walk's order to go on from.
 */
static int go_to_anchor(struct send_ctx *ctx, struct share_candidates *c,
			size_t *from)
{
	const struct resume_point *p = ctx->w.skip;
	const struct send_walk *w = &ctx->walk;
	const uint64_t *shared = c->inos;
	size_t i, links, nr_shared = c->nr;
	int ret;

	*from = 0;
	ctx->names_only = true;
	for (i = 0, ret = 0; !ret && i < w->nr_order; i += links) {
		links = send_walk_links(w, i);
		if (ctx->creates + group_creates(w, i, links) >=
		    p->anchor.creates)
			break;
		ret = send_stopped(ctx) ?:
			      pass_group(ctx, i, links, shared, nr_shared);
	}
	ctx->names_only = false;
	if (ret)
		return ret;
	stream_writer_skip_to_anchor(&ctx->w);
	*from = i;
	return 0;
}

/*
 * The names of the tree at @fd (@st) listed, and where the walk starts in
 * their order, into *@from: a resume that may go to its anchor goes there
 * (the files that may share found beside the listing) and reads ahead
 * from there; 0 else.
 */
static int list_tree(struct send_ctx *ctx, int fd, const struct stat *st,
		     size_t *from)
{
	const struct send_walk *w = &ctx->walk;
	struct share_candidates shared;
	int ret;

	*from = 0;
	if (!may_go_to_anchor(ctx))
		return send_walk_list(ctx, fd, ctx->src, st);
	send_share_candidates_start(&shared, ctx, fd, st,
				    ctx->w.skip->anchor.ino);
	ret = send_walk_list(ctx, fd, ctx->src, st);
	/* a search refused: the resume reads what comes before its point */
	if (!send_share_candidates_wait(&shared) && !ret)
		ret = go_to_anchor(ctx, &shared, from);
	free(shared.inos);
	if (!ret)
		prefetch_start(ctx, fd, st,
			       stream_writer_blind(&ctx->w) &&
					       *from < w->nr_order ?
				       w->nodes[w->order[*from]].ino :
				       0);
	return ret;
}

/* The tree at @fd (@st), its entries in inode-number order. */
static int send_walk_tree(struct send_ctx *ctx, int fd, const struct stat *st)
{
	struct send_pending batch[SEND_BATCH];
	size_t i, n, taken;
	int ret;

	ret = list_tree(ctx, fd, st, &i);
	ctx->nr_pieces = 0;
	for (; !ret && i < ctx->walk.nr_order; i += taken) {
		n = 0;
		taken = 0;
		while (i + taken < ctx->walk.nr_order &&
		       batch_take(ctx, i + taken, batch, &n, &taken))
			;
		ret = send_batch(ctx, batch, n);
	}
	ret = ret ?: send_dirs_meta(ctx);
	if (!ret && send_share_walk_end(ctx))
		ret = send_fail(ctx, ENOMEM, "remember the paths of", 0, false);
	return ret;
}

static int source_kind_fd(int fd, enum send_source *kind)
{
	enum btrfs_util_error err;
	long fs_type;
	bool frozen;
	int ret;

	if (btrfs_util_is_subvolume_fd(fd) == BTRFS_UTIL_OK) {
		err = btrfs_util_get_subvolume_read_only_fd(fd, &frozen);
		if (err)
			return btrfsutil_errno(err);
		*kind = frozen ? SEND_SOURCE_FROZEN :
				 SEND_SOURCE_WRITABLE_SUBVOL;
		return 0;
	}
	ret = extent_fs_kind(fd, &fs_type, &frozen);
	if (ret)
		return ret;
	*kind = frozen ? SEND_SOURCE_FROZEN : SEND_SOURCE_LIVE;
	return 0;
}

int send_source_kind(const char *path, enum send_source *kind,
		     struct encio_error *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return encio_error_set(e, errno, "open", path, false, 0);
	ret = source_kind_fd(fd, kind);
	close(fd);
	if (ret)
		return encio_error_set(e, ret, "tell what is sent of", path,
				       false, 0);
	return 0;
}

/* SUBVOL: the subvolume's UUID and ctransid, or a fresh UUID for a dir. */
static int send_subvol(struct send_ctx *ctx, int fd, const char *name)
{
	struct btrfs_util_subvolume_info info;
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid = 0;

	static const uint8_t none[BTRFS_UUID_SIZE];

	if (btrfs_util_is_subvolume_fd(fd) == BTRFS_UTIL_OK &&
	    btrfs_util_subvolume_info_fd(fd, 0, &info) == BTRFS_UTIL_OK) {
		/*
		 * A received subvolume goes by the UUID it was received as,
		 * as the kernel's send names it (and any later incremental
		 * stream names it as its parent)
		 */
		memcpy(uuid,
		       memcmp(info.received_uuid, none, sizeof(none)) ?
			       info.received_uuid :
			       info.uuid,
		       sizeof(uuid));
		ctransid = info.ctransid;
	} else {
		if (getrandom(uuid, sizeof(uuid), 0) != sizeof(uuid))
			return send_fail(ctx, errno, "make a uuid", 0, false);
		uuid[6] = (uuid[6] & 0x0f) | 0x40;
		uuid[8] = (uuid[8] & 0x3f) | 0x80;
	}
	ctx->w.layout = send_layout(ctx);
	ctx->creates = 0;
	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_SUBVOL);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, name);
	stream_put_uuid(&ctx->w, BTRFS_SEND_A_UUID, uuid);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_CTRANSID, ctransid);
	stream_put_total(&ctx->w);
	return send_share_subvol(ctx, uuid, ctransid) ?: send_end_cmd(ctx);
}

/*
 * The tree at @root as subvolume @name; the END command if @last. The
 * root of a writable subvolume is refused here, on the directory opened,
 * whatever the caller checked before.
 */
static int send_tree(struct send_ctx *ctx, const char *root, const char *name,
		     bool last)
{
	enum send_source kind;
	struct stat st;
	int fd, ret;

	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	ret = send_stopped(ctx);
	if (ret)
		return ret;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return send_fail(ctx, errno, "open", 0, false);
	if (fstat(fd, &st)) {
		ret = send_fail(ctx, errno, "stat", 0, false);
		goto out;
	}
	ret = source_kind_fd(fd, &kind);
	if (ret) {
		ret = send_fail(ctx, ret, "tell what is sent of", 0, false);
		goto out;
	}
	/* its tree part is walked live, as copy -r walks a tree */
	if (kind == SEND_SOURCE_WRITABLE_SUBVOL && !ctx->opts.tree_part) {
		ret = send_fail(ctx, EINVAL, "send (not a read-only subvolume)",
				0, false);
		goto out;
	}
	ctx->root_dev = st.st_dev;
	/* a resume going to its anchor reads ahead from there (walk_tree) */
	if (!may_go_to_anchor(ctx))
		prefetch_start(ctx, fd, &st, 0);
	ret = send_subvol(ctx, fd, name);
	if (ret)
		goto out;
	ctx->stats->dirs++;
	ret = send_walk_tree(ctx, fd, &st);
	send_walk_release(&ctx->walk);
	if (ret)
		goto out;
	if (last) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_END);
		ret = send_end_cmd(ctx);
	}
out:
	meta_prefetch_stop(&ctx->prefetch);
	close(fd);
	return ret;
}

static void ctx_release(struct send_ctx *ctx)
{
	send_estimate_end(&ctx->est);
	send_walk_release(&ctx->walk);
	free(ctx->share_nodes);
	send_clone_checks_end(ctx);
	send_share_end(ctx);
	if (ctx->engine_ok)
		engine_release(&ctx->engine);
	stream_writer_release(&ctx->w);
	free(ctx->pieces);
	free(ctx->buf);
	free(ctx->xattr_buf);
	free(ctx);
}

static int ctx_new(struct send_ctx **ret, int out_fd, const char *out_name,
		   const struct send_options *opts, struct send_stats *stats,
		   struct encio_error *e)
{
	struct engine_config config = {
		.depth = opts->depth ? opts->depth : ENGINE_DEFAULT_DEPTH,
		.force_backing = -1,
	};
	struct send_ctx *ctx = calloc(1, sizeof(*ctx));
	int err;

	*ret = NULL;
	if (!ctx)
		return encio_error_set(e, ENOMEM, "start", "send", false, 0);
	ctx->opts = *opts;
	ctx->walk_node = SEND_NODE_NONE;
	ctx->out_name = out_name;
	ctx->stats = stats;
	ctx->e = e;
	if (fstat(out_fd, &ctx->out_st))
		memset(&ctx->out_st, 0, sizeof(ctx->out_st));
	ctx->write_max = opts->proto == 1 ? SEND_WRITE_MAX_V1 : SEND_WRITE_MAX;
	err = stream_writer_init(&ctx->w, out_fd,
				 opts->proto ? opts->proto : 2);
	if (err)
		goto fail;
	ctx->w.stop = opts->stop;
	err = engine_init(&ctx->engine, &config);
	if (err)
		goto fail;
	ctx->engine_ok = true;
	ctx->buf = malloc(SEND_WRITE_MAX);
	ctx->xattr_buf = malloc(XATTR_SIZE_MAX);
	if (!ctx->buf || !ctx->xattr_buf) {
		err = -ENOMEM;
		goto fail;
	}
	*ret = ctx;
	return 0;
fail:
	ctx_release(ctx);
	return encio_error_set(e, err, "start", "send", false, 0);
}

/* The subvolume's name in the stream: PATH's last component. */
static int subvol_name(const char *path, char *base, char **name,
		       struct encio_error *e)
{
	snprintf(base, PATH_MAX, "%s", path);
	*name = basename(base);
	if (!**name || !strcmp(*name, "/") || !strcmp(*name, ".") ||
	    !strcmp(*name, ".."))
		return encio_error_set(e, EINVAL, "name the subvolume after",
				       path, false, 0);
	return 0;
}

/*
 * Progress: the stream's size estimated from the subvolumes' metadata on a
 * thread beside the send (send_estimate.c), of what changed since the
 * parent was made where there is one; the exact size is -n's pass.
 */
static int count_tree(const char *root, void *arg, uint64_t *sum)
{
	const struct send_ctx *ctx = arg;
	struct send_options o = ctx->opts;
	struct send_stats stats;
	struct encio_error e;
	int ret;

	o.estimate = true;
	o.progress = NULL;
	o.resume = NULL;
	o.name = NULL;
	ret = send_run(&root, 1, STREAM_COUNT_ONLY, "the estimate", &o, &stats,
		       &e);
	/* and the attribute that carries the total to the receiver */
	if (!ret)
		*sum += stats.stream_bytes + STREAM_TOTAL_ATTR_LEN;
	return ret;
}

static void estimate_start(struct send_ctx *ctx, const char *const *paths,
			   size_t nr)
{
	struct btrfs_util_subvolume_info info;
	uint64_t since = 0;

	if (ctx->opts.parent &&
	    !btrfs_util_subvolume_info(ctx->opts.parent, 0, &info))
		since = info.otransid;
	send_estimate_start(&ctx->est, paths, nr, &ctx->opts, since,
			    (uint32_t)ctx->write_max, count_tree, ctx);
}

/* The kernel computes the stream: a parent, clone sources, --no-data, v1. */
static bool kernel_computes(const struct send_options *opts)
{
	return opts->parent || opts->nr_clones || opts->no_data ||
	       opts->proto == 1;
}

static int send_kernel_one(struct send_ctx *ctx, const char *root,
			   const char *name, struct send_roots *r,
			   const struct send_root *parent, bool end)
{
	const struct send_root *p = parent;
	struct btrfs_util_subvolume_info info;
	enum send_source kind;
	int ret;

	ret = send_source_kind(root, &kind, ctx->e);
	if (ret)
		return ret;
	if (kind != SEND_SOURCE_FROZEN ||
	    btrfs_util_is_subvolume(root) != BTRFS_UTIL_OK)
		return encio_error_set(ctx->e, EINVAL,
				       "send (not a read-only subvolume)", root,
				       false, 0);
	if (!p && r->nr && !ctx->opts.whole) {
		ret = send_find_parent(root, r, &p);
		if (ret) {
			if (btrfs_util_subvolume_info(root, 0, &info))
				info.id = 0;
			snprintf(ctx->src, sizeof(ctx->src),
				 "%s (subvolume %llu)", root,
				 (unsigned long long)info.id);
			return send_fail(ctx, ret, "determine the parent of", 0,
					 false);
		}
	}
	return send_kernel_tree(ctx, root, name, p ? p->id : 0, r->ids, r->nr,
				end);
}

/*
 * One subvolume or tree, from a temporary snapshot with --snapshot; END
 * after it if @end.
 */
static int send_one(struct send_ctx *ctx, const char *path,
		    struct send_roots *roots, const struct send_root *parent,
		    bool end)
{
	struct temp_snapshot snap;
	char base[PATH_MAX], *name;
	int ret;

	ret = subvol_name(path, base, &name, ctx->e);
	if (ret)
		return ret;
	if (ctx->opts.name)
		name = (char *)ctx->opts.name;
	if (!ctx->opts.snapshot)
		return roots ? send_kernel_one(ctx, path, ctx->opts.name, roots,
					       parent, end) :
			       send_tree(ctx, path, name, end);
	ret = send_snapshot_create(path, &snap, ctx->e);
	if (ret)
		return send_snapshot_delete(&snap, ctx->e, ret);
	ret = roots ? send_kernel_one(ctx, snap.proc, name, roots, parent,
				      end) :
		      send_tree(ctx, snap.proc, name, end);
	if (ret)
		encio_error_rebase(ctx->e, snap.proc, snap.path);
	return send_snapshot_delete(&snap, ctx->e, ret);
}

/*
 * A PATH after the first of a walked stream: a read-only snapshot of a
 * subvolume sent before it in the stream (or a sibling of one) goes as
 * the kernel's difference from it, as btrfs send -c with those before it
 * would send it: the receiver snapshots it and applies the changes, and
 * what is unchanged is neither read nor written again.
 */
static int send_walked(struct send_ctx *ctx, const char *path,
		       struct send_roots *sent, bool end)
{
	const struct send_root *parent = NULL;
	enum send_source kind;
	int ret;

	if (sent->nr && !ctx->opts.snapshot &&
	    !send_source_kind(path, &kind, ctx->e) &&
	    kind == SEND_SOURCE_FROZEN &&
	    btrfs_util_is_subvolume(path) == BTRFS_UTIL_OK &&
	    !send_find_parent(path, sent, &parent))
		ret = send_kernel_one(ctx, path, NULL, sent, parent, end);
	else
		ret = send_one(ctx, path, NULL, NULL, end);
	if (ret || ctx->opts.snapshot ||
	    btrfs_util_is_subvolume(path) != BTRFS_UTIL_OK)
		return ret;
	return send_roots_add(sent, path, ctx->e);
}

/*
 * Whether the subvolume @path is the one @p resumes: its UUID (or the one
 * it was received with, which its stream names) and ctransid.
 */
static bool resumes(const char *path, const struct resume_point *p)
{
	struct btrfs_util_subvolume_info info;

	if (btrfs_util_subvolume_info(path, 0, &info))
		return false;
	return (!memcmp(info.uuid, p->uuid, BTRFS_UUID_SIZE) ||
		!memcmp(info.received_uuid, p->uuid, BTRFS_UUID_SIZE)) &&
	       info.ctransid == p->ctransid;
}

/*
 * The writer found what it regenerated is not what the point names, or
 * that the point is of a stream laid out otherwise.
 */
static int resume_differs(struct send_ctx *ctx)
{
	if (ctx->w.err == -EPROTO)
		return encio_error_set(
			ctx->e, EPROTO,
			"resume (the token is of a stream sent with other options, -p, -c, -e, --proto or --no-data, or by an encio that lays streams out otherwise: send it whole again)",
			"send", false, 0);
	return encio_error_set(
		ctx->e, ESTALE,
		"resume (the stream regenerated is not the one received up to the resume point: send it whole again)",
		"send", false, 0);
}

static bool resume_refused(int err)
{
	return err == -ESTALE || err == -EPROTO;
}

/* The PATH -t resumes: the ones before it are not sent. */
static int resume_first(struct send_ctx *ctx, const char *const *paths,
			size_t nr, size_t *first)
{
	const struct resume_point *p = ctx->opts.resume;

	*first = 0;
	if (!p)
		return 0;
	for (*first = 0; *first < nr; (*first)++)
		if (resumes(paths[*first], p))
			return 0;
	return encio_error_set(
		ctx->e, ESTALE,
		"resume (the token is for another subvolume, or one changed since: no PATH is its snapshot)",
		"send", false, 0);
}

static int send_all(struct send_ctx *ctx, const char *const *paths, size_t nr)
{
	const struct send_root *parent = NULL;
	struct send_roots roots = { 0 };
	bool kernel = kernel_computes(&ctx->opts);
	size_t i, first;
	int ret;

	ret = resume_first(ctx, paths, nr, &first) ?:
		      send_roots_init(&roots, &ctx->opts, nr, &parent, ctx->e);
	for (i = 0; !ret && i < nr; i++) {
		bool end = i + 1 == nr || !ctx->opts.one_stream;
		bool add = !kernel || (ctx->opts.nr_clones && !parent &&
				       !ctx->opts.snapshot);

		/* received whole before: a clone source all the same */
		if (i < first) {
			if (add &&
			    btrfs_util_is_subvolume(paths[i]) == BTRFS_UTIL_OK)
				ret = send_roots_add(&roots, paths[i], ctx->e);
			continue;
		}
		if (i == first && ctx->opts.resume)
			stream_writer_skip(&ctx->w, ctx->opts.resume, true);
		else if (i && !ctx->opts.one_stream)
			stream_put_header(&ctx->w);
		if (!kernel) {
			ret = send_walked(ctx, paths[i], &roots, end);
			continue;
		}
		ret = send_one(ctx, paths[i], &roots, parent, end);
		if (!ret && add)
			ret = send_roots_add(&roots, paths[i], ctx->e);
	}
	send_roots_release(&roots);
	return resume_refused(ctx->w.err) ? resume_differs(ctx) : ret;
}

int send_run(const char *const *paths, size_t nr, int out_fd,
	     const char *out_name, const struct send_options *opts,
	     struct send_stats *stats, struct encio_error *e)
{
	char base[PATH_MAX], *name;
	struct send_ctx *ctx;
	size_t i;
	int ret, ret2;

	memset(stats, 0, sizeof(*stats));
	stats->read_mode = ENCIO_IO_NONE;
	if (opts->estimate)
		out_fd = STREAM_COUNT_ONLY;
	stream_fd_tune(out_fd);
	if (opts->name && nr != 1)
		return encio_error_set(e, EINVAL, "name the subvolumes of",
				       "send", false, 0);
	for (i = 0; i < nr; i++) {
		ret = subvol_name(paths[i], base, &name, e);
		if (!ret && !opts->tree_part)
			ret = send_check_path(paths[i], e);
		if (ret)
			return ret;
	}
	ret = ctx_new(&ctx, out_fd, out_name, opts, stats, e);
	if (ret)
		return ret;
	if (opts->progress && !opts->estimate)
		estimate_start(ctx, paths, nr);
	if (!kernel_computes(opts)) {
		ret = send_share_begin(ctx, paths, nr);
		if (ret) {
			ctx_release(ctx);
			return encio_error_set(e, -ret, "start", "send", false,
					       0);
		}
	}
	ret = send_all(ctx, paths, nr);
	if (ret)
		stream_writer_abandon(&ctx->w);
	/* the estimate a quick send outran, for what it reports */
	if (!ret && ctx->opts.progress && ctx->opts.estimate_reported) {
		send_estimate_wait(&ctx->est);
		send_progress_estimate(ctx);
	}
	ret2 = stream_writer_finish(&ctx->w);
	if (!ret && resume_refused(ret2))
		ret = resume_differs(ctx);
	else if (!ret && ret2)
		ret = encio_error_set(e, ret2, "write stream to", out_name,
				      false, 0);
	stats->stream_bytes = ctx->w.written;
	stats->probe = ctx->probe;
	stats->probed = ctx->probed;
	/* the total, once known, is the stream's real size */
	if (!ret)
		stats->bytes_total = stats->bytes_done = stats->stream_bytes;
	ctx_release(ctx);
	return ret;
}
