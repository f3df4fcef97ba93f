// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "error.h"

int encio_error_set(struct encio_error *e, int err, const char *op,
		    const char *path, bool has_offset, uint64_t offset)
{
	size_t len;

	if (err < 0)
		err = -err;
	e->err = err;
	e->op = op;
	len = strnlen(path, sizeof(e->path) - 1);
	memcpy(e->path, path, len);
	e->path[len] = '\0';
	e->has_offset = has_offset;
	e->offset = offset;
	return -err;
}
