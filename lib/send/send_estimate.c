// SPDX-License-Identifier: GPL-2.0
/*
 * encio send: the size of a subvolume's stream estimated from its metadata
 * alone, for progress, without the second pass send -n makes. One tree
 * search reads the subvolume's items in key order (inodes, their names,
 * xattrs and file extents; what changed since a generation, for an
 * incremental stream): each becomes the commands a send makes of it, their
 * paths' lengths found from the names once all are read. Data is counted
 * as it is sent: a compressed extent by its bytes on disk, plain data by
 * its length in WRITEs, an extent seen before as a CLONE. It runs on a
 * thread of its own beside the send, whose directory walk it warms.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/kernel.h"
#include "base/le_bytes.h"
#include "diff/diff.h"
#include "fs/tree_search.h"
#include "send/send.h"
#include "send/send_internal.h"

#define ESTIMATE_BUF (256 * 1024)
/* a command's header, and a TLV's header */
#define CMD 10u
#define TLV 4u
/* "btrfs-stream" with its NUL and the version */
#define STREAM_HEADER_BYTES 17u

struct est_inode {
	uint64_t ino; /* 0: a free slot */
	uint64_t parent;
	uint64_t fixed;	   /* bytes of its commands but their paths */
	uint32_t name_len; /* of its first name */
	uint32_t paths;	   /* paths in its commands */
	int64_t plen;	   /* its path's length; -1: not found yet */
	uint64_t size;	   /* data past it is not sent */
	bool has_size;
};

/* A range of an extent's data sent before, in the extent's bytes. */
struct est_range {
	uint64_t start, end;
	uint32_t next; /* index + 1 of the extent's next range; 0: none */
};

struct est_extent {
	uint64_t key;  /* disk_bytenr + 1; 0: a free slot */
	uint32_t head; /* index + 1 of its last range */
};

struct est_table {
	struct est_inode *slot;
	size_t cap, nr;
	struct est_extent *extents;
	size_t ext_cap, ext_nr;
	struct est_range *ranges;
	size_t nr_ranges, cap_ranges;
	/*
	 * The kernel's clones (an incremental): of a plain extent, only from
	 * a file whose range holds the start of the one sent, and as far as
	 * that file's range goes (find_extent_clone() looks up the extent's
	 * references at that offset), and never of one sector at offset 0
	 */
	bool kernel;
	uint64_t sectorsize; /* with kernel */
};

static int inode_grow(struct est_table *t)
{
	struct est_table n = { .cap = t->cap ? t->cap * 2 : 4096 };
	size_t i;

	n.slot = calloc(n.cap, sizeof(*n.slot));
	if (!n.slot)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++) {
		size_t j = hash64(t->slot[i].ino) & (n.cap - 1);

		if (!t->slot[i].ino)
			continue;
		while (n.slot[j].ino)
			j = (j + 1) & (n.cap - 1);
		n.slot[j] = t->slot[i];
	}
	free(t->slot);
	t->slot = n.slot;
	t->cap = n.cap;
	return 0;
}

static struct est_inode *inode_get(struct est_table *t, uint64_t ino)
{
	size_t j;

	if (t->nr * 2 >= t->cap && inode_grow(t))
		return NULL;
	for (j = hash64(ino) & (t->cap - 1); t->slot[j].ino;
	     j = (j + 1) & (t->cap - 1))
		if (t->slot[j].ino == ino)
			return &t->slot[j];
	t->slot[j].ino = ino;
	t->slot[j].plen = ino == BTRFS_FIRST_FREE_OBJECTID ? 0 : -1;
	t->nr++;
	return &t->slot[j];
}

static struct est_inode *inode_find(const struct est_table *t, uint64_t ino)
{
	size_t j;

	if (!t->cap)
		return NULL;
	for (j = hash64(ino) & (t->cap - 1); t->slot[j].ino;
	     j = (j + 1) & (t->cap - 1))
		if (t->slot[j].ino == ino)
			return &t->slot[j];
	return NULL;
}

