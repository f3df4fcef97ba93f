/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copy -r --subvolumes, inside: the plan of the copy (lib/plan/subvol_plan.c),
 * which subvolumes SRC holds, their families and the order they are
 * copied in, for lib/subvols/copy_subvols.c, which makes them in DEST.
 */
#ifndef ENCIO_SUBVOL_PLAN_H
#define ENCIO_SUBVOL_PLAN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <btrfsutil.h>
#include <time.h>

#include "base/error.h"
#include "base/fsutil.h"

/* encio's names for what it makes beside a subvolume */
#define PARTIAL_SUFFIX ".encio-partial"
/* a writable subvolume's read-only snapshot, beside it while it is copied */
#define SNAPSHOT_SUFFIX ".encio-snapshot"
/*
 * the snapshot a writable subvolume's copy holds, kept beside it after a
 * move as the parent of the next run's difference
 */
#define BASE_SUFFIX ".encio-base"
/* the same for encio send --subvolumes: its own, as its DEST is another */
#define SEND_BASE_SUFFIX ".encio-send-base"
/* what encio send --snapshot names its temporary snapshots */
#define SEND_SNAPSHOT_MARK ".encio-send-"

/*
 * encio's name, in @out (NAME_MAX + 1 bytes), for what it makes beside a
 * subvolume @name: .NAME@suffix, or where that is longer than a name may
 * be, NAME cut and a hash of it (.NAME~HASH@suffix): the same for the same
 * name, so that a rerun finds it.
 */
int subvol_temp_name(char *out, const char *name, const char *suffix);

/* A read-only snapshot encio keeps beside a writable subvolume. */
struct subvol_snapshot {
	char *path;
	char *name; /* in the directory the subvolume is in */
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint64_t id;
	uint64_t ctransid;
	bool held; /* made or found, and checked: the fields above are its */
};

struct subvol_entry {
	char *rel; /* its path below SRC, "" for SRC itself */
	char *src; /* its path in SRC */
	struct btrfs_util_subvolume_info info;
	bool read_only;
	/* writable: copied from this read-only snapshot of it */
	struct subvol_snapshot snap;
	/* a tick before this run made it; 0: a stopped run made it */
	struct timespec snap_before;
	/* the base (BASE_SUFFIX) an earlier run kept, if found and checked */
	struct subvol_snapshot base;
	/* send --subvolumes' base (SEND_BASE_SUFFIX): its names only */
	struct subvol_snapshot send_base;
	bool contains; /* a subvolume below it is copied after it */
	bool in_dest;  /* complete in DEST */
	bool failed;   /* its copy failed in this run */
	bool left_out; /* not copied: it lies in a failed one's copy */
	/* stopped in flight, its copy kept for a rerun to go on with */
	bool partial_kept;
	/* its copy is marked received as a stream from it expects */
	bool parent_ok;
	/*
	 * writable: its copy in DEST (subvolume @base_copy_id) holds its
	 * base, unchanged since marked; a clone source for its family's
	 * differences until its own turn (subvol_plan_base_clones())
	 */
	bool base_in_dest;
	uint64_t base_copy_id;
	bool emitted;  /* placed in the copy order */
	size_t family; /* union-find parent, an index in the plan */
	/* the one it sits in (the longest path before its), an index; -1 */
	ssize_t container;
};

struct subvol_plan {
	char src[PATH_MAX]; /* SRC without trailing slashes */
	int src_fd;	    /* SRC, open: subvolumes are opened beneath it */
	bool src_is_subvol; /* SRC is a subvolume's root (not the top one) */
	struct encio_error *e;
	struct subvol_entry *v;
	size_t nr, cap;
	size_t *order; /* the copy order, indexes in v */
	size_t nr_order;
};

/*
 * The subvolumes of s->src (its own first when s->src_is_subvol), sorted
 * by the generation of their content, each after the one it sits in, in
 * families. @src_fd: SRC open. Returns 0 or -errno with s->e filled.
 */
int subvol_plan_build(struct subvol_plan *s, int src_fd);
void subvol_plan_release(struct subvol_plan *s);
/*
 * The subvolume of @en's family in DEST already, found by the received
 * UUID a stream from it names, whose ctransid is the closest to @en's:
 * the parent of its difference. NULL: copy @en whole. @copied, if not
 * NULL, says which are in DEST (by index in s->v) instead of their flags.
 */
const struct subvol_entry *subvol_plan_nearest(struct subvol_plan *s,
					       const struct subvol_entry *en,
					       const bool *copied);
/*
 * The writable subvolumes of @en's family, but @en, whose bases stand in
 * DEST for them (base_in_dest) and that are not copied yet: up to
 * SUBVOL_PLAN_BASES_MAX into @out. Their bases serve @en's difference as
 * clone sources, whose copies the receiver is told of. Returns how many.
 */
#define SUBVOL_PLAN_BASES_MAX 16
size_t subvol_plan_base_clones(struct subvol_plan *s,
			       const struct subvol_entry *en,
			       const bool *copied, struct subvol_entry **out);
/*
 * The clone sources of @en's difference sent now (@en NULL: of another
 * stream): the source of every subvolume in DEST (by @copied, or their
 * flags when NULL, as above), in the plan's order, then the bases of
 * subvol_plan_base_clones(), into @out (room for s->nr), and their
 * subvolume ids into @ids unless it is NULL. Returns how many.
 */
size_t subvol_plan_clones(struct subvol_plan *s, const struct subvol_entry *en,
			  const bool *copied, const char **out, uint64_t *ids);
/* The path @en is read from: its snapshot if it is writable, else itself. */
static inline const char *subvol_source(const struct subvol_entry *en)
{
	return en->snap.path ?: en->src;
}
/*
 * @en (with @snap, its snapshot) opened beneath SRC, following no symlink,
 * and checked to be the subvolume listed (its id and UUID; the snapshot's
 * UUID once made): -ESTALE if another is at its path now.
 */
int subvol_entry_open(const struct subvol_plan *s,
		      const struct subvol_entry *en, bool snap);
/* The directory @en is in, where its snapshot is made: beneath SRC. */
int subvol_entry_dir_open(const struct subvol_plan *s,
			  const struct subvol_entry *en);
/* The subvolume id of subvol_source(). */
static inline uint64_t subvol_source_id(const struct subvol_entry *en)
{
	return en->snap.path ? en->snap.id : en->info.id;
}
/* The UUID a copy of read-only @en is marked received with. */
const uint8_t *subvol_expected_received(const struct subvol_entry *en);

bool subvol_uuid_set(const uint8_t *u);

#endif
