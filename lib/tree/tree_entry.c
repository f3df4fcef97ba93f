// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, making and placing entries in DEST: DEST's directories held by
 * fd, hidden temporary names, staged trees, hard links, symlinks and
 * special files, directories and their metadata at the end, and whether
 * DEST has an entry complete already (resume).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/kernel.h"
#include "tree/tree_internal.h"

/* A staging directory's mark: the source it is a copy of. */
#define STAGE_XATTR "trusted.encio.staging"

/* The DEST directory the walk's current entry is made in. */
struct dst_dir *tree_entry_dst_dir(const struct tree *t)
{
	const struct walker *w = &t->walk;

	return w->depth ? w->levels[w->depth - 1].dst : t->dest_dir;
}

/* The walk's current entry in its directory's copy. */
struct entry_at tree_entry_dst_at(const struct tree *t)
{
	const struct walker *w = &t->walk;
	const char *root = t->dst_root + t->root_off;

	if (w->depth)
		return (struct entry_at){ w->levels[w->depth - 1].dst->fd,
					  w->rel + w->name_at };
	return (struct entry_at){ t->dest_dir->fd, *root ? root : "." };
}

/* The current entry's directory was made by this run: DEST has nothing. */
bool tree_entry_parent_fresh(const struct tree *t)
{
	return t->walk.depth && t->walk.levels[t->walk.depth - 1].fresh;
}

/* The current entry's directory in DEST has a default ACL. */
bool tree_entry_parent_acl_default(const struct tree *t)
{
	return t->walk.depth ? t->walk.levels[t->walk.depth - 1].acl_default :
			       t->dest_acl_default;
}

/*
 * An entry made by us in a directory this run made (never set-gid while
 * the walk runs) has our ids: where the source's are the same, no chown.
 */
static bool made_with_owner(const struct tree *t, const struct stat *st)
{
	return tree_entry_parent_fresh(t) && tree_meta_ids_ours(st);
}

/* A hidden name beside @at for @make to create in @at.dir; 0 or -errno. */
int tree_entry_make_temp(struct entry_at at, char tmp[NAME_MAX + 1],
			 int (*make)(void *arg, int dir, const char *tmp),
			 void *arg)
{
	static unsigned int counter;
	static int pid;
	int tries, ret;

	for (tries = 0; tries < 100; tries++) {
		snprintf(tmp, NAME_MAX + 1, ".%.200s.encio-%d-%u", at.name,
			 pid ? pid : (pid = getpid()),
			 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
		ret = make(arg, at.dir, tmp);
		if (ret != -EEXIST)
			return ret;
	}
	return -EEXIST;
}

/* @path lies in a staging directory: nothing there is final yet. */
bool tree_entry_in_stage(const struct tree *t, const char *path)
{
	const struct tree_stage *s;

	for (s = t->stages; s < t->stages + t->nr_stages; s++)
		if (!strncmp(path, s->staging, s->len) && path[s->len] == '/')
			return true;
	return false;
}

/*
 * In a staging directory, what an interrupted run left under a name
 * (found incomplete) goes before the entry is made under it again.
 */
int tree_entry_clear_name(struct entry_at at)
{
	return unlinkat(at.dir, at.name, 0) && errno != ENOENT ? -errno : 0;
}

/* ----- hard links ----- */

static size_t inode_hash(dev_t dev, ino_t ino, size_t mask)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	return (h ^ (h >> 29)) & mask;
}

static struct inode_slot *inode_find(struct tree *t, dev_t dev, ino_t ino)
{
	size_t mask = t->cap_inodes - 1, i;

	if (!t->cap_inodes)
		return NULL;
	for (i = inode_hash(dev, ino, mask); t->inodes[i].dst;
	     i = (i + 1) & mask) {
		if (t->inodes[i].dev == dev && t->inodes[i].ino == ino)
			return &t->inodes[i];
	}
	return &t->inodes[i];
}

static int inode_grow(struct tree *t)
{
	struct inode_slot *old = t->inodes, *slot;
	size_t old_cap = t->cap_inodes, i;

	t->cap_inodes = old_cap ? old_cap * 2 : 256;
	t->inodes = calloc(t->cap_inodes, sizeof(*t->inodes));
	if (!t->inodes) {
		t->inodes = old;
		t->cap_inodes = old_cap;
		return -ENOMEM;
	}
	for (i = 0; i < old_cap; i++) {
		if (!old[i].dst)
			continue;
		slot = inode_find(t, old[i].dev, old[i].ino);
		*slot = old[i];
	}
	free(old);
	return 0;
}

