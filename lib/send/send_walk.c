// SPDX-License-Identifier: GPL-2.0
/*
 * The names of a tree a full send walks, listed before anything is sent, so
 * that inodes can be sent in inode-number order over the whole tree, the
 * kernel's send order: of two files sharing data, the one btrfs send sends
 * the data of comes first and the other clones it, and a file is written
 * under a path no longer than the one btrfs send writes it under.
 *
 * The directories are opened again when their entries are sent, each by
 * name in its parent opened before (O_NOFOLLOW, never by a full path), and
 * checked to be the inode listed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "send/send_internal.h"

static int node_push(struct send_walk *w, uint64_t ino, uint32_t parent,
		     uint32_t seq, const char *name, unsigned char type)
{
	struct send_node *nv, *n;

	if (w->nr == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 1024;
		nv = realloc(w->nodes, w->cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		w->nodes = nv;
	}
	n = &w->nodes[w->nr];
	n->name = strdup(name);
	if (!n->name)
		return -ENOMEM;
	n->ino = ino;
	n->parent = parent;
	n->seq = seq;
	n->type = type;
	n->created = parent == SEND_NODE_NONE;
	n->orphan = false;
	w->nr++;
	return 0;
}

static int path_of(const struct send_walk *w, uint32_t node, char *buf,
		   bool stream);

int send_walk_set_src(struct send_ctx *ctx, uint32_t node)
{
	char rel[PATH_MAX];
	int ret = path_of(&ctx->walk, node, rel, false);

	if (!ret && (size_t)snprintf(ctx->src, sizeof(ctx->src), "%s%s%s",
				     ctx->walk.root, *rel ? "/" : "",
				     rel) >= sizeof(ctx->src))
		ret = -ENAMETOOLONG;
	return ret;
}

static int walk_fail(struct send_ctx *ctx, uint32_t node, int err,
		     const char *op)
{
	send_walk_set_src(ctx, node);
	return send_fail(ctx, err, op, 0, false);
}

static int list_dir_into(struct send_ctx *ctx, int fd, uint32_t dir);

/* Whether entry @name of @dir_fd (on @dev) is one the walk leaves out. */
static bool left_out(int dir_fd, dev_t dev, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
		return false;
	return !fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
	       S_ISDIR(st.st_mode) && st.st_dev != dev;
}

/*
 * A directory that is not a subvolume's root, whose entries are all
 * nested subvolumes (or, in a snapshot, the empty directories standing
 * for them), would go as an empty subvolume: the walk leaves them out,
 * as btrfs send does. That is most often the arguments swapped (encio
 * send /snapshots): refused, as btrfs send refuses any directory that
 * is not a subvolume.
 */
static int only_nested(int fd, bool *only)
{
	size_t nested = 0;
	struct dirent *de;
	struct stat st;
	int dfd;
	DIR *d;

	*only = false;
	if (fstat(fd, &st))
		return -errno;
	dfd = dup(fd);
	if (dfd < 0)
		return -errno;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!left_out(fd, st.st_dev, de))
			break;
		nested++;
	}
	*only = !de && !errno && nested;
	closedir(d);
	return 0;
}

int send_check_path(const char *path, struct encio_error *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;
	bool only = false;

	if (fd < 0)
		return encio_error_set(e, errno, "open", path, false, 0);
	ret = btrfs_util_is_subvolume_fd(fd) == BTRFS_UTIL_OK ?
		      0 :
		      only_nested(fd, &only);
	close(fd);
	if (ret)
		return encio_error_set(e, -ret, "read directory", path, false,
				       0);
	if (only)
		return encio_error_set(
			e, EINVAL,
			"send (not a subvolume, and it holds only nested subvolumes, left out as btrfs send leaves them: give the subvolumes)",
			path, false, 0);
	return 0;
}

/*
 * Child directory @child of @fd: listed in turn, unless it is on another
 * device (a nested subvolume, or the empty directory standing for one in
 * a snapshot, inode 2, its times made up at each lookup; btrfs send leaves
 * both out), then it is dropped from the list.
 */
