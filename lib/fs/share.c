// SPDX-License-Identifier: GPL-2.0
/*
 * The index of shared source extents: see share.h.
 */
#include <btrfsutil.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>

#include "base/array.h"
#include "base/kernel.h"
#include "fs/share.h"

/*
 * Above this much extent tree (tree blocks, per its root item) a sweep
 * would take seconds: every extent of that filesystem enters the index.
 */
#define SHARE_SWEEP_MAX_BYTES (256ULL << 20)
#define SHARE_SWEEP_BUF (1U << 20)
#define SHARE_SECTOR 4096ULL

/*
 * Room for one more of @size bytes in *@arr of @nr, grown to *@cap (by
 * half, from @first): 0 or -ENOMEM.
 */
static int room(void **arr, size_t nr, size_t *cap, size_t size, size_t first)
{
	size_t new_cap;
	void *p;

	if (nr < *cap)
		return 0;
	new_cap = *cap ? *cap + *cap / 2 : first;
	p = realloc(*arr, new_cap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = new_cap;
	return 0;
}

void share_init(struct share_index *si)
{
	memset(si, 0, sizeof(*si));
}

void share_plan_release(struct share_plan *plan)
{
	free(plan->p);
	memset(plan, 0, sizeof(*plan));
}

void share_release(struct share_index *si)
{
	size_t i;

	for (i = 0; i < si->nr_fs; i++)
		free(si->fs[i].multi);
	free(si->fs);
	free(si->refs);
	free(si->slots);
	free(si->files);
	free(si->devs);
	memset(si, 0, sizeof(*si));
}

static int fs_info(int fd, unsigned char fsid[16])
{
	struct btrfs_ioctl_fs_info_args fi;
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return -errno;
	if (sfs.f_type != BTRFS_SUPER_MAGIC)
		return -ENOTTY;
	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi))
		return -errno;
	memcpy(fsid, fi.fsid, 16);
	return 0;
}

static struct share_fs *fs_find(struct share_index *si,
				const unsigned char fsid[16])
{
	size_t i;

	for (i = 0; i < si->nr_fs; i++)
		if (!memcmp(si->fs[i].fsid, fsid, 16))
			return &si->fs[i];
	return NULL;
}

/* Whether subvolumes are nested below @fd's subvolume (or cannot tell). */
static bool has_nested_subvols(int fd)
{
	struct btrfs_util_subvolume_iterator *iter;
	enum btrfs_util_error err;
	uint64_t id;
	bool nested;

	if (btrfs_util_create_subvolume_iterator_fd(fd, 0, 0, &iter))
		return true;
	err = btrfs_util_subvolume_iterator_next(iter, NULL, &id);
	nested = err != BTRFS_UTIL_ERROR_STOP_ITERATION;
	btrfs_util_destroy_subvolume_iterator(iter);
	return nested;
}

int share_add_source(struct share_index *si, int fd)
{
	unsigned char fsid[16];
	struct share_fs *f, *arr;
	uint64_t subvol;
	int ret;

	ret = fs_info(fd, fsid);
	if (ret == -ENOTTY)
		return 0;
	if (ret)
		return ret;
	if (btrfs_util_subvolume_id_fd(fd, &subvol))
		return -errno ? -errno : -EIO;
	f = fs_find(si, fsid);
	if (f) {
		if (f->subvol != subvol)
			f->all = true;
		return 0;
	}
	arr = realloc(si->fs, (si->nr_fs + 1) * sizeof(*arr));
	if (!arr)
		return -ENOMEM;
	si->fs = arr;
	f = &si->fs[si->nr_fs++];
	memset(f, 0, sizeof(*f));
	memcpy(f->fsid, fsid, 16);
	f->subvol = subvol;
	f->all = has_nested_subvols(fd);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The extent tree's size in tree blocks, from its root item. */
static int extent_tree_bytes(int fd, uint64_t *bytes)
{
	struct btrfs_ioctl_search_args a;
	struct btrfs_ioctl_search_header sh;

	memset(&a, 0, sizeof(a));
	a.key.tree_id = BTRFS_ROOT_TREE_OBJECTID;
	a.key.min_objectid = a.key.max_objectid = BTRFS_EXTENT_TREE_OBJECTID;
	a.key.min_type = a.key.max_type = BTRFS_ROOT_ITEM_KEY;
	a.key.max_offset = (uint64_t)-1;
	a.key.max_transid = (uint64_t)-1;
	a.key.nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &a))
		return -errno;
	if (!a.key.nr_items)
		return -ENOENT;
	memcpy(&sh, a.buf, sizeof(sh));
	if (sh.len < offsetof(struct btrfs_root_item, bytes_used) + 8)
		return -EUCLEAN;
	memcpy(bytes,
	       a.buf + sizeof(sh) +
		       offsetof(struct btrfs_root_item, bytes_used),
	       sizeof(*bytes));
	*bytes = le64toh(*bytes);
	return 0;
}

