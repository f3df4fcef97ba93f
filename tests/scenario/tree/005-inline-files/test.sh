#!/bin/bash
# encio copy -r of a read-only snapshot makes its small files (one link, no
# xattrs, one inline extent) from the tree's items without opening them:
# data (zstd, zlib, lzo, plain) with its extent layout, owner, mode, set-id
# bits, atime and mtime to the nanosecond all arrive as with an open; the
# files that do not qualify are opened; a writable subvolume is read file
# by file; directories whose entries are not in inode order still work.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v strace >/dev/null || _not_run "needs strace"
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v setfacl >/dev/null || _not_run "needs setfacl (acl)"

# noatime: the checks themselves must not change atimes in DEST.
make_btrfs src 512M compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 512M noatime
DST=$MNT
LOOP_SRC=${_LOOPS[0]}

btrfs -q subvolume create "$SRC/sv" || _fail "subvolume create"
T=$SRC/sv

# small_files DIR: files that qualify, with assorted metadata.
small_files()
{
	local d=$1 i
	mkdir -p "$d"
	printf x >"$d/one-byte"
	compressible 100 >"$d/c100"
	compressible 1500 >"$d/c1500"
	compressible 3900 >"$d/c3900"
	random_bytes 700 "$d" >"$d/random700"
	compressible 2000 >"$d/suid"
	chmod 4755 "$d/suid"
	chown 1234:5678 "$d/suid" "$d/c100"
	chmod 0640 "$d/c1500"
	chmod 0400 "$d/c3900"
	chmod 0666 "$d/random700"
	touch -d '2002-03-04 05:06:07.123456789' "$d/c100"
	touch -a -d '1999-01-01 00:00:00.5' "$d/c1500"
	for i in $(seq 1 40); do
		compressible $((i * 50)) >"$d/many-$i"
	done
}

_log "build: small files under zstd, zlib, lzo and stored plain"
small_files "$T/zstd"
mount -o remount,compress-force=zlib "$SRC" || _fail "remount zlib"
small_files "$T/zlib"
mount -o remount,compress-force=lzo "$SRC" || _fail "remount lzo"
small_files "$T/lzo"
mount -o remount,compress=no "$SRC" || _fail "remount compress=no"
small_files "$T/plain"
mount -o remount,compress-force=zstd "$SRC" || _fail "remount zstd"

_log "build: files that do not qualify"
N=$T/not
mkdir "$N"
compressible 1000 >"$N/linked"
ln "$N/linked" "$T/zstd/linked-too"
compressible 1000 >"$N/xattr"
setfattr -n user.color -v blue "$N/xattr"
compressible 1000 >"$N/acl"
setfacl -m u:1000:rwx "$N/acl"
printf abc >"$N/grown"
truncate -s 10000 "$N/grown"
: >"$N/empty"
compressible 300000 >"$N/large"
random_bytes 3000 big >"$N/random3000"

_log "build: symlinks, one of them with two names"
mkdir "$T/links"
ln -s ../zstd/c100 "$T/links/rel"
ln -s /nonexistent/dangling "$T/links/dangling"
ln -s "$(printf 'long/%.0s' $(seq 1 300))end" "$T/links/long"
ln -s ../zstd "$T/links/to-dir"
chown -h 1234:5678 "$T/links/rel"
touch -h -d '2001-02-03 04:05:06.123456789' "$T/links/rel" "$T/links/long"
ln -s target "$N/symlink-linked"
ln "$N/symlink-linked" "$N/symlink-linked-too"

_log "build: a directory whose entries run against inode order"
mkdir "$T/ordered" "$T/reversed" "$T/mnt"
for i in $(seq 1 60); do
	compressible $((i * 30)) >"$T/ordered/f$i"
done
for i in $(seq 60 -1 1); do
	mv "$T/ordered/f$i" "$T/reversed/f$i"
done
# interleaved: two directories filled in turn
mkdir "$T/even" "$T/odd"
for i in $(seq 1 40); do
	compressible $((i * 40)) >"$T/odd/g$i"
	compressible $((i * 45)) >"$T/even/g$i"
done
sync
btrfs -q subvolume snapshot -r "$T" "$SRC/snap" || _fail "snapshot"
S=$SRC/snap

