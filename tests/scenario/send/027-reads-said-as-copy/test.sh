#!/bin/bash
# send says of its reads what copy says of its own, in the same words:
# with -v the line "fixed buffers: ..." (whether the kernel honours
# uring-fixed's registered buffers), and after uring-fixed in the summary
# the same; a user who is not root, whose encoded reads are refused, gets
# copy's warning ("encoded reads impossible (...)") instead of a send
# that falls back to plain reads silently. The stream is whole either way.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv

make_btrfs src 1G compress-force=zstd
SRC=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
compressible 2000000 >"$SRC/v/text"
random_bytes 300000 r >"$SRC/v/rand"
chmod 0644 "$SRC/v/text" "$SRC/v/rand"
chmod 0755 "$T" "$SRC" "$SRC/v"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"

# root: the fixed-buffer line as copy's
"$ENCIO" -v send -f "$T/root.stream" "$SRC/s1" 2>"$T/send.err" || _fail "send failed: $(cat "$T/send.err")"
"$ENCIO" -v copy "$SRC/s1/text" "$T/copy.out" >"$T/copy.log" 2>&1 || _fail "copy failed: $(cat "$T/copy.log")"
cat "$T/send.err"
copy_fixed=$(grep '^fixed buffers: ' "$T/copy.log")
[ -n "$copy_fixed" ] || _fail "copy -v says nothing of fixed buffers: $(cat "$T/copy.log")"
grep -qxF "$copy_fixed" "$T/send.err" || _fail "send -v does not say '$copy_fixed' as copy -v does: $(cat "$T/send.err")"
mode=$(sed -n 's/.*; io read \([a-z-]*\).*/\1/p' "$T/send.err")
if [ "$mode" = uring-fixed ]; then
	grep -qF "io read uring-fixed (${copy_fixed})" "$T/send.err" ||
		_fail "send's summary names uring-fixed without what the kernel does with it: $(cat "$T/send.err")"
fi
grep -q '"fixed_buffers": "'"${copy_fixed#fixed buffers: }"'"' <<<"$("$ENCIO" -q send --format=json -f "$T/j" "$SRC/s1")" ||
	_fail "send's JSON fixed_buffers is not '${copy_fixed#fixed buffers: }'"

# a user who is not root: copy's warning, the stream whole
mkdir "$T/user" && chown 4321:4321 "$T/user"
as_user "$ENCIO" send -f "$T/user/user.stream" "$SRC/s1" 2>"$T/user.err" || _fail "send as a user failed: $(cat "$T/user.err")"
as_user "$ENCIO" copy "$SRC/s1/text" "$T/user/copy.out" >/dev/null 2>"$T/ucopy.err" || _fail "copy as a user failed: $(cat "$T/ucopy.err")"
cat "$T/user.err" "$T/ucopy.err"
why=$(sed -n 's/^WARNING: encoded reads impossible (\(.*\)): copying plain data$/\1/p' "$T/ucopy.err")
[ -n "$why" ] || _fail "copy as a user did not warn: $(cat "$T/ucopy.err")"
grep -qx "WARNING: encoded reads impossible ($why): sending plain data" "$T/user.err" ||
	_fail "send as a user does not warn as copy does: $(cat "$T/user.err")"
make_btrfs dst 1G
run_check "$ENCIO" -q receive -f "$T/user/user.stream" "$MNT"
diff -r "$SRC/s1" "$MNT/s1" || _fail "the user's stream is not the subvolume"
echo "PASS: $TEST_NAME"
