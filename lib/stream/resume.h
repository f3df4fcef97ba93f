/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Resumable streams: where a receive that stopped short can go on.
 *
 * A resume point names one subvolume's stream (its UUID and ctransid as
 * its SUBVOL or SNAPSHOT command gave them, the parent's for a
 * snapshot, the stream version, the layout its sender gave it), a
 * position in it (the bytes of its commands from that first one on, up
 * to a command boundary) and two fingerprints of the commands before the
 * position: of their bytes, and of their shape (types and lengths).
 * encio receive -s keeps one with the partial subvolume; encio receive
 * --resume-token prints it as a token; encio send -t sends the rest after
 * an ENCIO_RESUME command that names the point again. A stream the kernel
 * computes is regenerated up to the point and checked against the first
 * fingerprint; a tree encio walks is skipped up to the point from its
 * metadata alone, no data read, and checked against the second. The point
 * also names its anchor, the last command before it that made an inode:
 * a walked tree's resume goes there from the tree's names alone, no inode
 * before it read, and is checked against the shape from there on.
 */
#ifndef ENCIO_RESUME_H
#define ENCIO_RESUME_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/kernel.h"

#define RESUME_POINT_PACKED_MAX (116 + NAME_MAX + 6 * 8)
/* Version 2 had no anchor: its points are still read. */
#define RESUME_TOKEN_VERSION 3
/* "3-" and the hex of the point and its crc32c */
#define RESUME_TOKEN_MAX (2 + 2 * (RESUME_POINT_PACKED_MAX + 4) + 1)

struct resume_point {
	char name[NAME_MAX + 1]; /* the subvolume's name in the stream */
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid;
	uint8_t parent_uuid[BTRFS_UUID_SIZE]; /* zero for a full stream */
	uint64_t parent_ctransid;
	uint32_t version; /* of the stream */
	uint64_t position;
	uint64_t fingerprint;
	uint64_t shape;	   /* the fingerprint of types and lengths only */
	uint64_t commands; /* before the position */
	/*
	 * What the sender's SUBVOL or SNAPSHOT command said of how its
	 * stream is laid out (encio's layout version, the options that
	 * shape it); 0: nothing (btrfs send)
	 */
	uint64_t layout;
	uint32_t flags; /* RESUME_POINT_* */
	/*
	 * The last command before the position that made an inode (MKFILE,
	 * MKDIR, MKNOD, MKFIFO, MKSOCK or SYMLINK, with its INO): its number
	 * among those of the subvolume's stream, its INO, and the position,
	 * fingerprints and count of the commands before it.
	 */
	struct resume_anchor {
		uint64_t creates; /* 0: none yet; RESUME_ANCHOR_UNKNOWN */
		uint64_t ino;
		uint64_t position;
		uint64_t fingerprint;
		uint64_t shape;
		uint64_t commands;
	} anchor;
};

/* A point of version 2 (and all that follow it) has no anchor. */
#define RESUME_ANCHOR_UNKNOWN UINT64_MAX

/* Whether @p's anchor may be gone to (a point's own, checked). */
static inline bool resume_point_anchored(const struct resume_point *p)
{
	return p->anchor.creates &&
	       p->anchor.creates != RESUME_ANCHOR_UNKNOWN &&
	       p->anchor.position < p->position &&
	       p->anchor.commands < p->commands;
}

/*
 * The point ends a stream file cut short (stream_file_point()): the rest
 * is appended to it, without a header or ENCIO_RESUME, so that the file
 * reads as one stream.
 */
#define RESUME_POINT_APPEND 1u

/*
 * The fingerprint of the commands so far, after one more command; the
 * shape's is the same with a zero crc32c.
 */
uint64_t resume_fingerprint_add(uint64_t fp, uint16_t type, uint32_t len,
				uint32_t crc);

/* @p as a token of at most RESUME_TOKEN_MAX bytes, NUL included. */
void resume_token_encode(const struct resume_point *p, char *token);
/* 0, or -EINVAL for a token that is not one (its checksum included). */
int resume_token_decode(const char *token, struct resume_point *p);

/*
 * The resume point at the end of the last whole command of the stream
 * file @fd (@name in messages), of the last subvolume it begins; *@end
 * that command's end, where the file is to be cut. -ENODATA where no
 * subvolume's first command is whole, -EPROTO for a resumed stream
 * (ENCIO_RESUME), else 0 or -errno with @e filled.
 */
struct encio_error;
int stream_file_point(int fd, const char *name, struct resume_point *p,
		      uint64_t *end, struct encio_error *e);

/* The point's fields, little-endian, for a record: returns the length. */
size_t resume_point_pack(const struct resume_point *p, uint8_t *buf);
/* 0, or -EINVAL; *@used the bytes read. */
int resume_point_unpack(const uint8_t *buf, size_t len, struct resume_point *p,
			size_t *used);

#endif