static int extents_grow(struct est_table *t)
{
	size_t cap = t->ext_cap ? t->ext_cap * 2 : 4096, i, j;
	struct est_extent *n = calloc(cap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (i = 0; i < t->ext_cap; i++) {
		if (!t->extents[i].key)
			continue;
		for (j = hash64(t->extents[i].key) & (cap - 1); n[j].key;
		     j = (j + 1) & (cap - 1))
			;
		n[j] = t->extents[i];
	}
	free(t->extents);
	t->extents = n;
	t->ext_cap = cap;
	return 0;
}

static struct est_extent *extent_get(struct est_table *t, uint64_t bytenr)
{
	uint64_t key = bytenr + 1;
	size_t j;

	if (t->ext_nr * 2 >= t->ext_cap && extents_grow(t))
		return NULL;
	for (j = hash64(key) & (t->ext_cap - 1); t->extents[j].key;
	     j = (j + 1) & (t->ext_cap - 1))
		if (t->extents[j].key == key)
			return &t->extents[j];
	t->extents[j].key = key;
	t->ext_nr++;
	return &t->extents[j];
}

#define EST_OVERLAPS 64

static int overlap_cmp(const void *a, const void *b)
{
	const struct est_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The bytes of [@start, @end) of the extent @x sent before, into *@covered,
 * and the pieces they make (each a CLONE, as send_share.c plans them);
 * then [@start, @keep_end) remembered as sent (what a later file can
 * clone). An extent referred to in more
 * places than EST_OVERLAPS is taken as sent whole.
 */
/* extent_covered() for the kernel's clone of a plain extent */
static void kernel_covered(const struct est_table *t,
			   const struct est_extent *x, uint64_t start,
			   uint64_t end, uint64_t *covered, uint32_t *pieces)
{
	const struct est_range *r;
	uint64_t to = start;
	uint32_t k;

	for (k = x->head; k; k = t->ranges[k - 1].next) {
		r = &t->ranges[k - 1];
		if (r->start <= start && r->end > to)
			to = r->end < end ? r->end : end;
	}
	*covered = to - start;
	*pieces = to > start;
}

static int extent_covered(struct est_table *t, struct est_extent *x,
			  const struct file_extent *fe, uint64_t keep_end,
			  uint64_t *covered, uint32_t *pieces)
{
	uint64_t start = fe->extent_offset, end = start + fe->len;
	struct est_range o[EST_OVERLAPS], *r;
	uint64_t at = start;
	size_t n = 0, i;
	uint32_t k;

	*covered = 0;
	*pieces = 0;
	if (t->kernel && !fe->compression) {
		kernel_covered(t, x, start, end, covered, pieces);
		k = 0;
	} else {
		k = x->head;
	}
	for (; k; k = t->ranges[k - 1].next) {
		r = &t->ranges[k - 1];
		if (r->end <= start || r->start >= end)
			continue;
		if (n == EST_OVERLAPS) {
			*covered = end - start;
			*pieces = 1;
			return 0;
		}
		o[n].start = r->start > start ? r->start : start;
		o[n++].end = r->end < end ? r->end : end;
	}
	qsort(o, n, sizeof(*o), overlap_cmp);
	for (i = 0; i < n; i++) {
		if (o[i].end <= at)
			continue;
		if (o[i].start > at || !*pieces)
			(*pieces)++;
		*covered += o[i].end - (o[i].start > at ? o[i].start : at);
		at = o[i].end;
	}
	if (*covered == end - start || keep_end <= start)
		return 0;
	r = array_grow(t->ranges, &t->cap_ranges, t->nr_ranges, sizeof(*r));
	if (!r)
		return -ENOMEM;
	t->ranges = r;
	t->ranges[t->nr_ranges] = (struct est_range){ .start = start,
						      .end = keep_end,
						      .next = x->head };
	x->head = (uint32_t)++t->nr_ranges;
	return 0;
}

/* The commands that make an inode and give it its owner, mode and times. */
static void count_inode(struct est_inode *in, const struct btrfs_inode_item *ii)
{
	uint32_t mode = le32toh(ii->mode);

	/* the inode made (MKFILE, MKDIR...: its path and inode number) */
	in->fixed += CMD + TLV + TLV + 8;
	in->paths++;
	if (S_ISLNK(mode)) {
		in->fixed += TLV + le64toh(ii->size); /* its target */
	} else {
		in->fixed += 2 * (CMD + TLV) + 2 * (TLV + 8) + TLV + 8;
		in->paths += 2; /* CHOWN, CHMOD */
	}
	in->fixed += CMD + TLV + 3 * (TLV + 12); /* UTIMES */
	in->paths++;
	if (S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode))
		in->fixed += 2 * (TLV + 8); /* MODE, RDEV */
}

/* WRITEs of @len bytes, of write_max bytes at most. */
static void count_writes(struct est_inode *in, uint64_t len, uint32_t write_max)
{
	in->fixed += len + (len + write_max - 1) / write_max *
				   (CMD + TLV + TLV + 8 + 2);
	in->paths += (len + write_max - 1) / write_max;
}

/*
 * The bytes of @fe past its file's size: those not written; with
 * @block, past the size's last whole block: those no other file can
 * clone (the last block cloned goes to its file's end).
 */
static uint64_t past_end(const struct est_inode *in,
			 const struct file_extent *fe, bool block)
{
	uint64_t end = fe->offset + fe->len;
	uint64_t size = in->size;

	if (!in->has_size)
		return 0;
	if (block)
		size -= size % SEND_BLOCK;
	if (end <= size)
		return 0;
	return end - (fe->offset > size ? fe->offset : size);
}

/*
 * Whether the range [@offset, @offset + @len) of a file of @size bytes is
 * one sector at offset 0 (to the size): the kernel writes it, never clones
 * it (clone_range(): a receiver with compression could have it inline,
 * and cannot clone into it then). A reflinked copy's source is at the
 * same offset.
 */
static bool lone_first_sector(uint64_t offset, uint64_t len, uint64_t size,
			      uint64_t sectorsize)
{
	uint64_t end = offset + len;

	if (end > size)
		end = size;
	return offset == 0 && end == sectorsize;
}

/*
 * The data of @fe as it is sent: what a range of its extent sent before
 * covers as CLONEs, the rest written (a compressed extent's by its bytes
 * on disk where they are fewer).
 */
static int count_extent(struct est_table *t, struct est_inode *in,
			const struct file_extent *fe, uint32_t write_max)
{
	uint64_t covered = 0, left = fe->len, past;
	struct est_extent *x;
	uint32_t pieces = 0;
	int ret;

	switch (fe->kind) {
	case EXTENT_HOLE:
		return 0;
	case EXTENT_PREALLOC:
		in->fixed += CMD + TLV + TLV + 4 + 2 * (TLV + 8);
		in->paths++;
		return 0;
	case EXTENT_INLINE:
		break;
	case EXTENT_REGULAR:
		if (t->kernel && in->has_size &&
		    lone_first_sector(fe->offset, fe->len, in->size,
				      t->sectorsize))
			break;
		x = extent_get(t, fe->disk_bytenr);
		if (!x)
			return -ENOMEM;
		ret = extent_covered(t, x, fe,
				     fe->extent_offset + fe->len -
					     past_end(in, fe, true),
				     &covered, &pieces);
		if (ret)
			return ret;
		/* CLONE: the file's and its source's paths */
		in->fixed += pieces * (CMD + 2 * TLV + 3 * (TLV + 8) + TLV +
				       16 + TLV + 8);
		in->paths += 2 * pieces;
		left -= covered;
		break;
	}
	if (!left)
		return 0;
	if (fe->compression && left >= fe->disk_bytes) {
		/* ENCODED_WRITE of the extent's bytes on disk */
		in->fixed += CMD + TLV + 4 * (TLV + 8) + TLV + 4 + 2 +
			     fe->disk_bytes;
		in->paths++;
		return 0;
	}
	past = past_end(in, fe, false);
	left -= past < left ? past : left;
	count_writes(in, left, write_max);
	return 0;
}

/* One search item, of a key at or after the search's start. */
static int count_item(struct send_estimate *est, struct est_table *t,
		      const struct btrfs_ioctl_search_header *sh,
		      const uint8_t *item)
{
	struct est_inode *in = inode_get(t, sh->objectid);
	struct btrfs_file_extent_item ei;
	struct btrfs_inode_item ii;
	struct btrfs_dir_item di;
	struct file_extent fe;

	if (!in)
		return -ENOMEM;
	switch (sh->type) {
	case BTRFS_INODE_ITEM_KEY:
		if (sh->len < sizeof(ii))
			return -EUCLEAN;
		memcpy(&ii, item, sizeof(ii));
		in->size = le64toh(ii.size);
		in->has_size = true;
		if (le64toh(ii.transid) > est->since)
			count_inode(in, &ii);
		return 0;
	case BTRFS_INODE_REF_KEY:
		if (sh->len < sizeof(struct btrfs_inode_ref))
			return -EUCLEAN;
		if (!in->parent) {
			in->parent = sh->offset;
			in->name_len = le_get16(item + 8);
		} else if (!est->since) {
			/* LINK: its path and the one it links to */
			in->fixed += CMD + 2 * TLV;
			in->paths += 2;
		}
		return 0;
	case BTRFS_XATTR_ITEM_KEY:
		if (sh->len < sizeof(di))
			return -EUCLEAN;
		memcpy(&di, item, sizeof(di));
		if (le64toh(di.transid) <= est->since)
			return 0;
		in->fixed += CMD + 3 * TLV + le16toh(di.name_len) +
			     le16toh(di.data_len);
		in->paths++;
		return 0;
	case BTRFS_EXTENT_DATA_KEY:
		if (sh->len < 21)
			return -EUCLEAN;
		memcpy(&ei, item, sh->len < sizeof(ei) ? sh->len : sizeof(ei));
		if (le64toh(ei.generation) <= est->since ||
		    extent_item_parse(item, sh->len, sh->offset, &fe))
			return 0;
		return count_extent(t, in, &fe, est->write_max);
	}
	return 0;
}

static int64_t path_len(struct est_table *t, struct est_inode *in, int depth)
{
	struct est_inode *parent;
	int64_t above;

	if (in->plen >= 0)
		return in->plen;
	parent = in->parent ? inode_find(t, in->parent) : NULL;
	/* an inode whose name is not known: as long as a short one */
	if (!parent || depth > 256)
		return in->plen = 16;
	above = path_len(t, parent, depth + 1);
	in->plen = above + (above ? 1 : 0) + in->name_len;
	return in->plen;
}

static uint64_t table_total(struct est_table *t)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < t->cap; i++) {
		struct est_inode *in = &t->slot[i];

		if (in->ino && in->paths)
			total += in->fixed +
				 in->paths * (uint64_t)path_len(t, in, 0);
	}
	return total;
}

