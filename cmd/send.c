// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: a btrfs send stream (v2) of a tree, compressed extents encoded.
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
#include "../lib/send.h"

static const char *const send_usage[] = {
	"encio send [-f FILE] [--snapshot] [-q] PATH...",
	"Write a btrfs send stream (version 2) of each PATH.",
	"",
	"Writes the subvolume or directory tree PATH as a full btrfs send stream",
	"version 2 to standard output or FILE, for 'btrfs receive' or 'encio",
	"receive'. The received subvolume is named after PATH's last component;",
	"its UUID is PATH's when PATH is a subvolume, else a fresh one. Several",
	"PATHs make one stream of several subvolumes, as btrfs send writes them.",
	"Compressed extents are read with encoded reads and sent as",
	"ENCODED_WRITE, plain data as WRITE, preallocated ranges as FALLOCATE;",
	"holes are skipped. Symlinks are sent as symlinks, never followed; hard",
	"links within PATH stay hard links; a nested subvolume is an empty",
	"directory, as with btrfs send.",
	"",
	"On a terminal, standard error shows bytes sent of the total (the tree is",
	"walked first), the rate and the time left.",
	"",
	"-f FILE        write the stream to FILE instead of standard output",
	"--snapshot     send from a temporary read-only snapshot of each",
	"               subvolume PATH (one point in time), deleted afterwards",
	"-q|--quiet     no summary",
	"-h|--help      this help",
	NULL
};

enum { OPT_SNAPSHOT = OPT_HELP + 1 };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct progress {
	double start;
	double last;
	bool shown;
};

static void show_progress(const struct send_stats *s, void *arg)
{
	char done[PRETTY_SIZE_LEN], total[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN];
	struct progress *p = arg;
	double t = now(), bps;
	uint64_t left;

	if (t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	bps = t > p->start ? s->bytes_done / (t - p->start) : 0;
	left = s->bytes_total > s->bytes_done ? s->bytes_total - s->bytes_done :
						0;
	fprintf(stderr, "\r%s of %s, %s/s, ETA %.0fs\033[K",
		pretty_size(done, s->bytes_done),
		pretty_size(total, s->bytes_total),
		pretty_size(rate, (unsigned long long)bps),
		bps > 0 ? left / bps : 0.0);
}

static void print_summary(const struct send_stats *s, double seconds)
{
	char logical[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		stream[PRETTY_SIZE_LEN];

	fprintf(stderr,
		"sent %llu files, %llu directories, %llu other: %s logical, %s encoded in %llu extents; stream %s; io read %s; %.3fs\n",
		(unsigned long long)s->files, (unsigned long long)s->dirs,
		(unsigned long long)s->others,
		pretty_size(logical, s->bytes_logical),
		pretty_size(encoded, s->bytes_encoded),
		(unsigned long long)s->extents_encoded,
		pretty_size(stream, s->stream_bytes),
		encio_io_mode_name(s->read_mode), seconds);
}

static int parse_send_options(const struct cmd_struct *cmd, int argc,
			      char **argv, struct send_options *opts,
			      const char **file)
{
	static const struct option long_options[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "snapshot", no_argument, NULL, OPT_SNAPSHOT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "f:vqh", long_options, NULL)) !=
	       -1) {
		switch (opt) {
		case 'f':
			*file = optarg;
			break;
		case OPT_SNAPSHOT:
			opts->snapshot = true;
			break;
		default:
			if (common_option(cmd, opt, NULL))
				return EXIT_USAGE;
			break;
		}
	}
	if (argc - optind < 1)
		return usage_error(cmd, "need a path");
	return 0;
}

static int cmd_send(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct send_options opts = { .io_mode = global_opts.io_mode,
				     .depth = global_opts.queue_depth };
	struct progress progress = { 0 };
	struct send_stats stats;
	const char *file = NULL;
	struct encio_error e;
	int fd = STDOUT_FILENO, ret;

	ret = parse_send_options(cmd, argc, argv, &opts, &file);
	if (ret)
		return ret;
	if (file) {
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			error("cannot open '%s': %s", file, strerror(errno));
			return 1;
		}
	} else if (isatty(STDOUT_FILENO)) {
		error("not writing a stream to a terminal: use -f or a pipe");
		return 1;
	}
	progress.start = now(); /* the first call shows */
	if (global_opts.verbose >= 0 && isatty(STDERR_FILENO)) {
		opts.progress = show_progress;
		opts.progress_arg = &progress;
	}
	ret = send_run((const char *const *)argv + optind, argc - optind, fd,
		       file ? file : "stdout", &opts, &stats, &e);
	if (progress.shown)
		fprintf(stderr, "\r\033[K");
	if (ret)
		print_encio_error(&e);
	if (file && close(fd) && !ret) {
		error("cannot write '%s': %s", file, strerror(errno));
		ret = -EIO;
	}
	if (!ret && global_opts.verbose >= 0)
		print_summary(&stats, now() - progress.start);
	return ret ? 1 : 0;
}

const struct cmd_struct cmd_struct_send = { "send", cmd_send, send_usage };
