// SPDX-License-Identifier: GPL-2.0
/*
 * Send stream reader and writer.
 *
 * A stream is untrusted input: every length is checked against what was
 * read, every command's crc32c is verified before any of it is used, every
 * attribute must have the size of its type, and errors name the offset of
 * the command in the stream.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/le_bytes.h"
#include "stream/stream.h"

#define READ_CHUNK (256 * 1024)
#define STREAM_PIPE_BYTES (1024 * 1024)

static const char *const cmd_names[BTRFS_SEND_C_MAX + 1] = {
	[BTRFS_SEND_C_UNSPEC] = "unspec",
	[BTRFS_SEND_C_SUBVOL] = "subvol",
	[BTRFS_SEND_C_SNAPSHOT] = "snapshot",
	[BTRFS_SEND_C_MKFILE] = "mkfile",
	[BTRFS_SEND_C_MKDIR] = "mkdir",
	[BTRFS_SEND_C_MKNOD] = "mknod",
	[BTRFS_SEND_C_MKFIFO] = "mkfifo",
	[BTRFS_SEND_C_MKSOCK] = "mksock",
	[BTRFS_SEND_C_SYMLINK] = "symlink",
	[BTRFS_SEND_C_RENAME] = "rename",
	[BTRFS_SEND_C_LINK] = "link",
	[BTRFS_SEND_C_UNLINK] = "unlink",
	[BTRFS_SEND_C_RMDIR] = "rmdir",
	[BTRFS_SEND_C_SET_XATTR] = "set_xattr",
	[BTRFS_SEND_C_REMOVE_XATTR] = "remove_xattr",
	[BTRFS_SEND_C_WRITE] = "write",
	[BTRFS_SEND_C_CLONE] = "clone",
	[BTRFS_SEND_C_TRUNCATE] = "truncate",
	[BTRFS_SEND_C_CHMOD] = "chmod",
	[BTRFS_SEND_C_CHOWN] = "chown",
	[BTRFS_SEND_C_UTIMES] = "utimes",
	[BTRFS_SEND_C_END] = "end",
	[BTRFS_SEND_C_UPDATE_EXTENT] = "update_extent",
	[BTRFS_SEND_C_FALLOCATE] = "fallocate",
	[BTRFS_SEND_C_FILEATTR] = "fileattr",
	[BTRFS_SEND_C_ENCODED_WRITE] = "encoded_write",
	[BTRFS_SEND_C_ENABLE_VERITY] = "enable_verity",
};

const char *stream_cmd_name(unsigned int cmd)
{
	if (cmd == STREAM_C_ENCIO_RESUME)
		return "encio_resume";
	if (cmd == STREAM_C_ENCIO_SUBVOL)
		return "encio_subvol";
	if (cmd == STREAM_C_ENCIO_DATA)
		return "encio_data";
	return cmd <= BTRFS_SEND_C_MAX ? cmd_names[cmd] : "unknown";
}

/*
 * Make @need bytes available at buf + buf_pos. Returns 0, 1 when the
 * stream ended first, or -errno.
 */
static int reader_fill(struct stream_reader *r, size_t need)
{
	ssize_t n;

	while (r->buf_len - r->buf_pos < need) {
		if (r->eof)
			return 1;
		if (r->buf_pos) {
			memmove(r->buf, r->buf + r->buf_pos,
				r->buf_len - r->buf_pos);
			r->buf_len -= r->buf_pos;
			r->buf_pos = 0;
		}
		if (r->stop && *r->stop)
			return -EINTR;
		n = read(r->fd, r->buf + r->buf_len, r->buf_cap - r->buf_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			r->eof = true;
		r->buf_len += n;
	}
	return 0;
}

static int reader_error(struct stream_reader *r, struct encio_error *e, int err,
			const char *what, uint64_t offset)
{
	return encio_error_set(e, err, what, r->name, true, offset);
}

static int reader_header(struct stream_reader *r, struct encio_error *e)
{
	const unsigned char *p;
	int ret;

	ret = reader_fill(r, BTRFS_SEND_STREAM_HEADER_LEN);
	if (ret < 0)
		return reader_error(r, e, ret, "read stream header of",
				    r->offset);
	if (ret)
		return reader_error(r, e, EBADMSG,
				    "read stream header (truncated) of",
				    r->offset);
	if (r->resume_due)
		return reader_error(
			r, e, EBADMSG,
			"parse (a resumed stream's header not followed by ENCIO_RESUME)",
			r->offset);
	p = r->buf + r->buf_pos;
	if (memcmp(p, BTRFS_SEND_STREAM_MAGIC, BTRFS_SEND_STREAM_MAGIC_LEN))
		return reader_error(r, e, EBADMSG,
				    "find the btrfs-stream magic in",
				    r->offset);
	r->version = le_get32(p + BTRFS_SEND_STREAM_MAGIC_LEN);
	r->resume_due = (r->version & STREAM_VERSION_RESUMED_MASK) ==
			STREAM_VERSION_RESUMED;
	r->subvolumes = (r->version & STREAM_VERSION_RESUMED_MASK) ==
			STREAM_VERSION_SUBVOLUMES;
	if (r->resume_due || r->subvolumes)
		r->version &= ~STREAM_VERSION_RESUMED_MASK;
	if (r->version < 1 || r->version > STREAM_MAX_VERSION)
		return reader_error(
			r, e, EPROTONOSUPPORT,
			"read stream version (supported: 1 to 3) of",
			r->offset);
	r->buf_pos += BTRFS_SEND_STREAM_HEADER_LEN;
	r->offset += BTRFS_SEND_STREAM_HEADER_LEN;
	return 0;
}

int stream_reader_init(struct stream_reader *r, int fd, const char *name,
		       struct encio_error *e)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->name = name;
	r->buf_cap =
		STREAM_MAX_CMD_LEN + BTRFS_SEND_CMD_HEADER_LEN + READ_CHUNK;
	r->buf = malloc(r->buf_cap);
	if (!r->buf)
		return encio_error_set(e, ENOMEM, "allocate a buffer for", name,
				       false, 0);
	return reader_header(r, e);
}

