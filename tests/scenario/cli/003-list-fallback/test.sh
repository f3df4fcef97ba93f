#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# encio list: errors go on with the other paths and exit 1; -r walks
# directories without following symlinks; JSON stays valid for any path;
# without CAP_SYS_ADMIN (FIEMAP) and on tmpfs (SEEK_DATA) it says so.

. "$(dirname "$0")/../../../common.sh"

require_root
command -v python3 >/dev/null || _not_run "needs python3"
command -v setpriv >/dev/null || _not_run "needs setpriv (util-linux)"

json_ok()
{
	python3 -m json.tool >/dev/null || _fail "invalid JSON: $*"
}

make_btrfs img 256M compress-force=zstd
d=$MNT/d
mkdir -p "$d/sub/deeper" "$d/other"
compressible $((512 * 1024)) >"$d/a"
compressible $((256 * 1024)) >"$d/sub/b"
random_bytes 8192 c >"$d/sub/deeper/c"
compressible 300 >"$d/other/tiny"
ln -s ../a "$d/sub/link-to-a"
ln -s /etc "$d/sub/link-to-etc"
mkfifo "$d/sub/fifo"
weird=$d/$'we"ird\\ name\n\twith\001ctl \xff\xfe bytes'
compressible 4096 >"$weird"
sync

_log "a directory needs -r"
run_mustfail "directory without -r" "$ENCIO" list "$d"
echo "$ERR_OUT" | grep -q "'$d' is a directory (use -r)" ||
	_fail "no 'use -r' message"

_log "errors name the path and the command goes on"
out=$("$ENCIO" list "$d/a" "$d/missing" "$d/sub/b" 2>"$TEST_TMP/err")
rc=$?
cat "$TEST_TMP/err"
[ $rc -eq 1 ] || _fail "expected exit 1 with a missing path, got $rc"
grep -q "$d/missing.*No such file or directory" "$TEST_TMP/err" ||
	_fail "error does not name the missing path and cause"
echo "$out" | grep -q "^$d/a: " || _fail "a not listed"
echo "$out" | grep -q "^$d/sub/b: " || _fail "b not listed after the error"
run_mustfail "fifo" "$ENCIO" list "$d/sub/fifo"
echo "$ERR_OUT" | grep -q "not a regular file" || _fail "fifo not refused"

_log "usage errors exit 2, --help exits 0"
"$ENCIO" list >/dev/null 2>&1; [ $? -eq 2 ] || _fail "no PATH: expected 2"
"$ENCIO" list --format=xml "$d/a" >/dev/null 2>&1
[ $? -eq 2 ] || _fail "bad format: expected 2"
"$ENCIO" list --bogus "$d/a" >/dev/null 2>&1
[ $? -eq 2 ] || _fail "bad option: expected 2"
"$ENCIO" list --help >"$TEST_TMP/help" || _fail "--help failed"
grep -q -- "--format" "$TEST_TMP/help" || _fail "--help lacks options"
"$ENCIO" list "$d/a" -r >/dev/null || _fail "option after a path refused"

_log "-r lists regular files only, symlinks not followed"
"$ENCIO" list -r --format=json "$d" >"$TEST_TMP/r.json" || _fail "list -r"
json_ok "-r" <"$TEST_TMP/r.json"
python3 - "$TEST_TMP/r.json" "$d" "$weird" <<'PY' || _fail "-r listed the wrong files"
import json, os, sys
out = json.load(open(sys.argv[1], encoding="utf-8", errors="strict"))
d = sys.argv[2]
paths = [f["path"] for f in out["files"]]
want = sorted([d + "/a", d + "/sub/b", d + "/sub/deeper/c", d + "/other/tiny"])
got = sorted(p for p in paths if "ird" not in p)
print(paths)
assert got == want, (got, want)
assert len(paths) == 5, paths
assert out["totals"]["files"] == 5
weird = [p for p in paths if "ird" in p][0]
# bytes that are not UTF-8 come back as U+0080..U+00FF
assert weird.startswith(d + '/we"ird\\ name\n\twith\x01ctl '), repr(weird)
assert weird.endswith("\xff\xfe bytes"), repr(weird)
PY

_log "the same in text: totals equal JSON's"
"$ENCIO" list -r "$d" >"$TEST_TMP/r.txt" || _fail "list -r (text)"
grep -q '^Processed 5 files' "$TEST_TMP/r.txt" || _fail "text: not 5 files"
grep -q '^zstd ' "$TEST_TMP/r.txt" || _fail "text: no zstd row"

_log "without CAP_SYS_ADMIN: FIEMAP, compression unknown, warned once"
chmod a+x "$TEST_TMP" && chmod -R a+rX "$MNT" || _fail "chmod"
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	"$ENCIO" list --format=json "$d/a" "$d/sub/b" \
	>"$TEST_TMP/user.json" 2>"$TEST_TMP/user.err" ||
	_fail "list as nobody failed: $(cat "$TEST_TMP/user.err")"
cat "$TEST_TMP/user.err"
json_ok "as nobody" <"$TEST_TMP/user.json"
[ "$(grep -c 'not the btrfs tree search' "$TEST_TMP/user.err")" = 1 ] ||
	_fail "the fallback was not reported exactly once"
python3 - "$TEST_TMP/user.json" <<'PY' || _fail "FIEMAP map wrong"
import json, sys
out = json.load(open(sys.argv[1]))
for f in out["files"]:
    assert f["source"] == "fiemap", f["source"]
    ext = [e for e in f["extents"] if e["kind"] != "hole"]
    assert ext and all(e["compression"] == "unknown" for e in ext), ext
    assert sum(e["length"] for e in f["extents"]) >= f["size"]
assert out["totals"]["types"]["unknown"]["referenced"] >= 768 * 1024
PY

_log "tmpfs: SEEK_DATA/SEEK_HOLE, holes found"
make_tmpfs shm 64M
truncate -s 1M "$MNT/sparse"
compressible 8192 | dd of="$MNT/sparse" bs=4K seek=64 conv=notrunc status=none
"$ENCIO" list --format=json "$MNT/sparse" >"$TEST_TMP/shm.json" ||
	_fail "list on tmpfs"
python3 - "$TEST_TMP/shm.json" <<'PY' || _fail "tmpfs map wrong"
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
assert f["source"] == "seek", f["source"]
k = [(e["kind"], e["offset"], e["length"]) for e in f["extents"]]
assert k == [("hole", 0, 262144), ("regular", 262144, 8192),
             ("hole", 270336, 1048576 - 270336)], k
PY

_log "fallbacks and errors behave"
exit 0
