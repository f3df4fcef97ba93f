// SPDX-License-Identifier: GPL-2.0
/*
 * Metadata read ahead of a walk.
 *
 * A walk of a cold tree stops at every tree block it needs: a directory's
 * entries, each entry's inode, its extents. Each stop is one read from the
 * device, one at a time, and while the walking thread waits the rest of
 * the pipeline often has nothing to do (measured on a 62,710-file tree
 * copied from a loopback image: 4,600 such waits in the walker). A tree
 * search over the whole subvolume reads the same blocks in key order, one
 * thread doing nothing else, and costs little CPU: the items it copies out
 * are thrown away. The walk then finds them in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"
#include "prefetch.h"

#define PREFETCH_BUF_SIZE (64 * 1024)

static bool prefetch_stopped(struct meta_prefetch *p)
{
	return __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
}

/* Wait while the reading is far enough ahead of the walk. */
static bool prefetch_throttle(struct meta_prefetch *p)
{
	const struct timespec nap = { 0, 2000000 };

	while (p->inodes > __atomic_load_n(p->walked, __ATOMIC_RELAXED) -
				   p->walked_base + PREFETCH_LEAD_INODES) {
		if (prefetch_stopped(p))
			return false;
		nanosleep(&nap, NULL);
	}
	return !prefetch_stopped(p);
}

/*
 * Count the inode items among what one search returned and move the
 * search key past the last item. Returns false at the end of the tree.
 */
static bool prefetch_advance(struct meta_prefetch *p,
			     struct btrfs_ioctl_search_args_v2 *args)
{
	struct btrfs_ioctl_search_key *key = &args->key;
	struct btrfs_ioctl_search_header sh;
	size_t pos = 0;
	uint32_t i;

	for (i = 0; i < key->nr_items; i++) {
		memcpy(&sh, (char *)args->buf + pos, sizeof(sh));
		pos += sizeof(sh) + sh.len;
		if (sh.type == BTRFS_INODE_ITEM_KEY)
			p->inodes++;
	}
	/* The next key after the last one returned, in key order. */
	key->min_objectid = sh.objectid;
	key->min_type = sh.type;
	key->min_offset = sh.offset;
	if (key->min_offset < UINT64_MAX) {
		key->min_offset++;
		return true;
	}
	key->min_offset = 0;
	if (key->min_type < UINT8_MAX) {
		key->min_type++;
		return true;
	}
	key->min_type = 0;
	return key->min_objectid++ < UINT64_MAX;
}

static void *prefetch_thread(void *arg)
{
	struct meta_prefetch *p = arg;
	struct btrfs_ioctl_search_args_v2 *args;

	args = calloc(1, sizeof(*args) + PREFETCH_BUF_SIZE);
	if (!args)
		return NULL;
	/* tree_id 0: the subvolume of the fd; every key of it. */
	args->key.max_objectid = UINT64_MAX;
	args->key.max_type = UINT8_MAX;
	args->key.max_offset = UINT64_MAX;
	args->key.max_transid = UINT64_MAX;
	while (prefetch_throttle(p)) {
		args->key.nr_items = UINT32_MAX;
		args->buf_size = PREFETCH_BUF_SIZE;
		if (ioctl(p->fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0 ||
		    !args->key.nr_items || !prefetch_advance(p, args))
			break;
	}
	free(args);
	close(p->fd);
	return NULL;
}

void meta_prefetch_start(struct meta_prefetch *p, int dir_fd, const char *path,
			 const struct stat *st, const uint64_t *walked)
{
	memset(p, 0, sizeof(*p));
	if (!S_ISDIR(st->st_mode) || st->st_ino != BTRFS_FIRST_FREE_OBJECTID)
		return;
	p->fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->fd < 0)
		return;
	p->walked = walked;
	p->walked_base = *walked;
	/* A hint only: without the thread the walk goes on as before. */
	if (pthread_create(&p->thread, NULL, prefetch_thread, p)) {
		close(p->fd);
		return;
	}
	p->running = true;
}

void meta_prefetch_stop(struct meta_prefetch *p)
{
	if (!p->running)
		return;
	__atomic_store_n(&p->stop, true, __ATOMIC_RELEASE);
	pthread_join(p->thread, NULL);
	p->running = false;
}
