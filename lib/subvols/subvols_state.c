// SPDX-License-Identifier: GPL-2.0
/*
 * What a copy made by encio receive of a send --subvolumes stream holds,
 * for the next send: its subvolumes listed as the planner lists SRC's
 * (subvol_plan_build()), the read-only ones that carry encio's mark,
 * unchanged since (received_mark_check()), by the received UUID and
 * stransid the next stream's differences name their parents by.
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

void subvols_state_release(struct subvols_state *st)
{
	size_t i;

	for (i = 0; i < st->nr; i++)
		free(st->v[i].rel);
	free(st->v);
	st->v = NULL;
	st->nr = 0;
}

static int state_add(struct subvols_state *st, const uint8_t *uuid,
		     uint64_t stransid, const char *rel)
{
	struct subvols_state_entry *v;

	v = realloc(st->v, (st->nr + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	st->v = v;
	v = &v[st->nr];
	memcpy(v->received_uuid, uuid, BTRFS_UUID_SIZE);
	v->stransid = stransid;
	v->rel = strdup(rel);
	if (!v->rel)
		return -ENOMEM;
	st->nr++;
	return 0;
}

/*
 * @en as encio received it and unchanged since (a writable one holds the
 * moment of the snapshot it was received from, the next run's parent),
 * or not (0), or -errno.
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
	close(fd);
	return ret < 0 ? ret : ret == RECEIVED_TRUSTED;
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
					en->rel[0] ? en->rel : ".");
		if (ret < 0)
			ret = encio_error_set(e, -ret, "read the state of",
					      en->src, false, 0);
	}
	subvol_plan_release(&plan);
	if (ret)
		subvols_state_release(st);
	return ret;
}

static bool path_byte_plain(unsigned char c)
{
	return c > ' ' && c != '%' && c < 0x7f;
}

int subvols_state_format(const struct subvols_state *st, char **text)
{
	size_t len = sizeof(SUBVOLS_STATE_MAGIC) + 1, i, n;
	const unsigned char *p;
	char *out, *w;
	int j;

	for (i = 0; i < st->nr; i++)
		len += 2 * BTRFS_UUID_SIZE + 24 + 3 * strlen(st->v[i].rel) + 3;
	out = malloc(len);
	if (!out)
		return -ENOMEM;
	w = out + sprintf(out, "%s\n", SUBVOLS_STATE_MAGIC);
	for (i = 0; i < st->nr; i++) {
		for (j = 0; j < BTRFS_UUID_SIZE; j++)
			w += sprintf(w, "%02x", st->v[i].received_uuid[j]);
		w += sprintf(w, " %llu ",
			     (unsigned long long)st->v[i].stransid);
		for (p = (const unsigned char *)st->v[i].rel, n = 0; p[n]; n++)
			w += path_byte_plain(p[n]) ? sprintf(w, "%c", p[n]) :
						     sprintf(w, "%%%02x", p[n]);
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

/* One line, "UUID STRANSID PATH", into st. */
static int parse_line(const char *line, size_t len, struct subvols_state *st)
{
	uint8_t uuid[BTRFS_UUID_SIZE];
	unsigned long long stransid;
	char rel[PATH_MAX], *end;
	size_t i, n = 0;
	int b;

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
	if (errno || *end != ' ')
		return -EINVAL;
	for (i = end + 1 - line; i < len && n < sizeof(rel) - 1; i++) {
		if (line[i] != '%') {
			if (!path_byte_plain(line[i]))
				return -EINVAL;
			rel[n++] = line[i];
			continue;
		}
		b = i + 2 < len ? hex_byte(line + i + 1) : -1;
		if (b <= 0)
			return -EINVAL;
		rel[n++] = b;
		i += 2;
	}
	if (i < len || !n)
		return -EINVAL;
	rel[n] = '\0';
	return state_add(st, uuid, stransid, rel);
}

int subvols_state_parse(const char *text, struct subvols_state *st)
{
	const char *line = text, *nl;
	size_t magic = strlen(SUBVOLS_STATE_MAGIC);
	int ret = 0;

	memset(st, 0, sizeof(*st));
	if (strncmp(text, SUBVOLS_STATE_MAGIC, magic) || text[magic] != '\n')
		return -EINVAL;
	for (line = text + magic + 1; !ret && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			ret = -EINVAL;
		else
			ret = parse_line(line, nl - line, st);
	}
	if (ret)
		subvols_state_release(st);
	return ret;
}
