// SPDX-License-Identifier: GPL-2.0
/*
 * pass-check: the kernel's pass of ROOT made ahead (send_pass_make()),
 * then, once a line is read from standard input, ROOT sent to OUT with
 * that pass offered (send_run() with opts.pass), as copy -r --subvolumes
 * does. Between the two the caller may change ROOT, PARENT or a CLONE.
 *
 *   pass-check ROOT PARENT OUT [CLONE...]
 *
 * Prints "made BYTES" once the pass is made and "reused N" after the
 * send: N is 1 when the send read the pass, 0 when it asked the kernel
 * again. Exit status 0 when both worked.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "send/send.h"

static int fail(const char *what, const struct encio_error *e)
{
	fprintf(stderr, "pass-check: %s: %s: %s\n", what, e->path,
		strerror(e->err));
	return 1;
}

int main(int argc, char **argv)
{
	struct send_options opts = { 0 };
	struct send_stats stats;
	struct send_pass pass;
	struct encio_error e;
	const char *root;
	char line[64];
	int fd, ret;

	if (argc < 4) {
		fprintf(stderr,
			"usage: pass-check ROOT PARENT OUT [CLONE...]\n");
		return 2;
	}
	root = argv[1];
	opts.parent = argv[2];
	opts.clones = (const char *const *)argv + 4;
	opts.nr_clones = argc - 4;
	if (send_pass_make(&pass, root, &opts, 64 << 20, &e))
		return fail("make the pass", &e);
	printf("made %llu\n", (unsigned long long)pass.bytes);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(argv[3]);
		return 1;
	}
	opts.pass = &pass;
	ret = send_run(&root, 1, fd, argv[3], &opts, &stats, &e);
	close(fd);
	send_pass_release(&pass);
	if (ret)
		return fail("send", &e);
	printf("reused %llu\n", (unsigned long long)stats.passes_reused);
	return 0;
}
