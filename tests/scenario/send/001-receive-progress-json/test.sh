#!/bin/bash
# send and receive --format=json and --progress: each summary is one JSON
# object with the keys the man pages name and numbers that add up (files
# sent, stream bytes, what receive wrote of what send sent); send's goes to
# stdout with -f FILE and to stderr when the stream is stdout, which stays a
# stream btrfs receive applies; --progress draws into a file, where each
# message still starts a line; on one terminal "encio send | encio
# receive" draws send's line only, receive's messages on lines of their
# own, and receive from a file draws its own; receive's stdout holds the
# object only; a failed receive still prints it; -q keeps it.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v python3 >/dev/null || _not_run "needs python3"
command -v script >/dev/null || _not_run "needs script (util-linux)"

MAN=$TOP_SRCDIR/man
NR_FILES=24

make_btrfs src 512M compress-force=zstd
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/vol"
mkdir "$SRC/vol/dir"
for i in $(seq 1 $((NR_FILES - 2))); do
	compressible $((i * 150000)) >"$SRC/vol/dir/text$i"
done
random_bytes 3000000 progress >"$SRC/vol/random"
echo small >"$SRC/vol/small"
ln -s dir/text1 "$SRC/vol/link"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snap"
SNAP=$SRC/snap
make_btrfs dst 512M
DST=$MNT
cd "$TEST_TMP" || _fail "cd $TEST_TMP"

# json_get FILE KEY: the value of KEY in the one JSON object FILE holds.
json_get()
{
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" ||
		_fail "no $2 in $1: $(cat "$1")"
}

# check_json FILE PAGE KEYS...: FILE is one JSON object on one line with
# exactly KEYS, each named in PAGE, every value a number but the string
# ones (io_read, io_write, fixed_buffers), the boolean dry_run and the
# subvolumes' list, and seconds a number >= 0.
check_json()
{
	local file=$1 page=$2 k
	shift 2
	[ "$(wc -l <"$file")" = 1 ] || _fail "$file is not one line: $(cat -v "$file")"
	python3 -m json.tool "$file" >/dev/null || _fail "$file does not parse: $(cat -v "$file")"
	python3 - "$file" "$@" <<'EOF' || _fail "$file: keys or values wrong: $(cat "$file")"
import json, sys
obj = json.load(open(sys.argv[1]))
want = sys.argv[2:]
assert sorted(obj) == sorted(want), (sorted(obj), sorted(want))
for k, v in obj.items():
    if k.startswith("io_"):
        assert v in ("uring-fixed", "uring", "ioctl", "none"), (k, v)
    elif k == "subvolumes":
        assert isinstance(v, list) and all("name" in s for s in v), (k, v)
    elif k == "fixed_buffers":
        assert isinstance(v, str), (k, v)
    elif k == "dry_run":
        assert v is False, (k, v)
    else:
        assert isinstance(v, (int, float)) and not isinstance(v, bool), (k, v)
        assert v >= 0, (k, v)
EOF
	for k in "$@"; do
		grep -q "fB$k\\\\fR" "$page" || _fail "key $k not in $(basename "$page")"
	done
}

SEND_KEYS="dry_run subvolumes files dirs others removed commands logical_bytes encoded_bytes extents_encoded clones clone_bytes stream_bytes total_bytes done_bytes estimated_bytes resumed_at io_read fixed_buffers seconds"
RECV_KEYS="subvolumes subvols commands logical_bytes data_bytes clone_bytes written_bytes encoded_bytes extents_encoded extents_decoded stream_bytes errors checkpoints io_write seconds"

# compare_tree DIR: DIR holds what the snapshot holds.
compare_tree()
{
	diff -r --no-dereference "$SNAP" "$1" || _fail "$1 differs from the snapshot"
}

_log "send -f FILE --progress --format=json: the object on stdout, progress on stderr"
"$ENCIO" send --progress --format=json -f stream "$SNAP" >send.json 2>send.err ||
	_fail "send -f failed: $(cat send.err)"
cat send.json
check_json send.json "$MAN/encio-send.8" $SEND_KEYS
[ "$(json_get send.json files)" = $NR_FILES ] || _fail "files sent is not $NR_FILES"
[ "$(json_get send.json dirs)" = 2 ] || _fail "directories sent is not 2"
[ "$(json_get send.json others)" = 1 ] || _fail "others sent is not 1"
[ "$(json_get send.json stream_bytes)" = "$(stat -c %s stream)" ] || _fail "stream_bytes is not the stream's size"
[ "$(json_get send.json extents_encoded)" -gt 0 ] || _fail "no encoded extents counted"
[ "$(json_get send.json encoded_bytes)" -gt 0 ] || _fail "no encoded bytes counted"
[ "$(json_get send.json logical_bytes)" -gt "$(json_get send.json encoded_bytes)" ] ||
	_fail "logical bytes not above encoded bytes for compressed data"
