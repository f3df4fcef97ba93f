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
#include "../lib/dump.h"
#include "../lib/receive.h"

static const char *const receive_usage[] = {
	"encio receive [options] DEST | encio receive --dump [-f FILE]",
	"Receive subvolumes from a send stream into DEST.",
	"",
	"Reads a btrfs send stream (version 1, 2 or 3, from 'btrfs send' or",
	"'encio send'; several may be concatenated) from FILE or standard input",
	"(not a terminal) and creates each subvolume (or snapshot of its parent) under DEST.",
	"Parents and clone sources are found anywhere in DEST's filesystem by",
	"received UUID (else UUID) and transid, and opened from the root of the",
	"mount holding DEST, which must reach them. ENCODED_WRITE data",
	"is checked to be well formed for its algorithm (without decoding it)",
	"and written encoded; where the destination refuses it, or with",
	"--force-decompress, it is decoded and written plain. Every path stays",
	"beneath the subvolume: absolute paths, '..' and symlinks on the way are",
	"errors. At each END the filesystem is synced, the subvolume marked",
	"received and made read-only; a failed receive leaves it writable and",
	"not marked received. Options, messages ('At subvol NAME', 'ERROR: ...'",
	"lines) and exit status are those of 'btrfs receive'.",
	"",
	"-f|--file FILE      read the stream from FILE instead of standard input",
	"-e                  stop after the first END command instead of reading",
	"                    to the end of the input",
	"-C|--chroot         chroot into DEST before applying the stream",
	"-E|--max-errors N   stop after N failed commands (default 1; 0: never,",
	"                    apply every command that can be)",
	"-m ROOTMOUNT        open parents and clone sources from ROOTMOUNT, a",
	"                    directory of DEST's filesystem, instead of the root",
	"                    of the mount holding DEST",
	"--dump              print the stream's commands as 'btrfs receive",
	"                    --dump' does ('encio dump'); no DEST",
	"--force-decompress  decode every encoded extent and write it plain",
	"--verify            decode every encoded extent before writing it and",
	"                    check that it covers the range the file uses",
	"-v|--verbose        say more (subvolume UUIDs, the write backend)",
	"-q|--quiet          errors only",
	"-h|--help           this help",
	NULL
};

enum {
	OPT_FORCE_DECOMPRESS = OPT_HELP + 1,
	OPT_DUMP,
	OPT_VERIFY,
};

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

static void print_uuid(char *out, const uint8_t *u)
{
	snprintf(
		out, 37,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* As btrfs receive: "At subvol NAME" unless quiet, the UUIDs with -v. */
static void show_subvol(const char *name, const uint8_t *uuid,
			uint64_t ctransid, const uint8_t *parent_uuid,
			uint64_t parent_ctransid, void *arg)
{
	char u[37], p[37];

	(void)arg;
	if (global_opts.verbose < 0)
		return;
	fprintf(stderr, "At %s %s\n", parent_uuid ? "snapshot" : "subvol",
		name);
	if (global_opts.verbose < 1)
		return;
	print_uuid(u, uuid);
	if (!parent_uuid) {
		fprintf(stderr, "receiving subvol %s uuid=%s, stransid=%llu\n",
			name, u, (unsigned long long)ctransid);
		return;
	}
	print_uuid(p, parent_uuid);
	fprintf(stderr,
		"receiving snapshot %s uuid=%s, ctransid=%llu parent_uuid=%s, parent_ctransid=%llu\n",
		name, u, (unsigned long long)ctransid, p,
		(unsigned long long)parent_ctransid);
}

/*
 * One "ERROR: " line per failure: btrfs receive's words first (scripts
 * match them), then where in the stream and why.
 */
static void show_error(const struct encio_error *e, const char *summary,
		       void *arg)
{
	(void)arg;
	if (!summary) {
		print_encio_error(e);
		return;
	}
	if (e->has_offset)
		error("%s (cannot %s '%s' at offset %llu)", summary, e->op,
		      e->path, (unsigned long long)e->offset);
	else
		error("%s (cannot %s '%s')", summary, e->op, e->path);
}

/* As btrfs receive -C says it (before it, here: the receive does it). */
static void show_chroot(const char *dest)
{
	char *full = realpath(dest, NULL);

	fprintf(stderr, "Chroot to %s\n", full ? full : dest);
	free(full);
}

struct receive_args {
	struct receive_options opts;
	const char *file;
	bool dump;
};

static int parse_receive_options(const struct cmd_struct *cmd, int argc,
				 char **argv, struct receive_args *args)
{
	static const struct option long_options[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "chroot", no_argument, NULL, 'C' },
		{ "max-errors", required_argument, NULL, 'E' },
		{ "dump", no_argument, NULL, OPT_DUMP },
		{ "force-decompress", no_argument, NULL, OPT_FORCE_DECOMPRESS },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		COMMON_LONG_OPTIONS
	};
	struct receive_options *opts = &args->opts;
	unsigned long long n;
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "f:eCE:m:",
				  long_options, NULL)) != -1) {
		switch (opt) {
		case 'f':
			args->file = optarg;
			break;
		case 'e':
			opts->honor_end = true;
			break;
		case 'C':
			opts->chroot = true;
			break;
		case 'E':
			errno = 0;
			n = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-')
				return usage_error(cmd,
						   "bad number of errors '%s'",
						   optarg);
			opts->max_errors = n;
			break;
		case 'm':
			opts->root_mount = optarg;
			break;
		case OPT_DUMP:
			args->dump = true;
			break;
		case OPT_FORCE_DECOMPRESS:
			opts->force_decompress = true;
			break;
		case OPT_VERIFY:
			opts->verify = true;
			break;
		default:
			if (common_option(cmd, opt, NULL))
				return EXIT_USAGE;
			break;
		}
	}
	if (args->dump && argc != optind)
		return usage_error(cmd, "--dump takes no destination");
	if (!args->dump && argc - optind != 1)
		return usage_error(cmd, "need exactly one destination");
	return 0;
}