struct estimate_walk {
	struct send_estimate *est;
	struct est_table *t;
};

static int count_one(void *arg, const struct btrfs_ioctl_search_header *sh,
		     const uint8_t *item)
{
	struct estimate_walk *w = arg;

	if (__atomic_load_n(&w->est->stop, __ATOMIC_RELAXED))
		return -EINTR;
	return count_item(w->est, w->t, sh, item);
}

static int estimate_search(struct send_estimate *est, struct est_table *t,
			   struct tree_search *ts)
{
	struct btrfs_ioctl_search_key k = {
		.min_objectid = BTRFS_FIRST_FREE_OBJECTID,
		.max_objectid = BTRFS_LAST_FREE_OBJECTID,
		.max_type = BTRFS_EXTENT_DATA_KEY,
		.max_offset = UINT64_MAX,
	};
	struct estimate_walk w = { est, t };

	/* an incremental's: only the leaves written since (find-new's way) */
	return tree_search_run(ts, est->root_fd, &k, est->since, count_one, &w);
}

/*
 * An incremental stream from encio diff's difference, which is the
 * kernel's (lib/diff): its entries make the commands the kernel's pass
 * sends, with their paths; their data ranges are read in the child's
 * extent items: a hole where the parent had data goes as a FALLOCATE that
 * punches it (as WRITEs of zeros where a hole item holds it), data older than the parent as a CLONE from it, new data as
 * a full send's.
 */
