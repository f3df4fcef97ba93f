// SPDX-License-Identifier: GPL-2.0
/*
 * A send stream's commands as text, one line each, in the layout of
 * 'btrfs receive --dump': what encio dump and encio receive --dump print.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dump_stream.h"
#include "fs/inode_flags.h"
#include "stream/stream.h"

/* Subvolume path and stream path are each below PATH_MAX. */
#define DUMP_PATH_MAX (2 * PATH_MAX + 2)

struct dump_ctx {
	FILE *out;
	char subvol[DUMP_PATH_MAX]; /* "./NAME" of the current subvolume */
};

#define FULL_PATH_MAX DUMP_PATH_MAX

/* Escape what would break a line, as btrfs receive --dump does. */
static int print_escaped(FILE *out, const char *s, size_t len)
{
	static const char from[] = "\a\b\e\f\n\r\t\v \\";
	static const char to[] = "abefnrtv \\";
	int width = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = s[i];
		const char *esc = c ? strchr(from, c) : NULL;

		if (esc) {
			fprintf(out, "\\%c", to[esc - from]);
			width += 2;
		} else if (!isprint(c)) {
			fprintf(out, "\\%o%o%o", (c >> 6) & 3, (c >> 3) & 7,
				c & 7);
			width += 4;
		} else {
			fputc(c, out);
			width++;
		}
	}
	return width;
}

/* "DIR/NAME" into @out, cut at FULL_PATH_MAX: the dump is for reading. */
static void join(char *out, const char *dir, const char *name)
{
	size_t a = strnlen(dir, FULL_PATH_MAX - 2);
	size_t b = strnlen(name, FULL_PATH_MAX - 2 - a);

	memcpy(out, dir, a);
	out[a] = '/';
	memcpy(out + a + 1, name, b);
	out[a + 1 + b] = '\0';
}

/*
 * A line's command and escaped path, in btrfs receive --dump's columns:
 * with @pad, spaces up to the column of what follows.
 */
static void print_head(struct dump_ctx *d, const char *title, const char *path,
		       bool pad)
{
	char full[FULL_PATH_MAX];
	int width;

	join(full, d->subvol, path);
	fprintf(d->out, "%-16s", title);
	width = print_escaped(d->out, full, strlen(full));
	if (!pad)
		return;
	do {
		fputc(' ', d->out);
	} while (++width < 32);
}

__attribute__((format(printf, 4, 5))) static int
print_line(struct dump_ctx *d, const char *title, const char *path,
	   const char *fmt, ...)
{
	va_list ap;

	print_head(d, title, path, fmt);
	if (fmt) {
		va_start(ap, fmt);
		vfprintf(d->out, fmt, ap);
		va_end(ap);
	}
	fputc('\n', d->out);
	return ferror(d->out) ? -EIO : 0;
}