static int receive_dump(int fd, const char *name)
{
	char summary[128];
	struct encio_error e;
	int ret;

	ret = dump_stream(fd, name, stdout, &e);
	if (fflush(stdout) && !ret)
		ret = encio_error_set(&e, errno, "write", "stdout", false, 0);
	if (ret) {
		snprintf(summary, sizeof(summary),
			 "failed to dump the send stream: %s", strerror(e.err));
		show_error(&e, summary, NULL);
	}
	return ret ? 1 : 0;
}

static int cmd_receive(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct receive_args args = {
		.opts = { .io_mode = global_opts.io_mode, .max_errors = 1 },
	};
	const struct receive_events events = { .subvol = show_subvol,
					       .error = show_error };
	struct receive_options *opts = &args.opts;
	struct progress progress = { 0 };
	const struct encio_probe *p;
	struct receive_ctx *ctx;
	struct encio_error e;
	int fd = STDIN_FILENO, ret;

	/* A usage error exits 1, as btrfs receive's: scripts test for it. */
	ret = parse_receive_options(cmd, argc, argv, &args);
	if (ret)
		return 1;
	if (!args.file && isatty(STDIN_FILENO)) {
		error("not reading a stream from a terminal: use -f or a pipe");
		return 1;
	}
	if (args.file) {
		fd = open(args.file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			error("cannot open '%s': %s", args.file,
			      strerror(errno));
			return 1;
		}
	}
	if (args.dump) {
		ret = receive_dump(fd, args.file ? args.file : "stdin");
		goto out;
	}
	ret = receive_ctx_new(&ctx, opts, &e);
	if (ret) {
		print_encio_error(&e);
		goto out;
	}
	receive_set_events(ctx, &events);
	if (opts->chroot && global_opts.verbose >= 0)
		show_chroot(argv[optind]);
	progress.start = progress.last = now();
	if (global_opts.verbose >= 0 && isatty(STDERR_FILENO))
		receive_set_progress(ctx, show_progress, &progress);
	ret = receive_run(ctx, fd, args.file ? args.file : "stdin",
			  argv[optind], &e);
	if (progress.shown)
		fprintf(stderr, "\r\033[K");
	p = receive_get_probe(ctx);
	if (p && p->write_mode == ENCIO_IO_NONE && !opts->force_decompress)
		warning("encoded writes impossible on the destination (%s): decoded in user space",
			strerror(p->write_none_err));
	if (p)
		verbose(1, "fixed buffers: %s; uring writes on io-wq: %s",
			encio_fixed_state_desc(p->fixed),
			p->write_punted ? "yes" : "no");
	if (ret < 0)
		show_error(&e, receive_error_summary(ctx), NULL);
	if (!ret && global_opts.verbose >= 0)
		print_summary(ctx, now() - progress.start);
	receive_ctx_free(ctx);
out:
	if (args.file)
		close(fd);
	return ret ? 1 : 0;
}
const struct cmd_struct cmd_struct_receive = { "receive", cmd_receive,
					       receive_usage };
