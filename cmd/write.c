// SPDX-License-Identifier: GPL-2.0
/*
 * encio write: one encoded write with exactly the parameters given.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "codec/codec.h"
#include "io/engine.h"
#include "fs/extents.h"
#include "commands.h"

/* More than any valid extent, so the kernel can refuse oversized data. */
#define WRITE_MAX_DATA (1024 * 1024)

static const char *const write_usage[] = {
	"encio write -o OFFSET -c ALG -u UNENC_LEN [-U UNENC_OFF] [-l LEN] [-v|-q] [--format=text|json] FILE < DATA",
	"Issue one encoded write with exactly the given parameters.",
	"",
	"Reads the encoded bytes from standard input (at most 1 MiB) and issues",
	"one BTRFS_IOC_ENCODED_WRITE into FILE (created if missing) through",
	"the --io mode (auto: the mode the probe chooses for writing there), then",
	"syncs FILE: the kernel reports errors of the data late. Nothing is",
	"checked before the kernel sees it: a kernel error is reported by errno",
	"name and message, with exit status 1. On success the parameters are",
	"printed on standard output, as encio read prints them.",
	"",
	"-o|--offset OFFSET          file offset (required)",
	"-c|--compression ALG        zlib, zstd, lzo (lzo with the sector size),",
	"                            lzo4k..lzo64k, none, or a number (required)",
	"-u|--unencoded-len LEN      unencoded length of the extent (required)",
	"-U|--unencoded-offset OFF   where the file range starts in the extent",
	"                            (default 0)",
	"-l|--len LEN                file bytes covered (default UNENC_LEN - UNENC_OFF)",
	"--format=FORMAT             parameters as text (default) or json",
	"-v|--verbose                as the global option (no effect here)",
	"-q|--quiet                  no parameter line (errors only)",
	"-h|--help                   print this help",
	NULL
};

struct write_opts {
	uint64_t offset, unencoded_len, unencoded_offset, len;
	const char *alg;
	bool has_offset, has_ulen, has_len;
	int json;
	const char *path;
};

static int parse_one(const struct cmd_struct *cmd, const char *arg,
		     uint64_t *value, bool *seen)
{
	if (parse_size(arg, value))
		return usage_error(cmd, "bad number '%s'", arg);
	if (seen)
		*seen = true;
	return 0;
}

