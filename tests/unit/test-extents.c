// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/fs/extents.c that need no root and no btrfs: names, item
 * parsing, gap filling, compsize-style totals, and maps of files on tmpfs
 * (SEEK_DATA/SEEK_HOLE) and on the file system of /tmp (FIEMAP or SEEK).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec/codec.h"
#include "fs/extents.h"
#include "base/kernel.h"

#define KiB 1024ULL
#define MiB (1024 * KiB)
#define TMPFS_MAGIC 0x01021994

/* ---- helpers ---- */

static struct btrfs_file_extent_item item(uint8_t type, uint8_t compression,
					  uint64_t bytenr, uint64_t disk_bytes,
					  uint64_t offset, uint64_t num_bytes,
					  uint64_t ram_bytes)
{
	struct btrfs_file_extent_item ei;

	memset(&ei, 0, sizeof(ei));
	ei.generation = htole64(7);
	ei.ram_bytes = htole64(ram_bytes);
	ei.compression = compression;
	ei.type = type;
	ei.disk_bytenr = htole64(bytenr);
	ei.disk_num_bytes = htole64(disk_bytes);
	ei.offset = htole64(offset);
	ei.num_bytes = htole64(num_bytes);
	return ei;
}

static struct file_extent fext(enum extent_kind kind, int compression,
			       uint64_t offset, uint64_t len, uint64_t bytenr,
			       uint64_t disk_bytes, uint64_t ram_bytes)
{
	struct file_extent fe = {
		.offset = offset,
		.len = len,
		.disk_bytenr = bytenr,
		.disk_bytes = disk_bytes,
		.ram_bytes = ram_bytes,
		.kind = kind,
		.compression = compression,
	};

	return fe;
}

static void add(struct extent_map *map, struct file_extent fe)
{
	assert_int_equal(extent_map_add(map, &fe), 0);
}

static void assert_range(const struct extent_map *map, size_t i,
			 enum extent_kind kind, uint64_t offset, uint64_t len)
{
	assert_true(i < map->nr);
	assert_int_equal(map->ext[i].kind, kind);
	assert_int_equal(map->ext[i].offset, offset);
	assert_int_equal(map->ext[i].len, len);
}

static void assert_row(const struct extent_totals_row *row, uint64_t disk,
		       uint64_t uncompressed, uint64_t referenced)
{
	assert_int_equal(row->disk, disk);
	assert_int_equal(row->uncompressed, uncompressed);
	assert_int_equal(row->referenced, referenced);
}

/* Ranges cover [0, size) one after another; only prealloc goes beyond. */
static void assert_contiguous(const struct extent_map *map)
{
	uint64_t end = 0;
	size_t i;

	for (i = 0; i < map->nr; i++) {
		if (map->ext[i].offset >= map->size) {
			assert_int_equal(map->ext[i].kind, EXTENT_PREALLOC);
			assert_true(map->ext[i].offset >= end);
		} else {
			assert_int_equal(map->ext[i].offset, end);
		}
		assert_true(map->ext[i].len > 0);
		end = map->ext[i].offset + map->ext[i].len;
	}
	assert_true(end >= map->size);
}

static void write_at(int fd, uint64_t offset, size_t len)
{
	char *buf = malloc(len);

	assert_non_null(buf);
	memset(buf, 'x', len);
	assert_int_equal(pwrite(fd, buf, len, offset), (ssize_t)len);
	free(buf);
}

