// SPDX-License-Identifier: GPL-2.0
/*
 * Parents and clone sources: found by UUID across the whole filesystem, as
 * btrfs receive finds them, and opened from the root of the mount holding
 * the destination (or -m's directory), which must reach them.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "fs/received_mark.h"
#include "receive/receive_internal.h"

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
		up = openat2_resolve(fd, "..", O_RDONLY | O_DIRECTORY,
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

int rcv_lookup_open_mount_root(struct receive_ctx *ctx)
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

void rcv_lookup_uuid_format(const uint8_t *u,
			    char out[BTRFS_UUID_UNPARSED_SIZE])
{
	snprintf(
		out, BTRFS_UUID_UNPARSED_SIZE,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* What a search by UUID met, for its messages. */
struct uuid_search {
	const uint8_t *uuid;
	uint64_t transid;
	bool any_transid;    /* else only a subvolume of @transid will do */
	bool unreachable;    /* one found, outside the mount */
	char path[PATH_MAX]; /* of the one found */
	int refused;	     /* the received_trust of the first refused */
	char refused_path[PATH_MAX];
	char taken_path[PATH_MAX]; /* of a received one taken */
};

/*
 * A subvolume found by UUID whose transid is not the stream's is taken, as
 * btrfs receive takes it: a received parent is named by its received UUID
 * with its sender's own ctransid, which need not be the stransid kept here
 * (a move, a send on from a backup, a dedupe into the parent). Said under
 * -v only.
 */
static void transid_note(struct receive_ctx *ctx, const char *role,
			 const struct uuid_search *s, const char *path,
			 uint64_t transid)
{
	char uuid[BTRFS_UUID_UNPARSED_SIZE];

	if (!ctx->events.note || transid == s->transid)
		return;
	rcv_lookup_uuid_format(s->uuid, uuid);
	snprintf(
		ctx->why_buf, sizeof(ctx->why_buf),
		"%s subvolume %s at '%.256s' has transid %llu, the stream's is %llu: used",
		role, uuid, path, (unsigned long long)transid,
		(unsigned long long)s->transid);
	ctx->events.note(ctx->why_buf, ctx->events.arg);
}

/*
 * A received subvolume found by its received UUID is taken only if encio
 * received it and it is unchanged since, or it is root's (its mark, else
 * its owner: received_mark_check()); any user can give a subvolume of
 * theirs any received UUID and make it read-only. A writable one (copy
 * --subvolumes' copy of a writable subvolume) changes by design: only its
 * mark, or its owner, is looked at, as btrfs receive looks at nothing.
 * 0 to take @fd, -ENOENT (noted in @s), or another -errno.
 */
static int check_received(int fd, const struct btrfs_util_subvolume_info *info,
			  const char *path, struct uuid_search *s)
{
	int trust = received_mark_check(
		fd, info, !(info->flags & BTRFS_ROOT_SUBVOL_RDONLY));

	if (trust < 0)
		return trust;
	if (trust != RECEIVED_TRUSTED) {
		if (s->refused == RECEIVED_TRUSTED) {
			s->refused = trust;
			snprintf(s->refused_path, sizeof(s->refused_path), "%s",
				 path);
		}
		return -ENOENT;
	}
	snprintf(s->taken_path, sizeof(s->taken_path), "%s", path);
	return 0;
}

/*
 * Open subvolume @id if it still has the UUID sought (and the transid, in
 * a search that asks for it), the mount reaches it and, received, it is
 * taken (check_received()). Returns the fd, -ENOENT for a subvolume that
 * does not do (noted in @s), or another -errno.
 */
static int open_candidate(struct receive_ctx *ctx, const char *role,
			  uint64_t id, bool received, struct uuid_search *s)
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
	/*
	 * A received subvolume keeps the ctransid its source had when sent
	 * as stransid; a subvolume found by its own UUID is the source.
	 */
	transid = received ? info.stransid : info.ctransid;
	if (!s->any_transid && transid != s->transid)
		return -ENOENT;
	err = btrfs_util_subvolume_path_fd(ctx->mnt_fd, id, &path);
	if (err == BTRFS_UTIL_ERROR_SUBVOLUME_NOT_FOUND)
		return -ENOENT;
	if (err)
		return btrfsutil_errno(err);
	rel = path_beneath(path, ctx->mnt_path);
	if (!rel) {
		if (!s->unreachable)
			snprintf(s->path, sizeof(s->path), "%s", path);
		s->unreachable = true;
		goto out;
	}
	fd = openat2_resolve(ctx->mnt_fd, rel, O_RDONLY | O_DIRECTORY,
			     RESOLVE_IN_SUBVOL);
	if (fd == -ENOENT)
		fd = -ESTALE;
	if (fd < 0)
		goto out;
	/* Renamed or replaced since the lookup: not the one found. */
	if (fstat(fd, &st) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID ||
	    btrfs_util_subvolume_id_fd(fd, &found_id) || found_id != id) {
		close(fd);
		fd = -ESTALE;
		goto out;
	}
	if (received) {
		int ret = check_received(fd, &info, path, s);

		if (ret) {
			close(fd);
			fd = ret;
			goto out;
		}
	}
	transid_note(ctx, role, s, path, transid);
