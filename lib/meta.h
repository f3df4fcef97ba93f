/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The metadata of one copied file, for the single-file copy: what copy -r
 * gives each of its files (lib/tree_meta.c).
 */
#ifndef ENCIO_META_H
#define ENCIO_META_H

#include <sys/stat.h>

/*
 * The file @dst_fd given the owner, the xattrs (POSIX ACLs and file
 * capabilities among them; those @dst_fd has and the source lacks, such
 * as an ACL its directory passed on, removed), the mode and the times of
 * @src_fd, whose stat is @st: after its data, which clears set-id bits
 * and capabilities. 0, or -errno with *@op naming the step.
 */
int meta_copy_file(int src_fd, int dst_fd, const struct stat *st,
		   const char **op);

#endif
