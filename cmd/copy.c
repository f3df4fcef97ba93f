// SPDX-License-Identifier: GPL-2.0
/*
 * encio copy: copy regular files, compressed extents kept encoded.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "../lib/copy.h"

static const char *const copy_usage[] = {
	"encio copy [options] SRC DEST | SRC... DIR",
	"Copy files, moving compressed extents without decompressing them.",
	"",
	"Compressed extents are read with encoded reads and written with encoded",
	"writes; where the destination cannot take them (not btrfs, sector size,",
	"no CAP_SYS_ADMIN) they are decoded and written plain. Holes, prealloc",
	"ranges, mode, owner and times are kept. Each file is written under a",
	"temporary name and renamed into place when complete.",
	"",
	"-d|--queue-depth QD  requests in flight (default 32)",
	"--format=text|json   summary format",
	"-h|--help            this help",
	NULL
};

struct copy_cmd {
	struct copy_ctx ctx;
	int json;
	double seconds;
	int failed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}


static void print_probe(const struct copy_ctx *ctx)
{
	const struct engine *engine = &ctx->engine;
	const struct encio_probe *p = &ctx->probe;
	char size[PRETTY_SIZE_LEN];
	int m;

	verbose(1,
		"buffers: %u slots of %zu KiB on %s, %s registered with io_uring",
		engine->pool.nr_slots, engine->pool.slot_size / 1024,
		bufpool_backing_name(engine->pool.backing),
		engine->buffers_registered ?
			pretty_size(size, engine->registered_bytes) :
			"none");
	verbose(1, "ring: %s%s", engine->ring ? "io_uring" : "unavailable",
		engine->defer_taskrun ? " with SINGLE_ISSUER|DEFER_TASKRUN" :
					"");
	for (m = ENCIO_IO_URING_FIXED; m <= ENCIO_IO_IOCTL; m++)
		verbose(1, "probe %-11s read: %-14s write: %s",
			encio_io_mode_name(m),
			p->read_err[m] < 0 ? "not tried" :
			p->read_err[m]	   ? strerror(p->read_err[m]) :
					     "works",
			p->write_err[m] < 0 ? "not tried" :
			p->write_err[m]	    ? strerror(p->write_err[m]) :
					      "works");
	verbose(1, "fixed buffers: %s", encio_fixed_state_desc(p->fixed));
	if (p->write_punted)
		verbose(1,
			"uring encoded writes run on io-wq workers: writing through ioctl");
	verbose(1, "chosen: read %s, write %s",
		encio_io_mode_name(p->read_mode),
		encio_io_mode_name(p->write_mode));
}

static void warn_probe(const struct encio_probe *p)
{
	if (p->read_mode == ENCIO_IO_NONE)
		warning("encoded reads impossible (%s): copying plain data",
			strerror(p->read_none_err));
	else if (p->write_mode == ENCIO_IO_NONE && p->write_none_err == ENOTTY)
		warning("the destination is not btrfs: decoding compressed extents in user space");
	else if (p->write_mode == ENCIO_IO_NONE && p->write_none_err != EROFS &&
		 p->write_none_err != EACCES)
		warning("encoded writes impossible on the destination (%s): decoding in user space",
			strerror(p->write_none_err));
}

static void print_summary_text(const struct copy_cmd *c)
{
	const struct copy_stats *s = &c->ctx.stats;
	const struct encio_probe *p = &c->ctx.probe;
	char logical[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN];

	printf("copied %llu file%s: %s logical, %s encoded; extents %llu encoded, %llu decoded, %llu plain ranges, %llu holes, %llu prealloc; io read %s, write %s (fixed buffers: %s); %.3fs, %s/s\n",
	       (unsigned long long)s->files, s->files == 1 ? "" : "s",
	       pretty_size(logical, s->logical_bytes),
	       pretty_size(encoded, s->encoded_bytes),
	       (unsigned long long)s->extents_encoded,
	       (unsigned long long)s->extents_decoded,
	       (unsigned long long)s->ranges_plain,
	       (unsigned long long)s->holes, (unsigned long long)s->prealloc,
	       encio_io_mode_name(p->read_mode),
	       encio_io_mode_name(p->write_mode),
	       encio_fixed_state_desc(p->fixed), c->seconds,
	       pretty_size(rate,
			   c->seconds > 0 ? s->logical_bytes / c->seconds : 0));
}

static void print_summary_json(const struct copy_cmd *c)
{
	const struct copy_stats *s = &c->ctx.stats;
	const struct encio_probe *p = &c->ctx.probe;
	const struct engine *engine = &c->ctx.engine;

	printf("{\"files\": %llu, \"failed\": %d, \"logical_bytes\": %llu, \"encoded_bytes\": %llu, "
	       "\"extents_encoded\": %llu, \"extents_decoded\": %llu, \"ranges_plain\": %llu, "
	       "\"holes\": %llu, \"prealloc\": %llu, \"io_read\": \"%s\", \"io_write\": \"%s\", "
	       "\"fixed_buffers\": \"%s\", \"buffers\": \"%s\", \"registered_bytes\": %zu, "
	       "\"seconds\": %.6f}\n",
	       (unsigned long long)s->files, c->failed,
	       (unsigned long long)s->logical_bytes,
	       (unsigned long long)s->encoded_bytes,
	       (unsigned long long)s->extents_encoded,
	       (unsigned long long)s->extents_decoded,
	       (unsigned long long)s->ranges_plain,
	       (unsigned long long)s->holes, (unsigned long long)s->prealloc,
	       encio_io_mode_name(p->read_mode),
	       encio_io_mode_name(p->write_mode),
	       encio_fixed_state_desc(p->fixed),
	       bufpool_backing_name(engine->pool.backing),
	       engine->registered_bytes, c->seconds);
}

static int parse_copy_options(const struct cmd_struct *cmd, int argc,
			      char **argv, struct copy_cmd *c)
{
	static const struct option long_options[] = {
		{ "queue-depth", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, "d:h", long_options, NULL)) !=
	       -1) {
		switch (opt) {
		case 'd':
			global_opts.queue_depth = strtoul(optarg, &end, 10);
			if (*end || global_opts.queue_depth < 1 ||
			    global_opts.queue_depth > ENGINE_MAX_DEPTH)
				return usage_error(cmd,
						   "queue depth must be 1..%d",
						   ENGINE_MAX_DEPTH);
			break;
		case OPT_FORMAT:
			c->json = parse_format(optarg);
			if (c->json < 0)
				return usage_error(cmd, "unknown format '%s'",
						   optarg);
			break;
		case 'h':
			usage_print(cmd, true, 0);
			exit(0);
		default:
			return EXIT_USAGE;
		}
	}
	if (argc - optind < 2)
		return usage_error(cmd, "need a source and a destination");
	return 0;
}

static int check_sources(int nr_src, char **srcs, const char *dst)
{
	struct stat st;
	int i;

	if (nr_src > 1 && (stat(dst, &st) || !S_ISDIR(st.st_mode))) {
		error("cannot copy %d files to '%s': not a directory", nr_src,
		      dst);
		return 1;
	}
	for (i = 0; i < nr_src; i++) {
		if (stat(srcs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			error("'%s' is a directory (not copied)", srcs[i]);
			return 1;
		}
	}
	return 0;
}

static int cmd_copy(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct copy_options opts = { .force_backing = -1 };
	struct copy_cmd c = { 0 };
	struct encio_error e;
	const char *dst;
	double start;
	int i, nr_src, ret;

	ret = parse_copy_options(cmd, argc, argv, &c);
	if (ret)
		return ret;
	nr_src = argc - optind - 1;
	dst = argv[argc - 1];
	if (check_sources(nr_src, argv + optind, dst))
		return 1;

	opts.io_mode = global_opts.io_mode;
	opts.depth = global_opts.queue_depth;
	ret = copy_ctx_init(&c.ctx, &opts);
	if (ret) {
		error("cannot set up the I/O engine: %s", strerror(-ret));
		return 1;
	}
	start = now();
	for (i = 0; i < nr_src; i++) {
		ret = copy_probe(&c.ctx, argv[optind + i], dst, &e);
		if (!ret && i == 0) {
			print_probe(&c.ctx);
			warn_probe(&c.ctx.probe);
		}
		if (!ret)
			ret = copy_file(&c.ctx, argv[optind + i], dst, &e);
		if (ret) {
			print_encio_error(&e);
			c.failed++;
		}
	}
	c.seconds = now() - start;
	if (c.json)
		print_summary_json(&c);
	else if (global_opts.verbose >= 0 && c.ctx.stats.files)
		print_summary_text(&c);
	copy_ctx_release(&c.ctx);
	return c.failed ? 1 : 0;
}

const struct cmd_struct cmd_struct_copy = { "copy", cmd_copy, copy_usage };
