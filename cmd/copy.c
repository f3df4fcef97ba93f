// SPDX-License-Identifier: GPL-2.0
/*
 * encio copy: copy regular files, compressed extents kept encoded.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "json.h"
#include "base/clock.h"
#include "copy/copy.h"
#include "subvols/copy_subvols.h"
#include "base/fsutil.h"
#include "tree/tree.h"

static const char *const copy_usage[] = {
	"encio copy [options] SRC DEST | SRC... DIR | -r SRC_DIR... DEST | --abort DEST/NAME",
	"Copy files, moving compressed extents without decompressing them.",
	"",
	"Compressed extents are read with encoded reads and written with encoded",
	"writes; where the destination cannot take them (not btrfs, sector size,",
	"no CAP_SYS_ADMIN) they are decoded and written plain. Holes, prealloc",
	"ranges, mode, owner and times are kept. Each file is written under a",
	"temporary name and renamed into place when complete.",
	"",
	"With -r, whole trees: directories, files, symlinks, hard links, FIFOs,",
	"device nodes, xattrs, owners, modes and times, many files in flight in",
	"one pipeline. A new tree is built as .NAME.encio-partial beside its",
	"final name and renamed into place once written and synced; a rerun",
	"onto an interrupted copy resumes it, skipping what is complete.",
	"",
	"With --compress, plain data (from any filesystem) is compressed in user",
	"space in chunks of 128 KiB and written with encoded writes; a chunk",
	"that does not save a sector is written plain, as the kernel does.",
	"Compressed source extents are kept as they are unless --recompress.",
	"",
	"-r|--recursive       copy directories and their contents",
	"--subvolumes         with -r: each subvolume below SRC made a subvolume,",
	"                     snapshots as snapshots, read-only flags and",
	"                     received UUIDs kept, in the order of their",
	"                     generations (see encio-copy(8))",
	"--final              with --subvolumes: the last run of a move; the",
	"                     snapshots kept in SRC as the next run's bases",
	"                     (.NAME.encio-base) are deleted at its end if",
	"                     every subvolume was copied; the subvolumes of the",
	"                     copy at paths where SRC has none are listed",
	"--delete-extra       with --final: of those, the read-only ones encio",
	"                     made of subvolumes SRC no longer has (snapshots",
	"                     deleted in SRC) are deleted; others only listed",
	"--no-root-nocow      with --subvolumes: nocow (C) left off each",
	"                     subvolume's root directory, for 'btrfs receive' of",
	"                     later differences (see encio-copy(8))",
	"--abort DEST/NAME    drop what a stopped copy --subvolumes kept of its",
	"                     copy at DEST/NAME to go on with (its partial",
	"                     subvolume or partial receive), nothing else",
	"--checkpoint SIZE    with --subvolumes: a subvolume received as a",
	"                     difference keeps a checkpoint every SIZE of stream",
	"                     (default 1G) or 10 s, where a rerun goes on",
	"--compress=ALG[:LEVEL]  compress plain data: zstd (1..15), zlib (1..9),",
	"                     lzo; level 3 by default (needs encoded writes)",
	"--recompress=ALG[:LEVEL]  decode compressed extents, encode them again",
	"--threads N          codec worker threads (default: one per CPU)",
	"--verify             after each file, compare every byte of the copy with",
	"                     the source (read encoded where the filesystem allows,",
	"                     compressed extents decoded), else discard the copy",
	"--verify-only        copy nothing: compare existing copies with their",
	"                     sources, every byte (-r: trees; -T as for a copy)",
	"-j|--jobs N          files in flight with -r (default 256)",
	"-T|--no-target-directory  DEST is the copy even if it exists (-r), or",
	"                     the file to write, never a directory to copy into",
	"-d|--queue-depth QD  requests in flight (default 32)",
	"--progress           show progress even when stderr is not a terminal",
	"-v|--verbose         say more (probe results, buffers, backends)",
	"-q|--quiet           no progress, no summary",
	"--format=text|json   summary format",
	"-h|--help            this help",
	NULL
};

struct copy_cmd {
	struct copy_ctx *ctx;
	uint64_t files; /* copied: by copy_file(), or the trees' */
	struct copy_options opts;
	int json;
	double seconds;
	int failed;
	bool recursive;
	bool no_target_dir;
	bool progress;
	bool verify_only;
	bool subvolumes;
	bool final;		   /* --final */
	bool delete_extra;	   /* --delete-extra */
	uint64_t checkpoint_bytes; /* --checkpoint */
	bool no_root_nocow;	   /* --no-root-nocow */
	unsigned int jobs;
	struct tree_stats tree;
	struct subvols_stats subvols;
	double start;
	double last_progress;
	bool progress_shown;
	uint64_t total_bytes; /* without -r: the sizes of the files */
	unsigned int file_index, nr_files;
	char **kept; /* staging directories a stopped copy keeps */
	size_t nr_kept;
	char *in_flight;   /* --subvolumes: the copy begun last */
	const char *abort; /* --abort */
};

enum {
	OPT_PROGRESS = OPT_HELP + 1,
	OPT_COMPRESS,
	OPT_RECOMPRESS,
	OPT_VERIFY,
	OPT_VERIFY_ONLY,
	OPT_THREADS,
	OPT_SUBVOLUMES,
	OPT_FINAL,
	OPT_CHECKPOINT,
	OPT_NO_ROOT_NOCOW,
	OPT_DELETE_EXTRA,
	OPT_ABORT,
};

