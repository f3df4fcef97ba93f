#!/bin/bash
# encio send -n writes no stream and prints what the send would move: for
# a full send (counted from the files' extents, no data read), an
# incremental one (the kernel's pass counted) and several subvolumes in
# one run, its counts are the real send's, and its stream size the real
# stream's. send --progress counts the stream against an estimate made
# beside the send from metadata (no second pass), within 10% of the
# stream (JSON estimated_bytes; for a directory that is no subvolume's
# root, -n's count made beside it), and the last line shows it all sent; JSON
# total_bytes and done_bytes are the stream's size.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
V=$SRC/v
mkdir "$V/d" "$V/d/e"
compressible 3000000 >"$V/text"
random_bytes 2000000 r >"$V/rand"
echo small >"$V/d/small"
compressible 2000 >"$V/d/e/inline"
truncate -s 50M "$V/sparse"
echo end >>"$V/sparse"
run_check fallocate -l 1M "$V/prealloc"
cp --reflink=always "$V/text" "$V/d/text-clone"
ln "$V/rand" "$V/d/rand-link"
ln -s ../text "$V/d/link"
mkfifo "$V/d/fifo"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"
compressible 100000 >>"$V/text"
random_bytes 300000 r2 >"$V/d/new"
rm "$V/d/small"
mv "$V/d/e" "$V/e"
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"

field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }

# check NAME ARGS...: send -n against the real send of ARGS
check()
{
	local name=$1 est real size f
	shift
	est=$("$ENCIO" -q send -n --format=json "$@") || _fail "$name: send -n failed"
	grep -q '"dry_run": true' <<<"$est" || _fail "$name: no dry_run in $est"
	real=$("$ENCIO" send --format=json -f "$TEST_TMP/$name.stream" "$@") ||
		_fail "$name: send failed"
	size=$(stat -c %s "$TEST_TMP/$name.stream")
	_log "$name: estimate $(field stream_bytes <<<"$est"), stream $size"
	[ "$(field stream_bytes <<<"$est")" = "$size" ] ||
		_fail "$name: send -n says $(field stream_bytes <<<"$est") bytes, the stream has $size"
	for f in files dirs others logical_bytes encoded_bytes extents_encoded clones clone_bytes; do
		[ "$(field $f <<<"$est")" = "$(field $f <<<"$real")" ] ||
			_fail "$name: $f: send -n $(field $f <<<"$est"), send $(field $f <<<"$real")"
	done
	[ "$(field total_bytes <<<"$real")" = "$size" ] && [ "$(field done_bytes <<<"$real")" = "$size" ] ||
		_fail "$name: total_bytes/done_bytes are not the stream's size: $real"
}
check full "$SRC/s1"
check incremental -p "$SRC/s1" "$SRC/s2"
check several "$SRC/s1" "$SRC/s2"

# the text line goes to stdout, nothing else does; -f is refused
out=$("$ENCIO" send -n "$SRC/s1" 2>"$TEST_TMP/err") || _fail "send -n failed"
grep -q '^would send .* of stream: .* logical (.* encoded in [0-9]* extents), [0-9]* files' <<<"$out" ||
	_fail "send -n printed: $out"
[ "$(wc -l <<<"$out")" -eq 1 ] || _fail "send -n printed more than its line: $out"
ERR_OUT=$("$ENCIO" send -n -f "$TEST_TMP/x" "$SRC/s1" 2>&1 >/dev/null)
[ $? = 2 ] || _fail "send -n -f is not a usage error (exit 2)"
grep -q -- "-n writes no stream" <<<"$ERR_OUT" || _fail "send -n -f: $ERR_OUT"
[ ! -e "$TEST_TMP/x" ] || _fail "send -n -f wrote a file"

# progress: a total once the estimate is made (beside the send, from
# metadata, within 10% of the stream), all of it at the end
for args in "$SRC/s1" "-p $SRC/s1 $SRC/s2"; do
	# shellcheck disable=SC2086
	"$ENCIO" send --progress $args 2>"$TEST_TMP/progress" >"$TEST_TMP/p.stream" ||
		_fail "send --progress $args failed"
	size=$(stat -c %s "$TEST_TMP/p.stream")
	tr '\r' '\n' <"$TEST_TMP/progress" | grep ' of .*/s' >"$TEST_TMP/lines"
	[ -s "$TEST_TMP/lines" ] || _fail "no progress from send --progress $args"
	# the estimate, then at the end the stream's size
	totals=$(sed 's/.* of \([^,]*\),.*/\1/' "$TEST_TMP/lines" | uniq)
	[ "$(wc -l <<<"$totals")" -le 2 ] || _fail "$args: the total changed: $totals"
	last=$(tail -n 1 "$TEST_TMP/lines")
	[ "$(sed 's/^\([^ ]*\) of \([^,]*\),.*/\1 \2/' <<<"$last" | awk '{ print ($1 == $2) }')" = 1 ] ||
		_fail "$args: the last progress line is not the total: $last"
	_log "$args: $size bytes, last line: $last"
	# shellcheck disable=SC2086
	json=$("$ENCIO" send --progress --format=json -f "$TEST_TMP/j.stream" $args 2>/dev/null) ||
		_fail "send --progress --format=json $args failed"
	est=$(field estimated_bytes <<<"$json")
	real=$(field stream_bytes <<<"$json")
	[ -n "$est" ] || _fail "$args: no estimated_bytes: $json"
	awk -v e="$est" -v r="$real" 'BEGIN { d = e - r; if (d < 0) d = -d; exit !(d <= r / 10) }' ||
		_fail "$args: the estimate $est is not within 10% of the stream's $real bytes"
	_log "$args: estimated $est, stream $real bytes"
done
# a directory that is no subvolume's root: -n's walk beside the send
json=$("$ENCIO" send --progress --format=json -f "$TEST_TMP/j.stream" "$SRC/s1/d" 2>/dev/null) ||
	_fail "send --progress of a directory failed"
# -n's count and the total's attribute, which the stream lacks where the
# send ended before the estimate was made
est=$(field estimated_bytes <<<"$json")
real=$(field stream_bytes <<<"$json")
[ "$est" = "$real" ] || [ "$est" = $((real + 12)) ] ||
	_fail "a directory's estimate is not -n's count: $json"
