// SPDX-License-Identifier: GPL-2.0
/*
 * encio receive: apply a send stream beneath a destination directory.
 *
 * Confinement: a stream is untrusted. Every path is relative to the
 * subvolume being received; absolute paths and ".." components are refused
 * before anything is touched. Parent directories are opened with openat2()
 * beneath the subvolume's directory, following no symlink and crossing no
 * mount, and the last component is handled with *at() calls that never
 * follow it. Files are written only after an O_PATH open showed a regular
 * file, so no write goes through a symlink, a device or a fifo.
 *
 * A subvolume is marked received (received UUID, stransid) and made
 * read-only only at its END, after syncfs() reported no error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "codec.h"
#include "payload.h"
#include "receive.h"
#include "stream.h"

/* One request for the synchronous encoded write, one for the probe. */
#define RECEIVE_ENGINE_DEPTH 2
/* A callback's cause: two paths cut to 256 bytes and their words. */
#define RECEIVE_WHY_LEN 768
#define RECEIVE_WHAT_LEN (STREAM_WHAT_LEN + RECEIVE_WHY_LEN)

#define DIR_CACHE_SLOTS 8

enum mk_kind { MK_FILE, MK_DIR, MK_NOD, MK_FIFO, MK_SOCK, MK_SYMLINK };

static const int mk_cmd[] = {
	[MK_FILE] = BTRFS_SEND_C_MKFILE, [MK_DIR] = BTRFS_SEND_C_MKDIR,
	[MK_NOD] = BTRFS_SEND_C_MKNOD,	 [MK_FIFO] = BTRFS_SEND_C_MKFIFO,
	[MK_SOCK] = BTRFS_SEND_C_MKSOCK, [MK_SYMLINK] = BTRFS_SEND_C_SYMLINK,
};

/* A summary: two paths cut to 256 bytes, a UUID and the words. */
#define RECEIVE_SUMMARY_LEN 768

/*
 * A node the stream made, not created yet. btrfs send makes every new inode
 * under an orphan name (oINO-GEN-0) and renames it into place in the next
 * command: created at its final name directly, it costs one create instead
 * of a create and a rename. Any other command creates it first where the
 * stream said.
 */
struct pending_node {
	bool active;
	enum mk_kind kind;
	mode_t type;
	dev_t rdev;
	char path[PATH_MAX];
	char target[PATH_MAX];
};

struct receive_ctx {
	struct receive_options opts;
	struct engine engine;
	bool engine_ready;
	struct codec *codec;
	void *decode_buf;
	struct encio_probe probe;
	bool probed;
	dev_t probed_dev;
	enum encio_io_mode write_mode;

	int dest_fd;
	int mnt_fd; /* where parents and clone sources are opened from */
	char mnt_path[PATH_MAX]; /* its path from the top-level subvolume */
	int subvol_fd; /* the subvolume being received, -1 between two */
	char subvol_name[NAME_MAX + 1];
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid;

	/* Streams send many writes to one file in a row. */
	int write_fd;
	char write_path[PATH_MAX];

	/*
	 * The parent directories last resolved, by their path in the stream:
	 * the commands for one entry come in a row, and each resolution is
	 * an openat2() and a close() otherwise. Forgotten when a rename or a
	 * removal could change what a path names, and with the subvolume.
	 */
	struct dir_slot {
		int fd;
		uint64_t used;
		bool setgid_known; /* setgid: its mode had S_ISGID when opened */
		bool setgid;
		char path[PATH_MAX];
	} dirs[DIR_CACHE_SLOTS];
	uint64_t dir_clock;
	struct dir_slot *last_dir; /* the last open_parent() gave */

	struct pending_node pending;

	/* The paths of the command being applied, resolved. */
	char path_buf[2][PATH_MAX];

	/*
	 * The node created last, while its owner is still ours: streams chown
	 * every new node, and to root when root receives. Such a chown
	 * changes nothing but costs a transaction.
	 */
	bool fresh_valid;
	uid_t euid; /* the owner of what we create, read once */
	gid_t egid;
	char fresh_path[PATH_MAX];

	struct receive_stats stats;
	struct receive_events events;
	const struct stream_reader *reader;

	/*
	 * The command being applied, for the summary of its failure: its
	 * paths are copied, the stream's buffers are gone by then. @cmd_end
	 * is the reader's offset when it began, to tell a failed command
	 * from a stream that failed to read after it.
	 */
	int cmd;
	uint64_t cmd_end;
	char cmd_path[PATH_MAX];
	char cmd_path2[PATH_MAX];
	/* A parent or clone source that was not found, for the summary. */
	bool lookup_failed;
	bool lookup_unreachable;
	uint8_t lookup_uuid[BTRFS_UUID_SIZE];
	bool ended; /* an END stops the receive: -e, or errors before it */
	uint64_t subvol_errors; /* failed commands passed by in this one */
	/*
	 * Under -C the working directory is /proc/self/fd, opened before
	 * the chroot hid it: descriptors are named relative to it.
	 */
	bool chrooted;
	char summary[RECEIVE_SUMMARY_LEN];
	receive_progress_fn progress;
	void *progress_arg;

	/* The last clone source found by UUID: clones come in runs. */
	int clone_src_fd;
	uint8_t clone_src_uuid[BTRFS_UUID_SIZE];
	uint64_t clone_src_transid;

	const char *why; /* the cause of a callback's failure */
	char why_buf[RECEIVE_WHY_LEN];
	bool finishing; /* the failure came from finishing a subvolume */
	char what[RECEIVE_WHAT_LEN]; /* the error's operation, outlives run */
};

static int fail(struct receive_ctx *ctx, int err, const char *why)
{
	ctx->why = why;
	return err < 0 ? err : -err;
}

static void begin_cmd(struct receive_ctx *ctx, int cmd, const char *path,
		      const char *path2)
{
	ctx->stats.commands++;
	ctx->cmd = cmd;
	ctx->cmd_end = ctx->reader->offset;
	ctx->lookup_failed = false;
	snprintf(ctx->cmd_path, sizeof(ctx->cmd_path), "%s", path);
	if (path2)
		snprintf(ctx->cmd_path2, sizeof(ctx->cmd_path2), "%s", path2);
	else
		ctx->cmd_path2[0] = '\0';
}

static int btrfsutil_errno(enum btrfs_util_error err)
{
	if (err == BTRFS_UTIL_OK)
		return 0;
	return errno ? -errno : -EIO;
}

int receive_ctx_new(struct receive_ctx **ret,
		    const struct receive_options *opts, struct encio_error *e)
{
	struct engine_config config = { .depth = RECEIVE_ENGINE_DEPTH,
					.force_backing = -1 };
	struct receive_ctx *ctx;
	int err, i;

	*ret = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return encio_error_set(e, ENOMEM, "allocate", "receive", false,
				       0);
	ctx->opts = *opts;
	ctx->dest_fd = ctx->mnt_fd = ctx->subvol_fd = ctx->write_fd = -1;
	ctx->clone_src_fd = -1;
	ctx->euid = geteuid();
	ctx->egid = getegid();
	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		ctx->dirs[i].fd = -1;
	err = engine_init(&ctx->engine, &config);
	if (err) {
		receive_ctx_free(ctx);
		return encio_error_set(e, err, "set up", "the I/O engine",
				       false, 0);
	}
	ctx->engine_ready = true;
	ctx->codec = codec_new();
	ctx->decode_buf = malloc(BTRFS_MAX_UNCOMPRESSED);
	if (!ctx->codec || !ctx->decode_buf) {
		receive_ctx_free(ctx);
		return encio_error_set(e, ENOMEM, "allocate", "the decoder",
				       false, 0);
	}
	*ret = ctx;
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* @path is @top or beneath it, as stream paths go. */
static bool path_within(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

static void dir_cache_clear(struct receive_ctx *ctx)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		close_fd(&ctx->dirs[i].fd);
}

/* What @path names may have changed: so may what names beneath it. */
static void dir_cache_forget(struct receive_ctx *ctx, const char *path)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		if (ctx->dirs[i].fd >= 0 &&
		    path_within(ctx->dirs[i].path, path))
			close_fd(&ctx->dirs[i].fd);
}

/* @path's mode may change: a cached directory's set-gid bit is unknown. */
static void dir_setgid_forget(struct receive_ctx *ctx, const char *path)
{
	int i;

	for (i = 0; i < DIR_CACHE_SLOTS; i++)
		if (!strcmp(ctx->dirs[i].path, path))
			ctx->dirs[i].setgid_known = false;
}

