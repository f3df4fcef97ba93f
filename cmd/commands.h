/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ENCIO_COMMANDS_H
#define ENCIO_COMMANDS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "io/engine.h"
#include "base/error.h"
#include "fs/inode_flags.h"

/* Options given before the command name, shared by every command. */
struct global_options {
	enum encio_io_mode io_mode;
	int verbose; /* -1 with -q, 0 default, >0 with -v */
	unsigned int queue_depth;
	/* run as btrfs-send or btrfs-receive: btrfs-progs' messages only */
	bool progs_names;
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

void print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void print_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A summary printed to @f (stdout or stderr) flushed: 0, or 1 after an
 * error saying it could not be written (a script would take the run for
 * done without it).
 */
int summary_flush(FILE *f);
/*
 * @s as one word of a shell command (@out, @len bytes, where it must be
 * quoted): what no shell takes apart is @s itself.
 */
const char *shell_word(char *out, size_t len, const char *s);
/* One warning a run for what DEST would not take, not one a file. */
void warn_flags_refused(const struct inode_flags_refused *r);
void verbose(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "12.3MiB" into @buf */
const char *pretty_size(char *buf, unsigned long long bytes);
#define PRETTY_SIZE_LEN 32

void print_encio_error(const struct encio_error *e);

/*
 * SIGINT and SIGTERM set stop_signal (no SA_RESTART: waits return EINTR)
 * and the run stops cleanly, but where they were ignored: a background
 * job of a non-interactive shell ignores SIGINT, and a Ctrl-C meant for
 * the foreground job must not stop it.
 */
extern volatile sig_atomic_t stop_signal;
void stop_signals_install(void);
/* Exit through the signal that stopped the run, if one did. */
void stop_signals_reraise(void);

/*
 * Options every command takes alike, after its name as before it:
 * -v|--verbose, -q|--quiet, -h|--help. A command's getopt string starts
 * with COMMON_SHORT_OPTIONS (its leading ':' tells a missing value from an
 * unknown option) and its long options end with COMMON_LONG_OPTIONS.
 */
#define COMMON_SHORT_OPTIONS ":vqh"
/* clang-format off */
#define COMMON_LONG_OPTIONS					\
	{ "verbose", no_argument, NULL, 'v' },			\
	{ "quiet", no_argument, NULL, 'q' },			\
	{ "help", no_argument, NULL, 'h' },			\
	{ NULL, 0, NULL, 0 }
/* clang-format on */

/*
 * The common options, --format=text|json where @json is not NULL, and
 * getopt's complaints: -h prints the help and exits 0; an unknown option
 * or one missing its value is an ERROR line and the short usage. Returns 0
 * when @opt was taken, EXIT_USAGE otherwise or on a bad value.
 */
int common_option(const struct cmd_struct *cmd, int opt, int *json);

/* The arguments getopt parses, for naming a bad option; set by main(). */
extern char **command_argv;

/*
 * End a progress line drawn on stderr with "\r...": erased on a terminal;
 * elsewhere (--progress into a log) ended by a newline, so that the summary
 * or a message after it has a line of its own. Nothing if !*@shown.
 */
void progress_end(bool *shown);

/* "1:02:03" or "2:03" for @secs; "--:--" when not known. */
void format_eta(char *buf, size_t len, double secs);
/*
 * The time left to move @total bytes, @done of them in @secs: "--:--"
 * until the pace is one to go by (a second gone and some of it done),
 * "0:00" once all is done.
 */
void format_eta_of(char *buf, size_t len, double secs, uint64_t done,
		   uint64_t total);

/*
 * Whether a progress line may be on standard error's line, which a message
 * erases first (on a terminal): one of this process's, drawn and not
 * ended (set by whoever draws it, cleared by progress_end() or a message),
 * or one the writer of the pipe a command reads may draw on the same
 * terminal (encio send | encio receive). Elsewhere a message starts as it
 * is, with no terminal codes.
 */
extern bool progress_line_up;
extern bool progress_line_foreign;
/* What a message starts with on @f: "\r\033[K" or "". */
const char *line_start(FILE *f);

/* A UUID as text, 36 characters and a NUL into @out. */
#define UUID_TEXT_LEN 37
void uuid_format(char *out, const uint8_t *u);
bool uuid_is_zero(const uint8_t *u);
/* The UUIDs of the subvolume whose root @path is, as btrfs keeps them. */
struct subvol_uuids {
	uint8_t uuid[16];
	uint8_t received_uuid[16]; /* zero: not received */
	uint8_t parent_uuid[16];   /* zero: not a snapshot */
};
/* 0, -ENOTDIR where @path is not a subvolume's root, or -errno. */
int subvol_uuids_of(const char *path, struct subvol_uuids *u);

/*
 * What copy and send say of the probe alike: under -v whether the kernel
 * honours fixed buffers; a warning where encoded reads are impossible
 * (not root, not btrfs), @instead saying what is done instead.
 */
void verbose_fixed_buffers(const struct encio_probe *p);
void warn_encoded_reads(const struct encio_probe *p, const char *instead);

/*
 * A stream file compressed whole (zstd, gzip, xz, bzip2, lzop, lz4) at
 * @fd, @file or standard input (NULL): an error naming the compressor and
 * how to decompress it into @cmdline, and 1; 0 for any other, or where @fd
 * cannot be read at its start (a pipe).
 */
int refuse_compressed_stream(int fd, const char *file, const char *cmdline);

/* A byte count: decimal or 0x hex, optional K, M or G suffix; 0 or -1. */
int parse_size(const char *arg, uint64_t *out);

/* Why open_regular() failed (-errno), for a message. */
const char *open_regular_error(int err);

/* "EINVAL" for EINVAL (either sign); "E<n>" for numbers not in the table. */
const char *errno_name(int err);

/* encio read / write: the parameter line, and a kernel error verbatim. */
void print_encoded_params(FILE *out, bool json, uint64_t offset,
			  const struct btrfs_ioctl_encoded_io_args *a,
			  uint64_t bytes, enum encio_io_mode mode);
void print_kernel_error(const char *op, const char *path, uint64_t offset,
			enum encio_io_mode mode, int err);
/* The --io mode for one raw request, given what the probe chose. */
enum encio_io_mode rawio_choose(enum encio_io_mode chosen);

/* Common option ids for getopt_long beyond the ASCII range. */
enum {
	OPT_FORMAT = 256,
	OPT_HELP,
};

extern const struct cmd_struct cmd_struct_list;
extern const struct cmd_struct cmd_struct_diff;
extern const struct cmd_struct cmd_struct_copy;
extern const struct cmd_struct cmd_struct_dump;
extern const struct cmd_struct cmd_struct_receive;
extern const struct cmd_struct cmd_struct_send;
extern const struct cmd_struct cmd_struct_stream_cut;
extern const struct cmd_struct cmd_struct_features;
extern const struct cmd_struct cmd_struct_read;
extern const struct cmd_struct cmd_struct_write;
extern const struct cmd_struct cmd_struct_bench;

#endif
