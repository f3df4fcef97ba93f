// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes: the copy in flight when a run stopped, and what
 * the rerun goes on with. A subvolume copied whole is made in a partial
 * subvolume marked with its source and private until its last step; one
 * received as a difference keeps the checkpoints of receive -s. Either is
 * gone on with only where it is of the source the rerun copies, as that
 * is now; a writable subvolume's snapshot a stopped run left is kept for
 * it (subvols_partial_of_left()). Where each copy goes in DEST, and the
 * name of its partial there, are found here too (subvols_placement_open()):
 * the DEST side and the SRC side both ask.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "fs/inode_flags.h"
#include "base/kernel.h"

static int set_name(struct placement *p, const char *name)
{
	size_t len = strlen(name);

	if (len >= sizeof(p->name))
		return -ENAMETOOLONG;
	memcpy(p->name, name, len + 1);
	return 0;
}

int subvols_dest_path(const struct subvols *s, const char *rel, char *out,
		      size_t len)
{
	int n;

	/* below a mount point's "DEST/.", its entries are named DEST/NAME */
	n = strlen(s->dst);
	if (n >= 2 && !strcmp(s->dst + n - 2, "/."))
		n -= 2;
	n = rel[0] ? snprintf(out, len, "%.*s/%s", n, s->dst, rel) :
		     snprintf(out, len, "%s", s->dst);
	return n < 0 || n >= (int)len ? -ENAMETOOLONG : 0;
}

int subvols_placement_open(struct subvols *s, const struct subvol_entry *en,
			   struct placement *p, int top_fd)
{
	char dir[PATH_MAX], *slash;

	if (subvols_dest_path(s, en->rel, p->dst, sizeof(p->dst)))
		return encio_error_set(s->e, ENAMETOOLONG, "copy", en->src,
				       false, 0);
	if (en->rel[0]) {
		snprintf(dir, sizeof(dir), "%s", en->rel);
		slash = strrchr(dir, '/');
		if (set_name(p, slash ? slash + 1 : dir))
			return encio_error_set(s->e, ENAMETOOLONG, "copy",
					       en->src, false, 0);
		if (slash)
			*slash = 0;
		else
			dir[0] = 0;
		p->dir_fd = open_beneath(top_fd, dir,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	} else {
		snprintf(dir, sizeof(dir), "%s", p->dst);
		if (set_name(p, basename(dir)))
			return encio_error_set(s->e, ENAMETOOLONG, "copy",
					       en->src, false, 0);
		snprintf(dir, sizeof(dir), "%s", p->dst);
		p->dir_fd =
			open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (p->dir_fd < 0)
			p->dir_fd = -errno;
	}
	if (p->dir_fd < 0)
		return encio_error_set(s->e, p->dir_fd, "open the directory of",
				       p->dst, false, 0);
	if (subvol_temp_name(p->partial, p->name, PARTIAL_SUFFIX)) {
		close(p->dir_fd);
		return encio_error_set(s->e, ENAMETOOLONG, "copy", en->src,
				       false, 0);
	}
	return 0;
}

/*
 * Changes of a directory's entries, in SRC (snapshots and bases made,
 * renamed, deleted beside writable subvolumes) and in DEST (copies put in
 * place): where the directory is append-only or immutable, as SRC's
 * directories may be and their copies then are, lifted for the change
 * alone (inode_flags_lifted_for()). 0 or -errno.
 */
static int delete_id_op(int dir_fd, void *arg)
{
	return btrfs_util_delete_subvolume_by_id_fd(dir_fd, *(uint64_t *)arg) ?
		       -(errno ?: EIO) :
		       0;
}

int subvols_delete_id(int dir_fd, uint64_t id)
{
	return inode_flags_lifted_for(dir_fd, delete_id_op, &id);
}

static int rmdir_op(int dir_fd, void *arg)
{
	return unlinkat(dir_fd, arg, AT_REMOVEDIR) ? -errno : 0;
}

int subvols_rmdir(int dir_fd, const char *name)
{
	return inode_flags_lifted_for(dir_fd, rmdir_op, (void *)name);
}

/*
 * A partial copied whole carries its source (UUID, then ctransid, little
 * endian) in a trusted xattr, which only root can set.
 */
#define PARTIAL_SOURCE_XATTR "trusted.encio.copy-of"
#define PARTIAL_SOURCE_LEN (BTRFS_UUID_SIZE + 8)

static void partial_source(const struct subvol_entry *en, uint8_t *v)
{
	uint64_t ctransid =
		htole64(en->snap.path ? en->snap.ctransid : en->info.ctransid);

	memcpy(v, en->snap.path ? en->snap.uuid : en->info.uuid,
	       BTRFS_UUID_SIZE);
	memcpy(v + BTRFS_UUID_SIZE, &ctransid, sizeof(ctransid));
}

/*
 * Whether the directory @fd is a subvolume's root nobody but us could have
 * put anything in: ours (one another user made, or renamed onto the name,
 * is theirs), made private (whoever holds it open can add no entry after
 * that), and empty then (a btrfs directory's size counts its entries'
 * names). 0, -EEXIST where it is not, or -errno.
 */
static int root_private_empty(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID || st.st_uid != geteuid())
		return -EEXIST;
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700))
		return -errno;
	if (fstat(fd, &st))
		return -errno;
	return st.st_size ? -EEXIST : 0;
}

