// SPDX-License-Identifier: GPL-2.0
#include <stdio.h>
#include <string.h>

#include "base/error.h"

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

void encio_error_rebase(struct encio_error *e, const char *from, const char *to)
{
	size_t len = strlen(from);
	char path[PATH_MAX];

	if (strncmp(e->path, from, len) ||
	    (e->path[len] && e->path[len] != '/'))
		return;
	if (snprintf(path, sizeof(path), "%s%s", to, e->path + len) <
	    (int)sizeof(path))
		memcpy(e->path, path, strlen(path) + 1);
}
