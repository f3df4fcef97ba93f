/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs send stream (versions 1 to 3): a reader that checks every length and
 * crc32c and hands each command to typed callbacks, and a writer.
 */
#ifndef ENCIO_STREAM_H
#define ENCIO_STREAM_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/error.h"
#include "base/kernel.h"
#include "stream/resume.h"

/* No command is larger: the kernel's v2 buffer is 16 KiB + 128 KiB. */
#define STREAM_MAX_CMD_LEN (1024 * 1024)
#define STREAM_MAX_VERSION 3
#define STREAM_WHAT_LEN 320
/*
 * encio's own command, past the kernel's: the first of a resumed stream
 * (encio send -t), naming its resume point (resume.h), and only there:
 * after a header whose version is STREAM_VERSION_RESUMED with the
 * stream's own in its low byte. btrfs receive skips a command it does
 * not know and would apply the rest against no subvolume, paths taken
 * from /; a version past its own it refuses at the header, before any
 * command (6.2 takes up to 2, later releases up to 3). Nothing but
 * encio receive -s takes the command.
 */
#define STREAM_C_ENCIO_RESUME 64
/* "\x02enc" in the header's bytes for version 2: no btrfs version is near */
#define STREAM_VERSION_RESUMED 0x636e6500u
#define STREAM_VERSION_RESUMED_MASK 0xffffff00u
/*
 * encio send --subvolumes: a tree of subvolumes in one stream, after a
 * header whose version is STREAM_VERSION_SUBVOLUMES with its streams'
 * own in the low byte (btrfs receive refuses it there, before any
 * command: it cannot place writable or nested subvolumes). Per subvolume
 * in the plan's order, an ENCIO_SUBVOL command says what it is (attributes
 * below), then its own stream, header to END, as encio send writes it,
 * comes cut in ENCIO_DATA commands (a DATA attribute each); an END closes
 * the whole. Nothing but encio receive takes these commands.
 */
#define STREAM_VERSION_SUBVOLUMES 0x76627300u /* "\x02sbv" for version 2 */
#define STREAM_C_ENCIO_SUBVOL 65
#define STREAM_C_ENCIO_DATA 66
/* ENCIO_SUBVOL: where the subvolume is below SRC, "." for SRC itself */
#define STREAM_A_SUBVOL_PATH BTRFS_SEND_A_PATH
/* its UUID in SRC, and its ctransid there */
#define STREAM_A_SUBVOL_UUID BTRFS_SEND_A_UUID
#define STREAM_A_SUBVOL_CTRANSID BTRFS_SEND_A_CTRANSID
/* the received UUID its copy is marked with (btrfs send's choice) */
#define STREAM_A_SUBVOL_RECEIVED BTRFS_SEND_A_CLONE_UUID
/* a u64 of STREAM_SUBVOL_* */
#define STREAM_A_SUBVOL_FLAGS BTRFS_SEND_A_MODE
/* read-only in SRC */
#define STREAM_SUBVOL_READ_ONLY (1ULL << 0)
/* subvolumes nested in it follow: read-only only once they are placed */
#define STREAM_SUBVOL_CONTAINS (1ULL << 1)
/*
 * SRC's part in no subvolume below it (SRC is no subvolume of its own):
 * a directory in DEST, not a subvolume
 */
#define STREAM_SUBVOL_PLAIN (1ULL << 2)
/*
 * DEST holds its copy (the receiver's state said so): no stream follows,
 * the copy at its path is checked (received UUID, stransid the CTRANSID)
 */
#define STREAM_SUBVOL_IN_DEST (1ULL << 3)
/*
 * A copy DEST holds of a subvolume SRC no longer has at that path (the
 * receiver's state named it), to delete (send --delete-extra): no stream
 * follows; after the others, the deepest first
 */
#define STREAM_SUBVOL_EXTRA (1ULL << 4)
/*
 * Its stream resumes (ENCIO_RESUME) the partial receive -s kept of it,
 * which the receiver's state named: received with -s only
 */
#define STREAM_SUBVOL_RESUMED (1ULL << 5)
/*
 * On the first only: a subvolume of the stream is to resume a partial
 * (the state named one), so a receive without -s refuses it at once
 */
