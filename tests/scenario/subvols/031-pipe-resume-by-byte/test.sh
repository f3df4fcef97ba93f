#!/bin/bash
# encio send --subvolumes | encio receive -s, cut at any byte, resumed
# there: the receiver keeps the partial of the subvolume in flight,
# receive --state names it (a resume line), and send --subvolumes --state
# sends only the rest of that subvolume's stream, then the subvolumes
# after it. Cut in a read-only subvolume sent whole (a walked tree), in a
# snapshot's difference (the kernel's stream), in a read-only subvolume
# holding another, in a subvolume SRC received; the receiver killed after checkpoints; each resumed
# run sends less than the uncut stream by what arrived, and DEST ends as
# the uncut receive made it. A resumed stream is refused before any write
# by a receive without -s and by btrfs receive. Sent whole instead, the
# partial dropped: one of a writable subvolume (its snapshot is gone with
# the run), one the state does not name, one whose point the sender finds
# differs (a forged token). A read-only subvolume holding another whose
# copy a cut left writable (sealed at the stream's end only) is sent again
# (the next run failed on it). Another user's directory at the run
# directory's name, and root's of another DEST, are left alone. Nothing
# of encio's is left in DEST after a complete run.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$(dirname "$0")/../../..

make_btrfs src 1G compress=zstd,noatime
SRC=$MNT
T=$TEST_TMP
make_btrfs ref 1G noatime
REF=$MNT
DSTS=()
for n in 1 2 3 4 5 6 7 8; do
	make_btrfs "dst$n" 1G noatime
	DSTS+=("$MNT")
done

_log "a filesystem with its history"
run_check btrfs -q subvolume create "$SRC/@data"
mkdir "$SRC/snaps" "$SRC/@data/r" "$SRC/@data/t"
for i in $(seq -w 1 20); do
	random_bytes 300000 "r$i" >"$SRC/@data/r/r$i"
	compressible 300000 >"$SRC/@data/t/t$i"
done
setfattr -n user.kept -v yes "$SRC/@data/r/r01"
sync
run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/d1"
for i in $(seq -w 21 40); do
	random_bytes 300000 "r$i" >"$SRC/@data/r/r$i"
done
cp --reflink=always "$SRC/@data/r/r02" "$SRC/@data/t/reflink"
rm "$SRC/@data/t/t1"*
sync
run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/d2"
for i in $(seq -w 41 60); do
	random_bytes 300000 "r$i" >"$SRC/@data/r/r$i"
done
rm "$SRC/@data/r/r3"*
# a read-only subvolume holding another
run_check btrfs -q subvolume create "$SRC/frozen"
for i in $(seq -w 1 15); do
	random_bytes 300000 "f$i" >"$SRC/frozen/f$i"
done
run_check btrfs -q subvolume snapshot -r "$SRC/snaps/d1" "$SRC/frozen/in"
run_check btrfs property set -ts "$SRC/frozen" ro true
# a subvolume SRC received (its stream names it by its received UUID)
mkdir "$SRC/got"
btrfs -q send "$SRC/snaps/d2" | btrfs -q receive "$SRC/got" || _fail "btrfs send | receive into SRC failed"
sync

"$ENCIO" -q send --subvolumes "$SRC" -f "$T/full" || _fail "send --subvolumes -f failed"
full=$(stat -c %s "$T/full")
"$ENCIO" -q receive -f "$T/full" "$REF" || _fail "the uncut receive failed"

# ENCIO_SUBVOL commands of the stream: "OFFSET PATH" each
python3 - "$T/full" >"$T/offsets" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
pos = 17
while pos + 10 <= len(d):
    length, cmd = struct.unpack_from("<IH", d, pos)
    if cmd == 65:
        p = pos + 10
        while p < pos + 10 + length:
            t, n = struct.unpack_from("<HH", d, p)
            if t == 15:
                print(pos, d[p + 4:p + 4 + n].decode())
            p += 4 + n
    pos += 10 + length
print(len(d), "END")
EOF
cat "$T/offsets"
# the offset of the byte FRAC (percent) into PATH's part of the stream
at()
{
	awk -v p="$1" -v f="$2" '$2 == p { s = $1; getline; print int(s + ($1 - s) * f / 100) }' "$T/offsets"
}

# same DEST: every subvolume as the uncut receive made it
same()
{
	local dst=$1 p
	for p in snaps/d1 snaps/d2 @data frozen frozen/in got/d2; do
		diff -r "$REF/$p" "$dst/$p" >/dev/null || _fail "$p differs from the uncut receive's"
		[ "$(btrfs property get -ts "$dst/$p" ro)" = "$(btrfs property get -ts "$REF/$p" ro)" ] ||
			_fail "$p: read-only flag differs"
		# a writable one's names the snapshot its run sent it from
		[ "$p" = @data ] ||
			[ "$(btrfs subvolume show "$dst/$p" | grep 'Received UUID')" = \
				"$(btrfs subvolume show "$REF/$p" | grep 'Received UUID')" ] ||
			_fail "$p: received UUID differs"
	done
	[ "$(getfattr --absolute-names --only-values -n user.kept "$dst/snaps/d1/r/r01")" = yes ] || _fail "an xattr lost"
	[ -z "$(find "$dst" -name '*encio*')" ] || _fail "left in DEST: $(find "$dst" -name '*encio*')"
}

