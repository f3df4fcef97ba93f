// SPDX-License-Identifier: GPL-2.0
/*
 * encio receive: apply a send stream, encoded extents written encoded.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "subvols_stream_cmd.h"
#include "dump_stream.h"
#include "json.h"
#include "base/clock.h"
#include "receive/receive.h"

static const char *const receive_usage[] = {
	"encio receive [options] DEST | encio receive --dump [-f FILE] | encio receive --resume-token DEST[/NAME] | encio receive --abort DEST/NAME | encio receive --state DEST",
	"Receive subvolumes from a send stream into DEST.",
	"",
	"Reads a btrfs send stream (version 1, 2 or 3, from 'btrfs send' or",
	"'encio send'; several may be concatenated) from FILE or standard input",
	"(not a terminal) and creates each subvolume (or snapshot of its parent) under DEST.",
	"Parents and clone sources are found anywhere in DEST's filesystem by",
	"received UUID (else UUID), as btrfs receive finds them, and opened",
	"from the root of the mount holding DEST, which must reach them.",
	"ENCODED_WRITE data",
	"is checked to be well formed for its algorithm (without decoding it)",
	"and written encoded; where the destination refuses it, or with",
	"--force-decompress, it is decoded and written plain. Every path stays",
	"beneath the subvolume: absolute paths, '..' and symlinks on the way are",
	"errors. At each END the filesystem is synced, the subvolume marked",
	"received and made read-only; a failed receive leaves it writable and",
	"not marked received. Options, messages ('At subvol NAME', 'ERROR: ...'",
	"lines) and exit status are those of 'btrfs receive'.",
	"",
	"Standard error shows the bytes written and the rate (of a stream read",
	"from a file, or one whose sender, encio send with progress, put its",
	"size in it, also the time left) when it is a terminal and the stream",
	"comes from a file, not a pipe: a pipe's writer draws its own, as",
	"'encio send' does on the same terminal; with --progress always. The",
	"summary at the end is a line on standard error, or with --format=json",
	"one JSON object on standard output.",
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
	"-s|--resumable      receive each subvolume in DEST's private directory",
	"                    (.encio-receive.XXXXXX), one receiver per NAME, taking",
	"                    checkpoints (every 1 GiB of stream or 10 s): a stream",
	"                    that stops short keeps what it received, for",
	"                    'encio send -t'; the message says how to resume. A",
	"                    resumed stream needs -s. A stream of 'encio send",
	"                    --subvolumes': the subvolume in flight is kept, for",
	"                    the next 'encio send --subvolumes --state' to resume",
	"--checkpoint SIZE   with -s, a checkpoint every SIZE bytes of stream",
	"                    (K, M, G suffixes) instead of 1 GiB",
	"--resume-token DEST/NAME  print the token of NAME's partial receive, for",
	"                    'encio send -t TOKEN'; of a directory DEST that",
	"                    holds partials, each as a line: NAME, the bytes of",
	"                    stream received, the token (--format=json: an array)",
	"--state DEST        print what the copy at DEST, received from 'encio send",
	"                    --subvolumes SRC', holds: the read-only subvolumes",
	"                    encio received, unchanged since, and the partial",
	"                    receive -s kept, for 'encio send --subvolumes",
	"                    --state FILE SRC', which sends the rest (resumed)",
	"--abort DEST/NAME   drop NAME's partial receive (its subvolumes, record",
	"                    and directory in DEST's private directory), not",
	"                    DEST/NAME; refused while a receive of NAME runs",
	"--dump              print the stream's commands as 'btrfs receive",
	"                    --dump' does ('encio dump'); no DEST",
	"--force-decompress  decode every encoded extent and write it plain",
	"--no-root-nocow     leave nocow (C) off each subvolume's root directory,",
	"                    for 'btrfs receive' of later differences (see",
	"                    encio-receive(8))",
	"--verify            decode every encoded extent before writing it and",
	"                    check that it covers the range the file uses",
	"--progress          show progress even when the stream comes from a pipe",
	"                    or standard error is not a terminal",
	"--format=text|json  the summary as a line (text) or one JSON object",
	"-v|--verbose        say more (subvolume UUIDs, the write backend)",
	"-q|--quiet          errors only (and the object of --format=json)",
	"-h|--help           this help",
	NULL
};

enum {
	OPT_FORCE_DECOMPRESS = OPT_HELP + 1,
	OPT_DUMP,
	OPT_VERIFY,
	OPT_PROGRESS,
	OPT_CHECKPOINT,
	OPT_RESUME_TOKEN,
	OPT_ABORT,
	OPT_STATE,
	OPT_NO_ROOT_NOCOW,
};

struct progress {
	double start;
	double last;
	bool shown;
	uint64_t total;	 /* the stream's size when it is a file, else 0 */
	bool total_told; /* the stream's sender (encio send) told its size */
	bool json;	 /* stdout holds the JSON object only */
	struct receive_ctx *ctx;
	const char *dest;
	/* the subvolumes the stream named, for the JSON object */
	struct received_subvol *subvols;
	size_t nr_subvols;
};

