// SPDX-License-Identifier: GPL-2.0
/*
 * Send stream reader and writer: round trips, and malformed streams that
 * must each give an error naming the offset of the bad command.
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
#include "dump_stream.h"
#include "stream/stream.h"

struct seen {
	int subvol, mkfile, write, encoded_write, end, set_xattr;
	char path[PATH_MAX];
	size_t data_len;
	uint64_t offset;
	struct stream_encoded_write ew;
};

static int on_subvol(const char *path, const uint8_t *uuid, uint64_t ctransid,
		     void *arg)
{
	struct seen *s = arg;

	(void)uuid;
	(void)ctransid;
	s->subvol++;
	snprintf(s->path, sizeof(s->path), "%s", path);
	return 0;
}

static int on_mkfile(const char *path, void *arg)
{
	struct seen *s = arg;

	s->mkfile++;
	snprintf(s->path, sizeof(s->path), "%s", path);
	return 0;
}

static int on_write(const char *path, uint64_t offset, const void *data,
		    size_t len, void *arg)
{
	struct seen *s = arg;

	(void)path;
	(void)data;
	s->write++;
	s->offset = offset;
	s->data_len = len;
	return 0;
}

static int on_encoded_write(const char *path,
			    const struct stream_encoded_write *ew, void *arg)
{
	struct seen *s = arg;

	(void)path;
	s->encoded_write++;
	s->ew = *ew;
	return 0;
}

static int on_set_xattr(const char *path, const char *name, const void *data,
			size_t len, void *arg)
{
	struct seen *s = arg;

	(void)path;
	(void)name;
	(void)data;
	s->set_xattr++;
	s->data_len = len;
	return 0;
}

static int on_end(void *arg)
{
	((struct seen *)arg)->end++;
	return 0;
}

static const struct stream_ops ops = {
	.subvol = on_subvol,
	.mkfile = on_mkfile,
	.write = on_write,
	.encoded_write = on_encoded_write,
	.set_xattr = on_set_xattr,
	.end = on_end,
};

static const uint8_t uuid[16] = { 1, 2,	 3,  4,	 5,  6,	 7,  8,
				  9, 10, 11, 12, 13, 14, 15, 16 };

/* Where the writer is in its stream: what it wrote, and what it holds. */
static size_t stream_offset(const struct stream_writer *w)
{
	return (size_t)(w->written + w->len);
}

/* A small valid stream; returns a memfd positioned at 0. */
static int make_stream(uint32_t version, size_t *cmd_offsets, size_t *len)
{
	static unsigned char payload[131072];
	struct stream_writer w;
	int fd = memfd_create("stream", 0);
	size_t n = 0;

	assert_true(fd >= 0);
	memset(payload, 0x5a, sizeof(payload));
	assert_int_equal(stream_writer_init(&w, fd, version), 0);

	cmd_offsets[n++] = stream_offset(&w);
	stream_begin_cmd(&w, BTRFS_SEND_C_SUBVOL);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "subv");
	stream_put_uuid(&w, BTRFS_SEND_A_UUID, uuid);
	stream_put_u64(&w, BTRFS_SEND_A_CTRANSID, 7);
	assert_int_equal(stream_end_cmd(&w), 0);

	cmd_offsets[n++] = stream_offset(&w);
	stream_begin_cmd(&w, BTRFS_SEND_C_MKFILE);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "dir/file");
	stream_put_u64(&w, BTRFS_SEND_A_INO, 257);
	assert_int_equal(stream_end_cmd(&w), 0);

	cmd_offsets[n++] = stream_offset(&w);
	stream_begin_cmd(&w, BTRFS_SEND_C_WRITE);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "dir/file");
	stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, 4096);
	stream_put_data(&w, payload, version >= 2 ? sizeof(payload) : 49152);
	assert_int_equal(stream_end_cmd(&w), 0);

	if (version >= 2) {
		cmd_offsets[n++] = stream_offset(&w);
		stream_begin_cmd(&w, BTRFS_SEND_C_ENCODED_WRITE);
		stream_put_string(&w, BTRFS_SEND_A_PATH, "dir/file");
		stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, 0);
		stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_FILE_LEN, 131072);
		stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_LEN, 131072);
		stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_OFFSET, 0);
		stream_put_u32(&w, BTRFS_SEND_A_COMPRESSION,
			       BTRFS_ENCODED_IO_COMPRESSION_ZSTD);
		stream_put_u32(&w, BTRFS_SEND_A_ENCRYPTION, 0);
		stream_put_data(&w, payload, 4096);
		assert_int_equal(stream_end_cmd(&w), 0);
	}

	cmd_offsets[n++] = stream_offset(&w);
	stream_begin_cmd(&w, BTRFS_SEND_C_END);
	assert_int_equal(stream_end_cmd(&w), 0);
	*len = stream_offset(&w);
	assert_int_equal(stream_writer_finish(&w), 0);
	stream_writer_release(&w);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int process(int fd, struct seen *s, struct encio_error *e)
{
	struct stream_reader r;
	int ret;

	memset(s, 0, sizeof(*s));
	lseek(fd, 0, SEEK_SET);
	ret = stream_reader_init(&r, fd, "test", e);
	if (!ret)
		ret = stream_process(&r, &ops, s, e);
	stream_reader_release(&r);
	return ret;
}

