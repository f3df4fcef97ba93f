#!/bin/bash
# Every command's options are the same in its man page (OPTIONS), its
# --help and its parser: each documented option is accepted, each option the
# help lists is documented; -v/-q/-h work after every command's name; an
# unknown option is an ERROR line and the short usage, exit 2. Then what
# the commands say where a new user goes wrong: copy -T as cp's -T, a
# directory without -r, a read-only DEST (one error, no summary of nothing,
# no partial copy that does not exist), DEST's trailing slash, progress of
# a single file and no time left before there is a rate, JSON keys that
# the man pages name, bench's uring_write_punted as features says it, and
# receive and dump refusing a terminal on standard input.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v script >/dev/null || _not_run "needs script (util-linux)"
command -v python3 >/dev/null || _not_run "needs python3"

MAN=$TOP_SRCDIR/man
COMMANDS="copy list dump receive send features read write bench"
setup_tmp
cd "$TEST_TMP" || _fail "cd $TEST_TMP"

# The option tags of the OPTIONS section: the line after each .TP.
man_options()
{
	awk '/^\.SH/ { on = ($2 == "OPTIONS") } on && tag { print; tag = 0 } on && /^\.TP/ { tag = 1 }' "$1" |
		sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' |
		grep -oE '(^|[^a-zA-Z0-9-])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[^-]*//' | sort -u
}

# The options of --help's option lines: the column before the description.
help_options()
{
	"$ENCIO" "$1" --help | grep -E '^    -' | sed -E 's/^    //; s/  .*//' |
		grep -oE -- '--?[a-zA-Z][a-zA-Z0-9-]*' | sort -u
}

_log "options: man page, --help and parser agree"
for cmd in $COMMANDS; do
	page=$MAN/encio-$cmd.8
	[ -f "$page" ] || _fail "$cmd: no man page"
	man_opts=$(man_options "$page")
	help_opts=$(help_options "$cmd") || _fail "$cmd --help failed"
	echo "$cmd: man: $(echo $man_opts) | help: $(echo $help_opts)"
	for opt in -v --verbose -q --quiet -h --help; do
		echo "$man_opts" | grep -qx -- "$opt" || _fail "$cmd: $opt not in $page"
		echo "$help_opts" | grep -qx -- "$opt" || _fail "$cmd: $opt not in --help"
	done
	for opt in $help_opts; do
		echo "$man_opts" | grep -qx -- "$opt" ||
			_fail "$cmd: $opt in --help but not in $page OPTIONS"
	done
	for opt in $man_opts; do
		echo "$help_opts" | grep -qx -- "$opt" ||
			_fail "$cmd: $opt in $page but not in --help"
		out=$(timeout 20 "$ENCIO" "$cmd" "$opt" </dev/null 2>&1 >/dev/null)
		echo "$out" | grep -qiE "unknown option|unrecognized option|invalid option" &&
			_fail "$cmd: documented option $opt refused: $out"
	done
	out=$("$ENCIO" "$cmd" --no-such-option </dev/null 2>&1 >/dev/null)
	rc=$?
	expect=2
	[ "$cmd" = receive ] && expect=1 # btrfs receive's usage status
	[ $rc = $expect ] || _fail "$cmd: unknown option exit $rc, not $expect"
	[ "$(echo "$out" | head -1)" = "ERROR: unknown option '--no-such-option'" ] ||
		_fail "$cmd: unknown option not one ERROR line first: $out"
	echo "$out" | grep -q "^usage: encio $cmd" || _fail "$cmd: no usage after an unknown option: $out"
	[ "$(echo "$out" | grep -c .)" -le 6 ] || _fail "$cmd: the full help for an unknown option: $out"
	out=$("$ENCIO" "$cmd" -Z </dev/null 2>&1 >/dev/null)
	[ "$(echo "$out" | head -1)" = "ERROR: unknown option '-Z'" ] ||
		_fail "$cmd: unknown short option not one ERROR line: $out"
done

_log "-v and -q after the command's name"
echo data >file
out=$("$ENCIO" copy -v file copy-v 2>&1) || _fail "copy -v failed: $out"
echo "$out" | grep -q "^chosen: read" || _fail "copy -v said no more: $out"
out=$("$ENCIO" copy --quiet file copy-q 2>&1) || _fail "copy --quiet failed: $out"
[ -z "$out" ] || _fail "copy --quiet printed: $out"
out=$("$ENCIO" list -q file 2>&1 >/dev/null)
echo "$out" | grep -q WARNING && _fail "list -q warned: $out"
"$ENCIO" list --verbose file >/dev/null || _fail "list --verbose failed"

_log "copy -T: DEST is the file, never a directory to copy into"
mkdir dir
run_mustfail "copy -T onto a directory" "$ENCIO" copy -q -T file dir
echo "$ERR_OUT" | grep -q "cannot overwrite directory 'dir'" || _fail "copy -T onto a directory: $ERR_OUT"
[ -z "$(ls -A dir)" ] || _fail "copy -T copied into the directory"
"$ENCIO" copy -q -T file named || _fail "copy -T to a new name failed"
cmp -s file named || _fail "copy -T to a new name differs"
run_mustfail "copy -T of two files" "$ENCIO" copy -q -T file named dir
[ -z "$(ls -A dir)" ] || _fail "copy -T of two files copied into the directory"

_log "copy of a directory without -r says -r"
run_mustfail "copy of a directory" "$ENCIO" copy -q dir dir2
echo "$ERR_OUT" | grep -q "use -r" || _fail "no hint to use -r: $ERR_OUT"

