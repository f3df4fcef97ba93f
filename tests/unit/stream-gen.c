// SPDX-License-Identifier: GPL-2.0
/*
 * stream-gen: write a send stream described on standard input, one command
 * per line, to standard output, with the library's writer (so every crc32c
 * is right and only the content is hostile). For the receive tests.
 *
 *   version N                        (before any command; default 2)
 *   subvol NAME [UUID [CTRANSID]]
 *   snapshot NAME UUID PARENT_UUID [PARENT_CTRANSID]
 *   mkfile|mkdir|mkfifo|unlink|rmdir PATH
 *   symlink PATH TARGET     link PATH TARGET     rename FROM TO
 *   write PATH OFFSET TEXT  truncate PATH SIZE   chmod PATH OCTAL_MODE
 *   chown PATH UID GID
 *   set_xattr PATH NAME VALUE    enable_verity PATH (sha256, 4 KiB blocks)
 *   fileattr PATH FLAGS     (btrfs inode flags, as strtoull reads them)
 *   encoded PATH OFFSET FILE_LEN UNENCODED_LEN UNENCODED_OFFSET ALG PAYLOAD
 *   clone PATH OFFSET LEN CLONE_UUID CLONE_CTRANSID CLONE_PATH CLONE_OFFSET
 *   end
 *
 * PAYLOAD is how the data is made:
 *   good         encoded by the codec
 *   garbage      4 KiB of bytes that are no format's
 *   truncated    good, cut to its first half
 *   short        good, of an eighth of UNENCODED_LEN bytes
 *   bad-header   good, the second byte changed (zlib: FLG; zstd: the
 *                frame header descriptor; lzo: the total length)
 *   bad-lengths  good, the first lzo segment's length past the total
 *   bad-body     a valid zlib header, or zstd frame and block header,
 *                then garbage
 *   big-window   zstd: one raw block in a frame declaring a 1 MiB window
 *   big-content  zstd: a single-segment frame declaring twice
 *                UNENCODED_LEN as its content size
 *
 * A UUID is one byte repeated (0x42) or written out in full
 * (01234567-89ab-cdef-0123-456789abcdef); a CTRANSID defaults to 7.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "stream/stream.h"

#define MAX_ARGS 8

static struct stream_writer w;

static void die(const char *msg, const char *line)
{
	fprintf(stderr, "stream-gen: %s: %s\n", msg, line);
	exit(2);
}

static uint64_t num(const char *s)
{
	return strtoull(s, NULL, 0);
}

static void put_uuid(uint16_t attr, const char *s)
{
	uint8_t uuid[16];
	unsigned int byte;
	int i;

	if (strlen(s) != 36) {
		memset(uuid, (int)num(s), sizeof(uuid));
	} else {
		for (i = 0; i < 16; i++) {
			if (*s == '-')
				s++;
			if (sscanf(s, "%2x", &byte) != 1)
				die("bad UUID", s);
			uuid[i] = (uint8_t)byte;
			s += 2;
		}
	}
	stream_put_uuid(&w, attr, uuid);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* A zstd frame of one raw block of @in: @header then the block. */
static ssize_t zstd_raw_frame(const unsigned char *header, size_t header_len,
			      const unsigned char *in, size_t len,
			      unsigned char *out)
{
	/* Block header: last block, raw, its size. */
	uint32_t block = 1 | (uint32_t)len << 3;

	memcpy(out, header, header_len);
	out[header_len] = block;
	out[header_len + 1] = block >> 8;
	out[header_len + 2] = block >> 16;
	memcpy(out + header_len + 3, in, len);
	return header_len + 3 + len;
}

/* The size of the zstd frame header at @f (RFC 8878 3.1.1.1). */
static size_t zstd_header_len(const unsigned char *f)
{
	static const size_t did_len[] = { 0, 1, 2, 4 };
	static const size_t fcs_len[] = { 0, 2, 4, 8 };
	unsigned int fhd = f[4];
	bool single = fhd & 0x20;

	return 5 + !single + did_len[fhd & 3] +
	       (fhd >> 6 ? fcs_len[fhd >> 6] : single);
}

