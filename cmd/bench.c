// SPDX-License-Identifier: GPL-2.0
/*
 * encio bench: encoded read (and write) throughput of one file per I/O
 * mode, modes alternating over rounds, every mode checked to read the same
 * bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "io/bench.h"
#include "base/clock.h"
#include "fs/extents.h"
#include "commands.h"
#include "json.h"

static const char *const bench_usage[] = {
	"encio bench [--io=MODE] [-d QD] [-r ROUNDS] [--write] [--hugepages N] [--no-drop] [-v|-q] [--format=text|json] FILE",
	"Measure encoded reads (and writes) of FILE's extents in each I/O mode.",
	"",
	"Reads all compressed extents of FILE (from its extent map) with encoded",
	"reads in each mode: ioctl one at a time, io_uring at depth 1, io_uring",
	"at depth QD with and without SINGLE_ISSUER|DEFER_TASKRUN, io_uring with",
	"fixed buffers on normal pages and on hugepages, and the mode auto picks.",
	"A first untimed pass per mode checksums every extent (bytes and",
	"parameters) and compares the modes; then ROUNDS timed rounds run the",
	"modes in rotating order, dropping the page cache before each run when",
	"root. Per mode: min and median time, extents/s, GiB/s of file data and",
	"the ratio to ioctl; then the fixed-vs-plain pair and whether the kernel",
	"honours the fixed flag at all. With --write each mode also copies the",
	"extents encoded into a scratch O_TMPFILE beside FILE (synced, gone",
	"afterwards), checked by reading it back.",
	"",
	"--io=MODE          only the rows of MODE (ioctl stays as the baseline)",
	"-d|--queue-depth QD  requests in flight for the deep rows (default 32)",
	"-r|--rounds N      timed rounds (default 5)",
	"--write            also time encoded writes (copy into a scratch file)",
	"--hugepages N      as root, raise vm.nr_hugepages to N while running",
	"--no-drop          do not drop the page cache between runs",
	"--format=FORMAT    text (default) or json",
	"-v|--verbose, -q|--quiet  as the global options (-q: no warnings)",
	"-h|--help          print this help",
	NULL
};

enum { OPT_IO = OPT_HELP + 1, OPT_WRITE, OPT_HUGEPAGES, OPT_NO_DROP };

#define MAX_ROWS 10

struct bench_row {
	char name[40];
	enum encio_io_mode read_mode;
	enum encio_io_mode write_mode;
	unsigned int depth;
	int backing;
	enum engine_ring_setup ring_setup;
	unsigned int iowq_workers;
	bool is_auto;
	struct engine engine;
	bool ready;
	char note[96];
	uint64_t *sums;
	double *read_t, *write_t;
	double *read_cpu,
		*write_cpu; /* CPU seconds of the process, io-wq included */
	int read_err, write_err;
};

struct bench_cmd {
	const char *path;
	int fd, dirfd;
	unsigned int depth, rounds, hugepages;
	enum encio_io_mode only;
	bool write, drop, verified, write_verified;
	int json;
	long old_hugepages;
	struct bench_target target;
	struct bench_pass ref; /* totals of the reference pass */
	struct encio_probe probe;
	struct bench_row rows[MAX_ROWS];
	unsigned int nr_rows;
	int failed;
};

