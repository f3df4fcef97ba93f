// SPDX-License-Identifier: GPL-2.0
/*
 * The extent map of a file, from the best source available:
 *
 *   1. BTRFS_IOC_TREE_SEARCH_V2 over the file's EXTENT_DATA items (btrfs,
 *      CAP_SYS_ADMIN): every field of every file extent item, exact.
 *   2. FIEMAP: kinds exact, "encoded" without the algorithm.
 *   3. SEEK_DATA / SEEK_HOLE: data and holes only (tmpfs, ...).
 *   4. One data range covering the file.
 *
 * Totals follow compsize (kdave/btrfs-compsize, 1.5): per compression type,
 * with prealloc as its own type; disk and uncompressed bytes once per
 * distinct disk_bytenr, referenced bytes per reference; inline extents add
 * their item data size, ram_bytes and ram_bytes every time; holes nothing.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/kernel.h"
#include "fs/extents.h"

/* The search buffer: any item fits (nodesize <= 64 KiB). */
/*
 * The kernel stops a search early only when the next item does not fit in
 * the buffer, and no item is larger than a 64 KiB leaf: a search that
 * leaves SEARCH_ITEM_MAX free was complete, and needs no second call to
 * find out.
 */
#define SEARCH_ITEM_MAX (64 * 1024 + sizeof(struct btrfs_ioctl_search_header))
#define SEARCH_BUF_SIZE (128 * 1024)
/* FIEMAP extents asked for per call. */
#define FIEMAP_BATCH 256
/* Inline items: the data starts where disk_bytenr would be. */
#define INLINE_HEADER_SIZE offsetof(struct btrfs_file_extent_item, disk_bytenr)

const char *extent_kind_name(enum extent_kind kind)
{
	switch (kind) {
	case EXTENT_HOLE:
		return "hole";
	case EXTENT_REGULAR:
		return "regular";
	case EXTENT_PREALLOC:
		return "prealloc";
	case EXTENT_INLINE:
		return "inline";
	}
	return "?";
}

const char *extent_source_name(enum extent_source source)
{
	switch (source) {
	case EXTENT_SOURCE_TREE_SEARCH:
		return "tree-search";
	case EXTENT_SOURCE_FIEMAP:
		return "fiemap";
	case EXTENT_SOURCE_SEEK:
		return "seek";
	case EXTENT_SOURCE_WHOLE:
		return "whole";
	}
	return "?";
}

int extent_encoded_io_compression(int compression, unsigned int sectorsize)
{
	unsigned int shift = 0;

	switch (compression) {
	case BTRFS_COMPRESS_ZLIB:
		return BTRFS_ENCODED_IO_COMPRESSION_ZLIB;
	case BTRFS_COMPRESS_ZSTD:
		return BTRFS_ENCODED_IO_COMPRESSION_ZSTD;
	case BTRFS_COMPRESS_LZO:
		break;
	default:
		return -1;
	}
	/* LZO_4K .. LZO_64K: the segment size is the sector size. */
	if (sectorsize < 4096 || (sectorsize & (sectorsize - 1)))
		return -1;
	while ((4096U << shift) < sectorsize)
		shift++;
	if (BTRFS_ENCODED_IO_COMPRESSION_LZO_4K + shift >
	    BTRFS_ENCODED_IO_COMPRESSION_LZO_64K)
		return -1;
	return BTRFS_ENCODED_IO_COMPRESSION_LZO_4K + shift;
}

/* ---- the map: appending ranges, holes in the gaps ---- */

static uint64_t map_end(const struct extent_map *map)
{
	const struct file_extent *last;

	if (!map->nr)
		return 0;
	last = &map->ext[map->nr - 1];
	return last->offset + last->len;
}

static int map_push(struct extent_map *map, const struct file_extent *fe)
{
	struct file_extent *ext;
	size_t cap;

	if (map->nr == map->cap) {
		cap = map->cap ? map->cap * 2 : 16;
		ext = realloc(map->ext, cap * sizeof(*ext));
		if (!ext)
			return -ENOMEM;
		map->ext = ext;
		map->cap = cap;
	}
	map->ext[map->nr++] = *fe;
	return 0;
}

