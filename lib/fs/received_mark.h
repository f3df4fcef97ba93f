/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The mark of a subvolume encio received: a trusted.* xattr on its root
 * directory (no unprivileged user can set or remove one) naming the
 * subvolume's UUID, its received UUID and the transaction that marked it
 * received, so that a parent or clone source found by received UUID is
 * known to be what encio received and unchanged since.
 */
#ifndef ENCIO_RECEIVED_MARK_H
#define ENCIO_RECEIVED_MARK_H

#include <stdbool.h>

#include <btrfsutil.h>
#include <linux/btrfs.h>

#define RECEIVED_MARK_XATTR "trusted.encio.received"

/*
 * BTRFS_IOC_SET_RECEIVED_SUBVOL with @rs on writable subvolume @fd, and
 * its mark in the transaction that ioctl commits, whose id the mark
 * holds: the subvolume's ctransid and rtransid are then that id. Without
 * the mark where the caller may not set it (not root). 0 or -errno.
 */
int received_mark_set(int fd, struct btrfs_ioctl_received_subvol_args *rs);

/*
 * Subvolume @fd, marked with @rs by received_mark_set(), made read-only.
 * Between that mark and read-only it may sit where other users can read
 * it, and a read moves an atime, so its ctransid: marked again (and made
 * read-only again) until none did. 0 or -errno.
 */
int received_mark_seal(int fd, struct btrfs_ioctl_received_subvol_args *rs);

enum received_trust {
	RECEIVED_TRUSTED,   /* marked and unchanged, or root's and unmarked */
	RECEIVED_NOT_ROOTS, /* unmarked, and its owner is not root */
	RECEIVED_ANEW,	    /* marked received again since (by its owner) */
	RECEIVED_CHANGED,   /* changed since it was marked */
};

/*
 * Whether subvolume @fd, of @info, is one encio received (or, unmarked,
 * root's: btrfs receive marks nothing, and only root can mark a subvolume
 * of root's received). @writable: it may have changed since (its changes
 * are looked at otherwise). A received_trust, or -errno.
 */
int received_mark_check(int fd, const struct btrfs_util_subvolume_info *info,
			bool writable);

/*
 * Whether subvolume @fd, of @info, carries a mark of its own and is
 * unchanged since it was marked: proof that encio received it, where
 * received_mark_check() also trusts a subvolume of root's with no mark.
 */
bool received_mark_own(int fd, const struct btrfs_util_subvolume_info *info);

/*
 * Whether subvolume @fd, of @info, carries a mark naming it as it is
 * received (its UUID, received UUID and rtransid), whatever changed in
 * it since.
 */
bool received_mark_names(int fd, const struct btrfs_util_subvolume_info *info);

/* What a received_trust other than RECEIVED_TRUSTED means, for messages. */
const char *received_trust_str(int trust);

#endif
