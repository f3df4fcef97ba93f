#!/bin/bash
# encio copy -r: every entry type and attribute survives. diff -r, stat and
# getfattr agree between SRC and DEST; cp -r semantics for DEST; sparse
# files stay sparse; compressed extents stay compressed.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"
command -v setfacl >/dev/null || _not_run "needs setfacl (acl)"
command -v setcap >/dev/null || _not_run "needs setcap (libcap2-bin)"

# noatime: the checks themselves (find, diff) must not change atimes.
make_btrfs src 512M compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 512M noatime
DST=$MNT

T=$SRC/tree
mkdir -p "$T/a/b/c" "$T/empty" "$T/ro"
compressible 300000 >"$T/a/text"
random_bytes 200000 r1 >"$T/a/b/random"
: >"$T/a/b/c/zero"
truncate -s 64M "$T/sparse"
compressible 100000 | dd of="$T/sparse" bs=4K seek=1000 conv=notrunc status=none
ln -s a/text "$T/link-rel"
ln -s /nonexistent/target "$T/link-dangling"
ln -s ../../a "$T/a/b/link-dir"
mkfifo "$T/fifo"
mknod "$T/null-dev" c 1 3
mknod "$T/blk-dev" b 7 200
echo hello >"$T/a/suid"
chmod 4755 "$T/a/suid"
chown 1234:5678 "$T/a/suid"
# Modes the umask would cut, and a read-only one.
echo w >"$T/a/world-writable"
chmod 0666 "$T/a/world-writable"
echo r >"$T/a/read-only"
chmod 0400 "$T/a/read-only"
# A file capability: writes clear it, so it must be set after the data.
compressible 200000 >"$T/a/capable"
setcap cap_net_raw+ep "$T/a/capable" || _fail "setcap"
chmod 1777 "$T/empty"
chown 1234:5678 "$T/a/text" "$T/fifo"
chown -h 4321:8765 "$T/link-rel"
chown 99:98 "$T/a/b"
setfattr -n user.color -v blue "$T/a/text"
setfattr -n user.bin -v 0x00ff00ff "$T/a/b/random"
setfattr -n trusted.secret -v s3cr3t "$T/a/text"
setfattr -n security.test -v sec "$T/a/b/c/zero"
setfattr -n user.dir -v yes "$T/a/b"
setfattr -n trusted.link -v onlink -h "$T/link-rel"
setfattr -n trusted.fifo -v f "$T/fifo"
setfacl -m u:1000:rwx,g:2000:r "$T/a/text"
setfacl -d -m u:1000:rx "$T/a"
touch -h -d '2001-02-03 04:05:06.123456789' "$T/link-rel"
touch -d '2002-03-04 05:06:07.5' "$T/a/text"
touch -a -d '1999-01-01 00:00:00' "$T/a/b/random"
touch -d '2003-01-01 01:01:01' "$T/a/b/c" "$T/a/b" "$T/a" "$T/empty"
chmod 0555 "$T/ro"
touch -d '2004-01-01' "$T/ro" "$T"
sync

check_tree()
{
	local a=$1 b=$2
	# atimes of directories and symlinks too: the walk reads with O_NOATIME
	diff <(tree_stat "$a") <(tree_stat "$b") || _fail "stat differs: $a $b"
	# diff cannot compare FIFOs and devices: stat did
	diff -r --no-dereference -x fifo -x '*-dev' "$a" "$b" || _fail "diff -r: $a $b"
	diff <(tree_xattrs "$a") <(tree_xattrs "$b") || _fail "xattrs differ: $a $b"
	[ -z "$(find "$b" -name '.*.encio-*')" ] || _fail "temporaries left in $b"
}

_log "DEST missing: DEST becomes a copy of SRC"
run_check timeout 120 "$ENCIO" copy -r "$T" "$DST/copy1"
check_tree "$T" "$DST/copy1"
[ "$(du -k "$DST/copy1/sparse" | cut -f1)" -lt 1024 ] || _fail "sparse file became dense"
a=$("$ENCIO" list "$T/a/text" | awk 'NF==5 && $1 ~ /^[0-9]+$/ {print $1, $2, $4, $5}')
b=$("$ENCIO" list "$DST/copy1/a/text" | awk 'NF==5 && $1 ~ /^[0-9]+$/ {print $1, $2, $4, $5}')
[ "$a" = "$b" ] || _fail "extent layout differs: '$a' vs '$b'"
echo "$b" | grep -q zstd || _fail "compressed extents not kept"
[ "$(readlink "$DST/copy1/link-rel")" = a/text ] || _fail "symlink target"