/* User + system time of the whole process (io-wq workers are its threads). */
static double cpu_now(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* A row, or NULL where --io leaves it out. */
static struct bench_row *add_row(struct bench_cmd *b, const char *name,
				 enum encio_io_mode mode, unsigned int depth,
				 int backing, enum engine_ring_setup ring)
{
	struct bench_row *r = &b->rows[b->nr_rows];

	if (b->only != ENCIO_IO_AUTO && mode != ENCIO_IO_IOCTL &&
	    mode != b->only)
		return NULL;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->read_mode = r->write_mode = mode;
	r->depth = depth;
	r->backing = backing;
	r->ring_setup = ring;
	b->nr_rows++;
	return r;
}

static void define_rows(struct bench_cmd *b)
{
	char name[40];
	unsigned int n = b->depth;
	struct bench_row *r;

	add_row(b, "ioctl", ENCIO_IO_IOCTL, 1, BUFPOOL_NORMAL,
		ENGINE_RING_DEFER_TASKRUN);
	add_row(b, "uring d1", ENCIO_IO_URING, 1, BUFPOOL_NORMAL,
		ENGINE_RING_DEFER_TASKRUN);
	snprintf(name, sizeof(name), "uring d%u", n);
	add_row(b, name, ENCIO_IO_URING, n, BUFPOOL_NORMAL,
		ENGINE_RING_DEFER_TASKRUN);
	snprintf(name, sizeof(name), "uring d%u no-defer", n);
	add_row(b, name, ENCIO_IO_URING, n, BUFPOOL_NORMAL, ENGINE_RING_PLAIN);
	snprintf(name, sizeof(name), "uring-fixed d%u normal", n);
	add_row(b, name, ENCIO_IO_URING_FIXED, n, BUFPOOL_NORMAL,
		ENGINE_RING_DEFER_TASKRUN);
	snprintf(name, sizeof(name), "uring-fixed d%u huge", n);
	add_row(b, name, ENCIO_IO_URING_FIXED, n, BUFPOOL_HUGETLB,
		ENGINE_RING_DEFER_TASKRUN);
	/* Encoded writes punted to io-wq: one worker writes while we read. */
	snprintf(name, sizeof(name), "uring d%u 1 io-wq worker", n);
	r = add_row(b, name, ENCIO_IO_URING, n, BUFPOOL_NORMAL,
		    ENGINE_RING_DEFER_TASKRUN);
	if (r)
		r->iowq_workers = 1;
	snprintf(name, sizeof(name), "auto d%u", n);
	r = add_row(b, name, ENCIO_IO_AUTO, n, -1, ENGINE_RING_DEFER_TASKRUN);
	if (r) {
		r->is_auto = true;
		r->read_mode = b->probe.read_mode;
		r->write_mode = b->probe.write_mode;
	}
}

static int init_row(struct bench_cmd *b, struct bench_row *r)
{
	struct engine_config config = {
		.depth = r->depth,
		.force_backing = r->backing,
		.ring_setup = r->ring_setup,
		.iowq_workers = r->iowq_workers,
		/*
		 * The depth under test, even on a file others may write (the
		 * auto row reads as encio copy would).
		 */
		.concurrent_inode_reads = !r->is_auto,
	};
	int ret;

	r->sums = calloc(b->target.nr ? b->target.nr : 1, sizeof(*r->sums));
	r->read_t = calloc(b->rounds, sizeof(double));
	r->write_t = calloc(b->rounds, sizeof(double));
	r->read_cpu = calloc(b->rounds, sizeof(double));
	r->write_cpu = calloc(b->rounds, sizeof(double));
	if (!r->sums || !r->read_t || !r->write_t || !r->read_cpu ||
	    !r->write_cpu)
		return -ENOMEM;
	ret = engine_init(&r->engine, &config);
	if (ret)
		return ret;
	r->ready = true;
	if (r->read_mode != ENCIO_IO_IOCTL && !r->engine.ring)
		snprintf(r->note, sizeof(r->note), "io_uring unavailable");
	else if (r->backing == BUFPOOL_HUGETLB &&
		 r->engine.pool.backing != BUFPOOL_HUGETLB)
		snprintf(r->note, sizeof(r->note), "hugetlb unavailable: on %s",
			 bufpool_backing_name(r->engine.pool.backing));
	else if (r->iowq_workers && !r->engine.iowq_workers)
		snprintf(r->note, sizeof(r->note),
			 "io-wq worker limit refused by the kernel");
	else if (r->ring_setup == ENGINE_RING_DEFER_TASKRUN && r->engine.ring &&
		 !r->engine.defer_taskrun)
		snprintf(r->note, sizeof(r->note),
			 "DEFER_TASKRUN refused by the kernel");
	return 0;
}

static void release_rows(struct bench_cmd *b)
{
	unsigned int i;

	for (i = 0; i < b->nr_rows; i++) {
		struct bench_row *r = &b->rows[i];

		if (r->ready)
			engine_release(&r->engine);
		free(r->sums);
		free(r->read_t);
		free(r->write_t);
		free(r->read_cpu);
		free(r->write_cpu);
	}
}

/* syncfs, then drop clean caches, so every run starts cold. */
static void drop_caches(struct bench_cmd *b)
{
	int fd;

	if (!b->drop)
		return;
	syncfs(b->fd);
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, "3\n", 2) != 2)
		print_warning("cannot drop caches: %m");
	close(fd);
}

