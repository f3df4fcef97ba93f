/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What Debian's liburing 2.3 headers lack from the running kernel's
 * include/uapi/linux/io_uring.h. Each is guarded so a newer liburing wins.
 */
#ifndef ENCIO_COMPAT_H
#define ENCIO_COMPAT_H

#include <liburing.h>

/* io_uring.h: uring_cmd flag, since 5.19 (liburing 2.3 has it). */
#ifndef IORING_URING_CMD_FIXED
#define IORING_URING_CMD_FIXED (1U << 0)
#endif

/* io_uring.h: setup flags, since 6.0 / 6.1. */
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* io_uring.h: async cancel of any request, since 5.19. */
#ifndef IORING_ASYNC_CANCEL_ANY
#define IORING_ASYNC_CANCEL_ANY (1U << 2)
#endif

#endif