static void print_probe(const struct copy_ctx *ctx)
{
	const struct encio_probe *p = copy_ctx_probe(ctx);
	char size[PRETTY_SIZE_LEN];
	struct copy_buffers b;
	int m;

	copy_ctx_buffers(ctx, &b);
	verbose(1,
		"buffers: %u slots of %zu KiB on %s, %s registered with io_uring",
		b.nr_slots, b.slot_size / 1024, b.backing,
		b.registered ? pretty_size(size, b.registered_bytes) : "none");
	verbose(1, "ring: %s%s", b.ring ? "io_uring" : "unavailable",
		b.defer_taskrun ? " with SINGLE_ISSUER|DEFER_TASKRUN" : "");
	for (m = ENCIO_IO_URING_FIXED; m <= ENCIO_IO_IOCTL; m++)
		verbose(1, "probe %-11s read: %-14s write: %s",
			encio_io_mode_name(m),
			p->read_err[m] < 0 ? "not tried" :
			p->read_err[m]	   ? strerror(p->read_err[m]) :
					     "works",
			p->write_err[m] < 0 ? "not tried" :
			p->write_err[m]	    ? strerror(p->write_err[m]) :
					      "works");
	verbose_fixed_buffers(p);
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
		warn_encoded_reads(p, "copying plain data");
	else if (p->write_mode == ENCIO_IO_NONE && p->write_none_err == ENOTTY)
		print_warning(
			"the destination is not btrfs: decoding compressed extents in user space");
	else if (p->write_mode == ENCIO_IO_NONE && p->write_none_err != EROFS &&
		 p->write_none_err != EACCES)
		print_warning(
			"encoded writes impossible on the destination (%s): decoding in user space",
			strerror(p->write_none_err));
}

static void print_tree_summary_text(const struct copy_cmd *c)
{
	const struct tree_stats *t = &c->tree;

	printf("tree: %llu files, %llu directories, %llu symlinks, %llu hard links, %llu special, %llu skipped (already complete), %llu metadata updated, %llu failed\n",
	       (unsigned long long)t->files, (unsigned long long)t->dirs,
	       (unsigned long long)t->symlinks,
	       (unsigned long long)t->hardlinks,
	       (unsigned long long)t->specials, (unsigned long long)t->skipped,
	       (unsigned long long)t->meta_updated,
	       (unsigned long long)t->failed);
}

/* What --verify-only compared, entries first. */
static void print_verify_entries_text(const struct verify_stats *s)
{
	printf("verified: %llu file%s, %llu director%s, %llu symlink%s, %llu special file%s equal to their sources; %llu failed\n",
	       (unsigned long long)s->files, s->files == 1 ? "" : "s",
	       (unsigned long long)s->dirs, s->dirs == 1 ? "y" : "ies",
	       (unsigned long long)s->symlinks, s->symlinks == 1 ? "" : "s",
	       (unsigned long long)s->specials, s->specials == 1 ? "" : "s",
	       (unsigned long long)s->failed);
}

/* What file content was compared; the time it took unless @seconds < 0. */
static void print_verify_text(const struct verify_stats *s, double seconds)
{
	char bytes[PRETTY_SIZE_LEN], read[PRETTY_SIZE_LEN],
		holes[PRETTY_SIZE_LEN];

	printf("compared: %s of file content, every byte (%s read from both files, %s holes in both); compressed extents of the copies: %llu identical to the source's encoded bytes, %llu decoded and compared; copies read plain (no encoded reads): %llu",
	       pretty_size(bytes, s->bytes),
	       pretty_size(read, s->bytes - s->hole_bytes),
	       pretty_size(holes, s->hole_bytes),
	       (unsigned long long)s->extents_identical,
	       (unsigned long long)s->extents_decoded,
	       (unsigned long long)s->files_plain);
	if (seconds >= 0)
		printf("; %.3fs", seconds);
	printf("\n");
}

static void json_verify_fields(struct json_writer *w,
			       const struct verify_stats *s)
{
	json_u64(w, "files_verified", s->files);
	json_u64(w, "bytes_compared", s->bytes);
	json_u64(w, "bytes_read", s->bytes - s->hole_bytes);
	json_u64(w, "bytes_holes", s->hole_bytes);
	json_u64(w, "extents_compared_encoded",
		 s->extents_identical + s->extents_decoded);
	json_u64(w, "extents_identical", s->extents_identical);
	json_u64(w, "extents_decoded", s->extents_decoded);
	json_u64(w, "files_read_plain", s->files_plain);
	json_u64(w, "dirs", s->dirs);
	json_u64(w, "symlinks", s->symlinks);
	json_u64(w, "specials", s->specials);
	json_u64(w, "failed", s->failed);
}

