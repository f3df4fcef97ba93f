// SPDX-License-Identifier: GPL-2.0
/*
 * encio features, the library half: kernel and machine facts read from
 * /proc and /sys, and encoded I/O probed for real through the engine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "fs/inode_flags.h"
#include "io/features.h"

/* include/uapi/linux/capability.h */
#define ENCIO_CAP_SYS_ADMIN 21

/* The first line of a small file, newline removed; false if unreadable. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* The CapEff bit for CAP_SYS_ADMIN from /proc/self/status. */
static bool features_cap_sys_admin(void)
{
	unsigned long long eff = 0;
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = true;
			break;
		}
	}
	fclose(f);
	return found && (eff >> ENCIO_CAP_SYS_ADMIN & 1);
}

static void read_meminfo(struct encio_features *f)
{
	unsigned long long value;
	char line[256];
	FILE *mi = fopen("/proc/meminfo", "re");

	if (!mi)
		return;
	while (fgets(line, sizeof(line), mi)) {
		if (sscanf(line, "HugePages_Total: %llu", &value) == 1)
			f->hugepages_total = value;
		else if (sscanf(line, "HugePages_Free: %llu", &value) == 1)
			f->hugepages_free = value;
		else if (sscanf(line, "Hugepagesize: %llu", &value) == 1)
			f->hugepage_kib = value;
	}
	fclose(mi);
}

/* "always [madvise] never": the word in brackets. */
static void read_thp_mode(struct encio_features *f)
{
	char line[128], *open, *close;

	if (!read_line("/sys/kernel/mm/transparent_hugepage/enabled", line,
		       sizeof(line)))
		return;
	open = strchr(line, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!close || close - open - 1 >= (long)sizeof(f->thp_mode))
		return;
	memcpy(f->thp_mode, open + 1, close - open - 1);
	f->thp_mode[close - open - 1] = '\0';
}

