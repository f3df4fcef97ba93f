// SPDX-License-Identifier: GPL-2.0
/*
 * The directory a receive of send --subvolumes' stream keeps beside its
 * copy (in it where the copy is a mount's root): made by root, mode 0700,
 * marked with the copy's name (trusted.encio.subvols-of, which only root
 * can set), locked (flock) while a receive uses it. Nobody else can reach
 * what is in it. It holds SRC's tree part while it is received, and with
 * receive -s the name of the subvolume in flight ("inflight": its path
 * below DEST and the name its receive went under in the directory of
 * that path), which receive --state reads to name the partial receive -s
 * kept of it (in that directory, receive_state.c's), for the next send
 * to resume.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "subvols/copy_subvols_internal.h"

#define RUN_DIR ".encio-subvols.XXXXXX"
#define RUN_DIR_MARK "trusted.encio.subvols-of"
#define INFLIGHT_NAME "inflight"
#define INFLIGHT_NEW "inflight.new"
/* a path and a name, each ended by a NUL */
#define INFLIGHT_MAX (PATH_MAX + NAME_MAX + 2)

/*
 * Where the run directory of the copy @dst goes (the directory of @dst,
 * or @dst where it ends in "/.", a mount's root) into @where, PATH_MAX
 * bytes, and the name it is marked with into @mark. Whether it is in the
 * copy.
 */
static bool run_dir_where(const char *dst, char *where, char *mark)
{
	char base[PATH_MAX];
	size_t n = strlen(dst);

	snprintf(where, PATH_MAX, "%s", dst);
	if (n >= 2 && !strcmp(dst + n - 2, "/.")) {
		strcpy(mark, ".");
		return true;
	}
	snprintf(base, sizeof(base), "%s", dst);
	snprintf(mark, NAME_MAX + 1, "%s", basename(base));
	dirname(where);
	return false;
}

static bool run_dir_name(const char *name)
{
	return strlen(name) == strlen(RUN_DIR) &&
	       !strncmp(name, RUN_DIR, strlen(RUN_DIR) - 6);
}

/*
 * Whether @fd is a directory only root can have made, on @top's device:
 * root's, mode 0700.
 */
static bool roots_private(int fd, const struct stat *top)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	       (st.st_mode & 07777) == 0700 && st.st_dev == top->st_dev;
}

/* Whether @fd is marked as the run directory of the copy named @mark. */
static bool marked_for(int fd, const char *mark)
{
	char got[NAME_MAX + 1];
	ssize_t n = fgetxattr(fd, RUN_DIR_MARK, got, sizeof(got) - 1);

	if (n < 0)
		return false;
	got[n] = '\0';
	return !strcmp(got, mark);
}

/*
 * An unmarked one (a receive killed between making it and marking it, or
 * one of an encio that did not mark them): the tree part it may hold
 * deleted by its id, then removed if that left it empty.
 */
static void unmarked_drop(int dir_fd, const char *name, int fd)
{
	struct btrfs_util_subvolume_info info;
	int sub;

	if (flock(fd, LOCK_EX | LOCK_NB))
		return;
	sub = subvol_root_openat(fd, SUBVOLS_TREE_PART_NAME, &info);
	if (sub >= 0) {
		close(sub);
		subvols_delete_id(fd, info.id);
	}
	unlinkat(dir_fd, name, AT_REMOVEDIR);
}

/*
 * The run directory of @mark found in @dir, opened; its name into @name.
 * -ENOENT where there is none.
 */