static void poke(int fd, size_t offset, const void *bytes, size_t len)
{
	assert_int_equal(pwrite(fd, bytes, len, offset), (ssize_t)len);
}

/* Rewrite the crc of the command at @cmd so only the intended damage shows. */
static void fix_crc(int fd, size_t cmd)
{
	unsigned char hdr[BTRFS_SEND_CMD_HEADER_LEN], *buf;
	uint32_t len, crc;

	assert_int_equal(pread(fd, hdr, sizeof(hdr), cmd),
			 (ssize_t)sizeof(hdr));
	memcpy(&len, hdr, 4);
	len = le32toh(len);
	buf = malloc(BTRFS_SEND_CMD_HEADER_LEN + len);
	assert_int_equal(pread(fd, buf, BTRFS_SEND_CMD_HEADER_LEN + len, cmd),
			 (ssize_t)(BTRFS_SEND_CMD_HEADER_LEN + len));
	memset(buf + 6, 0, 4);
	crc = htole32(crc32c(0, buf, BTRFS_SEND_CMD_HEADER_LEN + len));
	poke(fd, cmd + 6, &crc, 4);
	free(buf);
}

static void test_crc32c_vectors(void **state)
{
	(void)state;
	/* The raw update with seed 0: ~crc32c_std(~0 seed) relation. */
	assert_int_equal(crc32c(0, "", 0), 0);
	assert_int_equal(crc32c(~0u, "123456789", 9) ^ ~0u, 0xE3069283);
}

/* Whole buffers (three lanes joined) agree with byte-by-byte updates. */
static void test_crc32c_lanes(void **state)
{
	static unsigned char buf[50000];
	uint32_t whole, pieces, seed;
	size_t i, len, off;

	(void)state;
	srand(7);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = rand();
	for (i = 0; i < 300; i++) {
		len = i < 20 ? 3 * 1024 * (i / 2) + i % 2 :
			       (size_t)rand() % 40000;
		off = (size_t)rand() % (sizeof(buf) - len);
		seed = i % 3 ? (uint32_t)rand() : 0;
		whole = crc32c(seed, buf + off, len);
		pieces = seed;
		for (size_t j = 0; j < len; j++)
			pieces = crc32c(pieces, buf + off + j, 1);
		assert_int_equal(whole, pieces);
	}
}

