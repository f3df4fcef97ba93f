// SPDX-License-Identifier: GPL-2.0
/*
 * Messages, usage and formatting shared by the commands.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "copy/copy.h"

void usage_print(const struct cmd_struct *cmd, bool full, int to_stderr)
{
	FILE *out = to_stderr ? stderr : stdout;
	const char *const *line = cmd->usage;

	fprintf(out, "usage: %s\n", *line++);
	if (!*line)
		return;
	fprintf(out, "\n    %s\n", *line++);
	if (!full) {
		fprintf(out, "\n    Use --help for more.\n");
		return;
	}
	for (; *line; line++)
		fprintf(out, "%s%s\n", **line ? "    " : "", *line);
}

int usage_error(const struct cmd_struct *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ERROR: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	usage_print(cmd, false, 1);
	return EXIT_USAGE;
}

bool progress_line_up;
bool progress_line_foreign;

const char *line_start(FILE *f)
{
	int err = errno; /* for %m: isatty() sets it off a terminal */
	bool erase = (progress_line_up || progress_line_foreign) &&
		     isatty(fileno(f));

	errno = err;
	return erase ? "\r\033[K" : "";
}

/*
 * A progress line on the terminal, ours or that of the other end of a pipe
 * (encio send | encio receive), is erased first: the message would
 * otherwise run into it. Ours is drawn again at its next turn.
 */
static void message(const char *prefix, const char *fmt, va_list ap)
{
	int err = errno;

	fputs(line_start(stderr), stderr);
	progress_line_up = false;
	fputs(prefix, stderr);
	errno = err;
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int summary_flush(FILE *f)
{
	if (fflush(f) != EOF && !ferror(f))
		return 0;
	print_error("cannot write the summary to %s: %s",
		    f == stdout ? "stdout" : "stderr", strerror(errno));
	return 1;
}

void print_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	message("ERROR: ", fmt, ap);
	va_end(ap);
}

void print_warning(const char *fmt, ...)
{
	va_list ap;

	if (global_opts.verbose < 0)
		return;
	va_start(ap, fmt);
	message("WARNING: ", fmt, ap);
	va_end(ap);
}

void warn_flags_refused(const struct inode_flags_refused *r)
{
	char letters[16];

	if (r->flags)
		print_warning(
			"the destination refused inode flags '%s': not kept",
			inode_flags_letters(r->flags, letters));
	if (r->compression_prop)
		print_warning(
			"the destination refused the btrfs.compression property: not kept");
}

void verbose(int level, const char *fmt, ...)
{
	va_list ap;

	if (global_opts.verbose < level)
		return;
	va_start(ap, fmt);
	message("", fmt, ap);
	va_end(ap);
}

const char *pretty_size(char *buf, unsigned long long bytes)
{
	static const char *const units[] = { "B",   "KiB", "MiB",
					     "GiB", "TiB", "PiB" };
	double value = bytes;
	unsigned int unit = 0;

	while (value >= 1024 && unit < sizeof(units) / sizeof(units[0]) - 1) {
		value /= 1024;
		unit++;
	}
	if (unit == 0)
		snprintf(buf, PRETTY_SIZE_LEN, "%lluB", bytes);
	else
		snprintf(buf, PRETTY_SIZE_LEN, "%.2f%s", value, units[unit]);
	return buf;
}

/* Parse --format=text|json; returns 0 text, 1 json, -1 bad. */
static int parse_format(const char *arg)
{
	if (strcmp(arg, "text") == 0)
		return 0;
	if (strcmp(arg, "json") == 0)
		return 1;
	return -1;
}

void print_encio_error(const struct encio_error *e)
{
	if (e->err == COPY_ESRCCHANGED)
		print_error("cannot %s '%s': file changed as we read it", e->op,
			    e->path);
	else if (e->has_offset)
		print_error("cannot %s '%s' at offset %llu: %s", e->op, e->path,
			    (unsigned long long)e->offset, strerror(e->err));
	else
		print_error("cannot %s '%s': %s", e->op, e->path,
			    strerror(e->err));
}

int parse_size(const char *arg, uint64_t *out)
{
	unsigned long long value;
	unsigned int shift = 0;
	char *end;

	if (!arg[0] || arg[0] == '-')
		return -1;
	errno = 0;
	value = strtoull(arg, &end, 0);
	if (errno || end == arg)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case '\0':
		break;
	default:
		return -1;
	}
	if (shift && (*++end || value > UINT64_MAX >> shift))
		return -1;
	*out = value << shift;
	return 0;
}

char **command_argv;

int common_option(const struct cmd_struct *cmd, int opt, int *json)
{
	char **argv = command_argv;

	switch (opt) {
	case OPT_FORMAT:
		if (!json)
			break;
		*json = parse_format(optarg);
		if (*json >= 0)
			return 0;
		return usage_error(cmd, "unknown format '%s'", optarg);
	case 'v':
		global_opts.verbose++;
		return 0;
	case 'q':
		global_opts.verbose = -1;
		return 0;
	case 'h':
		usage_print(cmd, true, 0);
		exit(0);
	case ':':
		return usage_error(cmd, "option '%s' needs a value",
				   argv[optind - 1]);
	case '?':
		if (optopt > 0 && optopt < 128)
			return usage_error(cmd, "unknown option '-%c'", optopt);
		return usage_error(cmd, "unknown option '%s'",
				   argv[optind - 1]);
	}
	return usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
}