struct received_subvol {
	char *name;
	uint8_t uuid[BTRFS_UUID_SIZE];	      /* its received UUID */
	uint8_t parent_uuid[BTRFS_UUID_SIZE]; /* zero: a full stream's */
};

/*
 * Bytes written and their rate; of a stream of known size (a file's, or
 * what encio send estimated and put in it), also how much of it was read
 * and the time left at that pace (once a second of it gives a pace to go
 * by).
 */
static void show_progress(const struct receive_stats *s, void *arg)
{
	char bytes[PRETTY_SIZE_LEN], rate[PRETTY_SIZE_LEN],
		read[PRETTY_SIZE_LEN], total[PRETTY_SIZE_LEN], eta[32];
	struct progress *p = arg;
	double t = clock_now(), secs = t - p->start;

	if (t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	progress_line_up = true;
	if (!p->total && s->stream_total) {
		p->total = s->stream_total;
		p->total_told = true;
	}
	pretty_size(bytes, s->bytes_written);
	pretty_size(rate, secs > 0 ? s->bytes_written / secs : 0);
	if (!p->total) {
		fprintf(stderr, "\r%s written, %s/s\033[K", bytes, rate);
		return;
	}
	format_eta_of(eta, sizeof(eta), secs, s->stream_bytes, p->total);
	fprintf(stderr, "\r%s of %s read, %s written, %s/s, ETA %s\033[K",
		pretty_size(read, s->stream_bytes),
		pretty_size(total, p->total), bytes, rate, eta);
}

/*
 * The last line, however soon after the one before: the whole stream read,
 * which is the total where the sender's was an estimate.
 */
static void show_progress_end(const struct receive_stats *s, struct progress *p)
{
	if (!p->total && s->stream_total)
		p->total_told = true;
	if (p->total_told)
		p->total = s->stream_bytes;
	p->last = 0;
	show_progress(s, p);
}

/*
 * The file data the stream made, and of it what came as data and what
 * was cloned (shared with a file received before, not written again),
 * then what this receive wrote.
 */
static void print_summary_text(struct receive_ctx *ctx, double seconds)
{
	const struct receive_stats *s = receive_get_stats(ctx);
	const struct encio_probe *p = receive_get_probe(ctx);
	char bytes[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN], data[PRETTY_SIZE_LEN],
		cloned[PRETTY_SIZE_LEN], written[PRETTY_SIZE_LEN];

	fprintf(stderr,
		"%sreceived %llu subvolume%s: %llu commands, %s of file data (%s data, %s cloned), %s written, %s encoded; extents %llu encoded, %llu decoded; io write %s; %.3fs, %s/s\n",
		line_start(stderr), (unsigned long long)s->subvols,
		s->subvols == 1 ? "" : "s", (unsigned long long)s->commands,
		pretty_size(bytes, s->bytes_written),
		pretty_size(data, s->data_bytes),
		pretty_size(cloned, s->clone_bytes),
		pretty_size(written, s->written_bytes),
		pretty_size(encoded, s->encoded_bytes),
		(unsigned long long)s->extents_encoded,
		(unsigned long long)s->extents_decoded,
		p ? encio_io_mode_name(p->write_mode) : "none", seconds,
		pretty_size(rate,
			    seconds > 0 ? s->bytes_written / seconds : 0));
}

/*
 * The subvolume received as @r: found at DEST/NAME (NAME under -C, the
 * receive chrooted into DEST) with @r's received UUID, its own UUID.
 */
static bool received_uuid_of(const struct received_subvol *r, const char *dest,
			     bool chroot, uint8_t *uuid)
{
	struct subvol_uuids u;
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", chroot ? "" : dest, r->name);
	if (subvol_uuids_of(path, &u) ||
	    memcmp(u.received_uuid, r->uuid, BTRFS_UUID_SIZE))
		return false;
	memcpy(uuid, u.uuid, BTRFS_UUID_SIZE);
	return true;
}

/*
 * Each subvolume the stream named: its name, UUID (null where it was not
 * received whole), received UUID (the sender's) and, for a snapshot, its
 * parent's UUID as the stream named it.
 */
static void json_subvolumes(struct json_writer *w, const struct progress *p,
			    const char *dest, bool chroot)
{
	char text[UUID_TEXT_LEN];
	uint8_t uuid[BTRFS_UUID_SIZE];
	size_t i;

	json_array_begin(w, "subvolumes");
	for (i = 0; i < p->nr_subvols; i++) {
		json_object_begin(w, NULL);
		json_string(w, "name", p->subvols[i].name);
		if (received_uuid_of(&p->subvols[i], dest, chroot, uuid)) {
			uuid_format(text, uuid);
			json_string(w, "uuid", text);
		} else {
			json_null(w, "uuid");
		}
		uuid_format(text, p->subvols[i].uuid);
		json_string(w, "received_uuid", text);
		if (!uuid_is_zero(p->subvols[i].parent_uuid)) {
			uuid_format(text, p->subvols[i].parent_uuid);
			json_string(w, "parent_uuid", text);
		}
		json_object_end(w);
	}
	json_array_end(w);
}

/*
 * Every counter of the receive, under the names encio(8)'s other JSON
 * uses for the same things (send's and copy's logical_bytes and
 * encoded_bytes, io_write): logical_bytes is data_bytes and clone_bytes,
 * written_bytes what was written of it (clones shared are not).
 */
static void print_summary_json(struct receive_ctx *ctx, double seconds,
			       const struct progress *progress,
			       const char *dest, bool chroot)
{
	const struct receive_stats *s = receive_get_stats(ctx);
	const struct encio_probe *p = receive_get_probe(ctx);
	struct json_writer w;

	json_init(&w, stdout, 0);
	json_object_begin(&w, NULL);
	json_subvolumes(&w, progress, dest, chroot);
	json_u64(&w, "subvols", s->subvols);
	json_u64(&w, "commands", s->commands);
	json_u64(&w, "logical_bytes", s->bytes_written);
	json_u64(&w, "data_bytes", s->data_bytes);
	json_u64(&w, "clone_bytes", s->clone_bytes);
	json_u64(&w, "written_bytes", s->written_bytes);
	json_u64(&w, "encoded_bytes", s->encoded_bytes);
	json_u64(&w, "extents_encoded", s->extents_encoded);
	json_u64(&w, "extents_decoded", s->extents_decoded);
	json_u64(&w, "stream_bytes", s->stream_bytes);
	json_u64(&w, "errors", s->errors);
	json_u64(&w, "checkpoints", s->checkpoints);
	json_string(&w, "io_write",
		    p ? encio_io_mode_name(p->write_mode) : "none");
	json_double(&w, "seconds", seconds, 6);
	json_object_end(&w);
}

/*
 * The text line after a receive that ended well, on standard error (btrfs
 * receive's scripts read standard output for "At snapshot"; as
 * btrfs-receive with -v only), the JSON object after any (its errors say
 * what failed). A summary nobody got is an error: a script
 * would take the receive for done.
 */
static int print_summary(struct receive_ctx *ctx,
			 const struct progress *progress, const char *dest,
			 bool chroot, int ret, double seconds)
{
	bool json = progress->json;
	FILE *f = json ? stdout : stderr;

	if (json)
		print_summary_json(ctx, seconds, progress, dest, chroot);
	else if (!ret && (global_opts.progs_names ? global_opts.verbose > 0 :
						    global_opts.verbose >= 0))
		print_summary_text(ctx, seconds);
	return summary_flush(f) ?: ret;
}

/*
 * Whether the stream comes through a pipe or socket, whose writer (encio
 * send on the same terminal) may draw its own progress line there; @size
 * gets what is left to read of a regular file, else 0.
 */
static bool stream_from_pipe(int fd, uint64_t *size)
{
	struct stat st;
	off_t pos;

	*size = 0;
	if (fstat(fd, &st))
		return false;
	pos = lseek(fd, 0, SEEK_CUR);
	if (S_ISREG(st.st_mode) && pos >= 0 && st.st_size > pos)
		*size = st.st_size - pos;
	return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

/* For the JSON object; one that cannot be kept is left out of it. */
static void keep_subvol(struct progress *p, const char *name,
			const uint8_t *uuid, const uint8_t *parent_uuid)
{
	struct received_subvol *r;

	if (!p->json)
		return;
	r = realloc(p->subvols, (p->nr_subvols + 1) * sizeof(*r));
	if (!r)
		return;
	p->subvols = r;
	r += p->nr_subvols;
	r->name = strdup(name);
	if (!r->name)
		return;
	memcpy(r->uuid, uuid, sizeof(r->uuid));
	memset(r->parent_uuid, 0, sizeof(r->parent_uuid));
	if (parent_uuid)
		memcpy(r->parent_uuid, parent_uuid, sizeof(r->parent_uuid));
	p->nr_subvols++;
}

static void free_subvols(struct progress *p)
{
	size_t i;

	for (i = 0; i < p->nr_subvols; i++)
		free(p->subvols[i].name);
	free(p->subvols);
}

/* As btrfs receive: "At subvol NAME" unless quiet, the UUIDs with -v. */
static void show_subvol(const char *name, const uint8_t *uuid,
			uint64_t ctransid, const uint8_t *parent_uuid,
			uint64_t parent_ctransid, void *arg)
{
	char u[UUID_TEXT_LEN], p[UUID_TEXT_LEN];

	progress_end(&((struct progress *)arg)->shown);
	keep_subvol(arg, name, uuid, parent_uuid);
	/*
	 * Where btrfs receive prints them, which its scripts read; "At
	 * snapshot" on stderr when stdout holds the JSON object.
	 */
	if (!parent_uuid || ((struct progress *)arg)->json)
		verbose(0, "At %s %s", parent_uuid ? "snapshot" : "subvol",
			name);
	else if (global_opts.verbose >= 0 &&
		 (printf("%sAt snapshot %s\n", line_start(stdout), name) < 0 ||
		  fflush(stdout)))
		print_error("cannot write to stdout: %s", strerror(errno));
	if (global_opts.verbose < 1)
		return;
	uuid_format(u, uuid);
	if (!parent_uuid) {
		verbose(1, "receiving subvol %s uuid=%s, stransid=%llu", name,
			u, (unsigned long long)ctransid);
		return;
	}
	uuid_format(p, parent_uuid);
	verbose(1,
		"receiving snapshot %s uuid=%s, ctransid=%llu parent_uuid=%s, parent_ctransid=%llu",
		name, u, (unsigned long long)ctransid, p,
		(unsigned long long)parent_ctransid);
}

/* Under -v: what the receive took that a stricter one would not. */
static void show_note(const char *what, void *arg)
{
	progress_end(&((struct progress *)arg)->shown);
	verbose(1, "%s", what);
}

/* A receive -s refused: NAME's partial, kept, is resumed or dropped. */
static void show_partial_refused(const char *dest, const char *name)
{
	print_error(
		"a partial receive of %s is kept in %s: resume it with encio send -t \"$(encio receive --resume-token %s/%s)\", or drop it with encio receive --abort %s/%s",
		name, dest, dest, name, dest, name);
}

/*
 * One "ERROR: " line per failure: btrfs receive's words first (scripts
 * match them), then where in the stream and why; after the progress line
 * @arg has drawn, if any.
 */
static void show_error(const struct encio_error *e, const char *summary,
		       void *arg)
{
	struct progress *progress = arg;

	if (progress)
		progress_end(&progress->shown);
	if (progress && progress->ctx && e->err == EEXIST &&
	    receive_get_stats(progress->ctx)->partial_refused[0]) {
		show_partial_refused(
			progress->dest,
			receive_get_stats(progress->ctx)->partial_refused);
		return;
	}
	if (!summary) {
		print_encio_error(e);
		return;
	}
	if (e->has_offset)
		print_error("%s (cannot %s '%s' at offset %llu)", summary,
			    e->op, e->path, (unsigned long long)e->offset);
	else
		print_error("%s (cannot %s '%s')", summary, e->op, e->path);
}

/* As btrfs receive -C says it (before it, here: the receive does it). */
static void show_chroot(const char *dest)
{
	char *full = realpath(dest, NULL);

	verbose(0, "Chroot to %s", full ? full : dest);
	free(full);
}

struct receive_args {
	struct receive_options opts;
	const char *file;
	bool dump;
	bool progress;		  /* --progress */
	int json;		  /* --format=json */
	const char *resume_token; /* --resume-token */
	const char *abort;	  /* --abort */
	const char *state;	  /* --state */
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
		{ "no-root-nocow", no_argument, NULL, OPT_NO_ROOT_NOCOW },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "resumable", no_argument, NULL, 's' },
		{ "checkpoint", required_argument, NULL, OPT_CHECKPOINT },
		{ "resume-token", required_argument, NULL, OPT_RESUME_TOKEN },
		{ "abort", required_argument, NULL, OPT_ABORT },
		{ "state", required_argument, NULL, OPT_STATE },
		COMMON_LONG_OPTIONS
	};
	struct receive_options *opts = &args->opts;
	unsigned long long n;
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "f:eCE:m:s",
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
		case OPT_NO_ROOT_NOCOW:
			opts->no_root_nocow = true;
			break;
		case OPT_VERIFY:
			opts->verify = true;
			break;
		case OPT_PROGRESS:
			args->progress = true;
			break;
		case 's':
			opts->resumable = true;
			opts->keep_on_enospc = true;
			break;
		case OPT_CHECKPOINT:
			if (parse_size(optarg, &opts->checkpoint_bytes) ||
			    !opts->checkpoint_bytes)
				return usage_error(cmd,
						   "bad checkpoint size '%s'",
						   optarg);
			break;
		case OPT_RESUME_TOKEN:
			args->resume_token = optarg;
			break;
		case OPT_STATE:
			args->state = optarg;
			break;
		case OPT_ABORT:
			args->abort = optarg;
			break;
		default:
			if (common_option(cmd, opt, &args->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (!!args->resume_token + !!args->abort + !!args->state > 1)
		return usage_error(
			cmd, "one of --resume-token, --abort and --state");
	if (args->resume_token || args->abort || args->state)
		return argc != optind ?
			       usage_error(cmd, "--%s takes no destination",
					   args->abort ? "abort" :
					   args->state ? "state" :
							 "resume-token") :
			       0;
	if (args->dump && argc != optind)
		return usage_error(cmd, "--dump takes no destination");
	if (args->dump && (args->progress || args->json))
		return usage_error(
			cmd, "--dump prints commands, no progress nor summary");
	if (!args->dump && argc - optind != 1)
		return usage_error(cmd, "need exactly one destination");
	return 0;
}

/*
 * SIGINT and SIGTERM (unless ignored) stop the stream at its next read:
 * with -s the last command applied gets a checkpoint; without, the
 * subvolume in flight gets its name, writable and not received, as btrfs
 * receive leaves it (killed in the middle of giving a finished one its
 * name, a receive would leave that undone). The receive then exits
 * through the signal.
 */
static void install_signals(struct receive_options *opts)
{
	stop_signals_install();
	opts->stop = &stop_signal;
}

/* The partials --resume-token DEST lists, sorted by name. */
struct partials {
	struct receive_partial *v;
	size_t nr;
};

static int keep_partial(const struct receive_partial *partial, void *arg)
{
	struct partials *l = arg;
	struct receive_partial *v;

	v = realloc(l->v, (l->nr + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->v = v;
	v[l->nr] = *partial;
	v[l->nr].name = strdup(partial->name);
	if (!v[l->nr].name)
		return -ENOMEM;
	l->nr++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct receive_partial *)a)->name,
		      ((const struct receive_partial *)b)->name);
}

/* One line each: NAME, bytes received, token (tab-separated); or JSON. */
static void print_partials(const struct partials *l, bool json)
{
	struct json_writer w;
	size_t i;

	if (json) {
		json_init(&w, stdout, 1);
		json_array_begin(&w, NULL);
	}
	for (i = 0; i < l->nr; i++) {
		const struct receive_partial *p = &l->v[i];

		if (!json) {
			if (p->err)
				printf("%s\t-\t-\n", p->name);
			else
				printf("%s\t%llu\t%s\n", p->name,
				       (unsigned long long)p->position,
				       p->token);
			continue;
		}
		json_object_begin(&w, NULL);
		json_string(&w, "name", p->name);
		if (p->err) {
			json_null(&w, "position");
			json_null(&w, "token");
			json_string(&w, "error", strerror(-p->err));
		} else {
			json_u64(&w, "position", p->position);
			json_string(&w, "token", p->token);
		}
		json_object_end(&w);
	}
	if (json)
		json_array_end(&w);
}

/*
 * DEST's partials, where @path is no DEST/NAME of one: a directory
 * holding none is an error but for JSON (an empty array).
 */
static int list_partials(const char *path, bool json)
{
	struct partials l = { 0 };
	struct encio_error e;
	size_t i;
	int ret;

	if (receive_partials_each(path, keep_partial, &l, &e)) {
		print_encio_error(&e);
		ret = 1;
		goto out;
	}
	if (l.nr)
		qsort(l.v, l.nr, sizeof(*l.v), by_name);
	if (!l.nr && !json) {
		print_error(
			"no partial receive (receive -s) of '%s', nor in it",
			path);
		ret = 1;
		goto out;
	}
	print_partials(&l, json);
	for (i = 0; i < l.nr && !l.v[i].err; i++)
		;
	if (i < l.nr)
		print_error("a partial in '%s' changed since its record: %s",
			    path, strerror(-l.v[i].err));
	ret = fflush(stdout) || i < l.nr ? 1 : 0;
out:
	for (i = 0; i < l.nr; i++)
		free((void *)l.v[i].name);
	free(l.v);
	return ret;
}

static int print_resume_token(const char *path, bool json)
{
	char token[RESUME_TOKEN_MAX];
	struct encio_error e;
	struct stat st;

	if (receive_resume_token(path, token, &e)) {
		if (e.err == ENOENT && !stat(path, &st) && S_ISDIR(st.st_mode))
			return list_partials(path, json);
		print_encio_error(&e);
		return 1;
	}
	printf("%s\n", token);
	return fflush(stdout) ? 1 : 0;
}

static int abort_partial(const char *path)
{
	struct encio_error e;
	pid_t holder;

	if (!receive_partial_abort(path, &holder, &e)) {
		verbose(0, "dropped the partial receive of %s", path);
		return 0;
	}
	if (e.err == EBUSY)
		print_error(
			"cannot drop the partial receive of '%s': encio receive (pid %d) is receiving it; stop it first",
			path, (int)holder);
	else
		print_encio_error(&e);
	return 1;
}

/*
 * What resumes the receive that stopped, said whatever -q says: the token
 * is read here, where the partial is, and the send runs where the
 * snapshot is (send -t finds it and its parent by the UUIDs the token
 * names).
 */
static void show_resume_hint(const char *dest, const char *name, bool no_space)
{
	char path[PATH_MAX + NAME_MAX + 2], qpath[2 * sizeof(path)],
		qdest[2 * PATH_MAX], rpath[4 * sizeof(path)],
		rdest[4 * PATH_MAX];
	const char *p, *d;

	snprintf(path, sizeof(path), "%s/%s", dest, name);
	p = shell_word(qpath, sizeof(qpath), path);
	d = shell_word(qdest, sizeof(qdest), dest);
	if (no_space)
		fprintf(stderr,
			"%s is full: what arrived is kept; make room in it first, then resume\n",
			dest);
	/* ssh hands its words to the other host's shell: quoted again */
	fprintf(stderr,
		"the partial receive of %s is kept in %s; to resume it, run on the sending host (RECEIVER: this host's name):\n"
		"  encio send -t \"$(ssh RECEIVER encio receive --resume-token %s)\" | ssh RECEIVER encio receive -s %s\n"
		"or, where both run on this host:\n"
		"  encio send -t \"$(encio receive --resume-token %s)\" | encio receive -s %s\n",
		name, dest, shell_word(rpath, sizeof(rpath), p),
		shell_word(rdest, sizeof(rdest), d), p, d);
}

/* A plain receive cut short: what it left, and that -s would keep it. */
static void show_unfinished(const char *dest, const char *name)
{
	fprintf(stderr,
		"%s is left in %s writable and not received; nothing is kept to resume: delete it and receive the whole stream again (with -s, a receive cut short keeps what it received, for encio send -t)\n",
		name, dest);
}

/* A receive without -s received NAME whole: the stale partial went. */
static void show_partial_dropped(const char *name, void *arg)
{
	struct progress *progress = arg;

	progress_end(&progress->shown);
	verbose(0,
		"note: %s received whole: its partial receive (receive -s) kept in %s dropped",
		name, progress->dest);
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
	struct progress progress = { 0 };
	const struct receive_events events = { .subvol = show_subvol,
					       .error = show_error,
					       .note = show_note,
					       .partial_dropped =
						       show_partial_dropped,
					       .arg = &progress };
	struct receive_options *opts = &args.opts;
	const struct encio_probe *p;
	struct stream_reader reader;
	struct receive_ctx *ctx;
	struct encio_error e;
	int fd = STDIN_FILENO, ret;

	/* A usage error exits 1, as btrfs receive's: scripts test for it. */
	ret = parse_receive_options(cmd, argc, argv, &args);
	if (ret)
		return 1;
	if (args.resume_token)
		return print_resume_token(args.resume_token, args.json);
	if (args.abort)
		return abort_partial(args.abort);
	if (args.state)
		return print_subvolumes_state(args.state);
	if (!args.file && isatty(STDIN_FILENO)) {
		print_error(
			"not reading a stream from a terminal: use -f or a pipe");
		return 1;
	}
	if (args.file) {
		fd = open(args.file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			print_error("cannot open '%s': %s", args.file,
				    strerror(errno));
			return 1;
		}
	}
	ret = refuse_compressed_stream(fd, args.file,
				       args.dump ? "encio receive --dump" :
						   "encio receive ...");
	if (ret)
		goto out;
	if (args.dump) {
		ret = receive_dump(fd, args.file ? args.file : "stdin");
		goto out;
	}
	install_signals(opts);
	ret = receive_ctx_new(&ctx, opts, &e);
	if (ret) {
		print_encio_error(&e);
		goto out;
	}
	receive_set_events(ctx, &events);
	progress.ctx = ctx;
	progress.dest = argv[optind];
	if (opts->chroot && global_opts.verbose >= 0)
		show_chroot(argv[optind]);
	progress.json = args.json;
	progress.start = clock_now(); /* the first call shows, as send's */
	progress_line_foreign = stream_from_pipe(fd, &progress.total);
	if (!progress_line_foreign && isatty(STDERR_FILENO))
		args.progress = true;
	if (args.progress && global_opts.verbose >= 0)
		receive_set_progress(ctx, show_progress, &progress);
	ret = receive_stream_open(ctx, &reader, fd,
				  args.file ? args.file : "stdin", &e);
	if (!ret && reader.subvolumes) {
		ret = receive_subvolumes(&reader, argv[optind], opts, &events,
					 args.json);
		free_subvols(&progress);
		receive_ctx_free(ctx);
		stop_signals_reraise();
		goto out;
	}
	if (!ret)
		ret = receive_run_reader(ctx, &reader, fd, NULL, argv[optind],
					 &e);
	if (progress.shown && !ret)
		show_progress_end(receive_get_stats(ctx), &progress);
	progress_end(&progress.shown);
	p = receive_get_probe(ctx);
	if (p && p->write_mode == ENCIO_IO_NONE && !opts->force_decompress)
		print_warning(
			"encoded writes impossible on the destination (%s): decoded in user space",
			strerror(p->write_none_err));
	warn_flags_refused(&receive_get_stats(ctx)->flags_refused);
	if (p)
		verbose(1, "fixed buffers: %s; uring writes on io-wq: %s",
			encio_fixed_state_desc(p->fixed),
			p->write_punted ? "yes" : "no");
	if (ret < 0)
		show_error(&e, receive_error_summary(ctx), &progress);
	if (ret && receive_get_stats(ctx)->partial_kept[0])
		show_resume_hint(argv[optind],
				 receive_get_stats(ctx)->partial_kept,
				 ret < 0 && e.err == ENOSPC);
	else if (ret && receive_get_stats(ctx)->left_unfinished[0])
		show_unfinished(argv[optind],
				receive_get_stats(ctx)->left_unfinished);
	ret = print_summary(ctx, &progress, argv[optind], opts->chroot, ret,
			    clock_now() - progress.start);
	free_subvols(&progress);
	receive_ctx_free(ctx);
	stop_signals_reraise();
out:
	if (args.file)
		close(fd);
	return ret ? 1 : 0;
}
const struct cmd_struct cmd_struct_receive = { "receive", cmd_receive,
					       receive_usage };
