// SPDX-License-Identifier: GPL-2.0
/*
 * receive -s: the private state directory in DEST and NAME's directory in
 * it, with NAME's lock (receive_resume.c says what they hold and why).
 *
 * DEST may be writable by other users: the state directory is one only
 * root can have made (owned by root, mode 0700, marked with a trusted
 * xattr), opened without following or blocking; anything else at such a
 * name is another user's, and left alone. Under NAME's lock (flock, with
 * the holder's pid) what a killed receive left in NAME's directory is
 * deleted whatever it is; a subvolume elsewhere only by the id and UUID
 * checked on it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "receive/receive_internal.h"

#define STATE_PREFIX ".encio-receive."
#define STATE_XATTR "trusted.encio.state"
#define LOCK_NAME "lock"

void rcv_pd_init(struct partial_dir *pd)
{
	memset(pd, 0, sizeof(*pd));
	pd->state_fd = pd->name_fd = pd->lock_fd = -1;
}

/*
 * @name in @dest_fd, opened if it is a private directory of receive -s:
 * one only root can have made. Anything else is another user's, and left
 * alone: it is opened without following or blocking, and not trusted.
 */
static int state_dir_open(int dest_fd, const struct stat *dest,
			  const char *name)
{
	struct stat st;
	char mark;
	int fd;

	fd = openat(dest_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_dev != dest->st_dev || st.st_uid != 0 ||
	    (st.st_mode & 07777) != 0700 || !st.st_nlink ||
	    fgetxattr(fd, STATE_XATTR, &mark, 1) != 1) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* NAME's directory in the private directory @state_fd, or -errno. */
static int name_dir_open(int state_fd, const char *name)
{
	struct stat st;
	int fd;

	fd = openat(state_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_uid != 0 || !st.st_nlink) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/*
 * The private directories of @dest_fd, each given to @fn until it returns
 * other than 0 (returned; 0 when none did). @fn keeps the descriptor it
 * is given by returning 1, else it is closed.
 */
static int state_dirs_each(int dest_fd,
			   int (*fn)(int fd, const char *name, void *arg),
			   void *arg)
{
	struct dirent *de;
	struct stat dest;
	int fd, ret = 0;
	DIR *dir;

	if (fstat(dest_fd, &dest))
		return -errno;
	dir = dir_stream_of(dest_fd);
	if (!dir)
		return -errno;
	while (!ret && (de = readdir(dir))) {
		if (strncmp(de->d_name, STATE_PREFIX, strlen(STATE_PREFIX)))
			continue;
		fd = state_dir_open(dest_fd, &dest, de->d_name);
		if (fd < 0)
			continue;
		ret = fn(fd, de->d_name, arg);
		if (ret != 1)
			close(fd);
	}
	closedir(dir);
	return ret;
}

static int find_name(int fd, const char *name, void *arg)
{
	struct partial_dir *pd = arg;
	int name_fd = name_dir_open(fd, pd->name);

	if (name_fd < 0)
		return 0;
	pd->state_fd = fd;
	pd->name_fd = name_fd;
	snprintf(pd->state_name, sizeof(pd->state_name), "%s", name);
	return 1;
}

static int find_any(int fd, const char *name, void *arg)
{
	struct partial_dir *pd = arg;

	pd->state_fd = fd;
	snprintf(pd->state_name, sizeof(pd->state_name), "%s", name);
	return 1;
}

/*
 * A private directory made or removed in DEST, whose directory may be
 * append-only or immutable (a copy of SRC's, in a move): lifted for that
 * alone.
 */
static int mkdir_op(int dir_fd, void *arg)
{
	return mkdirat(dir_fd, arg, 0700) ? -errno : 0;
}

static int rmdir_op(int dir_fd, void *arg)
{
	return unlinkat(dir_fd, arg, AT_REMOVEDIR) ? -errno : 0;
}

/* A new private directory in @dest_fd, into pd->state_fd. */
static int state_dir_make(int dest_fd, struct partial_dir *pd)
{
	static const char digits[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[6];
	struct stat dest, st;
	size_t i;
	int fd, tries, ret;

	if (fstat(dest_fd, &dest))
		return -errno;
	for (tries = 0; tries < 100; tries++) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -errno;
		strcpy(pd->state_name, STATE_PREFIX);
		for (i = 0; i < sizeof(rnd); i++)
			pd->state_name[strlen(STATE_PREFIX) + i] =
				digits[rnd[i] % (sizeof(digits) - 1)];
		pd->state_name[strlen(STATE_PREFIX) + sizeof(rnd)] = '\0';
		ret = inode_flags_lifted_for(dest_fd, mkdir_op, pd->state_name);
		if (ret == -EEXIST)
			continue;
		if (ret)
			return ret;
		fd = openat(dest_fd, pd->state_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
				    O_CLOEXEC);
		if (fd < 0)
			return -errno;
		/* another user's put in its place since is left to them */
		if (fstat(fd, &st) || st.st_uid != 0 ||
		    st.st_dev != dest.st_dev) {
			close(fd);
			continue;
		}
		if (fchmod(fd, 0700) || fsetxattr(fd, STATE_XATTR, "1", 1, 0)) {
			close(fd);
			return -errno;
		}
		pd->state_fd = fd;
		return 0;
	}
	return -EEXIST;
}

/*
 * NAME's directory (pd->name) in a private directory of @dest_fd, opened;
 * with @create, made where there is none. -ENOENT: none.
 */
int rcv_pd_open(int dest_fd, struct partial_dir *pd, bool create)
{
	int ret, tries;

	for (tries = 0; tries < 10; tries++) {
		ret = state_dirs_each(dest_fd, find_name, pd);
		if (ret < 0)
			return ret;
		if (ret == 1)
			return 0;
		if (!create)
			return -ENOENT;
		ret = state_dirs_each(dest_fd, find_any, pd);
		if (ret < 0)
			return ret;
		if (ret != 1) {
			ret = state_dir_make(dest_fd, pd);
			if (ret)
				return ret;
		}
		/* ENOENT: another receive removed it as it emptied */
		if (mkdirat(pd->state_fd, pd->name, 0700) && errno != EEXIST &&
		    errno != ENOENT)
			ret = -errno;
		else
			pd->name_fd = name_dir_open(pd->state_fd, pd->name);
		if (pd->name_fd >= 0)
			return 0;
		close_fd(&pd->state_fd);
		if (ret < 0)
			return ret;
	}
	return -EAGAIN;
}

/* The pid in a lock another holds: it writes it just after it locks. */
static pid_t lock_holder(int fd)
{
	char pid[24];
	ssize_t n;
	int tries;

	for (tries = 0; tries < 50; tries++) {
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		if (n > 0 && pid[n - 1] == '\n') {
			pid[n] = '\0';
			return (pid_t)atoi(pid);
		}
		usleep(10000);
	}
	return 0;
}

/*
 * NAME's lock, held until rcv_pd_close(): -EBUSY and the holder's pid in
 * *@holder where another receive holds it.
 */
static int pd_lock(struct partial_dir *pd, pid_t *holder)
{
	struct stat st, at;
	char pid[24] = "";
	int fd, ret;

	*holder = 0;
	fd = openat(pd->name_fd, LOCK_NAME,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		    0600);
	/* ENOENT: the holder before removed NAME's directory as it ended */
	if (fd < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0) {
		close(fd);
		return -EINVAL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		ret = -errno;
		if (ret == -EWOULDBLOCK) {
			ret = -EBUSY;
			*holder = lock_holder(fd);
		}
		close(fd);
		return ret;
	}
	/* the holder before may have removed it as it finished */
	if (fstat(fd, &st) ||
	    fstatat(pd->name_fd, LOCK_NAME, &at, AT_SYMLINK_NOFOLLOW) ||
	    st.st_ino != at.st_ino || fstat(pd->name_fd, &at) || !at.st_nlink) {
		close(fd);
		return -EAGAIN;
	}
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) || pwrite_all(fd, pid, strlen(pid), 0)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	pd->lock_fd = fd;
	return 0;
}

/* A subvolume at @name in @dir_fd, checked, then deleted by its id. */
int rcv_drop_subvol(int dir_fd, const char *name, const uint8_t *uuid,
		    uint64_t id)
{
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	int fd, ret = 0;

	fd = subvol_root_openat(dir_fd, name, &info);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if ((uuid && memcmp(info.uuid, uuid, BTRFS_UUID_SIZE)) ||
	    (id && info.id != id))
		ret = -ESTALE;
	else if ((err = btrfs_util_delete_subvolume_by_id_fd(dir_fd, info.id)))
		ret = btrfsutil_errno(err);
	close(fd);
	return ret;
}

/* What a receive left in NAME's directory, the lock held: deleted. */
void rcv_pd_clear(struct partial_dir *pd)
{
	struct dirent *de;
	DIR *dir;

	dir = dir_stream_of(pd->name_fd);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, WORK_NAME) ||
		    !strcmp(de->d_name, PLACE_NAME) ||
		    !strncmp(de->d_name, CKPT_PREFIX, strlen(CKPT_PREFIX)))
			rcv_drop_subvol(pd->name_fd, de->d_name, NULL, 0);
		else if (!strcmp(de->d_name, RECORD_NAME) ||
			 !strcmp(de->d_name, RECORD_NEW) ||
			 !strcmp(de->d_name, RESERVE_NAME))
			unlinkat(pd->name_fd, de->d_name, 0);
	}
	closedir(dir);
}

