#!/bin/bash
# encio send --subvolumes SRC | encio receive DEST makes what encio copy -rT
# --subvolumes SRC DEST makes: a filesystem's top with a plain file, two
# writable subvolumes (one nested in the other), read-only snapshots of
# each with churn between them, a snapshot nested in a read-only one. In
# DEST, each at its path: content and metadata equal to copy's, read-only
# flags as copy's, the received UUIDs of the read-only ones as copy's,
# snapshots made as snapshots (a parent UUID), the room within 2% of
# copy's; nothing named *encio* left in SRC but a base beside each
# writable subvolume (the next run's parent), none in DEST. The same
# through -f FILE and receive -f, with --format=json on both sides: one
# object each, listing the subvolumes in the stream's order, its counts
# theirs. btrfs receive refuses the stream before
# writing anything; a second receive into the same DEST fails loudly. A
# second run with receive --state's output sends only what DEST lacks, as
# differences (a writable one's from its base), and gives what copy's
# rerun gives; a copy the state named that changed since is refused. A
# third run lists the copies of snapshots SRC lost, and with
# --delete-extra deletes the one encio received, unchanged, not the one
# changed since.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize"
RANDOM=27

make_btrfs src 512M compress=zstd,noatime
SRC=$MNT
make_btrfs dst 512M noatime
DST=$MNT
make_btrfs dst2 512M noatime
DST2=$MNT
make_btrfs dst3 512M noatime
DST3=$MNT
make_btrfs dst4 512M noatime
DST4=$MNT

churn()
{
	local d=$1 n=$2
	random_bytes $((100000 + RANDOM * 3)) "r$n$d" >"$d/new$n"
	compressible $((200000 + RANDOM * 3)) >"$d/text$n"
	[ -e "$d/new$((n - 1))" ] && cp --reflink=always "$d/new$((n - 1))" "$d/reflink$n"
	[ -e "$d/text$((n - 2))" ] && mv "$d/text$((n - 2))" "$d/moved$n"
	setfattr -n user.n -v "$n" "$d/new$n"
	touch -d "@$((1600000000 + n * 1000))" "$d/new$n"
	sync
}

_log "a filesystem with its history"
run_check btrfs -q subvolume create "$SRC/@data"
run_check btrfs -q subvolume create "$SRC/@data/inner"
mkdir "$SRC/snaps" "$SRC/plain"
echo "not in a subvolume" >"$SRC/plain/file"
chmod 750 "$SRC/plain"
for n in 1 2 3 4; do
	churn "$SRC/@data" "$n"
	churn "$SRC/@data/inner" "$n"
	run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/data-$n"
	run_check btrfs -q subvolume snapshot -r "$SRC/@data/inner" "$SRC/snaps/inner-$n"
done
# a read-only subvolume holding another: read-only only once it is placed
run_check btrfs -q subvolume create "$SRC/frozen"
echo f >"$SRC/frozen/f"
run_check btrfs -q subvolume snapshot -r "$SRC/snaps/data-4" "$SRC/frozen/in"
run_check btrfs property set -ts "$SRC/frozen" ro true
sync

_log "send --subvolumes | receive, and copy --subvolumes"
"$ENCIO" send --subvolumes "$SRC" 2>"$TEST_TMP/send.err" |
	"$ENCIO" receive "$DST" 2>"$TEST_TMP/receive.err" ||
	{ cat "$TEST_TMP/send.err" "$TEST_TMP/receive.err"; _fail "send --subvolumes | receive failed"; }
grep -q "^sent 12 subvolumes (9 as differences; 0 in DEST already)" "$TEST_TMP/send.err" ||
	{ cat "$TEST_TMP/send.err"; _fail "the send's summary"; }
grep -q "^received 12 subvolumes into $DST" "$TEST_TMP/receive.err" ||
	{ cat "$TEST_TMP/receive.err"; _fail "the receive's summary"; }
# the bases of the next run's differences, beside the writable ones
[ "$(cd "$SRC" && find . -name '*encio*' | sort | tr '\n' ' ')" = "./.@data.encio-send-base ./@data/.inner.encio-send-base " ] ||
	_fail "left behind: $(find "$SRC" -name '*encio*')"
[ -z "$(find "$DST" -name '*encio*')" ] || _fail "left behind: $(find "$DST" -name '*encio*')"
[ "$(btrfs property get -ts "$SRC/.@data.encio-send-base" ro)" = ro=true ] || _fail "the base is not read-only"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST2"

# subvols MNT: each subvolume's path, read-only flag, whether it has a
# parent UUID, and a read-only one's received UUID (a writable one's copy
# records the moment it holds, each its own way)
subvols()
{
	btrfs subvolume list -R -q "$1" | awk '{ print $NF, $(NF-4) != "-", $(NF-2) }' | sort |
		while read -r path parent received; do
			ro=$(btrfs property get -ts "$1/$path" ro | cut -d= -f2)
			[ "$ro" = true ] || received=-
			printf '%s ro=%s parent=%s received=%s\n' "$path" "$ro" "$parent" "$received"
		done
}
subvols "$DST" >"$TEST_TMP/pipe.list"
subvols "$DST2" >"$TEST_TMP/copy.list"
diff "$TEST_TMP/copy.list" "$TEST_TMP/pipe.list" ||
	_fail "the subvolumes differ from copy --subvolumes' (paths, ro, parent, received UUID)"
