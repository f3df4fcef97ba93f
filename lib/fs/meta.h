/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Metadata of an entry, by descriptor (lib/fs/meta.c): owner, mode, times and
 * xattrs of a copy, from its source. The single-file copy calls
 * meta_copy_file(); copy -r the parts, as its walk knows more.
 */
#ifndef ENCIO_META_H
#define ENCIO_META_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * An entry by its name in an open directory, its source's or its copy's:
 * no path walk from the root for each entry, and nothing above that
 * directory resolved again. @name "" is the entry @dir itself (an O_PATH
 * fd); @name NULL, the open file @dir. A source root has only its path,
 * named by the user: AT_FDCWD.
 */
struct entry_at {
	int dir;
	const char *name;
};

/* The buffers of xattr copies: one per thread. */
struct xattr_buf {
	char *list;
	char *value;
	char *dst_list; /* DEST's, to compare or prune */
	char *dst_value;
	bool saw_caps; /* the last meta_copy_xattrs() copied security.capability */
};

int xattr_buf_init(struct xattr_buf *b);
void xattr_buf_release(struct xattr_buf *b);

/* meta_copy_xattrs(), meta_set_metadata() flags */
#define META_NO_XATTRS (1U << 0) /* the source is known to have none */
#define META_OWNED (1U << 1)	 /* the copy has the source's owner already */
#define META_COMPARE (1U << 2)	 /* DEST has some: set only what differs */
#define META_PRUNE (1U << 3)	 /* remove DEST's xattrs the source lacks */

/* chown and chmod of @a, never following a symlink: 0 or -1 with errno */
int meta_at_chown(struct entry_at a, uid_t uid, gid_t gid);
int meta_at_chmod(struct entry_at a, mode_t mode);
/* Whether the directory open at @fd has a default ACL. */
bool meta_has_default_acl(int fd);
/*
 * Copy the wanted xattrs raw; none to copy where the source is known to
 * have none (META_NO_XATTRS). @how: META_* flags. Returns the number of
 * xattrs set or removed, or -errno with *op set.
 */
int meta_copy_xattrs(struct xattr_buf *b, struct entry_at src,
		     struct entry_at dst, unsigned int how, const char **op);
/*
 * Owner, xattrs, mode and times of @dst (see struct entry_at: never
 * following a symlink) from @st and @src's xattrs. @how: META_* flags.
 * @cur: what @dst has now, where it exists already (a rerun): then only
 * what differs is set, and the number of changes returned; else 0 or
 * -errno.
 */
int meta_set_metadata(struct xattr_buf *b, struct entry_at src,
		      struct entry_at dst, const struct stat *st,
		      const struct stat *cur, unsigned int how,
		      const char **op);

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