static void test_round_trip_v1_v2(void **state)
{
	size_t offs[8], len;
	struct encio_error e;
	struct seen s;
	int fd;

	(void)state;
	fd = make_stream(1, offs, &len);
	assert_int_equal(process(fd, &s, &e), 0);
	assert_int_equal(s.subvol, 1);
	assert_int_equal(s.mkfile, 1);
	assert_int_equal(s.write, 1);
	assert_int_equal(s.data_len, 49152);
	assert_int_equal(s.end, 1);
	close(fd);

	fd = make_stream(2, offs, &len);
	assert_int_equal(process(fd, &s, &e), 0);
	assert_int_equal(s.write, 1);
	assert_int_equal(s.data_len, 131072);
	assert_int_equal(s.offset, 4096);
	assert_int_equal(s.encoded_write, 1);
	assert_int_equal(s.ew.len, 4096);
	assert_int_equal(s.ew.unencoded_len, 131072);
	assert_int_equal(s.ew.compression, BTRFS_ENCODED_IO_COMPRESSION_ZSTD);
	close(fd);
}

static void expect_error(int fd, int err, uint64_t offset)
{
	struct encio_error e;
	struct seen s;

	assert_int_equal(process(fd, &s, &e), -err);
	assert_true(e.has_offset);
	assert_int_equal(e.offset, offset);
}

static void test_bad_crc(void **state)
{
	size_t offs[8], len;
	unsigned char x = 0xff;
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	poke(fd, offs[1] + BTRFS_SEND_CMD_HEADER_LEN + 6, &x, 1);
	expect_error(fd, EBADMSG, offs[1]);
	close(fd);
}

static void test_truncated_everywhere(void **state)
{
	size_t offs[8], len, cut;
	struct encio_error e;
	struct seen s;
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	for (cut = 1; cut < len; cut += cut < 200 ? 1 : 997) {
		assert_int_equal(ftruncate(fd, cut), 0);
		/* Even a cut between commands: the END command is missing. */
		assert_true(process(fd, &s, &e) < 0);
		assert_true(e.offset <= cut);
		close(fd);
		fd = make_stream(2, offs, &len);
	}
	close(fd);
}

static void test_length_past_limit(void **state)
{
	size_t offs[8], len;
	uint32_t huge = htole32(STREAM_MAX_CMD_LEN + 1);
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	poke(fd, offs[2], &huge, 4);
	expect_error(fd, EMSGSIZE, offs[2]);
	close(fd);
}

/* Stack that dump_stream()'s reader used, written over. */
static void __attribute__((noinline)) scribble_stack(void)
{
	volatile char junk[16384];
	size_t i;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = '#';
}

static void test_dump_error_outlives_reader(void **state)
{
	size_t offs[8], len;
	uint16_t type = htole16(BTRFS_SEND_A_UUID);
	struct encio_error e = { 0 };
	FILE *out = fopen("/dev/null", "w");
	int fd;

	(void)state;
	assert_non_null(out);
	/* A parse error, whose words the reader builds in its own buffer. */
	fd = make_stream(2, offs, &len);
	poke(fd, offs[0] + BTRFS_SEND_CMD_HEADER_LEN + 4 + 4 + 4 + 16, &type,
	     2);
	fix_crc(fd, offs[0]);
	assert_int_equal(dump_stream(fd, "s", out, &e), -EBADMSG);
	scribble_stack();
	assert_non_null(e.op);
	assert_non_null(strstr(e.op, "parse subvol"));
	close(fd);
	fclose(out);
}

static void test_unknown_command(void **state)
{
	size_t offs[8], len;
	uint16_t type = htole16(99);
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	poke(fd, offs[1] + 4, &type, 2);
	fix_crc(fd, offs[1]);
	expect_error(fd, EBADMSG, offs[1]);
	close(fd);
}

static void test_attribute_past_command(void **state)
{
	size_t offs[8], len;
	uint16_t tlv_len = htole16(60000);
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	/* The PATH attribute of mkfile claims more bytes than the command. */
	poke(fd, offs[1] + BTRFS_SEND_CMD_HEADER_LEN + 2, &tlv_len, 2);
	fix_crc(fd, offs[1]);
	expect_error(fd, EBADMSG, offs[1]);
	close(fd);
}