struct incr_extent {
	struct file_extent fe;
	uint64_t generation;
};

struct incr_ctx {
	struct send_estimate *est;
	struct est_table t;
	struct est_inode in; /* the inode at hand, its paths' length known */
	struct tree_search *ts;
	int child_fd;
	int parent_fd;
	uint64_t roots[2];    /* the parent's and the child's tree ids */
	uint64_t parent_size; /* of the inode at hand, 0: none */
	uint64_t child_size;
	uint64_t *size_to; /* where the inode item read goes */
	uint64_t ino;	   /* the inode at hand */
	struct incr_extent *ext;
	size_t nr_ext, cap_ext;
};

/* the orphan name a new inode is made under, then renamed from */
#define ORPHAN_LEN 12u
#define CLONE_CMD (CMD + 2 * TLV + 3 * (TLV + 8) + TLV + 16 + TLV + 8)

static int incr_extent_item(void *arg,
			    const struct btrfs_ioctl_search_header *sh,
			    const uint8_t *item)
{
	struct incr_ctx *c = arg;
	struct btrfs_file_extent_item ei;
	struct incr_extent *x;

	if (sh->type != BTRFS_EXTENT_DATA_KEY || sh->len < 21)
		return 0;
	x = array_grow(c->ext, &c->cap_ext, c->nr_ext, sizeof(*x));
	if (!x)
		return -ENOMEM;
	c->ext = x;
	x = &c->ext[c->nr_ext];
	memcpy(&ei, item, sh->len < sizeof(ei) ? sh->len : sizeof(ei));
	if (extent_item_parse(item, sh->len, sh->offset, &x->fe))
		return 0;
	x->generation = le64toh(ei.generation);
	c->nr_ext++;
	return 0;
}