/* A sparse file in @dir: 1 MiB, data at 64 KiB (16 KiB) and 1 MiB - 4 KiB. */
static int sparse_file(const char *dir, char *path, size_t size)
{
	int fd;

	snprintf(path, size, "%s/encio-test-extents.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	assert_int_equal(ftruncate(fd, MiB), 0);
	write_at(fd, 64 * KiB, 16 * KiB);
	write_at(fd, MiB - 4 * KiB, 4 * KiB);
	return fd;
}

/* ---- names ---- */

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(extent_kind_name(EXTENT_HOLE), "hole");
	assert_string_equal(extent_kind_name(EXTENT_REGULAR), "regular");
	assert_string_equal(extent_kind_name(EXTENT_PREALLOC), "prealloc");
	assert_string_equal(extent_kind_name(EXTENT_INLINE), "inline");
	assert_string_equal(codec_alg_name(BTRFS_COMPRESS_NONE),
			    "none");
	assert_string_equal(codec_alg_name(BTRFS_COMPRESS_ZLIB),
			    "zlib");
	assert_string_equal(codec_alg_name(BTRFS_COMPRESS_LZO), "lzo");
	assert_string_equal(codec_alg_name(BTRFS_COMPRESS_ZSTD),
			    "zstd");
	assert_string_equal(codec_alg_name(ENCIO_COMPRESS_UNKNOWN),
			    "unknown");
	assert_string_equal(codec_alg_name(17), "unknown");
	assert_string_equal(extent_source_name(EXTENT_SOURCE_TREE_SEARCH),
			    "tree-search");
	assert_string_equal(extent_source_name(EXTENT_SOURCE_FIEMAP), "fiemap");
	assert_string_equal(extent_source_name(EXTENT_SOURCE_SEEK), "seek");
	assert_string_equal(extent_source_name(EXTENT_SOURCE_WHOLE), "whole");
}

static void test_encoded_io_compression(void **state)
{
	(void)state;
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_ZLIB,
						       4096),
			 BTRFS_ENCODED_IO_COMPRESSION_ZLIB);
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_ZSTD,
						       65536),
			 BTRFS_ENCODED_IO_COMPRESSION_ZSTD);
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_LZO,
						       4096),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_4K);
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_LZO,
						       8192),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_8K);
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_LZO,
						       16384),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_16K);
	assert_int_equal(extent_encoded_io_compression(BTRFS_COMPRESS_LZO,
						       65536),
			 BTRFS_ENCODED_IO_COMPRESSION_LZO_64K);
	assert_int_equal(
		extent_encoded_io_compression(BTRFS_COMPRESS_LZO, 131072), -1);
	assert_int_equal(
		extent_encoded_io_compression(BTRFS_COMPRESS_LZO, 2048), -1);
	assert_int_equal(
		extent_encoded_io_compression(BTRFS_COMPRESS_LZO, 12288), -1);
	assert_int_equal(
		extent_encoded_io_compression(BTRFS_COMPRESS_NONE, 4096), -1);
	assert_int_equal(extent_encoded_io_compression(ENCIO_COMPRESS_UNKNOWN,
						       4096),
			 -1);
}

/* ---- parsing file extent items ---- */

static void test_parse_regular(void **state)
{
	struct btrfs_file_extent_item ei;
	struct file_extent fe;

	(void)state;
	ei = item(BTRFS_FILE_EXTENT_REG, BTRFS_COMPRESS_ZSTD, 13631488, 4096,
		  45056, 86016, 131072);
	assert_int_equal(extent_item_parse(&ei, sizeof(ei), 45056, &fe), 0);
	assert_int_equal(fe.kind, EXTENT_REGULAR);
	assert_int_equal(fe.compression, BTRFS_COMPRESS_ZSTD);
	assert_int_equal(fe.offset, 45056);
	assert_int_equal(fe.len, 86016);
	assert_int_equal(fe.disk_bytenr, 13631488);
	assert_int_equal(fe.disk_bytes, 4096);
	assert_int_equal(fe.extent_offset, 45056);
	assert_int_equal(fe.ram_bytes, 131072);

	ei = item(BTRFS_FILE_EXTENT_PREALLOC, 0, 1 * MiB, MiB, 0, 64 * KiB,
		  MiB);
	assert_int_equal(extent_item_parse(&ei, sizeof(ei), 0, &fe), 0);
	assert_int_equal(fe.kind, EXTENT_PREALLOC);

	/* an explicit hole item, as without NO_HOLES */
	ei = item(BTRFS_FILE_EXTENT_REG, 0, 0, 0, 0, 8192, 8192);
	assert_int_equal(extent_item_parse(&ei, sizeof(ei), 4096, &fe), 0);
	assert_int_equal(fe.kind, EXTENT_HOLE);
	assert_int_equal(fe.len, 8192);
}

