#!/bin/bash
# encio send -t refuses, before writing anything, a token that does not
# bind the stream it would send: one resumed with options that shape the
# stream otherwise (-c added), one whose layout is another encio build's
# (the token's layout field changed, its checksum made anew), and one of
# a snapshot deleted and made again under the same name (another UUID).
# The same token resumes as it should where nothing changed.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
mkdir "$SRC/v/d"
for i in $(seq 1 40); do compressible $((i * 20000)) >"$SRC/v/d/f$i"; done
random_bytes 4000000 r >"$SRC/v/rand"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s0"
echo changed >>"$SRC/v/d/f1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)
mkdir "$DST/a" "$DST/b"
for d in a b; do
	"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) | "$ENCIO" -q receive -s "$DST/$d" 2>/dev/null &&
		_fail "a cut stream was received"
done
token=$("$ENCIO" receive --resume-token "$DST/a/s1") || _fail "no token"

# refused NAME ARGS...: send -t ARGS fails, writes no FILE, and says why
refused()
{
	local name=$1
	shift
	rm -f "$T/x"
	run_mustfail "$name" "$ENCIO" send "$@" -f "$T/x"
	[ ! -e "$T/x" ] && [ ! -e "$T/x.encio-partial" ] || _fail "$name: a stream was written"
}

refused "-c added" -t "$token" -c "$SRC/s0" "$SRC/s1"
grep -q "sent with other options" <<<"$ERR_OUT" || _fail "-c added: $ERR_OUT"

# the token's layout as another build of encio would have written it
other=$(PYTHONPATH=$TOP_SRCDIR/tests/random python3 - "$token" <<'PY'
import sys
from difftest import token_of_point, token_point

raw = token_point(sys.argv[1])
assert raw[0] == 3
layout = 1 + 16 + 8 + 16 + 8 + 8 * 5  # version, uuids, ctransids, five u64s
raw[layout] ^= 0x5a
print(token_of_point(raw))
PY
) || _fail "no token made"
[ "$other" != "$token" ] || _fail "the layout was not changed"
refused "another build's layout" -t "$other" "$SRC/s1"
grep -q "sent with other options.*lays streams out otherwise" <<<"$ERR_OUT" || _fail "another layout: $ERR_OUT"

# the unchanged token resumes b
"$ENCIO" -q send -t "$token" "$SRC/s1" | "$ENCIO" -q receive -s "$DST/b" || _fail "the resume failed"
diff -r "$SRC/s1" "$DST/b/s1" >/dev/null || _fail "the resumed receive differs"

# s1 deleted and made again: the same name, another snapshot
run_check btrfs -q subvolume delete "$SRC/s1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
refused "a snapshot made again" -t "$token" "$SRC/s1"
grep -q "another subvolume, or one changed since" <<<"$ERR_OUT" || _fail "made again: $ERR_OUT"
refused "a snapshot made again, found by UUID" -t "$token"
grep -q "no mounted subvolume is the snapshot the token names" <<<"$ERR_OUT" || _fail "by UUID: $ERR_OUT"
_log "ok"
