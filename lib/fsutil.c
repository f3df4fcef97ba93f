// SPDX-License-Identifier: GPL-2.0
/* See fsutil.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "fsutil.h"

int openat2_resolve(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC,
				.resolve = resolve };
	long fd = syscall(SYS_openat2, dirfd, path[0] ? path : ".", &how,
			  sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

int open_parent_resolve(int dirfd, const char *rel, int flags, uint64_t resolve,
			const char **name)
{
	const char *slash = strrchr(rel, '/');
	char dir[PATH_MAX];

	*name = slash ? slash + 1 : rel;
	if (snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0,
		     rel) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	return openat2_resolve(dirfd, dir, flags, resolve);
}

int subvol_children(int fd, char ***paths, size_t *nr)
{
	struct btrfs_util_subvolume_iterator *iter;
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	char *rel, **v = NULL, **grown;
	uint64_t id;
	size_t n = 0;

	*paths = NULL;
	*nr = 0;
	err = btrfs_util_subvolume_id_fd(fd, &id);
	if (!err)
		err = btrfs_util_create_subvolume_iterator_fd(fd, 0, 0, &iter);
	if (err)
		return btrfsutil_errno(err);
	while (!(err = btrfs_util_subvolume_iterator_next_info(iter, &rel,
							       &info))) {
		if (info.parent_id != id) {
			free(rel);
			continue;
		}
		grown = realloc(v, (n + 1) * sizeof(*v));
		if (!grown) {
			free(rel);
			err = BTRFS_UTIL_ERROR_NO_MEMORY;
			errno = ENOMEM;
			break;
		}
		v = grown;
		v[n++] = rel;
	}
	btrfs_util_destroy_subvolume_iterator(iter);
	*paths = v;
	*nr = n;
	return err == BTRFS_UTIL_ERROR_STOP_ITERATION ? 0 :
							btrfsutil_errno(err);
}