static void test_parse_inline(void **state)
{
	unsigned char
		buf[offsetof(struct btrfs_file_extent_item, disk_bytenr) + 20];
	struct btrfs_file_extent_item ei;
	struct file_extent fe;

	(void)state;
	ei = item(BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD, 0, 0, 0, 0,
		  200);
	memset(buf, 0xab, sizeof(buf)); /* the inline data */
	memcpy(buf, &ei, offsetof(struct btrfs_file_extent_item, disk_bytenr));
	assert_int_equal(extent_item_parse(buf, sizeof(buf), 0, &fe), 0);
	assert_int_equal(fe.kind, EXTENT_INLINE);
	assert_int_equal(fe.compression, BTRFS_COMPRESS_ZSTD);
	assert_int_equal(fe.len, 200);
	assert_int_equal(fe.ram_bytes, 200);
	assert_int_equal(fe.disk_bytes, 20);
	assert_int_equal(fe.disk_bytenr, 0);
}

static void test_parse_bad(void **state)
{
	struct btrfs_file_extent_item ei;
	struct file_extent fe;

	(void)state;
	ei = item(BTRFS_FILE_EXTENT_REG, 0, 4096, 4096, 0, 4096, 4096);
	assert_int_equal(extent_item_parse(&ei, 10, 0, &fe), -EUCLEAN);
	assert_int_equal(extent_item_parse(&ei, sizeof(ei) - 1, 0, &fe),
			 -EUCLEAN);
	ei.type = 9;
	assert_int_equal(extent_item_parse(&ei, sizeof(ei), 0, &fe), -EUCLEAN);
}

/* ---- building maps ---- */

static void test_map_gaps(void **state)
{
	struct extent_map map = { .size = 100 * KiB };

	(void)state;
	add(&map,
	    fext(EXTENT_REGULAR, 0, 8 * KiB, 4 * KiB, 1 * MiB, 4096, 4096));
	add(&map,
	    fext(EXTENT_REGULAR, 3, 20 * KiB, 4 * KiB, 2 * MiB, 4096, 4096));
	assert_int_equal(extent_map_finish(&map), 0);
	assert_int_equal(map.nr, 5);
	assert_range(&map, 0, EXTENT_HOLE, 0, 8 * KiB);
	assert_range(&map, 1, EXTENT_REGULAR, 8 * KiB, 4 * KiB);
	assert_range(&map, 2, EXTENT_HOLE, 12 * KiB, 8 * KiB);
	assert_range(&map, 3, EXTENT_REGULAR, 20 * KiB, 4 * KiB);
	assert_range(&map, 4, EXTENT_HOLE, 24 * KiB, 76 * KiB);
	assert_contiguous(&map);
	/* a range overlapping the last one is refused */
	struct file_extent fe =
		fext(EXTENT_REGULAR, 0, 90 * KiB, 4096, 1, 1, 1);
	assert_int_equal(extent_map_add(&map, &fe), -EINVAL);
	extent_map_release(&map);
	assert_null(map.ext);
	assert_int_equal(map.nr, 0);
}

static void test_map_hole_merge(void **state)
{
	struct extent_map map = { .size = 64 * KiB };

	(void)state;
	/* explicit hole items next to gaps become one hole */
	add(&map, fext(EXTENT_HOLE, 0, 4 * KiB, 4 * KiB, 0, 0, 0));
	add(&map, fext(EXTENT_HOLE, 0, 8 * KiB, 8 * KiB, 0, 0, 0));
	add(&map, fext(EXTENT_REGULAR, 0, 16 * KiB, 4 * KiB, MiB, 4096, 4096));
	assert_int_equal(extent_map_finish(&map), 0);
	assert_int_equal(map.nr, 3);
	assert_range(&map, 0, EXTENT_HOLE, 0, 16 * KiB);
	assert_range(&map, 1, EXTENT_REGULAR, 16 * KiB, 4 * KiB);
	assert_range(&map, 2, EXTENT_HOLE, 20 * KiB, 44 * KiB);
	extent_map_release(&map);
}

