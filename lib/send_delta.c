// SPDX-License-Identifier: GPL-2.0
/*
 * encio send of what the kernel computes: BTRFS_IOC_SEND with
 * BTRFS_SEND_FLAG_NO_FILE_DATA writes the whole command sequence of a
 * subvolume, or of its difference from a parent (renames, links, unlinks,
 * attributes, CLONE of data shared with the clone sources), with an
 * UPDATE_EXTENT (path, offset, length) wherever file data or a hole goes.
 * Each command is re-framed into our stream as it is, but UPDATE_EXTENT,
 * which becomes the data of that range read from the subvolume:
 * ENCODED_WRITE for compressed extents, WRITE for plain data, a punched
 * hole (version 1: written zeros, as btrfs send does) for a hole in a file
 * the parent had.
 *
 * UPDATE_EXTENT names a path as it is at that point of the stream (new
 * inodes live under orphan names o<ino>-<gen>-<n> until renamed, and a
 * directory may still be waiting for its move), not a path of the
 * subvolume. So the namespace the receiver holds is followed: a table of
 * (directory inode, name) -> inode for every name the stream makes,
 * renames or removes, over the parent snapshot's own entries (looked up
 * there by the directory's path, BTRFS_IOC_INO_LOOKUP). A snapshot keeps
 * its parent's inode numbers, and the stream's mkfile, mkdir and the like
 * carry theirs (INO), so a path resolves to its inode, which is opened in
 * the subvolume through BTRFS_IOC_INO_PATHS.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel.h"
#include "send_priv.h"

#define DELTA_MIN_BUCKETS 4096
/* INO_PATHS answer: the paths of an inode, one is enough. */
#define DELTA_INO_PATHS_LEN (PATH_MAX + 4096)
/* FIEMAP extents asked for per call. */
#define DELTA_FIEMAP_BATCH 64
/* Files open at once in a batch of reads; the engine's depth bounds it. */
#define DELTA_BATCH_FILES 64

/* A name in the receiver's namespace: @ino 0 where it was removed. */
struct delta_name {
	uint64_t dir;
	uint64_t ino;
	struct delta_name *next;
	char name[];
};

/* An inode the stream makes: nothing of it comes from the parent. */
struct delta_made {
	uint64_t ino;
	struct delta_made *next;
};

struct delta_file {
	uint64_t ino;
	int fd;
	bool made; /* by the stream: no parent's data to punch out */
	uint64_t size;
};

/* A range of data (@path set) or a command kept (@type, @len, @staged). */
struct delta_item {
	char *path;
	size_t file; /* in delta.files */
	uint64_t start, end;
	size_t first, last; /* its pieces in ctx->pieces */
	uint16_t type;
	uint32_t len;
	size_t staged;
};

struct delta {
	struct send_ctx *ctx;
	int root_fd;   /* the subvolume sent */
	int parent_fd; /* its parent, or -1 */
	struct delta_name **names;
	size_t nr_buckets;
	size_t nr_names;
	struct delta_made *made[DELTA_MIN_BUCKETS];
	struct btrfs_data_container *ino_paths;
	struct fiemap *fiemap; /* DELTA_FIEMAP_BATCH extents */
	/*
	 * A batch: the ranges of data to fill in and the commands between
	 * them, written out in order once the reads of all are done; its
	 * files open, the last one kept for the next batch.
	 */
	struct delta_file files[DELTA_BATCH_FILES];
	size_t nr_files;
	struct delta_item *items;
	size_t nr_items;
	size_t cap_items;
	unsigned char *staged; /* the bodies of the commands kept */
	size_t staged_len;
	size_t staged_cap;
	const char *name; /* the subvolume's name in the stream, or NULL */
	/*
	 * UPDATE_EXTENTs of one file follow each other, one per extent:
	 * adjacent ones are gathered into one range, whose reads then go
	 * out together, as deep as the engine allows.
	 */
	bool pending;
	char pending_path[PATH_MAX];
	uint64_t pending_start;
	uint64_t pending_end;
};

static uint64_t name_hash(uint64_t dir, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (dir * 0x9e3779b97f4a7c15ULL);
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ULL;
	return h;
}

static struct delta_name **name_slot(struct delta *d, uint64_t dir,
				     const char *name, size_t len)
{
	struct delta_name **p =
		&d->names[name_hash(dir, name, len) % d->nr_buckets];

	for (; *p; p = &(*p)->next)
		if ((*p)->dir == dir && !strncmp((*p)->name, name, len) &&
		    !(*p)->name[len])
			return p;
	return p;
}