/*
 * For an entry with more than one link: true when its inode was copied
 * before (a link to make at the end was queued), else its first name is
 * remembered and false returned.
 */
bool tree_entry_link_seen(struct tree *t, const struct stat *st,
			  const char *dst)
{
	struct inode_slot *slot;
	struct tree_link *l;

	if (st->st_nlink < 2 || S_ISDIR(st->st_mode))
		return false;
	slot = inode_find(t, st->st_dev, st->st_ino);
	if (slot && slot->dst) {
		l = vec_grow(t->links, t->nr_links, &t->cap_links, sizeof(*l));
		if (!l)
			goto nomem;
		t->links = l;
		l = &t->links[t->nr_links];
		l->target = slot->dst;
		l->dst = strdup(dst);
		if (!l->dst)
			goto nomem;
		t->nr_links++;
		return true;
	}
	if ((t->nr_inodes + 1) * 2 > t->cap_inodes && inode_grow(t))
		goto nomem;
	slot = inode_find(t, st->st_dev, st->st_ino);
	slot->dev = st->st_dev;
	slot->ino = st->st_ino;
	slot->dst = strdup(dst);
	if (slot->dst)
		t->nr_inodes++;
	return false;
nomem:
	tree_entry_error(t, ENOMEM, "remember the hard link", dst);
	return true;
}

/* @path of DEST below t->dest_dir: "" for dest_dir itself. */
static const char *dst_rel(const struct tree *t, const char *path)
{
	return strlen(path) > t->root_off ? path + t->root_off : "";
}

/* The same for DEST's @path, below t->dest_dir. */
static int open_dst_parent(const struct tree *t, const char *path,
			   const char **name)
{
	return open_parent_resolve(t->dest_dir->fd, dst_rel(t, path),
				   O_PATH | O_DIRECTORY, RESOLVE_CONFINED,
				   name);
}

static int make_link(void *arg, int dir, const char *tmp)
{
	const struct entry_at *target = arg;

	return linkat(target->dir, target->name, dir, tmp, 0) ? -errno : 0;
}

/* Link @target as @at: under its own name in a staged tree, else a new
 * name renamed over what is there. */
static int link_at(struct tree *t, struct entry_at target, struct entry_at at,
		   const char *dst)
{
	char tmp[NAME_MAX + 1];
	int ret;

	if (tree_entry_in_stage(t, dst)) {
		ret = tree_entry_clear_name(at);
		if (!ret && linkat(target.dir, target.name, at.dir, at.name, 0))
			ret = -errno;
		return ret;
	}
	ret = tree_entry_make_temp(at, tmp, make_link, &target);
	if (!ret)
		tree_meta_flags_unlock_at(t, at);
	if (!ret && renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		unlinkat(at.dir, tmp, 0);
	}
	return ret;
}

/*
 * One queued hard link: 1 made, 0 there already, -errno with *op and
 * *path set (path: l->target where the first name is missing). Both names
 * are found again below DEST, through no symlink.
 */
