/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-written extents for the unit tests (tests/data/codec): each line
 * of MANIFEST names a file of one extent's encoded bytes and the
 * parameters the kernel's encoded read returned for it. Include after
 * <cmocka.h>.
 */
#ifndef ENCIO_TEST_CODEC_FIXTURES_H
#define ENCIO_TEST_CODEC_FIXTURES_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
	char file[64];
	int comp;
	size_t unencoded_len, unencoded_offset, len;
	unsigned long crc;
};

static inline const char *fixtures_dir(void)
{
	static char dir[4096];
	const char *top = getenv("TOP_SRCDIR");
	const char *slash;

	if (top) {
		snprintf(dir, sizeof(dir), "%s/tests/data/codec", top);
		return dir;
	}
	/* This file's directory, as the compiler saw it. */
	slash = strrchr(__FILE__, '/');
	snprintf(dir, sizeof(dir), "%.*s/../data/codec",
		 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	return dir;
}

static inline void *read_whole(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	unsigned char *buf;
	long n;

	if (!f)
		fail_msg("%s: %s (set TOP_SRCDIR)", path, strerror(errno));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc(n);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), n);
	fclose(f);
	*len = n;
	return buf;
}

/* Every fixture of MANIFEST, at most @max; fails below 15. */
static inline int fixtures_load_all(struct fixture *fx, int max)
{
	char path[4200];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/MANIFEST", fixtures_dir());
	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: %s (set TOP_SRCDIR)", path, strerror(errno));
	while (n < max &&
	       fscanf(f, "%63s %d %zu %zu %zu %lx", fx[n].file, &fx[n].comp,
		      &fx[n].unencoded_len, &fx[n].unencoded_offset, &fx[n].len,
		      &fx[n].crc) == 6)
		n++;
	fclose(f);
	assert_true(n >= 15);
	return n;
}

/* The encoded bytes of @fx. */
static inline void *fixture_data(const struct fixture *fx, size_t *len)
{
	char path[4200];

	snprintf(path, sizeof(path), "%.4095s/%.63s", fixtures_dir(), fx->file);
	return read_whole(path, len);
}

/* The fixture named @name, and its encoded bytes. */
static inline void *fixture_load(const char *name, struct fixture *fx,
				 size_t *len)
{
	struct fixture all[64];
	int i, n = fixtures_load_all(all, 64);

	for (i = 0; i < n && strcmp(all[i].file, name); i++)
		;
	if (i == n)
		fail_msg("no fixture %s in MANIFEST", name);
	*fx = all[i];
	return fixture_data(fx, len);
}

#endif