/* The cached directories are the subvolume's: they go with it. */
static void close_subvol(struct receive_ctx *ctx)
{
	ctx->pending.active = false;
	ctx->fresh_valid = false;
	ctx->last_dir = NULL;
	dir_cache_clear(ctx);
	close_fd(&ctx->subvol_fd);
}

void receive_ctx_free(struct receive_ctx *ctx)
{
	if (!ctx)
		return;
	close_fd(&ctx->write_fd);
	close_subvol(ctx);
	close_fd(&ctx->clone_src_fd);
	close_fd(&ctx->mnt_fd);
	close_fd(&ctx->dest_fd);
	if (ctx->engine_ready)
		engine_release(&ctx->engine);
	codec_free(ctx->codec);
	free(ctx->decode_buf);
	free(ctx);
}

void receive_set_events(struct receive_ctx *ctx,
			const struct receive_events *events)
{
	ctx->events = *events;
}

void receive_set_progress(struct receive_ctx *ctx, receive_progress_fn fn,
			  void *arg)
{
	ctx->progress = fn;
	ctx->progress_arg = arg;
}

const struct receive_stats *receive_get_stats(const struct receive_ctx *ctx)
{
	return &ctx->stats;
}

const struct encio_probe *receive_get_probe(const struct receive_ctx *ctx)
{
	return ctx->probed ? &ctx->probe : NULL;
}

static void report_progress(struct receive_ctx *ctx)
{
	if (!ctx->progress)
		return;
	ctx->stats.stream_bytes = ctx->reader->offset;
	ctx->progress(&ctx->stats, ctx->progress_arg);
}

/* Paths. */

static int openat2_how(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC,
				.resolve = resolve };
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int openat2_beneath(int dirfd, const char *path, int flags)
{
	return openat2_how(dirfd, path, flags,
			   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
				   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

static int resolve_failed(struct receive_ctx *ctx, int err)
{
	if (err == -ELOOP)
		return fail(ctx, err, "the path passes through a symlink");
	if (err == -EXDEV)
		return fail(ctx, err, "the path leaves the subvolume");
	return err;
}

/* Refuse what could lead out of the subvolume, before touching anything. */
static int check_path(struct receive_ctx *ctx, const char *path)
{
	const char *p = path;
	size_t n;

	if (ctx->subvol_fd < 0)
		return fail(ctx, EINVAL,
			    "no subvolume or snapshot command first");
	if (path[0] == '/')
		return fail(ctx, EINVAL, "absolute path");
	while (*p) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return fail(ctx, EINVAL,
				    "the path has a '..' component");
		p += n;
		p += strspn(p, "/");
	}
	return 0;
}

/*
 * A stream path as the kernel resolves it, in @buf (PATH_MAX): empty and
 * '.' components dropped, so that one entry has one spelling wherever
 * receive compares or caches paths ("./a" is "a"). A path that ends in
 * '/' or '/.' keeps one '/': it names that directory itself. Absolute
 * paths and '..' are refused by check_path() on the original.
 */
static int resolve_path(struct receive_ctx *ctx, const char **path, char *buf)
{
	const char *p = *path;
	size_t n, len = 0;
	bool dir_itself = false;
	int ret;

	ret = check_path(ctx, p);
	if (ret)
		return ret;
	while (*p) {
		n = strcspn(p, "/");
		dir_itself = n == 0 || (n == 1 && *p == '.');
		if (!dir_itself) {
			if (len)
				buf[len++] = '/';
			memcpy(buf + len, p, n);
			len += n;
		}
		p += n;
		if (*p == '/') {
			p++;
			dir_itself = true;
		}
	}
	if (dir_itself && len)
		buf[len++] = '/';
	buf[len] = '\0';
	*path = buf;
	return 0;
}

static int flush_pending(struct receive_ctx *ctx);

/*
 * The parent directory of @path beneath the subvolume, with the last
 * component put in @last ("." for the subvolume itself): an O_PATH fd
 * that the directory cache owns (callers do not close it). The slot used
 * last is never the one a miss takes, so the fds of two calls in a row
 * (rename, link) are both valid.
 */
static int open_parent(struct receive_ctx *ctx, const char *path, char *last)
{
	struct dir_slot *slot = &ctx->dirs[0];
	const char *slash, *name;
	struct stat st;
	size_t len;
	int fd, ret, i;

	ret = flush_pending(ctx) ?: check_path(ctx, path);
	if (ret)
		return ret;
	slash = strrchr(path, '/');
	name = slash ? slash + 1 : path;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	snprintf(last, NAME_MAX + 1, "%s", *name ? name : ".");
	len = slash ? (size_t)(slash - path) : 0;
	for (i = 0; i < DIR_CACHE_SLOTS; i++) {
		struct dir_slot *d = &ctx->dirs[i];

		if (d->fd >= 0 && !strncmp(d->path, path, len) &&
		    d->path[len] == '\0') {
			d->used = ++ctx->dir_clock;
			ctx->last_dir = d;
			return d->fd;
		}
		if (d->fd < 0 || (slot->fd >= 0 && d->used < slot->used))
			slot = d;
	}
	close_fd(&slot->fd);
	memcpy(slot->path, path, len);
	slot->path[len] = '\0';
	fd = openat2_beneath(ctx->subvol_fd, len ? slot->path : ".",
			     O_PATH | O_DIRECTORY);
	if (fd < 0)
		return resolve_failed(ctx, fd);
	slot->fd = fd;
	slot->used = ++ctx->dir_clock;
	slot->setgid_known = !fstat(fd, &st);
	slot->setgid = slot->setgid_known && (st.st_mode & S_ISGID);
	ctx->last_dir = slot;
	return fd;
}

/*
 * The path of the descriptor @fd (and of @last beneath it, when not NULL)
 * in /proc/self/fd, for the calls that take no descriptor.
 */
static void fd_path(const struct receive_ctx *ctx, char *out, size_t len,
		    int fd, const char *last)
{
	snprintf(out, len, "%s%d%s%s", ctx->chrooted ? "" : "/proc/self/fd/",
		 fd, last ? "/" : "", last ? last : "");
}

/*
 * Open a regular file beneath @dirfd for I/O: an O_PATH open that follows
 * nothing shows what is there, and only a regular file is reopened, so a
 * symlink, device or fifo the stream made is never opened through.
 */
static int open_regular_beneath(struct receive_ctx *ctx, int dirfd,
				const char *path, int flags)
{
	char proc[64];
	struct stat st;
	int pfd, fd;

	pfd = openat2_beneath(dirfd, path, O_PATH | O_NOFOLLOW);
	if (pfd < 0)
		return resolve_failed(ctx, pfd);
	if (fstat(pfd, &st)) {
		fd = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		fd = fail(ctx, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			  "not a regular file");
		goto out;
	}
	fd_path(ctx, proc, sizeof(proc), pfd, NULL);
	fd = open(proc, flags | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		fd = -errno;
out:
	close(pfd);
	return fd;
}

static int close_write_fd(struct receive_ctx *ctx)
{
	int fd = ctx->write_fd;

	ctx->write_fd = -1;
	if (fd >= 0 && close(fd))
		return -errno;
	return 0;
}

static int get_write_fd(struct receive_ctx *ctx, const char *path)
{
	int ret, fd;

	ret = flush_pending(ctx) ?: resolve_path(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	if (ctx->write_fd >= 0 && strcmp(ctx->write_path, path) == 0)
		return ctx->write_fd;
	ret = close_write_fd(ctx);
	if (ret)
		return fail(ctx, ret, "close the previous file");
	fd = open_regular_beneath(ctx, ctx->subvol_fd, path, O_WRONLY);
	if (fd < 0)
		return fd;
	ctx->write_fd = fd;
	snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", path);
	return fd;
}

/* The file just made, open for its data: the write fd for @path. */
static void keep_write_fd(struct receive_ctx *ctx, int fd, const char *path)
{
	close_fd(&ctx->write_fd);
	ctx->write_fd = fd;
	snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", path);
}

/* @path is the regular file open for writing: its metadata by fd. */
static bool written_file(const struct receive_ctx *ctx, const char *path)
{
	return ctx->write_fd >= 0 && !strcmp(ctx->write_path, path);
}

/* Subvolumes. */

static int check_name(struct receive_ctx *ctx, const char *name)
{
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strlen(name) > NAME_MAX)
		return fail(ctx, EINVAL,
			    "the subvolume name is not a plain name");
	return 0;
}

/*
 * Parents and clone sources: found by UUID across the whole filesystem, as
 * btrfs receive finds them, and opened from the root of the mount holding
 * the destination (or -m's directory), which must reach them.
 */

/*
 * Climb from the destination to the root of its mount: '..' that would
 * cross into another mount fails with EXDEV under RESOLVE_NO_XDEV, and
 * '..' of the process's root is that directory again.
 */
static int climb_to_mount_root(int dir)
{
	struct stat st, up_st;
	int fd, up;

	fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		up = openat2_how(fd, "..", O_RDONLY | O_DIRECTORY,
				 RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS);
		if (up == -EXDEV)
			return fd;
		if (up < 0)
			break;
		if (fstat(fd, &st) || fstat(up, &up_st)) {
			up = -errno;
			break;
		}
		if (st.st_dev == up_st.st_dev && st.st_ino == up_st.st_ino) {
			close(up);
			return fd;
		}
		close(fd);
		fd = up;
	}
	close(fd);
	return up;
}

static int same_filesystem(int a, int b)
{
	struct btrfs_ioctl_fs_info_args fa = { 0 }, fb = { 0 };

	if (ioctl(a, BTRFS_IOC_FS_INFO, &fa) ||
	    ioctl(b, BTRFS_IOC_FS_INFO, &fb))
		return -errno;
	return memcmp(fa.fsid, fb.fsid, BTRFS_FSID_SIZE) == 0;
}

/*
 * The path of directory @fd from the filesystem's top-level subvolume
 * ("" for the top-level itself): its subvolume's path, then its path
 * within that subvolume.
 */
static int dir_fs_path(int fd, char *out, size_t size)
{
	struct btrfs_ioctl_ino_lookup_args args = { 0 };
	enum btrfs_util_error err;
	char *subvol = NULL;
	uint64_t id;
	struct stat st;
	size_t len;
	int n;

	if (fstat(fd, &st))
		return -errno;
	err = btrfs_util_subvolume_id_fd(fd, &id);
	if (!err)
		err = btrfs_util_subvolume_path_fd(fd, id, &subvol);
	if (err)
		return btrfsutil_errno(err);
	args.objectid = st.st_ino;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args)) {
		free(subvol);
		return -errno;
	}
	/* The kernel ends a directory's path with '/'. */
	len = strnlen(args.name, sizeof(args.name));
	if (len && args.name[len - 1] == '/')
		len--;
	n = snprintf(out, size, "%s%s%.*s", subvol, *subvol && len ? "/" : "",
		     (int)len, args.name);
	free(subvol);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int open_mount_root(struct receive_ctx *ctx)
{
	int fd, ret;

	if (ctx->mnt_fd >= 0)
		return 0;
	if (ctx->opts.root_mount) {
		fd = open(ctx->opts.root_mount,
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return fail(ctx, errno, "open the -m directory");
		ret = same_filesystem(fd, ctx->dest_fd);
		if (ret <= 0) {
			close(fd);
			return fail(
				ctx, ret ?: -EXDEV,
				"the -m directory is not on the destination's filesystem");
		}
	} else {
		fd = climb_to_mount_root(ctx->dest_fd);
		if (fd < 0)
			return fail(ctx, fd,
				    "find the root of the destination's mount");
	}
	ret = dir_fs_path(fd, ctx->mnt_path, sizeof(ctx->mnt_path));
	if (ret) {
		close(fd);
		return fail(ctx, ret,
			    "resolve the mount's path in the filesystem");
	}
	ctx->mnt_fd = fd;
	return 0;
}

static bool uuid_is_zero(const uint8_t *uuid)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];

	return memcmp(uuid, zero, BTRFS_UUID_SIZE) == 0;
}