#define STREAM_SUBVOL_RESUMES (1ULL << 6)
#define STREAM_SUBVOL_KNOWN                                                  \
	(STREAM_SUBVOL_READ_ONLY | STREAM_SUBVOL_CONTAINS |                  \
	 STREAM_SUBVOL_PLAIN | STREAM_SUBVOL_IN_DEST | STREAM_SUBVOL_EXTRA | \
	 STREAM_SUBVOL_RESUMED | STREAM_SUBVOL_RESUMES)

/*
 * encio send's estimate of its whole output, for the receiver's progress:
 * a SIZE attribute after the others in the output's first SUBVOL or
 * SNAPSHOT command, or in the first UTIMES after it where the estimate
 * came later (btrfs receive ignores it there), or in a resumed stream's
 * ENCIO_RESUME command under this attribute (SIZE is its fingerprint).
 */
#define STREAM_A_RESUME_TOTAL BTRFS_SEND_A_CLONE_LEN
/* the total's attribute: its TLV header and a u64 */
#define STREAM_TOTAL_ATTR_LEN (BTRFS_SEND_TLV_HEADER_LEN + 8)
/*
 * How encio send laid the subvolume's stream out (resume.h: a point's
 * layout), a u64 before the total in the SUBVOL command of each tree it
 * walks (btrfs receive ignores it; the kernel's streams go without), and
 * in ENCIO_RESUME; there too the point's shape fingerprint.
 */
#define STREAM_A_LAYOUT BTRFS_SEND_A_INO
#define STREAM_A_RESUME_LAYOUT BTRFS_SEND_A_RDEV
#define STREAM_A_RESUME_SHAPE BTRFS_SEND_A_MODE

struct stream_attr {
	const unsigned char *data;
	uint32_t len;
	bool present;
};

struct stream_cmd {
	uint16_t type;
	uint32_t len;		   /* body bytes */
	uint64_t offset;	   /* of the command header in the stream */
	uint32_t crc;		   /* its crc32c, verified */
	const unsigned char *body; /* its @len bytes of attributes */
	struct stream_attr attr[BTRFS_SEND_A_MAX + 1];
};

struct stream_reader {
	int fd;
	uint32_t version;
	uint64_t offset; /* stream bytes consumed */
	unsigned char *buf;
	size_t buf_len; /* valid bytes in buf */
	size_t buf_pos; /* next unread byte */
	size_t buf_cap;
	bool eof;
	/* a resumed stream's header read: ENCIO_RESUME must come next */
	bool resume_due;
	/* a header of STREAM_VERSION_SUBVOLUMES read: its commands are taken */
	bool subvolumes;
	const char *name; /* for messages */
	/* encio send's estimate of the stream's size; 0: untold */
	uint64_t sender_total;
	char what[STREAM_WHAT_LEN]; /* the last error's description */
	/* set by a signal handler: a read it interrupts gives -EINTR */
	const volatile sig_atomic_t *stop;
};

struct stream_encoded_write {
	uint64_t offset;
	uint64_t unencoded_file_len;
	uint64_t unencoded_len;
	uint64_t unencoded_offset;
	uint32_t compression; /* BTRFS_ENCODED_IO_COMPRESSION_* */
	uint32_t encryption;
	const void *data;
	size_t len;
};

/*
 * One callback per command; NULL skips it. Paths are as in the stream,
 * relative to the subvolume, checked to be non-empty strings without NUL
 * (their confinement is the receiver's business). A callback returns 0 or
 * -errno, which stops the stream.
 */
