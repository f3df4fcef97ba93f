// SPDX-License-Identifier: GPL-2.0
/*
 * encio dump: one line per stream command, in the layout of
 * 'btrfs receive --dump', with every crc32c verified on the way.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "dump_stream.h"

static const char *const dump_usage[] = {
	"encio dump [-f FILE] [-v|-q]",
	"Print the commands of a send stream, one per line.",
	"",
	"Reads a btrfs send stream (version 1, 2 or 3, as written by",
	"'btrfs send' or 'encio send') from FILE or standard input (not a",
	"terminal) and prints each command with its attributes, paths prefixed",
	"with the subvolume as 'btrfs receive --dump' does. Every command's",
	"crc32c and every length is checked; a malformed stream is an error",
	"naming the command's offset.",
	"",
	"-f|--file FILE  read the stream from FILE instead of standard input",
	"-v|--verbose, -q|--quiet  as the global options (no effect here)",
	"-h|--help   this help",
	NULL
};

static int cmd_dump(const struct cmd_struct *cmd, int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "file", required_argument, NULL, 'f' }, COMMON_LONG_OPTIONS
	};
	const char *file = NULL;
	struct encio_error e;
	int fd = STDIN_FILENO, opt, ret;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "f:",
				  long_options, NULL)) != -1) {
		switch (opt) {
		case 'f':
			file = optarg;
			break;
		default:
			if (common_option(cmd, opt, NULL))
				return EXIT_USAGE;
			break;
		}
	}
	if (optind != argc)
		return usage_error(cmd, "unexpected argument '%s'",
				   argv[optind]);
	if (!file && isatty(STDIN_FILENO)) {
		print_error(
			"not reading a stream from a terminal: use -f or a pipe");
		return 1;
	}
	if (file) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			print_error("cannot open '%s': %s", file,
				    strerror(errno));
			return 1;
		}
	}
	if (refuse_compressed_stream(fd, file, "encio dump")) {
		ret = 1;
		goto out;
	}
	ret = dump_stream(fd, file ? file : "stdin", stdout, &e);
	if (fflush(stdout) && !ret)
		ret = encio_error_set(&e, errno, "write", "stdout", false, 0);
	if (ret)
		print_encio_error(&e);
out:
	if (file)
		close(fd);
	return ret ? 1 : 0;
}

const struct cmd_struct cmd_struct_dump = { "dump", cmd_dump, dump_usage };