static ssize_t make_payload(const char *mode, int alg, unsigned char *in,
			    size_t ulen, unsigned char *out, size_t cap,
			    const char *line)
{
	/* Magic; FHD: no checksum, no dictionary; window 2^20 (exponent 10). */
	static const unsigned char big_window[] = { 0x28, 0xb5, 0x2f,
						    0xfd, 0x00, 10 << 3 };
	/* Magic; FHD: single segment, 4-byte content size (set below). */
	unsigned char big_content[] = {
		0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0
	};
	struct codec *codec = codec_new();
	ssize_t len;
	size_t i;

	if (!strcmp(mode, "garbage")) {
		for (i = 0; i < 4096; i++)
			out[i] = (unsigned char)(i * 37 + 11);
		len = 4096;
	} else if (!strcmp(mode, "big-window")) {
		len = zstd_raw_frame(big_window, sizeof(big_window), in, ulen,
				     out);
	} else if (!strcmp(mode, "big-content")) {
		put_le32(big_content + 5, 2 * ulen);
		len = zstd_raw_frame(big_content, sizeof(big_content), in, ulen,
				     out);
	} else {
		len = codec_encode(codec, alg, 0, in,
				   strcmp(mode, "short") ? ulen : ulen / 8, out,
				   cap);
		if (len < 4)
			die("encode failed", line);
		if (!strcmp(mode, "truncated"))
			len /= 2;
		else if (!strcmp(mode, "bad-header") && alg >= 3)
			put_le32(out, len + 4096);
		else if (!strcmp(mode, "bad-header"))
			out[alg == 2 ? 4 : 1] ^= alg == 2 ? 0x08 : 0x01;
		else if (!strcmp(mode, "bad-lengths"))
			put_le32(out + 4, len);
		else if (!strcmp(mode, "bad-body"))
			for (i = alg == 2 ? zstd_header_len(out) + 3 : 2;
			     i < (size_t)len; i++)
				out[i] = (unsigned char)(i * 37 + 11);
		else if (strcmp(mode, "good") && strcmp(mode, "short"))
			die("unknown payload", line);
	}
	codec_free(codec);
	return len;
}

static void encoded(char **a, int n, const char *line)
{
	static unsigned char in[BTRFS_MAX_UNCOMPRESSED],
		out[2 * BTRFS_MAX_UNCOMPRESSED];
	uint64_t ulen;
	ssize_t len;
	size_t i;

	if (n != 8)
		die("bad encoded", line);
	ulen = num(a[4]);
	if (ulen > sizeof(in))
		die("bad encoded", line);
	for (i = 0; i < ulen; i++)
		in[i] = "encio stream-gen "[i % 17];
	len = make_payload(a[7], (int)num(a[6]), in, ulen, out,
			   BTRFS_MAX_UNCOMPRESSED, line);
	stream_begin_cmd(&w, BTRFS_SEND_C_ENCODED_WRITE);
	stream_put_string(&w, BTRFS_SEND_A_PATH, a[1]);
	stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, num(a[2]));
	stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_FILE_LEN, num(a[3]));
	stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_LEN, ulen);
	stream_put_u64(&w, BTRFS_SEND_A_UNENCODED_OFFSET, num(a[5]));
	stream_put_u32(&w, BTRFS_SEND_A_COMPRESSION, (uint32_t)num(a[6]));
	stream_put_data(&w, out, len);
}

static void one_path(uint16_t cmd, char **a)
{
	stream_begin_cmd(&w, cmd);
	stream_put_string(&w, BTRFS_SEND_A_PATH, a[1]);
}

/* A new inode: btrfs receive wants its number, as btrfs send gives it. */
static void new_inode(uint16_t cmd, char **a)
{
	static uint64_t ino = 257;

	one_path(cmd, a);
	stream_put_u64(&w, BTRFS_SEND_A_INO, ino++);
}

