/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Data shared between the files of one run: reflinks, snapshots and
 * deduplication make several file ranges name one extent on disk. The
 * index remembers which range of which source extent was written, where,
 * so that every further reference to it becomes a clone of what was
 * written instead of a second copy (FICLONERANGE for copy, CLONE for
 * send). Only extents that may be shared enter it: those with more than
 * one reference in the extent tree, and every extent of a filesystem from
 * which the run reads more than one subvolume (snapshots share whole tree
 * leaves, whose extents count one reference for all of them).
 */
#ifndef ENCIO_SHARE_H
#define ENCIO_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fs/extents.h"

enum share_state {
	SHARE_PENDING, /* its writes are not all done */
	SHARE_READY,   /* its written ranges can be cloned from */
	SHARE_FAILED,  /* never: clone nothing from it */
};

/* A file of DEST, or of the stream, that ranges were written to. */
struct share_file {
	uint8_t state; /* enum share_state */
	uint8_t handle_len;
	uint16_t subvol; /* send: the stream's subvolume it was sent in */
	int handle_type;
	/* copy: the DEST file's handle; send: the source file's */
	unsigned char handle[24];
	char *path; /* send: its path in the stream */
	/* copy: the owner and mode it gets from SRC, whenever that is */
	uint32_t owner;
	uint32_t mode;
	/* copy: in a tree only root could ever reach (a staging directory) */
	bool private_tree;
};

/* One written range of a source extent; 40 bytes. */
struct share_ref {
	uint64_t bytenr;  /* the source extent's disk_bytenr */
	uint64_t dst_off; /* where extent offset @eo was written */
	uint32_t eo;	  /* start inside the extent */
	uint32_t len;	  /* bytes (up to its file's EOF) */
	uint32_t file;	  /* share_file */
	uint32_t next;	  /* the extent's next range, 1-based; 0: none */
	uint32_t fs;	  /* the source filesystem */
};

/* What a source filesystem may share. */
struct share_fs {
	unsigned char fsid[16];
	uint64_t subvol; /* the first subvolume a source was in */
	bool all;	 /* every extent may be shared */
	uint64_t *multi; /* extents referenced more than once, sorted */
	size_t nr_multi;
	bool prepared; /* all or multi known */
};

struct share_dev {
	dev_t dev; /* a subvolume's st_dev */
	uint32_t fs;
};

struct share_index {
	struct share_ref *refs;
	size_t nr_refs, cap_refs;
	uint32_t *slots; /* 1-based ref of each extent's first range */
	size_t nr_slots; /* power of two */
	struct share_file *files;
	size_t nr_files, cap_files;
	struct share_fs *fs;
	size_t nr_fs;
	struct share_dev *devs;
	size_t nr_devs;
	uint64_t sweep_items; /* extent tree items read to prepare them */
	/* bumped when a file's state changes: a waiting clone may go on */
	uint64_t state_gen;
	/*
	 * copy: with holder_on, a compressed extent that files use in parts
	 * is written whole once into an unnamed file of DEST's (the holder)
	 * and every part is cloned from it, so that DEST holds it once, as
	 * the source does; holder_end is the holder's next free offset.
	 */
	bool holder_on;
	uint64_t holder_end;
};

/* share_file.handle_type of a range of the holder: no handle, its fd */
#define SHARE_HOLDER_HANDLE (-1)

/* A piece of a file range: cloned from (@file, @src_off), or written. */
struct share_piece {
	uint64_t off;
	uint64_t len;
	bool clone;
	bool whole;    /* a compressed extent's whole range */
	bool prealloc; /* of a prealloc extent: fallocated if not cloned */
	/* not a piece of the file: its extent, written whole at the holder's
	 * @src_off (the range @off, @len reads it), as share file @file */
	bool holder;
	uint32_t file;
	uint64_t src_off;
};

struct share_plan {
	struct share_piece *p;
	size_t nr, cap;
};

