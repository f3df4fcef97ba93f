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
 * the subvolumes received before it, or DEST's that a state named. The
 * read-only subvolumes holding others stay writable until the stream's
 * END, when they are made read-only, the innermost first, as
 * copy_subvols_dest.c finishes them, and marked again.
 *
 * A later run names what the state said DEST holds (checked where it is)
 * and sends the rest: a writable copy at a name is replaced by the new
 * one received beside it, its nested subvolumes carried over; those the
 * stream does not name by its END are SRC's no longer, and deleted.
 *
 * SRC's part in no subvolume, where SRC is no subvolume, comes as a tree:
 * received as a subvolume in a directory of root's own beside DEST (in
 * DEST where DEST is a mount's root), copied into DEST as copy -r copies,
 * then deleted; the times of DEST's root are put back after.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "subvols/subvols_stream.h"
#include "base/le_bytes.h"
#include "fs/inode_flags.h"
#include "fs/received_mark.h"

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
	/*
	 * Subvolumes carried from a replaced copy into its new one (paths
	 * below DEST): those no command of the stream names are no longer
	 * SRC's there, deleted at its END
	 */
	char **carried;
	size_t nr_carried;
	struct run_dir rd; /* beside DEST: the tree part, the one in flight */
	/*
	 * With -s: the subvolume in flight when a run before stopped (its
	 * path below DEST, its name in that path's directory), until this
	 * run receives or resumes it ("": none, or done)
	 */
	char old_rel[PATH_MAX];
	char old_name[NAME_MAX + 1];
	bool kept; /* a partial of the subvolume in flight kept: -s */
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
 * reading (EPIPE: it failed, was stopped, or its stream went on past its
 * END) or a stop asked for ends the relay: -EPIPE, -EINTR.
 */
