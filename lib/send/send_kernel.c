// SPDX-License-Identifier: GPL-2.0
/*
 * encio send of what the kernel computes: BTRFS_IOC_SEND writes the whole
 * stream of a subvolume, or of its difference from a parent, with the
 * data itself (BTRFS_SEND_FLAG_COMPRESSED from version 2 on: compressed
 * extents as ENCODED_WRITE, as btrfs send --compressed-data makes it), or
 * without it under --no-data. The kernel knows which inode each command
 * names and which data each range holds, also across renames, reused
 * inode numbers and a concurrent balance; nothing of that is rebuilt
 * here. Each command is relayed as it comes, but the SUBVOL or SNAPSHOT
 * command, which takes the name asked for, and END, which is ours to
 * place when several subvolumes make one stream.
 *
 * The kernel sends FILEATTR for an inode whose flags changed, none for a
 * new inode: a new file's or directory's flags are added right after its
 * creation (a file is still empty there, the only time btrfs takes
 * nocow), read from the inode the orphan name oINO-GEN-N names.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>

#include <btrfsutil.h>

#include "base/fsutil.h"
#include "base/kernel.h"
#include "base/le_bytes.h"
#include "fs/inode_flags.h"
#include "send/send_internal.h"

struct relay {
	struct send_ctx *ctx;
	const char *name; /* the subvolume's name in the stream, or NULL */
	int root_fd;
	uint64_t root_id;
	uint32_t sectorsize; /* of the subvolume sent */
	/* an inline extent's end in the file tail_path, 0: none pending */
	uint64_t tail;
	char tail_path[PATH_MAX];
	size_t tail_path_len;
	uint64_t parent_id; /* of an incremental stream, else 0 */
	/* the end of the data sent last, in the file data_path */
	uint64_t data_end;
	char data_path[PATH_MAX];
	size_t data_path_len;
};

/* A little-endian u32 or u64 attribute of @cmd; 0 if absent or not one. */
static uint64_t attr_uint(const struct stream_cmd *cmd, unsigned int attr)
{
	const struct stream_attr *a = &cmd->attr[attr];

	if (!a->present)
		return 0;
	if (a->len == sizeof(uint32_t))
		return le_get32(a->data);
	return a->len == sizeof(uint64_t) ? le_get64(a->data) : 0;
}

/* SUBVOL or SNAPSHOT, under the name asked for, with the total to carry. */
static int put_subvol(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	struct stream_writer *w = &r->ctx->w;
	unsigned int a;

	/* the kernel's order, PATH first: the same bytes where nothing changes */
	stream_begin_cmd(w, cmd->type);
	if (r->name)
		stream_put_string(w, BTRFS_SEND_A_PATH, r->name);
	else if (path->present)
		stream_put_bytes(w, BTRFS_SEND_A_PATH, path->data, path->len);
	for (a = BTRFS_SEND_A_UUID; a <= BTRFS_SEND_A_MAX; a++)
		if (a != BTRFS_SEND_A_PATH && cmd->attr[a].present)
			stream_put_bytes(w, a, cmd->attr[a].data,
					 cmd->attr[a].len);
	stream_put_total(w);
	return stream_end_cmd(w);
}

/* The summary's counts, from the commands as they pass. */
/*
 * Counted as they are written: those a resumed stream drops before its
 * point were counted by the run that was cut.
 */
