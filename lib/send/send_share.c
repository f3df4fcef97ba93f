// SPDX-License-Identifier: GPL-2.0
/*
 * encio send keeps data shared: a range of a source extent sent once, in
 * this subvolume or an earlier one of the same stream, is sent again as a
 * CLONE of the file range it was written to, as btrfs send does for the
 * clone sources it is given. The receiver clones it from the file it has
 * just made, so the data stays shared there.
 *
 * Order: the stream is written in file order, file after file, and a file
 * plans its pieces when it is sent; whatever it clones from was written
 * earlier in the stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "fs/tree_search.h"
#include "send/send_internal.h"

int send_share_begin(struct send_ctx *ctx, const char *const *paths, size_t nr)
{
	size_t i;
	int fd, ret;

	share_init(&ctx->share);
	for (i = 0; i < nr; i++) {
		fd = open(paths[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue; /* the send itself says what is wrong */
		ret = share_add_source(&ctx->share, fd);
		close(fd);
		if (ret == -ENOMEM)
			return ret;
	}
	ctx->share_on = ctx->share.nr_fs > 0;
	return 0;
}

void send_share_end(struct send_ctx *ctx)
{
	size_t i;

	for (i = 0; ctx->share_on && i < ctx->share.nr_files; i++)
		free(ctx->share.files[i].path);
	share_release(&ctx->share);
	ctx->share_on = false;
	free(ctx->subvols);
	ctx->subvols = NULL;
	ctx->nr_subvols = 0;
}