/*
 * Done with NAME's directory: with @remove, what is in it and it go (the
 * lock held), and the private directory too if that leaves it empty.
 */
void rcv_pd_close(int dest_fd, struct partial_dir *pd, bool remove)
{
	struct stat st, at;

	if (remove && pd->lock_fd >= 0) {
		rcv_pd_clear(pd);
		unlinkat(pd->name_fd, LOCK_NAME, 0);
		unlinkat(pd->state_fd, pd->name, AT_REMOVEDIR);
	}
	close_fd(&pd->lock_fd);
	close_fd(&pd->name_fd);
	/* only the directory opened: another may be at its name since */
	if (remove && pd->state_fd >= 0 && !fstat(pd->state_fd, &st) &&
	    !fstatat(dest_fd, pd->state_name, &at, AT_SYMLINK_NOFOLLOW) &&
	    st.st_ino == at.st_ino && st.st_dev == at.st_dev)
		inode_flags_lifted_for(dest_fd, rmdir_op, pd->state_name);
	close_fd(&pd->state_fd);
}

/* What rcv_pd_names_each() hands each NAME's directory to. */
struct names_walk {
	int (*fn)(const char *name, void *arg);
	void *arg;
};

static int names_of(int fd, const char *state_name, void *arg)
{
	struct names_walk *w = arg;
	struct dirent *de;
	int ret = 0;
	DIR *dir;

	(void)state_name;
	dir = dir_stream_of(fd);
	if (!dir)
		return 0;
	while (!ret && (de = readdir(dir)))
		if ((de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) &&
		    strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = w->fn(de->d_name, w->arg);
	closedir(dir);
	return ret < 0 ? ret : 0;
}

int rcv_pd_names_each(int dest_fd, int (*fn)(const char *name, void *arg),
		      void *arg)
{
	struct names_walk w = { .fn = fn, .arg = arg };

	return state_dirs_each(dest_fd, names_of, &w);
}

/* Whether NAME's directory holds a record. */
bool rcv_pd_has_record(const struct partial_dir *pd)
{
	struct stat st;

	return !fstatat(pd->name_fd, RECORD_NAME, &st, AT_SYMLINK_NOFOLLOW) ||
	       errno != ENOENT;
}

/* What pd_unique() looks for: another directory of NAME than @mine. */
struct unique {
	int dest_fd;
	const struct partial_dir *pd;
	struct stat mine;
	pid_t *holder;
};

static int other_name(int fd, const char *name, void *arg)
{
	struct unique *u = arg;
	struct partial_dir other;
	struct stat st;
	int ret;

	rcv_pd_init(&other);
	snprintf(other.name, sizeof(other.name), "%s", u->pd->name);
	other.name_fd = name_dir_open(fd, other.name);
	if (other.name_fd < 0)
		return 0;
	if (fstat(other.name_fd, &st) ||
	    (st.st_ino == u->mine.st_ino && st.st_dev == u->mine.st_dev)) {
		close(other.name_fd);
		return 0;
	}
	ret = pd_lock(&other, u->holder);
	if (!ret && !rcv_pd_has_record(&other)) {
		/* one a receive left before it locked it, or made as we did */
		other.state_fd = dup(fd);
		snprintf(other.state_name, sizeof(other.state_name), "%s",
			 name);
		rcv_pd_close(u->dest_fd, &other, other.state_fd >= 0);
		return 0;
	}
	close_fd(&other.lock_fd);
	close_fd(&other.name_fd);
	/* the partial kept there is the one to go on with: look again */
	return ret == -EBUSY ? -EBUSY : !ret ? -EAGAIN : 0;
}

/*
 * Receives that began at once may each have made a private directory, and
 * NAME's in it: only one NAME's directory is locked, the others deleted.
 */
static int pd_unique(int dest_fd, const struct partial_dir *pd, pid_t *holder)
{
	struct unique u = { .dest_fd = dest_fd, .pd = pd, .holder = holder };

	if (fstat(pd->name_fd, &u.mine))
		return -errno;
	return state_dirs_each(dest_fd, other_name, &u);
}

/*
 * The directory of another NAME than ours in the private directory @fd:
 * deleted when no receive holds it and it has no record (nothing there
 * can be resumed). A receive killed after it gave its subvolume NAME
 * leaves such a directory, one killed before that its unnamed partial.
 */
static void stale_name_drop(int dest_fd, int fd, const char *state_name,
			    const char *name)
{
	struct partial_dir other;
	pid_t holder;

	rcv_pd_init(&other);
	snprintf(other.name, sizeof(other.name), "%s", name);
	other.name_fd = name_dir_open(fd, name);
	if (other.name_fd < 0)
		return;
	if (!pd_lock(&other, &holder) && !rcv_pd_has_record(&other)) {
		other.state_fd = dup(fd);
		snprintf(other.state_name, sizeof(other.state_name), "%s",
			 state_name);
		rcv_pd_close(dest_fd, &other, true);
		return;
	}
	close_fd(&other.lock_fd);
	close_fd(&other.name_fd);
}

static int stale_names_drop(int fd, const char *state_name, void *arg)
{
	const struct unique *u = arg;
	struct partial_dir other;
	struct stat st, mine;
	struct dirent *de;
	DIR *dir;

	rcv_pd_init(&other);

	dir = dir_stream_of(fd);
	if (!dir)
		return 0;
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, u->pd->name))
			stale_name_drop(u->dest_fd, fd, state_name, de->d_name);
	closedir(dir);
	/* one emptied, or left empty by a receive killed as it ended */
	if (fstat(fd, &st) || fstat(u->pd->state_fd, &mine) ||
	    (st.st_ino == mine.st_ino && st.st_dev == mine.st_dev))
		return 0;
	other.state_fd = dup(fd);
	snprintf(other.state_name, sizeof(other.state_name), "%s", state_name);
	rcv_pd_close(u->dest_fd, &other, other.state_fd >= 0);
	return 0;
}