static int map_add_hole(struct extent_map *map, uint64_t offset, uint64_t len)
{
	struct file_extent hole = {
		.offset = offset,
		.len = len,
		.kind = EXTENT_HOLE,
		.compression = BTRFS_COMPRESS_NONE,
	};
	struct file_extent *last;

	if (!len)
		return 0;
	last = map->nr ? &map->ext[map->nr - 1] : NULL;
	if (last && last->kind == EXTENT_HOLE &&
	    last->offset + last->len == offset) {
		last->len += len;
		return 0;
	}
	return map_push(map, &hole);
}

int extent_map_add(struct extent_map *map, const struct file_extent *fe)
{
	uint64_t end = map_end(map);
	uint64_t gap_end, len;
	int ret;

	if (fe->offset < end)
		return -EINVAL;
	gap_end = fe->offset < map->size ? fe->offset : map->size;
	if (gap_end > end) {
		ret = map_add_hole(map, end, gap_end - end);
		if (ret)
			return ret;
	}
	if (fe->kind == EXTENT_HOLE) {
		/* holes only within [0, size), with or without hole items */
		if (fe->offset >= map->size)
			return 0;
		len = map->size - fe->offset;
		return map_add_hole(map, fe->offset,
				    fe->len < len ? fe->len : len);
	}
	if (!fe->len)
		return 0;
	return map_push(map, fe);
}

int extent_map_finish(struct extent_map *map)
{
	uint64_t end = map_end(map);

	if (end >= map->size)
		return 0;
	return map_add_hole(map, end, map->size - end);
}

void extent_map_release(struct extent_map *map)
{
	free(map->ext);
	map->ext = NULL;
	map->nr = 0;
	map->cap = 0;
}

/* ---- source 1: btrfs tree search ---- */

int extent_item_parse(const void *item, uint32_t len, uint64_t file_offset,
		      struct file_extent *fe)
{
	struct btrfs_file_extent_item ei;

	if (len < INLINE_HEADER_SIZE)
		return -EUCLEAN;
	memset(&ei, 0, sizeof(ei));
	memcpy(&ei, item, len < sizeof(ei) ? len : sizeof(ei));
	memset(fe, 0, sizeof(*fe));
	fe->offset = file_offset;
	fe->ram_bytes = le64toh(ei.ram_bytes);
	fe->compression = ei.compression;

	if (ei.type == BTRFS_FILE_EXTENT_INLINE) {
		fe->kind = EXTENT_INLINE;
		fe->len = fe->ram_bytes;
		fe->disk_bytes = len - INLINE_HEADER_SIZE;
		return 0;
	}
	if (ei.type != BTRFS_FILE_EXTENT_REG &&
	    ei.type != BTRFS_FILE_EXTENT_PREALLOC)
		return -EUCLEAN;
	if (len != sizeof(ei))
		return -EUCLEAN;

	fe->disk_bytenr = le64toh(ei.disk_bytenr);
	fe->disk_bytes = le64toh(ei.disk_num_bytes);
	fe->extent_offset = le64toh(ei.offset);
	fe->len = le64toh(ei.num_bytes);
	if (!fe->disk_bytenr)
		fe->kind = EXTENT_HOLE; /* explicit hole item (no NO_HOLES) */
	else if (ei.type == BTRFS_FILE_EXTENT_PREALLOC)
		fe->kind = EXTENT_PREALLOC;
	else
		fe->kind = EXTENT_REGULAR;
	return 0;
}

static void search_key_init(struct btrfs_ioctl_search_key *key, uint64_t ino,
			    uint64_t min_offset)
{
	memset(key, 0, sizeof(*key));
	key->tree_id = 0; /* the root of the fd */
	key->min_objectid = ino;
	key->max_objectid = ino;
	key->min_type = BTRFS_EXTENT_DATA_KEY;
	key->max_type = BTRFS_EXTENT_DATA_KEY;
	key->min_offset = min_offset;
	key->max_offset = UINT64_MAX;
	key->min_transid = 0;
	key->max_transid = UINT64_MAX;
	key->nr_items = UINT32_MAX;
}

/*
 * Add the items of one search result to @map. Sets *@next to the offset to
 * search from next, or returns 1 when the search saw the last item.
 */
static int search_parse(struct btrfs_ioctl_search_args_v2 *args, uint64_t ino,
			struct extent_map *map, uint64_t *next)
{
	struct btrfs_ioctl_search_header sh;
	struct file_extent fe;
	size_t pos = 0;
	uint32_t i;
	int ret;

