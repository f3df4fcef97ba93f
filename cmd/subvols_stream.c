// SPDX-License-Identifier: GPL-2.0
/*
 * encio send --subvolumes SRC and encio receive DEST of its stream: what
 * they print. The commands' own files parse the options and call these.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The state in @path ("-": standard input), as receive --state prints it. */
static int state_load(const char *path, struct subvols_state *st)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char *text = NULL;
	size_t len = 0, n;
	char buf[65536];
	int ret = 0;

	if (!f) {
		print_error("cannot open '%s': %s", path, strerror(errno));
		return 1;
	}
	while (!ret && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
		char *grown = realloc(text, len + n + 1);

		if (!grown) {
			ret = -ENOMEM;
			break;
		}
		text = grown;
		memcpy(text + len, buf, n);
		len += n;
	}
	if (!ret && ferror(f))
		ret = -errno;
	if (f != stdin)
		fclose(f);
	if (!ret && (!text || memchr(text, '\0', len)))
		ret = -EINVAL;
	if (!ret) {
		text[len] = '\0';
		ret = subvols_state_parse(text, st);
	}
	free(text);
	if (ret)
		print_error("cannot read the state in '%s': %s%s", path,
			    strerror(-ret),
			    ret == -EINVAL ?
				    " (not what encio receive --state prints)" :
				    "");
	return ret ? 1 : 0;
}

int print_subvolumes_state(const char *dest)
{
	struct subvols_state st;
	struct encio_error e;
	char *text;
	int ret;

	if (subvols_state_read(dest, &st, &e)) {
		print_encio_error(&e);
		return 1;
	}
	ret = subvols_state_format(&st, &text);
	subvols_state_release(&st);
	if (ret) {
		print_error("cannot print the state of '%s': %s", dest,
			    strerror(-ret));
		return 1;
	}
	ret = fputs(text, stdout) < 0 || fflush(stdout);
	free(text);
	if (ret)
		print_error("cannot write the state: %s", strerror(errno));
	return ret;
}

/* What DEST holds that SRC no longer has, said. */
static void say_extras(const struct subvols_send_stats *stats,
		       bool delete_extra)
{
	size_t i;

	if (!stats->nr_extras || global_opts.verbose < 0)
		return;
	fprintf(stderr,
		"DEST holds %zu subvolume%s SRC no longer has there%s:\n",
		stats->nr_extras, stats->nr_extras == 1 ? "" : "s",
		delete_extra ?
			" (named for deleting: the receiver deletes those encio received, unchanged)" :
			" (--delete-extra has the receiver delete those encio received)");
	for (i = 0; i < stats->nr_extras; i++)
		fprintf(stderr, "  %s\n", stats->extras[i]);
}

int send_subvolumes(const char *src, const char *file, const char *state,
		    bool delete_extra)
{
	struct subvols_send_options opts = { .io_mode = global_opts.io_mode,
					     .depth = global_opts.queue_depth,
					     .stop = &stop_signal,
					     .begin = send_begin };
	struct send_output out = { .fd = STDOUT_FILENO, .dir_fd = -1 };
	char size[PRETTY_SIZE_LEN];
	struct subvols_send_stats stats;
	struct encio_error e;
	struct subvols_state st = { 0 };
	double start = clock_now();
	int ret;

	if (!file && isatty(STDOUT_FILENO)) {
		print_error(
			"not writing a stream to a terminal: use -f or a pipe");
		return 1;
	}
	if (state && state_load(state, &st))
		return 1;
	opts.state = state ? &st : NULL;
	opts.delete_extra = delete_extra;
	if (file && send_output_open(&out, file, &e)) {
		print_encio_error(&e);
		subvols_state_release(&st);
		return 1;
	}
	ret = subvols_send(src, out.fd, file ? file : "stdout", &opts, &stats,
			   &e);
	subvols_state_release(&st);
	if (!ret && stop_signal)
		ret = encio_error_set(&e, EINTR, "finish (interrupted)",
				      file ? file : "stdout", false, 0);
	if (file && !ret)
		ret = send_output_commit(&out, file, &e);
	else if (file)
		send_output_abort(&out);
	if (!ret)
		say_extras(&stats, delete_extra);
	subvols_send_stats_release(&stats);
	if (ret) {
		print_encio_error(&e);
		stop_signals_reraise();
		return 1;
	}
	if (global_opts.verbose >= 0)
		fprintf(stderr,
			"sent %llu subvolumes (%llu as differences; %llu in DEST already), %s of stream in %.1fs\n",
			(unsigned long long)stats.total,
			(unsigned long long)stats.incremental,
			(unsigned long long)stats.in_dest,
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
			"received %llu subvolumes into %s (%llu there already; %llu no longer SRC's deleted, %llu kept): %s written (%s encoded) in %.1fs\n",
			(unsigned long long)stats.total, dest,
			(unsigned long long)stats.in_dest,
			(unsigned long long)stats.extras_deleted,
			(unsigned long long)stats.extras_kept,
			pretty_size(size, stats.bytes_written),
			pretty_size(enc, stats.encoded_bytes),
			clock_now() - start);
	return 0;
}
