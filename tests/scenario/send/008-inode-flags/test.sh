#!/bin/bash
# encio send carries the inode flags lsattr shows - nocow (C), compress
# (c), noatime (A), nodump (d), sync (S), append-only (a), immutable (i) -
# of files and directories as FILEATTR, and the btrfs.compression property
# as btrfs send does (an xattr); encio receive gives them back, nocow on
# the empty file, a and i at the end of the subvolume. btrfs receive takes
# the stream and keeps what it keeps of btrfs send's: the property and the
# compress flag that goes with it. A flag DEST does not take is no failure.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"
command -v btrfs >/dev/null || _not_run "needs btrfs (btrfs-progs)"
require_stream_gen

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

V=$SRC/vol
run_check btrfs -q subvolume create "$V"
# nocow and compress on the empty file, as chattr needs; the others after
# the data (a and i would refuse it)
for f in C c A d S a i; do
	touch "$V/f$f"
	[ "$f" = C ] || [ "$f" = c ] && chattr +$f "$V/f$f"
	compressible 200000 >>"$V/f$f"
	[ "$f" = C ] || [ "$f" = c ] || chattr +$f "$V/f$f"
done
touch "$V/fprop"
btrfs property set "$V/fprop" compression zstd
compressible 200000 >>"$V/fprop"
# chattr's FS_IOC_SETFLAGS gives a compressed file the default property:
# zstd is set again after +S
touch "$V/fpropS"
btrfs property set "$V/fpropS" compression zstd
compressible 200000 >>"$V/fpropS"
chattr +S "$V/fpropS"
btrfs property set "$V/fpropS" compression zstd
random_bytes 300000 1 >"$V/plain"
ln "$V/fA" "$V/fA-link"
for f in C c A d S a i prop; do
	mkdir "$V/d$f"
	if [ "$f" = prop ]; then
		btrfs property set "$V/d$f" compression zlib
	else
		[ "$f" = a ] || [ "$f" = i ] || chattr +$f "$V/d$f"
	fi
	compressible 150000 >"$V/d$f/inner"
	mkdir "$V/d$f/sub"
	[ "$f" = a ] || [ "$f" = i ] && chattr +$f "$V/d$f"
done
chattr +A "$V"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/snap"
S=$SRC/snap

# flags DIR: every entry's lsattr letters and compression property
flags()
{
	(cd "$1" && find . | LC_ALL=C sort | while read -r p; do
		echo "$p $(lsattr -d "$p" | cut -d' ' -f1) $(btrfs property get "$p" compression 2>/dev/null)"
	done)
}
flags "$S" >"$TEST_TMP/src.flags"
cat "$TEST_TMP/src.flags"
grep -q '^./fi -*i' "$TEST_TMP/src.flags" || _fail "source without +i?"
grep -q '^./fpropS .*S.*compression=zstd' "$TEST_TMP/src.flags" || _fail "source fpropS not S and zstd?"

_log "the stream carries FILEATTR, a file's before its data"
"$ENCIO" -q send "$S" >"$TEST_TMP/stream" || _fail "send failed"
"$ENCIO" dump -f "$TEST_TMP/stream" >"$TEST_TMP/dump" || _fail "dump failed"
grep fileattr "$TEST_TMP/dump"
grep -qE '^fileattr +\./snap/fC +fileattr=0x3 \(nodatasum,nodatacow\)$' "$TEST_TMP/dump" ||
	_fail "no readable FILEATTR for fC"
grep -qE '^fileattr +\./snap/di +fileattr=0x40 \(immutable\)$' "$TEST_TMP/dump" ||
	_fail "no FILEATTR for di"
grep -qE '^fileattr +\./snap/ +fileattr=0x200 \(noatime\)$' "$TEST_TMP/dump" ||
	_fail "no FILEATTR for the subvolume's root"
grep -E '^(mkfile|fileattr|write) +\./snap/fC( |$)' "$TEST_TMP/dump" | head -2 | tail -1 |
	grep -q '^fileattr' || _fail "fC's FILEATTR does not come right after its mkfile"
grep -q '^fileattr .*/plain ' "$TEST_TMP/dump" && _fail "FILEATTR of a file without flags"
[ "$(grep -c '^fileattr .*/fA' "$TEST_TMP/dump")" = 1 ] || _fail "not one FILEATTR for the hard-linked fA"
grep -qE '^set_xattr +\./snap/fprop +name=btrfs.compression data=zstd' "$TEST_TMP/dump" ||
	_fail "the property is not sent as btrfs send sends it"

_log "encio send | encio receive"
mkdir "$DST/e"
"$ENCIO" -q send "$S" | "$ENCIO" -q receive "$DST/e" || _fail "encio send | encio receive failed"
flags "$DST/e/snap" >"$TEST_TMP/e.flags"
diff "$TEST_TMP/src.flags" "$TEST_TMP/e.flags" || _fail "encio receive: flags differ"
diff -r "$S" "$DST/e/snap" || _fail "encio receive: data differs"
btrfs subvolume show "$DST/e/snap" | grep -qE 'Received UUID:[[:space:]]+[0-9a-f-]{36}' ||
	_fail "encio receive: not marked received"
[ "$(btrfs property get -ts "$DST/e/snap" ro)" = "ro=true" ] || _fail "encio receive: not read-only"

_log "encio send | btrfs receive: accepted, keeps the property and its c"
mkdir "$DST/b"
"$ENCIO" -q send "$S" | btrfs receive "$DST/b" >/dev/null || _fail "encio send | btrfs receive failed"
diff -r "$S" "$DST/b/snap" || _fail "btrfs receive: data differs"
flags "$DST/b/snap" >"$TEST_TMP/b.flags"
cat "$TEST_TMP/b.flags"
# what btrfs send | btrfs receive keeps of the same tree
mkdir "$DST/k"
btrfs -q send --proto 2 "$S" | btrfs receive "$DST/k" >/dev/null || _fail "btrfs send | btrfs receive failed"
flags "$DST/k/snap" >"$TEST_TMP/k.flags"
diff "$TEST_TMP/k.flags" "$TEST_TMP/b.flags" || _fail "btrfs receive keeps other flags of encio send's stream than of btrfs send's"
grep -q '^./fprop -*c-* compression=zstd$' "$TEST_TMP/b.flags" || _fail "btrfs receive: property lost"

_log "a FILEATTR that comes late (nocow after data: the file written again) or cannot be taken is no failure"
"$GEN" >"$TEST_TMP/late.stream" <<END || _fail "stream-gen"
subvol vol
mkfile late
write late 0 hello
fileattr late 0x3
mkfile both
fileattr both 0x802
symlink sl target
fileattr sl 0x40
mkdir d
fileattr d 0x40
rename d d2
mkfile d2/x
end
END
mkdir "$DST/l"
run_check "$ENCIO" -q receive -f "$TEST_TMP/late.stream" "$DST/l"
[ "$(cat "$DST/l/vol/late")" = hello ] || _fail "late: data lost"
lsattr -d "$DST/l/vol/late" | cut -d' ' -f1 | grep -q C || _fail "late: the nocow that came after the data not given"
lsattr -d "$DST/l/vol/both" | cut -d' ' -f1 | grep -q c || _fail "both: compress not kept"
lsattr -d "$DST/l/vol/d2" | cut -d' ' -f1 | grep -q i || _fail "a renamed directory lost its late +i"
[ -f "$DST/l/vol/d2/x" ] || _fail "an entry made after the FILEATTR of +i is missing"
echo "PASS: $TEST_NAME"