void progress_end(bool *shown)
{
	if (!*shown)
		return;
	fputs(isatty(STDERR_FILENO) ? "\r\033[K" : "\n", stderr);
	*shown = false;
	progress_line_up = false;
}

void format_eta(char *buf, size_t len, double secs)
{
	unsigned long s;

	if (!(secs > 0 && secs < 1e7)) {
		snprintf(buf, len, "--:--");
		return;
	}
	s = (unsigned long)secs;
	if (s >= 3600)
		snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60,
			 s % 60);
	else
		snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
}

void format_eta_of(char *buf, size_t len, double secs, uint64_t done,
		   uint64_t total)
{
	/* a MiB, or a hundredth of a smaller whole, gives a pace */
	uint64_t enough = total / 100 < (1 << 20) ? total / 100 : 1 << 20;

	if (total && done >= total)
		snprintf(buf, len, "0:00");
	else if (secs < 1 || !done || done < enough)
		format_eta(buf, len, 0);
	else /* a part of a second left is not none */
		format_eta(buf, len,
			   secs * (double)(total - done) / done + 0.999);
}

void uuid_format(char *out, const uint8_t *u)
{
	snprintf(
		out, UUID_TEXT_LEN,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

bool uuid_is_zero(const uint8_t *u)
{
	static const uint8_t zero[16];

	return !memcmp(u, zero, sizeof(zero));
}

int subvol_uuids_of(const char *path, struct subvol_uuids *u)
{
	struct btrfs_ioctl_get_subvol_info_args info;
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	/* success can come back as 1 (a tree search's "not found exactly") */
	if (fstat(fd, &st) || ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, &info) < 0)
		ret = -errno;
	else if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		ret = -ENOTDIR;
	close(fd);
	if (ret)
		return ret;
	memcpy(u->uuid, info.uuid, sizeof(u->uuid));
	memcpy(u->received_uuid, info.received_uuid, sizeof(u->received_uuid));
	memcpy(u->parent_uuid, info.parent_uuid, sizeof(u->parent_uuid));
	return 0;
}

void verbose_fixed_buffers(const struct encio_probe *p)
{
	verbose(1, "fixed buffers: %s", encio_fixed_state_desc(p->fixed));
}

void warn_encoded_reads(const struct encio_probe *p, const char *instead)
{
	if (p->read_mode == ENCIO_IO_NONE)
		print_warning("encoded reads impossible (%s): %s",
			      strerror(p->read_none_err), instead);
}

/* Whole-file compressors' magic, for a stream kept compressed. */
static const struct {
	const char *name;
	const char *decompress;
	size_t len;
	const char *magic;
} compressed_magic[] = {
	{ "zstd", "zstd -dc", 4, "\x28\xb5\x2f\xfd" },
	{ "gzip", "gzip -dc", 2, "\x1f\x8b" },
	{ "xz", "xz -dc", 6,
	  "\xfd"
	  "7zXZ\0" },
	{ "bzip2", "bzip2 -dc", 3, "BZh" },
	{ "lzop", "lzop -dc", 4, "\x89LZO" },
	{ "lz4", "lz4 -dc", 4, "\x04\x22\x4d\x18" },
};

int refuse_compressed_stream(int fd, const char *file, const char *cmdline)
{
	char head[8];
	ssize_t n = pread(fd, head, sizeof(head), 0);
	size_t i;

	for (i = 0; n > 0 &&
		    i < sizeof(compressed_magic) / sizeof(compressed_magic[0]);
	     i++) {
		if ((size_t)n < compressed_magic[i].len ||
		    memcmp(head, compressed_magic[i].magic,
			   compressed_magic[i].len))
			continue;
		print_error(
			"cannot read '%s': the stream is compressed with %s: decompress it first (%s %s%s%s | %s)",
			file ? file : "stdin", compressed_magic[i].name,
			compressed_magic[i].decompress, file ? "'" : "",
			file ? file : "FILE", file ? "'" : "", cmdline);
		return 1;
	}
	return 0;
}

const char *open_regular_error(int err)
{
	return err == -EINVAL ? "not a regular file" : strerror(-err);
}

volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

void stop_signals_install(void)
{
	static const int sigs[] = { SIGINT, SIGTERM };
	struct sigaction sa, old;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!sigaction(sigs[i], NULL, &old) &&
		    old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

void stop_signals_reraise(void)
{
	if (!stop_signal)
		return;
	signal(stop_signal, SIG_DFL);
	raise(stop_signal);
}

/*
 * @s as one word of a shell command: quoted where it has anything but
 * what no shell takes apart.
 */
const char *shell_word(char *out, size_t len, const char *s)
{
	size_t i, n = 0;

	if (*s &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789_./:@%+=,-") == strlen(s))
		return s;
	out[n++] = '\'';
	for (i = 0; s[i] && n + 5 < len; i++) {
		if (s[i] == '\'') {
			memcpy(out + n, "'\\''", 4);
			n += 4;
		} else {
			out[n++] = s[i];
		}
	}
	out[n++] = '\'';
	out[n] = '\0';
	return out;
}