static void test_map_past_eof(void **state)
{
	struct extent_map map = { .size = 10 * KiB };

	(void)state;
	/* sector-rounded last extent, then prealloc past EOF after a gap */
	add(&map, fext(EXTENT_REGULAR, 3, 0, 12 * KiB, MiB, 4096, 12 * KiB));
	add(&map, fext(EXTENT_PREALLOC, 0, MiB, MiB, 2 * MiB, MiB, MiB));
	assert_int_equal(extent_map_finish(&map), 0);
	assert_int_equal(map.nr, 2);
	assert_range(&map, 0, EXTENT_REGULAR, 0, 12 * KiB);
	assert_range(&map, 1, EXTENT_PREALLOC, MiB, MiB);

	extent_map_release(&map);
	map.size = 10 * KiB;
	add(&map, fext(EXTENT_REGULAR, 0, 0, 4 * KiB, MiB, 4096, 4096));
	add(&map, fext(EXTENT_PREALLOC, 0, MiB, MiB, 2 * MiB, MiB, MiB));
	assert_int_equal(map.nr, 3);
	assert_range(&map, 1, EXTENT_HOLE, 4 * KiB, 6 * KiB); /* up to EOF */
	assert_contiguous(&map);
	extent_map_release(&map);

	/* explicit hole items are clipped at EOF too */
	map.size = 10 * KiB;
	add(&map, fext(EXTENT_REGULAR, 0, 0, 4 * KiB, MiB, 4096, 4096));
	add(&map, fext(EXTENT_HOLE, 0, 4 * KiB, 1020 * KiB, 0, 0, 0));
	add(&map, fext(EXTENT_PREALLOC, 0, MiB, MiB, 2 * MiB, MiB, MiB));
	assert_int_equal(map.nr, 3);
	assert_range(&map, 1, EXTENT_HOLE, 4 * KiB, 6 * KiB);
	assert_range(&map, 2, EXTENT_PREALLOC, MiB, MiB);
	extent_map_release(&map);
}

/* ---- totals, as compsize counts ---- */

/* A zstd file with a bookend, an overwrite, prealloc, a hole, no inline. */
static void bookend_map(struct extent_map *map)
{
	memset(map, 0, sizeof(*map));
	map->size = 400 * KiB;
	add(map,
	    fext(EXTENT_REGULAR, 3, 0, 40 * KiB, 1 * MiB, 4096, 128 * KiB));
	add(map,
	    fext(EXTENT_REGULAR, 0, 40 * KiB, 4 * KiB, 2 * MiB, 4096, 4096));
	struct file_extent fe = fext(EXTENT_REGULAR, 3, 44 * KiB, 84 * KiB,
				     1 * MiB, 4096, 128 * KiB);
	fe.extent_offset = 44 * KiB;
	add(map, fe);
	add(map, fext(EXTENT_PREALLOC, 0, 256 * KiB, 64 * KiB, 3 * MiB,
		      64 * KiB, 64 * KiB));
	assert_int_equal(extent_map_finish(map), 0);
}

static void test_totals_dedup(void **state)
{
	struct extent_totals t;
	struct extent_map map;

	(void)state;
	extent_totals_init(&t);
	bookend_map(&map);
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_row(&t.by_type[BTRFS_COMPRESS_ZSTD], 4096, 128 * KiB, 124 * KiB);
	assert_row(&t.by_type[BTRFS_COMPRESS_NONE], 4096, 4096, 4096);
	assert_row(&t.prealloc, 64 * KiB, 64 * KiB, 64 * KiB);
	assert_row(&t.all, 72 * KiB, 196 * KiB, 192 * KiB);
	assert_int_equal(t.nr_files, 1);
	assert_int_equal(t.nr_extents, 3);
	assert_int_equal(t.nr_refs, 4);

	/* a reflinked copy: only referenced bytes grow */
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_row(&t.by_type[BTRFS_COMPRESS_ZSTD], 4096, 128 * KiB, 248 * KiB);
	assert_row(&t.all, 72 * KiB, 196 * KiB, 384 * KiB);
	assert_int_equal(t.nr_files, 2);
	assert_int_equal(t.nr_extents, 3);
	assert_int_equal(t.nr_refs, 8);
	assert_row(&t.by_type[BTRFS_COMPRESS_ZLIB], 0, 0, 0);
	assert_row(&t.by_type[BTRFS_COMPRESS_LZO], 0, 0, 0);
	assert_row(&t.unknown, 0, 0, 0);
	extent_map_release(&map);
	extent_totals_release(&t);
	assert_null(t.seen);
}

