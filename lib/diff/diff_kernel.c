// SPDX-License-Identifier: GPL-2.0
/*
 * encio diff's fallback: the kernel's own difference, for when a balance
 * moved the trees while they were searched (the leaves' generations no
 * longer tell what changed). BTRFS_IOC_SEND without file data, with the
 * parent, is read from a pipe and its commands replayed over the parent's
 * names, each directory read from PARENT (by descriptor, beneath it) the
 * first time a command reaches into it, so that every command's path
 * names an inode. The inodes the stream touched are then compared as the
 * searches' are; the data ranges are the stream's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/fsutil.h"
#include "base/hash.h"
#include "base/kernel.h"
#include "base/le_bytes.h"
#include "diff/diff_internal.h"
#include "stream/stream.h"

/* A name in the namespace the stream is applied to */
struct kname {
	char *name;
	uint64_t ino;
	struct kname *parent;
	struct kname *child; /* a directory's, once loaded */
	struct kname *next;
	char *ppath; /* a directory of PARENT not loaded yet: its path there */
	bool loaded;
};

struct kchange {
	uint64_t ino; /* 0: a free slot */
	struct diff_ranges ranges;
};

struct diff_kernel {
	int parent_fd;
	struct kname root;
	struct kchange *slot;
	size_t cap, nr;
	struct diff_inoset *todo;
	char path[PATH_MAX], to[PATH_MAX]; /* the command's, with their NUL */
};

static struct kname *kname_new(const char *name, uint64_t ino)
{
	struct kname *n = calloc(1, sizeof(*n));

	if (n && !(n->name = strdup(name))) {
		free(n);
		n = NULL;
	}
	if (n)
		n->ino = ino;
	return n;
}

static void kname_free(struct kname *n)
{
	struct kname *c, *next;

	for (c = n->child; c; c = next) {
		next = c->next;
		kname_free(c);
		free(c);
	}
	free(n->name);
	free(n->ppath);
}

static void link_child(struct kname *dir, struct kname *n)
{
	n->parent = dir;
	n->next = dir->child;
	dir->child = n;
}

/* A directory of PARENT's entries, read once, nested subvolumes left out */
static int load(struct diff_kernel *k, struct kname *dir)
{
	struct dirent *de;
	DIR *d;
	int fd, ret = 0;

	if (dir->loaded)
		return 0;
	dir->loaded = true;
	if (!dir->ppath)
		return 0;
	fd = open_beneath(k->parent_fd, dir->ppath, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while (!ret && (de = readdir(d))) {
		struct kname *n;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (de->d_type == DT_DIR &&
		     (de->d_ino == BTRFS_FIRST_FREE_OBJECTID ||
		      de->d_ino == 2)))
			continue;
		n = kname_new(de->d_name, de->d_ino);
		if (!n) {
			ret = -ENOMEM;
			break;
		}
		link_child(dir, n);
		if (de->d_type == DT_DIR &&
		    asprintf(&n->ppath, "%s/%s", dir->ppath, de->d_name) < 0)
			ret = -ENOMEM;
	}
	closedir(d);
	return ret;
}

static struct kname **find_child(struct kname *dir, const char *name,
				 size_t len)
{
	struct kname **p;

	for (p = &dir->child; *p; p = &(*p)->next)
		if (!strncmp((*p)->name, name, len) && !(*p)->name[len])
			return p;
	return NULL;
}

/* The directory @path is in, and its last component in *@last */
static int resolve_dir(struct diff_kernel *k, const char *path,
		       struct kname **dir, const char **last)
{
	struct kname *d = &k->root;
	const char *s = path, *slash;
	int ret;

	while ((slash = strchr(s, '/'))) {
		struct kname **c;

		ret = load(k, d);
		if (ret)
			return ret;
		c = find_child(d, s, slash - s);
		if (!c)
			return -ENOENT;
		d = *c;
		s = slash + 1;
	}
	ret = load(k, d);
	*dir = d;
	*last = s;
	return ret;
}

