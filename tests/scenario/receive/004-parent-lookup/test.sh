#!/bin/bash
# An incremental stream's parent and clone sources are found anywhere in the
# destination's filesystem by received UUID (else UUID), and opened from
# the root of the mount holding DEST: a parent in another subvolume is
# found; a parent outside the mount (DEST a bind mount of a plain directory)
# is refused at once, naming it; a parent or clone source whose transid is
# not the stream's is taken, as btrfs receive takes it, and -v says so.
# btrfs receive is run on the same inputs and compared.
source "$(dirname "$0")/../../../common.sh"
require_root
require_stream_gen
# A receive that loops would never end: each one gets a bound.
LIMIT=30

make_btrfs src 256M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
compressible 300000 >"$SRC/vol/text"
random_bytes 200000 parent >"$SRC/vol/random"
mkdir "$SRC/vol/dir"
echo one >"$SRC/vol/dir/f"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s1"
# The clone makes btrfs send emit CLONE commands reading from the parent.
cp --reflink=always "$SRC/vol/random" "$SRC/vol/random-clone"
echo two >>"$SRC/vol/dir/f"
mv "$SRC/vol/text" "$SRC/vol/dir/text"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s2"
run_check btrfs send -q -f "$TEST_TMP/full" "$SRC/s1"
run_check btrfs send -q -f "$TEST_TMP/incr" -p "$SRC/s1" "$SRC/s2"
btrfs receive --dump -f "$TEST_TMP/incr" | grep -q '^clone ' ||
	_fail "the incremental stream has no clone from the parent"

# run_receive TOOL DEST STREAM: exit status in $RC, stderr in $ERR_OUT.
run_receive()
{
	echo "+ $1 receive -f $3 $2"
	if [ "$1" = btrfs ]; then
		ERR_OUT=$(timeout $LIMIT btrfs receive -f "$3" "$2" 2>&1 >/dev/null)
	else
		ERR_OUT=$(timeout $LIMIT "$ENCIO" -q receive -f "$3" "$2" 2>&1 >/dev/null)
	fi
	RC=$?
	[ -n "$ERR_OUT" ] && echo "$ERR_OUT"
	[ $RC -ne 124 ] || _fail "$1 receive into $2 still running after ${LIMIT}s"
}

# Each tool gets a filesystem of its own laid out alike: subvolumes a and b,
# a directory b/dir, a plain directory plain, and a bind mount of plain
# whose mount point is on tmpfs.
make_tmpfs binds 16M
BINDS=$MNT
for tool in encio btrfs; do
	make_btrfs "dst-$tool" 256M
	D=$MNT
	run_check btrfs -q subvolume create "$D/a"
	run_check btrfs -q subvolume create "$D/b"
	mkdir "$D/b/dir" "$D/plain" "$BINDS/$tool"
	mount --bind "$D/plain" "$BINDS/$tool" || _fail "bind mount"
	_MOUNTS+=("$BINDS/$tool")

	_log "$tool: full stream into a"
	run_receive "$tool" "$D/a" "$TEST_TMP/full"
	[ $RC -eq 0 ] || _fail "$tool: full receive failed"

	_log "$tool: incremental into a bind mount of a plain directory"
	run_receive "$tool" "$BINDS/$tool" "$TEST_TMP/incr"
	[ $RC -ne 0 ] || _fail "$tool: receive through the bind mount succeeded"
	eval "BIND_ERR_$tool=\$ERR_OUT"
	[ -z "$(ls -A "$D/plain")" ] || _fail "$tool: the failed receive left $(ls -A "$D/plain")"

	_log "$tool: incremental into b/dir, the parent in subvolume a"
	run_receive "$tool" "$D/b/dir" "$TEST_TMP/incr"
	[ $RC -eq 0 ] || _fail "$tool: parent in another subvolume not found"
	diff -r "$SRC/s2" "$D/b/dir/s2" || _fail "$tool: incremental result differs"
	[ "$(tree_stat "$SRC/s2")" = "$(tree_stat "$D/b/dir/s2")" ] ||
		_fail "$tool: incremental result's metadata differs"
done
D=$TEST_TMP/dst-encio

