// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r, regular files on the walker's side: open the source, skip a
 * file DEST has complete (or refresh its metadata), make the copy, set its
 * owner, xattrs and mode, and queue it for the ring thread (tree.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "base/kernel.h"
#include "tree/tree_internal.h"

struct make_file_arg {
	int fd;
	mode_t mode;
};

static int make_file(void *arg, int dir, const char *tmp)
{
	struct make_file_arg *a = arg;

	a->fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		       a->mode);
	return a->fd < 0 ? -errno : 0;
}

/*
 * An unnamed file in directory @dir, linked into place at a checkpoint:
 * about the cost of a named temporary and a rename (measured: the orphan
 * item replaces the temporary name), and nothing left behind by a copy
 * that dies. -EOPNOTSUPP or -EISDIR where the file system has no O_TMPFILE.
 */
static int make_unnamed(int dir, struct make_file_arg *a)
{
	a->fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, a->mode);
	return a->fd < 0 ? -errno : 0;
}

/*
 * In a staged tree a file is made under its own name: nothing there is
 * final until the whole tree is renamed into place.
 */
static int make_named(struct entry_at at, bool fresh, struct make_file_arg *a)
{
	int ret = fresh ? 0 : tree_entry_clear_name(at);

	if (ret)
		return ret;
	a->fd = openat(at.dir, at.name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		       a->mode);
	return a->fd < 0 ? -errno : 0;
}

/* ----- resume: is DEST's file already complete? ----- */

/* The next run of equal (kind, compression) at or after *i. */
static bool next_run(const struct extent_map *m, size_t *i,
		     struct file_extent *run)
{
	if (*i >= m->nr)
		return false;
	*run = m->ext[(*i)++];
	while (*i < m->nr && m->ext[*i].kind == run->kind &&
	       m->ext[*i].compression == run->compression &&
	       m->ext[*i].offset == run->offset + run->len &&
	       run->compression == BTRFS_COMPRESS_NONE) {
		run->len += m->ext[*i].len;
		(*i)++;
	}
	if (run->offset < m->size && run->offset + run->len > m->size)
		run->len = m->size - run->offset;
	return true;
}

/*
 * Same layout: the same holes, prealloc and inline ranges, the same
 * compressed extents at the same offsets; runs of plain data compare as a
 * whole (the kernel may split them differently).
 */
static bool same_layout(const struct extent_map *a, const struct extent_map *b)
{
	struct file_extent ra, rb;
	size_t i = 0, j = 0;
	bool more_a, more_b;

	for (;;) {
		more_a = next_run(a, &i, &ra);
		more_b = next_run(b, &j, &rb);
		if (!more_a || !more_b)
			return more_a == more_b;
		if (ra.offset != rb.offset || ra.len != rb.len ||
		    ra.kind != rb.kind || ra.compression != rb.compression)
			return false;
	}
}

/*
 * Whether everyone who may have written DEST's file @cur may write the
 * copy it becomes (@src's owner, group and mode): then what it holds is
 * theirs to have put there. A file of another user's would become, say,
 * root's with that user's bytes, its mtime put back.
 */
static bool writers_within(const struct stat *cur, const struct stat *src)
{
	if (cur->st_uid != 0 && cur->st_uid != src->st_uid)
		return false;
	if ((cur->st_mode & S_IWGRP) &&
	    (cur->st_gid != src->st_gid || !(src->st_mode & S_IWGRP)))
		return false;
	return !(cur->st_mode & S_IWOTH) || (src->st_mode & S_IWOTH);
}

/*
 * DEST's file @dst open, with its stat in @st, where it has the data of
 * the source already (same size, mtime and layout) and nobody but who may
 * write the copy could have written it, the source's extent map in @ma
 * (to release); else -1.
 */
static int file_complete(int src_fd, const struct stat *src,
			 struct entry_at dst, struct stat *st,
			 struct extent_map *ma)
{
	struct extent_map mb = { 0 };
	bool same = false;
	int fd;

