#!/bin/bash
# make install-btrfs-progs-links replaces what is at its names, a symlink
# too, and never writes through one: the program a symlink named (such as
# btrfs-progs-btrbk's multi-call binary) keeps its bytes and mode. make
# uninstall-btrfs-progs-links removes only what is encio's: a symlink to
# encio, a regular file holding exactly the script it installs; another
# program's file or link at those names stays, and is named.
source "$(dirname "$0")/../../../common.sh"
[ -f "$TOP_BUILDDIR/Makefile" ] || _not_run "needs the build's Makefile"
setup_tmp
D=$TEST_TMP/destdir
bindir=$(printf 'print-bindir:\n\t@echo $(bindir)\n' |
	make -s --no-print-directory -C "$TOP_BUILDDIR" -f Makefile -f - print-bindir)
B=$D$bindir
mkdir -p "$B" "$D/other"
links() { make -s -C "$TOP_BUILDDIR" "$1-btrfs-progs-links" DESTDIR="$D"; }

printf '\177ELF another program\n' >"$D/other/btrfs.box"
chmod 700 "$D/other/btrfs.box"
cp -p "$D/other/btrfs.box" "$TEST_TMP/box.orig"
ln -s "$D/other/btrfs.box" "$B/btrfs-subvolume-list"
ln -s "$D/other/btrfs.box" "$B/btrfs-send"

_log "install over symlinks to another program"
links install >"$TEST_TMP/install.out" 2>&1 || _fail "install: $(cat "$TEST_TMP/install.out")"
cmp "$D/other/btrfs.box" "$TEST_TMP/box.orig" || _fail "the symlink's target was written: $(cat "$D/other/btrfs.box")"
[ "$(stat -c %a "$D/other/btrfs.box")" = 700 ] || _fail "the symlink's target's mode changed"
[ -f "$B/btrfs-subvolume-list" ] && [ ! -L "$B/btrfs-subvolume-list" ] ||
	_fail "btrfs-subvolume-list is not the script"
grep -qx 'exec btrfs subvolume list "$@"' "$B/btrfs-subvolume-list" || _fail "the script: $(cat "$B/btrfs-subvolume-list")"
[ "$(readlink "$B/btrfs-send")" = encio ] || _fail "btrfs-send -> $(readlink "$B/btrfs-send")"
[ -z "$(ls -A "$B" | grep '^\.')" ] || _fail "temporary names left: $(ls -A "$B")"
cp -a "$B" "$TEST_TMP/installed"

_log "uninstall leaves names that are not encio's"
rm "$B/btrfs-subvolume-show" "$B/btrfs-receive" "$B/btrfs-qgroup-destroy"
echo 'exec btrfs subvolume show "$@" # edited' >"$B/btrfs-subvolume-show"
ln -s "$D/other/btrfs.box" "$B/btrfs-receive"
# a symlink to a file holding the script: not encio's own file
cp "$TEST_TMP/installed/btrfs-qgroup-destroy" "$D/other/qgroup-destroy"
ln -s "$D/other/qgroup-destroy" "$B/btrfs-qgroup-destroy"
links uninstall >"$TEST_TMP/uninstall.out" 2>&1 || _fail "uninstall: $(cat "$TEST_TMP/uninstall.out")"
cat "$TEST_TMP/uninstall.out"
[ "$(ls -A "$B" | sort | tr '\n' ' ')" = "btrfs-qgroup-destroy btrfs-receive btrfs-subvolume-show " ] ||
	_fail "after uninstall: $(ls -A "$B" | tr '\n' ' ')"
[ "$(readlink "$B/btrfs-receive")" = "$D/other/btrfs.box" ] || _fail "btrfs-receive changed"
grep -q edited "$B/btrfs-subvolume-show" || _fail "btrfs-subvolume-show changed"
cmp "$D/other/btrfs.box" "$TEST_TMP/box.orig" || _fail "another program changed"
for n in btrfs-qgroup-destroy btrfs-receive btrfs-subvolume-show; do
	grep -q "not removing $B/$n" "$TEST_TMP/uninstall.out" || _fail "uninstall does not say it keeps $n"
done

_log "install again, uninstall removes all"
rm "$B"/*
links install || _fail "install"
links uninstall || _fail "uninstall"
[ -z "$(ls -A "$B")" ] || _fail "left after uninstall: $(ls -A "$B")"
