// SPDX-License-Identifier: GPL-2.0
/*
 * What a copy made by encio receive of a send --subvolumes stream holds,
 * for the next send: its subvolumes listed as the planner lists SRC's
 * (subvol_plan_build()), the read-only ones that carry encio's mark,
 * unchanged since (received_mark_check()), by the received UUID and
 * stransid the next stream's differences name their parents by; and the
 * partial receive -s kept of the subvolume a receive had in flight when
 * it stopped (its run directory names it: subvols_run_dir.c), for the
 * next send to resume.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "subvols/copy_subvols_internal.h"
#include "subvols/subvols_stream.h"
#include "fs/received_mark.h"

/* the line of a partial receive to resume, before its token and path */
#define RESUME_LINE "resume "

void subvols_state_release(struct subvols_state *st)
{
	size_t i;

	for (i = 0; i < st->nr; i++)
		free(st->v[i].rel);
	free(st->v);
	free(st->resume_rel);
	st->v = NULL;
	st->nr = 0;
	st->resume_rel = NULL;
}

static int state_add(struct subvols_state *st, const uint8_t *uuid,
		     uint64_t stransid, const char *rel, bool read_only)
{
	struct subvols_state_entry *v;

	v = realloc(st->v, (st->nr + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->v = v;
	v = &v[st->nr];
	memcpy(v->received_uuid, uuid, BTRFS_UUID_SIZE);
	v->stransid = stransid;
	v->read_only = read_only;
	v->rel = strdup(rel);
	if (!v->rel)
		return -ENOMEM;
	st->nr++;
	return 0;
}

/*
 * @en as encio received it and unchanged since (a writable one holds the
 * moment of the snapshot it was received from, the next run's parent,
 * where no inode in it changed since its mark), or not (0), or -errno.
 */
static int received_unchanged(const struct subvol_plan *plan,
			      const struct subvol_entry *en)
{
	int fd, ret;

	if (!subvol_uuid_set(en->info.received_uuid))
		return 0;
	fd = subvol_entry_open(plan, en, false);
	if (fd < 0)
		return fd;
	ret = en->read_only || received_mark_names(fd, &en->info) ?
		      received_mark_check(fd, &en->info, !en->read_only) :
		      RECEIVED_CHANGED;
	if (ret == RECEIVED_TRUSTED && !en->read_only) {
		ret = subvols_copy_changed(fd, &en->info);
		ret = ret > 0 ? RECEIVED_CHANGED : ret ?: RECEIVED_TRUSTED;
	}
	close(fd);
	return ret < 0 ? ret : ret == RECEIVED_TRUSTED;
}

/*
 * The partial receive -s kept of the subvolume in flight when a receive
 * into @dest stopped, as its run directory names it: its point, checked
 * unchanged since its record. Nothing where there is none, or where it
 * changed (the next stream is then sent whole, and the partial dropped).
 */
static int state_partial(const char *dest, struct subvols_state *st,
			 struct encio_error *e)
{
	static const struct subvols_options as_cp_t = { .no_target_dir = true };
	struct subvols s = { .opts = &as_cp_t, .e = e };
	char rel[PATH_MAX], name[NAME_MAX + 1];
	struct run_dir rd;
	int ret, fd;

	ret = subvols_dest_name(&s, dest);
	if (ret)
		return ret;
	ret = subvols_run_dir_open(s.dst, false, &rd);
	if (ret)
		return ret == -ENOENT ?
			       0 :
			       encio_error_set(e, -ret, "read the state of",
					       dest, false, 0);
	ret = subvols_inflight_read(&rd, rel, name);
	subvols_run_dir_close(&rd, false);
	if (ret)
		return ret == -ENOENT ?
			       0 :
			       encio_error_set(e, -ret, "read the state of",
					       dest, false, 0);
	fd = subvols_landing_open(s.dst, rel);
	ret = fd < 0 ? fd : receive_partial_point(fd, name, &st->resume);
	if (fd >= 0)
		close(fd);
	if (ret == -ENOENT || ret == -ENOTDIR || ret == -ESTALE)
		return 0;
	if (ret)
		return encio_error_set(e, -ret, "read the partial receive of",
				       rel, false, 0);
	st->resume_rel = strdup(rel);
	return st->resume_rel ? 0 :
				encio_error_set(e, ENOMEM, "read the state of",
						dest, false, 0);
}

int subvols_state_read(const char *dest, struct subvols_state *st,
		       struct encio_error *e)
{
	struct subvol_plan plan = { .src_fd = -1, .e = e };
	uint64_t id = 0;
	size_t i;
	int fd, ret;

	memset(st, 0, sizeof(*st));
	snprintf(plan.src, sizeof(plan.src), "%.*s",
		 (int)(path_trimmed_len(dest) ?: 1), dest);
	fd = open(plan.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return encio_error_set(e, errno, "open", plan.src, false, 0);
	plan.src_is_subvol = !btrfs_util_is_subvolume_fd(fd) &&
			     !btrfs_util_subvolume_id_fd(fd, &id) &&
			     id != BTRFS_FS_TREE_OBJECTID;
	ret = subvol_plan_build(&plan, fd);
	close(fd);
	for (i = 0; !ret && i < plan.nr; i++) {
		const struct subvol_entry *en = &plan.v[i];

		ret = received_unchanged(&plan, en);
		if (ret > 0)
			ret = state_add(st, en->info.received_uuid,
					en->info.stransid,
					en->rel[0] ? en->rel : ".",
					en->read_only);
		if (ret < 0)
			ret = encio_error_set(e, -ret, "read the state of",
					      en->src, false, 0);
	}
	subvol_plan_release(&plan);
	if (!ret)
		ret = state_partial(dest, st, e);
	if (ret)
		subvols_state_release(st);
	return ret;
}

static bool path_byte_plain(unsigned char c)
{
	return c > ' ' && c != '%' && c < 0x7f;
}

/* @rel with %, controls and spaces as %XX, at @w: its end. */
static char *path_escape(char *w, const char *rel)
{
	const unsigned char *p = (const unsigned char *)rel;

	for (; *p; p++)
		w += path_byte_plain(*p) ? sprintf(w, "%c", *p) :
					   sprintf(w, "%%%02x", *p);
	return w;
}

int subvols_state_format(const struct subvols_state *st, char **text)
{
	size_t len = sizeof(SUBVOLS_STATE_MAGIC) + 1, i;
	char *out, *w;
	int j;

	for (i = 0; i < st->nr; i++)
		len += 2 * BTRFS_UUID_SIZE + 27 + 3 * strlen(st->v[i].rel) + 3;
	if (st->resume_rel)
		len += sizeof(RESUME_LINE) + RESUME_TOKEN_MAX +
		       3 * strlen(st->resume_rel) + 2;
	out = malloc(len);
	if (!out)
		return -ENOMEM;
	w = out + sprintf(out, "%s\n", SUBVOLS_STATE_MAGIC);
	for (i = 0; i < st->nr; i++) {
		for (j = 0; j < BTRFS_UUID_SIZE; j++)
			w += sprintf(w, "%02x", st->v[i].received_uuid[j]);
		w += sprintf(w, " %llu %s ",
			     (unsigned long long)st->v[i].stransid,
			     st->v[i].read_only ? "ro" : "rw");
		w = path_escape(w, st->v[i].rel);
		*w++ = '\n';
	}
	if (st->resume_rel) {
		w += sprintf(w, "%s", RESUME_LINE);
		resume_token_encode(&st->resume, w);
		w += strlen(w);
		*w++ = ' ';
		w = path_escape(w, st->resume_rel);
		*w++ = '\n';
	}
	*w = '\0';
	*text = out;
	return 0;
}

static int hex_byte(const char *p)
{
	unsigned int v;

	if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1]) ||
	    sscanf(p, "%2x", &v) != 1)
		return -1;
	return (int)v;
}

