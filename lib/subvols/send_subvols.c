// SPDX-License-Identifier: GPL-2.0
/*
 * encio send --subvolumes: the subvolumes below SRC in one stream, for
 * encio receive to make SRC's copy as copy -rT --subvolumes makes it.
 * The plan is copy's (lib/plan/subvol_plan.c): the same order, the same
 * closest relative for each difference, the same clone sources, and the
 * same read-only snapshots of the writable subvolumes, made before the
 * first is sent (copy_subvols_src.c) and kept at the end as the bases of
 * the next run's differences, under names of send's own. What DEST holds
 * comes from its receiver's state (--state): those subvolumes are named,
 * not sent. Each subvolume's stream is encio send's, made on a thread of
 * its own and relayed in ENCIO_DATA commands after the ENCIO_SUBVOL
 * command that says what it is (stream.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "subvols/subvols_stream.h"

/* what an ENCIO_DATA command carries at most */
#define RELAY_CHUNK (256 * 1024)

struct subvols_sender {
	struct subvols s; /* the plan, the snapshots: copy's SRC side */
	const struct subvols_send_options *opts;
	struct subvols_send_stats *stats;
	struct stream_writer w;
	const char *out_name;
	bool *sent; /* by index in the plan: a parent and clone source now */
	unsigned char *buf;
	/* STREAM_SUBVOL_RESUMES, or 0: for the first ENCIO_SUBVOL */
	uint64_t resumes;
};

/*
 * Whether the state lists a copy marked @uuid, @stransid at @rel: its
 * path, where a copy of a subvolume SRC moved since is not; read-only
 * where @read_only says.
 */
static bool state_has(const struct subvols_sender *x, const uint8_t *uuid,
		      uint64_t stransid, const char *rel, bool read_only)
{
	const struct subvols_state *st = x->opts->state;
	size_t i;

	for (i = 0; st && i < st->nr; i++)
		if (st->v[i].stransid == stransid &&
		    (st->v[i].read_only || !read_only) &&
		    !memcmp(st->v[i].received_uuid, uuid, BTRFS_UUID_SIZE) &&
		    !strcmp(st->v[i].rel, rel))
			return true;
	return false;
}

/*
 * Whether DEST holds read-only @en's copy at its path, as the state says:
 * marked received as a stream from @en would name it, and read-only (a
 * run that stopped before its END leaves the copies of read-only
 * subvolumes holding others writable: those are sent again).
 */
static bool in_dest(const struct subvols_sender *x,
		    const struct subvol_entry *en)
{
	return en->read_only &&
	       state_has(x, subvol_expected_received(en), en->info.ctransid,
			 en->rel[0] ? en->rel : ".", true);
}

/*
 * Whether writable @en's copy at its path in DEST holds the base an
 * earlier run kept (received from that snapshot, unchanged since): the
 * closest relative, what changed since, which the receiver takes as the
 * parent. A copy elsewhere (the subvolume moved since) goes with its old
 * container's copy where that is replaced first.
 */
static bool from_base(const struct subvols_sender *x,
		      const struct subvol_entry *en)
{
	return !en->read_only && en->base.held &&
	       state_has(x, en->base.uuid, en->base.ctransid,
			 en->rel[0] ? en->rel : ".", false);
}

/* An ENCIO_SUBVOL command's attributes, put before its stream's data. */
struct subvol_head {
	const char *rel;
	const uint8_t *uuid;
	const uint8_t *received;
	uint64_t ctransid;
	uint64_t flags;
};

static int subvol_head_put(struct subvols_sender *x,
			   const struct subvol_head *h)
{
	stream_begin_cmd(&x->w, STREAM_C_ENCIO_SUBVOL);
	stream_put_string(&x->w, STREAM_A_SUBVOL_PATH, h->rel);
	stream_put_uuid(&x->w, STREAM_A_SUBVOL_UUID, h->uuid);
	stream_put_uuid(&x->w, STREAM_A_SUBVOL_RECEIVED, h->received);
	stream_put_u64(&x->w, STREAM_A_SUBVOL_CTRANSID, h->ctransid);
	stream_put_u64(&x->w, STREAM_A_SUBVOL_FLAGS, h->flags);
	return stream_end_cmd(&x->w);
}

/*
 * What the thread sends, read from @fd and put in ENCIO_DATA commands
 * after @h's ENCIO_SUBVOL, put with the first of them: a resume the
 * sender refuses before its first byte is sent again whole. *@relayed:
 * whether any was.
 */
