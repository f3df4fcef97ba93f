// SPDX-License-Identifier: GPL-2.0
/*
 * Verification of copies against their sources: file content byte for
 * byte, trees entry by entry.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "codec/codec.h"
#include "fs/extents.h"
#include "base/fsutil.h"
#include "base/kernel.h"
#include "copy/copy.h"

/*
 * The size of every buffer: an encoded read returns at most one extent
 * (128 KiB encoded, 128 KiB unencoded), plain reads go in pieces this long.
 */
#define VERIFY_CHUNK BTRFS_MAX_UNCOMPRESSED

int verify_ctx_init(struct verify_ctx *v)
{
	memset(v, 0, sizeof(*v));
	v->codec = codec_new();
	v->src_buf = malloc(VERIFY_CHUNK);
	v->dst_buf = malloc(VERIFY_CHUNK);
	v->src_enc = malloc(VERIFY_CHUNK);
	v->plain_buf = malloc(VERIFY_CHUNK);
	if (!v->codec || !v->src_buf || !v->dst_buf || !v->src_enc ||
	    !v->plain_buf) {
		verify_ctx_release(v);
		return -ENOMEM;
	}
	return 0;
}

void verify_ctx_release(struct verify_ctx *v)
{
	codec_free(v->codec);
	free(v->src_buf);
	free(v->dst_buf);
	free(v->src_enc);
	free(v->plain_buf);
	memset(v, 0, sizeof(*v));
}

/* ----- one file ----- */

struct file_check {
	struct verify_ctx *v;
	int src_fd;
	int dst_fd;
	const char *src_path; /* NULL: name the source by dst_path */
	const char *dst_path;
	struct encio_error *e;
	uint64_t size;
	/* below this offset one of the files has data: no common hole */
	uint64_t data_until;
	bool seek_holes;  /* SEEK_DATA/SEEK_HOLE answer on both files */
	bool dst_encoded; /* the copy answers encoded reads */
	int dst_reopened; /* dst_fd opened for plain reads here, or -1 */
	bool src_encoded; /* the source may: tried on compressed extents */
};

static int differs(struct file_check *fc, const char *what, uint64_t offset)
{
	return encio_error_set(fc->e, VERIFY_DIFFERS, what, fc->dst_path, true,
			       offset);
}

static int src_error(struct file_check *fc, int err, const char *op,
		     bool has_offset, uint64_t offset)
{
	if (fc->src_path)
		return encio_error_set(fc->e, err, op, fc->src_path, has_offset,
				       offset);
	return encio_error_set(fc->e, err, "read the source of", fc->dst_path,
			       has_offset, offset);
}

static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, offset + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

/* One extent (or up to VERIFY_CHUNK plain bytes) at @offset: bytes or -errno. */
static ssize_t encoded_read(int fd, void *buf, uint64_t offset,
			    struct btrfs_ioctl_encoded_io_args *a)
{
	struct iovec iov = { buf, VERIFY_CHUNK };
	ssize_t n;

	memset(a, 0, sizeof(*a));
	a->iov = &iov;
	a->iovcnt = 1;
	a->offset = offset;
	do
		n = ioctl(fd, BTRFS_IOC_ENCODED_READ, a);
	while (n < 0 && errno == EINTR);
	a->iov = NULL;
	return n < 0 ? -errno : n;
}