/*
 * A private directory a receive made but was killed before it marked it:
 * root's, 0700 and empty (a directory that is not is left alone), removed
 * if its name still gives the directory checked.
 */
static void unmarked_drop(int dest_fd)
{
	struct stat dest, st, at;
	struct dirent *de;
	char mark;
	DIR *dir;
	int fd;

	if (fstat(dest_fd, &dest))
		return;
	dir = dir_stream_of(dest_fd);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, STATE_PREFIX, strlen(STATE_PREFIX)))
			continue;
		fd = openat(dest_fd, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
				    O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && st.st_dev == dest.st_dev &&
		    st.st_uid == 0 && (st.st_mode & 07777) == 0700 &&
		    fgetxattr(fd, STATE_XATTR, &mark, 1) < 0 &&
		    errno == ENODATA &&
		    !fstatat(dest_fd, de->d_name, &at, AT_SYMLINK_NOFOLLOW) &&
		    at.st_ino == st.st_ino && at.st_dev == st.st_dev)
			unlinkat(dest_fd, de->d_name, AT_REMOVEDIR);
		close(fd);
	}
	closedir(dir);
}

/*
 * NAME's directory found (or made, @create) and locked. -EBUSY and
 * *@holder as pd_lock(), -ENOENT where there is none. What receives
 * killed outright left of other NAMEs goes.
 */
int rcv_pd_open_locked(int dest_fd, struct partial_dir *pd, bool create,
		       pid_t *holder)
{
	int ret, tries;

	for (tries = 0; tries < 10; tries++) {
		ret = rcv_pd_open(dest_fd, pd, create);
		if (!ret)
			ret = pd_lock(pd, holder);
		if (!ret) {
			ret = pd_unique(dest_fd, pd, holder);
			if (ret)
				rcv_pd_close(dest_fd, pd,
					     !rcv_pd_has_record(pd));
		}
		if (!ret) {
			state_dirs_each(dest_fd, stale_names_drop,
					&(struct unique){ .dest_fd = dest_fd,
							  .pd = pd });
			unmarked_drop(dest_fd);
		}
		if (ret != -EAGAIN)
			return ret;
		close_fd(&pd->name_fd);
		close_fd(&pd->state_fd);
	}
	return -EAGAIN;
}