void stream_reader_release(struct stream_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

/* Split the body into attributes; the last one wins if one repeats. */
/* A command's crc32c: over its header, crc field zero, and its body. */
static uint32_t cmd_crc32c(uint16_t type, uint32_t len,
			   const unsigned char *body)
{
	unsigned char header[BTRFS_SEND_CMD_HEADER_LEN] = { 0 };
	uint32_t le_len = htole32(len);
	uint16_t le_type = htole16(type);

	memcpy(header, &le_len, sizeof(le_len));
	memcpy(header + 4, &le_type, sizeof(le_type));
	return crc32c(crc32c(0, header, sizeof(header)), body, len);
}

static int parse_tlvs(struct stream_reader *r, struct stream_cmd *cmd,
		      const unsigned char *body, struct encio_error *e)
{
	uint32_t pos = 0;
	uint16_t type, len;

	memset(cmd->attr, 0, sizeof(cmd->attr));
	while (pos < cmd->len) {
		if (cmd->len - pos < 2)
			return reader_error(
				r, e, EBADMSG,
				"parse (attribute header past the command)",
				cmd->offset);
		type = le_get16(body + pos);
		if (type == BTRFS_SEND_A_DATA && r->version >= 2) {
			pos += 2;
			cmd->attr[type] = (struct stream_attr){ body + pos,
								cmd->len - pos,
								true };
			return 0;
		}
		if (cmd->len - pos < BTRFS_SEND_TLV_HEADER_LEN)
			return reader_error(
				r, e, EBADMSG,
				"parse (attribute header past the command)",
				cmd->offset);
		len = le_get16(body + pos + 2);
		pos += BTRFS_SEND_TLV_HEADER_LEN;
		if (len > cmd->len - pos)
			return reader_error(
				r, e, EBADMSG,
				"parse (attribute length past the command)",
				cmd->offset);
		/* Unknown attributes may be ignored (dev-send-stream.rst). */
		if (type != BTRFS_SEND_A_UNSPEC && type <= BTRFS_SEND_A_MAX)
			cmd->attr[type] =
				(struct stream_attr){ body + pos, len, true };
		pos += len;
	}
	return 0;
}

static bool at_stream_header(struct stream_reader *r)
{
	return r->buf_len - r->buf_pos >= BTRFS_SEND_STREAM_MAGIC_LEN &&
	       memcmp(r->buf + r->buf_pos, BTRFS_SEND_STREAM_MAGIC,
		      BTRFS_SEND_STREAM_MAGIC_LEN) == 0;
}

/* ENCIO_RESUME right after a resumed stream's header, and nowhere else. */
static int check_cmd_type(struct stream_reader *r, const struct stream_cmd *cmd,
			  struct encio_error *e)
{
	bool resume = cmd->type == STREAM_C_ENCIO_RESUME;
	bool subvolumes = cmd->type == STREAM_C_ENCIO_SUBVOL ||
			  cmd->type == STREAM_C_ENCIO_DATA;

	if (cmd->type == BTRFS_SEND_C_UNSPEC ||
	    (cmd->type > BTRFS_SEND_C_MAX && !resume &&
	     !(subvolumes && r->subvolumes)))
		return reader_error(r, e, EBADMSG,
				    "parse (unknown command type)",
				    cmd->offset);
	if (resume && !r->resume_due)
		return reader_error(
			r, e, EBADMSG,
			"parse (ENCIO_RESUME not right after a resumed stream's header)",
			cmd->offset);
	if (!resume && r->resume_due)
		return reader_error(
			r, e, EBADMSG,
			"parse (a resumed stream's header not followed by ENCIO_RESUME)",
			cmd->offset);
	r->resume_due = false;
	return 0;
}

int stream_read_cmd(struct stream_reader *r, struct stream_cmd *cmd,
		    struct encio_error *e)
{
	const unsigned char *p;
	uint32_t crc;
	int ret;

	/*
	 * Streams may be concatenated, each with its header; a header may
	 * follow a header, as often as the input likes.
	 */
	for (;;) {
		ret = reader_fill(r, BTRFS_SEND_STREAM_HEADER_LEN);
		if (ret < 0)
			return reader_error(r, e, ret, "read", r->offset);
		if (r->buf_len == r->buf_pos)
			return 0;
		if (!at_stream_header(r))
			break;
		ret = reader_header(r, e);
		if (ret)
			return ret;
	}
	if (r->buf_len - r->buf_pos < BTRFS_SEND_CMD_HEADER_LEN)
		return reader_error(
			r, e, EBADMSG,
			"read (stream truncated in a command header)",
			r->offset);
	p = r->buf + r->buf_pos;
	cmd->offset = r->offset;
	cmd->len = le_get32(p);
	cmd->type = le_get16(p + 4);
	if (cmd->len > STREAM_MAX_CMD_LEN)
		return reader_error(r, e, EMSGSIZE,
				    "read (command length past the limit)",
				    cmd->offset);
	ret = reader_fill(r, BTRFS_SEND_CMD_HEADER_LEN + cmd->len);
	if (ret < 0)
		return reader_error(r, e, ret, "read", cmd->offset);
	if (ret)
		return reader_error(r, e, EBADMSG,
				    "read (stream truncated in a command)",
				    cmd->offset);
	p = r->buf + r->buf_pos;
	crc = cmd_crc32c(cmd->type, cmd->len, p + BTRFS_SEND_CMD_HEADER_LEN);
	/* Fuzzers cannot forge checksums: let them past to reach the parser. */
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	if (crc != le_get32(p + 6))
		return reader_error(r, e, EBADMSG, "verify (crc32c mismatch)",
				    cmd->offset);
#endif
	cmd->crc = crc;
	ret = check_cmd_type(r, cmd, e);
	if (ret)
		return ret;
	cmd->body = p + BTRFS_SEND_CMD_HEADER_LEN;
	ret = parse_tlvs(r, cmd, cmd->body, e);
	if (ret)
		return ret;
	r->buf_pos += BTRFS_SEND_CMD_HEADER_LEN + cmd->len;
	r->offset += BTRFS_SEND_CMD_HEADER_LEN + cmd->len;
	return 1;
}

/* Attribute access for dispatch: each checks presence and exact size. */
struct cmd_ctx {
	struct stream_reader *r;
	struct stream_cmd *cmd;
	struct encio_error *e;
	char *what; /* the reader's, so messages outlive the call */
	int err;
};

static bool attr_missing(struct cmd_ctx *c, unsigned int attr, uint32_t len)
{
	const struct stream_attr *a = &c->cmd->attr[attr];

	if (c->err)
		return true;
	if (a->present && (len == 0 || a->len == len))
		return false;
	snprintf(c->what, STREAM_WHAT_LEN, "parse %s (attribute %u %s)",
		 stream_cmd_name(c->cmd->type), attr,
		 a->present ? "has a wrong size" : "missing");
	c->err = reader_error(c->r, c->e, EBADMSG, c->what, c->cmd->offset);
	return true;
}

static uint64_t attr_u64(struct cmd_ctx *c, unsigned int attr)
{
	return attr_missing(c, attr, 8) ? 0 : le_get64(c->cmd->attr[attr].data);
}

static uint32_t attr_u32(struct cmd_ctx *c, unsigned int attr)
{
	return attr_missing(c, attr, 4) ? 0 : le_get32(c->cmd->attr[attr].data);
}

static const uint8_t *attr_uuid(struct cmd_ctx *c, unsigned int attr)
{
	static const uint8_t zero[16];

	return attr_missing(c, attr, 16) ? zero : c->cmd->attr[attr].data;
}

static struct timespec attr_timespec(struct cmd_ctx *c, unsigned int attr)
{
	struct timespec ts = { 0 };
	const unsigned char *p;

	if (attr_missing(c, attr, 12))
		return ts;
	p = c->cmd->attr[attr].data;
	ts.tv_sec = (time_t)le_get64(p);
	ts.tv_nsec = le_get32(p + 8);
	return ts;
}

/* A string attribute as a C string in @buf: no NUL inside, < PATH_MAX. */
static const char *attr_string(struct cmd_ctx *c, unsigned int attr, char *buf)
{
	const struct stream_attr *a = &c->cmd->attr[attr];

	buf[0] = '\0';
	if (attr_missing(c, attr, 0))
		return buf;
	if (a->len >= PATH_MAX || memchr(a->data, '\0', a->len)) {
		snprintf(
			c->what, STREAM_WHAT_LEN,
			"parse %s (attribute %u: string too long or holding NUL)",
			stream_cmd_name(c->cmd->type), attr);
		c->err = reader_error(c->r, c->e, EBADMSG, c->what,
				      c->cmd->offset);
		return buf;
	}
	memcpy(buf, a->data, a->len);
	buf[a->len] = '\0';
	return buf;
}

static const void *attr_data(struct cmd_ctx *c, unsigned int attr, size_t *len)
{
	*len = 0;
	if (attr_missing(c, attr, 0))
		return NULL;
	*len = c->cmd->attr[attr].len;
	return c->cmd->attr[attr].data;
}

struct cmd_strings {
	char path[PATH_MAX];
	char other[PATH_MAX];
};

static int dispatch_create(struct cmd_ctx *c, const struct stream_ops *ops,
			   void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	uint64_t mode, rdev;

	switch (c->cmd->type) {
	case BTRFS_SEND_C_MKFILE:
		return c->err ?: ops->mkfile ? ops->mkfile(path, arg) : 0;
	case BTRFS_SEND_C_MKDIR:
		return c->err ?: ops->mkdir ? ops->mkdir(path, arg) : 0;
	case BTRFS_SEND_C_MKFIFO:
		return c->err ?: ops->mkfifo ? ops->mkfifo(path, arg) : 0;
	case BTRFS_SEND_C_MKSOCK:
		return c->err ?: ops->mksock ? ops->mksock(path, arg) : 0;
	case BTRFS_SEND_C_MKNOD:
		mode = attr_u64(c, BTRFS_SEND_A_MODE);
		rdev = attr_u64(c, BTRFS_SEND_A_RDEV);
		return c->err		  ?:
			       ops->mknod ? ops->mknod(path, mode, rdev, arg) :
					    0;
	case BTRFS_SEND_C_SYMLINK:
		attr_string(c, BTRFS_SEND_A_PATH_LINK, s->other);
		return c->err ?:
			       ops->symlink ?
			       ops->symlink(path, s->other, arg) :
			       0;
	}
	return -EINVAL;
}

static int dispatch_names(struct cmd_ctx *c, const struct stream_ops *ops,
			  void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);

	switch (c->cmd->type) {
	case BTRFS_SEND_C_RENAME:
		attr_string(c, BTRFS_SEND_A_PATH_TO, s->other);
		return c->err		   ?:
			       ops->rename ? ops->rename(path, s->other, arg) :
					     0;
	case BTRFS_SEND_C_LINK:
		attr_string(c, BTRFS_SEND_A_PATH_LINK, s->other);
		return c->err ?: ops->link ? ops->link(path, s->other, arg) : 0;
	case BTRFS_SEND_C_UNLINK:
		return c->err ?: ops->unlink ? ops->unlink(path, arg) : 0;
	case BTRFS_SEND_C_RMDIR:
		return c->err ?: ops->rmdir ? ops->rmdir(path, arg) : 0;
	}
	return -EINVAL;
}