out:
	free(path);
	return fd;
}

/* The received subvolumes the mount holds, for a failed search's message. */
static void list_candidates(struct receive_ctx *ctx, char *out, size_t len)
{
	struct btrfs_util_subvolume_iterator *it;
	struct btrfs_util_subvolume_info info;
	char uuid[BTRFS_UUID_UNPARSED_SIZE];
	size_t used = 0, shown = 0, more = 0;
	char *path;

	out[0] = '\0';
	if (btrfs_util_create_subvolume_iterator_fd(ctx->mnt_fd, 0, 0, &it))
		return;
	while (!btrfs_util_subvolume_iterator_next_info(it, &path, &info)) {
		if (!uuid_is_zero(info.received_uuid) && shown < 3 &&
		    used + 64 + strlen(path) < len) {
			rcv_lookup_uuid_format(info.received_uuid, uuid);
			used += snprintf(out + used, len - used,
					 "%s'%s' (received UUID %s)",
					 shown ? ", " : "", path, uuid);
			shown++;
		} else if (!uuid_is_zero(info.received_uuid)) {
			more++;
		}
		free(path);
	}
	btrfs_util_destroy_subvolume_iterator(it);
	if (more && used + 32 < len)
		snprintf(out + used, len - used, " and %zu more", more);
}

static int uuid_search_failed(struct receive_ctx *ctx, const char *role,
			      const struct uuid_search *s)
{
	char uuid[BTRFS_UUID_UNPARSED_SIZE], found[RECEIVE_WHY_LEN / 2];

	rcv_lookup_uuid_format(s->uuid, uuid);
	ctx->lookup_failed = true;
	ctx->lookup_unreachable = s->unreachable;
	memcpy(ctx->lookup_uuid, s->uuid, BTRFS_UUID_SIZE);
	if (s->refused != RECEIVED_TRUSTED) {
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "%s subvolume %s at '%.256s' is not taken: %s", role,
			 uuid, s->refused_path, received_trust_str(s->refused));
	} else if (s->unreachable) {
		snprintf(ctx->why_buf, sizeof(ctx->why_buf),
			 "%s subvolume %s at '%.256s' is outside %s '/%.256s'",
			 role, uuid, s->path,
			 ctx->opts.root_mount ? "the -m directory" :
						"the mount, whose root is",
			 ctx->mnt_path);
	} else {
		list_candidates(ctx, found, sizeof(found));
		snprintf(
			ctx->why_buf, sizeof(ctx->why_buf),
			"%s subvolume %s: no subvolume has it as received UUID or UUID; received subvolumes here: %s",
			role, uuid, *found ? found : "none");
	}
	ctx->why = ctx->why_buf;
	return -ENOENT;
}

#define UUID_IDS_MAX 64

static int candidate_failed(struct receive_ctx *ctx, int fd)
{
	if (fd == -ESTALE)
		return fail(ctx, fd,
			    "the subvolume moved while it was looked up");
	return fail(ctx, fd, "open the subvolume found by UUID");
}

/* Whether subvolume @path (from the top-level) is right in directory @dir. */
static bool right_in(const char *dir, const char *path)
{
	size_t len = strlen(dir);

	if (len && (strncmp(path, dir, len) || path[len] != '/'))
		return false;
	return !strchr(path + len + !!len, '/');
}

static int duplicate(struct receive_ctx *ctx, const char *role,
		     const struct uuid_search *s, const char *first,
		     const char *second)
{
	char uuid[BTRFS_UUID_UNPARSED_SIZE];

	rcv_lookup_uuid_format(s->uuid, uuid);
	snprintf(
		ctx->why_buf, sizeof(ctx->why_buf),
		"%s subvolume %s: two subvolumes have it as received UUID, '%.256s' and '%.256s'",
		role, uuid, first, second);
	ctx->lookup_failed = true;
	ctx->lookup_unreachable = false;
	memcpy(ctx->lookup_uuid, s->uuid, BTRFS_UUID_SIZE);
	return fail(ctx, ENOTUNIQ, ctx->why_buf);
}

/*
 * The one subvolume taken whose received UUID is @s->uuid, whatever its
 * stransid (transid_note()), or -ENOENT. Of two taken (a stream received
 * twice), the one right in the destination, as a chain of backups has
 * them; else there is no telling which was meant: refused, naming both.
 */
static int open_received(struct receive_ctx *ctx, const char *role,
			 struct uuid_search *s)
{
	uint64_t ids[UUID_IDS_MAX];
	char first[2][PATH_MAX], second[2][PATH_MAX], dest[PATH_MAX];
	int i, n, fd, taken[2] = { -ENOENT, -ENOENT }, ret;
	bool here, dup[2] = { false, false }, dest_known;