int send_share_subvol(struct send_ctx *ctx, const uint8_t *uuid,
		      uint64_t ctransid)
{
	struct send_subvol_id *s;

	if (!ctx->share_on)
		return 0;
	if (ctx->nr_subvols >= UINT16_MAX)
		return -EOVERFLOW;
	s = realloc(ctx->subvols, (ctx->nr_subvols + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	ctx->subvols = s;
	s = &s[ctx->nr_subvols++];
	memcpy(s->uuid, uuid, sizeof(s->uuid));
	s->ctransid = ctransid;
	return 0;
}

/* Whether @map has an extent that may be shared; its filesystem in @fs. */
static bool may_share(struct send_ctx *ctx, int fd, const struct stat *st,
		      const struct extent_map *map, uint32_t *fs)
{
	size_t i;

	if (!ctx->share_on || !ctx->nr_subvols ||
	    map->source != EXTENT_SOURCE_TREE_SEARCH ||
	    share_fs_of(&ctx->share, fd, st, fs))
		return false;
	for (i = 0; i < map->nr; i++)
		if (share_extent_may_share(&ctx->share, *fs, &map->ext[i]))
			return true;
	return false;
}

bool send_share_batchable(struct send_ctx *ctx, int fd, const struct stat *st,
			  const struct extent_map *map)
{
	uint32_t fs;

	return !may_share(ctx, fd, st, map, &fs);
}

/* A clone piece, merged into the last where it goes on in both files. */
static int push_clone(struct send_ctx *ctx, size_t first,
		      const struct share_piece *c)
{
	struct send_piece *p = ctx->nr_pieces > first ?
				       &ctx->pieces[ctx->nr_pieces - 1] :
				       NULL;
	int ret;

	if (p && p->clone && p->file == c->file && p->end == c->off &&
	    p->src_off + (p->end - p->start) == c->src_off) {
		p->end += c->len;
		return 0;
	}
	ret = send_push_piece(ctx, c->off, c->off + c->len, c->whole);
	if (ret)
		return ret;
	p = &ctx->pieces[ctx->nr_pieces - 1];
	p->clone = true;
	p->file = c->file;
	p->src_off = c->src_off;
	return 0;
}

/*
 * The pieces of @plan for @fe: clones, and ranges to send. A prealloc
 * extent's ranges not cloned go as FALLOCATE (send_prealloc()), which
 * leaves those cloned as they are: allocated.
 */
static int push_plan(struct send_ctx *ctx, size_t first,
		     const struct share_plan *plan,
		     const struct file_extent *fe)
{
	size_t i;
	int ret = 0;

	for (i = 0; !ret && i < plan->nr; i++) {
		const struct share_piece *c = &plan->p[i];

		if (c->clone)
			ret = push_clone(ctx, first, c);
		else if (fe->kind != EXTENT_PREALLOC)
			ret = send_push_range(ctx, fe, c->off, c->off + c->len);
	}
	return ret;
}

static int send_share_node(struct send_ctx *ctx, uint32_t id);

static int new_file(struct send_ctx *ctx, int fd, const char *path,
		    uint32_t *id)
{
	struct share_file *sf;
	int ret = share_file_new(&ctx->share, id);

	if (ret)
		return ret;
	sf = share_file_get(&ctx->share, *id);
	/* by handle, for the clone checks of those after it */
	ret = share_file_keep_handle(sf, fd);
	if (ret) {
		share_file_set_state(&ctx->share, *id, SHARE_FAILED);
		return ret;
	}
	sf->path = strdup(path);
	if (!sf->path) {
		share_file_set_state(&ctx->share, *id, SHARE_FAILED);
		return -ENOMEM;
	}
	/* what it writes is in the stream before anything that clones it */
	share_file_set_state(&ctx->share, *id, SHARE_READY);
	sf->subvol = ctx->nr_subvols - 1;
	return send_share_node(ctx, *id);
}

/*
 * The file @id sent from the walk's node at hand: its path in the stream
 * is the node's, which changes as directories made under orphan names are
 * renamed into place, until the walk of its subvolume ends.
 */
static int send_share_node(struct send_ctx *ctx, uint32_t id)
{
	uint32_t *nv;
	size_t cap;

	if (ctx->walk_node == SEND_NODE_NONE)
		return 0;
	if (id >= ctx->cap_share_nodes) {
		cap = ctx->cap_share_nodes ? ctx->cap_share_nodes : 1024;
		while (cap <= id)
			cap *= 2;
		nv = realloc(ctx->share_nodes, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		memset(nv + ctx->cap_share_nodes, 0,
		       (cap - ctx->cap_share_nodes) * sizeof(*nv));
		ctx->share_nodes = nv;
		ctx->cap_share_nodes = cap;
	}
	ctx->share_nodes[id] = ctx->walk_node + 1;
	if (id >= ctx->nr_share_nodes)
		ctx->nr_share_nodes = id + 1;
	return 0;
}

int send_share_walk_end(struct send_ctx *ctx)
{
	char path[PATH_MAX];
	struct share_file *sf;
	char *final;
	size_t id;

	for (id = 0; id < ctx->nr_share_nodes; id++) {
		if (!ctx->share_nodes[id])
			continue;
		sf = share_file_get(&ctx->share, id);
		if (send_walk_path(&ctx->walk, ctx->share_nodes[id] - 1,
				   path) ||
		    !(final = strdup(path)))
			return -ENOMEM;
		free(sf->path);
		sf->path = final;
		ctx->share_nodes[id] = 0;
	}
	ctx->nr_share_nodes = 0;
	return 0;
}

/*
 * A compressed extent is cloned in part where btrfs send would, that is
 * where a part sent before holds its start; each part left between clones
 * is sent encoded where its encoded bytes are fewer, else plain. Cut
 * elsewhere, it would make a longer stream than btrfs send's.
 */
static enum share_cut cut_of(const struct file_extent *fe)
{
	return fe->compression != BTRFS_COMPRESS_NONE ? SHARE_CUT_FROM_START :
							SHARE_CUT_ANY;
}

/*
 * The pieces of @map planned, its ranges remembered as sent by @path: the
 * pieces pushed if @push, else left (a file sent before a resume point).
 * Whether it may share is asked first.
 */
static int share_map(struct send_ctx *ctx, int fd, const char *path,
		     const struct extent_map *map, bool push)
{
	struct share_plan plan = { 0 };
	size_t first = ctx->nr_pieces, i;
	struct stat st;
	uint32_t fs, file;
	int ret;

	if (!ctx->share_on || !ctx->nr_subvols || fstat(fd, &st) ||
	    send_share_batchable(ctx, fd, &st, map))
		return push ? send_map_pieces(ctx, map) : 0;
	ret = share_fs_of(&ctx->share, fd, &st, &fs) ?:
		      new_file(ctx, fd, path, &file);
	for (i = 0; !ret && i < map->nr; i++) {
		const struct file_extent *fe = &map->ext[i];
		uint64_t end = fe->offset + fe->len;

		if (fe->kind == EXTENT_HOLE || fe->offset >= map->size)
			continue;
		if (end > map->size)
			end = map->size;
		plan.nr = 0;
		ret = share_plan_range(&ctx->share, fs, fe, fe->offset, end,
				       map->size, cut_of(fe), file, &plan);
		if (!ret && push)
			ret = push_plan(ctx, first, &plan, fe);
	}
	share_plan_release(&plan);
	return ret;
}

int send_share_map(struct send_ctx *ctx, int fd, const char *path,
		   const struct extent_map *map)
{
	return share_map(ctx, fd, path, map, true);
}

int send_share_note(struct send_ctx *ctx, int fd, const char *path,
		    const struct extent_map *map)
{
	return share_map(ctx, fd, path, map, false);
}

/* The tree search's items: the inodes with an extent that may be shared. */
struct may_share_search {
	struct send_ctx *ctx;
	uint32_t fs;
	uint64_t *inos;
	size_t nr, cap;
};

static int may_share_item(void *arg, const struct btrfs_ioctl_search_header *sh,
			  const uint8_t *item)
{
	struct may_share_search *m = arg;
	struct file_extent fe;
	uint64_t *v;

	if (sh->type != BTRFS_EXTENT_DATA_KEY ||
	    (m->nr && m->inos[m->nr - 1] == sh->objectid) ||
	    extent_item_parse(item, sh->len, sh->offset, &fe) ||
	    !share_extent_may_share(&m->ctx->share, m->fs, &fe))
		return 0;
	v = array_grow(m->inos, &m->cap, m->nr, sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->inos = v;
	m->inos[m->nr++] = sh->objectid;
	return 0;
}

int send_share_candidates(struct send_ctx *ctx, int root_fd,
			  const struct stat *root_st, uint64_t below,
			  uint64_t **inos, size_t *nr)
{
	struct may_share_search m = { .ctx = ctx };
	struct btrfs_ioctl_search_key key = {
		.min_objectid = BTRFS_FIRST_FREE_OBJECTID,
		.max_objectid = below - 1,
		.min_type = BTRFS_EXTENT_DATA_KEY,
		.max_type = BTRFS_EXTENT_DATA_KEY,
		.max_offset = UINT64_MAX,
		.max_transid = UINT64_MAX,
	};
	struct tree_search ts;
	const struct share_fs *f;
	int ret;

	*inos = NULL;
	*nr = 0;
	if (!ctx->share_on || !ctx->nr_subvols ||
	    share_fs_of(&ctx->share, root_fd, root_st, &m.fs))
		return 0;
	f = &ctx->share.fs[m.fs];
	if ((!f->all && !f->nr_multi) || below <= BTRFS_FIRST_FREE_OBJECTID)
		return 0;
	ret = tree_search_init(&ts, 256 * 1024);
	if (ret)
		return ret;
	ret = tree_search_run(&ts, root_fd, &key, 0, may_share_item, &m);
	tree_search_release(&ts);
	if (ret) {
		free(m.inos);
		return ret;
	}
	*inos = m.inos;
	*nr = m.nr;
	return 0;
}

static int send_clone(struct send_ctx *ctx, const char *path,
		      const struct send_piece *p)
{
	const struct share_file *sf = share_file_get(&ctx->share, p->file);
	const struct send_subvol_id *sv = &ctx->subvols[sf->subvol];
	uint64_t len = p->end - p->start;
	const char *from = sf->path;
	char now[PATH_MAX];

	if (p->file < ctx->nr_share_nodes && ctx->share_nodes[p->file]) {
		if (send_walk_path(&ctx->walk, ctx->share_nodes[p->file] - 1,
				   now))
			return send_fail(ctx, ENAMETOOLONG,
					 "make the stream path of", 0, false);
		from = now;
	}

	stream_begin_cmd(&ctx->w, BTRFS_SEND_C_CLONE);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_FILE_OFFSET, p->start);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_CLONE_LEN, len);
	stream_put_uuid(&ctx->w, BTRFS_SEND_A_CLONE_UUID, sv->uuid);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_CLONE_CTRANSID, sv->ctransid);
	stream_put_string(&ctx->w, BTRFS_SEND_A_CLONE_PATH, from);
	stream_put_u64(&ctx->w, BTRFS_SEND_A_CLONE_OFFSET, p->src_off);
	ctx->stats->clones++;
	ctx->stats->clone_bytes += len;
	return send_end_cmd(ctx);
}

/*
 * The extent on disk (regular or preallocated) holding file offset @pos
 * in @map, or NULL.
 */
static const struct file_extent *allocated_at(const struct extent_map *map,
					      uint64_t pos)
{
	size_t lo = 0, hi = map->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct file_extent *fe = &map->ext[mid];

		if (pos < fe->offset)
			hi = mid;
		else if (pos >= fe->offset + fe->len)
			lo = mid + 1;
		else
			return (fe->kind == EXTENT_REGULAR ||
				fe->kind == EXTENT_PREALLOC) &&
					       fe->disk_bytenr ?
				       fe :
				       NULL;
	}
	return NULL;
}

