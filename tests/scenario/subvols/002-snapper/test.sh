#!/bin/bash
# copy -r --subvolumes of snapper's layout: a writable subvolume whose
# read-only snapshots sit inside it (@home/.snapshots/N/snapshot, with
# .snapshots a writable subvolume of its own). The writable ones are
# copied first (the others are inside them), from snapshots all taken
# before the first copy, so the differences of every snapshot after them
# are computed ahead too. In DEST: every snapshot read-only, equal in
# content and metadata, a snapshot of the copy of the relative the copy
# names; @home and .snapshots writable, @home's files equal; no temporary
# snapshot left.
source "$(dirname "$0")/../../../common.sh"
require_root
export TZ=UTC

make_btrfs src 512M compress-force=zstd,noatime
SRC=$MNT
make_btrfs dst 512M noatime
DST=$MNT

# churn N: a new file, an append, a rename, a delete in @home
churn()
{
	local h=$SRC/@home n=$1
	random_bytes $((100000 + n * 7000)) "home$n" >"$h/new$n"
	compressible 100000 >>"$h/log"
	[ -e "$h/new$((n - 1))" ] && mv "$h/new$((n - 1))" "$h/kept$n"
	[ -e "$h/kept$((n - 2))" ] && rm "$h/kept$((n - 2))"
	touch -d "@$((1600000000 + n * 1000))" "$h/new$n"
	sync
}

NR=8
run_check btrfs -q subvolume create "$SRC/@home"
run_check btrfs -q subvolume create "$SRC/@home/.snapshots"
for n in $(seq 1 $NR); do
	churn "$n"
	mkdir "$SRC/@home/.snapshots/$n"
	run_check btrfs -q subvolume snapshot -r "$SRC/@home" "$SRC/@home/.snapshots/$n/snapshot"
done
churn $((NR + 1))

_log "copy -r --subvolumes of @home"
run_check "$ENCIO" -v copy -r --subvolumes --final "$SRC/@home" "$DST/" >"$TEST_TMP/copy.out" 2>&1
cat "$TEST_TMP/copy.out"
# @home, .snapshots, then the first snapshot whole and 7 differences
grep -q "subvolumes: 10 of 10 copied (8 as snapshots of copies, " "$TEST_TMP/copy.out" ||
	_fail "summary: $(grep subvolumes: "$TEST_TMP/copy.out")"
check_made_ahead "$TEST_TMP/copy.out" 8

for n in $(seq 1 $NR); do
	p=.snapshots/$n/snapshot
	# but the empty directory a snapshot shows for .snapshots, which a
	# copy leaves out as btrfs send does (and the size of the directory
	# that held its name)
	diff -r -x .snapshots "$SRC/@home/$p" "$DST/@home/$p" || _fail "$p differs"
	[ ! -e "$DST/@home/$p/.snapshots" ] || _fail "$p: .snapshots copied"
	diff <(tree_stat "$SRC/@home/$p" | grep -v '^\.\(/\.snapshots\)\? ') \
		<(tree_stat "$DST/@home/$p" | grep -v '^\. ') || _fail "$p: metadata differs"
	btrfs property get "$DST/@home/$p" ro | grep -q 'ro=true' || _fail "$p writable"
	# a snapshot of the copy of the relative closest in ctransid (@home's
	# or an earlier snapshot's, whichever the transactions made closer),
	# the one the copy names
	rel=$(sed -n "s|^subvolume '$DST/@home/$p': a snapshot of the copy of '$SRC/\(.*\)'\$|\1|p" "$TEST_TMP/copy.out")
	[ -n "$rel" ] || _fail "$p: not made as a snapshot of a copy"
	parent=$(uuid_of "$DST/@home/$p" Parent)
	[ "$parent" = "$(uuid_of "$DST/$rel")" ] || _fail "$p: parent $parent, not the copy of $rel"
done
for p in "" /.snapshots; do
	btrfs property get "$DST/@home$p" ro | grep -q 'ro=false' || _fail "@home$p read-only"
done
# @home's own files (the snapshots are subvolumes, compared above)
diff -r -x .snapshots "$SRC/@home" "$DST/@home" || _fail "@home differs"
if [ -n "$(find "$SRC" -maxdepth 3 -name '*.encio-*')" ]; then
	_fail "a temporary snapshot left in SRC"
fi
