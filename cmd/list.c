// SPDX-License-Identifier: GPL-2.0
/*
 * encio list: the extents of files and their compression totals, counted
 * as compsize counts them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "fs/extents.h"
#include "base/kernel.h"
#include "commands.h"
#include "json.h"

static const char *const list_usage[] = {
	"encio list [-r] [-v|-q] [--format=text|json] PATH...",
	"List the extents of files and their compression totals.",
	"",
	"For each file, one line per extent: file offset, length, bytes on disk,",
	"compression and kind (regular, inline, prealloc or hole). Then totals per",
	"compression type as compsize counts them: disk usage and uncompressed",
	"size once per distinct extent, referenced size once per reference.",
	"The map is exact on btrfs with CAP_SYS_ADMIN (tree search); otherwise it",
	"comes from FIEMAP or SEEK_DATA/SEEK_HOLE and the compression is unknown.",
	"",
	"-r|--recursive     list the regular files under directories (symlinks",
	"                   inside them are not followed)",
	"--format=FORMAT    text (default) or json",
	"-v|--verbose       also the disk address, extent offset and unencoded size",
	"-q|--quiet         errors only (no warning about the map's source)",
	"-h|--help          print this help",
	NULL
};

struct list_ctx {
	bool json;
	bool recursive;
	struct json_writer w; /* each file an object on lines of its own */
	bool warned_source;
	bool failed;
	struct extent_totals totals;
};

/* ---- JSON ---- */

static void json_extent(struct json_writer *w, const struct file_extent *fe)
{
	json_object_begin(w, NULL);
	json_u64(w, "offset", fe->offset);
	json_u64(w, "length", fe->len);
	json_u64(w, "disk_bytes", fe->disk_bytes);
	json_string(w, "compression", codec_alg_name(fe->compression));
	json_string(w, "kind", extent_kind_name(fe->kind));
	json_u64(w, "disk_bytenr", fe->disk_bytenr);
	json_u64(w, "extent_offset", fe->extent_offset);
	json_u64(w, "ram_bytes", fe->ram_bytes);
	json_object_end(w);
}

static void json_file(struct list_ctx *ctx, const char *path,
		      const struct extent_map *map)
{
	struct json_writer *w = &ctx->w;
	size_t i;

	json_object_begin(w, NULL);
	json_string(w, "path", path);
	json_u64(w, "size", map->size);
	json_string(w, "source", extent_source_name(map->source));
	json_array_begin(w, "extents");
	for (i = 0; i < map->nr; i++)
		json_extent(w, &map->ext[i]);
	json_array_end(w);
	json_object_end(w);
}

static void json_row(struct json_writer *w, const char *name,
		     const struct extent_totals_row *row)
{
	json_object_begin(w, name);
	json_u64(w, "disk", row->disk);
	json_u64(w, "uncompressed", row->uncompressed);
	json_u64(w, "referenced", row->referenced);
	if (row->uncompressed)
		json_u64(w, "percent", row->disk * 100 / row->uncompressed);
	json_object_end(w);
}

/* Ends the "files" array json_begin() opened, and the object. */
static void json_totals(struct json_writer *w, const struct extent_totals *t)
{
	int i;

	json_array_end(w);
	json_object_begin(w, "totals");
	json_u64(w, "files", t->nr_files);
	json_u64(w, "extents", t->nr_extents);
	json_u64(w, "refs", t->nr_refs);
	json_u64(w, "inline", t->nr_inline);
	json_object_begin(w, "types");
	json_row(w, "TOTAL", &t->all);
	for (i = BTRFS_COMPRESS_NONE; i <= BTRFS_COMPRESS_ZSTD; i++)
		json_row(w, codec_alg_name(i), &t->by_type[i]);
	json_row(w, "prealloc", &t->prealloc);
	json_row(w, "unknown", &t->unknown);
	json_object_end(w);
	json_object_end(w);
	json_object_end(w);
}

/* ---- text ---- */

