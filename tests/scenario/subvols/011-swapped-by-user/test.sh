#!/bin/bash
# copy -rT --subvolumes holds SRC's subvolumes by descriptor and checks
# them against what it listed: an unprivileged user who, while the copy
# runs, swaps their read-only snapshot for a symlink to root's subvolume,
# or for another subvolume of theirs, gets neither copied at its name:
# the copy fails naming it, and nothing of root's subvolume is in the
# user's part of DEST.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 768M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/secret"
echo "root's secret" >"$SRC/secret/s"
chmod 0700 "$SRC/secret"
run_check btrfs property set -ts "$SRC/secret" ro true
run_check btrfs -q subvolume create "$SRC/big"
random_bytes 100000000 big >"$SRC/big/f"
# big is copied first: its last change is the oldest
sync
run_check btrfs property set -ts "$SRC/big" ro true
sync
# the user reaches their directory (the test's own is root's alone)
chmod 0755 "$TEST_TMP" "$SRC"
mkdir "$SRC/u"
chown 4321:4321 "$SRC/u"
chmod 0700 "$SRC/u"
as_user btrfs -q subvolume create "$SRC/u/data" || _not_run "a user cannot create subvolumes here"
as_user sh -c "echo mine >'$SRC/u/data/m'"
as_user btrfs -q subvolume snapshot -r "$SRC/u/data" "$SRC/u/snap2" ||
	_not_run "a user cannot snapshot here"
as_user btrfs -q subvolume create "$SRC/u/other"
as_user sh -c "echo other >'$SRC/u/other/o'"
run_check btrfs property set -ts "$SRC/u/other" ro true
sync

# swap: how the user swaps u/snap2 once the copy is inside big
copy_swapped() {
	local dst=$1 swap=$2 pid
	"$ENCIO" -q copy -rT --subvolumes "$SRC" "$dst" >"$TEST_TMP/out" 2>&1 &
	pid=$!
	stop_when_open $pid "$SRC/big/f"
	as_user mv -T "$SRC/u/snap2" "$SRC/u/snap2.was"
	case $swap in
	symlink) as_user ln -s ../secret "$SRC/u/snap2" ;;
	other) as_user mv -T "$SRC/u/other" "$SRC/u/snap2" ;;
	esac
	kill -CONT $pid
	wait $pid && _fail "$swap: the copy succeeded with u/snap2 swapped"
	cat "$TEST_TMP/out"
	grep -q "u/snap2" "$TEST_TMP/out" || _fail "$swap: the error does not name u/snap2"
	! grep -rqs "root's secret" "$dst/u" || _fail "$swap: root's subvolume copied into the user's tree"
	[ ! -e "$dst/u/snap2/o" ] || _fail "$swap: u/other copied as u/snap2"
	# back as it was, for the next case
	if [ -L "$SRC/u/snap2" ]; then
		rm "$SRC/u/snap2"
	else
		as_user mv -T "$SRC/u/snap2" "$SRC/u/other"
	fi
	as_user mv -T "$SRC/u/snap2.was" "$SRC/u/snap2"
}

make_btrfs dst 768M
DST=$MNT
copy_swapped "$DST/a" symlink
copy_swapped "$DST/b" other
