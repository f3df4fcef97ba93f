// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's pass: BTRFS_IOC_SEND, run on a thread of its own into a
 * pipe. send_kernel_tree() reads the pipe as the kernel writes it;
 * send_pass_make() keeps the whole stream in memory for a later
 * send_run(), which reads it instead of asking the kernel again if
 * nothing it depends on changed in between.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "base/kernel.h"
#include "send/send_internal.h"

/* The pipe from the kernel's send: as large as an unprivileged one may be. */
#define PASS_PIPE_BYTES (1024 * 1024)
/* How often a pass kept in memory looks at its stop flag. */
#define PASS_POLL_MS 100

void send_kernel_init(struct kernel_send *ks, int root_fd, uint64_t parent_id,
		      const uint64_t *ids, size_t nr_ids, uint32_t version,
		      bool no_data)
{
	memset(ks, 0, sizeof(*ks));
	ks->root_fd = root_fd;
	ks->args.clone_sources_count = nr_ids;
	ks->args.clone_sources = (__u64 *)ids;
	ks->args.parent_root = parent_id;
	ks->args.flags = BTRFS_SEND_FLAG_VERSION;
	if (no_data)
		ks->args.flags |= BTRFS_SEND_FLAG_NO_FILE_DATA;
	else if (version >= 2)
		ks->args.flags |= BTRFS_SEND_FLAG_COMPRESSED;
	ks->args.version = version;
}

/* The kernel writes the stream into the pipe; its end closed after. */
static void *kernel_send_thread(void *arg)
{
	struct kernel_send *ks = arg;

	ks->err = ioctl(ks->root_fd, BTRFS_IOC_SEND, &ks->args) ? errno : 0;
	close((int)ks->args.send_fd);
	return NULL;
}

int send_kernel_start(struct kernel_send *ks, pthread_t *thread, int *read_fd)
{
	sigset_t block, old;
	int pipefd[2], ret;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	fcntl(pipefd[0], F_SETPIPE_SZ, PASS_PIPE_BYTES);
	ks->args.send_fd = pipefd[1];
	/* SIGINT and SIGTERM are for the thread that reads and stops */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	ret = -pthread_create(thread, NULL, kernel_send_thread, ks);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(pipefd[0]);
		close(pipefd[1]);
		return ret;
	}
	*read_fd = pipefd[0];
	return 0;
}

static int ctransid_of(int fd, uint64_t id, uint64_t *ctransid)
{
	struct btrfs_util_subvolume_info info;

	if (btrfs_util_subvolume_info_fd(fd, id, &info))
		return errno ? -errno : -EIO;
	*ctransid = info.ctransid;
	return 0;
}

/*
 * What the pass @ks runs depends on: its version, parent and clone
 * sources, and the ids and ctransids of every subvolume it names.
 */
static int pass_record(struct send_pass *p, const struct kernel_send *ks)
{
	size_t i, nr = ks->args.clone_sources_count;
	int ret;

	p->version = ks->args.version;
	p->flags = ks->args.flags;
	p->parent_id = ks->args.parent_root;
	p->nr_ids = nr;
	p->ids = calloc(nr + 1, sizeof(*p->ids));
	p->ctransids = calloc(nr + 1, sizeof(*p->ctransids));
	if (!p->ids || !p->ctransids)
		return -ENOMEM;
	memcpy(p->ids, ks->args.clone_sources, nr * sizeof(*p->ids));
	if (btrfs_util_subvolume_id_fd(ks->root_fd, &p->root_id))
		return errno ? -errno : -EIO;
	ret = ctransid_of(ks->root_fd, 0, &p->root_ctransid);
	for (i = 0; !ret && i < nr; i++)
		ret = ctransid_of(ks->root_fd, p->ids[i], &p->ctransids[i]);
	return ret;
}

/* The kernel's output copied into the memfd, as long as it fits. */
static int pass_drain(struct send_pass *p, int read_fd, uint64_t max_bytes,
		      const volatile sig_atomic_t *stop)
{
	struct pollfd pfd = { .fd = read_fd, .events = POLLIN };
	char buf[65536];
	ssize_t n;
	int ready;

	for (;;) {
		if (stop && *stop)
			return -EINTR;
		ready = poll(&pfd, 1, PASS_POLL_MS);
		if (ready < 0 && errno != EINTR)
			return -errno;
		if (ready <= 0)
			continue;
		n = read(read_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : 0;
		if (p->bytes + n > max_bytes)
			return -EFBIG;
		if (write(p->fd, buf, n) != n)
			return errno ? -errno : -ENOSPC;
		p->bytes += n;
	}
}

int send_pass_make(struct send_pass *p, const char *root,
		   const struct send_options *opts, uint64_t max_bytes,
		   struct encio_error *e)
{
	struct kernel_send ks;
	const struct send_root *parent;
	struct send_roots r = { 0 };
	pthread_t thread;
	int root_fd = -1, read_fd, ret;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	ret = send_roots_init(&r, opts, 1, &parent, e);
	if (ret)
		goto out;
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	p->fd = memfd_create("encio-send-pass", MFD_CLOEXEC);
	if (root_fd < 0 || p->fd < 0) {
		ret = encio_error_set(e, errno, "start the pass of", root,
				      false, 0);
		goto out;
	}
	send_kernel_init(&ks, root_fd, parent ? parent->id : 0, r.ids, r.nr,
			 opts->proto ?: 2, opts->no_data);
	ret = pass_record(p, &ks);
	if (ret) {
		ret = encio_error_set(e, ret, "look at the subvolumes of", root,
				      false, 0);
		goto out;
	}
	ret = send_kernel_start(&ks, &thread, &read_fd);
	if (ret) {
		ret = encio_error_set(e, ret, "start the pass of", root, false,
				      0);
		goto out;
	}
	ret = pass_drain(p, read_fd, max_bytes, opts->stop);
	/* a drain stopped early: the kernel's next write fails, EPIPE */
	close(read_fd);
	pthread_join(thread, NULL);
	if (!ret && ks.err)
		ret = -ks.err;
	if (ret)
		ret = encio_error_set(e, ret, "send (BTRFS_IOC_SEND)", root,
				      false, 0);
out:
	if (root_fd >= 0)
		close(root_fd);
	send_roots_release(&r);
	if (ret)
		send_pass_release(p);
	return ret;
}

void send_pass_release(struct send_pass *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	free(p->ids);
	free(p->ctransids);
	p->ids = p->ctransids = NULL;
}

int send_pass_open(const struct send_pass *p, const struct kernel_send *ks)
{
	struct send_pass now = { .fd = -1 };
	bool same;
	int fd;

	if (p->fd < 0 || pass_record(&now, ks)) {
		send_pass_release(&now);
		return -ESTALE;
	}
	same = now.version == p->version && now.flags == p->flags &&
	       now.parent_id == p->parent_id && now.nr_ids == p->nr_ids &&
	       now.root_id == p->root_id &&
	       now.root_ctransid == p->root_ctransid &&
	       !memcmp(now.ids, p->ids, p->nr_ids * sizeof(*p->ids)) &&
	       !memcmp(now.ctransids, p->ctransids,
		       p->nr_ids * sizeof(*p->ctransids));
	send_pass_release(&now);
	if (!same)
		return -ESTALE;
	if (lseek(p->fd, 0, SEEK_SET))
		return -errno;
	fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}