static void count_cmd(struct send_ctx *ctx, const struct stream_cmd *cmd)
{
	struct send_stats *st = ctx->stats;

	if (ctx->w.skip)
		return;
	if (ctx->w.skip_pos && !st->resumed_at)
		st->resumed_at = ctx->w.skip_pos;
	st->commands++;
	switch (cmd->type) {
	case BTRFS_SEND_C_MKFILE:
		st->files++;
		break;
	case BTRFS_SEND_C_MKDIR:
		st->dirs++;
		break;
	case BTRFS_SEND_C_MKNOD:
	case BTRFS_SEND_C_MKFIFO:
	case BTRFS_SEND_C_MKSOCK:
	case BTRFS_SEND_C_SYMLINK:
	case BTRFS_SEND_C_LINK:
		st->others++;
		break;
	case BTRFS_SEND_C_UNLINK:
	case BTRFS_SEND_C_RMDIR:
		st->removed++;
		break;
	case BTRFS_SEND_C_WRITE:
		st->bytes_logical += cmd->attr[BTRFS_SEND_A_DATA].len;
		break;
	case BTRFS_SEND_C_ENCODED_WRITE:
		st->bytes_logical +=
			attr_uint(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN);
		st->bytes_encoded += cmd->attr[BTRFS_SEND_A_DATA].len;
		st->extents_encoded++;
		break;
	case BTRFS_SEND_C_CLONE:
		st->clones++;
		st->clone_bytes += attr_uint(cmd, BTRFS_SEND_A_CLONE_LEN);
		break;
	default:
		break;
	}
}