static void test_wrong_attribute_size(void **state)
{
	size_t offs[8], len;
	uint16_t type = htole16(BTRFS_SEND_A_UUID);
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	/* The subvol's CTRANSID relabelled as a second UUID: 8 bytes where a
	 * UUID needs 16. */
	poke(fd, offs[0] + BTRFS_SEND_CMD_HEADER_LEN + 4 + 4 + 4 + 16, &type,
	     2);
	fix_crc(fd, offs[0]);
	expect_error(fd, EBADMSG, offs[0]);
	close(fd);
}

static void test_missing_attribute(void **state)
{
	size_t offs[8], len;
	uint16_t type = htole16(BTRFS_SEND_A_CLONE_OFFSET);
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	/* write's FILE_OFFSET renamed: the required attribute is gone. */
	poke(fd, offs[2] + BTRFS_SEND_CMD_HEADER_LEN + 4 + 8, &type, 2);
	fix_crc(fd, offs[2]);
	expect_error(fd, EBADMSG, offs[2]);
	close(fd);
}

static void test_nul_in_path(void **state)
{
	size_t offs[8], len;
	unsigned char nul = 0;
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	poke(fd, offs[1] + BTRFS_SEND_CMD_HEADER_LEN + 4 + 3, &nul, 1);
	fix_crc(fd, offs[1]);
	expect_error(fd, EBADMSG, offs[1]);
	close(fd);
}

/* Offset of the u64/u32 value of attribute number @n (0-based) in encoded_write. */
static size_t ew_attr(size_t cmd, int n)
{
	size_t off = cmd + BTRFS_SEND_CMD_HEADER_LEN + 4 + strlen("dir/file");
	int i;

	for (i = 0; i < n; i++)
		off += 4 + (i < 4 ? 8 : 4);
	return off + 4;
}

static void test_encoded_write_sizes(void **state)
{
	static const struct {
		int attr;
		uint64_t value;
	} bad[] = {
		{ 4, 8 },	      /* compression out of range */
		{ 5, 1 },	      /* encryption out of range */
		{ 2, 262144 },	      /* unencoded_len past 128 KiB */
		{ 3, 131072 + 4096 }, /* unencoded_offset past unencoded_len */
		{ 1, 0 },	      /* empty range */
	};
	size_t offs[8], len, i;
	int fd;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v64 = htole64(bad[i].value);
		uint32_t v32 = htole32((uint32_t)bad[i].value);

		fd = make_stream(2, offs, &len);
		if (bad[i].attr >= 4)
			poke(fd, ew_attr(offs[3], bad[i].attr), &v32, 4);
		else
			poke(fd, ew_attr(offs[3], bad[i].attr), &v64, 8);
		fix_crc(fd, offs[3]);
		expect_error(fd, EBADMSG, offs[3]);
		close(fd);
	}
}

static void test_bad_magic_and_version(void **state)
{
	size_t offs[8], len;
	uint32_t v = htole32(9);
	struct encio_error e;
	struct seen s;
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	poke(fd, 0, "x", 1);
	assert_int_equal(process(fd, &s, &e), -EBADMSG);
	close(fd);
	fd = make_stream(2, offs, &len);
	poke(fd, BTRFS_SEND_STREAM_MAGIC_LEN, &v, 4);
	assert_int_equal(process(fd, &s, &e), -EPROTONOSUPPORT);
	close(fd);
}

