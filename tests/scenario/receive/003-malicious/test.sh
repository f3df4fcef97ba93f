#!/bin/bash
# Hostile streams: paths out of the subvolume, symlinks and hard links to
# the outside, damaged or truncated streams, encoded writes whose sizes
# disagree or whose data does not decode. Each must fail with exit 1 and
# an error naming the stream offset, change nothing outside DEST, and leave
# the subvolume not marked received.
source "$(dirname "$0")/../../../common.sh"
require_root
require_stream_gen

make_btrfs dst 256M
DST=$MNT
OUT=$TEST_TMP/outside
mkdir -p "$OUT/victim-dir"
echo canary >"$OUT/victim-file"
chmod 0644 "$OUT/victim-file"
outside_state()
{
	(cd "$OUT" && find . -printf '%p %y %m %U %G %s %T@ %l\n' | LC_ALL=C sort &&
		md5sum victim-file && getfattr -R -h -d -m- . 2>/dev/null)
	ls -A "$DST" | grep -v '^case' # nothing beside the case dirs
}
BEFORE=$(outside_state)

gen()
{
	"$GEN" >"$TEST_TMP/$1.stream" || _fail "stream-gen $1"
}

# must_reject NAME EXPECTED_MESSAGE [receive options]: stream from $TEST_TMP/NAME.stream
must_reject()
{
	local name=$1 msg=$2 d=$DST/case-$1
	shift 2
	mkdir "$d"
	_log "$name"
	run_mustfail "$name" "$ENCIO" receive "$@" -f "$TEST_TMP/$name.stream" "$d"
	echo "$ERR_OUT" | grep -qE "at offset [0-9]+" || _fail "$name: no stream offset in the error"
	echo "$ERR_OUT" | grep -qF -- "$msg" || _fail "$name: error does not say '$msg'"
	[ "$(outside_state)" = "$BEFORE" ] || _fail "$name: something outside DEST changed"
	if [ -d "$d/vol" ]; then
		btrfs subvolume show "$d/vol" | grep -qE 'Received UUID:[[:space:]]+-$' ||
			_fail "$name: partial subvolume marked received"
		[ "$(btrfs property get -ts "$d/vol" ro)" = "ro=false" ] ||
			_fail "$name: partial subvolume read-only"
	fi
}

_log "a valid generated stream is received (zstd, zlib, lzo extents)"
gen good <<END
subvol vol
mkdir d
mkfile d/f
write d/f 0 hello
encoded d/z 0 8192 8192 0 2 good
mkfile d/z
encoded d/z 0 8192 8192 0 2 good
mkfile d/l
encoded d/l 4096 4096 8192 4096 3 good
mkfile d/c
encoded d/c 0 65536 65536 0 1 good
symlink d/s /etc/passwd
end
END
mkdir "$DST/good"
# (The first encoded write names a file not made yet: that must fail.)
run_mustfail "write before mkfile" "$ENCIO" receive -f "$TEST_TMP/good.stream" "$DST/good"
echo "$ERR_OUT" | grep -q "apply encoded_write of 'd/z'" || _fail "error does not name the path"
btrfs -q subvolume delete "$DST/good/vol" >/dev/null
gen good <<END
subvol vol
mkdir d
mkfile d/f
write d/f 0 hello
mkfile d/z
encoded d/z 0 8192 8192 0 2 good
mkfile d/l
encoded d/l 4096 4096 8192 4096 3 good
mkfile d/c
encoded d/c 0 65536 65536 0 1 good
symlink d/s /etc/passwd
end
END
run_check "$ENCIO" receive -f "$TEST_TMP/good.stream" "$DST/good" 2>&1 | tee "$TEST_TMP/out"
grep -q "extents 3 encoded, 0 decoded" "$TEST_TMP/out" || _fail "extents not written encoded"
[ "$(cat "$DST/good/vol/d/f")" = hello ] || _fail "write lost"
[ "$(head -c 17 "$DST/good/vol/d/z")" = "encio stream-gen " ] || _fail "zstd extent wrong"
[ "$(stat -c %s "$DST/good/vol/d/l")" = 8192 ] || _fail "lzo extent size"
[ "$(tail -c +4097 "$DST/good/vol/d/l" | head -c 17)" = " encio stream-gen" ] || _fail "lzo extent wrong"
[ "$(stat -c %s "$DST/good/vol/d/c")" = 65536 ] || _fail "zlib extent size"
"$ENCIO" -q receive --force-decompress -f "$TEST_TMP/good.stream" "$DST/good2" 2>/dev/null &&
	_fail "a missing DEST must fail"
mkdir "$DST/good2"
"$ENCIO" receive --force-decompress -f "$TEST_TMP/good.stream" "$DST/good2" 2>&1 | grep -q "extents 0 encoded, 3 decoded" ||
	_fail "--force-decompress did not decode"
