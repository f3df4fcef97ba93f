// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes. Each subvolume below SRC goes through send and
 * receive run in process, joined by a pipe: the sender on a thread of its
 * own, the receiver on the caller's. Subvolumes are taken in the order of
 * their generations, a subvolume always after the one it sits in. One whose
 * family (subvolumes joined by snapshot relations) has a read-only member
 * in DEST already is sent as the kernel's difference from the closest of
 * them in generation, with every read-only subvolume copied before as a
 * clone source: the receiver snapshots that member's copy and applies the
 * changes. Each copy is received under .NAME.encio-partial beside its
 * final name and renamed into place when complete, so that a rerun can
 * tell a complete copy (at its name, marked received as expected) from
 * one in flight when the copy stopped (under the partial name). That one
 * is resumed where it is of the same source: a whole copy by copy -r's
 * resume, a difference from the last checkpoint its receive (as receive
 * -s, checkpoints only after 1 GiB or 10 s) kept, sent from there.
 *
 * Where the decisions are made: the order of the subvolumes, their
 * families and the nearest relative each is sent from, in
 * lib/plan/subvol_plan.c (subvol_plan_nearest()); whether DEST's copy at
 * a name is kept, updated from its base or replaced, in
 * copy_subvols_dest.c (subvols_dest_state()), and whether SRC changed
 * since, in copy_subvols_src.c (subvols_src_changed()); whether a copy in
 * flight is resumed or dropped, in copy_subvols_partial.c
 * (subvols_partial_settle()); whether a copy goes whole or as a
 * difference, and whether a failure stops the move, here (copy_entry(),
 * stops_all()); which extras --delete-extra may delete, in
 * copy_subvols_extra.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "fs/inode_flags.h"
#include "base/kernel.h"
#include "fs/received_mark.h"
#include "send/send.h"

/*
 * SIGPIPE is blocked: a receiver that stopped makes the writes fail with
 * EPIPE. Signals asking to stop go to the caller's thread, which sets
 * opts.stop.
 */
void *subvols_sender_run(void *arg)
{
	struct subvols_sender_thread *t = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	t->ret = send_run(&t->path, 1, t->fd, t->stream, &t->opts, &t->stats,
			  &t->e);
	close(t->fd);
	return NULL;
}

static void received_progress(const struct receive_stats *rs, void *arg)
{
	struct subvols *s = arg;

	s->stats->current_bytes = rs->bytes_written - s->bytes_before;
	if (s->opts->progress)
		s->opts->progress(s->opts->arg, s->stats);
}

/*
 * An error of the receiver names a path below @from, the descriptor of
 * the directory the copy @dst is made in: named below @dst's directory.
 */
static void error_path_rebase(struct encio_error *e, const char *from,
			      const char *dst)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", dst);
	encio_error_rebase(e, from, dirname(dir));
}

/*
 * The copies in DEST that hold the bases among @en's clone sources
 * (subvol_plan_base_clones()), opened into @fds and told to the receiver,
 * which no received UUID leads to them. Checked again now: one changed
 * since the run began is no clone source (before the clone sources are
 * listed, so that the sender names none the receiver lacks). Returns how
 * many are open.
 */
static size_t known_bases_open(struct subvols *s, const struct subvol_entry *en,
			       int *fds)
{
	struct subvol_entry *bases[SUBVOL_PLAN_BASES_MAX];
	size_t i, nr, open = 0;
	int fd;

	_Static_assert(SUBVOL_PLAN_BASES_MAX <= RECEIVE_KNOWN_MAX,
		       "every base's copy can be known");
	if (s->top_fd < 0)
		return 0;
	nr = subvol_plan_base_clones(&s->plan, en, NULL, bases);
	for (i = 0; i < nr; i++) {
		fd = subvols_dest_base_open(bases[i], s->top_fd,
					    &bases[i]->base_copy_id);
		if (fd < 0 ||
		    receive_set_known_subvol(s->rcv, bases[i]->base.uuid,
					     bases[i]->base.ctransid, fd)) {
			if (fd >= 0)
				close(fd);
			bases[i]->base_in_dest = false;
			continue;
		}
		fds[open++] = fd;
	}
	return open;
}

