// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: a btrfs send stream (v2) of a tree, compressed extents encoded.
 */
#include <errno.h>
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
#include "json.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "send/send.h"

static const char *const send_usage[] = {
	"encio send [-p PARENT] [-c CLONE_SRC]... [-t TOKEN] [-f FILE] [-n] [-e] [--no-data] [--proto N] [--compressed-data] [--snapshot] [--progress] [--format=text|json] [-q|-v] PATH...",
	"Write a btrfs send stream of each PATH, full or incremental.",
	"",
	"Writes the subvolume or directory tree PATH as a btrfs send stream",
	"(version 2 unless --proto says otherwise) to standard output or FILE,",
	"for 'btrfs receive' or 'encio receive'. A subvolume must be read-only,",
	"as for btrfs send (or use --snapshot); any other directory that may",
	"change is sent live, with a warning. A directory that is not a",
	"subvolume and holds only nested subvolumes is refused.",
	"The received subvolume is named after PATH's last component;",
	"its UUID is PATH's when PATH is a subvolume, else a fresh one. Several",
	"PATHs make several streams one after the other (with -e, one stream),",
	"as btrfs send writes them.",
	"Compressed extents are read with encoded reads and sent as",
	"ENCODED_WRITE, plain data as WRITE, preallocated ranges as FALLOCATE;",
	"holes are skipped. Symlinks are sent as symlinks, never followed; hard",
	"links within PATH stay hard links; a nested subvolume is left out, as",
	"btrfs send leaves it out.",
	"",
	"With -p or -c the stream is incremental and the kernel's own, as btrfs",
	"send --compressed-data -p writes it: renames as renames, data shared",
	"with PARENT or a clone source as CLONE, unchanged extents not at all,",
	"the data that changed with compressed extents encoded. PATH, PARENT",
	"and every CLONE_SRC must be read-only subvolumes of one file system,",
	"and the receiving side must have PARENT and the clone sources (found",
	"by UUID).",
	"",
	"When standard error is a terminal, or with --progress, it shows the",
	"stream's bytes sent of its size (found first as -n finds it), the rate",
	"and the time left; the size goes in the stream too, for encio",
	"receive's progress. Where 'encio send | encio receive'",
	"share a terminal, send draws it: receive reading from a pipe draws only",
	"with --progress. The summary at the end is a line on standard error, or",
	"with --format=json one JSON object: on standard output with -f FILE, on",
	"standard error (its last line) when the stream goes to standard output.",
	"",
	"-p|--parent PARENT  send the difference from the read-only snapshot",
	"               PARENT (one -p at most); PARENT is a clone source too",
	"-c|--clone-src CLONE_SRC  data shared with the read-only subvolume",
	"               CLONE_SRC is sent as CLONE; repeatable. Without -p the parent is",
	"               chosen among the clone sources as btrfs send does: the",
	"               subvolume PATH was snapshotted from, else the snapshot of",
	"               that subvolume nearest to it in time; each PATH sent",
	"               becomes a clone source for the next",
	"-f|--file FILE write the stream to FILE instead of standard output;",
	"               FILE gets its name only once the stream is whole",
	"-t|--resume TOKEN  resume a receive -s that stopped short: TOKEN is",
	"               'encio receive --resume-token DEST/NAME's. Sent: what the",
	"               receiver lacks, after the point it reached (the stream",
	"               regenerated up to it must be the one it received, else",
	"               nothing is sent); PATHs before the one it names are taken",
	"               as received. Without PATH, the snapshot is found by UUID",
	"               in the mounted btrfs filesystems, and without -p, the",
	"               parent as well; -c as the first send had it",
	"-n|--dry-run   write no stream: print what the send would move (files,",
	"               logical and encoded bytes, clones, the stream's size) on",
	"               standard output. An incremental send runs the kernel's",
	"               pass and counts it; a full send counts from the files'",
	"               extents, reading no file data",
	"-e             several PATHs make one stream, END after the last only",
	"               (btrfs receive -e stops at an END)",
	"--no-data      the stream without file data, as the kernel makes it:",
	"               UPDATE_EXTENT (path, offset, length) where data would go",
	"               (btrfs send --no-data)",
	"--proto N      stream version N: 2 (the default), 1 (data decoded, no",
	"               ENCODED_WRITE nor FALLOCATE, holes written as zeros), or",
	"               0 for the highest the kernel supports",
	"--compressed-data  accepted for btrfs send's sake: compressed extents",
	"               always go encoded from version 2 on",
	"--subvolumes   PATH and every subvolume below it, snapshots as",
	"               differences, writable ones from read-only snapshots,",
	"               in one stream for 'encio receive DEST', which makes",
	"               PATH's copy at DEST as 'encio copy -rT --subvolumes'",
	"               does (btrfs receive refuses it); one PATH, -f, --state,",
	"               --format, -q, -v only",
	"--state FILE   with --subvolumes: what DEST holds, as 'encio receive",
	"               --state DEST' printed it (- for standard input): those",
	"               subvolumes are not sent again, the others as differences",
	"               from them where they are relatives; DEST's copies of",
	"               subvolumes SRC no longer has are listed",
	"--delete-extra with --state: those copies named in the stream, for the",
	"               receiver to delete the ones encio received, unchanged",
	"--snapshot     send from a temporary read-only snapshot of each",
	"               subvolume PATH (one point in time), deleted afterwards,",
	"               also after an error, SIGINT or SIGTERM",
	"--progress     show progress even when standard error is not a terminal",
	"--format=text|json  the summary as a line (text) or one JSON object",
	"               (standard output with -f FILE, else standard error)",
	"-q|--quiet     no progress, no summary line (a JSON object still)",
	"-v|--verbose   name each PATH first (At subvol PATH)",
	"-h|--help      this help",
	NULL
};

