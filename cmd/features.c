// SPDX-License-Identifier: GPL-2.0
/*
 * encio features: what this kernel, a filesystem and this machine allow.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/features.h"
#include "commands.h"
#include "json.h"

static const char *const features_usage[] = {
	"encio features [-v|-q] [--format=text|json] [PATH]",
	"Show what the kernel, the filesystem of PATH and this machine allow.",
	"",
	"Kernel release; whether PATH (default: the current directory) is on",
	"btrfs, its sector size and compression mount option; whether encoded",
	"reads and writes work as ioctl, as io_uring command and as io_uring",
	"command on fixed buffers, probed for real on a scratch O_TMPFILE in the",
	"directory (reads on PATH itself when it is a file), and whether the",
	"kernel honours or ignores the fixed flag; whether uring encoded writes",
	"run on io-wq workers; hugetlb pages, THP mode and the backing the buffer",
	"pool gets; CAP_SYS_ADMIN; the send stream version; whether the ring",
	"accepts SINGLE_ISSUER|DEFER_TASKRUN. A filesystem that is not btrfs is",
	"reported as such (exit 0).",
	"",
	"--format=FORMAT    text (default) or json",
	"-v|--verbose, -q|--quiet  as the global options (no effect here)",
	"-h|--help          print this help",
	NULL
};

static const char *mode_result(int err)
{
	if (err < 0)
		return "not probed";
	return err ? errno_name(err) : "works";
}

static void text_io(const struct encio_features *f)
{
	const struct encio_probe *p = &f->probe;
	int m;

	for (m = ENCIO_IO_IOCTL; m >= ENCIO_IO_URING_FIXED; m--) {
		printf("%-24s %s", "encoded read", encio_io_mode_name(m));
		printf("%*s%s", (int)(12 - strlen(encio_io_mode_name(m))), "",
		       mode_result(p->read_err[m]));
		if (p->read_err[m] > 0)
			printf(" (%s)", strerror(p->read_err[m]));
		printf("\n");
	}
	for (m = ENCIO_IO_IOCTL; m >= ENCIO_IO_URING_FIXED; m--) {
		printf("%-24s %s", "encoded write", encio_io_mode_name(m));
		printf("%*s%s", (int)(12 - strlen(encio_io_mode_name(m))), "",
		       mode_result(p->write_err[m]));
		if (p->write_err[m] > 0)
			printf(" (%s)", strerror(p->write_err[m]));
		printf("\n");
	}
	printf("%-24s %s\n", "fixed buffer flag:",
	       p->fixed == ENCIO_FIXED_HONOURED ? "honoured" :
	       p->fixed == ENCIO_FIXED_IGNORED	? "ignored" :
						  "unknown");
	printf("%-24s %s\n", "uring writes on io-wq:",
	       p->write_err[ENCIO_IO_URING] != 0 ? "unknown" :
	       p->write_punted			 ? "yes" :
						   "no");
	printf("%-24s read %s, write %s\n",
	       "auto chooses:", encio_io_mode_name(p->read_mode),
	       encio_io_mode_name(p->write_mode));
}

static void print_text(const char *path, const struct encio_features *f)
{
	printf("%-24s %s\n", "kernel:", f->kernel);
	printf("%-24s %s\n", "path:", path);
	if (!f->btrfs) {
		printf("%-24s not btrfs (f_type 0x%lx): no encoded I/O\n",
		       "filesystem:", f->fs_type);
	} else {
		printf("%-24s btrfs, mounted on %s\n",
		       "filesystem:", f->mount_point[0] ? f->mount_point : "?");
		printf("%-24s %u\n", "sector size:", f->sector_size);
		printf("%-24s %s\n", "compression:",
		       f->compress_opt[0] ? f->compress_opt : "unknown");
	}
	printf("%-24s %s\n", "CAP_SYS_ADMIN:", f->cap_sys_admin ? "yes" : "no");
	if (f->btrfs) {
		if (f->scratch_err)
			printf("%-24s cannot make a scratch file: %s (%s); reads not probed\n",
			       "probe:", errno_name(f->scratch_err),
			       strerror(f->scratch_err));
		text_io(f);
	}
	printf("%-24s %s\n",
	       "io_uring:", f->ring ? "available" : "unavailable");
	printf("%-24s %s\n", "defer taskrun:",
	       f->defer_taskrun ? "SINGLE_ISSUER|DEFER_TASKRUN accepted" :
				  "not accepted");
	printf("%-24s %llu free of %llu (%llu KiB each)\n",
	       "hugetlb pages:", (unsigned long long)f->hugepages_free,
	       (unsigned long long)f->hugepages_total,
	       (unsigned long long)f->hugepage_kib);
	printf("%-24s %s\n", "THP:", f->thp_mode[0] ? f->thp_mode : "unknown");
	printf("%-24s %s\n",
	       "buffer backing:", bufpool_backing_name(f->backing));
	if (f->send_stream_version)
		printf("%-24s %d\n",
		       "send stream version:", f->send_stream_version);
	else
		printf("%-24s unknown\n", "send stream version:");
}

static void json_errs(struct json_writer *w, const char *name, const int *errs)
{
	int m;

	json_object_begin(w, name);
	for (m = ENCIO_IO_IOCTL; m >= ENCIO_IO_URING_FIXED; m--)
		json_string(w, encio_io_mode_name(m), mode_result(errs[m]));
	json_object_end(w);
}

static void json_probe(struct json_writer *w, const struct encio_features *f)
{
	const struct encio_probe *p = &f->probe;

	json_string(w, "mount_point", f->mount_point);
	json_u64(w, "sector_size", f->sector_size);
	json_string(w, "compression", f->compress_opt);
	json_string(w, "scratch_error",
		    f->scratch_err ? errno_name(f->scratch_err) : "");
	json_errs(w, "encoded_read", p->read_err);
	json_errs(w, "encoded_write", p->write_err);
	json_string(w, "fixed",
		    p->fixed == ENCIO_FIXED_HONOURED ? "honoured" :
		    p->fixed == ENCIO_FIXED_IGNORED  ? "ignored" :
						       "unknown");
	if (p->write_err[ENCIO_IO_URING])
		json_null(w, "uring_write_punted");
	else
		json_bool(w, "uring_write_punted", p->write_punted);
	json_string(w, "auto_read", encio_io_mode_name(p->read_mode));
	json_string(w, "auto_write", encio_io_mode_name(p->write_mode));
}

static void print_json(const char *path, const struct encio_features *f)
{
	struct json_writer w;
	char fs_type[32];

	snprintf(fs_type, sizeof(fs_type), "0x%lx", f->fs_type);
	json_init(&w, stdout, 1);
	json_object_begin(&w, NULL);
	json_string(&w, "kernel", f->kernel);
	json_string(&w, "path", path);
	json_bool(&w, "btrfs", f->btrfs);
	json_string(&w, "fs_type", fs_type);
	json_bool(&w, "cap_sys_admin", f->cap_sys_admin);
	json_bool(&w, "io_uring", f->ring);
	json_bool(&w, "defer_taskrun", f->defer_taskrun);
	json_u64(&w, "hugepages_total", f->hugepages_total);
	json_u64(&w, "hugepages_free", f->hugepages_free);
	json_u64(&w, "hugepage_kib", f->hugepage_kib);
	json_string(&w, "thp", f->thp_mode);
	json_string(&w, "buffer_backing", bufpool_backing_name(f->backing));
	json_i64(&w, "send_stream_version", f->send_stream_version);
	if (f->btrfs)
		json_probe(&w, f);
	json_object_end(&w);
}

static int cmd_features(const struct cmd_struct *cmd, int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		COMMON_LONG_OPTIONS
	};
	struct encio_features f;
	const char *path = ".";
	int c, json = 0, ret;

	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS, long_options,
				NULL)) != -1)
		if (common_option(cmd, c, &json))
			return EXIT_USAGE;
	if (argc - optind > 1)
		return usage_error(cmd, "only one PATH");
	if (optind < argc)
		path = argv[optind];
	ret = features_probe(path, &f);
	if (ret) {
		print_error("cannot probe '%s': %s", path, strerror(-ret));
		return 1;
	}
	if (json)
		print_json(path, &f);
	else
		print_text(path, &f);
	return 0;
}

const struct cmd_struct cmd_struct_features = { "features", cmd_features,
						features_usage };