static int dispatch_xattr(struct cmd_ctx *c, const struct stream_ops *ops,
			  void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	const char *name = attr_string(c, BTRFS_SEND_A_XATTR_NAME, s->other);
	const void *data;
	size_t len;

	if (c->cmd->type == BTRFS_SEND_C_REMOVE_XATTR)
		return c->err ?:
			       ops->remove_xattr ?
			       ops->remove_xattr(path, name, arg) :
			       0;
	data = attr_data(c, BTRFS_SEND_A_XATTR_DATA, &len);
	return c->err ?:
		       ops->set_xattr ?
		       ops->set_xattr(path, name, data, len, arg) :
		       0;
}

static int dispatch_data(struct cmd_ctx *c, const struct stream_ops *ops,
			 void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	uint64_t offset = attr_u64(c, BTRFS_SEND_A_FILE_OFFSET);
	const uint8_t *uuid;
	uint64_t len, ctransid, clone_offset;
	const void *data;
	size_t data_len;

	switch (c->cmd->type) {
	case BTRFS_SEND_C_WRITE:
		data = attr_data(c, BTRFS_SEND_A_DATA, &data_len);
		return c->err ?:
			       ops->write ?
			       ops->write(path, offset, data, data_len, arg) :
			       0;
	case BTRFS_SEND_C_UPDATE_EXTENT:
		len = attr_u64(c, BTRFS_SEND_A_SIZE);
		return c->err ?:
			       ops->update_extent ?
			       ops->update_extent(path, offset, len, arg) :
			       0;
	case BTRFS_SEND_C_CLONE:
		len = attr_u64(c, BTRFS_SEND_A_CLONE_LEN);
		uuid = attr_uuid(c, BTRFS_SEND_A_CLONE_UUID);
		ctransid = attr_u64(c, BTRFS_SEND_A_CLONE_CTRANSID);
		attr_string(c, BTRFS_SEND_A_CLONE_PATH, s->other);
		clone_offset = attr_u64(c, BTRFS_SEND_A_CLONE_OFFSET);
		return c->err ?:
			       ops->clone ?
			       ops->clone(path, offset, len, uuid, ctransid,
					  s->other, clone_offset, arg) :
			       0;
	}
	return -EINVAL;
}