static int list_child_dir(struct send_ctx *ctx, int fd, uint32_t child)
{
	struct send_node *n = &ctx->walk.nodes[child];
	struct stat st;
	int cfd, ret;

	cfd = openat(fd, n->name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cfd < 0)
		return walk_fail(ctx, child, errno, "open");
	if (fstat(cfd, &st)) {
		ret = walk_fail(ctx, child, errno, "stat");
	} else if (st.st_dev != ctx->root_dev) {
		n->type = DT_UNKNOWN;
		ret = 0;
	} else if (st.st_ino != n->ino) {
		ret = walk_fail(ctx, child, EAGAIN,
				"send (replaced while read)");
	} else {
		ret = list_dir_into(ctx, cfd, child);
	}
	close(cfd);
	return ret;
}

/* The entries of directory node @dir, open at @fd, and those beneath. */
static int list_dir_into(struct send_ctx *ctx, int fd, uint32_t dir)
{
	struct send_walk *w = &ctx->walk;
	size_t first = w->nr, i;
	uint32_t seq = 0;
	struct dirent *de;
	struct stat st;
	int dfd = dup(fd), ret = 0;
	unsigned char type;
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return walk_fail(ctx, dir, errno, "open directory");
	}
	rewinddir(d);
	while (!ret && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		type = de->d_type;
		if (type == DT_UNKNOWN) {
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			type = IFTODT(st.st_mode);
		}
		ret = node_push(w, de->d_ino, dir, seq++, de->d_name, type);
		if (ret)
			ret = walk_fail(ctx, dir, ENOMEM, "list");
	}
	if (!ret && errno)
		ret = walk_fail(ctx, dir, errno, "read directory");
	closedir(d);
	for (i = first; !ret && i < w->nr; i++) {
		if (w->nodes[i].parent != dir || w->nodes[i].type != DT_DIR)
			continue;
		ret = send_stopped(ctx) ?: list_child_dir(ctx, fd, i);
	}
	return ret;
}

static const struct send_walk *sort_walk;

