// SPDX-License-Identifier: GPL-2.0
/*
 * encio receive of a stream of encio send --subvolumes: SRC's copy made
 * at DEST as copy -rT --subvolumes makes it. Each subvolume's own stream
 * is relayed from the ENCIO_DATA commands to receive_run() through a pipe,
 * by a thread that stops at the next other command; receive_run() makes
 * the subvolume in the directory of its path, opened beneath DEST by
 * descriptors (open_beneath(): no symlink followed, nothing outside), under
 * the name of that path whatever the stream calls it. A difference finds
 * its parent and clone sources by received UUID, as any receive does:
 * the subvolumes received before it. The read-only subvolumes holding
 * others stay writable until the stream's END, when they are made
 * read-only, the innermost first, as copy_subvols_dest.c finishes them.
 *
 * SRC's part in no subvolume, where SRC is no subvolume, comes as a tree:
 * received as a subvolume in a directory of root's own beside DEST (in
 * DEST where DEST is a mount's root), copied into DEST as copy -r copies,
 * then deleted; the times of DEST's root are put back after.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "subvols/subvols_stream.h"
#include "base/le_bytes.h"
#include "fs/inode_flags.h"

#define TREE_PART_DIR ".encio-subvols.XXXXXX"
#define TREE_PART_NAME "tree"

struct received_subvol {
	char *rel;
	bool read_only_at_end; /* read-only, with subvolumes nested in it */
};

struct subvols_receiver {
	struct stream_reader *r;
	const struct subvols_receive_options *opts;
	struct subvols_receive_stats *stats;
	struct encio_error *e;
	struct receive_ctx *rcv;
	struct subvols s;      /* s.dst: the copy; its other fields unused */
	int top_fd;	       /* the copy, once made */
	struct stream_cmd cmd; /* the command read last */
	int cmd_ret;	       /* stream_read_cmd()'s for it */
	struct received_subvol *v;
	size_t nr;
};

struct pump {
	struct stream_reader *r;
	struct stream_cmd *cmd;
	int fd;
	int ret;
	struct encio_error e;
};

static int write_all(int fd, const unsigned char *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * The ENCIO_DATA commands read and their data written to the pipe, up to
 * the next other command (left in p->cmd). A receiver that stopped
 * reading (EPIPE) has the rest read past, so that the stream goes on.
 */
static void *pump_run(void *arg)
{
	struct pump *p = arg;
	const struct stream_attr *a;
	bool closed = false;
	sigset_t set;
	int ret;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while ((p->ret = stream_read_cmd(p->r, p->cmd, &p->e)) > 0 &&
	       p->cmd->type == STREAM_C_ENCIO_DATA) {
		a = &p->cmd->attr[BTRFS_SEND_A_DATA];
		if (closed || !a->present)
			continue;
		ret = write_all(p->fd, a->data, a->len);
		if (ret == -EPIPE) {
			closed = true;
		} else if (ret) {
			p->ret = encio_error_set(&p->e, -ret,
						 "pass the stream on", "a pipe",
						 false, 0);
			break;
		}
	}
	close(p->fd);
	return NULL;
}

static int read_next(struct subvols_receiver *x)
{
	x->cmd_ret = stream_read_cmd(x->r, &x->cmd, x->e);
	return x->cmd_ret < 0 ? x->cmd_ret : 0;
}

/*
 * The subvolume whose stream comes next received as @name in @dir_fd, the
 * directory @where: read-only at its end unless @writable.
 */
static int receive_one(struct subvols_receiver *x, int dir_fd,
		       const char *where, const char *name, const char *rel,
		       bool writable)
{
	struct pump p = { .r = x->r, .cmd = &x->cmd };
	const struct receive_stats *rs = receive_get_stats(x->rcv);
	uint64_t subvols = rs->subvols;
	char dest[32];
	pthread_t thread;
	int fds[2], ret;

	if (pipe2(fds, O_CLOEXEC))
		return encio_error_set(x->e, errno, "make a pipe for", rel,
				       false, 0);
	p.fd = fds[1];
	ret = pthread_create(&thread, NULL, pump_run, &p);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
		return encio_error_set(x->e, ret, "start the relay of", rel,
				       false, 0);
	}
	receive_set_name(x->rcv, name);
	receive_set_read_only(x->rcv, !writable);
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d", dir_fd);
	x->stats->current = rel;
	ret = receive_run(x->rcv, fds[0], rel, dest, x->e);
	close(fds[0]);
	pthread_join(thread, NULL);
	x->stats->current = NULL;
	x->cmd_ret = p.ret;
	if (p.ret < 0) {
		*x->e = p.e;
		return p.ret;
	}
	if (ret > 0)
		return encio_error_set(x->e, EIO, "receive", rel, false, 0);
	if (ret) {
		encio_error_rebase(x->e, dest, where);
		return ret;
	}
	if (rs->subvols != subvols + 1)
		return encio_error_set(
			x->e, EBADMSG,
			"receive (its stream holds no subvolume, or several)",
			rel, false, 0);
	return 0;
}

