#!/bin/bash
# btrfs receive's options, each compared with btrfs receive on the same
# input: -e stops after the first END (the rest of the input, garbage here,
# is not read); -C receives from inside a chroot into DEST; -E N stops at
# the Nth failed command, 0 never (each failure an "ERROR: " line in btrfs
# receive's words, exit 1); --dump prints what btrfs receive --dump
# prints; -q says nothing on success, the default "At subvol NAME", -v the
# UUIDs. Run as btrfs-receive (a link to encio), encio is encio receive.
source "$(dirname "$0")/../../../common.sh"
require_root
# The generator of this tree, also when ENCIO is another build.
GEN=$TOP_BUILDDIR/tests/unit/stream-gen
[ -x "$GEN" ] || make -C "$TOP_BUILDDIR" -s tests/unit/stream-gen >/dev/null 2>&1 ||
	_not_run "needs tests/unit/stream-gen (make check builds it)"

make_btrfs src 256M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
compressible 300000 >"$SRC/vol/text"
random_bytes 100000 opts >"$SRC/vol/random"
mkdir "$SRC/vol/dir"
echo one >"$SRC/vol/dir/f"
ln -s dir/f "$SRC/vol/link"
setfattr -n user.test -v value "$SRC/vol/dir/f"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s1"
echo two >>"$SRC/vol/dir/f"
mv "$SRC/vol/text" "$SRC/vol/dir/text"
rm "$SRC/vol/link"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s2"
run_check btrfs send -q -f "$TEST_TMP/full" "$SRC/s1"
run_check btrfs send -q --compressed-data -f "$TEST_TMP/fullc" "$SRC/s1"
run_check btrfs send -q -f "$TEST_TMP/incr" -p "$SRC/s1" "$SRC/s2"
# Two subvolumes in one send: a stream each, an END each.
run_check btrfs send -q -f "$TEST_TMP/two" "$SRC/s1" "$SRC/s2"
head -c 5000 /dev/urandom >"$TEST_TMP/garbage"
cat "$TEST_TMP/two" "$TEST_TMP/garbage" >"$TEST_TMP/two+garbage"

# rcv TOOL ARGS...: receive with TOOL (btrfs or encio); exit status in RC,
# stderr in ERR_OUT, stdout in OUT.
rcv()
{
	local tool=$1
	shift
	echo "+ $tool receive $*"
	if [ "$tool" = btrfs ]; then
		OUT=$(btrfs receive "$@" 2>"$TEST_TMP/err")
	else
		OUT=$("$ENCIO" receive "$@" 2>"$TEST_TMP/err")
	fi
	RC=$?
	ERR_OUT=$(cat "$TEST_TMP/err")
	[ -n "$ERR_OUT" ] && echo "$ERR_OUT"
	true
}

for tool in btrfs encio; do
	make_btrfs "dst-$tool" 256M
	D=$MNT

	_log "$tool: -e stops after the first END; without it the garbage after is an error"
	mkdir "$D/e" "$D/no-e"
	rcv $tool -e -f "$TEST_TMP/two+garbage" "$D/e"
	[ $RC -eq 0 ] || _fail "$tool -e: exit $RC"
	[ "$(ls "$D/e")" = s1 ] || _fail "$tool -e: received $(ls "$D/e"), not s1 alone"
	diff -r "$SRC/s1" "$D/e/s1" || _fail "$tool -e: s1 differs"
	[ "$(btrfs property get -ts "$D/e/s1" ro)" = ro=true ] || _fail "$tool -e: s1 not finished"
	rcv $tool -f "$TEST_TMP/two+garbage" "$D/no-e"
	[ $RC -eq 1 ] || _fail "$tool without -e: exit $RC on the garbage"
	echo "$ERR_OUT" | grep -q '^ERROR: ' || _fail "$tool without -e: no ERROR line"
	[ "$(ls "$D/no-e" | tr '\n' ' ')" = "s1 s2 " ] || _fail "$tool without -e: received $(ls "$D/no-e")"
	eval "E_RC_$tool=\$RC"

	_log "$tool: -C, a full then an incremental stream"
	mkdir "$D/chroot"
	# LeakSanitizer reads /proc at exit, which a chroot leaves behind.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		rcv $tool -C -f "$TEST_TMP/fullc" "$D/chroot"
	[ $RC -eq 0 ] || _fail "$tool -C: full receive failed"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		rcv $tool --chroot -f "$TEST_TMP/incr" "$D/chroot"
	[ $RC -eq 0 ] || _fail "$tool -C: incremental receive failed"
	for s in s1 s2; do
		diff -r "$SRC/$s" "$D/chroot/$s" || _fail "$tool -C: $s differs"
		[ "$(tree_stat "$SRC/$s")" = "$(tree_stat "$D/chroot/$s")" ] ||
			_fail "$tool -C: $s metadata differs"
	done
done

