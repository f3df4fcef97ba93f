/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The extent map of a file: data, holes, prealloc and inline ranges and the
 * compression of each, found without reading file data.
 */
#ifndef ENCIO_EXTENTS_H
#define ENCIO_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

enum extent_kind {
	EXTENT_HOLE,
	EXTENT_REGULAR,
	EXTENT_PREALLOC,
	EXTENT_INLINE,
};

/* Where the map came from, best first. */
enum extent_source {
	EXTENT_SOURCE_TREE_SEARCH, /* btrfs tree search: exact, needs CAP_SYS_ADMIN */
	EXTENT_SOURCE_FIEMAP, /* kinds exact, compression "unknown" */
	EXTENT_SOURCE_SEEK,   /* SEEK_DATA/SEEK_HOLE: data and holes only */
	EXTENT_SOURCE_WHOLE,  /* nothing known: one data range */
};

/*
 * One range of the file. For tree search maps the values are the file extent
 * item's: @len is its num_bytes, which for the last extent of a file is
 * rounded up to the sector size and may reach past EOF; consumers clip
 * against extent_map.size. Inline ranges cover ram_bytes from offset 0.
 */
struct file_extent {
	uint64_t offset;	/* file offset of the range */
	uint64_t len;		/* bytes of the file the range covers */
	uint64_t disk_bytenr;	/* extent's disk address, 0 if unknown/none */
	uint64_t disk_bytes;	/* bytes on disk (inline: inline data bytes) */
	uint64_t ram_bytes;	/* unencoded size of the whole extent */
	uint64_t extent_offset; /* start of the range inside the extent */
	enum extent_kind kind;
	int compression; /* BTRFS_COMPRESS_*, ENCIO_COMPRESS_UNKNOWN */
};

struct extent_map {
	struct file_extent *ext; /* sorted by offset, holes included */
	size_t nr;
	size_t cap;
	uint64_t size; /* i_size when mapped */
	enum extent_source source;
};

/*
 * Map the open file @fd. Ranges cover [0, size) without gaps (holes are
 * listed), and prealloc ranges past EOF follow. Returns 0 or -errno.
 */
int extent_map_build(int fd, struct extent_map *map);

/*
 * The same for a caller that has already stat'ed the file and its
 * filesystem (@fs_type: statfs f_type), which saves two syscalls a file.
 * On btrfs the file's data awaiting writeback is always written back first:
 * no kind of filesystem or subvolume rules it out (a file opened for writing
 * before its subvolume was made read-only can still be written).
 */
int extent_map_build_stat(int fd, const struct stat *st, long fs_type,
			  struct extent_map *map);

/*
 * The file system type of @fd (statfs f_type), and whether the tree it is
 * in is frozen: a read-only btrfs subvolume or a read-only superblock, not
 * a read-only bind mount of a writable file system. Frozen says no new
 * write can start; data written before the subvolume was made read-only
 * may still wait for writeback, without extent items (a mapping flushes
 * each file; what reads the tree's items without opening the files must
 * syncfs first). 0 or -errno.
 */
int extent_fs_kind(int fd, long *fs_type, bool *frozen);
/*
 * open(2) / openat(2) of a regular file only, without waiting on a FIFO:
 * -EISDIR for a directory, -EINVAL for anything else; its stat in @st.
 */
int open_regular_at(int dirfd, const char *name, int flags, mode_t mode,
		    struct stat *st);
int open_regular(const char *path, int flags, mode_t mode, struct stat *st);
/*
 * Files of a file system of type @fs_type (statfs f_type) report size 0 and
 * make their content when read (procfs, sysfs...).
 */
bool fs_files_sizeless(long fs_type);

/* End of the last range holding data (regular or inline) below map->size. */
uint64_t extent_map_data_end(const struct extent_map *map);
void extent_map_release(struct extent_map *map);

/*
 * Building blocks of extent_map_build(), public for tests and for maps made
 * from other sources. extent_map_add() appends a range at or after the end
 * of the last one, inserting a hole for any gap below map->size and merging
 * adjacent holes; extent_map_finish() adds the hole up to map->size.
 * extent_item_parse() decodes one struct btrfs_file_extent_item of @len
 * bytes keyed at @file_offset. All return 0 or -errno.
 */
int extent_map_add(struct extent_map *map, const struct file_extent *fe);
int extent_map_finish(struct extent_map *map);
int extent_item_parse(const void *item, uint32_t len, uint64_t file_offset,
		      struct file_extent *fe);

const char *extent_kind_name(enum extent_kind kind);
const char *extent_source_name(enum extent_source source);

/* BTRFS_ENCODED_IO_COMPRESSION_* for a BTRFS_COMPRESS_* id, -1 if none. */
int extent_encoded_io_compression(int compression, unsigned int sectorsize);

/*
 * Totals per compression type as compsize counts them: disk usage and
 * uncompressed size once per distinct extent, referenced bytes per reference.
 */
struct extent_totals_row {
	uint64_t disk;
	uint64_t uncompressed;
	uint64_t referenced;
};

struct extent_totals {
	struct extent_totals_row by_type[4]; /* indexed by BTRFS_COMPRESS_* */
	struct extent_totals_row prealloc;
	/* ENCIO_COMPRESS_UNKNOWN (FIEMAP "encoded") and ids beyond ZSTD */
	struct extent_totals_row unknown;
	struct extent_totals_row all;
	uint64_t nr_files;
	uint64_t nr_extents;
	uint64_t nr_refs;
	uint64_t nr_inline;
	/* distinct regular/prealloc extents seen so far, keyed by disk_bytenr */
	uint64_t *seen;
	size_t nr_seen;
	size_t cap_seen;
};

void extent_totals_init(struct extent_totals *totals);
int extent_totals_add(struct extent_totals *totals,
		      const struct extent_map *map);
void extent_totals_release(struct extent_totals *totals);

#endif
