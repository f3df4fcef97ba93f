/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The I/O engine: btrfs encoded reads and writes (and plain reads) through
 * one of three backends, with many requests in flight, each with its own
 * args struct, iovec vector and buffer slot.
 */
#ifndef ENCIO_ENGINE_H
#define ENCIO_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/kernel.h"
#include "io/bufpool.h"

enum encio_io_mode {
	ENCIO_IO_AUTO,
	ENCIO_IO_URING_FIXED, /* URING_CMD + IORING_URING_CMD_FIXED, registered slots */
	ENCIO_IO_URING, /* URING_CMD on the same slots, unregistered */
	ENCIO_IO_IOCTL, /* BTRFS_IOC_ENCODED_READ/WRITE */
	ENCIO_IO_NONE,	/* encoded I/O impossible: plain or decoded */
	ENCIO_IO_NR_MODES,
};

enum encio_fixed_state {
	ENCIO_FIXED_UNKNOWN,
	ENCIO_FIXED_HONOURED,
	ENCIO_FIXED_IGNORED,
};

enum engine_op {
	ENGINE_OP_ENCODED_READ,
	ENGINE_OP_ENCODED_WRITE,
	ENGINE_OP_READ, /* plain read into the slot */
};

/* Each slot holds one whole compressed extent; a vector of this many iovecs. */
#define ENGINE_SLOT_SIZE BTRFS_MAX_COMPRESSED
#define ENGINE_IOVS_PER_SLOT 4
#define ENGINE_DEFAULT_DEPTH 32
#define ENGINE_MAX_DEPTH 1024

struct engine_req {
	struct btrfs_ioctl_encoded_io_args args;
	struct iovec iov[ENGINE_IOVS_PER_SLOT];
	unsigned int slot;
	enum engine_op op;
	enum encio_io_mode mode;
	int fd;
	uint64_t offset;
	size_t len;	 /* bytes asked: plain read, or encoded bytes written */
	ssize_t res;	 /* bytes, or -errno */
	void *priv;	 /* the caller's */
	uint64_t cookie; /* the caller's too */
	struct engine_req *next;
	bool in_ring;	/* the kernel owns it until its completion is reaped */
	bool owned;	/* got and not put yet */
	bool in_flight; /* queued and not reaped yet */
	/*
	 * A uring encoded read keeps the inode's extent range [lock_start,
	 * lock_end] locked until its completion runs in this task; plain
	 * reads use the same fields for the range they read.
	 */
	bool holds_lock;
	dev_t dev;
	ino_t ino;
	uint64_t lock_start;
	uint64_t lock_end;
};

/* How the ring is set up (0 is the default). */
enum engine_ring_setup {
	/* SINGLE_ISSUER|DEFER_TASKRUN where the kernel accepts them */
	ENGINE_RING_DEFER_TASKRUN,
	/* no setup flags: completions run as task work at any transition */
	ENGINE_RING_PLAIN,
};

struct engine_config {
	unsigned int depth;
	int force_backing; /* -1, or BUFPOOL_HUGETLB / BUFPOOL_THP / BUFPOOL_NORMAL */
	size_t slot_size; /* 0: ENGINE_SLOT_SIZE; smaller ones provoke ENOBUFS */
	enum engine_ring_setup ring_setup;
	/* bounded io-wq workers for punted requests (encoded writes); 0: the
	 * kernel's default (as many as there is work for) */
	unsigned int iowq_workers;
	/*
	 * Several encoded reads of one inode in the ring at once (their
	 * locked ranges apart): deep queues on a single file, but a process
	 * killed while another one writes that file can hang for good in
	 * the kernel (see engine.c). Off: one at a time per inode, except on
	 * read-only mounts and subvolumes, where no one writes.
	 */
	bool concurrent_inode_reads;
};

struct engine {
	struct bufpool pool;
	struct engine_req *reqs; /* one per slot */
	struct io_uring *ring;	 /* NULL when io_uring is unavailable */
	unsigned int ring_flags; /* IORING_SETUP_* the ring got */
	bool defer_taskrun;	 /* SINGLE_ISSUER|DEFER_TASKRUN accepted */
	bool ring_closes;	 /* engine_close() through the ring */
	enum engine_ring_setup ring_setup; /* as configured */
	unsigned int iowq_workers;	   /* as configured, 0 default */
	bool concurrent_inode_reads;	   /* as configured */
	dev_t ro_dev;	/* the last device asked whether it is read-only */
	int ro_dev_ans; /* its answer: 1, 0, or -1 not asked yet */
	bool buffers_registered;
	size_t registered_bytes;
	unsigned int depth;
	unsigned int in_ring;	 /* submitted to the ring, not yet reaped */
	unsigned int to_submit;	 /* prepared SQEs not yet submitted */
	struct engine_req *done; /* completed synchronously, not yet reaped */
	struct engine_req **done_tail;
	/* reads waiting for an overlapping encoded read to complete */
	struct engine_req *held;
	struct engine_req **held_tail;
	unsigned int nr_held;
	unsigned int nr_locks; /* requests in the ring with holds_lock */
};