# The parent's received UUID, as btrfs receive's error names it.
PARENT_UUID=$(btrfs subvolume show "$D/a/s1" | awk '/Received UUID:/ { print $3 }')
STRANSID=$(btrfs subvolume show "$D/a/s1" | awk '/Send transid:/ { print $3 }')
[ -n "$PARENT_UUID" ] && [ -n "$STRANSID" ] || _fail "no received UUID or send transid on a/s1"
echo "$BIND_ERR_encio" | grep -qF "parent subvolume $PARENT_UUID" ||
	_fail "the error does not name the parent $PARENT_UUID"
echo "$BIND_ERR_encio" | grep -qF "outside the mount" ||
	_fail "the error does not say the parent is outside the mount"
# btrfs receive fails there too, with advice to remount instead:
echo "btrfs receive through the bind mount said: $BIND_ERR_btrfs"

_log "a stream whose parent is the received a/s1 at its send transid"
"$GEN" >"$TEST_TMP/match" <<END || _fail "stream-gen"
snapshot s3 0x33 $PARENT_UUID $STRANSID
mkfile new
end
END
run_receive encio "$D/b/dir" "$TEST_TMP/match"
[ $RC -eq 0 ] || _fail "parent at its send transid refused"
[ -f "$D/b/dir/s3/new" ] && [ -f "$D/b/dir/s3/dir/f" ] || _fail "s3 is not a snapshot of s1 with new"

_log "a stream naming a/s1 at another transid"
"$GEN" >"$TEST_TMP/stale" <<END || _fail "stream-gen"
snapshot s4 0x34 $PARENT_UUID $((STRANSID + 1))
mkfile new
end
END
run_receive btrfs "$TEST_TMP/dst-btrfs/b/dir" "$TEST_TMP/stale"
[ $RC -eq 0 ] || _fail "btrfs receive refused a parent at another transid"
ERR_OUT=$("$ENCIO" -v receive -f "$TEST_TMP/stale" "$D/b/dir" 2>&1 >/dev/null) ||
	_fail "parent at another transid refused: $ERR_OUT"
echo "$ERR_OUT" | grep -qF "parent subvolume $PARENT_UUID at 'a/s1' has transid $STRANSID, the stream's is $((STRANSID + 1)): used" ||
	_fail "-v does not name the parent and both transids"
[ -f "$D/b/dir/s4/new" ] && [ -f "$D/b/dir/s4/dir/f" ] || _fail "s4 is not a snapshot of s1 with new"

_log "a clone from a/s1 at another transid"
"$GEN" >"$TEST_TMP/clone-stale" <<END || _fail "stream-gen"
subvol s5 0x35
mkfile f
truncate f 200000
clone f 0 131072 $PARENT_UUID $((STRANSID + 1)) random 0
end
END
run_receive encio "$D/b/dir" "$TEST_TMP/clone-stale"
[ $RC -eq 0 ] || _fail "clone source at another transid refused"
cmp -n 131072 "$D/b/dir/s5/f" "$D/a/s1/random" || _fail "the clone's data differs"
"$GEN" >"$TEST_TMP/clone" <<END || _fail "stream-gen"
subvol s6 0x36
mkfile f
truncate f 200000
clone f 0 131072 $PARENT_UUID $STRANSID random 0
end
END
run_receive encio "$D/b/dir" "$TEST_TMP/clone"
[ $RC -eq 0 ] || _fail "clone from a/s1 at its send transid refused"
cmp -n 131072 "$D/b/dir/s6/f" "$D/a/s1/random" || _fail "the clone's data differs"

_log "-m: parents looked up from a directory that does not reach them"
run_mustfail "-m b" "$ENCIO" receive -m "$D/b" -f "$TEST_TMP/match" "$D/b/dir"
echo "$ERR_OUT" | grep -qF "outside the -m directory '/b'" || _fail "-m b: wrong error"
run_check "$ENCIO" -q receive -m "$D" -f "$TEST_TMP/incr" "$BINDS/encio"
diff -r "$SRC/s2" "$D/plain/s2" || _fail "-m: incremental result through the bind mount differs"
exit 0
