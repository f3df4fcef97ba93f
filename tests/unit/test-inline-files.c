// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of lib/fs/inline_files.c that need no root and no btrfs: the
 * parsing of one BTRFS_IOC_TREE_SEARCH_V2 result (search headers, each
 * followed by its item) built by hand, which files qualify (one link, a
 * regular file, no xattrs, a single inline extent at 0 that covers it, a
 * compression encoded I/O can name), the range of inodes it answers for,
 * and where the entries point in the buffer; then a file made from the
 * parsed items without a search.
 */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs/inline_files.h"
#include "base/kernel.h"

#define INLINE_HDR offsetof(struct btrfs_file_extent_item, disk_bytenr)
#define SEARCH_BUF (64 * 1024)
#define INO 257
#define NODESIZE 16384

/* ---- helpers: a search result built item by item ---- */

struct sbuf {
	unsigned char data[SEARCH_BUF];
	size_t len;
	uint32_t nr;
	unsigned char *copy; /* what is parsed: exactly len bytes */
};

/* Where one file's items are, as offsets into the buffer. */
struct file_items {
	size_t inode;
	size_t extent;
	uint32_t extent_len;
};

static struct sbuf *sbuf_new(void)
{
	struct sbuf *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	return b;
}

static void sbuf_free(struct sbuf *b)
{
	free(b->copy);
	free(b);
}

/* Append a search header and @len bytes of item; the item's offset. */
static size_t put_item(struct sbuf *b, uint64_t objectid, uint32_t type,
		       uint64_t offset, const void *item, uint32_t len)
{
	struct btrfs_ioctl_search_header sh = {
		.transid = 9,
		.objectid = objectid,
		.offset = offset,
		.type = type,
		.len = len,
	};
	size_t pos;

	assert_true(b->len + sizeof(sh) + len <= sizeof(b->data));
	memcpy(b->data + b->len, &sh, sizeof(sh));
	pos = b->len + sizeof(sh);
	if (len)
		memcpy(b->data + pos, item, len);
	b->len = pos + len;
	b->nr++;
	return pos;
}

static size_t put_inode_len(struct sbuf *b, uint64_t ino, uint32_t mode,
			    uint32_t nlink, uint64_t size, uint32_t len)
{
	struct btrfs_inode_item ii;

	assert_true(len <= sizeof(ii));
	memset(&ii, 0, sizeof(ii));
	ii.generation = htole64(5);
	ii.transid = htole64(9);
	ii.size = htole64(size);
	ii.nbytes = htole64(size);
	ii.nlink = htole32(nlink);
	ii.uid = htole32(1000 + (uint32_t)ino);
	ii.gid = htole32(2000 + (uint32_t)ino);
	ii.mode = htole32(mode);
	ii.atime.sec = htole64(1700000000 + ino);
	ii.atime.nsec = htole32(123456789);
	ii.ctime.sec = htole64(1700000100);
	ii.mtime.sec = htole64(1600000000 + ino);
	ii.mtime.nsec = htole32(987654321);
	ii.otime.sec = htole64(1500000000);
	return put_item(b, ino, BTRFS_INODE_ITEM_KEY, 0, &ii, len);
}

static size_t put_inode(struct sbuf *b, uint64_t ino, uint32_t mode,
			uint32_t nlink, uint64_t size)
{
	return put_inode_len(b, ino, mode, nlink, size,
			     sizeof(struct btrfs_inode_item));
}

static void put_ref(struct sbuf *b, uint64_t ino)
{
	unsigned char item[sizeof(struct btrfs_inode_ref) + 4];
	struct btrfs_inode_ref ref = {
		.index = htole64(2 + ino),
		.name_len = htole16(4),
	};

	memcpy(item, &ref, sizeof(ref));
	memcpy(item + sizeof(ref), "file", 4);
	put_item(b, ino, BTRFS_INODE_REF_KEY, 256, item, sizeof(item));
}

