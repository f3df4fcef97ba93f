#!/bin/bash
# receive counts apart the file data WRITE and ENCODED_WRITE carried
# (data_bytes), what CLONE shared (clone_bytes) and what it wrote itself
# (written_bytes: the data, not the clones it shared); logical_bytes is
# data and clones, as before. They match what send says it sent (its
# logical_bytes and clone_bytes), in JSON and in the text summary.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
make_shared_tree "$SRC"

field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }

s=$("$ENCIO" -q send --format=json -f "$T/full" "$SRC/snap1") || _fail "send failed"
_log "$s"
sent_data=$(field logical_bytes <<<"$s")
sent_clone=$(field clone_bytes <<<"$s")
[ "$sent_clone" -gt 0 ] || _fail "the tree's sharing sent no CLONE: $s"

mkdir "$DST/j" "$DST/t"
r=$("$ENCIO" -q receive --format=json -f "$T/full" "$DST/j") || _fail "receive failed"
_log "$r"
data=$(field data_bytes <<<"$r")
clone=$(field clone_bytes <<<"$r")
written=$(field written_bytes <<<"$r")
logical=$(field logical_bytes <<<"$r")
[ "$data" = "$sent_data" ] || _fail "data_bytes $data, send sent $sent_data bytes of data"
[ "$clone" = "$sent_clone" ] || _fail "clone_bytes $clone, send sent $sent_clone bytes as CLONE"
[ "$written" = "$data" ] || _fail "written_bytes $written counts more than the data $data: clones shared are not written"
[ "$logical" = $((data + clone)) ] || _fail "logical_bytes $logical is not data and clones ($data + $clone)"
[ "$(field stream_bytes <<<"$r")" = "$(stat -c %s "$T/full")" ] || _fail "stream_bytes is not the stream's size"

"$ENCIO" receive -f "$T/full" "$DST/t" 2>"$T/text" || _fail "receive (text) failed"
line=$(grep '^received ' "$T/text")
_log "$line"
# pretty sizes: the text must give the three apart
grep -qE "received 1 subvolume: [0-9]+ commands, [0-9.]+[KMG]?i?B of file data \([0-9.]+[KMG]?i?B data, [0-9.]+[KMG]?i?B cloned\), [0-9.]+[KMG]?i?B written," <<<"$line" ||
	_fail "the summary does not give data, cloned and written apart: $line"
echo "PASS: $TEST_NAME"