enum {
	OPT_SNAPSHOT = OPT_HELP + 1,
	OPT_NO_DATA,
	OPT_PROTO,
	OPT_COMPRESSED_DATA,
	OPT_PROGRESS,
	OPT_SUBVOLUMES,
	OPT_STATE,
	OPT_DELETE_EXTRA,
};

/* What the command line asks of the command itself, beyond the send. */
struct send_args {
	const char *file;	    /* -f */
	bool progress;		    /* --progress, or stderr a terminal */
	bool dry_run;		    /* -n */
	struct resume_point resume; /* -t's point */
	char found[2][PATH_MAX];    /* PATH and PARENT found by UUID */
	int json;		    /* --format=json */
	FILE *json_out;		  /* where it goes: not where the stream goes */
	const char *const *paths; /* the PATHs sent, for the JSON */
	size_t nr;
	const char *parent; /* -p, or the parent the token names */
	bool subvolumes;    /* --subvolumes */
	const char *state;  /* --state, with --subvolumes */
	bool delete_extra;  /* --delete-extra, with --state */
};

/* What the kernel's send supports, as btrfs send reads it; 1 if unsaid. */
static unsigned int proto_supported(void)
{
	FILE *f = fopen("/sys/fs/btrfs/features/send_stream_version", "r");
	unsigned int v = 1;

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 1;
		fclose(f);
	}
	return v;
}

/*
 * SIGINT and SIGTERM stop the send cleanly; a reader gone is EPIPE, an
 * error like any other, not SIGPIPE: either way the snapshot and the
 * temporary stream are removed.
 */
static void install_signals(void)
{
	stop_signals_install();
	signal(SIGPIPE, SIG_IGN);
}

/*
 * Refuse a writable subvolume as btrfs send does, before any output; warn
 * once for each PATH that may change while it is sent.
 */
static int check_sources(const char *const *paths, size_t nr, bool kernel)
{
	enum send_source kind;
	struct encio_error e;
	size_t i;

	for (i = 0; i < nr; i++) {
		if (send_check_path(paths[i], &e) ||
		    send_source_kind(paths[i], &kind, &e)) {
			print_encio_error(&e);
			return 1;
		}
		if (kind == SEND_SOURCE_WRITABLE_SUBVOL) {
			print_error(
				"subvolume %s is not read-only: send a read-only snapshot of it, or use --snapshot",
				paths[i]);
			return 1;
		}
		if (kind == SEND_SOURCE_LIVE && kernel) {
			print_error(
				"subvolume %s is not read-only: -p, -c, --no-data and --proto 1 send read-only subvolumes",
				paths[i]);
			return 1;
		}
		if (kind == SEND_SOURCE_LIVE)
			print_warning(
				"%s is not a read-only subvolume: sent live, not as of one point in time",
				paths[i]);
	}
	return 0;
}

