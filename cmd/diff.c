// SPDX-License-Identifier: GPL-2.0
/*
 * encio diff: what changed between two read-only snapshots, as text like
 * zfs diff's, as JSON, or as the NUL-separated list of paths restic's
 * --files-from-raw takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "diff/diff.h"
#include "json.h"

static const char *const diff_usage[] = {
	"encio diff [-v|-q] [--kernel] [-0|--format=text|json] PARENT CHILD",
	"List what changed from one read-only snapshot to another.",
	"",
	"PARENT and CHILD are read-only snapshots of one subvolume (CHILD a",
	"snapshot of PARENT, or both snapshots of one subvolume, in either",
	"order). Each line names a path and its type (F file, / directory,",
	"@ symlink, | fifo, = socket, B block device, C character device):",
	"",
	"  +  created        -  removed (the path in PARENT)",
	"  M  modified       R  renamed (PARENT's path -> CHILD's)",
	"",
	"The difference is the one btrfs send -p PARENT CHILD sends, found",
	"from the two trees' metadata alone: only the leaves written since the",
	"snapshots parted are searched, and no file data is read. A",
	"modification says what changed (data, mode, owner, size, times,",
	"flags, links, xattrs); -v adds the data's byte ranges and the",
	"xattrs' names.",
	"",
	"-0 prints the paths in CHILD of what was created, modified or renamed",
	"(directories left out), each ended by a NUL, for restic backup",
	"--files-from-raw.",
	"",
	"If a balance moves the trees while they are read, the kernel's",
	"difference (BTRFS_IOC_SEND without data) is taken instead; -v says so.",
	"",
	"Needs CAP_SYS_ADMIN (tree searches), as btrfs send does.",
	"",
	"-0                 NUL-separated paths in CHILD, directories left out",
	"--format=FORMAT    text (default) or json",
	"--kernel           take the kernel's difference, as after a balance",
	"-v|--verbose       the data's byte ranges, the xattrs' names",
	"-q|--quiet         errors only",
	"-h|--help          this help",
	NULL
};

static const unsigned int what_bits[] = { DIFF_DATA,  DIFF_MODE,  DIFF_OWNER,
					  DIFF_SIZE,  DIFF_TIMES, DIFF_FLAGS,
					  DIFF_LINKS, DIFF_XATTRS };
#define NR_WHAT (sizeof(what_bits) / sizeof(what_bits[0]))

/* What changed, after the path; with -v the data ranges and xattr names */
static void text_details(const struct diff_entry *e, bool full)
{
	const char *sep = "\t";
	size_t i, j;

	for (i = 0; i < NR_WHAT; i++) {
		if (!(e->what & what_bits[i]))
			continue;
		printf("%s%s", sep, diff_what_name(what_bits[i]));
		sep = ",";
		if (full && what_bits[i] == DIFF_DATA)
			for (j = 0; j < e->nr_ranges; j++)
				printf(" %llu+%llu",
				       (unsigned long long)e->range[j].offset,
				       (unsigned long long)e->range[j].len);
		if (full && what_bits[i] == DIFF_XATTRS)
			for (j = 0; j < e->nr_xattrs; j++)
				printf(" %s", e->xattr[j]);
	}
}

/* A path of the snapshot at @top: the root is @top itself */
static void print_path(const char *top, const char *path)
{
	if (strcmp(path, "."))
		printf("%s/%s", top, path);
	else
		fputs(top, stdout);
}

static void text_entry(const struct diff_entry *e, const char *parent,
		       const char *child)
{
	printf("%c\t%c\t", e->change, e->type);
	if (e->change == DIFF_RENAMED) {
		print_path(parent, e->old_path);
		fputs(" -> ", stdout);
		print_path(child, e->path);
	} else {
		print_path(e->change == DIFF_REMOVED ? parent : child, e->path);
	}
	text_details(e, global_opts.verbose > 0);
	putchar('\n');
}

static void json_entry(struct json_writer *w, const struct diff_entry *e)
{
	char s[2] = { e->change, 0 }, t[2] = { e->type, 0 };
	size_t i;

	json_object_begin(w, NULL);
	json_string(w, "change", s);
	json_string(w, "type", t);
	json_string(w, "path", e->path);
	if (e->old_path)
		json_string(w, "old_path", e->old_path);
	json_u64(w, "ino", e->ino);
	if (e->what) {
		json_array_begin(w, "what");
		for (i = 0; i < NR_WHAT; i++)
			if (e->what & what_bits[i])
				json_string(w, NULL,
					    diff_what_name(what_bits[i]));
		json_array_end(w);
	}
	if (e->nr_ranges) {
		json_array_begin(w, "data");
		for (i = 0; i < e->nr_ranges; i++) {
			json_array_begin(w, NULL);
			json_u64(w, NULL, e->range[i].offset);
			json_u64(w, NULL, e->range[i].len);
			json_array_end(w);
		}
		json_array_end(w);
	}
	if (e->nr_xattrs) {
		json_array_begin(w, "xattrs");
		for (i = 0; i < e->nr_xattrs; i++)
			json_string(w, NULL, e->xattr[i]);
		json_array_end(w);
	}
	json_object_end(w);
}

