// SPDX-License-Identifier: GPL-2.0
/*
 * The mark of what encio received (received_mark.h).
 *
 * BTRFS_IOC_SET_RECEIVED_SUBVOL asks only for ownership, and the owner of
 * a received subvolume may clear read-only, change it and set read-only
 * back: neither its received UUID nor its flag says it is what was
 * received. The mark pins the transaction that marked it received
 * (rtransid: marking it again moves that) and is committed in it, so that
 * the subvolume's ctransid, moved by any later change and by nothing its
 * owner can undo, stays at most that.
 *
 * Marking commits the transaction running before it starts, to know the
 * id of the next one: two receives marking at once on one filesystem
 * commit each other's, and neither lands in the one it named. So encio's
 * marks take turns, under a lock only root can open, and a mark that a
 * commit from elsewhere (a sync, btrfs receive) came between is tried
 * again after a random pause.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/kernel.h"
#include "fs/received_mark.h"

#define MARK_MAGIC "encio-r1"
#define MARK_TRIES 16
/* root's alone: /run is writable by root only */
#define MARK_LOCK "/run/encio-received-mark.lock"

struct received_mark {
	char magic[8];
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint8_t received_uuid[BTRFS_UUID_SIZE];
	uint64_t rtransid; /* little endian */
} __attribute__((packed));

static int info_of(int fd, struct btrfs_util_subvolume_info *info)
{
	return btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, info));
}

/* The id the next transaction will have: none runs once this returns. */
static int next_transid(int fd, uint64_t *transid)
{
	__u64 t;

	if (ioctl(fd, BTRFS_IOC_START_SYNC, &t) ||
	    ioctl(fd, BTRFS_IOC_WAIT_SYNC, &t))
		return -errno;
	*transid = t + 1;
	return 0;
}

/* The marks' turn: an fd to close after, or -1 where there is no lock. */
static int mark_turn_take(void)
{
	struct stat st;
	int fd;

	fd = open(MARK_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    flock(fd, LOCK_EX)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Up to 10 ms times @tries, so that two markers fall apart: below a
 * second for every try (MARK_TRIES * 10 ms).
 */
static void mark_pause(int tries)
{
	struct timespec ts = { 0 };
	uint32_t r = 0;

	_Static_assert(MARK_TRIES * 10000000L < 1000000000L,
		       "a pause fits tv_nsec");
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)tries * 7919;
	ts.tv_nsec = (long)(r % 10000000U) * tries;
	nanosleep(&ts, NULL);
}

static int mark_set(int fd, struct btrfs_ioctl_received_subvol_args *rs)
{
	struct btrfs_util_subvolume_info info;
	struct received_mark m;
	uint64_t transid = 0;
	int i, ret;

	ret = info_of(fd, &info);
	if (ret)
		return ret;
	memcpy(m.magic, MARK_MAGIC, sizeof(m.magic));
	memcpy(m.uuid, info.uuid, BTRFS_UUID_SIZE);
	memcpy(m.received_uuid, rs->uuid, BTRFS_UUID_SIZE);
	for (i = 0; i < MARK_TRIES; i++) {
		if (i)
			mark_pause(i);
		ret = next_transid(fd, &transid);
		if (ret)
			return ret;
		m.rtransid = htole64(transid);
		if (fsetxattr(fd, RECEIVED_MARK_XATTR, &m, sizeof(m), 0)) {
			if (errno != EPERM)
				return -errno;
			/* not root: nothing to prove, the mark is not set */
			return ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, rs) ?
				       -errno :
				       0;
		}
		/* commits the transaction the mark is in, unless one came */
		if (ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, rs))
			return -errno;
		if (rs->rtransid == transid)
			return 0;
	}
	return -EAGAIN;
}

int received_mark_set(int fd, struct btrfs_ioctl_received_subvol_args *rs)
{
	int turn = mark_turn_take();
	int ret = mark_set(fd, rs);

	if (turn >= 0)
		close(turn);
	return ret;
}

int received_mark_seal(int fd, struct btrfs_ioctl_received_subvol_args *rs)
{
	struct btrfs_util_subvolume_info info;
	int i, ret;

	for (i = 0;; i++) {
		ret = btrfsutil_errno(
			btrfs_util_set_subvolume_read_only_fd(fd, true));
		if (ret || syncfs(fd))
			return ret ?: -errno;
		ret = info_of(fd, &info);
		/* past the tries, its next use says it changed: refused */
		if (ret || info.ctransid <= info.rtransid || i == MARK_TRIES)
			return ret;
		ret = btrfsutil_errno(
			btrfs_util_set_subvolume_read_only_fd(fd, false));
		ret = ret ?: received_mark_set(fd, rs);
		if (ret)
			return ret;
	}
}

int received_mark_check(int fd, const struct btrfs_util_subvolume_info *info,
			bool writable)
{
	struct btrfs_util_subvolume_info now;
	struct received_mark m;
	struct stat st;
	ssize_t n;
	int ret;

	/*
	 * A change shows in ctransid once committed, and a write only once
	 * its data is written out (a commit alone leaves it in memory).
	 */
	if (!writable) {
		ret = syncfs(fd) ? -errno : info_of(fd, &now);
		if (ret)
			return ret;
		info = &now;
	}
	if (fstat(fd, &st))
		return -errno;
	n = fgetxattr(fd, RECEIVED_MARK_XATTR, &m, sizeof(m));
	if (n < 0 && errno != ENODATA && errno != ERANGE)
		return -errno;
	/*
	 * None, or another subvolume's: a copy of one marked (btrfs send
	 * sends it on, a snapshot keeps it) proves nothing of this one.
	 */
	if (n != sizeof(m) || memcmp(m.magic, MARK_MAGIC, sizeof(m.magic)) ||
	    memcmp(m.uuid, info->uuid, BTRFS_UUID_SIZE))
		return st.st_uid == 0 ? RECEIVED_TRUSTED : RECEIVED_NOT_ROOTS;
	if (memcmp(m.received_uuid, info->received_uuid, BTRFS_UUID_SIZE) ||
	    le64toh(m.rtransid) != info->rtransid)
		return RECEIVED_ANEW;
	if (!writable && info->ctransid > info->rtransid)
		return RECEIVED_CHANGED;
	return RECEIVED_TRUSTED;
}

bool received_mark_names(int fd, const struct btrfs_util_subvolume_info *info)
{
	struct received_mark m;

	return fgetxattr(fd, RECEIVED_MARK_XATTR, &m, sizeof(m)) ==
		       (ssize_t)sizeof(m) &&
	       !memcmp(m.magic, MARK_MAGIC, sizeof(m.magic)) &&
	       !memcmp(m.uuid, info->uuid, BTRFS_UUID_SIZE) &&
	       !memcmp(m.received_uuid, info->received_uuid, BTRFS_UUID_SIZE) &&
	       le64toh(m.rtransid) == info->rtransid;
}

bool received_mark_own(int fd, const struct btrfs_util_subvolume_info *info)
{
	return received_mark_check(fd, info, false) == RECEIVED_TRUSTED &&
	       received_mark_names(fd, info);
}

const char *received_trust_str(int trust)
{
	switch (trust) {
	case RECEIVED_NOT_ROOTS:
		return "its owner is not root and encio did not receive it: its owner may have made it";
	case RECEIVED_ANEW:
		return "it was marked received again since encio received it";
	case RECEIVED_CHANGED:
		return "it was changed since encio received it";
	default:
		return "it cannot be checked";
	}
}