# Every regular file, and those that qualify (by their extent list).
total=$(find "$S" -type f | wc -l)
inline=$("$ENCIO" list -r "$S" | awk '
	/: [0-9]+ bytes, 1 extent$/ {want = 2; next}
	want == 2 {want = 1; next}
	want == 1 && $1 == 0 && $NF == "inline" {n++}
	{want = 0}
	END {print n + 0}')
echo "$total regular files, $inline of them one inline extent"
[ "$inline" -gt 250 ] || _fail "expected over 250 inline files, got $inline"

# Extent lists. An inline extent that compression made larger than its
# data (lzo on a few bytes) arrives plain, by any path: the kernel refuses
# such an encoded write.
layout()
{
	"$ENCIO" list -r "$1" | sed "s|^$1/||" | awk '
		/^Processed/ {exit}
		$NF == "inline" && $4 != "none" && $3 > $2 {$3 = $2; $4 = "none"}
		{$1 = $1; print}'
}
check_tree()
{
	local a=$1 b=$2
	# stat first: reading the files would move atimes in a writable DEST
	diff <(tree_stat "$a") <(tree_stat "$b") || _fail "stat differs: $a $b"
	diff -r --no-dereference "$a" "$b" || _fail "diff -r: $a $b"
	diff <(tree_xattrs "$a") <(tree_xattrs "$b") || _fail "xattrs differ: $a $b"
	diff <(layout "$a") <(layout "$b") || _fail "extent layout differs: $a $b"
	[ "$(stat -c %i "$b/not/linked")" = "$(stat -c %i "$b/zstd/linked-too")" ] ||
		_fail "hard link lost in $b"
	[ "$(stat -c %i "$b/not/symlink-linked")" = "$(stat -c %i "$b/not/symlink-linked-too")" ] ||
		_fail "hard link of a symlink lost in $b"
}

# Opens of the test's regular files for reading: by name in an open
# directory, or by a path under the test's directory (directories are
# opened O_DIRECTORY, DEST's files for writing).
file_opens()
{
	grep -E "open(at)?\\(([0-9]+, \"|AT_FDCWD, \"$TEST_TMP/|\"$TEST_TMP/).*O_RDONLY" "$1" |
		grep -v -e O_DIRECTORY -e O_PATH | tee "$1.files" | wc -l
}
# Reads of the test's symlinks (the sanitizers' runtime reads its own).
link_reads()
{
	grep -cE "readlink(at)?\\(([0-9]+, \"|AT_FDCWD, \"$TEST_TMP/|\"$TEST_TMP/)" "$1"
}

_log "a read-only snapshot: small files made without opening them"
strace_calls "$TEST_TMP/strace.ro" open,openat,readlink,readlinkat,close \
	timeout 120 "$ENCIO" -q copy -r "$S" "$DST/ro" || _fail "copy of the snapshot"
opens=$(file_opens "$TEST_TMP/strace.ro")
# Inline but not made from the items: two names of one inode, an xattr, an
# ACL. One open more: the probe of encoded I/O opens the first file.
others=$((total - (inline - 4)))
echo "$opens files opened of $total; $others do not qualify"
[ "$opens" -eq $((others + 1)) ] ||
	_fail "$opens opens, not the $others files that do not qualify and a probe"
# Symlinks from their items too: only the one with two names is read
# (its second name becomes a hard link).
[ "$(link_reads "$TEST_TMP/strace.ro")" = 1 ] ||
	_fail "symlinks read one by one"
[ "$(readlink "$DST/ro/links/long")" = "$(readlink "$S/links/long")" ] || _fail "long target"
# Files are closed through the ring, even with no reads to send the closes
# along with: a full submission queue is sent, not closed one by one.
# Directories aside: up to four each (its walk, its copy, both opened
# again at the end for the directory's metadata).
closes=$(grep -c 'close(' "$TEST_TMP/strace.ro")
dirs=$(find "$S" -type d | wc -l)
echo "$closes close(2) calls, $dirs directories"
[ $((closes - 4 * dirs)) -lt 100 ] || _fail "$closes close(2) calls for $total files"
check_tree "$S" "$DST/ro"

_log "the writable subvolume: every file opened"
strace_calls "$TEST_TMP/strace.rw" open,openat,readlink,readlinkat \
	timeout 120 "$ENCIO" -q copy -r "$T" "$DST/rw" || _fail "copy of the subvolume"
opens=$(file_opens "$TEST_TMP/strace.rw")
echo "$opens files opened of $total"
[ "$opens" -ge "$total" ] || _fail "only $opens of $total files opened on a writable subvolume"
[ "$(link_reads "$TEST_TMP/strace.rw")" = 5 ] || _fail "symlinks not read on a writable subvolume"
check_tree "$T" "$DST/rw"

_log "a directory inside the snapshot, and --verify (which reads every file)"
run_check timeout 120 "$ENCIO" -q copy -r "$S/zlib" "$DST/zlib-only"
diff <(tree_stat "$S/zlib") <(tree_stat "$DST/zlib-only") || _fail "stat differs (directory)"
diff -r "$S/zlib" "$DST/zlib-only" || _fail "diff -r (directory)"
strace_calls "$TEST_TMP/strace.verify" open,openat \
	timeout 120 "$ENCIO" -q copy -r --verify "$S" "$DST/verify" || _fail "copy --verify"
opens=$(file_opens "$TEST_TMP/strace.verify")
[ "$opens" -ge "$total" ] || _fail "--verify opened only $opens of $total files"
check_tree "$S" "$DST/verify"

_log "a file-system-wide read-only mount"
umount "$SRC" || _fail "umount"
mount -o ro "$LOOP_SRC" "$SRC" || _fail "mount ro"
run_check timeout 120 "$ENCIO" -q copy -r "$SRC/sv" "$DST/ro-mount"
check_tree "$SRC/sv" "$DST/ro-mount"

_log "a writable mount inside the read-only one"
# There reading a symlink moves its access time (relatime, an old atime):
# the copy must take the new one, as on any writable source.
mount -t tmpfs -o size=1M,relatime tmpfs "$SRC/sv/mnt" || _fail "mount tmpfs"
_MOUNTS+=("$SRC/sv/mnt")
ln -s somewhere "$SRC/sv/mnt/link"
touch -h -d '2000-01-01' "$SRC/sv/mnt/link"
run_check timeout 120 "$ENCIO" -q copy -r "$SRC/sv" "$DST/nested"
[ "$(stat -c %X "$SRC/sv/mnt/link")" -gt 946684800 ] || _fail "readlink left the atime: nothing tested"
[ "$(stat -c '%N %x %y' "$SRC/sv/mnt/link" | sed "s|$SRC/sv||")" = \
	"$(stat -c '%N %x %y' "$DST/nested/mnt/link" | sed "s|$DST/nested||")" ] ||
	_fail "symlink on the inner mount: $(stat -c '%x' "$DST/nested/mnt/link"), not $(stat -c '%x' "$SRC/sv/mnt/link")"