static void known_bases_close(struct subvols *s, int *fds, size_t nr)
{
	size_t i;

	receive_set_known_subvol(s->rcv, NULL, 0, -1);
	for (i = 0; i < nr; i++)
		close(fds[i]);
}

/*
 * The stream of @en from its parent (@parent, subvolume @parent_id)
 * received in p->dir_fd as p->partial.
 */
static int transfer(struct subvols *s, const struct subvol_entry *en,
		    const char *parent, uint64_t parent_id, struct placement *p)
{
	struct subvols_sender_thread t = { .path = s->src_proc,
					   .stream = en->src };
	const struct receive_stats *rs;
	int known[SUBVOL_PLAN_BASES_MAX];
	char dest[64];
	pthread_t thread;
	uint64_t encoded;
	int fds[2], ret, src_fd;
	size_t nr, nr_known;

	/* sent from a descriptor: what its path names may change */
	src_fd = subvols_entry_open(s, en, en->snap.path != NULL);
	if (src_fd < 0)
		return src_fd;
	if (pipe2(fds, O_CLOEXEC)) {
		close(src_fd);
		return encio_error_set(s->e, errno, "make a pipe for", en->src,
				       false, 0);
	}
	snprintf(s->src_proc, sizeof(s->src_proc), "/proc/self/fd/%d", src_fd);
	nr_known = known_bases_open(s, en, known);
	nr = subvol_plan_clones(&s->plan, en, NULL, s->clones, s->clone_ids);
	t.opts = (struct send_options){
		.io_mode = s->opts->io_mode,
		.depth = s->opts->depth,
		.parent = parent,
		.parent_id = parent_id,
		.clones = s->clones,
		.clone_ids = s->clone_ids,
		.nr_clones = nr,
		.name = p->partial,
		.resume = p->resume_stream ? &p->point : NULL,
		.stop = s->opts->stop,
		.pass = subvols_ahead_take(s->ahead, en, parent, s->clones, nr),
	};
	t.fd = fds[1];
	ret = pthread_create(&thread, NULL, subvols_sender_run, &t);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
		close(src_fd);
		known_bases_close(s, known, nr_known);
		subvols_ahead_done(s->ahead, t.opts.pass);
		return encio_error_set(s->e, ret, "start the sender of",
				       en->src, false, 0);
	}
	receive_set_read_only(s->rcv, en->read_only && !en->contains);
	/* a name too long for the checkpoints' names: made again if stopped */
	receive_set_resumable(s->rcv, receive_name_resumable(p->partial));
	rs = receive_get_stats(s->rcv);
	s->bytes_before = rs->bytes_written;
	encoded = rs->encoded_bytes;
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d", p->dir_fd);
	ret = receive_run(s->rcv, fds[0], en->src, dest, s->e);
	close(fds[0]);
	pthread_join(thread, NULL);
	close(src_fd);
	known_bases_close(s, known, nr_known);
	subvols_ahead_done(s->ahead, t.opts.pass);
	encio_error_rebase(&t.e, s->src_proc, subvol_source(en));
	/*
	 * The sender's error is the cause, the receiver saw a stream cut;
	 * but a closed pipe, which is the receiver's failure.
	 */
	if (t.ret && !(t.e.err == EPIPE && ret < 0)) {
		*s->e = t.e;
		ret = t.ret;
	} else if (ret > 0) {
		ret = encio_error_set(s->e, EIO, "receive", p->dst, false, 0);
	} else if (ret < 0) {
		error_path_rebase(s->e, dest, p->dst);
	}
	s->stats->bytes_written += rs->bytes_written - s->bytes_before;
	s->stats->encoded_bytes += rs->encoded_bytes - encoded;
	s->stats->current_bytes = 0;
	s->stats->clones += t.stats.clones;
	s->stats->stream_bytes += t.stats.stream_bytes;
	s->stats->ahead += t.stats.passes_reused;
	return ret;
}