static void put_extref(struct sbuf *b, uint64_t ino)
{
	unsigned char item[sizeof(struct btrfs_inode_extref) + 4];
	struct btrfs_inode_extref ref = {
		.parent_objectid = htole64(300),
		.index = htole64(3),
		.name_len = htole16(4),
	};

	memcpy(item, &ref, sizeof(ref));
	memcpy(item + sizeof(ref), "link", 4);
	put_item(b, ino, BTRFS_INODE_EXTREF_KEY, 0x1234abcd, item,
		 sizeof(item));
}

static void put_xattr(struct sbuf *b, uint64_t ino)
{
	unsigned char item[sizeof(struct btrfs_dir_item) + 16];

	memset(item, 0, sizeof(item));
	memcpy(item + sizeof(struct btrfs_dir_item), "user.acompressed", 16);
	put_item(b, ino, BTRFS_XATTR_ITEM_KEY, 0x5eed, item, sizeof(item));
}

/* The byte at @i of the inline data of a file: recognisable and varied. */
static unsigned char data_byte(uint64_t ino, size_t i)
{
	return (unsigned char)(ino * 31 + i * 7 + 1);
}

/*
 * An EXTENT_DATA item at file @offset: inline ones are the header up to
 * disk_bytenr and @data_len bytes, others the whole item.
 */
static size_t put_extent(struct sbuf *b, uint64_t ino, uint64_t offset,
			 uint8_t type, uint8_t compression, uint64_t ram_bytes,
			 uint32_t data_len, uint32_t *item_len)
{
	static unsigned char item[INLINE_HDR + 2 * INLINE_FILE_MAX_DATA];
	struct btrfs_file_extent_item ei;
	uint32_t len;
	size_t i;

	memset(&ei, 0, sizeof(ei));
	ei.generation = htole64(5);
	ei.ram_bytes = htole64(ram_bytes);
	ei.compression = compression;
	ei.type = type;
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		assert_true(INLINE_HDR + data_len <= sizeof(item));
		memcpy(item, &ei, INLINE_HDR);
		for (i = 0; i < data_len; i++)
			item[INLINE_HDR + i] = data_byte(ino, i);
		len = INLINE_HDR + data_len;
	} else {
		ei.disk_bytenr = htole64(13631488);
		ei.disk_num_bytes = htole64(4096);
		ei.num_bytes = htole64(ram_bytes);
		memcpy(item, &ei, sizeof(ei));
		len = sizeof(ei);
	}
	if (item_len)
		*item_len = len;
	return put_item(b, ino, BTRFS_EXTENT_DATA_KEY, offset, item, len);
}

/* A small file: inode item, ref, one inline extent at 0. */
static struct file_items put_file(struct sbuf *b, uint64_t ino,
				  uint8_t compression, uint64_t size,
				  uint64_t ram_bytes, uint32_t data_len)
{
	struct file_items f;

	f.inode = put_inode(b, ino, S_IFREG | 0644, 1, size);
	put_ref(b, ino);
	f.extent = put_extent(b, ino, 0, BTRFS_FILE_EXTENT_INLINE, compression,
			      ram_bytes, data_len, &f.extent_len);
	return f;
}

/* The usual qualifying file: zstd, 3000 bytes stored in 100. */
static struct file_items put_good(struct sbuf *b, uint64_t ino)
{
	return put_file(b, ino, BTRFS_COMPRESS_ZSTD, 3000, 3000, 100);
}

/* Parse a copy of exactly the bytes built, so that ASan sees overreads. */
static void parse(struct inline_files *w, struct sbuf *b, uint64_t ino,
		  bool complete)
{
	free(b->copy);
	b->copy = malloc(b->len ? b->len : 1);
	assert_non_null(b->copy);
	memcpy(b->copy, b->data, b->len);
	inline_files_parse(w, ino, b->copy, b->len, b->nr, complete);
}

