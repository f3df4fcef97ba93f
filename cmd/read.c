// SPDX-License-Identifier: GPL-2.0
/*
 * encio read: one encoded read, raw bytes out, parameters beside them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "io/engine.h"
#include "fs/extents.h"
#include "commands.h"
#include "json.h"

static const char *const read_usage[] = {
	"encio read [-o OFFSET] [-O OUT] [-b SIZE] [-v|-q] [--format=text|json] FILE",
	"Issue one encoded read and output the raw encoded bytes.",
	"",
	"One BTRFS_IOC_ENCODED_READ at OFFSET through the --io mode (auto: the",
	"mode the probe chooses for reading FILE). The raw bytes the kernel",
	"returns go to OUT or standard output; the parameters it returns (len,",
	"unencoded_len, unencoded_offset, compression, encryption, bytes) go to",
	"standard error, or to standard output when -O is given. A kernel error",
	"is reported by errno name and message, with exit status 1. Raw bytes",
	"are not written to a terminal: give -O or a pipe.",
	"",
	"-o|--offset OFFSET  file offset to read at (default 0)",
	"-O|--output OUT     write the encoded bytes to OUT (created or truncated)",
	"-b|--buffer SIZE    buffer size (default 128K); smaller ones provoke ENOBUFS",
	"--format=FORMAT     parameters as text (default) or json",
	"-v|--verbose, -q|--quiet  as the global options (no effect here)",
	"-h|--help           print this help",
	NULL
};

void print_encoded_params(FILE *out, bool json, uint64_t offset,
			  const struct btrfs_ioctl_encoded_io_args *a,
			  uint64_t bytes, enum encio_io_mode mode)
{
	const char *name = codec_name(a->compression);
	struct json_writer w;
	char num[16];

	if (!name) {
		snprintf(num, sizeof(num), "%u", a->compression);
		name = num;
	}
	if (json) {
		json_init(&w, out, 0);
		json_object_begin(&w, NULL);
		json_u64(&w, "offset", offset);
		json_u64(&w, "len", a->len);
		json_u64(&w, "unencoded_len", a->unencoded_len);
		json_u64(&w, "unencoded_offset", a->unencoded_offset);
		json_u64(&w, "compression", a->compression);
		json_string(&w, "compression_name", name);
		json_u64(&w, "encryption", a->encryption);
		json_u64(&w, "bytes", bytes);
		json_string(&w, "io", encio_io_mode_name(mode));
		json_object_end(&w);
	} else
		fprintf(out,
			"offset=%" PRIu64 " len=%llu unencoded_len=%llu "
			"unencoded_offset=%llu compression=%s encryption=%u "
			"bytes=%" PRIu64 " io=%s\n",
			offset, (unsigned long long)a->len,
			(unsigned long long)a->unencoded_len,
			(unsigned long long)a->unencoded_offset, name,
			a->encryption, bytes, encio_io_mode_name(mode));
}

void print_kernel_error(const char *op, const char *path, uint64_t offset,
			enum encio_io_mode mode, int err)
{
	print_error("%s '%s' at offset %" PRIu64 " (%s): %s (%s)", op, path,
		    offset, encio_io_mode_name(mode), errno_name(err),
		    strerror(err));
}

struct read_opts {
	uint64_t offset;
	uint64_t bufsize;
	const char *out;
	int json;
	const char *path;
};

static int parse_read_options(const struct cmd_struct *cmd, int argc,
			      char **argv, struct read_opts *o)
{
	static const struct option long_options[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "output", required_argument, NULL, 'O' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	int c;

	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "o:O:b:",
				long_options, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (parse_size(optarg, &o->offset))
				return usage_error(cmd, "bad offset '%s'",
						   optarg);
			break;
		case 'O':
			o->out = optarg;
			break;
		case 'b':
			if (parse_size(optarg, &o->bufsize) ||
			    o->bufsize < 16 ||
			    o->bufsize > 16 * ENGINE_SLOT_SIZE)
				return usage_error(cmd,
						   "buffer size must be 16..%d",
						   16 * ENGINE_SLOT_SIZE);
			break;
		default:
			if (common_option(cmd, c, &o->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (argc - optind != 1)
		return usage_error(cmd, "need exactly one FILE");
	o->path = argv[optind];
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= n;
	}
	return 0;
}

static int emit(const struct read_opts *o, const void *buf, size_t len)
{
	int fd = STDOUT_FILENO, ret;

	if (o->out) {
		fd = open(o->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0644);
		if (fd < 0) {
			print_error("cannot create '%s': %m", o->out);
			return 1;
		}
	}
	ret = write_all(fd, buf, len);
	if (o->out && close(fd) && !ret)
		ret = -errno;
	if (ret) {
		print_error("cannot write '%s': %s", o->out ? o->out : "stdout",
			    strerror(-ret));
		return 1;
	}
	return 0;
}

/* auto: the probe's choice; where it found none, the ioctl, so the real
 * request reports the kernel's error. */
enum encio_io_mode rawio_choose(enum encio_io_mode chosen)
{
	if (global_opts.io_mode != ENCIO_IO_AUTO)
		return global_opts.io_mode;
	return chosen == ENCIO_IO_NONE ? ENCIO_IO_IOCTL : chosen;
}

static int do_read(struct engine *engine, int fd, const struct read_opts *o)
{
	struct encio_probe probe;
	struct engine_req *req;
	enum encio_io_mode mode = ENCIO_IO_NONE;
	ssize_t res;
	int ret;

	if (global_opts.io_mode == ENCIO_IO_AUTO) {
		engine_probe_read(engine, fd, ENCIO_IO_AUTO, &probe);
		mode = probe.read_mode;
	}
	mode = rawio_choose(mode);
	req = engine_get_req(engine);
	engine_encoded_read(engine, req, mode, fd, o->offset);
	res = engine_wait(engine, req);
	if (res < 0) {
		print_kernel_error("encoded read of", o->path, o->offset, mode,
				   -res);
		ret = 1;
		goto out;
	}
	ret = emit(o, engine_req_buf(engine, req), res);
	if (!ret)
		print_encoded_params(o->out ? stdout : stderr, o->json,
				     o->offset, &req->args, res, mode);
out:
	engine_put_req(engine, req);
	return ret;
}

static int cmd_read(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct read_opts o = { .bufsize = ENGINE_SLOT_SIZE };
	struct engine_config config = { .depth = 1, .force_backing = -1 };
	struct engine engine;
	int fd, ret;

	ret = parse_read_options(cmd, argc, argv, &o);
	if (ret)
		return ret;
	if (!o.out && isatty(STDOUT_FILENO)) {
		print_error(
			"not writing encoded bytes to a terminal: use -O or a pipe");
		return 1;
	}
	fd = open_regular(o.path, O_RDONLY, 0, NULL);
	if (fd < 0) {
		print_error("cannot open '%s': %s", o.path,
			    open_regular_error(fd));
		return 1;
	}
	config.slot_size = o.bufsize;
	ret = engine_init(&engine, &config);
	if (ret) {
		print_error("cannot set up the I/O engine: %s", strerror(-ret));
		close(fd);
		return 1;
	}
	ret = do_read(&engine, fd, &o);
	engine_release(&engine);
	close(fd);
	return ret;
}

const struct cmd_struct cmd_struct_read = { "read", cmd_read, read_usage };