static void relay_report(void *arg, const struct encio_error *e)
{
	struct subvols *s = arg;
	struct encio_error named = *e;

	if (s->fd_dir[0])
		error_path_rebase(&named, s->fd_dir, s->stats->current);
	if (s->src_name)
		encio_error_rebase(&named, s->src_proc, s->src_name);
	if (s->caller->report)
		s->caller->report(s->caller->arg, &named);
}

static void relay_probed(void *arg)
{
	struct subvols *s = arg;

	if (s->caller->probed)
		s->caller->probed(s->caller->arg);
}

static void relay_kept(void *arg, const char *staging, const char *final)
{
	struct subvols *s = arg;

	if (s->caller->kept)
		s->caller->kept(s->caller->arg, staging, final);
}

static void relay_progress(void *arg, const struct tree_stats *t,
			   const struct copy_stats *c)
{
	struct subvols *s = arg;

	(void)t;
	s->stats->current_bytes = c->logical_bytes - s->logical_before;
	if (s->opts->progress)
		s->opts->progress(s->opts->arg, s->stats);
}

/*
 * tree_copy() of @src to @dest: SRC's plain part as the caller asked, or
 * with @subvol a subvolume into the new one @dest, which is under its
 * partial name until subvols_place(), so nothing in it needs a checkpoint.
 */
static int copy_tree(struct subvols *s, const char *src, const char *dest,
		     bool subvol, struct tree_stats *ts)
{
	char *srcs[1] = { (char *)src };
	const struct copy_stats *c = copy_ctx_stats(s->ctx);
	uint64_t encoded = c->encoded_bytes, clones = c->clones;
	int ret;

	s->topts.no_target_dir = subvol || s->opts->no_target_dir;
	s->topts.dest_unpublished = subvol;
	s->logical_before = c->logical_bytes;
	ret = tree_copy(s->ctx, &s->topts, srcs, 1, dest, ts, s->e);
	if (!ret && ts->failed)
		ret = encio_error_set(s->e, EIO, "copy", src, false, 0);
	s->stats->bytes_written += c->logical_bytes - s->logical_before;
	s->stats->encoded_bytes += c->encoded_bytes - encoded;
	s->stats->clones += c->clones - clones;
	s->stats->current_bytes = 0;
	return ret;
}

/*
 * Marked received as a full stream of @en would have it received (btrfs
 * send's UUID and transid), so that the snapshots sent from it find it.
 */
static int mark_received(struct subvols *s, const struct subvol_entry *en,
			 int fd)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	int ret;

	/* btrfs send names a subvolume by its ctransid, received or not */
	if (en->snap.path) {
		memcpy(rs.uuid, en->snap.uuid, BTRFS_UUID_SIZE);
		rs.stransid = en->snap.ctransid;
	} else {
		memcpy(rs.uuid, subvol_expected_received(en), BTRFS_UUID_SIZE);
		rs.stransid = en->info.ctransid;
	}
	ret = received_mark_set(fd, &rs);
	if (ret)
		return encio_error_set(s->e, ret, "set the received UUID of",
				       en->src, false, 0);
	return 0;
}

static int subvol_create_op(int dir_fd, void *arg)
{
	return btrfs_util_create_subvolume_fd(dir_fd, arg, 0, NULL, NULL) ?
		       -(errno ?: EIO) :
		       0;
}

/* The new subvolume a whole copy is made in, marked with its source. */
static int partial_create(struct subvols *s, const struct subvol_entry *en,
			  struct placement *p)
{
	int fd, ret;

	ret = inode_flags_lifted_for(p->dir_fd, subvol_create_op, p->partial);
	if (ret)
		return encio_error_set(s->e, -ret, "create the subvolume",
				       p->dst, false, 0);
	fd = openat(p->dir_fd, p->partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ret = fd < 0 ? -errno : subvols_partial_mark(en, fd);
	if (fd >= 0)
		close(fd);
	return ret ? encio_error_set(s->e, -ret, "create the subvolume", p->dst,
				     false, 0) :
		     0;
}

/*
 * A subvolume copied whole, by copy -r's engine into a new subvolume
 * (faster than a stream): synced, marked received, made read-only.
 */
static int copy_whole(struct subvols *s, const struct subvol_entry *en,
		      struct placement *p)
{
	char dest[64 + NAME_MAX];
	struct tree_stats ts;
	int fd, ret, src_fd;

