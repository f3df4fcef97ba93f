/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copy -r --subvolumes, ahead (lib/subvols/subvol_ahead.c): the kernel's
 * difference passes of the subvolumes to come, made on a thread of their
 * own while lib/subvols/copy_subvols.c copies those before them. A pass depends
 * on SRC only, so the next one needs nothing the current copy makes.
 */
#ifndef ENCIO_SUBVOL_AHEAD_H
#define ENCIO_SUBVOL_AHEAD_H

#include <signal.h>
#include <stddef.h>

#include "send/send.h"
#include "plan/subvol_plan.h"

struct subvol_ahead;

/*
 * Start making the passes of @plan's subvolumes, in the copy order, each
 * from the parent and with the clone sources the copy would give it if
 * every subvolume before it were copied. A writable subvolume's pass is of
 * its snapshot, which must exist by then. Returns 0 or -errno; *@a is
 * NULL, and nothing is made, on an error or with no pass to make. @stop
 * (or NULL): the copy's flag, which ends a wait for a pass and the pass.
 */
int subvols_ahead_start(struct subvol_ahead **a, struct subvol_plan *plan,
			const volatile sig_atomic_t *stop);
/*
 * The copy is at @pos in the copy order: passes of those before are of no
 * more use.
 */
void subvols_ahead_reach(struct subvol_ahead *a, size_t pos);
/*
 * The pass of @en from @parent with @clones, waited for if it is being
 * made; NULL if none was made for that (the caller asks the kernel).
 * Given back with subvols_ahead_done().
 */
const struct send_pass *subvols_ahead_take(struct subvol_ahead *a,
					   const struct subvol_entry *en,
					   const char *parent,
					   const char *const *clones,
					   size_t nr_clones);
void subvols_ahead_done(struct subvol_ahead *a, const struct send_pass *pass);
/* Stop making passes, wait for the thread, free what is left. */
void subvols_ahead_end(struct subvol_ahead *a);

#endif