/*
 * A hole where the parent had data, on a filesystem with NO_HOLES (no
 * item for it): FALLOCATE punches it.
 */
static void count_hole(struct est_inode *in)
{
	in->fixed += CMD + TLV + TLV + 4 + 2 * (TLV + 8);
	in->paths++;
}

/*
 * Whether a file other than the one at hand refers to the extent at
 * @bytenr, in the parent or the child (BTRFS_IOC_LOGICAL_INO_V2): one
 * the kernel may clone it from.
 */
static bool incr_other_refs(struct incr_ctx *c, uint64_t bytenr)
{
	struct btrfs_ioctl_logical_ino_args args = {
		.logical = bytenr,
		.size = 64 * 1024,
		.flags = BTRFS_LOGICAL_INO_ARGS_IGNORE_OFFSET,
	};
	struct btrfs_data_container *refs = malloc(args.size);
	bool other = false;
	uint32_t i;

	if (!refs)
		return false;
	args.inodes = (uintptr_t)refs;
	if (ioctl(c->child_fd, BTRFS_IOC_LOGICAL_INO_V2, &args) == 0) {
		for (i = 0; !other && i + 2 < refs->elem_cnt; i += 3)
			other = refs->val[i] != c->ino &&
				(refs->val[i + 2] == c->roots[0] ||
				 refs->val[i + 2] == c->roots[1]);
	}
	free(refs);
	return other;
}

/* The part [@start, @end) of the extent @x, as the kernel sends it. */
static int incr_count_part(struct incr_ctx *c, const struct incr_extent *x,
			   uint64_t start, uint64_t end)
{
	struct file_extent fe = x->fe;
	bool old = x->generation <= c->est->since;

	/*
	 * A new preallocated range within the size, or one the parent had
	 * past its size where no other file of either has it (nothing is
	 * cloned from past EOF): WRITEs of zeros
	 */
	if (fe.kind == EXTENT_PREALLOC &&
	    (!old ||
	     (end > c->parent_size && !incr_other_refs(c, fe.disk_bytenr)))) {
		count_writes(&c->in, end - start, c->est->write_max);
		return 0;
	}
	/* data the parent has: a CLONE from it, but of a lone first sector */
	if (old && (fe.kind == EXTENT_REGULAR || fe.kind == EXTENT_PREALLOC) &&
	    !lone_first_sector(x->fe.offset, x->fe.len, c->child_size,
			       c->t.sectorsize)) {
		c->in.fixed += CLONE_CMD;
		c->in.paths += 2;
		return 0;
	}
	fe.offset = start;
	fe.len = end - start;
	if (fe.kind != EXTENT_INLINE)
		fe.extent_offset += start - x->fe.offset;
	return count_extent(&c->t, &c->in, &fe, c->est->write_max);
}

/* The size of the inode searched, into *c->size_to. */
static int incr_inode_item(void *arg,
			   const struct btrfs_ioctl_search_header *sh,
			   const uint8_t *item)
{
	struct incr_ctx *c = arg;
	struct btrfs_inode_item ii;

	if (sh->type != BTRFS_INODE_ITEM_KEY || sh->len < sizeof(ii))
		return 0;
	memcpy(&ii, item, sizeof(ii));
	*c->size_to = le64toh(ii.size);
	return 0;
}

static int incr_inode_size(struct incr_ctx *c, int fd, uint64_t ino,
			   uint64_t *size)
{
	struct btrfs_ioctl_search_key k =
		tree_search_key_items(ino, BTRFS_INODE_ITEM_KEY);

	c->size_to = size;
	return tree_search_run(c->ts, fd, &k, 0, incr_inode_item, c);
}

/*
 * The range [@pos, @end) of the inode at hand, read in its extents from
 * c->ext[*@j] on (ranges come in order: *@j stays at the first extent the
 * next one may begin in).
 */