static int resolve(struct diff_kernel *k, const char *path, struct kname **n)
{
	struct kname *d, **c;
	const char *last;
	int ret;

	if (!*path) {
		*n = &k->root;
		return 0;
	}
	ret = resolve_dir(k, path, &d, &last);
	if (ret)
		return ret;
	c = find_child(d, last, strlen(last));
	if (!c)
		return -ENOENT;
	*n = *c;
	return 0;
}

static int detach(struct diff_kernel *k, const char *path, struct kname **n)
{
	struct kname *d, **c;
	const char *last;
	int ret = resolve_dir(k, path, &d, &last);

	if (ret)
		return ret;
	c = find_child(d, last, strlen(last));
	if (!c)
		return -ENOENT;
	*n = *c;
	*c = (*c)->next;
	(*n)->next = NULL;
	(*n)->parent = NULL;
	return 0;
}

static int attach(struct diff_kernel *k, const char *path, struct kname *n)
{
	struct kname *d;
	const char *last;
	char *name;
	int ret = resolve_dir(k, path, &d, &last);

	if (ret)
		return ret;
	name = strdup(last);
	if (!name)
		return -ENOMEM;
	free(n->name);
	n->name = name;
	link_child(d, n);
	return 0;
}

static struct kchange *change_get(struct diff_kernel *k, uint64_t ino)
{
	size_t j;

	if ((k->nr + 1) * 2 > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256, i;
		struct kchange *s = calloc(cap, sizeof(*s));

		if (!s)
			return NULL;
		for (i = 0; i < k->cap; i++) {
			if (!k->slot[i].ino)
				continue;
			for (j = hash64(k->slot[i].ino) & (cap - 1); s[j].ino;
			     j = (j + 1) & (cap - 1))
				;
			s[j] = k->slot[i];
		}
		free(k->slot);
		k->slot = s;
		k->cap = cap;
	}
	for (j = hash64(ino) & (k->cap - 1); k->slot[j].ino;
	     j = (j + 1) & (k->cap - 1))
		if (k->slot[j].ino == ino)
			return &k->slot[j];
	k->slot[j].ino = ino;
	k->nr++;
	return &k->slot[j];
}

/* The inode at @path touched by a command: to compare */
static int touched(struct diff_kernel *k, const char *path, struct kname **out)
{
	struct kname *n;
	int ret = resolve(k, path, &n);

	if (ret)
		return ret;
	if (out)
		*out = n;
	if (!change_get(k, n->ino))
		return -ENOMEM;
	return diff_inoset_add(k->todo, n->ino, 0);
}

static int data(struct diff_kernel *k, const char *path, uint64_t offset,
		uint64_t len)
{
	struct kname *n;
	int ret = touched(k, path, &n);

	if (ret)
		return ret;
	return diff_ranges_add(&change_get(k, n->ino)->ranges, offset,
			       offset + len);
}

static int k_made(struct diff_kernel *k, const char *path, uint64_t ino)
{
	struct kname *n = kname_new("", ino);
	int ret;

	if (!n)
		return -ENOMEM;
	n->loaded = true;
	ret = attach(k, path, n);
	if (ret) {
		kname_free(n);
		free(n);
		return ret;
	}
	return touched(k, path, NULL);
}

static int k_rename(struct diff_kernel *k, const char *from, const char *to)
{
	struct kname *n;
	int ret = touched(k, from, NULL);

	if (!ret)
		ret = detach(k, from, &n);
	if (!ret)
		ret = attach(k, to, n);
	return ret;
}

static int k_link(struct diff_kernel *k, const char *path, const char *target)
{
	struct kname *t, *n;
	int ret = touched(k, target, &t);

	if (ret)
		return ret;
	n = kname_new("", t->ino);
	if (!n)
		return -ENOMEM;
	n->loaded = true;
	return attach(k, path, n);
}