static int names_grow(struct delta *d)
{
	size_t nr = d->nr_buckets ? d->nr_buckets * 4 : DELTA_MIN_BUCKETS, i;
	struct delta_name **names = calloc(nr, sizeof(*names)), *n, *next;

	if (!names)
		return -ENOMEM;
	for (i = 0; i < d->nr_buckets; i++) {
		for (n = d->names[i]; n; n = next) {
			uint64_t h =
				name_hash(n->dir, n->name, strlen(n->name));

			next = n->next;
			n->next = names[h % nr];
			names[h % nr] = n;
		}
	}
	free(d->names);
	d->names = names;
	d->nr_buckets = nr;
	return 0;
}

/* (@dir, @name of @len bytes) is now @ino, 0: removed. */
static int name_set(struct delta *d, uint64_t dir, const char *name, size_t len,
		    uint64_t ino)
{
	struct delta_name **p, *n;
	int ret;

	if (d->nr_names >= d->nr_buckets * 2) {
		ret = names_grow(d);
		if (ret)
			return ret;
	}
	p = name_slot(d, dir, name, len);
	if (*p) {
		(*p)->ino = ino;
		return 0;
	}
	n = malloc(sizeof(*n) + len + 1);
	if (!n)
		return -ENOMEM;
	n->dir = dir;
	n->ino = ino;
	n->next = NULL;
	memcpy(n->name, name, len);
	n->name[len] = '\0';
	*p = n;
	d->nr_names++;
	return 0;
}

static bool ino_made(const struct delta *d, uint64_t ino)
{
	const struct delta_made *m;

	for (m = d->made[ino % DELTA_MIN_BUCKETS]; m; m = m->next)
		if (m->ino == ino)
			return true;
	return false;
}

static int ino_make(struct delta *d, uint64_t ino)
{
	struct delta_made *m;

	if (ino_made(d, ino))
		return 0;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ino = ino;
	m->next = d->made[ino % DELTA_MIN_BUCKETS];
	d->made[ino % DELTA_MIN_BUCKETS] = m;
	return 0;
}