static void command(char **a, int n, const char *line)
{
	const char *c = a[0];

	if (!strcmp(c, "subvol") && n >= 2 && n <= 4) {
		stream_begin_cmd(&w, BTRFS_SEND_C_SUBVOL);
		stream_put_string(&w, BTRFS_SEND_A_PATH, a[1]);
		put_uuid(BTRFS_SEND_A_UUID, n > 2 ? a[2] : "0x42");
		stream_put_u64(&w, BTRFS_SEND_A_CTRANSID,
			       n > 3 ? num(a[3]) : 7);
	} else if (!strcmp(c, "snapshot") && (n == 4 || n == 5)) {
		stream_begin_cmd(&w, BTRFS_SEND_C_SNAPSHOT);
		stream_put_string(&w, BTRFS_SEND_A_PATH, a[1]);
		put_uuid(BTRFS_SEND_A_UUID, a[2]);
		stream_put_u64(&w, BTRFS_SEND_A_CTRANSID, 8);
		put_uuid(BTRFS_SEND_A_CLONE_UUID, a[3]);
		stream_put_u64(&w, BTRFS_SEND_A_CLONE_CTRANSID,
			       n > 4 ? num(a[4]) : 7);
	} else if (!strcmp(c, "clone") && n == 8) {
		one_path(BTRFS_SEND_C_CLONE, a);
		stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, num(a[2]));
		stream_put_u64(&w, BTRFS_SEND_A_CLONE_LEN, num(a[3]));
		put_uuid(BTRFS_SEND_A_CLONE_UUID, a[4]);
		stream_put_u64(&w, BTRFS_SEND_A_CLONE_CTRANSID, num(a[5]));
		stream_put_string(&w, BTRFS_SEND_A_CLONE_PATH, a[6]);
		stream_put_u64(&w, BTRFS_SEND_A_CLONE_OFFSET, num(a[7]));
	} else if (!strcmp(c, "mkfile") && n == 2) {
		new_inode(BTRFS_SEND_C_MKFILE, a);
	} else if (!strcmp(c, "mkdir") && n == 2) {
		new_inode(BTRFS_SEND_C_MKDIR, a);
	} else if (!strcmp(c, "mkfifo") && n == 2) {
		new_inode(BTRFS_SEND_C_MKFIFO, a);
	} else if (!strcmp(c, "unlink") && n == 2) {
		one_path(BTRFS_SEND_C_UNLINK, a);
	} else if (!strcmp(c, "rmdir") && n == 2) {
		one_path(BTRFS_SEND_C_RMDIR, a);
	} else if (!strcmp(c, "symlink") && n == 3) {
		new_inode(BTRFS_SEND_C_SYMLINK, a);
		stream_put_string(&w, BTRFS_SEND_A_PATH_LINK, a[2]);
	} else if (!strcmp(c, "link") && n == 3) {
		one_path(BTRFS_SEND_C_LINK, a);
		stream_put_string(&w, BTRFS_SEND_A_PATH_LINK, a[2]);
	} else if (!strcmp(c, "rename") && n == 3) {
		one_path(BTRFS_SEND_C_RENAME, a);
		stream_put_string(&w, BTRFS_SEND_A_PATH_TO, a[2]);
	} else if (!strcmp(c, "write") && n == 4) {
		one_path(BTRFS_SEND_C_WRITE, a);
		stream_put_u64(&w, BTRFS_SEND_A_FILE_OFFSET, num(a[2]));
		stream_put_data(&w, a[3], strlen(a[3]));
	} else if (!strcmp(c, "truncate") && n == 3) {
		one_path(BTRFS_SEND_C_TRUNCATE, a);
		stream_put_u64(&w, BTRFS_SEND_A_SIZE, num(a[2]));
	} else if (!strcmp(c, "chmod") && n == 3) {
		one_path(BTRFS_SEND_C_CHMOD, a);
		stream_put_u64(&w, BTRFS_SEND_A_MODE, strtoull(a[2], NULL, 8));
	} else if (!strcmp(c, "chown") && n == 4) {
		one_path(BTRFS_SEND_C_CHOWN, a);
		stream_put_u64(&w, BTRFS_SEND_A_UID, strtoull(a[2], NULL, 10));
		stream_put_u64(&w, BTRFS_SEND_A_GID, strtoull(a[3], NULL, 10));
	} else if (!strcmp(c, "set_xattr") && n == 4) {
		one_path(BTRFS_SEND_C_SET_XATTR, a);
		stream_put_string(&w, BTRFS_SEND_A_XATTR_NAME, a[2]);
		stream_put_bytes(&w, BTRFS_SEND_A_XATTR_DATA, a[3],
				 strlen(a[3]));
	} else if (!strcmp(c, "fileattr") && n == 3) {
		one_path(BTRFS_SEND_C_FILEATTR, a);
		stream_put_u64(&w, BTRFS_SEND_A_FILEATTR, num(a[2]));
	} else if (!strcmp(c, "encoded")) {
		encoded(a, n, line);
	} else if (!strcmp(c, "enable_verity") && n == 2) {
		uint8_t sha256 = 1;

		one_path(BTRFS_SEND_C_ENABLE_VERITY, a);
		stream_put_bytes(&w, BTRFS_SEND_A_VERITY_ALGORITHM, &sha256, 1);
		stream_put_u32(&w, BTRFS_SEND_A_VERITY_BLOCK_SIZE, 4096);
	} else if (!strcmp(c, "end") && n == 1) {
		stream_begin_cmd(&w, BTRFS_SEND_C_END);
	} else {
		die("unknown command or wrong arguments", line);
	}
	if (stream_end_cmd(&w))
		die("cannot build", line);
}

int main(void)
{
	char line[4096], copy[4096], *a[MAX_ARGS], *tok, *save;
	bool started = false;
	int n;

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		memcpy(copy, line, sizeof(copy));
		n = 0;
		for (tok = strtok_r(copy, " ", &save); tok && n < MAX_ARGS;
		     tok = strtok_r(NULL, " ", &save))
			a[n++] = tok;
		if (!n || a[0][0] == '#')
			continue;
		if (!started && !strcmp(a[0], "version") && n == 2) {
			if (stream_writer_init(&w, STDOUT_FILENO, num(a[1])))
				die("no memory", line);
			started = true;
			continue;
		}
		if (!started && stream_writer_init(&w, STDOUT_FILENO, 2))
			die("no memory", line);
		started = true;
		command(a, n, line);
	}
	if (!started || stream_writer_finish(&w))
		die("cannot write", "stdout");
	stream_writer_release(&w);
	return 0;
}