static void text_extent(const struct file_extent *fe)
{
	bool hole = fe->kind == EXTENT_HOLE;

	printf("%14" PRIu64 " %12" PRIu64, fe->offset, fe->len);
	if (hole)
		printf(" %12s  %-7s", "-", "-");
	else
		printf(" %12" PRIu64 "  %-7s", fe->disk_bytes,
		       codec_alg_name(fe->compression));
	if (global_opts.verbose > 0 && !hole)
		printf(" %-8s %14" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
		       extent_kind_name(fe->kind), fe->disk_bytenr,
		       fe->extent_offset, fe->ram_bytes);
	else
		printf(" %s\n", extent_kind_name(fe->kind));
}

static void text_file(const char *path, const struct extent_map *map)
{
	size_t i;

	printf("%s: %" PRIu64 " bytes, %zu extent%s\n", path, map->size,
	       map->nr, map->nr == 1 ? "" : "s");
	if (!map->nr)
		return;
	printf("%14s %12s %12s  %-7s", "Offset", "Length", "On disk", "Compr");
	if (global_opts.verbose > 0)
		printf(" %-8s %14s %12s %12s\n", "Kind", "Disk bytenr",
		       "Extent off", "Ram bytes");
	else
		printf(" Kind\n");
	for (i = 0; i < map->nr; i++)
		text_extent(&map->ext[i]);
}

static void text_row(const char *name, const struct extent_totals_row *row)
{
	char perc[16], disk[PRETTY_SIZE_LEN], uncomp[PRETTY_SIZE_LEN];
	char refd[PRETTY_SIZE_LEN];

	if (row->uncompressed)
		snprintf(perc, sizeof(perc), "%3" PRIu64 "%%",
			 row->disk * 100 / row->uncompressed);
	else
		snprintf(perc, sizeof(perc), "  -");
	printf("%-10s %-8s %-12s %-12s %s\n", name, perc,
	       pretty_size(disk, row->disk),
	       pretty_size(uncomp, row->uncompressed),
	       pretty_size(refd, row->referenced));
}

static void text_totals(const struct extent_totals *t)
{
	int i;

	printf("\nProcessed %" PRIu64 " file%s, %" PRIu64
	       " regular extents (%" PRIu64 " refs), %" PRIu64 " inline.\n",
	       t->nr_files, t->nr_files == 1 ? "" : "s", t->nr_extents,
	       t->nr_refs, t->nr_inline);
	printf("%-10s %-8s %-12s %-12s %s\n", "Type", "Perc", "Disk Usage",
	       "Uncompressed", "Referenced");
	text_row("TOTAL", &t->all);
	for (i = BTRFS_COMPRESS_NONE; i <= BTRFS_COMPRESS_ZSTD; i++)
		if (t->by_type[i].uncompressed)
			text_row(codec_alg_name(i), &t->by_type[i]);
	if (t->prealloc.uncompressed)
		text_row("prealloc", &t->prealloc);
	if (t->unknown.uncompressed)
		text_row("unknown", &t->unknown);
}

/* ---- walking the paths ---- */

static void warn_source(struct list_ctx *ctx, const char *path,
			const struct extent_map *map)
{
	if (map->source == EXTENT_SOURCE_TREE_SEARCH || ctx->warned_source)
		return;
	ctx->warned_source = true;
	print_warning(
		"'%s': extent map from %s, not the btrfs tree search (it needs btrfs and CAP_SYS_ADMIN): compression and on-disk sizes of btrfs extents are not known",
		path, extent_source_name(map->source));
}

static void list_fd(struct list_ctx *ctx, int fd, const char *path)
{
	struct extent_map map;
	int ret;

	ret = extent_map_build(fd, &map);
	if (ret) {
		print_error("cannot map extents of '%s': %s", path,
			    strerror(-ret));
		ctx->failed = true;
		return;
	}
	warn_source(ctx, path, &map);
	if (ctx->json)
		json_file(ctx, path, &map);
	else
		text_file(path, &map);
	ret = extent_totals_add(&ctx->totals, &map);
	if (ret) {
		print_error("cannot count extents of '%s': %s", path,
			    strerror(-ret));
		ctx->failed = true;
	}
	extent_map_release(&map);
}