static void uuid_str(const uint8_t *u, char *out)
{
	snprintf(
		out, 37,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

static int dump_subvol(const char *path, const uint8_t *uuid, uint64_t ctransid,
		       void *arg)
{
	struct dump_ctx *d = arg;
	char u[37];

	snprintf(d->subvol, sizeof(d->subvol), ".");
	uuid_str(uuid, u);
	print_line(d, "subvol", path, "uuid=%s transid=%" PRIu64, u, ctransid);
	join(d->subvol, ".", path);
	return 0;
}

static int dump_snapshot(const char *path, const uint8_t *uuid,
			 uint64_t ctransid, const uint8_t *parent_uuid,
			 uint64_t parent_ctransid, void *arg)
{
	struct dump_ctx *d = arg;
	char u[37], p[37];

	snprintf(d->subvol, sizeof(d->subvol), ".");
	uuid_str(uuid, u);
	uuid_str(parent_uuid, p);
	print_line(d, "snapshot", path,
		   "uuid=%s transid=%" PRIu64
		   " parent_uuid=%s parent_transid=%" PRIu64,
		   u, ctransid, p, parent_ctransid);
	join(d->subvol, ".", path);
	return 0;
}

static int dump_mkfile(const char *path, void *arg)
{
	return print_line(arg, "mkfile", path, NULL);
}

static int dump_mkdir(const char *path, void *arg)
{
	return print_line(arg, "mkdir", path, NULL);
}

static int dump_mkfifo(const char *path, void *arg)
{
	return print_line(arg, "mkfifo", path, NULL);
}

static int dump_mksock(const char *path, void *arg)
{
	return print_line(arg, "mksock", path, NULL);
}

static int dump_mknod(const char *path, uint64_t mode, uint64_t rdev, void *arg)
{
	return print_line(arg, "mknod", path, "mode=%" PRIo64 " dev=0x%" PRIx64,
			  mode, rdev);
}

static int dump_symlink(const char *path, const char *target, void *arg)
{
	return print_line(arg, "symlink", path, "dest=%s", target);
}

static int dump_rename(const char *from, const char *to, void *arg)
{
	struct dump_ctx *d = arg;
	char full[FULL_PATH_MAX];

	/* btrfs receive --dump escapes the destination of a rename too. */
	print_head(d, "rename", from, true);
	join(full, d->subvol, to);
	fprintf(d->out, "dest=");
	print_escaped(d->out, full, strlen(full));
	fputc('\n', d->out);
	return ferror(d->out) ? -EIO : 0;
}

static int dump_link(const char *path, const char *target, void *arg)
{
	return print_line(arg, "link", path, "dest=%s", target);
}

static int dump_unlink(const char *path, void *arg)
{
	return print_line(arg, "unlink", path, NULL);
}

static int dump_rmdir(const char *path, void *arg)
{
	return print_line(arg, "rmdir", path, NULL);
}

static bool is_text(const unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!isprint(p[i]))
			return false;
	return true;
}

static int dump_set_xattr(const char *path, const char *name, const void *data,
			  size_t len, void *arg)
{
	struct dump_ctx *d = arg;

	/* Like print_line, but the value is escaped: it may be binary. */
	print_head(d, "set_xattr", path, true);
	fprintf(d->out, "name=%s data=", name);
	/* Text as it is (as btrfs prints it), anything else escaped. */
	if (is_text(data, len))
		fwrite(data, 1, len, d->out);
	else
		print_escaped(d->out, data, len);
	fprintf(d->out, " len=%zu\n", len);
	return ferror(d->out) ? -EIO : 0;
}

static int dump_remove_xattr(const char *path, const char *name, void *arg)
{
	return print_line(arg, "remove_xattr", path, "name=%s", name);
}

static int dump_write(const char *path, uint64_t offset, const void *data,
		      size_t len, void *arg)
{
	(void)data;
	return print_line(arg, "write", path, "offset=%" PRIu64 " len=%zu",
			  offset, len);
}

static int dump_clone(const char *path, uint64_t offset, uint64_t len,
		      const uint8_t *clone_uuid, uint64_t clone_ctransid,
		      const char *clone_path, uint64_t clone_offset, void *arg)
{
	struct dump_ctx *d = arg;
	char full[FULL_PATH_MAX];

	(void)clone_uuid;
	(void)clone_ctransid;
	join(full, d->subvol, clone_path);
	return print_line(d, "clone", path,
			  "offset=%" PRIu64 " len=%" PRIu64
			  " from=%s clone_offset=%" PRIu64,
			  offset, len, full, clone_offset);
}

static int dump_truncate(const char *path, uint64_t size, void *arg)
{
	return print_line(arg, "truncate", path, "size=%" PRIu64, size);
}

static int dump_chmod(const char *path, uint64_t mode, void *arg)
{
	return print_line(arg, "chmod", path, "mode=%" PRIo64, mode);
}

static int dump_chown(const char *path, uint64_t uid, uint64_t gid, void *arg)
{
	return print_line(arg, "chown", path, "gid=%" PRIu64 " uid=%" PRIu64,
			  gid, uid);
}

static void time_str(const struct timespec *ts, char *out, size_t len)
{
	struct tm tm;

	if (!localtime_r(&ts->tv_sec, &tm) ||
	    !strftime(out, len, "%FT%T%z", &tm))
		snprintf(out, len, "%lld", (long long)ts->tv_sec);
}

static int dump_utimes(const char *path, const struct timespec *atime,
		       const struct timespec *mtime,
		       const struct timespec *ctime, void *arg)
{
	char a[64], m[64], c[64];

	time_str(atime, a, sizeof(a));
	time_str(mtime, m, sizeof(m));
	time_str(ctime, c, sizeof(c));
	return print_line(arg, "utimes", path, "atime=%s mtime=%s ctime=%s", a,
			  m, c);
}

static int dump_update_extent(const char *path, uint64_t offset, uint64_t len,
			      void *arg)
{
	return print_line(arg, "update_extent", path,
			  "offset=%" PRIu64 " len=%" PRIu64, offset, len);
}

static int dump_fallocate(const char *path, uint32_t mode, uint64_t offset,
			  uint64_t len, void *arg)
{
	return print_line(arg, "fallocate", path,
			  "mode=%" PRIu32 " offset=%" PRIu64 " len=%" PRIu64,
			  mode, offset, len);
}

/* The value in hex (btrfs receive --dump prints it in decimal after "0x"). */
static int dump_fileattr(const char *path, uint64_t attr, void *arg)
{
	char names[160];

	inode_btrfs_flags_names(attr, names, sizeof(names));
	return print_line(arg, "fileattr", path, "fileattr=0x%" PRIx64 "%s%s%s",
			  attr, *names ? " (" : "", names, *names ? ")" : "");
}

static int dump_encoded_write(const char *path,
			      const struct stream_encoded_write *ew, void *arg)
{
	return print_line(
		arg, "encoded_write", path,
		"offset=%" PRIu64 " len=%zu, unencoded_file_len=%" PRIu64
		", unencoded_len=%" PRIu64 ", unencoded_offset=%" PRIu64
		", compression=%" PRIu32 ", encryption=%" PRIu32,
		ew->offset, ew->len, ew->unencoded_file_len, ew->unencoded_len,
		ew->unencoded_offset, ew->compression, ew->encryption);
}

static int dump_enable_verity(const char *path, uint8_t algorithm,
			      uint32_t block_size, const void *salt,
			      size_t salt_len, const void *sig, size_t sig_len,
			      void *arg)
{
	(void)salt;
	(void)sig;
	return print_line(arg, "enable_verity", path,
			  "algorithm=%u block_size=%" PRIu32
			  " salt_len=%zu sig_len=%zu",
			  algorithm, block_size, salt_len, sig_len);
}

/*
 * encio's own: where a resumed stream (encio send -t) takes up its
 * subvolume, and the version of the stream it resumes
 */
static int dump_resume(const struct resume_point *p, void *arg)
{
	struct dump_ctx *d = arg;
	char u[37];

	snprintf(d->subvol, sizeof(d->subvol), ".");
	uuid_str(p->uuid, u);
	print_line(d, "encio_resume", p->name,
		   "uuid=%s transid=%" PRIu64 " position=%" PRIu64
		   " commands=%" PRIu64 " fingerprint=%016" PRIx64
		   " version=%" PRIu32,
		   u, p->ctransid, p->position, p->commands, p->fingerprint,
		   p->version);
	join(d->subvol, ".", p->name);
	return ferror(d->out) ? -EIO : 0;
}

static const struct stream_ops dump_ops = {
	.resume = dump_resume,
	.subvol = dump_subvol,
	.snapshot = dump_snapshot,
	.mkfile = dump_mkfile,
	.mkdir = dump_mkdir,
	.mknod = dump_mknod,
	.mkfifo = dump_mkfifo,
	.mksock = dump_mksock,
	.symlink = dump_symlink,
	.rename = dump_rename,
	.link = dump_link,
	.unlink = dump_unlink,
	.rmdir = dump_rmdir,
	.set_xattr = dump_set_xattr,
	.remove_xattr = dump_remove_xattr,
	.write = dump_write,
	.clone = dump_clone,
	.truncate = dump_truncate,
	.chmod = dump_chmod,
	.chown = dump_chown,
	.utimes = dump_utimes,
	.update_extent = dump_update_extent,
	.fallocate = dump_fallocate,
	.fileattr = dump_fileattr,
	.encoded_write = dump_encoded_write,
	.enable_verity = dump_enable_verity,
};

/*
 * The reader's message lives in the reader: the error's operation is
 * copied out of it to outlive dump_stream(). One per thread, as receive's.
 */
static __thread char error_op[STREAM_WHAT_LEN];

int dump_stream(int fd, const char *name, FILE *out, struct encio_error *e)
{
	struct dump_ctx *d;
	struct stream_reader r;
	int ret;

	d = malloc(sizeof(*d));
	if (!d)
		return encio_error_set(e, ENOMEM, "allocate", "dump", false, 0);
	d->out = out;
	snprintf(d->subvol, sizeof(d->subvol), ".");
	ret = stream_reader_init(&r, fd, name, e);
	if (!ret)
		ret = stream_process(&r, &dump_ops, d, e);
	if (ret && e->op) {
		snprintf(error_op, sizeof(error_op), "%s", e->op);
		e->op = error_op;
	}
	stream_reader_release(&r);
	free(d);
	return ret;
}
