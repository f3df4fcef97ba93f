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
#include "json.h"
#include "subvols_stream_cmd.h"
#include "base/clock.h"
#include "send/send.h"
#include "subvols/subvols_stream.h"

/* The subvolumes of a run as they begin, for its JSON summary. */
struct run_list {
	bool json;
	struct run_subvol {
		char *path;
		char *parent;	/* send: the difference's parent, or NULL */
		bool read_only; /* receive: a snapshot */
	} * v;
	size_t nr, cap;
	bool failed; /* out of memory: the list is incomplete */
};

static void run_list_add(struct run_list *l, const char *path,
			 const char *parent, bool read_only)
{
	struct run_subvol *grown;

	if (l->failed)
		return;
	if (l->nr == l->cap) {
		grown = realloc(l->v,
				(l->cap ? l->cap * 2 : 16) * sizeof(*l->v));
		if (!grown) {
			l->failed = true;
			return;
		}
		l->v = grown;
		l->cap = l->cap ? l->cap * 2 : 16;
	}
	l->v[l->nr].path = strdup(path);
	l->v[l->nr].parent = parent ? strdup(parent) : NULL;
	l->v[l->nr].read_only = read_only;
	if (!l->v[l->nr].path || (parent && !l->v[l->nr].parent)) {
		free(l->v[l->nr].path);
		free(l->v[l->nr].parent);
		l->failed = true;
		return;
	}
	l->nr++;
}

static void run_list_release(struct run_list *l)
{
	size_t i;

	for (i = 0; i < l->nr; i++) {
		free(l->v[i].path);
		free(l->v[i].parent);
	}
	free(l->v);
}

/* "subvolumes": each as it began (@send: with its parent, else read_only) */
static void json_run_list(struct json_writer *w, const struct run_list *l,
			  bool send)
{
	size_t i;

	json_array_begin(w, "subvolumes");
	for (i = 0; i < l->nr; i++) {
		json_object_begin(w, NULL);
		json_string(w, "path", l->v[i].path);
		if (send)
			json_string(w, "parent", l->v[i].parent);
		else
			json_bool(w, "read_only", l->v[i].read_only);
		json_object_end(w);
	}
	json_array_end(w);
}