static int incr_count_range(struct incr_ctx *c, uint64_t pos, uint64_t end,
			    size_t *j)
{
	int ret = 0;

	while (!ret && pos < end && *j < c->nr_ext) {
		const struct incr_extent *x = &c->ext[*j];
		uint64_t xend = x->fe.offset + x->fe.len;
		uint64_t to = xend < end ? xend : end;

		if (xend <= pos) {
			(*j)++;
			continue;
		}
		if (x->fe.offset >= end)
			break;
		if (x->fe.offset > pos) {
			count_hole(&c->in);
			pos = x->fe.offset;
		}
		/* a hole item (no NO_HOLES): WRITEs of zeros */
		if (x->fe.kind == EXTENT_HOLE)
			count_writes(&c->in, to - pos, c->est->write_max);
		else
			ret = incr_count_part(c, x, pos, to);
		pos = to;
		if (xend <= end)
			(*j)++;
	}
	if (!ret && pos < end)
		count_hole(&c->in);
	return ret;
}

static int incr_count_data(struct incr_ctx *c, const struct diff_entry *e)
{
	struct btrfs_ioctl_search_key k =
		tree_search_key_items(e->ino, BTRFS_EXTENT_DATA_KEY);
	size_t i, j = 0;
	int ret = 0;

	c->nr_ext = 0;
	c->ino = e->ino;
	/* a new inode's number may be an old one's, gone: no size before */
	c->parent_size = 0;
	c->child_size = 0;
	if (e->change == DIFF_MODIFIED)
		ret = incr_inode_size(c, c->parent_fd, e->ino, &c->parent_size);
	ret = ret ?: incr_inode_size(c, c->child_fd, e->ino, &c->child_size);
	c->in.size = c->child_size;
	c->in.has_size = !ret;
	ret = ret   ?:
		      tree_search_run(c->ts, c->child_fd, &k, 0,
				      incr_extent_item, c);
	for (i = 0; !ret && i < e->nr_ranges; i++)
		ret = incr_count_range(c, e->range[i].offset,
				       e->range[i].offset + e->range[i].len,
				       &j);
	return ret;
}

/* SET_XATTR of each xattr named (its value's length read), or REMOVE. */
static void incr_count_xattrs(struct incr_ctx *c, const struct diff_entry *e)
{
	char at[64 + PATH_MAX];
	ssize_t n;
	size_t i;

	snprintf(at, sizeof(at), "/proc/self/fd/%d/%s", c->child_fd, e->path);
	for (i = 0; i < e->nr_xattrs; i++) {
		n = lgetxattr(at, e->xattr[i], NULL, 0);
		c->in.fixed += CMD + 2 * TLV + strlen(e->xattr[i]) +
			       (n >= 0 ? TLV + (size_t)n : 0);
		c->in.paths++;
	}
}

/*
 * The commands of entry @e into c->in: its inode @modified (it has an 'M'
 * entry: it was there before), *@made the path a new one was made at by
 * an entry before (its other names are links).
 */
static int incr_count_entry(struct incr_ctx *c, const struct diff_entry *e,
			    bool modified, const char **made)
{
	size_t len = strlen(e->path);

	memset(&c->in, 0, sizeof(c->in));
	c->in.plen = (int64_t)len;
	switch (e->change) {
	case DIFF_REMOVED:
	case DIFF_RENAMED:
		c->in.fixed += CMD + TLV;
		c->in.paths++;
		if (e->change == DIFF_RENAMED)
			c->in.fixed += TLV + strlen(e->old_path);
		return 0;
	case DIFF_CREATED:
		if (*made || modified) {
			/* LINK of a new name to one it has */
			c->in.fixed +=
				CMD + 2 * TLV + (*made ? strlen(*made) : len);
			c->in.paths++;
			return 0;
		}
		*made = e->path;
		/* made under its orphan name, then renamed */
		c->in.fixed += 2 * (CMD + 2 * TLV) + 8 + 2 * ORPHAN_LEN;
		c->in.paths++;
		if (e->type == '@') {
			char at[64 + PATH_MAX];
			struct stat st;

			snprintf(at, sizeof(at), "/proc/self/fd/%d/%s",
				 c->child_fd, e->path);
			c->in.fixed += TLV + (lstat(at, &st) ? 0 : st.st_size);
		} else {
			c->in.fixed += 2 * (CMD + TLV) + 3 * (TLV + 8);
			c->in.paths += 2; /* CHOWN, CHMOD */
		}
		if (e->type == '|' || e->type == '=' || e->type == 'B' ||
		    e->type == 'C')
			c->in.fixed += 2 * (TLV + 8);
		c->in.fixed += CMD + TLV + 3 * (TLV + 12); /* UTIMES */
		c->in.paths++;
		break;
	case DIFF_MODIFIED:
		c->in.fixed += CMD + TLV + 3 * (TLV + 12); /* UTIMES */
		c->in.paths++;
		if (e->what & DIFF_OWNER)
			c->in.fixed += CMD + TLV + 2 * (TLV + 8);
		if (e->what & DIFF_MODE)
			c->in.fixed += CMD + TLV + TLV + 8;
		if (e->what & DIFF_SIZE)
			c->in.fixed += CMD + TLV + TLV + 8; /* TRUNCATE */
		if (e->what & DIFF_FLAGS)
			c->in.fixed += CMD + TLV + TLV + 8; /* FILEATTR */
		c->in.paths +=
			!!(e->what & DIFF_OWNER) + !!(e->what & DIFF_MODE) +
			!!(e->what & DIFF_SIZE) + !!(e->what & DIFF_FLAGS);
		break;
	}
	incr_count_xattrs(c, e);
	return e->nr_ranges ? incr_count_data(c, e) : 0;
}