	for (i = 0; i < args->key.nr_items; i++) {
		if (pos + sizeof(sh) > args->buf_size)
			return -EUCLEAN;
		memcpy(&sh, args->buf + pos, sizeof(sh));
		pos += sizeof(sh);
		if (pos + sh.len > args->buf_size)
			return -EUCLEAN;
		if (sh.objectid != ino || sh.type != BTRFS_EXTENT_DATA_KEY)
			goto next;
		ret = extent_item_parse(args->buf + pos, sh.len, sh.offset,
					&fe);
		if (ret)
			return ret;
		ret = extent_map_add(map, &fe);
		if (ret)
			return ret;
next:
		pos += sh.len;
		if (sh.offset == UINT64_MAX)
			return 1;
		*next = sh.offset + 1;
	}
	return args->buf_size - pos >= SEARCH_ITEM_MAX;
}

static int map_tree_search(int fd, uint64_t ino, struct extent_map *map)
{
	struct btrfs_ioctl_search_args_v2 *args;
	uint64_t next = 0;
	int ret;

	args = malloc(sizeof(*args) + SEARCH_BUF_SIZE);
	if (!args)
		return -ENOMEM;
	for (;;) {
		search_key_init(&args->key, ino, next);
		args->buf_size = SEARCH_BUF_SIZE;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0) {
			ret = -errno;
			goto out;
		}
		if (!args->key.nr_items)
			break;
		ret = search_parse(args, ino, map, &next);
		if (ret < 0)
			goto out;
		if (ret == 1)
			break;
	}
	ret = 0;
out:
	free(args);
	return ret;
}

/* ---- source 2: FIEMAP ---- */

static void fiemap_to_extent(const struct fiemap_extent *fx, uint64_t size,
			     bool btrfs, struct file_extent *fe)
{
	memset(fe, 0, sizeof(*fe));
	fe->offset = fx->fe_logical;
	fe->len = fx->fe_length;
	fe->disk_bytenr = fx->fe_physical;
	/* Unknown for encoded extents: the logical length is an upper bound. */
	fe->disk_bytes = fx->fe_length;
	fe->ram_bytes = fx->fe_length;
	fe->kind = EXTENT_REGULAR;
	fe->compression = BTRFS_COMPRESS_NONE;
	if (fx->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
		fe->kind = EXTENT_PREALLOC;
	if (fx->fe_flags & FIEMAP_EXTENT_DATA_INLINE) {
		fe->kind = EXTENT_INLINE;
		if (fe->offset < size && fe->offset + fe->len > size)
			fe->len = size - fe->offset;
		fe->ram_bytes = fe->len;
		fe->disk_bytenr = 0;
	}
	if (fx->fe_flags & FIEMAP_EXTENT_ENCODED)
		fe->compression = ENCIO_COMPRESS_UNKNOWN;
	else if (btrfs && (fx->fe_flags & FIEMAP_EXTENT_DELALLOC))
		fe->compression = ENCIO_COMPRESS_UNKNOWN; /* not decided yet */
	if (fx->fe_flags & (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN))
		fe->disk_bytenr = 0;
}

/* One FIEMAP call from @start; *@done when the last extent was seen. */
static int fiemap_batch(int fd, struct fiemap *fm, struct extent_map *map,
			bool btrfs, uint64_t *start, bool *done)
{
	struct file_extent fe;
	uint32_t i;
	int ret;

	memset(fm, 0, sizeof(*fm));
	fm->fm_start = *start;
	fm->fm_length = UINT64_MAX - *start;
	fm->fm_extent_count = FIEMAP_BATCH;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0)
		return -errno;
	*done = fm->fm_mapped_extents == 0;
	for (i = 0; i < fm->fm_mapped_extents; i++) {
		const struct fiemap_extent *fx = &fm->fm_extents[i];
		uint64_t end = map_end(map);

		fiemap_to_extent(fx, map->size, btrfs, &fe);
		/* Merged or overlapping reports: keep only what is new. */
		if (fe.offset < end) {
			if (fe.offset + fe.len <= end)
				continue;
			fe.len -= end - fe.offset;
			fe.offset = end;
		}
		ret = extent_map_add(map, &fe);
		if (ret)
			return ret;
		*start = fe.offset + fe.len;
		if (fx->fe_flags & FIEMAP_EXTENT_LAST)
			*done = true;
	}
	return 0;
}