/* Sizes an encoded write must agree on before anyone looks at the data. */
static int check_encoded_write(struct cmd_ctx *c,
			       const struct stream_encoded_write *ew)
{
	const char *why = NULL;

	if (ew->compression >= BTRFS_ENCODED_IO_COMPRESSION_TYPES)
		why = "compression type out of range";
	else if (ew->encryption >= BTRFS_ENCODED_IO_ENCRYPTION_TYPES)
		why = "encryption type out of range";
	else if (ew->unencoded_offset > ew->unencoded_len ||
		 ew->unencoded_file_len >
			 ew->unencoded_len - ew->unencoded_offset)
		why = "unencoded range past the unencoded extent";
	else if (ew->unencoded_len > BTRFS_MAX_UNCOMPRESSED &&
		 ew->compression != BTRFS_ENCODED_IO_COMPRESSION_NONE)
		why = "unencoded length past 128 KiB";
	else if (ew->len == 0 || ew->len > BTRFS_MAX_COMPRESSED)
		why = "encoded length 0 or past 128 KiB";
	else if (ew->unencoded_file_len == 0)
		why = "empty range";
	if (!why)
		return 0;
	snprintf(c->what, STREAM_WHAT_LEN, "parse encoded_write (%s)", why);
	return reader_error(c->r, c->e, EBADMSG, c->what, c->cmd->offset);
}

static int dispatch_encoded_write(struct cmd_ctx *c,
				  const struct stream_ops *ops, void *arg,
				  struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	struct stream_encoded_write ew = { 0 };

	ew.offset = attr_u64(c, BTRFS_SEND_A_FILE_OFFSET);
	ew.unencoded_file_len = attr_u64(c, BTRFS_SEND_A_UNENCODED_FILE_LEN);
	ew.unencoded_len = attr_u64(c, BTRFS_SEND_A_UNENCODED_LEN);
	ew.unencoded_offset = attr_u64(c, BTRFS_SEND_A_UNENCODED_OFFSET);
	/* Compression and encryption are optional: absent means none. */
	if (c->cmd->attr[BTRFS_SEND_A_COMPRESSION].present)
		ew.compression = attr_u32(c, BTRFS_SEND_A_COMPRESSION);
	if (c->cmd->attr[BTRFS_SEND_A_ENCRYPTION].present)
		ew.encryption = attr_u32(c, BTRFS_SEND_A_ENCRYPTION);
	ew.data = attr_data(c, BTRFS_SEND_A_DATA, &ew.len);
	if (c->err)
		return c->err;
	c->err = check_encoded_write(c, &ew);
	return c->err			  ?:
		       ops->encoded_write ? ops->encoded_write(path, &ew, arg) :
					    0;
}

/* The sender's estimate of the stream, where a command gives one (stream.h). */
static void note_sender_total(struct cmd_ctx *c, unsigned int attr)
{
	const struct stream_attr *a = &c->cmd->attr[attr];

	if (a->present && a->len == 8 && !c->r->sender_total)
		c->r->sender_total = le_get64(a->data);
}