static int parse_write_options(const struct cmd_struct *cmd, int argc,
			       char **argv, struct write_opts *o)
{
	static const struct option long_options[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "compression", required_argument, NULL, 'c' },
		{ "unencoded-len", required_argument, NULL, 'u' },
		{ "unencoded-offset", required_argument, NULL, 'U' },
		{ "len", required_argument, NULL, 'l' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	int c, ret = 0;

	while (!ret &&
	       (c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "o:c:u:U:l:",
				long_options, NULL)) != -1) {
		switch (c) {
		case 'o':
			ret = parse_one(cmd, optarg, &o->offset,
					&o->has_offset);
			break;
		case 'c':
			o->alg = optarg;
			break;
		case 'u':
			ret = parse_one(cmd, optarg, &o->unencoded_len,
					&o->has_ulen);
			break;
		case 'U':
			ret = parse_one(cmd, optarg, &o->unencoded_offset,
					NULL);
			break;
		case 'l':
			ret = parse_one(cmd, optarg, &o->len, &o->has_len);
			break;
		default:
			if (common_option(cmd, c, &o->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (ret)
		return ret;
	if (!o->has_offset || !o->alg || !o->has_ulen)
		return usage_error(cmd, "-o, -c and -u are required");
	if (argc - optind != 1)
		return usage_error(cmd, "need exactly one FILE");
	if (!o->has_len)
		o->len = o->unencoded_offset < o->unencoded_len ?
				 o->unencoded_len - o->unencoded_offset :
				 0;
	o->path = argv[optind];
	return 0;
}

/* All of standard input, up to WRITE_MAX_DATA + 1 bytes. */
static ssize_t read_stdin(char *buf)
{
	size_t len = 0;

	while (len <= WRITE_MAX_DATA) {
		ssize_t n =
			read(STDIN_FILENO, buf + len, WRITE_MAX_DATA + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += n;
	}
	return len;
}

static enum encio_io_mode choose_write_mode(struct engine *engine,
					    const char *path)
{
	char tmp[PATH_MAX];
	struct encio_probe probe;
	int dirfd;

	if (global_opts.io_mode != ENCIO_IO_AUTO)
		return global_opts.io_mode;
	snprintf(tmp, sizeof(tmp), "%s", path);
	dirfd = open(dirname(tmp), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return ENCIO_IO_IOCTL;
	engine_probe_write(engine, dirfd, ENCIO_IO_AUTO, &probe);
	close(dirfd);
	return rawio_choose(probe.write_mode);
}

static int do_write(struct engine *engine, int fd, const struct write_opts *o,
		    const char *data, size_t len, uint32_t compression)
{
	enum encio_io_mode mode = choose_write_mode(engine, o->path);
	struct engine_req *req = engine_get_req(engine);
	ssize_t res;

	memset(&req->args, 0, sizeof(req->args));
	req->args.len = o->len;
	req->args.unencoded_len = o->unencoded_len;
	req->args.unencoded_offset = o->unencoded_offset;
	req->args.compression = compression;
	memcpy(engine_req_buf(engine, req), data, len);
	engine_encoded_write(engine, req, mode, fd, o->offset, len);
	res = engine_wait(engine, req);
	if (res < 0) {
		print_kernel_error("encoded write to", o->path, o->offset, mode,
				   -res);
		engine_put_req(engine, req);
		return 1;
	}
	if (fsync(fd)) {
		print_kernel_error("sync after the encoded write to", o->path,
				   o->offset, mode, errno);
		engine_put_req(engine, req);
		return 1;
	}
	if (o->json || global_opts.verbose >= 0)
		print_encoded_params(stdout, o->json, o->offset, &req->args,
				     len, mode);
	engine_put_req(engine, req);
	return 0;
}

static int cmd_write(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct engine_config config = { .depth = 1, .force_backing = -1 };
	struct write_opts o = { 0 };
	struct engine engine;
	struct statfs sfs;
	uint32_t compression;
	char *data;
	ssize_t len;
	int fd, ret = 1;

	ret = parse_write_options(cmd, argc, argv, &o);
	if (ret)
		return ret;
	data = malloc(WRITE_MAX_DATA + 1);
	if (!data) {
		print_error("cannot read the data: %s", strerror(ENOMEM));
		return 1;
	}
	len = read_stdin(data);
	if (len < 0 || len > WRITE_MAX_DATA) {
		print_error("cannot read the data from standard input: %s",
			    len < 0 ? strerror(-len) : "more than 1 MiB");
		free(data);
		return 1;
	}
	fd = open_regular(o.path, O_WRONLY | O_CREAT, 0644, NULL);
	if (fd < 0) {
		print_error("cannot open '%s': %s", o.path,
			    open_regular_error(fd));
		free(data);
		return 1;
	}
	ret = 1;
	if (fstatfs(fd, &sfs)) {
		print_error("cannot statfs '%s': %m", o.path);
		goto out;
	}
	if (codec_parse(o.alg, sfs.f_bsize, &compression)) {
		ret = usage_error(cmd,
				  "unknown compression '%s' (sector size %lu)",
				  o.alg, (unsigned long)sfs.f_bsize);
		goto out;
	}
	/* A slot that holds the data: at least a page. */
	config.slot_size = len > 4096 ? ((size_t)len + 4095) / 4096 * 4096 :
					4096;
	ret = engine_init(&engine, &config);
	if (ret) {
		print_error("cannot set up the I/O engine: %s", strerror(-ret));
		ret = 1;
		goto out;
	}
	ret = do_write(&engine, fd, &o, data, len, compression);
	engine_release(&engine);
out:
	close(fd);
	free(data);
	return ret;
}

const struct cmd_struct cmd_struct_write = { "write", cmd_write, write_usage };
