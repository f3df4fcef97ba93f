// SPDX-License-Identifier: GPL-2.0
/*
 * Resume points: tokens round-trip and refuse any change; the writer's
 * skip drops what comes before the point, puts the header and the
 * ENCIO_RESUME command there, and refuses a stream that differs before it.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/crc32c.h"
#include "stream/resume.h"
#include "stream/stream.h"

static void point_fill(struct resume_point *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "snap.2");
	memset(p->uuid, 0xab, sizeof(p->uuid));
	p->ctransid = 1234;
	memset(p->parent_uuid, 0x12, sizeof(p->parent_uuid));
	p->parent_ctransid = 99;
	p->version = 2;
	p->position = 1 << 20;
	p->fingerprint = 0x0123456789abcdefULL;
	p->shape = 0xfedcba9876543210ULL;
	p->commands = 77;
	p->layout = 0x5555aaaa5555aaaaULL;
	p->anchor.creates = 12;
	p->anchor.ino = 300;
	p->anchor.position = 1 << 19;
	p->anchor.fingerprint = 0x1111222233334444ULL;
	p->anchor.shape = 0x5555666677778888ULL;
	p->anchor.commands = 70;
}

static void test_token_round_trip(void **state)
{
	struct resume_point p, q;
	char token[RESUME_TOKEN_MAX];

	(void)state;
	point_fill(&p);
	resume_token_encode(&p, token);
	assert_true(strlen(token) < RESUME_TOKEN_MAX);
	assert_int_equal(resume_token_decode(token, &q), 0);
	assert_memory_equal(&p, &q, sizeof(p));
}

static void test_token_refused(void **state)
{
	struct resume_point p, q;
	char token[RESUME_TOKEN_MAX], bad[RESUME_TOKEN_MAX];
	size_t i;

	(void)state;
	point_fill(&p);
	resume_token_encode(&p, token);
	/* any one digit changed: the checksum, or the parse, refuses it */
	for (i = 2; token[i]; i++) {
		strcpy(bad, token);
		bad[i] = bad[i] == '0' ? '1' : '0';
		assert_int_equal(resume_token_decode(bad, &q), -EINVAL);
	}
	/* another token version: the one before had no shape nor layout */
	strcpy(bad, token);
	bad[0] = '1';
	assert_int_equal(resume_token_decode(bad, &q), -EINVAL);
	strcpy(bad, token);
	bad[strlen(bad) - 2] = '\0';
	assert_int_equal(resume_token_decode(bad, &q), -EINVAL);
	assert_int_equal(resume_token_decode(token + 1, &q), -EINVAL);
	assert_int_equal(resume_token_decode("", &q), -EINVAL);
	assert_int_equal(resume_token_decode("2-zz", &q), -EINVAL);
}

/*
 * A token of version 2, which had no anchor, still resumes: by shape, its
 * anchor unknown (and never counted on by a receive resumed from it).
 */
static void test_token_version_2(void **state)
{
	uint8_t buf[RESUME_POINT_PACKED_MAX + 4];
	char token[RESUME_TOKEN_MAX], *t = token;
	struct resume_point p, q;
	size_t len, i;
	uint32_t crc;

	(void)state;
	point_fill(&p);
	assert_true(resume_point_anchored(&p));
	len = resume_point_pack(&p, buf) - sizeof(p.anchor);
	buf[0] = 2;
	crc = htole32(crc32c(0, buf, len));
	memcpy(buf + len, &crc, sizeof(crc));
	t += sprintf(t, "2-");
	for (i = 0; i < len + sizeof(crc); i++)
		t += sprintf(t, "%02x", buf[i]);
	assert_int_equal(resume_token_decode(token, &q), 0);
	assert_int_equal(q.anchor.creates, RESUME_ANCHOR_UNKNOWN);
	assert_false(resume_point_anchored(&q));
	q.anchor = p.anchor;
	assert_memory_equal(&p, &q, sizeof(p));
	/* its version said otherwise: refused */
	token[0] = '3';
	assert_int_equal(resume_token_decode(token, &q), -EINVAL);
}

static void test_fingerprint_order(void **state)
{
	uint64_t a = 0, b = 0;

	(void)state;
	a = resume_fingerprint_add(a, 15, 100, 0x11111111);
	a = resume_fingerprint_add(a, 15, 100, 0x22222222);
	b = resume_fingerprint_add(b, 15, 100, 0x22222222);
	b = resume_fingerprint_add(b, 15, 100, 0x11111111);
	assert_true(a != b);
}

/*
 * Three WRITE commands, the second's data @mark, and END, written to @fd;
 * skipped to @skip (@by_shape: the data of the commands it drops left out,
 * @layout the writer's).
 */