static void test_totals_inline(void **state)
{
	struct extent_map map = { .size = 200 };
	struct extent_totals t;

	(void)state;
	extent_totals_init(&t);
	add(&map, fext(EXTENT_INLINE, BTRFS_COMPRESS_ZSTD, 0, 200, 0, 20, 200));
	/* inline extents are counted every time they are seen */
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_row(&t.by_type[BTRFS_COMPRESS_ZSTD], 40, 400, 400);
	assert_row(&t.all, 40, 400, 400);
	assert_int_equal(t.nr_inline, 2);
	assert_int_equal(t.nr_extents, 0);
	assert_int_equal(t.nr_refs, 0);
	extent_map_release(&map);
	extent_totals_release(&t);
}

static void test_totals_first_type_wins(void **state)
{
	struct extent_map map = { .size = MiB };
	struct extent_totals t;

	(void)state;
	extent_totals_init(&t);
	/* written middle of a prealloc extent: the first reference's type */
	add(&map, fext(EXTENT_PREALLOC, 0, 0, 512 * KiB, 5 * MiB, MiB, MiB));
	struct file_extent fe =
		fext(EXTENT_REGULAR, 0, 512 * KiB, 64 * KiB, 5 * MiB, MiB, MiB);
	fe.extent_offset = 512 * KiB;
	add(&map, fe);
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_row(&t.prealloc, MiB, MiB, 512 * KiB);
	assert_row(&t.by_type[BTRFS_COMPRESS_NONE], 0, 0, 64 * KiB);
	assert_row(&t.all, MiB, MiB, 576 * KiB);
	extent_map_release(&map);
	extent_totals_release(&t);
}

static void test_totals_unknown_and_holes(void **state)
{
	struct extent_map map = { .size = 256 * KiB };
	struct extent_totals t;

	(void)state;
	extent_totals_init(&t);
	add(&map, fext(EXTENT_HOLE, 0, 0, 64 * KiB, 0, 0, 0));
	add(&map, fext(EXTENT_REGULAR, ENCIO_COMPRESS_UNKNOWN, 64 * KiB,
		       128 * KiB, 7 * MiB, 128 * KiB, 128 * KiB));
	add(&map,
	    fext(EXTENT_REGULAR, 9, 192 * KiB, 4 * KiB, 8 * MiB, 4096, 4096));
	assert_int_equal(extent_map_finish(&map), 0);
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_row(&t.unknown, 132 * KiB, 132 * KiB, 132 * KiB);
	assert_row(&t.all, 132 * KiB, 132 * KiB, 132 * KiB);
	assert_int_equal(t.nr_refs, 2);
	extent_map_release(&map);
	extent_totals_release(&t);
}

static void test_totals_many(void **state)
{
	struct extent_map map = { .size = 0 };
	struct extent_totals t;
	uint64_t i, n = 20000;

	(void)state;
	extent_totals_init(&t);
	map.size = n * 4096;
	for (i = 0; i < n; i++)
		add(&map, fext(EXTENT_REGULAR, 0, i * 4096, 4096,
			       (i * 7919 % n + 1) * 4096, 4096, 4096));
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_int_equal(extent_totals_add(&t, &map), 0);
	assert_int_equal(t.nr_extents, n);
	assert_int_equal(t.nr_refs, 2 * n);
	assert_row(&t.all, n * 4096, n * 4096, 2 * n * 4096);
	extent_map_release(&map);
	extent_totals_release(&t);
}

/* ---- maps of real files ---- */