/*
 * The new partial's root @fd, before anything is copied into it: checked
 * to be the empty subvolume just made, private (nobody else can reach
 * what is made in it), and marked with its source.
 */
int subvols_partial_mark(const struct subvol_entry *en, int fd)
{
	uint8_t v[PARTIAL_SOURCE_LEN];
	int ret = root_private_empty(fd);

	if (ret)
		return ret;
	partial_source(en, v);
	if (fsetxattr(fd, PARTIAL_SOURCE_XATTR, v, sizeof(v), 0))
		return -errno;
	return 0;
}

/* The copy is whole: the mark goes before it is marked received. */
static int unmark_op(int fd, void *arg)
{
	(void)arg;
	return fremovexattr(fd, PARTIAL_SOURCE_XATTR) && errno != ENODATA ?
		       -errno :
		       0;
}

/* The root of a copy may be append-only or immutable as its source's is. */
int subvols_partial_unmark(int fd)
{
	return inode_flags_lifted_for(fd, unmark_op, NULL);
}

/*
 * Whether the subvolume @info is a finished copy of @en's source as it is
 * now: marked received as its stream (or copy_whole()) marks it, the last
 * step before it is put in place.
 */
static bool finished_copy_of(const struct subvol_entry *en,
			     const struct btrfs_util_subvolume_info *info)
{
	if (en->snap.path)
		return info->stransid == en->snap.ctransid &&
		       !memcmp(info->received_uuid, en->snap.uuid,
			       BTRFS_UUID_SIZE);
	return info->stransid == en->info.ctransid &&
	       !memcmp(info->received_uuid, subvol_expected_received(en),
		       BTRFS_UUID_SIZE);
}

/*
 * The subvolume at the partial's name deleted, where it is a partial of
 * ours: its root ours, and marked with a source (only root can set the
 * mark), or a finished copy of @en's source, which a stopped run left
 * before putting it in place (then no other subvolume is lost: what it
 * holds is made again), or empty and nobody else's to fill, as a run
 * stopped between making the partial and marking it leaves it. Anyone who
 * may write DEST may have renamed any other subvolume, theirs or root's,
 * onto the name. Opened without following or blocking, checked, and
 * deleted by the id of what was opened. -EEXIST: something else is there,
 * left alone.
 */
