// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the send stream reader: any input must be read
 * to its end or rejected with an error, never read out of bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stream/stream.h"

static int count_cmd(void *arg)
{
	(*(unsigned long *)arg)++;
	return 0;
}

static int count_path(const char *path, void *arg)
{
	(void)path;
	(*(unsigned long *)arg)++;
	return 0;
}

static int count_write(const char *path, const struct stream_encoded_write *ew,
		       void *arg)
{
	const unsigned char *p = ew->data;
	unsigned long sum = 0;
	size_t i;

	(void)path;
	/* Touch every byte the reader hands out. */
	for (i = 0; i < ew->len; i++)
		sum += p[i];
	*(unsigned long *)arg += sum & 1;
	return 0;
}

static const struct stream_ops ops = {
	.mkfile = count_path,
	.mkdir = count_path,
	.unlink = count_path,
	.encoded_write = count_write,
	.end = count_cmd,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stream_reader r = { 0 };
	struct encio_error e;
	unsigned long seen = 0;
	int fd = memfd_create("fuzz", 0);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size &&
	    lseek(fd, 0, SEEK_SET) == 0 &&
	    stream_reader_init(&r, fd, "fuzz", &e) == 0)
		stream_process(&r, &ops, &seen, &e);
	stream_reader_release(&r);
	close(fd);
	return 0;
}
