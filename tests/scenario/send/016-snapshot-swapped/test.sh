#!/bin/bash
# send --snapshot holds its temporary snapshot by descriptor: the user
# who owns the directory it is made in, who swaps it for a symlink to
# root's subvolume as soon as it appears, gets their own data in the
# stream or a refusal naming the snapshot, never root's data.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 512M
SRC=$MNT
chmod 0755 "$TEST_TMP" "$SRC"
run_check btrfs -q subvolume create "$SRC/secret"
echo "root's secret" >"$SRC/secret/s"
run_check btrfs property set -ts "$SRC/secret" ro true
mkdir "$SRC/u"
chown 4321:4321 "$SRC/u"
run_check btrfs -q subvolume create "$SRC/u/data"
random_bytes 20000000 mine >"$SRC/u/data/m"
chown -R 4321:4321 "$SRC/u/data"

# Every ioctl of the send held up half a second on its way back (strace),
# so that the user has the time to swap the snapshot just made.
command -v strace >/dev/null || _not_run "needs strace"
strace -f -qq -o /dev/null -e trace=ioctl -e inject=ioctl:delay_exit=500000 \
	"$ENCIO" send -q --snapshot "$SRC/u/data" >"$TEST_TMP/stream" 2>"$TEST_TMP/err" &
pid=$!
for _ in $(seq 600); do
	tmp=$(ls -d "$SRC"/u/.data.encio-send-* 2>/dev/null)
	[ -n "$tmp" ] && break
	sleep 0.05
done
[ -n "$tmp" ] || _not_run "the snapshot never appeared"
as_user mv -T "$tmp" "$SRC/u/moved"
as_user ln -s ../secret "$tmp"
wait $pid
rc=$?
cat "$TEST_TMP/err"
rm -f "$tmp"
[ -d "$SRC/u/moved" ] && run_check btrfs -q subvolume delete "$SRC/u/moved"
if [ $rc = 0 ]; then
	! grep -aq "root's secret" "$TEST_TMP/stream" ||
		_fail "root's subvolume sent in the user's place"
	"$ENCIO" dump -f "$TEST_TMP/stream" | grep -q "/m " ||
		_fail "the stream lacks the user's file"
else
	! grep -aqs "root's secret" "$TEST_TMP/stream" ||
		_fail "root's subvolume sent in the user's place"
	grep -q "encio-send" "$TEST_TMP/err" || _fail "the send failed without naming its snapshot"
fi