static int dispatch_inode(struct cmd_ctx *c, const struct stream_ops *ops,
			  void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	struct timespec at, mt, ct;
	uint64_t a, b;
	uint32_t mode;

	switch (c->cmd->type) {
	case BTRFS_SEND_C_TRUNCATE:
		a = attr_u64(c, BTRFS_SEND_A_SIZE);
		return c->err		     ?:
			       ops->truncate ? ops->truncate(path, a, arg) :
					       0;
	case BTRFS_SEND_C_CHMOD:
		a = attr_u64(c, BTRFS_SEND_A_MODE);
		return c->err ?: ops->chmod ? ops->chmod(path, a, arg) : 0;
	case BTRFS_SEND_C_CHOWN:
		a = attr_u64(c, BTRFS_SEND_A_UID);
		b = attr_u64(c, BTRFS_SEND_A_GID);
		return c->err ?: ops->chown ? ops->chown(path, a, b, arg) : 0;
	case BTRFS_SEND_C_UTIMES:
		note_sender_total(c, BTRFS_SEND_A_SIZE);
		at = attr_timespec(c, BTRFS_SEND_A_ATIME);
		mt = attr_timespec(c, BTRFS_SEND_A_MTIME);
		ct = attr_timespec(c, BTRFS_SEND_A_CTIME);
		return c->err ?:
			       ops->utimes ?
			       ops->utimes(path, &at, &mt, &ct, arg) :
			       0;
	case BTRFS_SEND_C_FALLOCATE:
		mode = attr_u32(c, BTRFS_SEND_A_FALLOCATE_MODE);
		a = attr_u64(c, BTRFS_SEND_A_FILE_OFFSET);
		b = attr_u64(c, BTRFS_SEND_A_SIZE);
		return c->err ?:
			       ops->fallocate ?
			       ops->fallocate(path, mode, a, b, arg) :
			       0;
	case BTRFS_SEND_C_FILEATTR:
		a = attr_u64(c, BTRFS_SEND_A_FILEATTR);
		return c->err		     ?:
			       ops->fileattr ? ops->fileattr(path, a, arg) :
					       0;
	}
	return -EINVAL;
}

void stream_cmd_without_total(const struct stream_cmd *cmd, uint32_t *len,
			      uint32_t *crc)
{
	const struct stream_attr *a = &cmd->attr[BTRFS_SEND_A_SIZE];

	*len = cmd->len;
	*crc = cmd->crc;
	if ((cmd->type != BTRFS_SEND_C_SUBVOL &&
	     cmd->type != BTRFS_SEND_C_SNAPSHOT &&
	     cmd->type != BTRFS_SEND_C_UTIMES) ||
	    !a->present || a->len != 8 || cmd->len < STREAM_TOTAL_ATTR_LEN ||
	    a->data != cmd->body + cmd->len - 8)
		return;
	*len = cmd->len - STREAM_TOTAL_ATTR_LEN;
	*crc = cmd_crc32c(cmd->type, *len, cmd->body);
}

uint64_t stream_cmd_layout(const struct stream_cmd *cmd)
{
	const struct stream_attr *a = &cmd->attr[STREAM_A_LAYOUT];

	return a->present && a->len == 8 ? le_get64(a->data) : 0;
}

bool stream_cmd_makes_inode(uint16_t type)
{
	switch (type) {
	case BTRFS_SEND_C_MKFILE:
	case BTRFS_SEND_C_MKDIR:
	case BTRFS_SEND_C_MKNOD:
	case BTRFS_SEND_C_MKFIFO:
	case BTRFS_SEND_C_MKSOCK:
	case BTRFS_SEND_C_SYMLINK:
		return true;
	}
	return false;
}

void stream_point_add(struct resume_point *p, uint64_t *base,
		      const struct stream_cmd *cmd, uint64_t end)
{
	uint32_t len, crc;

	stream_cmd_without_total(cmd, &len, &crc);
	if (cmd->type == BTRFS_SEND_C_SUBVOL ||
	    cmd->type == BTRFS_SEND_C_SNAPSHOT) {
		*base = cmd->offset;
		p->layout = stream_cmd_layout(cmd);
		memset(&p->anchor, 0, sizeof(p->anchor));
	}
	if (stream_cmd_makes_inode(cmd->type) &&
	    p->anchor.creates != RESUME_ANCHOR_UNKNOWN) {
		const struct stream_attr *ino = &cmd->attr[BTRFS_SEND_A_INO];

		p->anchor.creates++;
		p->anchor.ino =
			ino->present && ino->len == 8 ? le_get64(ino->data) : 0;
		p->anchor.position = p->position;
		p->anchor.fingerprint = p->fingerprint;
		p->anchor.shape = p->shape;
		p->anchor.commands = p->commands;
	}
	*base += cmd->len - len;
	p->fingerprint =
		resume_fingerprint_add(p->fingerprint, cmd->type, len, crc);
	p->shape = resume_fingerprint_add(p->shape, cmd->type, len, 0);
	p->commands++;
	p->position = end - *base;
}

static int dispatch_subvol(struct cmd_ctx *c, const struct stream_ops *ops,
			   void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	const uint8_t *uuid = attr_uuid(c, BTRFS_SEND_A_UUID);
	uint64_t ctransid = attr_u64(c, BTRFS_SEND_A_CTRANSID);
	const uint8_t *parent;
	uint64_t parent_ctransid;

	note_sender_total(c, BTRFS_SEND_A_SIZE);
	if (c->cmd->type == BTRFS_SEND_C_SUBVOL)
		return c->err ?:
			       ops->subvol ?
			       ops->subvol(path, uuid, ctransid, arg) :
			       0;
	parent = attr_uuid(c, BTRFS_SEND_A_CLONE_UUID);
	parent_ctransid = attr_u64(c, BTRFS_SEND_A_CLONE_CTRANSID);
	return c->err ?:
		       ops->snapshot ?
		       ops->snapshot(path, uuid, ctransid, parent,
				     parent_ctransid, arg) :
		       0;
}

static int dispatch_verity(struct cmd_ctx *c, const struct stream_ops *ops,
			   void *arg, struct cmd_strings *s)
{
	const char *path = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	const struct stream_attr *alg =
		&c->cmd->attr[BTRFS_SEND_A_VERITY_ALGORITHM];
	uint32_t block_size = attr_u32(c, BTRFS_SEND_A_VERITY_BLOCK_SIZE);
	const void *salt = NULL, *sig = NULL;
	size_t salt_len = 0, sig_len = 0;

	if (attr_missing(c, BTRFS_SEND_A_VERITY_ALGORITHM, 1))
		return c->err;
	if (c->cmd->attr[BTRFS_SEND_A_VERITY_SALT_DATA].present)
		salt = attr_data(c, BTRFS_SEND_A_VERITY_SALT_DATA, &salt_len);
	if (c->cmd->attr[BTRFS_SEND_A_VERITY_SIG_DATA].present)
		sig = attr_data(c, BTRFS_SEND_A_VERITY_SIG_DATA, &sig_len);
	return c->err ?:
		       ops->enable_verity ?
		       ops->enable_verity(path, alg->data[0], block_size, salt,
					  salt_len, sig, sig_len, arg) :
		       0;
}