_log "DEST's trailing slash printed once"
mkdir -p a b out
echo a >a/f
echo b >b/f
run_mustfail "two sources of one name" "$ENCIO" copy -q a/f b/f out//
echo "$ERR_OUT" | grep -q "'out/f'" || _fail "DEST's slashes doubled: $ERR_OUT"

_log "read-only DEST: one error, no summary, no partial copy"
mkdir -p tree
for i in $(seq 1 40); do
	mkdir -p "tree/d$i"
	echo "$i" >"tree/d$i/f"
done
make_tmpfs ro 16M
RO=$MNT
mount -o remount,ro "$RO" || _fail "remount ro"
for dest in "$RO" "$RO/"; do
	out=$("$ENCIO" copy -r tree "$dest" 2>"$TEST_TMP/err")
	rc=$?
	err=$(cat "$TEST_TMP/err")
	echo "$err"
	[ $rc = 1 ] || _fail "copy -r to a read-only DEST: exit $rc"
	[ -z "$out" ] || _fail "a summary of nothing copied: $out"
	[ "$(echo "$err" | grep -c '^ERROR')" = 1 ] || _fail "not one error for a read-only DEST: $err"
	echo "$err" | grep -q "Read-only file system" || _fail "the error does not say read-only: $err"
	echo "$err" | grep -q "partial copy" && _fail "a partial copy named that was never made: $err"
	echo "$err" | grep -q "$RO//" && _fail "DEST's slash doubled: $err"
done
run_mustfail "file to a read-only DEST" "$ENCIO" copy -q file "$RO//"
echo "$ERR_OUT" | grep -q "'$RO/file'" || _fail "DEST's slashes doubled: $ERR_OUT"
mount -o remount,rw "$RO" || _fail "remount rw"
"$ENCIO" copy -q -r tree "$RO" || _fail "copy -r to the tmpfs failed"
mount -o remount,ro "$RO" || _fail "remount ro"
touch tree/d*/f
out=$("$ENCIO" copy -r tree "$RO" 2>&1 >/dev/null)
echo "$out"
[ "$(echo "$out" | grep -c '^ERROR')" = 1 ] || _fail "not one error copying again onto a read-only DEST: $out"

_log "progress: a single file too; no time left before there is a rate"
head -c 50M /dev/zero | tr '\0' x >big
"$ENCIO" copy --progress big big.copy 2>"$TEST_TMP/progress" >/dev/null || _fail "copy --progress failed"
tr '\r' '\n' <"$TEST_TMP/progress" | grep -q "of 50.00MiB" ||
	_fail "no progress for a single file: $(cat -v "$TEST_TMP/progress")"
# A sparse file: the total is its data, not its size with the holes.
head -c 3M /dev/zero | tr '\0' y >sparse
truncate -s 40M sparse
"$ENCIO" copy --progress sparse sparse.copy 2>"$TEST_TMP/progress" >/dev/null || _fail "copy --progress of a sparse file failed"
tr '\r' '\n' <"$TEST_TMP/progress" | grep -q "of 3.00MiB" ||
	_fail "progress total of a sparse file is not its data: $(cat -v "$TEST_TMP/progress")"
cmp sparse sparse.copy || _fail "sparse copy differs"
json=$("$ENCIO" copy -r --progress --format=json tree tree.copy 2>"$TEST_TMP/progress") || _fail "copy -r --progress failed"
secs=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
tr '\r' '\n' <"$TEST_TMP/progress" | grep -q "entries" || _fail "no progress for copy -r"
if python3 -c "import sys; sys.exit(0 if $secs < 1 else 1)"; then
	grep -q "ETA [0-9]" "$TEST_TMP/progress" && _fail "a time left shown before a second of copying: $(cat -v "$TEST_TMP/progress")"
fi

_log "JSON keys are in the man pages"
for k in $(echo "$json" | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)))'); do
	grep -q "$k" "$MAN/encio-copy.8" || _fail "copy JSON key $k not in encio-copy(8)"
done

_log "bench and features: uring_write_punted unknown on a read-only filesystem"
make_btrfs src 256M compress-force=zstd
SRC=$MNT
compressible 600000 >"$SRC/file"
sync
mount -o remount,ro "$SRC" || _fail "remount ro"
features=$("$ENCIO" features --format=json "$SRC") || _fail "features failed"
bench=$(timeout 120 "$ENCIO" bench -r 1 --format=json "$SRC/file") || _fail "bench failed: $bench"
f=$(echo "$features" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uring_write_punted"])')
b=$(echo "$bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uring_write_punted"])')
[ "$f" = None ] || _fail "features: uring_write_punted $f where writes cannot be tried"
[ "$b" = "$f" ] || _fail "bench says uring_write_punted $b, features $f"
grep -q "null where they could not be tried" "$MAN/encio-bench.8" || _fail "bench's null not documented"

_log "receive and dump refuse a terminal on standard input"
for args in "dump" "receive $TEST_TMP" "receive --dump"; do
	out=$(timeout 10 script -qec "'$ENCIO' $args; echo rc=\$?" /dev/null </dev/null) || true
	echo "$out"
	echo "$out" | grep -q "rc=1" || _fail "$args on a terminal did not exit 1"
	echo "$out" | grep -q "ERROR: not reading a stream from a terminal: use -f or a pipe" ||
		_fail "$args on a terminal not refused"
done
exit 0