/* Inode @ino of generation @gen in subvolume @root, opened by handle. */
static int open_inode(const struct relay *r, uint64_t root, uint64_t ino,
		      uint32_t gen)
{
	union {
		struct file_handle fh;
		char bytes[sizeof(struct file_handle) +
			   sizeof(struct btrfs_fid_without_parent)];
	} h;
	struct btrfs_fid_without_parent fid;
	int fd;

	fid.objectid = ino;
	fid.root_objectid = root;
	fid.gen = gen;
	h.fh.handle_bytes = sizeof(fid);
	h.fh.handle_type = BTRFS_FID_TYPE_WITHOUT_PARENT;
	memcpy(h.fh.f_handle, &fid, sizeof(fid));
	fd = open_by_handle_at(r->root_fd, &h.fh,
			       O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The inode the orphan name at the end of @path names in the subvolume. */
static int open_orphan(const struct relay *r, const struct stream_attr *path)
{
	unsigned long long ino, gen, n;
	char last[NAME_MAX + 1];
	const char *slash;
	size_t len;

	slash = memrchr(path->data, '/', path->len);
	slash = slash ? slash + 1 : (const char *)path->data;
	len = path->len - (size_t)(slash - (const char *)path->data);
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(last, slash, len);
	last[len] = '\0';
	if (sscanf(last, "o%llu-%llu-%llu", &ino, &gen, &n) != 3 ||
	    gen > UINT32_MAX)
		return -ENOENT;
	return open_inode(r, r->root_id, ino, (uint32_t)gen);
}

/* FILEATTR of the new file or directory @cmd made, if it has flags. */
static int new_inode_flags(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	struct stream_writer *w = &r->ctx->w;
	unsigned int flags;
	int fd;

	if (w->version < 2 || !path->present)
		return 0;
	fd = open_orphan(r, path);
	if (fd < 0)
		return 0;
	flags = inode_flags_get(fd);
	close(fd);
	if (!flags)
		return 0;
	stream_begin_cmd(w, BTRFS_SEND_C_FILEATTR);
	stream_put_bytes(w, BTRFS_SEND_A_PATH, path->data, path->len);
	stream_put_u64(w, BTRFS_SEND_A_FILEATTR,
		       inode_flags_to_btrfs(flags,
					    cmd->type == BTRFS_SEND_C_MKFILE));
	return stream_end_cmd(w);
}

/*
 * An inline extent (at offset 0: btrfs has none elsewhere) stands for the
 * whole sector it starts, zeros past its data. With BTRFS_SEND_FLAG_COMPRESSED the kernel sends it as an
 * ENCODED_WRITE of its data alone, so in an incremental stream the rest
 * of that sector keeps what the parent's file had there (btrfs send
 * --compressed-data -p | btrfs receive gives wrong data). The zeros are
 * sent as a hole punched within the file's size once the next command
 * shows the file goes on past that sector: data beyond it, or a TRUNCATE
 * past the inline data. Never at EOF: a punch there rewrites the block.
 * Where nothing shows it (the size unchanged, the rest of the file too),
 * none is sent; encio receive zeroes that tail itself.
 */
static void note_inline_tail(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	uint64_t end = attr_uint(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN);

	/* btrfs has inline extents at offset 0 only */
	if (attr_uint(cmd, BTRFS_SEND_A_FILE_OFFSET) ||
	    !(end % r->sectorsize) || !path->present ||
	    path->len >= sizeof(r->tail_path))
		return;
	memcpy(r->tail_path, path->data, path->len);
	r->tail_path_len = path->len;
	r->tail = end;
}

/* Where the file goes on past the tail noted, the end of its zeros. */
static uint64_t tail_zeros_end(const struct relay *r,
			       const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	uint64_t sector_end = (r->tail / r->sectorsize + 1) * r->sectorsize;
	uint64_t size;

	if (!path->present || path->len != r->tail_path_len ||
	    memcmp(path->data, r->tail_path, path->len))
		return 0;
	/* prealloc past EOF (KEEP_SIZE) says nothing of the size */
	if (cmd->type == BTRFS_SEND_C_FALLOCATE &&
	    attr_uint(cmd, BTRFS_SEND_A_FALLOCATE_MODE) & FALLOC_FL_KEEP_SIZE)
		return 0;
	switch (cmd->type) {
	case BTRFS_SEND_C_FALLOCATE:
	case BTRFS_SEND_C_WRITE:
	case BTRFS_SEND_C_CLONE:
	case BTRFS_SEND_C_ENCODED_WRITE:
		return attr_uint(cmd, BTRFS_SEND_A_FILE_OFFSET) >= sector_end ?
			       sector_end :
			       0;
	case BTRFS_SEND_C_TRUNCATE:
		size = attr_uint(cmd, BTRFS_SEND_A_SIZE);
		if (size <= r->tail)
			return 0;
		return size < sector_end ? size : sector_end;
	default:
		return 0;
	}
}

static int put_tail_zeros(struct relay *r, const struct stream_cmd *cmd)
{
	struct stream_writer *w = &r->ctx->w;
	uint64_t end = tail_zeros_end(r, cmd);

	if (!end)
		return 0;
	stream_begin_cmd(w, BTRFS_SEND_C_FALLOCATE);
	stream_put_bytes(w, BTRFS_SEND_A_PATH, r->tail_path, r->tail_path_len);
	stream_put_u32(w, BTRFS_SEND_A_FALLOCATE_MODE,
		       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
	stream_put_u64(w, BTRFS_SEND_A_FILE_OFFSET, r->tail);
	stream_put_u64(w, BTRFS_SEND_A_SIZE, end - r->tail);
	return stream_end_cmd(w);
}

/*
 * The file @path names in the snapshot sent: exactly by its orphan name,
 * else by its path there, which is the stream's once the kernel has put
 * the inode in place (it sends an inode's data after its renames).
 */
static int open_sent_file(const struct relay *r, const struct stream_attr *path)
{
	char rel[PATH_MAX];
	int fd = open_orphan(r, path);

	if (fd != -ENOENT)
		return fd;
	if (path->len >= sizeof(rel))
		return -ENAMETOOLONG;
	memcpy(rel, path->data, path->len);
	rel[path->len] = '\0';
	return openat2_resolve(r->root_fd, rel,
			       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			       RESOLVE_CONFINED);
}

/* Whether @fd's extent at 0 is the one @cmd sends, byte for byte. */
static bool same_inline_extent(int fd, const struct stream_cmd *cmd)
{
	const struct stream_attr *data = &cmd->attr[BTRFS_SEND_A_DATA];
	struct btrfs_ioctl_encoded_io_args a = { 0 };
	char buf[65536];
	struct iovec iov = { buf, sizeof(buf) };
	ssize_t n;

	a.iov = &iov;
	a.iovcnt = 1;
	do
		n = ioctl(fd, BTRFS_IOC_ENCODED_READ, &a);
	while (n < 0 && errno == EINTR);
	return n >= 0 && (size_t)n == data->len &&
	       !memcmp(buf, data->data, n) &&
	       a.len == attr_uint(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN) &&
	       a.unencoded_len == attr_uint(cmd, BTRFS_SEND_A_UNENCODED_LEN) &&
	       a.compression == attr_uint(cmd, BTRFS_SEND_A_COMPRESSION);
}

/*
 * A compressed inline extent of a file whose size goes on past its data
 * but not past its sector (grown by truncate or fallocate): the kernel
 * counts its ENCODED_WRITE as reaching the size and sends no TRUNCATE,
 * so btrfs receive and encio receive alike left the file at the inline
 * data's end (a new file), or at the parent's size. The size is sent,
 * read from the file sent, found as open_sent_file() finds it and taken
 * only where its extent is the one the command carries.
 */
static int put_inline_size(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	uint64_t end = attr_uint(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN);
	struct stream_writer *w = &r->ctx->w;
	struct stat st;
	bool fix;
	int fd;

	if (attr_uint(cmd, BTRFS_SEND_A_FILE_OFFSET) || !path->present ||
	    end >= r->sectorsize || !end)
		return 0;
	fd = open_sent_file(r, path);
	if (fd < 0)
		return 0;
	fix = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	      (uint64_t)st.st_size > end &&
	      (uint64_t)st.st_size <= r->sectorsize &&
	      same_inline_extent(fd, cmd);
	close(fd);
	if (!fix)
		return 0;
	stream_begin_cmd(w, BTRFS_SEND_C_TRUNCATE);
	stream_put_bytes(w, BTRFS_SEND_A_PATH, path->data, path->len);
	stream_put_u64(w, BTRFS_SEND_A_SIZE, (uint64_t)st.st_size);
	return stream_end_cmd(w);
}

/* Where @cmd puts data in a file (WRITE, CLONE, ...), its end; else 0. */
static uint64_t data_cmd_end(const struct stream_cmd *cmd)
{
	uint64_t off = attr_uint(cmd, BTRFS_SEND_A_FILE_OFFSET);

	switch (cmd->type) {
	case BTRFS_SEND_C_WRITE:
		return off + cmd->attr[BTRFS_SEND_A_DATA].len;
	case BTRFS_SEND_C_ENCODED_WRITE:
		return off + attr_uint(cmd, BTRFS_SEND_A_UNENCODED_FILE_LEN);
	case BTRFS_SEND_C_CLONE:
		return off + attr_uint(cmd, BTRFS_SEND_A_CLONE_LEN);
	case BTRFS_SEND_C_UPDATE_EXTENT:
		return off + attr_uint(cmd, BTRFS_SEND_A_SIZE);
	case BTRFS_SEND_C_FALLOCATE:
		if (attr_uint(cmd, BTRFS_SEND_A_FALLOCATE_MODE) &
		    FALLOC_FL_KEEP_SIZE)
			return 0;
		return off + attr_uint(cmd, BTRFS_SEND_A_SIZE);
	default:
		return 0;
	}
}

static bool same_path(const struct stream_attr *path, const char *p, size_t len)
{
	return path->present && path->len == len && !memcmp(path->data, p, len);
}

/* The end of the data sent last in a file, as the commands pass. */
static void note_data_end(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	uint64_t end = data_cmd_end(cmd);

	if (!end || !path->present || path->len >= sizeof(r->data_path))
		return;
	if (!same_path(path, r->data_path, r->data_path_len)) {
		memcpy(r->data_path, path->data, path->len);
		r->data_path_len = path->len;
		r->data_end = 0;
	}
	if (end > r->data_end)
		r->data_end = end;
}

/* The size in the parent of the file @fd is in the snapshot sent. */
static int parent_size(const struct relay *r, int fd, uint64_t *size)
{
	struct stat st;
	unsigned int gen;
	int pfd, ret;

	if (fstat(fd, &st) || ioctl(fd, FS_IOC_GETVERSION, &gen))
		return -errno;
	pfd = open_inode(r, r->parent_id, st.st_ino, gen);
	if (pfd < 0)
		return pfd;
	ret = fstat(pfd, &st) ? -errno : 0;
	close(pfd);
	*size = (uint64_t)st.st_size;
	return ret;
}

/*
 * A file the difference grows by TRUNCATE, whose parent's size ends
 * within a sector: where the parent's and the snapshot's file share the
 * extent of that sector, the kernel sends nothing of it, but past the
 * parent's size the snapshot's bytes there need not be zeros (a later
 * snapshot as the parent, its file cut short inside the sector, which
 * btrfs does without rewriting it). btrfs receive then fills them with
 * zeros (btrfs send -p of such a parent gives wrong data). Those bytes
 * no command sent are sent as a WRITE before the TRUNCATE, where they are
 * not all zeros.
 */
static int put_parent_tail(struct relay *r, const struct stream_cmd *cmd)
{
	const struct stream_attr *path = &cmd->attr[BTRFS_SEND_A_PATH];
	uint64_t size = attr_uint(cmd, BTRFS_SEND_A_SIZE);
	uint64_t from, to, psize = 0;
	char buf[65536];
	struct stat st;
	ssize_t n, i;
	int fd, ret;

	if (!r->parent_id || r->ctx->opts.no_data || !path->present)
		return 0;
	fd = open_sent_file(r, path);
	if (fd < 0)
		return 0;
	/* the file the command names: a regular file of that size */
	ret = fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	      (uint64_t)st.st_size != size || parent_size(r, fd, &psize);
	if (ret || psize >= size || !(psize % r->sectorsize) ||
	    r->sectorsize > sizeof(buf)) {
		close(fd);
		return 0;
	}
	from = psize;
	if (same_path(path, r->data_path, r->data_path_len) &&
	    r->data_end > from)
		from = r->data_end;
	to = (psize / r->sectorsize + 1) * r->sectorsize;
	if (to > size)
		to = size;
	n = from < to ? pread(fd, buf, to - from, (off_t)from) : 0;
	close(fd);
	if (n != (ssize_t)(to - from) || !n)
		return n < 0 ? -errno : 0;
	for (i = 0; i < n && !buf[i]; i++)
		;
	if (i == n)
		return 0;
	stream_begin_cmd(&r->ctx->w, BTRFS_SEND_C_WRITE);
	stream_put_bytes(&r->ctx->w, BTRFS_SEND_A_PATH, path->data, path->len);
	stream_put_u64(&r->ctx->w, BTRFS_SEND_A_FILE_OFFSET, from);
	stream_put_data(&r->ctx->w, buf, (size_t)n);
	return stream_end_cmd(&r->ctx->w);
}

static int relay_cmd(struct relay *r, const struct stream_cmd *cmd)
{
	struct send_ctx *ctx = r->ctx;
	int ret = 0;

	if (cmd->type == BTRFS_SEND_C_END)
		return 0;
	count_cmd(ctx, cmd);
	if (r->tail)
		ret = put_tail_zeros(r, cmd);
	r->tail = 0;
	note_data_end(r, cmd);
	if (!ret && cmd->type == BTRFS_SEND_C_TRUNCATE)
		ret = put_parent_tail(r, cmd);
	if (!ret && (cmd->type == BTRFS_SEND_C_SUBVOL ||
		     cmd->type == BTRFS_SEND_C_SNAPSHOT))
		ret = put_subvol(r, cmd);
	else if (!ret)
		ret = stream_put_cmd(&ctx->w, cmd);
	if (!ret && (cmd->type == BTRFS_SEND_C_MKFILE ||
		     cmd->type == BTRFS_SEND_C_MKDIR))
		ret = new_inode_flags(r, cmd);
	if (!ret && cmd->type == BTRFS_SEND_C_ENCODED_WRITE) {
		note_inline_tail(r, cmd);
		ret = put_inline_size(r, cmd);
	}
	if (ret)
		return encio_error_set(ctx->e, -ret, "write stream to",
				       ctx->out_name, false, 0);
	send_progress(ctx);
	return 0;
}

static int relay_stream(struct relay *r, int read_fd)
{
	struct send_ctx *ctx = r->ctx;
	struct stream_reader rd;
	struct stream_cmd cmd;
	int ret;

	ret = stream_reader_init(&rd, read_fd, "the kernel's send stream",
				 ctx->e);
	if (ret)
		return ret;
	if (rd.version != ctx->w.version) {
		ret = encio_error_set(
			ctx->e, EPROTO,
			"send (the kernel's stream has another version)",
			ctx->src, false, 0);
		goto out;
	}
	while ((ret = stream_read_cmd(&rd, &cmd, ctx->e)) > 0) {
		ret = send_stopped(ctx) ?: relay_cmd(r, &cmd);
		if (ret)
			break;
	}
out:
	stream_reader_release(&rd);
	return ret;
}

/* The kernel's send run now, its stream relayed as it comes. */
static int relay_kernel(struct relay *r, struct kernel_send *ks,
			const char *root)
{
	struct send_ctx *ctx = r->ctx;
	pthread_t thread;
	int read_fd, ret;

	ret = send_kernel_start(ks, &thread, &read_fd);
	if (ret)
		return send_fail(ctx, ret, "start the send of", 0, false);
	ret = relay_stream(r, read_fd);
	/* a relay stopped early: the kernel's next write fails, EPIPE */
	close(read_fd);
	pthread_join(thread, NULL);
	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	if (ks->err && ks->err != EPIPE)
		ret = send_fail(ctx, ks->err, "send (BTRFS_IOC_SEND)", 0,
				false);
	return ret;
}

int send_kernel_tree(struct send_ctx *ctx, const char *root, const char *name,
		     uint64_t parent_id, const uint64_t *clone_ids,
		     size_t nr_clone_ids, bool end)
{
	struct relay r = { .ctx = ctx, .name = name, .parent_id = parent_id };
	struct kernel_send ks;
	struct statfs sfs;
	int root_fd, pass_fd = -ESTALE, ret;

	snprintf(ctx->src, sizeof(ctx->src), "%s", root);
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return send_fail(ctx, errno, "open", 0, false);
	r.root_fd = root_fd;
	if (fstatfs(root_fd, &sfs) || !sfs.f_bsize) {
		ret = send_fail(ctx, errno ?: EIO, "look up the sector size of",
				0, false);
		close(root_fd);
		return ret;
	}
	r.sectorsize = (uint32_t)sfs.f_bsize;
	if (btrfs_util_subvolume_id_fd(root_fd, &r.root_id)) {
		ret = send_fail(ctx, errno ?: EIO,
				"look up the subvolume id of", 0, false);
		close(root_fd);
		return ret;
	}
	send_kernel_init(&ks, root_fd, parent_id, clone_ids, nr_clone_ids,
			 ctx->w.version, ctx->opts.no_data);
	/*
	 * The kernel's stream holds its data: checked to the point by its
	 * bytes' fingerprint; it goes as the kernel wrote it, no layout added.
	 */
	ctx->w.skip_by_shape = false;
	ctx->w.layout = 0;
	/* a pass made before, if made for this: else the kernel's, now */
	if (ctx->opts.pass)
		pass_fd = send_pass_open(ctx->opts.pass, &ks);
	if (pass_fd >= 0) {
		ctx->stats->passes_reused++;
		ret = relay_stream(&r, pass_fd);
		close(pass_fd);
	} else {
		ret = relay_kernel(&r, &ks, root);
	}
	if (!ret && end) {
		stream_begin_cmd(&ctx->w, BTRFS_SEND_C_END);
		ret = send_end_cmd(ctx);
	}
	close(root_fd);
	return ret;
}