static int dispatch_resume(struct cmd_ctx *c, const struct stream_ops *ops,
			   void *arg, struct cmd_strings *s)
{
	const char *name = attr_string(c, BTRFS_SEND_A_PATH, s->path);
	const uint8_t *uuid = attr_uuid(c, BTRFS_SEND_A_UUID);
	const uint8_t *parent = attr_uuid(c, BTRFS_SEND_A_CLONE_UUID);
	struct resume_point p = { 0 };

	p.ctransid = attr_u64(c, BTRFS_SEND_A_CTRANSID);
	p.parent_ctransid = attr_u64(c, BTRFS_SEND_A_CLONE_CTRANSID);
	p.position = attr_u64(c, BTRFS_SEND_A_FILE_OFFSET);
	p.fingerprint = attr_u64(c, BTRFS_SEND_A_SIZE);
	p.commands = attr_u64(c, BTRFS_SEND_A_INO);
	p.shape = attr_u64(c, STREAM_A_RESUME_SHAPE);
	p.layout = attr_u64(c, STREAM_A_RESUME_LAYOUT);
	note_sender_total(c, STREAM_A_RESUME_TOTAL);
	if (c->err)
		return c->err;
	if (!ops->resume)
		return reader_error(
			c->r, c->e, EPROTO,
			"receive (a resumed stream, of encio send -t: it needs encio receive -s and the partial subvolume) from",
			c->cmd->offset);
	if (strlen(name) > NAME_MAX)
		return reader_error(c->r, c->e, EINVAL,
				    "parse (a resume point's name too long)",
				    c->cmd->offset);
	strcpy(p.name, name);
	memcpy(p.uuid, uuid, BTRFS_UUID_SIZE);
	memcpy(p.parent_uuid, parent, BTRFS_UUID_SIZE);
	p.version = c->r->version;
	return ops->resume(&p, arg);
}

static int dispatch(struct cmd_ctx *c, const struct stream_ops *ops, void *arg,
		    struct cmd_strings *s)
{
	switch (c->cmd->type) {
	case STREAM_C_ENCIO_RESUME:
		return dispatch_resume(c, ops, arg, s);
	case BTRFS_SEND_C_SUBVOL:
	case BTRFS_SEND_C_SNAPSHOT:
		return dispatch_subvol(c, ops, arg, s);
	case BTRFS_SEND_C_MKFILE:
	case BTRFS_SEND_C_MKDIR:
	case BTRFS_SEND_C_MKNOD:
	case BTRFS_SEND_C_MKFIFO:
	case BTRFS_SEND_C_MKSOCK:
	case BTRFS_SEND_C_SYMLINK:
		return dispatch_create(c, ops, arg, s);
	case BTRFS_SEND_C_RENAME:
	case BTRFS_SEND_C_LINK:
	case BTRFS_SEND_C_UNLINK:
	case BTRFS_SEND_C_RMDIR:
		return dispatch_names(c, ops, arg, s);
	case BTRFS_SEND_C_SET_XATTR:
	case BTRFS_SEND_C_REMOVE_XATTR:
		return dispatch_xattr(c, ops, arg, s);
	case BTRFS_SEND_C_WRITE:
	case BTRFS_SEND_C_CLONE:
	case BTRFS_SEND_C_UPDATE_EXTENT:
		return dispatch_data(c, ops, arg, s);
	case BTRFS_SEND_C_ENCODED_WRITE:
		return dispatch_encoded_write(c, ops, arg, s);
	case BTRFS_SEND_C_ENABLE_VERITY:
		return dispatch_verity(c, ops, arg, s);
	case BTRFS_SEND_C_END:
		return ops->end ? ops->end(arg) : 0;
	default:
		return dispatch_inode(c, ops, arg, s);
	}
}

int stream_process(struct stream_reader *r, const struct stream_ops *ops,
		   void *arg, struct encio_error *e)
{
	struct stream_cmd cmd;
	struct cmd_strings *s;
	struct cmd_ctx c = { .r = r, .cmd = &cmd, .e = e, .what = r->what };
	bool ended = false;
	int ret;

	s = malloc(sizeof(*s));
	if (!s)
		return encio_error_set(e, ENOMEM, "read", r->name, false, 0);

	while ((ret = stream_read_cmd(r, &cmd, e)) == 1) {
		ended = cmd.type == BTRFS_SEND_C_END;
		c.err = 0;
		ret = dispatch(&c, ops, arg, s);
		if (!ret && ops->applied)
			ret = ops->applied(&cmd, arg);
		if (ret && !c.err) {
			/* A callback's failure: name the command and where. */
			snprintf(r->what, STREAM_WHAT_LEN,
				 "apply %s of '%.200s' from",
				 stream_cmd_name(cmd.type), s->path);
			ret = reader_error(r, e, ret, c.what, cmd.offset);
		}
		if (ret)
			break;
	}
	/* A stream cut between two commands is caught by its missing END. */
	if (ret == 0 && !ended)
		ret = reader_error(r, e, EBADMSG,
				   "read (stream ended without an end command)",
				   r->offset);
	free(s);
	return ret;
}

/* Writer. */

#define WRITER_BUF_LEN (4 * 1024 * 1024)
/*
 * Written out once this much is held, and after a subvolume's first
 * command: a receiver reading the stream as it comes starts on it (makes
 * the snapshot, applies) while the sender still reads what follows.
 */
#define WRITER_FLUSH_LEN (256 * 1024)