void share_init(struct share_index *si);
void share_release(struct share_index *si);

/*
 * A source of the run (a file, a tree's root, a subvolume), open as @fd:
 * every one before the first share_fs_of(). Not btrfs: ignored. 0 or
 * -errno.
 */
int share_add_source(struct share_index *si, int fd);
/*
 * The source filesystem of the open file @fd (stat @st), -ENOENT if no
 * source was in it. The first lookup in a filesystem finds which of its
 * extents may be shared: with one subvolume of it in the run, those its
 * extent tree counts more than one reference for (one sweep of the extent
 * tree), else, or where that tree is too big to sweep or cannot be read,
 * every extent.
 */
int share_fs_of(struct share_index *si, int fd, const struct stat *st,
		uint32_t *fs);

int share_file_new(struct share_index *si, uint32_t *id);
static inline struct share_file *share_file_get(struct share_index *si,
						uint32_t id)
{
	return &si->files[id];
}

static inline void share_file_set_state(struct share_index *si, uint32_t id,
					enum share_state state)
{
	si->files[id].state = state;
	si->state_gen++;
}

/* A file still being written given its outcome; a settled one kept. */
static inline void share_file_settle(struct share_index *si, uint32_t id,
				     enum share_state state)
{
	if (si->files[id].state == SHARE_PENDING)
		share_file_set_state(si, id, state);
}

/*
 * The inode open at @fd kept in @sf by its file handle (which names the
 * inode and its generation, never a path: a name swapped meanwhile leads
 * nowhere else, a file removed is ESTALE); share_file_open() opens it
 * again, read-only, beside @mount_fd (any descriptor of its filesystem).
 * Both return 0 or a descriptor, else -errno.
 */
int share_file_keep_handle(struct share_file *sf, int fd);
int share_file_open(const struct share_file *sf, int mount_fd);

/* Whether @fe is an extent that may be shared (may enter the index). */
bool share_extent_may_share(const struct share_index *si, uint32_t fs,
			    const struct file_extent *fe);

/* How a range is cut into clones and pieces to write. */
enum share_cut {
	SHARE_CUT_ANY,	 /* wherever a part was written before */
	SHARE_CUT_WHOLE, /* cloned whole, or written whole */
	/*
	 * As btrfs send cuts a compressed extent: wherever, where a part
	 * written before holds its start; else written whole.
	 */
	SHARE_CUT_FROM_START,
};

/*
 * Append to @plan the pieces of the file range [@start, @end) of @fe (a
 * range of one file of size @size, written to @file): parts of the source
 * extent written before, by a file not failed, as clones; the rest as
 * pieces to write, remembered as written by @file, cut as @cut says.
 * Offsets and lengths of clones are sector-aligned, but a tail that ends
 * at the EOF of both files. Extents that cannot be shared give one piece
 * to write. 0 or -errno.
 */
int share_plan_range(struct share_index *si, uint32_t fs,
		     const struct file_extent *fe, uint64_t start, uint64_t end,
		     uint64_t size, enum share_cut cut, uint32_t file,
		     struct share_plan *plan);
/*
 * The file range [@start, @end) of @fe remembered as written by @file at
 * the same offsets (a file found complete in DEST), if @fe may be
 * shared. 0 or -errno.
 */
int share_note_range(struct share_index *si, uint32_t fs,
		     const struct file_extent *fe, uint64_t start, uint64_t end,
		     uint32_t file);
void share_plan_release(struct share_plan *plan);
/* Append @p to @plan. 0 or -ENOMEM. */
int share_plan_push(struct share_plan *plan, const struct share_piece *p);
/*
 * Append the clone @c to @plan, merged into the last piece where it goes
 * on where that one ends, in both files. 0 or -ENOMEM.
 */
int share_plan_add_clone(struct share_plan *plan, const struct share_piece *c);

/* Bytes of memory the index holds now (its arrays). */
size_t share_memory(const struct share_index *si);

#endif
