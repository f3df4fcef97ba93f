#!/bin/bash
# encio receive of an encio send --subvolumes stream made hostile: a
# subvolume's path out of DEST ("../x", "a/../../x", absolute), through a
# symlink the stream's own tree made, with flags it does not know, named
# in DEST by a state for a writable one, named to delete with its stream
# after it, a stream cut within a subvolume's, going on past a
# subvolume's END, or without its END.
# Each is refused (exit 1) and nothing is written outside DEST (with
# --format=json, the summary's object still on standard output); the
# stream as sent is received whole, its tree part in the directory a
# killed receive left (root's, 0700), which goes, not in one a user made.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 256M
SRC=$MNT
make_btrfs dst 256M
DST=$MNT
mkdir "$DST/in" "$TEST_TMP/outside"
run_check btrfs -q subvolume create "$SRC/sv"
echo data >"$SRC/sv/file"
run_check btrfs -q subvolume snapshot -r "$SRC/sv" "$SRC/snap"
ln -s "$TEST_TMP/outside" "$SRC/link"
sync
run_check "$ENCIO" -q send --subvolumes -f "$TEST_TMP/stream" "$SRC"

# forge OUT HOW: the stream with its ENCIO_SUBVOL commands changed
forge()
{
	python3 - "$TEST_TMP/stream" "$1" "$2" <<'PY'
import struct, sys

def crc32c(data, crc=0):
    # as btrfs sums a command: no inversion before or after
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1))
    return crc

src, out, how = sys.argv[1:]
s = open(src, "rb").read()
head, pos, cmds = s[:17], 17, []
while pos < len(s):
    ln, typ, _ = struct.unpack_from("<IHI", s, pos)
    cmds.append([typ, s[pos + 10:pos + 10 + ln]])
    pos += 10 + ln

def tlvs(body):
    out, p = [], 0
    while p < len(body):
        t, l = struct.unpack_from("<HH", body, p)
        out.append([t, body[p + 4:p + 4 + l]])
        p += 4 + l
    return out

def pack(attrs):
    return b"".join(struct.pack("<HH", t, len(v)) + v for t, v in attrs)

PATH, FLAGS = 15, 5  # BTRFS_SEND_A_PATH, BTRFS_SEND_A_MODE
subvols = [c for c in cmds if c[0] == 65]
if how == "cut":
    # the last subvolume's stream cut in its middle, the rest kept
    i = max(i for i, c in enumerate(cmds) if c[0] == 66)
    cmds[i][1] = cmds[i][1][:len(cmds[i][1]) // 2]
elif how == "past-end":
    # bytes after sv's END, in a DATA command of its own
    i = [n for n, c in enumerate(cmds) if c[0] == 65 and dict(tlvs(c[1]))[PATH] == b"sv"][0]
    while i + 1 < len(cmds) and cmds[i + 1][0] == 66:
        i += 1
    cmds.insert(i + 1, [66, struct.pack("<H", 19) + b"x" * 100])
elif how == "no-end":
    assert cmds[-1][0] == 21  # BTRFS_SEND_C_END
    cmds = cmds[:-1]
else:
    for c in subvols:
        a = tlvs(c[1])
        path = dict(a)[PATH]
        for kv in a:
            if how.startswith("path=") and kv[0] == PATH and path == b"sv":
                kv[1] = how[5:].encode()
            if how == "flags" and kv[0] == FLAGS and path == b"sv":
                kv[1] = struct.pack("<Q", struct.unpack("<Q", kv[1])[0] | (1 << 20))
            if how == "in-dest" and kv[0] == FLAGS and path == b"sv":
                kv[1] = struct.pack("<Q", struct.unpack("<Q", kv[1])[0] | (1 << 3))
            if how == "extra" and kv[0] == FLAGS and path == b"sv":
                kv[1] = struct.pack("<Q", 1 << 4)
        c[1] = pack(a)
with open(out, "wb") as f:
    f.write(head)
    for typ, body in cmds:
        hdr = struct.pack("<IHI", len(body), typ, 0)
        f.write(struct.pack("<IHI", len(body), typ, crc32c(body, crc32c(hdr))) + body)
PY
}

forge "$TEST_TMP/same" path=sv || _fail "cannot forge"
cmp -s "$TEST_TMP/stream" "$TEST_TMP/same" || _fail "the forger does not write the stream back as it was"

# each forgery and what its refusal says
n=0
while read -r how why; do
	n=$((n + 1))
	_log "forged: $how"
	forge "$TEST_TMP/forged$n" "$how" || _fail "cannot forge $how"
	run_mustfail "receive of a stream forged ($how)" \
		"$ENCIO" -q receive -f "$TEST_TMP/forged$n" "$DST/in/c$n"
	grep -q -- "$why" <<<"$ERR_OUT" || _fail "$how: refused for another reason: $ERR_OUT"
	[ -z "$(ls -A "$TEST_TMP/outside")" ] || _fail "$how: written outside: $(ls -A "$TEST_TMP/outside")"
	[ ! -e "$DST/escape" ] && [ ! -e "$DST/in/escape" ] && [ ! -e /escape ] ||
		_fail "$how: a subvolume made outside DEST"
done <<'CASES'
path=../escape not a path below DEST
path=sv2/../../escape not a path below DEST
path=/escape not a path below DEST
path=link/escape cannot open the directory of
flags out of place
in-dest out of place
extra out of place
cut stream truncated
past-end 'sv' at offset
no-end ends before its END
CASES

_log "a forged stream refused with --format=json: the object of what was done still"
"$ENCIO" -q receive -f "$TEST_TMP/forged1" --format=json "$DST/in/json" \
	>"$TEST_TMP/refused.json" 2>"$TEST_TMP/refused.err" &&
	_fail "a forged stream received with --format=json"
grep -q "not a path below DEST" "$TEST_TMP/refused.err" ||
	_fail "refused for another reason: $(cat "$TEST_TMP/refused.err")"
python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); assert o["received"] == 0, o' \
	"$TEST_TMP/refused.json" || _fail "no JSON object after the refusal: $(cat "$TEST_TMP/refused.json")"

_log "the stream as sent, beside a killed receive's directory and a user's"
mkdir -m 0700 "$DST/in/.encio-subvols.killed"
run_check btrfs -q subvolume create "$DST/in/.encio-subvols.killed/tree"
mkdir "$DST/in/.encio-subvols.planted"
echo mine >"$DST/in/.encio-subvols.planted/file"
chown -R 4242:4242 "$DST/in/.encio-subvols.planted"
chmod 0700 "$DST/in/.encio-subvols.planted"
run_check "$ENCIO" -q receive -f "$TEST_TMP/stream" "$DST/in/whole"
[ ! -e "$DST/in/.encio-subvols.killed" ] || _fail "the killed receive's directory stays"
[ "$(cat "$DST/in/.encio-subvols.planted/file")" = mine ] || _fail "the user's directory was touched"
[ "$(ls -A "$DST/in" | grep -c encio)" -eq 1 ] || _fail "left behind: $(ls -A "$DST/in")"
diff -r --no-dereference "$SRC/sv" "$DST/in/whole/sv" || _fail "content differs"
[ "$(readlink "$DST/in/whole/link")" = "$TEST_TMP/outside" ] || _fail "the symlink differs"
echo "PASS: $TEST_NAME"