static int map_fiemap(int fd, bool btrfs, struct extent_map *map)
{
	struct fiemap *fm;
	uint64_t start = 0;
	bool done = false;
	int ret = 0;

	fm = malloc(sizeof(*fm) + FIEMAP_BATCH * sizeof(struct fiemap_extent));
	if (!fm)
		return -ENOMEM;
	while (!done && !ret)
		ret = fiemap_batch(fd, fm, map, btrfs, &start, &done);
	free(fm);
	return ret;
}

/* ---- sources 3 and 4: SEEK_DATA / SEEK_HOLE, or one range ---- */

static int map_seek(int fd, int compression, struct extent_map *map)
{
	struct file_extent fe = {
		.kind = EXTENT_REGULAR,
		.compression = compression,
	};
	off_t data, hole = 0;
	int ret;

	while ((uint64_t)hole < map->size) {
		data = lseek(fd, hole, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : -errno;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole <= data)
			return -EIO;
		fe.offset = data;
		fe.len = hole - data;
		fe.disk_bytes = fe.len;
		fe.ram_bytes = fe.len;
		ret = extent_map_add(map, &fe);
		if (ret)
			return ret;
	}
	return 0;
}

static int map_whole(int compression, struct extent_map *map)
{
	struct file_extent fe = {
		.len = map->size,
		.disk_bytes = map->size,
		.ram_bytes = map->size,
		.kind = EXTENT_REGULAR,
		.compression = compression,
	};

	return extent_map_add(map, &fe);
}

/* Errors after which a lesser source is tried. */
static bool try_next_source(int ret)
{
	return ret == -ENOTTY || ret == -EOPNOTSUPP || ret == -EPERM ||
	       ret == -EACCES || ret == -EINVAL || ret == -ENOSYS;
}

static void map_reset(struct extent_map *map, enum extent_source source)
{
	map->nr = 0;
	map->source = source;
}

/*
 * Data not yet written back has no file extent item, and would look like a
 * hole to the tree search: flush it first. fdatasync costs about a
 * microsecond on a file with nothing to write back (measured on a tree of
 * 57742 files), FIEMAP_FLAG_SYNC about ten; neither can be skipped on a
 * read-only subvolume, where a file opened for writing before the flag was
 * set can still be written.
 */
static int flush_delalloc(int fd)
{
	if (fdatasync(fd) == 0 || errno == EROFS || errno == EINVAL ||
	    errno == EBADF)
		return 0;
	return -errno;
}

static int map_build(int fd, const struct stat *st, bool btrfs,
		     struct extent_map *map)
{
	/* Only btrfs compresses: elsewhere, plain data is uncompressed. */
	int plain = btrfs ? ENCIO_COMPRESS_UNKNOWN : BTRFS_COMPRESS_NONE;
	int ret;

	if (btrfs) {
		ret = flush_delalloc(fd);
		if (ret)
			return ret;
		map_reset(map, EXTENT_SOURCE_TREE_SEARCH);
		ret = map_tree_search(fd, st->st_ino, map);
		if (!ret)
			return extent_map_finish(map);
		if (!try_next_source(ret))
			return ret;
	}
	map_reset(map, EXTENT_SOURCE_FIEMAP);
	ret = map_fiemap(fd, btrfs, map);
	if (!ret)
		return extent_map_finish(map);
	if (!try_next_source(ret))
		return ret;

	map_reset(map, EXTENT_SOURCE_SEEK);
	ret = map_seek(fd, plain, map);
	if (!ret)
		return extent_map_finish(map);
	if (!try_next_source(ret))
		return ret;

	map_reset(map, EXTENT_SOURCE_WHOLE);
	return map_whole(plain, map);
}

int extent_map_build_stat(int fd, const struct stat *st, long fs_type,
			  struct extent_map *map)
{
	int ret;

	memset(map, 0, sizeof(*map));
	if (!S_ISREG(st->st_mode))
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	map->size = st->st_size;
	ret = map_build(fd, st, fs_type == BTRFS_SUPER_MAGIC, map);
	if (ret)
		extent_map_release(map);
	return ret;
}

