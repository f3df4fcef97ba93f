// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, the walk of a source tree: its entries in pre-order, each read
 * and opened by its name in its open directory, never by a path from the
 * root; small files and symlinks of a read-only source from its items.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tree/tree_internal.h"

static void walk_level_close(struct walk_level *lvl)
{
	closedir(lvl->dir);
	dst_dir_put(lvl->dst);
}

void tree_walk_reset(struct walker *w, const char *src_root)
{
	while (w->depth)
		walk_level_close(&w->levels[--w->depth]);
	w->src_root = src_root;
	w->root_done = false;
	w->rel[0] = '\0';
	w->name_at = 0;
}

void tree_walk_release(struct walker *w)
{
	tree_walk_reset(w, NULL);
	free(w->levels);
	w->levels = NULL;
	w->cap = 0;
}

/*
 * The next entry into w->rel and w->st: 1, 0 at the end of the tree, or
 * -errno for an entry (or directory) that could not be read, w->rel naming
 * it. Directories are entered only by tree_walk_descend().
 */
int tree_walk_next(struct walker *w)
{
	struct walk_level *top;
	struct dirent *de;
	size_t len;

	if (!w->root_done) {
		w->root_done = true;
		w->rel[0] = '\0';
		w->name_at = 0;
		w->st_pending = false;
		return lstat(w->src_root, &w->st) ? -errno : 1;
	}
	while (w->depth) {
		top = &w->levels[w->depth - 1];
		errno = 0;
		de = readdir(top->dir);
		if (!de) {
			int err = errno;

			walk_level_close(top);
			w->depth--;
			if (err) {
				w->rel[top->prefix ? top->prefix - 1 : 0] =
					'\0';
				return -err;
			}
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		len = strlen(de->d_name);
		if (top->prefix + len >= sizeof(w->rel)) {
			snprintf(w->rel + top->prefix,
				 sizeof(w->rel) - top->prefix, "%s",
				 de->d_name);
			return -ENAMETOOLONG;
		}
		memcpy(w->rel + top->prefix, de->d_name, len + 1);
		w->name_at = top->prefix;
		w->d_ino = de->d_ino;
		w->st_pending =
			(de->d_type == DT_REG || de->d_type == DT_LNK) &&
			!w->stat_files;
		if (w->st_pending) {
			memset(&w->st, 0, sizeof(w->st));
			w->st.st_mode = DTTOIF(de->d_type);
			return 1;
		}
		if (fstatat(dirfd(top->dir), de->d_name, &w->st,
			    AT_SYMLINK_NOFOLLOW))
			return -errno;
		return 1;
	}
	return 0;
}

/* The entry the last tree_walk_next() returned, in its source directory. */
struct entry_at tree_walk_src_at(const struct walker *w, const char *path)
{
	if (!w->depth)
		return (struct entry_at){ AT_FDCWD, path };
	return (struct entry_at){ dirfd(w->levels[w->depth - 1].dir),
				  w->rel + w->name_at };
}

/*
 * Open the regular file the last tree_walk_next() returned, its stat in @st.
 * It may have been replaced since readdir: a directory is -EISDIR,
 * anything else but a regular file -EINVAL (a FIFO put there must not
 * block the walk).
 */
int tree_walk_open_file(const struct walker *w, const char *path,
			struct stat *st)
{
	const int flags = O_RDONLY | O_NOFOLLOW;
	struct entry_at at = tree_walk_src_at(w, path);
	int fd = open_regular_at(at.dir, at.name, flags | O_NOATIME, 0, st);

	if (fd == -EPERM) /* O_NOATIME on someone else's */
		fd = open_regular_at(at.dir, at.name, flags, 0, st);
	return fd;
}

/* Enter the directory the last tree_walk_next() returned. */
int tree_walk_descend(struct walker *w)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	size_t len = strlen(w->rel);
	struct walk_level *lvl;
	int fd;

	if (len + 2 >= sizeof(w->rel))
		return -ENAMETOOLONG;
	if (w->depth)
		fd = openat(dirfd(w->levels[w->depth - 1].dir),
			    w->rel + w->name_at, flags | O_NOATIME);
	else
		fd = open(w->src_root, flags | O_NOATIME);
	if (fd < 0 && errno == EPERM) /* O_NOATIME on someone else's */
		fd = w->depth ? openat(dirfd(w->levels[w->depth - 1].dir),
				       w->rel + w->name_at, flags) :
				open(w->src_root, flags);
	if (fd < 0)
		return -errno;
	lvl = vec_grow(w->levels, w->depth, &w->cap, sizeof(*lvl));
	if (!lvl) {
		close(fd);
		return -ENOMEM;
	}
	w->levels = lvl;
	lvl = &w->levels[w->depth];
	lvl->dir = fdopendir(fd);
	if (!lvl->dir) {
		close(fd);
		return -errno;
	}
	if (len) {
		w->rel[len] = '/';
		w->rel[len + 1] = '\0';
		len++;
	}
	lvl->dst = NULL;
	lvl->dev = w->st.st_dev;
	lvl->prefix = len;
	lvl->fresh = false;
	lvl->acl_default = false;
	w->depth++;
	return 0;
}

/*
 * Walker: the current entry from the items of a read-only source (see
 * inline_files.h), or NULL.
 */
struct inline_file *tree_walk_inline_file(struct tree *t)
{
	const struct walk_level *lvl;

	if (!t->inline_ok || !t->walk.depth)
		return NULL;
	lvl = &t->walk.levels[t->walk.depth - 1];
	if (lvl->dev != t->src_dev)
		return NULL;
	return inline_files_get(&t->inline_files, dirfd(lvl->dir), lvl->dev,
				t->walk.d_ino);
}

void tree_walk_inline_file_stat(const struct tree *t,
				const struct inline_file *inl, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = t->src_dev;
	st->st_ino = inl->ino;
	st->st_mode = inl->mode;
	st->st_nlink = 1;
	st->st_uid = inl->uid;
	st->st_gid = inl->gid;
	st->st_size = inl->size;
	st->st_atim = inl->atime;
	st->st_mtim = inl->mtime;
}
