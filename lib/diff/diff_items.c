// SPDX-License-Identifier: GPL-2.0
/*
 * encio diff: a snapshot's items by tree search (BTRFS_IOC_TREE_SEARCH_V2,
 * CAP_SYS_ADMIN). A search bounded by min_transid skips every subtree no
 * newer than it, so finding the inodes a difference touches costs what
 * btrfs subvolume find-new costs; each of those inodes is then read whole
 * from both trees.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "base/array.h"
#include "base/hash.h"
#include "base/kernel.h"
#include "base/le_bytes.h"
#include "diff/diff_internal.h"

static int inoset_grow(struct diff_inoset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024, i;
	uint64_t *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->slot[i])
			continue;
		j = hash64(s->slot[i]) & (cap - 1);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = s->slot[i];
	}
	free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

static bool inoset_has(const struct diff_inoset *s, uint64_t ino)
{
	size_t j;

	if (!s->cap)
		return false;
	for (j = hash64(ino) & (s->cap - 1); s->slot[j];
	     j = (j + 1) & (s->cap - 1))
		if (s->slot[j] == ino)
			return true;
	return false;
}

static int inoset_add(struct diff_inoset *s, uint64_t ino, uint32_t mode)
{
	size_t j;

	if (inoset_has(s, ino))
		return 0;
	if ((s->nr + 1) * 2 > s->cap && inoset_grow(s))
		return -ENOMEM;
	if (s->list_nr == s->list_cap) {
		size_t cap = s->list_cap ? s->list_cap * 2 : 1024;
		uint64_t *l = realloc(s->list, cap * sizeof(*l));
		uint32_t *m;

		if (!l)
			return -ENOMEM;
		s->list = l;
		m = realloc(s->mode, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		s->mode = m;
		s->list_cap = cap;
	}
	j = hash64(ino) & (s->cap - 1);
	while (s->slot[j])
		j = (j + 1) & (s->cap - 1);
	s->slot[j] = ino;
	s->nr++;
	s->mode[s->list_nr] = mode;
	s->list[s->list_nr++] = ino;
	return 0;
}

int diff_inoset_init(struct diff_inoset *s, unsigned int searches)
{
	memset(s, 0, sizeof(*s));
	s->open = searches;
	if (pthread_mutex_init(&s->lock, NULL))
		return -ENOMEM;
	if (pthread_cond_init(&s->added, NULL)) {
		pthread_mutex_destroy(&s->lock);
		return -ENOMEM;
	}
	return 0;
}

int diff_inoset_add(struct diff_inoset *s, uint64_t ino, uint32_t mode)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = inoset_add(s, ino, mode);
	pthread_cond_broadcast(&s->added);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void diff_inoset_close(struct diff_inoset *s, int err)
{
	pthread_mutex_lock(&s->lock);
	s->open--;
	if (!s->err)
		s->err = err;
	pthread_cond_broadcast(&s->added);
	pthread_mutex_unlock(&s->lock);
}

int diff_inoset_next(struct diff_inoset *s, uint64_t *ino, uint32_t *mode)
{
	int ret = 1;

	pthread_mutex_lock(&s->lock);
	while (s->next >= s->list_nr && s->open && !s->err)
		pthread_cond_wait(&s->added, &s->lock);
	if (s->err) {
		ret = s->err;
	} else if (s->next >= s->list_nr) {
		ret = 0;
	} else {
		*ino = s->list[s->next];
		*mode = s->mode[s->next];
		s->next++;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void diff_inoset_free(struct diff_inoset *s)
{
	free(s->slot);
	free(s->list);
	free(s->mode);
	pthread_cond_destroy(&s->added);
	pthread_mutex_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}

struct touched {
	struct diff_inoset *set;
	uint64_t since;
	const struct diff_stop *stop;
};

/*
 * An inode item carries the transaction that last wrote it: one no newer
 * than the trees' parting is the common ancestor's, in both trees alike.
 */