static void send_begin(void *arg, const char *rel, const char *parent)
{
	struct run_list *l = arg;

	if (l->json) {
		run_list_add(l, rel, parent, false);
		return;
	}
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

/*
 * send --subvolumes' summary as one JSON object: the subvolumes sent, each
 * with the parent of its difference (null: whole), the counts of the text
 * line, and the paths DEST holds that SRC no longer has there.
 */
static int print_send_json(FILE *f, const struct run_list *l,
			   const struct subvols_send_stats *stats,
			   bool delete_extra, double seconds)
{
	struct json_writer w;
	size_t i;

	json_init(&w, f, 0);
	json_object_begin(&w, NULL);
	json_run_list(&w, l, true);
	json_u64(&w, "sent", stats->total);
	json_u64(&w, "incremental", stats->incremental);
	json_u64(&w, "resumed", stats->resumed);
	json_u64(&w, "resumed_at", stats->resumed_at);
	json_u64(&w, "in_dest", stats->in_dest);
	json_array_begin(&w, "extras");
	for (i = 0; i < stats->nr_extras; i++)
		json_string(&w, NULL, stats->extras[i]);
	json_array_end(&w);
	json_bool(&w, "delete_extra", delete_extra);
	json_u64(&w, "stream_bytes", stats->stream_bytes);
	json_double(&w, "seconds", seconds, 6);
	json_object_end(&w);
	return summary_flush(f);
}

int send_subvolumes(const char *src, const char *file, const char *state,
		    bool delete_extra, bool json)
{
	struct run_list sent = { .json = json };
	struct subvols_send_options opts = { .io_mode = global_opts.io_mode,
					     .depth = global_opts.queue_depth,
					     .stop = &stop_signal,
					     .begin = send_begin,
					     .arg = &sent };
	struct send_output out = { .fd = STDOUT_FILENO, .dir_fd = -1 };
	char size[PRETTY_SIZE_LEN];
	struct subvols_send_stats stats;
	struct encio_error e;
	struct subvols_state st = { 0 };
	double start = clock_now();
	FILE *json_out;
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
	json_out = send_json_output(&out, file);
	ret = subvols_send(src, out.fd, file ? file : "stdout", &opts, &stats,
			   &e);
	subvols_state_release(&st);
	if (!ret && stop_signal)
		ret = encio_error_set(&e, EINTR, "finish (interrupted)",
				      file ? file : "stdout", false, 0);
	if (!ret && sent.failed)
		ret = encio_error_set(&e, ENOMEM, "list the subvolumes sent to",
				      file ? file : "stdout", false, 0);
	if (file && !ret)
		ret = send_output_commit(&out, file, &e);
	else if (file)
		send_output_abort(&out);
	if (ret)
		print_encio_error(&e);
	else if (!json)
		say_extras(&stats, delete_extra);
	/* after a failure too: the counts of what was sent until then */
	if (json && print_send_json(json_out, &sent, &stats, delete_extra,
				    clock_now() - start))
		ret = ret ?: -EIO;
	subvols_send_stats_release(&stats);
	run_list_release(&sent);
	if (ret) {
		stop_signals_reraise();
		return 1;
	}
	if (!json && global_opts.verbose >= 0)
		fprintf(stderr,
			"sent %llu subvolumes (%llu as differences; %llu in DEST already), %s of stream in %.1fs\n",
			(unsigned long long)stats.total,
			(unsigned long long)stats.incremental,
			(unsigned long long)stats.in_dest,
			pretty_size(size, stats.stream_bytes),
			clock_now() - start);
	if (!json && global_opts.verbose >= 0 && stats.resumed)
		fprintf(stderr,
			"resumed the partial receive DEST kept: %s of its stream not sent again\n",
			pretty_size(size, stats.resumed_at));
	return 0;
}

/*
 * What resumes the receive that stopped, said whatever -q says: the state
 * is read here and names the partial, the send runs where SRC is.
 */
static void show_resume_hint(const char *dest, const char *rel)
{
	char qdest[2 * PATH_MAX], rdest[4 * PATH_MAX];
	const char *d = shell_word(qdest, sizeof(qdest), dest);
	const char *r = shell_word(rdest, sizeof(rdest), d);

	/* ssh hands its words to the other host's shell: quoted again */
	fprintf(stderr,
		"the partial receive of %s is kept in %s; to resume it, run on the sending host (RECEIVER: this host's name, SRC: what was sent):\n"
		"  ssh RECEIVER encio receive --state %s > state && encio send --subvolumes --state state SRC | ssh RECEIVER encio receive -s %s\n"
		"or, where both run on this host:\n"
		"  encio receive --state %s > state && encio send --subvolumes --state state SRC | encio receive -s %s\n",
		rel, dest, r, r, d, d);
}

static void receive_begin(void *arg, const char *rel, bool read_only)
{
	struct run_list *l = arg;

	if (l->json)
		run_list_add(l, rel, NULL, read_only);
	else if (global_opts.verbose >= 0)
		fprintf(stderr, "At subvol %s\n", rel);
}

/*
 * The receive of send --subvolumes' stream as one JSON object on standard
 * output: the subvolumes received (path below DEST, read-only), and the
 * counts of the text line.
 */
static int print_receive_json(const struct run_list *l,
			      const struct subvols_receive_stats *stats,
			      double seconds)
{
	struct json_writer w;

	json_init(&w, stdout, 0);
	json_object_begin(&w, NULL);
	json_run_list(&w, l, false);
	json_u64(&w, "received", stats->total);
	json_u64(&w, "resumed", stats->resumed);
	json_string(&w, "partial_kept",
		    stats->partial_kept[0] ? stats->partial_kept : NULL);
	json_u64(&w, "in_dest", stats->in_dest);
	json_u64(&w, "replaced_changed", stats->replaced_changed);
	json_u64(&w, "extras_deleted", stats->extras_deleted);
	json_u64(&w, "extras_kept", stats->extras_kept);
	json_u64(&w, "written_bytes", stats->bytes_written);
	json_u64(&w, "encoded_bytes", stats->encoded_bytes);
	json_u64(&w, "stream_bytes", stats->stream_bytes);
	json_double(&w, "seconds", seconds, 6);
	json_object_end(&w);
	return summary_flush(stdout);
}

int receive_subvolumes(struct stream_reader *r, const char *dest,
		       const struct receive_options *ropts,
		       const struct receive_events *events, bool json)
{
	struct run_list received = { .json = json };
	struct subvols_receive_options opts = { .receive = *ropts,
						.events = events,
						.begin = receive_begin,
						.arg = &received };
	char size[PRETTY_SIZE_LEN], enc[PRETTY_SIZE_LEN];
	struct subvols_receive_stats stats;
	struct encio_error e;
	double start = clock_now();
	int ret;

	if (ropts->chroot || ropts->root_mount) {
		stream_reader_release(r);
		print_error(
			"a stream of encio send --subvolumes is received without -C or -m");
		return 1;
	}
	ret = subvols_receive(r, dest, &opts, &stats, &e);
	warn_flags_refused(&stats.flags_refused);
	if (stats.replaced_changed)
		print_warning(
			"%llu writable cop%s in %s changed since encio received %s, replaced by SRC's: what changed in %s is gone",
			(unsigned long long)stats.replaced_changed,
			stats.replaced_changed == 1 ? "y" : "ies", dest,
			stats.replaced_changed == 1 ? "it" : "them",
			stats.replaced_changed == 1 ? "it" : "them");
	if (ret)
		print_encio_error(&e);
	if (ret && stats.partial_kept[0])
		show_resume_hint(dest, stats.partial_kept);
	if (json && received.failed) {
		print_error("cannot list the subvolumes received: %s",
			    strerror(ENOMEM));
		ret = 1;
	} else if (json) {
		/* after a failure too: the counts of what was done */
		ret = print_receive_json(&received, &stats,
					 clock_now() - start) ||
		      ret;
	}
	run_list_release(&received);
	if (ret || json)
		return ret ? 1 : 0;
	if (global_opts.verbose >= 0)
		fprintf(stderr,
			"received %llu subvolumes into %s (%llu resumed; %llu there already; %llu no longer SRC's deleted, %llu kept): %s written (%s encoded) in %.1fs\n",
			(unsigned long long)stats.total, dest,
			(unsigned long long)stats.resumed,
			(unsigned long long)stats.in_dest,
			(unsigned long long)stats.extras_deleted,
			(unsigned long long)stats.extras_kept,
			pretty_size(size, stats.bytes_written),
			pretty_size(enc, stats.encoded_bytes),
			clock_now() - start);
	return 0;
}