static int writer_flush(struct stream_writer *w, size_t upto)
{
	size_t done = 0;
	ssize_t n;

	if (w->fd == STREAM_COUNT_ONLY)
		done = upto;
	while (done < upto) {
		/*
		 * A reader that reads nothing must not hold off a stop: a
		 * signal ends a blocked write early, with EINTR or with what
		 * it wrote so far.
		 */
		if (w->stop && *w->stop)
			return -EINTR;
		n = write(w->fd, w->buf + done, upto - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += n;
	}
	memmove(w->buf, w->buf + upto, w->len - upto);
	w->len -= upto;
	w->cmd_start -= upto;
	w->written += upto;
	return 0;
}

int stream_writer_init(struct stream_writer *w, int fd, uint32_t version)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->version = version;
	w->cap = WRITER_BUF_LEN;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -ENOMEM;
	stream_put_header(w);
	return 0;
}

static void put_header(struct stream_writer *w, uint32_t version);

int stream_writer_init_subvolumes(struct stream_writer *w, int fd)
{
	int ret = stream_writer_init(w, fd, 2);

	if (ret)
		return ret;
	w->len = 0;
	put_header(w, STREAM_VERSION_SUBVOLUMES | w->version);
	return 0;
}

static void put_header(struct stream_writer *w, uint32_t version)
{
	uint32_t v = htole32(version);

	if (!w->err && w->cap - w->len < BTRFS_SEND_STREAM_HEADER_LEN)
		w->err = writer_flush(w, w->len);
	if (w->err)
		return;
	memcpy(w->buf + w->len, BTRFS_SEND_STREAM_MAGIC,
	       BTRFS_SEND_STREAM_MAGIC_LEN);
	memcpy(w->buf + w->len + BTRFS_SEND_STREAM_MAGIC_LEN, &v, sizeof(v));
	w->len += BTRFS_SEND_STREAM_HEADER_LEN;
	w->cmd_start = w->len;
}

void stream_put_header(struct stream_writer *w)
{
	put_header(w, w->version);
}

int stream_writer_finish(struct stream_writer *w)
{
	if (w->skip && !w->err)
		w->err = -ESTALE; /* the stream ended before its point */
	if (!w->err && w->len)
		w->err = writer_flush(w, w->len);
	return w->err;
}

void stream_writer_abandon(struct stream_writer *w)
{
	if (!w->written)
		w->len = w->cmd_start = 0;
}

void stream_writer_release(struct stream_writer *w)
{
	free(w->buf);
	w->buf = NULL;
}