static long read_long(const char *path)
{
	char buf[32] = "";
	long value = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			value = strtol(buf, NULL, 10);
		close(fd);
	}
	return value;
}

static int write_long(const char *path, long value)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CLOEXEC), len, ret = 0;

	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "%ld\n", value);
	if (write(fd, buf, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

static void raise_hugepages(struct bench_cmd *b)
{
	const char *path = "/proc/sys/vm/nr_hugepages";

	b->old_hugepages = -1;
	if (!b->hugepages)
		return;
	if (geteuid() != 0) {
		print_warning("--hugepages needs root: ignored");
		return;
	}
	b->old_hugepages = read_long(path);
	if (b->old_hugepages < 0 ||
	    (unsigned long)b->old_hugepages >= b->hugepages) {
		b->old_hugepages = -1;
		return;
	}
	if (write_long(path, b->hugepages))
		print_warning("cannot set %s: %m", path);
}

static void restore_hugepages(struct bench_cmd *b)
{
	if (b->old_hugepages >= 0 &&
	    write_long("/proc/sys/vm/nr_hugepages", b->old_hugepages))
		print_warning("cannot restore vm.nr_hugepages to %ld",
			      b->old_hugepages);
}

static void row_error(struct bench_cmd *b, const struct bench_row *r,
		      const struct bench_pass *p)
{
	print_error("%s: %s of '%s' at offset %" PRIu64 ": %s (%s)", r->name,
		    p->err_op, b->path, p->err_offset, errno_name(p->err),
		    strerror(p->err));
	b->failed = 1;
}

/* Checksum every extent in every mode; all must equal the first mode's. */
static void verify_reads(struct bench_cmd *b)
{
	struct bench_pass p;
	size_t i, bad;
	unsigned int k;

	b->verified = true;
	for (k = 0; k < b->nr_rows; k++) {
		struct bench_row *r = &b->rows[k];

		if (!r->ready)
			continue;
		p.sums = r->sums;
		if (bench_read_pass(&r->engine, r->read_mode, b->fd, &b->target,
				    &p)) {
			r->read_err = p.err;
			row_error(b, r, &p);
			continue;
		}
		if (k == 0) {
			b->ref = p;
			continue;
		}
		for (i = bad = 0; i < b->target.nr; i++)
			bad += r->sums[i] != b->rows[0].sums[i];
		if (bad || p.extents != b->ref.extents) {
			print_error(
				"%s read different bytes than %s: %zu of %zu extents differ",
				r->name, b->rows[0].name, bad, b->target.nr);
			b->verified = false;
			b->failed = 1;
		}
	}
}

/* An unnamed file beside FILE; @what says in the error what it was for. */
static int open_scratch(struct bench_cmd *b, const char *what)
{
	int fd = openat(b->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		print_error("%s beside '%s': %m", what, b->path);
	return fd;
}

/*
 * --write needs a scratch file in every round of every mode: find out once,
 * before any timing, rather than fail the same way in each of them.
 */
static int bench_scratch_possible(struct bench_cmd *b)
{
	int fd = open_scratch(b, "--write needs a scratch file");

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Read the scratch copy back and compare with the source's checksums. */
static bool verify_copy(struct bench_cmd *b, struct bench_row *r, int dst)
{
	uint64_t *sums = calloc(b->target.nr ? b->target.nr : 1, sizeof(*sums));
	struct bench_pass p = { .sums = sums };
	bool ok;

	if (!sums)
		return false;
	ok = bench_read_pass(&r->engine, r->read_mode, dst, &b->target, &p) ==
		     0 &&
	     memcmp(sums, b->rows[0].sums, b->target.nr * sizeof(*sums)) == 0;
	free(sums);
	if (!ok) {
		print_error("%s: the scratch copy differs from '%s'", r->name,
			    b->path);
		b->failed = 1;
	}
	return ok;
}

static void run_write(struct bench_cmd *b, struct bench_row *r,
		      unsigned int round)
{
	struct bench_pass p = { 0 };
	double t0, c0;
	int dst = open_scratch(b, "cannot create a scratch file");

	if (dst < 0) {
		r->write_err = errno;
		b->failed = 1;
		return;
	}
	drop_caches(b);
	c0 = cpu_now();
	t0 = clock_now();
	if (bench_copy_pass(&r->engine, r->read_mode, r->write_mode, b->fd, dst,
			    &b->target, &p)) {
		r->write_err = p.err;
		row_error(b, r, &p);
	} else {
		r->write_t[round] = clock_now() - t0;
		r->write_cpu[round] = cpu_now() - c0;
		if (round == 0 && !verify_copy(b, r, dst))
			b->write_verified = false;
	}
	close(dst);
}

static void run_rounds(struct bench_cmd *b)
{
	struct bench_pass p = { 0 };
	unsigned int round, i;
	double t0, c0;

	b->write_verified = b->write;
	for (round = 0; round < b->rounds; round++) {
		for (i = 0; i < b->nr_rows; i++) {
			/* Rotate the order so no mode always runs first. */
			struct bench_row *r =
				&b->rows[(i + round) % b->nr_rows];

			if (!r->ready || r->read_err)
				continue;
			drop_caches(b);
			c0 = cpu_now();
			t0 = clock_now();
			if (bench_read_pass(&r->engine, r->read_mode, b->fd,
					    &b->target, &p)) {
				r->read_err = p.err;
				row_error(b, r, &p);
				continue;
			}
			r->read_t[round] = clock_now() - t0;
			r->read_cpu[round] = cpu_now() - c0;
			if (b->write && !r->write_err)
				run_write(b, r, round);
		}
	}
}

struct row_stats {
	double min, median, lo, hi;
	bool valid;
};

static struct row_stats stats_of(const double *t, unsigned int n)
{
	struct row_stats s = { 0 };
	double v[n ? n : 1];
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (t[i] <= 0)
			return s; /* a failed run */
		v[i] = t[i];
	}
	s.valid = n > 0;
	s.median = bench_median(v, n);
	s.min = v[0];
	s.hi = v[n ? n - 1 : 0];
	return s;
}

static double median_of(const double *t, unsigned int n)
{
	double v[n ? n : 1];

	memcpy(v, t, n * sizeof(*t));
	return bench_median(v, n);
}

static const char *row_buffers(const struct bench_row *r)
{
	return r->ready ? bufpool_backing_name(r->engine.pool.backing) : "-";
}

static const char *row_io(const struct bench_row *r, bool write, char *buf,
			  size_t len)
{
	if (!r->is_auto || !write)
		return encio_io_mode_name(r->read_mode);
	snprintf(buf, len, "%s/%s", encio_io_mode_name(r->read_mode),
		 encio_io_mode_name(r->write_mode));
	return buf;
}

/* Per-round relative difference of @a against @b: median, min and max. */
static bool pair_spread(const struct bench_cmd *b, const struct bench_row *a,
			const struct bench_row *base, double *med, double *lo,
			double *hi)
{
	double d[b->rounds ? b->rounds : 1];
	unsigned int i;

	for (i = 0; i < b->rounds; i++) {
		if (a->read_t[i] <= 0 || base->read_t[i] <= 0)
			return false;
		d[i] = (a->read_t[i] - base->read_t[i]) / base->read_t[i] * 100;
	}
	*med = bench_median(d, b->rounds);
	*lo = d[0];
	*hi = d[b->rounds - 1];
	return b->rounds > 0;
}

static const struct bench_row *find_row(const struct bench_cmd *b,
					enum encio_io_mode mode, int backing,
					enum engine_ring_setup ring,
					unsigned int depth)
{
	unsigned int i;

	for (i = 0; i < b->nr_rows; i++) {
		const struct bench_row *r = &b->rows[i];

		if (!r->is_auto && !r->iowq_workers && r->read_mode == mode &&
		    r->backing == backing && r->ring_setup == ring &&
		    r->depth == depth)
			return r;
	}
	return NULL;
}

static void text_table(const struct bench_cmd *b, bool write)
{
	const struct bench_row *base = &b->rows[0];
	struct row_stats bs =
		stats_of(write ? base->write_t : base->read_t, b->rounds);
	double gib = (double)b->ref.logical / (1ULL << 30);
	char io[32];
	unsigned int i;

	printf("\n%s, %u round%s, median of each:\n",
	       write ? "encoded copy into a scratch file (read + write + fsync)" :
		       "encoded reads",
	       b->rounds, b->rounds == 1 ? "" : "s");
	printf("%-26s %-17s %-22s %9s %9s %7s %11s %7s %7s\n", "mode", "io",
	       "buffers", "min s", "median s", "cpu s", "extents/s", "GiB/s",
	       "x ioctl");
	for (i = 0; i < b->nr_rows; i++) {
		const struct bench_row *r = &b->rows[i];
		struct row_stats s =
			stats_of(write ? r->write_t : r->read_t, b->rounds);

		printf("%-26s %-17s %-22s", r->name,
		       row_io(r, write, io, sizeof(io)), row_buffers(r));
		if (!s.valid) {
			printf(" %9s %9s %7s %11s %7s %7s", "-", "-", "-", "-",
			       "-", "-");
		} else {
			printf(" %9.4f %9.4f %7.3f %11.0f %7.2f", s.min,
			       s.median,
			       median_of(write ? r->write_cpu : r->read_cpu,
					 b->rounds),
			       b->ref.extents / s.median, gib / s.median);
			if (bs.valid)
				printf(" %7.2f", bs.median / s.median);
			else
				printf(" %7s", "-");
		}
		printf("%s%s\n", r->note[0] ? "  " : "", r->note);
	}
}

static void text_pairs(const struct bench_cmd *b)
{
	const struct bench_row *plain, *fixed, *nodefer;
	double med, lo, hi;

	plain = find_row(b, ENCIO_IO_URING, BUFPOOL_NORMAL,
			 ENGINE_RING_DEFER_TASKRUN, b->depth);
	fixed = find_row(b, ENCIO_IO_URING_FIXED, BUFPOOL_NORMAL,
			 ENGINE_RING_DEFER_TASKRUN, b->depth);
	nodefer = find_row(b, ENCIO_IO_URING, BUFPOOL_NORMAL, ENGINE_RING_PLAIN,
			   b->depth);
	printf("\nfixed buffer flag: %s by this kernel (probed)",
	       b->probe.fixed == ENCIO_FIXED_HONOURED ? "honoured" :
	       b->probe.fixed == ENCIO_FIXED_IGNORED  ? "ignored" :
							"not known");
	if (b->probe.fixed == ENCIO_FIXED_IGNORED)
		printf(": the fixed/plain difference below is noise here");
	printf("\n");
	if (plain && fixed && pair_spread(b, fixed, plain, &med, &lo, &hi))
		printf("fixed vs plain (d%u, normal pages): %+.1f%% time (median of per-round differences; spread %+.1f%% .. %+.1f%% over %u rounds); upstream with the flag honoured: 0.599 s -> 0.540 s (-9.8%%)\n",
		       b->depth, med, lo, hi, b->rounds);
	if (plain && nodefer && pair_spread(b, nodefer, plain, &med, &lo, &hi))
		printf("without SINGLE_ISSUER|DEFER_TASKRUN (d%u): %+.1f%% time (spread %+.1f%% .. %+.1f%%)\n",
		       b->depth, med, lo, hi);
}

static void print_text(const struct bench_cmd *b)
{
	char logical[PRETTY_SIZE_LEN], encoded[PRETTY_SIZE_LEN];

	printf("%s: %zu compressed extents, %s of file data, %s encoded\n",
	       b->path, b->target.nr, pretty_size(logical, b->ref.logical),
	       pretty_size(encoded, b->ref.encoded));
	printf("cross-mode check: %s; page cache %s between runs\n",
	       b->verified ? "every mode read the same bytes and parameters" :
			     "MODES DIFFER",
	       b->drop ? "dropped" : "not dropped");
	text_table(b, false);
	if (b->write) {
		text_table(b, true);
		printf("scratch copies read back: %s; uring encoded writes %s\n",
		       b->write_verified ? "identical" : "DIFFER",
		       b->probe.write_err[ENCIO_IO_URING] != 0 ?
			       "could not be tried" :
		       b->probe.write_punted ? "run on io-wq workers here" :
					       "stay inline");
	}
	text_pairs(b);
}

static void json_row(struct json_writer *w, const struct bench_cmd *b,
		     const struct bench_row *r, bool write,
		     const struct row_stats *bs)
{
	struct row_stats s =
		stats_of(write ? r->write_t : r->read_t, b->rounds);
	double gib = (double)b->ref.logical / (1ULL << 30);

	json_object_begin(w, NULL);
	json_string(w, "mode", r->name);
	json_string(w, "read_io", encio_io_mode_name(r->read_mode));
	json_string(w, "write_io",
		    write ? encio_io_mode_name(r->write_mode) : "");
	json_u64(w, "depth", r->depth);
	json_string(w, "buffers", row_buffers(r));
	json_bool(w, "defer_taskrun", r->ready && r->engine.defer_taskrun);
	json_u64(w, "iowq_workers", r->ready ? r->engine.iowq_workers : 0);
	if (s.valid) {
		json_double(w, "min_s", s.min, 6);
		json_double(w, "median_s", s.median, 6);
		json_double(w, "cpu_s",
			    median_of(write ? r->write_cpu : r->read_cpu,
				      b->rounds),
			    6);
		json_double(w, "extents_per_s", b->ref.extents / s.median, 1);
		json_double(w, "gib_per_s", gib / s.median, 4);
		json_double(w, "ratio_to_ioctl",
			    bs->valid ? bs->median / s.median : 0, 3);
	}
	json_string(w, "note", r->note);
	json_object_end(w);
}

static void json_rows(struct json_writer *w, const struct bench_cmd *b,
		      bool write)
{
	const struct bench_row *base = &b->rows[0];
	struct row_stats bs =
		stats_of(write ? base->write_t : base->read_t, b->rounds);
	unsigned int i;

	json_array_begin(w, write ? "copy" : "read");
	for (i = 0; i < b->nr_rows; i++)
		json_row(w, b, &b->rows[i], write, &bs);
	json_array_end(w);
}

static void print_json(const struct bench_cmd *b)
{
	const struct bench_row *plain, *fixed;
	double med = 0, lo = 0, hi = 0;
	struct json_writer w;
	bool pair = false;

	plain = find_row(b, ENCIO_IO_URING, BUFPOOL_NORMAL,
			 ENGINE_RING_DEFER_TASKRUN, b->depth);
	fixed = find_row(b, ENCIO_IO_URING_FIXED, BUFPOOL_NORMAL,
			 ENGINE_RING_DEFER_TASKRUN, b->depth);
	if (plain && fixed)
		pair = pair_spread(b, fixed, plain, &med, &lo, &hi);
	json_init(&w, stdout, 2);
	json_object_begin(&w, NULL);
	json_string(&w, "file", b->path);
	json_u64(&w, "extents", b->ref.extents);
	json_u64(&w, "logical_bytes", b->ref.logical);
	json_u64(&w, "encoded_bytes", b->ref.encoded);
	json_u64(&w, "rounds", b->rounds);
	json_u64(&w, "depth", b->depth);
	json_bool(&w, "caches_dropped", b->drop);
	json_bool(&w, "verified", b->verified);
	json_string(&w, "fixed",
		    b->probe.fixed == ENCIO_FIXED_HONOURED ? "honoured" :
		    b->probe.fixed == ENCIO_FIXED_IGNORED  ? "ignored" :
							     "unknown");
	if (b->probe.write_err[ENCIO_IO_URING])
		json_null(&w, "uring_write_punted");
	else
		json_bool(&w, "uring_write_punted", b->probe.write_punted);
	json_rows(&w, b, false);
	if (b->write) {
		json_rows(&w, b, true);
		json_bool(&w, "copy_verified", b->write_verified);
	}
	if (pair) {
		json_object_begin(&w, "fixed_vs_plain");
		json_double(&w, "median_pct", med, 2);
		json_double(&w, "min_pct", lo, 2);
		json_double(&w, "max_pct", hi, 2);
		json_object_end(&w);
	}
	json_bool(&w, "failed", b->failed);
	json_object_end(&w);
}

static int parse_bench_options(const struct cmd_struct *cmd, int argc,
			       char **argv, struct bench_cmd *b)
{
	static const struct option long_options[] = {
		{ "io", required_argument, NULL, OPT_IO },
		{ "queue-depth", required_argument, NULL, 'd' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "write", no_argument, NULL, OPT_WRITE },
		{ "hugepages", required_argument, NULL, OPT_HUGEPAGES },
		{ "no-drop", no_argument, NULL, OPT_NO_DROP },
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	uint64_t value;
	int c;

	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "d:r:",
				long_options, NULL)) != -1) {
		switch (c) {
		case OPT_IO:
			if (encio_io_mode_parse(optarg, &b->only) ||
			    b->only == ENCIO_IO_NONE)
				return usage_error(cmd, "unknown I/O mode '%s'",
						   optarg);
			break;
		case 'd':
			if (parse_size(optarg, &value) || value < 1 ||
			    value > ENGINE_MAX_DEPTH)
				return usage_error(cmd,
						   "queue depth must be 1..%d",
						   ENGINE_MAX_DEPTH);
			b->depth = value;
			break;
		case 'r':
			if (parse_size(optarg, &value) || value < 1 ||
			    value > 1000)
				return usage_error(cmd,
						   "rounds must be 1..1000");
			b->rounds = value;
			break;
		case OPT_WRITE:
			b->write = true;
			break;
		case OPT_HUGEPAGES:
			if (parse_size(optarg, &value) || value > 1 << 20)
				return usage_error(cmd, "bad hugepage count");
			b->hugepages = value;
			break;
		case OPT_NO_DROP:
			b->drop = false;
			break;
		default:
			if (common_option(cmd, c, &b->json))
				return EXIT_USAGE;
			break;
		}
	}
	if (argc - optind != 1)
		return usage_error(cmd, "need exactly one FILE");
	b->path = argv[optind];
	return 0;
}

/* The file, its extents, its directory, and what the probe finds. */
static int bench_open(struct bench_cmd *b)
{
	struct engine_config config = { .depth = 1, .force_backing = -1 };
	char tmp[PATH_MAX];
	struct engine engine;
	int ret;

	b->fd = open_regular(b->path, O_RDONLY, 0, NULL);
	if (b->fd < 0) {
		print_error("cannot open '%s': %s", b->path,
			    open_regular_error(b->fd));
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s", b->path);
	b->dirfd = open(dirname(tmp), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b->dirfd < 0) {
		print_error("cannot open the directory of '%s': %m", b->path);
		return -1;
	}
	ret = bench_target_build(b->fd, &b->target);
	if (ret) {
		print_error("cannot map extents of '%s': %s", b->path,
			    strerror(-ret));
		return -1;
	}
	if (!b->target.nr) {
		print_error("'%s' has no compressed extents to read", b->path);
		return -1;
	}
	if (b->write && bench_scratch_possible(b))
		return -1;
	ret = engine_init(&engine, &config);
	if (ret) {
		print_error("cannot set up the I/O engine: %s", strerror(-ret));
		return -1;
	}
	engine_probe_read(&engine, b->fd, ENCIO_IO_AUTO, &b->probe);
	engine_probe_write(&engine, b->dirfd, ENCIO_IO_AUTO, &b->probe);
	engine_release(&engine);
	if (b->probe.read_mode == ENCIO_IO_NONE) {
		print_error("encoded reads of '%s' impossible: %s (%s)",
			    b->path, errno_name(b->probe.read_none_err),
			    strerror(b->probe.read_none_err));
		return -1;
	}
	return 0;
}

static int cmd_bench(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct bench_cmd b = {
		.fd = -1, .dirfd = -1, .rounds = 5, .drop = true
	};
	unsigned int i;
	int ret;

	b.depth = global_opts.queue_depth;
	b.only = global_opts.io_mode;
	ret = parse_bench_options(cmd, argc, argv, &b);
	if (ret)
		return ret;
	b.drop = b.drop && geteuid() == 0;
	raise_hugepages(&b);
	if (bench_open(&b)) {
		b.failed = 1;
		goto out;
	}
	define_rows(&b);
	for (i = 0; i < b.nr_rows; i++) {
		ret = init_row(&b, &b.rows[i]);
		if (ret)
			snprintf(b.rows[i].note, sizeof(b.rows[i].note),
				 "cannot set up: %s", strerror(-ret));
	}
	verify_reads(&b);
	if (b.verified)
		run_rounds(&b);
	if (b.json)
		print_json(&b);
	else
		print_text(&b);
out:
	release_rows(&b);
	restore_hugepages(&b);
	bench_target_release(&b.target);
	if (b.dirfd >= 0)
		close(b.dirfd);
	if (b.fd >= 0)
		close(b.fd);
	return b.failed ? 1 : 0;
}

const struct cmd_struct cmd_struct_bench = { "bench", cmd_bench, bench_usage };