# the total is the stream's size, known once the stream is written
[ "$(json_get send.json total_bytes)" = "$(json_get send.json stream_bytes)" ] ||
	_fail "total_bytes is not the stream's size"
[ "$(json_get send.json done_bytes)" = "$(json_get send.json total_bytes)" ] ||
	_fail "done_bytes is not total_bytes at the end"
tr '\r' '\n' <send.err | grep -qE '^[0-9.]+[KMG]?i?B of [0-9.]+[KMG]?i?B, .*/s, ETA ' ||
	_fail "no progress with --progress into a file: $(cat -v send.err)"
[ "$(tail -c 1 send.err | od -An -c | tr -d ' ')" = '\n' ] || _fail "progress into a file not ended by a newline"
grep -q '{' send.err && _fail "JSON on stderr with -f FILE"
run_check btrfs receive -f stream "$DST" >/dev/null
compare_tree "$DST/snap"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "send to stdout --progress --format=json: the object is stderr's last line, the stream whole"
"$ENCIO" send --progress --format=json "$SNAP" >stream2 2>send2.err || _fail "send failed: $(cat send2.err)"
tail -n 1 send2.err >send2.json
check_json send2.json "$MAN/encio-send.8" $SEND_KEYS
[ "$(json_get send2.json stream_bytes)" = "$(stat -c %s stream2)" ] || _fail "stream_bytes is not the stream's size"
[ "$(json_get send2.json files)" = $NR_FILES ] || _fail "files sent is not $NR_FILES"
head -n -1 send2.err | tr '\r' '\n' | grep -q ' of .*ETA ' || _fail "no progress before the object: $(cat -v send2.err)"
# the same commands; the estimate of progress, made beside the send, is
# in whichever command was being made when it came (or in none)
"$ENCIO" dump -f stream >dump1 && "$ENCIO" dump -f stream2 >dump2 || _fail "dump failed"
cmp dump1 dump2 || _fail "the stream to stdout differs from the stream of -f"
size1=$(stat -c %s stream) size2=$(stat -c %s stream2)
[ $((size1 - size2)) -le 12 ] && [ $((size2 - size1)) -le 12 ] || _fail "streams of $size1 and $size2 bytes"
btrfs receive --dump -f stream2 >/dev/null || _fail "btrfs receive --dump refuses the stream"
run_check btrfs receive -f stream2 "$DST" >/dev/null
compare_tree "$DST/snap"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "send -f /dev/stdout of a pipe: the object still not in the stream"
"$ENCIO" send --format=json -f /dev/stdout "$SNAP" 2>send3.err | btrfs receive "$DST" >/dev/null ||
	_fail "send -f /dev/stdout | btrfs receive failed: $(cat send3.err)"
tail -n 1 send3.err >send3.json
check_json send3.json "$MAN/encio-send.8" $SEND_KEYS
compare_tree "$DST/snap"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "encio send | encio receive, both --progress --format=json"
"$ENCIO" send --progress --format=json "$SNAP" 2>send4.err |
	"$ENCIO" receive --progress --format=json "$DST" >recv.json 2>recv.err ||
	_fail "send | receive failed: $(cat send4.err recv.err)"
cat recv.json
check_json recv.json "$MAN/encio-receive.8" $RECV_KEYS
tail -n 1 send4.err >send4.json
check_json send4.json "$MAN/encio-send.8" $SEND_KEYS
[ "$(json_get recv.json subvols)" = 1 ] || _fail "subvols received is not 1"
[ "$(json_get recv.json errors)" = 0 ] || _fail "errors counted"
[ "$(json_get recv.json stream_bytes)" = "$(json_get send4.json stream_bytes)" ] ||
	_fail "receive read another stream size than send wrote"
[ "$(json_get recv.json logical_bytes)" = "$(json_get send4.json logical_bytes)" ] ||
	_fail "receive wrote other logical bytes than send sent"
[ "$(json_get recv.json encoded_bytes)" = "$(json_get send4.json encoded_bytes)" ] ||
	_fail "receive wrote other encoded bytes than send sent"
[ "$(json_get recv.json extents_encoded)" = "$(json_get send4.json extents_encoded)" ] ||
	_fail "receive wrote other encoded extents than send sent"
[ "$(json_get recv.json io_write)" != none ] || _fail "no encoded write backend on btrfs"
tr '\r' '\n' <recv.err | grep -qE 'B written, [0-9.]+[KMGTP]?i?B/s' || _fail "no receive progress with --progress: $(cat -v recv.err)"
grep -q '{' recv.err && _fail "JSON on receive's stderr"
compare_tree "$DST/snap"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "receive -f FILE --progress: how much of the stream was read"
"$ENCIO" receive --progress -f stream "$DST" >recv2.out 2>recv2.err || _fail "receive -f failed: $(cat recv2.err)"
tr '\r' '\n' <recv2.err | grep -q ' of .* read, .* written, .*ETA ' ||
	_fail "no stream position in receive -f's progress: $(cat -v recv2.err)"