static unsigned char *writer_room(struct stream_writer *w, size_t len)
{
	unsigned char *p;

	if (w->err)
		return NULL;
	if (w->len + len - w->cmd_start >
	    BTRFS_SEND_CMD_HEADER_LEN + STREAM_MAX_CMD_LEN) {
		w->err = -E2BIG;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += len;
	return p;
}

void stream_begin_cmd(struct stream_writer *w, uint16_t cmd)
{
	unsigned char *p;
	uint16_t le = htole16(cmd);

	/* Keep room for a whole command: write out what came before. */
	if (!w->err &&
	    w->cap - w->len < BTRFS_SEND_CMD_HEADER_LEN + STREAM_MAX_CMD_LEN)
		w->err = writer_flush(w, w->len);
	w->cmd_start = w->len;
	p = writer_room(w, BTRFS_SEND_CMD_HEADER_LEN);
	if (!p)
		return;
	memset(p, 0, BTRFS_SEND_CMD_HEADER_LEN);
	memcpy(p + 4, &le, sizeof(le));
}

static void put_tlv(struct stream_writer *w, uint16_t attr, const void *data,
		    size_t len)
{
	uint16_t hdr[2] = { htole16(attr), htole16((uint16_t)len) };
	unsigned char *p;

	if (len > UINT16_MAX) {
		w->err = w->err ?: -E2BIG;
		return;
	}
	p = writer_room(w, BTRFS_SEND_TLV_HEADER_LEN + len);
	if (!p)
		return;
	memcpy(p, hdr, sizeof(hdr));
	if (len)
		memcpy(p + BTRFS_SEND_TLV_HEADER_LEN, data, len);
}

void stream_put_u32(struct stream_writer *w, uint16_t attr, uint32_t value)
{
	uint32_t le = htole32(value);

	put_tlv(w, attr, &le, sizeof(le));
}

void stream_put_u64(struct stream_writer *w, uint16_t attr, uint64_t value)
{
	uint64_t le = htole64(value);

	put_tlv(w, attr, &le, sizeof(le));
}

void stream_put_string(struct stream_writer *w, uint16_t attr, const char *s)
{
	put_tlv(w, attr, s, strlen(s));
}

void stream_put_uuid(struct stream_writer *w, uint16_t attr,
		     const uint8_t *uuid)
{
	put_tlv(w, attr, uuid, 16);
}

void stream_put_timespec(struct stream_writer *w, uint16_t attr,
			 const struct timespec *ts)
{
	unsigned char buf[12];
	uint64_t sec = htole64((uint64_t)ts->tv_sec);
	uint32_t nsec = htole32((uint32_t)ts->tv_nsec);

	memcpy(buf, &sec, 8);
	memcpy(buf + 8, &nsec, 4);
	put_tlv(w, attr, buf, sizeof(buf));
}

void stream_put_bytes(struct stream_writer *w, uint16_t attr, const void *data,
		      size_t len)
{
	put_tlv(w, attr, data, len);
}

void stream_put_data(struct stream_writer *w, const void *data, size_t len)
{
	uint16_t type = htole16(BTRFS_SEND_A_DATA);
	unsigned char *p;

	if (w->version < 2) {
		put_tlv(w, BTRFS_SEND_A_DATA, data, len);
		return;
	}
	p = writer_room(w, sizeof(type) + len);
	if (!p)
		return;
	memcpy(p, &type, sizeof(type));
	if (w->fd != STREAM_COUNT_ONLY && data)
		memcpy(p + sizeof(type), data, len);
}

void stream_writer_skip(struct stream_writer *w, const struct resume_point *p,
			bool by_shape)
{
	w->skip = p;
	w->skip_by_shape = by_shape;
	w->skip_blind = false;
	w->skip_pos = w->skip_fp = w->skip_shape = w->skip_cmds = 0;
	w->len = w->cmd_start = 0; /* the header, before anything is written */
}

void stream_writer_skip_to_anchor(struct stream_writer *w)
{
	if (w->skip && resume_point_anchored(w->skip))
		w->skip_blind = true;
}

void stream_writer_at_anchor(struct stream_writer *w, uint64_t ino)
{
	const struct resume_anchor *a = &w->skip->anchor;

	w->skip_blind = false;
	if (ino != a->ino) {
		w->err = w->err ?: -ESTALE;
		return;
	}
	w->skip_pos = a->position;
	w->skip_fp = a->fingerprint;
	w->skip_shape = a->shape;
	w->skip_cmds = a->commands;
}

static void put_resume(struct stream_writer *w, const struct resume_point *p)
{
	stream_begin_cmd(w, STREAM_C_ENCIO_RESUME);
	stream_put_string(w, BTRFS_SEND_A_PATH, p->name);
	stream_put_uuid(w, BTRFS_SEND_A_UUID, p->uuid);
	stream_put_u64(w, BTRFS_SEND_A_CTRANSID, p->ctransid);
	stream_put_uuid(w, BTRFS_SEND_A_CLONE_UUID, p->parent_uuid);
	stream_put_u64(w, BTRFS_SEND_A_CLONE_CTRANSID, p->parent_ctransid);
	stream_put_u64(w, BTRFS_SEND_A_FILE_OFFSET, p->position);
	stream_put_u64(w, BTRFS_SEND_A_SIZE, p->fingerprint);
	stream_put_u64(w, BTRFS_SEND_A_INO, p->commands);
	stream_put_u64(w, STREAM_A_RESUME_SHAPE, p->shape);
	stream_put_u64(w, STREAM_A_RESUME_LAYOUT, p->layout);
	if (w->total)
		stream_put_u64(w, STREAM_A_RESUME_TOTAL, w->total);
	w->total = 0;
}

void stream_put_total(struct stream_writer *w)
{
	if (w->layout)
		stream_put_u64(w, STREAM_A_LAYOUT, w->layout);
	if (!w->total || w->skip)
		return;
	stream_put_u64(w, BTRFS_SEND_A_SIZE, w->total);
	w->total = 0;
}

/* The command just ended, dropped: the resume point reached, or not yet. */
static int skip_cmd(struct stream_writer *w, uint16_t type, uint32_t len,
		    uint32_t crc)
{
	const struct resume_point *p = w->skip;

	w->len = w->cmd_start;
	/* the first command, SUBVOL or SNAPSHOT, says how the rest is laid out */
	if (!w->skip_cmds && w->layout != p->layout)
		return w->err = -EPROTO;
	if (w->skip_blind)
		return 0;
	w->skip_pos += BTRFS_SEND_CMD_HEADER_LEN + len;
	w->skip_fp = resume_fingerprint_add(w->skip_fp, type, len, crc);
	w->skip_shape = resume_fingerprint_add(w->skip_shape, type, len, 0);
	w->skip_cmds++;
	if (w->skip_pos < p->position)
		return 0;
	/* counting only (send -n), nothing was read: no crc32c to compare */
	if (w->skip_pos > p->position || w->skip_shape != p->shape ||
	    w->skip_cmds != p->commands ||
	    (w->fd != STREAM_COUNT_ONLY && !w->skip_by_shape &&
	     w->skip_fp != p->fingerprint))
		return w->err = -ESTALE;
	w->skip = NULL;
	/* the rest of a file cut short: it follows what the file has */
	if (p->flags & RESUME_POINT_APPEND)
		return 0;
	put_header(w, STREAM_VERSION_RESUMED | w->version);
	put_resume(w, p);
	return stream_end_cmd(w);
}

int stream_end_cmd(struct stream_writer *w)
{
	unsigned char *p = w->buf + w->cmd_start;
	uint32_t len, crc;
	uint16_t type;

	if (w->err)
		return w->err;
	type = le_get16(p + 4);
	/* an estimate known after the first command: the next UTIMES has it */
	if (type == BTRFS_SEND_C_UTIMES && w->total && !w->skip) {
		stream_put_u64(w, BTRFS_SEND_A_SIZE, w->total);
		w->total = 0;
		if (w->err)
			return w->err;
		p = w->buf + w->cmd_start;
	}
	len = htole32(
		(uint32_t)(w->len - w->cmd_start - BTRFS_SEND_CMD_HEADER_LEN));
	memcpy(p, &len, sizeof(len));
	crc = w->fd == STREAM_COUNT_ONLY ?
		      0 :
		      htole32(crc32c(0, p, w->len - w->cmd_start));
	memcpy(p + 6, &crc, sizeof(crc));
	if (w->skip)
		return skip_cmd(w, type, le32toh(len), le32toh(crc));
	w->cmd_start = w->len;
	if (w->len >= WRITER_FLUSH_LEN || type == BTRFS_SEND_C_SUBVOL ||
	    type == BTRFS_SEND_C_SNAPSHOT)
		w->err = writer_flush(w, w->len);
	return w->err;
}

int stream_put_cmd(struct stream_writer *w, const struct stream_cmd *cmd)
{
	unsigned char *p;

	stream_begin_cmd(w, cmd->type);
	p = writer_room(w, cmd->len);
	if (p)
		memcpy(p, cmd->body, cmd->len);
	return stream_end_cmd(w);
}

void stream_fd_tune(int fd)
{
	struct stat st;

	if (!fstat(fd, &st) && S_ISFIFO(st.st_mode))
		fcntl(fd, F_SETPIPE_SZ, STREAM_PIPE_BYTES);
}
