#!/bin/bash
# A receive killed outright (SIGKILL) leaves what it received in its
# private directory (.encio-receive.XXXXXX/NAME), or that directory empty
# when killed as it ended, marked or not yet: the next receive into DEST,
# of another NAME,
# deletes them, while a partial of receive -s kept
# for a resume stays and is resumed. Found by the random tester (a plain
# receive killed after its subvolume got its name left the directory).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v setfattr >/dev/null || _not_run "needs setfattr (attr)"

make_btrfs img 512M
run_check btrfs -q subvolume create "$MNT/v"
random_bytes 3000000 a >"$MNT/v/a"
run_check btrfs -q subvolume snapshot -r "$MNT/v" "$MNT/s1"
random_bytes 3000000 b >"$MNT/v/b"
run_check btrfs -q subvolume snapshot -r "$MNT/v" "$MNT/s2"
run_check btrfs -q subvolume snapshot -r "$MNT/v" "$MNT/s3"
mkdir "$MNT/d"
"$ENCIO" -q send "$MNT/s1" >"$TEST_TMP/s1.stream" || _fail "send s1"
"$ENCIO" -q send "$MNT/s2" >"$TEST_TMP/s2.stream" || _fail "send s2"
"$ENCIO" -q send "$MNT/s3" >"$TEST_TMP/s3.stream" || _fail "send s3"

# s1: killed with half of its stream received, the rest still to come
mkfifo "$TEST_TMP/fifo"
"$ENCIO" -q receive "$MNT/d" <"$TEST_TMP/fifo" &
pid=$!
exec 7>"$TEST_TMP/fifo"
head -c 1500000 "$TEST_TMP/s1.stream" >&7
for i in $(seq 50); do
	ls -d "$MNT"/d/.encio-receive.*/s1/new >/dev/null 2>&1 && break
	sleep 0.1
done
sleep 0.5
kill -KILL "$pid"
wait "$pid" 2>/dev/null
exec 7>&-
ls -d "$MNT"/d/.encio-receive.*/s1 >/dev/null 2>&1 ||
	_fail "the killed receive left no private directory to test with"

# s2: a receive -s cut short keeps its partial for the resume
head -c 1500000 "$TEST_TMP/s2.stream" | "$ENCIO" -q receive -s "$MNT/d" 2>/dev/null &&
	_fail "a cut receive -s succeeded"

# what a receive killed as it ended leaves: its private directory, empty
mkdir -m 0700 "$MNT/d/.encio-receive.Zz0000"
setfattr -n trusted.encio.state -v 1 "$MNT/d/.encio-receive.Zz0000"

# one killed before it marked it; and root's, not empty, left alone
mkdir -m 0700 "$MNT/d/.encio-receive.Zz0001" "$MNT/d/.encio-receive.Zz0002"
touch "$MNT/d/.encio-receive.Zz0002/kept"

run_check "$ENCIO" -q receive -f "$TEST_TMP/s3.stream" "$MNT/d"
[ -e "$MNT/d/.encio-receive.Zz0000" ] && _fail "the empty private directory stayed"
[ -e "$MNT/d/.encio-receive.Zz0001" ] && _fail "the unmarked empty one stayed"
[ -e "$MNT/d/.encio-receive.Zz0002/kept" ] || _fail "a directory with a file went"
rm -r "$MNT/d/.encio-receive.Zz0002"
left=$(cd "$MNT/d" && ls -d .encio-receive.*/* 2>/dev/null | sort | tr '\n' ' ')
case "$left" in
*/s1*) _fail "the killed receive's partial stayed: $left" ;;
esac
case "$left" in
*/s2*) ;;
*) _fail "receive -s's partial was deleted: $left" ;;
esac

tok=$("$ENCIO" receive --resume-token "$MNT/d/s2") || _fail "no resume token"
"$ENCIO" -q send -t "$tok" "$MNT/s2" | run_check "$ENCIO" -q receive -s "$MNT/d"
cmp "$MNT/s2/b" "$MNT/d/s2/b" || _fail "resumed s2 differs"
[ -z "$(ls -d "$MNT"/d/.encio-receive.* 2>/dev/null)" ] ||
	_fail "left: $(ls -a "$MNT"/d/.encio-receive.*)"
