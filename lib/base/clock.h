/* SPDX-License-Identifier: GPL-2.0 */
/* Seconds on the monotonic clock: rates, ETAs, checkpoint intervals. */
#ifndef ENCIO_CLOCK_H
#define ENCIO_CLOCK_H

#include <time.h>

static inline double clock_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