static int put_stream_as(int fd, const struct resume_point *skip, char mark,
			 bool by_shape, uint64_t layout)
{
	struct stream_writer w;
	char data[64];
	int i, ret;

	assert_int_equal(stream_writer_init(&w, fd, 2), 0);
	w.layout = layout;
	if (skip)
		stream_writer_skip(&w, skip, by_shape);
	for (i = 0; i < 3; i++) {
		memset(data, i == 1 ? mark : 'a' + i, sizeof(data));
		stream_begin_cmd(&w, BTRFS_SEND_C_WRITE);
		stream_put_string(&w, BTRFS_SEND_A_PATH, "f");
		stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, i * 64);
		if (stream_writer_drops(&w) && by_shape)
			stream_put_data(&w, NULL, sizeof(data));
		else
			stream_put_data(&w, data, sizeof(data));
		ret = stream_end_cmd(&w);
		if (ret)
			break;
	}
	if (!ret) {
		stream_begin_cmd(&w, BTRFS_SEND_C_END);
		ret = stream_end_cmd(&w);
	}
	ret = ret ?: stream_writer_finish(&w);
	stream_writer_release(&w);
	return ret;
}

static int put_stream(int fd, const struct resume_point *skip, char mark)
{
	return put_stream_as(fd, skip, mark, false, 0);
}

struct met {
	struct resume_point point;
	int resumes, writes, applied;
	uint64_t fp;
	uint64_t first_write_offset;
};

static int on_resume(const struct resume_point *p, void *arg)
{
	struct met *m = arg;

	m->point = *p;
	m->resumes++;
	return 0;
}

static int on_write(const char *path, uint64_t offset, const void *data,
		    size_t len, void *arg)
{
	struct met *m = arg;

	(void)path;
	(void)data;
	(void)len;
	if (!m->writes++)
		m->first_write_offset = offset;
	return 0;
}

static int on_applied(const struct stream_cmd *cmd, void *arg)
{
	struct met *m = arg;

	m->applied++;
	if (cmd->type != STREAM_C_ENCIO_RESUME)
		m->fp = resume_fingerprint_add(m->fp, cmd->type, cmd->len,
					       cmd->crc);
	return 0;
}

static const struct stream_ops met_ops = { .resume = on_resume,
					   .write = on_write,
					   .applied = on_applied };

static void read_all(int fd, const struct stream_ops *ops, struct met *m)
{
	struct stream_reader r;
	struct encio_error e;

	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(stream_reader_init(&r, fd, "test", &e), 0);
	assert_int_equal(stream_process(&r, ops, m, &e), 0);
	stream_reader_release(&r);
}

static uint32_t header_version(int fd)
{
	uint32_t v;

	assert_int_equal(pread(fd, &v, sizeof(v), BTRFS_SEND_STREAM_MAGIC_LEN),
			 (ssize_t)sizeof(v));
	return le32toh(v);
}

static void set_header_version(int fd, uint32_t version)
{
	uint32_t v = htole32(version);

	assert_int_equal(pwrite(fd, &v, sizeof(v), BTRFS_SEND_STREAM_MAGIC_LEN),
			 (ssize_t)sizeof(v));
}

static int read_err(int fd)
{
	struct stream_reader r;
	struct encio_error e;
	struct met m = { 0 };
	int ret;

	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	ret = stream_reader_init(&r, fd, "test", &e);
	if (!ret)
		ret = stream_process(&r, &met_ops, &m, &e);
	stream_reader_release(&r);
	return ret;
}

static void test_writer_skip(void **state)
{
	int whole = memfd_create("whole", 0), part = memfd_create("part", 0);
	struct resume_point p = { .name = "s" };
	struct met all = { 0 }, rest = { 0 };
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error e;

	(void)state;
	/* the point after the first command, as a receiver saw it */
	assert_int_equal(put_stream(whole, NULL, 'b'), 0);
	assert_int_equal(lseek(whole, 0, SEEK_SET), 0);
	assert_int_equal(stream_reader_init(&r, whole, "whole", &e), 0);
	assert_int_equal(stream_read_cmd(&r, &cmd, &e), 1);
	p.position = r.offset - cmd.offset;
	p.fingerprint = resume_fingerprint_add(0, cmd.type, cmd.len, cmd.crc);
	p.shape = resume_fingerprint_add(0, cmd.type, cmd.len, 0);
	p.commands = 1;
	stream_reader_release(&r);
	read_all(whole, &met_ops, &all);
	assert_int_equal(all.writes, 3);

	assert_int_equal(put_stream(part, &p, 'b'), 0);
	/* a header no btrfs receive takes, the stream's version in it */
	assert_int_equal(header_version(part), STREAM_VERSION_RESUMED | 2);
	read_all(part, &met_ops, &rest);
	assert_int_equal(rest.resumes, 1);
	assert_int_equal(rest.point.version, 2);
	assert_int_equal(rest.point.position, p.position);
	assert_int_equal(rest.point.fingerprint, p.fingerprint);
	assert_int_equal(rest.writes, 2);
	assert_int_equal(rest.first_write_offset, 64);
	close(whole);
	close(part);
}

