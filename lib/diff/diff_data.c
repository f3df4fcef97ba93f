// SPDX-License-Identifier: GPL-2.0
/*
 * encio diff: the data ranges of a file, as BTRFS_IOC_SEND gives them in
 * an incremental stream (UPDATE_EXTENT and CLONE without data, WRITE and
 * ENCODED_WRITE with it). A new file sends each extent but holes and
 * preallocation. A modified file sends each extent item of the leaves
 * the two trees do not share that is not the same item in the parent,
 * unless the parent holds the same disk range there; and each hole
 * before such an item, or at the file's end, where the parent had data.
 * The rules, and what they compare, follow fs/btrfs/send.c's
 * process_extent(), is_extent_unchanged(), maybe_send_hole() and
 * range_is_hole_in_parent() (Linux 6.18): this difference is the kernel's, not a
 * better one, so that a stream made of it is the kernel's stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/kernel.h"
#include "diff/diff_internal.h"

int diff_ranges_add(struct diff_ranges *rs, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	if (rs->nr == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 8;
		struct diff_range *r = realloc(rs->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		rs->r = r;
		rs->cap = cap;
	}
	rs->r[rs->nr].offset = start;
	rs->r[rs->nr].len = end - start;
	rs->nr++;
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct diff_range *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void diff_ranges_merge(struct diff_ranges *rs)
{
	size_t i, n = 0;

	if (!rs->nr)
		return;
	qsort(rs->r, rs->nr, sizeof(*rs->r), range_cmp);
	for (i = 1; i < rs->nr; i++) {
		struct diff_range *last = &rs->r[n];
		uint64_t end = last->offset + last->len;

		if (rs->r[i].offset <= end) {
			uint64_t e = rs->r[i].offset + rs->r[i].len;

			if (e > end)
				last->len = e - last->offset;
			continue;
		}
		rs->r[++n] = rs->r[i];
	}
	rs->nr = n + 1;
}

/* [offset, extent end) clipped to the file's size, as a write sends it */
static int add_extent(struct diff_ranges *rs, const struct diff_extent *e,
		      uint64_t size, uint32_t sectorsize)
{
	uint64_t end = diff_extent_end(e, sectorsize);

	return diff_ranges_add(rs, e->offset, end < size ? end : size);
}

int diff_data_new(const struct diff_inode *c, uint32_t sectorsize,
		  struct diff_ranges *rs)
{
	size_t i;
	int ret;

	if (!S_ISREG(c->mode))
		return 0;
	for (i = 0; i < c->nr_extents; i++) {
		const struct diff_extent *e = &c->extent[i];

		if (e->type == BTRFS_FILE_EXTENT_PREALLOC)
			continue;
		if (e->type == BTRFS_FILE_EXTENT_REG && !e->disk_bytenr)
			continue;
		ret = add_extent(rs, e, c->size, sectorsize);
		if (ret)
			return ret;
	}
	return 0;
}

/* The parent's extent item at @offset, or the last before it; -1: none */
static long extent_at_or_before(const struct diff_inode *p, uint64_t offset)
{
	long i;

	for (i = (long)p->nr_extents - 1; i >= 0; i--)
		if (p->extent[i].offset <= offset)
			return i;
	return -1;
}

/* Whether the parent holds the same data for @e (is_extent_unchanged) */
static bool extent_unchanged(const struct diff_inode *p,
			     const struct diff_extent *e)
{
	uint64_t end = e->offset + e->num_bytes, key;
	long i;

	if (e->type != BTRFS_FILE_EXTENT_REG)
		return false;
	i = extent_at_or_before(p, e->offset);
	if (i < 0)
		return !e->disk_bytenr;
	key = p->extent[i].offset;
	for (;;) {
		const struct diff_extent *r = &p->extent[i];
		uint64_t right_len, left_off = e->data_offset, right_off;

		if (r->type != BTRFS_FILE_EXTENT_REG &&
		    r->type != BTRFS_FILE_EXTENT_INLINE)
			return false;
		right_len = r->type == BTRFS_FILE_EXTENT_INLINE ?
				    (r->ram_bytes + 4095) & ~4095ULL :
				    r->num_bytes;
		if (r->offset + right_len <= e->offset)
			return !e->disk_bytenr;
		if (r->type == BTRFS_FILE_EXTENT_INLINE)
			return false;
		right_off = r->data_offset;
		if (r->offset < e->offset)
			right_off += e->offset - r->offset;
		else
			left_off += r->offset - e->offset;
		if (e->disk_bytenr != r->disk_bytenr || left_off != right_off ||
		    e->gen != r->gen)
			return false;
		if ((size_t)i + 1 >= p->nr_extents) {
			key += right_len;
			break;
		}
		if (p->extent[i + 1].offset != key + right_len)
			return false;
		i++;
		key = p->extent[i].offset;
		if (key >= end)
			break;
	}
	return key >= end;
}

/*
 * Whether the parent has no data in [start, end) (range_is_hole_in_parent):
 * an inline extent is data, whatever its first bytes.
 */
static bool hole_in_parent(const struct diff_inode *p, uint64_t start,
			   uint64_t end, uint32_t sectorsize)
{
	size_t i;

	for (i = 0; i < p->nr_extents; i++) {
		const struct diff_extent *r = &p->extent[i];

		if (r->offset >= end)
			break;
		if (diff_extent_end(r, sectorsize) <= start)
			continue;
		if (r->type == BTRFS_FILE_EXTENT_INLINE || r->disk_bytenr)
			return false;
	}
	return true;
}

static const struct diff_extent *same_key(const struct diff_inode *p,
					  uint64_t offset)
{
	size_t i;

	for (i = 0; i < p->nr_extents; i++)
		if (p->extent[i].offset == offset)
			return &p->extent[i];
	return NULL;
}

static int hole_before(const struct diff_inode *p, const struct diff_inode *c,
		       size_t i, uint32_t sectorsize, struct diff_ranges *rs)
{
	uint64_t last = i ? diff_extent_end(&c->extent[i - 1], sectorsize) : 0;
	uint64_t at = c->extent[i].offset;

	if (last >= at || last >= c->size ||
	    hole_in_parent(p, last, at, sectorsize))
		return 0;
	return diff_ranges_add(rs, last, at < c->size ? at : c->size);
}

int diff_data_changed(const struct diff_inode *p, const struct diff_inode *c,
		      uint64_t since, uint32_t sectorsize,
		      struct diff_ranges *rs)
{
	bool parent_moved = p->max_leaf_gen > since;
	uint64_t last;
	size_t i;
	int ret;

	if (!S_ISREG(c->mode))
		return 0;
	for (i = 0; i < c->nr_extents; i++) {
		const struct diff_extent *e = &c->extent[i];
		const struct diff_extent *r;

		/* a leaf both trees share: the kernel's comparison skips it */
		if (e->leaf_gen <= since && !parent_moved)
			continue;
		r = same_key(p, e->offset);
		if (!(r && r->raw_len == e->raw_len &&
		      !memcmp(r->raw, e->raw, e->raw_len)) &&
		    !extent_unchanged(p, e) && e->offset < c->size) {
			ret = add_extent(rs, e, c->size, sectorsize);
			if (ret)
				return ret;
		}
		ret = hole_before(p, c, i, sectorsize, rs);
		if (ret)
			return ret;
	}
	last = c->nr_extents ? diff_extent_end(&c->extent[c->nr_extents - 1],
					       sectorsize) :
			       0;
	if (last < c->size && !hole_in_parent(p, last, c->size, sectorsize))
		return diff_ranges_add(rs, last, c->size);
	return 0;
}