cmp "$DST/good/vol/d/l" "$DST/good2/vol/d/l" || _fail "decoded lzo differs"
cmp "$DST/good/vol/d/c" "$DST/good2/vol/d/c" || _fail "decoded zlib differs"
rm -rf "$DST/good2" 2>/dev/null
btrfs -q subvolume delete "$DST/good2/vol" "$DST/good/vol" >/dev/null
rmdir "$DST/good" "$DST/good2"

_log "made, then renamed (btrfs send's orphan names): created at the final name, same result"
gen orphans <<END
subvol vol
mkdir o257-1-0
rename o257-1-0 d
mkfile o258-1-0
rename o258-1-0 d/f
write d/f 0 first
mkfile o259-1-0
write o259-1-0 0 second
rename o259-1-0 d/f
symlink o260-1-0 f
rename o260-1-0 d/s
mkfifo o261-1-0
rename o261-1-0 d/p
mkdir d/e
mkdir o262-1-0
rename o262-1-0 d/e
mkfile o263-1-0
mkfile g
end
END
mkdir "$DST/orphans"
run_check "$ENCIO" -q receive -f "$TEST_TMP/orphans.stream" "$DST/orphans"
V=$DST/orphans/vol
[ "$(cat "$V/d/f")" = second ] || _fail "rename over a file: '$(cat "$V/d/f")'"
[ "$(readlink "$V/d/s")" = f ] || _fail "symlink not renamed"
[ -p "$V/d/p" ] || _fail "fifo not renamed"
[ -d "$V/d/e" ] && [ -z "$(ls -A "$V/d/e")" ] || _fail "rename over an empty directory"
[ -f "$V/o263-1-0" ] && [ -f "$V/g" ] || _fail "a node not renamed is lost"
[ "$(cd "$V" && find . | LC_ALL=C sort | tr '\n' ' ')" = ". ./d ./d/e ./d/f ./d/p ./d/s ./g ./o263-1-0 " ] ||
	_fail "unexpected tree: $(cd "$V" && find . | tr '\n' ' ')"
btrfs -q subvolume delete "$V" >/dev/null
rmdir "$DST/orphans"

_log "chown of new nodes: to ourselves a no-op, else done (set-gid parents, others' ids)"
gen owners <<END
subvol vol
mkdir o257-1-0
rename o257-1-0 g
mkfile g/early
chown g 0 1234
chmod g 2775
mkfile o258-1-0
rename o258-1-0 g/f
chown g/f 0 0
mkfile o259-1-0
rename o259-1-0 k
chown k 0 0
chown k 1000 1001
mkfile o260-1-0
rename o260-1-0 n
chown n 0 0
symlink o261-1-0 n
rename o261-1-0 s
chown s 1002 1003
end
END
mkdir "$DST/owners"
run_check "$ENCIO" -q receive -f "$TEST_TMP/owners.stream" "$DST/owners"
V=$DST/owners/vol
[ "$(stat -c '%u %g %a' "$V/g")" = "0 1234 2775" ] || _fail "set-gid directory: $(stat -c '%u %g %a' "$V/g")"
[ "$(stat -c '%u %g' "$V/g/f")" = "0 0" ] || _fail "chown in a set-gid directory skipped: $(stat -c '%u %g' "$V/g/f")"
[ "$(stat -c '%u %g' "$V/k")" = "1000 1001" ] || _fail "second chown lost"
[ "$(stat -c '%u %g' "$V/n")" = "0 0" ] || _fail "owner of n"
[ "$(stat -c '%u %g' "$V/s")" = "1002 1003" ] || _fail "symlink owner"
btrfs -q subvolume delete "$V" >/dev/null
rmdir "$DST/owners"

gen chown-removed <<END
subvol vol
mkfile o257-1-0
rename o257-1-0 m
unlink m
chown m 0 0
end
END
must_reject chown-removed "No such file"

gen mkfile-exists <<END
subvol vol
mkfile a
rename a b
mkfile b
rename b c
end
END
must_reject mkfile-exists "File exists"

_log "enable_verity: done where the kernel allows it, else a clear error"
gen verity <<END
version 3
subvol vol
mkfile f
write f 0 verity-data
enable_verity f
end
END
mkdir "$DST/verity"
if "$ENCIO" receive -f "$TEST_TMP/verity.stream" "$DST/verity" >"$TEST_TMP/out" 2>&1; then
	lsattr "$DST/verity/vol/f" | grep -q '^[^ ]*V' || _fail "verity not enabled"
	echo "verity enabled"
else
	cat "$TEST_TMP/out"
	grep -q "apply enable_verity of 'f' (.*fs-verity.*) from .* at offset" "$TEST_TMP/out" ||
		_fail "unclear verity error"
fi
btrfs -q subvolume delete "$DST/verity/vol" >/dev/null 2>&1
rmdir "$DST/verity"

gen absolute <<END
subvol vol
mkfile $OUT/x
end
END
must_reject absolute "absolute path"

gen dotdot <<END
subvol vol
mkdir a
mkfile a/../../../outside/x
end
END
must_reject dotdot "'..' component"

