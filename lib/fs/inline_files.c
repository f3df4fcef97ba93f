// SPDX-License-Identifier: GPL-2.0
/*
 * Small files read from the btrfs tree: see inline_files.h.
 *
 * The walk meets the entries of a directory in the order they were made,
 * and a tree copied in one go (cp -a, a receive, a previous encio copy)
 * numbered its inodes in that order too, so one search from the first
 * file of a run of entries answers for the files that follow. Where the
 * order is scattered, each file costs one search, about the extent search
 * it saves.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "base/kernel.h"
#include "fs/extents.h"
#include "fs/inline_files.h"
#include "fs/inode_flags.h"

/* Tens of small files' items per search (measured: about 1.2 KiB each). */
#define INLINE_SEARCH_BYTES (64 * 1024)

#define INLINE_HEADER_BYTES offsetof(struct btrfs_file_extent_item, disk_bytenr)

int inline_files_init(struct inline_files *w, uint32_t sectorsize,
		      uint32_t nodesize)
{
	memset(w, 0, sizeof(*w));
	w->search = calloc(1, sizeof(struct btrfs_ioctl_search_args_v2) +
				      INLINE_SEARCH_BYTES);
	if (!w->search)
		return -ENOMEM;
	w->sectorsize = sectorsize;
	w->nodesize = nodesize;
	w->lo = 1;
	return 0;
}

void inline_files_release(struct inline_files *w)
{
	free(w->search);
	free(w->ents);
	memset(w, 0, sizeof(*w));
}

static bool inode_item_qualifies(const void *item, uint32_t len)
{
	struct btrfs_inode_item ii;

	if (len < sizeof(ii))
		return false;
	memcpy(&ii, item, sizeof(ii));
	return (S_ISREG(le32toh(ii.mode)) || S_ISLNK(le32toh(ii.mode))) &&
	       le32toh(ii.nlink) == 1 && le64toh(ii.size) > 0;
}

/* The encoded I/O compression of the extent, or -1 if it does not qualify. */
static int extent_item_compression(const struct inline_files *w,
				   const void *item, uint32_t len,
				   uint64_t size)
{
	struct btrfs_file_extent_item ei;
	struct file_extent fe;

	if (len < INLINE_HEADER_BYTES || extent_item_parse(item, len, 0, &fe) ||
	    fe.kind != EXTENT_INLINE || fe.disk_bytes > INLINE_FILE_MAX_DATA ||
	    fe.ram_bytes < size)
		return -1;
	memcpy(&ei, item, INLINE_HEADER_BYTES);
	if (ei.encryption || ei.other_encoding)
		return -1;
	if (fe.compression == BTRFS_COMPRESS_NONE)
		return fe.disk_bytes < size ? -1 :
					      BTRFS_ENCODED_IO_COMPRESSION_NONE;
	return extent_encoded_io_compression(fe.compression, w->sectorsize);
}

static uint64_t inode_item_size(const void *item)
{
	struct btrfs_inode_item ii;

	memcpy(&ii, item, sizeof(ii));
	return le64toh(ii.size);
}

static bool inode_item_symlink(const void *item)
{
	struct btrfs_inode_item ii;

	memcpy(&ii, item, sizeof(ii));
	return S_ISLNK(le32toh(ii.mode));
}

/* A file's data, or a symlink's target: never compressed by btrfs. */
static bool extent_item_qualifies(const struct inline_files *w,
				  const void *inode_item, const void *item,
				  uint32_t len)
{
	int compression = extent_item_compression(w, item, len,
						  inode_item_size(inode_item));

	return inode_item_symlink(inode_item) ?
		       compression == BTRFS_ENCODED_IO_COMPRESSION_NONE :
		       compression >= 0;
}

/* The candidate's items are all seen: keep it if it qualified. */
static void cand_end(struct inline_files *w)
{
	struct inline_entry *e;

	if (!w->cand_ok || !w->cand.inode_item || !w->cand.extent_item)
		return;
	if (w->nr == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;

		e = realloc(w->ents, cap * sizeof(*e));
		if (!e)
			return;
		w->ents = e;
		w->cap = cap;
	}
	w->ents[w->nr++] = w->cand;
}

static void cand_item(struct inline_files *w,
		      const struct btrfs_ioctl_search_header *sh,
		      const void *item)
{
	switch (sh->type) {
	case BTRFS_INODE_ITEM_KEY:
		w->cand_ok = !w->cand.inode_item &&
			     inode_item_qualifies(item, sh->len);
		w->cand.inode_item = item;
		break;
	case BTRFS_INODE_REF_KEY:
	case BTRFS_INODE_EXTREF_KEY:
		break;
	case BTRFS_EXTENT_DATA_KEY:
		w->cand_ok = w->cand_ok && !w->cand.extent_item &&
			     !sh->offset &&
			     extent_item_qualifies(w, w->cand.inode_item, item,
						   sh->len);
		w->cand.extent_item = item;
		w->cand.extent_len = sh->len;
		break;
	default: /* xattrs, verity items: more than the items tell */
		w->cand_ok = false;
		break;
	}
}

