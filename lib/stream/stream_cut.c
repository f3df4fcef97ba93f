// SPDX-License-Identifier: GPL-2.0
/*
 * A stream file cut short (send -f stopped, a copy cut on its way): the
 * resume point at its last whole command, found as encio receive -s finds
 * it while it applies the stream, so that encio send -t can append the
 * rest to the file.
 */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "base/le_bytes.h"
#include "stream/resume.h"
#include "stream/stream.h"

static void point_begin(struct resume_point *p, const struct stream_cmd *cmd,
			const struct stream_reader *r)
{
	const struct stream_attr *a = &cmd->attr[BTRFS_SEND_A_PATH];
	const struct stream_attr *uuid = &cmd->attr[BTRFS_SEND_A_UUID];
	const struct stream_attr *parent = &cmd->attr[BTRFS_SEND_A_CLONE_UUID];
	const struct stream_attr *ct = &cmd->attr[BTRFS_SEND_A_CTRANSID];
	const struct stream_attr *pct = &cmd->attr[BTRFS_SEND_A_CLONE_CTRANSID];

	memset(p, 0, sizeof(*p));
	if (a->present && a->len <= NAME_MAX)
		memcpy(p->name, a->data, a->len);
	if (uuid->present && uuid->len == BTRFS_UUID_SIZE)
		memcpy(p->uuid, uuid->data, BTRFS_UUID_SIZE);
	if (ct->present && ct->len == 8)
		p->ctransid = le_get64(ct->data);
	if (cmd->type == BTRFS_SEND_C_SNAPSHOT && parent->present &&
	    parent->len == BTRFS_UUID_SIZE)
		memcpy(p->parent_uuid, parent->data, BTRFS_UUID_SIZE);
	if (cmd->type == BTRFS_SEND_C_SNAPSHOT && pct->present && pct->len == 8)
		p->parent_ctransid = le_get64(pct->data);
	p->version = r->version;
	p->flags = RESUME_POINT_APPEND;
}

int stream_file_point(int fd, const char *name, struct resume_point *p,
		      uint64_t *end, struct encio_error *e)
{
	struct stream_reader r;
	struct stream_cmd cmd;
	struct encio_error ignored;
	uint64_t base = 0;
	bool begun = false;
	int ret;

	ret = stream_reader_init(&r, fd, name, e);
	if (ret)
		return ret;
	/* what follows the last whole command is what the cut left */
	while ((ret = stream_read_cmd(&r, &cmd, &ignored)) == 1) {
		if (cmd.type == STREAM_C_ENCIO_RESUME) {
			ret = encio_error_set(
				e, EPROTO,
				"resume (a resumed stream, of encio send -t: only a stream from its start can be resumed in its file)",
				name, false, 0);
			goto out;
		}
		if (cmd.type == BTRFS_SEND_C_SUBVOL ||
		    cmd.type == BTRFS_SEND_C_SNAPSHOT) {
			point_begin(p, &cmd, &r);
			begun = true;
		}
		if (!begun)
			continue;
		stream_point_add(p, &base, &cmd, r.offset);
		*end = r.offset;
	}
	/* a command cut or not whole is the cut; a failed read is not */
	if (ret < 0 && ignored.err != EBADMSG && ignored.err != EMSGSIZE) {
		*e = ignored;
		goto out;
	}
	ret = begun ? 0 :
		      encio_error_set(
			      e, ENODATA,
			      "resume (no subvolume's first command is whole in it: send it whole again)",
			      name, false, 0);
out:
	stream_reader_release(&r);
	return ret;
}
