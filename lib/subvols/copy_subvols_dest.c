// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes, DEST's side: what DEST holds at each subvolume's
 * name (nothing, its complete copy, a copy to update, or something not
 * encio's), and the copies put in place, replaced and finished.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "subvols/copy_subvols_internal.h"
#include "fs/inode_flags.h"
#include "fs/received_mark.h"
#include "base/kernel.h"

static bool dir_empty(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *d;
	bool empty = true;
	DIR *dir;

	if (fd < 0)
		return false;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return false;
	}
	while (empty && (d = readdir(dir)))
		empty = !strcmp(d->d_name, ".") || !strcmp(d->d_name, "..");
	closedir(dir);
	return empty;
}

/*
 * A writable subvolume's finished copy records the moment of SRC it holds
 * (finish_writable() in copy_subvols_src.c): its stime, when the snapshot it was copied
 * from was begun, and where SRC has no received UUID of its own, its
 * stransid, SRC's ctransid then (its received UUID stays none, so btrfs
 * send names it by its own UUID). Where SRC has one, the copy keeps it
 * and SRC's stransid, a transid of the filesystem SRC was received from:
 * none of this one's transactions bounds what changed since. Its rtransid,
 * the transaction that marked it, is where its ctransid stays until
 * anyone changes it.
 */
static int writable_copy_state(const struct subvols *s,
			       const struct subvol_entry *en, int fd,
			       const struct btrfs_util_subvolume_info *info)
{
	uint64_t since = info->stransid;
	int changed;

	if (subvol_uuid_set(en->info.received_uuid)) {
		if (memcmp(info->received_uuid, en->info.received_uuid,
			   BTRFS_UUID_SIZE))
			return -EEXIST;
		since = 0;
	} else if (subvol_uuid_set(info->received_uuid) || !info->stransid) {
		/* none of encio's: no mark, or received from something */
		return -EEXIST;
	} else if (info->stransid == en->info.ctransid) {
		/* SRC now, not the snapshot: one a stopped run left may be older */
		return 1;
	}
	changed = subvols_src_changed(s, en, since, &info->stime);
	if (changed <= 0)
		return changed ?: 1;
	/* SRC changed since: copied again, unless the copy changed too */
	changed = subvols_copy_changed(fd, info);
	return changed < 0 ? changed : changed ? -ESTALE : 2;
}

int subvols_copy_changed(int fd, const struct btrfs_util_subvolume_info *info)
{
	struct timespec tick, since = info->rtime;

	if (info->ctransid <= info->rtransid)
		return 0;
	/*
	 * rtime is the coarse clock's when the mark was set, and a ctime
	 * stamped fine-grained before it (the mark's own xattr on the root)
	 * may pass it by up to a tick of that clock: a change counts from
	 * the tick after
	 */
	if (clock_getres(CLOCK_REALTIME_COARSE, &tick) || tick.tv_sec)
		tick = (struct timespec){ .tv_nsec = 10000000 };
	since.tv_nsec += tick.tv_nsec;
	if (since.tv_nsec >= 1000000000) {
		since.tv_sec++;
		since.tv_nsec -= 1000000000;
	}
	return subvols_changed_since(fd, info->rtransid, &since, NULL);
}

/*
 * What DEST holds at @en's name: nothing (0), its complete copy (1), a
 * copy SRC changed since, to be replaced (2), an empty directory (0,
 * p->placeholder), a copy both changed since (-ESTALE), or something else
 * (-EEXIST).
 */
int subvols_dest_state(const struct subvols *s, struct subvol_entry *en,
		       struct placement *p)
{
	struct btrfs_util_subvolume_info info;
	struct stat st;
	int fd, ret;

	if (fstatat(p->dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return -EEXIST;
	if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID) {
		p->placeholder = dir_empty(p->dir_fd, p->name);
		return p->placeholder ? 0 : -EEXIST;
	}
	fd = openat(p->dir_fd, p->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	if (ret) {
		close(fd);
		return ret;
	}
	if (en->read_only) {
		ret = memcmp(info.received_uuid, subvol_expected_received(en),
			     BTRFS_UUID_SIZE) ?
			      -EEXIST :
			      1;
		/*
		 * Left as it is, but the parent of a difference only if no
		 * one but root can have changed it since it was received
		 */
		en->parent_ok = ret == 1 &&
				received_mark_check(fd, &info, false) ==
					RECEIVED_TRUSTED;
	} else if (info.flags & BTRFS_ROOT_SUBVOL_RDONLY) {
		ret = -EEXIST;
	} else {
		p->copy_id = info.id;
		p->copy_stransid = info.stransid;
		/* copied from the snapshot beside it, not finished yet */
		en->parent_ok = en->snap.held &&
				!memcmp(info.received_uuid, en->snap.uuid,
					BTRFS_UUID_SIZE);
		ret = en->parent_ok ? 1 : writable_copy_state(s, en, fd, &info);
		/* its owner may have marked it again to hide a change */
		if (ret == 2 &&
		    received_mark_check(fd, &info, true) != RECEIVED_TRUSTED)
			p->copy_stransid = 0; /* replaced, not from its base */
	}
	close(fd);
	return ret;
}

/*
 * The directories a copy's entries move between, and the one it lands
 * in, may be append-only or immutable as their sources are: lifted for
 * the move alone (inode_flags_lifted_for()).
 */
static int times_op(int dir_fd, void *arg)
{
	return futimens(dir_fd, arg) ? -errno : 0;
}

int subvols_times_restore(int dir_fd, const struct stat *st)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };

	return inode_flags_lifted_for(dir_fd, times_op, times);
}

static int delete_op(int dir_fd, void *arg)
{
	return btrfs_util_delete_subvolume_fd(
		       dir_fd, arg, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE) ?
		       -(errno ?: EIO) :
		       0;
}

/*
 * @name in @from renamed to @to: a read-only subvolume made writable for
 * the move (btrfs moves none to another directory, EROFS), then marked
 * received again as it was and sealed (received_mark_seal()); a writable
 * copy encio received, unchanged since its mark, marked again (the move
 * changes its root), so that a change after it is still told from it.
 */
static int carry_rename(int from, int to, const char *name)
{
	struct btrfs_ioctl_received_subvol_args rs = { 0 };
	struct btrfs_util_subvolume_info info;
	bool remark = false;
	int fd, ret, ro = 0;

	fd = openat(from, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
	if (fd >= 0 && !btrfs_util_subvolume_info_fd(fd, 0, &info)) {
		if (info.flags & BTRFS_ROOT_SUBVOL_RDONLY)
			ro = btrfs_util_set_subvolume_read_only_fd(fd, false) ?
				     -(errno ?: EIO) :
				     1;
		else
			remark = received_mark_names(fd, &info) &&
				 !subvols_copy_changed(fd, &info);
		memcpy(rs.uuid, info.received_uuid, BTRFS_UUID_SIZE);
		rs.stransid = info.stransid;
		rs.stime.sec = info.stime.tv_sec;
		rs.stime.nsec = info.stime.tv_nsec;
	}
	ret = ro < 0 ? ro : inode_flags_lifted_rename(from, name, to, name);
	if (ro > 0) {
		ro = subvol_uuid_set(info.received_uuid) ?
			     received_mark_set(fd, &rs) ?:
			     received_mark_seal(fd, &rs) :
		     btrfs_util_set_subvolume_read_only_fd(fd, true) ?
			     -(errno ?: EIO) :
			     0;
		ret = ret ?: ro;
	}
	if (!ret && remark)
		ret = received_mark_set(fd, &rs);
	if (fd >= 0)
		close(fd);
	return ret;
}

int subvols_carry_nested(int old_fd, int new_fd, const char *rel)
{
	const char *name;
	struct stat st;
	int from, to, ret = 0;

	from = open_parent_resolve(old_fd, rel, O_RDONLY | O_DIRECTORY,
				   RESOLVE_CONFINED, &name);
	if (from < 0)
		return from;
	to = open_parent_resolve(new_fd, rel, O_RDONLY | O_DIRECTORY,
				 RESOLVE_CONFINED, &name);
	if (to < 0) {
		close(from);
		return to == -ENOENT || to == -ENOTDIR ? 0 : to;
	}
	if (fstat(to, &st)) {
		ret = -errno;
	} else {
		ret = carry_rename(from, to, name);
		ret = ret == -EEXIST ? 0 :
		      ret	     ? ret :
				       subvols_times_restore(to, &st);
	}
	close(to);
	close(from);
	return ret;
}

/* Whether a subvolume of SRC is copied to @rel below DEST's top. */
static bool planned(const struct subvols *s, const char *dir, const char *rel)
{
	size_t i, n = strlen(dir);

	for (i = 0; i < s->plan.nr; i++) {
		const char *r = s->plan.v[i].rel;

		if (n ? !strncmp(r, dir, n) && r[n] == '/' &&
				    !strcmp(r + n + 1, rel) :
			!strcmp(r, rel))
			return true;
	}
	return false;
}

int subvols_drop_nested(int fd)
{
	const char *name;
	char **nested;
	size_t i, nr;
	int ret, dir, sub;

	ret = subvol_children(fd, &nested, &nr);
	for (i = 0; i < nr; i++) {
		sub = ret ? -1 :
			    open_beneath(fd, nested[i],
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (sub >= 0) {
			ret = subvols_drop_nested(sub);
			close(sub);
		}
		dir = ret ? -1 :
			    open_parent_resolve(fd, nested[i],
						O_RDONLY | O_DIRECTORY,
						RESOLVE_CONFINED, &name);
		if (dir >= 0) {
			ret = inode_flags_lifted_for(dir, delete_op,
						     (void *)name);
			close(dir);
		}
		free(nested[i]);
	}
	free(nested);
	return ret;
}

/*
 * The copy a rerun replaces, deleted once its replacement is complete.
 * The copies of the subvolumes nested in it that SRC still has at their
 * path are moved into the replacement first, where it has their
 * directory, so that their own turns find them, complete or to update,
 * instead of copying them again; the others go with it.
 */
int subvols_replace_copy(struct subvols *s, const struct subvol_entry *en,
			 struct placement *p)
{
	int old_fd, new_fd, ret;
	char **nested;
	size_t i, nr;

	old_fd = openat(p->dir_fd, p->name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (old_fd < 0)
		return encio_error_set(s->e, errno, "open", p->dst, false, 0);
	new_fd = openat(p->dir_fd, p->partial,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (new_fd < 0) {
		close(old_fd);
		return encio_error_set(s->e, errno, "open the new copy of",
				       p->dst, false, 0);
	}
	ret = subvol_children(old_fd, &nested, &nr);
	for (i = 0; i < nr; i++) {
		if (!ret && planned(s, en->rel, nested[i]))
			ret = subvols_carry_nested(old_fd, new_fd, nested[i]);
		free(nested[i]);
	}
	free(nested);
	close(new_fd);
	if (ret) {
		close(old_fd);
		return encio_error_set(
			s->e, ret,
			"move the subvolumes nested in it into the new copy of",
			p->dst, false, 0);
	}
	ret = subvols_drop_nested(old_fd);
	close(old_fd);
	ret = ret ?: inode_flags_lifted_for(p->dir_fd, delete_op, p->name);
	if (ret)
		return encio_error_set(
			s->e, -ret,
			"replace the copy (its source changed since) of",
			p->dst, false, 0);
	return 0;
}

/*
 * The times of the directory @en's copy lands in, as the copy of the
 * subvolume it lies in has that directory: from that subvolume's
 * snapshot where it was copied from one (SRC's own directory may have
 * changed since, encio's snapshots beside @en made in it), else from
 * SRC's. A difference from that copy, for a snapshot of it, takes the
 * directory as the snapshot sent holds it.
 */
static int landing_stat(struct subvols *s, const struct subvol_entry *en,
			struct stat *st)
{
	const struct subvol_entry *c =
		en->container >= 0 ? &s->plan.v[en->container] : NULL;
	const char *below, *name;
	int fd, dir_fd, ret;

	if (c && c->snap.held) {
		fd = subvol_entry_open(&s->plan, c, true);
		if (fd < 0)
			return fd;
		below = en->rel + strlen(c->rel) + (c->rel[0] ? 1 : 0);
		dir_fd = open_parent_resolve(fd, below, O_RDONLY | O_DIRECTORY,
					     RESOLVE_CONFINED, &name);
		close(fd);
	} else {
		dir_fd = subvol_entry_dir_open(&s->plan, en);
	}
	if (dir_fd < 0)
		return dir_fd;
	ret = fstat(dir_fd, st) ? -errno : 0;
	close(dir_fd);
	return ret;
}

/*
 * The copy renamed to its name, over an empty directory standing for it
 * (a subvolume below a subvolume shows as one), and the times of the
 * directory it lands in put back to its source's (landing_stat()).
 */
int subvols_place(struct subvols *s, const struct subvol_entry *en,
		  struct placement *p)
{
	struct stat st;
	bool restore;
	int fd, ret;

	restore = en->rel[0] && !landing_stat(s, en, &st);
	ret = p->placeholder ? subvols_rmdir(p->dir_fd, p->name) : 0;
	if (ret)
		return encio_error_set(s->e, -ret, "remove the directory",
				       p->dst, false, 0);
	fd = openat(p->dir_fd, p->partial,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ret = inode_flags_lifted_rename_self(fd, p->dir_fd, p->partial,
					     p->dir_fd, p->name);
	if (fd >= 0)
		close(fd);
	if (ret)
		return encio_error_set(s->e, -ret, "rename the copy to", p->dst,
				       false, 0);
	if (restore) {
		ret = subvols_times_restore(p->dir_fd, &st);
		if (ret)
			return encio_error_set(s->e, -ret, "set the times of",
					       p->dst, false, 0);
	}
	return 0;
}

/* Whether a subvolume failed or left out lies in @in's copy. */
static bool holds_failed(const struct subvols *s, const struct subvol_entry *in)
{
	size_t i;

	for (i = 0; i < s->plan.nr; i++)
		if ((s->plan.v[i].failed || s->plan.v[i].left_out) &&
		    subvol_rel_below(s->plan.v[i].rel, in->rel))
			return true;
	return false;
}

/*
 * The read-only subvolumes left writable for those below them, now made
 * read-only, the innermost first; those a failed one is below stay
 * writable, as a stopped run leaves them.
 */
int subvols_finish_containers(struct subvols *s, int top_fd)
{
	struct subvol_entry *en;
	size_t i;
	int fd;

	for (i = s->plan.nr_order; i-- > 0;) {
		en = &s->plan.v[s->plan.order[i]];
		/* a rerun copies what failed in it before it is read-only */
		if (!en->contains || !en->read_only || !en->in_dest ||
		    holds_failed(s, en))
			continue;
		fd = en->rel[0] ?
			     open_beneath(top_fd, en->rel,
					  O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
			     dup(top_fd);
		if (fd < 0)
			return encio_error_set(s->e, fd, "open", en->rel, false,
					       0);
		if (btrfs_util_set_subvolume_read_only_fd(fd, true)) {
			close(fd);
			return encio_error_set(s->e, errno ?: EIO,
					       "make read-only", s->dst, false,
					       0);
		}
		close(fd);
	}
	return 0;
}

/* SRC's default subvolume, if it is one of those copied, is DEST's. */
int subvols_keep_default(struct subvols *s, int top_fd)
{
	uint64_t id;
	size_t i;
	int fd, ret = 0;

	if (btrfs_util_get_default_subvolume(s->plan.src, &id))
		return 0;
	for (i = 0; i < s->plan.nr && s->plan.v[i].info.id != id; i++)
		;
	if (i == s->plan.nr || !s->plan.v[i].in_dest)
		return 0;
	fd = s->plan.v[i].rel[0] ?
		     open_beneath(top_fd, s->plan.v[i].rel,
				  O_RDONLY | O_DIRECTORY | O_NOFOLLOW) :
		     dup(top_fd);
	if (fd < 0)
		return encio_error_set(s->e, fd, "open", s->plan.v[i].rel,
				       false, 0);
	if (btrfs_util_set_default_subvolume_fd(fd, 0))
		ret = encio_error_set(s->e, errno ?: EIO,
				      "make the default subvolume", s->dst,
				      false, 0);
	close(fd);
	return ret;
}

/*
 * Whether the directory @path is the root of a mounted filesystem (its
 * parent is on another device), which cannot be replaced: it is filled in
 * place, as "@path/." is.
 */
static bool mount_root(const char *path)
{
	char parent[PATH_MAX];
	struct stat st, up;

	if (snprintf(parent, sizeof(parent), "%s/..", path) >=
	    (int)sizeof(parent))
		return false;
	return !stat(path, &st) && S_ISDIR(st.st_mode) && !stat(parent, &up) &&
	       (st.st_dev != up.st_dev || st.st_ino == up.st_ino);
}

/*
 * SRC's copy: DEST, or DEST/basename(SRC) into an existing directory;
 * DEST/. where DEST is a mount point.
 */
int subvols_dest_name(struct subvols *s, const char *dest)
{
	char base[PATH_MAX];
	struct stat st;
	size_t len = path_trimmed_len(dest);
	int n;

	snprintf(base, sizeof(base), "%s", s->plan.src);
	if (!s->opts->no_target_dir && !stat(dest, &st) && S_ISDIR(st.st_mode))
		n = snprintf(s->dst, sizeof(s->dst), "%.*s/%s", (int)len, dest,
			     basename(base));
	else
		n = snprintf(s->dst, sizeof(s->dst), "%.*s", (int)(len ?: 1),
			     dest);
	if (n > 0 && n < (int)sizeof(s->dst) && mount_root(s->dst))
		n = snprintf(s->dst + n, sizeof(s->dst) - n, "%s",
			     s->dst[n - 1] == '/' ? "." : "/.") +
		    n;
	return n < 0 || n >= (int)sizeof(s->dst) ?
		       encio_error_set(s->e, ENAMETOOLONG, "copy to", dest,
				       false, 0) :
		       0;
}

/* The directory SRC's copy goes in: subvolumes need btrfs there. */
int subvols_dest_check(struct subvols *s)
{
	char dir[PATH_MAX];
	int fd;
	bool ok;

	snprintf(dir, sizeof(dir), "%s", s->dst);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(s->e, errno, "open the directory of",
				       s->dst, false, 0);
	ok = subvols_on_btrfs(fd);
	/* changes not committed yet show in no ctransid (subvols_dest_state()) */
	if (ok && syncfs(fd)) {
		close(fd);
		return encio_error_set(s->e, errno, "sync", dir, false, 0);
	}
	close(fd);
	return ok ? 0 :
		    encio_error_set(s->e, EOPNOTSUPP,
				    "make subvolumes in (not btrfs)", dir,
				    false, 0);
}
