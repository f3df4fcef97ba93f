// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, the walker thread: every source tree, entry by entry, each made
 * in DEST (directories, symlinks, special files) or opened and queued for
 * the ring thread (regular files). See tree.c for the threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/kernel.h"
#include "tree/tree_internal.h"

static int join_path(char *buf, const char *root, const char *rel)
{
	int n = rel[0] ? snprintf(buf, PATH_MAX, "%s/%s", root, rel) :
			 snprintf(buf, PATH_MAX, "%s", root);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/*
 * Whether directory @fd is the directory (@dev, @ino) or below it, by
 * climbing ".." to the top. @fd is closed.
 */
static bool dir_within(int fd, dev_t dev, ino_t ino)
{
	struct stat cur, up;
	bool within = false;
	int parent;

	while (fd >= 0 && !fstat(fd, &cur)) {
		if (cur.st_dev == dev && cur.st_ino == ino) {
			within = true;
			break;
		}
		parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = parent;
		if (fd < 0 || fstat(fd, &up) ||
		    (up.st_dev == cur.st_dev && up.st_ino == cur.st_ino))
			break;
	}
	if (fd >= 0)
		close(fd);
	return within;
}

/*
 * Refuse a source root that DEST's copy would land on or inside of, before
 * anything is made: copying a directory onto itself changes nothing it
 * could report, and into itself never ends.
 */
static int root_target_check(struct tree *t)
{
	const struct stat *st = &t->walk.st;
	struct entry_at at = tree_entry_dst_at(t);
	struct stat cur;

	if (!fstatat(at.dir, at.name, &cur, AT_SYMLINK_NOFOLLOW) &&
	    cur.st_dev == st->st_dev && cur.st_ino == st->st_ino) {
		tree_entry_error(t, EINVAL, "copy onto itself", t->dst_final);
		return -EINVAL;
	}
	if (!S_ISDIR(st->st_mode))
		return 0;
	/* DEST's copy is made in dest_dir */
	if (dir_within(openat(at.dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
		       st->st_dev, st->st_ino)) {
		tree_entry_error(t, EINVAL, "copy a directory into itself, as",
				 t->dst_final);
		return -EINVAL;
	}
	return 0;
}

/*
 * A subvolume's root below the source root, left out with
 * skip_subvolumes: a directory on another device numbered as btrfs numbers
 * the root directory of every subvolume. So is the empty directory that
 * stands for a subvolume nested in the one a snapshot was taken of
 * (numbered BTRFS_EMPTY_SUBVOL_DIR_OBJECTID, no inode of its own), as
 * btrfs send leaves it out: the kernel's differences against the copy know
 * nothing of it, and would fail to remove the directory holding it.
 */
static bool nested_subvolume(const struct tree *t)
{
	const struct stat *st = &t->walk.st;

	if (!t->opts->skip_subvolumes || !S_ISDIR(st->st_mode))
		return false;
	if (st->st_ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return true;
	return st->st_dev != t->src_dev &&
	       st->st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

/*
 * Walker: handle the walk's current entry, made in DEST through @at (its
 * name in its directory's copy; @dst for messages).
 */
static void tree_entry(struct tree *t)
{
	char src[PATH_MAX], dst[PATH_MAX];
	mode_t type = t->walk.st.st_mode & S_IFMT;
	struct entry_at at;

	if (join_path(src, t->walk.src_root, t->walk.rel) ||
	    join_path(dst, t->dst_root, t->walk.rel)) {
		tree_entry_error(t, ENAMETOOLONG, "copy", t->walk.rel);
		return;
	}
	if (!t->walk.rel[0] && root_target_check(t))
		return;
	if (t->walk.rel[0] && nested_subvolume(t))
		return;
	at = tree_entry_dst_at(t);
	switch (type) {
	case S_IFDIR:
		tree_entry_dir(t, src, dst, at);
		break;
	case S_IFREG:
		tree_file_prepare(t, src, dst, at);
		break;
	default:
		tree_entry_special(t, src, dst, at);
		break;
	}
}

static int tree_root_begin(struct tree *t)
{
	char tmp[PATH_MAX];
	const char *src = t->srcs[t->root];
	int n;

	snprintf(tmp, sizeof(tmp), "%s", src);
	if (t->dest_is_dir)
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%.*s/%s",
			     (int)path_trimmed_len(t->dest), t->dest,
			     basename(tmp));
	else
		n = snprintf(t->dst_root, sizeof(t->dst_root), "%.*s",
			     (int)(path_trimmed_len(t->dest) ?: 1), t->dest);
	if (n < 0 || n >= (int)sizeof(t->dst_root))
		return -ENAMETOOLONG;
	/* the copy's name in dest_dir, DEST's directory (tree_setup()) */
	if (t->dest_is_dir)
		t->root_off = path_trimmed_len(t->dest) + 1;
	else
		t->root_off =
			strrchr(t->dst_root, '/') ?
				strrchr(t->dst_root, '/') - t->dst_root + 1 :
				0;
	memcpy(t->dst_final, t->dst_root, n + 1);
	tree_walk_reset(&t->walk, src);
	t->have_root_id = false;
	return 0;
}

/*
 * Whether the source root is read-only (a btrfs subvolume or a mount), and
 * then small files from the tree where it is btrfs; not with --verify,
 * which compares each copy with its source read plain.
 */
static void tree_source_begin(struct tree *t)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	long fs_type;
	bool frozen;
	int fd;

	t->inline_ok = t->src_frozen = false;
	t->src_dev = t->walk.st.st_dev;
	if (!S_ISDIR(t->walk.st.st_mode))
		return;
	fd = open(t->walk.src_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	t->src_frozen = !extent_fs_kind(fd, &fs_type, &frozen) && frozen;
	/*
	 * Small files are made from the tree's items, never opened, so never
	 * flushed one by one: data written just before the subvolume was made
	 * read-only reaches its items only through this flush.
	 */
	t->inline_ok = t->src_frozen && !t->ctx->opts.verify &&
		       fs_type == BTRFS_SUPER_MAGIC &&
		       !ioctl(fd, BTRFS_IOC_FS_INFO, &fi) && !syncfs(fd) &&
		       !inline_files_init(&t->inline_files, fi.sectorsize,
					  fi.nodesize);
	close(fd);
}

/* The walker thread: every source tree, entry by entry. */
void *tree_walk_thread(void *arg)
{
	struct tree *t = arg;
	char path[PATH_MAX];
	int ret;

	for (t->root = 0; t->root < t->nr_srcs; t->root++) {
		ret = tree_root_begin(t);
		if (ret) {
			tree_entry_error(t, ret, "copy", t->srcs[t->root]);
			continue;
		}
		while (!tree_stop_requested(t)) {
			ret = tree_walk_next(&t->walk);
			if (ret == 0)
				break;
			if (ret > 0) {
				if (!t->walk.rel[0]) {
					meta_prefetch_start(&t->prefetch,
							    AT_FDCWD,
							    t->walk.src_root,
							    &t->walk.st,
							    &t->walked, 0);
					tree_source_begin(t);
				}
				tree_entry(t);
				meta_prefetch_walked(&t->walked);
				continue;
			}
			if (join_path(path, t->walk.src_root, t->walk.rel))
				snprintf(path, sizeof(path), "%s", t->walk.rel);
			tree_entry_error(t, ret, "read", path);
		}
		meta_prefetch_stop(&t->prefetch);
		inline_files_release(&t->inline_files);
		t->inline_ok = t->src_frozen = false;
	}
	pthread_mutex_lock(&t->lock);
	t->walk_done = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}
