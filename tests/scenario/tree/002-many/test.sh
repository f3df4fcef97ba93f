#!/bin/bash
# encio copy -r of a tree with 10,000 small files and hard links across
# directories: content equal, the link structure kept, many files in
# flight in one pipeline, -j bounds them. The tree is a subvolume: copy and
# send read its whole tree ahead of the walk, but not for a directory
# inside it. On a read-only snapshot the read-ahead also tells which
# entries have xattrs: the others are not asked, and those that have them
# keep them, in copy -r and in send.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 1G noatime
DST=$MNT

T=$SRC/many
btrfs -q subvolume create "$T" || _fail "subvolume create"
_log "making 10,000 files"
python3 - "$T" <<'PY'
import os, sys
root = sys.argv[1]
line = b"encio test line: the quick brown fox jumps over the lazy dog 0123456789\n"
for d in range(100):
    p = os.path.join(root, "d%02d" % (d // 10), "e%02d" % d)
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        n = (d * 100 + f) * 37 % 20000
        with open(os.path.join(p, "f%03d" % f), "wb") as fh:
            fh.write((line * (n // len(line) + 1))[:n] + b"%d" % f)
PY
# Hard links: within a directory, across directories, a link group of 4.
mkdir "$T/links" "$T/links/sub"
compressible 500000 >"$T/links/one"
ln "$T/links/one" "$T/links/one-again"
ln "$T/links/one" "$T/d00/e00/one-elsewhere"
ln "$T/links/one" "$T/links/sub/one-deeper"
echo two >"$T/links/two"
ln "$T/links/two" "$T/d09/two"
ln -s one "$T/links/sym"
ln "$T/links/sym" "$T/links/sym-hard"
sync

inode_groups()
{
	# names grouped by inode, the inode numbers themselves dropped
	(cd "$1" && find . ! -type d -printf '%i %P\n' | sort -k2 |
		awk '{ g[$1] = g[$1] " " $2 } END { for (i in g) print g[i] }' | sort)
}

_log "copy, 8 files in flight"
out=$(timeout 300 "$ENCIO" copy -r -j 8 --format=json "$T" "$DST/j8") || _fail "copy: $out"
echo "$out"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 10002 and d["hardlinks"] == 5 and d["failed"] == 0 and 1 < d["peak_files_in_flight"] <= 8, d' ||
	_fail "bad summary"
diff -r "$T" "$DST/j8" || _fail "diff -r"
diff <(inode_groups "$T") <(inode_groups "$DST/j8") || _fail "link structure differs"
[ "$(stat -c %h "$DST/j8/links/one")" = 4 ] || _fail "link count of one"

_log "copy, default parallelism"
out=$(timeout 300 "$ENCIO" copy -r --format=json "$T" "$DST/def") || _fail "copy: $out"
echo "$out"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 10002 and d["peak_files_in_flight"] > 8, d' ||
	_fail "bad summary"
diff -r "$T" "$DST/def" || _fail "diff -r"
diff <(inode_groups "$T") <(inode_groups "$DST/def") || _fail "link structure differs"
[ -z "$(find "$DST" -name '.*.encio-*')" ] || _fail "temporaries left"

# The read-ahead: one search over every key of the subvolume (tree_id 0,
# from objectid 0 to the last); the per-file extent searches name their
# inode. LeakSanitizer cannot run under ptrace (strace_calls turns it off;
# the strace run by script here too).
no_lsan=ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
whole_tree_searches()
{
	grep -c 'BTRFS_IOC_TREE_SEARCH_V2, {key={tree_id=0, min_objectid=0, max_objectid=UINT64_MAX' "$1"
}
traced()
{
	local out=$1
	shift
	strace_calls "$out" ioctl "$@" >/dev/null ||
		_fail "under strace: $*"
}
_log "read-ahead of a whole subvolume, not of a directory in one"
traced "$TEST_TMP/strace.sub" "$ENCIO" -q copy -r "$T" "$DST/ra"
[ "$(whole_tree_searches "$TEST_TMP/strace.sub")" -ge 1 ] || _fail "no read-ahead for a subvolume"
diff -r "$T" "$DST/ra" || _fail "diff -r (read-ahead)"
traced "$TEST_TMP/strace.dir" "$ENCIO" -q copy -r "$T/d00" "$DST/ra-dir"
[ "$(whole_tree_searches "$TEST_TMP/strace.dir")" = 0 ] || _fail "read-ahead for a directory"
diff -r "$T/d00" "$DST/ra-dir" || _fail "diff -r (directory)"
# send takes a read-only subvolume
btrfs -q subvolume snapshot -r "$T" "$SRC/many-ro" || _fail "snapshot"
traced "$TEST_TMP/strace.send" "$ENCIO" -q send "$SRC/many-ro"
[ "$(whole_tree_searches "$TEST_TMP/strace.send")" -ge 1 ] || _fail "no read-ahead for send"
# On a terminal send estimates its total beside the walk: the walk's
# read-ahead, and one search of the subvolume's items (inodes to file
# extents) for the estimate, no second walk.
if command -v script >/dev/null; then
	script -qec "$(printf '%q ' env "$no_lsan" strace -f --seccomp-bpf -qq -e trace=ioctl \
		-o "$TEST_TMP/strace.tty" "$ENCIO" send -f "$TEST_TMP/tty.stream" "$SRC/many-ro")" \
		/dev/null >/dev/null || _fail "send on a terminal under strace"
	[ "$(whole_tree_searches "$TEST_TMP/strace.tty")" = 1 ] || _fail "not one read-ahead for one walk"
	grep -qE 'BTRFS_IOC_TREE_SEARCH_V2, \{key=\{tree_id=0, .*min_type=0, max_type=BTRFS_EXTENT_DATA_KEY,' \
		"$TEST_TMP/strace.tty" || _fail "no search of the subvolume's items for the estimate"
fi

_log "finished files are closed through the ring, not a close(2) each"
strace_calls "$TEST_TMP/strace.close" close "$ENCIO" -q copy -r "$T" "$DST/cl" ||
	_fail "copy under strace"
diff -r "$T" "$DST/cl" || _fail "diff -r (closes)"
closes=$(grep -c '^[0-9]* *close(' "$TEST_TMP/strace.close")
_log "$closes close(2) calls for 10,002 files"
[ "$closes" -lt 5000 ] || _fail "a close(2) per file"

_log "rerun: everything is skipped"
out=$(timeout 300 "$ENCIO" copy -r -T --format=json "$T" "$DST/def") || _fail "copy: $out"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 0 and d["skipped"] == 10002 + 5 + 1, d' ||
	_fail "rerun copied again: $out"

_log "xattrs known from the read-ahead of a read-only snapshot"
# early and late inodes, a directory, a symlink, an ACL, a capability
setfattr -n user.first -v 1 "$T/d00/e00/f000" || _fail "setfattr"
setfattr -n user.late -v 0x00ff00ff "$T/d09/e99/f099" || _fail "setfattr"
setfattr -n trusted.dir -v yes "$T/d05" || _fail "setfattr"
setfattr -n trusted.link -v onlink -h "$T/links/sym" || _fail "setfattr"
setfacl -m u:1234:r "$T/d07/e70/f050" || _fail "setfacl"
setcap cap_net_raw+ep "$T/d08/e80/f001" || _fail "setcap"
btrfs -q subvolume snapshot -r "$T" "$SRC/snap" || _fail "snapshot"
entries=$(find "$T" | wc -l)
xattr_dump()
{
	(cd "$1" && getfattr -R -h -d -m "$XATTRS" --absolute-names . 2>/dev/null)
}
list_calls()
{
	grep -c 'listxattr(' "$1"
}
strace_calls "$TEST_TMP/strace.xa" flistxattr,llistxattr \
	"$ENCIO" -q copy -r "$SRC/snap" "$DST/xa" || _fail "copy -r of the snapshot"
diff -r --no-dereference "$SRC/snap" "$DST/xa" || _fail "diff -r (snapshot)"
diff <(xattr_dump "$SRC/snap") <(xattr_dump "$DST/xa") || _fail "xattrs differ (copy -r)"
_log "copy -r asked $(list_calls "$TEST_TMP/strace.xa") of $entries entries for xattrs"
[ "$(list_calls "$TEST_TMP/strace.xa")" -lt $((entries / 2)) ] || _fail "copy -r listed the xattrs of most entries"
# A writable subvolume may change while read: every entry is asked.
strace_calls "$TEST_TMP/strace.rw" flistxattr,llistxattr \
	"$ENCIO" -q copy -r "$T" "$DST/rw" || _fail "copy -r of the subvolume"
_log "copy -r of the writable subvolume asked $(list_calls "$TEST_TMP/strace.rw")"
[ "$(list_calls "$TEST_TMP/strace.rw")" -ge $((entries - 10)) ] || _fail "copy -r trusted the read-ahead of a writable subvolume"
diff <(xattr_dump "$T") <(xattr_dump "$DST/rw") || _fail "xattrs differ (writable)"
strace_calls "$TEST_TMP/strace.send-xa" llistxattr \
	"$ENCIO" -q send -f "$TEST_TMP/snap.stream" "$SRC/snap" || _fail "send of the snapshot"
_log "send asked $(list_calls "$TEST_TMP/strace.send-xa") of $entries entries for xattrs"
[ "$(list_calls "$TEST_TMP/strace.send-xa")" -lt $((entries / 2)) ] || _fail "send listed the xattrs of most entries"
mkdir "$DST/recv"
"$ENCIO" -q receive -f "$TEST_TMP/snap.stream" "$DST/recv" || _fail "receive"
diff <(xattr_dump "$SRC/snap") <(xattr_dump "$DST/recv/snap") || _fail "xattrs differ (send | receive)"
exit 0