static int k_unlink(struct diff_kernel *k, const char *path)
{
	struct kname *n;
	int ret = touched(k, path, NULL);

	if (!ret)
		ret = detach(k, path, &n);
	if (!ret) {
		kname_free(n);
		free(n);
	}
	return ret;
}

struct send_job {
	int child_fd;
	int pipe_fd;
	uint64_t parent_id;
	int err;
};

static void *send_thread(void *arg)
{
	struct send_job *j = arg;
	struct btrfs_ioctl_send_args a = {
		.send_fd = j->pipe_fd,
		.parent_root = j->parent_id,
		.flags = BTRFS_SEND_FLAG_NO_FILE_DATA,
	};

	if (ioctl(j->child_fd, BTRFS_IOC_SEND, &a) < 0)
		j->err = -errno;
	close(j->pipe_fd);
	return NULL;
}

/* An attribute as a string, or a number; -EPROTO where it is amiss */
static int attr_str(const struct stream_cmd *c, int a, char *buf, size_t size)
{
	const struct stream_attr *t = &c->attr[a];

	if (!t->present || t->len >= size || memchr(t->data, 0, t->len))
		return -EPROTO;
	memcpy(buf, t->data, t->len);
	buf[t->len] = 0;
	return 0;
}

static int attr_u64(const struct stream_cmd *c, int a, uint64_t *v)
{
	const struct stream_attr *t = &c->attr[a];

	if (!t->present || t->len != 8)
		return -EPROTO;
	memcpy(v, t->data, 8);
	*v = le64toh(*v);
	return 0;
}

static int apply_data(struct diff_kernel *k, const struct stream_cmd *c,
		      const char *path)
{
	uint64_t off, len;
	int ret = attr_u64(c, BTRFS_SEND_A_FILE_OFFSET, &off);

	if (ret)
		return ret;
	switch (c->type) {
	case BTRFS_SEND_C_WRITE:
		len = c->attr[BTRFS_SEND_A_DATA].len;
		break;
	case BTRFS_SEND_C_CLONE:
		ret = attr_u64(c, BTRFS_SEND_A_CLONE_LEN, &len);
		break;
	case BTRFS_SEND_C_ENCODED_WRITE:
		ret = attr_u64(c, BTRFS_SEND_A_UNENCODED_FILE_LEN, &len);
		break;
	default:
		ret = attr_u64(c, BTRFS_SEND_A_SIZE, &len);
	}
	return ret ? ret : data(k, path, off, len);
}

static int apply(struct diff_kernel *k, const struct stream_cmd *c)
{
	char *path = k->path, *to = k->to;
	uint64_t ino;
	int ret;

	switch (c->type) {
	case BTRFS_SEND_C_SUBVOL:
	case BTRFS_SEND_C_SNAPSHOT:
	case BTRFS_SEND_C_END:
		return 0;
	}
	ret = attr_str(c, BTRFS_SEND_A_PATH, path, PATH_MAX);
	if (ret)
		return ret;
	if (stream_cmd_makes_inode(c->type)) {
		ret = attr_u64(c, BTRFS_SEND_A_INO, &ino);
		return ret ? ret : k_made(k, path, ino);
	}
	switch (c->type) {
	case BTRFS_SEND_C_RENAME:
		ret = attr_str(c, BTRFS_SEND_A_PATH_TO, to, PATH_MAX);
		return ret ? ret : k_rename(k, path, to);
	case BTRFS_SEND_C_LINK:
		ret = attr_str(c, BTRFS_SEND_A_PATH_LINK, to, PATH_MAX);
		return ret ? ret : k_link(k, path, to);
	case BTRFS_SEND_C_UNLINK:
	case BTRFS_SEND_C_RMDIR:
		return k_unlink(k, path);
	case BTRFS_SEND_C_WRITE:
	case BTRFS_SEND_C_CLONE:
	case BTRFS_SEND_C_UPDATE_EXTENT:
	case BTRFS_SEND_C_ENCODED_WRITE:
		return apply_data(k, c, path);
	}
	return touched(k, path, NULL);
}

