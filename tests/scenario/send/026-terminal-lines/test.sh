#!/bin/bash
# On a terminal, a line never runs into a progress line, and no line
# starts with terminal codes where no progress line can be: "encio send |
# encio receive" on one terminal, receive's "At snapshot" (stdout), its
# messages and its summary start by erasing the line the sender may have
# drawn; an error of a command that drew no progress line starts with
# "ERROR:" itself, no stray ESC[K.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v script >/dev/null || _not_run "needs script (util-linux)"

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 20); do random_bytes 100000 "r$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
echo more >"$SRC/v/new"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
mkdir "$DST/r"

# on_tty OUT CMD: CMD run with a terminal for stdout and stderr
on_tty() { timeout 120 script -qec "$2" /dev/null >"$1" </dev/null; }

on_tty "$T/pipe" "'$ENCIO' send '$SRC/s1' | '$ENCIO' receive '$DST/r' && '$ENCIO' send -p '$SRC/s1' '$SRC/s2' | '$ENCIO' receive '$DST/r'" ||
	_fail "send | receive on a terminal failed: $(cat -v "$T/pipe")"
cat -v "$T/pipe"
# each of receive's lines starts by erasing the sender's
grep -a 'At snapshot s2' "$T/pipe" | grep -qa $'\r\e\[KAt snapshot s2' ||
	_fail "'At snapshot' may run into the sender's progress line: $(cat -v "$T/pipe")"
grep -a 'received 1 subvolume' "$T/pipe" | grep -qva $'\r\e\[Kreceived 1 subvolume' &&
	_fail "receive's summary may run into the sender's progress line: $(cat -v "$T/pipe")"

# errors with no progress line: no terminal codes
on_tty "$T/err1" "'$ENCIO' send '$T/nonexistent' >/dev/null"
cat -v "$T/err1"
grep -qa '^ERROR: ' "$T/err1" || _fail "send's error does not start its line: $(cat -v "$T/err1")"
grep -qa $'\e' "$T/err1" && _fail "terminal codes with no progress line: $(cat -v "$T/err1")"
head -c 100 /dev/zero >"$T/garbage"
on_tty "$T/err2" "'$ENCIO' receive -f '$T/garbage' '$DST/r'"
cat -v "$T/err2"
grep -qa '^ERROR: ' "$T/err2" || _fail "receive's error does not start its line: $(cat -v "$T/err2")"
grep -qa $'\e' "$T/err2" && _fail "terminal codes with no progress line: $(cat -v "$T/err2")"

# a receive that drew its line and failed: the error on a line of its own
"$ENCIO" -q send -f "$T/s1.stream" "$SRC/s1" || _fail "send -f failed"
on_tty "$T/err3" "'$ENCIO' receive --progress -f '$T/s1.stream' '$DST/r'"
cat -v "$T/err3"
tr '\r' '\n' <"$T/err3" | grep -qa '^\(.\[K\)\?ERROR: creating subvolume s1 failed' ||
	_fail "the error runs into the progress line: $(cat -v "$T/err3")"
echo "PASS: $TEST_NAME"