/* @rel as a stream may give it: a path below DEST, no "." or ".." in it. */
static bool rel_ok(const char *rel)
{
	const char *p = rel, *slash;
	size_t n;

	if (!*rel || *rel == '/' || strlen(rel) >= PATH_MAX)
		return false;
	for (;;) {
		slash = strchr(p, '/');
		n = slash ? (size_t)(slash - p) : strlen(p);
		if (!n || n > NAME_MAX || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			return true;
		p = slash + 1;
	}
}

static int times_op(int dir_fd, void *arg)
{
	return futimens(dir_fd, arg) ? -errno : 0;
}

/* The times of @fd, as @st had them, put back (its flags lifted). */
static int times_restore(struct subvols_receiver *x, int fd,
			 const struct stat *st, const char *what)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	int ret = inode_flags_lifted_for(fd, times_op, times);

	return ret ? encio_error_set(x->e, -ret, "set the times of", what,
				     false, 0) :
		     0;
}

static int remember(struct subvols_receiver *x, const char *rel,
		    bool read_only_at_end)
{
	struct received_subvol *v;

	v = realloc(x->v, (x->nr + 1) * sizeof(*v));
	if (!v)
		return encio_error_set(x->e, ENOMEM, "receive", rel, false, 0);
	x->v = v;
	v[x->nr].rel = strdup(rel);
	v[x->nr].read_only_at_end = read_only_at_end;
	if (!v[x->nr].rel)
		return encio_error_set(x->e, ENOMEM, "receive", rel, false, 0);
	x->nr++;
	return 0;
}