static int multi_add(struct share_fs *f, size_t *cap, uint64_t bytenr)
{
	if (room((void **)&f->multi, f->nr_multi, cap, sizeof(*f->multi), 256))
		return -ENOMEM;
	f->multi[f->nr_multi++] = bytenr;
	return 0;
}

/* Collect the data extents of more than one reference, in one sweep. */
/*
 * Collect the data extents of more than one reference, in one sweep. Items
 * are packed one after the other: headers are copied out, not pointed at.
 */
static int sweep_buf(struct share_index *si, struct share_fs *f, size_t *cap,
		     struct btrfs_ioctl_search_args_v2 *a)
{
	const char *p = (const char *)a->buf;
	struct btrfs_ioctl_search_header sh;
	struct btrfs_extent_item ei;
	uint32_t i;
	int ret;

	if (!a->key.nr_items)
		return 1;
	for (i = 0; i < a->key.nr_items; i++) {
		memcpy(&sh, p, sizeof(sh));
		si->sweep_items++;
		if (sh.type == BTRFS_EXTENT_ITEM_KEY && sh.len >= sizeof(ei)) {
			memcpy(&ei, p + sizeof(sh), sizeof(ei));
			if ((le64toh(ei.flags) & BTRFS_EXTENT_FLAG_DATA) &&
			    le64toh(ei.refs) > 1) {
				ret = multi_add(f, cap, sh.objectid);
				if (ret)
					return ret;
			}
		}
		p += sizeof(sh) + sh.len;
	}
	if (sh.offset == (uint64_t)-1)
		return 1;
	/* the key range holds METADATA_ITEMs too: go on after the last */
	a->key.min_objectid = sh.objectid;
	a->key.min_type = sh.type;
	a->key.min_offset = sh.offset + 1;
	return 0;
}

static int sweep(struct share_index *si, struct share_fs *f, int fd)
{
	struct btrfs_ioctl_search_args_v2 *a;
	size_t cap = 0;
	int ret;

	a = calloc(1, sizeof(*a) + SHARE_SWEEP_BUF);
	if (!a)
		return -ENOMEM;
	a->key.tree_id = BTRFS_EXTENT_TREE_OBJECTID;
	a->key.max_objectid = (uint64_t)-1;
	a->key.min_type = a->key.max_type = BTRFS_EXTENT_ITEM_KEY;
	a->key.max_offset = (uint64_t)-1;
	a->key.max_transid = (uint64_t)-1;
	do {
		a->key.nr_items = (uint32_t)-1;
		a->buf_size = SHARE_SWEEP_BUF;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, a)) {
			ret = -errno;
			break;
		}
		ret = sweep_buf(si, f, &cap, a);
	} while (!ret);
	free(a);
	if (ret < 0)
		return ret;
	if (f->nr_multi)
		qsort(f->multi, f->nr_multi, sizeof(*f->multi), cmp_u64);
	return 0;
}

/* @fd: a file in the filesystem of @f. */
static void prepare_fs(struct share_index *si, struct share_fs *f, int fd)
{
	uint64_t bytes;

	if (f->all)
		return;
	if (extent_tree_bytes(fd, &bytes) || bytes > SHARE_SWEEP_MAX_BYTES ||
	    sweep(si, f, fd)) {
		free(f->multi);
		f->multi = NULL;
		f->nr_multi = 0;
		f->all = true;
	}
}

/*
 * A filesystem is prepared when the first file in it is looked up: the
 * sweep needs a descriptor in it, and a run that never reads one of its
 * sources pays nothing for it.
 */