static int read_stream(struct diff_kernel *k, int fd)
{
	struct stream_reader r;
	struct stream_cmd c;
	struct encio_error e;
	int ret;

	ret = stream_reader_init(&r, fd, "the kernel's difference", &e);
	if (ret)
		return ret;
	while ((ret = stream_read_cmd(&r, &c, &e)) > 0) {
		ret = apply(k, &c);
		if (ret)
			break;
	}
	stream_reader_release(&r);
	return ret;
}

/* Whether a balance runs on the filesystem of @fd */
static bool balance_runs(int fd)
{
	struct btrfs_ioctl_balance_args a;

	memset(&a, 0, sizeof(a));
	return !ioctl(fd, BTRFS_IOC_BALANCE_PROGRESS, &a) || errno != ENOTCONN;
}

static int send_once(struct diff_kernel *k, int child_fd, uint64_t parent_id)
{
	struct send_job job = { .child_fd = child_fd, .parent_id = parent_id };
	pthread_t t;
	int pfd[2], ret;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	job.pipe_fd = pfd[1];
	if (pthread_create(&t, NULL, send_thread, &job)) {
		close(pfd[0]);
		close(pfd[1]);
		return -EAGAIN;
	}
	ret = read_stream(k, pfd[0]);
	/* a reader gone stops the send (EPIPE) */
	close(pfd[0]);
	pthread_join(t, NULL);
	return job.err ? job.err : ret;
}

/*
 * The inodes the kernel's difference from @parent_fd to @child_fd touches,
 * added to @todo; the data ranges it sends, kept for diff_kernel_ranges().
 * The kernel refuses to send while a balance runs: that is waited for.
 */
int diff_kernel_run(int parent_fd, int child_fd, struct diff_inoset *todo,
		    struct diff_kernel **out)
{
	struct diff_kernel *k = calloc(1, sizeof(*k));
	uint64_t parent_id;
	int ret;

	if (!k)
		return -ENOMEM;
	k->parent_fd = parent_fd;
	k->todo = todo;
	k->root.ino = BTRFS_FIRST_FREE_OBJECTID;
	k->root.ppath = strdup(".");
	ret = k->root.ppath ?
		      btrfs_util_subvolume_id_fd(parent_fd, &parent_id) :
		      BTRFS_UTIL_ERROR_NO_MEMORY;
	if (ret) {
		diff_kernel_free(k);
		return -ENOMEM;
	}
	for (;;) {
		ret = send_once(k, child_fd, parent_id);
		/* nothing was read: the send did not start */
		if (ret != -EAGAIN || k->nr || !balance_runs(child_fd))
			break;
		while (balance_runs(child_fd))
			usleep(200 * 1000);
	}
	if (ret) {
		diff_kernel_free(k);
		return ret;
	}
	*out = k;
	return 0;
}

/*
 * The data ranges the kernel sent for @ino, moved into @rs: each inode is
 * asked for once, by one of the comparison's threads, and the table no
 * longer grows.
 */
int diff_kernel_ranges(struct diff_kernel *k, uint64_t ino,
		       struct diff_ranges *rs)
{
	size_t j;

	memset(rs, 0, sizeof(*rs));
	if (!k->cap)
		return 0;
	for (j = hash64(ino) & (k->cap - 1); k->slot[j].ino;
	     j = (j + 1) & (k->cap - 1))
		if (k->slot[j].ino == ino) {
			*rs = k->slot[j].ranges;
			memset(&k->slot[j].ranges, 0, sizeof(*rs));
			break;
		}
	return 0;
}

void diff_kernel_free(struct diff_kernel *k)
{
	size_t i;

	if (!k)
		return;
	kname_free(&k->root);
	for (i = 0; i < k->cap; i++)
		free(k->slot[i].ranges.r);
	free(k->slot);
	free(k);
}
