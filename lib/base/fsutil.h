/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What copy, send and receive share of the filesystem: opening what a
 * path names below a directory already open, confined to it (names in SRC
 * and DEST that others can change are reached this way once their top is
 * open), libbtrfsutil's errors as -errno, and a subvolume's children.
 */
#ifndef ENCIO_FSUTIL_H
#define ENCIO_FSUTIL_H

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/openat2.h>

#include <btrfsutil.h>

/* -errno of a libbtrfsutil error: it leaves errno set */
static inline int btrfsutil_errno(enum btrfs_util_error err)
{
	if (err == BTRFS_UTIL_OK)
		return 0;
	return errno ? -errno : -EIO;
}

/* below the directory, through no symlink, /proc's magic links included */
#define RESOLVE_CONFINED \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/*
 * openat2() of @path at @dirfd ("" is @dirfd itself) with @resolve, and
 * O_CLOEXEC. Returns the descriptor or -errno.
 */
int openat2_resolve(int dirfd, const char *path, int flags, uint64_t resolve);

static inline int open_beneath(int dirfd, const char *path, int flags)
{
	return openat2_resolve(dirfd, path, flags, RESOLVE_CONFINED);
}

/*
 * The directory @rel is in, opened below @dirfd as openat2_resolve()
 * does, and @rel's last component in *@name (a pointer into @rel).
 */
int open_parent_resolve(int dirfd, const char *rel, int flags, uint64_t resolve,
			const char **name);

/*
 * The paths (below it, to free) of the subvolumes whose parent is the
 * subvolume open at @fd, in *@paths. Returns 0 or -errno.
 */
int subvol_children(int fd, char ***paths, size_t *nr);

/*
 * The root of the subvolume at @name in @dir_fd, opened following no
 * symlink, and its @info: the descriptor, -ENOTDIR where @name is no
 * subvolume's root, or -errno.
 */
int subvol_root_openat(int dir_fd, const char *name,
		       struct btrfs_util_subvolume_info *info);

/* @path relative to @top ("." for @top itself) when beneath it, else NULL. */
const char *path_beneath(const char *path, const char *top);

/* @path's length without trailing slashes, for names made under it (0 for /). */
size_t path_trimmed_len(const char *path);

/*
 * The subvolume ids the UUID tree lists for @uuid under @type (a received
 * UUID may belong to several subvolumes): at most @max in @ids, their
 * number returned, 0 when there is none, or -errno.
 */
int uuid_tree_ids(int fd, const uint8_t *uuid, uint8_t type, uint64_t *ids,
		  int max);
/*
 * The path, through a mount of this process, of a subvolume of UUID (or
 * received UUID) @uuid and ctransid @ctransid: 0, or -ENOENT.
 */
int subvol_find_by_uuid(const uint8_t *uuid, uint64_t ctransid, char *path,
			size_t len);

/* A directory stream of its own on what @dirfd names, from its start; NULL
 * with errno set. @dirfd stays the caller's. */
DIR *dir_stream_of(int dirfd);

/* All @len bytes at @offset, whatever EINTR or short counts: 0 or -errno. */
int pwrite_all(int fd, const void *buf, size_t len, uint64_t offset);
/* -EIO where the file ends before @len bytes. */
int pread_all(int fd, void *buf, size_t len, uint64_t offset);

#endif