/*
 * @len bytes at @pos of the file mapped in @a and at @src_pos of the one
 * mapped in @b are the same extent's, at the same place in it, all along:
 * the same data.
 */
static bool same_extents(const struct extent_map *a, uint64_t pos,
			 const struct extent_map *b, uint64_t src_pos,
			 uint64_t len)
{
	while (len) {
		const struct file_extent *x = allocated_at(a, pos);
		const struct file_extent *y = allocated_at(b, src_pos);
		uint64_t n;

		if (!x || !y || x->disk_bytenr != y->disk_bytenr ||
		    x->kind != y->kind || x->compression != y->compression ||
		    x->extent_offset + (pos - x->offset) !=
			    y->extent_offset + (src_pos - y->offset))
			return false;
		n = x->offset + x->len - pos;
		if (y->offset + y->len - src_pos < n)
			n = y->offset + y->len - src_pos;
		if (len < n)
			n = len;
		pos += n;
		src_pos += n;
		len -= n;
	}
	return true;
}

/* The map of share file @id now, opened by its handle beside @fd. */
static int map_source(struct send_ctx *ctx, int fd, uint32_t id)
{
	int src, ret;

	if (ctx->check_src == id + 1)
		return 0;
	extent_map_release(&ctx->check_src_map);
	ctx->check_src = 0;
	src = share_file_open(share_file_get(&ctx->share, id), fd);
	if (src < 0)
		return src;
	ret = extent_map_build(src, &ctx->check_src_map);
	close(src);
	if (!ret)
		ctx->check_src = id + 1;
	return ret;
}