static void test_map_tmpfs(void **state)
{
	struct extent_map map;
	struct statfs sfs;
	char path[64];
	int fd;

	(void)state;
	if (statfs("/dev/shm", &sfs) || sfs.f_type != TMPFS_MAGIC)
		skip();
	fd = sparse_file("/dev/shm", path, sizeof(path));
	assert_true(fd >= 0);
	assert_int_equal(extent_map_build(fd, &map), 0);
	assert_int_equal(map.source, EXTENT_SOURCE_SEEK);
	assert_int_equal(map.size, MiB);
	assert_int_equal(map.nr, 4);
	assert_range(&map, 0, EXTENT_HOLE, 0, 64 * KiB);
	assert_range(&map, 1, EXTENT_REGULAR, 64 * KiB, 16 * KiB);
	assert_int_equal(map.ext[1].compression, BTRFS_COMPRESS_NONE);
	assert_range(&map, 2, EXTENT_HOLE, 80 * KiB, MiB - 84 * KiB);
	assert_range(&map, 3, EXTENT_REGULAR, MiB - 4 * KiB, 4 * KiB);
	assert_contiguous(&map);
	extent_map_release(&map);

	/* a hole at the end */
	assert_int_equal(ftruncate(fd, 2 * MiB), 0);
	assert_int_equal(extent_map_build(fd, &map), 0);
	assert_int_equal(map.nr, 5);
	assert_range(&map, 4, EXTENT_HOLE, MiB, MiB);
	extent_map_release(&map);
	close(fd);
}

static void test_map_tmp(void **state)
{
	struct extent_map map;
	uint64_t data = 0;
	char path[64];
	size_t i;
	int fd;

	(void)state;
	fd = sparse_file("/tmp", path, sizeof(path));
	if (fd < 0)
		skip();
	assert_int_equal(extent_map_build(fd, &map), 0);
	assert_int_equal(map.size, MiB);
	assert_contiguous(&map);
	for (i = 0; i < map.nr; i++)
		if (map.ext[i].kind != EXTENT_HOLE)
			data += map.ext[i].len;
	/* block-granular file systems map at least what was written */
	assert_true(data >= 20 * KiB);
	if (map.source != EXTENT_SOURCE_WHOLE) {
		assert_true(data < MiB);
		assert_int_equal(map.ext[0].kind, EXTENT_HOLE);
	}
	extent_map_release(&map);

	/* prealloc where the file system has it (FIEMAP: unwritten) */
	if (fallocate(fd, 0, 2 * MiB, 64 * KiB) == 0) {
		assert_int_equal(extent_map_build(fd, &map), 0);
		assert_contiguous(&map);
		if (map.source == EXTENT_SOURCE_FIEMAP)
			assert_int_equal(map.ext[map.nr - 1].kind,
					 EXTENT_PREALLOC);
		extent_map_release(&map);
	}
	close(fd);
}

/* The end of the data: a trailing hole or prealloc range is not data. */
static void test_map_data_end(void **state)
{
	struct extent_map map = { .size = 100 * KiB };
	struct file_extent fe = { .offset = 0,
				  .len = 8 * KiB,
				  .kind = EXTENT_REGULAR };

	(void)state;
	assert_int_equal(extent_map_data_end(&map), 0);
	assert_int_equal(extent_map_add(&map, &fe), 0);
	fe = (struct file_extent){ .offset = 32 * KiB,
				   .len = 68 * KiB + 4 * KiB,
				   .kind = EXTENT_REGULAR };
	assert_int_equal(extent_map_add(&map, &fe), 0);
	assert_int_equal(extent_map_finish(&map), 0);
	/* the last extent reaches past EOF, rounded to the sector */
	assert_int_equal(extent_map_data_end(&map), 100 * KiB);
	extent_map_release(&map);

	map = (struct extent_map){ .size = 100 * KiB };
	fe = (struct file_extent){ .offset = 0,
				   .len = 64 * KiB,
				   .kind = EXTENT_REGULAR };
	assert_int_equal(extent_map_add(&map, &fe), 0);
	fe = (struct file_extent){ .offset = 64 * KiB,
				   .len = 16 * KiB,
				   .kind = EXTENT_PREALLOC };
	assert_int_equal(extent_map_add(&map, &fe), 0);
	assert_int_equal(extent_map_finish(&map), 0);
	assert_int_equal(extent_map_data_end(&map), 64 * KiB);
	extent_map_release(&map);
}

