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
	uint64_t eof_end; /* past end, to its file's EOF off a block; 0: none */
	uint32_t next;	  /* index + 1 of the extent's next range; 0: none */
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
static int extent_covered(struct est_table *t, struct est_extent *x,
			  const struct file_extent *fe, uint64_t keep_end,
			  uint64_t eof, uint64_t *covered, uint32_t *pieces)
{
	uint64_t start = fe->extent_offset, end = start + fe->len, r_end;
	struct est_range o[EST_OVERLAPS], *r;
	uint64_t at = start;
	size_t n = 0, i;
	uint32_t k;

	*covered = 0;
	*pieces = 0;
	for (k = x->head; k; k = t->ranges[k - 1].next) {
		r = &t->ranges[k - 1];
		/* a tail off a block, cloned to the same EOF only */
		r_end = r->eof_end && r->eof_end == eof ? r->eof_end : r->end;
		if (r_end <= start || r->start >= end)
			continue;
		if (n == EST_OVERLAPS) {
			*covered = end - start;
			*pieces = 1;
			return 0;
		}
		o[n].start = r->start > start ? r->start : start;
		o[n++].end = r_end < end ? r_end : end;
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
	if (*covered == end - start || (keep_end <= start && !eof))
		return 0;
	r = array_grow(t->ranges, &t->cap_ranges, t->nr_ranges, sizeof(*r));
	if (!r)
		return -ENOMEM;
	t->ranges = r;
	t->ranges[t->nr_ranges] = (struct est_range){
		.start = start,
		.end = keep_end > start ? keep_end : start,
		.eof_end = eof > keep_end ? eof : 0,
		.next = x->head,
	};
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
 * Where @fe's file ends, in its extent, if its size ends inside @fe off a
 * block; 0 if not
 */
static uint64_t eof_in_extent(const struct est_inode *in,
			      const struct file_extent *fe)
{
	if (!in->has_size || !(in->size % SEND_BLOCK) ||
	    fe->offset >= in->size || fe->offset + fe->len < in->size)
		return 0;
	return fe->extent_offset + (in->size - fe->offset);
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
		x = extent_get(t, fe->disk_bytenr);
		if (!x)
			return -ENOMEM;
		ret = extent_covered(t, x, fe,
				     fe->extent_offset + fe->len -
					     past_end(in, fe, true),
				     eof_in_extent(in, fe), &covered, &pieces);
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
 * punches it (as WRITEs of zeros where a hole item holds it), each extent
 * item as the kernel sends it: CLONEs from where its own walk finds the
 * extent, WRITEs or an ENCODED_WRITE of the rest.
 */
struct incr_items {
	struct file_extent *ext;
	size_t nr, cap;
};

/* A clone root (the kernel's clone_root): its best reference so far */
struct incr_clone {
	int fd;		/* of the root */
	uint64_t root;	/* its tree id */
	bool send_root; /* the child */
	bool found;
	uint64_t ino, offset, num_bytes;
	uint64_t item_offset; /* the key offset of its extent item */
};

/*
 * A directory removed while entries in it the kernel removes after it
 * (higher inode numbers) remain: renamed to its orphan name, which their
 * paths go through, and removed last
 */
struct orphan_dir {
	const char *path;
	uint64_t ino;
	uint32_t len; /* of its orphan name */
};

struct incr_ctx {
	struct send_estimate *est;
	struct est_inode in; /* the inode at hand, its paths' length known */
	struct tree_search *ts;
	int child_fd;
	int parent_fd;
	struct incr_clone *roots; /* the kernel's clone roots, by tree id */
	size_t nr_roots;
	uint64_t sectorsize;
	uint64_t child_size;   /* of the inode at hand */
	uint64_t ino;	       /* the inode at hand */
	uint64_t next_write;   /* its offset the receiver has data to */
	size_t sent;	       /* its extent items sent: cur.ext[0, sent) */
	struct incr_items cur; /* the inode at hand's extent items */
	struct incr_items src; /* a clone source's */
	struct btrfs_data_container *refs; /* LOGICAL_INO_V2's answer */
	bool walked; /* the references of an item of the inode at hand */
	struct orphan_dir *orphans; /* by path */
	size_t nr_orphans;
	uint64_t send_root; /* the tree id of the subvolume sent */
};

#define CLONE_CMD (CMD + 2 * TLV + 3 * (TLV + 8) + TLV + 16 + TLV + 8)

static int incr_extent_item(void *arg,
			    const struct btrfs_ioctl_search_header *sh,
			    const uint8_t *item)
{
	struct incr_items *items = arg;
	struct file_extent *x;

	if (sh->type != BTRFS_EXTENT_DATA_KEY)
		return 0;
	x = array_grow(items->ext, &items->cap, items->nr, sizeof(*x));
	if (!x)
		return -ENOMEM;
	items->ext = x;
	if (!extent_item_parse(item, sh->len, sh->offset, &x[items->nr]))
		items->nr++;
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

/* The inode item searched, into *@arg. */
static int incr_inode_item(void *arg,
			   const struct btrfs_ioctl_search_header *sh,
			   const uint8_t *item)
{
	struct btrfs_inode_item *ii = arg;

	if (sh->type != BTRFS_INODE_ITEM_KEY || sh->len < sizeof(*ii))
		return 0;
	memcpy(ii, item, sizeof(*ii));
	return 0;
}

static int incr_inode_read(struct incr_ctx *c, int fd, uint64_t ino,
			   struct btrfs_inode_item *ii)
{
	struct btrfs_ioctl_search_key k =
		tree_search_key_items(ino, BTRFS_INODE_ITEM_KEY);

	memset(ii, 0, sizeof(*ii));
	return tree_search_run(c->ts, fd, &k, 0, incr_inode_item, ii);
}

static int incr_inode_size(struct incr_ctx *c, int fd, uint64_t ino,
			   uint64_t *size)
{
	struct btrfs_inode_item ii;
	int ret = incr_inode_read(c, fd, ino, &ii);

	*size = le64toh(ii.size);
	return ret;
}

static uint32_t digits(uint64_t v)
{
	uint32_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* gen_unique_name(): "o<ino>-<generation>-0" */
static uint32_t orphan_len(uint64_t ino, uint64_t generation)
{
	return 1 + digits(ino) + 1 + digits(generation) + 2;
}

/*
 * The kernel's choice of a clone source for an extent item it sends
 * (find_extent_clone(), clone_range(), send_write_or_clone() of
 * fs/btrfs/send.c, Linux 6.18), followed step by step: its backref walk is
 * BTRFS_IOC_LOGICAL_INO_V2 at the same logical address, which resolves
 * the same references by the same walk (the order but for the kernel's
 * backref cache: incr_walk_refs()); each reference's length and the
 * source's extents are read in its root. Over the random tester's
 * histories this matched the kernel's stream in all but a few streams in
 * a thousand, where the backref cache of other files' leaves reorders
 * references of equal length.
 */
#define INCR_REFS_BYTES (64 * 1024)
/* the largest sector size a receiver may have: no EOF block cloned past */
#define INCR_EOF_ALIGN (64 * 1024)
/* ENCODED_WRITE: path, 4 u64s, compression and encryption, data */
#define ENCODED_CMD (CMD + TLV + 4 * (TLV + 8) + 2 * (TLV + 4) + 2)

/*
 * The extent item of a reference: file offset @offset is @pos in its
 * extent (a compressed extent's references: @offset is the item's)
 */
struct incr_ref_find {
	uint64_t bytenr, pos, offset;
	uint64_t num_bytes, item_offset;
};

static int incr_ref_item(void *arg, const struct btrfs_ioctl_search_header *sh,
			 const uint8_t *item)
{
	struct incr_ref_find *f = arg;
	struct file_extent fe;

	if (sh->type != BTRFS_EXTENT_DATA_KEY ||
	    extent_item_parse(item, sh->len, sh->offset, &fe) ||
	    fe.kind == EXTENT_INLINE || fe.disk_bytenr != f->bytenr)
		return 0;
	/* a compressed one is reported wherever it starts in the extent */
	if (fe.compression ? fe.offset != f->offset :
			     fe.extent_offset > f->pos ||
				     f->pos >= fe.extent_offset + fe.len ||
				     fe.offset + (f->pos - fe.extent_offset) !=
					     f->offset)
		return 0;
	f->num_bytes = fe.len;
	f->item_offset = fe.offset;
	return 1;
}

static int incr_ref_bytes(struct incr_ctx *c, struct incr_clone *cr,
			  uint64_t ino, struct incr_ref_find *f)
{
	struct btrfs_ioctl_search_key k =
		tree_search_key_items(ino, BTRFS_EXTENT_DATA_KEY);
	int ret;

	k.min_offset = f->offset > f->pos ? f->offset - f->pos : 0;
	k.max_offset = f->offset;
	f->num_bytes = 0;
	ret = tree_search_run(c->ts, cr->fd, &k, 0, incr_ref_item, f);
	return ret < 0 ? ret : 0;
}

/*
 * The references of the extent at @logical; 0 if there are none or the
 * kernel does not answer (the kernel's send writes then).
 */
static uint32_t incr_backrefs(struct incr_ctx *c, uint64_t logical)
{
	struct btrfs_ioctl_logical_ino_args args = {
		.logical = logical,
		.size = INCR_REFS_BYTES,
	};

	if (!c->refs && !(c->refs = malloc(INCR_REFS_BYTES)))
		return 0;
	args.inodes = (uintptr_t)c->refs;
	if (ioctl(c->child_fd, BTRFS_IOC_LOGICAL_INO_V2, &args))
		return 0;
	return c->refs->elem_cnt;
}

static struct incr_clone *incr_root(struct incr_ctx *c, uint64_t root)
{
	size_t i;

	for (i = 0; i < c->nr_roots; i++)
		if (c->roots[i].root == root)
			return &c->roots[i];
	return NULL;
}

/*
 * iterate_backrefs() of one reference: 1 when it is one the whole range
 * can be cloned from (the walk stops)
 */
static int incr_ref_visit(struct incr_ctx *c, const struct file_extent *fe,
			  uint64_t extent_len, const __u64 *ref)
{
	struct incr_ref_find f = {
		.bytenr = fe->disk_bytenr,
		.pos = fe->compression ? 0 : fe->extent_offset,
		.offset = ref[1],
	};
	struct incr_clone *cr = incr_root(c, ref[2]);
	uint64_t ino = ref[0];
	int ret;

	if (!cr)
		return 0;
	/* not its own, nor a file or a range not at the receiver yet */
	if (cr->send_root &&
	    (ino > c->ino ||
	     (ino == c->ino && (f.offset == fe->offset ||
				f.offset + extent_len > c->next_write))))
		return 0;
	ret = incr_ref_bytes(c, cr, ino, &f);
	/* its item not found (none should be): not a source to clone from */
	if (ret || !f.num_bytes)
		return ret;
	cr->found = true;
	if (f.num_bytes <= cr->num_bytes)
		return 0;
	cr->ino = ino;
	cr->offset = f.offset;
	cr->num_bytes = f.num_bytes;
	cr->item_offset = f.item_offset;
	return f.num_bytes >= extent_len;
}

/* Whether @ref is to the file at hand, in the subvolume sent. */
static bool incr_ref_own(const struct incr_ctx *c, const __u64 *ref)
{
	return ref[0] == c->ino && ref[2] == c->send_root;
}

/* find_extent_clone()'s walk over the references of @fe's extent */
static int incr_walk_refs(struct incr_ctx *c, const struct file_extent *fe,
			  uint64_t extent_len)
{
	uint64_t pos = fe->compression ? 0 : fe->extent_offset;
	uint32_t i, n = incr_backrefs(c, fe->disk_bytenr + pos);
	const __u64 *ref;
	int ret = 0;

	/*
	 * The kernel's backref cache (lookup_backref_cache()) holds the
	 * leaves its walks of this send resolved to roots; a walk reports the
	 * references in a cached leaf first, as it finds them: here the file
	 * at hand's, whose leaf the walk for its extent item before resolved.
	 * Then every leaf's, as LOGICAL_INO lists them.
	 */
	for (i = 0; c->walked && !ret && i + 2 < n; i += 3) {
		ref = &c->refs->val[i];
		if (incr_ref_own(c, ref))
			ret = incr_ref_visit(c, fe, extent_len, ref);
	}
	/* the rest; those met first again would change nothing */
	for (i = 0; !ret && i + 2 < n; i += 3) {
		ref = &c->refs->val[i];
		if (!c->walked || !incr_ref_own(c, ref))
			ret = incr_ref_visit(c, fe, extent_len, ref);
	}
	c->walked = true;
	return ret < 0 ? ret : 0;
}

/* The clone source the kernel takes for @fe, NULL: none. */
static struct incr_clone *incr_find_clone(struct incr_ctx *c,
					  const struct file_extent *fe)
{
	uint64_t extent_len = fe->len;
	struct incr_clone *best = NULL;
	size_t i;

	if (fe->offset + fe->len >= c->child_size)
		extent_len = c->child_size - fe->offset;
	for (i = 0; i < c->nr_roots; i++) {
		c->roots[i].found = false;
		c->roots[i].num_bytes = 0;
	}
	if (incr_walk_refs(c, fe, extent_len))
		return NULL;
	/* the root with the longest reference, the first by tree id */
	for (i = 0; i < c->nr_roots; i++) {
		struct incr_clone *cr = &c->roots[i];

		if (!cr->found || (best && cr->num_bytes <= best->num_bytes))
			continue;
		best = cr;
		if (cr->num_bytes >= extent_len)
			break;
	}
	return best;
}

/* send_extent_data(): @len bytes of @fe's extent, encoded if smaller */
static void incr_write(struct incr_ctx *c, const struct file_extent *fe,
		       uint64_t len)
{
	if (fe->compression && fe->kind != EXTENT_HOLE &&
	    fe->disk_bytes <= len) {
		c->in.fixed += ENCODED_CMD + fe->disk_bytes;
		c->in.paths++;
		return;
	}
	count_writes(&c->in, len, c->est->write_max);
}

static void incr_clone_cmd(struct incr_ctx *c)
{
	c->in.fixed += CLONE_CMD;
	c->in.paths += 2;
}

/* clone_range()'s way through the source's extent items */
struct clone_walk {
	uint64_t offset;      /* in the file at hand */
	uint64_t len;	      /* left to send */
	uint64_t at;	      /* in the source */
	uint64_t data_offset; /* in the extent sent */
	uint64_t src_size;
};

static void clone_walk_advance(struct clone_walk *w, uint64_t n)
{
	w->len -= n;
	w->offset += n;
	w->at += n;
	w->data_offset += n;
}

/*
 * The source's extent item @s on the way: @fe's data it holds at the
 * same place cloned (but a last block off 64 KiB, the largest sector
 * size, into the middle of a file), the rest written. 1 where the walk
 * stops.
 */
static int incr_clone_piece(struct incr_ctx *c, const struct file_extent *fe,
			    const struct incr_clone *cr,
			    const struct file_extent *s, struct clone_walk *w)
{
	uint64_t ext_len = s->len, cdo = s->extent_offset, n, whole;
	bool crossed = false, same;

	if (s->kind == EXTENT_INLINE)
		ext_len = (s->len + 4095) & ~4095ULL;
	if (s->offset + ext_len <= w->at)
		return 0;
	if (s->offset > w->at) {
		/* no item there (NO_HOLES): written */
		n = s->offset - w->at < w->len ? s->offset - w->at : w->len;
		incr_write(c, fe, n);
		clone_walk_advance(w, n);
		if (!w->len)
			return 1;
	}
	if (s->offset >= w->at + w->len || s->offset >= w->src_size)
		return 1;
	if (s->offset + ext_len > w->src_size) {
		ext_len = w->src_size - s->offset;
		crossed = true;
	}
	same = s->kind != EXTENT_INLINE && s->disk_bytenr == fe->disk_bytenr;
	if (same) {
		w->at = s->offset;
		if (cdo < w->data_offset && cdo + ext_len > w->data_offset) {
			ext_len -= w->data_offset - cdo;
			w->at += w->data_offset - cdo;
			cdo = w->data_offset;
		}
	}
	n = ext_len < w->len ? ext_len : w->len;
	if (same && cdo == w->data_offset) {
		whole = n;
		if (w->at + n == w->src_size && w->src_size % INCR_EOF_ALIGN &&
		    w->offset + n < c->child_size)
			whole = n - n % INCR_EOF_ALIGN;
		if (whole)
			incr_clone_cmd(c);
		if (whole < n)
			incr_write(c, fe, n - whole);
	} else if (crossed && n < w->len) {
		return 1;
	} else {
		incr_write(c, fe, n);
	}
	clone_walk_advance(w, n);
	/* the file at hand, past what the receiver has of it */
	return !w->len ||
	       (cr->send_root && cr->ino == c->ino && w->at >= c->next_write);
}

/*
 * clone_range(): @len bytes of @fe, from its start, from @cr's file of
 * @src_size bytes, extent by extent of the source: a CLONE where the
 * source has the same data, a write where it has other data or none, the
 * source's EOF block written.
 */
static int incr_clone_range(struct incr_ctx *c, const struct file_extent *fe,
			    const struct incr_clone *cr, uint64_t src_size,
			    uint64_t len)
{
	struct btrfs_ioctl_search_key k =
		tree_search_key_items(cr->ino, BTRFS_EXTENT_DATA_KEY);
	struct clone_walk w = {
		.offset = fe->offset,
		.len = len,
		.at = cr->offset,
		.data_offset = fe->extent_offset,
		.src_size = src_size,
	};
	size_t i;
	int ret, stop = 0;

	if (w.at == 0 && len == c->sectorsize) {
		incr_write(c, fe, len);
		return 0;
	}
	k.min_offset = cr->item_offset;
	k.max_offset = w.at + len - 1;
	c->src.nr = 0;
	ret = tree_search_run(c->ts, cr->fd, &k, 0, incr_extent_item, &c->src);
	if (ret)
		return ret;
	for (i = 0; i < c->src.nr && !stop; i++)
		stop = incr_clone_piece(c, fe, cr, &c->src.ext[i], &w);
	if (w.len)
		incr_write(c, fe, w.len);
	return 0;
}

/* send_write_or_clone() of the extent item @fe of the inode at hand */
static int incr_send_item(struct incr_ctx *c, const struct file_extent *fe)
{
	uint64_t end = fe->offset + fe->len, src_size = 0;
	struct incr_clone *cr = NULL;
	int ret;

	if (end > c->child_size)
		end = c->child_size;
	if (fe->offset >= end)
		return 0;
	if (fe->kind == EXTENT_REGULAR || fe->kind == EXTENT_PREALLOC)
		cr = incr_find_clone(c, fe);
	ret = cr ? incr_inode_size(c, cr->fd, cr->ino, &src_size) : 0;
	if (ret)
		return ret;
	/*
	 * an unaligned end is cloned where it is the file's and the
	 * source's size, after a TRUNCATE to the range's start
	 */
	if (cr && end % c->sectorsize) {
		if (end == c->child_size &&
		    cr->offset + (end - fe->offset) == src_size) {
			c->in.fixed += CMD + TLV + TLV + 8;
			c->in.paths++;
		} else {
			cr = NULL;
		}
	}
	if (cr)
		ret = incr_clone_range(c, fe, cr, src_size, end - fe->offset);
	else
		incr_write(c, fe, end - fe->offset);
	c->next_write = end;
	return ret;
}

/*
 * The range [@pos, @end) of the inode at hand, read in its extents from
 * c->cur.ext[*@j] on (ranges come in order: *@j stays at the first extent the
 * next one may begin in).
 */
static int incr_count_range(struct incr_ctx *c, uint64_t pos, uint64_t end,
			    size_t *j)
{
	int ret = 0;

	while (!ret && pos < end && *j < c->cur.nr) {
		const struct file_extent *x = &c->cur.ext[*j];
		uint64_t xend = x->offset + x->len;
		uint64_t to = xend < end ? xend : end;

		if (xend <= pos) {
			(*j)++;
			continue;
		}
		if (x->offset >= end)
			break;
		if (x->offset > pos) {
			count_hole(&c->in);
			pos = x->offset;
		}
		/*
		 * the kernel sends each extent item whole (a hole item, of a
		 * filesystem without NO_HOLES, as WRITEs of zeros); a range
		 * inside one is written
		 */
		if (*j >= c->sent && pos == x->offset) {
			ret = incr_send_item(c, x);
			c->sent = *j + 1;
		} else if (*j >= c->sent) {
			incr_write(c, x, to - pos);
		}
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

	c->cur.nr = 0;
	c->ino = e->ino;
	c->next_write = 0;
	c->sent = 0;
	c->walked = false;
	c->child_size = 0;
	ret = incr_inode_size(c, c->child_fd, e->ino, &c->child_size) ?:
		      tree_search_run(c->ts, c->child_fd, &k, 0,
				      incr_extent_item, &c->cur);
	for (i = 0; !ret && i < e->nr_ranges; i++)
		ret = incr_count_range(c, e->range[i].offset,
				       e->range[i].offset + e->range[i].len,
				       &j);
	return ret;
}

static int orphan_cmp(const void *key, const void *elt)
{
	return strcmp(key, ((const struct orphan_dir *)elt)->path);
}

/* The orphan name's length of the directory @path, 0: it has none. */
static uint32_t orphan_dir_len(const struct incr_ctx *c, const char *path)
{
	const struct orphan_dir *o;

	if (!c->nr_orphans)
		return 0;
	o = bsearch(path, c->orphans, c->nr_orphans, sizeof(*o), orphan_cmp);
	return o ? o->len : 0;
}

/*
 * The length of the path @path of inode @ino when the kernel removes it:
 * through the orphan name of its deepest directory orphaned before
 */
static int64_t orphan_path_len(const struct incr_ctx *c, const char *path,
			       uint64_t ino)
{
	size_t len = strlen(path), at = len;
	char dir[PATH_MAX];
	const struct orphan_dir *o;

	if (!c->nr_orphans || len >= sizeof(dir))
		return (int64_t)len;
	memcpy(dir, path, len + 1);
	while (at--) {
		if (dir[at] != '/')
			continue;
		dir[at] = '\0';
		o = bsearch(dir, c->orphans, c->nr_orphans, sizeof(*o),
			    orphan_cmp);
		if (o && o->ino < ino)
			return (int64_t)(o->len + len - at);
	}
	return (int64_t)len;
}

/* The first entry of @res (sorted by path) at or after @path. */
static size_t entry_lower_bound(const struct diff_result *res, const char *path)
{
	size_t lo = 0, hi = res->nr, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(res->entry[mid].path, path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the kernel orphans the removed directory @d (orphan_dir). */
static bool orphaned(const struct diff_result *res, const struct diff_entry *d)
{
	char prefix[PATH_MAX];
	size_t n, i;

	n = (size_t)snprintf(prefix, sizeof(prefix), "%s/", d->path);
	if (n >= sizeof(prefix))
		return false;
	for (i = entry_lower_bound(res, prefix);
	     i < res->nr && !strncmp(res->entry[i].path, prefix, n); i++)
		if (res->entry[i].change == DIFF_REMOVED &&
		    res->entry[i].ino > d->ino)
			return true;
	return false;
}

static int incr_find_orphans(struct incr_ctx *c, const struct diff_result *res)
{
	struct btrfs_inode_item ii;
	struct orphan_dir *o;
	size_t i, cap = 0;
	int ret;

	for (i = 0; i < res->nr; i++) {
		const struct diff_entry *d = &res->entry[i];

		if (d->change != DIFF_REMOVED || d->type != '/' ||
		    !orphaned(res, d))
			continue;
		ret = incr_inode_read(c, c->parent_fd, d->ino, &ii);
		if (ret)
			return ret;
		o = array_grow(c->orphans, &cap, c->nr_orphans, sizeof(*o));
		if (!o)
			return -ENOMEM;
		c->orphans = o;
		/* in path order, as the entries are */
		o[c->nr_orphans++] = (struct orphan_dir){
			.path = d->path,
			.ino = d->ino,
			.len = orphan_len(d->ino, le64toh(ii.generation)),
		};
	}
	return 0;
}

/* The kernel's UTIMES: a v2 stream's has the inode's otime too. */
static uint64_t incr_utimes(const struct incr_ctx *c)
{
	return CMD + TLV + (c->est->v1 ? 3 : 4) * (TLV + 12);
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
	struct btrfs_inode_item ii;
	uint32_t orphan;
	int ret;

	/* the subvolume's root directory is "" in the stream */
	if (e->ino == BTRFS_FIRST_FREE_OBJECTID)
		len = 0;
	memset(&c->in, 0, sizeof(c->in));
	c->in.plen = (int64_t)len;
	switch (e->change) {
	case DIFF_REMOVED:
		c->in.plen = orphan_path_len(c, e->path, e->ino);
		orphan = orphan_dir_len(c, e->path);
		if (orphan) {
			/* RENAME to its orphan name, RMDIR of that */
			c->in.fixed +=
				CMD + 2 * TLV + orphan + CMD + TLV + orphan;
			c->in.paths++;
			return 0;
		}
		c->in.fixed += CMD + TLV;
		c->in.paths++;
		return 0;
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
		ret = incr_inode_read(c, c->child_fd, e->ino, &ii);
		if (ret)
			return ret;
		/*
		 * made under its orphan name, given its flags there (FILEATTR),
		 * then renamed
		 */
		orphan = orphan_len(e->ino, le64toh(ii.generation));
		c->in.fixed += 2 * (CMD + 2 * TLV) + 8 + 2 * orphan;
		c->in.paths++;
		if (ii.flags)
			c->in.fixed += CMD + TLV + orphan + TLV + 8;
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
		c->in.fixed += incr_utimes(c);
		c->in.paths++;
		break;
	case DIFF_MODIFIED:
		c->in.fixed += incr_utimes(c);
		c->in.paths++;
		if (e->what & DIFF_OWNER)
			c->in.fixed += CMD + TLV + 2 * (TLV + 8);
		if (e->what & DIFF_MODE)
			c->in.fixed += CMD + TLV + TLV + 8;
		/* a directory's size is its entries' */
		if (e->type != '/' && (e->what & DIFF_SIZE))
			c->in.fixed += CMD + TLV + TLV + 8; /* TRUNCATE */
		if (e->what & DIFF_FLAGS)
			c->in.fixed += CMD + TLV + TLV + 8; /* FILEATTR */
		c->in.paths += !!(e->what & DIFF_OWNER) +
			       !!(e->what & DIFF_MODE) +
			       (e->type != '/' && (e->what & DIFF_SIZE)) +
			       !!(e->what & DIFF_FLAGS);
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
	ret = incr_find_orphans(c, res);
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

static int incr_root_cmp(const void *a, const void *b)
{
	const struct incr_clone *x = a, *y = b;

	return x->root < y->root ? -1 : x->root > y->root;
}

static int incr_add_root(struct incr_ctx *c, int fd, bool send_root)
{
	struct incr_clone *cr = &c->roots[c->nr_roots];

	memset(cr, 0, sizeof(*cr));
	cr->fd = fd;
	cr->send_root = send_root;
	if (btrfs_util_subvolume_id_fd(fd, &cr->root))
		return -EINVAL;
	if (send_root)
		c->send_root = cr->root;
	if (!incr_root(c, cr->root))
		c->nr_roots++;
	return 0;
}

/*
 * The kernel's clone roots: the clone sources (-c, and the parent, which
 * send passes as one) and the subvolume sent, sorted by tree id
 */
static int incr_open_roots(struct incr_ctx *c)
{
	const struct send_estimate *est = c->est;
	size_t i;
	int fd, ret;

	c->roots = calloc(est->nr_clones + 2, sizeof(*c->roots));
	if (!c->roots)
		return -ENOMEM;
	ret = incr_add_root(c, c->parent_fd, false) ?:
		      incr_add_root(c, c->child_fd, true);
	for (i = 0; !ret && i < est->nr_clones; i++) {
		fd = open(est->clones[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		ret = incr_add_root(c, fd, false);
		if (ret || c->roots[c->nr_roots - 1].fd != fd)
			close(fd);
	}
	qsort(c->roots, c->nr_roots, sizeof(*c->roots), incr_root_cmp);
	return ret;
}

static void incr_close_roots(struct incr_ctx *c)
{
	size_t i;

	for (i = 0; i < c->nr_roots; i++)
		if (c->roots[i].fd != c->parent_fd &&
		    c->roots[i].fd != c->child_fd)
			close(c->roots[i].fd);
	free(c->roots);
}

static int estimate_incremental(struct send_estimate *est, int child_fd,
				struct tree_search *ts)
{
	struct incr_ctx c = {
		.est = est,
		.ts = ts,
		.child_fd = child_fd,
	};
	struct diff_result res = { 0 };
	uint64_t sum = 0;
	struct statfs sfs;
	int pfd, ret;

	if (fstatfs(child_fd, &sfs))
		return -errno;
	c.sectorsize = (uint64_t)sfs.f_bsize;
	pfd = open(est->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	c.parent_fd = pfd;
	ret = diff_snapshots_cancel(pfd, child_fd, 0, &est->stop, &res);
	ret = ret ?: incr_open_roots(&c);
	ret = ret ?: incr_count_all(&c, &res, &sum);
	if (!ret)
		est->sum += sum;
	incr_close_roots(&c);
	close(pfd);
	diff_result_free(&res);
	free(c.cur.ext);
	free(c.src.ext);
	free(c.refs);
	free(c.orphans);
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
			size_t nr, const struct send_options *opts,
			uint64_t since, uint32_t write_max, send_count_fn count,
			void *count_arg)
{
	memset(est, 0, sizeof(*est));
	/* an incremental's (a parent's otransid found) */
	if (since) {
		est->parent = opts->parent;
		est->clones = opts->clones;
		est->nr_clones = opts->nr_clones;
	}
	est->delayed = since && !opts->estimate_reported;
	est->v1 = opts->proto == 1;
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