static bool clone_holds(struct send_ctx *ctx, int fd,
			const struct send_piece *p)
{
	if (!ctx->check_map_made) {
		if (extent_map_build(fd, &ctx->check_map))
			return false;
		ctx->check_map_made = true;
	}
	if (map_source(ctx, fd, p->file))
		return false;
	return ctx->check_map.source == EXTENT_SOURCE_TREE_SEARCH &&
	       ctx->check_src_map.source == EXTENT_SOURCE_TREE_SEARCH &&
	       same_extents(&ctx->check_map, p->start, &ctx->check_src_map,
			    p->src_off, p->end - p->start);
}

int send_clone_checked(struct send_ctx *ctx, int fd, const char *path,
		       const struct send_piece *p)
{
	if (clone_holds(ctx, fd, p))
		return send_clone(ctx, path, p);
	return send_range_plain(ctx, fd, path, p->start, p->end);
}

void send_clone_checks_end(struct send_ctx *ctx)
{
	if (ctx->check_map_made)
		extent_map_release(&ctx->check_map);
	ctx->check_map_made = false;
	if (ctx->check_src)
		extent_map_release(&ctx->check_src_map);
	ctx->check_src = 0;
}

static void *candidates_thread(void *arg)
{
	struct share_candidates *c = arg;

	c->ret = send_share_candidates(c->ctx, c->fd, &c->st, c->below,
				       &c->inos, &c->nr);
	return NULL;
}

/* The thread takes no SIGINT or SIGTERM: they are for the walk's. */
void send_share_candidates_start(struct share_candidates *c,
				 struct send_ctx *ctx, int root_fd,
				 const struct stat *root_st, uint64_t below)
{
	sigset_t block, old;

	memset(c, 0, sizeof(*c));
	c->ctx = ctx;
	c->fd = root_fd;
	c->st = *root_st;
	c->below = below;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	c->started = !pthread_create(&c->thread, NULL, candidates_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int send_share_candidates_wait(struct share_candidates *c)
{
	if (c->started)
		pthread_join(c->thread, NULL);
	else
		candidates_thread(c);
	c->started = false;
	return c->ret;
}