/* The entry @name of directory @dir as the parent snapshot has it. */
static int parent_lookup(struct delta *d, uint64_t dir, const char *name,
			 size_t len, uint64_t *ino)
{
	struct btrfs_ioctl_ino_lookup_args args = { .objectid = dir };
	char path[PATH_MAX];
	struct stat st;
	size_t dlen;

	if (ioctl(d->parent_fd, BTRFS_IOC_INO_LOOKUP, &args))
		return -errno;
	/* the directory's path ends in '/', but the root's is empty */
	dlen = strnlen(args.name, sizeof(args.name));
	if (dlen + len + 1 > sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, args.name, dlen);
	memcpy(path + dlen, name, len);
	path[dlen + len] = '\0';
	if (fstatat(d->parent_fd, path, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	*ino = st.st_ino;
	return 0;
}

/* The inode of (@dir, @name) in the receiver's namespace now. */
static int lookup(struct delta *d, uint64_t dir, const char *name, size_t len,
		  uint64_t *ino)
{
	struct delta_name **p = name_slot(d, dir, name, len);

	if (*p) {
		*ino = (*p)->ino;
		return *ino ? 0 : -ENOENT;
	}
	if (d->parent_fd < 0 || ino_made(d, dir))
		return -ENOENT;
	return parent_lookup(d, dir, name, len, ino);
}

/*
 * Split the stream path @path into its directory's inode and its last
 * component (*@name, *@len).
 */
static int resolve_dir(struct delta *d, const char *path, uint64_t *dir,
		       const char **name, size_t *len)
{
	const char *p = path, *slash;
	int ret;

	*dir = BTRFS_FIRST_FREE_OBJECTID;
	while ((slash = strchr(p, '/'))) {
		if (slash > p) {
			ret = lookup(d, *dir, p, slash - p, dir);
			if (ret)
				return ret;
		}
		p = slash + 1;
	}
	*name = p;
	*len = strlen(p);
	return *len ? 0 : -EINVAL;
}

static int resolve(struct delta *d, const char *path, uint64_t *ino)
{
	const char *name;
	uint64_t dir;
	size_t len;
	int ret = resolve_dir(d, path, &dir, &name, &len);

	return ret ?: lookup(d, dir, name, len, ino);
}

static int path_fail(struct delta *d, int err, const char *op, const char *path)
{
	snprintf(d->ctx->src, sizeof(d->ctx->src), "%s", path);
	return send_fail(d->ctx, -err, op, 0, false);
}

/* A path attribute as a string; "" when absent (the root). */
static int attr_path(struct delta *d, const struct stream_cmd *cmd,
		     unsigned int attr, char *buf)
{
	const struct stream_attr *a = &cmd->attr[attr];

	if (!a->present) {
		buf[0] = '\0';
		return 0;
	}
	if (a->len >= PATH_MAX || memchr(a->data, '\0', a->len))
		return path_fail(d, -EBADMSG,
				 "parse a path of the kernel's stream", "");
	memcpy(buf, a->data, a->len);
	buf[a->len] = '\0';
	return 0;
}

static uint64_t attr_u64(const struct stream_cmd *cmd, unsigned int attr)
{
	const struct stream_attr *a = &cmd->attr[attr];
	uint64_t v = 0;

	if (a->present && a->len == sizeof(v))
		memcpy(&v, a->data, sizeof(v));
	return le64toh(v);
}

/* mkfile, mkdir...: the name is the inode's (INO, or its orphan name). */
static int track_create(struct delta *d, const struct stream_cmd *cmd,
			const char *path)
{
	unsigned long long ino = attr_u64(cmd, BTRFS_SEND_A_INO), gen, n;
	const char *name;
	uint64_t dir;
	size_t len;
	int ret;

	ret = resolve_dir(d, path, &dir, &name, &len);
	if (ret)
		return path_fail(d, ret, "follow the kernel's stream at", path);
	if (!ino && sscanf(name, "o%llu-%llu-%llu", &ino, &gen, &n) != 3)
		return path_fail(d, -EBADMSG,
				 "tell the inode of (no INO in the stream)",
				 path);
	ret = ino_make(d, ino) ?: name_set(d, dir, name, len, ino);
	return ret ? path_fail(d, ret, "follow the kernel's stream at", path) :
		     0;
}

/* rename, link, unlink, rmdir: the receiver's namespace follows. */
static int track_names(struct delta *d, const struct stream_cmd *cmd,
		       const char *path)
{
	char to[PATH_MAX];
	const char *name, *to_name;
	uint64_t dir, to_dir, ino = 0;
	size_t len, to_len;
	int ret;

	ret = resolve_dir(d, path, &dir, &name, &len);
	if (!ret && cmd->type == BTRFS_SEND_C_RENAME)
		ret = lookup(d, dir, name, len, &ino);
	if (ret)
		return path_fail(d, ret, "follow the kernel's stream at", path);
	if (cmd->type == BTRFS_SEND_C_LINK) {
		ret = attr_path(d, cmd, BTRFS_SEND_A_PATH_LINK, to);
		if (ret)
			return ret;
		ret = resolve(d, to, &ino);
		if (ret)
			return path_fail(d, ret,
					 "follow the kernel's stream at", to);
		ret = name_set(d, dir, name, len, ino);
	} else if (cmd->type == BTRFS_SEND_C_RENAME) {
		ret = attr_path(d, cmd, BTRFS_SEND_A_PATH_TO, to);
		if (ret)
			return ret;
		ret = resolve_dir(d, to, &to_dir, &to_name, &to_len);
		if (ret)
			return path_fail(d, ret,
					 "follow the kernel's stream at", to);
		ret = name_set(d, dir, name, len, 0) ?:
			      name_set(d, to_dir, to_name, to_len, ino);
	} else {
		ret = name_set(d, dir, name, len, 0);
	}
	return ret ? path_fail(d, ret, "follow the kernel's stream at", path) :
		     0;
}

/* Close the batch's files but the last, which the next range may want. */
static void files_close(struct delta *d, bool all)
{
	size_t keep = !all && d->nr_files ? 1 : 0, i;

	for (i = 0; i + keep < d->nr_files; i++)
		close(d->files[i].fd);
	if (keep)
		d->files[0] = d->files[d->nr_files - 1];
	d->nr_files = keep;
}

/* @name beneath the subvolume's root, no symlink followed, no mount crossed. */
static int open_beneath(int root_fd, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	long fd = syscall(SYS_openat2, root_fd, name, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		fd = openat(root_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return (int)fd;
}

/* Open inode @ino of the subvolume (where @path of the stream is). */
static int file_open(struct delta *d, uint64_t ino, const char *path,
		     struct delta_file *f)
{
	struct btrfs_ioctl_ino_path_args args = {
		.inum = ino,
		.size = DELTA_INO_PATHS_LEN,
		.fspath = (uintptr_t)d->ino_paths,
	};
	struct send_ctx *ctx = d->ctx;
	const char *name;
	struct stat st;
	int fd, ret;

	if (ioctl(d->root_fd, BTRFS_IOC_INO_PATHS, &args))
		return path_fail(d, -errno,
				 "find the inode in the subvolume of", path);
	if (!d->ino_paths->elem_cnt)
		return path_fail(d, -ENOENT,
				 "find the inode in the subvolume of", path);
	name = (const char *)d->ino_paths->val + d->ino_paths->val[0];
	fd = open_beneath(d->root_fd, name);
	if (fd < 0)
		return path_fail(d, -errno, "open", name);
	if (fstat(fd, &st) || st.st_ino != ino || !S_ISREG(st.st_mode)) {
		close(fd);
		return path_fail(d, -ESTALE, "open (not the stream's inode)",
				 name);
	}
	snprintf(ctx->src, sizeof(ctx->src), "%s", name);
	ret = send_probe_file(ctx, fd, &st);
	if (ret) {
		close(fd);
		return ret;
	}
	f->fd = fd;
	f->ino = ino;
	f->made = ino_made(d, ino);
	f->size = st.st_size;
	return 0;
}

/*
 * A range that reads as zeros where the parent's file may have had data:
 * punched (version 1 has no FALLOCATE: zeros written, as btrfs send does).
 */
static int send_zeros(struct delta *d, const char *path, uint64_t start,
		      uint64_t end)
{
	struct send_ctx *ctx = d->ctx;
	uint64_t n;
	int ret;

	if (ctx->w.version >= 2) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_FALLOCATE);
		stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, path);
		stream_put_u32(&ctx->w, BTRFS_SEND_A_FALLOCATE_MODE,
			       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_FILE_OFFSET, start);
		stream_put_u64(&ctx->w, BTRFS_SEND_A_SIZE, end - start);
		return send_end_cmd(ctx);
	}
	memset(ctx->buf, 0, ctx->write_max);
	for (; start < end; start += n) {
		n = end - start < ctx->write_max ? end - start : ctx->write_max;
		ret = send_write(ctx, path, ctx->buf, n, start);
		if (ret)
			return ret;
	}
	return 0;
}

static void fiemap_to_extent(const struct fiemap_extent *fx,
			     struct file_extent *fe)
{
	memset(fe, 0, sizeof(*fe));
	fe->offset = fx->fe_logical;
	fe->len = fx->fe_length;
	fe->kind = EXTENT_REGULAR;
	fe->compression = BTRFS_COMPRESS_NONE;
	if (fx->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
		fe->kind = EXTENT_PREALLOC;
	if (fx->fe_flags & FIEMAP_EXTENT_DATA_INLINE)
		fe->kind = EXTENT_INLINE;
	/* compressed, of an algorithm the encoded read tells */
	if (fx->fe_flags & FIEMAP_EXTENT_ENCODED)
		fe->compression = ENCIO_COMPRESS_UNKNOWN;
}

/*
 * The extents of [@start, @end) of @f into @map, holes included: FIEMAP of
 * that range only, so a small change in a large file costs no map of all
 * of it (the snapshot is read-only: nothing is delayed).
 */
static int map_range(struct delta *d, const struct delta_file *f,
		     uint64_t start, uint64_t end, struct extent_map *map)
{
	struct fiemap *fm = d->fiemap;
	struct file_extent fe;
	uint64_t pos = start;
	uint32_t i;
	int ret;

	memset(map, 0, sizeof(*map));
	map->size = f->size;
	map->source = EXTENT_SOURCE_FIEMAP;
	while (pos < end) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = pos;
		fm->fm_length = end - pos;
		fm->fm_extent_count = DELTA_FIEMAP_BATCH;
		if (ioctl(f->fd, FS_IOC_FIEMAP, fm) < 0)
			return -errno;
		if (!fm->fm_mapped_extents)
			break;
		for (i = 0; i < fm->fm_mapped_extents && pos < end; i++) {
			fiemap_to_extent(&fm->fm_extents[i], &fe);
			if (fe.offset + fe.len <= pos)
				continue;
			if (fe.offset < pos) {
				fe.len -= pos - fe.offset;
				fe.offset = pos;
			}
			if (fe.offset + fe.len > end)
				fe.len = end - fe.offset;
			ret = extent_map_add(map, &fe);
			if (ret)
				return ret;
			pos = fe.offset + fe.len;
			if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_LAST)
				pos = end;
		}
	}
	return extent_map_finish(map);
}

