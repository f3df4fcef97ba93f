// SPDX-License-Identifier: GPL-2.0
/*
 * Inode flags a copy keeps (see inode_flags.h). FS_IOC_GETFLAGS and
 * FS_IOC_SETFLAGS take an int, whatever their encoded size says.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/kernel.h"
#include "fs/inode_flags.h"

unsigned int inode_flags_get(int fd)
{
	int flags = 0;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags))
		return 0;
	return (unsigned int)flags & INODE_FLAGS_KEPT;
}

static bool refusal(int err)
{
	return err == EOPNOTSUPP || err == EINVAL || err == ENOTTY ||
	       err == EPERM;
}

/* @refused NULL: the caller does not count them. */
static void refuse(struct inode_flags_refused *refused, unsigned int flags)
{
	if (refused)
		__atomic_fetch_or(&refused->flags, flags, __ATOMIC_RELAXED);
}

/* The kept flags FS_IOC_FSSETXATTR sets too, and their xflags. */
static const struct {
	unsigned int flag;
	unsigned int xflag;
} xflags[] = {
	{ FS_SYNC_FL, FS_XFLAG_SYNC },
	{ FS_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE },
	{ FS_APPEND_FL, FS_XFLAG_APPEND },
	{ FS_NODUMP_FL, FS_XFLAG_NODUMP },
	{ FS_NOATIME_FL, FS_XFLAG_NOATIME },
};

#define XFLAGS_FL                                                     \
	(FS_SYNC_FL | FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | \
	 FS_NOATIME_FL)

/* The flags in @change made those of @next: 0 or -errno. */
static int xflags_set(int fd, unsigned int next, unsigned int change)
{
	struct fsxattr fsx;
	size_t i;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx))
		return -errno;
	for (i = 0; i < sizeof(xflags) / sizeof(xflags[0]); i++) {
		if (!(change & xflags[i].flag))
			continue;
		if (next & xflags[i].flag)
			fsx.fsx_xflags |= xflags[i].xflag;
		else
			fsx.fsx_xflags &= ~xflags[i].xflag;
	}
	return ioctl(fd, FS_IOC_FSSETXATTR, &fsx) ? -errno : 0;
}

/* The flags of @bits made those of @want one by one, *@cur following. */
static int bits_set(int fd, int *cur, unsigned int bits, unsigned int want,
		    struct inode_flags_refused *refused)
{
	unsigned int bit;
	int next;

	for (bit = 1; bit && bits; bit <<= 1) {
		if (!(bits & bit))
			continue;
		bits &= ~bit;
		next = (int)(((unsigned int)*cur & ~bit) | (want & bit));
		if (next == *cur)
			continue;
		if (!ioctl(fd, FS_IOC_SETFLAGS, &next))
			*cur = next;
		else if (refusal(errno))
			refuse(refused, bit);
		else
			return -errno;
	}
	return 0;
}

#define COMPRESSION_PROP "btrfs.compression"

/* Its length, 0 where it has none; or -errno. */
static ssize_t prop_get(int fd, char *value, size_t size)
{
	ssize_t len = fgetxattr(fd, COMPRESSION_PROP, value, size);

	if (len >= 0)
		return len;
	if (errno == ENODATA || errno == EOPNOTSUPP)
		return 0;
	return -errno;
}

static int flags_set(int fd, unsigned int want, unsigned int mask,
		     struct inode_flags_refused *refused)
{
	unsigned int change, late;
	int cur = 0, next, ret;

	mask &= INODE_FLAGS_KEPT;
	if (ioctl(fd, FS_IOC_GETFLAGS, &cur)) {
		if (!refusal(errno))
			return -errno;
		/* no flags at all here: only the wanted ones are refused */
		if (want & mask)
			refuse(refused, want & mask);
		return 0;
	}
	next = (int)(((unsigned int)cur & ~mask) | (want & mask));
	if (next == cur)
		return 0;
	/*
	 * FS_IOC_SETFLAGS with compress among the flags gives a btrfs inode
	 * the default property (zlib, or the mount's compress=) whatever it
	 * had, and one made immutable can take no other after. While
	 * compress stays, the others go through FS_IOC_FSSETXATTR, which
	 * leaves compression alone (compress with nocow or nocompress is
	 * refused anyway).
	 */
	if ((unsigned int)(cur & next) & FS_COMPR_FL &&
	    !((unsigned int)(cur ^ next) & ~XFLAGS_FL)) {
		ret = xflags_set(fd, next, cur ^ next);
		if (!ret)
			return 1;
		if (!refusal(-ret))
			return ret;
	}
	if (!ioctl(fd, FS_IOC_SETFLAGS, &next))
		return 1;
	if (!refusal(errno))
		return -errno;
	/*
	 * One flag at a time, to know which DEST refuses. Those to clear go
	 * first: btrfs refuses nocompress on a nocow inode and nocow on a
	 * nocompress one (a file made in a nocow directory is nocow, and
	 * one moved there with +m keeps +m in SRC). Append-only and
	 * immutable go last.
	 */
	change = (unsigned int)(cur ^ next);
	late = change & want & INODE_FLAGS_LATE;
	ret = bits_set(fd, &cur, change & ~want, want, refused) ?:
		      bits_set(fd, &cur, change & want & ~late, want, refused) ?:
		      bits_set(fd, &cur, late, want, refused);
	return ret < 0 ? ret : 1;
}