static int make_one_link(struct tree *t, const struct tree_link *l,
			 const char **op, const char **path)
{
	struct entry_at target, at;
	struct stat a, b;
	int ret;

	*op = "link to";
	*path = l->target;
	target.dir = open_dst_parent(t, l->target, &target.name);
	if (target.dir < 0)
		return target.dir;
	ret = -ENOENT;
	if (fstatat(target.dir, target.name, &a, AT_SYMLINK_NOFOLLOW)) {
		ret = -errno;
		goto out;
	}
	*op = "link";
	*path = l->dst;
	at.dir = open_dst_parent(t, l->dst, &at.name);
	if (at.dir < 0) {
		ret = at.dir;
		goto out;
	}
	if (!fstatat(at.dir, at.name, &b, AT_SYMLINK_NOFOLLOW) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		ret = 0;
	else
		ret = link_at(t, target, at, l->dst) ?: 1;
	close(at.dir);
out:
	close(target.dir);
	return ret;
}

/* Make the queued hard links whose first name is in place. */
void tree_entry_make_links(struct tree *t)
{
	const char *op, *path;
	size_t i;
	int ret;

	for (i = 0; i < t->nr_links; i++) {
		struct tree_link *l = &t->links[i];

		t->stats->entries_done++;
		ret = make_one_link(t, l, &op, &path);
		if (ret < 0) {
			/* a first name missing after a stop is no news */
			if (path == l->target && t->stopping)
				continue;
			t->stats->entries_done--;
			tree_entry_error(t, -ret, op, path);
			continue;
		}
		if (ret)
			t->stats->hardlinks++;
		else
			t->stats->skipped++;
	}
}

/* ----- other entries ----- */

struct special_arg {
	const struct stat *st;
	const char *target;
};

static int make_special_at(const struct special_arg *a, struct entry_at at)
{
	int ret;

	if (S_ISLNK(a->st->st_mode))
		ret = symlinkat(a->target, at.dir, at.name);
	else
		ret = mknodat(at.dir, at.name, (a->st->st_mode & S_IFMT) | 0600,
			      a->st->st_rdev);
	return ret ? -errno : 0;
}

static int make_special(void *arg, int dir, const char *tmp)
{
	return make_special_at(arg, (struct entry_at){ dir, tmp });
}

/* DEST has the entry (its stat in @st), but for metadata perhaps. */
static bool special_complete(const struct stat *src, const char *target,
			     struct entry_at dst, struct stat *st, char *buf)
{
	ssize_t n;

	if (fstatat(dst.dir, dst.name, st, AT_SYMLINK_NOFOLLOW) ||
	    (st->st_mode & S_IFMT) != (src->st_mode & S_IFMT) ||
	    st->st_rdev != src->st_rdev ||
	    st->st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st->st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return false;
	if (!S_ISLNK(st->st_mode))
		return true;
	n = readlinkat(dst.dir, dst.name, buf, PATH_MAX);
	return n >= 0 && (size_t)n == strlen(target) && !memcmp(buf, target, n);
}

/* @here: made in the directory being walked, not beside a name in DEST. */
static unsigned int special_meta_flags(struct tree *t, bool here)
{
	const struct stat *st = &t->walk.st;

	return (tree_meta_src_no_xattrs(t, st) ? META_NO_XATTRS : 0) |
	       (here && made_with_owner(t, st) ? META_OWNED : 0) |
	       (tree_entry_parent_acl_default(t) ? META_PRUNE : 0);
}

/* In a staged tree, under its own name (an incomplete one replaced). */
static int special_named(struct tree *t, struct entry_at src,
			 struct entry_at at, struct special_arg *arg,
			 const char **op)
{
	int ret;

	*op = "create";
	ret = tree_entry_parent_fresh(t) ? 0 : tree_entry_clear_name(at);
	if (ret)
		return ret;
	ret = make_special_at(arg, at);
	if (ret)
		return ret;
	ret = meta_set_metadata(&t->walk_xattr, src, at, &t->walk.st, NULL,
				special_meta_flags(t, true), op);
	if (ret)
		unlinkat(at.dir, at.name, 0);
	return ret;
}

/* Elsewhere made whole under a hidden name, then renamed into place. */
static int special_temp(struct tree *t, struct entry_at src, struct entry_at at,
			struct special_arg *arg, const char **op)
{
	char tmp[NAME_MAX + 1];
	int ret;

	*op = "create";
	ret = tree_entry_make_temp(at, tmp, make_special, arg);
	if (ret)
		return ret;
	ret = meta_set_metadata(&t->walk_xattr, src,
				(struct entry_at){ at.dir, tmp }, &t->walk.st,
				NULL, special_meta_flags(t, false), op);
	if (!ret)
		tree_meta_flags_unlock_at(t, at);
	if (!ret && renameat(at.dir, tmp, at.dir, at.name)) {
		ret = -errno;
		*op = "rename into place";
	}
	if (ret)
		unlinkat(at.dir, tmp, 0);
	return ret;
}

/* The current entry is in the source root's read-only subvolume or mount. */
static bool entry_frozen(const struct tree *t)
{
	return t->src_frozen && t->walk.depth &&
	       t->walk.levels[t->walk.depth - 1].dev == t->src_dev;
}

/*
 * Walker: a symlink of a read-only source from its items: its metadata
 * and its target, the data of its inline extent (never compressed), into
 * t->walk.st and t->link_buf.
 */
static bool symlink_from_items(struct tree *t)
{
	struct inline_file *inl = tree_walk_inline_file(t);
	bool ok;

	if (!inl)
		return false;
	ok = S_ISLNK(inl->mode) &&
	     inl->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE &&
	     inl->size < sizeof(t->link_buf) && inl->data_len >= inl->size &&
	     !memchr(inl->data, '\0', inl->size);
	if (ok) {
		tree_walk_inline_file_stat(t, inl, &t->walk.st);
		memcpy(t->link_buf, inl->data, inl->size);
		t->link_buf[inl->size] = '\0';
	}
	free(inl);
	return ok;
}

/* Symlinks, FIFOs, sockets, device nodes: made whole at once. */
void tree_entry_special(struct tree *t, const char *src, const char *dst,
			struct entry_at at)
{
	struct special_arg arg = { .st = &t->walk.st, .target = NULL };
	struct entry_at src_at = tree_walk_src_at(&t->walk, src);
	char cur[PATH_MAX];
	const char *op;
	struct stat st;
	ssize_t n;
	int ret;

	if (t->walk.st_pending && symlink_from_items(t)) {
		arg.target = t->link_buf;
	} else if (t->walk.st_pending &&
		   fstatat(src_at.dir, src_at.name, &t->walk.st,
			   AT_SYMLINK_NOFOLLOW)) {
		tree_entry_error(t, errno, "read", src);
		return;
	}
	t->walk.st_pending = false;
	if (tree_entry_link_seen(t, &t->walk.st, dst))
		return;
	if (S_ISLNK(t->walk.st.st_mode) && !arg.target) {
		n = readlinkat(src_at.dir, src_at.name, t->link_buf,
			       sizeof(t->link_buf) - 1);
		if (n < 0) {
			tree_entry_error(t, errno, "read link", src);
			return;
		}
		t->link_buf[n] = '\0';
		arg.target = t->link_buf;
		/* readlink may have updated the atime (relatime): take it */
		if (!entry_frozen(t) &&
		    !fstatat(src_at.dir, src_at.name, &st,
			     AT_SYMLINK_NOFOLLOW) &&
		    st.st_ino == t->walk.st.st_ino)
			t->walk.st = st;
	}
	if (!tree_entry_parent_fresh(t) &&
	    special_complete(&t->walk.st, arg.target, at, &st, cur)) {
		ret = meta_set_metadata(&t->walk_xattr, src_at, at, &t->walk.st,
					&st,
					special_meta_flags(t, false) |
						META_COMPARE | META_PRUNE,
					&op);
		if (ret < 0)
			tree_entry_error(t, -ret, op, dst);
		else
			tree_count_complete(t, ret > 0, 0);
		return;
	}
	if (tree_entry_in_stage(t, dst))
		ret = special_named(t, src_at, at, &arg, &op);
	else
		ret = special_temp(t, src_at, at, &arg, &op);
	if (ret) {
		tree_entry_error(t, ret, op, dst);
		return;
	}
	tree_stat_add(t,
		      S_ISLNK(t->walk.st.st_mode) ? &t->stats->symlinks :
						    &t->stats->specials,
		      1);
	tree_stat_add(t, &t->stats->entries_done, 1);
}

/* @final NULL: the caller puts @staging into place (dest_unpublished). */
static int stage_add(struct tree *t, const char *staging, size_t len,
		     const char *final)
{
	struct tree_stage *s;

	s = vec_grow(t->stages, t->nr_stages, &t->cap_stages, sizeof(*s));
	if (!s)
		return -ENOMEM;
	t->stages = s;
	s = &t->stages[t->nr_stages];
	s->staging = strdup(staging);
	s->len = len;
	s->final = final ? strdup(final) : NULL;
	if (!s->staging || (final && !s->final)) {
		free(s->staging);
		free(s->final);
		return -ENOMEM;
	}
	t->nr_stages++;
	return 0;
}

/*
 * The mark of a staging directory of the source root being copied: its
 * path as the command names it (the same command again goes on), in a
 * trusted xattr, which only root can set.
 */
static int stage_mark_value(const struct tree *t, char *buf)
{
	int n = snprintf(buf, PATH_MAX, "%s", t->srcs[t->root]);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : n;
}

/*
 * Whether the staging directory @rel an earlier run may have left is
 * ours: root's, private still (it gets its source's mode only once put
 * into place) and marked with the source copied now. 1: ours, 0: none,
 * -EEXIST: someone else's (a user may make or rename anything there).
 */
static int stage_ours(const struct tree *t, const char *rel)
{
	char want[PATH_MAX], got[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd, len, ret = -EEXIST;

	fd = openat(t->dest_dir->fd, rel,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -EEXIST;
	len = stage_mark_value(t, want);
	if (len < 0)
		ret = len;
	else if (!fstat(fd, &st) && st.st_uid == geteuid() &&
		 !(st.st_mode & 077) && st.st_dev == t->dst_dev) {
		n = fgetxattr(fd, STAGE_XATTR, got, sizeof(got));
		if (n == len && !memcmp(got, want, len))
			ret = 1;
	}
	close(fd);
	return ret;
}

/* The new staging directory @fd (O_PATH), marked as ours. */
static int stage_mark(struct tree *t, int fd)
{
	char mark[PATH_MAX];
	int len = stage_mark_value(t, mark), rfd, ret;

	if (len < 0)
		return len;
	rfd = inode_reopen(fd);
	if (rfd < 0)
		return rfd;
	ret = fsetxattr(rfd, STAGE_XATTR, mark, len, 0) ? -errno : 0;
	close(rfd);
	return ret;
}

/*
 * A source directory whose copy DEST lacks is built under a hidden name
 * beside it, .NAME.encio-partial, and renamed into place at the end, once
 * everything in it is written and synced. Its entries are made under their
 * own names (no unnamed file and link for each file), an interrupted copy
 * leaves nothing under the final name, and a rerun resumes in the staging
 * directory, if it is ours (stage_ours()). t->dst_root becomes the
 * staging name; it stays where DEST has the copy already (a rerun merges
 * into it), the name would be too long, or something not ours is at the
 * staging name (left alone). A DEST not in place yet (dest_unpublished)
 * is its own staging directory.
 */
static int stage_root(struct tree *t)
{
	char *dst = t->dst_root;
	char staging[PATH_MAX];
	struct stat st;
	const char *name = dst + t->root_off;
	int n, ret;

	if (t->opts->dest_unpublished)
		return stage_add(t, dst, strlen(dst), NULL);
	if (!fstatat(t->dest_dir->fd, *name ? name : ".", &st,
		     AT_SYMLINK_NOFOLLOW))
		return 0;
	if (errno != ENOENT)
		return -errno;
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    strlen(name) + sizeof(".encio-partial") > NAME_MAX)
		return 0;
	n = snprintf(staging, sizeof(staging), "%.*s.%s.encio-partial",
		     (int)t->root_off, dst, name);
	if (n < 0 || n >= (int)sizeof(staging))
		return 0;
	ret = stage_ours(t, staging + t->root_off);
	if (ret == -EEXIST)
		return 0;
	if (ret < 0)
		return ret;
	ret = stage_add(t, staging, n, dst);
	if (!ret)
		memcpy(t->dst_root, staging, n + 1);
	return ret;
}

/*
 * Staged trees into place, after the last sync; where the copy stopped,
 * they stay for a rerun to resume.
 */
void tree_entry_unstage(struct tree *t)
{
	struct encio_error e;
	size_t i;
	bool renamed = false;

	for (i = 0; i < t->nr_stages; i++) {
		struct tree_stage *s = &t->stages[i];
		int dir = t->dest_dir->fd;

		if (!s->final)
			continue;
		if (!t->fatal &&
		    renameat2(dir, dst_rel(t, s->staging), dir,
			      dst_rel(t, s->final), RENAME_NOREPLACE)) {
			encio_error_set(&e, errno, "put into place", s->final,
					false, 0);
			tree_stop(t, &e);
		}
		if (t->fatal && t->opts->kept)
			t->opts->kept(t->opts->arg, s->staging, s->final);
		renamed |= !t->fatal;
	}
	if (renamed && syncfs(t->fs_fd)) {
		encio_error_set(&e, errno, "sync", t->dest, false, 0);
		tree_stop(t, &e);
	}
}

/*
 * The copy of the directory the walk is at, opened (O_PATH) at @at; made
 * first where DEST lacks it (*fresh). Its stat in @cur. -errno with *op.
 */
static int dir_open_or_make(struct tree *t, struct entry_at at, bool *fresh,
			    struct stat *cur, const char **op)
{
	const int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = -1;

	*op = "make directory";
	*fresh = tree_entry_parent_fresh(t);
	if (!*fresh) {
		fd = openat(at.dir, at.name, flags);
		if (fd < 0 && errno == ENOTDIR) {
			*op = "make directory (not a directory)";
			return -EEXIST;
		}
		if (fd < 0 && errno != ENOENT)
			return -errno;
		*fresh = fd < 0;
	}
	if (*fresh) {
		if (mkdirat(at.dir, at.name, 0700))
			return -errno;
		/* a name swapped in since fails: not a directory */
		fd = openat(at.dir, at.name, flags);
		if (fd < 0)
			return -errno;
	}
	if (fstat(fd, cur)) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * A directory just made: owner now, through its fd; mode, xattrs and
 * times at the end. In a set-gid directory of DEST it got that group and
 * the set-gid bit, which everything made inside would inherit: entries
 * made in it must have our ids. Its mode comes from the source at the end.
 */
static int dir_fresh_owner(struct tree *t, int fd, const struct stat *cur,
			   const char **op)
{
	const struct stat *st = &t->walk.st;
	struct entry_at self = { fd, "" };

	*op = "set mode of";
	if (!tree_entry_parent_fresh(t) && (cur->st_mode & S_ISGID) &&
	    meta_at_chmod(self, 0700))
		return -errno;
	*op = "set owner of";
	if (!made_with_owner(t, st) &&
	    meta_at_chown(self, st->st_uid, st->st_gid) && errno != EPERM)
		return -errno;
	return 0;
}

/* Remember a directory for its metadata at the end. */
static int dir_remember(struct tree *t, const char *src, const char *dst,
			const struct stat *cur, bool fresh, bool acl_default)
{
	const struct stat *st = &t->walk.st;
	struct tree_dir *d;

	d = vec_grow(t->dirs, t->nr_dirs, &t->cap_dirs, sizeof(*d));
	if (!d)
		return -ENOMEM;
	t->dirs = d;
	d = &t->dirs[t->nr_dirs];
	d->src = strdup(src);
	d->dst = strdup(dst);
	d->st = *st;
	d->src_off = t->walk.rel[0] ? strlen(t->walk.src_root) + 1 :
				      strlen(src);
	d->root = t->root;
	d->dst_dev = cur->st_dev;
	d->dst_ino = cur->st_ino;
	d->no_xattrs = tree_meta_src_no_xattrs(t, st);
	d->fresh = fresh;
	d->acl_default = acl_default;
	d->src_flags = 0;
	if (!d->src || !d->dst) {
		free(d->src);
		free(d->dst);
		return -ENOMEM;
	}
	t->nr_dirs++;
	return 0;
}

/*
 * Before its entries are made: nocow and compression (flags, then the
 * btrfs.compression property), inherited by them as on the source. One
 * DEST had (a rerun) loses append-only and immutable, which would refuse
 * new entries, until dir_finish(). @dst_fd: O_PATH.
 */
static int dir_flags_early(struct tree *t, int src_fd, int dst_fd, bool fresh,
			   unsigned int *src_flags)
{
	struct inode_flags_refused *r = &t->ctx->flags_refused;
	int fd, ret;

	*src_flags = inode_flags_get(src_fd);
	fd = inode_reopen(dst_fd);
	if (fd < 0)
		return fd;
	ret = fresh ? 0 : inode_flags_set(fd, 0, INODE_FLAGS_LATE, r);
	if (ret >= 0)
		ret = inode_flags_set(fd, *src_flags, INODE_FLAGS_EARLY, r);
	if (ret >= 0)
		ret = inode_prop_copy(src_fd, fd, r);
	close(fd);
	return ret < 0 ? ret : 0;
}

/* A directory: made (owner now; mode, xattrs, times at the end), entered. */
void tree_entry_dir(struct tree *t, const char *src, const char *dst,
		    struct entry_at at)
{
	const struct stat *st = &t->walk.st;
	struct dst_dir *dir;
	struct walk_level *lvl;
	bool fresh, acl_default;
	struct stat cur;
	const char *op;
	int ret, fd;

	if (t->have_root_id && st->st_dev == t->root_dev &&
	    st->st_ino == t->root_ino) {
		tree_entry_error(t, EINVAL, "copy a directory into itself, as",
				 t->dst_final);
		return;
	}
	if (!t->walk.rel[0]) {
		ret = stage_root(t);
		if (ret) {
			tree_entry_error(t, ret, "make directory", dst);
			return;
		}
		dst = t->dst_root;
		at = tree_entry_dst_at(t);
	}
	fd = dir_open_or_make(t, at, &fresh, &cur, &op);
	if (fd < 0) {
		tree_entry_error(t, -fd, op, dst);
		return;
	}
	ret = fresh ? dir_fresh_owner(t, fd, &cur, &op) : 0;
	if (!ret && fresh && !t->walk.rel[0] && !t->opts->dest_unpublished &&
	    strcmp(dst, t->dst_final)) {
		op = "mark the staging directory";
		ret = stage_mark(t, fd);
	}
	if (ret) {
		close(fd);
		tree_entry_error(t, -ret, op, dst);
		return;
	}
	/* made in a directory with a default ACL, it has one too */
	acl_default = fresh && tree_entry_parent_fresh(t) ?
			      tree_entry_parent_acl_default(t) :
			      meta_has_default_acl(fd);
	if (!t->walk.rel[0]) {
		t->have_root_id = true;
		t->root_dev = cur.st_dev;
		t->root_ino = cur.st_ino;
	}
	ret = dir_remember(t, src, dst, &cur, fresh, acl_default);
	if (ret) {
		close(fd);
		tree_entry_error(t, -ret, "copy", src);
		return;
	}
	tree_stat_add(t, &t->stats->dirs, 1);
	/* Its entries are made through it. */
	dir = dst_dir_new(fd);
	ret = dir ? tree_walk_descend(&t->walk) : -ENOMEM;
	if (ret) {
		dst_dir_put(dir);
		tree_entry_error(t, -ret, "read directory", src);
		return;
	}
	lvl = &t->walk.levels[t->walk.depth - 1];
	lvl->fresh = fresh;
	lvl->dst = dir;
	lvl->acl_default = acl_default;
	ret = dir_flags_early(t, dirfd(lvl->dir), dir->fd, fresh,
			      &t->dirs[t->nr_dirs - 1].src_flags);
	if (ret)
		tree_entry_error(t, -ret, "set inode flags of", dst);
	if (!t->walk.rel[0] && t->src_roots[t->root] < 0)
		t->src_roots[t->root] =
			fcntl(dirfd(lvl->dir), F_DUPFD_CLOEXEC, 0);
}

/*
 * Open a directory remembered during the walk again, below @base through
 * no symlink (@rel: its path there), and check it is the same: a name
 * swapped since for one elsewhere, or for a symlink, is refused. Opened
 * for reading where we may, else O_PATH; *at tells which (see entry_at).
 * 0 or -errno.
 */
static int dir_reopen(int base, const char *rel, dev_t dev, ino_t ino,
		      struct entry_at *at)
{
	struct stat st;
	int fd = open_beneath(base, rel, O_RDONLY | O_DIRECTORY);

	*at = (struct entry_at){ fd, NULL };
	if (fd == -EACCES) {
		fd = open_beneath(base, rel, O_PATH | O_DIRECTORY);
		*at = (struct entry_at){ fd, "" };
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		at->dir = -1;
		return -ESTALE;
	}
	return 0;
}

/* A directory's metadata, at the end; -errno with *op and *path set. */
static int dir_finish(struct tree *t, const struct tree_dir *d, const char **op,
		      const char **path)
{
	struct entry_at src = { -1, NULL }, dst;
	unsigned int how;
	int fd, ret;

	*op = "set metadata of (moved or replaced during the copy)";
	*path = d->dst;
	ret = dir_reopen(t->dest_dir->fd, dst_rel(t, d->dst), d->dst_dev,
			 d->dst_ino, &dst);
	if (ret)
		return ret;
	if (!d->no_xattrs && !d->src[d->src_off] && t->src_roots[d->root] < 0) {
		/* a source root the walk could not enter: the user named it */
		src = (struct entry_at){ AT_FDCWD, d->src };
	} else if (!d->no_xattrs) {
		ret = dir_reopen(t->src_roots[d->root], d->src + d->src_off,
				 d->st.st_dev, d->st.st_ino, &src);
		if (ret) {
			*op = "read xattrs of (moved or replaced during the copy)";
			*path = d->src;
			goto out;
		}
	}
	how = (d->no_xattrs ? META_NO_XATTRS : 0) |
	      (d->fresh ? META_OWNED : META_COMPARE | META_PRUNE) |
	      (d->acl_default ? META_PRUNE : 0);
	ret = meta_set_metadata(&t->walk_xattr, src, dst, &d->st, NULL, how,
				op);
	if (!ret) {
		/* all of them, append-only and immutable last */
		*op = "set inode flags of";
		fd = dst.name ? inode_reopen(dst.dir) : dst.dir;
		ret = fd < 0 ? fd :
			       inode_flags_set(fd, d->src_flags,
					       INODE_FLAGS_KEPT,
					       &t->ctx->flags_refused);
		if (fd >= 0 && fd != dst.dir)
			close(fd);
	}
	ret = ret < 0 ? ret : 0;
out:
	if (src.dir >= 0)
		close(src.dir);
	close(dst.dir);
	return ret;
}

/*
 * Files to make append-only or immutable, now that they are in place with
 * their hard links; found again below DEST through no symlink.
 */
static void files_late_flags(struct tree *t)
{
	struct tree_late_flags *l;
	struct stat st;
	size_t i;
	int fd, ret;

	for (i = 0; i < t->nr_late_flags; i++) {
		l = &t->late_flags[i];
		fd = open_beneath(t->dest_dir->fd, dst_rel(t, l->dst),
				  O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
		ret = fd;
		if (fd >= 0) {
			ret = fstat(fd, &st) ? -errno : 0;
			/* another file, or none: it failed, reported then */
			if (!ret &&
			    (st.st_dev != l->dev || st.st_ino != l->ino))
				ret = -ENOENT;
			if (!ret)
				ret = inode_flags_set(fd, l->flags,
						      INODE_FLAGS_LATE,
						      &t->ctx->flags_refused);
			close(fd);
		}
		if (ret == -ENOENT)
			ret = 0;
		if (ret < 0 && !t->stopping)
			tree_entry_error(t, -ret, "set inode flags of", l->dst);
		free(l->dst);
	}
	free(t->late_flags);
	t->late_flags = NULL;
	t->nr_late_flags = t->cap_late_flags = 0;
}

/* The stage whose staging directory is @d itself, or NULL. */
static const struct tree_stage *dir_stage(const struct tree *t,
					  const struct tree_dir *d)
{
	const struct tree_stage *s;

	for (s = t->stages; s < t->stages + t->nr_stages; s++)
		if (!strcmp(d->dst, s->staging))
			return s;
	return NULL;
}

/*
 * A source root's copy made private: a staging directory (0700, marked
 * with its source), or the root of a DEST not in place yet
 * (dest_unpublished: its caller's partial, private and marked too). Its
 * own metadata, SRC's mode among them, waits for tree_entry_root_finish().
 */
static bool dir_held(const struct tree *t, const struct tree_dir *d)
{
	return !d->src[d->src_off] && dir_stage(t, d);
}

/* Directories last, deepest first: xattrs, mode and times. */
void tree_entry_dirs_finish(struct tree *t)
{
	const char *op, *path;
	size_t i;
	int ret;

	files_late_flags(t);
	for (i = t->nr_dirs; i-- > 0;) {
		if (dir_held(t, &t->dirs[i]))
			continue;
		ret = dir_finish(t, &t->dirs[i], &op, &path);
		if (ret && !t->stopping)
			tree_entry_error(t, -ret, op, path);
	}
}

/* A staging directory's mark goes before it is put into place. */
static int stage_unmark(struct tree *t, const struct tree_dir *d)
{
	struct entry_at at;
	int fd, ret;

	ret = dir_reopen(t->dest_dir->fd, dst_rel(t, d->dst), d->dst_dev,
			 d->dst_ino, &at);
	if (ret)
		return ret;
	fd = at.name ? inode_reopen(at.dir) : at.dir;
	ret = fd < 0 ? fd : 0;
	if (!ret && fremovexattr(fd, STAGE_XATTR) && errno != ENODATA)
		ret = -errno;
	if (fd >= 0 && fd != at.dir)
		close(fd);
	close(at.dir);
	return ret;
}

/*
 * The held roots' metadata, once everything below them is copied and
 * synced: their mode opens them to others only now. A copy that stopped
 * leaves them private and marked, for a rerun to go on with; so does one
 * an entry failed in where the caller puts DEST in place itself (it keeps
 * what failed for a rerun); a staged tree with a failed entry is put in
 * place, as a copy that went on past it.
 */
void tree_entry_root_finish(struct tree *t)
{
	const struct tree_stage *s;
	const char *op, *path;
	size_t i;
	int ret;

	if (t->fatal || (t->opts->dest_unpublished && t->stats->failed))
		return;
	for (i = 0; i < t->nr_dirs; i++) {
		if (!dir_held(t, &t->dirs[i]))
			continue;
		s = dir_stage(t, &t->dirs[i]);
		op = "finish";
		path = t->dirs[i].dst;
		ret = s->final ? stage_unmark(t, &t->dirs[i]) : 0;
		if (!ret)
			ret = dir_finish(t, &t->dirs[i], &op, &path);
		if (ret)
			tree_entry_error(t, -ret, op, path);
	}
}