void inline_files_parse(struct inline_files *w, uint64_t ino, const void *buf,
			size_t buf_len, uint32_t nr_items, bool complete)
{
	struct btrfs_ioctl_search_header sh;
	const char *pos = buf, *end = pos + buf_len;
	uint32_t i;

	w->nr = 0;
	w->lo = ino;
	w->cand = (struct inline_entry){ .ino = ino };
	w->cand_ok = false;
	sh.objectid = ino;
	for (i = 0; i < nr_items; i++) {
		if ((size_t)(end - pos) < sizeof(sh)) {
			sh.objectid = w->cand.ino; /* it is not all there */
			complete = false;
			break;
		}
		memcpy(&sh, pos, sizeof(sh));
		pos += sizeof(sh);
		if (sh.objectid != w->cand.ino) {
			cand_end(w);
			w->cand = (struct inline_entry){ .ino = sh.objectid };
			w->cand_ok = false;
		}
		if ((size_t)(end - pos) < sh.len) {
			complete = false;
			break;
		}
		cand_item(w, &sh, pos);
		pos += sh.len;
	}
	/* The last inode's items may go on past what one search returned. */
	if (complete) {
		cand_end(w);
		w->hi = UINT64_MAX;
	} else {
		w->hi = sh.objectid - 1;
	}
}

/*
 * The search stops where the next item would not fit in the buffer, or at
 * the end of the tree: with room left for the largest item a leaf holds,
 * it reached the end, and the last inode's items are all there.
 */
static bool search_complete(const struct inline_files *w,
			    const struct btrfs_ioctl_search_args_v2 *args)
{
	struct btrfs_ioctl_search_header sh;
	size_t used = 0;
	uint32_t i;

	for (i = 0;
	     i < args->key.nr_items && used + sizeof(sh) <= INLINE_SEARCH_BYTES;
	     i++) {
		memcpy(&sh, (const char *)args->buf + used, sizeof(sh));
		used += sizeof(sh) + sh.len;
	}
	return used + sizeof(sh) + w->nodesize <= INLINE_SEARCH_BYTES;
}

static int inline_files_search(struct inline_files *w, int fd, uint64_t ino)
{
	struct btrfs_ioctl_search_args_v2 *args = w->search;

	memset(&args->key, 0, sizeof(args->key));
	/* tree_id 0: the subvolume of the fd */
	args->key.min_objectid = ino;
	args->key.max_objectid = UINT64_MAX;
	args->key.max_type = UINT8_MAX;
	args->key.max_offset = UINT64_MAX;
	args->key.max_transid = UINT64_MAX;
	args->key.nr_items = UINT32_MAX;
	args->buf_size = INLINE_SEARCH_BYTES;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0)
		return -errno;
	inline_files_parse(w, ino, args->buf, INLINE_SEARCH_BYTES,
			   args->key.nr_items, search_complete(w, args));
	return 0;
}

static struct inline_file *inline_file_make(const struct inline_files *w,
					    const struct inline_entry *e)
{
	struct btrfs_inode_item ii;
	struct file_extent fe;
	struct inline_file *f;

	memcpy(&ii, e->inode_item, sizeof(ii));
	if (extent_item_parse(e->extent_item, e->extent_len, 0, &fe))
		return NULL;
	f = malloc(sizeof(*f) + fe.disk_bytes);
	if (!f)
		return NULL;
	f->ino = e->ino;
	f->size = le64toh(ii.size);
	f->ram_bytes = fe.ram_bytes;
	f->mode = le32toh(ii.mode);
	f->uid = le32toh(ii.uid);
	f->gid = le32toh(ii.gid);
	f->flags = inode_flags_from_btrfs(le64toh(ii.flags));
	f->compression = extent_item_compression(w, e->extent_item,
						 e->extent_len, f->size);
	f->atime.tv_sec = (int64_t)le64toh(ii.atime.sec);
	f->atime.tv_nsec = le32toh(ii.atime.nsec);
	f->mtime.tv_sec = (int64_t)le64toh(ii.mtime.sec);
	f->mtime.tv_nsec = le32toh(ii.mtime.nsec);
	f->data_len = fe.disk_bytes;
	memcpy(f->data, (const char *)e->extent_item + INLINE_HEADER_BYTES,
	       f->data_len);
	return f;
}

struct inline_file *inline_files_get(struct inline_files *w, int fd, dev_t dev,
				     uint64_t ino)
{
	size_t lo = 0, hi;

	if (w->disabled)
		return NULL;
	if (dev != w->dev || ino < w->lo || ino > w->hi) {
		w->dev = dev;
		if (inline_files_search(w, fd, ino)) {
			w->disabled = true;
			return NULL;
		}
	}
	hi = w->nr;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->ents[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == w->nr || w->ents[lo].ino != ino)
		return NULL;
	return inline_file_make(w, &w->ents[lo]);
}
