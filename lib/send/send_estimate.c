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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/kernel.h"
#include "base/le_bytes.h"
#include "fs/tree_search.h"
#include "send/send.h"
#include "send/send_internal.h"

#define ESTIMATE_BUF (256 * 1024)
/* a command's header, and a TLV's header */
#define CMD 10u
#define TLV 4u

struct est_inode {
	uint64_t ino; /* 0: a free slot */
	uint64_t parent;
	uint64_t fixed;	   /* bytes of its commands but their paths */
	uint32_t name_len; /* of its first name */
	uint32_t paths;	   /* paths in its commands */
	int64_t plen;	   /* its path's length; -1: not found yet */
};

struct est_table {
	struct est_inode *slot;
	size_t cap, nr;
	uint64_t *extents; /* disk_bytenr + 1 of extents seen; 0: free */
	size_t ext_cap, ext_nr;
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

/*
 * Whether the range @offset of the extent at @bytenr was seen before (and
 * now it is): a reflink or a snapshot refers to the same range again, the
 * two parts of an extent overwritten in its middle to two ranges, and only
 * the first is a CLONE. An estimate: two ranges may hash alike.
 */
static int extent_seen(struct est_table *t, uint64_t bytenr, uint64_t offset)
{
	uint64_t key = (hash64(bytenr) ^ hash64(offset + 1)) | 1,
		 *old = t->extents;
	size_t j, i, cap = t->ext_cap;

	if (t->ext_nr * 2 >= t->ext_cap) {
		t->ext_cap = cap ? cap * 2 : 4096;
		t->extents = calloc(t->ext_cap, sizeof(*t->extents));
		if (!t->extents) {
			t->extents = old;
			t->ext_cap = cap;
			return -ENOMEM;
		}
		for (i = 0; i < cap; i++) {
			if (!old[i])
				continue;
			for (j = hash64(old[i]) & (t->ext_cap - 1);
			     t->extents[j]; j = (j + 1) & (t->ext_cap - 1))
				;
			t->extents[j] = old[i];
		}
		free(old);
	}
	for (j = hash64(key) & (t->ext_cap - 1); t->extents[j];
	     j = (j + 1) & (t->ext_cap - 1))
		if (t->extents[j] == key)
			return 1;
	t->extents[j] = key;
	t->ext_nr++;
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

static int count_extent(struct est_table *t, struct est_inode *in,
			const struct file_extent *fe, uint32_t write_max)
{
	int seen;

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
		seen = extent_seen(t, fe->disk_bytenr, fe->extent_offset);
		if (seen < 0)
			return seen;
		if (seen) {
			/* CLONE: the file's and its source's paths */
			in->fixed += CMD + 2 * TLV + 3 * (TLV + 8) + TLV + 16 +
				     TLV + 8;
			in->paths += 2;
			return 0;
		}
		break;
	}
	if (fe->compression && fe->len >= fe->disk_bytes) {
		/* ENCODED_WRITE of the extent's bytes on disk */
		in->fixed += CMD + TLV + 4 * (TLV + 8) + TLV + 4 + 2 +
			     fe->disk_bytes;
		in->paths++;
		return 0;
	}
	/* WRITEs of write_max bytes at most */
	in->fixed += fe->len + (fe->len + write_max - 1) / write_max *
				       (CMD + TLV + TLV + 8 + 2);
	in->paths += (fe->len + write_max - 1) / write_max;
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
 * One tree's stream, added to est->sum: a subvolume's from its items; a
 * directory in one, or a tree elsewhere, whose items no search can tell
 * from the rest, counted by the caller's est->count (-n's walk).
 */
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
	ret = estimate_search(est, &t, ts);
	/* its SUBVOL or SNAPSHOT and its END */
	if (!ret)
		est->sum += table_total(&t) + 2 * 128;
	free(t.slot);
	free(t.extents);
	close(est->root_fd);
	est->root_fd = -1;
	return ret;
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
	for (i = 0; !ret && i < est->nr; i++)
		ret = estimate_root(est, est->roots[i], &ts);
	if (!ret)
		__atomic_store_n(&est->bytes, est->sum ?: 1, __ATOMIC_RELEASE);
	est->err = ret;
	tree_search_release(&ts);
	return NULL;
}

int send_estimate_start(struct send_estimate *est, const char *const *roots,
			size_t nr, uint64_t since, uint32_t write_max,
			send_count_fn count, void *count_arg)
{
	memset(est, 0, sizeof(*est));
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