/*
 * The path escaped at @p, up to @end (path_escape()), into @rel
 * (PATH_MAX bytes). 0 or -EINVAL.
 */
static int path_unescape(const char *p, const char *end, char *rel)
{
	size_t n = 0;
	int b;

	for (; p < end && n < PATH_MAX - 1; p++) {
		if (*p != '%') {
			if (!path_byte_plain(*p))
				return -EINVAL;
			rel[n++] = *p;
			continue;
		}
		b = end - p > 2 ? hex_byte(p + 1) : -1;
		if (b <= 0)
			return -EINVAL;
		rel[n++] = b;
		p += 2;
	}
	if (p < end || !n)
		return -EINVAL;
	rel[n] = '\0';
	return 0;
}

/* "resume TOKEN PATH": the partial to resume, one at most. */
static int parse_resume(const char *line, size_t len, struct subvols_state *st)
{
	const char *end = line + len, *token = line + strlen(RESUME_LINE);
	const char *sp = memchr(token, ' ', end - token);
	char rel[PATH_MAX], buf[RESUME_TOKEN_MAX];

	if (st->resume_rel || !sp || (size_t)(sp - token) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, token, sp - token);
	buf[sp - token] = '\0';
	if (resume_token_decode(buf, &st->resume) ||
	    path_unescape(sp + 1, end, rel))
		return -EINVAL;
	st->resume_rel = strdup(rel);
	return st->resume_rel ? 0 : -ENOMEM;
}