static void test_writer_skip_refuses(void **state)
{
	int fd = memfd_create("differs", 0);
	struct resume_point p = { .name = "s" };
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error e;
	uint64_t fp = 0;
	int i;

	(void)state;
	/* the point after two commands; the stream regenerated differs in
	 * the second */
	assert_int_equal(put_stream(fd, NULL, 'b'), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(stream_reader_init(&r, fd, "s", &e), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(stream_read_cmd(&r, &cmd, &e), 1);
		if (!i)
			p.position = cmd.offset;
		fp = resume_fingerprint_add(fp, cmd.type, cmd.len, cmd.crc);
		p.shape = resume_fingerprint_add(p.shape, cmd.type, cmd.len, 0);
	}
	p.position = r.offset - p.position;
	p.fingerprint = fp;
	p.commands = 2;
	stream_reader_release(&r);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(put_stream(fd, &p, 'x'), -ESTALE);
	assert_int_equal(lseek(fd, 0, SEEK_END), 0); /* nothing written */
	/* a point past the stream's end */
	p.position *= 10;
	assert_int_equal(put_stream(fd, &p, 'b'), -ESTALE);
	assert_int_equal(lseek(fd, 0, SEEK_END), 0);
	close(fd);
}

/*
 * A walked tree's resume: the commands before the point are put without
 * their data and only their shape is checked; the rest is written whole.
 * A point of another layout is refused at the first command, a shape that
 * differs at the point.
 */
static void test_writer_skip_by_shape(void **state)
{
	int fd = memfd_create("shape", 0);
	struct resume_point p = { .name = "s", .layout = 7 };
	struct met rest = { 0 };
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error e;

	(void)state;
	assert_int_equal(put_stream_as(fd, NULL, 'b', false, 7), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(stream_reader_init(&r, fd, "s", &e), 0);
	assert_int_equal(stream_read_cmd(&r, &cmd, &e), 1);
	p.position = r.offset - cmd.offset;
	p.fingerprint = 1; /* not the data's: never compared by shape */
	p.shape = resume_fingerprint_add(0, cmd.type, cmd.len, 0);
	p.commands = 1;
	stream_reader_release(&r);

	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(put_stream_as(fd, &p, 'b', true, 7), 0);
	read_all(fd, &met_ops, &rest);
	assert_int_equal(rest.resumes, 1);
	assert_int_equal(rest.point.shape, p.shape);
	assert_int_equal(rest.point.layout, 7);
	assert_int_equal(rest.writes, 2);
	assert_int_equal(rest.first_write_offset, 64);

	/* the same point by another layout: refused, nothing written */
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(put_stream_as(fd, &p, 'b', true, 8), -EPROTO);
	assert_int_equal(lseek(fd, 0, SEEK_END), 0);
	/* a shape that differs: refused */
	p.shape ^= 1;
	assert_int_equal(put_stream_as(fd, &p, 'b', true, 7), -ESTALE);
	assert_int_equal(lseek(fd, 0, SEEK_END), 0);
	close(fd);
}

/*
 * ENCIO_RESUME is taken right after a resumed stream's header only, and
 * such a header only before it; its version's low byte is the stream's.
 */
static void test_resume_header_rules(void **state)
{
	int fd = memfd_create("rules", 0);
	struct resume_point p = { .name = "s" };
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error e;

	(void)state;
	assert_int_equal(put_stream(fd, NULL, 'b'), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(stream_reader_init(&r, fd, "s", &e), 0);
	assert_int_equal(stream_read_cmd(&r, &cmd, &e), 1);
	p.position = r.offset - cmd.offset;
	p.fingerprint = resume_fingerprint_add(0, cmd.type, cmd.len, cmd.crc);
	p.shape = resume_fingerprint_add(0, cmd.type, cmd.len, 0);
	p.commands = 1;
	stream_reader_release(&r);

	/* a plain stream's header, then commands: not resumed */
	set_header_version(fd, STREAM_VERSION_RESUMED | 2);
	assert_int_equal(read_err(fd), -EBADMSG);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(put_stream(fd, &p, 'b'), 0);
	assert_int_equal(read_err(fd), 0);
	/* ENCIO_RESUME after a plain header */
	set_header_version(fd, 2);
	assert_int_equal(read_err(fd), -EBADMSG);
	/* a version past those known, resumed or not */
	set_header_version(fd,
			   STREAM_VERSION_RESUMED | (STREAM_MAX_VERSION + 1));
	assert_int_equal(read_err(fd), -EPROTONOSUPPORT);
	set_header_version(fd, STREAM_VERSION_RESUMED);
	assert_int_equal(read_err(fd), -EPROTONOSUPPORT);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_round_trip),
		cmocka_unit_test(test_token_refused),
		cmocka_unit_test(test_token_version_2),
		cmocka_unit_test(test_fingerprint_order),
		cmocka_unit_test(test_writer_skip),
		cmocka_unit_test(test_writer_skip_refuses),
		cmocka_unit_test(test_writer_skip_by_shape),
		cmocka_unit_test(test_resume_header_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
