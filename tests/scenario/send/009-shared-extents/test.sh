#!/bin/bash
# encio send keeps shared data shared: a range sent before, in the same
# subvolume or in an earlier one of the stream, goes as CLONE, which
# btrfs receive --dump shows and which btrfs receive and encio receive
# apply. Reflinks, a clone into the middle of a file, a file cloned into
# itself, a deduplicated pair, compressed and plain extents, an unaligned
# tail; one snapshot, and two snapshots of one subvolume in one stream
# (the second sent as the difference from the first, as btrfs send -c
# would, and received as its snapshot). A received subvolume is sent by
# its received UUID, as btrfs send does.
# On each receiver: content equal, disk usage (compsize) no more than 1.5%
# over the source's, the extents shared.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
command -v filefrag >/dev/null || _not_run "needs filefrag"
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 1G compress-force=zstd
SRC=$MNT
# one filesystem per receiver: a clone source is found by received UUID
# anywhere in its filesystem
declare -A BY
make_btrfs by-btrfs 1G
BY[btrfs]=$MNT
make_btrfs by-encio 1G
BY[encio]=$MNT

make_shared_tree "$SRC"

_log "one snapshot: its own sharing as CLONE"
run_check "$ENCIO" -q send -f "$TEST_TMP/one.stream" "$SRC/snap1"
btrfs receive --dump -f "$TEST_TMP/one.stream" >"$TEST_TMP/one.dump" || _fail "btrfs receive --dump"
for f in mixed text.reflink random.reflink tail.reflink middle self dup2; do
	grep -qE "^clone +\./snap1/$f " "$TEST_TMP/one.dump" || _fail "no CLONE for $f"
done
# the walk (in inode order, as btrfs send) meets random before middle, text
# before mixed: their shared data is cloned from the first met
grep -qE '^clone +\./snap1/middle .* from=\./snap1/random ' "$TEST_TMP/one.dump" || _fail "no CLONE from random"
grep -qE '^clone +\./snap1/mixed .* from=\./snap1/text ' "$TEST_TMP/one.dump" || _fail "no CLONE from text"
! grep -qE '^(write|encoded_write) +\./snap1/text.reflink ' "$TEST_TMP/one.dump" || _fail "data of text.reflink sent"
# btrfs send finds sharing within the snapshot too: no bigger than its stream
btrfs -q send --compressed-data -f "$TEST_TMP/one.btrfs" "$SRC/snap1" || _fail "btrfs send"
e=$(stat -c %s "$TEST_TMP/one.stream") b=$(stat -c %s "$TEST_TMP/one.btrfs")
echo "stream: encio $e bytes, btrfs $b bytes"
[ "$e" -le $((b + b / 50)) ] || _fail "stream of $e bytes, btrfs send's $b"

# receive_with btrfs|encio STREAM DIR: into DIR of that receiver's filesystem
receive_with()
{
	mkdir -p "${BY[$1]}/$3"
	if [ "$1" = btrfs ]; then
		btrfs receive -f "$2" "${BY[btrfs]}/$3" >/dev/null
	else
		"$ENCIO" -q receive -f "$2" "${BY[encio]}/$3"
	fi
}

for r in btrfs encio; do
	_log "$r receive of one snapshot"
	receive_with "$r" "$TEST_TMP/one.stream" one || _fail "$r receive"
	diff -r "$SRC/snap1" "${BY[$r]}/one/snap1" || _fail "$r: snap1 differs"
	sync
	s=$(disk "$SRC/snap1") d=$(disk "${BY[$r]}/one/snap1")
	echo "disk usage: source $s, received $d"
	within "$d" "$s" || _fail "$r: disk usage $d against the source's $s"
	for f in text.reflink self dup2 tail.reflink; do
		[ "$(shared_extents "${BY[$r]}/one/snap1/$f")" -gt 0 ] || _fail "$r: $f has no shared extent"
	done
done

_log "two snapshots of one subvolume in one stream: the second as a snapshot of the first"
run_check "$ENCIO" -q send -f "$TEST_TMP/two.stream" "$SRC/snap1" "$SRC/snap2"
"$ENCIO" dump -f "$TEST_TMP/two.stream" >"$TEST_TMP/two.dump" || _fail "encio dump"
uuid1=$(uuid_of "$SRC/snap1")
grep -qE "^snapshot +\./snap2 .* parent_uuid=$uuid1 " "$TEST_TMP/two.dump" ||
	_fail "snap2 is not sent as the difference from snap1"
e2=$(stat -c %s "$TEST_TMP/two.stream")
echo "stream of both: $e2 bytes"
[ "$e2" -le $((e + e / 5)) ] || _fail "stream of both $e2 bytes, of snap1 alone $e"
# fresh receivers: the snapshot's parent is found by received UUID, and
# the first snap1 received would do
ONE_BTRFS=${BY[btrfs]}
make_btrfs by-btrfs-2 1G
BY[btrfs]=$MNT
make_btrfs by-encio-2 1G
BY[encio]=$MNT
for r in btrfs encio; do
	_log "$r receive of both"
	sync
	receive_with "$r" "$TEST_TMP/two.stream" two || _fail "$r receive of two"
	diff -r "$SRC/snap1" "${BY[$r]}/two/snap1" || _fail "$r: snap1 differs"
	diff -r "$SRC/snap2" "${BY[$r]}/two/snap2" || _fail "$r: snap2 differs"
	sync
	s=$(disk "$SRC/snap1" "$SRC/snap2") d=$(disk "${BY[$r]}/two/snap1" "${BY[$r]}/two/snap2")
	echo "disk usage: sources $s, received $d"
	within "$d" "$s" || _fail "$r: disk usage $d against the sources' $s"
	[ "$(uuid_of "${BY[$r]}/two/snap2" Parent)" = "$(uuid_of "${BY[$r]}/two/snap1")" ] ||
		_fail "$r: snap2 is not a snapshot of snap1"
done

_log "a received snapshot sent again goes by its received UUID, as btrfs send sends it"
run_check "$ENCIO" -q send -f "$TEST_TMP/again.stream" "$ONE_BTRFS/one/snap1"
run_check btrfs -q send -f "$TEST_TMP/again.btrfs" "$ONE_BTRFS/one/snap1"
[ "$("$ENCIO" dump -f "$TEST_TMP/again.stream" | awk 'NR == 1 { print $3 }')" = \
	"$(btrfs receive --dump -f "$TEST_TMP/again.btrfs" | awk 'NR == 1 { print $3 }')" ] ||
	_fail "another UUID than btrfs send's for a received snapshot"
echo "PASS: $TEST_NAME"