int extent_map_build(int fd, struct extent_map *map)
{
	struct statfs sfs;
	struct stat st;

	memset(map, 0, sizeof(*map));
	if (fstat(fd, &st) < 0)
		return -errno;
	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	return extent_map_build_stat(fd, &st, sfs.f_type, map);
}

/*
 * Whether the superblock of @fd's mount is read-only, from the super
 * options of its line in /proc/self/mountinfo ("... - TYPE SOURCE ro,...").
 * statfs' ST_RDONLY is also set by a read-only bind mount of a writable
 * file system, which other mounts can write through.
 */
static bool superblock_read_only(int fd)
{
	unsigned long long mnt_id;
	struct statx stx;
	bool ro = false;
	char *line = NULL, *opts;
	size_t cap = 0;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return false;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%llu", &mnt_id) != 1 ||
		    mnt_id != stx.stx_mnt_id)
			continue;
		opts = strstr(line, " - ");
		/* skip " - ", the type and the source */
		opts = opts ? strchr(opts + 3, ' ') : NULL;
		opts = opts ? strchr(opts + 1, ' ') : NULL;
		ro = opts && !strncmp(opts + 1, "ro", 2) &&
		     (opts[3] == ',' || opts[3] == '\n' || !opts[3]);
		break;
	}
	free(line);
	fclose(f);
	return ro;
}

int extent_fs_kind(int fd, long *fs_type, bool *frozen)
{
	struct btrfs_ioctl_get_subvol_info_args info;
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return -errno;
	*fs_type = sfs.f_type;
	*frozen = (sfs.f_flags & ST_RDONLY) && superblock_read_only(fd);
	/*
	 * Any file of the subvolume will do, unlike SUBVOL_GETFLAGS; success
	 * can come back as 1 (a tree search's "not found exactly").
	 */
	if (*frozen || sfs.f_type != BTRFS_SUPER_MAGIC ||
	    ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, &info) < 0 ||
	    !(info.flags & BTRFS_ROOT_SUBVOL_RDONLY))
		return 0;
	*frozen = true;
	return 0;
}

/*
 * Open @name beneath @dirfd as openat(2) would, for a regular file only
 * (its stat in @st when not NULL): -EISDIR for a directory, -EINVAL for
 * anything else. O_NONBLOCK while finding out: a FIFO must not make the
 * open wait for its other end (its -ENXIO for a writer without a reader is
 * a FIFO too). Cleared again: io_uring would hand EAGAIN back for reads of
 * an O_NONBLOCK file. A lease someone holds makes an O_NONBLOCK open fail
 * with EWOULDBLOCK where a blocking one waits for it: then it waits.
 */
int open_regular_at(int dirfd, const char *name, int flags, mode_t mode,
		    struct stat *st)
{
	int fd = openat(dirfd, name, flags | O_NONBLOCK | O_CLOEXEC, mode);
	struct stat own;
	int ret;

	if (!st)
		st = &own;
	if (fd < 0 && errno == EWOULDBLOCK)
		fd = openat(dirfd, name, flags | O_CLOEXEC, mode);
	if (fd < 0) {
		ret = -errno;
		if (ret == -ENXIO &&
		    !fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISFIFO(st->st_mode))
			ret = -EINVAL;
		return ret;
	}
	if (fstat(fd, st))
		ret = -errno;
	else if (!S_ISREG(st->st_mode))
		ret = S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	else if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK))
		ret = -errno;
	else
		return fd;
	close(fd);
	return ret;
}

int open_regular(const char *path, int flags, mode_t mode, struct stat *st)
{
	return open_regular_at(AT_FDCWD, path, flags, mode, st);
}

/*
 * Pseudo file systems give their files size 0 and make up the content as
 * it is read: what cp copies of them is what reads return up to the end.
 */
bool fs_files_sizeless(long fs_type)
{
	switch (fs_type) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
		return true;
	}
	return false;
}

uint64_t extent_map_data_end(const struct extent_map *map)
{
	uint64_t end = 0;
	size_t i;

	for (i = 0; i < map->nr; i++) {
		const struct file_extent *fe = &map->ext[i];

		if (fe->offset >= map->size)
			break;
		if (fe->kind == EXTENT_REGULAR || fe->kind == EXTENT_INLINE)
			end = fe->offset + fe->len;
	}
	return end < map->size ? end : map->size;
}

