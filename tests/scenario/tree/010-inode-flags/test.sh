#!/bin/bash
# encio copy -r and encio copy keep the inode flags lsattr shows - nocow
# (C), compress (c), noatime (A), nodump (d), sync (S), append-only (a),
# immutable (i) - and the btrfs.compression property, on files and on
# directories (whose entries are made in them, a and i included); a rerun
# gives items already complete the flags of the source again; a DEST that
# refuses some (tmpfs) gets the data and the flags it can take, exit 0.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v btrfs >/dev/null || _not_run "needs btrfs (btrfs-progs)"

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
make_tmpfs tmp 256M
TMP=$MNT

S=$SRC/S
mkdir "$S"
# file FLAG NAME: data large enough not to be inline; nocow and compress
# on the empty file, as chattr needs
for f in C c A d S a i; do
	touch "$S/f$f"
	[ "$f" = C ] || [ "$f" = c ] && chattr +$f "$S/f$f"
	compressible 200000 >>"$S/f$f"
	[ "$f" = C ] || [ "$f" = c ] || chattr +$f "$S/f$f"
done
touch "$S/fprop"
btrfs property set "$S/fprop" compression zstd
compressible 200000 >>"$S/fprop"
# chattr's FS_IOC_SETFLAGS gives a compressed file the default property:
# zstd is set again after +S, and copy must not do what chattr did
touch "$S/fpropS"
btrfs property set "$S/fpropS" compression zstd
compressible 200000 >>"$S/fpropS"
chattr +S "$S/fpropS"
btrfs property set "$S/fpropS" compression zstd
random_bytes 300000 1 >"$S/plain"
for f in C c A d S a i prop; do
	mkdir "$S/d$f"
	if [ "$f" = prop ]; then
		btrfs property set "$S/d$f" compression zlib
	else
		[ "$f" = a ] || [ "$f" = i ] || chattr +$f "$S/d$f"
	fi
	compressible 150000 >"$S/d$f/inner"
	mkdir "$S/d$f/sub"
	[ "$f" = a ] || [ "$f" = i ] && chattr +$f "$S/d$f"
done
sync

# flags DIR: every entry's lsattr letters and compression property
flags()
{
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r p; do
		echo "$p $(lsattr -d "$p" | cut -d' ' -f1) $(btrfs property get "$p" compression 2>/dev/null)"
	done)
}

_log "copy -r onto btrfs"
D=$DST/D
run_check timeout 120 "$ENCIO" -q copy -r "$S" "$D"
flags "$S" >"$TEST_TMP/src.flags"
flags "$D" >"$TEST_TMP/dst.flags"
cat "$TEST_TMP/src.flags"
diff "$TEST_TMP/src.flags" "$TEST_TMP/dst.flags" || _fail "copy -r: flags differ"
grep -q '^./fi -*i' "$TEST_TMP/src.flags" || _fail "source without +i?"
grep -q '^./fprop .*compression=zstd' "$TEST_TMP/dst.flags" ||
	_fail "copy -r: property lost"
grep -q '^./fpropS --S.*compression=zstd' "$TEST_TMP/dst.flags" ||
	_fail "copy -r: property of a sync file lost"
diff -r "$S" "$D" || _fail "copy -r: data differs"

_log "single-file copy onto btrfs"
mkdir "$DST/F"
for f in C c A d S a i prop propS; do
	run_check "$ENCIO" -q copy "$S/f$f" "$DST/F/f$f"
	a=$(lsattr "$S/f$f" | cut -d' ' -f1)
	b=$(lsattr "$DST/F/f$f" | cut -d' ' -f1)
	[ "$a" = "$b" ] || _fail "copy f$f: flags $a became $b"
	cmp "$S/f$f" "$DST/F/f$f" || _fail "copy f$f: data differs"
done
[ "$(btrfs property get "$DST/F/fprop" compression)" = compression=zstd ] ||
	_fail "copy: property lost"

_log "a rerun gives complete items the source's flags again"
chattr -i "$D/fi" "$D/di"
chattr +i "$D/plain"
chattr -A "$D/fA"
chattr +d "$D/dS/inner"
chattr +a "$D/dd"
btrfs property set "$D/fc" compression lzo
# a changed append-only file replaces its append-only copy
chattr -a "$S/fa"
echo more >>"$S/fa"
chattr +a "$S/fa"
run_check timeout 120 "$ENCIO" -q copy -r -T "$S" "$D"
flags "$D" >"$TEST_TMP/dst.flags"
diff "$TEST_TMP/src.flags" "$TEST_TMP/dst.flags" || _fail "rerun: flags differ"
cmp "$S/fa" "$D/fa" || _fail "rerun: append-only file not replaced"

_log "tmpfs: the data, the flags it takes, exit 0"
timeout 120 "$ENCIO" copy -r "$S" "$TMP/T" >/dev/null 2>"$TEST_TMP/err" || _fail "copy -r to tmpfs failed"
cat "$TEST_TMP/err"
[ "$(grep -c "refused inode flags" "$TEST_TMP/err")" = 1 ] || _fail "tmpfs: not one warning naming the refused flags"
grep "refused inode flags" "$TEST_TMP/err" | grep -q C || _fail "tmpfs: the warning does not name nocow (C)"
diff -r "$S" "$TMP/T" || _fail "tmpfs: data differs"
for f in A d a i; do
	lsattr -d "$TMP/T/f$f" | cut -d' ' -f1 | grep -q "$f" ||
		_fail "tmpfs: f$f lost $f"
	lsattr -d "$TMP/T/d$f" | cut -d' ' -f1 | grep -q "$f" ||
		_fail "tmpfs: d$f lost $f"
done
run_check "$ENCIO" -q copy "$S/fi" "$TMP/fi"
lsattr "$TMP/fi" | cut -d' ' -f1 | grep -q i || _fail "tmpfs: copy lost i"
echo "PASS: $TEST_NAME"
