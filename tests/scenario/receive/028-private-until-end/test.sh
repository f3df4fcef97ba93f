#!/bin/bash
# A plain encio receive (no -s) made the subvolume at NAME and received
# into it there: another user could write into its own directories of it
# while the stream came, and what it planted was made read-only and marked
# received with the rest, as if sent. The subvolume is now made in the
# receive's private directory (.encio-receive.XXXXXX, root's, 0700) and
# gets NAME only at its END, as receive -s's does. A receive that fails
# still leaves it at NAME, writable and not received, as btrfs receive does.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 512M
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/u"
chown 4321:4321 "$SRC/v/u"
echo mine >"$SRC/v/u/f"
chown 4321:4321 "$SRC/v/u/f"
random_bytes 30000000 big >"$SRC/v/big"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
# btrfs send gives a directory its owner and mode right after making it
run_check btrfs send -q -f "$TEST_TMP/s1.stream" "$SRC/s1"
size=$(stat -c %s "$TEST_TMP/s1.stream")

make_btrfs dst 512M
DST=$MNT
chmod 0755 "$TEST_TMP"
chmod 1777 "$DST"
mkfifo "$TEST_TMP/pipe"
"$ENCIO" -q receive -f "$TEST_TMP/pipe" "$DST" &
pid=$!
exec 3>"$TEST_TMP/pipe"
head -c $((size / 2)) "$TEST_TMP/s1.stream" >&3
sleep 1
kill -0 $pid || _fail "the receive ended early"
# the user, while the stream comes, into its own directory of the copy
as_user sh -c "echo planted >'$DST/s1/u/planted'" 2>/dev/null
as_user sh -c "for d in '$DST'/.encio-receive.*/*/*; do echo planted >\"\$d/u/planted\"; done" 2>/dev/null
tail -c +$((size / 2 + 1)) "$TEST_TMP/s1.stream" >&3
exec 3>&-
wait $pid || _fail "the receive failed"
[ ! -e "$DST/s1/u/planted" ] || _fail "the user planted a file in the received subvolume"
diff -r "$SRC/s1" "$DST/s1" || _fail "s1 differs"
[ "$(btrfs property get "$DST/s1" ro)" = "ro=true" ] || _fail "s1 is not read-only"
! ls -a "$DST" | grep -q encio-receive || _fail "the private directory is left: $(ls -a "$DST")"

# a stream cut short: the subvolume at NAME, writable, not received
head -c $((size / 2)) "$TEST_TMP/s1.stream" >"$TEST_TMP/cut"
mkdir "$DST/c"
run_mustfail "a cut stream" "$ENCIO" -q receive -f "$TEST_TMP/cut" "$DST/c"
[ -d "$DST/c/s1" ] || _fail "the cut receive left nothing at NAME"
[ "$(btrfs property get "$DST/c/s1" ro)" = "ro=false" ] || _fail "the cut receive's subvolume is read-only"
btrfs subvolume show "$DST/c/s1" | grep -q "Received UUID:.*-$" || _fail "the cut receive's subvolume is marked received"
! ls -a "$DST/c" | grep -q encio-receive || _fail "the private directory is left after the cut"

# SIGTERM between two commands (the signal stops the stream at its next
# read): the same, and the receive exits through the signal
mkdir "$DST/i"
rm -f "$TEST_TMP/pipe"
mkfifo "$TEST_TMP/pipe"
"$ENCIO" -q receive -f "$TEST_TMP/pipe" "$DST/i" &
pid=$!
exec 3>"$TEST_TMP/pipe"
head -c $((size / 2)) "$TEST_TMP/s1.stream" >&3
sleep 1
kill -TERM $pid
tail -c +$((size / 2 + 1)) "$TEST_TMP/s1.stream" >&3 2>/dev/null
exec 3>&-
wait $pid
rc=$?
[ $rc = 143 ] || _fail "the stopped receive exited $rc, not through SIGTERM"
[ -d "$DST/i/s1" ] || _fail "the stopped receive left nothing at NAME"
[ "$(btrfs property get "$DST/i/s1" ro)" = "ro=false" ] || _fail "the stopped receive's subvolume is read-only"
! ls -a "$DST/i" | grep -q encio-receive || _fail "the private directory is left after SIGTERM"
