#!/bin/bash
# encio bench on a small file: every mode runs, reads the same bytes as the
# others (the cross-mode check), --write copies read back identical, the
# fixed-flag verdict and the fixed/plain pair are printed, JSON is valid,
# --hugepages restores vm.nr_hugepages. Not a speed test.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd
SRC=$MNT
for i in 0 1 2 3; do
	compressible 600000
	random_bytes 70000 "bench$i"
done >"$SRC/file"
sync

out=$(timeout 120 "$ENCIO" bench -r 1 -d 8 --write "$SRC/file") || _fail "bench failed: $out"
echo "$out"
echo "$out" | grep -q "cross-mode check: every mode read the same bytes" || _fail "cross-mode check"
echo "$out" | grep -q "scratch copies read back: identical" || _fail "write check"
for row in "ioctl" "uring d1" "uring d8" "uring d8 no-defer" "uring-fixed d8 normal" "uring-fixed d8 huge" "uring d8 1 io-wq worker" "auto d8"; do
	[ "$(echo "$out" | grep -c "^$row  ")" = 2 ] || _fail "row '$row' missing from a table"
done
echo "$out" | grep -E "^(uring|auto|ioctl)" | grep -q -- " - " && _fail "a mode has no time"
echo "$out" | grep -qE "^fixed buffer flag: (honoured|ignored) by this kernel" || _fail "fixed verdict"
echo "$out" | grep -q "^fixed vs plain (d8, normal pages):" || _fail "fixed/plain pair"
echo "$out" | grep -q "upstream" || _fail "upstream reference"
[ "$(ls -A "$SRC")" = file ] || _fail "scratch file left: $(ls -A "$SRC")"

_log "JSON"
json=$(timeout 120 "$ENCIO" bench -r 1 -d 4 --no-drop --format=json "$SRC/file") || _fail "bench json"
echo "$json" | python3 -m json.tool >/dev/null || _fail "invalid JSON: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["verified"] is True and d["extents"] > 0 and not d["failed"], d
assert len(d["read"]) == 8, d
assert all(r["median_s"] > 0 for r in d["read"]), d
assert d["fixed"] in ("honoured", "ignored"), d
' || _fail "JSON content"

_log "--io=uring: only uring rows beside the ioctl baseline"
out=$(timeout 120 "$ENCIO" --io=uring bench -r 1 "$SRC/file") || _fail "bench --io=uring"
echo "$out"
echo "$out" | grep -q "^uring-fixed" && _fail "uring-fixed row with --io=uring"
echo "$out" | grep -q "^ioctl " || _fail "no ioctl baseline"

_log "--hugepages: hugetlb backing, then restored"
old=$(cat /proc/sys/vm/nr_hugepages)
out=$(timeout 120 "$ENCIO" bench -r 1 -d 8 --hugepages $((old + 4)) "$SRC/file") || _fail "bench --hugepages"
echo "$out"
[ "$(cat /proc/sys/vm/nr_hugepages)" = "$old" ] || _fail "nr_hugepages not restored"
echo "$out" | grep "^uring-fixed d8 huge" | grep -qE "hugetlb 2MiB pages|hugetlb unavailable" ||
	_fail "huge row backing not reported"
_log "a FIFO is refused, not waited on"
mkfifo "$TEST_TMP/fifo"
rc=0
out=$(timeout 20 "$ENCIO" bench -r 1 "$TEST_TMP/fifo" 2>&1) || rc=$?
[ "$rc" = 1 ] || _fail "bench of a FIFO: exit $rc, not 1"
echo "$out" | grep -q "cannot open '$TEST_TMP/fifo': not a regular file" || _fail "FIFO: $out"

_log "--write on a read-only file system: one error before any timing"
mount -o remount,ro "$SRC"
rc=0
out=$(timeout 120 "$ENCIO" bench -r 1 -d 4 --write "$SRC/file" 2>&1) || rc=$?
mount -o remount,rw "$SRC"
echo "$out"
[ "$rc" = 1 ] || _fail "bench --write on a read-only file system: exit $rc, not 1"
[ "$(echo "$out" | grep -c "ERROR")" = 1 ] || _fail "not exactly one error"
echo "$out" | grep -q "ERROR: --write needs a scratch file beside '$SRC/file': Read-only file system" ||
	_fail "error does not name the cause"
echo "$out" | grep -q "^mode " && _fail "a table printed after the error"
exit 0