static void uuid_format(const uint8_t *u, char out[BTRFS_UUID_UNPARSED_SIZE])
{
	snprintf(
		out, BTRFS_UUID_UNPARSED_SIZE,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

/*
 * The subvolume ids the UUID tree lists for @uuid under @type (a received
 * UUID may belong to several subvolumes): at most @max in @ids, their
 * number returned, 0 when there is no such item.
 */
static int uuid_tree_ids(int fd, const uint8_t *uuid, uint8_t type,
			 uint64_t *ids, int max)
{
	struct btrfs_ioctl_search_args args = { 0 };
	struct btrfs_ioctl_search_key *sk = &args.key;
	struct btrfs_ioctl_search_header sh;
	uint64_t objectid, offset, id;
	uint32_t i, n = 0;

	/* The key is the UUID's two halves, little-endian (uuid-tree.c). */
	memcpy(&objectid, uuid, 8);
	memcpy(&offset, uuid + 8, 8);
	sk->tree_id = BTRFS_UUID_TREE_OBJECTID;
	sk->min_objectid = sk->max_objectid = le64toh(objectid);
	sk->min_offset = sk->max_offset = le64toh(offset);
	sk->min_type = sk->max_type = type;
	sk->max_transid = UINT64_MAX;
	sk->nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args))
		return -errno;
	if (sk->nr_items == 0)
		return 0;
	memcpy(&sh, args.buf, sizeof(sh));
	if (sh.len > sizeof(args.buf) - sizeof(sh))
		return -EUCLEAN;
	for (i = 0; i + sizeof(id) <= sh.len && (int)n < max; i += sizeof(id)) {
		memcpy(&id, args.buf + sizeof(sh) + i, sizeof(id));
		ids[n++] = le64toh(id);
	}
	return (int)n;
}

/* Why no subvolume with a UUID could be used, the most telling first. */
struct uuid_search {
	const uint8_t *uuid;
	uint64_t transid;
	bool stale;	  /* one found, of another transid */
	bool unreachable; /* one found, outside the mount */
	uint64_t stale_transid;
	char path[PATH_MAX]; /* of the one found */
};

/* @path relative to @top when it is @top or beneath it, else NULL. */
static const char *path_beneath(const char *path, const char *top)
{
	size_t n = strlen(top);

	if (!n)
		return *path ? path : ".";
	if (strncmp(path, top, n) || (path[n] && path[n] != '/'))
		return NULL;
	return path[n] ? path + n + 1 : ".";
}

/*
 * Open subvolume @id if it still has the UUID sought and the transid the
 * stream names, and the mount reaches it. Returns the fd, -ENOENT for a
 * subvolume that does not do (noted in @s), or another -errno.
 */
static int open_candidate(struct receive_ctx *ctx, uint64_t id, bool received,
			  struct uuid_search *s)
{
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	const char *rel;
	char *path;
	uint64_t found_id, transid;
	struct stat st;
	int fd = -ENOENT;

	err = btrfs_util_subvolume_info_fd(ctx->mnt_fd, id, &info);
	if (err == BTRFS_UTIL_ERROR_SUBVOLUME_NOT_FOUND)
		return -ENOENT;
	if (err)
		return btrfsutil_errno(err);
	if (memcmp(received ? info.received_uuid : info.uuid, s->uuid,
		   BTRFS_UUID_SIZE))
		return -ENOENT;
	err = btrfs_util_subvolume_path_fd(ctx->mnt_fd, id, &path);
	if (err == BTRFS_UTIL_ERROR_SUBVOLUME_NOT_FOUND)
		return -ENOENT;
	if (err)
		return btrfsutil_errno(err);
	/*
	 * A received subvolume keeps the ctransid its source had when sent
	 * as stransid; a subvolume found by its own UUID is the source.
	 */
	transid = received ? info.stransid : info.ctransid;
	rel = path_beneath(path, ctx->mnt_path);
	if (transid != s->transid || !rel) {
		/* The first one found is the one named. */
		if (!s->stale && !s->unreachable)
			snprintf(s->path, sizeof(s->path), "%s", path);
		if (transid != s->transid && !s->stale) {
			s->stale = true;
			s->stale_transid = transid;
			snprintf(s->path, sizeof(s->path), "%s", path);
		}
		s->unreachable |= !rel;
		goto out;
	}
	fd = openat2_beneath(ctx->mnt_fd, rel, O_RDONLY | O_DIRECTORY);
	if (fd == -ENOENT)
		fd = -ESTALE;
	if (fd < 0)
		goto out;
	/* Renamed or replaced since the lookup: not the one found. */
	if (fstat(fd, &st) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID ||
	    btrfs_util_subvolume_id_fd(fd, &found_id) || found_id != id) {
		close(fd);
		fd = -ESTALE;
	}
out:
	free(path);
	return fd;
}

