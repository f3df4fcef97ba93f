#!/bin/bash
# What a user plants in DEST beside receive -s's state neither hangs it,
# nor is written through, nor stops it: FIFOs, a symlink and a hard link
# of the user's file at the names receive -s used for its records
# (.NAME.encio-partial.resume, .resume-new) and at names like its private
# directory's (.encio-receive.*). Root's receive -s of NAME, cut and
# resumed, and --resume-token, end in time, leave the planted names and
# what they point to as they were, and leave nothing of their own.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
random_bytes 4000000 v1 >"$SRC/v/f"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
T=$TEST_TMP
"$ENCIO" -q send "$SRC/s1" >"$T/s1.stream" || _fail "send"
size=$(stat -c %s "$T/s1.stream")

chmod 0755 "$T" "$DST"
mkdir "$DST/u" "$DST/victim"
chown 4321:4321 "$DST/u"
echo root >"$DST/victim/file"
chmod 0700 "$DST/victim"
as_user sh -c "echo mine >'$DST/u/mine'"
as_user mkfifo "$DST/u/.s1.encio-partial.resume" "$DST/u/.s1.encio-partial.resume-new" \
	"$DST/u/.encio-receive.fifo00" || _fail "mkfifo"
as_user ln -s /dev/shm "$DST/u/.encio-receive.link00" || _fail "symlink"
as_user ln -s "$DST/victim" "$DST/u/.encio-receive.link01" || _fail "symlink"
as_user ln "$DST/u/mine" "$DST/u/.encio-receive.hard00" || _fail "hard link"
as_user mkdir -p "$DST/u/.encio-receive.dir000/s1" || _fail "mkdir"
before=$(cd "$DST/u" && ls -lA --time-style=+ | sort)

head -c $((size / 2)) "$T/s1.stream" |
	timeout 60 "$ENCIO" -q receive -s --checkpoint 256K "$DST/u" 2>"$T/cut.err"
rc=$?
[ $rc = 124 ] && _fail "receive -s hung on what a user planted"
[ $rc = 1 ] || _fail "a cut stream: exit $rc: $(cat "$T/cut.err")"
token=$(timeout 30 "$ENCIO" receive --resume-token "$DST/u/s1")
rc=$?
[ $rc = 124 ] && _fail "--resume-token hung on what a user planted"
[ $rc = 0 ] || _fail "no token: exit $rc"
"$ENCIO" -q send -t "$token" "$SRC/s1" >"$T/resumed" || _fail "send -t"
timeout 60 "$ENCIO" -q receive -s -f "$T/resumed" "$DST/u" || _fail "the resume: exit $?"
diff -r "$SRC/s1" "$DST/u/s1" || _fail "s1 differs"

_log "an uncut receive -s beside them"
btrfs -q subvolume delete "$DST/u/s1" >/dev/null
timeout 60 "$ENCIO" -q receive -s -f "$T/s1.stream" "$DST/u" || _fail "receive -s: exit $?"
diff -r "$SRC/s1" "$DST/u/s1" || _fail "s1 differs"

after=$(cd "$DST/u" && ls -lA --time-style=+ | grep -v ' s1$' | sort)
[ "$before" = "$after" ] || _fail "DEST changed: $before // $after"
[ "$(cat "$DST/u/mine")" = mine ] || _fail "the user's file was written through a link"
[ "$(ls -A "$DST/victim")" = file ] || _fail "written through a symlink: $(ls -A "$DST/victim")"
[ "$(cat "$DST/victim/file")" = root ] || _fail "root's file changed"
exit 0