static void read_send_stream_version(struct encio_features *f)
{
	char line[32];

	if (read_line("/sys/fs/btrfs/features/send_stream_version", line,
		      sizeof(line)))
		f->send_stream_version = atoi(line);
	else if (access("/sys/fs/btrfs/features", F_OK) == 0)
		f->send_stream_version = 1; /* the file came with v2 (6.0) */
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (s[1] - '0') << 6 | (s[2] - '0') << 3 |
				 (s[3] - '0');
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

static bool path_under(const char *path, const char *mnt)
{
	size_t len = strlen(mnt);

	if (strcmp(mnt, "/") == 0)
		return true;
	return strncmp(path, mnt, len) == 0 &&
	       (path[len] == '/' || path[len] == '\0');
}

/* compress=... or compress-force=... from the super options, else "none". */
static void pick_compress(struct encio_features *f, char *superopts)
{
	char *opt, *save = NULL;

	snprintf(f->compress_opt, sizeof(f->compress_opt), "none");
	for (opt = strtok_r(superopts, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		if (strncmp(opt, "compress=", 9) == 0 ||
		    strncmp(opt, "compress-force=", 15) == 0)
			snprintf(f->compress_opt, sizeof(f->compress_opt), "%s",
				 opt);
	}
}

/*
 * The mount of @path: the longest mount point above it (a later entry for
 * the same point shadows an earlier one). Not by device: btrfs subvolumes
 * have their own st_dev, mountinfo shows the superblock's.
 */
static void read_mountinfo(struct encio_features *f, const char *path)
{
	char *line = NULL, real[PATH_MAX], mnt[PATH_MAX], best_opts[1024] = "";
	size_t cap = 0, best = 0;
	FILE *mi;

	if (!realpath(path, real))
		return;
	mi = fopen("/proc/self/mountinfo", "re");
	if (!mi)
		return;
	while (getline(&line, &cap, mi) > 0) {
		char *sep = strstr(line, " - "), opts[1024];

		if (!sep || sscanf(line, "%*u %*u %*s %*s %4095s", mnt) != 1)
			continue;
		unescape(mnt);
		if (!path_under(real, mnt) || strlen(mnt) < best)
			continue;
		if (sscanf(sep + 3, "%*s %*s %1023s", opts) != 1)
			continue;
		best = strlen(mnt);
		snprintf(f->mount_point, sizeof(f->mount_point), "%s", mnt);
		snprintf(best_opts, sizeof(best_opts), "%s", opts);
	}
	free(line);
	fclose(mi);
	if (best_opts[0])
		pick_compress(f, best_opts);
}

/*
 * The engine's probe stops at the ioctl's error (EPERM, not btrfs); a report
 * tries the ring modes too, each for real.
 */
static void probe_untried(struct engine *engine, int fd, int *errs, bool write)
{
	int m;

	if (fd < 0)
		return;
	for (m = ENCIO_IO_URING_FIXED; m <= ENCIO_IO_URING; m++) {
		if (errs[m] >= 0)
			continue;
		if (!engine->ring)
			errs[m] = ENOSYS;
		else if (m == ENCIO_IO_URING_FIXED &&
			 !engine->buffers_registered)
			errs[m] = ENOSYS;
		else
			errs[m] = engine_probe_one(engine, fd, m, write);
	}
}

/* Reads on the file itself, or on a scratch file with one extent. */
static void probe_io(struct encio_features *f, struct engine *engine, int fd,
		     int dirfd)
{
	int read_fd = fd, write_fd, write_err;

	if (!f->path_is_file) {
		read_fd = engine_probe_scratch(engine, dirfd, &write_err);
		if (read_fd < 0)
			f->scratch_err = -read_fd;
	}
	/*
	 * Without a scratch file (a read-only snapshot or mount) reads were
	 * not probed: they may well work, so no error is reported for them.
	 */
	if (read_fd >= 0)
		engine_probe_read(engine, read_fd, ENCIO_IO_AUTO, &f->probe);
	probe_untried(engine, read_fd, f->probe.read_err, false);
	if (read_fd >= 0 && read_fd != fd)
		close(read_fd);
	engine_probe_write(engine, dirfd, ENCIO_IO_AUTO, &f->probe);
	write_fd = inode_tmpfile_cow_open(dirfd);
	probe_untried(engine, write_fd, f->probe.write_err, true);
	if (write_fd >= 0)
		close(write_fd);
}

static int open_dir_of(const char *path, bool is_file)
{
	char tmp[PATH_MAX], *slash;

	if (!is_file)
		return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(tmp, sizeof(tmp), "%s", path);
	slash = strrchr(tmp, '/');
	if (!slash)
		return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (slash == tmp)
		slash++;
	*slash = '\0';
	return open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int features_probe(const char *path, struct encio_features *f)
{
	struct engine_config config = { .depth = 1, .force_backing = -1 };
	struct engine engine;
	struct utsname uts;
	struct statfs sfs;
	struct stat st;
	int fd, dirfd = -1, ret = 0;

	memset(f, 0, sizeof(*f));
	for (int m = 0; m < ENCIO_IO_NR_MODES; m++)
		f->probe.read_err[m] = f->probe.write_err[m] = -1;
	if (uname(&uts) == 0)
		snprintf(f->kernel, sizeof(f->kernel), "%s", uts.release);
	f->cap_sys_admin = features_cap_sys_admin();
	read_meminfo(f);
	read_thp_mode(f);
	read_send_stream_version(f);

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || fstatfs(fd, &sfs)) {
		ret = -errno;
		goto out;
	}
	f->path_is_file = S_ISREG(st.st_mode);
	f->fs_type = sfs.f_type;
	f->btrfs = sfs.f_type == BTRFS_SUPER_MAGIC;
	f->sector_size = sfs.f_bsize;
	read_mountinfo(f, path);

	/* A depth-1 engine with default buffers tells the ring and backing. */
	ret = engine_init(&engine, &config);
	if (ret)
		goto out;
	f->ring = engine.ring != NULL;
	f->defer_taskrun = engine.defer_taskrun;
	f->backing = engine.pool.backing;
	if (f->btrfs) {
		dirfd = open_dir_of(path, f->path_is_file);
		if (dirfd < 0)
			f->scratch_err = errno;
		else
			probe_io(f, &engine, fd, dirfd);
	}
	engine_release(&engine);
out:
	if (dirfd >= 0)
		close(dirfd);
	close(fd);
	return ret;
}