/* Entry @i is file @ino with its items where @f says. */
static void assert_entry(const struct inline_files *w, const struct sbuf *b,
			 size_t i, uint64_t ino, struct file_items f)
{
	assert_true(i < w->nr);
	assert_int_equal(w->ents[i].ino, ino);
	assert_ptr_equal(w->ents[i].inode_item, b->copy + f.inode);
	assert_ptr_equal(w->ents[i].extent_item, b->copy + f.extent);
	assert_int_equal(w->ents[i].extent_len, f.extent_len);
}

static void assert_inos_n(const struct inline_files *w, const uint64_t *inos,
			  size_t n)
{
	size_t i;

	assert_int_equal(w->nr, n);
	for (i = 0; i < n; i++)
		assert_int_equal(w->ents[i].ino, inos[i]);
}

/* The files listed, exactly and in this order. */
#define assert_inos(w, ...)                                       \
	assert_inos_n(w, (const uint64_t[]){ __VA_ARGS__ },       \
		      sizeof((const uint64_t[]){ __VA_ARGS__ }) / \
			      sizeof(uint64_t))

/*
 * @b holds one file at INO that must not qualify: a good file at INO + 1
 * follows it and must be the only one listed.
 */
static void assert_rejected_sector(struct sbuf *b, uint32_t sectorsize)
{
	struct inline_files w;
	struct file_items good;

	good = put_good(b, INO + 1);
	assert_int_equal(inline_files_init(&w, sectorsize, NODESIZE), 0);
	parse(&w, b, INO, true);
	assert_inos(&w, INO + 1);
	assert_entry(&w, b, 0, INO + 1, good);
	assert_int_equal(w.lo, INO);
	assert_int_equal(w.hi, UINT64_MAX);
	inline_files_release(&w);
	sbuf_free(b);
}

static void assert_rejected(struct sbuf *b)
{
	assert_rejected_sector(b, 4096);
}

/* @w holds just the file at INO, with items @f, and covers INO to @hi. */
static void assert_only_file(const struct inline_files *w, const struct sbuf *b,
			     struct file_items f, uint64_t hi)
{
	assert_inos(w, INO);
	assert_entry(w, b, 0, INO, f);
	assert_int_equal(w->lo, INO);
	assert_int_equal(w->hi, hi);
}

/* @b holds one file at INO, with items @f, that qualifies. */
static void assert_qualifies_sector(struct sbuf *b, struct file_items f,
				    uint32_t sectorsize)
{
	struct inline_files w;

	assert_int_equal(inline_files_init(&w, sectorsize, NODESIZE), 0);
	parse(&w, b, INO, true);
	assert_only_file(&w, b, f, UINT64_MAX);
	inline_files_release(&w);
	sbuf_free(b);
}

static void assert_qualifies(struct sbuf *b, struct file_items f)
{
	assert_qualifies_sector(b, f, 4096);
}

/* ---- files that qualify ---- */

static void test_zstd(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	assert_qualifies(b, put_file(b, INO, BTRFS_COMPRESS_ZSTD, 3000, 3000,
				     100));
}

static void test_zlib(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	/* ram_bytes past the size: the extent is sector-rounded */
	assert_qualifies(b, put_file(b, INO, BTRFS_COMPRESS_ZLIB, 2000, 4096,
				     300));
}

static void test_lzo(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	assert_qualifies_sector(
		b, put_file(b, INO, BTRFS_COMPRESS_LZO, 3000, 3000, 200), 4096);
	b = sbuf_new();
	assert_qualifies_sector(
		b, put_file(b, INO, BTRFS_COMPRESS_LZO, 3000, 3000, 200),
		65536);
	/* no LZO_* encoded I/O compression for 2 KiB sectors */
	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_LZO, 3000, 3000, 200);
	assert_rejected_sector(b, 2048);
	/* nor for sectors that are not a power of two */
	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_LZO, 3000, 3000, 200);
	assert_rejected_sector(b, 12288);
	/* zstd does not care about the sector size */
	b = sbuf_new();
	assert_qualifies_sector(
		b, put_file(b, INO, BTRFS_COMPRESS_ZSTD, 3000, 3000, 200),
		2048);
}

