// SPDX-License-Identifier: GPL-2.0
/* See fsutil.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/fsutil.h"
#include "base/kernel.h"

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

int subvol_root_openat(int dir_fd, const char *name,
		       struct btrfs_util_subvolume_info *info)
{
	struct stat st;
	int fd, ret;

	fd = openat(dir_fd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		ret = -ENOTDIR;
	else
		ret = btrfsutil_errno(
			btrfs_util_subvolume_info_fd(fd, 0, info));
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int pwrite_all(int fd, const void *buf, size_t len, uint64_t offset)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = pwrite(fd, p, len, (off_t)offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

int pread_all(int fd, void *buf, size_t len, uint64_t offset)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = pread(fd, p, len, (off_t)offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

/*
 * The subvolume ids the UUID tree lists for @uuid under @type (a received
 * UUID may belong to several subvolumes): at most @max in @ids, their
 * number returned, 0 when there is no such item.
 */
int uuid_tree_ids(int fd, const uint8_t *uuid, uint8_t type, uint64_t *ids,
		  int max)
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

const char *path_beneath(const char *path, const char *top)
{
	size_t n = strlen(top);

	if (!n)
		return *path ? path : ".";
	if (strncmp(path, top, n) || (path[n] && path[n] != '/'))
		return NULL;
	return path[n] ? path + n + 1 : ".";
}

size_t path_trimmed_len(const char *path)
{
	size_t len = strlen(path);

	while (len > 1 && path[len - 1] == '/')
		len--;
	return len == 1 && path[0] == '/' ? 0 : len;
}

/* In the btrfs mount @mnt (its root @root in the filesystem), by UUID. */
static int find_in_mount(const char *mnt, const char *root, const uint8_t *uuid,
			 uint64_t ctransid, char *out, size_t len)
{
	static const uint8_t types[] = { BTRFS_UUID_KEY_SUBVOL,
					 BTRFS_UUID_KEY_RECEIVED_SUBVOL };
	struct btrfs_util_subvolume_info info;
	uint64_t ids[16];
	const char *rel;
	char *path;
	int fd, n, i, t, ret = -ENOENT;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	for (t = 0; t < 2 && ret == -ENOENT; t++) {
		n = uuid_tree_ids(fd, uuid, types[t], ids, 16);
		for (i = 0; i < n && ret == -ENOENT; i++) {
			if (btrfs_util_subvolume_info_fd(fd, ids[i], &info) ||
			    info.ctransid != ctransid ||
			    memcmp(t ? info.received_uuid : info.uuid, uuid,
				   BTRFS_UUID_SIZE) ||
			    btrfs_util_subvolume_path_fd(fd, ids[i], &path))
				continue;
			rel = path_beneath(path,
					   root[0] == '/' ? root + 1 : root);
			if (rel &&
			    (strcmp(rel, ".") ?
				     snprintf(out, len, "%s/%s", mnt, rel) :
				     snprintf(out, len, "%s", mnt)) < (int)len)
				ret = 0;
			free(path);
		}
	}
	close(fd);
	return ret;
}

int subvol_find_by_uuid(const uint8_t *uuid, uint64_t ctransid, char *path,
			size_t len)
{
	char line[3 * PATH_MAX], root[PATH_MAX], mnt[PATH_MAX], *sep;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (ret == -ENOENT && fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - TYPE SOURCE */
		sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "btrfs ", 6) ||
		    sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
		    strchr(root, '\\') || strchr(mnt, '\\'))
			continue;
		ret = find_in_mount(mnt, root, uuid, ctransid, path, len);
	}
	fclose(f);
	return ret;
}

DIR *dir_stream_of(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;
	DIR *dir;

	if (fd < 0)
		return NULL;
	dir = fdopendir(fd);
	if (!dir) {
		err = errno;
		close(fd);
		errno = err;
	}
	return dir;
}