/* ---- totals ---- */

void extent_totals_init(struct extent_totals *totals)
{
	memset(totals, 0, sizeof(*totals));
}

void extent_totals_release(struct extent_totals *totals)
{
	free(totals->seen);
	totals->seen = NULL;
	totals->nr_seen = 0;
	totals->cap_seen = 0;
}

static size_t seen_slot(uint64_t key, size_t cap)
{
	/* Fibonacci hashing of the 4 KiB block number; cap is a power of 2. */
	return (size_t)(((key >> 12) * 0x9E3779B97F4A7C15ULL) >> 20) &
	       (cap - 1);
}

static void seen_put(uint64_t *table, size_t cap, uint64_t key)
{
	size_t i = seen_slot(key, cap);

	while (table[i])
		i = (i + 1) & (cap - 1);
	table[i] = key;
}

static int seen_grow(struct extent_totals *totals)
{
	size_t cap = totals->cap_seen ? totals->cap_seen * 2 : 1024;
	uint64_t *table;
	size_t i;

	table = calloc(cap, sizeof(*table));
	if (!table)
		return -ENOMEM;
	for (i = 0; i < totals->cap_seen; i++)
		if (totals->seen[i])
			seen_put(table, cap, totals->seen[i]);
	free(totals->seen);
	totals->seen = table;
	totals->cap_seen = cap;
	return 0;
}

/* Insert @bytenr (never 0); returns 1 if new, 0 if seen before, -errno. */
static int seen_insert(struct extent_totals *totals, uint64_t bytenr)
{
	size_t i;
	int ret;

	if ((totals->nr_seen + 1) * 2 > totals->cap_seen) {
		ret = seen_grow(totals);
		if (ret)
			return ret;
	}
	i = seen_slot(bytenr, totals->cap_seen);
	while (totals->seen[i]) {
		if (totals->seen[i] == bytenr)
			return 0;
		i = (i + 1) & (totals->cap_seen - 1);
	}
	totals->seen[i] = bytenr;
	totals->nr_seen++;
	return 1;
}

static struct extent_totals_row *totals_row(struct extent_totals *totals,
					    const struct file_extent *fe)
{
	if (fe->kind == EXTENT_PREALLOC)
		return &totals->prealloc;
	if (fe->compression >= 0 && fe->compression <= BTRFS_COMPRESS_ZSTD)
		return &totals->by_type[fe->compression];
	return &totals->unknown;
}

static void row_add(struct extent_totals_row *row, uint64_t disk,
		    uint64_t uncompressed, uint64_t referenced)
{
	row->disk += disk;
	row->uncompressed += uncompressed;
	row->referenced += referenced;
}

static int totals_add_one(struct extent_totals *totals,
			  const struct file_extent *fe)
{
	struct extent_totals_row *row = totals_row(totals, fe);
	int ret;

	switch (fe->kind) {
	case EXTENT_HOLE:
		return 0;
	case EXTENT_INLINE:
		row_add(row, fe->disk_bytes, fe->ram_bytes, fe->ram_bytes);
		row_add(&totals->all, fe->disk_bytes, fe->ram_bytes,
			fe->ram_bytes);
		totals->nr_inline++;
		return 0;
	case EXTENT_REGULAR:
	case EXTENT_PREALLOC:
		break;
	}
	ret = fe->disk_bytenr ? seen_insert(totals, fe->disk_bytenr) : 1;
	if (ret < 0)
		return ret;
	if (ret) {
		row_add(row, fe->disk_bytes, fe->ram_bytes, 0);
		row_add(&totals->all, fe->disk_bytes, fe->ram_bytes, 0);
		totals->nr_extents++;
	}
	row_add(row, 0, 0, fe->len);
	row_add(&totals->all, 0, 0, fe->len);
	totals->nr_refs++;
	return 0;
}

int extent_totals_add(struct extent_totals *totals,
		      const struct extent_map *map)
{
	size_t i;
	int ret;

	totals->nr_files++;
	for (i = 0; i < map->nr; i++) {
		ret = totals_add_one(totals, &map->ext[i]);
		if (ret)
			return ret;
	}
	return 0;
}