static void test_uncompressed(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	assert_qualifies(b,
			 put_file(b, INO, BTRFS_COMPRESS_NONE, 123, 123, 123));
	/* more data than the size (truncated since) is fine */
	b = sbuf_new();
	assert_qualifies(b,
			 put_file(b, INO, BTRFS_COMPRESS_NONE, 100, 200, 200));
	/* the largest inline data taken */
	b = sbuf_new();
	assert_qualifies(b, put_file(b, INO, BTRFS_COMPRESS_NONE,
				     INLINE_FILE_MAX_DATA, INLINE_FILE_MAX_DATA,
				     INLINE_FILE_MAX_DATA));
}

static void test_extref(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f;

	(void)state;
	/* an extended ref instead of a ref: still one link */
	f.inode = put_inode(b, INO, S_IFREG | 0600, 1, 3000);
	put_extref(b, INO);
	f.extent = put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE,
			      BTRFS_COMPRESS_ZSTD, 3000, 100, &f.extent_len);
	assert_qualifies(b, f);
}

/* ---- files that do not ---- */

static void test_nlink(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode(b, INO, S_IFREG | 0644, 2, 3000);
	put_ref(b, INO);
	put_extref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);

	b = sbuf_new(); /* an orphan, no link left */
	put_inode(b, INO, S_IFREG | 0644, 0, 3000);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);
}

static void test_not_regular(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	/* a directory (given an extent so that only the mode differs) */
	put_inode(b, INO, S_IFDIR | 0755, 1, 3000);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);

	/* a FIFO */
	b = sbuf_new();
	put_inode(b, INO, S_IFIFO | 0644, 1, 12);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_NONE, 12,
		   12, NULL);
	assert_rejected(b);

	/* a symlink whose target extent is compressed (btrfs never does) */
	b = sbuf_new();
	put_inode(b, INO, S_IFLNK | 0777, 1, 12);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD, 12,
		   10, NULL);
	assert_rejected(b);
}

/* A symlink: its target is the data of an uncompressed inline extent. */
static void test_symlink(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f;

	(void)state;
	f.inode = put_inode(b, INO, S_IFLNK | 0777, 1, 12);
	put_ref(b, INO);
	f.extent = put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE,
			      BTRFS_COMPRESS_NONE, 12, 12, &f.extent_len);
	assert_qualifies(b, f);
}

static void test_empty(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_file(b, INO, BTRFS_COMPRESS_NONE, 0, 100, 100);
	assert_rejected(b);

	/* the usual empty file: no extent at all */
	b = sbuf_new();
	put_inode(b, INO, S_IFREG | 0644, 1, 0);
	put_ref(b, INO);
	assert_rejected(b);
}

static void test_no_extent(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode(b, INO, S_IFREG | 0644, 1, 3000);
	put_ref(b, INO);
	assert_rejected(b);
}

static void test_short_inode_item(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode_len(b, INO, S_IFREG | 0644, 1, 3000,
		      sizeof(struct btrfs_inode_item) - 1);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);
}

static void test_xattr(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode(b, INO, S_IFREG | 0644, 1, 3000);
	put_ref(b, INO);
	put_xattr(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);

	/* any other item type, e.g. a verity descriptor */
	b = sbuf_new();
	put_inode(b, INO, S_IFREG | 0644, 1, 3000);
	put_ref(b, INO);
	put_item(b, INO, BTRFS_VERITY_DESC_ITEM_KEY, 0, "verity", 6);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);
}