	src_fd = subvols_entry_open(s, en, en->snap.path != NULL);
	if (src_fd < 0)
		return src_fd;
	ret = p->resume_whole ? 0 : partial_create(s, en, p);
	if (ret) {
		close(src_fd);
		return ret;
	}
	snprintf(dest, sizeof(dest), "/proc/self/fd/%d/%s", p->dir_fd,
		 p->partial);
	snprintf(s->fd_dir, sizeof(s->fd_dir), "/proc/self/fd/%d", p->dir_fd);
	/*
	 * Read from a descriptor: what its path names may change. The tree
	 * engine looks at its root without following it: "." in it.
	 */
	snprintf(s->src_proc, sizeof(s->src_proc), "/proc/self/fd/%d/.",
		 src_fd);
	s->src_name = subvol_source(en);
	ret = copy_tree(s, s->src_proc, dest, true, &ts);
	s->stats->complete_entries += ts.skipped;
	if (ret) {
		error_path_rebase(s->e, s->fd_dir, p->dst);
		encio_error_rebase(s->e, s->src_proc, s->src_name);
	}
	s->fd_dir[0] = '\0';
	s->src_name = NULL;
	close(src_fd);
	if (ret)
		return ret;
	fd = openat(p->dir_fd, p->partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open", p->dst, false, 0);
	/* as receive_options' no_root_nocow leaves a difference's */
	ret = s->opts->no_root_nocow ?
		      inode_flags_set(fd, 0, FS_NOCOW_FL,
				      copy_ctx_flags_refused(s->ctx)) :
		      0;
	ret = ret < 0 ?
		      encio_error_set(s->e, -ret, "finish", p->dst, false, 0) :
		      0;
	/*
	 * Marked received before the partial's mark goes, and again after
	 * (that change is one since the first): a run stopped in between
	 * leaves a partial one of the two marks names as encio's.
	 */
	if (!ret)
		ret = mark_received(s, en, fd);
	if (!ret) {
		ret = subvols_partial_unmark(fd);
		if (ret)
			ret = encio_error_set(s->e, -ret, "finish", p->dst,
					      false, 0);
	}
	if (!ret)
		ret = mark_received(s, en, fd);
	if (!ret && en->read_only && !en->contains &&
	    btrfs_util_set_subvolume_read_only_fd(fd, true))
		ret = encio_error_set(s->e, errno ?: EIO, "make read-only",
				      p->dst, false, 0);
	close(fd);
	return ret;
}

/*
 * Writable @en's copy updated as the difference from the base an earlier
 * run kept (the moment the copy at p->name holds, checked by
 * subvols_dest_state()): the receiver snapshots that copy, which no
 * received UUID names, as the parent.
 */
static int transfer_from_base(struct subvols *s, struct subvol_entry *en,
			      struct placement *p)
{
	uint64_t id;
	int fd, ret;

	fd = openat(p->dir_fd, p->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open", p->dst, false, 0);
	if (btrfs_util_subvolume_id_fd(fd, &id) || id != p->copy_id) {
		close(fd);
		return encio_error_set(
			s->e, ESTALE,
			"update (another subvolume is at its name since it was looked at)",
			p->dst, false, 0);
	}
	receive_set_known_subvol(s->rcv, en->base.uuid, en->base.ctransid, fd);
	ret = transfer(s, en, en->base.path, en->base.id, p);
	receive_set_known_subvol(s->rcv, NULL, 0, -1);
	close(fd);
	return ret;
}

/*
 * @en received as the difference from @parent's copy (NULL: from its
 * base). A resumed stream the sender finds is not the one received up to
 * the point (the kernel's stream need not be the same twice) is refused
 * before anything is sent: the partial goes and the stream is sent whole.
 */
static int copy_difference(struct subvols *s, struct subvol_entry *en,
			   const struct subvol_entry *parent,
			   struct placement *p)
{
	int ret;