/*
 * The data ranges of @f within [@start, @end) into @sub; with @holes, the
 * holes and prealloc there sent as zeros (a file the stream made has no
 * old data to hide: nothing).
 */
static int clip_map(struct delta *d, const struct delta_file *f,
		    const char *path, uint64_t start, uint64_t end,
		    struct extent_map *sub, bool holes)
{
	struct extent_map map;
	size_t i;
	int ret;

	memset(sub, 0, sizeof(*sub));
	sub->size = f->size;
	sub->source = EXTENT_SOURCE_FIEMAP;
	ret = map_range(d, f, start, end, &map);
	if (ret)
		ret = send_fail(d->ctx, ret, "map extents of", start, true);
	for (i = 0; !ret && i < map.nr; i++) {
		struct file_extent fe = map.ext[i];
		uint64_t fe_end = fe.offset + fe.len;

		if (fe_end <= start || fe.offset >= end)
			continue;
		if (fe.offset < start)
			fe.offset = start;
		if (fe_end > end)
			fe_end = end;
		fe.len = fe_end - fe.offset;
		if (fe.kind != EXTENT_HOLE && fe.kind != EXTENT_PREALLOC) {
			ret = extent_map_add(sub, &fe);
			if (ret)
				ret = send_fail(d->ctx, ret, "map extents of",
						fe.offset, true);
		} else if (holes && !f->made) {
			ret = send_zeros(d, path, fe.offset, fe_end);
		}
	}
	extent_map_release(&map);
	if (ret)
		extent_map_release(sub);
	return ret;
}