static int add_touched(void *arg, const struct btrfs_ioctl_search_header *sh,
		       const uint8_t *item)
{
	struct touched *t = arg;

	if (diff_stopped(t->stop))
		return -ECANCELED;
	if (sh->type != BTRFS_INODE_ITEM_KEY ||
	    sh->objectid < BTRFS_FIRST_FREE_OBJECTID ||
	    sh->objectid > BTRFS_LAST_FREE_OBJECTID)
		return 0;
	if (sh->len < sizeof(struct btrfs_inode_item))
		return -EUCLEAN;
	if (le_get64(item + 8) <= t->since)
		return 0;
	return diff_inoset_add(t->set, sh->objectid, le_get32(item + 52));
}

int diff_items_touched(int fd, uint64_t since, uint64_t from, uint64_t to,
		       struct diff_inoset *set, const struct diff_stop *stop)
{
	struct btrfs_ioctl_search_key k = {
		.min_objectid = from,
		.max_objectid = to,
		.max_type = UINT8_MAX,
		.max_offset = UINT64_MAX,
	};
	struct touched t = { set, since, stop };
	struct tree_search ts;
	int ret = tree_search_init(&ts, DIFF_SEARCH_BUF);

	if (!ret)
		ret = tree_search_run(&ts, fd, &k, since, add_touched, &t);
	tree_search_release(&ts);
	return ret;
}

/* The first objectid at or after @ino that has an item; 0: none */
static int probe(int fd, uint64_t ino, uint64_t *found)
{
	struct btrfs_ioctl_search_args a;
	struct btrfs_ioctl_search_header sh;

	memset(&a.key, 0, sizeof(a.key));
	a.key.min_objectid = ino;
	a.key.max_objectid = BTRFS_LAST_FREE_OBJECTID;
	a.key.max_type = UINT8_MAX;
	a.key.max_offset = UINT64_MAX;
	a.key.max_transid = UINT64_MAX;
	a.key.nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &a) < 0)
		return -errno;
	*found = 0;
	if (a.key.nr_items) {
		memcpy(&sh, a.buf, sizeof(sh));
		*found = sh.objectid;
	}
	return 0;
}

/*
 * Inode numbers are given out in order: the highest is found by doubling,
 * then halving, each probe one descent of the tree.
 */
int diff_items_last_ino(int fd, uint64_t *ino)
{
	uint64_t lo = BTRFS_FIRST_FREE_OBJECTID, hi = lo + 1, at;
	int ret;

	for (;;) {
		ret = probe(fd, hi, &at);
		if (ret)
			return ret;
		if (!at)
			break;
		lo = at;
		if (at > BTRFS_LAST_FREE_OBJECTID / 2) {
			hi = BTRFS_LAST_FREE_OBJECTID + 1;
			break;
		}
		hi = at * 2;
	}
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		ret = probe(fd, mid, &at);
		if (ret)
			return ret;
		if (at)
			lo = at;
		else
			hi = mid;
	}
	*ino = lo;
	return 0;
}

static char *dup_name(const uint8_t *p, size_t len)
{
	char *s = malloc(len + 1);

	if (s) {
		memcpy(s, p, len);
		s[len] = 0;
	}
	return s;
}

static int add_ref(struct diff_inode *in, uint64_t dir, const uint8_t *name,
		   uint16_t len)
{
	struct diff_ref *r =
		array_grow(in->ref, &in->cap_refs, in->nr_refs, sizeof(*r));

	if (!r)
		return -ENOMEM;
	in->ref = r;
	r += in->nr_refs;
	r->dir = dir;
	r->len = len;
	r->name = dup_name(name, len);
	if (!r->name)
		return -ENOMEM;
	in->nr_refs++;
	return 0;
}

/* INODE_REF: entries of (index, name_len, name) under one directory */
static int parse_refs(struct diff_inode *in, uint64_t dir, const uint8_t *p,
		      uint32_t len)
{
	uint32_t pos = 0;

	while (pos + 10 <= len) {
		uint16_t nl = le_get16(p + pos + 8);
		int ret;

		if (pos + 10 + nl > len)
			return -EUCLEAN;
		ret = add_ref(in, dir, p + pos + 10, nl);
		if (ret)
			return ret;
		pos += 10 + nl;
	}
	return 0;
}