	for (;;) {
		ret = parent ? transfer(s, en, subvol_source(parent),
					subvol_source_id(parent), p) :
			       transfer_from_base(s, en, p);
		if (ret != -ESTALE || !p->resume_stream)
			return ret;
		p->resume_stream = s->stats->current_resumed = false;
		s->stats->resumed--;
		ret = receive_partial_drop(p->dir_fd, p->partial);
		if (ret)
			return encio_error_set(
				s->e, -ret,
				"delete the partial receive left of", p->dst,
				false, 0);
	}
}

static int copy_entry(struct subvols *s, struct subvol_entry *en, int top_fd)
{
	const struct subvol_entry *parent;
	struct placement p = { 0 };
	bool replace, from_base, whole;
	int ret;

	ret = subvols_placement_open(s, en, &p, top_fd);
	if (ret)
		return ret;
	s->stats->current = p.dst;
	s->stats->current_bytes = 0;
	ret = subvols_dest_state(s, en, &p);
	if (ret == -ESTALE) {
		ret = encio_error_set(
			s->e, ESTALE,
			"update (it and its source changed since it was copied: move it away to copy it again)",
			p.dst, false, 0);
		goto out;
	}
	if (ret < 0) {
		ret = encio_error_set(s->e, ret, "copy the subvolume to", p.dst,
				      false, 0);
		goto out;
	}
	replace = ret == 2;
	if (replace)
		ret = 0;
	if (ret == 1) {
		s->stats->skipped++;
		if (s->opts->begin)
			s->opts->begin(s->opts->arg, p.dst, SUBVOLS_SKIPPED,
				       NULL, s->stats);
		en->in_dest = true;
		ret = 0;
		goto out;
	}
	/* the base the copy holds is its closest relative: what changed */
	from_base = replace && en->base.held &&
		    p.copy_stransid == en->base.ctransid;
	parent = from_base ? NULL : subvol_plan_nearest(&s->plan, en, NULL);
	whole = !from_base && !parent;
	ret = subvols_partial_settle(s, en, &p, whole);
	if (ret)
		goto out;
	s->stats->current_resumed = p.resume_whole || p.resume_stream;
	s->stats->resumed += s->stats->current_resumed;
	if (s->opts->begin)
		s->opts->begin(s->opts->arg, p.dst,
			       parent || from_base ? SUBVOLS_INCREMENTAL :
						     SUBVOLS_FULL,
			       from_base ? en->base.path :
			       parent	 ? parent->src :
					   NULL,
			       s->stats);
	ret = whole ? copy_whole(s, en, &p) :
		      copy_difference(s, en, parent, &p);
	if (!ret && replace)
		ret = subvols_replace_copy(s, en, &p);
	if (!ret)
		ret = subvols_place(s, en, &p);
	if (ret) {
		en->partial_kept = subvols_partial_drop(s, en, &p, whole);
		s->stats->kept = en->partial_kept;
		goto out;
	}
	en->in_dest = en->parent_ok = true;
	s->stats->copied++;
	if (parent || from_base)
		s->stats->incremental++;
	if (replace)
		s->stats->replaced++;
out:
	s->stats->current = NULL;
	s->stats->current_resumed = false;
	close(p.dir_fd);
	return ret;
}

/*
 * Whether the failure @ret of @en's copy stops the whole copy: the stop
 * asked for, what any next copy would meet too (DEST full or read-only,
 * memory short), or SRC's own copy, which the others go in.
 */
static bool stops_all(const struct subvols *s, const struct subvol_entry *en,
		      int ret)
{
	switch (-ret) {
	case EINTR:
	case ENOSPC:
	case EDQUOT:
	case EROFS:
	case ENOMEM:
		return true;
	}
	return (s->opts->stop && *s->opts->stop) || !en->rel[0] ||
	       s->e->err == ENOSPC || s->e->err == EDQUOT;
}

static int problem_add(struct subvols *s, const struct subvol_entry *en,
		       const struct encio_error *e, const char *inside)
{
	struct subvols_stats *st = s->stats;
	struct subvols_problem *v, *pb;
	char dst[PATH_MAX];

	/* a path too long for DEST: named by its source */
	if (subvols_dest_path(s, en->rel, dst, sizeof(dst)))
		snprintf(dst, sizeof(dst), "%s", en->src);
	v = realloc(st->problems, (st->nr_problems + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->problems = v;
	pb = &v[st->nr_problems];
	*pb = (struct subvols_problem){ .inside = inside };
	if (e)
		pb->e = *e;
	pb->dst = strdup(dst);
	if (!pb->dst)
		return -ENOMEM;
	st->nr_problems++;
	return 0;
}

/*
 * The copy in DEST of the failed subvolume @en lies in, NULL if none: its
 * problem's dst, which the problems' list keeps where it is.
 */
static const char *failed_around(const struct subvols *s,
				 const struct subvol_entry *en)
{
	const struct subvols_stats *st = s->stats;
	char dst[PATH_MAX];
	size_t i, j;

	for (i = 0; i < s->plan.nr; i++) {
		const struct subvol_entry *f = &s->plan.v[i];

		if (!f->failed || !subvol_rel_below(en->rel, f->rel) ||
		    subvols_dest_path(s, f->rel, dst, sizeof(dst)))
			continue;
		for (j = 0; j < st->nr_problems; j++)
			if (!strcmp(st->problems[j].dst, dst))
				return st->problems[j].dst;
	}
	return NULL;
}

/*
 * @en's turn: copied, or left out where it lies in a failed one's copy.
 * A failure that stops nothing else is recorded and reported, and the
 * next ones go on: 0 then, or the error that stops the copy.
 */
static int copy_turn(struct subvols *s, struct subvol_entry *en, int top_fd)
{
	const char *in = failed_around(s, en);
	int ret;

	if (in) {
		en->left_out = true;
		s->stats->left_out++;
		ret = problem_add(s, en, NULL, in);
		return ret ? encio_error_set(s->e, ret, "copy", en->src, false,
					     0) :
			     0;
	}
	ret = copy_entry(s, en, top_fd);
	if (!ret || stops_all(s, en, ret))
		return ret;
	en->failed = true;
	s->stats->failed++;
	if (s->caller->report)
		s->caller->report(s->caller->arg, s->e);
	ret = problem_add(s, en, s->e, NULL);
	return ret ? encio_error_set(s->e, ret, "copy", en->src, false, 0) : 0;
}

static int subvols_begin(struct subvols *s, const char *src, const char *dest)
{
	int fd, ret;

	fd = subvols_src_open(s, src, "copy the subvolumes of (not btrfs)");
	if (fd < 0)
		return fd;
	ret = subvols_dest_name(s, dest)    ?:
		      subvols_dest_check(s) ?:
					      subvol_plan_build(&s->plan, fd);
	if (!ret) {
		s->clones = calloc(s->plan.nr ?: 1, sizeof(*s->clones));
		s->clone_ids = calloc(s->plan.nr ?: 1, sizeof(*s->clone_ids));
		if (!s->clones || !s->clone_ids)
			ret = encio_error_set(s->e, ENOMEM, "plan the copy of",
					      s->plan.src, false, 0);
	}
	close(fd);
	s->stats->total = s->plan.nr;
	return ret;
}

static int copy_all(struct subvols *s)
{
	struct receive_options ro = { .io_mode = s->opts->io_mode,
				      .max_errors = 1,
				      .resumable = true,
				      .checkpoint_bytes =
					      s->opts->checkpoint_bytes,
				      .checkpoint_late = true,
				      .no_root_nocow = s->opts->no_root_nocow };
	struct subvol_entry *en;
	int top_fd = -1, ret;
	size_t i;

	ret = subvols_snapshots_make(s) ?: receive_ctx_new(&s->rcv, &ro, s->e);
	if (ret) {
		subvols_snapshots_drop(s, -1);
		return ret;
	}
	receive_set_progress(s->rcv, received_progress, s);
	/* without it, each pass is made at its turn: no error */
	subvols_ahead_start(&s->ahead, &s->plan, s->opts->stop);
	for (i = 0; !ret && i <= s->plan.nr_order; i++) {
		subvols_ahead_reach(s->ahead, i);
		if (s->opts->stop && *s->opts->stop) {
			ret = encio_error_set(s->e, EINTR, "copy", s->plan.src,
					      false, 0);
			break;
		}
		en = i < s->plan.nr_order ? &s->plan.v[s->plan.order[i]] : NULL;
		/* SRC's copy first: the directories the others go in */
		if (top_fd < 0 && (!en || en->rel[0])) {
			top_fd = open(s->dst, O_RDONLY | O_DIRECTORY |
						      O_NOFOLLOW | O_CLOEXEC);
			if (top_fd < 0)
				ret = encio_error_set(s->e, errno, "open",
						      s->dst, false, 0);
			s->top_fd = top_fd;
		}
		if (!ret && en)
			ret = copy_turn(s, en, top_fd);
	}
	/* no pass left in flight on SRC's subvolumes while they are finished */
	subvols_ahead_end(s->ahead);
	s->ahead = NULL;
	if (ret) {
		subvols_snapshots_drop(s, top_fd);
	} else {
		ret = subvols_finish_containers(s, top_fd)	  ?:
			      subvols_finish_writables(s, top_fd) ?:
			      subvols_keep_default(s, top_fd);
		/* the failed ones' snapshots, but for a copy in flight kept */
		if (s->stats->failed)
			subvols_snapshots_drop(s, top_fd);
		if (!ret && s->opts->final)
			ret = subvols_extras(s, top_fd);
		/* the last run's end: only once everything is copied */
		if (!ret && s->opts->final && !s->stats->failed)
			ret = subvols_bases_drop(s);
		if (!ret && s->stats->failed)
			ret = encio_error_set(s->e, EIO,
					      "copy every subvolume of",
					      s->plan.src, false, 0);
	}
	for (i = 0; i < s->plan.nr; i++)
		s->stats->bases += s->plan.v[i].base.held;
	if (top_fd >= 0)
		close(top_fd);
	s->top_fd = -1;
	receive_ctx_free(s->rcv);
	return ret;
}

static void subvols_release(struct subvols *s)
{
	subvol_plan_release(&s->plan);
	free(s->clones);
	free(s->clone_ids);
}

void subvols_stats_release(struct subvols_stats *stats)
{
	size_t i;

	for (i = 0; i < stats->nr_problems; i++)
		free(stats->problems[i].dst);
	for (i = 0; i < stats->nr_extras; i++)
		free(stats->extras[i].dst);
	free(stats->problems);
	free(stats->extras);
	stats->problems = NULL;
	stats->extras = NULL;
	stats->nr_problems = stats->nr_extras = 0;
}

int subvols_copy(struct copy_ctx *ctx, const struct tree_options *topts,
		 const struct subvols_options *opts, const char *src,
		 const char *dest, struct subvols_stats *stats,
		 struct tree_stats *tstats, struct encio_error *e)
{
	struct subvols s = {
		.ctx = ctx,
		.caller = topts,
		.opts = opts,
		.stats = stats,
		.e = e,
		.top_fd = -1,
	};
	int ret;

	s.plan.src_fd = -1;
	s.topts = *topts;
	s.topts.skip_subvolumes = true;
	s.topts.count_first = false;
	s.topts.report = relay_report;
	s.topts.probed = relay_probed;
	s.topts.kept = relay_kept;
	s.topts.progress = relay_progress;
	s.topts.arg = &s;
	memset(stats, 0, sizeof(*stats));
	memset(tstats, 0, sizeof(*tstats));
	ret = subvols_begin(&s, src, dest);
	/* SRC's part in no subvolume below it, with the directories they go in */
	if (!ret && !s.plan.src_is_subvol)
		ret = copy_tree(&s, s.plan.src, dest, false, tstats);
	if (!ret)
		ret = copy_all(&s);
	subvols_release(&s);
	return ret;
}