/* Reads of one item beyond the engine's depth: in windows, in order. */
static int item_windows(struct delta *d, const struct delta_item *it, int fd)
{
	struct send_ctx *ctx = d->ctx;
	size_t depth = ctx->engine.depth, i, last;
	bool eof = false;
	int ret = 0;

	for (i = it->first; !ret && i < it->last && !eof; i = last) {
		last = i + depth < it->last ? i + depth : it->last;
		send_issue_pieces(ctx, fd, i, last);
		ret = send_emit_pieces(ctx, fd, it->path, i, last, &eof,
				       send_reap_all(ctx));
	}
	return ret;
}

static int item_emit(struct delta *d, const struct delta_item *it, bool issued,
		     int ret)
{
	const struct delta_file *f = &d->files[it->file];
	struct send_ctx *ctx = d->ctx;
	struct stream_cmd cmd;
	struct extent_map sub;
	bool eof = false;

	if (!it->path) {
		if (ret)
			return ret;
		cmd.type = it->type;
		cmd.len = it->len;
		cmd.body = d->staged + it->staged;
		ret = stream_put_cmd(&ctx->w, &cmd);
		return ret ? encio_error_set(ctx->e, ret, "write stream to",
					     ctx->out_name, false, 0) :
			     0;
	}
	/* the holes first: punching them cannot touch the data after */
	if (!ret && !f->made) {
		ret = clip_map(d, f, it->path, it->start, it->end, &sub, true);
		if (!ret)
			extent_map_release(&sub);
	}
	if (issued)
		return send_emit_pieces(ctx, f->fd, it->path, it->first,
					it->last, &eof, ret);
	return ret ?: item_windows(d, it, f->fd);
}

/*
 * Read every range of the batch at once (if they fit the engine's depth,
 * else each in windows), then write the batch in stream order.
 */