static int uuid_search_failed(struct receive_ctx *ctx, const char *role,
			      const struct uuid_search *s)
{
	char uuid[BTRFS_UUID_UNPARSED_SIZE];

	uuid_format(s->uuid, uuid);
	ctx->lookup_failed = true;
	ctx->lookup_unreachable = s->unreachable && !s->stale;
	memcpy(ctx->lookup_uuid, s->uuid, BTRFS_UUID_SIZE);
	if (s->stale)
		snprintf(
			ctx->why_buf, sizeof(ctx->why_buf),
			"%s subvolume %s at '%.256s' has transid %llu, the stream's is %llu",
			role, uuid, s->path,
			(unsigned long long)s->stale_transid,
			(unsigned long long)s->transid);
	else if (s->unreachable)
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "%s subvolume %s at '%.256s' is outside %s '/%.256s'",
			 role, uuid, s->path,
			 ctx->opts.root_mount ? "the -m directory" :
						"the mount, whose root is",
			 ctx->mnt_path);
	else
		snprintf(
			ctx->why_buf, sizeof(ctx->why_buf),
			"%s subvolume %s: no subvolume with that UUID in the filesystem",
			role, uuid);
	ctx->why = ctx->why_buf;
	return -ENOENT;
}

#define UUID_IDS_MAX 64

/*
 * The subvolume whose received UUID (else whose own UUID) is @uuid and
 * whose transid is @transid, opened: the @role ("parent", "clone source")
 * of a stream command.
 */
static int open_subvol_by_uuid(struct receive_ctx *ctx, const char *role,
			       const uint8_t *uuid, uint64_t transid)
{
	static const uint8_t types[] = { BTRFS_UUID_KEY_RECEIVED_SUBVOL,
					 BTRFS_UUID_KEY_SUBVOL };
	struct uuid_search *s;
	uint64_t ids[UUID_IDS_MAX];
	int t, i, n, fd;

	if (uuid_is_zero(uuid))
		return fail(ctx, ENOENT, "no subvolume has a zero UUID");
	fd = open_mount_root(ctx);
	if (fd)
		return fd;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->uuid = uuid;
	s->transid = transid;
	for (t = 0; t < (int)sizeof(types); t++) {
		n = uuid_tree_ids(ctx->mnt_fd, uuid, types[t], ids,
				  UUID_IDS_MAX);
		if (n < 0) {
			fd = fail(ctx, n, "search the UUID tree");
			goto out;
		}
		for (i = 0; i < n; i++) {
			fd = open_candidate(
				ctx, ids[i],
				types[t] == BTRFS_UUID_KEY_RECEIVED_SUBVOL, s);
			if (fd == -ESTALE)
				fd = fail(
					ctx, fd,
					"the subvolume moved while it was looked up");
			else if (fd < 0 && fd != -ENOENT)
				fd = fail(ctx, fd,
					  "open the subvolume found by UUID");
			if (fd != -ENOENT)
				goto out;
		}
	}
	fd = uuid_search_failed(ctx, role, s);
out:
	free(s);
	return fd;
}

static int probe_dest(struct receive_ctx *ctx)
{
	struct stat st;
	int ret;

	if (ctx->opts.force_decompress) {
		ctx->write_mode = ENCIO_IO_NONE;
		return 0;
	}
	if (fstat(ctx->subvol_fd, &st))
		return -errno;
	if (ctx->probed && ctx->probed_dev == st.st_dev)
		return 0;
	ret = engine_probe_write(&ctx->engine, ctx->subvol_fd,
				 ctx->opts.io_mode, &ctx->probe);
	if (ret)
		return fail(ctx, ret, "write with the forced --io mode");
	ctx->probed = true;
	ctx->probed_dev = st.st_dev;
	/*
	 * Stream commands are applied one at a time, so a write is never
	 * overlapped with another: at depth 1 the ring only adds latency
	 * (design notes: 0.47 s against 0.28 s for the ioctl), whether or not
	 * the probe saw the write punted to io-wq. Auto takes the ioctl.
	 */
	if (ctx->opts.io_mode == ENCIO_IO_AUTO &&
	    ctx->probe.write_err[ENCIO_IO_IOCTL] == 0)
		ctx->probe.write_mode = ENCIO_IO_IOCTL;
	ctx->write_mode = ctx->probe.write_mode;
	return 0;
}

static int start_subvol(struct receive_ctx *ctx, const char *name,
			const uint8_t *uuid, uint64_t ctransid)
{
	int fd;

	fd = openat(ctx->dest_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(ctx, errno, "open the new subvolume");
	close_subvol(ctx);
	ctx->subvol_fd = fd;
	ctx->subvol_errors = 0;
	snprintf(ctx->subvol_name, sizeof(ctx->subvol_name), "%s", name);
	memcpy(ctx->uuid, uuid, BTRFS_UUID_SIZE);
	ctx->ctransid = ctransid;
	return probe_dest(ctx);
}

/* Sync, mark received, make read-only: only a complete subvolume. */
static int finish_subvol(struct receive_ctx *ctx)
{
	struct btrfs_ioctl_received_subvol_args rs;
	enum btrfs_util_error err;
	int ret;

	if (ctx->subvol_fd < 0)
		return 0;
	ctx->finishing = true;
	ret = flush_pending(ctx);
	if (ret)
		return ret;
	ret = close_write_fd(ctx);
	if (ret)
		return fail(ctx, ret, "close the last file written");
	if (syncfs(ctx->subvol_fd))
		return fail(ctx, errno, "sync the filesystem");
	memset(&rs, 0, sizeof(rs));
	memcpy(rs.uuid, ctx->uuid, BTRFS_UUID_SIZE);
	rs.stransid = ctx->ctransid;
	if (ioctl(ctx->subvol_fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, &rs))
		return fail(ctx, errno, "set the received UUID");
	err = btrfs_util_set_subvolume_read_only_fd(ctx->subvol_fd, true);
	if (err)
		return fail(ctx, btrfsutil_errno(err), "make it read-only");
	close_subvol(ctx);
	ctx->finishing = false;
	ctx->stats.subvols++;
	return 0;
}

static int rcv_subvol(const char *name, const uint8_t *uuid, uint64_t ctransid,
		      void *arg)
{
	struct receive_ctx *ctx = arg;
	enum btrfs_util_error err;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_SUBVOL, name, NULL);
	ret = finish_subvol(ctx) ?: check_name(ctx, name);
	if (ret)
		return ret;
	if (ctx->events.subvol)
		ctx->events.subvol(name, uuid, ctransid, NULL, 0,
				   ctx->events.arg);
	err = btrfs_util_create_subvolume_fd(ctx->dest_fd, name, 0, NULL, NULL);
	if (err)
		return fail(ctx, btrfsutil_errno(err), "create the subvolume");
	return start_subvol(ctx, name, uuid, ctransid);
}

static int rcv_snapshot(const char *name, const uint8_t *uuid,
			uint64_t ctransid, const uint8_t *parent_uuid,
			uint64_t parent_ctransid, void *arg)
{
	struct receive_ctx *ctx = arg;
	enum btrfs_util_error err;
	int ret, parent;

	begin_cmd(ctx, BTRFS_SEND_C_SNAPSHOT, name, NULL);
	ret = finish_subvol(ctx) ?: check_name(ctx, name);
	if (ret)
		return ret;
	if (ctx->events.subvol)
		ctx->events.subvol(name, uuid, ctransid, parent_uuid,
				   parent_ctransid, ctx->events.arg);
	parent = open_subvol_by_uuid(ctx, "parent", parent_uuid,
				     parent_ctransid);
	if (parent < 0)
		return parent;
	err = btrfs_util_create_snapshot_fd2(parent, ctx->dest_fd, name, 0,
					     NULL, NULL);
	ret = btrfsutil_errno(err);
	close(parent);
	if (ret)
		return fail(ctx, ret, "snapshot the parent subvolume");
	return start_subvol(ctx, name, uuid, ctransid);
}

static int rcv_end(void *arg)
{
	struct receive_ctx *ctx = arg;
	int ret;

	begin_cmd(ctx, BTRFS_SEND_C_END, ctx->subvol_name, NULL);
	/*
	 * A subvolume some commands failed in (-E) is not complete: it is
	 * left writable and not received, and the receive ends with it, as
	 * btrfs receive's does.
	 */
	if (ctx->subvol_errors) {
		ret = flush_pending(ctx);
		if (ret)
			return ret;
		ctx->ended = true;
		return -ECANCELED;
	}
	ret = finish_subvol(ctx);
	if (ret || !ctx->opts.honor_end)
		return ret;
	/* Stops the reader; receive_run() tells this from a failure. */
	ctx->ended = true;
	return -ECANCELED;
}

/* Creating names. */

/* @path was just created in ctx->last_dir: owned by us unless set-gid. */
static void fresh_set(struct receive_ctx *ctx, const char *path)
{
	const struct dir_slot *d = ctx->last_dir;

	ctx->fresh_valid = d && d->setgid_known && !d->setgid &&
			   strlen(path) < sizeof(ctx->fresh_path);
	if (ctx->fresh_valid)
		strcpy(ctx->fresh_path, path);
}