_log "-E: a stream with two failing commands"
"$GEN" >"$TEST_TMP/errors" <<END || _fail "stream-gen"
subvol vol
mkfile a
unlink missing1
mkfile b
unlink missing2
mkfile c
end
END
for n in 1 2 3 0; do
	for tool in btrfs encio; do
		D=$TEST_TMP/dst-$tool/E$n
		mkdir "$D"
		rcv $tool -E $n -f "$TEST_TMP/errors" "$D"
		[ $RC -eq 1 ] || _fail "$tool -E $n: exit $RC"
		eval "LINES_$tool=\$(echo \"\$ERR_OUT\" | grep '^ERROR: ' | sed 's/ (cannot .*//')"
		eval "FILES_$tool=\$(ls \"\$D/vol\" | tr '\n' ' ')"
		eval "RO_$tool=\$(btrfs property get -ts \"\$D/vol\" ro)"
	done
	expect=2
	[ $n = 1 ] && expect=1
	[ "$(echo "$LINES_encio" | wc -l)" = $expect ] || _fail "-E $n: not $expect ERROR lines"
	[ "$LINES_encio" = "$LINES_btrfs" ] ||
		_fail "-E $n: ERROR lines differ from btrfs receive's: $LINES_encio / $LINES_btrfs"
	[ "$FILES_encio" = "$FILES_btrfs" ] ||
		_fail "-E $n: commands applied differ: encio $FILES_encio, btrfs $FILES_btrfs"
	[ "$RO_encio" = "$RO_btrfs" ] || _fail "-E $n: encio $RO_encio, btrfs $RO_btrfs"
done
[ "$FILES_encio" = "a b c " ] || _fail "-E 0 did not apply every other command"
ERR_BAD=$("$ENCIO" receive -E x -f "$TEST_TMP/errors" "$TEST_TMP" 2>&1)
[ $? -ne 0 ] && echo "$ERR_BAD" | grep -q "bad number of errors" || _fail "-E x accepted"

_log "--dump prints what btrfs receive --dump prints"
for s in full fullc incr; do
	btrfs receive --dump -f "$TEST_TMP/$s" >"$TEST_TMP/$s.btrfs-dump" || _fail "btrfs receive --dump $s"
	"$ENCIO" receive --dump -f "$TEST_TMP/$s" >"$TEST_TMP/$s.encio-dump" || _fail "encio receive --dump $s"
	diff "$TEST_TMP/$s.btrfs-dump" "$TEST_TMP/$s.encio-dump" || _fail "--dump of $s differs"
	"$ENCIO" receive --dump <"$TEST_TMP/$s" | cmp -s - "$TEST_TMP/$s.encio-dump" ||
		_fail "--dump from standard input differs"
done
"$ENCIO" receive --dump -f "$TEST_TMP/full" "$TEST_TMP" >/dev/null 2>&1 && _fail "--dump took a DEST"
OUT=$("$ENCIO" receive --dump -f "$TEST_TMP/garbage" 2>&1)
[ $? -eq 1 ] && echo "$OUT" | grep -q "^ERROR: failed to dump the send stream: " ||
	_fail "--dump of garbage: $OUT"

_log "-q, default and -v messages"
for tool in btrfs encio; do
	D=$TEST_TMP/dst-$tool
	mkdir "$D/q" "$D/default" "$D/v"
	rcv $tool -q -f "$TEST_TMP/full" "$D/q"
	[ $RC -eq 0 ] && [ -z "$ERR_OUT" ] || _fail "$tool -q: said '$ERR_OUT'"
	[ -z "$OUT" ] || _fail "$tool -q: printed '$OUT'"
	rcv $tool -f "$TEST_TMP/full" "$D/default"
	[ $RC -eq 0 ] && [ -z "$OUT" ] && [ "$(echo "$ERR_OUT" | head -1)" = "At subvol s1" ] ||
		_fail "$tool: said '$ERR_OUT', printed '$OUT'"
	[ $tool = btrfs ] || echo "$ERR_OUT" | sed -n 2p | grep -q '^received 1 subvolume: ' ||
		_fail "encio receive gave no summary on stderr: '$ERR_OUT'"
	rcv $tool -v -f "$TEST_TMP/full" "$D/v"
	[ $RC -eq 0 ] || _fail "$tool -v failed"
	eval "V_$tool=\$(echo \"\$ERR_OUT\" | grep '^receiving subvol ')"
done
[ -n "$V_encio" ] && [ "$V_encio" = "$V_btrfs" ] || _fail "-v: '$V_encio', btrfs '$V_btrfs'"

_log "run as btrfs-receive, encio is encio receive"
mkdir "$TEST_TMP/bin" "$TEST_TMP/dst-encio/as-btrfs-receive"
ln -s "$ENCIO" "$TEST_TMP/bin/btrfs-receive"
run_check "$TEST_TMP/bin/btrfs-receive" -q -f "$TEST_TMP/full" "$TEST_TMP/dst-encio/as-btrfs-receive"
diff -r "$SRC/s1" "$TEST_TMP/dst-encio/as-btrfs-receive/s1" || _fail "received as btrfs-receive differs"
OUT=$("$TEST_TMP/bin/btrfs-receive" --dump -f "$TEST_TMP/full") || _fail "btrfs-receive --dump failed"
[ "$OUT" = "$(cat "$TEST_TMP/full.btrfs-dump")" ] || _fail "btrfs-receive --dump differs"