struct stream_ops {
	int (*subvol)(const char *path, const uint8_t *uuid, uint64_t ctransid,
		      void *arg);
	int (*snapshot)(const char *path, const uint8_t *uuid,
			uint64_t ctransid, const uint8_t *parent_uuid,
			uint64_t parent_ctransid, void *arg);
	int (*mkfile)(const char *path, void *arg);
	int (*mkdir)(const char *path, void *arg);
	int (*mknod)(const char *path, uint64_t mode, uint64_t rdev, void *arg);
	int (*mkfifo)(const char *path, void *arg);
	int (*mksock)(const char *path, void *arg);
	int (*symlink)(const char *path, const char *target, void *arg);
	int (*rename)(const char *from, const char *to, void *arg);
	int (*link)(const char *path, const char *target, void *arg);
	int (*unlink)(const char *path, void *arg);
	int (*rmdir)(const char *path, void *arg);
	int (*set_xattr)(const char *path, const char *name, const void *data,
			 size_t len, void *arg);
	int (*remove_xattr)(const char *path, const char *name, void *arg);
	int (*write)(const char *path, uint64_t offset, const void *data,
		     size_t len, void *arg);
	int (*clone)(const char *path, uint64_t offset, uint64_t len,
		     const uint8_t *clone_uuid, uint64_t clone_ctransid,
		     const char *clone_path, uint64_t clone_offset, void *arg);
	int (*truncate)(const char *path, uint64_t size, void *arg);
	int (*chmod)(const char *path, uint64_t mode, void *arg);
	int (*chown)(const char *path, uint64_t uid, uint64_t gid, void *arg);
	int (*utimes)(const char *path, const struct timespec *atime,
		      const struct timespec *mtime,
		      const struct timespec *ctime, void *arg);
	int (*update_extent)(const char *path, uint64_t offset, uint64_t len,
			     void *arg);
	int (*fallocate)(const char *path, uint32_t mode, uint64_t offset,
			 uint64_t len, void *arg);
	int (*fileattr)(const char *path, uint64_t attr, void *arg);
	int (*encoded_write)(const char *path,
			     const struct stream_encoded_write *ew, void *arg);
	int (*enable_verity)(const char *path, uint8_t algorithm,
			     uint32_t block_size, const void *salt,
			     size_t salt_len, const void *sig, size_t sig_len,
			     void *arg);
	int (*end)(void *arg);
	/* STREAM_C_ENCIO_RESUME; NULL: refused */
	int (*resume)(const struct resume_point *p, void *arg);
	/* after each command applied without error */
	int (*applied)(const struct stream_cmd *cmd, void *arg);
};

/* Read and check the stream header. Returns 0 or -errno with @e filled. */
int stream_reader_init(struct stream_reader *r, int fd, const char *name,
		       struct encio_error *e);
void stream_reader_release(struct stream_reader *r);

/*
 * Read the next command into @cmd (pointing into the reader's buffer, valid
 * until the next call). Returns 1, 0 at the end of the stream, or -errno
 * with @e naming the command's offset.
 */
int stream_read_cmd(struct stream_reader *r, struct stream_cmd *cmd,
		    struct encio_error *e);

/* Read every command and dispatch it to @ops. Returns 0 or -errno. */
int stream_process(struct stream_reader *r, const struct stream_ops *ops,
		   void *arg, struct encio_error *e);

const char *stream_cmd_name(unsigned int cmd);

/* Writer: commands are built in a buffer and written in large writes. */
struct stream_writer {
	int fd;
	uint32_t version;
	unsigned char *buf;
	size_t len; /* bytes in buf */
	size_t cap;
	size_t cmd_start; /* of the command being built */
	uint64_t written; /* bytes written to fd */
	int err;	  /* first error, sticky */
	/* set by a signal handler: a write interrupted then gives -EINTR */
	const volatile sig_atomic_t *stop;
	/*
	 * stream_writer_skip(): the commands before this point are dropped,
	 * the header too; at the point, a resumed stream's header and an
	 * ENCIO_RESUME command, then the rest.
	 */
	const struct resume_point *skip;
	uint64_t skip_pos, skip_fp, skip_shape, skip_cmds;
	/* the commands dropped carry no data: their shape alone is checked */
	bool skip_by_shape;
	/* before the point's anchor: commands dropped, not even counted */
	bool skip_blind;
	/* the estimate carried by the next SUBVOL, SNAPSHOT or ENCIO_RESUME */
	uint64_t total;
	/* the layout each SUBVOL or SNAPSHOT command carries; 0: none */
	uint64_t layout;
};

/*
 * A writer on STREAM_COUNT_ONLY writes nothing: it counts the bytes the
 * stream would take (written), the commands' data left uncopied.
 */
#define STREAM_COUNT_ONLY (-1)
int stream_writer_init(struct stream_writer *w, int fd, uint32_t version);
/*
 * A writer of encio send --subvolumes' stream: its header, then the
 * commands put (ENCIO_SUBVOL, ENCIO_DATA, END).
 */
int stream_writer_init_subvolumes(struct stream_writer *w, int fd);
/*
 * Drop what comes before @p, checking it is what @p fingerprinted (a
 * stream that differs there gives -ESTALE at the first command past it,
 * or at stream_writer_finish(); one of another layout, -EPROTO at its
 * first command); @p must live while the writer does. With @by_shape the
 * commands dropped may be put without their data (stream_put_data() of
 * NULL) and only their shape is checked.
 */