static int create_node(struct receive_ctx *ctx, const char *path,
		       enum mk_kind kind, mode_t type, dev_t rdev,
		       const char *target)
{
	char last[NAME_MAX + 1];
	int pfd, fd, ret = 0;

	ctx->fresh_valid = false;
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	switch (kind) {
	case MK_FILE:
		/* Kept: its data, owner, mode and times usually follow. */
		fd = openat(pfd, last,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0600);
		ret = fd < 0 ? -1 : 0;
		if (fd >= 0)
			keep_write_fd(ctx, fd, path);
		break;
	case MK_DIR:
		ret = mkdirat(pfd, last, 0700);
		break;
	case MK_NOD:
	case MK_FIFO:
	case MK_SOCK:
		ret = mknodat(pfd, last, type | 0600, rdev);
		break;
	case MK_SYMLINK:
		/* Never followed: only *at() calls without follow use it. */
		ret = symlinkat(target, pfd, last);
		break;
	}
	if (ret)
		return -errno;
	fresh_set(ctx, path);
	return 0;
}

/* Create the pending node where the stream made it. */
static int flush_pending(struct receive_ctx *ctx)
{
	struct pending_node *p = &ctx->pending;

	if (!p->active)
		return 0;
	p->active = false;
	return create_node(ctx, p->path, p->kind, p->type, p->rdev, p->target);
}

/*
 * Create the pending node at @to, the name its rename gives it: -EEXIST
 * (still pending) where @to exists, which the rename would replace.
 */
static int create_pending_at(struct receive_ctx *ctx, const char *to)
{
	struct pending_node *p = &ctx->pending;
	int ret;

	p->active = false;
	ret = create_node(ctx, to, p->kind, p->type, p->rdev, p->target);
	if (ret == -EEXIST)
		p->active = true;
	else
		dir_cache_forget(ctx, to);
	return ret;
}

/*
 * A mk* command: checked now (a path beneath the subvolume, a name not
 * there yet) so that errors name this command, created at the next one.
 */
static int make_node(struct receive_ctx *ctx, const char *path,
		     enum mk_kind kind, mode_t type, dev_t rdev,
		     const char *target)
{
	struct pending_node *p = &ctx->pending;
	char last[NAME_MAX + 1];
	struct stat st;
	size_t len;
	int pfd;

	begin_cmd(ctx, mk_cmd[kind], path, target);
	pfd = resolve_path(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	/* mkdir of "a/" makes "a", as the kernel's does. */
	len = strlen(path);
	if (kind == MK_DIR && len && path[len - 1] == '/')
		ctx->path_buf[0][len - 1] = '\0';
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	if (strlen(path) >= sizeof(p->path) ||
	    (target && strlen(target) >= sizeof(p->target)))
		return create_node(ctx, path, kind, type, rdev, target);
	if (!fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW))
		return -EEXIST;
	if (errno != ENOENT)
		return -errno;
	p->active = true;
	p->kind = kind;
	p->type = type;
	p->rdev = rdev;
	strcpy(p->path, path);
	strcpy(p->target, target ? target : "");
	return 0;
}

static int rcv_mkfile(const char *path, void *arg)
{
	return make_node(arg, path, MK_FILE, 0, 0, NULL);
}

static int rcv_mkdir(const char *path, void *arg)
{
	return make_node(arg, path, MK_DIR, 0, 0, NULL);
}

static int rcv_mknod(const char *path, uint64_t mode, uint64_t rdev, void *arg)
{
	mode_t type = mode & S_IFMT;

	if (type != S_IFCHR && type != S_IFBLK && type != S_IFIFO &&
	    type != S_IFSOCK)
		return fail(arg, EINVAL, "mknod of a type that is no node");
	return make_node(arg, path, MK_NOD, type, (dev_t)rdev, NULL);
}

static int rcv_mkfifo(const char *path, void *arg)
{
	return make_node(arg, path, MK_FIFO, S_IFIFO, 0, NULL);
}

static int rcv_mksock(const char *path, void *arg)
{
	return make_node(arg, path, MK_SOCK, S_IFSOCK, 0, NULL);
}

static int rcv_symlink(const char *path, const char *target, void *arg)
{
	return make_node(arg, path, MK_SYMLINK, 0, 0, target);
}

/* Moving and removing names: none follows the last component. */

static int rcv_rename(const char *from, const char *to, void *arg)
{
	struct receive_ctx *ctx = arg;
	char last_from[NAME_MAX + 1], last_to[NAME_MAX + 1];
	int pfrom, pto, ret;

	begin_cmd(ctx, BTRFS_SEND_C_RENAME, from, to);
	ret = resolve_path(ctx, &from, ctx->path_buf[0]) ?:
		      resolve_path(ctx, &to, ctx->path_buf[1]);
	if (ret)
		return ret;
	if (ctx->pending.active && !strcmp(ctx->pending.path, from)) {
		ret = create_pending_at(ctx, to);
		if (ret != -EEXIST)
			return ret;
	}
	pfrom = open_parent(ctx, from, last_from);
	if (pfrom < 0)
		return pfrom;
	pto = open_parent(ctx, to, last_to);
	if (pto < 0)
		return pto;
	ret = renameat(pfrom, last_from, pto, last_to) ? -errno : 0;
	ctx->fresh_valid = false;
	dir_cache_forget(ctx, from);
	dir_cache_forget(ctx, to);
	if (ctx->write_fd >= 0 && !ret && !strcmp(ctx->write_path, from))
		snprintf(ctx->write_path, sizeof(ctx->write_path), "%s", to);
	else if (ctx->write_fd >= 0 && (path_within(ctx->write_path, from) ||
					path_within(ctx->write_path, to)))
		ret = close_write_fd(ctx) ?: ret;
	return ret;
}

static int rcv_link(const char *path, const char *target, void *arg)
{
	struct receive_ctx *ctx = arg;
	char last[NAME_MAX + 1], last_target[NAME_MAX + 1];
	int pfd, ptarget;

	begin_cmd(ctx, BTRFS_SEND_C_LINK, path, target);
	pfd = resolve_path(ctx, &path, ctx->path_buf[0]) ?:
		      resolve_path(ctx, &target, ctx->path_buf[1]);
	if (pfd)
		return pfd;
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	/* The target is a stream path too, so it is beneath the subvolume. */
	ptarget = open_parent(ctx, target, last_target);
	if (ptarget < 0)
		return ptarget;
	return linkat(ptarget, last_target, pfd, last, 0) ? -errno : 0;
}

static int remove_name(struct receive_ctx *ctx, const char *path, int flags)
{
	char last[NAME_MAX + 1];
	int pfd, ret;

	begin_cmd(ctx,
		  (flags & AT_REMOVEDIR) ? BTRFS_SEND_C_RMDIR :
					   BTRFS_SEND_C_UNLINK,
		  path, NULL);
	ret = flush_pending(ctx) ?: resolve_path(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	ctx->fresh_valid = false;
	if (ctx->write_fd >= 0 && path_within(ctx->write_path, path)) {
		ret = close_write_fd(ctx);
		if (ret)
			return fail(ctx, ret, "close the previous file");
	}
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	ret = unlinkat(pfd, last, flags) ? -errno : 0;
	dir_cache_forget(ctx, path);
	return ret;
}

static int rcv_unlink(const char *path, void *arg)
{
	return remove_name(arg, path, 0);
}

static int rcv_rmdir(const char *path, void *arg)
{
	return remove_name(arg, path, AT_REMOVEDIR);
}

/* Metadata: every call works on the name itself, never what it points to. */

/* "/proc/self/fd/N/LAST" for the l*xattr() calls, which do not follow it. */
static int xattr_path(struct receive_ctx *ctx, const char *path, char *out,
		      size_t len, int *pfd)
{
	char last[NAME_MAX + 1];
	int ret;

	ret = resolve_path(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	*pfd = open_parent(ctx, path, last);
	if (*pfd < 0)
		return *pfd;
	fd_path(ctx, out, len, *pfd, last);
	return 0;
}

static int rcv_set_xattr(const char *path, const char *name, const void *data,
			 size_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	char full[NAME_MAX + 64];
	int pfd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_SET_XATTR, path, name);
	ret = xattr_path(ctx, path, full, sizeof(full), &pfd);
	if (ret)
		return ret;
	/* a later chown removes security.capability: do not skip it */
	ctx->fresh_valid = false;
	return lsetxattr(full, name, data, len, 0) ? -errno : 0;
}

static int rcv_remove_xattr(const char *path, const char *name, void *arg)
{
	struct receive_ctx *ctx = arg;
	char full[NAME_MAX + 64];
	int pfd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_REMOVE_XATTR, path, name);
	ret = xattr_path(ctx, path, full, sizeof(full), &pfd);
	if (ret)
		return ret;
	return lremovexattr(full, name) ? -errno : 0;
}