static void print_json(const struct diff_result *res, const char *parent,
		       const char *child)
{
	struct json_writer w;
	size_t i;

	json_init(&w, stdout, 2);
	json_object_begin(&w, NULL);
	json_string(&w, "parent", parent);
	json_string(&w, "child", child);
	json_u64(&w, "since_transid", res->since);
	json_u64(&w, "inodes_compared", res->inodes);
	json_array_begin(&w, "entries");
	for (i = 0; i < res->nr; i++)
		json_entry(&w, &res->entry[i]);
	json_array_end(&w);
	json_object_end(&w);
}

static void print_nul(const struct diff_result *res, const char *child)
{
	size_t i;

	for (i = 0; i < res->nr; i++) {
		const struct diff_entry *e = &res->entry[i];

		if (e->change == DIFF_REMOVED || e->type == '/')
			continue;
		/* a path is listed once, though created and modified */
		if (i && !strcmp(res->entry[i - 1].path, e->path) &&
		    res->entry[i - 1].change != DIFF_REMOVED)
			continue;
		printf("%s/%s%c", child, e->path, 0);
	}
}

static int open_snapshot(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		print_error("cannot open '%s': %m", path);
	return fd;
}

static void print_diff_error(int err, const char *parent, const char *child)
{
	switch (err) {
	case -EINVAL:
		print_error(
			"'%s' and '%s' must be subvolumes of one btrfs filesystem",
			parent, child);
		break;
	case -EROFS:
		print_error("'%s' and '%s' must be read-only snapshots", parent,
			    child);
		break;
	case -ENOTSUP:
		print_error(
			"'%s' and '%s' are not snapshots of one subvolume (neither was made from the other, nor both from a third)",
			parent, child);
		break;
	case -EAGAIN:
		print_error(
			"cannot compare '%s' and '%s' while a balance runs: run it again once it is done",
			parent, child);
		break;
	case -EPERM:
		print_error(
			"cannot search the trees of '%s' and '%s': %s (encio diff needs CAP_SYS_ADMIN)",
			parent, child, strerror(-err));
		break;
	default:
		print_error("cannot compare '%s' and '%s': %s", parent, child,
			    strerror(-err));
	}
}

static int cmd_diff(const struct cmd_struct *cmd, int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "kernel", no_argument, NULL, 'K' },
		COMMON_LONG_OPTIONS
	};
	struct diff_result res;
	int c, json = 0, nul = 0, pfd, cfd, ret;
	unsigned int flags = 0;
	const char *parent, *child;
	size_t i;

	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "0",
				long_options, NULL)) != -1) {
		if (c == '0')
			nul = 1;
		else if (c == 'K')
			flags |= DIFF_KERNEL;
		else if (common_option(cmd, c, &json))
			return EXIT_USAGE;
	}
	if (argc - optind != 2)
		return usage_error(cmd, "PARENT and CHILD expected");
	if (nul && json)
		return usage_error(cmd,
				   "-0 and --format=json exclude each other");
	parent = argv[optind];
	child = argv[optind + 1];
	pfd = open_snapshot(parent);
	if (pfd < 0)
		return 1;
	cfd = open_snapshot(child);
	if (cfd < 0) {
		close(pfd);
		return 1;
	}
	ret = diff_snapshots(pfd, cfd, flags, &res);
	close(pfd);
	close(cfd);
	if (ret) {
		print_diff_error(ret, parent, child);
		return 1;
	}
	if (res.moved)
		verbose(1,
			"the trees were moved while they were read (a balance): the kernel's difference was taken");
	if (res.kernel)
		verbose(1,
			"%zu changes, %llu inodes compared, from the kernel's difference",
			res.nr, (unsigned long long)res.inodes);
	else
		verbose(1,
			"%zu changes, %llu inodes compared, leaves newer than transid %llu searched",
			res.nr, (unsigned long long)res.inodes,
			(unsigned long long)res.since);
	if (json)
		print_json(&res, parent, child);
	else if (nul)
		print_nul(&res, child);
	else
		for (i = 0; i < res.nr; i++)
			text_entry(&res.entry[i], parent, child);
	diff_result_free(&res);
	if (fflush(stdout) || ferror(stdout)) {
		print_error("cannot write the difference: %m");
		return 1;
	}
	return 0;
}

const struct cmd_struct cmd_struct_diff = { "diff", cmd_diff, diff_usage };