static int partial_delete(const struct subvol_entry *en, struct placement *p)
{
	struct btrfs_util_subvolume_info info;
	struct stat st;
	int fd, ret = 0;

	fd = openat(p->dir_fd, p->partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT			  ? 0 :
		       errno == ENOTDIR || errno == ELOOP ? -EEXIST :
							    -errno;
	if (fstat(fd, &st) || st.st_ino != BTRFS_FIRST_FREE_OBJECTID ||
	    st.st_uid != geteuid() ||
	    btrfs_util_subvolume_info_fd(fd, 0, &info))
		ret = -EEXIST;
	else if (fgetxattr(fd, PARTIAL_SOURCE_XATTR, NULL, 0) < 0 &&
		 !finished_copy_of(en, &info))
		ret = info.flags & BTRFS_ROOT_SUBVOL_RDONLY ?
			      -EEXIST :
			      root_private_empty(fd);
	if (!ret)
		ret = subvols_delete_id(p->dir_fd, info.id);
	close(fd);
	return ret;
}

static int partial_remove(struct subvols *s, const struct subvol_entry *en,
			  struct placement *p)
{
	int ret = partial_delete(en, p);

	if (ret == -EEXIST)
		return encio_error_set(
			s->e, EEXIST,
			"make the copy (what is at its partial's name is no partial of encio's: move it away)",
			p->partial, false, 0);
	return ret ? encio_error_set(s->e, -ret,
				     "delete the copy left in flight",
				     p->partial, false, 0) :
		     0;
}

/*
 * Whether @partial in @dir_fd is a whole copy of @en an earlier run left
 * in flight: a writable subvolume marked with @en's source as it is now,
 * owned by us, and private still (its root gets its source's mode only
 * once everything below it is copied), so that nobody else could have
 * changed what is in it. copy -r's resume then keeps what is complete
 * and identical in it.
 */
static bool partial_copy_of(const struct subvol_entry *en, int dir_fd,
			    const char *partial)
{
	uint8_t want[PARTIAL_SOURCE_LEN], got[PARTIAL_SOURCE_LEN];
	struct btrfs_util_subvolume_info info;
	struct stat st;
	bool ok;
	int fd;

	fd = openat(dir_fd, partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	partial_source(en, want);
	ok = !fstat(fd, &st) && st.st_ino == BTRFS_FIRST_FREE_OBJECTID &&
	     st.st_uid == geteuid() && !(st.st_mode & 077) &&
	     fgetxattr(fd, PARTIAL_SOURCE_XATTR, got, sizeof(got)) ==
		     (ssize_t)sizeof(got) &&
	     !memcmp(got, want, sizeof(got)) &&
	     !btrfs_util_subvolume_info_fd(fd, 0, &info) &&
	     !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY);
	close(fd);
	return ok;
}

/* Whether @point is in @en's stream: a stream names it so. */
static bool point_of(const struct subvol_entry *en,
		     const struct resume_point *point)
{
	if (en->snap.path)
		return point->ctransid == en->snap.ctransid &&
		       !memcmp(point->uuid, en->snap.uuid, BTRFS_UUID_SIZE);
	return point->ctransid == en->info.ctransid &&
	       !memcmp(point->uuid, subvol_expected_received(en),
		       BTRFS_UUID_SIZE);
}

/*
 * What an earlier run left of @en's copy in flight: kept to go on with
 * where it is of @en's source as it is now and made the way this run
 * makes it (@whole, or received as a difference: the point a receive -s
 * of it reached, which the sender checks again), else deleted.
 */
int subvols_partial_settle(struct subvols *s, const struct subvol_entry *en,
			   struct placement *p, bool whole)
{
	int ret;

	p->resume_whole = p->resume_stream = false;
	ret = receive_name_resumable(p->partial) ?
		      receive_partial_point(p->dir_fd, p->partial, &p->point) :
		      -ENAMETOOLONG;
	if (!ret && !whole && point_of(en, &p->point))
		p->resume_stream = true;
	else if (ret == -ENAMETOOLONG || (ret == -ENOENT && !whole))
		ret = 0;
	else
		ret = receive_partial_drop(p->dir_fd, p->partial);
	if (ret)
		return encio_error_set(s->e, -ret,
				       "delete the partial receive left of",
				       p->dst, false, 0);
	if (whole && partial_copy_of(en, p->dir_fd, p->partial)) {
		p->resume_whole = true;
		return 0;
	}
	return partial_remove(s, en, p);
}

/*
 * A copy that failed or was stopped: what a rerun can go on with stays
 * (a whole copy's partial, marked still; the checkpoint a receive kept:
 * true), the rest goes.
 */
bool subvols_partial_drop(struct subvols *s, const struct subvol_entry *en,
			  struct placement *p, bool whole)
{
	if (whole ? partial_copy_of(en, p->dir_fd, p->partial) :
		    receive_get_stats(s->rcv)->partial_kept[0] != '\0')
		return true;
	partial_delete(en, p);
	if (!whole && receive_name_resumable(p->partial))
		receive_partial_drop(p->dir_fd, p->partial);
	return false;
}

/*
 * Whether a stopped run left writable @en's copy in flight (below
 * @top_fd, -1 where DEST has nothing yet) made from the snapshot it left
 * too, held in en->snap: that snapshot is then kept for the copy to go
 * on with, instead of one of this run's start.
 */
bool subvols_partial_of_left(struct subvols *s, const struct subvol_entry *en,
			     int top_fd)
{
	struct encio_error first = *s->e;
	struct placement p = { 0 };
	bool of;

	if (top_fd < 0 || subvols_placement_open(s, en, &p, top_fd)) {
		*s->e = first;
		return false;
	}
	of = partial_copy_of(en, p.dir_fd, p.partial) ||
	     (!receive_partial_point(p.dir_fd, p.partial, &p.point) &&
	      point_of(en, &p.point));
	close(p.dir_fd);
	return of;
}

/*
 * A whole copy's partial at @name in @dir_fd, deleted by the id of what
 * was opened: a subvolume's root, ours, marked with a source (only root
 * can set the mark). -ENOENT: none; -EEXIST: something else, left alone.
 */
static int marked_partial_delete(int dir_fd, const char *name)
{
	struct btrfs_util_subvolume_info info;
	struct stat st;
	int fd, ret;

	fd = subvol_root_openat(dir_fd, name, &info);
	if (fd < 0)
		return fd == -ENOENT ? -ENOENT : -EEXIST;
	if (fstat(fd, &st) || st.st_uid != geteuid() ||
	    fgetxattr(fd, PARTIAL_SOURCE_XATTR, NULL, 0) < 0)
		ret = -EEXIST;
	else
		ret = subvols_delete_id(dir_fd, info.id);
	close(fd);
	return ret;
}

int subvols_partial_abort(const char *dst, pid_t *holder, struct encio_error *e)
{
	char dir[PATH_MAX], base[PATH_MAX], partial[NAME_MAX + 1];
	char received[PATH_MAX + NAME_MAX + 2];
	const char *name, *parent;
	int dir_fd, whole, ret;

	snprintf(dir, sizeof(dir), "%s", dst);
	snprintf(base, sizeof(base), "%s", dst);
	name = basename(base);
	parent = dirname(dir);
	if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "/") ||
	    subvol_temp_name(partial, name, PARTIAL_SUFFIX))
		return encio_error_set(e, EINVAL,
				       "take DEST/NAME (the copy's path) from",
				       dst, false, 0);
	/* a difference's, first: refused while a copy receives it */
	snprintf(received, sizeof(received), "%s/%s", parent, partial);
	ret = receive_partial_abort(received, holder, e);
	if (ret && ret != -ENOENT)
		return ret;
	dir_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return encio_error_set(e, errno, "open the directory of", dst,
				       false, 0);
	whole = marked_partial_delete(dir_fd, partial);
	close(dir_fd);
	if (!ret || !whole)
		return 0;
	if (whole == -ENOENT)
		return encio_error_set(
			e, ENOENT, "find a partial copy (copy --subvolumes) of",
			dst, false, 0);
	if (whole == -EEXIST)
		return encio_error_set(
			e, EEXIST,
			"find a partial copy (what is at its partial's name is no partial of encio's) of",
			dst, false, 0);
	return encio_error_set(e, -whole, "delete the partial copy of", dst,
			       false, 0);
}