static int rcv_chmod(const char *path, uint64_t mode, void *arg)
{
	struct receive_ctx *ctx = arg;
	char last[NAME_MAX + 1], proc[64];
	int pfd, fd, ret;
	struct stat st;

	begin_cmd(ctx, BTRFS_SEND_C_CHMOD, path, NULL);
	ret = resolve_path(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	dir_setgid_forget(ctx, path);
	if (written_file(ctx, path))
		return fchmod(ctx->write_fd, mode & 07777) ? -errno : 0;
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	/*
	 * What fchmodat(AT_SYMLINK_NOFOLLOW) does in glibc, but through
	 * fd_path(), which works under -C, where /proc is out of reach.
	 */
	fd = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = fstat(fd, &st) ? -errno : 0;
	/* A symlink's mode Linux cannot change: nothing to do. */
	if (!ret && !S_ISLNK(st.st_mode)) {
		fd_path(ctx, proc, sizeof(proc), fd, NULL);
		ret = chmod(proc, mode & 07777) ? -errno : 0;
	}
	close(fd);
	return ret;
}

static int rcv_chown(const char *path, uint64_t uid, uint64_t gid, void *arg)
{
	struct receive_ctx *ctx = arg;
	char last[NAME_MAX + 1];
	int pfd;

	begin_cmd(ctx, BTRFS_SEND_C_CHOWN, path, NULL);
	pfd = resolve_path(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	if (ctx->fresh_valid && uid == ctx->euid && gid == ctx->egid &&
	    !strcmp(path, ctx->fresh_path))
		return 0;
	ctx->fresh_valid = false;
	dir_setgid_forget(ctx, path);
	if (written_file(ctx, path))
		return fchown(ctx->write_fd, uid, gid) ? -errno : 0;
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	return fchownat(pfd, last, uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int rcv_utimes(const char *path, const struct timespec *atime,
		      const struct timespec *mtime,
		      const struct timespec *ctime, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct timespec ts[2] = { *atime, *mtime };
	char last[NAME_MAX + 1];
	int pfd;

	(void)ctime;
	begin_cmd(ctx, BTRFS_SEND_C_UTIMES, path, NULL);
	pfd = resolve_path(ctx, &path, ctx->path_buf[0]);
	if (pfd)
		return pfd;
	if (written_file(ctx, path))
		return futimens(ctx->write_fd, ts) ? -errno : 0;
	pfd = open_parent(ctx, path, last);
	if (pfd < 0)
		return pfd;
	return utimensat(pfd, last, ts, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int rcv_fileattr(const char *path, uint64_t attr, void *arg)
{
	struct receive_ctx *ctx = arg;

	/* Ignored, as btrfs receive does. */
	(void)attr;
	begin_cmd(ctx, BTRFS_SEND_C_FILEATTR, path, NULL);
	return 0;
}

static int rcv_update_extent(const char *path, uint64_t offset, uint64_t len,
			     void *arg)
{
	struct receive_ctx *ctx = arg;

	/* Only sent with --no-data: nothing to do. */
	(void)offset;
	(void)len;
	begin_cmd(ctx, BTRFS_SEND_C_UPDATE_EXTENT, path, NULL);
	return 0;
}

/* Data. */

static int pwrite_all(int fd, const char *buf, size_t len, uint64_t offset)
{
	ssize_t n;

	while (len) {
		n = pwrite(fd, buf, len, offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= n;
		offset += n;
	}
	return 0;
}

static int write_plain(struct receive_ctx *ctx, int fd, const void *data,
		       size_t len, uint64_t offset)
{
	int ret = pwrite_all(fd, data, len, offset);

	if (ret)
		return ret;
	ctx->stats.bytes_written += len;
	report_progress(ctx);
	return 0;
}

static int rcv_write(const char *path, uint64_t offset, const void *data,
		     size_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	int fd;

	begin_cmd(ctx, BTRFS_SEND_C_WRITE, path, NULL);
	fd = get_write_fd(ctx, path);
	if (fd < 0)
		return fd;
	return write_plain(ctx, fd, data, len, offset);
}

/*
 * The subvolume a clone reads from: the one being received (by UUID only,
 * as btrfs receive), else found by UUID and transid and kept for the next.
 */
static int clone_source(struct receive_ctx *ctx, const uint8_t *uuid,
			uint64_t transid)
{
	int fd;

	if (memcmp(uuid, ctx->uuid, BTRFS_UUID_SIZE) == 0)
		return ctx->subvol_fd;
	if (ctx->clone_src_fd >= 0 && transid == ctx->clone_src_transid &&
	    memcmp(uuid, ctx->clone_src_uuid, BTRFS_UUID_SIZE) == 0)
		return ctx->clone_src_fd;
	fd = open_subvol_by_uuid(ctx, "clone source", uuid, transid);
	if (fd < 0)
		return fd;
	close_fd(&ctx->clone_src_fd);
	ctx->clone_src_fd = fd;
	memcpy(ctx->clone_src_uuid, uuid, BTRFS_UUID_SIZE);
	ctx->clone_src_transid = transid;
	return fd;
}

static int rcv_clone(const char *path, uint64_t offset, uint64_t len,
		     const uint8_t *clone_uuid, uint64_t clone_ctransid,
		     const char *clone_path, uint64_t clone_offset, void *arg)
{
	struct receive_ctx *ctx = arg;
	struct file_clone_range range;
	int fd, dir, src, ret;

	begin_cmd(ctx, BTRFS_SEND_C_CLONE, path, NULL);
	fd = get_write_fd(ctx, path);
	if (fd < 0)
		return fd;
	ret = resolve_path(ctx, &clone_path, ctx->path_buf[1]);
	if (ret)
		return ret;
	dir = clone_source(ctx, clone_uuid, clone_ctransid);
	if (dir < 0)
		return dir;
	src = open_regular_beneath(ctx, dir, clone_path, O_RDONLY);
	if (src < 0) {
		ctx->why = ctx->why ?: "open the clone source";
		return src;
	}
	range = (struct file_clone_range){ .src_fd = src,
					   .src_offset = clone_offset,
					   .src_length = len,
					   .dest_offset = offset };
	ret = ioctl(fd, FICLONERANGE, &range) ? -errno : 0;
	close(src);
	if (ret)
		return fail(ctx, ret, "clone the range");
	ctx->stats.bytes_written += len;
	report_progress(ctx);
	return 0;
}

static int rcv_truncate(const char *path, uint64_t size, void *arg)
{
	struct receive_ctx *ctx = arg;
	int fd;

	begin_cmd(ctx, BTRFS_SEND_C_TRUNCATE, path, NULL);
	fd = get_write_fd(ctx, path);
	if (fd < 0)
		return fd;
	if (size > INT64_MAX)
		return fail(ctx, EFBIG, "size past the largest file");
	return ftruncate(fd, (off_t)size) ? -errno : 0;
}

static int rcv_fallocate(const char *path, uint32_t mode, uint64_t offset,
			 uint64_t len, void *arg)
{
	struct receive_ctx *ctx = arg;
	int fd;

	begin_cmd(ctx, BTRFS_SEND_C_FALLOCATE, path, NULL);
	fd = get_write_fd(ctx, path);
	if (fd < 0)
		return fd;
	if (offset > INT64_MAX || len > INT64_MAX)
		return fail(ctx, EFBIG, "range past the largest file");
	return fallocate(fd, (int)mode, (off_t)offset, (off_t)len) ? -errno : 0;
}

/* The destination refused the encoded write for a reason decoding avoids. */
static bool write_refusal(int err)
{
	return err == EINVAL || err == EOPNOTSUPP || err == ENOTTY ||
	       err == EPERM;
}

/* One encoded write through the engine, waited for: streams are serial. */
static int write_encoded(struct receive_ctx *ctx, int fd,
			 const struct stream_encoded_write *ew)
{
	struct engine *engine = &ctx->engine;
	struct engine_req *req, *done;
	ssize_t res;
	int err;

	/* From the stream's buffer: no copy into a slot. */
	if (ctx->write_mode == ENCIO_IO_IOCTL)
		return encoded_write_ioctl(fd, ew->data, ew->len, ew->offset,
					   ew->unencoded_file_len,
					   ew->unencoded_len,
					   ew->unencoded_offset,
					   ew->compression);
	req = engine_get_req(engine);
	if (!req)
		return -EBUSY;
	memcpy(engine_req_buf(engine, req), ew->data, ew->len);
	memset(&req->args, 0, sizeof(req->args));
	req->args.len = ew->unencoded_file_len;
	req->args.unencoded_len = ew->unencoded_len;
	req->args.unencoded_offset = ew->unencoded_offset;
	req->args.compression = ew->compression;
	engine_encoded_write(engine, req, ctx->write_mode, fd, ew->offset,
			     ew->len);
	do {
		done = engine_reap(engine, true, &err);
		if (err && !done) {
			engine_put_req(engine, req);
			return err < 0 ? err : -err;
		}
	} while (done != req);
	res = req->res;
	engine_put_req(engine, req);
	return res < 0 ? (int)res : 0;
}

/*
 * Decode the extent into ctx->decode_buf, zero-filled past its data as the
 * kernel reads it. With @verify it must decode to at least the bytes the
 * file takes from it: what is missing would read back as zeroes. Returns
 * the decoded length or -errno.
 */
static ssize_t decode_extent(struct receive_ctx *ctx,
			     const struct stream_encoded_write *ew, bool verify)
{
	ssize_t n;

	if (ew->unencoded_len > BTRFS_MAX_UNCOMPRESSED)
		return fail(ctx, EINVAL, "unencoded length past 128 KiB");
	n = codec_decode(ctx->codec, ew->compression, ew->data, ew->len,
			 ctx->decode_buf, ew->unencoded_len);
	if (n < 0)
		return fail(ctx, n, "the data does not decode");
	if (verify &&
	    (uint64_t)n < ew->unencoded_offset + ew->unencoded_file_len) {
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "the data decodes to %zd bytes, the file uses %llu", n,
			 (unsigned long long)(ew->unencoded_offset +
					      ew->unencoded_file_len));
		return fail(ctx, EINVAL, ctx->why_buf);
	}
	return n;
}

/* Write the decoded extent; @decoded: ctx->decode_buf holds it already. */
static int write_decoded(struct receive_ctx *ctx, int fd,
			 const struct stream_encoded_write *ew, bool decoded)
{
	ssize_t n;
	int ret;

	if (!decoded) {
		n = decode_extent(ctx, ew, false);
		if (n < 0)
			return n;
	}
	ret = write_plain(ctx, fd,
			  (const char *)ctx->decode_buf + ew->unencoded_offset,
			  ew->unencoded_file_len, ew->offset);
	if (ret)
		return ret;
	ctx->stats.extents_decoded++;
	return 0;
}

static int rcv_encoded_write(const char *path,
			     const struct stream_encoded_write *ew, void *arg)
{
	struct receive_ctx *ctx = arg;
	bool decoded = false;
	const char *why;
	ssize_t n;
	int fd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_ENCODED_WRITE, path, NULL);
	if (ew->encryption != BTRFS_ENCODED_IO_ENCRYPTION_NONE)
		return fail(ctx, EOPNOTSUPP, "encrypted extent");
	/* Before the file is opened: nothing is written for a bad payload. */
	ret = payload_check(ew->compression, ew->data, ew->len,
			    ew->unencoded_len, &why);
	if (ret)
		return fail(ctx, ret, why);
	if (ctx->opts.verify &&
	    ew->compression != BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		n = decode_extent(ctx, ew, true);
		if (n < 0)
			return n;
		decoded = true;
	}
	fd = get_write_fd(ctx, path);
	if (fd < 0)
		return fd;
	if (ew->compression == BTRFS_ENCODED_IO_COMPRESSION_NONE) {
		if (ew->len < ew->unencoded_offset ||
		    ew->len - ew->unencoded_offset < ew->unencoded_file_len)
			return fail(ctx, EINVAL,
				    "the data is shorter than its range");
		return write_plain(
			ctx, fd, (const char *)ew->data + ew->unencoded_offset,
			ew->unencoded_file_len, ew->offset);
	}
	if (ctx->write_mode != ENCIO_IO_NONE) {
		ret = write_encoded(ctx, fd, ew);
		if (ret == 0) {
			ctx->stats.extents_encoded++;
			ctx->stats.encoded_bytes += ew->len;
			ctx->stats.bytes_written += ew->unencoded_file_len;
			report_progress(ctx);
			return 0;
		}
		if (!write_refusal(-ret))
			return fail(ctx, ret, "encoded write");
	}
	return write_decoded(ctx, fd, ew, decoded);
}

static int rcv_enable_verity(const char *path, uint8_t algorithm,
			     uint32_t block_size, const void *salt,
			     size_t salt_len, const void *sig, size_t sig_len,
			     void *arg)
{
	struct receive_ctx *ctx = arg;
	struct fsverity_enable_arg va = {
		.version = 1,
		.hash_algorithm = algorithm,
		.block_size = block_size,
		.salt_size = salt_len,
		.salt_ptr = (uintptr_t)salt,
		.sig_size = sig_len,
		.sig_ptr = (uintptr_t)sig,
	};
	int fd, ret;

	begin_cmd(ctx, BTRFS_SEND_C_ENABLE_VERITY, path, NULL);
	/* fs-verity refuses a file that is open for writing. */
	ret = flush_pending(ctx)	  ?:
		      close_write_fd(ctx) ?:
		      resolve_path(ctx, &path, ctx->path_buf[0]);
	if (ret)
		return ret;
	fd = open_regular_beneath(ctx, ctx->subvol_fd, path, O_RDONLY);
	if (fd < 0)
		return fd;
	ret = ioctl(fd, FS_IOC_ENABLE_VERITY, &va) ? -errno : 0;
	close(fd);
	if (ret == -EOPNOTSUPP || ret == -ENOTTY)
		return fail(
			ctx, ret,
			"fs-verity is not supported by this kernel or filesystem");
	if (ret)
		return fail(ctx, ret, "enable fs-verity");
	return 0;
}

static const struct stream_ops receive_ops = {
	.subvol = rcv_subvol,
	.snapshot = rcv_snapshot,
	.mkfile = rcv_mkfile,
	.mkdir = rcv_mkdir,
	.mknod = rcv_mknod,
	.mkfifo = rcv_mkfifo,
	.mksock = rcv_mksock,
	.symlink = rcv_symlink,
	.rename = rcv_rename,
	.link = rcv_link,
	.unlink = rcv_unlink,
	.rmdir = rcv_rmdir,
	.set_xattr = rcv_set_xattr,
	.remove_xattr = rcv_remove_xattr,
	.write = rcv_write,
	.clone = rcv_clone,
	.truncate = rcv_truncate,
	.chmod = rcv_chmod,
	.chown = rcv_chown,
	.utimes = rcv_utimes,
	.update_extent = rcv_update_extent,
	.fallocate = rcv_fallocate,
	.fileattr = rcv_fileattr,
	.encoded_write = rcv_encoded_write,
	.enable_verity = rcv_enable_verity,
	.end = rcv_end,
};

/*
 * The reader's message lives in the reader: copy it into the context, with
 * the cause a callback gave ("apply mkfile of 'x' (absolute path) from").
 */
static void describe_error(struct receive_ctx *ctx, struct encio_error *e)
{
	const char *op = e->op ? e->op : "receive";
	size_t len = strlen(op);
	static const char from[] = " from";
	size_t from_len = sizeof(from) - 1;

	if (ctx->finishing)
		snprintf(ctx->what, sizeof(ctx->what),
			 "finish subvolume '%s' (%s) from", ctx->subvol_name,
			 ctx->why ? ctx->why : "end");
	else if (ctx->why && len > from_len &&
		 strcmp(op + len - from_len, from) == 0)
		snprintf(ctx->what, sizeof(ctx->what), "%.*s (%s)%s",
			 (int)(len - from_len), op, ctx->why, from);
	else if (ctx->why)
		snprintf(ctx->what, sizeof(ctx->what), "%s (%s)", op, ctx->why);
	else
		snprintf(ctx->what, sizeof(ctx->what), "%s", op);
	e->op = ctx->what;
}

/* The words btrfs receive uses for a command that failed. */
static void summarize_cmd(struct receive_ctx *ctx, const char *err)
{
	char *out = ctx->summary;
	size_t len = sizeof(ctx->summary);
	const char *p = ctx->cmd_path, *p2 = ctx->cmd_path2;
	char uuid[BTRFS_UUID_UNPARSED_SIZE];

	if (ctx->lookup_failed) {
		uuid_format(ctx->lookup_uuid, uuid);
		if (ctx->lookup_unreachable &&
		    ctx->cmd == BTRFS_SEND_C_SNAPSHOT)
			snprintf(
				out, len,
				"parent subvol is not reachable from inside the root subvol");
		else if (ctx->lookup_unreachable)
			snprintf(out, len,
				 "clone: source subvol %s unreachable", uuid);
		else if (ctx->cmd == BTRFS_SEND_C_SNAPSHOT)
			snprintf(
				out, len,
				"snapshot receive: cannot find parent subvolume %s",
				uuid);
		else
			snprintf(out, len,
				 "clone: cannot find source subvol %s", uuid);
		return;
	}
	if (ctx->finishing) {
		snprintf(out, len, "finishing subvolume %.256s failed: %s",
			 ctx->subvol_name, err);
		return;
	}
	switch (ctx->cmd) {
	case BTRFS_SEND_C_SUBVOL:
		snprintf(out, len, "creating subvolume %.256s failed: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_SNAPSHOT:
		snprintf(out, len, "creating snapshot %.256s failed: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_SYMLINK:
	case BTRFS_SEND_C_RENAME:
	case BTRFS_SEND_C_LINK:
		snprintf(out, len, "%s %.256s -> %.256s failed: %s",
			 stream_cmd_name(ctx->cmd), p, p2, err);
		break;
	case BTRFS_SEND_C_MKSOCK:
		snprintf(out, len, "mknod %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_SET_XATTR:
		snprintf(out, len, "lsetxattr %.256s %.256s failed: %s", p, p2,
			 err);
		break;
	case BTRFS_SEND_C_REMOVE_XATTR:
		snprintf(out, len, "lremovexattr %.256s %.256s failed: %s", p,
			 p2, err);
		break;
	case BTRFS_SEND_C_WRITE:
		snprintf(out, len, "writing to %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_ENCODED_WRITE:
		snprintf(out, len,
			 "encoded_write: writing to %.256s failed: %s", p, err);
		break;
	case BTRFS_SEND_C_CLONE:
		snprintf(out, len, "failed to clone extents to %.256s: %s", p,
			 err);
		break;
	case BTRFS_SEND_C_FALLOCATE:
		snprintf(out, len, "fallocate: fallocate on %.256s failed: %s",
			 p, err);
		break;
	case BTRFS_SEND_C_FILEATTR:
		snprintf(out, len,
			 "fileattr: set file attributes on %.256s failed: %s",
			 p, err);
		break;
	case BTRFS_SEND_C_ENABLE_VERITY:
		snprintf(out, len, "failed to enable verity on %.256s: %s", p,
			 err);
		break;
	default:
		snprintf(out, len, "%s %.256s failed: %s",
			 stream_cmd_name(ctx->cmd), p, err);
		break;
	}
}

/*
 * The summary of @e. A command failed when the error is at an offset the
 * reader is past and the callback of the command read last began;
 * otherwise the stream itself failed to read or parse. The reader's own
 * messages are told apart by their words.
 */
static void summarize(struct receive_ctx *ctx, const struct stream_reader *r,
		      const struct encio_error *e)
{
	const char *op = e->op ? e->op : "";

	ctx->summary[0] = '\0';
	if (!e->has_offset)
		return;
	if (e->offset < r->offset && ctx->cmd_end == r->offset) {
		summarize_cmd(ctx, strerror(e->err));
		return;
	}
	if (ctx->cmd == BTRFS_SEND_C_END && ctx->cmd_end == e->offset &&
	    e->offset == r->offset && e->err != EPROTONOSUPPORT)
		/* After an END comes a stream header or nothing. */
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "unexpected header");
	else if (e->err == EPROTONOSUPPORT)
		snprintf(
			ctx->summary, sizeof(ctx->summary),
			"stream version %u not supported, please use newer version",
			r->version);
	else if (strstr(op, "magic"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "unexpected header");
	else if (e->offset == 0 && r->buf_len == 0)
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "empty stream is not considered valid");
	else if (strstr(op, "crc32c"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "crc32 mismatch in command");
	else if (strstr(op, "truncated") || strstr(op, "ended without"))
		snprintf(ctx->summary, sizeof(ctx->summary),
			 "short read from stream");
}

const char *receive_error_summary(const struct receive_ctx *ctx)
{
	return ctx->summary[0] ? ctx->summary : NULL;
}

/*
 * chroot() into the destination (-C), as btrfs receive does: the mount's
 * root is opened before, so parents are found as without -C, and every
 * later access is through descriptors. The working directory is left in
 * /proc/self/fd, which names them for the calls that take a path.
 */
static int enter_dest(struct receive_ctx *ctx, struct encio_error *e)
{
	int ret, proc;

	ret = open_mount_root(ctx);
	if (ret)
		return encio_error_set(e, ret, ctx->why, "the destination",
				       false, 0);
	proc = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0)
		return encio_error_set(e, errno, "open", "/proc/self/fd", false,
				       0);
	ret = fchdir(ctx->dest_fd) || chroot(".") || fchdir(proc) ? -errno : 0;
	close(proc);
	if (ret)
		return encio_error_set(e, ret, "chroot into the destination",
				       "the destination", false, 0);
	ctx->chrooted = true;
	return 0;
}

int receive_run(struct receive_ctx *ctx, int stream_fd, const char *stream_name,
		const char *dest, struct encio_error *e)
{
	struct stream_reader r;
	uint64_t errors = 0, resume_at;
	bool after_end = false;
	struct statfs sfs;
	int ret;

	memset(e, 0, sizeof(*e));
	ctx->summary[0] = '\0';
	stream_fd_tune(stream_fd);
	ctx->dest_fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ctx->dest_fd < 0)
		return encio_error_set(e, errno, "open the destination", dest,
				       false, 0);
	/* Said before the stream is read: a subvolume needs btrfs. */
	if (!fstatfs(ctx->dest_fd, &sfs) && sfs.f_type != BTRFS_SUPER_MAGIC) {
		close_fd(&ctx->dest_fd);
		return encio_error_set(e, EOPNOTSUPP,
				       "receive (not a btrfs filesystem) into",
				       dest, false, 0);
	}
	ctx->why = NULL;
	ctx->finishing = false;
	ctx->ended = false;
	ctx->subvol_errors = 0;
	ctx->cmd = BTRFS_SEND_C_UNSPEC;
	ctx->cmd_end = 0;
	ret = ctx->opts.chroot ? enter_dest(ctx, e) : 0;
	if (ret) {
		close_fd(&ctx->mnt_fd);
		close_fd(&ctx->dest_fd);
		return ret;
	}
	ctx->reader = &r;
	ret = stream_reader_init(&r, stream_fd, stream_name, e);
	if (ret) {
		summarize(ctx, &r, e);
		goto out;
	}
	for (;;) {
		resume_at = r.offset;
		ret = stream_process(&r, &receive_ops, ctx, e);
		if (!ret || ctx->ended ||
		    (after_end && e->offset == resume_at && e->err == EBADMSG &&
		     r.eof && r.buf_pos == r.buf_len)) {
			/*
			 * The end of the input; an END that stops the
			 * receive (-e, or failed commands before it), the
			 * rest not read; or no END after a failed last one.
			 */
			memset(e, 0, sizeof(*e));
			ret = errors ? 1 : 0;
			ctx->summary[0] = '\0';
			break;
		}
		describe_error(ctx, e);
		summarize(ctx, &r, e);
		ctx->stats.errors++;
		errors++;
		/*
		 * A failed command was read whole: the next one can be
		 * applied. A stream that failed to read cannot go on.
		 */
		if (!(e->has_offset && e->offset < r.offset) ||
		    !ctx->events.error ||
		    (ctx->opts.max_errors && errors >= ctx->opts.max_errors))
			break;
		ctx->events.error(e, receive_error_summary(ctx),
				  ctx->events.arg);
		ctx->subvol_errors++;
		/*
		 * An END that failed may be the input's last command: the
		 * reader then finds no END after it, which is no error.
		 */
		after_end = ctx->cmd == BTRFS_SEND_C_END &&
			    ctx->cmd_end == r.offset;
		ctx->why = NULL;
		ctx->finishing = false;
	}
out:
	ctx->stats.stream_bytes = r.offset;
	/* A subvolume not finished stays writable and not received. */
	close_fd(&ctx->write_fd);
	close_subvol(ctx);
	close_fd(&ctx->clone_src_fd);
	close_fd(&ctx->mnt_fd);
	close_fd(&ctx->dest_fd);
	ctx->reader = NULL;
	stream_reader_release(&r);
	return ret;
}