static char *path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir);
	char *path;

	path = malloc(len + strlen(name) + 2);
	if (!path)
		return NULL;
	sprintf(path, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/",
		name);
	return path;
}

static void walk_dir(struct list_ctx *ctx, int dirfd, const char *path);

/* One entry found in a directory: regular files and directories only. */
static void walk_entry(struct list_ctx *ctx, int dirfd, const char *name,
		       const char *path)
{
	struct stat st;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return;
	fd = openat(dirfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (fstat(fd, &st) < 0) {
		close(fd);
		goto fail;
	}
	if (S_ISDIR(st.st_mode))
		walk_dir(ctx, fd, path);
	else if (S_ISREG(st.st_mode))
		list_fd(ctx, fd, path);
	close(fd);
	return;
fail:
	print_error("cannot open '%s': %m", path);
	ctx->failed = true;
}

static int skip_dots(const struct dirent *de)
{
	return strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
}

static void walk_dir(struct list_ctx *ctx, int dirfd, const char *path)
{
	struct dirent **names;
	char *child;
	int i, n;

	n = scandirat(dirfd, ".", &names, skip_dots, alphasort);
	if (n < 0) {
		print_error("cannot read directory '%s': %m", path);
		ctx->failed = true;
		return;
	}
	for (i = 0; i < n; i++) {
		child = path_join(path, names[i]->d_name);
		if (!child) {
			print_error("cannot list '%s': %s", path,
				    strerror(ENOMEM));
			ctx->failed = true;
		} else {
			walk_entry(ctx, dirfd, names[i]->d_name, child);
		}
		free(child);
		free(names[i]);
	}
	free(names);
}

/* A path from the command line: symlinks to it are followed. */
static void list_path(struct list_ctx *ctx, const char *path)
{
	struct stat st;
	int fd;

	if (stat(path, &st) < 0)
		goto fail;
	if (S_ISDIR(st.st_mode) && !ctx->recursive) {
		print_error("'%s' is a directory (use -r)", path);
		ctx->failed = true;
		return;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		print_error("'%s' is not a regular file", path);
		ctx->failed = true;
		return;
	}
	fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (fstat(fd, &st) < 0) {
		close(fd);
		goto fail;
	}
	if (S_ISDIR(st.st_mode) && ctx->recursive)
		walk_dir(ctx, fd, path);
	else if (S_ISREG(st.st_mode))
		list_fd(ctx, fd, path);
	close(fd);
	return;
fail:
	print_error("cannot open '%s': %m", path);
	ctx->failed = true;
}

/* ---- the command ---- */

static int parse_options(const struct cmd_struct *cmd, int argc, char **argv,
			 struct list_ctx *ctx)
{
	static const struct option long_options[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	int c, json = 0;

	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "r",
				long_options, NULL)) != -1) {
		if (c == 'r')
			ctx->recursive = true;
		else if (common_option(cmd, c, &json))
			return EXIT_USAGE;
	}
	ctx->json = json;
	if (optind >= argc)
		return usage_error(cmd, "no PATH given");
	return 0;
}

static int cmd_list(const struct cmd_struct *cmd, int argc, char **argv)
{
	struct list_ctx ctx = { 0 };
	int ret, i;

	ret = parse_options(cmd, argc, argv, &ctx);
	if (ret)
		return ret;

	extent_totals_init(&ctx.totals);
	if (ctx.json) {
		json_init(&ctx.w, stdout, 4);
		json_object_begin(&ctx.w, NULL);
		json_array_begin(&ctx.w, "files");
	}
	for (i = optind; i < argc; i++)
		list_path(&ctx, argv[i]);
	if (ctx.json)
		json_totals(&ctx.w, &ctx.totals);
	else if (ctx.totals.nr_files || !ctx.failed)
		text_totals(&ctx.totals);
	extent_totals_release(&ctx.totals);
	if (fflush(stdout) || ferror(stdout)) {
		print_error("cannot write the listing: %m");
		return 1;
	}
	return ctx.failed ? 1 : 0;
}

const struct cmd_struct cmd_struct_list = { "list", cmd_list, list_usage };