static void test_two_extents(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	/* inline data, then prealloc past EOF (fallocate -n) */
	put_file(b, INO, BTRFS_COMPRESS_NONE, 100, 100, 100);
	put_extent(b, INO, 4096, BTRFS_FILE_EXTENT_PREALLOC,
		   BTRFS_COMPRESS_NONE, 4096, 0, NULL);
	assert_rejected(b);

	/* two inline items */
	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_ZSTD, 3000, 3000, 100);
	put_extent(b, INO, 4096, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);
}

static void test_extent_not_at_zero(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode(b, INO, S_IFREG | 0644, 1, 100);
	put_ref(b, INO);
	put_extent(b, INO, 4096, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_NONE,
		   100, 100, NULL);
	assert_rejected(b);
}

static void test_regular_extent(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_inode(b, INO, S_IFREG | 0644, 1, 100);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_REG, BTRFS_COMPRESS_NONE, 4096,
		   0, NULL);
	assert_rejected(b);

	b = sbuf_new();
	put_inode(b, INO, S_IFREG | 0644, 1, 3000);
	put_ref(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_REG, BTRFS_COMPRESS_ZSTD, 4096,
		   0, NULL);
	assert_rejected(b);
}

static void test_ram_bytes_short(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_file(b, INO, BTRFS_COMPRESS_ZSTD, 3000, 2999, 100);
	assert_rejected(b);

	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_NONE, 100, 99, 100);
	assert_rejected(b);
}

static void test_data_short(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_file(b, INO, BTRFS_COMPRESS_NONE, 100, 100, 99);
	assert_rejected(b);

	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_NONE, 100, 4096, 0);
	assert_rejected(b);
}

static void test_data_too_long(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_file(b, INO, BTRFS_COMPRESS_NONE, INLINE_FILE_MAX_DATA + 1,
		 INLINE_FILE_MAX_DATA + 1, INLINE_FILE_MAX_DATA + 1);
	assert_rejected(b);

	b = sbuf_new();
	put_file(b, INO, BTRFS_COMPRESS_ZSTD, 3 * INLINE_FILE_MAX_DATA,
		 3 * INLINE_FILE_MAX_DATA, INLINE_FILE_MAX_DATA + 1);
	assert_rejected(b);
}

static void test_encoding(void **state)
{
	size_t enc = offsetof(struct btrfs_file_extent_item, encryption);
	size_t other = offsetof(struct btrfs_file_extent_item, other_encoding);
	struct file_items f;
	struct sbuf *b;

	(void)state;
	b = sbuf_new();
	f = put_good(b, INO);
	b->data[f.extent + enc] = 1;
	assert_rejected(b);

	/* either byte of the le16 */
	b = sbuf_new();
	f = put_good(b, INO);
	b->data[f.extent + other] = 1;
	assert_rejected(b);
	b = sbuf_new();
	f = put_good(b, INO);
	b->data[f.extent + other + 1] = 1;
	assert_rejected(b);
}

static void test_unknown_compression(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	put_file(b, INO, 7, 3000, 3000, 100);
	assert_rejected(b);

	b = sbuf_new();
	put_file(b, INO, ENCIO_COMPRESS_UNKNOWN, 3000, 3000, 100);
	assert_rejected(b);
}