	s->any_transid = true;
	dest_known = !dir_fs_path(ctx->dest_fd, dest, sizeof(dest));
	n = uuid_tree_ids(ctx->mnt_fd, s->uuid, BTRFS_UUID_KEY_RECEIVED_SUBVOL,
			  ids, UUID_IDS_MAX);
	if (n < 0)
		return fail(ctx, n, "search the UUID tree");
	/* [1]: the first taken right in DEST, [0]: the first elsewhere */
	for (i = 0; i < n; i++) {
		fd = open_candidate(ctx, role, ids[i], true, s);
		if (fd == -ENOENT)
			continue;
		if (fd < 0) {
			ret = candidate_failed(ctx, fd);
			goto out;
		}
		here = dest_known && right_in(dest, s->taken_path);
		if (taken[here] >= 0) {
			close(fd);
			if (!dup[here])
				snprintf(second[here], sizeof(second[here]),
					 "%s", s->taken_path);
			dup[here] = true;
			continue;
		}
		taken[here] = fd;
		snprintf(first[here], sizeof(first[here]), "%s", s->taken_path);
	}
	here = taken[1] >= 0;
	if (dup[here]) {
		ret = duplicate(ctx, role, s, first[here], second[here]);
		goto out;
	}
	ret = taken[here];
	taken[here] = -ENOENT;
out:
	for (i = 0; i < 2; i++)
		if (taken[i] >= 0)
			close(taken[i]);
	return ret;
}

/*
 * The subvolume whose received UUID (else whose own UUID) is @uuid, opened:
 * the @role ("parent", "clone source") of a stream command whose transid
 * is @transid (transid_note()).
 */
int rcv_lookup_open_subvol_by_uuid(struct receive_ctx *ctx, const char *role,
				   const uint8_t *uuid, uint64_t transid)
{
	struct uuid_search *s;
	uint64_t ids[UUID_IDS_MAX];
	int t, i, n, fd;

	if (uuid_is_zero(uuid))
		return fail(ctx, ENOENT, "no subvolume has a zero UUID");
	for (i = 0; i < ctx->nr_known; i++) {
		if (transid != ctx->known[i].transid ||
		    memcmp(uuid, ctx->known[i].uuid, BTRFS_UUID_SIZE))
			continue;
		fd = fcntl(ctx->known[i].fd, F_DUPFD_CLOEXEC, 0);
		return fd < 0 ? fail(ctx, errno, "open the subvolume known") :
				fd;
	}
	fd = rcv_lookup_open_mount_root(ctx);
	if (fd)
		return fd;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->uuid = uuid;
	s->transid = transid;
	fd = open_received(ctx, role, s);
	if (fd != -ENOENT)
		goto out;
	/* by its own UUID: of the stream's transid first, else any */
	for (t = 0; t < 2; t++) {
		s->any_transid = t;
		n = uuid_tree_ids(ctx->mnt_fd, uuid, BTRFS_UUID_KEY_SUBVOL, ids,
				  UUID_IDS_MAX);
		if (n < 0) {
			fd = fail(ctx, n, "search the UUID tree");
			goto out;
		}
		for (i = 0; i < n; i++) {
			fd = open_candidate(ctx, role, ids[i], false, s);
			if (fd < 0 && fd != -ENOENT)
				fd = candidate_failed(ctx, fd);
			if (fd != -ENOENT)
				goto out;
		}
	}
	fd = uuid_search_failed(ctx, role, s);
out:
	free(s);
	return fd;
}

/*
 * The subvolume a clone reads from: the one being received (by UUID only,
 * as btrfs receive), else found by UUID and transid and kept for the next.
 */
int rcv_lookup_clone_source(struct receive_ctx *ctx, const uint8_t *uuid,
			    uint64_t transid)
{
	int fd;

	if (memcmp(uuid, ctx->uuid, BTRFS_UUID_SIZE) == 0)
		return ctx->subvol_fd;
	if (ctx->clone_src_fd >= 0 && transid == ctx->clone_src_transid &&
	    memcmp(uuid, ctx->clone_src_uuid, BTRFS_UUID_SIZE) == 0)
		return ctx->clone_src_fd;
	fd = rcv_lookup_open_subvol_by_uuid(ctx, "clone source", uuid, transid);
	if (fd < 0)
		return fd;
	close_fd(&ctx->clone_src_fd);
	ctx->clone_src_fd = fd;
	memcpy(ctx->clone_src_uuid, uuid, BTRFS_UUID_SIZE);
	ctx->clone_src_transid = transid;
	return fd;
}

int receive_set_known_subvol(struct receive_ctx *ctx, const uint8_t *uuid,
			     uint64_t transid, int fd)
{
	if (fd < 0) {
		ctx->nr_known = 0;
		return 0;
	}
	if (ctx->nr_known == RECEIVE_KNOWN_MAX)
		return -ENOSPC;
	ctx->known[ctx->nr_known].fd = fd;
	memcpy(ctx->known[ctx->nr_known].uuid, uuid, BTRFS_UUID_SIZE);
	ctx->known[ctx->nr_known++].transid = transid;
	return 0;
}
