// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for one extent decoder, chosen at build time with
 * -DFUZZ_COMPRESSION=<BTRFS_ENCODED_IO_COMPRESSION_*>. Every input must give
 * a result or an error, never a read or write out of bounds (ASan checks).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "base/kernel.h"

#ifndef FUZZ_COMPRESSION
#error "build with -DFUZZ_COMPRESSION=<id>"
#endif

static struct codec *codec;
static unsigned char out[BTRFS_MAX_UNCOMPRESSED];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t out_len;
	ssize_t n;
	unsigned char *in;

	if (!codec)
		codec = codec_new();
	/* A private copy sized exactly, so ASan sees any over-read. */
	in = malloc(size ? size : 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	n = codec_decode(codec, FUZZ_COMPRESSION, in, size, out, sizeof(out));
	if (n > (ssize_t)sizeof(out))
		abort();
	/* And a smaller output, to exercise the overflow checks. */
	out_len = size ? (data[0] * 521u) % sizeof(out) + 1 : 1;
	n = codec_decode(codec, FUZZ_COMPRESSION, in, size, out, out_len);
	if (n > (ssize_t)out_len)
		abort();
	free(in);
	return 0;
}