/* Keys a tree cannot hold twice: taken as not qualifying all the same. */
static void test_duplicate_items(void **state)
{
	struct sbuf *b = sbuf_new();

	(void)state;
	/* a second inode item */
	put_inode(b, INO, S_IFREG | 0644, 1, 3000);
	put_good(b, INO);
	assert_rejected(b);

	/* a second extent item at 0 */
	b = sbuf_new();
	put_good(b, INO);
	put_extent(b, INO, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	assert_rejected(b);
}

/*
 * Objectids with items but no inode item (an orphan item at the end of
 * the tree, a buffer that would start inside an inode) are not listed,
 * whatever came before them.
 */
/*
 * A buffer whose last item reaches past its end (cut in the item, or in
 * its search header) ends the parse before that inode, as an incomplete
 * search does, even when told it is complete.
 */
static void test_truncated(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f, second;
	struct inline_files w;
	size_t cuts[3], i;

	(void)state;
	f = put_good(b, INO);
	second = put_good(b, INO + 1);
	cuts[0] = b->len - 1;	      /* in the second file's extent data */
	cuts[1] = second.extent - 10; /* in its extent item's header */
	cuts[2] = second.inode + 20;  /* in its inode item */
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	for (i = 0; i < 3; i++) {
		free(b->copy);
		b->copy = malloc(cuts[i]);
		assert_non_null(b->copy);
		memcpy(b->copy, b->data, cuts[i]);
		inline_files_parse(&w, INO, b->copy, cuts[i], b->nr, true);
		assert_only_file(&w, b, f, INO);
	}
	inline_files_release(&w);
	sbuf_free(b);
}

static void test_items_without_inode(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f[2];
	struct inline_files w;

	(void)state;
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	f[0] = put_good(b, 257);
	put_ref(b, 258);
	put_extent(b, 258, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	f[1] = put_good(b, 259);
	put_item(b, BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 1234, NULL,
		 0);
	parse(&w, b, 257, true);
	assert_inos(&w, 257, 259);
	assert_entry(&w, b, 0, 257, f[0]);
	assert_entry(&w, b, 1, 259, f[1]);
	assert_int_equal(w.hi, UINT64_MAX);
	parse(&w, b, 257, false);
	assert_inos(&w, 257, 259);
	assert_int_equal(w.hi, BTRFS_ORPHAN_OBJECTID - 1);
	sbuf_free(b);

	b = sbuf_new();
	put_extent(b, 258, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	f[1] = put_good(b, 259);
	parse(&w, b, 258, true);
	assert_inos(&w, 259);
	assert_entry(&w, b, 0, 259, f[1]);
	assert_int_equal(w.lo, 258);
	inline_files_release(&w);
	sbuf_free(b);
}

/* ---- several files, the range read ---- */

/*
 * 257 zstd, 258 a directory, 259 uncompressed, 260 with an xattr,
 * 261 two links, 300 zlib (a gap before it), 301 lzo, and @last (zstd,
 * qualifying if its items were all seen): only its inode item if @cut.
 * The items of the qualifying ones in @f.
 */
static void put_mix(struct sbuf *b, struct file_items f[5], uint64_t last,
		    bool cut)
{
	f[0] = put_file(b, 257, BTRFS_COMPRESS_ZSTD, 3000, 3000, 100);
	put_inode(b, 258, S_IFDIR | 0755, 1, 40);
	put_ref(b, 258);
	f[1] = put_file(b, 259, BTRFS_COMPRESS_NONE, 10, 10, 10);
	put_inode(b, 260, S_IFREG | 0644, 1, 3000);
	put_ref(b, 260);
	put_xattr(b, 260);
	put_extent(b, 260, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	put_inode(b, 261, S_IFREG | 0644, 2, 3000);
	put_ref(b, 261);
	put_extent(b, 261, 0, BTRFS_FILE_EXTENT_INLINE, BTRFS_COMPRESS_ZSTD,
		   3000, 100, NULL);
	f[2] = put_file(b, 300, BTRFS_COMPRESS_ZLIB, 1000, 1000, 50);
	f[3] = put_file(b, 301, BTRFS_COMPRESS_LZO, 1000, 1000, 60);
	if (cut) {
		f[4].inode = put_inode(b, last, S_IFREG | 0644, 1, 3000);
		f[4].extent = 0;
		f[4].extent_len = 0;
	} else {
		f[4] = put_good(b, last);
	}
}

static void test_many_complete(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f[5];
	struct inline_files w;

	(void)state;
	put_mix(b, f, 400, false);
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	parse(&w, b, 256, true);
	assert_inos(&w, 257, 259, 300, 301, 400);
	assert_entry(&w, b, 0, 257, f[0]);
	assert_entry(&w, b, 1, 259, f[1]);
	assert_entry(&w, b, 2, 300, f[2]);
	assert_entry(&w, b, 3, 301, f[3]);
	assert_entry(&w, b, 4, 400, f[4]);
	assert_int_equal(w.lo, 256);
	assert_int_equal(w.hi, UINT64_MAX);
	inline_files_release(&w);
	sbuf_free(b);
}

static void test_many_incomplete(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f[5];
	struct inline_files w;

	(void)state;
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	/* the last file's items all there, but the search could not know */
	put_mix(b, f, 400, false);
	parse(&w, b, 257, false);
	assert_inos(&w, 257, 259, 300, 301);
	assert_entry(&w, b, 0, 257, f[0]);
	assert_entry(&w, b, 1, 259, f[1]);
	assert_entry(&w, b, 2, 300, f[2]);
	assert_entry(&w, b, 3, 301, f[3]);
	assert_int_equal(w.lo, 257);
	assert_int_equal(w.hi, 399);
	sbuf_free(b);

	/* cut after the last file's inode item: the same */
	b = sbuf_new();
	put_mix(b, f, 302, true);
	parse(&w, b, 257, false);
	assert_inos(&w, 257, 259, 300, 301);
	assert_entry(&w, b, 3, 301, f[3]);
	assert_int_equal(w.lo, 257);
	assert_int_equal(w.hi, 301);
	sbuf_free(b);

	/* a parse replaces what the last one found */
	b = sbuf_new();
	f[0] = put_good(b, 1000);
	put_good(b, 1001);
	parse(&w, b, 1000, false);
	assert_inos(&w, 1000);
	assert_entry(&w, b, 0, 1000, f[0]);
	assert_int_equal(w.lo, 1000);
	assert_int_equal(w.hi, 1000);
	sbuf_free(b);

	/* all items of one inode: nothing read */
	b = sbuf_new();
	put_good(b, 1000);
	parse(&w, b, 1000, false);
	assert_int_equal(w.nr, 0);
	assert_int_equal(w.lo, 1000);
	assert_int_equal(w.hi, 999);
	inline_files_release(&w);
	sbuf_free(b);
}

static void test_nothing(void **state)
{
	struct sbuf *b = sbuf_new();
	struct inline_files w;

	(void)state;
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	assert_true(w.lo > w.hi); /* nothing read yet */
	put_good(b, 500);
	parse(&w, b, 500, true);
	assert_inos(&w, 500);
	sbuf_free(b);

	/* past the last inode: no items, nothing listed, all read */
	b = sbuf_new();
	parse(&w, b, 600, true);
	assert_int_equal(w.nr, 0);
	assert_int_equal(w.lo, 600);
	assert_int_equal(w.hi, UINT64_MAX);

	/* no items, not complete: nothing read */
	parse(&w, b, 600, false);
	assert_int_equal(w.nr, 0);
	assert_true(w.lo > w.hi);
	inline_files_release(&w);
	sbuf_free(b);
}

/* The first item is past @ino (no such inode): the range starts at @ino. */
static void test_first_item_later(void **state)
{
	struct sbuf *b = sbuf_new();
	struct inline_files w;
	struct file_items f;

	(void)state;
	f = put_good(b, 260);
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	parse(&w, b, 256, true);
	assert_inos(&w, 260);
	assert_entry(&w, b, 0, 260, f);
	assert_int_equal(w.lo, 256);
	assert_int_equal(w.hi, UINT64_MAX);
	inline_files_release(&w);
	sbuf_free(b);
}

/* More entries than the first allocation holds, all in order. */
static void test_many_entries(void **state)
{
	struct sbuf *b = sbuf_new();
	struct file_items f[150];
	struct inline_files w;
	size_t i;

	(void)state;
	for (i = 0; i < 150; i++)
		f[i] = put_file(b, 1000 + 2 * i, BTRFS_COMPRESS_ZSTD, 3000,
				3000, 10);
	assert_int_equal(inline_files_init(&w, 4096, NODESIZE), 0);
	parse(&w, b, 1000, true);
	assert_int_equal(w.nr, 150);
	for (i = 0; i < 150; i++)
		assert_entry(&w, b, i, 1000 + 2 * i, f[i]);
	inline_files_release(&w);
	sbuf_free(b);
}

/* ---- a file made from the parsed items ---- */

static void test_get_parsed(void **state)
{
	struct sbuf *b = sbuf_new();
	struct inline_files w;
	struct inline_file *f;
	size_t i;

	(void)state;
	put_good(b, 257);
	put_file(b, 258, BTRFS_COMPRESS_LZO, 1000, 4096, 60);
	put_file(b, 259, BTRFS_COMPRESS_NONE, 10, 10, 12);
	put_inode(b, 260, S_IFREG | 0644, 2, 3000);
	assert_int_equal(inline_files_init(&w, 16384, NODESIZE), 0);
	parse(&w, b, 257, true);
	assert_inos(&w, 257, 258, 259);

	/*
	 * In the range read, same st_dev (0, as after init): no search (a
	 * search on fd -1 would fail and disable the lookups).
	 */
	f = inline_files_get(&w, -1, 0, 258);
	assert_non_null(f);
	assert_false(w.disabled);
	assert_int_equal(f->ino, 258);
	assert_int_equal(f->size, 1000);
	assert_int_equal(f->ram_bytes, 4096);
	assert_int_equal(f->mode, S_IFREG | 0644);
	assert_int_equal(f->uid, 1258);
	assert_int_equal(f->gid, 2258);
	assert_int_equal(f->compression, BTRFS_ENCODED_IO_COMPRESSION_LZO_16K);
	assert_int_equal(f->atime.tv_sec, 1700000258);
	assert_int_equal(f->atime.tv_nsec, 123456789);
	assert_int_equal(f->mtime.tv_sec, 1600000258);
	assert_int_equal(f->mtime.tv_nsec, 987654321);
	assert_int_equal(f->data_len, 60);
	for (i = 0; i < 60; i++)
		assert_int_equal(f->data[i], data_byte(258, i));
	free(f);

	f = inline_files_get(&w, -1, 0, 259);
	assert_non_null(f);
	assert_int_equal(f->size, 10);
	assert_int_equal(f->compression, BTRFS_ENCODED_IO_COMPRESSION_NONE);
	assert_int_equal(f->data_len, 12);
	assert_int_equal(f->data[11], data_byte(259, 11));
	free(f);

	/* read but not qualifying */
	assert_null(inline_files_get(&w, -1, 0, 260));
	assert_null(inline_files_get(&w, -1, 0, 1000));
	assert_false(w.disabled);
	inline_files_release(&w);
	sbuf_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zstd),
		cmocka_unit_test(test_zlib),
		cmocka_unit_test(test_lzo),
		cmocka_unit_test(test_uncompressed),
		cmocka_unit_test(test_extref),
		cmocka_unit_test(test_nlink),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_no_extent),
		cmocka_unit_test(test_short_inode_item),
		cmocka_unit_test(test_xattr),
		cmocka_unit_test(test_two_extents),
		cmocka_unit_test(test_extent_not_at_zero),
		cmocka_unit_test(test_regular_extent),
		cmocka_unit_test(test_ram_bytes_short),
		cmocka_unit_test(test_data_short),
		cmocka_unit_test(test_data_too_long),
		cmocka_unit_test(test_encoding),
		cmocka_unit_test(test_unknown_compression),
		cmocka_unit_test(test_duplicate_items),
		cmocka_unit_test(test_items_without_inode),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_many_complete),
		cmocka_unit_test(test_many_incomplete),
		cmocka_unit_test(test_nothing),
		cmocka_unit_test(test_first_item_later),
		cmocka_unit_test(test_many_entries),
		cmocka_unit_test(test_get_parsed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