static int open_top(struct subvols_receiver *x)
{
	x->top_fd = open(x->s.dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return x->top_fd < 0 ? encio_error_set(x->e, errno, "open", x->s.dst,
					       false, 0) :
			       0;
}

/* SRC's own subvolume: made at DEST, which must not be there. */
static int receive_top(struct subvols_receiver *x, uint64_t flags)
{
	char dir[PATH_MAX], base[PATH_MAX];
	int dir_fd, ret;

	snprintf(dir, sizeof(dir), "%s", x->s.dst);
	snprintf(base, sizeof(base), "%s", x->s.dst);
	if (!strcmp(basename(base), "."))
		return encio_error_set(
			x->e, EEXIST,
			"make a subvolume at (a mount's root: give a path in it)",
			x->s.dst, false, 0);
	dirname(dir);
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return encio_error_set(x->e, errno, "open the directory of",
				       x->s.dst, false, 0);
	ret = receive_one(x, dir_fd, dir, basename(base), ".",
			  !(flags & STREAM_SUBVOL_READ_ONLY) ||
				  (flags & STREAM_SUBVOL_CONTAINS));
	close(dir_fd);
	return ret ?: open_top(x);
}

/* A subvolume below SRC: made in the directory of @rel in the copy. */
static int receive_nested(struct subvols_receiver *x, const char *rel,
			  uint64_t flags)
{
	char dir[PATH_MAX], where[PATH_MAX], *slash;
	const char *name;
	struct stat st;
	int dir_fd, ret;

	if (!rel_ok(rel))
		return encio_error_set(x->e, EBADMSG,
				       "receive (not a path below DEST)", rel,
				       false, 0);
	snprintf(dir, sizeof(dir), "%s", rel);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		name = slash + 1;
		dir_fd = open_beneath(x->top_fd, dir,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	} else {
		name = dir;
		dir_fd = fcntl(x->top_fd, F_DUPFD_CLOEXEC, 0);
		dir_fd = dir_fd < 0 ? -errno : dir_fd;
	}
	if (dir_fd < 0)
		return encio_error_set(x->e, -dir_fd, "open the directory of",
				       rel, false, 0);
	if (snprintf(where, sizeof(where), "%s/%s", x->s.dst,
		     slash ? dir : ".") >= (int)sizeof(where))
		return encio_error_set(x->e, ENAMETOOLONG, "receive", rel,
				       false, 0);
	/* the copy of the directory as its subvolume's stream left it */
	ret = fstat(dir_fd, &st) ? -errno : 0;
	if (ret)
		ret = encio_error_set(x->e, -ret, "look at the directory of",
				      rel, false, 0);
	else
		ret = receive_one(x, dir_fd, where, name, rel,
				  !(flags & STREAM_SUBVOL_READ_ONLY) ||
					  (flags & STREAM_SUBVOL_CONTAINS));
	if (!ret)
		ret = times_restore(x, dir_fd, &st, rel);
	close(dir_fd);
	return ret;
}

/*
 * SRC's part in no subvolume, received in a directory of its own (root's,
 * 0700) as a subvolume, copied into DEST by copy -r's engine, deleted.
 */
static int receive_tree_part(struct subvols_receiver *x)
{
	struct tree_options topts = {
		.no_target_dir = true,
		.skip_subvolumes = true,
		.stop = (volatile sig_atomic_t *)x->opts->receive.stop
	};
	struct copy_options co = { .io_mode = x->opts->receive.io_mode,
				   .stop = x->opts->receive.stop };
	char tmp[PATH_MAX], where[PATH_MAX], tree[64];
	char *srcs[1] = { tree };
	struct copy_ctx *ctx = NULL;
	struct tree_stats ts;
	struct stat top_st;
	bool in_place;
	size_t n;
	int tmp_fd, tree_fd, ret;

	n = strlen(x->s.dst);
	in_place = n >= 2 && !strcmp(x->s.dst + n - 2, "/.");
	snprintf(where, sizeof(where), "%s", x->s.dst);
	if (snprintf(tmp, sizeof(tmp), "%s/" TREE_PART_DIR,
		     in_place ? where : dirname(where)) >= (int)sizeof(tmp))
		return encio_error_set(x->e, ENAMETOOLONG, "receive into",
				       x->s.dst, false, 0);
	if (!mkdtemp(tmp))
		return encio_error_set(x->e, errno, "make the directory", tmp,
				       false, 0);
	tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ret = tmp_fd < 0 ?
		      encio_error_set(x->e, errno, "open", tmp, false, 0) :
		      receive_one(x, tmp_fd, tmp, TREE_PART_NAME, ".", true);
	tree_fd = ret ? -1 :
			openat(tmp_fd, TREE_PART_NAME,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!ret && tree_fd < 0)
		ret = encio_error_set(x->e, errno, "open the tree received in",
				      tmp, false, 0);
	if (!ret && copy_ctx_new(&ctx, &co))
		ret = encio_error_set(x->e, ENOMEM, "copy", x->s.dst, false, 0);
	if (!ret) {
		snprintf(tree, sizeof(tree), "/proc/self/fd/%d/.", tree_fd);
		ret = tree_copy(ctx, &topts, srcs, 1, x->s.dst, &ts, x->e);
		if (!ret && ts.failed)
			ret = encio_error_set(x->e, EIO, "copy the tree into",
					      x->s.dst, false, 0);
		x->stats->bytes_written += copy_ctx_stats(ctx)->logical_bytes;
		x->stats->encoded_bytes += copy_ctx_stats(ctx)->encoded_bytes;
	}
	if (ctx)
		copy_ctx_free(ctx);
	/* DEST's root as the copy left it, before the directory goes */
	if (!ret && in_place && stat(x->s.dst, &top_st))
		ret = encio_error_set(x->e, errno, "look at", x->s.dst, false,
				      0);
	if (tree_fd >= 0)
		close(tree_fd);
	if (tmp_fd >= 0) {
		btrfs_util_delete_subvolume_fd(tmp_fd, TREE_PART_NAME, 0);
		close(tmp_fd);
	}
	if (rmdir(tmp) && !ret && errno != ENOENT)
		ret = encio_error_set(x->e, errno, "remove", tmp, false, 0);
	if (!ret)
		ret = open_top(x);
	if (!ret && in_place)
		ret = times_restore(x, x->top_fd, &top_st, x->s.dst);
	return ret;
}

/* An ENCIO_SUBVOL command, read last: its subvolume received. */
static int receive_subvol(struct subvols_receiver *x)
{
	const struct stream_attr *path = &x->cmd.attr[STREAM_A_SUBVOL_PATH];
	const struct stream_attr *fl = &x->cmd.attr[STREAM_A_SUBVOL_FLAGS];
	char rel[PATH_MAX];
	uint64_t flags;
	bool first = x->top_fd < 0;
	int ret;

	if (!path->present || !path->len || path->len >= sizeof(rel) ||
	    memchr(path->data, 0, path->len) || !fl->present || fl->len != 8)
		return encio_error_set(
			x->e, EBADMSG,
			"parse (an ENCIO_SUBVOL command without its path or flags) of",
			x->r->name, true, x->cmd.offset);
	memcpy(rel, path->data, path->len);
	rel[path->len] = '\0';
	flags = le_get64(fl->data);
	if ((flags & ~STREAM_SUBVOL_KNOWN) || first != !strcmp(rel, ".") ||
	    ((flags & STREAM_SUBVOL_PLAIN) && !first))
		return encio_error_set(
			x->e, EBADMSG,
			"parse (an ENCIO_SUBVOL command out of place) of",
			x->r->name, true, x->cmd.offset);
	if (x->opts->begin)
		x->opts->begin(x->opts->arg, rel,
			       flags & STREAM_SUBVOL_READ_ONLY);
	if (flags & STREAM_SUBVOL_PLAIN)
		return receive_tree_part(x);
	ret = first ? receive_top(x, flags) : receive_nested(x, rel, flags);
	if (ret)
		return ret;
	x->stats->total++;
	return remember(x, rel,
			(flags & STREAM_SUBVOL_READ_ONLY) &&
				(flags & STREAM_SUBVOL_CONTAINS));
}

/* The read-only subvolumes holding others made read-only, innermost first. */
static int finish_containers(struct subvols_receiver *x)
{
	size_t i;
	int fd;

	for (i = x->nr; i-- > 0;) {
		if (!x->v[i].read_only_at_end)
			continue;
		fd = strcmp(x->v[i].rel, ".") ?
			     open_beneath(x->top_fd, x->v[i].rel,
					  O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
			     fcntl(x->top_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return encio_error_set(x->e, fd < -1 ? -fd : errno,
					       "open", x->v[i].rel, false, 0);
		if (btrfs_util_set_subvolume_read_only_fd(fd, true)) {
			close(fd);
			return encio_error_set(x->e, errno ?: EIO,
					       "make read-only", x->v[i].rel,
					       false, 0);
		}
		close(fd);
	}
	return 0;
}

static int receive_all(struct subvols_receiver *x)
{
	int ret = read_next(x);

	while (!ret && x->cmd_ret > 0 && x->cmd.type == STREAM_C_ENCIO_SUBVOL) {
		ret = receive_subvol(x);
		/* the pump read the command after the subvolume's data */
		if (!ret && x->cmd_ret < 0)
			ret = x->cmd_ret;
	}
	if (ret)
		return ret;
	if (x->cmd_ret == 0)
		return encio_error_set(x->e, EBADMSG,
				       "read (the stream ends before its END)",
				       x->r->name, true, x->r->offset);
	if (x->cmd.type != BTRFS_SEND_C_END || x->top_fd < 0)
		return encio_error_set(x->e, EBADMSG,
				       "parse (a command out of place) of",
				       x->r->name, true, x->cmd.offset);
	return finish_containers(x);
}

int subvols_receive(struct stream_reader *r, const char *dest,
		    const struct subvols_receive_options *opts,
		    struct subvols_receive_stats *stats, struct encio_error *e)
{
	static const struct subvols_options as_cp_t = { .no_target_dir = true };
	struct receive_options ro = opts->receive;
	struct subvols_receiver x = {
		.r = r,
		.opts = opts,
		.stats = stats,
		.e = e,
		.s = { .opts = &as_cp_t, .e = e },
		.top_fd = -1,
	};
	const struct receive_stats *rs;
	int ret;

	memset(e, 0, sizeof(*e));
	memset(stats, 0, sizeof(*stats));
	/* one subvolume per stream relayed; its END ends it */
	ro.honor_end = true;
	ro.resumable = false;
	ro.max_errors = 1;
	ret = subvols_dest_name(&x.s, dest)    ?:
		      subvols_dest_check(&x.s) ?:
						 receive_ctx_new(&x.rcv, &ro, e);
	if (!ret) {
		if (opts->events)
			receive_set_events(x.rcv, opts->events);
		ret = receive_all(&x);
		rs = receive_get_stats(x.rcv);
		stats->bytes_written += rs->bytes_written;
		stats->encoded_bytes += rs->encoded_bytes;
		stats->flags_refused = rs->flags_refused;
		receive_ctx_free(x.rcv);
	}
	stats->stream_bytes = r->offset;
	stream_reader_release(r);
	if (x.top_fd >= 0)
		close(x.top_fd);
	while (x.nr)
		free(x.v[--x.nr].rel);
	free(x.v);
	return ret;
}