# btrfs receive's scripts read its standard output: the summary goes to stderr
[ ! -s recv2.out ] || _fail "receive printed on stdout: $(cat -v recv2.out)"
tr '\r' '\n' <recv2.err | grep -q '^\(.\[K\)\?received 1 subvolume' ||
	_fail "no summary line on receive's stderr: $(cat -v recv2.err)"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "receive --progress into a file: each message on a line of its own"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snap2"
"$ENCIO" send -q -f two "$SNAP" "$SRC/snap2" || _fail "send of two subvolumes failed"
"$ENCIO" receive --progress -f two "$DST" >recv3.out 2>recv3.err || _fail "receive of two failed: $(cat recv3.err)"
cat -v recv3.err
# as btrfs receive: "At subvol" on stderr, "At snapshot" on stdout
[ "$(grep -c '^At subvol snap$' recv3.err)" = 1 ] && grep -q '^received 2 subvolumes' recv3.err ||
	_fail "a message ran into the progress line: $(cat -v recv3.err)"
[ "$(cat recv3.out)" = "At snapshot snap2" ] || _fail "stdout is not 'At snapshot snap2': $(cat -v recv3.out)"
btrfs -q subvolume delete "$DST/snap" "$DST/snap2" >/dev/null || _fail "delete"

_log "-q: no progress, no text, the object still"
"$ENCIO" send -q --progress --format=json -f stream5 "$SNAP" >send5.json 2>send5.err || _fail "send -q failed"
[ -s send5.err ] && _fail "send -q printed on stderr: $(cat -v send5.err)"
check_json send5.json "$MAN/encio-send.8" $SEND_KEYS
"$ENCIO" send -q -f stream6 "$SNAP" >send6.out 2>&1 || _fail "send -q failed"
[ -s send6.out ] && _fail "send -q without JSON printed: $(cat -v send6.out)"
"$ENCIO" receive -q --progress --format=json -f stream5 "$DST" >recv5.json 2>recv5.err || _fail "receive -q failed"
[ -s recv5.err ] && _fail "receive -q printed on stderr: $(cat -v recv5.err)"
check_json recv5.json "$MAN/encio-receive.8" $RECV_KEYS
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "a failed receive still gives its object, with the exit status 1"
"$ENCIO" receive --format=json -f stream5 "$DST" >/dev/null 2>&1 || _fail "receive failed"
"$ENCIO" receive --format=json -f stream5 "$DST" >recv6.json 2>recv6.err && _fail "a second receive of one name succeeded"
check_json recv6.json "$MAN/encio-receive.8" $RECV_KEYS
[ "$(json_get recv6.json subvols)" = 0 ] || _fail "a failed receive counted a subvolume"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"

_log "receive --dump takes no --format=json nor --progress"
run_mustfail "receive --dump --format=json" "$ENCIO" receive --dump --format=json -f stream
run_mustfail "receive --dump --progress" "$ENCIO" receive --dump --progress -f stream

_log "one terminal: send | receive draws send's line only; receive -f draws its own"
# script gives both a terminal for stderr; the stream goes through a pipe.
timeout 120 script -qec "'$ENCIO' send '$SNAP' | '$ENCIO' receive '$DST'" /dev/null >tty.out </dev/null ||
	_fail "send | receive on a terminal failed: $(cat -v tty.out)"
cat -v tty.out
tr '\r' '\n' <tty.out | grep -q ' of .*ETA ' || _fail "send drew no progress on the terminal: $(cat -v tty.out)"
# receive's progress says "<bytes> written, <rate>/s", its summary not
tr '\r' '\n' <tty.out | grep -qE 'B written, [0-9.]+[KMGTP]?i?B/s' &&
	_fail "receive from a pipe drew progress too: $(cat -v tty.out)"
# receive's messages start a line of their own, not inside send's line
tr '\r' '\n' <tty.out | grep -q '^\(.\[K\)\?At subvol snap' ||
	_fail "receive's message ran into send's progress line: $(cat -v tty.out)"
tr '\r' '\n' <tty.out | grep -q '^\(.\[K\)\?received 1 subvolume' || _fail "no receive summary: $(cat -v tty.out)"
compare_tree "$DST/snap"
btrfs -q subvolume delete "$DST/snap" >/dev/null || _fail "delete"
timeout 120 script -qec "'$ENCIO' receive -f stream '$DST'" /dev/null >tty2.out </dev/null ||
	_fail "receive -f on a terminal failed: $(cat -v tty2.out)"
cat -v tty2.out
tr '\r' '\n' <tty2.out | grep -q ' read, .* written, ' || _fail "receive -f drew no progress on a terminal: $(cat -v tty2.out)"
compare_tree "$DST/snap"
exit 0
