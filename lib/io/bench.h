/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Benchmark passes for encio bench: every encoded extent of a file read
 * (or read and written into a scratch file) through one engine and mode,
 * with a checksum per extent so modes can be compared byte for byte.
 */
#ifndef ENCIO_BENCH_H
#define ENCIO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "io/engine.h"

/* The file offsets of a file's compressed extents, from its extent map. */
struct bench_target {
	uint64_t *offsets;
	size_t nr;
	uint64_t size; /* i_size */
};

int bench_target_build(int fd, struct bench_target *t);
void bench_target_release(struct bench_target *t);

struct bench_pass {
	uint64_t extents; /* encoded reads that returned data */
	uint64_t logical; /* file bytes they cover (args.len) */
	uint64_t encoded; /* encoded bytes returned */
	uint64_t plain;	  /* reads that came back uncompressed (not written) */
	uint64_t *sums;	  /* per target, bench_extent_sum(); NULL: none */
	int err;	  /* first error (positive errno), 0 if none */
	uint64_t err_offset;
	const char *err_op;
};

/*
 * Read every target with an encoded read through @mode, keeping all of the
 * engine's slots busy. Returns 0 or -errno (then @p says where).
 */
int bench_read_pass(struct engine *engine, enum encio_io_mode mode, int fd,
		    const struct bench_target *t, struct bench_pass *p);

/*
 * Read every target through @read_mode and write it encoded at the same
 * offset of @dst_fd (truncated to the source size first) through
 * @write_mode, then fsync @dst_fd. Returns 0 or -errno.
 */
int bench_copy_pass(struct engine *engine, enum encio_io_mode read_mode,
		    enum encio_io_mode write_mode, int src_fd, int dst_fd,
		    const struct bench_target *t, struct bench_pass *p);

/* A 64-bit checksum over an extent's offset, parameters and bytes. */
uint64_t bench_extent_sum(uint64_t offset,
			  const struct btrfs_ioctl_encoded_io_args *a,
			  const void *buf, size_t len);

/* The median of @n values (sorts @v); 0 for none. */
double bench_median(double *v, size_t n);

#endif
