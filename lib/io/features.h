/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the running kernel, a filesystem and this machine allow for encoded
 * I/O: gathered from the kernel's files and probed for real on scratch files.
 */
#ifndef ENCIO_FEATURES_H
#define ENCIO_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

#include "io/engine.h"

struct encio_features {
	char kernel[65];	/* uname release */
	bool btrfs;		/* PATH is on btrfs; the fields below need it */
	unsigned long fs_type;	/* statfs f_type */
	uint32_t sector_size;	/* statfs f_bsize */
	char mount_point[4096]; /* from /proc/self/mountinfo, "" unknown */
	char compress_opt[64]; /* "compress=zstd:3", "compress-force=...", "none" */
	bool path_is_file;     /* reads probed on PATH itself */
	int scratch_err;       /* making the scratch file for reads (errno) */
	struct encio_probe probe; /* read_err/write_err per mode, fixed, punted */
	bool cap_sys_admin;
	int send_stream_version; /* 0 unknown; 1 when the sysfs file is absent */
	bool defer_taskrun;	 /* SINGLE_ISSUER|DEFER_TASKRUN accepted */
	bool ring;		 /* io_uring available at all */
	uint64_t hugepages_total;
	uint64_t hugepages_free;
	uint64_t hugepage_kib;
	char thp_mode[16]; /* "always", "madvise", "never", "" unknown */
	enum bufpool_backing backing; /* what the pool got by default */
};

/*
 * Fill @f for the filesystem of @path (a file: reads probed on it; a
 * directory: on a scratch O_TMPFILE there). Returns 0, or -errno when @path
 * cannot be opened; a filesystem that is not btrfs is not an error.
 */
int features_probe(const char *path, struct encio_features *f);

#endif