[ "$(wc -l <"$TEST_TMP/pipe.list")" -eq 12 ] || _fail "not 12 subvolumes"
grep -q "^snaps/data-2 ro=true parent=1" "$TEST_TMP/pipe.list" || { cat "$TEST_TMP/pipe.list"; false; } ||
	_fail "a snapshot not made as a snapshot"
grep -q "^frozen ro=true" "$TEST_TMP/pipe.list" || _fail "frozen is not read-only"
grep -q "^@data ro=false" "$TEST_TMP/pipe.list" || _fail "@data is not writable"

diff -r --no-dereference "$DST2" "$DST" || _fail "content differs"
[ "$(tree_stat "$DST2")" = "$(tree_stat "$DST")" ] || {
	diff <(tree_stat "$DST2") <(tree_stat "$DST")
	_fail "stat differs"
}
[ "$(tree_xattrs "$DST2")" = "$(tree_xattrs "$DST")" ] || _fail "xattrs differ"

sync -f "$DST"
sync -f "$DST2"
pipe_du=$(compsize -b "$DST" | awk '$1 == "TOTAL" { print $3 }')
copy_du=$(compsize -b "$DST2" | awk '$1 == "TOTAL" { print $3 }')
awk -v a="$pipe_du" -v b="$copy_du" 'BEGIN { exit !(a <= b * 1.02 + 65536) }' ||
	_fail "the received filesystem takes $pipe_du bytes, copy's $copy_du"

_log "a second run: what DEST lacks, as differences"
for n in 5 6; do
	churn "$SRC/@data" "$n"
	churn "$SRC/@data/inner" "$n"
	run_check btrfs -q subvolume snapshot -r "$SRC/@data" "$SRC/snaps/data-$n"
done
echo "changed" >"$SRC/plain/file"
sync
"$ENCIO" receive --state "$DST" >"$TEST_TMP/state" || _fail "receive --state failed"
head -1 "$TEST_TMP/state" | grep -qx "encio-subvolumes-state 2" || _fail "not a state: $(head -1 "$TEST_TMP/state")"
# the 10 read-only ones, and the writable ones as their bases left them
[ "$(grep -c . "$TEST_TMP/state")" -eq 13 ] || { cat "$TEST_TMP/state"; _fail "not 12 subvolumes in the state"; }
"$ENCIO" send --subvolumes --state "$TEST_TMP/state" -f "$TEST_TMP/second" "$SRC" 2>"$TEST_TMP/send.err" ||
	{ cat "$TEST_TMP/send.err"; _fail "the second send failed"; }
grep -q "^sent 4 subvolumes (4 as differences; 10 in DEST already)" "$TEST_TMP/send.err" ||
	{ cat "$TEST_TMP/send.err"; _fail "the second send's summary"; }
grep -q "^At subvol @data/inner (difference from .inner.encio-send-base)" "$TEST_TMP/send.err" ||
	{ cat "$TEST_TMP/send.err"; _fail "@data/inner not sent from its base"; }
"$ENCIO" -q receive -f "$TEST_TMP/second" "$DST" || _fail "the second receive failed"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST2"
subvols "$DST" >"$TEST_TMP/pipe.list"
subvols "$DST2" >"$TEST_TMP/copy.list"
diff "$TEST_TMP/copy.list" "$TEST_TMP/pipe.list" || _fail "after the second run: the subvolumes differ"
diff -r --no-dereference "$DST2" "$DST" || _fail "after the second run: content differs"
[ "$(tree_stat "$DST2")" = "$(tree_stat "$DST")" ] || {
	diff <(tree_stat "$DST2") <(tree_stat "$DST")
	_fail "after the second run: stat differs"
}
[ "$(tree_xattrs "$DST2")" = "$(tree_xattrs "$DST")" ] || _fail "after the second run: xattrs differ"
[ -z "$(find "$DST" -name '*encio*')" ] || _fail "left behind: $(find "$DST" -name '*encio*')"

_log "the second stream again: refused"
run_mustfail "the second stream again" "$ENCIO" -q receive -f "$TEST_TMP/second" "$DST"

_log "through a file, with the JSON summaries"
"$ENCIO" send --subvolumes -f "$TEST_TMP/stream" --format=json "$SRC" >"$TEST_TMP/send.json" ||
	_fail "send --subvolumes -f --format=json failed"
"$ENCIO" receive -f "$TEST_TMP/stream" --format=json "$DST4/copy" >"$TEST_TMP/receive.json" ||
	_fail "receive -f --format=json failed"