/* Not btrfs, or no CAP_SYS_ADMIN: the file is to be read plain. */
static bool no_encoded_reads(ssize_t err)
{
	return err == -ENOTTY || err == -EOPNOTSUPP || err == -EPERM;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t seek_data(struct file_check *fc, int fd, uint64_t offset)
{
	off_t r = lseek(fd, offset, SEEK_DATA);

	if (r >= 0)
		return min_u64(r, fc->size);
	if (errno != ENXIO)
		fc->seek_holes = false;
	return errno == ENXIO ? fc->size : offset;
}

static uint64_t seek_hole(struct file_check *fc, int fd, uint64_t offset)
{
	off_t r = lseek(fd, offset, SEEK_HOLE);

	if (r > (off_t)offset)
		return min_u64(r, fc->size);
	fc->seek_holes = false;
	return fc->size;
}

/*
 * From @offset, skip what is a hole in both files (zeros in both: equal).
 * Where one of them has data, remember up to where, so that the files are
 * asked again only past it. Returns the offset to compare from.
 */
static uint64_t skip_common_hole(struct file_check *fc, uint64_t offset)
{
	uint64_t s, d, end;

	if (!fc->seek_holes || offset < fc->data_until)
		return offset;
	s = seek_data(fc, fc->src_fd, offset);
	d = seek_data(fc, fc->dst_fd, offset);
	if (!fc->seek_holes)
		return offset;
	if (s > offset && d > offset) {
		end = min_u64(s, d);
		fc->v->stats.bytes += end - offset;
		fc->v->stats.hole_bytes += end - offset;
		return end;
	}
	s = s == offset ? seek_hole(fc, fc->src_fd, offset) : offset;
	d = d == offset ? seek_hole(fc, fc->dst_fd, offset) : offset;
	fc->data_until = fc->seek_holes ? (s > d ? s : d) : fc->size;
	return offset;
}

/* Compare @len bytes of the copy at @offset, in @copy, with the source. */
static int compare_with_source(struct file_check *fc, uint64_t offset,
			       const void *copy, size_t len)
{
	const unsigned char *a = fc->v->src_buf, *b = copy;
	ssize_t n;
	size_t i;

	n = pread_full(fc->src_fd, fc->v->src_buf, len, offset);
	if (n < 0)
		return src_error(fc, n, "read", true, offset);
	if (memcmp(a, b, n)) {
		for (i = 0; a[i] == b[i]; i++)
			;
		return differs(fc, "content differs from the source",
			       offset + i);
	}
	if ((size_t)n < len)
		return differs(
			fc, "content differs from the source: the source ends",
			offset + n);
	fc->v->stats.bytes += len;
	return 0;
}

/*
 * Whether the source's encoded extent at @offset is the copy's, byte for
 * byte and with the same parameters: then both decode to the same data.
 * 1 if so, 0 if not (or the source answers no encoded reads), or -errno.
 */
static int same_encoded(struct file_check *fc,
			const struct btrfs_ioctl_encoded_io_args *a,
			size_t enc_len, uint64_t offset)
{
	struct btrfs_ioctl_encoded_io_args s;
	ssize_t n;

	n = encoded_read(fc->src_fd, fc->v->src_enc, offset, &s);
	if (n < 0 && no_encoded_reads(n)) {
		fc->src_encoded = false;
		return 0;
	}
	if (n < 0)
		return src_error(fc, n, "read (encoded)", true, offset);
	return (size_t)n == enc_len && s.compression == a->compression &&
	       s.len == a->len && s.unencoded_len == a->unencoded_len &&
	       s.unencoded_offset == a->unencoded_offset &&
	       !memcmp(fc->v->src_enc, fc->v->dst_buf, enc_len);
}

/* A compressed extent of the copy, @len bytes of the file from @offset. */
static int check_compressed(struct file_check *fc,
			    const struct btrfs_ioctl_encoded_io_args *a,
			    size_t enc_len, uint64_t offset, uint64_t len)
{
	struct verify_ctx *v = fc->v;
	ssize_t n;
	int ret;

	if (fc->src_encoded) {
		ret = same_encoded(fc, a, enc_len, offset);
		if (ret < 0)
			return ret;
		if (ret) {
			v->stats.extents_identical++;
			v->stats.bytes += len;
			return 0;
		}
	}
	if (a->unencoded_len > VERIFY_CHUNK ||
	    a->unencoded_offset > a->unencoded_len ||
	    len > a->unencoded_len - a->unencoded_offset)
		return encio_error_set(fc->e, EINVAL,
				       "decode the compressed extent of",
				       fc->dst_path, true, offset);
	n = codec_decode(v->codec, a->compression, v->dst_buf, enc_len,
			 v->plain_buf, a->unencoded_len);
	if (n < 0)
		return encio_error_set(fc->e, n,
				       "decode the compressed extent of",
				       fc->dst_path, true, offset);
	ret = compare_with_source(
		fc, offset, (char *)v->plain_buf + a->unencoded_offset, len);
	if (!ret)
		v->stats.extents_decoded++;
	return ret;
}

/*
 * From now on the copy is read plain. A copy being written may be open
 * write-only (an O_TMPFILE has no name yet): then it is opened again for
 * reading, through its descriptor.
 */
static int plain_reads(struct file_check *fc)
{
	char proc[64];
	int flags, fd;

	fc->dst_encoded = false;
	flags = fcntl(fc->dst_fd, F_GETFL);
	if (flags < 0)
		return encio_error_set(fc->e, errno, "read", fc->dst_path,
				       false, 0);
	if ((flags & O_ACCMODE) != O_WRONLY)
		return 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fc->dst_fd);
	fd = open(proc, O_RDONLY | O_NOATIME | O_CLOEXEC);
	if (fd < 0 && errno == EPERM) /* O_NOATIME on someone else's */
		fd = open(proc, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(fc->e, errno, "open for reading",
				       fc->dst_path, false, 0);
	fc->dst_fd = fc->dst_reopened = fd;
	return 0;
}

/* What lies at *@offset of the copy, read encoded; *@offset moves past it. */
static int check_encoded(struct file_check *fc, uint64_t *offset)
{
	struct btrfs_ioctl_encoded_io_args a;
	uint64_t len;
	ssize_t n;
	int ret;

	n = encoded_read(fc->dst_fd, fc->v->dst_buf, *offset, &a);
	if (n < 0 && no_encoded_reads(n))
		return plain_reads(fc);
	if (n < 0)
		return encio_error_set(fc->e, n, "read (encoded)", fc->dst_path,
				       true, *offset);
	len = min_u64(a.len, fc->size - *offset);
	if (a.compression == BTRFS_ENCODED_IO_COMPRESSION_NONE)
		len = min_u64(len, n);
	if (!n || !len)
		return differs(fc,
			       "content differs from the source: the copy ends",
			       *offset);
	if (a.compression == BTRFS_ENCODED_IO_COMPRESSION_NONE)
		ret = compare_with_source(fc, *offset, fc->v->dst_buf, len);
	else
		ret = check_compressed(fc, &a, n, *offset, len);
	if (!ret)
		*offset += len;
	return ret;
}

/* The copy read plain, up to the next multiple of VERIFY_CHUNK. */
static int check_plain(struct file_check *fc, uint64_t *offset)
{
	uint64_t len = min_u64(VERIFY_CHUNK - *offset % VERIFY_CHUNK,
			       fc->size - *offset);
	ssize_t n;
	int ret;

	n = pread_full(fc->dst_fd, fc->v->dst_buf, len, *offset);
	if (n < 0)
		return encio_error_set(fc->e, n, "read", fc->dst_path, true,
				       *offset);
	if (n == 0)
		return differs(fc,
			       "content differs from the source: the copy ends",
			       *offset);
	ret = compare_with_source(fc, *offset, fc->v->dst_buf, n);
	if (!ret)
		*offset += n;
	return ret;
}

/*
 * A source on procfs and the like says size 0 and makes its content when
 * read: its copy has what the reads returned, compared up to the copy's
 * size, and the source must end there.
 */
static bool source_sizeless(int fd)
{
	struct statfs sfs;

	return !fstatfs(fd, &sfs) && fs_files_sizeless(sfs.f_type);
}

static int check_source_ends(struct file_check *fc)
{
	char byte;
	ssize_t n = pread_full(fc->src_fd, &byte, 1, fc->size);

	if (n < 0)
		return src_error(fc, n, "read", true, fc->size);
	if (n)
		return differs(fc,
			       "content differs from the source: the copy ends",
			       fc->size);
	return 0;
}

static int compare_files(struct file_check *fc)
{
	volatile sig_atomic_t *stop = fc->v->stop;
	struct stat ss, ds;
	uint64_t offset = 0;
	bool sizeless = false;
	int ret;

	if (fstat(fc->src_fd, &ss))
		return src_error(fc, errno, "stat", false, 0);
	if (fstat(fc->dst_fd, &ds))
		return encio_error_set(fc->e, errno, "stat", fc->dst_path,
				       false, 0);
	fc->size = ds.st_size;
	if (ss.st_size != ds.st_size) {
		sizeless = ss.st_size == 0 && source_sizeless(fc->src_fd);
		if (!sizeless)
			return differs(
				fc,
				"size differs from the source: the shorter file ends",
				min_u64(ss.st_size, ds.st_size));
		fc->seek_holes = false;
	}
	while (offset < fc->size) {
		if (stop && *stop)
			return encio_error_set(fc->e, EINTR, "verify",
					       fc->dst_path, true, offset);
		offset = skip_common_hole(fc, offset);
		if (offset >= fc->size)
			break;
		ret = fc->dst_encoded ? check_encoded(fc, &offset) :
					check_plain(fc, &offset);
		if (ret)
			return ret;
	}
	return sizeless ? check_source_ends(fc) : 0;
}

int verify_file_fds(struct verify_ctx *v, int src_fd, int dst_fd,
		    const char *src_path, const char *dst_path,
		    struct encio_error *e)
{
	struct file_check fc = {
		.v = v,
		.src_fd = src_fd,
		.dst_fd = dst_fd,
		.src_path = src_path,
		.dst_path = dst_path,
		.e = e,
		.seek_holes = true,
		.dst_encoded = true,
		.dst_reopened = -1,
		.src_encoded = true,
	};
	int ret;

	ret = compare_files(&fc);
	if (fc.dst_reopened >= 0)
		close(fc.dst_reopened);
	if (ret)
		return ret;
	v->stats.files++;
	if (!fc.dst_encoded)
		v->stats.files_plain++;
	return 0;
}

/* ----- trees ----- */

struct tree_check {
	struct verify_ctx *v;
	const struct verify_tree_options *opts;
	char src[PATH_MAX]; /* the entry being compared, and its copy */
	char dst[PATH_MAX];
	char src_target[PATH_MAX];
	char dst_target[PATH_MAX];
	struct stat dst_root; /* a copy inside its source is not compared */
	bool dst_root_dir;
	bool dest_is_dir; /* copies are DEST/basename(SRC) */
	struct encio_error e;
	int fatal; /* -EINTR: stop */
};

static void report(struct tree_check *tc)
{
	if (tc->e.err == EINTR) {
		tc->fatal = -EINTR;
		return;
	}
	tc->v->stats.failed++;
	if (tc->opts->report)
		tc->opts->report(tc->opts->arg, &tc->e);
}

static void report_error(struct tree_check *tc, int err, const char *op,
			 const char *path)
{
	encio_error_set(&tc->e, err, op, path, false, 0);
	report(tc);
}

static void report_difference(struct tree_check *tc, const char *what)
{
	report_error(tc, VERIFY_DIFFERS, what, tc->dst);
}

/* Append /@name to both paths; their old lengths in @sl, @dl. */
static int paths_push(struct tree_check *tc, const char *name, size_t *sl,
		      size_t *dl)
{
	int ns, nd;

	*sl = strlen(tc->src);
	*dl = strlen(tc->dst);
	ns = snprintf(tc->src + *sl, sizeof(tc->src) - *sl, "/%s", name);
	nd = snprintf(tc->dst + *dl, sizeof(tc->dst) - *dl, "/%s", name);
	if (ns < 0 || nd < 0 || (size_t)ns >= sizeof(tc->src) - *sl ||
	    (size_t)nd >= sizeof(tc->dst) - *dl) {
		tc->src[*sl] = '\0';
		tc->dst[*dl] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

static void paths_pop(struct tree_check *tc, size_t sl, size_t dl)
{
	tc->src[sl] = '\0';
	tc->dst[dl] = '\0';
}

/* openat(2) with O_NOATIME where we may: checking must not change times. */
static int open_noatime(int dir, const char *name, int flags)
{
	int fd = openat(dir, name, flags | O_NOATIME | O_CLOEXEC);

	if (fd < 0 && errno == EPERM)
		fd = openat(dir, name, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int open_regular_noatime(int dir, const char *name, int flags)
{
	int fd = open_regular_at(dir, name, flags | O_NOATIME, 0, NULL);

	if (fd == -EPERM)
		fd = open_regular_at(dir, name, flags, 0, NULL);
	return fd;
}

static void check_regular(struct tree_check *tc, int sdir, const char *sname,
			  int ddir, const char *dname, int nofollow)
{
	int flags = O_RDONLY | nofollow;
	int src_fd, dst_fd, ret;

	src_fd = open_regular_noatime(sdir, sname, flags);
	if (src_fd < 0) {
		report_error(tc, src_fd, "open", tc->src);
		return;
	}
	dst_fd = open_regular_noatime(ddir, dname, flags);
	if (dst_fd < 0) {
		report_error(tc, dst_fd, "open", tc->dst);
		goto out;
	}
	ret = verify_file_fds(tc->v, src_fd, dst_fd, tc->src, tc->dst, &tc->e);
	if (ret)
		report(tc);
	close(dst_fd);
out:
	close(src_fd);
}

static void check_symlink(struct tree_check *tc, int sdir, const char *sname,
			  int ddir, const char *dname)
{
	ssize_t ns, nd;

	ns = readlinkat(sdir, sname, tc->src_target, sizeof(tc->src_target));
	if (ns < 0) {
		report_error(tc, errno, "read symlink", tc->src);
		return;
	}
	nd = readlinkat(ddir, dname, tc->dst_target, sizeof(tc->dst_target));
	if (nd < 0) {
		report_error(tc, errno, "read symlink", tc->dst);
		return;
	}
	if (ns != nd || memcmp(tc->src_target, tc->dst_target, ns)) {
		report_difference(tc,
				  "symlink target differs from the source's");
		return;
	}
	tc->v->stats.symlinks++;
}

static void check_entry(struct tree_check *tc, int sdir, const char *sname,
			int ddir, const char *dname, bool root);

static bool stopped(struct tree_check *tc)
{
	if (tc->v->stop && *tc->v->stop)
		tc->fatal = -EINTR;
	return tc->fatal;
}

static bool is_dot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* Every entry of the source directory @sd, and its copy in @dd. */
static void check_dir_entries(struct tree_check *tc, DIR *sd, DIR *dd)
{
	struct dirent *de;
	size_t sl, dl;

	while (!stopped(tc)) {
		errno = 0;
		de = readdir(sd);
		if (!de) {
			if (errno)
				report_error(tc, errno, "read directory",
					     tc->src);
			return;
		}
		if (is_dot(de->d_name))
			continue;
		if (paths_push(tc, de->d_name, &sl, &dl)) {
			report_error(tc, ENAMETOOLONG, "verify an entry of",
				     tc->src);
			continue;
		}
		check_entry(tc, dirfd(sd), de->d_name, dirfd(dd), de->d_name,
			    false);
		paths_pop(tc, sl, dl);
	}
}

/* Entries of the copy @dd that its source @sd lacks. */
static void check_dir_extra(struct tree_check *tc, DIR *sd, DIR *dd)
{
	struct dirent *de;
	struct stat st;
	size_t sl, dl;
	int err;

	while (!stopped(tc)) {
		errno = 0;
		de = readdir(dd);
		if (!de) {
			if (errno)
				report_error(tc, errno, "read directory",
					     tc->dst);
			return;
		}
		if (is_dot(de->d_name) ||
		    !fstatat(dirfd(sd), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		err = errno;
		if (paths_push(tc, de->d_name, &sl, &dl)) {
			report_error(tc, ENAMETOOLONG, "verify an entry of",
				     tc->dst);
			continue;
		}
		if (err == ENOENT)
			report_difference(tc, "not in the source");
		else
			report_error(tc, err, "stat", tc->src);
		paths_pop(tc, sl, dl);
	}
}

static DIR *open_dir(struct tree_check *tc, int dir, const char *name,
		     const char *path)
{
	int fd = open_noatime(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d;

	if (fd < 0) {
		report_error(tc, fd, "open directory", path);
		return NULL;
	}
	d = fdopendir(fd);
	if (!d) {
		report_error(tc, errno, "open directory", path);
		close(fd);
	}
	return d;
}

static void check_dir(struct tree_check *tc, int sdir, const char *sname,
		      int ddir, const char *dname)
{
	DIR *sd, *dd;

	sd = open_dir(tc, sdir, sname, tc->src);
	if (!sd)
		return;
	dd = open_dir(tc, ddir, dname, tc->dst);
	if (!dd)
		goto out;
	tc->v->stats.dirs++;
	check_dir_entries(tc, sd, dd);
	check_dir_extra(tc, sd, dd);
	closedir(dd);
out:
	closedir(sd);
}

static void check_entry(struct tree_check *tc, int sdir, const char *sname,
			int ddir, const char *dname, bool root)
{
	bool follow = root && !tc->opts->recursive;
	int at_flags = follow ? 0 : AT_SYMLINK_NOFOLLOW;
	struct stat ss, ds;

	if (fstatat(sdir, sname, &ss, at_flags)) {
		report_error(tc, errno, "stat", tc->src);
		return;
	}
	if (!root && S_ISDIR(ss.st_mode) && tc->dst_root_dir &&
	    ss.st_dev == tc->dst_root.st_dev &&
	    ss.st_ino == tc->dst_root.st_ino)
		return; /* the copy itself, inside its source: not copied */
	if (fstatat(ddir, dname, &ds, at_flags)) {
		if (errno == ENOENT)
			report_difference(
				tc,
				root && tc->dest_is_dir ?
					"missing in the copy (with -T, DEST itself is the copy)" :
					"missing in the copy");
		else
			report_error(tc, errno, "stat", tc->dst);
		return;
	}
	if ((ss.st_mode ^ ds.st_mode) & S_IFMT) {
		report_difference(tc, "type differs from the source's");
		return;
	}
	switch (ss.st_mode & S_IFMT) {
	case S_IFREG:
		check_regular(tc, sdir, sname, ddir, dname,
			      follow ? 0 : O_NOFOLLOW);
		break;
	case S_IFDIR:
		if (tc->opts->recursive)
			check_dir(tc, sdir, sname, ddir, dname);
		else
			report_error(tc, EISDIR,
				     "verify (a directory needs -r)", tc->src);
		break;
	case S_IFLNK:
		check_symlink(tc, sdir, sname, ddir, dname);
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (ss.st_rdev != ds.st_rdev) {
			report_difference(
				tc, "device number differs from the source's");
			break;
		}
		tc->v->stats.specials++;
		break;
	default:
		tc->v->stats.specials++;
		break;
	}
}

/* The copy of @src: @dest/basename(@src), or @dest itself. */
static int copy_name(char *buf, const char *src, const char *dest,
		     bool dest_is_dir)
{
	char tmp[PATH_MAX];
	int n;

	snprintf(tmp, sizeof(tmp), "%s", src);
	if (dest_is_dir)
		n = snprintf(buf, PATH_MAX, "%.*s/%s",
			     (int)path_trimmed_len(dest), dest, basename(tmp));
	else
		n = snprintf(buf, PATH_MAX, "%s", dest);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static void check_root(struct tree_check *tc, const char *src, const char *dest)
{
	char dst[PATH_MAX];
	int ret;

	snprintf(tc->src, sizeof(tc->src), "%s", src);
	ret = copy_name(dst, src, dest, tc->dest_is_dir);
	if (ret) {
		report_error(tc, ret, "verify the copy of", src);
		return;
	}
	memcpy(tc->dst, dst, sizeof(dst));
	tc->dst_root_dir = !lstat(dst, &tc->dst_root) &&
			   S_ISDIR(tc->dst_root.st_mode);
	check_entry(tc, AT_FDCWD, src, AT_FDCWD, dst, true);
}

int verify_trees(struct verify_ctx *v, const struct verify_tree_options *opts,
		 char *const *srcs, int nr_srcs, const char *dest,
		 struct encio_error *e)
{
	struct tree_check *tc;
	struct stat st;
	int i, ret = 0;

	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return encio_error_set(e, ENOMEM, "verify", dest, false, 0);
	tc->v = v;
	tc->opts = opts;
	tc->dest_is_dir = !opts->no_target_dir && !stat(dest, &st) &&
			  S_ISDIR(st.st_mode);
	if (!tc->dest_is_dir && nr_srcs > 1) {
		free(tc);
		return encio_error_set(e, ENOTDIR, "verify several copies in",
				       dest, false, 0);
	}
	for (i = 0; i < nr_srcs && !stopped(tc); i++)
		check_root(tc, srcs[i], dest);
	if (tc->fatal)
		ret = encio_error_set(e, tc->fatal, "verify", dest, false, 0);
	free(tc);
	return ret;
}