	if (fstatat(dst.dir, dst.name, st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISREG(st->st_mode) || st->st_size != src->st_size ||
	    st->st_mtim.tv_sec != src->st_mtim.tv_sec ||
	    st->st_mtim.tv_nsec != src->st_mtim.tv_nsec)
		return -1;
	fd = openat(dst.dir, dst.name,
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0)
		return -1;
	if (!fstat(fd, st) && writers_within(st, src) &&
	    !extent_map_build(src_fd, ma) && !extent_map_build(fd, &mb))
		same = same_layout(ma, &mb);
	extent_map_release(&mb);
	if (!same) {
		extent_map_release(ma);
		close(fd);
		return -1;
	}
	return fd;
}

/* ----- regular files ----- */

/* A file that will not be finished: its temporary (or staged name) goes. */
void tree_file_discard(struct tree_file *f)
{
	if (f->tmp)
		unlinkat(f->dir->fd, f->tmp, 0);
	else if (f->named)
		unlinkat(f->dir->fd, f->name, 0);
}

void tree_file_free(struct tree_file *f)
{
	if (f->job.src_fd >= 0)
		close(f->job.src_fd);
	if (f->job.dst_fd >= 0)
		close(f->job.dst_fd);
	copy_job_release(&f->job);
	dst_dir_put(f->dir);
	free(f->inl);
	free(f->src);
	free(f->dst);
	free(f->tmp);
	free(f);
}

/* Hand an opened file to the ring thread; waits while max_files are out. */
static void queue_push(struct tree *t, struct tree_file *f)
{
	pthread_mutex_lock(&t->lock);
	if (t->outstanding >= t->max_files)
		t->stats->walker_waits++;
	while (t->outstanding >= t->max_files && !t->stopping)
		pthread_cond_wait(&t->cond, &t->lock);
	if (t->stopping) {
		pthread_mutex_unlock(&t->lock);
		tree_file_discard(f);
		tree_file_free(f);
		return;
	}
	t->queue[(t->q_head + t->nr_queued) % t->max_files] = f;
	t->nr_queued++;
	t->outstanding++;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* Outside a staged tree: an unnamed file, else a hidden temporary name. */
static int make_unnamed_or_temp(struct tree *t, struct tree_file *f,
				struct entry_at at, struct make_file_arg *mf)
{
	char tmp[NAME_MAX + 1];
	int ret;

	ret = t->named_temps ? -EOPNOTSUPP : make_unnamed(at.dir, mf);
	if (ret != -EOPNOTSUPP && ret != -EISDIR)
		return ret;
	t->named_temps = true;
	ret = tree_entry_make_temp(at, tmp, make_file, mf);
	if (!ret && !(f->tmp = strdup(tmp))) {
		unlinkat(at.dir, tmp, 0);
		close(mf->fd);
		mf->fd = -1;
		ret = -ENOMEM;
	}
	return ret;
}

/*
 * Walker: a small file of a read-only source needs no open: its inode item
 * has the metadata, its one inline extent the data, both found by a tree
 * search that serves the files after it too. Only into a directory this
 * run made: a file to resume is compared with what DEST has by its extent
 * map, which needs it open.
 */
static bool tree_file_from_items(struct tree *t, struct tree_file *f)
{
	struct inline_file *inl;

	if (!tree_entry_parent_fresh(t))
		return false;
	inl = tree_walk_inline_file(t);
	if (inl && !S_ISREG(inl->mode)) {
		free(inl);
		inl = NULL;
	}
	if (!inl)
		return false;
	f->inl = inl;
	f->root = t->root;
	f->src_off = strlen(t->walk.src_root) + 1;
	tree_walk_inline_file_stat(t, inl, &f->st);
	f->src_flags = inl->flags;
	f->no_xattrs = true;
	f->inline_data = (struct copy_inline){
		.compression = inl->compression,
		.ram_bytes = inl->ram_bytes,
		.data = inl->data,
		.data_len = inl->data_len,
	};
	return true;
}

/*
 * Walker: DEST has the file's data already (@fd, @cur): its owner, xattrs,
 * mode and times become the source's where they differ. @fd is closed.
 * 1 (nothing left to do), or -1 with f->e set.
 */
static int file_refresh(struct tree *t, struct tree_file *f, int fd,
			const struct stat *cur)
{
	struct inode_flags_refused *r = &t->ctx->flags_refused;
	unsigned int late;
	const char *op;
	int ret, flags_changed;

	f->src_flags = inode_flags_get(f->job.src_fd);
	late = inode_flags_get(fd) & INODE_FLAGS_LATE;
	ret = tree_meta_flags_unlock(t, fd, &op);
	if (!ret)
		ret = meta_set_metadata(
			&t->walk_xattr,
			(struct entry_at){ f->job.src_fd, NULL },
			(struct entry_at){ fd, NULL }, &f->st, cur,
			META_COMPARE | META_PRUNE |
				(f->no_xattrs ? META_NO_XATTRS : 0),
			&op);
	if (ret >= 0) {
		op = "set inode flags of";
		flags_changed = inode_flags_set(
			fd, f->src_flags, INODE_FLAGS_KEPT & ~INODE_FLAGS_LATE,
			r);
		if (flags_changed >= 0)
			flags_changed += inode_prop_copy(f->job.src_fd, fd, r);
		ret = flags_changed < 0 ? flags_changed :
					  ret + flags_changed +
						  (late != (f->src_flags &
							    INODE_FLAGS_LATE));
	}
	if (ret >= 0) {
		flags_changed = tree_meta_file_flags_late(t, f, fd, &op);
		ret = flags_changed ? flags_changed : ret;
	}
	close(fd);
	if (ret < 0) {
		encio_error_set(&f->e, ret, op, f->dst, false, 0);
		return -1;
	}
	tree_count_complete(t, ret > 0, f->st.st_size);
	return 1;
}

/*
 * Walker: DEST has the file complete (@fd, @cur; the source's map in
 * f->job.map): its metadata refreshed, and where the run shares data,
 * handed to the ring thread (which owns the share index) to offer its
 * ranges, so that files sharing its extents clone them from it. 0 to
 * queue it (f->complete), 1 when nothing is left to do, -1 with f->e set.
 */
static int file_found_complete(struct tree *t, struct tree_file *f, int fd,
			       const struct stat *cur)
{
	bool offer = t->ctx->share_on &&
		     copy_share_writers_only(cur, f->st.st_uid);
	int ret, keep = offer ? dup(fd) : -1;

	ret = file_refresh(t, f, fd, cur);
	if (ret != 1 || keep < 0) {
		if (keep >= 0)
			close(keep);
		extent_map_release(&f->job.map);
		return ret;
	}
	f->job.dst_fd = keep;
	f->complete = true;
	return 0;
}

/*
 * Walker: open the source and stat it. 0 to go on, 1 when nothing is left
 * to do (a hard link to one seen, or complete in DEST), -1 with f->e set.
 */
static int tree_file_open_source(struct tree *t, struct tree_file *f,
				 const char *src, const char *dst,
				 struct entry_at at)
{
	struct stat cur;
	int ret;

	ret = tree_walk_open_file(&t->walk, src, &f->st);
	if (ret == -EINVAL || ret == -EISDIR) {
		encio_error_set(&f->e, EAGAIN, "copy (replaced while read)",
				src, false, 0);
		return -1;
	}
	if (ret < 0) {
		encio_error_set(&f->e, ret, "open", src, false, 0);
		return -1;
	}
	f->job.src_fd = ret;
	if (t->walk.st_pending && tree_entry_link_seen(t, &f->st, dst))
		return 1;
	f->no_xattrs = tree_meta_src_no_xattrs(t, &f->st);
	if (tree_entry_parent_fresh(t))
		return 0;
	ret = file_complete(f->job.src_fd, &f->st, at, &cur, &f->job.map);
	if (ret >= 0)
		return file_found_complete(t, f, ret, &cur);
	tree_meta_flags_unlock_at(t, at);
	return 0;
}

/*
 * Walker: open a regular file, skip it if DEST has it complete, create it
 * (unnamed, or named in a staged tree) and queue it for the ring thread.
 */
void tree_file_prepare(struct tree *t, const char *src, const char *dst,
		       struct entry_at at)
{
	struct make_file_arg mf = { .fd = -1 };
	struct tree_file *f;
	const char *op;
	int ret;

	if (!t->walk.st_pending && tree_entry_link_seen(t, &t->walk.st, dst))
		return;
	f = calloc(1, sizeof(*f));
	if (!f) {
		tree_entry_error(t, ENOMEM, "copy", src);
		return;
	}
	f->job.src_fd = f->job.dst_fd = -1;
	f->src = strdup(src);
	f->dst = strdup(dst);
	if (!f->src || !f->dst) {
		encio_error_set(&f->e, ENOMEM, "copy", src, false, 0);
		goto fail;
	}
	f->dir = dst_dir_get(tree_entry_dst_dir(t));
	f->private_tree = tree_entry_in_stage(t, dst) &&
			  !t->opts->dest_unpublished;
	f->name = f->dst + strlen(f->dst) - strlen(at.name);
	f->acl_inherited = tree_entry_parent_acl_default(t);
	if (!tree_file_from_items(t, f)) {
		ret = tree_file_open_source(t, f, src, dst, at);
		if (ret < 0)
			goto fail;
		if (ret > 0) {
			tree_file_free(f);
			return;
		}
		if (f->complete) {
			queue_push(t, f);
			return;
		}
	}
	/*
	 * In a directory this run made, create with the final permissions:
	 * where the umask leaves them whole and no default ACL masks them, no
	 * chmod.
	 */
	mf.mode = tree_entry_parent_fresh(t) ? f->st.st_mode & 0777 : 0600;
	f->named = tree_entry_in_stage(t, dst);
	if (f->named)
		ret = make_named(at, tree_entry_parent_fresh(t), &mf);
	else
		ret = make_unnamed_or_temp(t, f, at, &mf);
	if (ret)
		f->named = false;
	f->job.dst_fd = mf.fd;
	if (ret) {
		encio_error_set(&f->e, ret, "create", dst, false, 0);
		goto fail;
	}
	/* Metadata here, off the ring thread's path. */
	ret = tree_meta_file_flags_early(t, f, f->job.dst_fd, &op);
	if (!ret)
		ret = tree_meta_file_flags_late(t, f, f->job.dst_fd, &op);
	if (!ret)
		ret = tree_meta_file_owner_mode(
			&t->walk_xattr, f, tree_entry_parent_fresh(t), &op);
	if (ret) {
		encio_error_set(&f->e, ret, op, dst, false, 0);
		goto fail_tmp;
	}
	f->redo_metadata = (f->st.st_mode & (S_ISUID | S_ISGID)) ||
			   t->walk_xattr.saw_caps;
	queue_push(t, f);
	return;
fail_tmp:
	tree_file_discard(f);
fail:
	tree_report(t, &f->e);
	tree_file_free(f);
}