/* Given the stat and the file system type, the same map as from the fd. */
static void test_map_build_stat(void **state)
{
	struct extent_map a, b;
	struct statfs sfs;
	struct stat st;
	char path[64];
	size_t i;
	int fd;

	(void)state;
	fd = sparse_file("/dev/shm", path, sizeof(path));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(fstatfs(fd, &sfs), 0);
	assert_int_equal(extent_map_build(fd, &a), 0);
	assert_int_equal(extent_map_build_stat(fd, &st, sfs.f_type, &b), 0);
	assert_int_equal(a.nr, b.nr);
	assert_int_equal(a.size, b.size);
	assert_int_equal(a.source, b.source);
	for (i = 0; i < a.nr; i++) {
		assert_int_equal(a.ext[i].offset, b.ext[i].offset);
		assert_int_equal(a.ext[i].len, b.ext[i].len);
		assert_int_equal(a.ext[i].kind, b.ext[i].kind);
	}
	assert_int_equal(extent_map_data_end(&b), MiB);
	extent_map_release(&a);
	extent_map_release(&b);
	close(fd);

	fd = open("/", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(extent_map_build_stat(fd, &st, 0, &a), -EISDIR);
	close(fd);
}

static void test_map_empty_and_dir(void **state)
{
	struct extent_map map;
	char path[] = "/dev/shm/encio-test-extents.XXXXXX";
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(extent_map_build(fd, &map), 0);
	assert_int_equal(map.size, 0);
	assert_int_equal(map.nr, 0);
	extent_map_release(&map);
	close(fd);

	fd = open("/", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(extent_map_build(fd, &map), -EISDIR);
	close(fd);
}

/* A FIFO without a writer must not block the open (it would hang here). */
static void test_open_regular(void **state)
{
	char dir[] = "/dev/shm/encio-test-open.XXXXXX";
	struct statfs sfs;
	struct stat st;
	int dfd, fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(mkfifoat(dfd, "fifo", 0600), 0);
	assert_int_equal(mkdirat(dfd, "sub", 0700), 0);
	fd = openat(dfd, "file", O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "data", 4), 4);
	close(fd);

	assert_int_equal(open_regular_at(dfd, "fifo", O_RDONLY, 0, &st),
			 -EINVAL);
	assert_int_equal(open_regular_at(dfd, "fifo", O_WRONLY, 0, NULL),
			 -EINVAL);
	assert_int_equal(open_regular_at(dfd, "sub", O_RDONLY, 0, NULL),
			 -EISDIR);
	assert_int_equal(open_regular_at(dfd, "none", O_RDONLY, 0, NULL),
			 -ENOENT);
	fd = open_regular_at(dfd, "file", O_RDONLY, 0, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_size, 4);
	/* io_uring reads must not see O_NONBLOCK */
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	assert_int_not_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	assert_int_equal(fstatfs(fd, &sfs), 0);
	assert_false(fs_files_sizeless(sfs.f_type));
	close(fd);

	fd = open_regular("/proc/version", O_RDONLY, 0, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(fstatfs(fd, &sfs), 0);
	assert_true(fs_files_sizeless(sfs.f_type));
	close(fd);

	unlinkat(dfd, "fifo", 0);
	unlinkat(dfd, "sub", AT_REMOVEDIR);
	unlinkat(dfd, "file", 0);
	close(dfd);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_encoded_io_compression),
		cmocka_unit_test(test_parse_regular),
		cmocka_unit_test(test_parse_inline),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_map_gaps),
		cmocka_unit_test(test_map_hole_merge),
		cmocka_unit_test(test_map_past_eof),
		cmocka_unit_test(test_totals_dedup),
		cmocka_unit_test(test_totals_inline),
		cmocka_unit_test(test_totals_first_type_wins),
		cmocka_unit_test(test_totals_unknown_and_holes),
		cmocka_unit_test(test_totals_many),
		cmocka_unit_test(test_map_tmpfs),
		cmocka_unit_test(test_map_tmp),
		cmocka_unit_test(test_map_empty_and_dir),
		cmocka_unit_test(test_map_data_end),
		cmocka_unit_test(test_map_build_stat),
		cmocka_unit_test(test_open_regular),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
