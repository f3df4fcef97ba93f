// SPDX-License-Identifier: GPL-2.0
/*
 * copy -r --subvolumes: the plan. The subvolumes below SRC from
 * libbtrfsutil's iterator, encio's own temporaries left out; sorted by
 * the generation of their content, each after the one it sits in; joined
 * in families by their snapshot relations.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/kernel.h"
#include "plan/subvol_plan.h"

bool subvol_uuid_set(const uint8_t *u)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];

	return memcmp(u, zero, BTRFS_UUID_SIZE) != 0;
}

/* The path of directory @fd below the root of its subvolume, "a/b/". */
static int path_in_subvolume(int fd, char *out, size_t len)
{
	struct btrfs_ioctl_ino_lookup_args args = { 0 };
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (st.st_ino == BTRFS_FIRST_FREE_OBJECTID) {
		out[0] = 0;
		return 0;
	}
	args.objectid = st.st_ino;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args))
		return -errno;
	if (snprintf(out, len, "%s", args.name) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static void entry_names_free(struct subvol_entry *en)
{
	free(en->snap.path);
	free(en->snap.name);
	free(en->base.path);
	free(en->base.name);
	free(en->send_base.path);
	free(en->send_base.name);
}

/*
 * The length of the name of the subvolume that @rel would be encio send
 * --snapshot's temporary snapshot of (.NAME.encio-send-PID), with the
 * directory before it; 0 for another name.
 */
static size_t send_snapshot_of_len(const char *rel, const char **name)
{
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	const char *mark = strstr(base, SEND_SNAPSHOT_MARK);

	*name = base + 1;
	if (base[0] != '.')
		return 0;
	return mark && mark > base + 1 ? (size_t)(mark - base - 1) : 0;
}

static const struct subvol_entry *entry_at(const struct subvol_plan *s,
					   const char *rel, size_t len)
{
	size_t i;

	for (i = 0; i < s->nr; i++)
		if (!strncmp(s->v[i].rel, rel, len) && !s->v[i].rel[len])
			return &s->v[i];
	return NULL;
}

/* The length of the directory part of @rel, its last '/' included. */
static size_t dir_len(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? (size_t)(slash - rel) + 1 : 0;
}

/*
 * The writable subvolume @en is encio's snapshot or base of (the names
 * subvol_temp_name() gives, in the same directory), or NULL.
 */
static const struct subvol_entry *temporary_of(const struct subvol_plan *s,
					       const struct subvol_entry *en)
{
	size_t i, len = dir_len(en->rel);
	const char *base = en->rel + len;

	for (i = 0; i < s->nr; i++) {
		const struct subvol_entry *of = &s->v[i];

		if (of == en || !of->snap.name || dir_len(of->rel) != len ||
		    strncmp(of->rel, en->rel, len))
			continue;
		if (!strcmp(base, of->snap.name) ||
		    !strcmp(base, of->base.name) ||
		    !strcmp(base, of->send_base.name))
			return of;
	}
	return NULL;
}

/*
 * Whether @en is a temporary of encio's own, never copied: a read-only
 * snapshot named for the subvolume beside it, of that subvolume (its
 * parent UUID). Anything else is copied, whatever its name: a user's
 * subvolume named like a temporary, and a copy in flight that an earlier
 * move left here (.NAME.encio-partial: nothing tells it from a user's).
 */
static bool temporary(const struct subvol_plan *s,
		      const struct subvol_entry *en)
{
	const struct subvol_entry *of;
	const char *name;
	char rel[PATH_MAX];
	size_t len;

	if (!en->read_only)
		return false;
	of = temporary_of(s, en);
	if (!of) {
		len = send_snapshot_of_len(en->rel, &name);
		if (!len || snprintf(rel, sizeof(rel), "%.*s%.*s",
				     (int)dir_len(en->rel), en->rel, (int)len,
				     name) >= (int)sizeof(rel))
			return false;
		of = entry_at(s, rel, strlen(rel));
	}
	return of &&
	       !memcmp(en->info.parent_uuid, of->info.uuid, BTRFS_UUID_SIZE);
}

/* The temporaries of encio's own left out of the plan (temporary()). */
static void drop_temporaries(struct subvol_plan *s)
{
	bool *drop = calloc(s->nr ?: 1, sizeof(*drop));
	size_t i, kept = 0;

	if (!drop)
		return;
	for (i = 0; i < s->nr; i++)
		drop[i] = temporary(s, &s->v[i]);
	for (i = 0; i < s->nr; i++) {
		if (drop[i]) {
			free(s->v[i].rel);
			free(s->v[i].src);
			entry_names_free(&s->v[i]);
			continue;
		}
		s->v[kept] = s->v[i];
		s->v[kept].family = kept;
		kept++;
	}
	s->nr = kept;
	free(drop);
}

int subvol_temp_name(char *out, const char *name, const char *suffix)
{
	uint64_t hash = 0xcbf29ce484222325ULL; /* FNV-1a */
	size_t keep, len = strlen(name);
	const char *c;

	if (1 + len + strlen(suffix) <= NAME_MAX) {
		out[0] = '.';
		memcpy(out + 1, name, len);
		strcpy(out + 1 + len, suffix);
		return 0;
	}
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	for (c = name; *c; c++)
		hash = (hash ^ (unsigned char)*c) * 0x100000001b3ULL;
	keep = NAME_MAX - 1 - 17 - strlen(suffix);
	snprintf(out, NAME_MAX + 1, ".%.*s~%016llx%s", (int)keep, name,
		 (unsigned long long)hash, suffix);
	return 0;
}

/* The name of @suffix beside the subvolume @en in @name, its path in @path */
static int beside(const struct subvol_entry *en, const char *suffix,
		  char **name, char **path)
{
	char dir[PATH_MAX], base[PATH_MAX], temp[NAME_MAX + 1];

	snprintf(dir, sizeof(dir), "%s", en->src);
	snprintf(base, sizeof(base), "%s", en->src);
	if (subvol_temp_name(temp, basename(base), suffix))
		return -ENAMETOOLONG;
	*name = strdup(temp);
	if (!*name)
		return -ENOMEM;
	if (asprintf(path, "%s/%s", dirname(dir), *name) < 0) {
		free(*name);
		*name = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int snapshot_name(struct subvol_entry *en)
{
	return beside(en, SNAPSHOT_SUFFIX, &en->snap.name, &en->snap.path) ?:
		       beside(en, BASE_SUFFIX, &en->base.name, &en->base.path) ?:
		       beside(en, SEND_BASE_SUFFIX, &en->send_base.name,
			      &en->send_base.path);
}

static int plan_add(struct subvol_plan *s, const char *rel,
		    const struct btrfs_util_subvolume_info *info)
{
	struct subvol_entry *en;
	void *grown;
	int ret;

	if (s->nr == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		grown = realloc(s->v, s->cap * sizeof(*s->v));
		if (!grown)
			return -ENOMEM;
		s->v = grown;
	}
	en = &s->v[s->nr];
	memset(en, 0, sizeof(*en));
	en->rel = strdup(rel);
	if (!en->rel ||
	    asprintf(&en->src, "%s%s%s", s->src, rel[0] ? "/" : "", rel) < 0) {
		free(en->rel);
		return -ENOMEM;
	}
	en->info = *info;
	en->read_only = info->flags & BTRFS_ROOT_SUBVOL_RDONLY;
	ret = en->read_only ? 0 : snapshot_name(en);
	if (ret) {
		entry_names_free(en);
		free(en->rel);
		free(en->src);
		return ret;
	}
	en->family = s->nr++;
	return 0;
}

/* SRC itself when it is a subvolume, then every subvolume below it. */
static int plan_list(struct subvol_plan *s, int src_fd)
{
	struct btrfs_util_subvolume_iterator *it;
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	char prefix[PATH_MAX], *path;
	uint64_t top;
	size_t plen;
	int ret;

	ret = path_in_subvolume(src_fd, prefix, sizeof(prefix));
	if (ret)
		return encio_error_set(s->e, ret, "find the subvolume path of",
				       s->src, false, 0);
	plen = strlen(prefix);
	if (s->src_is_subvol) {
		err = btrfs_util_subvolume_info_fd(src_fd, 0, &info);
		if (err || (ret = plan_add(s, "", &info)))
			return encio_error_set(s->e,
					       ret ?: btrfsutil_errno(err),
					       "read the subvolume", s->src,
					       false, 0);
	}
	/* by the id of the subvolume SRC is in: SRC need not be its root */
	err = btrfs_util_subvolume_id_fd(src_fd, &top);
	if (!err)
		err = btrfs_util_create_subvolume_iterator_fd(src_fd, top, 0,
							      &it);
	if (err)
		return encio_error_set(s->e, btrfsutil_errno(err),
				       "list the subvolumes below", s->src,
				       false, 0);
	while (!ret && !(err = btrfs_util_subvolume_iterator_next_info(
				 it, &path, &info))) {
		if (!strncmp(path, prefix, plen) && path[plen])
			ret = plan_add(s, path + plen, &info);
		free(path);
	}
	btrfs_util_destroy_subvolume_iterator(it);
	if (ret)
		return encio_error_set(s->e, ret, "list the subvolumes below",
				       s->src, false, 0);
	if (err != BTRFS_UTIL_ERROR_STOP_ITERATION)
		return encio_error_set(s->e, btrfsutil_errno(err),
				       "list the subvolumes below", s->src,
				       false, 0);
	drop_temporaries(s);
	return 0;
}

static size_t family_of(struct subvol_plan *s, size_t i)
{
	while (s->v[i].family != i) {
		s->v[i].family = s->v[s->v[i].family].family;
		i = s->v[i].family;
	}
	return i;
}

/*
 * Families: a snapshot joins the subvolume it was taken of, and the
 * snapshots of one subvolume join each other, even where that subvolume
 * is gone (or outside SRC).
 */
static void plan_families(struct subvol_plan *s)
{
	struct subvol_entry *a, *b;
	size_t i, j;

	for (i = 0; i < s->nr; i++)
		for (j = i + 1; j < s->nr; j++) {
			a = &s->v[i];
			b = &s->v[j];
			if ((subvol_uuid_set(a->info.parent_uuid) &&
			     (!memcmp(a->info.parent_uuid, b->info.uuid,
				      BTRFS_UUID_SIZE) ||
			      !memcmp(a->info.parent_uuid, b->info.parent_uuid,
				      BTRFS_UUID_SIZE))) ||
			    (subvol_uuid_set(b->info.parent_uuid) &&
			     !memcmp(b->info.parent_uuid, a->info.uuid,
				     BTRFS_UUID_SIZE)))
				s->v[family_of(s, j)].family = family_of(s, i);
		}
}

/* The entry @i sits in: the one whose path is the longest prefix of its. */
static ssize_t container_of(const struct subvol_plan *s, size_t i)
{
	const char *rel = s->v[i].rel;
	size_t len, best_len = 0, j;
	ssize_t best = -1;

	for (j = 0; j < s->nr; j++) {
		len = strlen(s->v[j].rel);
		if (j == i || len >= strlen(rel) ||
		    (best >= 0 && len < best_len))
			continue;
		if (!len ||
		    (!strncmp(rel, s->v[j].rel, len) && rel[len] == '/')) {
			best = j;
			best_len = len;
		}
	}
	return best;
}

/*
 * The generation of a subvolume's content: a snapshot's when it was taken,
 * a writable subvolume's (copied as it is now) its last change.
 */
static uint64_t content_generation(const struct subvol_entry *en)
{
	return en->info.ctransid > en->info.otransid ? en->info.ctransid :
						       en->info.otransid;
}

static int by_generation(const void *a, const void *b)
{
	const struct subvol_entry *x = a, *y = b;
	uint64_t gx = content_generation(x), gy = content_generation(y);

	if (gx != gy)
		return gx < gy ? -1 : 1;
	return x->info.id < y->info.id ? -1 : x->info.id > y->info.id;
}

/*
 * Into the order at its generation, or where the subvolume it sits in
 * comes later, right after that one, with the others waiting for it
 * (@upto: the entries before it in generation order). Pulling that one
 * forward instead made it a branch of its own from an old snapshot, its
 * changes sent again down the snapshots between (random seed 168: +23%).
 */
static void plan_emit(struct subvol_plan *s, size_t i, size_t upto)
{
	ssize_t c = s->v[i].container;
	size_t j;

	if (s->v[i].emitted)
		return;
	if (c >= 0) {
		s->v[c].contains = true;
		if (!s->v[c].emitted)
			return;
	}
	s->v[i].emitted = true;
	s->order[s->nr_order++] = i;
	for (j = 0; j < upto; j++)
		if (!s->v[j].emitted && s->v[j].container == (ssize_t)i)
			plan_emit(s, j, upto);
}

static int plan_order(struct subvol_plan *s)
{
	size_t i;

	if (s->nr)
		qsort(s->v, s->nr, sizeof(*s->v), by_generation);
	for (i = 0; i < s->nr; i++) {
		s->v[i].family = i;
		s->v[i].container = container_of(s, i);
	}
	plan_families(s);
	s->order = calloc(s->nr ?: 1, sizeof(*s->order));
	if (!s->order)
		return encio_error_set(s->e, ENOMEM, "plan the copy of", s->src,
				       false, 0);
	for (i = 0; i < s->nr; i++)
		plan_emit(s, i, i);
	return 0;
}

/*
 * The read-only subvolume of @en's family in DEST already whose
 * generation is closest to @en's: the parent of its difference.
 */
/* @i is in DEST, marked received as a stream from it expects */
static bool copied_at(const struct subvol_plan *s, size_t i, const bool *copied)
{
	return copied ? copied[i] : s->v[i].in_dest && s->v[i].parent_ok;
}

const struct subvol_entry *subvol_plan_nearest(struct subvol_plan *s,
					       const struct subvol_entry *en,
					       const bool *copied)
{
	const struct subvol_entry *best = NULL, *c;
	uint64_t diff, best_diff = UINT64_MAX;
	size_t i, f = family_of(s, en - s->v);

	for (i = 0; i < s->nr; i++) {
		c = &s->v[i];
		if (c == en || !copied_at(s, i, copied) || family_of(s, i) != f)
			continue;
		diff = c->info.ctransid > en->info.ctransid ?
			       c->info.ctransid - en->info.ctransid :
			       en->info.ctransid - c->info.ctransid;
		if (diff < best_diff) {
			best_diff = diff;
			best = c;
		}
	}
	return best;
}

size_t subvol_plan_base_clones(struct subvol_plan *s,
			       const struct subvol_entry *en,
			       const bool *copied, struct subvol_entry **out)
{
	size_t i, nr = 0, f = family_of(s, en - s->v);

	for (i = 0; i < s->nr && nr < SUBVOL_PLAN_BASES_MAX; i++)
		if (&s->v[i] != en && s->v[i].base_in_dest &&
		    s->v[i].base.held && !copied_at(s, i, copied) &&
		    family_of(s, i) == f)
			out[nr++] = &s->v[i];
	return nr;
}

size_t subvol_plan_clones(struct subvol_plan *s, const struct subvol_entry *en,
			  const bool *copied, const char **out, uint64_t *ids)
{
	struct subvol_entry *bases[SUBVOL_PLAN_BASES_MAX];
	size_t i, nr = 0, nr_bases;

	for (i = 0; i < s->nr; i++) {
		if (!copied_at(s, i, copied))
			continue;
		if (ids)
			ids[nr] = subvol_source_id(&s->v[i]);
		out[nr++] = subvol_source(&s->v[i]);
	}
	nr_bases = en ? subvol_plan_base_clones(s, en, copied, bases) : 0;
	for (i = 0; i < nr_bases; i++) {
		if (ids)
			ids[nr] = bases[i]->base.id;
		out[nr++] = bases[i]->base.path;
	}
	return nr;
}

/* The UUID a copy of @en is marked received with: btrfs send's choice. */
const uint8_t *subvol_expected_received(const struct subvol_entry *en)
{
	return subvol_uuid_set(en->info.received_uuid) ?
		       en->info.received_uuid :
		       en->info.uuid;
}

int subvol_plan_build(struct subvol_plan *s, int src_fd)
{
	s->src_fd = fcntl(src_fd, F_DUPFD_CLOEXEC, 0);
	if (s->src_fd < 0)
		return encio_error_set(s->e, errno, "open", s->src, false, 0);
	return plan_list(s, src_fd) ?: plan_order(s);
}

void subvol_plan_release(struct subvol_plan *s)
{
	size_t i;

	for (i = 0; i < s->nr; i++) {
		free(s->v[i].rel);
		free(s->v[i].src);
		entry_names_free(&s->v[i]);
	}
	free(s->v);
	free(s->order);
	if (s->src_fd >= 0)
		close(s->src_fd);
	s->src_fd = -1;
}

int subvol_entry_dir_open(const struct subvol_plan *s,
			  const struct subvol_entry *en)
{
	char dir[PATH_MAX];
	const char *name;
	int fd;

	/* SRC itself: the directory it is in, named by the caller */
	if (!en->rel[0]) {
		snprintf(dir, sizeof(dir), "%s", s->src);
		fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	return open_parent_resolve(s->src_fd, en->rel, O_RDONLY | O_DIRECTORY,
				   RESOLVE_CONFINED, &name);
}

/* Whether @fd is the root of the subvolume @id, @uuid. */
static int subvol_check(int fd, uint64_t id, const uint8_t *uuid)
{
	struct btrfs_util_subvolume_info info;
	struct stat st;
	int ret;

	if (fstat(fd, &st))
		return -errno;
	if (st.st_ino != BTRFS_FIRST_FREE_OBJECTID)
		return -ESTALE;
	ret = btrfsutil_errno(btrfs_util_subvolume_info_fd(fd, 0, &info));
	if (ret)
		return ret;
	if ((id && info.id != id) || memcmp(info.uuid, uuid, BTRFS_UUID_SIZE))
		return -ESTALE;
	return 0;
}

int subvol_entry_open(const struct subvol_plan *s,
		      const struct subvol_entry *en, bool snap)
{
	int fd, dir_fd, ret;

	if (snap) {
		dir_fd = subvol_entry_dir_open(s, en);
		if (dir_fd < 0)
			return dir_fd;
		fd = openat(dir_fd, en->snap.name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		fd = fd < 0 ? -errno : fd;
		close(dir_fd);
	} else if (!en->rel[0]) {
		fd = fcntl(s->src_fd, F_DUPFD_CLOEXEC, 0);
		fd = fd < 0 ? -errno : fd;
	} else {
		fd = open_beneath(s->src_fd, en->rel,
				  O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	}
	if (fd < 0)
		return fd;
	ret = snap ? subvol_check(fd, 0, en->snap.uuid) :
		     subvol_check(fd, en->info.id, en->info.uuid);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}