static int flush_batch(struct delta *d)
{
	struct send_ctx *ctx = d->ctx;
	bool issued = ctx->nr_pieces <= ctx->engine.depth;
	int ret = 0;
	size_t i;

	if (issued && ctx->nr_pieces) {
		for (i = 0; i < d->nr_items; i++)
			if (d->items[i].path)
				send_issue_pieces(ctx,
						  d->files[d->items[i].file].fd,
						  d->items[i].first,
						  d->items[i].last);
		ret = send_reap_all(ctx);
	}
	for (i = 0; i < d->nr_items; i++) {
		ret = item_emit(d, &d->items[i], issued, ret);
		free(d->items[i].path);
	}
	d->nr_items = 0;
	d->staged_len = 0;
	ctx->nr_pieces = 0;
	files_close(d, false);
	return ret;
}

static struct delta_item *item_new(struct delta *d)
{
	if (d->nr_items == d->cap_items) {
		size_t cap = d->cap_items ? d->cap_items * 2 : 64;
		struct delta_item *items =
			realloc(d->items, cap * sizeof(*items));

		if (!items)
			return NULL;
		d->items = items;
		d->cap_items = cap;
	}
	memset(&d->items[d->nr_items], 0, sizeof(d->items[0]));
	return &d->items[d->nr_items++];
}

/* A command while the batch has ranges to read: kept until they are. */
static int stage_cmd(struct delta *d, const struct stream_cmd *cmd)
{
	struct delta_item *it;

	if (d->staged_len + cmd->len > d->staged_cap) {
		size_t cap = (d->staged_len + cmd->len) * 2;
		unsigned char *staged = realloc(d->staged, cap);

		if (!staged)
			return -ENOMEM;
		d->staged = staged;
		d->staged_cap = cap;
	}
	it = item_new(d);
	if (!it)
		return -ENOMEM;
	it->type = cmd->type;
	it->len = cmd->len;
	it->staged = d->staged_len;
	memcpy(d->staged + d->staged_len, cmd->body, cmd->len);
	d->staged_len += cmd->len;
	return 0;
}

/* The batch's file of inode @ino, opened if it is not there yet. */
static int batch_file(struct delta *d, uint64_t ino, const char *path,
		      size_t *index)
{
	int ret;

	if (d->nr_files && d->files[d->nr_files - 1].ino == ino) {
		*index = d->nr_files - 1;
		return 0;
	}
	if (d->nr_files == DELTA_BATCH_FILES) {
		ret = flush_batch(d);
		if (ret)
			return ret;
	}
	ret = file_open(d, ino, path, &d->files[d->nr_files]);
	if (ret)
		return ret;
	*index = d->nr_files++;
	return 0;
}

/*
 * UPDATE_EXTENT @path [@start, @end): the data of that range of the
 * subvolume's file, holes as holes, into the batch (or, where data goes
 * decoded, at once: pread has no queue to fill).
 */
static int fill_range(struct delta *d, const char *path, uint64_t start,
		      uint64_t end)
{
	struct send_ctx *ctx = d->ctx;
	struct delta_item *it;
	struct extent_map sub;
	size_t file, first;
	uint64_t ino;
	int ret;

	ret = resolve(d, path, &ino);
	if (ret)
		return path_fail(d, ret, "tell the inode of", path);
	ret = batch_file(d, ino, path, &file);
	if (ret)
		return ret;
	if (ctx->probe.read_mode == ENCIO_IO_NONE || ctx->w.version < 2) {
		ret = clip_map(d, &d->files[file], path, start, end, &sub,
			       true);
		if (!ret)
			ret = send_data_plain(ctx, d->files[file].fd, path,
					      &sub);
		extent_map_release(&sub);
		files_close(d, false);
		return ret;
	}
	ret = clip_map(d, &d->files[file], path, start, end, &sub, false);
	if (ret)
		return ret;
	first = ctx->nr_pieces;
	ret = send_map_pieces(ctx, &sub);
	if (!ret && first && ctx->nr_pieces > ctx->engine.depth) {
		/* the batch is full: this range starts the next one */
		ctx->nr_pieces = first;
		ret = flush_batch(d);
		file = 0;
		first = 0;
		ret = ret ?: send_map_pieces(ctx, &sub);
	}
	extent_map_release(&sub);
	if (ret)
		return send_fail(ctx, ret, "map extents of", 0, false);
	it = item_new(d);
	if (!it || !(it->path = strdup(path)))
		return send_fail(ctx, ENOMEM, "send", 0, false);
	it->file = file;
	it->start = start;
	it->end = end;
	it->first = first;
	it->last = ctx->nr_pieces;
	if (ctx->nr_pieces >= ctx->engine.depth)
		return flush_batch(d);
	return 0;
}