/*
 * FS_IOC_SETFLAGS with compress among the new flags gives the inode the
 * mount's default property, whatever it had: where it had one, it gets it
 * back. (Where compressing did not pay, btrfs marks the inode nocompress
 * by itself, which hides compress from FS_IOC_GETFLAGS: compress set again
 * then must leave the property as the source has it.)
 */
int inode_flags_set(int fd, unsigned int want, unsigned int mask,
		    struct inode_flags_refused *refused)
{
	char prop[32], now[32];
	ssize_t len = 0, now_len;
	int ret;

	if (want & mask & FS_COMPR_FL)
		len = prop_get(fd, prop, sizeof(prop));
	ret = flags_set(fd, want, mask, refused);
	if (ret <= 0 || len <= 0)
		return ret;
	now_len = prop_get(fd, now, sizeof(now));
	if (now_len == len && !memcmp(now, prop, len))
		return ret;
	if (fsetxattr(fd, COMPRESSION_PROP, prop, len, 0) && !refusal(errno))
		return -errno;
	return ret;
}

int inode_tmpfile_cow_open(int dir_fd)
{
	int fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int ret;

	if (fd < 0)
		return -errno;
	if (!(inode_flags_get(fd) & FS_NOCOW_FL))
		return fd;
	/* an empty file may still lose the flag, and nodatasum with it */
	ret = inode_flags_set(fd, 0, INODE_FLAGS_EARLY, NULL);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

static int reopen(int fd, int how)
{
	char proc[32];
	int rfd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	rfd = open(proc, how | O_CLOEXEC);
	return rfd < 0 ? -errno : rfd;
}

int inode_reopen(int fd)
{
	return reopen(fd, O_RDONLY | O_NONBLOCK);
}

int inode_reopen_rw(int fd)
{
	return reopen(fd, O_RDWR | O_NOCTTY);
}

int inode_prop_copy(int src_fd, int dst_fd, struct inode_flags_refused *refused)
{
	char want[32], cur[32];
	ssize_t want_len, cur_len;

	want_len = prop_get(src_fd, want, sizeof(want));
	if (want_len < 0)
		return want_len;
	cur_len = prop_get(dst_fd, cur, sizeof(cur));
	if (cur_len < 0)
		return cur_len;
	if (want_len == cur_len && !memcmp(want, cur, want_len))
		return 0;
	if (!want_len) {
		if (fremovexattr(dst_fd, COMPRESSION_PROP) && errno != ENODATA)
			return -errno;
		return 1;
	}
	if (!fsetxattr(dst_fd, COMPRESSION_PROP, want, want_len, 0))
		return 1;
	if (!refusal(errno))
		return -errno;
	if (refused)
		__atomic_store_n(&refused->compression_prop, true,
				 __ATOMIC_RELAXED);
	return 0;
}

/* Append-only and immutable of @fd lifted: those it had, or -errno. */
static int flags_lift(int fd)
{
	unsigned int had;
	int rfd, ret;

	rfd = inode_reopen(fd);
	if (rfd < 0)
		return rfd;
	had = inode_flags_get(rfd) & INODE_FLAGS_LATE;
	ret = had ? inode_flags_set(rfd, 0, had, NULL) : 0;
	close(rfd);
	return ret < 0 ? ret : (int)had;
}

static void flags_restore(int fd, unsigned int lifted)
{
	int rfd = inode_reopen(fd);

	if (rfd < 0)
		return;
	inode_flags_set(rfd, lifted, lifted, NULL);
	close(rfd);
}

int inode_flags_lifted_for(int dir_fd, int (*op)(int dir_fd, void *arg),
			   void *arg)
{
	int ret = op(dir_fd, arg), lifted;

	if (ret != -EPERM)
		return ret;
	lifted = flags_lift(dir_fd);
	if (lifted <= 0)
		return ret;
	ret = op(dir_fd, arg);
	flags_restore(dir_fd, (unsigned int)lifted);
	return ret;
}

struct rename_arg {
	int from_dir;
	const char *from;
	int to_dir;
	const char *to;
};

static int rename_op(int from_dir, void *arg)
{
	const struct rename_arg *r = arg;

	return renameat2(from_dir, r->from, r->to_dir, r->to,
			 RENAME_NOREPLACE) ?
		       -errno :
		       0;
}

/* The rename, the source's directory lifted where it refuses it. */
static int rename_into_op(int to_dir, void *arg)
{
	const struct rename_arg *r = arg;

	(void)to_dir;
	return inode_flags_lifted_for(r->from_dir, rename_op, (void *)r);
}

int inode_flags_lifted_rename(int from_dir, const char *from, int to_dir,
			      const char *to)
{
	struct rename_arg r = { from_dir, from, to_dir, to };

	return inode_flags_lifted_for(to_dir, rename_into_op, &r);
}

int inode_flags_lifted_rename_self(int fd, int from_dir, const char *from,
				   int to_dir, const char *to)
{
	unsigned int late = fd < 0 ? 0 : inode_flags_get(fd) & INODE_FLAGS_LATE;
	int ret;

	if (late && inode_flags_set(fd, 0, late, NULL) < 0)
		return -EPERM;
	ret = inode_flags_lifted_rename(from_dir, from, to_dir, to);
	if (late && inode_flags_set(fd, late, late, NULL) < 0 && !ret)
		ret = -EPERM;
	return ret;
}

const char *inode_flags_letters(unsigned int flags, char *buf)
{
	static const struct {
		unsigned int flag;
		char letter;
	} letters[] = {
		{ FS_SYNC_FL, 'S' },	{ FS_IMMUTABLE_FL, 'i' },
		{ FS_APPEND_FL, 'a' },	{ FS_NODUMP_FL, 'd' },
		{ FS_NOATIME_FL, 'A' }, { FS_COMPR_FL, 'c' },
		{ FS_NOCOMP_FL, 'm' },	{ FS_NOCOW_FL, 'C' },
	};
	size_t i, n = 0;

	for (i = 0; i < sizeof(letters) / sizeof(letters[0]); i++)
		if (flags & letters[i].flag)
			buf[n++] = letters[i].letter;
	buf[n] = '\0';
	return buf;
}

static const struct {
	unsigned int flag;
	uint32_t btrfs;
} btrfs_flags[] = {
	{ FS_NOCOW_FL, BTRFS_INODE_NODATACOW },
	{ FS_COMPR_FL, BTRFS_INODE_COMPRESS },
	{ FS_NOCOMP_FL, BTRFS_INODE_NOCOMPRESS },
	{ FS_NOATIME_FL, BTRFS_INODE_NOATIME },
	{ FS_NODUMP_FL, BTRFS_INODE_NODUMP },
	{ FS_SYNC_FL, BTRFS_INODE_SYNC },
	{ FS_APPEND_FL, BTRFS_INODE_APPEND },
	{ FS_IMMUTABLE_FL, BTRFS_INODE_IMMUTABLE },
};

uint64_t inode_flags_to_btrfs(unsigned int flags, bool reg)
{
	uint64_t attr = 0;
	size_t i;

	for (i = 0; i < sizeof(btrfs_flags) / sizeof(btrfs_flags[0]); i++)
		if (flags & btrfs_flags[i].flag)
			attr |= btrfs_flags[i].btrfs;
	if (reg && (attr & BTRFS_INODE_NODATACOW))
		attr |= BTRFS_INODE_NODATASUM;
	return attr;
}

unsigned int inode_flags_from_btrfs(uint64_t attr)
{
	unsigned int flags = 0;
	size_t i;

	for (i = 0; i < sizeof(btrfs_flags) / sizeof(btrfs_flags[0]); i++)
		if (attr & btrfs_flags[i].btrfs)
			flags |= btrfs_flags[i].flag;
	return flags;
}

const char *inode_btrfs_flags_names(uint64_t attr, char *buf, size_t len)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
		{ BTRFS_INODE_NODATASUM, "nodatasum" },
		{ BTRFS_INODE_NODATACOW, "nodatacow" },
		{ BTRFS_INODE_READONLY, "readonly" },
		{ BTRFS_INODE_NOCOMPRESS, "nocompress" },
		{ BTRFS_INODE_PREALLOC, "prealloc" },
		{ BTRFS_INODE_SYNC, "sync" },
		{ BTRFS_INODE_IMMUTABLE, "immutable" },
		{ BTRFS_INODE_APPEND, "append" },
		{ BTRFS_INODE_NODUMP, "nodump" },
		{ BTRFS_INODE_NOATIME, "noatime" },
		{ BTRFS_INODE_DIRSYNC, "dirsync" },
		{ BTRFS_INODE_COMPRESS, "compress" },
		{ (uint64_t)BTRFS_INODE_RO_VERITY << 32, "verity" },
	};
	size_t n = 0, i;

	buf[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]) && n < len; i++) {
		if (!(attr & names[i].bit))
			continue;
		attr &= ~names[i].bit;
		n += snprintf(buf + n, len - n, "%s%s", n ? "," : "",
			      names[i].name);
	}
	if (attr && n < len)
		snprintf(buf + n, len - n, "%s0x%llx", n ? "," : "",
			 (unsigned long long)attr);
	return buf;
}