struct progress {
	double start;
	double last;
	bool shown;
};

static void show_progress(const struct send_stats *s, void *arg)
{
	char done[PRETTY_SIZE_LEN], total[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN], eta[32];
	struct progress *p = arg;
	double t = clock_now(), bps;

	if (t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	progress_line_up = true;
	bps = t > p->start ? s->bytes_done / (t - p->start) : 0;
	/* the estimate comes from a thread beside the send: not yet */
	if (!s->bytes_total) {
		fprintf(stderr, "\r%s, %s/s\033[K",
			pretty_size(done, s->bytes_done),
			pretty_size(rate, (unsigned long long)bps));
		return;
	}
	format_eta_of(eta, sizeof(eta), t - p->start, s->bytes_done,
		      s->bytes_total);
	fprintf(stderr, "\r%s of %s, %s/s, ETA %s\033[K",
		pretty_size(done, s->bytes_done),
		pretty_size(total, s->bytes_total),
		pretty_size(rate, (unsigned long long)bps), eta);
}

/*
 * The reads' mode, and for uring-fixed what the kernel does with the
 * flag, in copy's words.
 */
static void format_read_mode(char *buf, size_t len, const struct send_stats *s)
{
	if (s->read_mode == ENCIO_IO_URING_FIXED && s->probed)
		snprintf(buf, len, "%s (fixed buffers: %s)",
			 encio_io_mode_name(s->read_mode),
			 encio_fixed_state_desc(s->probe.fixed));
	else
		snprintf(buf, len, "%s", encio_io_mode_name(s->read_mode));
}

/*
 * The kernel's stream (an incremental) also says what it removed and its
 * commands: one that only changes what exists creates nothing.
 */
static void print_summary_text(const struct send_stats *s, double seconds)
{
	char logical[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		stream[PRETTY_SIZE_LEN], changes[96], mode[96];

	changes[0] = '\0';
	if (s->commands)
		snprintf(changes, sizeof(changes),
			 " new, %llu removed, in %llu commands",
			 (unsigned long long)s->removed,
			 (unsigned long long)s->commands);
	format_read_mode(mode, sizeof(mode), s);
	fprintf(stderr,
		"sent %llu files, %llu directories, %llu other%s: %s logical, %s encoded in %llu extents; stream %s; io read %s; %.3fs\n",
		(unsigned long long)s->files, (unsigned long long)s->dirs,
		(unsigned long long)s->others, changes,
		pretty_size(logical, s->bytes_logical),
		pretty_size(encoded, s->bytes_encoded),
		(unsigned long long)s->extents_encoded,
		pretty_size(stream, s->stream_bytes), mode, seconds);
	if (s->clones)
		fprintf(stderr,
			"shared: %llu range%s sent as CLONE of data sent before, %s not sent again\n",
			(unsigned long long)s->clones,
			s->clones == 1 ? "" : "s",
			pretty_size(logical, s->clone_bytes));
}

/* send -n: what the send would move. */
static void print_estimate(FILE *out, const struct send_stats *s)
{
	char stream[PRETTY_SIZE_LEN], logical[PRETTY_SIZE_LEN],
		encoded[PRETTY_SIZE_LEN], cloned[PRETTY_SIZE_LEN];

	fprintf(out,
		"would send %s of stream: %s logical (%s encoded in %llu extents), %llu files, %llu directories, %llu other; %llu ranges as CLONE (%s)\n",
		pretty_size(stream, s->stream_bytes),
		pretty_size(logical, s->bytes_logical),
		pretty_size(encoded, s->bytes_encoded),
		(unsigned long long)s->extents_encoded,
		(unsigned long long)s->files, (unsigned long long)s->dirs,
		(unsigned long long)s->others, (unsigned long long)s->clones,
		pretty_size(cloned, s->clone_bytes));
}

/* A subvolume's UUID of @path's, where it has one */
static void json_uuid_member(struct json_writer *w, const char *key,
			     const uint8_t *uuid)
{
	char text[UUID_TEXT_LEN];

	if (uuid_is_zero(uuid))
		return;
	uuid_format(text, uuid);
	json_string(w, key, text);
}

/*
 * Each PATH by its name in the stream and its UUIDs: null where it is not
 * a subvolume (its stream has a UUID of its own); its received UUID where
 * it was received; -p's UUID.
 */
static void json_subvolumes(struct json_writer *w, const struct send_args *a)
{
	struct subvol_uuids u, parent;
	bool has_parent = a->parent && !subvol_uuids_of(a->parent, &parent);
	size_t i, len;
	char *name;

	json_array_begin(w, "subvolumes");
	for (i = 0; i < a->nr; i++) {
		len = path_trimmed_len(a->paths[i]);
		name = strndup(a->paths[i], len);
		json_object_begin(w, NULL);
		json_string(w, "path", a->paths[i]);
		json_string(w, "name",
			    name && strrchr(name, '/') ?
				    strrchr(name, '/') + 1 :
				    name);
		free(name);
		if (subvol_uuids_of(a->paths[i], &u)) {
			json_null(w, "uuid");
		} else {
			json_uuid_member(w, "uuid", u.uuid);
			json_uuid_member(w, "received_uuid", u.received_uuid);
		}
		if (has_parent)
			json_uuid_member(w, "parent_uuid", parent.uuid);
		json_object_end(w);
	}
	json_array_end(w);
}

/*
 * Every counter of the send, under the names encio(8)'s other JSON uses
 * for the same things (copy's logical_bytes, encoded_bytes, io_read,
 * fixed_buffers). -n sends nothing: done_bytes 0. A resumed send's
 * counts, like its stream, are of what followed resumed_at, the byte of
 * the uncut stream it resumed at.
 */
static void print_summary_json(FILE *out, const struct send_args *a,
			       const struct send_stats *s, double seconds)
{
	struct json_writer w;

	json_init(&w, out, 0);
	json_object_begin(&w, NULL);
	json_bool(&w, "dry_run", a->dry_run);
	json_subvolumes(&w, a);
	json_u64(&w, "files", s->files);
	json_u64(&w, "dirs", s->dirs);
	json_u64(&w, "others", s->others);
	json_u64(&w, "removed", s->removed);
	json_u64(&w, "commands", s->commands);
	json_u64(&w, "logical_bytes", s->bytes_logical);
	json_u64(&w, "encoded_bytes", s->bytes_encoded);
	json_u64(&w, "extents_encoded", s->extents_encoded);
	json_u64(&w, "clones", s->clones);
	json_u64(&w, "clone_bytes", s->clone_bytes);
	json_u64(&w, "stream_bytes", s->stream_bytes);
	json_u64(&w, "total_bytes", s->bytes_total);
	json_u64(&w, "done_bytes", a->dry_run ? 0 : s->bytes_done);
	json_u64(&w, "estimated_bytes", s->bytes_estimated);
	/* the token's point counts the commands only: here, the bytes */
	json_u64(&w, "resumed_at",
		 s->resumed_at ? s->resumed_at + BTRFS_SEND_STREAM_HEADER_LEN :
				 0);
	json_string(&w, "io_read", encio_io_mode_name(s->read_mode));
	json_string(&w, "fixed_buffers",
		    encio_fixed_state_desc(s->probed ? s->probe.fixed :
						       ENCIO_FIXED_UNKNOWN));
	json_double(&w, "seconds", seconds, 6);
	json_object_end(&w);
}

FILE *send_json_output(const struct send_output *out, const char *file)
{
	struct stat a, b;

	if (!file || fstat(out->fd, &a) || fstat(STDOUT_FILENO, &b) ||
	    (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return stderr;
	return stdout;
}

/*
 * "At subvol PATH", btrfs send's line its scripts read: as btrfs-send unless
 * -q, as encio send with -v (its summary names what was sent).
 */
static bool say_at_subvol(void)
{
	return global_opts.progs_names ? global_opts.verbose >= 0 :
					 global_opts.verbose > 0;
}

/*
 * The summary: as btrfs-send with -v only, btrfs send having none. A
 * summary nobody got is an error: a script would take the send for done.
 */
static int print_summary(const struct send_args *args,
			 const struct send_stats *s, double seconds)
{
	FILE *f = args->json ? args->json_out : args->dry_run ? stdout : stderr;

	if (args->json)
		print_summary_json(f, args, s, seconds);
	else if (args->dry_run && global_opts.verbose >= 0)
		print_estimate(f, s);
	else if (global_opts.progs_names ? global_opts.verbose > 0 :
					   global_opts.verbose >= 0)
		print_summary_text(s, seconds);
	return summary_flush(f);
}

/* -p and -c name read-only subvolumes, as btrfs send checks. */
static int check_read_only(const char *path, const char *what)
{
	enum send_source kind;
	struct encio_error e;

	if (send_source_kind(path, &kind, &e)) {
		print_encio_error(&e);
		return 1;
	}
	if (kind != SEND_SOURCE_FROZEN) {
		print_error("%s subvolume %s is not read-only", what, path);
		return 1;
	}
	return 0;
}

static int add_clone(struct send_options *opts, const char *path)
{
	const char **clones = realloc((void *)opts->clones,
				      (opts->nr_clones + 1) * sizeof(*clones));

	if (!clones) {
		print_error("out of memory");
		return 1;
	}
	clones[opts->nr_clones++] = path;
	opts->clones = clones;
	return 0;
}

static int parse_proto(const struct cmd_struct *cmd, const char *arg,
		       struct send_options *opts, bool *given)
{
	unsigned int supported = proto_supported();
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-')
		return usage_error(cmd, "invalid protocol version '%s'", arg);
	if (v > UINT32_MAX) {
		print_error("protocol version number too big %llu", v);
		return 1;
	}
	if (v > supported) {
		print_error(
			"requested version %llu but kernel supports only %u", v,
			supported);
		return 1;
	}
	opts->proto = v ? (uint32_t)v : supported;
	*given = true;
	return 0;
}

static int parse_send_options(const struct cmd_struct *cmd, int argc,
			      char **argv, struct send_options *opts,
			      struct send_args *args)
{
	static const struct option long_options[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "resume", required_argument, NULL, 't' },
		{ "parent", required_argument, NULL, 'p' },
		{ "clone-src", required_argument, NULL, 'c' },
		{ "snapshot", no_argument, NULL, OPT_SNAPSHOT },
		{ "no-data", no_argument, NULL, OPT_NO_DATA },
		{ "proto", required_argument, NULL, OPT_PROTO },
		{ "compressed-data", no_argument, NULL, OPT_COMPRESSED_DATA },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "subvolumes", no_argument, NULL, OPT_SUBVOLUMES },
		{ "state", required_argument, NULL, OPT_STATE },
		{ "delete-extra", no_argument, NULL, OPT_DELETE_EXTRA },
		COMMON_LONG_OPTIONS
	};
	bool compressed = false, proto_given = false;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "f:p:c:ent:",
				  long_options, NULL)) != -1) {
		switch (opt) {
		case 'f':
			args->file = optarg;
			break;
		case 'p':
			if (opts->parent) {
				print_error(
					"you cannot have more than one parent (-p)");
				return 1;
			}
			if (check_read_only(optarg, "parent"))
				return 1;
			opts->parent = optarg;
			break;
		case 'c':
			if (check_read_only(optarg, "cloned") ||
			    add_clone(opts, optarg))
				return 1;
			break;
		case 'e':
			opts->one_stream = true;
			break;
		case 'n':
			opts->estimate = true;
			args->dry_run = true;
			break;
		case 't':
			if (resume_token_decode(optarg, &args->resume)) {
				print_error(
					"not a resume token (or a corrupt one): '%s'",
					optarg);
				return 1;
			}
			opts->resume = &args->resume;
			break;
		case OPT_SNAPSHOT:
			opts->snapshot = true;
			break;
		case OPT_NO_DATA:
			opts->no_data = true;
			break;
		case OPT_PROTO:
			ret = parse_proto(cmd, optarg, opts, &proto_given);
			if (ret)
				return ret;
			break;
		case OPT_COMPRESSED_DATA:
			compressed = true;
			break;
		case OPT_PROGRESS:
			args->progress = true;
			break;
		case OPT_SUBVOLUMES:
			args->subvolumes = true;
			break;
		case OPT_STATE:
			args->state = optarg;
			break;
		case OPT_DELETE_EXTRA:
			args->delete_extra = true;
			break;
		default:
			if (common_option(cmd, opt, &args->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (args->subvolumes &&
	    (opts->parent || opts->nr_clones || opts->one_stream ||
	     opts->estimate || opts->resume || opts->snapshot ||
	     opts->no_data || proto_given))
		return usage_error(
			cmd,
			"--subvolumes takes one PATH, -f, --format, -q and -v only");
	if (args->state && !args->subvolumes)
		return usage_error(cmd, "--state goes with --subvolumes");
	if (args->delete_extra && !args->state)
		return usage_error(
			cmd, "--delete-extra goes with --subvolumes --state");
	if (args->subvolumes && argc - optind != 1)
		return usage_error(cmd, "--subvolumes takes one PATH");
	if (compressed && proto_given && opts->proto == 1) {
		print_error(
			"--compressed-data requires protocol version >= 2 (requested 1)");
		return 1;
	}
	if (argc - optind < 1 && !opts->resume)
		return usage_error(cmd, "need a path");
	if (args->dry_run && args->file)
		return usage_error(cmd, "-n writes no stream: leave out -f %s",
				   args->file);
	if (global_opts.verbose < 0 || args->dry_run)
		args->progress = false;
	return 0;
}

/*
 * -t without PATH: the snapshot the token names, found by UUID (and its
 * parent without -p), in args->found: the one PATH.
 */
static int find_resumed(struct send_args *args, struct send_options *opts)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];
	const struct resume_point *p = &args->resume;

	if (subvol_find_by_uuid(p->uuid, p->ctransid, args->found[0],
				sizeof(args->found[0]))) {
		print_error(
			"resume: no mounted subvolume is the snapshot the token names (subvolume %s, ctransid %llu): it was deleted or changed since, or give its PATH",
			p->name, (unsigned long long)p->ctransid);
		return 1;
	}
	if (opts->parent || opts->nr_clones ||
	    !memcmp(p->parent_uuid, zero, BTRFS_UUID_SIZE))
		return 0;
	if (subvol_find_by_uuid(p->parent_uuid, p->parent_ctransid,
				args->found[1], sizeof(args->found[1]))) {
		print_error(
			"resume: no mounted subvolume is the parent the token names: give it with -p");
		return 1;
	}
	opts->parent = args->found[1];
	return check_read_only(opts->parent, "parent");
}

/*
 * -f FILE stopped short: what was written kept, and the command that
 * goes on, with this send's parent, clone sources and PATHs.
 */
static void keep_partial(struct send_output *out, const char *file,
			 const struct send_options *opts,
			 const char *const *paths, size_t nr)
{
	char kept[NAME_MAX + 1], part[PATH_MAX];
	const char *slash = strrchr(file, '/');
	size_t i;

	if (send_output_keep(out, kept))
		return;
	snprintf(part, sizeof(part), "%.*s%s",
		 slash ? (int)(slash - file) + 1 : 0, file, kept);
	fprintf(stderr,
		"the stream written so far is kept in %s; to resume it:\n"
		"  encio send -t \"$(encio stream-cut '%s')\"",
		part, part);
	if (opts->parent)
		fprintf(stderr, " -p '%s'", opts->parent);
	for (i = 0; i < opts->nr_clones; i++)
		fprintf(stderr, " -c '%s'", opts->clones[i]);
	for (i = 0; i < nr; i++)
		fprintf(stderr, " '%s'", paths[i]);
	fprintf(stderr, " >> '%s' && mv '%s' '%s'\n", part, part, file);
}

/*
 * What copy says of its reads, said of the send's (a walked tree's); of
 * a tree not on btrfs, plain reads lose nothing: no warning.
 */
static void say_probe(const struct send_stats *s)
{
	if (!s->probed)
		return;
	if (s->probe.read_none_err != ENOTTY)
		warn_encoded_reads(&s->probe, "sending plain data");
	verbose_fixed_buffers(&s->probe);
}

static int cmd_send(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct send_options opts = { .io_mode = global_opts.io_mode,
				     .depth = global_opts.queue_depth };
	struct send_output out = { .fd = STDOUT_FILENO, .dir_fd = -1 };
	struct send_args args = { .progress = isatty(STDERR_FILENO) };
	struct progress progress = { 0 };
	struct send_stats stats;
	struct encio_error e;
	const char *const *paths;
	const char *file, *found;
	bool kernel;
	size_t nr, i;
	int ret;

	ret = parse_send_options(cmd, argc, argv, &opts, &args);
	if (ret)
		goto out;
	if (args.subvolumes) {
		install_signals();
		ret = send_subvolumes(argv[optind], args.file, args.state,
				      args.delete_extra, args.json);
		goto out;
	}
	file = args.file;
	ret = 1;
	paths = (const char *const *)argv + optind;
	nr = (size_t)(argc - optind);
	if (opts.resume && !nr) {
		if (find_resumed(&args, &opts))
			goto out;
		found = args.found[0];
		paths = &found;
		nr = 1;
	}
	if (!file && !args.dry_run && isatty(STDOUT_FILENO)) {
		print_error(
			"not writing a stream to a terminal: use -f or a pipe");
		goto out;
	}
	kernel = opts.parent || opts.nr_clones || opts.no_data ||
		 opts.proto == 1;
	if (!opts.snapshot && check_sources(paths, nr, kernel))
		goto out;
	install_signals();
	opts.stop = &stop_signal;
	if (file) {
		if (send_output_open(&out, file, &e)) {
			print_encio_error(&e);
			goto out;
		}
		if (out.replaces) {
			opts.replaces_dev = out.replaced.st_dev;
			opts.replaces_ino = out.replaced.st_ino;
		}
	}
	args.json_out = args.dry_run ? stdout : send_json_output(&out, file);
	args.paths = paths;
	args.nr = nr;
	args.parent = opts.parent;
	progress.start = clock_now(); /* the first call shows */
	for (i = 0; say_at_subvol() && i < nr; i++)
		fprintf(stderr, "At subvol %s\n", paths[i]);
	if (args.progress) {
		opts.progress = show_progress;
		opts.progress_arg = &progress;
		opts.estimate_reported = args.json;
	}
	ret = send_run(paths, nr, out.fd, file ? file : "stdout", &opts, &stats,
		       &e);
	if (progress.shown && !ret) {
		progress.last = 0; /* the end, 100%, however soon */
		show_progress(&stats, &progress);
	}
	progress_end(&progress.shown);
	say_probe(&stats);
	/* a signal after the last command still leaves no FILE */
	if (!ret && stop_signal)
		ret = encio_error_set(&e, EINTR, "finish (interrupted)",
				      file ? file : "stdout", false, 0);
	if (file && !ret)
		ret = send_output_commit(&out, file, &e);
	if (ret && e.err == EPIPE && !file)
		print_error(
			"the receiver stopped reading the stream (%s): if it was encio receive -s, the receiving side printed how to resume",
			strerror(EPIPE));
	else if (ret)
		print_encio_error(&e);
	if (file && ret && stats.stream_bytes)
		keep_partial(&out, file, &opts, paths, nr);
	else if (file && ret)
		send_output_abort(&out);
	/* JSON also after a failure, with what was sent: the status says. */
	if ((!ret || args.json) &&
	    print_summary(&args, &stats, clock_now() - progress.start))
		ret = 1;
	if (ret)
		stop_signals_reraise();
	ret = ret ? 1 : 0;
out:
	free((void *)opts.clones);
	return ret;
}

const struct cmd_struct cmd_struct_send = { "send", cmd_send, send_usage };
