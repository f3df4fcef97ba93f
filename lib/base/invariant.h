/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ENCIO_ASSERT(cond): an invariant of lib/'s own state (a request's owner,
 * a job's state, a cache slot), not a check of input or of the kernel's
 * answers, which are errors returned as -errno.
 *
 * Built with ENCIO_ASSERTS (the sanitizer build, scripts/test.sh
 * --sanitize), a broken invariant prints where and what to stderr and
 * aborts: the one place lib/ ends the process, because the state it would
 * go on from is already wrong. Without it the macro compiles to nothing,
 * yet @cond is still type-checked and never evaluated.
 */
#ifndef ENCIO_INVARIANT_H
#define ENCIO_INVARIANT_H

#ifdef ENCIO_ASSERTS
#include <stdio.h>
#include <stdlib.h>

#define ENCIO_ASSERT(cond)                                                    \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: %s: assertion '%s' failed\n", \
				__FILE__, __LINE__, __func__, #cond);         \
			abort();                                              \
		}                                                             \
	} while (0)
#else
#define ENCIO_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