# json FILE KEY: the number KEY has in the JSON object in FILE
json()
{
	sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" "$1" | head -1
}

# cut DEST BYTES: the stream cut there, received with -s
cut()
{
	head -c "$2" "$T/full" | "$ENCIO" receive -s --format=json "$1" >"$T/cut.json" 2>"$T/cut.err" &&
		_fail "a cut stream received"
	cat "$T/cut.err"
}

# resume DEST NAME: the rest sent with the state of DEST; resumed_at and
# the stream's size into RESUMED_AT, STREAM
resume()
{
	"$ENCIO" receive --state "$1" >"$T/state" || _fail "receive --state failed"
	"$ENCIO" -q send --subvolumes --format=json --state "$T/state" -f "$T/$2.stream" "$SRC" \
		>"$T/$2.send.json" || _fail "the resumed send failed"
	"$ENCIO" receive -s --format=json -f "$T/$2.stream" "$1" >"$T/$2.rcv.json" ||
		_fail "the resumed receive failed"
	RESUMED_AT=$(json "$T/$2.send.json" resumed_at)
	STREAM=$(stat -c %s "$T/$2.stream")
	[ "$(json "$T/$2.send.json" resumed)" = "$(json "$T/$2.rcv.json" resumed)" ] ||
		_fail "sender and receiver disagree on the resume: $(cat "$T/$2.send.json" "$T/$2.rcv.json")"
}

_log "cut in a read-only subvolume sent whole"
D=${DSTS[0]}
c=$(at snaps/d1 55)
cut "$D" "$c"
grep -q "the partial receive of snaps/d1 is kept" "$T/cut.err" || _fail "no word of the partial kept"
grep -q "encio receive --state" "$T/cut.err" || _fail "no resume hint"
grep -q '"partial_kept": "snaps/d1"' "$T/cut.json" || _fail "the JSON names no partial: $(cat "$T/cut.json")"
"$ENCIO" receive --state "$D" >"$T/state" || _fail "receive --state failed"
grep -q '^resume 3-[0-9a-f]* snaps/d1$' "$T/state" || _fail "the state names no partial: $(cat "$T/state")"
"$ENCIO" -q send --subvolumes --state "$T/state" -f "$T/a.stream" "$SRC" || _fail "the resumed send failed"
# refused before any write: without -s, and by btrfs receive
before=$(find "$D" | sort | md5sum)
run_mustfail "a resumed stream without -s" "$ENCIO" receive -f "$T/a.stream" "$D"
grep -q "receive with -s" <<<"$ERR_OUT" || _fail "the refusal does not say -s: $ERR_OUT"
mkdir "$T/progs"
btrfs receive -f "$T/a.stream" "$T/progs" >/dev/null 2>&1 && _fail "btrfs receive took the stream"
[ -z "$(ls -A "$T/progs")" ] || _fail "btrfs receive wrote: $(ls -A "$T/progs")"
[ "$(find "$D" | sort | md5sum)" = "$before" ] || _fail "a refused receive changed DEST"
resume "$D" a
[ "$(json "$T/a.rcv.json" resumed)" = 1 ] || _fail "not resumed: $(cat "$T/a.rcv.json")"
[ "$RESUMED_AT" -gt $(((c - $(at snaps/d1 0)) / 2)) ] || _fail "resumed at $RESUMED_AT only (cut at $c)"
[ "$STREAM" -lt $((full - (c - $(at snaps/d1 0)) + 1048576)) ] ||
	_fail "the resumed run sent $STREAM of $full bytes (cut at $c)"
same "$D"
"$ENCIO" receive --state "$D" | grep -q '^resume' && _fail "a complete DEST names a partial"

# cut_resume DEST PATH PERCENT KEY RESUMED: cut in PATH's part, the next
# run resuming it (RESUMED 1) or sending it again (0), DEST as uncut
cut_resume()
{
	cut "$1" "$(at "$2" "$3")"
	resume "$1" "$4"
	[ "$(json "$T/$4.rcv.json" resumed)" = "$5" ] || _fail "$2: resumed is not $5: $(cat "$T/$4.rcv.json")"
	same "$1"
}

_log "cut in a snapshot's difference, then in the subvolume holding another"
cut_resume "${DSTS[1]}" snaps/d2 60 b 1
cut_resume "${DSTS[2]}" frozen 50 c 1

_log "cut in a subvolume SRC received, after the one holding another (left writable)"
cut_resume "${DSTS[7]}" got/d2 50 e 1

