// SPDX-License-Identifier: GPL-2.0
/*
 * encio: the command table, global options and dispatch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

struct global_options global_opts = {
	.io_mode = ENCIO_IO_AUTO,
	.verbose = 0,
	.queue_depth = ENGINE_DEFAULT_DEPTH,
};

static const char *const encio_usage[] = {
	"encio [--io=auto|uring-fixed|uring|ioctl] [-v|-q] [-d QD] <command> [options] <args>",
	"Move compressed btrfs extents without decompressing them.",
	"",
	"Global options:",
	"--io=MODE           I/O backend: auto (probe and choose per direction),",
	"                    uring-fixed, uring or ioctl",
	"-d|--queue-depth QD requests in flight (default 32)",
	"-v|--verbose        say more (probe results, buffers, backends)",
	"-q|--quiet          print errors only",
	"-h|--help           this help; 'encio <command> --help' for a command",
	"--version           print the version",
	NULL
};

static const struct cmd_struct cmd_struct_encio = { "encio", NULL,
						    encio_usage };

/* One line per command; clang-format off keeps it that way. */
/* clang-format off */
static const struct cmd_struct *const commands[] = {
	&cmd_struct_copy,
	&cmd_struct_list,
	&cmd_struct_dump,
	&cmd_struct_receive,
	&cmd_struct_send,
	&cmd_struct_stream_cut,
	&cmd_struct_diff,
	&cmd_struct_features,
	&cmd_struct_read,
	&cmd_struct_write,
	&cmd_struct_bench,
	NULL
};
/* clang-format on */

static void print_commands(FILE *out)
{
	const struct cmd_struct *const *cmd;

	fprintf(out, "\nCommands:\n");
	for (cmd = commands; *cmd; cmd++)
		fprintf(out, "  %-10s %s\n", (*cmd)->token, (*cmd)->usage[1]);
}

static int parse_global_options(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "io", required_argument, NULL, 'I' },
		{ "queue-depth", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	char *end;
	int c;

	/* Stop at the command name: its options are its own. */
	while ((c = getopt_long(argc, argv, "+:d:vqh", long_options, NULL)) !=
	       -1) {
		switch (c) {
		case 'I':
			if (encio_io_mode_parse(optarg, &global_opts.io_mode) ||
			    global_opts.io_mode == ENCIO_IO_NONE)
				return usage_error(&cmd_struct_encio,
						   "unknown I/O mode '%s'",
						   optarg);
			break;
		case 'd':
			global_opts.queue_depth = strtoul(optarg, &end, 10);
			if (*end || global_opts.queue_depth < 1 ||
			    global_opts.queue_depth > ENGINE_MAX_DEPTH)
				return usage_error(&cmd_struct_encio,
						   "queue depth must be 1..%d",
						   ENGINE_MAX_DEPTH);
			break;
		case 'v':
			global_opts.verbose++;
			break;
		case 'q':
			global_opts.verbose = -1;
			break;
		case 'h':
			usage_print(&cmd_struct_encio, true, 0);
			print_commands(stdout);
			exit(0);
		case 'V':
			printf("encio %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			return common_option(&cmd_struct_encio, c, NULL);
		}
	}
	return 0;
}

/*
 * Installed as btrfs-send or btrfs-receive (a link to encio, as btrbk's
 * btrfs-progs-btrbk backend calls them), encio is that command: its
 * options follow the name directly, as they do 'btrfs send'.
 */
static const char *program_name(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	return base ? base + 1 : argv0;
}

static const struct cmd_struct *command_of_program(const char *argv0)
{
	static const struct {
		const char *name;
		const struct cmd_struct *cmd;
	} programs[] = {
		{ "btrfs-send", &cmd_struct_send },
		{ "btrfs-receive", &cmd_struct_receive },
	};
	const char *base = program_name(argv0);
	size_t i;

	for (i = 0; i < sizeof(programs) / sizeof(programs[0]); i++)
		if (strcmp(base, programs[i].name) == 0)
			return programs[i].cmd;
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cmd_struct *const *cmd;
	const struct cmd_struct *program;
	const char *token;
	int ret;

	command_argv = argv;
	program = argc > 0 ? command_of_program(argv[0]) : NULL;
	if (program) {
		global_opts.progs_names = true;
		if (argc == 2 && !strcmp(argv[1], "--version")) {
			printf("%s (encio %s)\n", program_name(argv[0]),
			       PACKAGE_VERSION);
			return 0;
		}
		return program->fn(program, argc, argv);
	}

	ret = parse_global_options(argc, argv);
	if (ret)
		return ret;
	if (optind >= argc) {
		usage_print(&cmd_struct_encio, false, 1);
		print_commands(stderr);
		return EXIT_USAGE;
	}
	token = argv[optind];
	for (cmd = commands; *cmd; cmd++) {
		if (strcmp((*cmd)->token, token) == 0) {
			argc -= optind;
			argv += optind;
			command_argv = argv;
			/* 0 resets getopt, dropping the "+" mode of the global parse. */
			optind = 0;
			return (*cmd)->fn(*cmd, argc, argv);
		}
	}
	return usage_error(&cmd_struct_encio, "unknown command '%s'", token);
}