/* Fill in the gathered range, before anything else is relayed. */
static int flush_pending(struct delta *d)
{
	if (!d->pending)
		return 0;
	d->pending = false;
	return fill_range(d, d->pending_path, d->pending_start, d->pending_end);
}

static int gather_range(struct delta *d, const char *path, uint64_t offset,
			uint64_t len)
{
	int ret;

	if (d->pending && d->pending_end == offset &&
	    !strcmp(d->pending_path, path)) {
		d->pending_end += len;
		return 0;
	}
	ret = flush_pending(d);
	if (ret)
		return ret;
	strcpy(d->pending_path, path);
	d->pending_start = offset;
	d->pending_end = offset + len;
	d->pending = true;
	return 0;
}

/* SUBVOL or SNAPSHOT, under the name asked for. */
static int put_subvol(struct delta *d, const struct stream_cmd *cmd)
{
	struct send_ctx *ctx = d->ctx;
	unsigned int a;

	if (!d->name)
		return stream_put_cmd(&ctx->w, cmd);
	stream_begin_cmd(&ctx->w, cmd->type);
	stream_put_string(&ctx->w, BTRFS_SEND_A_PATH, d->name);
	for (a = BTRFS_SEND_A_UUID; a <= BTRFS_SEND_A_MAX; a++)
		if (a != BTRFS_SEND_A_PATH && cmd->attr[a].present)
			stream_put_bytes(&ctx->w, a, cmd->attr[a].data,
					 cmd->attr[a].len);
	return stream_end_cmd(&ctx->w);
}

static int relay_cmd(struct delta *d, const struct stream_cmd *cmd)
{
	struct send_ctx *ctx = d->ctx;
	char path[PATH_MAX];
	int ret;

	if (cmd->type == BTRFS_SEND_C_UPDATE_EXTENT && !ctx->opts.no_data) {
		ret = attr_path(d, cmd, BTRFS_SEND_A_PATH, path);
		return ret   ?:
			       gather_range(d, path,
					    attr_u64(cmd,
						     BTRFS_SEND_A_FILE_OFFSET),
					    attr_u64(cmd, BTRFS_SEND_A_SIZE));
	}
	ret = flush_pending(d);
	if (ret)
		return ret;
	if (cmd->type == BTRFS_SEND_C_END || cmd->type == BTRFS_SEND_C_SUBVOL ||
	    cmd->type == BTRFS_SEND_C_SNAPSHOT) {
		ret = flush_batch(d);
		if (ret || cmd->type == BTRFS_SEND_C_END)
			return ret;
		ret = put_subvol(d, cmd);
		goto out;
	}
	if (ctx->opts.no_data)
		goto copy;
	ret = attr_path(d, cmd, BTRFS_SEND_A_PATH, path);
	if (ret)
		return ret;
	switch (cmd->type) {
	case BTRFS_SEND_C_MKFILE:
		ctx->stats->files++;
		ret = track_create(d, cmd, path);
		break;
	case BTRFS_SEND_C_MKDIR:
		ctx->stats->dirs++;
		ret = track_create(d, cmd, path);
		break;
	case BTRFS_SEND_C_MKNOD:
	case BTRFS_SEND_C_MKFIFO:
	case BTRFS_SEND_C_MKSOCK:
	case BTRFS_SEND_C_SYMLINK:
		ctx->stats->others++;
		ret = track_create(d, cmd, path);
		break;
	case BTRFS_SEND_C_RENAME:
	case BTRFS_SEND_C_LINK:
	case BTRFS_SEND_C_UNLINK:
	case BTRFS_SEND_C_RMDIR:
		ret = track_names(d, cmd, path);
		break;
	case BTRFS_SEND_C_CLONE:
		ctx->stats->clones++;
		ctx->stats->clone_bytes +=
			attr_u64(cmd, BTRFS_SEND_A_CLONE_LEN);
		ret = 0;
		break;
	default:
		ret = 0;
		break;
	}
	if (ret)
		return ret;
copy:
	if (d->nr_items) {
		ret = stage_cmd(d, cmd);
		if (ret)
			return send_fail(ctx, ret, "send", 0, false);
		return 0;
	}
	ret = stream_put_cmd(&ctx->w, cmd);
out:
	if (ret)
		return encio_error_set(ctx->e, ret, "write stream to",
				       ctx->out_name, false, 0);
	return 0;
}