/*
 * The incremental stream of @root from est->parent, into est->sum; -errno
 * where encio diff cannot tell it (the caller counts then as before).
 */
static int entry_ino_cmp(const void *a, const void *b)
{
	const struct diff_entry *x = *(const struct diff_entry *const *)a;
	const struct diff_entry *y = *(const struct diff_entry *const *)b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x < y ? -1 : x > y; /* path order within an inode */
}

/*
 * The entries of @res counted an inode at a time (they come by path): an
 * inode with an 'M' entry was there before, and a new one is made once,
 * at its first name.
 */
static int incr_count_all(struct incr_ctx *c, const struct diff_result *res,
			  uint64_t *sum)
{
	const struct diff_entry **by = malloc((res->nr ?: 1) * sizeof(*by));
	size_t i, j, end;
	int ret = 0;

	if (!by)
		return -ENOMEM;
	for (i = 0; i < res->nr; i++)
		by[i] = &res->entry[i];
	qsort(by, res->nr, sizeof(*by), entry_ino_cmp);
	for (i = 0; !ret && i < res->nr; i = end) {
		const char *made = NULL;
		bool modified = false;

		for (end = i; end < res->nr && by[end]->ino == by[i]->ino;
		     end++)
			modified |= by[end]->change == DIFF_MODIFIED;
		for (j = i; !ret && j < end; j++) {
			if (__atomic_load_n(&c->est->stop, __ATOMIC_RELAXED)) {
				ret = -EINTR;
				break;
			}
			ret = incr_count_entry(c, by[j], modified, &made);
			*sum += c->in.fixed +
				c->in.paths * (uint64_t)c->in.plen;
		}
	}
	free(by);
	return ret;
}

static int estimate_incremental(struct send_estimate *est, int child_fd,
				struct tree_search *ts)
{
	struct incr_ctx c = {
		.est = est, .ts = ts, .child_fd = child_fd, .t.kernel = true
	};
	struct diff_result res = { 0 };
	uint64_t sum = 0;
	struct statfs sfs;
	int pfd, ret;

	if (fstatfs(child_fd, &sfs))
		return -errno;
	c.t.sectorsize = (uint64_t)sfs.f_bsize;
	pfd = open(est->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	c.parent_fd = pfd;
	ret = diff_snapshots_cancel(pfd, child_fd, 0, &est->stop, &res);
	if (!ret && (btrfs_util_subvolume_id_fd(pfd, &c.roots[0]) ||
		     btrfs_util_subvolume_id_fd(child_fd, &c.roots[1])))
		ret = -EINVAL;
	ret = ret ?: incr_count_all(&c, &res, &sum);
	if (!ret)
		est->sum += sum;
	close(pfd);
	diff_result_free(&res);
	free(c.ext);
	free(c.t.extents);
	free(c.t.ranges);
	return ret;
}

/*
 * One tree's stream, added to est->sum: a subvolume's from its items; a
 * directory in one, or a tree elsewhere, whose items no search can tell
 * from the rest, counted by the caller's est->count (-n's walk).
 */
/*
 * The stream's header, the subvolume's first command (SUBVOL: its name,
 * UUID, ctransid and encio's layout; SNAPSHOT: its parent's UUID and
 * ctransid too) and END.
 */
static uint64_t frame_bytes(const char *root, bool snapshot)
{
	const char *name = strrchr(root, '/');
	uint64_t first = CMD + TLV + strlen(name ? name + 1 : root) +
			 (TLV + 16) + (TLV + 8);

	first += snapshot ? (TLV + 16) + (TLV + 8) : TLV + 8;
	return STREAM_HEADER_BYTES + first + CMD;
}

static int estimate_root(struct send_estimate *est, const char *root,
			 struct tree_search *ts)
{
	struct est_table t = { 0 };
	struct statfs sfs;
	struct stat st;
	int ret;

