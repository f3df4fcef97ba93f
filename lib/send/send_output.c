// SPDX-License-Identifier: GPL-2.0
/*
 * encio send -f FILE: the stream is written to an unnamed file (O_TMPFILE)
 * or a hidden temporary name in FILE's directory and gets FILE's name only
 * once it is whole; FILE that exists and is not a regular file (/dev/null,
 * a FIFO) is written itself, as btrfs send writes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/extents.h"
#include "send/send.h"
#include "send/send_internal.h"
#include "stream/stream.h"

/* -f FILE when it exists and is not a regular file: written itself. */
static int output_open_itself(struct send_output *out, const char *file,
			      struct encio_error *e)
{
	out->fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out->fd < 0)
		return encio_error_set(e, errno, "open", file, false, 0);
	return 0;
}

/* A name for the temporary beside FILE, a dot-name ending in our pid. */
static void output_tmp_name(struct send_output *out)
{
	snprintf(out->tmp, sizeof(out->tmp), ".%.200s.encio-send-%d", out->name,
		 (int)getpid());
}

/*
 * Open the temporary in @dir: unnamed (O_TMPFILE), or where the file
 * system has none, under a dot-name.
 */
static int output_open_tmp(struct send_output *out, const char *dir)
{
	out->dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (out->dir_fd < 0)
		return -errno;
	out->fd = openat(out->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
			 0644);
	if (out->fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return out->fd < 0 ? -errno : 0;
	output_tmp_name(out);
	out->fd = openat(out->dir_fd, out->tmp,
			 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out->fd >= 0)
		return 0;
	out->tmp[0] = '\0';
	return -errno;
}

int send_output_open(struct send_output *out, const char *file,
		     struct encio_error *e)
{
	char dir[PATH_MAX], *real = NULL;
	const char *path = file, *slash;
	struct stat st;
	int ret;

	memset(out, 0, sizeof(*out));
	out->fd = out->dir_fd = -1;
	if (!stat(file, &st) && !S_ISREG(st.st_mode))
		return output_open_itself(out, file, e);
	/* a symlink's target is replaced; a dangling one made, as btrfs send */
	if (!lstat(file, &st) && S_ISLNK(st.st_mode)) {
		real = realpath(file, NULL);
		if (!real)
			return output_open_itself(out, file, e);
		path = real;
	}
	slash = strrchr(path, '/');
	if (snprintf(out->name, sizeof(out->name), "%s",
		     slash ? slash + 1 : path) >= (int)sizeof(out->name)) {
		ret = encio_error_set(e, ENAMETOOLONG, "open", file, false, 0);
		goto out;
	}
	if (!out->name[0]) {
		ret = encio_error_set(e, EISDIR, "open", file, false, 0);
		goto out;
	}
	snprintf(dir, sizeof(dir), "%.*s",
		 slash ? (int)(slash - path) + (slash == path) : 1,
		 slash ? path : ".");
	out->replaces =
		!fstatat(AT_FDCWD, path, &out->replaced, AT_SYMLINK_NOFOLLOW) &&
		S_ISREG(out->replaced.st_mode);
	ret = output_open_tmp(out, dir);
	if (ret) {
		send_output_abort(out);
		ret = encio_error_set(e, ret, "create a temporary beside", file,
				      false, 0);
	}
out:
	free(real);
	return ret;
}

/* A name for the unnamed temporary, to rename over FILE. */
static int output_link(struct send_output *out)
{
	char proc[32];

	output_tmp_name(out);
	if (!linkat(out->fd, "", out->dir_fd, out->tmp, AT_EMPTY_PATH))
		return 0;
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc does not */
	if (errno == ENOENT || errno == EPERM) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out->fd);
		if (!linkat(AT_FDCWD, proc, out->dir_fd, out->tmp,
			    AT_SYMLINK_FOLLOW))
			return 0;
	}
	out->tmp[0] = '\0';
	return -errno;
}

int send_output_commit(struct send_output *out, const char *file,
		       struct encio_error *e)
{
	const char *op = "write";
	int ret = 0;

	if (out->dir_fd < 0) {
		ret = close(out->fd) ? -errno : 0;
		out->fd = -1;
		goto out;
	}
	if (fsync(out->fd))
		ret = -errno;
	else if (!out->tmp[0])
		ret = output_link(out);
	if (ret)
		goto out;
	ret = close(out->fd) ? -errno : 0;
	out->fd = -1;
	if (ret)
		goto out;
	op = "rename the stream to";
	if (renameat(out->dir_fd, out->tmp, out->dir_fd, out->name)) {
		ret = -errno;
		goto out;
	}
	out->tmp[0] = '\0';
out:
	send_output_abort(out);
	if (ret)
		return encio_error_set(e, ret, op, file, false, 0);
	return 0;
}

int send_output_keep(struct send_output *out, char *kept)
{
	int ret = 0;

	if (out->dir_fd < 0) {
		send_output_abort(out);
		return -ENOENT;
	}
	if (snprintf(kept, NAME_MAX + 1, "%s" SEND_PARTIAL_SUFFIX, out->name) >
	    NAME_MAX)
		ret = -ENAMETOOLONG;
	else if (fsync(out->fd))
		ret = -errno;
	else if (!out->tmp[0])
		ret = output_link(out);
	if (!ret && renameat(out->dir_fd, out->tmp, out->dir_fd, kept))
		ret = -errno;
	if (!ret)
		out->tmp[0] = '\0';
	send_output_abort(out);
	return ret;
}

void send_output_abort(struct send_output *out)
{
	if (out->fd >= 0)
		close(out->fd);
	if (out->tmp[0])
		unlinkat(out->dir_fd, out->tmp, 0);
	if (out->dir_fd >= 0)
		close(out->dir_fd);
	out->fd = out->dir_fd = -1;
	out->tmp[0] = '\0';
}