gen dotdot-rename <<END
subvol vol
mkfile a
rename a ../a
end
END
must_reject dotdot-rename "'..' component"

gen symlink-dir <<END
subvol vol
symlink link $OUT/victim-dir
mkfile link/x
end
END
must_reject symlink-dir "passes through a symlink"

gen symlink-rename <<END
subvol vol
symlink link $OUT/victim-dir
mkfile a
rename a link/a
end
END
must_reject symlink-rename "passes through a symlink"

gen symlink-write <<END
subvol vol
symlink f $OUT/victim-file
write f 0 pwned
end
END
must_reject symlink-write "not a regular file"

gen symlink-truncate <<END
subvol vol
symlink f $OUT/victim-file
truncate f 0
end
END
must_reject symlink-truncate "not a regular file"

gen symlink-encoded <<END
subvol vol
symlink f $OUT/victim-file
encoded f 0 8192 8192 0 2 good
end
END
must_reject symlink-encoded "not a regular file"

# Metadata through a symlink changes the symlink or nothing; then a failure.
gen symlink-meta <<END
subvol vol
symlink f $OUT/victim-file
symlink d $OUT/victim-dir
chmod f 777
chmod d 777
set_xattr d trusted.x pwned
mkfile ../x
end
END
must_reject symlink-meta "'..' component"

gen fifo-write <<END
subvol vol
mkfifo f
write f 0 blocked
end
END
must_reject fifo-write "not a regular file"

gen hardlink-absolute <<END
subvol vol
link h $OUT/victim-file
end
END
must_reject hardlink-absolute "absolute path"

gen hardlink-symlink <<END
subvol vol
symlink d $OUT
link h d/victim-file
end
END
must_reject hardlink-symlink "passes through a symlink"

gen sizes <<END
subvol vol
mkfile f
encoded f 0 8192 4096 0 2 good
end
END
must_reject sizes "unencoded range past the unencoded extent"

gen garbage <<END
subvol vol
mkfile f
encoded f 0 8192 8192 0 2 garbage
end
END
must_reject garbage "zstd: no frame header"

gen badbody <<END
subvol vol
mkfile f
encoded f 0 8192 8192 0 2 bad-body
end
END
must_reject badbody "does not decode" --force-decompress

gen name <<END
subvol ../vol
end
END
must_reject name "not a plain name"

gen noparent <<END
snapshot vol 0x11 0x99
end
END
must_reject noparent "no subvolume has it as received UUID or UUID"

# receive caches the directories it resolved by their stream path: after
# a rename or a removal, a path must name what is there now.
_log "directories renamed, swapped and replaced under the cache"
gen swap <<END
subvol vol
mkdir a
mkdir b
mkdir a/in
mkfile a/in/x
write a/in/x 0 first-a
mkfile b/y
rename a t
rename b a
rename t b
mkfile a/z
write a/z 0 into-old-b
mkfile b/in/w
write b/in/w 0 into-old-a
end
END
mkdir "$DST/case-swap"
run_check "$ENCIO" receive -f "$TEST_TMP/swap.stream" "$DST/case-swap"
V=$DST/case-swap/vol
[ "$(cat "$V/b/in/x")" = first-a ] || _fail "swap: b/in/x"
[ "$(cat "$V/b/in/w")" = into-old-a ] || _fail "swap: b/in/w"
[ -e "$V/a/y" ] || _fail "swap: a/y"
[ "$(cat "$V/a/z")" = into-old-b ] || _fail "swap: a/z"
[ ! -e "$V/a/in" ] && [ ! -e "$V/b/z" ] || _fail "swap: stale directory used"
gen replace <<END
subvol vol
mkdir d
mkfile d/old
write d/old 0 old
unlink d/old
rmdir d
mkdir d
mkfile d/new
write d/new 0 new
end
END
mkdir "$DST/case-replace"
run_check "$ENCIO" receive -f "$TEST_TMP/replace.stream" "$DST/case-replace"
[ "$(ls "$DST/case-replace/vol/d")" = new ] || _fail "replace: $(ls "$DST/case-replace/vol/d")"

_log "damaged and truncated streams"
gen long <<END
subvol vol
mkdir d
mkfile d/f
write d/f 0 0123456789012345678901234567890123456789
chmod d/f 644
end
END
size=$(stat -c %s "$TEST_TMP/long.stream")
cp "$TEST_TMP/long.stream" "$TEST_TMP/crc.stream"
printf '\xff' | dd of="$TEST_TMP/crc.stream" bs=1 seek=$((size - 40)) conv=notrunc status=none
must_reject crc "crc32c mismatch"
head -c $((size - 20)) "$TEST_TMP/long.stream" >"$TEST_TMP/cut.stream"
must_reject cut "truncated"
head -c $((size - 10)) "$TEST_TMP/long.stream" >"$TEST_TMP/noend.stream"
must_reject noend "without an end command"
exit 0