static int relay_stream(struct delta *d, int read_fd)
{
	struct send_ctx *ctx = d->ctx;
	struct stream_reader r;
	struct stream_cmd cmd;
	int ret;

	ret = stream_reader_init(&r, read_fd, "the kernel's send stream",
				 ctx->e);
	if (ret)
		return ret;
	if (r.version != ctx->w.version) {
		ret = encio_error_set(
			ctx->e, EPROTO,
			"send (the kernel's stream has another version)",
			ctx->src, false, 0);
		goto out;
	}
	while ((ret = stream_read_cmd(&r, &cmd, ctx->e)) > 0) {
		ret = send_stopped(ctx) ?: relay_cmd(d, &cmd);
		if (ret)
			break;
	}
	if (!ret)
		ret = flush_pending(d) ?: flush_batch(d);
out:
	stream_reader_release(&r);
	return ret;
}

static int delta_init(struct delta *d, struct send_ctx *ctx, int root_fd,
		      const char *parent, const char *name)
{
	memset(d, 0, sizeof(*d));
	d->ctx = ctx;
	d->root_fd = root_fd;
	d->parent_fd = -1;
	d->name = name;
	d->ino_paths = malloc(DELTA_INO_PATHS_LEN);
	d->fiemap = malloc(sizeof(*d->fiemap) +
			   DELTA_FIEMAP_BATCH * sizeof(struct fiemap_extent));
	if (!d->ino_paths || !d->fiemap || names_grow(d))
		return -ENOMEM;
	if (parent) {
		d->parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d->parent_fd < 0)
			return -errno;
	}
	return 0;
}

static void delta_release(struct delta *d)
{
	struct delta_name *n, *next;
	struct delta_made *m, *mnext;
	size_t i;

	for (i = 0; i < d->nr_items; i++)
		free(d->items[i].path);
	free(d->items);
	free(d->staged);
	files_close(d, true);
	for (i = 0; i < d->nr_buckets; i++)
		for (n = d->names[i]; n; n = next) {
			next = n->next;
			free(n);
		}
	for (i = 0; i < DELTA_MIN_BUCKETS; i++)
		for (m = d->made[i]; m; m = mnext) {
			mnext = m->next;
			free(m);
		}
	free(d->names);
	free(d->ino_paths);
	free(d->fiemap);
	if (d->parent_fd >= 0)
		close(d->parent_fd);
}

/* The kernel's pass run now, its stream relayed as it comes. */
static int relay_kernel(struct delta *d, struct kernel_send *ks,
			const char *root)
{
	struct send_ctx *ctx = d->ctx;
	pthread_t thread;
	int read_fd, ret;

	ret = send_kernel_start(ks, &thread, &read_fd);
	if (ret)
		return send_fail(ctx, ret, "start the send of", 0, false);
	ret = relay_stream(d, read_fd);
	/* a relay stopped early: the kernel's next write fails, EPIPE */
	close(read_fd);
	pthread_join(thread, NULL);
	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	if (ks->err && ks->err != EPIPE)
		ret = send_fail(ctx, ks->err, "send (BTRFS_IOC_SEND)", 0,
				false);
	return ret;
}

int send_kernel_tree(struct send_ctx *ctx, const char *root, const char *name,
		     const char *parent, uint64_t parent_id,
		     const uint64_t *clone_ids, size_t nr_clone_ids, bool end)
{
	struct kernel_send ks;
	struct delta d;
	int root_fd, pass_fd = -ESTALE, ret;

	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return send_fail(ctx, errno, "open", 0, false);
	send_kernel_init(&ks, root_fd, parent_id, clone_ids, nr_clone_ids,
			 ctx->w.version);
	ret = delta_init(&d, ctx, root_fd, parent, name);
	if (ret) {
		ret = send_fail(ctx, ret, "start the send of", 0, false);
		goto out;
	}
	/* a pass made before, if made for this: else the kernel's, now */
	if (ctx->opts.pass)
		pass_fd = send_pass_open(ctx->opts.pass, &ks);
	if (pass_fd >= 0) {
		ctx->stats->passes_reused++;
		ret = relay_stream(&d, pass_fd);
		close(pass_fd);
	} else {
		ret = relay_kernel(&d, &ks, root);
	}
	if (!ret && end) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_END);
		ret = send_end_cmd(ctx);
	}
out:
	delta_release(&d);
	close(root_fd);
	return ret;
}
