// SPDX-License-Identifier: GPL-2.0
/*
 * encio send --snapshot: the read-only snapshot a writable subvolume is
 * sent from, made, checked and deleted by descriptors.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "send/send_internal.h"

/*
 * A read-only snapshot of the subvolume @path beside it, made from a
 * descriptor of the subvolume into a descriptor of the directory it is in
 * (BTRFS_IOC_SNAP_CREATE_V2), and opened there and checked to be a
 * snapshot of it: the names on the way may change meanwhile.
 */
int send_snapshot_create(const char *path, struct temp_snapshot *t,
			 struct encio_error *e)
{
	struct btrfs_util_subvolume_info src, info;
	char base[PATH_MAX], name[NAME_MAX + 1];
	enum btrfs_util_error err;
	int src_fd, ret;

	t->dir_fd = t->fd = -1;
	t->id = 0;
	snprintf(base, sizeof(base), "%s", path);
	if (snprintf(name, sizeof(name), ".%s.encio-send-%d", basename(base),
		     (int)getpid()) >= (int)sizeof(name))
		return encio_error_set(e, ENAMETOOLONG, "snapshot", path, false,
				       0);
	/* basename() may have changed base: dirname() of a fresh copy */
	snprintf(base, sizeof(base), "%s", path);
	snprintf(t->path, sizeof(t->path), "%s/%s", dirname(base), name);
	src_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (src_fd < 0)
		return encio_error_set(e, errno, "open", path, false, 0);
	if (btrfs_util_is_subvolume_fd(src_fd) != BTRFS_UTIL_OK ||
	    btrfs_util_subvolume_info_fd(src_fd, 0, &src)) {
		close(src_fd);
		return encio_error_set(e, EINVAL, "snapshot (not a subvolume)",
				       path, false, 0);
	}
	/* the directory the subvolume is in: its root's ".." */
	t->dir_fd = openat(src_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dir_fd < 0) {
		ret = encio_error_set(e, errno, "open the directory of", path,
				      false, 0);
		close(src_fd);
		return ret;
	}
	err = btrfs_util_create_snapshot_fd2(
		src_fd, t->dir_fd, name, BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY,
		NULL, NULL);
	close(src_fd);
	if (err)
		return encio_error_set(e, btrfsutil_errno(err), "snapshot",
				       t->path, false, 0);
	t->fd = openat(t->dir_fd, name,
		       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->fd < 0 || btrfs_util_subvolume_info_fd(t->fd, 0, &info) ||
	    memcmp(info.parent_uuid, src.uuid, BTRFS_UUID_SIZE) ||
	    !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY))
		return encio_error_set(
			e, ESTALE,
			"send (another subvolume is at the name of its snapshot)",
			t->path, false, 0);
	t->id = info.id;
	snprintf(t->proc, sizeof(t->proc), "/proc/self/fd/%d", t->fd);
	return 0;
}

/* The temporary deleted by its id, whatever its name holds by now. */
int send_snapshot_delete(struct temp_snapshot *t, struct encio_error *e,
			 int ret)
{
	if (t->id && btrfs_util_delete_subvolume_by_id_fd(t->dir_fd, t->id) &&
	    !ret)
		ret = encio_error_set(e, errno ?: EIO, "delete snapshot",
				      t->path, false, 0);
	if (t->fd >= 0)
		close(t->fd);
	if (t->dir_fd >= 0)
		close(t->dir_fd);
	return ret;
}