/* What the probe found for one file (reads) or directory (writes). */
struct encio_probe {
	int read_err[ENCIO_IO_NR_MODES]; /* 0 works, else errno (-1 untried) */
	int write_err[ENCIO_IO_NR_MODES];
	enum encio_io_mode read_mode; /* chosen */
	enum encio_io_mode write_mode;
	enum encio_fixed_state fixed;
	bool write_punted; /* a uring encoded write ran on io-wq workers */
	/*
	 * auto reads through the ioctl: the source can be written while it
	 * is read, and ring reads of it could then hang a killed process
	 */
	bool read_source_writable;
	int read_none_err; /* why read_mode is NONE */
	int write_none_err;
};

int engine_init(struct engine *engine, const struct engine_config *config);
void engine_release(struct engine *engine);

/*
 * A free request with its slot, or NULL when all are in flight. It is the
 * caller's until engine_put_req(), and the engine's from each queueing call
 * until engine_reap() returns it: not queued twice, not put meanwhile
 * (ENCIO_ASSERT in the sanitizer build).
 */
struct engine_req *engine_get_req(struct engine *engine);
void engine_put_req(struct engine *engine, struct engine_req *req);

static inline void *engine_req_buf(const struct engine *engine,
				   const struct engine_req *req)
{
	return bufpool_slot_addr(&engine->pool, req->slot);
}

/*
 * Queue an operation. @mode is the backend for this request; ioctl and plain
 * reads done without a ring complete at once and are returned by the next
 * engine_reap(). For a write, the caller fills req->args (len,
 * unencoded_len, unencoded_offset, compression) and puts @encoded_len bytes
 * at the start of the slot.
 */
void engine_encoded_read(struct engine *engine, struct engine_req *req,
			 enum encio_io_mode mode, int fd, uint64_t offset);
/*
 * An encoded read the caller answered itself, from what it already had:
 * it filled req->args (len, unencoded_len, unencoded_offset, compression)
 * and put @res bytes at the start of the slot. Returned by the next
 * engine_reap() like any encoded read.
 */
void engine_encoded_read_answered(struct engine *engine, struct engine_req *req,
				  int fd, uint64_t offset, size_t res);
/*
 * One encoded write by ioctl from @buf (@n encoded bytes), no engine and no
 * slot: for callers whose data is already in memory. 0 or -errno.
 */
int encoded_write_ioctl(int fd, const void *buf, size_t n, uint64_t offset,
			uint64_t len, uint64_t unencoded_len,
			uint64_t unencoded_offset, int compression);

void engine_encoded_write(struct engine *engine, struct engine_req *req,
			  enum encio_io_mode mode, int fd, uint64_t offset,
			  size_t encoded_len);
void engine_read(struct engine *engine, struct engine_req *req,
		 enum encio_io_mode mode, int fd, uint64_t offset, size_t len);

/*
 * Submit what is queued and return one completed request (waiting for one if
 * @wait), or NULL when nothing is in flight / ready. A ring failure is
 * reported in *@err only once the kernel owns none of the engine's
 * requests: all of them are then completed (those whose completion the
 * ring lost with res -ECANCELED) and returned by this and later calls.
 */
struct engine_req *engine_reap(struct engine *engine, bool wait, int *err);

/* Requests issued and not yet reaped (held back, in the ring or done). */
unsigned int engine_inflight(const struct engine *engine);

/*
 * Cancel every request in flight, wait until the kernel owns none of them
 * and give all their slots back (their results are dropped): for callers
 * about to free what the requests point to. Returns 0, or the first ring
 * error met on the way (it still waited until nothing was in flight).
 */
int engine_cancel_all(struct engine *engine);

/*
 * Close @fd with the next batch of submissions, not a syscall of its own
 * (close(2) at once without a ring, or with the ring full). Only from the
 * thread that submits.
 */
void engine_close(struct engine *engine, int fd);

/* Submit what is queued (closes included) now. */
void engine_flush(struct engine *engine);

/*
 * Wait until @req, the only request in flight, completes; returns its
 * result (bytes or -errno). For one-off requests and probes.
 */
ssize_t engine_wait(struct engine *engine, struct engine_req *req);

/*
 * Probe encoded reads on the open file @fd and encoded writes into the
 * directory @dirfd (a scratch O_TMPFILE, never a visible name), then choose
 * the mode per direction for @want (ENCIO_IO_AUTO or a forced mode). Returns
 * 0, or -errno when a forced mode is unsupported (then the probe says why).
 */
int engine_probe_read(struct engine *engine, int fd, enum encio_io_mode want,
		      struct encio_probe *probe);
int engine_probe_write(struct engine *engine, int dirfd,
		       enum encio_io_mode want, struct encio_probe *probe);

/*
 * A scratch O_TMPFILE in the directory @dirfd holding one small zstd extent
 * written by the encoded write ioctl, for probing reads where there is no
 * file to read. Returns the open file, or -errno; *@write_err gets the
 * write's errno (0 when it worked, then the file holds the extent).
 */
int engine_probe_scratch(struct engine *engine, int dirfd, int *write_err);

/*
 * One probe request through @mode alone: an encoded read at offset 0 of
 * @fd, or (@write) an encoded write of one small zstd extent at offset 0 of
 * @fd. Returns 0 or a positive errno. For reports that try every mode even
 * where the ioctl already failed.
 */
int engine_probe_one(struct engine *engine, int fd, enum encio_io_mode mode,
		     bool write);

const char *encio_io_mode_name(enum encio_io_mode mode);
int encio_io_mode_parse(const char *name, enum encio_io_mode *mode);
const char *encio_fixed_state_desc(enum encio_fixed_state state);

#endif