	est->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (est->root_fd < 0)
		return -errno;
	if (fstat(est->root_fd, &st) || fstatfs(est->root_fd, &sfs) ||
	    sfs.f_type != BTRFS_SUPER_MAGIC ||
	    st.st_ino != BTRFS_FIRST_FREE_OBJECTID) {
		close(est->root_fd);
		est->root_fd = -1;
		return est->count(root, est->count_arg, &est->sum);
	}
	est->sum += frame_bytes(root, est->parent);
	if (est->parent && !estimate_incremental(est, est->root_fd, ts)) {
		close(est->root_fd);
		est->root_fd = -1;
		return 0;
	}
	ret = estimate_search(est, &t, ts);
	if (!ret)
		est->sum += table_total(&t);
	free(t.slot);
	free(t.extents);
	free(t.ranges);
	close(est->root_fd);
	est->root_fd = -1;
	return ret;
}

/*
 * An incremental's estimate (encio diff's difference, which reads every
 * changed inode's items in both trees) that is not reported is put off
 * for SEND_ESTIMATE_DELAY_SECONDS: a send done by then, which progress
 * has little to show of, does not pay for it: on two CPUs busy with
 * the send and its receiver, SCHED_IDLE does not keep the difference's
 * reads from slowing them (bench/incremental.sh: a 0.2 s send a third
 * longer, and a 0.7 s one, with the estimate half a second in, 31%).
 * -EINTR if the send ends first.
 */
static int estimate_delay(struct send_estimate *est)
{
	const struct timespec nap = { 0, 10 * 1000 * 1000 };

	while (clock_now() - est->start < SEND_ESTIMATE_DELAY_SECONDS) {
		if (__atomic_load_n(&est->stop, __ATOMIC_RELAXED))
			return -EINTR;
		nanosleep(&nap, NULL);
	}
	return 0;
}

static void *estimate_thread(void *arg)
{
	struct send_estimate *est = arg;
	struct sched_param idle = { 0 };
	struct tree_search ts;
	size_t i;
	int ret = 0;

	/*
	 * First on the CPU the send and its receiver leave (progress may
	 * wait a little), until send_estimate_hurry()
	 */
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);

	ret = tree_search_init(&ts, ESTIMATE_BUF);
	if (!ret && est->delayed)
		ret = estimate_delay(est);
	for (i = 0; !ret && i < est->nr; i++)
		ret = estimate_root(est, est->roots[i], &ts);
	if (!ret)
		__atomic_store_n(&est->bytes, est->sum ?: 1, __ATOMIC_RELEASE);
	est->err = ret;
	tree_search_release(&ts);
	return NULL;
}

int send_estimate_start(struct send_estimate *est, const char *const *roots,
			size_t nr, const char *parent, uint64_t since,
			bool delayed, uint32_t write_max, send_count_fn count,
			void *count_arg)
{
	memset(est, 0, sizeof(*est));
	est->parent = parent;
	est->delayed = delayed;
	est->count = count;
	est->count_arg = count_arg;
	est->roots = roots;
	est->nr = nr;
	est->since = since;
	est->write_max = write_max;
	est->root_fd = -1;
	est->start = clock_now();
	if (pthread_create(&est->thread, NULL, estimate_thread, est))
		return -EAGAIN;
	est->started = true;
	return 0;
}

void send_estimate_hurry(struct send_estimate *est)
{
	struct sched_param normal = { 0 };

	if (!est->started || est->hurried || send_estimate_bytes(est) ||
	    clock_now() - est->start < SEND_ESTIMATE_IDLE_SECONDS)
		return;
	est->hurried = true;
	pthread_setschedparam(est->thread, SCHED_OTHER, &normal);
}

uint64_t send_estimate_bytes(const struct send_estimate *est)
{
	return __atomic_load_n(&est->bytes, __ATOMIC_ACQUIRE);
}

void send_estimate_wait(struct send_estimate *est)
{
	if (!est->started)
		return;
	pthread_join(est->thread, NULL);
	est->started = false;
}

void send_estimate_end(struct send_estimate *est)
{
	if (!est->started)
		return;
	__atomic_store_n(&est->stop, true, __ATOMIC_RELAXED);
	pthread_join(est->thread, NULL);
	est->started = false;
}