static void *pump_run(void *arg)
{
	struct pump *p = arg;
	const struct stream_attr *a;
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
		if (p->r->stop && *p->r->stop) {
			p->ret = encio_error_set(&p->e, EINTR, "receive",
						 p->r->name, false, 0);
			break;
		}
		ret = a->present ? write_all(p->fd, a->data, a->len) : 0;
		if (ret) {
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

/* What an ENCIO_SUBVOL command says of its subvolume. */
struct subvol_cmd {
	const char *rel;
	uint64_t flags;
	const uint8_t *received; /* its copy's received UUID */
	uint64_t ctransid;	 /* and stransid */
};

static bool made_writable(const struct subvol_cmd *c)
{
	return !(c->flags & STREAM_SUBVOL_READ_ONLY) ||
	       (c->flags & STREAM_SUBVOL_CONTAINS);
}

/* The run directory, found or made and locked, as it is first needed. */
static int run_dir(struct subvols_receiver *x)
{
	int ret;

	if (x->rd.fd >= 0)
		return 0;
	ret = subvols_run_dir_open(x->s.dst, true, &x->rd);
	if (ret == -EBUSY)
		return encio_error_set(
			x->e, EBUSY,
			"receive into (another encio receive is receiving into it)",
			x->s.dst, false, 0);
	return ret ? encio_error_set(x->e, -ret, "make a directory beside",
				     x->s.dst, false, 0) :
		     0;
}

/*
 * With -s, the subvolume of @c received as @name in @dir_fd so that a
 * stop leaves a partial that the next run resumes: named in the run
 * directory as the one in flight first. A partial a run before kept of
 * @name that this stream does not resume is stale: dropped. Whether it
 * is so received into *@resumable: not SRC's tree part (copied into DEST
 * after), nor a name too long for the partial's names.
 */
static int resumable_begin(struct subvols_receiver *x, int dir_fd,
			   const char *name, const struct subvol_cmd *c,
			   bool *resumable)
{
	bool resumed = c->flags & STREAM_SUBVOL_RESUMED;
	int ret;

	*resumable = x->opts->receive.resumable &&
		     !(c->flags & STREAM_SUBVOL_PLAIN) &&
		     receive_name_resumable(name);
	if (!*resumable)
		return resumed ?
			       encio_error_set(
				       x->e, EPROTO,
				       "receive (its stream resumes the partial receive -s kept of it: receive with -s)",
				       c->rel, false, 0) :
			       0;
	ret = run_dir(x);
	if (ret)
		return ret;
	ret = subvols_inflight_write(&x->rd, c->rel, name);
	if (!ret && !resumed)
		ret = receive_partial_drop(dir_fd, name);
	if (ret)
		return encio_error_set(x->e, -ret,
				       "prepare the partial receive of", c->rel,
				       false, 0);
	if (!strcmp(x->old_rel, c->rel) && !strcmp(x->old_name, name))
		x->old_rel[0] = '\0';
	return 0;
}

/*
 * The subvolume of @c, whose stream comes next, received as @name in
 * @dir_fd, the directory @where: read-only at its end unless it is made
 * writable.
 */
static int receive_one(struct subvols_receiver *x, int dir_fd,
		       const char *where, const char *name,
		       const struct subvol_cmd *c)
{
	struct pump p = { .r = x->r, .cmd = &x->cmd };
	const struct receive_stats *rs = receive_get_stats(x->rcv);
	uint64_t subvols = rs->subvols;
	const char *rel = c->rel;
	char dest[32];
	pthread_t thread;
	int fds[2], ret;
	bool closed, resumable;

	ret = resumable_begin(x, dir_fd, name, c, &resumable);
	if (ret)
		return ret;
	receive_set_resumable(x->rcv, resumable);
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
	receive_set_read_only(x->rcv, !made_writable(c));
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d", dir_fd);
	x->stats->current = rel;
	ret = receive_run(x->rcv, fds[0], rel, dest, x->e);
	close(fds[0]);
	pthread_join(thread, NULL);
	x->stats->current = NULL;
	x->cmd_ret = p.ret;
	if (resumable && rs->partial_kept[0]) {
		x->kept = true;
		snprintf(x->stats->partial_kept, sizeof(x->stats->partial_kept),
			 "%s", rel);
	}
	/* a closed pipe is the receive's failure */
	closed = p.ret < 0 && p.e.err == EPIPE;
	if (p.ret < 0 && !closed) {
		*x->e = p.e;
		return p.ret;
	}
	if (ret > 0)
		return encio_error_set(x->e, EIO, "receive", rel, false, 0);
	if (ret) {
		encio_error_rebase(x->e, dest, where);
		return ret;
	}
	if (closed)
		return encio_error_set(x->e, EPIPE, "receive", rel, false, 0);
	if (rs->subvols != subvols + 1)
		return encio_error_set(
			x->e, EBADMSG,
			"receive (its stream holds no subvolume, or several)",
			rel, false, 0);
	x->stats->resumed += !!(c->flags & STREAM_SUBVOL_RESUMED);
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

/* The times of @fd, as @st had them, put back (its flags lifted). */
static int times_restore(struct subvols_receiver *x, int fd,
			 const struct stat *st, const char *what)
{
	int ret = subvols_times_restore(fd, st);

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

/* The copy at @rel ("." for DEST's), opened beneath DEST. */
static int copy_open(struct subvols_receiver *x, const char *rel)
{
	int fd = strcmp(rel, ".") ?
			 open_beneath(x->top_fd, rel,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
			 fcntl(x->top_fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return encio_error_set(x->e, fd < -1 ? -fd : errno, "open", rel,
				       false, 0);
	return fd;
}

/*
 * The copy open at @fd (@rel), changed by this receive (a subvolume
 * placed, moved or deleted in it, a directory's times put back), marked
 * received again as it was, where it is a writable copy encio received:
 * a change after its mark is then another's (subvols_copy_changed()).
 */
static int remark_fd(struct subvols_receiver *x, int fd, const char *rel)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	struct btrfs_util_subvolume_info info;
	int ret;

	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	if (!ret && !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY) &&
	    received_mark_names(fd, &info)) {
		memcpy(rs.uuid, info.received_uuid, BTRFS_UUID_SIZE);
		rs.stransid = info.stransid;
		rs.stime.sec = info.stime.tv_sec;
		rs.stime.nsec = info.stime.tv_nsec;
		ret = received_mark_set(fd, &rs);
	}
	return ret ? encio_error_set(x->e, -ret, "mark received again", rel,
				     false, 0) :
		     0;
}

/*
 * The copy holding @rel's path: the deepest subvolume the stream named
 * before that does, or NULL (DEST is no copy where SRC is no subvolume).
 */
static const char *holder_of(const struct subvols_receiver *x, const char *rel)
{
	const char *best = NULL;
	size_t i, n, best_len = 0;

	for (i = 0; i < x->nr; i++) {
		n = strlen(x->v[i].rel);
		if (!strcmp(x->v[i].rel, "."))
			best = best ?: x->v[i].rel;
		else if (n > best_len && !strncmp(rel, x->v[i].rel, n) &&
			 rel[n] == '/')
			best = x->v[i].rel, best_len = n;
	}
	return best;
}

/* remark_fd() of the copy holding @rel, changed there. */
static int remark_holder(struct subvols_receiver *x, const char *rel)
{
	const char *holder = holder_of(x, rel);
	int fd, ret;

	if (!holder)
		return 0;
	fd = copy_open(x, holder);
	if (fd < 0)
		return fd;
	ret = remark_fd(x, fd, holder);
	close(fd);
	return ret;
}

/*
 * A subvolume the receiver's state listed: its copy at @name, read-only,
 * marked received as the command says, unchanged since encio marked it.
 */
static int check_in_dest(struct subvols_receiver *x, int dir_fd,
			 const char *name, const struct subvol_cmd *c)
{
	struct btrfs_util_subvolume_info info;
	int fd, ret;

	fd = subvol_root_openat(dir_fd, name, &info);
	if (fd < 0)
		return encio_error_set(
			x->e, -fd,
			"find the copy that the state said DEST holds of",
			c->rel, false, 0);
	ret = (info.flags & BTRFS_ROOT_SUBVOL_RDONLY) &&
	      !memcmp(info.received_uuid, c->received, BTRFS_UUID_SIZE) &&
	      info.stransid == c->ctransid &&
	      received_mark_check(fd, &info, false) == RECEIVED_TRUSTED;
	close(fd);
	return ret ? 0 :
		     encio_error_set(
			     x->e, ESTALE,
			     "use (not the copy DEST's state named: changed since)",
			     c->rel, false, 0);
}

/*
 * The copy at @name, which the new one replaces: a writable subvolume
 * encio received (its mark names it). Its descriptor, its id in *@id.
 */
static int old_copy_open(struct subvols_receiver *x, int dir_fd,
			 const char *name, const char *rel, uint64_t *id)
{
	struct btrfs_util_subvolume_info info;
	int fd = subvol_root_openat(dir_fd, name, &info), ret;

	if (fd < 0)
		return encio_error_set(
			x->e, -fd,
			"receive (something at its name is not a subvolume encio received)",
			rel, false, 0);
	if ((info.flags & BTRFS_ROOT_SUBVOL_RDONLY) ||
	    !received_mark_names(fd, &info)) {
		close(fd);
		return encio_error_set(
			x->e, EEXIST,
			"receive (a subvolume at its name is not a writable copy encio received)",
			rel, false, 0);
	}
	/*
	 * Changed since it was received (the state left it out: the new one
	 * comes from a read-only relative, or whole): what changed goes
	 * with it, said in the summary
	 */
	ret = subvols_copy_changed(fd, &info);
	if (ret < 0) {
		close(fd);
		return encio_error_set(x->e, -ret, "look at the copy of", rel,
				       false, 0);
	}
	x->stats->replaced_changed += ret;
	*id = info.id;
	return fd;
}

/* @nested, carried into the new copy of @rel: its path below DEST. */
static int carried_add(struct subvols_receiver *x, const char *rel,
		       const char *nested)
{
	char **v = realloc(x->carried, (x->nr_carried + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	x->carried = v;
	if (strcmp(rel, ".") ?
		    asprintf(&v[x->nr_carried], "%s/%s", rel, nested) < 0 :
		    !(v[x->nr_carried] = strdup(nested)))
		return -ENOMEM;
	x->nr_carried++;
	return 0;
}

/*
 * Whether the subvolume @rel in @fd, and every one nested in it, is one
 * encio received (its mark names it): 1, 0 or -errno.
 */
static int all_received(int fd, const char *rel)
{
	struct btrfs_util_subvolume_info info;
	char **nested;
	size_t i, nr;
	int sub, ret;

	sub = open_beneath(fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (sub < 0)
		return sub;
	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(sub, 0, &info));
	if (!ret)
		ret = received_mark_names(sub, &info) ?
			      subvol_children(sub, &nested, &nr) :
			      1;
	if (ret) {
		close(sub);
		return ret > 0 ? 0 : ret;
	}
	ret = 1;
	for (i = 0; i < nr; i++) {
		if (ret > 0)
			ret = all_received(sub, nested[i]);
		free(nested[i]);
	}
	free(nested);
	close(sub);
	return ret;
}

/*
 * The nested subvolumes of the old copy @old_fd carried into the new one
 * (@new_fd) at their paths; those whose directory the new one lacks (SRC
 * has no subvolume there now) go with the old copy, if encio received
 * them and all in them, else the replacement is refused before any move.
 */
static int carry_all(struct subvols_receiver *x, int old_fd, int new_fd,
		     const char *rel)
{
	const char *name;
	char **nested;
	size_t i, nr;
	int ret, fd;

	ret = subvol_children(old_fd, &nested, &nr);
	for (i = 0; !ret && i < nr; i++) {
		fd = open_parent_resolve(new_fd, nested[i],
					 O_RDONLY | O_DIRECTORY,
					 RESOLVE_CONFINED, &name);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		ret = all_received(old_fd, nested[i]);
		ret = ret > 0 ?
			      0 :
			      encio_error_set(
				      x->e, ret ? -ret : EEXIST,
				      "replace the copy (a subvolume in it that SRC no longer has there is not one encio received: move it away) of",
				      rel, false, 0);
	}
	for (i = 0; !ret && i < nr; i++) {
		ret = subvols_carry_nested(old_fd, new_fd, nested[i]) ?:
			      carried_add(x, rel, nested[i]);
		if (ret)
			ret = encio_error_set(
				x->e, -ret,
				"move the subvolumes nested in it into the new copy of",
				rel, false, 0);
	}
	if (!ret && (ret = subvols_drop_nested(old_fd)))
		ret = encio_error_set(
			x->e, -ret,
			"delete the subvolumes SRC no longer has in the old copy of",
			rel, false, 0);
	for (i = 0; i < nr; i++)
		free(nested[i]);
	free(nested);
	return ret;
}

/*
 * The new copy, received as @partial, in place of the old (@old_fd, @id)
 * at @name: the nested subvolumes carried over, the old deleted by its id,
 * the new renamed to the name.
 */
static int replace_copy(struct subvols_receiver *x, int dir_fd, int old_fd,
			uint64_t id, const char *partial, const char *name,
			const char *rel)
{
	int new_fd, ret;

	new_fd = openat(dir_fd, partial,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (new_fd < 0)
		return encio_error_set(x->e, errno, "open the new copy of", rel,
				       false, 0);
	ret = carry_all(x, old_fd, new_fd, rel);
	if (!ret && (ret = subvols_delete_id(dir_fd, id)))
		ret = encio_error_set(x->e, -ret, "delete the old copy of", rel,
				      false, 0);
	if (!ret && (ret = inode_flags_lifted_rename_self(
			     new_fd, dir_fd, partial, dir_fd, name)))
		ret = encio_error_set(x->e, -ret, "rename the new copy to", rel,
				      false, 0);
	/* the subvolumes carried into it changed it since its mark */
	if (!ret)
		ret = remark_fd(x, new_fd, rel);
	close(new_fd);
	return ret;
}

/*
 * A writable copy just received as @name in @dir_fd, marked again: the
 * receive gave it its name after marking it, and that rename changed its
 * root (its ctime, written with the root's next update).
 */
static int remark_placed(struct subvols_receiver *x, int dir_fd,
			 const char *name, const struct subvol_cmd *c)
{
	int fd, ret;

	if (!made_writable(c))
		return 0;
	fd = openat(dir_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(x->e, errno, "open", c->rel, false, 0);
	ret = remark_fd(x, fd, c->rel);
	close(fd);
	return ret;
}

/*
 * The subvolume of @c made as @name in @dir_fd (the directory @where): or
 * checked where DEST holds it; or made beside the copy at its name, which
 * it then replaces.
 */
static int place(struct subvols_receiver *x, int dir_fd, const char *where,
		 const char *name, const struct subvol_cmd *c)
{
	char partial[NAME_MAX + 1];
	uint64_t id = 0;
	int old_fd, ret;

	if (c->flags & STREAM_SUBVOL_IN_DEST)
		return check_in_dest(x, dir_fd, name, c);
	if (faccessat(dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) &&
	    errno == ENOENT)
		return receive_one(x, dir_fd, where, name, c) ?:
			       remark_placed(x, dir_fd, name, c);
	if (subvol_temp_name(partial, name, PARTIAL_SUFFIX))
		return encio_error_set(x->e, ENAMETOOLONG, "receive", c->rel,
				       false, 0);
	old_fd = old_copy_open(x, dir_fd, name, c->rel, &id);
	if (old_fd < 0)
		return old_fd;
	ret = receive_one(x, dir_fd, where, partial, c) ?:
		      replace_copy(x, dir_fd, old_fd, id, partial, name,
				   c->rel);
	close(old_fd);
	return ret;
}

/* SRC's own subvolume: made at DEST (or DEST's copy replaced). */
static int receive_top(struct subvols_receiver *x, const struct subvol_cmd *c)
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
	ret = place(x, dir_fd, dir, basename(base), c);
	close(dir_fd);
	return ret ?: open_top(x);
}

/*
 * The directory of @rel in the copy, opened beneath it: its descriptor,
 * the last name of @rel in *@name (in @dir, PATH_MAX bytes), the
 * directory's path in @where (PATH_MAX bytes); or -errno with x->e filled.
 */
static int landing_open(struct subvols_receiver *x, const char *rel, char *dir,
			const char **name, char *where)
{
	char *slash;
	int dir_fd;

	if (!rel_ok(rel))
		return encio_error_set(x->e, EBADMSG,
				       "receive (not a path below DEST)", rel,
				       false, 0);
	snprintf(dir, PATH_MAX, "%s", rel);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		*name = slash + 1;
		dir_fd = open_beneath(x->top_fd, dir,
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	} else {
		*name = dir;
		dir_fd = fcntl(x->top_fd, F_DUPFD_CLOEXEC, 0);
		dir_fd = dir_fd < 0 ? -errno : dir_fd;
	}
	if (dir_fd < 0)
		return encio_error_set(x->e, -dir_fd, "open the directory of",
				       rel, false, 0);
	if (snprintf(where, PATH_MAX, "%s/%s", x->s.dst, slash ? dir : ".") >=
	    PATH_MAX) {
		close(dir_fd);
		return encio_error_set(x->e, ENAMETOOLONG, "receive", rel,
				       false, 0);
	}
	return dir_fd;
}

/* A subvolume below SRC: made in the directory of its path in the copy. */
static int receive_nested(struct subvols_receiver *x,
			  const struct subvol_cmd *c)
{
	char dir[PATH_MAX], where[PATH_MAX];
	const char *name;
	struct stat st;
	int dir_fd, ret;

	dir_fd = landing_open(x, c->rel, dir, &name, where);
	if (dir_fd < 0)
		return dir_fd;
	/* the copy of the directory as its subvolume's stream left it */
	ret = fstat(dir_fd, &st) ? -errno : 0;
	if (ret)
		ret = encio_error_set(x->e, -ret, "look at the directory of",
				      c->rel, false, 0);
	else
		ret = place(x, dir_fd, where, name, c);
	if (!ret && !(c->flags & STREAM_SUBVOL_IN_DEST))
		ret = times_restore(x, dir_fd, &st, c->rel) ?:
			      remark_holder(x, c->rel);
	close(dir_fd);
	return ret;
}

/*
 * Whether the subvolume open at @fd (@info) is the one an EXTRA command
 * named, as encio received it and unchanged since, with nothing nested.
 */
static bool extra_ours(int fd, const struct btrfs_util_subvolume_info *info,
		       const struct subvol_cmd *c)
{
	char **nested;
	size_t nr;
	bool empty;

	if (memcmp(info->received_uuid, c->received, BTRFS_UUID_SIZE) ||
	    info->stransid != c->ctransid ||
	    received_mark_check(fd, info,
				!(info->flags & BTRFS_ROOT_SUBVOL_RDONLY)) !=
		    RECEIVED_TRUSTED ||
	    subvol_children(fd, &nested, &nr))
		return false;
	empty = !nr;
	while (nr)
		free(nested[--nr]);
	free(nested);
	return empty;
}

/*
 * A copy DEST holds of a subvolume SRC no longer has there (EXTRA):
 * deleted by its id where it is what the command names, encio received
 * it and no one changed it since, and nothing is nested in it; else kept.
 * The times of its directory are put back.
 */
static int drop_extra(struct subvols_receiver *x, const struct subvol_cmd *c)
{
	struct btrfs_util_subvolume_info info;
	char dir[PATH_MAX], where[PATH_MAX];
	const char *name;
	struct stat st;
	int dir_fd, fd, ret = 0;

	dir_fd = landing_open(x, c->rel, dir, &name, where);
	if (dir_fd == -ENOENT || dir_fd == -ENOTDIR)
		return 0;
	if (dir_fd < 0)
		return dir_fd;
	fd = subvol_root_openat(dir_fd, name, &info);
	if (fd >= 0 && extra_ours(fd, &info, c) && !fstat(dir_fd, &st)) {
		close(fd);
		fd = -1;
		ret = subvols_delete_id(dir_fd, info.id);
		ret = ret ? encio_error_set(x->e, -ret, "delete", c->rel, false,
					    0) :
		      times_restore(x, dir_fd, &st, c->rel) ?:
			    remark_holder(x, c->rel);
		x->stats->extras_deleted += !ret;
	} else if (fd != -ENOENT) {
		x->stats->extras_kept++;
	}
	if (fd >= 0)
		close(fd);
	close(dir_fd);
	return ret;
}

/*
 * SRC's part in no subvolume, received in the run directory (root's, 0700)
 * as a subvolume (one a receive killed before left there deleted by its
 * id first), copied into DEST by copy -r's engine, deleted.
 */
static int receive_tree_part(struct subvols_receiver *x,
			     const struct subvol_cmd *c)
{
	struct tree_options topts = {
		.no_target_dir = true,
		.skip_subvolumes = true,
		.stop = (volatile sig_atomic_t *)x->opts->receive.stop
	};
	struct copy_options co = { .io_mode = x->opts->receive.io_mode,
				   .stop = x->opts->receive.stop };
	struct btrfs_util_subvolume_info info;
	char where[PATH_MAX], tree[64];
	char *srcs[1] = { tree };
	struct copy_ctx *ctx = NULL;
	struct tree_stats ts;
	struct stat top_st;
	bool in_place;
	size_t n;
	int tree_fd, ret;

	n = strlen(x->s.dst);
	in_place = n >= 2 && !strcmp(x->s.dst + n - 2, "/.");
	ret = run_dir(x);
	if (ret)
		return ret;
	tree_fd = subvol_root_openat(x->rd.fd, SUBVOLS_TREE_PART_NAME, &info);
	if (tree_fd >= 0) {
		close(tree_fd);
		subvols_delete_id(x->rd.fd, info.id);
	}
	snprintf(where, sizeof(where), "%s", x->s.dst);
	if (!in_place)
		dirname(where);
	if (strlen(where) + strlen(x->rd.name) + 1 < sizeof(where))
		strcat(strcat(where, "/"), x->rd.name);
	ret = receive_one(x, x->rd.fd, where, SUBVOLS_TREE_PART_NAME, c);
	tree_fd = ret ? -1 :
			openat(x->rd.fd, SUBVOLS_TREE_PART_NAME,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!ret && tree_fd < 0)
		ret = encio_error_set(x->e, errno, "open the tree received in",
				      where, false, 0);
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
	/* DEST's root as the copy left it, before the tree goes */
	if (!ret && in_place && stat(x->s.dst, &top_st))
		ret = encio_error_set(x->e, errno, "look at", x->s.dst, false,
				      0);
	if (tree_fd >= 0)
		close(tree_fd);
	btrfs_util_delete_subvolume_fd(x->rd.fd, SUBVOLS_TREE_PART_NAME, 0);
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
	const struct stream_attr *rcvd = &x->cmd.attr[STREAM_A_SUBVOL_RECEIVED];
	const struct stream_attr *ctransid =
		&x->cmd.attr[STREAM_A_SUBVOL_CTRANSID];
	struct subvol_cmd c;
	char rel[PATH_MAX];
	uint64_t flags;
	bool first = x->top_fd < 0;
	int ret;

	if (!path->present || !path->len || path->len >= sizeof(rel) ||
	    memchr(path->data, 0, path->len) || !fl->present || fl->len != 8 ||
	    !rcvd->present || rcvd->len != BTRFS_UUID_SIZE ||
	    !ctransid->present || ctransid->len != 8)
		return encio_error_set(
			x->e, EBADMSG,
			"parse (an ENCIO_SUBVOL command without its path or flags) of",
			x->r->name, true, x->cmd.offset);
	memcpy(rel, path->data, path->len);
	rel[path->len] = '\0';
	flags = le_get64(fl->data);
	if ((flags & ~STREAM_SUBVOL_KNOWN) || first != !strcmp(rel, ".") ||
	    ((flags & STREAM_SUBVOL_PLAIN) && !first) ||
	    ((flags & STREAM_SUBVOL_IN_DEST) &&
	     !(flags & STREAM_SUBVOL_READ_ONLY)) ||
	    ((flags & STREAM_SUBVOL_EXTRA) &&
	     (first || flags != STREAM_SUBVOL_EXTRA)) ||
	    ((flags & STREAM_SUBVOL_RESUMED) &&
	     (flags & (STREAM_SUBVOL_PLAIN | STREAM_SUBVOL_IN_DEST))) ||
	    ((flags & STREAM_SUBVOL_RESUMES) && !first))
		return encio_error_set(
			x->e, EBADMSG,
			"parse (an ENCIO_SUBVOL command out of place) of",
			x->r->name, true, x->cmd.offset);
	if ((flags & STREAM_SUBVOL_RESUMES) && !x->opts->receive.resumable)
		return encio_error_set(
			x->e, EPROTO,
			"receive (the stream resumes a partial receive -s kept in DEST: receive with -s)",
			x->s.dst, false, 0);
	c.rel = rel;
	c.flags = flags;
	c.received = rcvd->data;
	c.ctransid = le_get64(ctransid->data);
	/* no stream follows: nothing read past the command */
	if (flags & STREAM_SUBVOL_EXTRA)
		return drop_extra(x, &c) ?: read_next(x);
	if (x->opts->begin)
		x->opts->begin(x->opts->arg, rel,
			       flags & STREAM_SUBVOL_READ_ONLY);
	if (flags & STREAM_SUBVOL_PLAIN)
		return receive_tree_part(x, &c);
	ret = first ? receive_top(x, &c) : receive_nested(x, &c);
	if (ret)
		return ret;
	if (flags & STREAM_SUBVOL_IN_DEST) {
		/* no stream follows: nothing read past the command */
		x->stats->in_dest++;
		ret = read_next(x);
		if (ret)
			return ret;
	} else {
		x->stats->total++;
	}
	return remember(x, rel,
			(flags & STREAM_SUBVOL_READ_ONLY) &&
				(flags & STREAM_SUBVOL_CONTAINS) &&
				!(flags & STREAM_SUBVOL_IN_DEST));
}

/*
 * A read-only subvolume holding others, made read-only now that they are
 * placed, marked received again as its stream marked it: placing them
 * changed it since (its ctransid), and the next run's state takes only
 * a copy unchanged since its mark.
 */
static int seal_container(struct subvols_receiver *x, const char *rel)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	struct btrfs_util_subvolume_info info;
	int fd, ret;

	fd = copy_open(x, rel);
	if (fd < 0)
		return fd;
	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	if (!ret) {
		memcpy(rs.uuid, info.received_uuid, BTRFS_UUID_SIZE);
		rs.stransid = info.stransid;
		ret = received_mark_set(fd, &rs) ?: received_mark_seal(fd, &rs);
	}
	close(fd);
	return ret ? encio_error_set(x->e, -ret, "make read-only", rel, false,
				     0) :
		     0;
}

static bool named(const struct subvols_receiver *x, const char *rel)
{
	size_t i;

	for (i = 0; i < x->nr; i++)
		if (!strcmp(x->v[i].rel, rel))
			return true;
	return false;
}

static int by_length_down(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return la < lb ? 1 : la > lb ? -1 : 0;
}

/*
 * The subvolumes carried from replaced copies that the stream did not
 * name: SRC no longer has them there. Deleted, the deepest first, those
 * in them too, where encio received them all; else left, and said.
 */
static int carried_drop(struct subvols_receiver *x)
{
	const char *name;
	size_t i;
	int ret = 0, dir_fd, sub;
	struct btrfs_util_subvolume_info info;
	struct stat st;

	if (x->nr_carried)
		qsort(x->carried, x->nr_carried, sizeof(*x->carried),
		      by_length_down);
	for (i = 0; !ret && i < x->nr_carried; i++) {
		if (named(x, x->carried[i]))
			continue;
		ret = all_received(x->top_fd, x->carried[i]);
		if (ret <= 0) {
			/* not carried: its directory went, and it with the old */
			ret = ret == -ENOENT || ret == -ENOTDIR ?
				      0 :
				      encio_error_set(
					      x->e, ret ? -ret : EEXIST,
					      "delete (SRC no longer has it there; not one encio received: move it away)",
					      x->carried[i], false, 0);
			continue;
		}
		dir_fd = open_parent_resolve(x->top_fd, x->carried[i],
					     O_RDONLY | O_DIRECTORY,
					     RESOLVE_CONFINED, &name);
		sub = dir_fd < 0 ? dir_fd :
				   subvol_root_openat(dir_fd, name, &info);
		/* the directory's times as its subvolume's stream left them */
		ret = sub < 0		 ? sub :
		      fstat(dir_fd, &st) ? -errno :
					   subvols_drop_nested(sub);
		if (sub >= 0) {
			close(sub);
			ret = ret ?: subvols_delete_id(dir_fd, info.id);
		}
		if (ret)
			ret = encio_error_set(
				x->e, -ret,
				"delete (SRC no longer has it there)",
				x->carried[i], false, 0);
		else
			ret = times_restore(x, dir_fd, &st, x->carried[i]) ?:
				      remark_holder(x, x->carried[i]);
		if (dir_fd >= 0)
			close(dir_fd);
	}
	return ret;
}

/* The read-only subvolumes holding others sealed, innermost first. */
static int finish_containers(struct subvols_receiver *x)
{
	size_t i;
	int ret = 0;

	for (i = x->nr; !ret && i-- > 0;)
		if (x->v[i].read_only_at_end)
			ret = seal_container(x, x->v[i].rel);
	return ret;
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
	return carried_drop(x) ?: finish_containers(x);
}

/*
 * With -s, the run directory taken at once (one receive into DEST at a
 * time) and the subvolume it names in flight remembered.
 */
static int run_dir_begin(struct subvols_receiver *x)
{
	int ret;

	if (!x->opts->receive.resumable)
		return 0;
	ret = run_dir(x);
	if (!ret && subvols_inflight_read(&x->rd, x->old_rel, x->old_name))
		x->old_rel[0] = '\0';
	return ret;
}

/*
 * The run directory closed. A run that ended drops the partial a run
 * before kept of a subvolume this stream did not name (SRC no longer has
 * it); one that stopped keeps what names a partial: its own, or the one
 * before's, named again. The directory goes with nothing left to name.
 */
static void run_dir_end(struct subvols_receiver *x, int ret)
{
	int fd;

	if (x->rd.fd < 0)
		return;
	if (!ret && x->old_rel[0]) {
		fd = subvols_landing_open(x->s.dst, x->old_rel);
		if (fd >= 0) {
			receive_partial_drop(fd, x->old_name);
			close(fd);
		}
		x->old_rel[0] = '\0';
	}
	if (ret && !x->kept && x->old_rel[0] &&
	    !subvols_inflight_write(&x->rd, x->old_rel, x->old_name))
		x->kept = true;
	subvols_run_dir_close(&x->rd, !x->kept);
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
	/*
	 * One subvolume per stream relayed, read to its end: anything past
	 * its END is another command, which the count below refuses
	 */
	ro.honor_end = false;
	/* each subvolume as resumable_begin() says */
	ro.resumable = false;
	/* no checkpoint where the stream of one takes less than the interval */
	ro.checkpoint_late = true;
	/* a subvolume cut short and not resumable is sent again */
	ro.drop_unfinished = true;
	ro.max_errors = 1;
	x.rd.fd = x.rd.where_fd = -1;
	ret = subvols_dest_name(&x.s, dest)    ?:
		      subvols_dest_check(&x.s) ?:
						 run_dir_begin(&x);
	if (!ret)
		ret = receive_ctx_new(&x.rcv, &ro, e);
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
	run_dir_end(&x, ret);
	stats->stream_bytes = r->offset;
	stream_reader_release(r);
	if (x.top_fd >= 0)
		close(x.top_fd);
	while (x.nr)
		free(x.v[--x.nr].rel);
	free(x.v);
	while (x.nr_carried)
		free(x.carried[--x.nr_carried]);
	free(x.carried);
	return ret;
}
