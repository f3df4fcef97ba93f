/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ENCIO_ERROR_H
#define ENCIO_ERROR_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* What went wrong, where: filled by the library, printed by cmd/. */
struct encio_error {
	int err; /* positive errno */
	const char *op;
	char path[PATH_MAX];
	uint64_t offset;
	bool has_offset;
};

/* Fill @e and return -err (err given either sign). */
int encio_error_set(struct encio_error *e, int err, const char *op,
		    const char *path, bool has_offset, uint64_t offset);
/*
 * The path in @e, if it is @from or below it, said from @to instead: a
 * descriptor's /proc/self/fd/N, which a user never typed, by its name.
 */
void encio_error_rebase(struct encio_error *e, const char *from,
			const char *to);

#endif