diff -r --no-dereference "$DST" "$DST4/copy" || _fail "content differs (through a file)"
# each a JSON object alone on standard output, its counts those of the
# subvolumes listed, the stream's size that of the file
python3 - "$TEST_TMP/send.json" "$TEST_TMP/receive.json" "$(stat -c %s "$TEST_TMP/stream")" <<'PY' ||
import json, sys
snd, rcv = (json.load(open(f)) for f in sys.argv[1:3])
size = int(sys.argv[3])
paths = [x["path"] for x in snd["subvolumes"]]
# SRC's plain part ("."), then its 14 subvolumes; 11 as differences
assert paths[0] == "." and len(paths) == snd["sent"] + 1 == 15, paths
assert snd["incremental"] == sum(x["parent"] is not None for x in snd["subvolumes"]) == 11, snd
assert snd["in_dest"] == 0 and snd["extras"] == [] and not snd["delete_extra"], snd
assert [x["path"] for x in rcv["subvolumes"]] == paths, rcv
assert rcv["received"] == snd["sent"] and rcv["in_dest"] == 0, rcv
rw = {x["path"] for x in rcv["subvolumes"] if not x["read_only"]}
assert rw == {".", "@data", "@data/inner"}, rw
assert snd["stream_bytes"] == rcv["stream_bytes"] == size, (snd, rcv, size)
PY
	_fail "the JSON summaries: $(cat "$TEST_TMP/send.json" "$TEST_TMP/receive.json")"

_log "a copy the state named, changed since: refused"
run_check btrfs property set -f -ts "$DST4/copy/snaps/data-1" ro false
echo planted >"$DST4/copy/snaps/data-1/planted"
run_check btrfs property set -ts "$DST4/copy/snaps/data-1" ro true
run_mustfail "a stale state" "$ENCIO" -q receive -f "$TEST_TMP/second" "$DST4/copy"
grep -q "changed since" <<<"$ERR_OUT" || _fail "a stale state: $ERR_OUT"

_log "a third run: SRC lost two snapshots"
run_check btrfs -q subvolume delete "$SRC/snaps/data-1" "$SRC/snaps/inner-1"
"$ENCIO" receive --state "$DST" >"$TEST_TMP/state" || _fail "receive --state failed"
# changed in DEST after its state was read: not provably encio's any more
run_check btrfs property set -f -ts "$DST/snaps/inner-1" ro false
echo planted >"$DST/snaps/inner-1/planted"
run_check btrfs property set -ts "$DST/snaps/inner-1" ro true
"$ENCIO" send --subvolumes --state "$TEST_TMP/state" "$SRC" 2>"$TEST_TMP/send.err" |
	"$ENCIO" -q receive "$DST" || { cat "$TEST_TMP/send.err"; _fail "the third run failed"; }
grep -q "^DEST holds 2 subvolumes SRC no longer has there" "$TEST_TMP/send.err" &&
	grep -qx "  snaps/data-1" "$TEST_TMP/send.err" && grep -qx "  snaps/inner-1" "$TEST_TMP/send.err" ||
	{ cat "$TEST_TMP/send.err"; _fail "the extras not listed"; }
[ -d "$DST/snaps/data-1" ] && [ -d "$DST/snaps/inner-1" ] || _fail "an extra deleted without --delete-extra"
"$ENCIO" send --subvolumes --state "$TEST_TMP/state" --delete-extra "$SRC" 2>/dev/null |
	"$ENCIO" receive "$DST" 2>"$TEST_TMP/receive.err" ||
	{ cat "$TEST_TMP/receive.err"; _fail "the run with --delete-extra failed"; }
grep -q "1 no longer SRC's deleted, 1 kept" "$TEST_TMP/receive.err" ||
	{ cat "$TEST_TMP/receive.err"; _fail "the receive's summary of the extras"; }
[ ! -e "$DST/snaps/data-1" ] || _fail "snaps/data-1 stays with --delete-extra"
[ -e "$DST/snaps/inner-1/planted" ] || _fail "snaps/inner-1, changed in DEST, was deleted"

_log "btrfs receive refuses it, writing nothing"
run_mustfail "btrfs receive of the stream" btrfs receive -f "$TEST_TMP/stream" "$DST3"
grep -q "version" <<<"$ERR_OUT" || _fail "btrfs receive did not refuse the stream's version"
[ -z "$(ls -A "$DST3")" ] || _fail "btrfs receive wrote: $(ls -A "$DST3")"
[ -z "$(btrfs subvolume list "$DST3")" ] || _fail "btrfs receive made a subvolume"
# the state of a DEST without subvolumes: none
[ "$("$ENCIO" receive --state "$DST3")" = "encio-subvolumes-state 2" ] ||
	_fail "the state of an empty DEST"

_log "received again into the same DEST: refused"
run_mustfail "a second receive" "$ENCIO" -q receive -f "$TEST_TMP/stream" "$DST4/copy"
grep -q "File exists" <<<"$ERR_OUT" || _fail "the second receive: $ERR_OUT"
echo "PASS: $TEST_NAME"