void stream_writer_skip(struct stream_writer *w, const struct resume_point *p,
			bool by_shape);
/*
 * The sender goes to the point's anchor (resume.h) from what it knows
 * without reading: from now on what it puts is dropped uncounted, until
 * stream_writer_at_anchor(), called before the command that makes inode
 * @ino and is the anchor by its number, goes on from the anchor's
 * position and fingerprints (-ESTALE if @ino is not the anchor's).
 * Nothing where the point has no anchor.
 */
void stream_writer_skip_to_anchor(struct stream_writer *w);
void stream_writer_at_anchor(struct stream_writer *w, uint64_t ino);
/* Whether the writer is dropping commands uncounted, to an anchor. */
static inline bool stream_writer_blind(const struct stream_writer *w)
{
	return w->skip && w->skip_blind;
}
/* Whether @type is a command that makes an inode (MKFILE, MKDIR, ...). */
bool stream_cmd_makes_inode(uint16_t type);
/* What is put now is not written (send -n, or before a resume point). */
static inline bool stream_writer_drops(const struct stream_writer *w)
{
	return w->fd == STREAM_COUNT_ONLY || w->skip;
}
int stream_writer_finish(struct stream_writer *w); /* flush; first error */
/*
 * The stream failed: if none of it reached the output yet, none will (a
 * send refused before its first command writes not even the header).
 */
void stream_writer_abandon(struct stream_writer *w);
/*
 * Before ending a SUBVOL or SNAPSHOT command: w->layout, then, in the
 * output's first, w->total as its last attribute (not in a command
 * dropped before a resume point: the ENCIO_RESUME command carries it
 * then).
 */
void stream_put_total(struct stream_writer *w);
/*
 * A SUBVOL, SNAPSHOT or UTIMES command's length and crc32c as they are
 * without the total the writer added (as encio send -t regenerates it, for
 * the resume point's position and fingerprint); as read where it has none.
 */
void stream_cmd_without_total(const struct stream_cmd *cmd, uint32_t *len,
			      uint32_t *crc);
/* The layout a SUBVOL or SNAPSHOT command of encio send carries; 0: none. */
uint64_t stream_cmd_layout(const struct stream_cmd *cmd);
/*
 * The resume point @p (resume.h) after one more command @cmd, which ended
 * at stream offset @end: its fingerprints, count and position, from
 * *@base, where its subvolume's first command began (a SUBVOL or SNAPSHOT
 * sets it, and @p's layout), moved past the totals encio send adds (send
 * -t regenerates the stream without them). encio receive -s and encio
 * stream-cut find their points so.
 */
void stream_point_add(struct resume_point *p, uint64_t *base,
		      const struct stream_cmd *cmd, uint64_t end);
void stream_writer_release(struct stream_writer *w);

void stream_begin_cmd(struct stream_writer *w, uint16_t cmd);
void stream_put_u32(struct stream_writer *w, uint16_t attr, uint32_t value);
void stream_put_u64(struct stream_writer *w, uint16_t attr, uint64_t value);
void stream_put_string(struct stream_writer *w, uint16_t attr, const char *s);
void stream_put_uuid(struct stream_writer *w, uint16_t attr,
		     const uint8_t *uuid);
void stream_put_timespec(struct stream_writer *w, uint16_t attr,
			 const struct timespec *ts);
void stream_put_bytes(struct stream_writer *w, uint16_t attr, const void *data,
		      size_t len);
/*
 * The DATA attribute; from version 2 it must come last in its command.
 * @data NULL where the writer drops what is put (its bytes left as they
 * are).
 */
void stream_put_data(struct stream_writer *w, const void *data, size_t len);
int stream_end_cmd(struct stream_writer *w);
/*
 * A command read by stream_read_cmd() from a stream of the writer's
 * version, its attributes copied as they are, its crc32c made anew.
 */
int stream_put_cmd(struct stream_writer *w, const struct stream_cmd *cmd);
/* A stream header, to start another stream after an END. */
void stream_put_header(struct stream_writer *w);

/*
 * A pipe carrying a stream gets a larger buffer (1 MiB, the default
 * pipe-max-size), so that sender and receiver block on each other less
 * often; nothing for other files, and failure is harmless.
 */
void stream_fd_tune(int fd);

#endif
