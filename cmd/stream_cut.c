// SPDX-License-Identifier: GPL-2.0
/*
 * encio stream-cut: a stream file stopped short (encio send -f cut, a
 * stream cut on its way to a file), cut at its last whole command, and the
 * token that has encio send -t append the rest to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "stream/resume.h"

static const char *const stream_cut_usage[] = {
	"encio stream-cut FILE",
	"Cut a stream file stopped short and print the token that resumes it.",
	"",
	"FILE holds a send stream that stopped before its end: an 'encio send",
	"-f' that was interrupted (which keeps what it wrote as",
	"FILE.encio-partial), or a stream cut on its way to a file. The file",
	"is cut after its last whole command (every command before it is",
	"checked, its crc32c included), and the resume token of that point is",
	"printed. 'encio send -t TOKEN >> FILE' then appends exactly the rest:",
	"no header and no resume command, so that the file reads as one",
	"stream, the one an uninterrupted send gives, to encio receive -f and",
	"btrfs receive -f alike.",
	"",
	"The file is locked while it is read and cut: a stream-cut of a file",
	"another encio holds is refused.",
	"",
	"-v|--verbose  say where the file was cut",
	"-q|--quiet    as the global option",
	"-h|--help     this help",
	NULL
};

/* FILE open, a regular file, locked against another encio. */
static int open_locked(const char *file)
{
	struct stat st;
	int fd = open(file, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		print_error("cannot open '%s': %s", file, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		print_error("cannot cut '%s': not a regular file", file);
		close(fd);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		print_error("cannot cut '%s': %s", file,
			    errno == EWOULDBLOCK ?
				    "another encio is writing or cutting it" :
				    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int cut_file(const char *file)
{
	char token[RESUME_TOKEN_MAX];
	struct resume_point p;
	struct encio_error e;
	struct stat st;
	uint64_t end = 0;
	int fd, ret = 1;

	fd = open_locked(file);
	if (fd < 0)
		return 1;
	if (stream_file_point(fd, file, &p, &end, &e)) {
		print_encio_error(&e);
		goto out;
	}
	if (fstat(fd, &st) ||
	    ((uint64_t)st.st_size > end && ftruncate(fd, (off_t)end)) ||
	    fsync(fd)) {
		print_error("cannot cut '%s' at byte %llu: %s", file,
			    (unsigned long long)end, strerror(errno));
		goto out;
	}
	verbose(1, "'%s' cut at byte %llu of %llu, after %llu commands of %s",
		file, (unsigned long long)end, (unsigned long long)st.st_size,
		(unsigned long long)p.commands, p.name);
	resume_token_encode(&p, token);
	printf("%s\n", token);
	ret = fflush(stdout) ? 1 : 0;
out:
	close(fd);
	return ret;
}

static int cmd_stream_cut(const struct cmd_struct *cmd, int argc, char **argv)
{
	static const struct option long_options[] = { COMMON_LONG_OPTIONS };
	int opt;

	while ((opt = getopt_long(argc, argv, COMMON_SHORT_OPTIONS,
				  long_options, NULL)) != -1)
		if (common_option(cmd, opt, NULL))
			return EXIT_USAGE;
	if (argc - optind != 1)
		return usage_error(cmd, "one FILE expected");
	return cut_file(argv[optind]);
}

const struct cmd_struct cmd_struct_stream_cut = { "stream-cut", cmd_stream_cut,
						  stream_cut_usage };
