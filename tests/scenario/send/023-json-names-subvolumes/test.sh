#!/bin/bash
# send's and receive's --format=json name each subvolume: its name, its
# UUID and received UUID (36-character text, as btrfs subvolume show
# prints them) and, for an incremental, its parent's UUID. A subvolume sent
# again from where it was received carries its received UUID; a directory
# that is not a subvolume has a null UUID. receive's entry gives the new
# subvolume's own UUID, the sender's as its received UUID, and the
# parent's.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
compressible 300000 >"$SRC/v/text"
mkdir "$SRC/v/dir"
echo x >"$SRC/v/dir/x"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
echo more >>"$SRC/v/text"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

# show PATH FIELD: btrfs subvolume show's UUID field ("-" for none)
show() { btrfs subvolume show "$1" | sed -n "s/^[[:space:]]*$2:[[:space:]]*//p"; }
# member JSON KEY: the value of the first "KEY": "..." in JSON, or null
member() { sed -n "s/.*\"$2\": \(null\|\"[^\"]*\"\).*/\1/p" <<<"$1" | tr -d '"' | head -1; }
# has JSON KEY: whether JSON has KEY at all
has() { grep -q "\"$2\":" <<<"$1"; }
uuid_like() { [[ $1 =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]]; }

full=$("$ENCIO" -q send --format=json -f "$T/full" "$SRC/s1") || _fail "send failed"
_log "$full"
grep -q '"subvolumes": \[{"path": "[^"]*s1", "name": "s1", ' <<<"$full" || _fail "send's JSON names no subvolume: $full"
u=$(member "$full" uuid)
uuid_like "$u" || _fail "send's uuid is not a UUID: $u"
[ "$u" = "$(show "$SRC/s1" UUID)" ] || _fail "send's uuid $u is not s1's"
! has "$full" received_uuid || _fail "s1 was not received, yet: $full"
! has "$full" parent_uuid || _fail "a full send has no parent: $full"

incr=$("$ENCIO" -q send --format=json -f "$T/incr" -p "$SRC/s1" "$SRC/s2") || _fail "send -p failed"
_log "$incr"
[ "$(member "$incr" uuid)" = "$(show "$SRC/s2" UUID)" ] || _fail "send -p: uuid is not s2's: $incr"
[ "$(member "$incr" parent_uuid)" = "$(show "$SRC/s1" UUID)" ] || _fail "send -p: parent_uuid is not s1's: $incr"

mkdir "$DST/r"
rf=$("$ENCIO" -q receive --format=json -f "$T/full" "$DST/r") || _fail "receive failed"
ri=$("$ENCIO" -q receive --format=json -f "$T/incr" "$DST/r") || _fail "receive of the incremental failed"
_log "$rf"
_log "$ri"
grep -q '"subvolumes": \[{"name": "s1", ' <<<"$rf" || _fail "receive's JSON names no subvolume: $rf"
[ "$(member "$rf" uuid)" = "$(show "$DST/r/s1" UUID)" ] || _fail "receive: uuid is not the received s1's: $rf"
[ "$(member "$rf" received_uuid)" = "$(show "$SRC/s1" UUID)" ] || _fail "receive: received_uuid is not the sender's: $rf"
[ "$(show "$DST/r/s1" 'Received UUID')" = "$(show "$SRC/s1" UUID)" ] || _fail "s1 not received as said"
! has "$rf" parent_uuid || _fail "receive of a full stream: a parent_uuid: $rf"
[ "$(member "$ri" uuid)" = "$(show "$DST/r/s2" UUID)" ] || _fail "receive: uuid is not the received s2's: $ri"
[ "$(member "$ri" received_uuid)" = "$(show "$SRC/s2" UUID)" ] || _fail "receive: s2's received_uuid: $ri"
[ "$(member "$ri" parent_uuid)" = "$(show "$SRC/s1" UUID)" ] || _fail "receive: s2's parent_uuid: $ri"

# sent on from where it was received: its received UUID too
again=$("$ENCIO" -q send --format=json -f "$T/again" "$DST/r/s1") || _fail "send of the received s1 failed"
_log "$again"
[ "$(member "$again" uuid)" = "$(show "$DST/r/s1" UUID)" ] || _fail "resend: uuid: $again"
[ "$(member "$again" received_uuid)" = "$(show "$SRC/s1" UUID)" ] || _fail "resend: received_uuid: $again"

# a directory that is not a subvolume: its UUID is the stream's own
live=$("$ENCIO" -q send --format=json -f "$T/live" "$SRC/v/dir" 2>/dev/null) || _fail "send of a directory failed"
[ "$(member "$live" uuid)" = null ] || _fail "a directory's uuid should be null: $live"

# several subvolumes: one entry each
two=$("$ENCIO" -q send --format=json -f "$T/two" "$SRC/s1" "$SRC/s2") || _fail "send of two failed"
[ "$(grep -o '"name": "s[12]"' <<<"$two" | tr '\n' ' ')" = '"name": "s1" "name": "s2" ' ] ||
	_fail "two subvolumes, not two entries: $two"
mkdir "$DST/r2"
r2=$("$ENCIO" -q receive --format=json -f "$T/two" "$DST/r2") || _fail "receive of two failed"
[ "$(grep -o '"name": "s[12]"' <<<"$r2" | tr '\n' ' ')" = '"name": "s1" "name": "s2" ' ] ||
	_fail "receive of two subvolumes, not two entries: $r2"
python3 -c 'import json,sys; [json.loads(l) for l in sys.argv[1:]]' "$full" "$incr" "$rf" "$ri" "$two" "$r2" ||
	_fail "not JSON"
echo "PASS: $TEST_NAME"