static void test_concatenated_streams(void **state)
{
	size_t offs[8], len;
	unsigned char *buf;
	struct encio_error e;
	struct seen s;
	int fd;

	(void)state;
	fd = make_stream(2, offs, &len);
	buf = malloc(len);
	assert_int_equal(pread(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(pwrite(fd, buf, len, len), (ssize_t)len);
	free(buf);
	assert_int_equal(process(fd, &s, &e), 0);
	assert_int_equal(s.subvol, 2);
	assert_int_equal(s.end, 2);
	close(fd);
}

/* Bare headers one after another are read in a loop, not one call each. */
static void test_many_concatenated_headers(void **state)
{
	enum { HEADERS = 200000 };
	size_t offs[8], len, hdr_len = BTRFS_SEND_STREAM_HEADER_LEN;
	unsigned char *buf;
	struct encio_error e;
	struct seen s;
	int fd;
	size_t i;

	(void)state;
	fd = make_stream(2, offs, &len);
	buf = malloc(HEADERS * hdr_len + len);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf + HEADERS * hdr_len, len, 0),
			 (ssize_t)len);
	for (i = 0; i < HEADERS; i++)
		memcpy(buf + i * hdr_len, buf + HEADERS * hdr_len, hdr_len);
	assert_int_equal(pwrite(fd, buf, HEADERS * hdr_len + len, 0),
			 (ssize_t)(HEADERS * hdr_len + len));
	free(buf);
	assert_int_equal(process(fd, &s, &e), 0);
	assert_int_equal(s.subvol, 1);
	assert_int_equal(s.end, 1);
	close(fd);
}

/*
 * Every command read and put again (stream_put_cmd) gives the stream
 * byte for byte, crc32c included; two of them, the second after
 * stream_put_header(), their concatenation.
 */
static void test_reframe_identical(void **state)
{
	size_t offs[8], len, copy_len;
	unsigned char *orig, *copy;
	struct stream_writer w;
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error e;
	uint32_t version;
	int fd, out, pass, ret;

	(void)state;
	for (version = 1; version <= 2; version++) {
		fd = make_stream(version, offs, &len);
		out = memfd_create("copy", 0);
		assert_true(out >= 0);
		assert_int_equal(stream_writer_init(&w, out, version), 0);
		for (pass = 0; pass < 2; pass++) {
			if (pass)
				stream_put_header(&w);
			lseek(fd, 0, SEEK_SET);
			assert_int_equal(stream_reader_init(&r, fd, "test", &e),
					 0);
			while ((ret = stream_read_cmd(&r, &cmd, &e)) > 0)
				assert_int_equal(stream_put_cmd(&w, &cmd), 0);
			assert_int_equal(ret, 0);
			stream_reader_release(&r);
		}
		assert_int_equal(stream_writer_finish(&w), 0);
		copy_len = w.written;
		stream_writer_release(&w);
		assert_int_equal(copy_len, 2 * len);
		orig = malloc(len);
		copy = malloc(copy_len);
		assert_int_equal(pread(fd, orig, len, 0), (ssize_t)len);
		assert_int_equal(pread(out, copy, copy_len, 0),
				 (ssize_t)copy_len);
		assert_memory_equal(copy, orig, len);
		assert_memory_equal(copy + len, orig, len);
		free(orig);
		free(copy);
		close(out);
		close(fd);
	}
}

/*
 * A reader of the stream as it comes gets a subvolume's first command at
 * once, and the rest every 256 KiB, not when 4 MiB are held.
 */
static void test_writer_hands_on_early(void **state)
{
	static unsigned char payload[65536];
	struct stream_writer w;
	int fd = memfd_create("early", 0), i;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(stream_writer_init(&w, fd, 2), 0);
	stream_begin_cmd(&w, BTRFS_SEND_C_SNAPSHOT);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "snap");
	assert_int_equal(stream_end_cmd(&w), 0);
	assert_int_equal(w.len, 0);
	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)w.written);
	stream_begin_cmd(&w, BTRFS_SEND_C_MKFILE);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "f");
	assert_int_equal(stream_end_cmd(&w), 0);
	assert_true(w.len > 0);
	for (i = 0; w.len && i < 8; i++) {
		stream_begin_cmd(&w, BTRFS_SEND_C_WRITE);
		stream_put_string(&w, BTRFS_SEND_A_PATH, "f");
		stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET,
			       i * sizeof(payload));
		stream_put_data(&w, payload, sizeof(payload));
		assert_int_equal(stream_end_cmd(&w), 0);
	}
	assert_int_equal(w.len, 0);
	assert_int_equal(i, 4);
	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)w.written);
	stream_writer_release(&w);
	close(fd);
}

/*
 * A stream of a SUBVOL command, with the writer's total if it has one, and
 * END; that command read into @cmd by @r.
 */