/* INODE_EXTREF: entries of (dir, index, name_len, name) */
static int parse_extrefs(struct diff_inode *in, const uint8_t *p, uint32_t len)
{
	uint32_t pos = 0;

	while (pos + 18 <= len) {
		uint16_t nl = le_get16(p + pos + 16);
		int ret;

		if (pos + 18 + nl > len)
			return -EUCLEAN;
		ret = add_ref(in, le_get64(p + pos), p + pos + 18, nl);
		if (ret)
			return ret;
		pos += 18 + nl;
	}
	return 0;
}

/* XATTR_ITEM: struct btrfs_dir_item entries, name then value */
static int parse_xattrs(struct diff_inode *in, const uint8_t *p, uint32_t len)
{
	uint32_t pos = 0;

	while (pos + sizeof(struct btrfs_dir_item) <= len) {
		const uint8_t *d = p + pos;
		uint16_t dl = le_get16(d + 25), nl = le_get16(d + 27);
		struct diff_xattr *x;

		if (pos + sizeof(struct btrfs_dir_item) + nl + dl > len)
			return -EUCLEAN;
		x = array_grow(in->xattr, &in->cap_xattrs, in->nr_xattrs,
			       sizeof(*x));
		if (!x)
			return -ENOMEM;
		in->xattr = x;
		x += in->nr_xattrs;
		x->name = malloc((size_t)nl + 1 + dl);
		if (!x->name)
			return -ENOMEM;
		memcpy(x->name, d + sizeof(struct btrfs_dir_item), nl);
		x->name[nl] = 0;
		x->name_len = nl;
		x->value = (uint8_t *)x->name + nl + 1;
		x->value_len = dl;
		memcpy(x->value, d + sizeof(struct btrfs_dir_item) + nl, dl);
		in->nr_xattrs++;
		pos += sizeof(struct btrfs_dir_item) + nl + dl;
	}
	return 0;
}

static int parse_dirent(struct diff_inode *in,
			const struct btrfs_ioctl_search_header *sh,
			const uint8_t *p)
{
	struct diff_dirent *d;
	uint16_t nl;

	if (sh->len < sizeof(struct btrfs_dir_item))
		return -EUCLEAN;
	nl = le_get16(p + 27);
	if (sizeof(struct btrfs_dir_item) + nl > sh->len)
		return -EUCLEAN;
	d = array_grow(in->dirent, &in->cap_dirents, in->nr_dirents,
		       sizeof(*d));
	if (!d)
		return -ENOMEM;
	in->dirent = d;
	if (in->names_len + nl > in->names_cap) {
		size_t cap = (in->names_cap + nl) * 2;
		char *n = realloc(in->names, cap);

		if (!n)
			return -ENOMEM;
		in->names = n;
		in->names_cap = cap;
	}
	d += in->nr_dirents;
	d->index = sh->offset;
	/* a subvolume's entry points at a ROOT_ITEM, no inode here */
	d->target = p[8] == BTRFS_INODE_ITEM_KEY ? le_get64(p) : 0;
	d->len = nl;
	d->name = in->names_len;
	memcpy(in->names + in->names_len, p + sizeof(struct btrfs_dir_item),
	       nl);
	in->names_len += nl;
	in->nr_dirents++;
	return 0;
}

static int parse_extent(struct diff_inode *in,
			const struct btrfs_ioctl_search_header *sh,
			const uint8_t *p)
{
	struct diff_extent *e;

	if (sh->len < 21)
		return -EUCLEAN;
	e = array_grow(in->extent, &in->cap_extents, in->nr_extents,
		       sizeof(*e));
	if (!e)
		return -ENOMEM;
	in->extent = e;
	e += in->nr_extents;
	memset(e, 0, sizeof(*e));
	e->raw = malloc(sh->len);
	if (!e->raw)
		return -ENOMEM;
	memcpy(e->raw, p, sh->len);
	e->raw_len = sh->len;
	e->offset = sh->offset;
	e->leaf_gen = sh->transid;
	e->gen = le_get64(p);
	e->ram_bytes = le_get64(p + 8);
	e->type = p[20];
	if (e->type != BTRFS_FILE_EXTENT_INLINE) {
		if (sh->len < 53)
			return -EUCLEAN;
		e->disk_bytenr = le_get64(p + 21);
		e->data_offset = le_get64(p + 37);
		e->num_bytes = le_get64(p + 45);
	}
	in->nr_extents++;
	return 0;
}

