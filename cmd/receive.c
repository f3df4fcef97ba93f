// SPDX-License-Identifier: GPL-2.0
/*
 * encio receive: apply a send stream, encoded extents written encoded.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "../lib/receive.h"

static const char *const receive_usage[] = {
	"encio receive [-f FILE] [-m ROOTMOUNT] [--force-decompress] [-v|-q] DEST",
	"Receive subvolumes from a send stream into DEST.",
	"",
	"Reads a btrfs send stream (version 1, 2 or 3, from 'btrfs send' or",
	"'encio send'; several may be concatenated) from FILE or standard input",
	"and creates each subvolume (or snapshot of its parent) under DEST.",
	"Parents and clone sources are found anywhere in DEST's filesystem by",
	"received UUID (else UUID) and transid, and opened from the root of the",
	"mount holding DEST, which must reach them. ENCODED_WRITE data",
	"is written encoded; where the destination refuses it, or with",
	"--force-decompress, it is decoded and written plain. Every path stays",
	"beneath the subvolume: absolute paths, '..' and symlinks on the way are",
	"errors. At each END the filesystem is synced, the subvolume marked",
	"received and made read-only; a failed receive leaves it writable and",
	"not marked received.",
	"",
	"-f FILE             read the stream from FILE instead of standard input",
	"-m ROOTMOUNT        open parents and clone sources from ROOTMOUNT, a",
	"                    directory of DEST's filesystem, instead of the root",
	"                    of the mount holding DEST",
	"--force-decompress  decode every encoded extent and write it plain",
	"-v|--verbose        say more (the write backend chosen)",
	"-q|--quiet          no summary",
	"-h|--help           this help",
	NULL
};

enum { OPT_FORCE_DECOMPRESS = OPT_HELP + 1 };

struct progress {
	double start;
	double last;
	bool shown;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void show_progress(const struct receive_stats *s, void *arg)
{
	struct progress *p = arg;
	char bytes[PRETTY_SIZE_LEN], rate[PRETTY_SIZE_LEN];
	double t = now();

	if (t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	fprintf(stderr, "\r%s written, %s/s\033[K",
		pretty_size(bytes, s->bytes_written),
		pretty_size(rate, t > p->start ?
					  s->bytes_written / (t - p->start) :
					  0));
}

static void print_summary(struct receive_ctx *ctx, double seconds)
{
	const struct receive_stats *s = receive_get_stats(ctx);
	const struct encio_probe *p = receive_get_probe(ctx);
	char bytes[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN];

	printf("received %llu subvolume%s: %llu commands, %s written, %s encoded; extents %llu encoded, %llu decoded; io write %s; %.3fs, %s/s\n",
	       (unsigned long long)s->subvols, s->subvols == 1 ? "" : "s",
	       (unsigned long long)s->commands,
	       pretty_size(bytes, s->bytes_written),
	       pretty_size(encoded, s->encoded_bytes),
	       (unsigned long long)s->extents_encoded,
	       (unsigned long long)s->extents_decoded,
	       p ? encio_io_mode_name(p->write_mode) : "none", seconds,
	       pretty_size(rate, seconds > 0 ? s->bytes_written / seconds : 0));
}

static int parse_receive_options(const struct cmd_struct *cmd, int argc,
				 char **argv, struct receive_options *opts,
				 const char **file)
{
	static const struct option long_options[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "force-decompress", no_argument, NULL, OPT_FORCE_DECOMPRESS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "f:m:vqh", long_options, NULL)) !=
	       -1) {
		switch (opt) {
		case 'f':
			*file = optarg;
			break;
		case 'm':
			opts->root_mount = optarg;
			break;
		case OPT_FORCE_DECOMPRESS:
			opts->force_decompress = true;
			break;
		default:
			if (common_option(cmd, opt, NULL))
				return EXIT_USAGE;
			break;
		}
	}
	if (argc - optind != 1)
		return usage_error(cmd, "need exactly one destination");
	return 0;
}

static int cmd_receive(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct receive_options opts = { .io_mode = global_opts.io_mode };
	struct progress progress = { 0 };
	const struct encio_probe *p;
	struct receive_ctx *ctx;
	const char *file = NULL;
	struct encio_error e;
	int fd = STDIN_FILENO, ret;

	ret = parse_receive_options(cmd, argc, argv, &opts, &file);
	if (ret)
		return ret;
	if (file) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			error("cannot open '%s': %s", file, strerror(errno));
			return 1;
		}
	}
	ret = receive_ctx_new(&ctx, &opts, &e);
	if (ret) {
		print_encio_error(&e);
		goto out;
	}
	progress.start = progress.last = now();
	if (global_opts.verbose >= 0 && isatty(STDERR_FILENO))
		receive_set_progress(ctx, show_progress, &progress);
	ret = receive_run(ctx, fd, file ? file : "stdin", argv[optind], &e);
	if (progress.shown)
		fprintf(stderr, "\r\033[K");
	p = receive_get_probe(ctx);
	if (p && p->write_mode == ENCIO_IO_NONE && !opts.force_decompress)
		warning("encoded writes impossible on the destination (%s): decoded in user space",
			strerror(p->write_none_err));
	if (p)
		verbose(1, "fixed buffers: %s; uring writes on io-wq: %s",
			encio_fixed_state_desc(p->fixed),
			p->write_punted ? "yes" : "no");
	if (ret)
		print_encio_error(&e);
	if (!ret && global_opts.verbose >= 0)
		print_summary(ctx, now() - progress.start);
	receive_ctx_free(ctx);
out:
	if (file)
		close(fd);
	return ret ? 1 : 0;
}

const struct cmd_struct cmd_struct_receive = { "receive", cmd_receive,
					       receive_usage };