static int relay(struct subvols_sender *x, int fd, const struct subvol_head *h,
		 bool *relayed)
{
	ssize_t n;
	int ret = 0;

	*relayed = false;
	while (!ret) {
		n = read(fd, x->buf, RELAY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		if (!*relayed) {
			*relayed = true;
			ret = subvol_head_put(x, h);
			if (ret)
				break;
		}
		stream_begin_cmd(&x->w, STREAM_C_ENCIO_DATA);
		stream_put_data(&x->w, x->buf, n);
		ret = stream_end_cmd(&x->w);
	}
	return ret;
}

/*
 * @path (@name in messages) sent from @parent (NULL: whole) with the
 * clone sources sent before, relayed after @h's ENCIO_SUBVOL command;
 * resumed at @resume (NULL: from its start).
 */
static int send_one(struct subvols_sender *x, const char *path,
		    const char *name, const char *parent, uint64_t parent_id,
		    const struct subvol_head *h,
		    const struct resume_point *resume)
{
	struct subvols_sender_thread t = { .path = path, .stream = name };
	bool tree_part = h->flags & STREAM_SUBVOL_PLAIN;
	struct subvols *s = &x->s;
	pthread_t thread;
	int fds[2], ret;
	bool relayed;
	size_t nr;

	nr = subvol_plan_clones(&s->plan, NULL, x->sent, s->clones,
				s->clone_ids);
	t.opts = (struct send_options){
		.io_mode = x->opts->io_mode,
		.depth = x->opts->depth,
		.parent = parent,
		.parent_id = parent_id,
		.clones = tree_part ? NULL : s->clones,
		.clone_ids = tree_part ? NULL : s->clone_ids,
		.nr_clones = tree_part ? 0 : nr,
		.whole = !parent,
		.tree_part = tree_part,
		.resume = resume,
		.stop = x->opts->stop,
	};
	if (pipe2(fds, O_CLOEXEC))
		return encio_error_set(s->e, errno, "make a pipe for", name,
				       false, 0);
	t.fd = fds[1];
	ret = pthread_create(&thread, NULL, subvols_sender_run, &t);
	if (ret) {
		close(fds[0]);
		close(fds[1]);
		return encio_error_set(s->e, ret, "start the sender of", name,
				       false, 0);
	}
	ret = relay(x, fds[0], h, &relayed);
	close(fds[0]);
	pthread_join(thread, NULL);
	if (resume && !relayed && (t.ret == -ESTALE || t.ret == -EPROTO)) {
		struct subvol_head whole = *h;

		whole.flags &= ~STREAM_SUBVOL_RESUMED;
		return send_one(x, path, name, parent, parent_id, &whole, NULL);
	}
	if (!ret && !t.ret && !relayed)
		ret = subvol_head_put(x, h);
	if (t.ret) {
		*s->e = t.e;
		return t.ret;
	}
	if (ret)
		return encio_error_set(s->e, -ret, "write the stream to",
				       x->out_name, false, 0);
	if (resume) {
		x->stats->resumed = 1;
		x->stats->resumed_at = t.stats.resumed_at;
	}
	return 0;
}

/* SRC's part in no subvolume below it, where SRC is no subvolume. */
static int send_tree_part(struct subvols_sender *x)
{
	static const uint8_t none[BTRFS_UUID_SIZE];
	const struct subvol_head h = { .rel = ".",
				       .uuid = none,
				       .received = none,
				       .flags = STREAM_SUBVOL_PLAIN |
						x->resumes };

	if (x->opts->begin)
		x->opts->begin(x->opts->arg, ".", NULL);
	return send_one(x, x->s.plan.src, x->s.plan.src, NULL, 0, &h, NULL);
}

/*
 * The state's partial, where it is of @en's stream at its path: its UUID
 * (or the one it was received as, which its stream names then) and
 * ctransid. The sender checks the rest (the parent, the stream up to the
 * point) and sends it whole where that differs.
 */
static const struct resume_point *entry_resume(const struct subvols_sender *x,
					       const struct subvol_entry *en)
{
	const struct subvols_state *st = x->opts->state;

	if (!st || !st->resume_rel ||
	    strcmp(st->resume_rel, en->rel[0] ? en->rel : ".") ||
	    (memcmp(st->resume.uuid, en->info.uuid, BTRFS_UUID_SIZE) &&
	     memcmp(st->resume.uuid, en->info.received_uuid,
		    BTRFS_UUID_SIZE)) ||
	    st->resume.ctransid != en->info.ctransid)
		return NULL;
	return &st->resume;
}

static int send_entry(struct subvols_sender *x, struct subvol_entry *en)
{
	struct subvols *s = &x->s;
	const struct subvol_entry *parent;
	const struct resume_point *resume;
	struct subvol_head h;
	uint64_t flags = 0;
	char proc[32];
	bool base;
	int fd, ret;

	if (en->read_only)
		flags |= STREAM_SUBVOL_READ_ONLY;
	if (en->contains)
		flags |= STREAM_SUBVOL_CONTAINS;
	if (x->sent[en - s->plan.v])
		flags |= STREAM_SUBVOL_IN_DEST;
	base = from_base(x, en);
	parent = flags & STREAM_SUBVOL_IN_DEST || base ?
			 NULL :
			 subvol_plan_nearest(&s->plan, en, x->sent);
	if (x->opts->begin && !(flags & STREAM_SUBVOL_IN_DEST))
		x->opts->begin(x->opts->arg, en->rel[0] ? en->rel : ".",
			       base   ? en->base.name :
			       parent ? (parent->rel[0] ? parent->rel : ".") :
					NULL);
	resume = flags & STREAM_SUBVOL_IN_DEST ? NULL : entry_resume(x, en);
	if (resume)
		flags |= STREAM_SUBVOL_RESUMED;
	if (!en->rel[0])
		flags |= x->resumes;
	h = (struct subvol_head){ .rel = en->rel[0] ? en->rel : ".",
				  .uuid = en->info.uuid,
				  .received = subvol_expected_received(en),
				  .ctransid = en->info.ctransid,
				  .flags = flags };
	if (flags & STREAM_SUBVOL_IN_DEST) {
		ret = subvol_head_put(x, &h);
		if (ret)
			return encio_error_set(s->e, -ret,
					       "write the stream to",
					       x->out_name, false, 0);
		x->stats->in_dest++;
		return 0;
	}
	/* sent from a descriptor: what its path names may change */
	fd = subvols_entry_open(s, en, en->snap.path != NULL);
	if (fd < 0)
		return fd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ret = send_one(x, proc, subvol_source(en),
		       base   ? en->base.path :
		       parent ? subvol_source(parent) :
				NULL,
		       base   ? en->base.id :
		       parent ? subvol_source_id(parent) :
				0,
		       &h, resume);
	close(fd);
	if (ret)
		return ret;
	x->sent[en - s->plan.v] = true;
	x->stats->total++;
	x->stats->incremental += parent || base;
	return 0;
}

/* Whether SRC has a subvolume at @rel ("." for SRC). */
static bool planned_at(const struct subvol_plan *plan, const char *rel)
{
	size_t i;

	for (i = 0; i < plan->nr; i++)
		if (!strcmp(plan->v[i].rel[0] ? plan->v[i].rel : ".", rel))
			return true;
	return false;
}

static int by_length_down(const void *a, const void *b)
{
	const struct subvols_state_entry *x = *(const void *const *)a;
	const struct subvols_state_entry *y = *(const void *const *)b;
	size_t la = strlen(x->rel), lb = strlen(y->rel);

	return la < lb ? 1 : la > lb ? -1 : strcmp(x->rel, y->rel);
}

/*
 * The state's subvolumes at paths where SRC has none, the deepest first:
 * listed in the stats, and with opts->delete_extra named in the stream.
 */
static int send_extras(struct subvols_sender *x)
{
	const struct subvols_state *st = x->opts->state;
	const struct subvols_state_entry **v;
	struct subvols_send_stats *stats = x->stats;
	size_t i, n = 0;
	int ret = 0;

	if (!st || !st->nr)
		return 0;
	v = calloc(st->nr, sizeof(*v));
	stats->extras = calloc(st->nr, sizeof(*stats->extras));
	if (!v || !stats->extras) {
		free(v);
		return encio_error_set(x->s.e, ENOMEM, "send", x->s.plan.src,
				       false, 0);
	}
	for (i = 0; i < st->nr; i++)
		if (!planned_at(&x->s.plan, st->v[i].rel))
			v[n++] = &st->v[i];
	if (n)
		qsort(v, n, sizeof(*v), by_length_down);
	for (i = 0; !ret && i < n; i++) {
		stats->extras[i] = strdup(v[i]->rel);
		if (!stats->extras[i]) {
			ret = -ENOMEM;
			break;
		}
		stats->nr_extras++;
		if (x->opts->delete_extra)
			ret = subvol_head_put(
				x, &(struct subvol_head){
					   .rel = v[i]->rel,
					   .uuid = v[i]->received_uuid,
					   .received = v[i]->received_uuid,
					   .ctransid = v[i]->stransid,
					   .flags = STREAM_SUBVOL_EXTRA });
	}
	free(v);
	return ret ? encio_error_set(x->s.e, -ret, "write the stream to",
				     x->out_name, false, 0) :
		     0;
}

void subvols_send_stats_release(struct subvols_send_stats *stats)
{
	while (stats->nr_extras)
		free(stats->extras[--stats->nr_extras]);
	free(stats->extras);
	stats->extras = NULL;
}

static int send_all(struct subvols_sender *x)
{
	struct subvols *s = &x->s;
	size_t i;
	int ret;

	/* the bases of send --subvolumes, not copy's: another DEST's */
	for (i = 0; i < s->plan.nr; i++) {
		struct subvol_snapshot copy_base = s->plan.v[i].base;

		s->plan.v[i].base = s->plan.v[i].send_base;
		s->plan.v[i].send_base = copy_base;
		x->sent[i] = in_dest(x, &s->plan.v[i]);
	}
	for (i = 0; i < s->plan.nr; i++)
		if (!x->sent[i] && entry_resume(x, &s->plan.v[i]))
			x->resumes = STREAM_SUBVOL_RESUMES;
	ret = subvols_snapshots_make(s);
	if (!ret && !s->plan.src_is_subvol)
		ret = send_tree_part(x);
	for (i = 0; !ret && i < s->plan.nr_order; i++) {
		if (x->opts->stop && *x->opts->stop)
			ret = encio_error_set(s->e, EINTR, "send", s->plan.src,
					      false, 0);
		else
			ret = send_entry(x, &s->plan.v[s->plan.order[i]]);
	}
	/*
	 * The snapshots of the writable subvolumes sent kept as the bases of
	 * the next run's differences, where the stream went whole; the
	 * others go
	 */
	for (i = 0; !ret && i < s->plan.nr; i++)
		if (s->plan.v[i].snap.held && x->sent[i])
			ret = subvols_snapshot_keep(s, &s->plan.v[i]);
	subvols_snapshots_drop(s, -1);
	ret = ret ?: send_extras(x);
	if (ret)
		return ret;
	stream_begin_cmd(&x->w, BTRFS_SEND_C_END);
	ret = stream_end_cmd(&x->w) ?: stream_writer_finish(&x->w);
	x->stats->stream_bytes = x->w.written;
	return ret ? encio_error_set(s->e, -ret, "write the stream to",
				     x->out_name, false, 0) :
		     0;
}

static int plan(struct subvols_sender *x, const char *src)
{
	struct subvols *s = &x->s;
	int fd, ret;

	fd = subvols_src_open(s, src, "send the subvolumes of (not btrfs)");
	if (fd < 0)
		return fd;
	ret = subvol_plan_build(&s->plan, fd);
	close(fd);
	if (ret)
		return ret;
	s->clones = calloc(s->plan.nr ?: 1, sizeof(*s->clones));
	s->clone_ids = calloc(s->plan.nr ?: 1, sizeof(*s->clone_ids));
	x->sent = calloc(s->plan.nr ?: 1, sizeof(*x->sent));
	x->buf = malloc(RELAY_CHUNK);
	if (!s->clones || !s->clone_ids || !x->sent || !x->buf)
		return encio_error_set(s->e, ENOMEM, "plan the send of",
				       s->plan.src, false, 0);
	return 0;
}

int subvols_send(const char *src, int out_fd, const char *out_name,
		 const struct subvols_send_options *opts,
		 struct subvols_send_stats *stats, struct encio_error *e)
{
	static const struct tree_options no_callbacks;
	static const struct subvols_options no_options;
	struct subvols_sender x = {
		.s = { .caller = &no_callbacks, .opts = &no_options, .e = e },
		.opts = opts,
		.stats = stats,
		.out_name = out_name,
	};
	int ret;

	memset(e, 0, sizeof(*e));
	memset(stats, 0, sizeof(*stats));
	x.s.plan.src_fd = -1;
	ret = plan(&x, src);
	if (!ret) {
		ret = stream_writer_init_subvolumes(&x.w, out_fd);
		if (ret)
			ret = encio_error_set(e, -ret, "write the stream to",
					      out_name, false, 0);
		else
			x.w.stop = opts->stop;
	}
	if (!ret)
		ret = send_all(&x);
	if (x.w.buf)
		stream_writer_release(&x.w);
	subvol_plan_release(&x.s.plan);
	free(x.s.clones);
	free(x.s.clone_ids);
	free(x.sent);
	free(x.buf);
	return ret;
}
