// SPDX-License-Identifier: GPL-2.0
/*
 * Messages, usage and formatting shared by the commands.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
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

/*
 * On a terminal a message starts by erasing the line: a progress line drawn
 * there, ours or that of the other end of a pipe (encio send | encio
 * receive), would otherwise run into it.
 */
static void message(const char *prefix, const char *fmt, va_list ap)
{
	int err = errno; /* for %m: isatty() sets it off a terminal */

	if (isatty(STDERR_FILENO))
		fputs("\r\033[K", stderr);
	fputs(prefix, stderr);
	errno = err;
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
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