_log "DEST exists: copy into DEST/basename(SRC), JSON summary"
mkdir "$DST/into"
out=$(timeout 120 "$ENCIO" copy -r --format=json "$T" "$DST/into") || _fail "copy into: $out"
echo "$out"
check_tree "$T" "$DST/into/tree"
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["files"] == 8 and d["dirs"] == 6 and d["symlinks"] == 3 and d["specials"] == 3 and d["failed"] == 0, d' ||
	_fail "bad JSON summary"

_log "DEST inside a set-gid directory: every entry keeps its own group"
# The copy's root, made there, inherits the group and the set-gid bit; had
# that stayed, entries made under a/b (group 98) would take group 98.
mkdir "$DST/sgid"
chgrp 4444 "$DST/sgid"
chmod 2775 "$DST/sgid"
run_check timeout 120 "$ENCIO" -q copy -r "$T" "$DST/sgid"
check_tree "$T" "$DST/sgid/tree"

_log "several sources into a directory; a file source with -r"
mkdir "$DST/multi"
run_check timeout 120 "$ENCIO" -q copy -r "$T/a" "$T/empty" "$T/sparse" "$DST/multi"
check_tree "$T/a" "$DST/multi/a"
check_tree "$T/empty" "$DST/multi/empty"
check_same_file "$T/sparse" "$DST/multi/sparse"

_log "text summary counts directories"
out=$(timeout 120 "$ENCIO" copy -r "$T" "$DST/copy2") || _fail "$out"
echo "$out"
echo "$out" | grep -q "6 directories" || _fail "summary lacks directories"
check_tree "$T" "$DST/copy2"

_log "--progress forces progress on stderr, -q silences it"
timeout 120 "$ENCIO" copy -r --progress "$T" "$DST/prog" >"$TEST_TMP/out" 2>"$TEST_TMP/err" || _fail "copy with --progress"
tr '\r' '\n' <"$TEST_TMP/err" | tail -3
grep -q "entries.*ETA" "$TEST_TMP/err" || _fail "no progress line"
check_tree "$T" "$DST/prog"
timeout 120 "$ENCIO" copy -r -q --progress "$T" "$DST/quiet" >"$TEST_TMP/out" 2>"$TEST_TMP/err" || _fail "copy -q"
[ ! -s "$TEST_TMP/err" ] && [ ! -s "$TEST_TMP/out" ] || _fail "-q printed something"
timeout 120 "$ENCIO" copy -r "$T" "$DST/noprog" 2>"$TEST_TMP/err" >/dev/null || _fail "copy"
[ ! -s "$TEST_TMP/err" ] || _fail "progress shown though stderr is not a terminal"

_log "a new tree: every entry made under its own name, one rename (the staging directory)"
strace_calls "$TEST_TMP/strace" rename,renameat,renameat2,linkat \
	timeout 120 "$ENCIO" -q copy -r "$T" "$DST/staged" || _fail "copy under strace"
cat "$TEST_TMP/strace"
[ "$(grep -c rename "$TEST_TMP/strace")" = 1 ] || _fail "renames beside the staging directory's"
grep -q "rename.*\"\.staged\.encio-partial\".*\"staged\"" "$TEST_TMP/strace" || _fail "staging directory not renamed into place"
! grep -q "linkat" "$TEST_TMP/strace" || _fail "a file linked into place"
check_tree "$T" "$DST/staged"

_log "a directory into itself is refused, the rest copied"
run_mustfail "into itself" timeout 120 "$ENCIO" -q copy -r "$T/a" "$T/a/b"
echo "$ERR_OUT" | grep -qF "into itself, as '$T/a/b/a'" || _fail "the error does not name the copy"
! echo "$ERR_OUT" | grep -qF "encio-partial" || _fail "the error names the staging directory"
rm -rf "$T/a/b/a"
exit 0
