/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ENCIO_COMMANDS_H
#define ENCIO_COMMANDS_H

#include <stdbool.h>

#include "../lib/engine.h"
#include "../lib/error.h"

/* Options given before the command name, shared by every command. */
struct global_options {
	enum encio_io_mode io_mode;
	int verbose; /* -1 with -q, 0 default, >0 with -v */
	unsigned int queue_depth;
};

struct cmd_struct {
	const char *token;
	int (*fn)(const struct cmd_struct *cmd, int argc, char **argv);
	/* synopsis, one-line summary, "", long text..., "", one line per option, NULL */
	const char *const *usage;
};

extern struct global_options global_opts;

/* Exit statuses, as btrfs-progs. */
#define EXIT_USAGE 2

void usage_print(const struct cmd_struct *cmd, bool full, int to_stderr);
int usage_error(const struct cmd_struct *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void verbose(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "12.3MiB" into @buf */
const char *pretty_size(char *buf, unsigned long long bytes);
#define PRETTY_SIZE_LEN 32

void print_encio_error(const struct encio_error *e);

/* Parse --format=text|json; returns 0 text, 1 json, -1 bad. */
int parse_format(const char *arg);

/* Common option ids for getopt_long beyond the ASCII range. */
enum {
	OPT_FORMAT = 256,
	OPT_HELP,
};

extern const struct cmd_struct cmd_struct_list;
extern const struct cmd_struct cmd_struct_copy;
extern const struct cmd_struct cmd_struct_dump;
extern const struct cmd_struct cmd_struct_receive;

#endif