static int subvol_stream(uint64_t total, struct stream_cmd *cmd,
			 struct stream_reader *r)
{
	struct stream_writer w;
	struct encio_error e;
	int fd = memfd_create("stream", 0);

	assert_true(fd >= 0);
	assert_int_equal(stream_writer_init(&w, fd, 2), 0);
	w.total = total;
	stream_begin_cmd(&w, BTRFS_SEND_C_SUBVOL);
	stream_put_string(&w, BTRFS_SEND_A_PATH, "subv");
	stream_put_uuid(&w, BTRFS_SEND_A_UUID, uuid);
	stream_put_u64(&w, BTRFS_SEND_A_CTRANSID, 7);
	stream_put_total(&w);
	assert_int_equal(stream_end_cmd(&w), 0);
	assert_int_equal(w.total, 0);
	stream_begin_cmd(&w, BTRFS_SEND_C_END);
	assert_int_equal(stream_end_cmd(&w), 0);
	assert_int_equal(stream_writer_finish(&w), 0);
	stream_writer_release(&w);
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(stream_reader_init(r, fd, "test", &e), 0);
	assert_int_equal(stream_read_cmd(r, cmd, &e), 1);
	return fd;
}

/*
 * The sender's total: read back, and stripped to give the length and
 * crc32c of the same command written without it (what a resume point
 * fingerprints).
 */
static void test_sender_total(void **state)
{
	struct stream_reader r1, r2;
	struct stream_cmd with, without;
	struct encio_error e;
	uint32_t len, crc;
	struct seen s;
	int fd1, fd2;

	(void)state;
	fd1 = subvol_stream(123456789, &with, &r1);
	fd2 = subvol_stream(0, &without, &r2);
	assert_int_equal(with.len, without.len + STREAM_TOTAL_ATTR_LEN);
	stream_cmd_without_total(&with, &len, &crc);
	assert_int_equal(len, without.len);
	assert_int_equal(crc, without.crc);
	stream_cmd_without_total(&without, &len, &crc);
	assert_int_equal(len, without.len);
	assert_int_equal(crc, without.crc);
	stream_reader_release(&r1);
	stream_reader_release(&r2);

	memset(&s, 0, sizeof(s));
	lseek(fd1, 0, SEEK_SET);
	assert_int_equal(stream_reader_init(&r1, fd1, "test", &e), 0);
	assert_int_equal(stream_process(&r1, &ops, &s, &e), 0);
	assert_int_equal(s.subvol, 1);
	assert_string_equal(s.path, "subv");
	assert_int_equal(r1.sender_total, 123456789);
	stream_reader_release(&r1);
	lseek(fd2, 0, SEEK_SET);
	assert_int_equal(stream_reader_init(&r2, fd2, "test", &e), 0);
	assert_int_equal(stream_process(&r2, &ops, &s, &e), 0);
	assert_int_equal(r2.sender_total, 0);
	stream_reader_release(&r2);
	close(fd1);
	close(fd2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_vectors),
		cmocka_unit_test(test_crc32c_lanes),
		cmocka_unit_test(test_round_trip_v1_v2),
		cmocka_unit_test(test_bad_crc),
		cmocka_unit_test(test_truncated_everywhere),
		cmocka_unit_test(test_length_past_limit),
		cmocka_unit_test(test_dump_error_outlives_reader),
		cmocka_unit_test(test_unknown_command),
		cmocka_unit_test(test_attribute_past_command),
		cmocka_unit_test(test_wrong_attribute_size),
		cmocka_unit_test(test_missing_attribute),
		cmocka_unit_test(test_nul_in_path),
		cmocka_unit_test(test_encoded_write_sizes),
		cmocka_unit_test(test_bad_magic_and_version),
		cmocka_unit_test(test_concatenated_streams),
		cmocka_unit_test(test_many_concatenated_headers),
		cmocka_unit_test(test_reframe_identical),
		cmocka_unit_test(test_writer_hands_on_early),
		cmocka_unit_test(test_sender_total),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