static void print_summary_text(const struct copy_cmd *c)
{
	const struct copy_stats *s = copy_ctx_stats(c->ctx);
	const struct encio_probe *p = copy_ctx_probe(c->ctx);
	char logical[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN];
	const struct verify_stats *vs;

	printf("copied %llu file%s: %s logical, %s encoded; extents %llu encoded, %llu decoded, %llu plain ranges, %llu holes, %llu prealloc; io read %s, write %s (fixed buffers: %s); %.3fs, %s/s\n",
	       (unsigned long long)c->files, c->files == 1 ? "" : "s",
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
	if (s->clones)
		printf("shared: %llu range%s cloned from data copied before, %s not written again\n",
		       (unsigned long long)s->clones, s->clones == 1 ? "" : "s",
		       pretty_size(logical, s->clone_bytes));
	if (c->opts.compress.alg || c->opts.recompress.alg)
		printf("compression: %llu chunks compressed, %llu incompressible (plain), %llu extents recompressed; ratio %.1f%% (%s encoded of %s written encoded)\n",
		       (unsigned long long)s->chunks_compressed,
		       (unsigned long long)s->chunks_incompressible,
		       (unsigned long long)s->extents_recompressed,
		       s->encoded_logical ?
			       100.0 * s->encoded_bytes / s->encoded_logical :
			       100.0,
		       pretty_size(encoded, s->encoded_bytes),
		       pretty_size(logical, s->encoded_logical));
	if (c->opts.verify) {
		vs = copy_ctx_verify_stats(c->ctx);
		printf("verified: %llu cop%s equal to %s source%s\n",
		       (unsigned long long)vs->files,
		       vs->files == 1 ? "y" : "ies",
		       vs->files == 1 ? "its" : "their",
		       vs->files == 1 ? "" : "s");
		print_verify_text(vs, -1);
	}
}

/* @e as print_encio_error() says it, without "ERROR: ". */
static void format_encio_error(char *buf, size_t len,
			       const struct encio_error *e)
{
	if (e->err == COPY_ESRCCHANGED)
		snprintf(buf, len, "cannot %s '%s': file changed as we read it",
			 e->op, e->path);
	else if (e->has_offset)
		snprintf(buf, len, "cannot %s '%s' at offset %llu: %s", e->op,
			 e->path, (unsigned long long)e->offset,
			 strerror(e->err));
	else
		snprintf(buf, len, "cannot %s '%s': %s", e->op, e->path,
			 strerror(e->err));
}

/* The subvolumes failed, left out and extra, as JSON members. */
static void json_subvols_problems(struct json_writer *w,
				  const struct subvols_stats *s)
{
	const struct subvols_problem *pb;
	char msg[PATH_MAX + 256];
	size_t i;

	json_array_begin(w, "subvolumes_failed");
	for (i = 0; i < s->nr_problems; i++) {
		pb = &s->problems[i];
		if (!pb->e.err)
			continue;
		format_encio_error(msg, sizeof(msg), &pb->e);
		json_object_begin(w, NULL);
		json_string(w, "path", pb->dst);
		json_string(w, "errno", errno_name(pb->e.err));
		json_string(w, "error", msg);
		json_object_end(w);
	}
	json_array_end(w);
	json_array_begin(w, "subvolumes_left_out");
	for (i = 0; i < s->nr_problems; i++) {
		pb = &s->problems[i];
		if (pb->e.err)
			continue;
		json_object_begin(w, NULL);
		json_string(w, "path", pb->dst);
		json_string(w, "inside", pb->inside);
		json_object_end(w);
	}
	json_array_end(w);
	json_array_begin(w, "subvolumes_extra");
	for (i = 0; i < s->nr_extras; i++) {
		json_object_begin(w, NULL);
		json_string(w, "path", s->extras[i].dst);
		json_bool(w, "deleted", !s->extras[i].kept);
		json_string(w, "kept", s->extras[i].kept);
		if (s->extras[i].err)
			json_string(w, "errno", errno_name(s->extras[i].err));
		json_object_end(w);
	}
	json_array_end(w);
}

static void json_copy_stats(struct json_writer *w, const struct copy_cmd *c)
{
	const struct copy_stats *s = copy_ctx_stats(c->ctx);
	const struct encio_probe *p = copy_ctx_probe(c->ctx);
	struct copy_buffers b;

	json_u64(w, "files", c->files);
	json_i64(w, "failed", c->failed);
	json_u64(w, "logical_bytes", s->logical_bytes);
	json_u64(w, "encoded_bytes", s->encoded_bytes);
	json_u64(w, "extents_encoded", s->extents_encoded);
	json_u64(w, "extents_decoded", s->extents_decoded);
	json_u64(w, "ranges_plain", s->ranges_plain);
	json_u64(w, "holes", s->holes);
	json_u64(w, "prealloc", s->prealloc);
	json_string(w, "io_read", encio_io_mode_name(p->read_mode));
	json_string(w, "io_write", encio_io_mode_name(p->write_mode));
	json_string(w, "fixed_buffers", encio_fixed_state_desc(p->fixed));
	copy_ctx_buffers(c->ctx, &b);
	json_string(w, "buffers", b.backing);
	json_u64(w, "registered_bytes", b.registered_bytes);
	json_double(w, "seconds", c->seconds, 6);
	json_u64(w, "encoded_logical_bytes", s->encoded_logical);
	json_u64(w, "chunks_compressed", s->chunks_compressed);
	json_u64(w, "chunks_incompressible", s->chunks_incompressible);
	json_u64(w, "extents_recompressed", s->extents_recompressed);
	json_u64(w, "extents_verified", s->extents_verified);
	json_u64(w, "clones", s->clones);
	json_u64(w, "clone_bytes", s->clone_bytes);
}

static void json_tree_stats(struct json_writer *w, const struct tree_stats *t)
{
	json_u64(w, "dirs", t->dirs);
	json_u64(w, "symlinks", t->symlinks);
	json_u64(w, "hardlinks", t->hardlinks);
	json_u64(w, "specials", t->specials);
	json_u64(w, "skipped", t->skipped);
	json_u64(w, "meta_updated", t->meta_updated);
	json_u64(w, "peak_files_in_flight", t->peak_files);
	json_u64(w, "ring_waits", t->ring_waits);
	json_u64(w, "walker_waits", t->walker_waits);
}

static void json_subvols_stats(struct json_writer *w,
			       const struct subvols_stats *s)
{
	json_u64(w, "subvolumes", s->total);
	json_u64(w, "subvolumes_copied", s->copied);
	json_u64(w, "subvolumes_incremental", s->incremental);
	json_u64(w, "subvolumes_ahead", s->ahead);
	json_u64(w, "subvolumes_skipped", s->skipped);
	json_u64(w, "subvolumes_replaced", s->replaced);
	json_u64(w, "subvolumes_resumed", s->resumed);
	json_u64(w, "subvolume_entries_complete", s->complete_entries);
	json_u64(w, "subvolume_bytes", s->bytes_written);
	json_u64(w, "subvolume_encoded_bytes", s->encoded_bytes);
	json_u64(w, "subvolume_clones", s->clones);
	json_u64(w, "stream_bytes", s->stream_bytes);
	json_u64(w, "subvolume_bases", s->bases);
	json_subvols_problems(w, s);
}

/* One line: scripts read the summary line by line. */
static void print_summary_json(const struct copy_cmd *c)
{
	struct json_writer w;

	json_init(&w, stdout, 0);
	json_object_begin(&w, NULL);
	json_copy_stats(&w, c);
	if (c->recursive)
		json_tree_stats(&w, &c->tree);
	if (c->subvolumes)
		json_subvols_stats(&w, &c->subvols);
	if (c->opts.verify) {
		json_object_begin(&w, "verify");
		json_verify_fields(&w, copy_ctx_verify_stats(c->ctx));
		json_object_end(&w);
	}
	json_object_end(&w);
}

static void clear_progress(struct copy_cmd *c)
{
	if (c->progress_shown)
		fprintf(stderr, "\r\033[K");
	c->progress_shown = false;
	progress_line_up = false;
}

/*
 * Bytes done of the total, @what (entries or files), rate, and the time
 * left ("--:--" until a second of copying has given a rate to go by); four
 * times a second.
 */
static void show_progress(struct copy_cmd *c, uint64_t done, uint64_t total,
			  const char *what)
{
	char done_s[PRETTY_SIZE_LEN], total_s[PRETTY_SIZE_LEN],
		rate[PRETTY_SIZE_LEN], eta[32];
	double tnow = clock_now(), secs = tnow - c->start, bps;

	if (tnow - c->last_progress < 0.25)
		return;
	c->last_progress = tnow;
	bps = secs > 0 ? done / secs : 0;
	format_eta(eta, sizeof(eta),
		   secs >= 1 && done && total > done ? (total - done) / bps :
						       0);
	fprintf(stderr, "\r\033[K%s of %s, %s, %s/s, ETA %s",
		pretty_size(done_s, done), pretty_size(total_s, total), what,
		pretty_size(rate, bps), eta);
	c->progress_shown = true;
	progress_line_up = true;
}

static void tree_progress(void *arg, const struct tree_stats *t,
			  const struct copy_stats *s)
{
	char what[64];

	snprintf(what, sizeof(what), "%llu of %llu entries",
		 (unsigned long long)t->entries_done,
		 (unsigned long long)t->total_entries);
	show_progress(arg, s->bytes_done, t->total_bytes, what);
}

static void files_progress(void *arg, const struct copy_stats *s)
{
	struct copy_cmd *c = arg;
	char what[64];

	snprintf(what, sizeof(what), "file %u of %u", c->file_index + 1,
		 c->nr_files);
	show_progress(c, s->bytes_done, c->total_bytes, what);
}

/* The sizes of the files to copy, for the progress. */
static uint64_t total_size(char **srcs, int nr_src)
{
	uint64_t total = 0;
	struct stat st;
	int i;

	for (i = 0; i < nr_src; i++)
		if (stat(srcs[i], &st) == 0 && S_ISREG(st.st_mode))
			total += copy_data_bytes(&st);
	return total;
}

/* Whether a summary has anything to say: a copy made or found complete. */
static bool copied_anything(const struct copy_cmd *c)
{
	const struct tree_stats *t = &c->tree;

	return c->files || t->dirs || t->symlinks || t->hardlinks ||
	       t->specials || t->skipped || t->meta_updated;
}

static int parse_copy_options(const struct cmd_struct *cmd, int argc,
			      char **argv, struct copy_cmd *c)
{
	static const struct option long_options[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "no-target-directory", no_argument, NULL, 'T' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "compress", required_argument, NULL, OPT_COMPRESS },
		{ "recompress", required_argument, NULL, OPT_RECOMPRESS },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "verify-only", no_argument, NULL, OPT_VERIFY_ONLY },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "subvolumes", no_argument, NULL, OPT_SUBVOLUMES },
		{ "final", no_argument, NULL, OPT_FINAL },
		{ "delete-extra", no_argument, NULL, OPT_DELETE_EXTRA },
		{ "abort", required_argument, NULL, OPT_ABORT },
		{ "checkpoint", required_argument, NULL, OPT_CHECKPOINT },
		{ "no-root-nocow", no_argument, NULL, OPT_NO_ROOT_NOCOW },
		{ "queue-depth", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "rTj:d:",
				  long_options, NULL)) != -1) {
		switch (opt) {
		case 'r':
			c->recursive = true;
			break;
		case 'T':
			c->no_target_dir = true;
			break;
		case 'j':
			c->jobs = strtoul(optarg, &end, 10);
			if (*end || c->jobs < 1 || c->jobs > TREE_MAX_FILES)
				return usage_error(cmd, "jobs must be 1..%d",
						   TREE_MAX_FILES);
			break;
		case OPT_PROGRESS:
			c->progress = true;
			break;
		case OPT_COMPRESS:
		case OPT_RECOMPRESS:
			if (compress_spec_parse(optarg,
						opt == OPT_COMPRESS ?
							&c->opts.compress :
							&c->opts.recompress))
				return usage_error(
					cmd,
					"bad algorithm '%s' (zstd[:1..15], zlib[:1..9], lzo)",
					optarg);
			break;
		case OPT_VERIFY:
			c->opts.verify = true;
			break;
		case OPT_VERIFY_ONLY:
			c->verify_only = true;
			break;
		case OPT_SUBVOLUMES:
			c->subvolumes = true;
			break;
		case OPT_FINAL:
			c->final = true;
			break;
		case OPT_DELETE_EXTRA:
			c->delete_extra = true;
			break;
		case OPT_ABORT:
			c->abort = optarg;
			break;
		case OPT_NO_ROOT_NOCOW:
			c->no_root_nocow = true;
			break;
		case OPT_CHECKPOINT:
			if (parse_size(optarg, &c->checkpoint_bytes) ||
			    !c->checkpoint_bytes)
				return usage_error(cmd,
						   "bad checkpoint size '%s'",
						   optarg);
			break;
		case OPT_THREADS:
			c->opts.threads = strtoul(optarg, &end, 10);
			if (*end || c->opts.threads < 1 ||
			    c->opts.threads > 256)
				return usage_error(cmd,
						   "threads must be 1..256");
			break;
		case 'd':
			global_opts.queue_depth = strtoul(optarg, &end, 10);
			if (*end || global_opts.queue_depth < 1 ||
			    global_opts.queue_depth > ENGINE_MAX_DEPTH)
				return usage_error(cmd,
						   "queue depth must be 1..%d",
						   ENGINE_MAX_DEPTH);
			break;
		default:
			if (common_option(cmd, opt, &c->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (c->abort)
		return argc != optind ?
			       usage_error(cmd, "--abort takes no source") :
			       0;
	if (argc - optind < 2)
		return usage_error(cmd, "need a source and a destination");
	if (c->subvolumes && (!c->recursive || argc - optind != 2))
		return usage_error(cmd, "--subvolumes needs -r and one SRC");
	if (c->final && !c->subvolumes)
		return usage_error(cmd, "--final goes with --subvolumes");
	if (c->delete_extra && !c->final)
		return usage_error(cmd, "--delete-extra goes with --final");
	if (c->no_root_nocow && !c->subvolumes)
		return usage_error(cmd,
				   "--no-root-nocow goes with --subvolumes");
	if (c->checkpoint_bytes && !c->subvolumes)
		return usage_error(cmd, "--checkpoint goes with --subvolumes");
	if (c->subvolumes && (c->opts.compress.alg || c->opts.recompress.alg ||
			      c->opts.verify || c->verify_only))
		return usage_error(
			cmd,
			"--subvolumes copies extents as they are: no --compress, --recompress or --verify");
	if (global_opts.verbose < 0)
		c->progress = false;
	return 0;
}

/* A source and the name it gets in the destination directory. */
struct landing {
	const char *src;
	int index; /* on the command line */
	char name[PATH_MAX];
};

static int landing_cmp(const void *a, const void *b)
{
	const struct landing *x = a, *y = b;
	int ret = strcmp(x->name, y->name);

	return ret ? ret : x->index - y->index;
}

/*
 * Two sources copied into one directory under the same name: the second
 * would replace the first's copy, or with -r merge into it. Refused before
 * anything is made, as cp refuses to overwrite what it just created.
 */
static int check_landing_names(int nr_src, char **srcs, const char *dst)
{
	struct landing *l = calloc(nr_src, sizeof(*l));
	const char *base;
	size_t len;
	int i, ret = 0;

	if (!l) {
		print_error("cannot check the sources: %s", strerror(ENOMEM));
		return 1;
	}
	for (i = 0; i < nr_src; i++) {
		l[i].src = srcs[i];
		l[i].index = i;
		snprintf(l[i].name, sizeof(l[i].name), "%s", srcs[i]);
		len = strlen(l[i].name);
		while (len > 1 && l[i].name[len - 1] == '/')
			l[i].name[--len] = 0;
		base = basename(l[i].name);
		memmove(l[i].name, base, strlen(base) + 1);
	}
	qsort(l, nr_src, sizeof(*l), landing_cmp);
	for (i = 1; i < nr_src && !ret; i++) {
		if (strcmp(l[i - 1].name, l[i].name))
			continue;
		print_error("will not copy both '%s' and '%s' to '%.*s/%s'",
			    l[i - 1].src, l[i].src, (int)path_trimmed_len(dst),
			    dst, l[i].name);
		ret = 1;
	}
	free(l);
	return ret;
}

static int check_sources(int nr_src, char **srcs, const char *dst,
			 const struct copy_cmd *c)
{
	struct stat st;
	int i;

	if (c->no_target_dir && !c->recursive && nr_src > 1) {
		print_error(
			"cannot copy %d files to '%s': with -T it is one file",
			nr_src, dst);
		return 1;
	}
	if (c->no_target_dir && !c->recursive && stat(dst, &st) == 0 &&
	    S_ISDIR(st.st_mode)) {
		print_error(
			"cannot overwrite directory '%s' with non-directory '%s'",
			dst, srcs[0]);
		return 1;
	}
	if (nr_src > 1 && (stat(dst, &st) || !S_ISDIR(st.st_mode))) {
		print_error("cannot copy %d files to '%s': not a directory",
			    nr_src, dst);
		return 1;
	}
	if (nr_src > 1 && check_landing_names(nr_src, srcs, dst))
		return 1;
	for (i = 0; i < nr_src && !c->recursive; i++) {
		if (stat(srcs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			print_error("'%s' is a directory (not copied; use -r)",
				    srcs[i]);
			return 1;
		}
	}
	return 0;
}

/* A difference found by verification says what differs, not an errno. */
static void print_copy_error(const struct encio_error *e)
{
	if (e->err != VERIFY_DIFFERS)
		print_encio_error(e);
	else if (e->has_offset)
		print_error("verify '%s': %s at offset %llu", e->path, e->op,
			    (unsigned long long)e->offset);
	else
		print_error("verify '%s': %s", e->path, e->op);
}

static void tree_report(void *arg, const struct encio_error *e)
{
	struct copy_cmd *c = arg;

	clear_progress(c);
	print_copy_error(e);
}

/*
 * Named after the error that stopped the copy; a staging directory the
 * copy could not make (a read-only DEST) holds nothing to resume.
 */
static void tree_kept(void *arg, const char *staging, const char *final)
{
	struct copy_cmd *c = arg;
	struct stat st;
	char **kept;
	char *msg;

	if (lstat(staging, &st) || !S_ISDIR(st.st_mode))
		return;
	kept = realloc(c->kept, (c->nr_kept + 1) * sizeof(*kept));
	if (!kept)
		return;
	c->kept = kept;
	if (asprintf(
		    &msg,
		    "partial copy of '%s' kept in '%s': the same copy again resumes it",
		    final, staging) >= 0)
		c->kept[c->nr_kept++] = msg;
}

static void print_kept(struct copy_cmd *c)
{
	size_t i;

	for (i = 0; i < c->nr_kept; i++) {
		print_error("%s", c->kept[i]);
		free(c->kept[i]);
	}
	free(c->kept);
	c->kept = NULL;
	c->nr_kept = 0;
}

static void tree_probed(void *arg)
{
	struct copy_cmd *c = arg;

	print_probe(c->ctx);
	warn_probe(copy_ctx_probe(c->ctx));
}

static int copy_trees(struct copy_cmd *c, char **srcs, int nr_srcs,
		      const char *dst)
{
	struct tree_options topts = {
		.max_files = c->jobs,
		.count_first = c->progress,
		.no_target_dir = c->no_target_dir,
		.stop = &stop_signal,
		.report = tree_report,
		.probed = tree_probed,
		.kept = tree_kept,
		.progress = c->progress ? tree_progress : NULL,
		.arg = c,
	};
	struct encio_error e;
	int ret;

	stop_signals_install();
	ret = tree_copy(c->ctx, &topts, srcs, nr_srcs, dst, &c->tree, &e);
	clear_progress(c);
	c->failed = c->tree.failed;
	c->files = c->tree.files;
	if (ret) {
		if (ret == -EINTR)
			print_error(
				"interrupted: files in flight removed, files complete kept (a rerun resumes)");
		else
			print_copy_error(&e);
	}
	print_kept(c);
	return ret;
}

static void subvol_progress(void *arg, const struct subvols_stats *s)
{
	struct copy_cmd *c = arg;
	char done[PRETTY_SIZE_LEN], rate[PRETTY_SIZE_LEN];
	double tnow = clock_now(), secs = tnow - c->start;

	if (!c->progress || tnow - c->last_progress < 0.25)
		return;
	c->last_progress = tnow;
	fprintf(stderr, "\r\033[Ksubvolume %llu of %llu, %s written, %s/s",
		(unsigned long long)(s->copied + s->skipped + s->failed +
				     s->left_out + 1),
		(unsigned long long)s->total,
		pretty_size(done, s->bytes_written + s->current_bytes),
		pretty_size(rate,
			    secs > 0 ? (s->bytes_written + s->current_bytes) /
					       secs :
				       0));
	c->progress_shown = true;
	progress_line_up = true;
}

static void subvol_begin(void *arg, const char *dst, enum subvols_how how,
			 const char *parent, const struct subvols_stats *s)
{
	struct copy_cmd *c = arg;

	free(c->in_flight);
	c->in_flight = strdup(dst);
	c->last_progress = 0;
	subvol_progress(c, s);
	if (global_opts.verbose < 1)
		return;
	clear_progress(c);
	if (how == SUBVOLS_SKIPPED)
		verbose(1, "subvolume '%s': complete already, skipped", dst);
	else if (how == SUBVOLS_INCREMENTAL)
		verbose(1, "subvolume '%s': a snapshot of the copy of '%s'%s",
			dst, parent,
			s->current_resumed ?
				", gone on with from a stopped run" :
				"");
	else
		verbose(1, "subvolume '%s': copied whole%s", dst,
			s->current_resumed ?
				", gone on with from a stopped run" :
				"");
}

static int copy_subvolumes(struct copy_cmd *c, char *src, const char *dst)
{
	struct tree_options topts = {
		.max_files = c->jobs,
		.stop = &stop_signal,
		.report = tree_report,
		.probed = tree_probed,
		.kept = tree_kept,
		.arg = c,
	};
	struct subvols_options sopts = {
		.io_mode = global_opts.io_mode,
		.depth = global_opts.queue_depth,
		.no_target_dir = c->no_target_dir,
		.final = c->final,
		.delete_extra = c->delete_extra,
		.checkpoint_bytes = c->checkpoint_bytes,
		.no_root_nocow = c->no_root_nocow,
		.stop = &stop_signal,
		.begin = subvol_begin,
		.progress = subvol_progress,
		.arg = c,
	};
	struct encio_error e;
	char left_out[64];
	bool went_on;
	int ret;

	stop_signals_install();
	ret = subvols_copy(c->ctx, &topts, &sopts, src, dst, &c->subvols,
			   &c->tree, &e);
	/* the error that says some failed, the move gone on past them */
	went_on = ret == -EIO && e.err == EIO && c->subvols.failed;
	clear_progress(c);
	c->failed = c->tree.failed;
	c->files = c->tree.files;
	if (ret == -EINTR && stop_signal)
		print_error(
			"interrupted: the subvolumes complete kept%s (a rerun resumes)",
			c->subvols.kept ?
				", the one in flight as far as it was made" :
				"");
	else if (ret && !c->failed && !went_on)
		/* else the entries that failed said it, each */
		print_copy_error(&e);
	snprintf(left_out, sizeof(left_out), "%llu left out in %s",
		 (unsigned long long)c->subvols.left_out,
		 c->subvols.failed == 1 ? "its copy" : "their copies");
	/* each failed subvolume was named as it failed */
	if (c->subvols.failed)
		print_error(
			"%llu subvolume%s failed%s%s%s",
			(unsigned long long)c->subvols.failed,
			c->subvols.failed == 1 ? "" : "s",
			c->subvols.left_out ? ", " : "",
			c->subvols.left_out ? left_out : "",
			went_on ?
				"; the others are copied (a rerun goes on with the rest)" :
				"");
	if (ret && c->subvols.kept && c->in_flight)
		print_error(
			"partial copy of '%s' kept: the same copy again resumes it, encio copy --abort '%s' drops it",
			c->in_flight, c->in_flight);
	free(c->in_flight);
	c->in_flight = NULL;
	print_kept(c);
	return ret;
}

/*
 * --abort DEST/NAME: what a stopped copy --subvolumes kept to go on with,
 * dropped.
 */
static int abort_copy(const char *dst)
{
	struct encio_error e;
	pid_t holder;

	if (!subvols_partial_abort(dst, &holder, &e)) {
		verbose(0, "dropped the partial copy of '%s'", dst);
		return 0;
	}
	if (e.err == EBUSY)
		print_error(
			"cannot drop the partial copy of '%s': a receive (pid %d) is making it; stop it first",
			dst, (int)holder);
	else
		print_encio_error(&e);
	return 1;
}

/* The subvolumes failed, left out and extra, one line each. */
static void print_subvols_problems_text(const struct subvols_stats *s)
{
	const struct subvols_problem *pb;
	char msg[PATH_MAX + 256];
	size_t i;

	for (i = 0; i < s->nr_problems; i++) {
		pb = &s->problems[i];
		if (pb->e.err) {
			format_encio_error(msg, sizeof(msg), &pb->e);
			printf("failed: '%s': %s\n", pb->dst, msg);
		} else {
			printf("left out: '%s': in the copy of '%s', which failed\n",
			       pb->dst, pb->inside);
		}
	}
	for (i = 0; i < s->nr_extras; i++) {
		if (!s->extras[i].kept)
			printf("extra: '%s': not in SRC, deleted\n",
			       s->extras[i].dst);
		else if (s->extras[i].err)
			printf("extra: '%s': not in SRC, kept: %s: %s\n",
			       s->extras[i].dst, s->extras[i].kept,
			       strerror(s->extras[i].err));
		else
			printf("extra: '%s': not in SRC, kept: %s\n",
			       s->extras[i].dst, s->extras[i].kept);
	}
}

static void print_subvols_summary_text(const struct copy_cmd *c)
{
	const struct subvols_stats *s = &c->subvols;
	char bytes[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN],
		stream[PRETTY_SIZE_LEN];

	printf("subvolumes: %llu of %llu copied (%llu as snapshots of copies, %llu differences made ahead), %llu complete already, %llu copied again (changed in SRC); %s written, %s of it encoded, %llu ranges cloned; %s of stream; %.3fs\n",
	       (unsigned long long)s->copied, (unsigned long long)s->total,
	       (unsigned long long)s->incremental, (unsigned long long)s->ahead,
	       (unsigned long long)s->skipped, (unsigned long long)s->replaced,
	       pretty_size(bytes, s->bytes_written),
	       pretty_size(encoded, s->encoded_bytes),
	       (unsigned long long)s->clones,
	       pretty_size(stream, s->stream_bytes), c->seconds);
	if (s->resumed)
		printf("resumed: %llu subvolume%s gone on with where a stopped run left %s, %llu entries found complete\n",
		       (unsigned long long)s->resumed,
		       s->resumed == 1 ? "" : "s",
		       s->resumed == 1 ? "it" : "them",
		       (unsigned long long)s->complete_entries);
	if (s->bases)
		printf("bases: %llu snapshots kept in SRC (.NAME.encio-base), the parents of the next run's differences; the last run's --final deletes them\n",
		       (unsigned long long)s->bases);
	print_subvols_problems_text(s);
}

static void verify_report(void *arg, const struct encio_error *e)
{
	(void)arg;
	print_copy_error(e);
}

/*
 * SRC DEST, SRC... DIR, or trees with -r: compare existing copies with
 * their sources, every byte of every file, and write nothing.
 */
static int verify_only(struct copy_cmd *c, char **srcs, int nr_src,
		       const char *dst)
{
	const struct verify_tree_options opts = {
		.recursive = c->recursive,
		.no_target_dir = c->no_target_dir,
		.report = verify_report,
		.arg = c,
	};
	struct json_writer w;
	struct verify_ctx v;
	struct encio_error e;
	int ret;

	ret = verify_ctx_init(&v);
	if (ret) {
		print_error("cannot verify: %s", strerror(-ret));
		return ret;
	}
	v.stop = &stop_signal;
	stop_signals_install();
	ret = verify_trees(&v, &opts, srcs, nr_src, dst, &e);
	c->seconds = clock_now() - c->start;
	c->failed = v.stats.failed;
	if (ret == -EINTR)
		print_error("interrupted");
	else if (ret)
		print_copy_error(&e);
	if (c->json) {
		json_init(&w, stdout, 0);
		json_object_begin(&w, NULL);
		json_verify_fields(&w, &v.stats);
		json_double(&w, "seconds", c->seconds, 6);
		json_object_end(&w);
	} else if (global_opts.verbose >= 0) {
		print_verify_entries_text(&v.stats);
		print_verify_text(&v.stats, c->seconds);
	}
	verify_ctx_release(&v);
	return ret;
}

/*
 * DEST as a directory to copy into is named without its trailing slashes,
 * so the paths built from it and printed have one; any other DEST keeps
 * them (a missing "DIR/" is an error, not a file named DIR).
 */
static char *dest_dir_name(char *dst)
{
	size_t len = path_trimmed_len(dst);
	struct stat st;

	if (len && dst[len] && stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
		dst[len] = 0;
	return dst;
}

static int cmd_copy(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct copy_cmd c = { .opts.force_backing = -1 };
	struct encio_error e;
	const char *dst;
	double start;
	int i, nr_src, ret;

	c.progress = isatty(STDERR_FILENO);
	ret = parse_copy_options(cmd, argc, argv, &c);
	if (ret)
		return ret;
	if (c.abort)
		return abort_copy(c.abort);
	nr_src = argc - optind - 1;
	dst = dest_dir_name(argv[argc - 1]);
	if (c.verify_only) {
		c.start = clock_now();
		ret = verify_only(&c, argv + optind, nr_src, dst);
		goto stopped;
	}
	if (check_sources(nr_src, argv + optind, dst, &c))
		return 1;

	c.opts.io_mode = global_opts.io_mode;
	c.opts.depth = global_opts.queue_depth;
	c.opts.stop = &stop_signal;
	if (c.progress && !c.recursive) {
		c.opts.progress = files_progress;
		c.opts.progress_arg = &c;
		c.total_bytes = total_size(argv + optind, nr_src);
		c.nr_files = nr_src;
	}
	ret = copy_ctx_new(&c.ctx, &c.opts);
	if (ret) {
		print_error("cannot set up the I/O engine: %s", strerror(-ret));
		return 1;
	}
	start = clock_now();
	c.start = start;
	if (c.subvolumes) {
		ret = copy_subvolumes(&c, argv[optind], dst);
		goto summary;
	}
	if (c.recursive) {
		ret = copy_trees(&c, argv + optind, nr_src, dst);
		goto summary;
	}
	stop_signals_install();
	ret = copy_share_begin_path(c.ctx, dst,
				    (const char *const *)argv + optind, nr_src);
	if (ret) {
		print_error("cannot index shared extents: %s", strerror(-ret));
		return 1;
	}
	for (i = 0; i < nr_src && !stop_signal; i++) {
		c.file_index = i;
		ret = copy_probe(c.ctx, argv[optind + i], dst, &e);
		if (!ret && i == 0) {
			print_probe(c.ctx);
			warn_probe(copy_ctx_probe(c.ctx));
		}
		if (!ret)
			ret = copy_file(c.ctx, argv[optind + i], dst, &e);
		if (ret == -EINTR && stop_signal)
			break;
		if (ret) {
			clear_progress(&c);
			print_copy_error(&e);
			c.failed++;
		}
	}
	ret = 0;
	c.files = copy_ctx_stats(c.ctx)->files;
	clear_progress(&c);
	if (stop_signal) {
		print_error(
			"interrupted: the file in flight removed, files complete kept");
		ret = -EINTR;
	}
summary:
	warn_flags_refused(copy_ctx_flags_refused(c.ctx));
	c.seconds = clock_now() - start;
	if (c.json)
		print_summary_json(&c);
	else if (global_opts.verbose >= 0 && c.subvolumes &&
		 (c.subvols.copied || c.subvols.skipped ||
		  c.subvols.nr_problems || c.subvols.nr_extras))
		print_subvols_summary_text(&c);
	else if (global_opts.verbose >= 0 && copied_anything(&c)) {
		print_summary_text(&c);
		if (c.recursive)
			print_tree_summary_text(&c);
	}

	subvols_stats_release(&c.subvols);
	copy_ctx_free(c.ctx);
stopped:
	if (ret == -EINTR)
		stop_signals_reraise();
	return c.failed || ret ? 1 : 0;
}

const struct cmd_struct cmd_struct_copy = { "copy", cmd_copy, copy_usage };
