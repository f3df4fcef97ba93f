#!/bin/bash
# A fifo, a device and a socket made by an incremental stream in a
# directory without a default ACL get none, although the kernel's stream
# makes them under their orphan names in the subvolume's root, which has
# one: receive makes them without what the root passes on.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v setfacl >/dev/null || _not_run "needs setfacl"

make_btrfs src 256M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/v" "$SRC/snaps"
run_check setfacl -d -m u:1009:rx,g::rwx "$SRC/vol"
echo a >"$SRC/vol/v/a"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s1"
mkfifo "$SRC/vol/v/fifo"
mknod "$SRC/vol/v/dev" c 1 3
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$SRC/vol/v/sock"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snaps/s2"
for n in fifo dev sock; do
	[ -z "$(getfattr -h -n system.posix_acl_access "$SRC/vol/v/$n" 2>/dev/null)" ] ||
		_not_run "the kernel gave $n an ACL in SRC"
done

make_btrfs dst 256M
DST=$MNT
for sender in encio btrfs; do
	mkdir "$DST/$sender"
	for p in "" "-p $SRC/snaps/s1"; do
		snap=s1
		[ -n "$p" ] && snap=s2
		if [ $sender = encio ]; then
			"$ENCIO" send -q $p "$SRC/snaps/$snap"
		else
			btrfs send -q --compressed-data $p "$SRC/snaps/$snap"
		fi | run_check "$ENCIO" receive -q "$DST/$sender"
	done
	for n in fifo dev sock; do
		acl=$(getfattr -h -n system.posix_acl_access "$DST/$sender/s2/v/$n" 2>/dev/null)
		[ -z "$acl" ] || _fail "$sender: $n got the root's default ACL"
	done
done