static int parse_inode_item(struct diff_inode *in,
			    const struct btrfs_ioctl_search_header *sh,
			    const uint8_t *p)
{
	if (sh->len < sizeof(in->item))
		return -EUCLEAN;
	memcpy(in->item, p, sizeof(in->item));
	in->present = true;
	in->gen = le_get64(p);
	in->size = le_get64(p + 16);
	in->nlink = le_get32(p + 40);
	in->uid = le_get32(p + 44);
	in->gid = le_get32(p + 48);
	in->mode = le_get32(p + 52);
	return 0;
}

static int read_item(void *arg, const struct btrfs_ioctl_search_header *sh,
		     const uint8_t *p)
{
	struct diff_inode *in = arg;

	if (sh->transid > in->max_leaf_gen)
		in->max_leaf_gen = sh->transid;
	switch (sh->type) {
	case BTRFS_INODE_ITEM_KEY:
		return parse_inode_item(in, sh, p);
	case BTRFS_INODE_REF_KEY:
		return parse_refs(in, sh->offset, p, sh->len);
	case BTRFS_INODE_EXTREF_KEY:
		return parse_extrefs(in, p, sh->len);
	case BTRFS_XATTR_ITEM_KEY:
		return parse_xattrs(in, p, sh->len);
	case BTRFS_DIR_INDEX_KEY:
		return parse_dirent(in, sh, p);
	case BTRFS_EXTENT_DATA_KEY:
		return parse_extent(in, sh, p);
	}
	return 0;
}

/*
 * Its inode item, names and xattrs, and with @whole its directory entries
 * and file extents too in the same search (DIR_ITEMs, which name what
 * DIR_INDEXes name, are skipped).
 */
int diff_inode_read(struct tree_search *ts, int fd, uint64_t ino, bool whole,
		    struct diff_inode *in)
{
	struct btrfs_ioctl_search_key k = {
		.min_objectid = ino,
		.max_objectid = ino,
		.max_type = whole ? UINT8_MAX : BTRFS_DIR_ITEM_KEY - 1,
		.max_offset = UINT64_MAX,
	};

	memset(in, 0, sizeof(*in));
	in->whole = whole;
	return tree_search_run(ts, fd, &k, 0, read_item, in);
}

/*
 * Its directory entries (DIR_INDEX: DIR_ITEMs name the same) and file
 * extents: a directory's or a large file's most items, read when needed.
 */
int diff_inode_read_rest(struct tree_search *ts, int fd, uint64_t ino,
			 struct diff_inode *in)
{
	if (in->whole)
		return 0;
	in->whole = true;
	struct btrfs_ioctl_search_key k = {
		.min_objectid = ino,
		.max_objectid = ino,
		.min_type = BTRFS_DIR_INDEX_KEY,
		.max_type = UINT8_MAX,
		.max_offset = UINT64_MAX,
	};

	return tree_search_run(ts, fd, &k, 0, read_item, in);
}

void diff_inode_free(struct diff_inode *in)
{
	size_t i;

	for (i = 0; i < in->nr_refs; i++)
		free(in->ref[i].name);
	for (i = 0; i < in->nr_xattrs; i++)
		free(in->xattr[i].name);
	for (i = 0; i < in->nr_extents; i++)
		free(in->extent[i].raw);
	free(in->ref);
	free(in->xattr);
	free(in->extent);
	free(in->dirent);
	free(in->names);
	memset(in, 0, sizeof(*in));
}

/* Where the kernel's send takes an extent item to end (btrfs_file_extent_end) */
uint64_t diff_extent_end(const struct diff_extent *e, uint32_t sectorsize)
{
	if (e->type == BTRFS_FILE_EXTENT_INLINE)
		return (e->offset + e->ram_bytes + sectorsize - 1) &
		       ~(uint64_t)(sectorsize - 1);
	return e->offset + e->num_bytes;
}
