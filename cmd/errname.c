// SPDX-License-Identifier: GPL-2.0
/*
 * errno names, so commands can report the kernel's error verbatim
 * ("EINVAL") for scripts to match, beside strerror() for people.
 */
#include <errno.h>
#include <stdio.h>

#include "commands.h"

#define E(name) [name] = #name

static const char *const errno_names[] = {
	E(EPERM),     E(ENOENT),     E(ESRCH),	 E(EINTR),	  E(EIO),
	E(ENXIO),     E(E2BIG),	     E(ENOEXEC), E(EBADF),	  E(ECHILD),
	E(EAGAIN),    E(ENOMEM),     E(EACCES),	 E(EFAULT),	  E(EBUSY),
	E(EEXIST),    E(EXDEV),	     E(ENODEV),	 E(ENOTDIR),	  E(EISDIR),
	E(EINVAL),    E(ENFILE),     E(EMFILE),	 E(ENOTTY),	  E(ETXTBSY),
	E(EFBIG),     E(ENOSPC),     E(ESPIPE),	 E(EROFS),	  E(EMLINK),
	E(EPIPE),     E(ERANGE),     E(EDEADLK), E(ENAMETOOLONG), E(ENOLCK),
	E(ENOSYS),    E(ENOTEMPTY),  E(ELOOP),	 E(ENODATA),	  E(EOVERFLOW),
	E(EBADFD),    E(EOPNOTSUPP), E(ENOBUFS), E(ETIMEDOUT),	  E(EALREADY),
	E(ECANCELED), E(EDQUOT),     E(EUCLEAN), E(ESTALE),
};

#undef E

const char *errno_name(int err)
{
	static char unknown[24];

	if (err < 0)
		err = -err;
	if (err < (int)(sizeof(errno_names) / sizeof(errno_names[0])) &&
	    errno_names[err])
		return errno_names[err];
	snprintf(unknown, sizeof(unknown), "E%d", err);
	return unknown;
}