static int order_cmp(const void *a, const void *b)
{
	const struct send_node *x = &sort_walk->nodes[*(const uint32_t *)a];
	const struct send_node *y = &sort_walk->nodes[*(const uint32_t *)b];
	uint64_t px = sort_walk->nodes[x->parent].ino;
	uint64_t py = sort_walk->nodes[y->parent].ino;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (px != py)
		return px < py ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int root_name_cmp(const void *a, const void *b)
{
	return strcmp(sort_walk->nodes[*(const uint32_t *)a].name,
		      sort_walk->nodes[*(const uint32_t *)b].name);
}

/*
 * The order of the links of one inode is that of its inode refs in the
 * kernel (the parent with the lower inode number first; in one directory,
 * the name made first, which readdir of btrfs gives first), so the first
 * is the one btrfs send writes the inode's data under.
 */
static int sort_nodes(struct send_walk *w)
{
	size_t i;

	w->order = malloc((w->nr ? w->nr : 1) * sizeof(*w->order));
	w->root_names = malloc((w->nr ? w->nr : 1) * sizeof(*w->root_names));
	if (!w->order || !w->root_names)
		return -ENOMEM;
	for (i = 1; i < w->nr; i++) {
		if (w->nodes[i].type == DT_UNKNOWN)
			continue;
		w->order[w->nr_order++] = i;
		if (w->nodes[i].parent == 0)
			w->root_names[w->nr_root_names++] = i;
	}
	sort_walk = w;
	qsort(w->order, w->nr_order, sizeof(*w->order), order_cmp);
	qsort(w->root_names, w->nr_root_names, sizeof(*w->root_names),
	      root_name_cmp);
	sort_walk = NULL;
	return 0;
}

int send_walk_list(struct send_ctx *ctx, int root_fd, const char *root,
		   const struct stat *st)
{
	struct send_walk *w = &ctx->walk;
	int ret;

	send_walk_release(w);
	w->root = strdup(root);
	w->root_fd = root_fd;
	ret = w->root ?
		      node_push(w, st->st_ino, SEND_NODE_NONE, 0, "", DT_DIR) :
		      -ENOMEM;
	if (ret)
		return send_fail(ctx, ENOMEM, "list", 0, false);
	ret = list_dir_into(ctx, root_fd, 0);
	if (!ret && sort_nodes(w))
		ret = send_fail(ctx, ENOMEM, "list", 0, false);
	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	return ret;
}

void send_walk_release(struct send_walk *w)
{
	size_t i;

	for (i = 0; i < w->nr; i++)
		free(w->nodes[i].name);
	for (i = 0; i < SEND_DIR_CACHE; i++)
		if (w->cache[i].fd >= 0 && w->cache[i].used)
			close(w->cache[i].fd);
	free(w->nodes);
	free(w->order);
	free(w->root_names);
	free(w->root);
	memset(w, 0, sizeof(*w));
}

static bool root_has(const struct send_walk *w, const char *name)
{
	size_t lo = 0, hi = w->nr_root_names, mid;
	int c;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		c = strcmp(name, w->nodes[w->root_names[mid]].name);
		if (!c)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

/*
 * The orphan name of directory node @node, into @name (NAME_MAX + 1 bytes):
 * btrfs send's form with generation 0, so never longer than the one btrfs
 * send gives it, and none of the root's entries.
 */
static void send_walk_orphan_name(const struct send_walk *w, uint32_t node,
				  char *name)
{
	unsigned int n = 0;

	do
		snprintf(name, NAME_MAX + 1, "o%llu-0-%u",
			 (unsigned long long)w->nodes[node].ino, n++);
	while (root_has(w, name));
}

/*
 * The path of @node into @buf: in the stream now if @stream (from the
 * orphan name of the lowest directory above it made under one), else in
 * the source.
 */
static int path_of(const struct send_walk *w, uint32_t node, char *buf,
		   bool stream)
{
	char orphan[NAME_MAX + 1];
	size_t len = 0, nlen;
	uint32_t n, top = 0;

	for (n = node; n && n != SEND_NODE_NONE; n = w->nodes[n].parent) {
		if (stream && w->nodes[n].orphan) {
			top = n;
			send_walk_orphan_name(w, n, orphan);
			len += strlen(orphan) + (len ? 1 : 0);
			break;
		}
		len += strlen(w->nodes[n].name) + (len ? 1 : 0);
	}
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	buf[len] = '\0';
	for (n = node; n && n != SEND_NODE_NONE; n = w->nodes[n].parent) {
		const char *name = n == top ? orphan : w->nodes[n].name;

		nlen = strlen(name);
		len -= nlen;
		memcpy(buf + len, name, nlen);
		if (n == top)
			break;
		if (len)
			buf[--len] = '/';
	}
	return 0;
}

int send_walk_path(const struct send_walk *w, uint32_t node, char *buf)
{
	return path_of(w, node, buf, true);
}

size_t send_walk_links(const struct send_walk *w, size_t pos)
{
	uint64_t ino = w->nodes[w->order[pos]].ino;
	size_t links = 1;

	while (pos + links < w->nr_order &&
	       w->nodes[w->order[pos + links]].ino == ino)
		links++;
	return links;
}

/* The least recently used slot of the cache, its descriptor closed. */
static struct send_dir_slot *cache_victim(struct send_walk *w)
{
	struct send_dir_slot *v = &w->cache[0];
	size_t i;

	for (i = 0; i < SEND_DIR_CACHE; i++) {
		if (!w->cache[i].used)
			return &w->cache[i];
		if (w->cache[i].used < v->used)
			v = &w->cache[i];
	}
	close(v->fd);
	v->used = 0;
	return v;
}

int send_walk_dirfd(struct send_ctx *ctx, uint32_t dir)
{
	struct send_walk *w = &ctx->walk;
	struct send_node *n = &w->nodes[dir];
	struct send_dir_slot *slot;
	struct stat st;
	int pfd, fd;
	size_t i;

	if (dir == 0)
		return w->root_fd;
	for (i = 0; i < SEND_DIR_CACHE; i++) {
		if (w->cache[i].used && w->cache[i].node == dir) {
			w->cache[i].used = ++w->tick;
			return w->cache[i].fd;
		}
	}
	pfd = send_walk_dirfd(ctx, n->parent);
	if (pfd < 0)
		return pfd;
	fd = openat(pfd, n->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return walk_fail(ctx, dir, errno, "open");
	if (fstat(fd, &st) || st.st_ino != n->ino ||
	    st.st_dev != ctx->root_dev) {
		close(fd);
		return walk_fail(ctx, dir, EAGAIN,
				 "send (replaced while read)");
	}
	/* a parent just opened stays: its slot is used more recently */
	slot = cache_victim(w);
	slot->node = dir;
	slot->fd = fd;
	slot->used = ++w->tick;
	return fd;
}