static int run_dir_find(DIR *dir, const char *mark, char *name)
{
	struct dirent *de;
	struct stat top;
	int fd;

	if (fstat(dirfd(dir), &top))
		return -errno;
	while ((de = readdir(dir))) {
		if (!run_dir_name(de->d_name))
			continue;
		fd = openat(dirfd(dir), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (roots_private(fd, &top) && marked_for(fd, mark)) {
			strcpy(name, de->d_name);
			return fd;
		}
		if (roots_private(fd, &top) &&
		    fgetxattr(fd, RUN_DIR_MARK, NULL, 0) < 0 &&
		    errno == ENODATA)
			unmarked_drop(dirfd(dir), de->d_name, fd);
		close(fd);
	}
	return -ENOENT;
}

static int run_dir_make(int where_fd, const char *mark, char *name)
{
	char tmp[PATH_MAX];
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "/proc/self/fd/%d/" RUN_DIR, where_fd);
	if (!mkdtemp(tmp))
		return -errno;
	snprintf(name, NAME_MAX + 1, "%s", strrchr(tmp, '/') + 1);
	fd = openat(where_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* locked before it is marked: no other receive takes it up */
	ret = flock(fd, LOCK_EX) || fsetxattr(fd, RUN_DIR_MARK, mark,
					      strlen(mark), 0) ?
		      -errno :
		      0;
	if (ret) {
		close(fd);
		unlinkat(where_fd, name, AT_REMOVEDIR);
		return ret;
	}
	return fd;
}

int subvols_run_dir_open(const char *dst, bool create, struct run_dir *rd)
{
	char where[PATH_MAX], mark[NAME_MAX + 1];
	int where_fd, fd;
	DIR *dir;

	rd->fd = rd->where_fd = -1;
	rd->in_copy = run_dir_where(dst, where, mark);
	where_fd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (where_fd < 0)
		return -errno;
	fd = dup(where_fd);
	dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		fd = -errno;
		close(where_fd);
		return fd;
	}
	fd = run_dir_find(dir, mark, rd->name);
	closedir(dir);
	if (fd >= 0 && create && flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		fd = errno == EWOULDBLOCK ? -EBUSY : -errno;
	} else if (fd == -ENOENT && create) {
		fd = run_dir_make(where_fd, mark, rd->name);
	}
	if (fd < 0) {
		close(where_fd);
		return fd;
	}
	rd->fd = fd;
	rd->where_fd = where_fd;
	return 0;
}

void subvols_run_dir_close(struct run_dir *rd, bool remove)
{
	struct stat st;

	if (rd->fd < 0)
		return;
	if (remove) {
		/* the copy's root keeps the times it has without it */
		remove = !rd->in_copy || !fstat(rd->where_fd, &st);
		unlinkat(rd->fd, INFLIGHT_NAME, 0);
		if (remove && !unlinkat(rd->where_fd, rd->name, AT_REMOVEDIR) &&
		    rd->in_copy)
			subvols_times_restore(rd->where_fd, &st);
	}
	close(rd->fd);
	close(rd->where_fd);
	rd->fd = rd->where_fd = -1;
}

int subvols_inflight_write(const struct run_dir *rd, const char *rel,
			   const char *name)
{
	size_t a = strlen(rel) + 1, b = strlen(name) + 1;
	ssize_t n;
	int fd, ret = 0;

	unlinkat(rd->fd, INFLIGHT_NEW, 0);
	fd = openat(rd->fd, INFLIGHT_NEW,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, rel, a);
	if (n == (ssize_t)a)
		n = write(fd, name, b);
	if (n != (ssize_t)b)
		ret = n < 0 ? -errno : -EIO;
	close(fd);
	if (!ret && renameat(rd->fd, INFLIGHT_NEW, rd->fd, INFLIGHT_NAME))
		ret = -errno;
	return ret;
}

int subvols_inflight_read(const struct run_dir *rd, char *rel, char *name)
{
	char buf[INFLIGHT_MAX + 1];
	size_t a;
	ssize_t n;
	int fd;

	fd = openat(rd->fd, INFLIGHT_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -errno;
	if (n < 4 || n > INFLIGHT_MAX || buf[n - 1] != '\0')
		return -EINVAL;
	a = strlen(buf) + 1;
	if (a >= (size_t)n || a > PATH_MAX ||
	    strlen(buf + a) + 1 != (size_t)n - a || n - a > NAME_MAX + 1)
		return -EINVAL;
	memcpy(rel, buf, a);
	memcpy(name, buf + a, n - a);
	return 0;
}

int subvols_landing_open(const char *dst, const char *rel)
{
	char dir[PATH_MAX];
	const char *name;
	int top, fd;

	if (!strcmp(rel, ".")) {
		snprintf(dir, sizeof(dir), "%s", dst);
		fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	top = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return -errno;
	fd = open_parent_resolve(top, rel, O_RDONLY | O_DIRECTORY,
				 RESOLVE_CONFINED, &name);
	close(top);
	return fd;
}
