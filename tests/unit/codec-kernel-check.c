// SPDX-License-Identifier: GPL-2.0
/*
 * codec-kernel-check [-d DIR] FILE...
 *
 * Reads every extent of each FILE (on btrfs) with BTRFS_IOC_ENCODED_READ,
 * decodes the compressed ones with codec_decode() and compares the file
 * range they hold with what pread() returns: encio's decoders against the
 * kernel's. With -d, also saves each compressed extent as DIR/NAME-N.bin and
 * appends a line to DIR/MANIFEST:
 *   NAME-N.bin COMPRESSION UNENCODED_LEN UNENCODED_OFFSET LEN CRC32
 * where CRC32 is zlib's crc32 of the LEN file bytes (the cmocka fixtures).
 *
 * Exit: 0 all good, 1 mismatch or error, 77 not root.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <zlib.h>

#include "codec/codec.h"
#include "base/kernel.h"

struct check {
	struct codec *codec;
	unsigned char *enc;   /* BTRFS_MAX_COMPRESSED */
	unsigned char *dec;   /* BTRFS_MAX_UNCOMPRESSED */
	unsigned char *plain; /* BTRFS_MAX_UNCOMPRESSED */
	const char *dump_dir;
	unsigned long extents, zlib, zstd, lzo, mismatches;
};

static int dump_extent(struct check *c, const char *path, int index,
		       const struct btrfs_ioctl_encoded_io_args *args,
		       size_t enc_len)
{
	char name[4096], *copy = strdup(path);
	FILE *f;
	int ret = -1;

	if (!copy)
		return -1;
	snprintf(name, sizeof(name), "%s/%s-%d.bin", c->dump_dir,
		 basename(copy), index);
	f = fopen(name, "w");
	if (!f || fwrite(c->enc, 1, enc_len, f) != enc_len)
		goto out;
	if (fclose(f))
		goto out_nofile;
	snprintf(name, sizeof(name), "%s/MANIFEST", c->dump_dir);
	f = fopen(name, "a");
	if (!f)
		goto out;
	fprintf(f, "%s-%d.bin %u %llu %llu %llu %08lx\n", basename(copy), index,
		args->compression, (unsigned long long)args->unencoded_len,
		(unsigned long long)args->unencoded_offset,
		(unsigned long long)args->len, crc32(0, c->plain, args->len));
	ret = 0;
out:
	if (f && fclose(f))
		ret = -1;
out_nofile:
	if (ret)
		fprintf(stderr, "%s: cannot dump: %m\n", name);
	free(copy);
	return ret;
}

static void count(struct check *c, int compression)
{
	c->extents++;
	if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZLIB)
		c->zlib++;
	else if (compression == BTRFS_ENCODED_IO_COMPRESSION_ZSTD)
		c->zstd++;
	else
		c->lzo++;
}

/* Returns 0 if the extent matches, 1 on a mismatch, -1 on an error. */
static int check_extent(struct check *c, int fd, const char *path,
			const struct btrfs_ioctl_encoded_io_args *args,
			size_t enc_len)
{
	unsigned long long off = args->offset;
	ssize_t dec, n;

	count(c, args->compression);
	if (args->unencoded_len > BTRFS_MAX_UNCOMPRESSED ||
	    args->unencoded_offset + args->len > args->unencoded_len) {
		printf("%s: offset %llu: bad extent: unencoded_len %llu unencoded_offset %llu len %llu\n",
		       path, off, (unsigned long long)args->unencoded_len,
		       (unsigned long long)args->unencoded_offset,
		       (unsigned long long)args->len);
		return 1;
	}
	n = pread(fd, c->plain, args->len, off);
	if (n != (ssize_t)args->len) {
		fprintf(stderr, "%s: offset %llu: pread: %s\n", path, off,
			n < 0 ? strerror(errno) : "short read");
		return -1;
	}
	dec = codec_decode(c->codec, args->compression, c->enc, enc_len, c->dec,
			   args->unencoded_len);
	if (dec < 0) {
		printf("%s: offset %llu: %s extent of %zu bytes: decode: %s\n",
		       path, off, codec_name(args->compression) ?: "unknown", enc_len,
		       strerror(-dec));
		return 1;
	}
	if (memcmp(c->dec + args->unencoded_offset, c->plain, args->len)) {
		printf("%s: offset %llu: %s extent of %zu bytes (decoded %zd, unencoded_offset %llu, len %llu): data differs\n",
		       path, off, codec_name(args->compression) ?: "unknown", enc_len, dec,
		       (unsigned long long)args->unencoded_offset,
		       (unsigned long long)args->len);
		return 1;
	}
	return 0;
}

static int check_file(struct check *c, const char *path)
{
	struct btrfs_ioctl_encoded_io_args args;
	struct iovec iov;
	unsigned long long off = 0;
	int fd, index = 0, ret = 0, r;
	long n;

	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "%s: %m\n", path);
		return -1;
	}
	for (;;) {
		memset(&args, 0, sizeof(args));
		iov.iov_base = c->enc;
		iov.iov_len = BTRFS_MAX_COMPRESSED;
		args.iov = &iov;
		args.iovcnt = 1;
		args.offset = off;
		n = ioctl(fd, BTRFS_IOC_ENCODED_READ, &args);
		if (n < 0) {
			fprintf(stderr, "%s: offset %llu: encoded read: %m\n",
				path, off);
			ret = -1;
			break;
		}
		if (n == 0)
			break;
		if (args.compression != BTRFS_ENCODED_IO_COMPRESSION_NONE) {
			r = check_extent(c, fd, path, &args, n);
			if (r < 0) {
				ret = -1;
				break;
			}
			c->mismatches += r;
			if (!r && c->dump_dir &&
			    dump_extent(c, path, index++, &args, n)) {
				ret = -1;
				break;
			}
		}
		off += args.len;
	}
	close(fd);
	return ret;
}

static int usage(void)
{
	fprintf(stderr, "usage: codec-kernel-check [-d DIR] FILE...\n");
	return 1;
}

int main(int argc, char **argv)
{
	struct check c = { 0 };
	int opt, i, err = 0;

	while ((opt = getopt(argc, argv, "d:")) != -1) {
		if (opt != 'd')
			return usage();
		c.dump_dir = optarg;
	}
	if (optind >= argc)
		return usage();
	if (geteuid() != 0) {
		fprintf(stderr,
			"codec-kernel-check: needs root (encoded reads need CAP_SYS_ADMIN)\n");
		return 77;
	}
	c.codec = codec_new();
	c.enc = malloc(BTRFS_MAX_COMPRESSED);
	c.dec = malloc(BTRFS_MAX_UNCOMPRESSED);
	c.plain = malloc(BTRFS_MAX_UNCOMPRESSED);
	if (!c.codec || !c.enc || !c.dec || !c.plain) {
		fprintf(stderr, "codec-kernel-check: out of memory\n");
		return 1;
	}
	for (i = optind; i < argc; i++)
		if (check_file(&c, argv[i]))
			err = 1;
	printf("%lu extents checked (zlib %lu, zstd %lu, lzo %lu), %lu mismatches\n",
	       c.extents, c.zlib, c.zstd, c.lzo, c.mismatches);
	codec_free(c.codec);
	free(c.enc);
	free(c.dec);
	free(c.plain);
	return err || c.mismatches ? 1 : 0;
}
