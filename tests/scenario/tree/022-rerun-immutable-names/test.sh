#!/bin/bash
# A copy -r rerun over a copy whose files kept +i or +a (as SRC had them):
# where SRC since lifted the flag and gave the name to another inode, the
# rerun puts a hard link, a FIFO or a symlink over the old immutable or
# append-only file. Each old inode's flags are lifted for the rename, and
# every flag ends as SRC has it. Found by the random tester (a hard link
# made over an immutable file: "cannot link: Operation not permitted").
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs img 512M
S=$MNT/src
D=$MNT/dst
mkdir "$S"
random_bytes 9000 imm >"$S/imm"
random_bytes 9000 app >"$S/app"
random_bytes 9000 fifo >"$S/fifo"
random_bytes 9000 sym >"$S/sym"
random_bytes 9000 kept >"$S/kept"
chattr +i "$S/imm" "$S/fifo" "$S/kept"
chattr +a "$S/app" "$S/sym"
run_check "$ENCIO" -q copy -r "$S" "$D"
[ "$(lsattr -d "$D/imm" | cut -c5)" = i ] || _fail "the first copy lost +i"

# btrfs lists a directory in creation order: the new file comes first, and
# the old names become its hard links, a FIFO and a symlink
chattr -i "$S/imm" "$S/fifo"
chattr -a "$S/app" "$S/sym"
rm "$S/imm" "$S/app" "$S/fifo" "$S/sym"
random_bytes 7000 new >"$S/new"
ln "$S/new" "$S/imm"
ln "$S/new" "$S/app"
mkfifo "$S/fifo"
ln -s new "$S/sym"
chattr +a "$S/new"
run_check "$ENCIO" -q copy -rT "$S" "$D"

cmp "$S/new" "$D/imm" || _fail "imm is not the new file"
[ "$(stat -c %i "$D/new")" = "$(stat -c %i "$D/imm")" ] &&
	[ "$(stat -c %i "$D/new")" = "$(stat -c %i "$D/app")" ] ||
	_fail "new, imm and app are not one inode"
[ -p "$D/fifo" ] || _fail "fifo is not a FIFO"
[ "$(readlink "$D/sym")" = new ] || _fail "sym is not the symlink"
for f in new kept; do
	[ "$(lsattr -d "$S/$f" | cut -d' ' -f1)" = \
		"$(lsattr -d "$D/$f" | cut -d' ' -f1)" ] ||
		_fail "$f's flags: $(lsattr -d "$D/$f")"
done
chattr -i -a "$D/new" "$D/kept" "$S/new" "$S/kept"
