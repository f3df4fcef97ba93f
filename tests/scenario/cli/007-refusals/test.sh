#!/bin/bash
# What the small commands say where there is nothing sensible to do: encio
# read refuses to write raw encoded bytes to a terminal (as send refuses a
# stream), and encio list of a path that does not exist prints the error
# and no empty totals table.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v script >/dev/null || _not_run "needs script (util-linux)"

make_btrfs src 256M compress-force=zstd
SRC=$MNT
compressible 300000 >"$SRC/file"
sync

_log "read: raw bytes are not written to a terminal"
out=$(script -qec "'$ENCIO' read '$SRC/file'; echo rc=\$?" /dev/null) || true
echo "$out"
echo "$out" | grep -q "rc=1" || _fail "read to a terminal did not exit 1"
echo "$out" | grep -q "ERROR: not writing encoded bytes to a terminal" ||
	_fail "read to a terminal not refused with a message"
"$ENCIO" read -O "$TEST_TMP/ext" "$SRC/file" >/dev/null || _fail "read -O failed"
[ -s "$TEST_TMP/ext" ] || _fail "read -O wrote nothing"
"$ENCIO" read "$SRC/file" 2>/dev/null | cmp -s - "$TEST_TMP/ext" || _fail "read to a pipe differs"

_log "list: a missing path gives its error, no totals"
run_mustfail "list of a missing path" "$ENCIO" list "$SRC/missing"
out=$("$ENCIO" list "$SRC/missing" 2>/dev/null)
[ -z "$out" ] || _fail "list of a missing path printed: $out"
out=$("$ENCIO" list "$SRC/file" "$SRC/missing" 2>/dev/null)
echo "$out" | grep -qi "total" || _fail "list of one good path lost its totals"
exit 0
