// SPDX-License-Identifier: GPL-2.0
/*
 * encio send --subvolumes SRC and encio receive DEST of its stream: what
 * they print. The commands' own files parse the options and call these.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "subvols_stream_cmd.h"
#include "base/clock.h"
#include "send/send.h"
#include "subvols/subvols_stream.h"

static void send_begin(void *arg, const char *rel, const char *parent)
{
	(void)arg;
	if (global_opts.verbose < 0)
		return;
	if (parent)
		fprintf(stderr, "At subvol %s (difference from %s)\n", rel,
			parent);
	else
		fprintf(stderr, "At subvol %s\n", rel);
}

int send_subvolumes(const char *src, const char *file)
{
	struct subvols_send_options opts = { .io_mode = global_opts.io_mode,
					     .depth = global_opts.queue_depth,
					     .stop = &stop_signal,
					     .begin = send_begin };
	struct send_output out = { .fd = STDOUT_FILENO, .dir_fd = -1 };
	char size[PRETTY_SIZE_LEN];
	struct subvols_send_stats stats;
	struct encio_error e;
	double start = clock_now();
	int ret;

	if (!file && isatty(STDOUT_FILENO)) {
		print_error(
			"not writing a stream to a terminal: use -f or a pipe");
		return 1;
	}
	if (file && send_output_open(&out, file, &e)) {
		print_encio_error(&e);
		return 1;
	}
	ret = subvols_send(src, out.fd, file ? file : "stdout", &opts, &stats,
			   &e);
	if (!ret && stop_signal)
		ret = encio_error_set(&e, EINTR, "finish (interrupted)",
				      file ? file : "stdout", false, 0);
	if (file && !ret)
		ret = send_output_commit(&out, file, &e);
	else if (file)
		send_output_abort(&out);
	if (ret) {
		print_encio_error(&e);
		stop_signals_reraise();
		return 1;
	}
	if (global_opts.verbose >= 0)
		fprintf(stderr,
			"sent %llu subvolumes (%llu as differences), %s of stream in %.1fs\n",
			(unsigned long long)stats.total,
			(unsigned long long)stats.incremental,
			pretty_size(size, stats.stream_bytes),
			clock_now() - start);
	return 0;
}

static void receive_begin(void *arg, const char *rel, bool read_only)
{
	(void)arg;
	(void)read_only;
	if (global_opts.verbose >= 0)
		fprintf(stderr, "At subvol %s\n", rel);
}

int receive_subvolumes(struct stream_reader *r, const char *dest,
		       const struct receive_options *ropts,
		       const struct receive_events *events)
{
	struct subvols_receive_options opts = { .receive = *ropts,
						.events = events,
						.begin = receive_begin };
	char size[PRETTY_SIZE_LEN], enc[PRETTY_SIZE_LEN];
	struct subvols_receive_stats stats;
	struct encio_error e;
	double start = clock_now();
	int ret;

	if (ropts->resumable || ropts->chroot || ropts->root_mount) {
		stream_reader_release(r);
		print_error(
			"a stream of encio send --subvolumes is received without -s, -C or -m");
		return 1;
	}
	ret = subvols_receive(r, dest, &opts, &stats, &e);
	warn_flags_refused(&stats.flags_refused);
	if (ret) {
		print_encio_error(&e);
		return 1;
	}
	if (global_opts.verbose >= 0)
		fprintf(stderr,
			"received %llu subvolumes into %s: %s written (%s encoded) in %.1fs\n",
			(unsigned long long)stats.total, dest,
			pretty_size(size, stats.bytes_written),
			pretty_size(enc, stats.encoded_bytes),
			clock_now() - start);
	return 0;
}