/*
 * One line, "UUID STRANSID ro|rw PATH" (without ro|rw where @flagged is
 * not: read-only), or a resume's, into st.
 */
static int parse_line(const char *line, size_t len, struct subvols_state *st,
		      bool flagged)
{
	bool read_only = true;
	uint8_t uuid[BTRFS_UUID_SIZE];
	unsigned long long stransid;
	char rel[PATH_MAX], *end;
	size_t i;
	int b;

	if (len > strlen(RESUME_LINE) &&
	    !strncmp(line, RESUME_LINE, strlen(RESUME_LINE)))
		return parse_resume(line, len, st);
	if (len < 2 * BTRFS_UUID_SIZE + 4)
		return -EINVAL;
	for (i = 0; i < BTRFS_UUID_SIZE; i++) {
		b = hex_byte(line + 2 * i);
		if (b < 0)
			return -EINVAL;
		uuid[i] = b;
	}
	i = 2 * BTRFS_UUID_SIZE;
	if (line[i++] != ' ' || !isdigit((unsigned char)line[i]))
		return -EINVAL;
	errno = 0;
	stransid = strtoull(line + i, &end, 10);
	if (errno || *end++ != ' ')
		return -EINVAL;
	if (flagged) {
		if (line + len - end < 4 || end[2] != ' ' ||
		    (strncmp(end, "ro", 2) && strncmp(end, "rw", 2)))
			return -EINVAL;
		read_only = end[1] == 'o';
		end += 3;
	}
	if (path_unescape(end, line + len, rel))
		return -EINVAL;
	return state_add(st, uuid, stransid, rel, read_only);
}

int subvols_state_parse(const char *text, struct subvols_state *st)
{
	const char *line = text, *nl;
	size_t magic = strlen(SUBVOLS_STATE_MAGIC);
	bool flagged = true;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	/* both magics are as long */
	if (!strncmp(text, SUBVOLS_STATE_MAGIC_1, magic))
		flagged = false;
	else if (strncmp(text, SUBVOLS_STATE_MAGIC, magic))
		return -EINVAL;
	if (text[magic] != '\n')
		return -EINVAL;
	for (line = text + magic + 1; !ret && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			ret = -EINVAL;
		else
			ret = parse_line(line, nl - line, st, flagged);
	}
	if (ret)
		subvols_state_release(st);
	return ret;
}