int share_fs_of(struct share_index *si, int fd, const struct stat *st,
		uint32_t *fs)
{
	unsigned char fsid[16];
	struct share_dev *d;
	struct share_fs *f;
	size_t i;
	int ret;

	for (i = 0; i < si->nr_devs; i++) {
		if (si->devs[i].dev == st->st_dev) {
			*fs = si->devs[i].fs;
			return 0;
		}
	}
	ret = fs_info(fd, fsid);
	if (ret)
		return ret == -ENOTTY ? -ENOENT : ret;
	f = fs_find(si, fsid);
	if (!f)
		return -ENOENT;
	if (!f->prepared) {
		prepare_fs(si, f, fd);
		f->prepared = true;
	}
	d = realloc(si->devs, (si->nr_devs + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	si->devs = d;
	*fs = f - si->fs;
	si->devs[si->nr_devs++] = (struct share_dev){ st->st_dev, *fs };
	return 0;
}

union share_handle {
	struct file_handle fh;
	unsigned char bytes[sizeof(struct file_handle) +
			    sizeof(((struct share_file *)0)->handle)];
};

int share_file_keep_handle(struct share_file *sf, int fd)
{
	union share_handle h;
	int mnt;

	h.fh.handle_bytes = sizeof(sf->handle);
	if (name_to_handle_at(fd, "", &h.fh, &mnt, AT_EMPTY_PATH))
		return -errno;
	memcpy(sf->handle, h.fh.f_handle, h.fh.handle_bytes);
	sf->handle_len = h.fh.handle_bytes;
	sf->handle_type = h.fh.handle_type;
	return 0;
}

int share_file_open(const struct share_file *sf, int mount_fd)
{
	union share_handle h;
	int fd;

	h.fh.handle_bytes = sf->handle_len;
	h.fh.handle_type = sf->handle_type;
	memcpy(h.fh.f_handle, sf->handle, sf->handle_len);
	fd = open_by_handle_at(mount_fd, &h.fh, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int share_file_new(struct share_index *si, uint32_t *id)
{
	struct share_file *f;

	if (room((void **)&si->files, si->nr_files, &si->cap_files,
		 sizeof(*si->files), 256))
		return -ENOMEM;
	f = &si->files[si->nr_files];
	memset(f, 0, sizeof(*f));
	*id = si->nr_files++;
	return 0;
}

static bool may_share(const struct share_fs *f, uint64_t bytenr);

bool share_extent_may_share(const struct share_index *si, uint32_t fs,
			    const struct file_extent *fe)
{
	return (fe->kind == EXTENT_REGULAR || fe->kind == EXTENT_PREALLOC) &&
	       fe->disk_bytenr && may_share(&si->fs[fs], fe->disk_bytenr);
}

static bool may_share(const struct share_fs *f, uint64_t bytenr)
{
	return f->all || array_has_u64(f->multi, f->nr_multi, bytenr);
}

static size_t slot_of(const struct share_index *si, uint32_t fs,
		      uint64_t bytenr)
{
	uint64_t h = (bytenr ^ ((uint64_t)fs << 56)) * 0x9e3779b97f4a7c15ULL;

	return (h >> 32) & (si->nr_slots - 1);
}

/* The slot holding @bytenr's first range, or the empty one it would take. */
static uint32_t *slot_find(struct share_index *si, uint32_t fs, uint64_t bytenr)
{
	size_t i = slot_of(si, fs, bytenr);

	for (;;) {
		uint32_t *s = &si->slots[i];
		const struct share_ref *r;

		if (!*s)
			return s;
		r = &si->refs[*s - 1];
		if (r->bytenr == bytenr && r->fs == fs)
			return s;
		i = (i + 1) & (si->nr_slots - 1);
	}
}

static int slots_grow(struct share_index *si)
{
	uint32_t *old = si->slots;
	size_t old_nr = si->nr_slots, i;

	si->nr_slots = old_nr ? old_nr * 2 : 1024;
	si->slots = calloc(si->nr_slots, sizeof(*si->slots));
	if (!si->slots) {
		si->slots = old;
		si->nr_slots = old_nr;
		return -ENOMEM;
	}
	for (i = 0; i < old_nr; i++) {
		if (old[i]) {
			const struct share_ref *r = &si->refs[old[i] - 1];

			*slot_find(si, r->fs, r->bytenr) = old[i];
		}
	}
	free(old);
	return 0;
}

static int ref_add(struct share_index *si, const struct share_ref *ref)
{
	uint32_t *s, idx;
	int ret;

	if (si->nr_refs >= UINT32_MAX - 1)
		return -EOVERFLOW;
	if (room((void **)&si->refs, si->nr_refs, &si->cap_refs,
		 sizeof(*si->refs), 1024))
		return -ENOMEM;
	/* at most three quarters full: probes stay short */
	if ((si->nr_refs + 1) * 4 > si->nr_slots * 3) {
		ret = slots_grow(si);
		if (ret)
			return ret;
	}
	idx = si->nr_refs++;
	si->refs[idx] = *ref;
	s = slot_find(si, ref->fs, ref->bytenr);
	if (*s) {
		/* after the first range: the slot keeps naming the extent */
		si->refs[idx].next = si->refs[*s - 1].next;
		si->refs[*s - 1].next = idx + 1;
	} else {
		si->refs[idx].next = 0;
		*s = idx + 1;
	}
	return 0;
}

int share_plan_push(struct share_plan *plan, const struct share_piece *p)
{
	if (room((void **)&plan->p, plan->nr, &plan->cap, sizeof(*plan->p), 16))
		return -ENOMEM;
	plan->p[plan->nr++] = *p;
	return 0;
}

int share_plan_add_clone(struct share_plan *plan, const struct share_piece *c)
{
	struct share_piece *last = plan->nr ? &plan->p[plan->nr - 1] : NULL;

	if (last && last->clone && last->whole == c->whole &&
	    last->prealloc == c->prealloc && last->file == c->file &&
	    last->off + last->len == c->off &&
	    last->src_off + last->len == c->src_off) {
		last->len += c->len;
		return 0;
	}
	return share_plan_push(plan, c);
}

/*
 * The usable end of @r for a range ending at @end (extent offsets): a
 * range that ends off a sector (its file's EOF) can be cloned only by a
 * range ending at the same point, which is its own EOF.
 */
static uint64_t ref_end(const struct share_ref *r, uint64_t end,
			bool end_is_eof)
{
	uint64_t r_end = (uint64_t)r->eo + r->len;

	if (r_end % SHARE_SECTOR && !(end_is_eof && end == r_end))
		r_end -= r_end % SHARE_SECTOR;
	return r_end;
}

/*
 * A clone of @r's bytes up to extent offset @end: an end off a sector is
 * the end of the file cloned into, and the kernel takes it only where it
 * is the end of the file cloned from too (@r ends there: its file's EOF).
 */
static bool clone_end_ok(const struct share_ref *r, uint64_t end)
{
	return end % SHARE_SECTOR == 0 || end == (uint64_t)r->eo + r->len;
}

/* The written range of the extent covering extent offset @eo, or NULL. */
static const struct share_ref *covering(const struct share_index *si,
					uint32_t first, uint64_t eo,
					uint64_t end, bool end_is_eof,
					uint64_t *next_start)
{
	const struct share_ref *best = NULL;
	uint32_t i;

	*next_start = end;
	for (i = first; i; i = si->refs[i - 1].next) {
		const struct share_ref *r = &si->refs[i - 1];
		uint64_t r_end = ref_end(r, end, end_is_eof);

		if (si->files[r->file].state == SHARE_FAILED)
			continue;
		if (r->eo <= eo && r_end > eo) {
			if (!best || r_end > ref_end(best, end, end_is_eof))
				best = r;
		} else if (r->eo > eo && r->eo < *next_start) {
			*next_start = r->eo;
		}
	}
	return best;
}

static int write_piece(struct share_index *si, struct share_plan *plan,
		       uint32_t fs, uint64_t bytenr, uint64_t eo, uint64_t off,
		       uint64_t len, uint32_t file, bool remember)
{
	struct share_piece p = { .off = off, .len = len };
	struct share_ref r = {
		.bytenr = bytenr,
		.dst_off = off,
		.eo = eo,
		.len = len,
		.file = file,
		.fs = fs,
	};
	int ret = share_plan_push(plan, &p);

	return ret || !remember ? ret : ref_add(si, &r);
}

/*
 * A part of a compressed extent no written range covers: the extent goes
 * whole into the holder (a write piece of its own, read from this part),
 * the part is cloned from there, and so is every other part of it that
 * comes later.
 */
static int plan_holder(struct share_index *si, uint32_t fs,
		       const struct file_extent *fe, uint64_t eo,
		       uint64_t start, uint64_t len, struct share_plan *plan)
{
	uint64_t at = si->holder_end;
	struct share_piece write = {
		.off = start,
		.len = len,
		.whole = true,
		.holder = true,
		.src_off = at,
	};
	struct share_piece clone = {
		.off = start,
		.len = len,
		.clone = true,
		.whole = true,
		.src_off = at + eo,
	};
	struct share_ref r = {
		.bytenr = fe->disk_bytenr,
		.dst_off = at,
		.len = fe->ram_bytes,
		.fs = fs,
	};
	uint32_t id;
	int ret;

	ret = share_file_new(si, &id);
	if (ret)
		return ret;
	si->files[id].handle_type = SHARE_HOLDER_HANDLE;
	write.file = clone.file = r.file = id;
	si->holder_end += (fe->ram_bytes + SHARE_SECTOR - 1) &
			  ~(SHARE_SECTOR - 1);
	return ref_add(si, &r)			     ?:
		       share_plan_push(plan, &write) ?:
		       share_plan_push(plan, &clone);
}

static int plan_whole(struct share_index *si, uint32_t fs,
		      const struct file_extent *fe, uint64_t eo, uint64_t start,
		      uint64_t len, bool eof, uint32_t file,
		      struct share_plan *plan, uint32_t first)
{
	const struct share_ref *r;
	uint64_t next;

	r = covering(si, first, eo, eo + len, eof, &next);
	if (r && ref_end(r, eo + len, eof) >= eo + len &&
	    clone_end_ok(r, eo + len)) {
		struct share_piece p = {
			.off = start,
			.len = len,
			.clone = true,
			.whole = true,
			.file = r->file,
			.src_off = r->dst_off + (eo - r->eo),
		};

		return share_plan_push(plan, &p);
	}
	/* a part whose end a clone can take (not an unaligned EOF) */
	if (si->holder_on && (eo || len < fe->ram_bytes) &&
	    (eo + len) % SHARE_SECTOR == 0 && fe->ram_bytes <= UINT32_MAX)
		return plan_holder(si, fs, fe, eo, start, len, plan);
	return write_piece(si, plan, fs, fe->disk_bytenr, eo, start, len, file,
			   true);
}

int share_plan_range(struct share_index *si, uint32_t fs,
		     const struct file_extent *fe, uint64_t start, uint64_t end,
		     uint64_t size, enum share_cut cut, uint32_t file,
		     struct share_plan *plan)
{
	uint64_t eo = fe->extent_offset + (start - fe->offset);
	uint64_t eo_end = eo + (end - start), next;
	bool eof = end >= size;
	const struct share_ref *r;
	uint32_t first = 0;
	int ret;

	if (!share_extent_may_share(si, fs, fe) || eo_end > UINT32_MAX)
		return write_piece(si, plan, fs, 0, 0, start, end - start, file,
				   false);
	if (si->nr_slots)
		first = *slot_find(si, fs, fe->disk_bytenr);
	if (cut == SHARE_CUT_FROM_START &&
	    !covering(si, first, eo, eo_end, eof, &next))
		return write_piece(si, plan, fs, fe->disk_bytenr, eo, start,
				   end - start, file, true);
	if (cut == SHARE_CUT_WHOLE)
		return plan_whole(si, fs, fe, eo, start, end - start, eof, file,
				  plan, first);
	while (eo < eo_end) {
		uint64_t off = fe->offset + (eo - fe->extent_offset), n;

		r = covering(si, first, eo, eo_end, eof, &next);
		if (!r) {
			n = next - eo;
			ret = write_piece(si, plan, fs, fe->disk_bytenr, eo,
					  off, n, file, true);
		} else {
			struct share_piece p = {
				.off = off,
				.clone = true,
				.file = r->file,
				.src_off = r->dst_off + (eo - r->eo),
			};

			n = ref_end(r, eo_end, eof);
			n = n < eo_end ? n : eo_end;
			if (!clone_end_ok(r, n))
				n -= n % SHARE_SECTOR;
			n -= eo;
			p.len = n;
			ret = n ? share_plan_push(plan, &p) :
				  write_piece(si, plan, fs, fe->disk_bytenr, eo,
					      off, eo_end - eo, file, true);
			if (!n)
				n = eo_end - eo;
		}
		if (ret)
			return ret;
		eo += n;
		if (!first)
			first = *slot_find(si, fs, fe->disk_bytenr);
	}
	return 0;
}

int share_note_range(struct share_index *si, uint32_t fs,
		     const struct file_extent *fe, uint64_t start, uint64_t end,
		     uint32_t file)
{
	uint64_t eo = fe->extent_offset + (start - fe->offset);
	struct share_ref r = {
		.bytenr = fe->disk_bytenr,
		.dst_off = start,
		.eo = eo,
		.len = end - start,
		.file = file,
		.fs = fs,
	};

	if (!share_extent_may_share(si, fs, fe) ||
	    eo + (end - start) > UINT32_MAX)
		return 0;
	return ref_add(si, &r);
}

size_t share_memory(const struct share_index *si)
{
	size_t i, bytes = si->cap_refs * sizeof(*si->refs) +
			  si->nr_slots * sizeof(*si->slots) +
			  si->cap_files * sizeof(*si->files);

	for (i = 0; i < si->nr_fs; i++)
		bytes += si->fs[i].nr_multi * sizeof(uint64_t);
	return bytes;
}