_log "cut in a writable subvolume: its snapshot went with the run, sent again"
cut_resume "${DSTS[3]}" @data 50 d 0

_log "a state that does not name the partial (an older encio's): sent whole, the partial dropped"
D=${DSTS[4]}
cut "$D" "$(at snaps/d1 50)"
"$ENCIO" receive --state "$D" | grep -v '^resume' |
	sed -e '1s/ 2$/ 1/' -e 's/^\([0-9a-f]* [0-9]*\) r[ow] /\1 /' >"$T/state.old"
head -1 "$T/state.old" | grep -qx "encio-subvolumes-state 1" || _fail "no state of version 1: $(cat "$T/state.old")"
"$ENCIO" -q send --subvolumes --state "$T/state.old" "$SRC" | "$ENCIO" -q receive -s "$D" ||
	_fail "a run that does not resume failed"
same "$D"

_log "a forged point: the sender finds its stream differs and sends it whole"
D=${DSTS[5]}
cut "$D" "$(at snaps/d1 50)"
"$ENCIO" receive --state "$D" >"$T/state" || _fail "receive --state failed"
# the point's shape changed, its checksum made again (crc32c, no inversion)
python3 - "$T/state" <<'EOF'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
for i, line in enumerate(lines):
    if line.startswith("resume "):
        _, token, rel = line.split(" ")
        raw = bytearray(bytes.fromhex(token[2:]))[:-4]
        shape = 1 + 16 + 8 + 16 + 8 + 8 + 8 + 8
        raw[shape] ^= 0xff
        crc = 0
        for b in raw:
            crc ^= b
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        raw += crc.to_bytes(4, "little")
        lines[i] = "resume 3-%s %s" % (raw.hex(), rel)
open(path, "w").write("\n".join(lines))
EOF
"$ENCIO" send --subvolumes --format=json --state "$T/state" -f "$T/f.stream" "$SRC" >"$T/f.json" 2>"$T/f.err" ||
	{ cat "$T/f.err"; _fail "the send of a forged point failed"; }
[ "$(json "$T/f.json" resumed)" = 0 ] || _fail "a forged point resumed: $(cat "$T/f.json")"
# the point was of d1's stream: the sender tried it (the stream says so)
run_mustfail "a stream that was to resume, without -s" "$ENCIO" receive -f "$T/f.stream" "$D"
grep -q "receive with -s" <<<"$ERR_OUT" || _fail "not refused as resuming: $ERR_OUT"
"$ENCIO" -q receive -s -f "$T/f.stream" "$D" || _fail "the whole stream after a forged point failed"
same "$D"

_log "the receiver killed after checkpoints; another user's directories beside DEST"
D=${DSTS[6]}/in
mkdir "${DSTS[6]}/.encio-subvols.planted" "${DSTS[6]}/.encio-subvols.others"
echo mine >"${DSTS[6]}/.encio-subvols.planted/file"
chown -R 4242:4242 "${DSTS[6]}/.encio-subvols.planted"
chmod 0700 "${DSTS[6]}/.encio-subvols.planted" "${DSTS[6]}/.encio-subvols.others"
setfattr -n trusted.encio.subvols-of -v other "${DSTS[6]}/.encio-subvols.others"
echo theirs >"${DSTS[6]}/.encio-subvols.others/file"
(python3 "$HERE/throttle.py" 2e6 <"$T/full" |
	"$ENCIO" -q receive -s --checkpoint 1M "$D" >/dev/null 2>&1) &
for i in $(seq 1 300); do
	[ -n "$(find "${DSTS[6]}" -path '*/.encio-receive.*/d1/ckpt.*' -print -quit 2>/dev/null)" ] &&
		[ "$(find "${DSTS[6]}" -path '*/.encio-receive.*/d1/ckpt.*' | wc -l)" -ge 1 ] && break
	sleep 0.1
done
sleep 1
pkill -KILL -f "receive -s --checkpoint 1M $D"
wait
"$ENCIO" receive --state "$D" >"$T/state" || _fail "receive --state after the kill failed"
grep -q '^resume 3-[0-9a-f]* snaps/d1$' "$T/state" || _fail "no partial named after the kill: $(cat "$T/state")"
resume "$D" g
[ "$(json "$T/g.rcv.json" resumed)" = 1 ] || _fail "not resumed after the kill: $(cat "$T/g.rcv.json")"
[ "$RESUMED_AT" -gt 0 ] || _fail "resumed at 0"
same "$D"
[ "$(cat "${DSTS[6]}/.encio-subvols.planted/file")" = mine ] || _fail "the user's directory was touched"
[ "$(cat "${DSTS[6]}/.encio-subvols.others/file")" = theirs ] || _fail "another DEST's directory was touched"
[ "$(ls -A "${DSTS[6]}" | grep -c encio-subvols)" = 2 ] || _fail "run directories left: $(ls -A "${DSTS[6]}")"
echo "PASS: $TEST_NAME"
